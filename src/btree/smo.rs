//! Structure changes: creating a tree, splitting nodes, freeing empty
//! leaves. Each is its own atomic operation, apart from any user
//! transaction, logged as one self-contained record that recovery always
//! replays: the full image of every page it touched, so each page's part
//! replays from that page alone (never "move keys from L to N").
//!
//! Rules:
//! - One structure change at a time per tree (the tree's SMO mutex). Only
//!   structure changes modify inner nodes and the meta page, so under the
//!   mutex they are stable; readers only read them.
//! - Latches are taken top-down: the meta page, then the highest node that
//!   changes, down to the leaf. Frames for new pages are claimed (which may
//!   write a dirty victim) before any latch is taken.
//! - Every page touched is marked dirty before the record is inserted, and
//!   gets the record's end as page LSN and commit LSN.

use super::tree::{is_node, Tree};
use super::{meta, node, node_split};
use crate::buffer::{BufferPool, ClaimedFrame, CriticalSection, PageWrite, Pinned};
use crate::error::{Error, Result};
use crate::file::Issuer;
use crate::lsn::Lsn;
use crate::protect::full_pages::{make_image, needs_image, Change};
use crate::wal::{BlockRef, RecordData, RecordKind, Wal};

/// Logs the images of `pages` as one structure-change record and stamps
/// them with its end LSN. The pages must all be marked dirty.
pub fn log_images(pool: &BufferPool, wal: &Wal, pages: &mut [PageWrite<'_>]) -> Result<Lsn> {
    let blocks = pages
        .iter()
        .map(|p| {
            let lsn = crate::page::page_lsn(p.bytes());
            debug_assert!(needs_image(Change::Structure, lsn));
            BlockRef {
                file_id: p.id().file_id,
                block: p.id().block,
                image: Some(make_image(p.bytes())),
                data: Vec::new(),
            }
        })
        .collect();
    let (_, end) = wal
        .insert(&RecordData {
            kind: RecordKind::StructureChange,
            xid: 0,
            blocks,
            main: Vec::new(),
        })
        .inspect_err(|_| {
            // The pages hold changes without their record: none of them
            // may reach disk.
            pool.poison();
        })?;
    for p in pages.iter_mut() {
        p.set_lsns(end, end);
    }
    Ok(end)
}

/// A block for a new page. A freed block whose old frame is still cached
/// is passed over (its frame may be latched by a commit that has not yet
/// seen it freed; waiting for it here, under latches, could deadlock).
fn allocate(pool: &BufferPool, tree: &Tree<'_>, meta_page: &mut [u8]) -> u32 {
    meta::allocate_where(meta_page, |b| !pool.is_cached(tree.page(b)))
}

/// Creates the tree of a new file: meta page and an empty root leaf.
pub fn create_tree(tree: &Tree<'_>, wal: &Wal, who: Issuer) -> Result<Lsn> {
    let pool = tree.pool;
    let (c1, c2) = (pool.claim_frame(who)?, pool.claim_frame(who)?);
    let mut m = pool
        .install_new(c1, tree.page(meta::META_BLOCK))
        .into_write();
    let mut r = pool.install_new(c2, tree.page(1)).into_write();
    m.mark_dirty();
    r.mark_dirty();
    meta::init_meta(m.bytes_mut(), tree.file_id);
    node::init_leaf(r.bytes_mut(), tree.file_id, 1, &[], None);
    log_images(pool, wal, &mut [m, r])
}

/// A row change waiting to be applied to a leaf: its key and the page
/// bytes it may need.
pub struct Pending<'k> {
    pub key: &'k [u8],
    pub bytes: usize,
}

