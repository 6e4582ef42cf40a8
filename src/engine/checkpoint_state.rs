//! The checkpointer's shared state, held by the engine: the redo point
//! commits hold, one checkpoint at a time, progress, what the triggers
//! measure from, and the statistics (pg_stat_checkpointer). The procedure
//! that changes it is `crate::checkpoint`.

use crate::lsn::Lsn;
use crate::striped::StripedRwLock;
use parking_lot::{Mutex, RwLockReadGuard};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Duration;

/// Why a checkpoint runs (log_checkpoints' "checkpoint starting: ...").
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The end of opening (after recovery, if any).
    EndOfRecovery,
    /// `checkpoint_timeout` passed.
    Timed,
    /// The WAL since the last redo point reached `max_wal_size / 2`.
    Wal,
    /// Asked for through `Database::checkpoint`.
    Requested,
    /// A clean close.
    Shutdown,
}

impl Reason {
    /// Automatic checkpoints are spread; the others run at full speed.
    pub fn is_spread(self) -> bool {
        matches!(self, Reason::Timed | Reason::Wal)
    }
}

/// What one checkpoint did (PostgreSQL's log_checkpoints line).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointLog {
    pub reason: Reason,
    pub redo: Lsn,
    /// When it started, in seconds of the engine's clock since opening.
    pub started_s: f64,
    /// Pages dirty at the start, and those this checkpoint wrote (the rest
    /// were written by others meanwhile).
    pub pages_marked: u64,
    pub pages_written: u64,
    /// Data files fsynced.
    pub files_synced: u64,
    /// Seconds writing (naps included), fsyncing, and in all.
    pub write_s: f64,
    pub sync_s: f64,
    pub total_s: f64,
    /// WAL bytes between the previous checkpoint's redo point and this one's.
    pub distance: u64,
}

/// Checkpointer statistics since opening (pg_stat_checkpointer).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointStats {
    /// Started by `checkpoint_timeout`.
    pub timed: u64,
    /// Every other reason (WAL, asked for, end of recovery, shutdown).
    pub requested: u64,
    pub pages_written: u64,
    pub write_s: f64,
    pub sync_s: f64,
    /// The checkpoints completed, oldest first (the last 1,000).
    pub log: Vec<CheckpointLog>,
}

/// How many checkpoint lines [`CheckpointStats::log`] keeps.
const LOG_KEPT: usize = 1000;

impl CheckpointStats {
    pub(crate) fn add(&mut self, c: CheckpointLog) {
        if c.reason == Reason::Timed {
            self.timed += 1;
        } else {
            self.requested += 1;
        }
        self.pages_written += c.pages_written;
        self.write_s += c.write_s;
        self.sync_s += c.sync_s;
        if self.log.len() == LOG_KEPT {
            self.log.remove(0);
        }
        self.log.push(c);
    }
}

/// Where redo starts: the redo point of the checkpoint in progress, or of
/// the last one. Every commit holds it shared, so it is striped: commits
/// on different cores share no lock word.
#[derive(Default)]
pub(crate) struct RedoPoint(StripedRwLock<Lsn>);

impl RedoPoint {
    pub(crate) fn new(redo: Lsn) -> RedoPoint {
        RedoPoint(StripedRwLock::new(redo))
    }

    /// Holds the redo point where it is until the guard is dropped.
    pub(crate) fn hold(&self) -> RwLockReadGuard<'_, Lsn> {
        self.0.read()
    }

    /// Moves the redo point to `to()`, read once every holder is gone:
    /// a commit holding it may still insert, so the new point must be read
    /// after, never before, it lets go. Returns (old, new).
    pub(crate) fn advance(&self, to: impl FnOnce() -> Lsn) -> (Lsn, Lsn) {
        let mut point = self.0.write();
        let (old, new) = (*point.get(), to());
        assert!(new >= old, "redo point moving back from {old} to {new}");
        point.update(|p| *p = new);
        (old, new)
    }
}

/// The checkpointer's state in the engine.
pub(crate) struct CheckpointState {
    pub(crate) redo_point: RedoPoint,
    pub(crate) one_at_a_time: Mutex<()>,
    /// Checkpoints started since opening (those completed are in `stats`).
    pub(crate) started: AtomicU64,
    /// The running checkpoint's work units done (high 32 bits) of its
    /// units to do (low 32 bits); 0 when none runs. One word, so a reader
    /// never sees the two halves of different checkpoints.
    pub(crate) progress: AtomicU64,
    /// The redo point of the last checkpoint, and when it started (engine
    /// clock): what the triggers measure from.
    pub(crate) last: Mutex<(Lsn, Duration)>,
    /// Threads waiting to run a checkpoint of their own: a spread one in
    /// progress stops napping.
    pub(crate) waiting: AtomicUsize,
    pub(crate) stats: Mutex<CheckpointStats>,
}

impl CheckpointState {
    /// Notes `done` of `units` work units of the running checkpoint done
    /// (0 of 0: none runs).
    pub(crate) fn set_progress(&self, done: usize, units: usize) {
        let clamp = |n: usize| n.min(u32::MAX as usize) as u64;
        self.progress.store(
            clamp(done) << 32 | clamp(units),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The running checkpoint's work done, as (units done, units to do).
    pub(crate) fn progress(&self) -> Option<(u64, u64)> {
        let p = self.progress.load(std::sync::atomic::Ordering::Relaxed);
        let units = p & u64::from(u32::MAX);
        (units > 0).then_some((p >> 32, units))
    }

    /// The state of an engine opened with its last redo point at `redo`,
    /// at `now` on the engine's clock.
    pub(crate) fn starting_at(redo: Lsn, now: Duration) -> Self {
        CheckpointState {
            redo_point: RedoPoint::new(redo),
            one_at_a_time: Mutex::new(()),
            started: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            last: Mutex::new((redo, now)),
            waiting: AtomicUsize::new(0),
            stats: Mutex::new(CheckpointStats::default()),
        }
    }
}
