//! Reading a tree: descents with latch coupling, point reads, scans.
//!
//! Latching rule: top-down only. A descent holds the parent's shared latch
//! while it pins and latches the child (latch coupling), then lets the
//! parent go. A child that is not in the buffer pool is never read while a
//! latch is held: the descent lets go of the parent, reads the child, and
//! goes on from it if its fences still cover the key (else it restarts from
//! the root). Every node carries its fences, so a node reached after a
//! concurrent split is recognised as "not covering" and never misread.

use super::{meta, node};
use crate::buffer::{BufferPool, PageId, PageRead, Pinned};
use crate::error::{Error, Result};
use crate::file::Issuer;
use crate::page::{read_header, PageKind};

/// A bound on restarts of one descent; reached only under a bug.
const MAX_RESTARTS: usize = 10_000;

/// More levels than any tree can have (a fan-out of 2 would hold 2^64
/// leaves): a descent deeper than this follows a cycle of child pointers
/// on a corrupt disk, and is refused instead of looping.
pub(crate) const MAX_TREE_HEIGHT: usize = 64;

/// One table's tree, as seen through the buffer pool.
#[derive(Clone, Copy)]
pub struct Tree<'a> {
    pub pool: &'a BufferPool,
    pub file_id: u32,
}

/// True if the page is a B+tree node (leaf or inner).
pub fn is_node(b: &[u8]) -> bool {
    matches!(
        read_header(b).map(|h| h.kind),
        Ok(PageKind::Leaf | PageKind::Inner)
    )
}

/// Checks a page read from disk by its kind (the buffer pool's validator).
pub fn validate_page(b: &[u8]) -> std::result::Result<(), String> {
    match read_header(b).map_err(|e| e.to_string())?.kind {
        PageKind::Leaf | PageKind::Inner => super::node_check::check_node(b),
        PageKind::Meta => meta::check_meta(b),
        PageKind::Free | PageKind::Raw => Ok(()),
    }
}

impl<'a> Tree<'a> {
    pub fn new(pool: &'a BufferPool, file_id: u32) -> Tree<'a> {
        Tree { pool, file_id }
    }

    pub fn page(&self, block: u32) -> PageId {
        PageId::new(self.file_id, block)
    }

    /// The root block and height, read from the meta page.
    pub fn root(&self, who: Issuer) -> Result<(u32, u16)> {
        let m = self.pool.pin(self.page(meta::META_BLOCK), who)?.into_read();
        Ok((meta::root(m.bytes()), meta::height(m.bytes())))
    }

    /// The leaf covering `key`, under its shared latch.
    pub fn read_leaf(&self, key: &[u8], who: Issuer) -> Result<PageRead<'a>> {
        'restart: for _ in 0..MAX_RESTARTS {
            let (root, _) = self.root(who)?;
            let mut cur = self.pool.pin(self.page(root), who)?.into_read();
            for depth in 0.. {
                if depth > MAX_TREE_HEIGHT {
                    return Err(self.too_deep(cur.id()));
                }
                let b = cur.bytes();
                if !is_node(b) || !node::covers(b, key) {
                    continue 'restart;
                }
                if node::is_leaf(b) {
                    return Ok(cur);
                }
                let (_, child) = node::inner_find_child(b, key);
                let id = self.page(child);
                cur = match self.pool.pin_cached(id) {
                    // Latch the child before the parent goes (coupling).
                    Some(p) => p.into_read(),
                    None => {
                        drop(cur);
                        self.pool.pin(id, who)?.into_read()
                    }
                };
            }
        }
        Err(self.too_many_restarts(key))
    }

    /// The leaf covering `key`, pinned but not latched: the caller latches
    /// it and checks that it still covers the key.
    pub fn find_leaf(&self, key: &[u8], who: Issuer) -> Result<Pinned<'a>> {
        Ok(self.read_leaf(key, who)?.unlatch())
    }

    /// The row stored under `key`.
    pub fn get(&self, key: &[u8], who: Issuer) -> Result<Option<Vec<u8>>> {
        let leaf = self.read_leaf(key, who)?;
        Ok(node::leaf_get(leaf.bytes(), key).map(|v| v.to_vec()))
    }

    /// Calls `f` on each row with key >= `start`, in key order, until it
    /// returns false. One leaf at a time is latched; between leaves the scan
    /// re-descends with the leaf's high fence, so it never holds two latches.
    pub fn scan(
        &self,
        start: &[u8],
        who: Issuer,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        let mut from = start.to_vec();
        loop {
            let leaf = self.read_leaf(&from, who)?;
            let b = leaf.bytes();
            let first = match node::search(b, &from) {
                Ok(i) | Err(i) => i,
            };
            for i in first..node::count(b) {
                if !f(node::key_at(b, i), node::value_at(b, i)) {
                    return Ok(());
                }
            }
            match node::high_fence(b) {
                // Each leaf's high fence is above the key that found it, so
                // the scan moves right and ends; a corrupt fence must not
                // make it go round.
                Some(h) if h > from.as_slice() => from = h.to_vec(),
                Some(h) => {
                    return Err(Error::corruption(
                        format!("data file {}", self.file_id),
                        leaf.id().to_string(),
                        format!("high fence {h:?} is not above the key {from:?} that reached it"),
                    ))
                }
                None => return Ok(()),
            }
        }
    }

    /// The error for a descent deeper than [`MAX_TREE_HEIGHT`].
    pub(crate) fn too_deep(&self, at: crate::buffer::PageId) -> Error {
        Error::corruption(
            format!("data file {}", self.file_id),
            at.to_string(),
            format!("a descent went deeper than {MAX_TREE_HEIGHT} levels: the child pointers form a cycle"),
        )
    }

    fn too_many_restarts(&self, key: &[u8]) -> Error {
        Error::Invalid(format!(
            "descent of file {} for key {key:?} restarted {MAX_RESTARTS} times: the tree is inconsistent",
            self.file_id
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Database;
    use crate::options::Options;
    use crate::table::key_u64;

    #[test]
    fn a_cycle_of_child_pointers_is_refused_not_followed_nor_prewarmed() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(&dir.path().join("db"), Options::default()).unwrap();
        let t = db.create_table("t").unwrap();
        db.bulk_load(&t, (0..2000u64).map(|k| (key_u64(k), [1u8; 100])))
            .unwrap();
        let pool = &db.engine.pool;
        let tree = Tree::new(pool, t.file_id);
        let (root, height) = tree.root(Issuer::Client).unwrap();
        assert!(height >= 2, "the root must be an inner node");
        // The root's children become the root itself (as a corrupt disk
        // could make them): every node on the way covers every key.
        {
            let mut w = pool
                .pin(tree.page(root), Issuer::Client)
                .unwrap()
                .into_write();
            let level = node::level(w.bytes());
            w.mark_dirty();
            node::make_root_inner(
                w.bytes_mut(),
                t.file_id,
                root,
                level,
                root,
                &key_u64(5),
                root,
            );
        }
        // Prewarm reads each block once instead of going round.
        assert!(db.prewarm().unwrap() >= 1);
        let e = tree.get(&key_u64(7), Issuer::Client).unwrap_err();
        assert!(e.to_string().contains("deeper than 64 levels"), "{e}");
        assert!(
            e.to_string().contains(&format!("data file {}", t.file_id)),
            "{e}"
        );
        // The database must not write the corrupt page back.
        pool.poison();
        drop(db);
    }
}
