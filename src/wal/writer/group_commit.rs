//! Group commit: one thread at a time (the leader) writes and fdatasyncs
//! the WAL; the others wait for the round that covers their record.
//!
//! Why not a mutex and a condition variable (the first design): a round's
//! end woke every waiter, and each took the mutex in turn, only to find
//! that a round started after its record was inserted must still run.
//! With 64 clients the wake-ups, the hand-offs of the mutex and the
//! readers of the flushed position (every buffer eviction asks it) were
//! most of the futex calls per commit (issue 41, docs/BENCHMARKS.md).
//! Here the flushed position is an atomic anyone reads without a lock,
//! and a waiter parks with its LSN as the park token: a round's end wakes
//! exactly the waiters it made durable, plus the oldest waiter it did not,
//! to lead the next round.
//!
//! Rules:
//! - `flushed` only grows, and is stored before `leader` is cleared.
//! - A waiter parks only while a leader is active and its LSN is not
//!   flushed (checked under the parking lot's queue lock), and every
//!   leader's end wakes, under that lock, every waiter its round covers and
//!   the oldest one it does not. So a waiter never sleeps with no leader to
//!   wake it: a woken waiter that finds another leader parks again, and
//!   that leader's end wakes the next.
//! - After a fatal error (a failed fsync) every flush fails: every waiter
//!   is woken to see it.

use crate::error::{Error, Result};
use parking_lot_core::{FilterOp, ParkToken, DEFAULT_UNPARK_TOKEN};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::OnceLock;

/// What a thread asking for a flush does next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Turn {
    /// Its LSN is durable: nothing to do.
    Covered,
    /// It leads a round, from this flushed position; it must call
    /// [`GroupCommit::end_round`] whatever the round's outcome.
    Lead { flushed: u64 },
}

pub(super) struct GroupCommit {
    /// Everything before this LSN is durable.
    flushed: AtomicU64,
    /// A thread is leading a round.
    leader: AtomicBool,
    /// The path of the first fatal flush error; read without a lock.
    poisoned: OnceLock<PathBuf>,
}

impl GroupCommit {
    pub(super) fn new(flushed: u64) -> GroupCommit {
        GroupCommit {
            flushed: AtomicU64::new(flushed),
            leader: AtomicBool::new(false),
            poisoned: OnceLock::new(),
        }
    }

    /// Everything before this is durable (no lock taken).
    pub(super) fn flushed(&self) -> u64 {
        self.flushed.load(SeqCst)
    }

    /// The parking lot's key: this writer's address.
    fn key(&self) -> usize {
        &self.flushed as *const AtomicU64 as usize
    }

    fn check_poison(&self) -> Result<()> {
        if let Some(path) = self.poisoned.get() {
            return Err(Error::Poisoned { path: path.clone() });
        }
        Ok(())
    }

    /// Returns once `upto` is durable, or once this thread is to lead the
    /// round that makes it so.
    pub(super) fn wait_turn(&self, upto: u64) -> Result<Turn> {
        // A token is a usize; an LSN past it (never on 64-bit) waits for
        // every round, which is only slower.
        let token = ParkToken(usize::try_from(upto).unwrap_or(usize::MAX));
        loop {
            self.check_poison()?;
            if self.flushed() >= upto {
                return Ok(Turn::Covered);
            }
            if self
                .leader
                .compare_exchange(false, true, SeqCst, SeqCst)
                .is_ok()
            {
                let flushed = self.flushed();
                if flushed >= upto {
                    // A round ended between the check and the exchange:
                    // hand the turn on as any leader does.
                    self.wake_after_round();
                    return Ok(Turn::Covered);
                }
                return Ok(Turn::Lead { flushed });
            }
            let validate = || {
                self.leader.load(SeqCst) && self.flushed() < upto && self.poisoned.get().is_none()
            };
            // SAFETY: the key is this writer's address, the callbacks do not
            // panic and call nothing of the parking lot.
            unsafe {
                parking_lot_core::park(self.key(), validate, || {}, |_, _| {}, token, None);
            }
        }
    }

