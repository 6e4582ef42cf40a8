//! Spreading a checkpoint over time (PostgreSQL's CheckpointWriteDelay and
//! IsCheckpointOnSchedule).
//!
//! An automatic checkpoint should finish when `checkpoint_completion_target`
//! of the interval to the next one has passed, measured both in time
//! (`checkpoint_timeout`) and in WAL (the WAL that triggers the next one).
//! After each batch of work the checkpointer compares its progress, scaled
//! by the target, with both elapsed fractions; while ahead of both it
//! sleeps 100 ms, else it goes on at once. A checkpoint asked for (or
//! shutdown) meanwhile makes it stop sleeping.

use crate::engine::Engine;
use crate::lsn::Lsn;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// How long the checkpointer naps while ahead of schedule.
pub(crate) const NAP: Duration = Duration::from_millis(100);

/// The schedule of one checkpoint.
pub(crate) struct Schedule<'a> {
    engine: &'a Engine,
    /// False for checkpoints that run at full speed.
    spread: bool,
    start: Duration,
    start_lsn: Lsn,
}

impl<'a> Schedule<'a> {
    pub(crate) fn new(engine: &'a Engine, spread: bool, start: Duration, start_lsn: Lsn) -> Self {
        Schedule {
            engine,
            spread,
            start,
            start_lsn,
        }
    }

    /// True if `progress` (0 to 1 of this checkpoint's work) is ahead of
    /// both the time and the WAL elapsed since it started.
    pub(crate) fn on_schedule(&self, progress: f64) -> bool {
        let options = &self.engine.options;
        let progress = progress * options.checkpoint_completion_target;
        let wal = self
            .engine
            .wal
            .insert_lsn()
            .0
            .saturating_sub(self.start_lsn.0);
        let elapsed_wal = wal as f64 / options.wal_per_checkpoint().max(1) as f64;
        if progress < elapsed_wal {
            return false;
        }
        let elapsed = options.clock.now().saturating_sub(self.start);
        let elapsed_time = elapsed.as_secs_f64() / options.checkpoint_timeout.as_secs_f64();
        progress >= elapsed_time
    }

    /// Called after each batch of work: naps while ahead of schedule,
    /// unless this checkpoint runs at full speed or someone waits for it.
    /// Returns the time napped.
    pub(crate) fn pause(&self, progress: f64) -> Duration {
        let mut napped = Duration::ZERO;
        // Bounded: progress is fixed here and elapsed time only grows, so
        // the loop ends once elapsed time catches up with it.
        while self.spread && !self.hurried() && self.on_schedule(progress) {
            self.engine.options.clock.sleep(NAP);
            napped += NAP;
        }
        napped
    }

    fn hurried(&self) -> bool {
        self.engine.stop.load(Relaxed) || self.engine.checkpoint.waiting.load(Relaxed) > 0
    }
}
