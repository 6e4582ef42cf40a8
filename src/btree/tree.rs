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
        PageKind::Leaf | PageKind::Inner => node::check_node(b),
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
            loop {
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
                Some(h) => from = h.to_vec(),
                None => return Ok(()),
            }
        }
    }

    fn too_many_restarts(&self, key: &[u8]) -> Error {
        Error::Invalid(format!(
            "descent of file {} for key {key:?} restarted {MAX_RESTARTS} times: the tree is inconsistent",
            self.file_id
        ))
    }
}
