//! B+tree nodes: the on-page format and the pure operations on it.
//!
//! Every function here works on one page buffer (4 KB to 32 KB) and nothing
//! else: no latches, no WAL, and the page LSN and checksum are never touched
//! (the caller sets them). Being pure and deterministic is what lets redo
//! replay a logged change on a page from that page alone and reach the same
//! bytes.
//!
//! Rules:
//! - A page read from disk goes through [`check_node`](super::node_check::check_node) once; it returns an
//!   error (never panics) on any inconsistency. The accessors and the changes
//!   assume a page that passed it (or that this module built), so they use
//!   `debug_assert!` and bounds-checked reads where cheap instead of
//!   re-validating.
//! - A node covers the keys in `[low, high)`; `high` absent is +infinity and
//!   the empty key is the smallest key, so the leftmost node's low fence is
//!   the empty key (-infinity).
//! - In an inner node cell `i`'s child covers `[key_i, key_{i+1})` and `key_0`
//!   equals the node's low fence, so every key the node covers has a child.
//! - Key and value sizes are capped ([`max_key_len`], [`max_value_len`]) so
//!   that any node holds at least 4 maximal cells with maximal fences; this
//!   makes a middle split always leave room for the change that caused it.
//! - Freed bytes are zeroed, so deleted values do not linger in the page and
//!   the free hole stays zero.
//!
//! # Layout (all integers little-endian)
//!
//! | Offset                 | Size     | Field                                          |
//! |------------------------|----------|------------------------------------------------|
//! | 0                      | 32       | page header (`page.rs`); kind = Leaf (2) or Inner (3) |
//! | 32                     | 2 * n    | slot array: u16 cell offset per entry, in key order; ends at `lower` |
//! | `lower`                | ..       | free hole (zero), up to `upper`                |
//! | `upper`                | ..       | cells, packed downwards; gaps between them are counted in `frag` |
//! | `special` + 0          | 2        | level: 0 for a leaf, >= 1 for an inner node (children are at level - 1) |
//! | `special` + 2          | 2        | frag: bytes in `[upper, special)` not in a live cell |
//! | `special` + 4          | 2        | low_len                                        |
//! | `special` + 6          | low_len  | low fence key (inclusive)                      |
//! | `special` + 6 + low_len| 2        | high_len; 0xFFFF = no high fence (+infinity)   |
//! | ..                     | high_len | high fence key (exclusive); ends at page end   |
//!
//! Leaf cell: u16 key_len, u16 val_len, key, value.
//! Inner cell: u16 key_len, u32 child block, key.
//!
//! The special area always ends exactly at the end of the page, so its size
//! is `8 + low_len + high_len` (high_len counted as 0 when absent).

use super::key_order::{compare, less};
use crate::page::{
    init_page, lower_upper, set_lower_upper, PageKind, OFF_BLOCK, OFF_FILE_ID, OFF_KIND,
    OFF_SPECIAL, PAGE_HEADER_SIZE,
};
use std::cmp::Ordering;

// Offsets inside the special area.
pub(super) const SP_LEVEL: usize = 0;
pub(super) const SP_FRAG: usize = 2;
pub(super) const SP_LOW_LEN: usize = 4;
pub(super) const SP_LOW: usize = 6;
/// The special area's fixed part: level, frag, low_len, high_len.
const SP_FIXED: usize = 8;
/// Bytes of every node that are neither cells, slots nor fence keys: the
/// page header and the special area's fixed fields.
pub const NODE_FIXED_BYTES: usize = PAGE_HEADER_SIZE + SP_FIXED;
const NO_HIGH: u16 = 0xFFFF;
pub(super) const SLOT: usize = 2;
pub(super) const LEAF_HDR: usize = 4;
pub(super) const INNER_HDR: usize = 6;

/// A change does not fit in the node even after compaction: split it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoRoom;

impl std::fmt::Display for NoRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no room in the node")
    }
}

/// The longest key (and so fence) a node of `page_size` accepts.
pub fn max_key_len(page_size: usize) -> usize {
    page_size / 16
}

/// The longest leaf value: 4 leaf cells with maximal keys and values fit
/// beside two maximal fences. (It also keeps `max_key_len <= value + 6`,
/// which is what the middle-split guarantee needs; see [`split`].)
pub fn max_value_len(page_size: usize) -> usize {
    let k = max_key_len(page_size);
    (page_size - PAGE_HEADER_SIZE - SP_FIXED - 2 * k) / 4 - (SLOT + LEAF_HDR) - k
}

