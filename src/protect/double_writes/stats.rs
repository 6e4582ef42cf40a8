//! The double-write counters of one opening, by shard.
//!
//! They live apart from [`DoubleWrites`](super::DoubleWrites): the opening
//! creates them and the engine holds them, so figures counted under
//! `double_writes` during recovery stay readable after a switch away from
//! it, and a switch into it counts into the same place. `crate::stats`
//! reads them into its `double_write` view.

use super::area::Shard;
use super::writer::ShardStats;
use std::sync::Arc;

/// The counters of every shard, indexed by [`Shard::number`].
#[derive(Debug, Default)]
pub struct DoubleWriteStats {
    // An Arc per shard: each shard's writer holds its own.
    shards: [Arc<ShardStats>; 3],
}

impl DoubleWriteStats {
    /// The counters of `shard`.
    pub fn shard(&self, shard: Shard) -> &ShardStats {
        &self.shards[shard.number() as usize]
    }

    /// What a shard's writer counts into.
    pub(crate) fn shard_handle(&self, shard: Shard) -> Arc<ShardStats> {
        self.shards[shard.number() as usize].clone()
    }
}
