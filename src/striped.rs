//! Counters that many threads bump at once without sharing a cache line:
//! each thread adds to one of a few stripes, each on its own line, and a
//! reader sums them. A single shared atomic bounces its line between the
//! cores of every thread that adds to it (a buffer hit per page pin, five
//! WAL counters per record); PostgreSQL keeps such counts per backend.
//! Reads are rare (statistics), so they pay instead.

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
}
