//! Cleaning ahead of the clock hand: the buffer pool's side of the
//! background writer (PostgreSQL's SyncOneBuffer with skip_recently_used).
//!
//! Positions are counted as the hand counts them: frame `pos % nframes`,
//! and a position only grows, so "ahead of the hand" and "lapped by the
//! hand" are plain comparisons.
//!
//! Rules:
//! - Only a frame the sweep would take as it stands (unpinned, usage
//!   count 0) is written: a recently used one would survive the hand's
//!   next pass, and writing it now would likely be wasted.
//! - A frame is pinned through the page table before it is written (the
//!   write path's rule), never by touching its usage count.
//! - The writes go through [`BufferPool::write_frames`] as one batch, so
//!   the flush rule and torn-page protection hold as for every writer.

use super::frame::VALID;
use super::{BufferPool, Pinned};
use crate::error::Result;
use crate::file::Issuer;
use std::sync::atomic::Ordering::*;

/// What one scan ahead of the hand found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanScan {
    /// Frames looked at.
    pub scanned: usize,
    /// Of those, frames the sweep can take without a write: clean ones
    /// and the ones written now.
    pub reusable: usize,
    /// Pages written.
    pub written: usize,
    /// The scan stopped because it had chosen `max_write` pages.
    pub hit_max_write: bool,
}

impl BufferPool {
    /// The clock hand's position: the frame it looks at next is this
    /// modulo the number of frames.
    pub fn clock_position(&self) -> u64 {
        self.clock_hand.load(Relaxed) as u64
    }

    /// Looks at frames from position `from` on, at most `max_scan` of them,
    /// until `want` reusable frames are found, and writes the dirty ones
    /// the sweep would take next (at most `max_write`), as one batch
    /// tagged `who`.
    pub fn clean_ahead(
        &self,
        from: u64,
        max_scan: usize,
        want: usize,
        max_write: usize,
        who: Issuer,
    ) -> Result<CleanScan> {
        let (mut scan, pinned) = self.pin_dirty_ahead(from, max_scan, want, max_write);
        if !pinned.is_empty() {
            let idxs: Vec<usize> = pinned.iter().map(|p| p.idx).collect();
            scan.written = self.write_frames(&idxs, who)?;
        }
        Ok(scan)
    }

    /// The scan of [`BufferPool::clean_ahead`] without the write: pins and
    /// returns the dirty frames it chose (at most `max_write`).
    pub(super) fn pin_dirty_ahead(
        &self,
        from: u64,
        max_scan: usize,
        want: usize,
        max_write: usize,
    ) -> (CleanScan, Vec<Pinned<'_>>) {
        let n = self.frames.len() as u64;
        let mut scan = CleanScan::default();
        let mut pinned: Vec<Pinned<'_>> = Vec::new();
        if max_write == 0 {
            return (scan, pinned);
        }
        while scan.scanned < max_scan && scan.reusable < want {
            let idx = ((from + scan.scanned as u64) % n) as usize;
            scan.scanned += 1;
            let f = &self.frames[idx];
            if f.pins.load(Acquire) != 0
                || f.usage.load(Relaxed) != 0
                || f.state.load(Acquire) != VALID
            {
                continue;
            }
            if !f.is_dirty() {
                scan.reusable += 1;
                continue;
            }
            let Some(id) = f.page() else { continue };
            // The shard mutex makes lookup and pin one step: if the frame
            // still holds `id`, it cannot change page while pinned.
            let Some(pin) = self.pin_mapped(id) else {
                continue;
            };
            if pin.idx != idx || f.state.load(Acquire) != VALID {
                let other = pin.idx;
                drop(pin);
                self.release_if_abandoned(other);
                continue;
            }
            pinned.push(pin);
            scan.reusable += 1;
            if pinned.len() >= max_write {
                scan.hit_max_write = true;
                break;
            }
        }
        (scan, pinned)
    }
}
