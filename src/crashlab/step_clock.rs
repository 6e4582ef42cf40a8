//! A clock that makes a spread checkpoint and the laboratory's workload
//! take turns, so a crash can land in the middle of a checkpoint paced
//! over time while commits go on, and the iteration still replays exactly.
//!
//! Time moves only when the engine naps on it. While a stepped checkpoint
//! runs, each nap parks the checkpointer until the workload has had its
//! turn; outside one, naps are instant (no automatic checkpoint can fall
//! due, since time stands still).

use crate::clock::ClockSource;
use parking_lot::{Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
struct Turns {
    now: Duration,
    /// A stepped checkpoint is running.
    stepping: bool,
    /// The checkpointer is napping, waiting for its turn.
    parked: bool,
    /// The workload gave the turn back.
    released: bool,
    /// The stepped checkpoint returned.
    finished: bool,
    /// Naps that ended: the workload waits for this to move, not for
    /// `parked` to fall, which the next nap may set again first.
    woken: u64,
}

#[derive(Default)]
pub struct StepClock {
    turns: Mutex<Turns>,
    changed: Condvar,
}

impl ClockSource for StepClock {
    fn now(&self) -> Duration {
        self.turns.lock().now
    }

    fn sleep(&self, d: Duration) {
        let mut t = self.turns.lock();
        t.now += d;
        if !t.stepping {
            return;
        }
        t.parked = true;
        self.changed.notify_all();
        while !t.released {
            self.changed.wait(&mut t);
        }
        t.released = false;
        t.parked = false;
        t.woken += 1;
        self.changed.notify_all();
    }
}

impl StepClock {
    /// The next checkpoint's naps take turns with the caller.
    pub fn begin(&self) {
        let mut t = self.turns.lock();
        t.stepping = true;
        t.finished = false;
    }

    /// Called by the checkpoint's thread when it returns.
    pub fn finish(&self) {
        let mut t = self.turns.lock();
        t.stepping = false;
        t.finished = true;
        self.changed.notify_all();
    }

    /// Waits for the checkpoint to nap (true: the caller's turn) or end.
    pub fn wait_turn(&self) -> bool {
        let mut t = self.turns.lock();
        while !t.parked && !t.finished {
            self.changed.wait(&mut t);
        }
        t.parked
    }

    /// Gives the turn back and waits until the checkpoint has taken it.
    pub fn resume(&self) {
        let mut t = self.turns.lock();
        let taken = t.woken + 1;
        t.released = true;
        self.changed.notify_all();
        while t.woken < taken && !t.finished {
            self.changed.wait(&mut t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    use std::sync::Arc;

    #[test]
    fn the_sleeper_and_the_caller_take_strict_turns() {
        let clock = Arc::new(StepClock::default());
        let steps = AtomicU64::new(0);
        clock.begin();
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..50 {
                    // Only the sleeper runs between two turns.
                    assert_eq!(steps.load(SeqCst), i);
                    clock.sleep(Duration::from_millis(100));
                }
                clock.finish();
            });
            while clock.wait_turn() {
                steps.fetch_add(1, SeqCst);
                clock.resume();
            }
        });
        assert_eq!(steps.load(SeqCst), 50);
        assert_eq!(clock.now(), Duration::from_secs(5));
        // Outside a stepped checkpoint a nap is instant.
        clock.sleep(Duration::from_secs(1));
        assert_eq!(clock.now(), Duration::from_secs(6));
    }
}