/// Page bytes one leaf entry takes, its slot included.
pub fn leaf_cell_size(key_len: usize, val_len: usize) -> usize {
    SLOT + LEAF_HDR + key_len + val_len
}

/// Page bytes one inner entry takes, its slot included.
pub fn inner_cell_size(key_len: usize) -> usize {
    SLOT + INNER_HDR + key_len
}

// ---- raw access --------------------------------------------------------

// Reads are bounds-checked (out of range reads as 0 or an empty slice) so
// that even a page that skipped check_node cannot make a read panic.
fn rd16(b: &[u8], off: usize) -> u16 {
    debug_assert!(off + 2 <= b.len(), "u16 read past the page at {off}");
    b.get(off..off + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}
fn rd32(b: &[u8], off: usize) -> u32 {
    debug_assert!(off + 4 <= b.len(), "u32 read past the page at {off}");
    b.get(off..off + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}
fn bytes(b: &[u8], start: usize, end: usize) -> &[u8] {
    debug_assert!(
        start <= end && end <= b.len(),
        "range {start}..{end} past the page"
    );
    b.get(start..end).unwrap_or(&[])
}
fn wr16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
fn wr32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn lower(b: &[u8]) -> usize {
    lower_upper(b).0 as usize
}
fn upper(b: &[u8]) -> usize {
    lower_upper(b).1 as usize
}
fn set_lu(b: &mut [u8], lower: usize, upper: usize) {
    set_lower_upper(b, lower as u16, upper as u16);
}
fn special(b: &[u8]) -> usize {
    rd16(b, OFF_SPECIAL) as usize
}
fn frag(b: &[u8]) -> usize {
    rd16(b, special(b) + SP_FRAG) as usize
}
fn set_frag(b: &mut [u8], v: usize) {
    let sp = special(b);
    wr16(b, sp + SP_FRAG, v as u16);
}
fn slot(b: &[u8], i: usize) -> usize {
    rd16(b, PAGE_HEADER_SIZE + SLOT * i) as usize
}
fn kind(b: &[u8]) -> PageKind {
    if is_leaf(b) {
        PageKind::Leaf
    } else {
        PageKind::Inner
    }
}
fn hdr_len(b: &[u8]) -> usize {
    if is_leaf(b) {
        LEAF_HDR
    } else {
        INNER_HDR
    }
}
/// Length of the cell at `off` (without its slot).
fn cell_len(b: &[u8], off: usize) -> usize {
    let k = rd16(b, off) as usize;
    if is_leaf(b) {
        LEAF_HDR + k + rd16(b, off + 2) as usize
    } else {
        INNER_HDR + k
    }
}
pub(super) fn cell_at(b: &[u8], i: usize) -> &[u8] {
    let off = slot(b, i);
    bytes(b, off, off + cell_len(b, off))
}
/// Page bytes entry `i` takes, its slot included.
pub(super) fn entry_size(b: &[u8], i: usize) -> usize {
    SLOT + cell_len(b, slot(b, i))
}
/// The node's own block number, from the page header.
pub(super) fn block(b: &[u8]) -> u32 {
    rd32(b, OFF_BLOCK)
}

// ---- accessors ---------------------------------------------------------

/// True for a leaf, false for an inner node.
pub fn is_leaf(b: &[u8]) -> bool {
    rd16(b, OFF_KIND) == PageKind::Leaf as u16
}

/// 0 for a leaf; an inner node's children are at `level - 1`.
pub fn level(b: &[u8]) -> u16 {
    rd16(b, special(b) + SP_LEVEL)
}

/// Number of entries.
pub fn count(b: &[u8]) -> usize {
    lower(b).saturating_sub(PAGE_HEADER_SIZE) / SLOT
}

/// Key of entry `i` (`i < count`).
pub fn key_at(b: &[u8], i: usize) -> &[u8] {
    debug_assert!(i < count(b));
    let off = slot(b, i);
    let start = off + hdr_len(b);
    bytes(b, start, start + rd16(b, off) as usize)
}

/// Value of leaf entry `i`.
pub fn value_at(b: &[u8], i: usize) -> &[u8] {
    debug_assert!(is_leaf(b) && i < count(b));
    let off = slot(b, i);
    let start = off + LEAF_HDR + rd16(b, off) as usize;
    bytes(b, start, start + rd16(b, off + 2) as usize)
}

/// Child block of inner entry `i`.
pub fn child_at(b: &[u8], i: usize) -> u32 {
    debug_assert!(!is_leaf(b) && i < count(b));
    rd32(b, slot(b, i) + 2)
}

/// The inclusive low fence (empty = -infinity).
pub fn low_fence(b: &[u8]) -> &[u8] {
    let sp = special(b);
    let start = sp + SP_LOW;
    bytes(b, start, start + rd16(b, sp + SP_LOW_LEN) as usize)
}

/// The exclusive high fence; `None` = +infinity.
pub fn high_fence(b: &[u8]) -> Option<&[u8]> {
    let sp = special(b);
    let at = sp + SP_LOW + rd16(b, sp + SP_LOW_LEN) as usize;
    match rd16(b, at) {
        NO_HIGH => None,
        n => Some(bytes(b, at + 2, at + 2 + n as usize)),
    }
}

/// True if `key` lies in `[low, high)`.
pub fn covers(b: &[u8], key: &[u8]) -> bool {
    !less(key, low_fence(b)) && high_fence(b).is_none_or(|h| less(key, h))
}

/// Binary search over the keys, like `slice::binary_search`.
pub fn search(b: &[u8], key: &[u8]) -> Result<usize, usize> {
    let (mut lo, mut hi) = (0, count(b));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match compare(key_at(b, mid), key) {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return Ok(mid),
        }
    }
    Err(lo)
}

/// Free bytes between the slot array and the cells.
pub fn contiguous_free(b: &[u8]) -> usize {
    upper(b) - lower(b)
}

/// All free bytes, fragmentation included: what [`compact`] would leave.
pub fn free_space(b: &[u8]) -> usize {
    contiguous_free(b) + frag(b)
}

// ---- building ----------------------------------------------------------

fn init_node(
    buf: &mut [u8],
    kind: PageKind,
    file_id: u32,
    block: u32,
    level: u16,
    low: &[u8],
    high: Option<&[u8]>,
) {
    let max = max_key_len(buf.len());
    let high_len = high.map_or(0, |h| h.len());
    assert!(low.len() <= max && high_len <= max, "fence too long");
    assert!(high.is_none_or(|h| low < h), "empty key range");
    let size = SP_FIXED + low.len() + high_len;
    init_page(buf, kind, file_id, block, size);
    let sp = buf.len() - size;
    wr16(buf, sp + SP_LEVEL, level);
    wr16(buf, sp + SP_FRAG, 0);
    wr16(buf, sp + SP_LOW_LEN, low.len() as u16);
    buf[sp + SP_LOW..sp + SP_LOW + low.len()].copy_from_slice(low);
    let at = sp + SP_LOW + low.len();
    match high {
        None => wr16(buf, at, NO_HIGH),
        Some(h) => {
            wr16(buf, at, h.len() as u16);
            buf[at + 2..at + 2 + h.len()].copy_from_slice(h);
        }
    }
}

/// Formats `dst` as an empty node of `src`'s kind, level and file.
pub(super) fn init_like(dst: &mut [u8], src: &[u8], block: u32, low: &[u8], high: Option<&[u8]>) {
    let file_id = rd32(src, OFF_FILE_ID);
    init_node(dst, kind(src), file_id, block, level(src), low, high);
}

/// Formats an empty leaf covering `[low, high)`.
pub fn init_leaf(buf: &mut [u8], file_id: u32, block: u32, low: &[u8], high: Option<&[u8]>) {
    init_node(buf, PageKind::Leaf, file_id, block, 0, low, high);
}

/// Formats an empty inner node at `level` (>= 1). It must get its first
/// entry, with key == `low`, before it is valid (see [`make_root_inner`]).
pub fn init_inner(
    buf: &mut [u8],
    file_id: u32,
    block: u32,
    low: &[u8],
    high: Option<&[u8]>,
    level: u16,
) {
    assert!(level >= 1, "inner node at level 0");
    init_node(buf, PageKind::Inner, file_id, block, level, low, high);
}

/// Formats a new root above a split root: children `left_child` for
/// `[-inf, sep)` and `right_child` for `[sep, +inf)`.
pub fn make_root_inner(
    buf: &mut [u8],
    file_id: u32,
    block: u32,
    level: u16,
    left_child: u32,
    sep: &[u8],
    right_child: u32,
) {
    assert!(!sep.is_empty(), "root separator is the empty key");
    init_inner(buf, file_id, block, &[], None, level);
    inner_insert(buf, &[], left_child).expect("empty root has room");
    inner_insert(buf, sep, right_child).expect("empty root has room");
}

/// Appends a raw cell after every other (callers keep key order), assuming
/// contiguous room.
pub(super) fn append_cell(b: &mut [u8], cell: &[u8]) {
    let (lo, up) = (lower(b), upper(b));
    assert!(up - lo >= cell.len() + SLOT, "append without room");
    let off = up - cell.len();
    b[off..up].copy_from_slice(cell);
    wr16(b, lo, off as u16);
    set_lu(b, lo + SLOT, off);
}

/// Rewrites the cells contiguously at the end of the free space, turning all
/// fragmentation into contiguous free space. Keeps slot order.
pub fn compact(b: &mut [u8]) {
    let n = count(b);
    let old = b.to_vec();
    let sp = special(b);
    b[PAGE_HEADER_SIZE..sp].fill(0);
    set_lu(b, PAGE_HEADER_SIZE, sp);
    set_frag(b, 0);
    for i in 0..n {
        append_cell(b, cell_at(&old, i));
    }
}

/// Makes room for a cell of `len` bytes with its slot at `pos`, compacting
/// if only the total free space suffices; returns the cell's offset.
fn alloc(b: &mut [u8], pos: usize, len: usize) -> Result<usize, NoRoom> {
    if free_space(b) < len + SLOT {
        return Err(NoRoom);
    }
    if contiguous_free(b) < len + SLOT {
        compact(b);
    }
    let (lo, up) = (lower(b), upper(b) - len);
    let s = PAGE_HEADER_SIZE + SLOT * pos;
    debug_assert!(s <= lo);
    b.copy_within(s..lo, s + SLOT);
    wr16(b, s, up as u16);
    set_lu(b, lo + SLOT, up);
    Ok(up)
}

/// Frees a cell's bytes: the free hole grows if it borders it, otherwise the
/// bytes count as fragmentation until the next compaction.
fn free_cell(b: &mut [u8], off: usize, len: usize) {
    b[off..off + len].fill(0);
    let (lo, up) = (lower(b), upper(b));
    if off == up {
        set_lu(b, lo, up + len);
    } else {
        let f = frag(b);
        set_frag(b, f + len);
    }
}

fn remove_slot(b: &mut [u8], i: usize) {
    let (lo, up) = (lower(b), upper(b));
    let s = PAGE_HEADER_SIZE + SLOT * i;
    b.copy_within(s + SLOT..lo, s);
    b[lo - SLOT..lo].fill(0);
    set_lu(b, lo - SLOT, up);
}

// ---- leaf changes -------------------------------------------------------

fn check_sizes(b: &[u8], key: &[u8], value_len: usize) {
    // Oversized entries would break the split guarantee and make check_node
    // refuse the page later, so they are refused here loudly; the tree
    // reports Error::TooLarge before getting here.
    assert!(
        key.len() <= max_key_len(b.len()),
        "key of {} bytes",
        key.len()
    );
    assert!(
        value_len <= max_value_len(b.len()),
        "value of {value_len} bytes"
    );
}

fn write_leaf_cell(b: &mut [u8], off: usize, key: &[u8], value: &[u8]) {
    wr16(b, off, key.len() as u16);
    wr16(b, off + 2, value.len() as u16);
    let ks = off + LEAF_HDR;
    b[ks..ks + key.len()].copy_from_slice(key);
    b[ks + key.len()..ks + key.len() + value.len()].copy_from_slice(value);
}

/// Inserts a new entry. The key must be absent (in release builds a present
/// key is updated instead) and covered by the node.
pub fn leaf_insert(b: &mut [u8], key: &[u8], value: &[u8]) -> Result<(), NoRoom> {
    debug_assert!(is_leaf(b) && covers(b, key));
    check_sizes(b, key, value.len());
    match search(b, key) {
        Ok(_) => {
            debug_assert!(false, "leaf_insert of a present key");
            leaf_update(b, key, value)
        }
        Err(pos) => {
            let off = alloc(b, pos, LEAF_HDR + key.len() + value.len())?;
            write_leaf_cell(b, off, key, value);
            Ok(())
        }
    }
}

/// Replaces a present key's value (in release builds an absent key is
/// inserted). A value no longer than the old one is written in place and the
/// tail becomes fragmentation; a longer one gets a new cell.
pub fn leaf_update(b: &mut [u8], key: &[u8], value: &[u8]) -> Result<(), NoRoom> {
    debug_assert!(is_leaf(b));
    check_sizes(b, key, value.len());
    let i = match search(b, key) {
        Ok(i) => i,
        Err(_) => {
            debug_assert!(false, "leaf_update of an absent key");
            return leaf_insert(b, key, value);
        }
    };
    let off = slot(b, i);
    let old_v = rd16(b, off + 2) as usize;
    if value.len() <= old_v {
        let vs = off + LEAF_HDR + key.len();
        b[vs..vs + value.len()].copy_from_slice(value);
        b[vs + value.len()..vs + old_v].fill(0);
        wr16(b, off + 2, value.len() as u16);
        let f = frag(b);
        set_frag(b, f + old_v - value.len());
        return Ok(());
    }
    let old_len = LEAF_HDR + key.len() + old_v;
    if free_space(b) + old_len < LEAF_HDR + key.len() + value.len() {
        return Err(NoRoom);
    }
    // Drop the old cell and slot first so that a compaction in alloc
    // reclaims the old cell's bytes too.
    free_cell(b, off, old_len);
    remove_slot(b, i);
    let off = alloc(b, i, LEAF_HDR + key.len() + value.len()).expect("room was checked");
    write_leaf_cell(b, off, key, value);
    Ok(())
}

/// Removes `key`'s entry; false if it was absent.
pub fn leaf_delete(b: &mut [u8], key: &[u8]) -> bool {
    debug_assert!(is_leaf(b));
    match search(b, key) {
        Ok(i) => {
            let off = slot(b, i);
            let len = cell_len(b, off);
            free_cell(b, off, len);
            remove_slot(b, i);
            true
        }
        Err(_) => false,
    }
}

/// The value stored under `key`.
pub fn leaf_get<'a>(b: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    debug_assert!(is_leaf(b));
    search(b, key).ok().map(|i| value_at(b, i))
}