/// True if `pending` (all covered by `leaf`) fits in it.
pub fn fits(leaf: &[u8], pending: &[Pending<'_>]) -> bool {
    pending.iter().map(|p| p.bytes).sum::<usize>() <= node::free_space(leaf)
}

/// Splits the leaf covering `key` (and as many ancestors as needed) so
/// that `pending`, the changes a commit wants to make to that leaf, get
/// closer to fitting. Returns whether it split: false when they already
/// fit or the leaf no longer covers `key` (another commit changed it).
pub fn split_leaf(
    tree: &Tree<'_>,
    wal: &Wal,
    smo: &parking_lot::Mutex<()>,
    key: &[u8],
    pending: &[Pending<'_>],
    who: Issuer,
) -> Result<bool> {
    let _structure = smo.lock();
    let pool = tree.pool;
    let (_, height) = tree.root(who)?;
    // Claim frames for the new pages before any latch: each level may
    // split, plus a new root.
    let mut claims: Vec<ClaimedFrame<'_>> = Vec::with_capacity(height as usize + 1);
    for _ in 0..=height {
        claims.push(pool.claim_frame(who)?);
    }
    let meta_pin = pool.pin(tree.page(meta::META_BLOCK), who)?;
    let sep_room = node::inner_cell_size(node::max_key_len(pool.page_size()));
    let path = descend_path(tree, key, sep_room, who)?;
    // The lowest ancestor with room for one more separator stops the
    // climb and is the highest page latched; if none has room, the root
    // splits too.
    let top = (0..path.len() - 1)
        .rev()
        .find(|&i| path[i].has_room)
        .unwrap_or(0);
    let mut meta_w = meta_pin.into_write();
    let mut latched: Vec<PageWrite<'_>> = Vec::new();
    for step in path.into_iter().skip(top) {
        latched.push(step.pin.into_write());
    }
    let leaf_idx = latched.len() - 1;
    // Only the pending changes this leaf covers count.
    let pending: Vec<Pending<'_>> = {
        let leaf = latched[leaf_idx].bytes();
        if !is_node(leaf) || !node::is_leaf(leaf) || !node::covers(leaf, key) {
            return Ok(false); // changed meanwhile: the caller looks again
        }
        let mine: Vec<Pending<'_>> = pending
            .iter()
            .filter(|p| node::covers(leaf, p.key))
            .map(|p| Pending {
                key: p.key,
                bytes: p.bytes,
            })
            .collect();
        if fits(leaf, &mine) {
            return Ok(false);
        }
        mine
    };
    meta_w.mark_dirty();
    let mut new_pages: Vec<PageWrite<'_>> = Vec::new();
    // Split the leaf at a separator chosen with the pending keys in view.
    let Some(sep) = choose_leaf_separator(latched[leaf_idx].bytes(), &pending) else {
        return Err(Error::Invalid(format!(
            "leaf of file {} cannot be split for key {key:?}",
            tree.file_id
        )));
    };
    let _critical = CriticalSection::new(pool);
    let right_block = allocate(pool, tree, meta_w.bytes_mut());
    let mut right = pool
        .install_new(claims.pop().expect("claimed"), tree.page(right_block))
        .into_write();
    right.mark_dirty();
    latched[leaf_idx].mark_dirty();
    split_leaf_at(
        latched[leaf_idx].bytes_mut(),
        right.bytes_mut(),
        right_block,
        &sep,
    );
    new_pages.push(right);
    let mut carry = Some((sep, right_block));
    // Climb: insert the separator, splitting full inner nodes.
    for i in (0..leaf_idx).rev() {
        let Some((sep, child)) = carry.take() else {
            break;
        };
        let parent = &mut latched[i];
        parent.mark_dirty();
        if node::inner_insert(parent.bytes_mut(), &sep, child).is_ok() {
            break;
        }
        let rb = allocate(pool, tree, meta_w.bytes_mut());
        let mut r = pool
            .install_new(claims.pop().expect("claimed"), tree.page(rb))
            .into_write();
        r.mark_dirty();
        let sep2 = node_split::split(
            parent.bytes_mut(),
            r.bytes_mut(),
            rb,
            node_split::SplitHint::Middle,
        );
        let target = if sep >= sep2 {
            r.bytes_mut()
        } else {
            parent.bytes_mut()
        };
        node::inner_insert(target, &sep, child)
            .expect("a middle split leaves room for one separator");
        new_pages.push(r);
        carry = Some((sep2, rb));
    }
    if let Some((sep, child)) = carry {
        assert_eq!(
            top, 0,
            "a separator climbed past the ancestor chosen to take it"
        );
        let old_root = latched[0].id().block;
        let level = node::level(latched[0].bytes()) + 1;
        let qb = allocate(pool, tree, meta_w.bytes_mut());
        let mut q = pool
            .install_new(claims.pop().expect("claimed"), tree.page(qb))
            .into_write();
        q.mark_dirty();
        node::make_root_inner(
            q.bytes_mut(),
            tree.file_id,
            qb,
            level,
            old_root,
            &sep,
            child,
        );
        let h = meta::height(meta_w.bytes());
        meta::set_root(meta_w.bytes_mut(), qb, h + 1);
        new_pages.push(q);
    }
    let mut all: Vec<PageWrite<'_>> = Vec::with_capacity(latched.len() + new_pages.len() + 1);
    all.push(meta_w);
    // Ancestors latched but left alone (the separator fit lower down) are
    // not part of the change.
    all.extend(latched.into_iter().filter(|p| p.is_marked_dirty()));
    all.extend(new_pages);
    log_images(pool, wal, &mut all)?;
    Ok(true)
}

struct PathStep<'a> {
    pin: Pinned<'a>,
    /// For inner nodes: room for one more separator of the maximal size.
    has_room: bool,
}

