//! Settings that may change from one opening to the next (the creation
//! settings, fixed for a database's life, are in [`crate::settings`]).

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::settings::RequestedCreationSettings;
use std::time::Duration;

/// The least `max_files_per_process`: fewer and one statement touching a
/// few tables would close and reopen files by the page.
pub const MIN_FILES_PER_PROCESS: usize = 8;

/// Settings that may change from one opening to the next.
#[derive(Clone, Debug)]
pub struct Options {
    /// Creation settings: used by [`Database::create`](crate::db::Database::create);
    /// on [`Database::open`](crate::db::Database::open) each one given must match
    /// the database.
    pub creation: RequestedCreationSettings,
    /// `buffer_pool_size` in bytes (default 128 MB; at least 16 pages).
    pub buffer_pool_size: u64,
    /// `synchronous_commit`: commit returns only when durable (default on).
    /// Off: commits return at once and a WAL writer flushes every 10 ms; a
    /// crash may lose the last commits, never consistency.
    pub synchronous_commit: bool,
    /// Most rows of a transaction's write set kept in memory (default
    /// 10,000); past it the write set spills to disk (txn/spill.rs).
    pub max_write_set_rows: usize,
    /// Most bytes of a transaction's write set kept in memory (default
    /// 16 MB); past it the write set spills to disk.
    pub max_write_set_bytes: usize,
    /// `temp_file_limit` in bytes (default unlimited, as PostgreSQL's -1):
    /// the most a transaction's spilled write set may take on disk. 0
    /// keeps every write set in memory: a transaction past
    /// `max_write_set_rows` or `max_write_set_bytes` fails.
    pub temp_file_limit: u64,
    /// `max_wal_size` in bytes (default 1 GB): a checkpoint starts when the
    /// WAL written since the last redo point reaches
    /// `max_wal_size / (1 + checkpoint_completion_target)`, so that about
    /// this much WAL is kept (PostgreSQL's soft limit and formula).
    pub max_wal_size: u64,
    /// `checkpoint_timeout` (default 300 s, 0.1 s to 1 day): the longest time
    /// between automatic checkpoints.
    pub checkpoint_timeout: Duration,
    /// `checkpoint_completion_target` (default 0.9, 0 to 1): an automatic
    /// checkpoint spreads its writes and fsyncs to finish when this share
    /// of the time or WAL until the next one has passed. Checkpoints asked
    /// for, at shutdown and at the end of recovery run at full speed.
    pub checkpoint_completion_target: f64,
    /// `checkpoint_sort` (default on): a checkpoint writes its pages in
    /// (file, block) order, consecutive blocks as one write; off: in buffer
    /// order, one page per write (PostgreSQL before 9.6).
    pub checkpoint_sort: bool,
    /// `checkpoint_flush_after` in pages (default 32, i.e. 256 kB of 8 kB
    /// pages, as PostgreSQL on Linux; 0 = off, at most 256): after this
    /// many pages the checkpointer asks the kernel to start writing them
    /// back (sync_file_range), so the fsyncs at the end find less to do.
    pub checkpoint_flush_after: u32,
    /// `deadlock_timeout` (default 1 s, as PostgreSQL): how long a
    /// transaction waits for a row lock before it checks for a deadlock.
    pub deadlock_timeout: Duration,
    /// `wal_compression` (default off): how full-page images are compressed.
    pub wal_compression: crate::settings::WalCompression,
    /// `bgwriter_delay` (default 200 ms, 10 ms to 10 s): the background
    /// writer's pause between rounds.
    pub bgwriter_delay: Duration,
    /// `bgwriter_lru_maxpages` (default 100, 0 = no background writer, at
    /// most 1000): the most pages one round writes.
    pub bgwriter_lru_maxpages: u32,
    /// `bgwriter_lru_multiplier` (default 2.0, 0 to 10): how many clean
    /// frames a round keeps ahead of the clock hand, as a multiple of the
    /// frames clients claimed per round lately.
    pub bgwriter_lru_multiplier: f64,
    /// `double_write_buffer_size` in bytes (default 64 MB; 2 to 65,536
    /// pages, a multiple of the page size): the area of each of the three
    /// double-write shards (`torn_page_protection = double_writes` only).
    pub double_write_buffer_size: u64,
    /// `double_write_batch_pages` (default 128; 1 to the pages one batch
    /// header describes: 169 at 4 kB, 339 at 8 kB): pages per batch header.
    pub double_write_batch_pages: u32,
    /// `double_write_eviction_pages` (default 32, 1 to 1000; InnoDB's
    /// innodb_lru_flush_size): under double writes, a client that must
    /// write a dirty victim writes it with the next dirty frames the clock
    /// sweep would take, this many pages in all, so the area's fsync is
    /// shared instead of paid per page.
    pub double_write_eviction_pages: u32,
    /// `double_write_sync_ahead` (default on): a background thread fsyncs
    /// the data files of the double-write slots to be reused next, so a
    /// writer seldom fsyncs a data file itself before reusing a slot. Off:
    /// the writers do (the crash laboratory turns it off, so an iteration
    /// replays exactly).
    pub double_write_sync_ahead: bool,
    /// `double_write_defer_in_place` (default on): a page the background
    /// writer or a client evicts is written once, to a slot of
    /// `dw/deferred`, and goes in place later, its fsynced slot serving as
    /// its double-write copy; reads of it are served from the slot
    /// meanwhile (protect::double_writes::deferred).
    pub double_write_defer_in_place: bool,
    /// `double_write_keep_deferred` (default on): deferred pages stay in
    /// `dw/deferred` across checkpoints, named in a fsynced manifest, and
    /// go in place only when the file is half full, at shutdown or at a
    /// switch of mode. Off: every checkpoint writes them in place.
    pub double_write_keep_deferred: bool,
    /// `double_write_deferred_size` in bytes (default 0: 16 times
    /// `double_write_buffer_size`; else 2 to 16,777,216 pages, a multiple
    /// of the page size): the most `dw/deferred` holds. A write-back
    /// starts when it is half taken, so size it to about twice the pages
    /// dirtied between checkpoints.
    pub double_write_deferred_size: u64,
    /// `double_write_flush_after` in pages (default 128, 0 = off, at most
    /// 65,536): before a checkpoint's fsync of `dw/deferred`, the file is
    /// written to the device in pieces of this many pages, each waited for
    /// (sync_file_range), so the fsync finds little left and the WAL's
    /// fsyncs do not queue behind a cycle's slots at once.
    pub double_write_flush_after: u32,
    /// `max_files_per_process` (default 1000, PostgreSQL's): the most data
    /// segment files open at once; past it the least recently used are
    /// closed (fsynced first where written) and open again when used.
    /// Fewer where RLIMIT_NOFILE leaves fewer descriptors free after
    /// `reserved_file_descriptors`; at least 8.
    pub max_files_per_process: usize,
    /// Descriptors kept out of `max_files_per_process`'s reach for WAL
    /// segments, double-write, spill and temporary files, and a server's
    /// sockets (default 48; `untorn serve` adds two per connection).
    pub reserved_file_descriptors: usize,
    /// The clock the engine paces work by (real time; tests use a manual one).
    pub clock: Clock,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            creation: RequestedCreationSettings::default(),
            buffer_pool_size: 128 * 1024 * 1024,
            synchronous_commit: true,
            max_write_set_rows: 10_000,
            max_write_set_bytes: 16 * 1024 * 1024,
            temp_file_limit: u64::MAX,
            max_wal_size: 1024 * 1024 * 1024,
            checkpoint_timeout: Duration::from_secs(300),
            deadlock_timeout: crate::lock_table::DEFAULT_DEADLOCK_TIMEOUT,
            checkpoint_completion_target: 0.9,
            checkpoint_sort: true,
            checkpoint_flush_after: 32,
            wal_compression: Default::default(),
            bgwriter_delay: Duration::from_millis(200),
            bgwriter_lru_maxpages: 100,
            bgwriter_lru_multiplier: 2.0,
            double_write_buffer_size: 64 * 1024 * 1024,
            double_write_batch_pages: 128,
            double_write_eviction_pages: 32,
            double_write_sync_ahead: true,
            double_write_defer_in_place: true,
            double_write_keep_deferred: true,
            double_write_deferred_size: 0,
            double_write_flush_after: 128,
            max_files_per_process: 1000,
            reserved_file_descriptors: 48,
            clock: Clock::real(),
        }
    }
}

