//! PostgreSQL 9.4's WAL insertion locks: an inserter holds one of them
//! while it reserves its record's bytes and copies the record in, so the
//! copy runs outside the reservation lock, beside other inserters' copies.
//! A flush leader, once it has reserved the padding that ends its flush,
//! takes each lock in turn: every copy reserved below its target has then
//! finished, and the bytes it writes are whole.
//!
//! Why a few locks and not one per thread: a leader takes them all each
//! round. Threads share them by a number each thread draws once; two
//! inserters on one lock copy one after the other.

use crate::striped::thread_number;
use parking_lot::{Mutex, MutexGuard};

/// PostgreSQL's NUM_XLOGINSERT_LOCKS.
const INSERTION_LOCKS: usize = 8;

/// A lock alone on its cache line, so that inserters on different locks
/// do not bounce one line between cores.
#[repr(align(128))]
#[derive(Default)]
struct Padded(Mutex<()>);

#[derive(Default)]
pub(super) struct InsertionLocks {
    locks: [Padded; INSERTION_LOCKS],
}

impl InsertionLocks {
    /// The calling thread's lock, held while it reserves and copies.
    pub fn mine(&self) -> MutexGuard<'_, ()> {
        self.locks[thread_number() % INSERTION_LOCKS].0.lock()
    }

    /// Returns once every copy that held a lock when this was called has
    /// finished. The caller holds none of them.
    pub fn wait_for_copies(&self) {
        for lock in &self.locks {
            drop(lock.0.lock());
        }
    }
}