    /// Ends the leader's round: `Ok(target)` made everything before
    /// `target` durable; `Err(Some(path))` was fatal (every later flush
    /// fails, naming `path`); `Err(None)` failed without harm (a waiter
    /// tries again).
    pub(super) fn end_round(&self, outcome: std::result::Result<u64, Option<PathBuf>>) {
        match outcome {
            Ok(target) => {
                // fetch_max: the flushed position never goes back.
                self.flushed.fetch_max(target, SeqCst);
            }
            Err(Some(path)) => {
                // The first fatal error names the path; later ones add nothing.
                let _ = self.poisoned.set(path);
            }
            Err(None) => {}
        }
        self.wake_after_round();
    }

    /// Clears the leader flag and wakes the waiters now durable, and the
    /// oldest one that is not, to lead (all of them after a fatal error).
    fn wake_after_round(&self) {
        self.leader.store(false, SeqCst);
        let flushed = self.flushed();
        let all = self.poisoned.get().is_some();
        let mut next_leader_woken = false;
        let filter = |ParkToken(upto): ParkToken| {
            if all || upto as u64 <= flushed {
                FilterOp::Unpark
            } else if !next_leader_woken {
                next_leader_woken = true;
                FilterOp::Unpark
            } else {
                FilterOp::Skip
            }
        };
        // SAFETY: as in `wait_turn`; the callbacks do not panic.
        unsafe {
            parking_lot_core::unpark_filter(self.key(), filter, |_| DEFAULT_UNPARK_TOKEN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn a_lone_flush_leads_then_is_covered() {
        let g = GroupCommit::new(100);
        assert_eq!(g.wait_turn(50).unwrap(), Turn::Covered);
        assert_eq!(g.wait_turn(150).unwrap(), Turn::Lead { flushed: 100 });
        g.end_round(Ok(200));
        assert_eq!(g.flushed(), 200);
        assert_eq!(g.wait_turn(150).unwrap(), Turn::Covered);
    }

    #[test]
    fn a_fatal_round_fails_every_later_flush() {
        let g = GroupCommit::new(0);
        assert_eq!(g.wait_turn(10).unwrap(), Turn::Lead { flushed: 0 });
        g.end_round(Err(Some(PathBuf::from("wal/0"))));
        match g.wait_turn(10) {
            Err(Error::Poisoned { path }) => assert_eq!(path, PathBuf::from("wal/0")),
            other => panic!("{other:?}"),
        }
    }

    /// Many threads ask for growing LSNs; leaders "flush" up to the highest
    /// LSN asked so far. Every thread must return with its LSN durable,
    /// no two leaders may overlap, and nobody may sleep forever (the test
    /// would hang).
    #[test]
    fn every_waiter_returns_covered_and_leaders_never_overlap() {
        const THREADS: usize = 16;
        const ASKS: u64 = 2_000;
        let g = Arc::new(GroupCommit::new(0));
        let next_lsn = Arc::new(AtomicU64::new(1));
        let leading = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (g, next_lsn, leading) = (g.clone(), next_lsn.clone(), leading.clone());
                std::thread::spawn(move || {
                    for _ in 0..ASKS {
                        let upto = next_lsn.fetch_add(1, SeqCst);
                        loop {
                            match g.wait_turn(upto).unwrap() {
                                Turn::Covered => break,
                                Turn::Lead { flushed } => {
                                    assert!(flushed < upto);
                                    assert_eq!(leading.fetch_add(1, SeqCst), 0, "two leaders");
                                    let target = next_lsn.load(SeqCst);
                                    std::thread::yield_now();
                                    leading.fetch_sub(1, SeqCst);
                                    g.end_round(Ok(target));
                                }
                            }
                        }
                        assert!(g.flushed() >= upto);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(g.flushed() >= THREADS as u64 * ASKS);
    }

    /// A round that fails without harm wakes a waiter to try again.
    #[test]
    fn a_failed_round_hands_the_turn_to_a_waiter() {
        let g = Arc::new(GroupCommit::new(0));
        assert_eq!(g.wait_turn(10).unwrap(), Turn::Lead { flushed: 0 });
        let waiter = {
            let g = g.clone();
            std::thread::spawn(move || g.wait_turn(20).unwrap())
        };
        // Let the waiter park (if it has not yet, it finds no leader).
        std::thread::sleep(std::time::Duration::from_millis(20));
        g.end_round(Err(None));
        assert_eq!(waiter.join().unwrap(), Turn::Lead { flushed: 0 });
    }
}
