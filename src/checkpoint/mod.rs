//! Checkpoints: the procedure that bounds recovery, its WAL record, the
//! redo point it owns, and the background thread that starts it.
//!
//! A checkpoint (1) moves the redo point to the WAL's insert position,
//! (2) writes every page dirty at that moment, (3) fsyncs the data files,
//! (4) logs a checkpoint record naming the redo point and flushes it,
//! (5) makes the control file name that record (an atomic replacement),
//! (6) only then recycles WAL segments before the redo point.
//!
//! Rules:
//! - The redo point only moves forward ([`RedoPoint::advance`] asserts it).
//! - A commit holds the redo point shared from its image decision until its
//!   record is inserted (`crate::protect`), so a record never lands after a
//!   new redo point without the image the new point requires.
//! - One checkpoint at a time. A failed fsync in one stops the engine: a
//!   later checkpoint must never succeed over writes the kernel dropped.

pub(crate) mod background;
pub(crate) mod procedure;
pub mod record;

pub use record::{CheckpointInfo, CHECKPOINT_INFO_SIZE};

use crate::Lsn;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::sync::atomic::AtomicU64;
use std::time::Instant;

/// Why a checkpoint runs (log_checkpoints' "checkpoint starting: ...").
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
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

/// Where redo starts: the redo point of the checkpoint in progress, or of
/// the last one.
#[derive(Default)]
pub(crate) struct RedoPoint(RwLock<Lsn>);

impl RedoPoint {
    /// Holds the redo point where it is until the guard is dropped.
    pub(crate) fn hold(&self) -> RwLockReadGuard<'_, Lsn> {
        self.0.read()
    }

    /// Moves the redo point to `to`, waiting out every holder.
    fn advance(&self, to: Lsn) {
        let mut point = self.0.write();
        assert!(
            to >= *point,
            "redo point moving back from {} to {to}",
            *point
        );
        *point = to;
    }
}

/// The checkpointer's state in the engine.
pub(crate) struct CheckpointState {
    pub(crate) redo_point: RedoPoint,
    one_at_a_time: Mutex<()>,
    /// Checkpoints completed and started since opening.
    pub(crate) completed: AtomicU64,
    pub(crate) started: AtomicU64,
    /// The redo point of the last checkpoint, and when it started: what
    /// the triggers measure from.
    last: Mutex<(Lsn, Instant)>,
}

impl Default for CheckpointState {
    fn default() -> Self {
        CheckpointState {
            redo_point: RedoPoint::default(),
            one_at_a_time: Mutex::new(()),
            completed: AtomicU64::new(0),
            started: AtomicU64::new(0),
            last: Mutex::new((Lsn::INVALID, Instant::now())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_redo_point_moves_forward() {
        let p = RedoPoint::default();
        p.advance(Lsn(10));
        p.advance(Lsn(10));
        assert_eq!(*p.hold(), Lsn(10));
    }

    #[test]
    #[should_panic(expected = "redo point moving back")]
    fn the_redo_point_never_moves_back() {
        let p = RedoPoint::default();
        p.advance(Lsn(10));
        p.advance(Lsn(9));
    }
}