/// True if inserting `key` (or, with `replacing`, replacing its present
/// value) with a value of `new_value_len` bytes is sure to succeed, after a
/// compaction if needed. Exactly the condition under which `leaf_insert` /
/// `leaf_update` return `NoRoom`.
pub fn room_for_leaf_change(b: &[u8], key: &[u8], new_value_len: usize, replacing: bool) -> bool {
    let new_len = LEAF_HDR + key.len() + new_value_len;
    if replacing {
        if let Ok(i) = search(b, key) {
            return free_space(b) + cell_len(b, slot(b, i)) >= new_len;
        }
    }
    free_space(b) >= new_len + SLOT
}

// ---- inner changes ------------------------------------------------------

/// The entry whose child covers `key` (which the node must cover): the last
/// one with `key_i <= key`.
pub fn inner_find_child(b: &[u8], key: &[u8]) -> (usize, u32) {
    debug_assert!(!is_leaf(b) && count(b) > 0 && covers(b, key));
    let i = match search(b, key) {
        Ok(i) => i,
        Err(i) => i.saturating_sub(1),
    };
    (i, child_at(b, i))
}

/// Adds the entry for a new child covering `[sep, next key)`, typically the
/// right half of a split child. `sep` must be absent (in release builds the
/// present entry's child is replaced) and greater than the low fence, unless
/// the node is empty and `sep` is the low fence.
pub fn inner_insert(b: &mut [u8], sep: &[u8], child: u32) -> Result<(), NoRoom> {
    debug_assert!(!is_leaf(b) && covers(b, sep));
    assert!(
        sep.len() <= max_key_len(b.len()),
        "separator of {} bytes",
        sep.len()
    );
    match search(b, sep) {
        Ok(i) => {
            debug_assert!(false, "inner_insert of a present separator");
            let off = slot(b, i);
            wr32(b, off + 2, child);
            Ok(())
        }
        Err(pos) => {
            debug_assert!(
                pos > 0 || sep == low_fence(b),
                "key_0 must be the low fence"
            );
            let off = alloc(b, pos, INNER_HDR + sep.len())?;
            wr16(b, off, sep.len() as u16);
            wr32(b, off + 2, child);
            b[off + INNER_HDR..off + INNER_HDR + sep.len()].copy_from_slice(sep);
            Ok(())
        }
    }
}

/// Removes entry `index`; its range joins the left neighbour's. Entry 0 can
/// not be removed (key_0 must stay the low fence).
pub fn inner_remove(b: &mut [u8], index: usize) {
    debug_assert!(!is_leaf(b));
    let n = count(b);
    assert!(
        index > 0 && index < n,
        "inner_remove({index}) of {n} entries"
    );
    let off = slot(b, index);
    let len = cell_len(b, off);
    free_cell(b, off, len);
    remove_slot(b, index);
}

#[cfg(test)]
#[path = "node_tests.rs"]
pub(super) mod tests;