impl Options {
    /// Refuses a value out of its range, naming the setting.
    pub fn validate(&self) -> Result<()> {
        let invalid = |name, detail: String| Err(Error::InvalidSetting { name, detail });
        let target = self.checkpoint_completion_target;
        if !(0.0..=1.0).contains(&target) {
            return invalid(
                "checkpoint_completion_target",
                format!("{target} is outside 0 to 1"),
            );
        }
        let timeout = self.checkpoint_timeout;
        if timeout < Duration::from_millis(100) || timeout > Duration::from_secs(86_400) {
            return invalid(
                "checkpoint_timeout",
                format!("{timeout:?} is outside 0.1 s to 1 day"),
            );
        }
        // Below a megabyte every few commits would start a checkpoint.
        if self.max_wal_size < 1 << 20 {
            return invalid(
                "max_wal_size",
                format!("{} bytes is below 1MB", self.max_wal_size),
            );
        }
        if self.checkpoint_flush_after > 256 {
            return invalid(
                "checkpoint_flush_after",
                format!("{} pages is more than 256", self.checkpoint_flush_after),
            );
        }
        if self.double_write_flush_after > 65_536 {
            return invalid(
                "double_write_flush_after",
                format!("{} pages is more than 65536", self.double_write_flush_after),
            );
        }
        let min_files = MIN_FILES_PER_PROCESS;
        if self.max_files_per_process < min_files {
            return invalid(
                "max_files_per_process",
                format!("{} is below {min_files}", self.max_files_per_process),
            );
        }
        let delay = self.bgwriter_delay;
        if delay < Duration::from_millis(10) || delay > Duration::from_secs(10) {
            return invalid(
                "bgwriter_delay",
                format!("{delay:?} is outside 10 ms to 10 s"),
            );
        }
        if self.bgwriter_lru_maxpages > 1000 {
            return invalid(
                "bgwriter_lru_maxpages",
                format!("{} pages is more than 1000", self.bgwriter_lru_maxpages),
            );
        }
        let multiplier = self.bgwriter_lru_multiplier;
        if !(0.0..=10.0).contains(&multiplier) {
            return invalid(
                "bgwriter_lru_multiplier",
                format!("{multiplier} is outside 0 to 10"),
            );
        }
        Ok(())
    }

    /// The WAL between automatic checkpoints: PostgreSQL's
    /// `max_wal_size / (1 + checkpoint_completion_target)`.
    pub fn wal_per_checkpoint(&self) -> u64 {
        (self.max_wal_size as f64 / (1.0 + self.checkpoint_completion_target)) as u64
    }
}
