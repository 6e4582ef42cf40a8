//! Double writes (InnoDB's doublewrite buffer): the home of
//! `torn_page_protection = double_writes` (issue 11).
//!
//! Built so far: the on-disk format of the double-write area ([`area`],
//! docs/FORMAT.md "The double-write area"), recovery's restore rule as a
//! pure function ([`restore`]), and recovery's reading of the area before
//! redo ([`recover`]), so a database whose `dw/` holds batches is repaired
//! from them. Nothing writes the area yet: the mode stays refused
//! ([`not_built`]) before anything is written, since running it unprotected
//! would break the control file's promise.
//!
//! The design the coming parts follow:
//! - Shards, one per writer kind (checkpointer, background writer, client
//!   evictions), each its own file `dw/shard-<n>`, so writers never queue
//!   on one lock; several batches in flight per shard.
//! - A batch (header block + page images) is written in one sequential
//!   write after the WAL is flushed past every page's LSN, and fsynced once
//!   (several batches may share the fsync); only then are its pages written
//!   in place, through
//!   [`PageWriteProtection`](crate::buffer::PageWriteProtection).
//! - A slot is reused only after an fsync of its page's data file that
//!   began after that page's in-place write completed.
//! - No fsync per page on the eviction path: a client that must write a
//!   dirty victim joins a batch in progress, as commits join a group commit.
//! - Checkpoints in two phases: the sorted dirty set through the area in
//!   large batches, then the data writes; their final fsync frees the slots.
//! - Recovery, before redo: [`area::scan_shard`] every shard, then
//!   [`restore::plan_restore`], write the planned copies, fsync, redo
//!   ([`recover::restore_before_redo`]).

pub mod area;
pub mod recover;
pub mod restore;

use crate::error::Error;

/// The error for a database or setting asking for double writes; `advice`
/// says what to do instead.
pub fn not_built(advice: &str) -> Error {
    Error::InvalidSetting {
        name: "torn_page_protection",
        detail: format!("double_writes is not implemented in this build yet; {advice}"),
    }
}