/// The path from the root to the leaf covering `key`, each page pinned
/// (not latched). Under the SMO mutex the inner nodes cannot change.
fn descend_path<'a>(
    tree: &Tree<'a>,
    key: &[u8],
    sep_room: usize,
    who: Issuer,
) -> Result<Vec<PathStep<'a>>> {
    let (root, _) = tree.root(who)?;
    let mut path = Vec::new();
    let mut cur = tree.pool.pin(tree.page(root), who)?.into_read();
    loop {
        if path.len() > super::tree::MAX_TREE_HEIGHT {
            return Err(tree.too_deep(cur.id()));
        }
        let b = cur.bytes();
        if !is_node(b) || !node::covers(b, key) {
            return Err(Error::Invalid(format!(
                "file {}: {} does not cover the key under the structure lock",
                tree.file_id,
                cur.id()
            )));
        }
        if node::is_leaf(b) {
            path.push(PathStep {
                pin: cur.unlatch(),
                has_room: false,
            });
            return Ok(path);
        }
        let has_room = node::free_space(b) >= sep_room;
        let (_, child) = node::inner_find_child(b, key);
        let id = tree.page(child);
        let next = tree.pool.pin_cached(id).map(|p| p.into_read());
        path.push(PathStep {
            pin: cur.unlatch(),
            has_room,
        });
        cur = match next {
            Some(n) => n,
            None => tree.pool.pin(id, who)?.into_read(),
        };
    }
}

