//! The double-write counters of one opening, by shard number.
//!
//! They live apart from `protect::double_writes::DoubleWrites`: the
//! opening creates them and the engine holds them, so figures counted
//! under `double_writes` during recovery stay readable after a switch away
//! from it, and a switch into it counts into the same place.
//! `crate::stats` reads them into its `double_write` view. Indexed by a
//! shard's number (`Shard::number`), so the engine needs nothing of
//! protect/.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Counters of one shard.
#[derive(Default, Debug)]
pub struct ShardStats {
    /// Page images written to the area.
    pub pages: AtomicU64,
    /// Batches (header blocks) written.
    pub batches: AtomicU64,
    /// Write calls (each carries one or more batches).
    pub writes: AtomicU64,
    /// fsyncs of the shard file (shared by the writes they covered).
    pub fsyncs: AtomicU64,
    /// Data-file fsyncs a writer ran to reuse slots whose pages were not
    /// yet durable in place.
    pub slot_syncs: AtomicU64,
    /// Times a writer waited for an entry in flight to free its blocks.
    pub slot_waits: AtomicU64,
    /// Data-file fsyncs the background syncer ran ahead of the writers
    /// (`double_write_sync_ahead`).
    pub syncs_ahead: AtomicU64,
    /// Pages this writer stored in `dw/deferred` instead of writing them
    /// (`double_write_defer_in_place`).
    pub deferred: AtomicU64,
    /// Deferred pages this writer wrote back in place.
    pub written_back: AtomicU64,
    /// fsyncs of `dw/deferred` that made a write-back's slots its pages'
    /// double-write copies (one per write-back).
    pub deferred_fsyncs: AtomicU64,
    /// Manifests of `dw/deferred`'s durable slots written (one per
    /// checkpoint: an fsync of `dw/deferred` and one of the manifest).
    pub manifests: AtomicU64,
    /// Deferred copies this writer's writes made obsolete before their
    /// write-back (a newer copy, or the page written in place).
    pub obsolete: AtomicU64,
    /// Pages this writer's reads found in `dw/deferred` instead of their
    /// data file.
    pub reads: AtomicU64,
    /// Manifest and write-back list pages this writer wrote into
    /// `dw/deferred`: its bookkeeping, beside the page images.
    pub deferred_meta_pages: AtomicU64,
}

/// The counters of every shard, indexed by the shard's number.
#[derive(Debug, Default)]
pub struct DoubleWriteStats {
    // An Arc per shard: each shard's writer holds its own.
    shards: [Arc<ShardStats>; 3],
}

impl DoubleWriteStats {
    /// The counters of the shard numbered `number` (0, 1 or 2).
    pub fn shard(&self, number: u32) -> &ShardStats {
        &self.shards[number as usize]
    }

    /// What the writer of the shard numbered `number` counts into.
    pub(crate) fn shard_handle(&self, number: u32) -> Arc<ShardStats> {
        self.shards[number as usize].clone()
    }
}
