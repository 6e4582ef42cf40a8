//! Splitting a node in two and moving its high fence: the node changes that
//! rebuild a page around new fences rather than edit its cells in place.
//!
//! Like everything in [`node`](super::node), these work on page buffers
//! alone and are deterministic, so redo replays them from the page alone.
//! They are re-exported from `node`, where callers name them.

use super::node::{
    append_cell, block, cell_at, count, entry_size, high_fence, init_like, key_at, low_fence,
    search, NoRoom, NODE_FIXED_BYTES,
};
use crate::page::OFF_LAYOUT_VERSION;

/// Where to split a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitHint {
    /// Halve the bytes: random inserts.
    Middle,
    /// The key being inserted is beyond every key in the node (ascending
    /// keys, e.g. pgbench history): keep the left ~90% full, since nothing
    /// will be inserted there again, and move ~10% right.
    RightEdge,
}

/// Moves the entries from the one at `sep` up into a fresh `right` node
/// (block `right_block`, same kind, level and file) and truncates `left` at
/// it; returns `sep`, the new fence between them, which the parent gets via
/// [`inner_insert`](super::node::inner_insert). Both nodes end up compacted.
///
/// With [`SplitHint::Middle`] the bytes are balanced, so each half holds at
/// most half the cells plus half a cell: given the size limits, the change
/// that did not fit then fits in whichever half covers its key. With
/// [`SplitHint::RightEdge`] the left keeps ~90% and only a key beyond all the
/// old ones is guaranteed to fit (in the right half).
pub fn split(left: &mut [u8], right: &mut [u8], right_block: u32, hint: SplitHint) -> Vec<u8> {
    assert_eq!(left.len(), right.len(), "split across page sizes");
    let n = count(left);
    assert!(n >= 2, "split of a node with {n} entries");
    let m = split_point(left, hint);
    let sep = key_at(left, m).to_vec();
    let high = high_fence(left).map(|h| h.to_vec());
    init_like(right, left, right_block, &sep, high.as_deref());
    for i in m..n {
        append_cell(right, cell_at(left, i));
    }
    truncate_right(left, &sep);
    sep
}

/// Keeps only the entries with keys below `sep` and makes `sep` the high
/// fence: the left half of a split, as redo replays it from the page alone.
/// Keeps the page's LSN, checksum and flags; the result is compacted.
pub fn truncate_right(b: &mut [u8], sep: &[u8]) {
    assert!(
        sep > low_fence(b) && high_fence(b).is_none_or(|h| sep < h),
        "separator outside the node"
    );
    let m = match search(b, sep) {
        Ok(m) | Err(m) => m,
    };
    rebuild_with_high_fence(b, m, Some(sep));
}

/// Replaces the high fence, keeping every entry: a leaf that takes over the
/// key range of an emptied right neighbour. `Err(NoRoom)` (page unchanged)
/// if the longer fence does not fit, or if an entry would fall outside it.
pub fn set_high_fence(b: &mut [u8], high: Option<&[u8]>) -> Result<(), NoRoom> {
    let n = count(b);
    if n > 0 && high.is_some_and(|h| key_at(b, n - 1) >= h) {
        return Err(NoRoom);
    }
    let cells: usize = (0..n).map(|i| entry_size(b, i)).sum();
    if NODE_FIXED_BYTES + low_fence(b).len() + high.map_or(0, |h| h.len()) + cells > b.len() {
        return Err(NoRoom);
    }
    rebuild_with_high_fence(b, n, high);
    Ok(())
}

/// Rebuilds the page with its first `keep` entries, its low fence and
/// `high`, compacted. The header's LSN, checksum and flags stay as they
/// were: like every change here, this leaves them to the caller.
fn rebuild_with_high_fence(b: &mut [u8], keep: usize, high: Option<&[u8]>) {
    let old = b.to_vec();
    init_like(b, &old, block(&old), low_fence(&old), high);
    b[..OFF_LAYOUT_VERSION].copy_from_slice(&old[..OFF_LAYOUT_VERSION]);
    for i in 0..keep {
        append_cell(b, cell_at(&old, i));
    }
}

/// The index of the first entry that moves right, in `1..count`.
fn split_point(b: &[u8], hint: SplitHint) -> usize {
    let n = count(b);
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0usize);
    for i in 0..n {
        let p = prefix[i] + entry_size(b, i);
        prefix.push(p);
    }
    let total = prefix[n];
    let fixed = NODE_FIXED_BYTES;
    let (low, high) = (low_fence(b).len(), high_fence(b).map_or(0, |h| h.len()));
    // Page bytes each half would use if entry m were the first moved.
    let left_size = |m: usize| fixed + low + key_at(b, m).len() + prefix[m];
    let right_size = |m: usize| fixed + key_at(b, m).len() + high + total - prefix[m];
    let m = match hint {
        SplitHint::Middle => (1..n)
            .min_by_key(|&m| left_size(m).max(right_size(m)))
            .expect("n >= 2"),
        SplitHint::RightEdge => {
            let target = total * 9 / 10;
            let mut m = (1..n).find(|&m| prefix[m] >= target).unwrap_or(n - 1);
            while m > 1 && left_size(m) > b.len() {
                m -= 1;
            }
            m
        }
    };
    assert!(
        left_size(m) <= b.len() && right_size(m) <= b.len(),
        "split halves overflow"
    );
    m
}

#[cfg(test)]
#[path = "node_split_tests.rs"]
mod tests;
