//! The engine's clock: real time in production, a manual clock in tests
//! that pace work over time (a spread checkpoint), so they never wait or
//! assert on the wall clock.

use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source of time the engine can sleep on.
pub trait ClockSource: Send + Sync {
    /// Time since an arbitrary fixed start.
    fn now(&self) -> Duration;
    fn sleep(&self, d: Duration);
}

/// The clock an engine uses (real time by default).
#[derive(Clone)]
pub struct Clock(Arc<dyn ClockSource>);

impl Clock {
    /// A clock reading `source`.
    pub fn new(source: Arc<dyn ClockSource>) -> Clock {
        Clock(source)
    }

    pub fn real() -> Clock {
        Clock(Arc::new(RealClock(Instant::now())))
    }

    /// A clock that moves only when slept on, and the handle that reads it.
    pub fn manual() -> (Clock, Arc<ManualClock>) {
        let m = Arc::new(ManualClock::default());
        (Clock(m.clone()), m)
    }

    pub fn now(&self) -> Duration {
        self.0.now()
    }

    pub fn sleep(&self, d: Duration) {
        self.0.sleep(d)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::real()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

struct RealClock(Instant);

impl ClockSource for RealClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}

/// A clock whose time advances only by the sleeps made on it.
#[derive(Default)]
pub struct ManualClock {
    now: Mutex<Duration>,
}

impl ClockSource for ManualClock {
    fn now(&self) -> Duration {
        *self.now.lock()
    }
    fn sleep(&self, d: Duration) {
        *self.now.lock() += d;
        // Let other threads run, as a real sleep would.
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_slept_on() {
        let (clock, _) = Clock::manual();
        assert_eq!(clock.now(), Duration::ZERO);
        clock.sleep(Duration::from_millis(100));
        clock.sleep(Duration::from_millis(50));
        assert_eq!(clock.now(), Duration::from_millis(150));
    }
}
