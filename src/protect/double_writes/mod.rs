//! Double writes (InnoDB's doublewrite buffer): the home of
//! `torn_page_protection = double_writes` (issue 11).
//!
//! - [`area`]: the area's bytes (docs/FORMAT.md "The double-write area").
//! - [`writer`]: the write path, a
//!   [`PageWriteProtection`](crate::buffer::PageWriteProtection): every
//!   batch of pages goes to its writer's shard (checkpointer, background
//!   writer, client evictions: writers never queue on one lock) in one
//!   sequential write after the WAL is flushed past every page's LSN, is
//!   fsynced (a group fsync shared by the shard's writers), and only then
//!   written in place.
//! - [`ring`]: where batches go in a shard, and the reuse rule: a slot is
//!   reused only after an fsync of its page's data file that began after
//!   that page's in-place write returned.
//! - [`deferred`]: `double_write_defer_in_place`, evicted pages kept in
//!   `dw/deferred` across checkpoints, written in place from their slots
//!   only when the file is half full, at shutdown or at a switch (the I/O
//!   in `write_back.rs`); `deferred_index.rs` answers pool misses'
//!   lookups without its mutex.
//! - [`manifest`]: which deferred slots a checkpoint made durable, trusted
//!   by recovery at any LSN (deferred pages stay across checkpoints).
//! - [`settings`]: the run-time settings, checked, in pages.
//! - [`shard_file`]: shard files created whole, checked at each opening.
//! - [`slot_set`]: `dw/deferred`'s free and named slots, a bit each.
//! - the counters by shard are the engine's (`engine/double_write_stats.rs`,
//!   re-exported here), so they outlive a protection switch.
//! - [`restore`] and [`recover`]: before redo, read every shard, keep per
//!   page the newest copy in [redo point, end of WAL], restore it over a
//!   page that is bad or not newer, fsync, then redo.
//!
//! Needs page checksums (a torn page is found by its checksum).

pub mod area;
pub mod deferred;
mod deferred_index;
pub mod deferred_scan;
pub mod manifest;
pub mod recover;
pub mod restore;
pub mod ring;
pub mod settings;
pub mod shard_file;
pub mod slot_set;
pub mod writer;

pub use crate::engine::double_write_stats::{DoubleWriteStats, ShardStats};
pub use settings::AreaSettings;
pub use writer::DoubleWrites;
