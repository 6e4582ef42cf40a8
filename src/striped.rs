//! Counters that many threads bump at once without sharing a cache line:
//! each thread adds to one of a few stripes, each on its own line, and a
//! reader sums them. A single shared atomic bounces its line between the
//! cores of every thread that adds to it (a buffer hit per page pin, five
//! WAL counters per record); PostgreSQL keeps such counts per backend.
//! Reads are rare (statistics), so they pay instead.
//!
//! The same for a read-write lock that every commit takes shared and a
//! rare writer takes exclusive (the redo point, the dropped files): each
//! reader locks its own stripe, a writer all of them, as PostgreSQL's
//! checkpoint takes every WAL insertion lock to move RedoRecPtr and
//! Linux's per-CPU rw-semaphores do.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Stripes per counter: enough that the threads of a 16-core machine
/// seldom share one.
const STRIPES: usize = 16;

/// One stripe alone on its cache line (two lines: adjacent-line
/// prefetching pairs them on x86).
#[repr(align(128))]
#[derive(Default)]
struct Stripe(AtomicU64);

/// A counter added to by many threads, read by few.
#[derive(Default)]
pub struct StripedCounter {
    stripes: [Stripe; STRIPES],
}

impl StripedCounter {
    /// Adds `n` (relaxed, as the single atomic it replaces did).
    #[inline]
    pub fn add(&self, n: u64) {
        self.stripes[thread_number() % STRIPES]
            .0
            .fetch_add(n, Relaxed);
    }

    /// The sum of all adds so far. Not a snapshot: adds running meanwhile
    /// may or may not be in it.
    pub fn load(&self) -> u64 {
        self.stripes
            .iter()
            .fold(0u64, |sum, s| sum.wrapping_add(s.0.load(Relaxed)))
    }
}

impl std::fmt::Debug for StripedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.load())
    }
}

/// One stripe of a [`StripedRwLock`]: its own copy of the value, alone on
/// its cache lines.
#[repr(align(128))]
#[derive(Default)]
struct ReadStripe<T>(RwLock<T>);

/// A value read under a shared lock by many threads at once, written
/// rarely. Each stripe keeps a copy; a reader locks its thread's stripe
/// only, so readers on different cores write no common line. A writer
/// locks every stripe, in order, and sets every copy. The same rules as
/// one `parking_lot::RwLock`: a waiting writer stops new readers of the
/// stripes it holds, and a reader must not read-lock again while it
/// holds a guard.
#[derive(Default)]
pub struct StripedRwLock<T> {
    stripes: [ReadStripe<T>; STRIPES],
}

/// Every stripe of a [`StripedRwLock`], locked exclusive.
pub struct StripedWriteGuard<'a, T> {
    stripes: Vec<RwLockWriteGuard<'a, T>>,
}

impl<T: Clone> StripedRwLock<T> {
    pub fn new(value: T) -> StripedRwLock<T> {
        StripedRwLock {
            stripes: std::array::from_fn(|_| ReadStripe(RwLock::new(value.clone()))),
        }
    }

    /// The value, held shared until the guard drops: the caller's stripe.
    #[inline]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.stripes[thread_number() % STRIPES].0.read()
    }

    /// Every stripe, once every reader has let go.
    pub fn write(&self) -> StripedWriteGuard<'_, T> {
        StripedWriteGuard {
            stripes: self.stripes.iter().map(|s| s.0.write()).collect(),
        }
    }
}

impl<T: Clone> StripedWriteGuard<'_, T> {
    /// The value (every stripe holds the same).
    pub fn get(&self) -> &T {
        &self.stripes[0]
    }

    /// Changes every stripe's copy by `change`.
    pub fn update(&mut self, mut change: impl FnMut(&mut T)) {
        self.stripes.iter_mut().for_each(|s| change(s));
    }
}

/// A number per thread, drawn at its first call, consecutive across
/// threads: what spreads threads over stripes and insertion locks.
#[inline]
pub(crate) fn thread_number() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static NUMBER: usize = NEXT.fetch_add(1, Relaxed);
    }
    NUMBER.with(|n| *n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn adds_from_many_threads_sum_exactly() {
        let c = Arc::new(StripedCounter::default());
        let threads: Vec<_> = (0..20)
            .map(|t| {
                let c = c.clone();
                std::thread::spawn(move || (0..1000).for_each(|_| c.add(t)))
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(c.load(), (0..20).map(|t| t * 1000).sum::<u64>());
        assert!(c.stripes.iter().filter(|s| s.0.load(Relaxed) > 0).count() > 1);
    }

    #[test]
    fn a_write_waits_for_readers_on_every_stripe_and_all_see_it() {
        let lock = Arc::new(StripedRwLock::new(1u64));
        // Readers on many threads, hence many stripes, hold the lock.
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let go_rx = Arc::new(parking_lot::Mutex::new(go_rx));
        let readers: Vec<_> = (0..STRIPES + 3)
            .map(|_| {
                let (lock, held_tx, go_rx) = (lock.clone(), held_tx.clone(), go_rx.clone());
                std::thread::spawn(move || {
                    let v = *lock.read();
                    let guard = lock.read();
                    held_tx.send(()).unwrap();
                    go_rx.lock().recv().unwrap();
                    assert_eq!(*guard, v, "no write while a reader holds its stripe");
                })
            })
            .collect();
        (0..STRIPES + 3).for_each(|_| held_rx.recv().unwrap());
        let writer = {
            let lock = lock.clone();
            std::thread::spawn(move || lock.write().update(|v| *v = 2))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!writer.is_finished(), "the write waits for the readers");
        (0..STRIPES + 3).for_each(|_| go_tx.send(()).unwrap());
        readers.into_iter().for_each(|r| r.join().unwrap());
        writer.join().unwrap();
        let seen: Vec<u64> = (0..STRIPES * 2)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || *lock.read()).join().unwrap()
            })
            .collect();
        assert!(seen.iter().all(|&v| v == 2), "{seen:?}");
        assert_eq!(*lock.write().get(), 2);
    }
}
