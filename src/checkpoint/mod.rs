//! Checkpoints: the procedure that bounds recovery, its WAL record, the
//! redo point it owns, and the background thread that starts it; and the
//! background writer (`bgwriter.rs`), which cleans frames ahead of the
//! clock hand between checkpoints.
//!
//! A checkpoint (1) moves the redo point to the WAL's insert position,
//! (2) writes every page dirty at that moment (sorted by file and block
//! with `checkpoint_sort`; pages others write meanwhile count as done),
//! asking the kernel to start writeback every `checkpoint_flush_after`
//! pages, (3) fsyncs the data files one by one, (4) logs a checkpoint
//! record naming the redo point and flushes it, (5) makes the control file
//! name that record (an atomic replacement), (6) only then recycles WAL
//! segments before the redo point. Automatic checkpoints (timed, WAL) are
//! spread over `checkpoint_completion_target` of the interval
//! (`pacing.rs`); the others run at full speed.
//!
//! Rules:
//! - The redo point only moves forward (`RedoPoint::advance` asserts it).
//! - A commit holds the redo point shared from its image decision until its
//!   record is inserted (`crate::protect`), so a record never lands after a
//!   new redo point without the image the new point requires.
//! - One checkpoint at a time. A failed fsync in one stops the engine: a
//!   later checkpoint must never succeed over writes the kernel dropped.

pub(crate) mod background;
pub(crate) mod bgwriter;
pub(crate) mod pacing;
pub(crate) mod procedure;
pub mod record;
#[cfg(test)]
mod tests;

// The shared state lives with the engine, which holds it; the procedure here uses it.
pub use crate::engine::bgwriter_state::BgWriterStats;
pub use crate::engine::checkpoint_state::{CheckpointLog, CheckpointStats, Reason};
pub use record::{CheckpointInfo, CHECKPOINT_INFO_SIZE};