/// Chooses where to split a leaf so that its rows and the pending changes
/// divide about evenly by bytes, or 90/10 when every pending key lies
/// beyond the rows of the rightmost leaf (ascending inserts). The rows
/// already there, with the new fences, must fit in each half. None if no
/// separator works (fewer than two distinct keys).
fn choose_leaf_separator(leaf: &[u8], pending: &[Pending<'_>]) -> Option<Vec<u8>> {
    let n = node::count(leaf);
    // (key, page bytes, already on the page)
    let mut merged: Vec<(&[u8], usize, bool)> = (0..n)
        .map(|i| {
            let k = node::key_at(leaf, i);
            (
                k,
                node::leaf_cell_size(k.len(), node::value_at(leaf, i).len()),
                true,
            )
        })
        .collect();
    let max_existing = merged.last().map(|(k, _, _)| *k);
    for p in pending {
        match merged.binary_search_by(|(k, _, _)| (*k).cmp(p.key)) {
            Ok(i) => merged[i].1 = merged[i].1.max(p.bytes),
            Err(i) => merged.insert(i, (p.key, p.bytes, false)),
        }
    }
    if merged.len() < 2 {
        return None;
    }
    let right_edge = node::high_fence(leaf).is_none()
        && max_existing.is_some_and(|mx| pending.iter().all(|p| p.key > mx));
    let total: usize = merged.iter().map(|m| m.1).sum();
    let target = if right_edge {
        total * 9 / 10
    } else {
        total / 2
    };
    // prefix[m]: bytes of entries before m; on_page[m]: of those, the rows
    // already on the page (what the left half holds right after the split).
    let mut prefix = vec![0usize; merged.len() + 1];
    let mut on_page = vec![0usize; merged.len() + 1];
    for (i, (_, size, existing)) in merged.iter().enumerate() {
        prefix[i + 1] = prefix[i] + size;
        on_page[i + 1] = on_page[i] + if *existing { *size } else { 0 };
    }
    let page = leaf.len();
    let (low, high) = (
        node::low_fence(leaf).len(),
        node::high_fence(leaf).map_or(0, |h| h.len()),
    );
    let fits_at = |m: usize| {
        let sep = merged[m].0.len();
        node::NODE_FIXED_BYTES + low + sep + on_page[m] <= page
            && node::NODE_FIXED_BYTES + sep + high + (on_page[merged.len()] - on_page[m]) <= page
    };
    let ideal = (1..merged.len())
        .find(|&m| prefix[m] >= target)
        .unwrap_or(merged.len() - 1);
    // The workable split point nearest the ideal one.
    let mut candidates: Vec<usize> = (1..merged.len()).collect();
    candidates.sort_by_key(|&m| m.abs_diff(ideal));
    let m = candidates.into_iter().find(|&m| fits_at(m))?;
    Some(merged[m].0.to_vec())
}

/// Moves the rows of `left` with keys >= `sep` into a fresh leaf `right`.
fn split_leaf_at(left: &mut [u8], right: &mut [u8], right_block: u32, sep: &[u8]) {
    let high = node::high_fence(left).map(|h| h.to_vec());
    let file_id = crate::page::read_header(left)
        .expect("latched leaf")
        .file_id;
    node::init_leaf(right, file_id, right_block, sep, high.as_deref());
    let start = match node::search(left, sep) {
        Ok(i) | Err(i) => i,
    };
    for i in start..node::count(left) {
        node::leaf_insert(right, node::key_at(left, i), node::value_at(left, i))
            .expect("the right half of a split fits in an empty leaf");
    }
    node_split::truncate_right(left, sep);
}

/// Frees the leaf covering `key` if it is empty: its key range goes to its
/// left neighbour, its entry leaves the parent, the block joins the free
/// list. Returns whether a leaf was freed. A leaf that is its parent's
/// first child, or its only one, stays (it keeps the parent's low fence).
pub fn free_empty_leaf(
    tree: &Tree<'_>,
    wal: &Wal,
    smo: &parking_lot::Mutex<()>,
    key: &[u8],
    who: Issuer,
) -> Result<bool> {
    let _structure = smo.lock();
    let pool = tree.pool;
    let meta_pin = pool.pin(tree.page(meta::META_BLOCK), who)?;
    let mut path = descend_path(tree, key, 0, who)?;
    if path.len() < 2 {
        return Ok(false); // the root is never freed
    }
    let leaf_pin = path.pop().expect("leaf").pin;
    let parent_pin = path.pop().expect("parent").pin;
    drop(path);
    let leaf_block = leaf_pin.id().block;
    let mut meta_w = meta_pin.into_write();
    let mut parent = parent_pin.into_write();
    let (i, child) = node::inner_find_child(parent.bytes(), key);
    if child != leaf_block || i == 0 {
        return Ok(false);
    }
    let left_pin = pool.pin_cached(tree.page(node::child_at(parent.bytes(), i - 1)));
    let Some(left_pin) = left_pin else {
        return Ok(false); // not cached: not worth a read under latches
    };
    // Leaves are latched in block order, as commits latch them.
    let (mut leaf, mut left) = if leaf_block < left_pin.id().block {
        let l = leaf_pin.into_write();
        (l, left_pin.into_write())
    } else {
        let lf = left_pin.into_write();
        (leaf_pin.into_write(), lf)
    };
    let (lb, fb) = (leaf.bytes(), left.bytes());
    if !is_node(lb)
        || !node::is_leaf(lb)
        || node::count(lb) != 0
        || !is_node(fb)
        || !node::is_leaf(fb)
    {
        return Ok(false);
    }
    if node::high_fence(fb) != Some(node::low_fence(lb)) {
        return Ok(false);
    }
    let mut widened = fb.to_vec();
    let high = node::high_fence(lb).map(|h| h.to_vec());
    if node_split::set_high_fence(&mut widened, high.as_deref()).is_err() {
        return Ok(false);
    }
    let _critical = CriticalSection::new(pool);
    for p in [&mut meta_w, &mut parent, &mut left, &mut leaf] {
        p.mark_dirty();
    }
    left.bytes_mut().copy_from_slice(&widened);
    node::inner_remove(parent.bytes_mut(), i);
    crate::page::init_page(
        leaf.bytes_mut(),
        crate::page::PageKind::Free,
        tree.file_id,
        leaf_block,
        0,
    );
    // A full free list leaves the block unused (still a Free page).
    meta::release(meta_w.bytes_mut(), leaf_block);
    log_images(pool, wal, &mut [meta_w, parent, left, leaf])?;
    Ok(true)
}
