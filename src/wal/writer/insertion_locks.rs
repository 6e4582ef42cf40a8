//! PostgreSQL 9.4's WAL insertion locks: an inserter holds one of them
//! while it reserves its record's bytes and copies the record in, so the
//! copy runs outside the reservation lock, beside other inserters' copies.
//! Each lock shows where its holder's record starts (stored under the
//! reservation lock, as PostgreSQL's insertingAt). A flush leader, once it
//! has reserved the padding that ends its flush, waits on each lock whose
//! record starts below its target, so the bytes it writes are whole; it
//! takes no lock where no copy below its target runs (the common case).
//!
//! Why a few locks and not one per thread: a leader looks at them all each
//! round. Threads share them by their thread number; two inserters on one
//! lock copy one after the other.

use crate::striped::thread_number;
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

/// PostgreSQL's NUM_XLOGINSERT_LOCKS.
const INSERTION_LOCKS: usize = 8;

/// `inserting_at` when no reservation is being copied.
const NONE: u64 = u64::MAX;

/// One lock, alone on its cache line so that inserters on different locks
/// do not bounce one line between cores.
#[repr(align(128))]
struct Slot {
    lock: Mutex<()>,
    /// Where the holder's reservation starts, once it has one; `NONE`
    /// otherwise.
    inserting_at: AtomicU64,
    /// A holder unwound (a panic) with its reservation perhaps not
    /// copied: the WAL has a hole no flush may write. Never cleared.
    abandoned: AtomicBool,
}

impl Default for Slot {
    fn default() -> Self {
        Slot {
            lock: Mutex::new(()),
            inserting_at: AtomicU64::new(NONE),
            abandoned: AtomicBool::new(false),
        }
    }
}

#[derive(Default)]
pub(super) struct InsertionLocks {
    slots: [Slot; INSERTION_LOCKS],
}

/// An insertion lock held: the reserving and copying of one record.
pub(super) struct Inserting<'a> {
    slot: &'a Slot,
    _held: MutexGuard<'a, ()>,
}

impl InsertionLocks {
    /// The calling thread's lock, held while it reserves and copies.
    pub fn mine(&self) -> Inserting<'_> {
        let slot = &self.slots[thread_number() % INSERTION_LOCKS];
        Inserting {
            slot,
            _held: slot.lock.lock(),
        }
    }

    /// Returns once every copy of a record reserved before this call and
    /// starting below `target` has finished. The caller reserved up to
    /// `target` under the reservation lock and holds no insertion lock.
    /// `Err(())` once any inserter unwound between its reservation and
    /// the end of its copy: the bytes below `target` may hold a hole, and
    /// no flush may ever write them (PostgreSQL PANICs there).
    pub fn wait_for_copies_below(&self, target: u64) -> Result<(), ()> {
        for slot in &self.slots {
            // Read after the caller's reservation: a record reserved
            // before it shows its start here (stored under that lock).
            if slot.inserting_at.load(SeqCst) < target {
                // Its holder lets go only after its copy (or its unwind).
                drop(slot.lock.lock());
            }
        }
        // After the waits: an unwind is recorded before its lock goes.
        match self.slots.iter().any(|s| s.abandoned.load(SeqCst)) {
            true => Err(()),
            false => Ok(()),
        }
    }
}

impl Inserting<'_> {
    /// Shows the reservation starting at `start`; called under the
    /// reservation lock, before it is released.
    pub fn reserved(&self, start: u64) {
        self.slot.inserting_at.store(start, SeqCst);
    }
}

impl Drop for Inserting<'_> {
    fn drop(&mut self) {
        // A holder unwinding may leave its reservation unfilled: it is
        // not a finished copy. Until 2026-12-01 this stored NONE, a flush
        // wrote the hole, and the next opening ended the WAL there,
        // losing later acknowledged commits.
        if std::thread::panicking() && self.slot.inserting_at.load(SeqCst) != NONE {
            self.slot.abandoned.store(true, SeqCst);
            tracing::error!("a WAL insertion unwound before its copy ended: no more WAL can be flushed; reopen the database");
        }
        // Before the lock is released (fields drop after this): a leader
        // that reads NONE sees the copy done.
        self.slot.inserting_at.store(NONE, SeqCst);
    }
}
