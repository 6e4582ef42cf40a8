//! Pins and latches: the handles through which pages are read and changed.

use super::frame::Frame;
use super::{ClaimedFrame, PageId, Pinned, WalFlush};
use crate::error::Result;
use crate::file::Issuer;
use crate::lsn::Lsn;
use std::sync::atomic::Ordering::*;

#[inline]
fn held(delta: isize) {
    crate::latch_count::add(delta);
}

impl Drop for ClaimedFrame<'_> {
    fn drop(&mut self) {
        if let Some(idx) = self.idx.take() {
            self.pool.push_free(idx);
        }
    }
}

impl<'a> Pinned<'a> {
    pub fn id(&self) -> PageId {
        self.id
    }

    fn frame(&self) -> &'a Frame {
        &self.pool.frames[self.idx]
    }

    /// The frame's commit LSN (see the flush rule).
    pub fn commit_lsn(&self) -> Lsn {
        self.frame().commit_lsn()
    }

    /// Takes the shared latch; the result owns the pin and the latch, so a
    /// descent can latch the child before it lets go of the parent.
    pub fn into_read(self) -> PageRead<'a> {
        std::mem::forget(self.frame().latch.read());
        held(1);
        PageRead { pin: self }
    }

    /// Takes the exclusive latch; the result owns the pin and the latch.
    pub fn into_write(self) -> PageWrite<'a> {
        std::mem::forget(self.frame().latch.write());
        held(1);
        PageWrite {
            pin: self,
            dirtied: false,
        }
    }
}

impl WalFlush for crate::wal::Wal {
    /// The pool flushes only before page writes (the write-ahead rule).
    fn flush(&self, upto: Lsn, who: Issuer) -> Result<()> {
        crate::wal::Wal::flush_for_page_write(self, upto, who)
    }
    fn flushed_lsn(&self) -> Lsn {
        crate::wal::Wal::flushed_lsn(self)
    }
}

impl Clone for Pinned<'_> {
    /// Another pin on the same frame.
    fn clone(&self) -> Self {
        let prev = self.frame().pins.fetch_add(1, AcqRel);
        assert!(prev > 0, "cloning a pin of an unpinned frame");
        Pinned {
            pool: self.pool,
            idx: self.idx,
            id: self.id,
        }
    }
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        let prev = self.frame().pins.fetch_sub(1, AcqRel);
        assert!(prev > 0, "unpinning an unpinned frame");
    }
}

/// A pinned page under its shared latch.
pub struct PageRead<'a> {
    pin: Pinned<'a>,
}

/// A pinned page under its exclusive latch.
pub struct PageWrite<'a> {
    pin: Pinned<'a>,
    dirtied: bool,
}

impl<'a> PageRead<'a> {
    pub fn id(&self) -> PageId {
        self.pin.id
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: this guard holds the shared latch (taken in into_read and
        // released in drop), so no one can change the bytes meanwhile.
        unsafe { &(*self.pin.frame().latch.data_ptr()).bytes }
    }
}

impl<'a> PageRead<'a> {
    /// Lets go of the latch but keeps the pin.
    pub fn unlatch(self) -> Pinned<'a> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: into_read took the shared latch; we release it once and
        // move the pin out of a value whose destructor will not run.
        unsafe {
            this.pin.frame().latch.force_unlock_read();
            held(-1);
            std::ptr::read(&this.pin)
        }
    }
}

impl Drop for PageRead<'_> {
    fn drop(&mut self) {
        // SAFETY: into_read took the shared latch and forgot its guard.
        unsafe { self.pin.frame().latch.force_unlock_read() }
        held(-1);
    }
}

impl<'a> PageWrite<'a> {
    pub fn id(&self) -> PageId {
        self.pin.id
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: this guard holds the exclusive latch.
        unsafe { &(*self.pin.frame().latch.data_ptr()).bytes }
    }

    /// Marks the page dirty. Call before inserting the WAL record of the
    /// change, so a checkpoint starting in between cannot miss the page.
    pub fn mark_dirty(&mut self) {
        self.pin.frame().dirty_gen.fetch_add(1, AcqRel);
        self.dirtied = true;
    }

    /// True once [`PageWrite::mark_dirty`] was called through this guard.
    pub fn is_marked_dirty(&self) -> bool {
        self.dirtied
    }

    /// The page bytes, for changing. The page must be marked dirty first.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        assert!(self.dirtied, "page changed without being marked dirty");
        // SAFETY: this guard holds the exclusive latch.
        unsafe { &mut (*self.pin.frame().latch.data_ptr()).bytes }
    }

    /// Records the WAL record that changed the page: its LSN becomes the
    /// page LSN (never backwards) and the frame's commit LSN rises to
    /// `commit_lsn`.
    pub fn set_lsns(&mut self, page_lsn: Lsn, commit_lsn: Lsn) {
        crate::page::set_page_lsn(self.bytes_mut(), page_lsn);
        self.pin.frame().commit_lsn.fetch_max(commit_lsn.0, AcqRel);
    }
}

impl<'a> PageWrite<'a> {
    /// Lets go of the latch but keeps the pin.
    pub fn unlatch(self) -> Pinned<'a> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: into_write took the exclusive latch; released once here.
        unsafe {
            this.pin.frame().latch.force_unlock_write();
            held(-1);
            std::ptr::read(&this.pin)
        }
    }
}

impl Drop for PageWrite<'_> {
    fn drop(&mut self) {
        // SAFETY: into_write took the exclusive latch and forgot its guard.
        unsafe { self.pin.frame().latch.force_unlock_write() }
        held(-1);
    }
}
