//! Settings that may change from one opening to the next (the creation
//! settings, fixed for a database's life, are in [`crate::settings`]).

use crate::settings::RequestedCreationSettings;
use std::time::Duration;

/// Settings that may change from one opening to the next.
#[derive(Clone, Debug)]
pub struct Options {
    /// Creation settings: used by [`Database::create`](crate::Database::create);
    /// on [`Database::open`](crate::Database::open) each one given must match
    /// the database.
    pub creation: RequestedCreationSettings,
    /// `buffer_pool_size` in bytes (default 128 MB; at least 16 pages).
    pub buffer_pool_size: u64,
    /// `synchronous_commit`: commit returns only when durable (default on).
    /// Off: commits return at once and a WAL writer flushes every 10 ms; a
    /// crash may lose the last commits, never consistency.
    pub synchronous_commit: bool,
    /// Most rows one transaction may write (default 10,000).
    pub max_write_set_rows: usize,
    /// Most bytes one transaction may write (default 16 MB).
    pub max_write_set_bytes: usize,
    /// `max_wal_size` in bytes (default 1 GB): a checkpoint starts when the
    /// WAL written since the last redo point reaches half of it, so that
    /// about this much WAL is kept (as PostgreSQL's soft limit).
    pub max_wal_size: u64,
    /// `checkpoint_timeout` (default 300 s): the longest time between
    /// automatic checkpoints.
    pub checkpoint_timeout: Duration,
    /// `deadlock_timeout` (default 1 s, as PostgreSQL): how long a
    /// transaction waits for a row lock before it checks for a deadlock.
    pub deadlock_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            creation: RequestedCreationSettings::default(),
            buffer_pool_size: 128 * 1024 * 1024,
            synchronous_commit: true,
            max_write_set_rows: 10_000,
            max_write_set_bytes: 16 * 1024 * 1024,
            max_wal_size: 1024 * 1024 * 1024,
            checkpoint_timeout: Duration::from_secs(300),
            deadlock_timeout: crate::txn::lock::DEFAULT_DEADLOCK_TIMEOUT,
        }
    }
}
