//! WAL space reserved before a commit's apply, so that neither the
//! insert nor the flush after it can fail for want of space: the segments
//! the record will need are created (zero-filled, fsynced, renamed) first.
//!
//! Rules:
//! - A reservation covers the insert position, plus every reservation not
//!   yet inserted (its own included), plus one segment of headroom for the
//!   records inserted without one (structure changes, checkpoints) between
//!   a reservation and its commit's flush.
//! - A commit that frees space (it drops tables) needs only a sixteenth of
//!   a segment of headroom. On a full disk ordinary commits stop while a
//!   segment of headroom is left, so DROP TABLE and TRUNCATE still commit
//!   there and the space can be freed through SQL (before, they failed
//!   with ENOSPC like everything else).
//! - Segments are never removed at or past the flushed position, so space
//!   once ready stays ready; the common case needs no lock.
//! - A failure here (ENOSPC while creating a segment) is an ordinary error:
//!   nothing was applied.

use super::{IoState, Wal};
use crate::error::Result;
use crate::wal::format::LONG_PAGE_HEADER_LEN;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// What the writer keeps about reservations.
#[derive(Default)]
pub(super) struct Space {
    /// Bytes reserved and not yet inserted.
    reserved: AtomicU64,
    /// Every segment from the flushed position up to this LSN exists
    /// (created whole).
    ready_end: AtomicU64,
}

/// Reserved WAL space, given back when dropped (once the record is in).
pub struct Reservation<'a> {
    wal: &'a Wal,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.wal.space.reserved.fetch_sub(self.bytes, SeqCst);
    }
}

/// What a reservation is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// An ordinary commit: a segment of headroom.
    Ordinary,
    /// A commit that frees space (drops tables): a sixteenth of one.
    FreesSpace,
}

impl Wal {
    /// Makes sure a record of up to `record_len` bytes (its header
    /// included), inserted while the reservation is held, and the flush
    /// after it, find their segments created. Holds until dropped.
    pub fn reserve(&self, record_len: u64) -> Result<Reservation<'_>> {
        self.reserve_for(record_len, Purpose::Ordinary)
    }

    /// [`Wal::reserve`] with the headroom `purpose` needs.
    pub fn reserve_for(&self, record_len: u64, purpose: Purpose) -> Result<Reservation<'_>> {
        // The record's bytes plus the page headers of the blocks it spans
        // (a header is shorter than half a block).
        let blocks = record_len / (self.geo.block / 2) + 2;
        let bytes = record_len + blocks * LONG_PAGE_HEADER_LEN as u64;
        let reserved = self.space.reserved.fetch_add(bytes, SeqCst) + bytes;
        let reservation = Reservation { wal: self, bytes };
        // Read after `reserved` (both SeqCst): a reservation given back
        // is given back after its insert published the position it moved.
        let insert = self.insert_end.load(SeqCst);
        let headroom = match purpose {
            Purpose::Ordinary => self.geo.segment,
            Purpose::FreesSpace => self.geo.segment / 16,
        };
        let end = insert + reserved + headroom;
        if end <= self.space.ready_end.load(SeqCst) {
            return Ok(reservation);
        }
        let mut io = self.io.lock();
        // The flush after the insert writes from the flushed position on.
        let flushed = self.group_commit.flushed();
        self.make_ready(&mut io, flushed, end)?;
        Ok(reservation)
    }

    /// Opens or creates every segment holding `[from, end)`.
    fn make_ready(&self, io: &mut IoState, from: u64, end: u64) -> Result<()> {
        let last = self.geo.segment_of(end - 1);
        for segno in self.geo.segment_of(from)..=last {
            self.segment_file(io, segno)?;
        }
        self.space
            .ready_end
            .fetch_max((last + 1) * self.geo.segment, SeqCst);
        Ok(())
    }
}
