//! The embedded database's API: open, tables, transactions, checkpoints,
//! statistics, close.
//!
//! ```no_run
//! use untorn::{Database, Options};
//! let dir = tempfile::tempdir().unwrap();
//! let db = Database::create(dir.path(), Options::default()).unwrap();
//! let accounts = db.create_table("accounts").unwrap();
//! let mut tx = db.begin();
//! tx.insert(&accounts, &untorn::key_u64(1), b"balance=100").unwrap();
//! tx.commit().unwrap(); // durable when it returns
//! db.close().unwrap();
//! ```
//!
//! - [`directory`]: creating a database directory, reading its control file;
//! - `startup`: the opening sequence, recovery included (numbered there);
//! - `catalog`: tables by name, created and dropped.

mod catalog;
pub mod directory;
mod startup;

pub use crate::options::Options;
pub use crate::table::{key_u64, Table, CATALOG_FILE_ID};
pub use catalog::TableLocks;
pub use startup::{sync_after_unclean_shutdown, StartupSync};

use crate::checkpoint::{self, Reason};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::file::posix::PosixFileSystem;
use crate::file::IoStats;
use crate::file::{FileSystem, Issuer};
use crate::lsn::Lsn;
use crate::recovery::RecoveryReport;
use crate::stats::{self, Statistics};
use crate::txn::{EngineRef, Transaction};
use std::path::Path;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::thread::JoinHandle;

/// An open database. Shareable between threads (`&Database` is `Sync`).
pub struct Database {
    pub(crate) engine: Arc<Engine>,
    /// The checkpointer, background writer and WAL writer threads.
    background: Vec<JoinHandle<()>>,
    /// What recovery did at this opening.
    pub recovery: RecoveryReport,
    /// The statistics totals of earlier openings (since the last crash).
    pub(crate) earlier_stats: Statistics,
}

impl Database {
    /// Creates a new database in `dir` (which must not exist or be empty)
    /// and opens it. Like [`Database::open`], it holds the directory's
    /// lock until dropped.
    pub fn create(dir: &Path, options: Options) -> Result<Database> {
        let io_stats = Arc::new(IoStats::default());
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::new(io_stats.clone()));
        Self::create_with(fs, io_stats, dir, options)
    }

    /// [`Database::create`] on a given file layer, which records into `io_stats`.
    pub fn create_with(
        fs: Arc<dyn FileSystem>,
        io_stats: Arc<IoStats>,
        dir: &Path,
        options: Options,
    ) -> Result<Database> {
        let mut settings = options.creation.or_defaults();
        if options.creation.sector_size.is_none() {
            settings.sector_size = fs
                .sector_size(dir)
                .unwrap_or(crate::settings::SAFE_SECTOR_SIZE);
        }
        let (_, lock) = directory::create(&fs, dir, settings)?;
        startup::open(fs, io_stats, dir, options, lock)
    }

    /// Opens an existing database, recovering it if it was not shut down
    /// cleanly. Creation settings given in `options` must match it.
    /// The opening holds the directory's lock (`untorn.lock`) until the
    /// database is closed or dropped: a second opening of the directory,
    /// in this process or another, is refused with
    /// [`Error::InUse`] naming the holder.
    pub fn open(dir: &Path, options: Options) -> Result<Database> {
        let io_stats = Arc::new(IoStats::default());
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::new(io_stats.clone()));
        Self::open_with(fs, io_stats, dir, options)
    }

    /// [`Database::open`] on a given file layer (the crash laboratory's),
    /// which records into `io_stats`.
    pub fn open_with(
        fs: Arc<dyn FileSystem>,
        io_stats: Arc<IoStats>,
        dir: &Path,
        options: Options,
    ) -> Result<Database> {
        let lock = directory::lock_for_opening(fs.as_ref(), dir)?;
        startup::open(fs, io_stats, dir, options, lock)
    }

    /// The settings of this database, with the torn-page protection in
    /// force (which an opening may have switched).
    pub fn settings(&self) -> crate::settings::CreationSettings {
        let mut settings = self.engine.settings.clone();
        settings.torn_page_protection = self.engine.protection();
        settings
    }

    /// The longest row (value) a table of this database takes: a quarter
    /// of a leaf, so that a split always finds room.
    pub fn max_row_len(&self) -> usize {
        crate::btree::node::max_value_len(self.engine.settings.page_size as usize)
    }

    /// Starts a transaction.
    pub fn begin(&self) -> Transaction<'_> {
        Transaction::new(
            EngineRef::Borrowed(&self.engine),
            self.engine.allocate_xid(),
        )
    }

    /// Starts a transaction that shares the engine instead of borrowing
    /// the database, so it can be kept beside an `Arc<Database>` (a SQL
    /// session's open transaction block). It must end before the database
    /// is closed: after `close` its commit fails.
    pub fn begin_shared(&self) -> Transaction<'static> {
        Transaction::new(
            EngineRef::Shared(self.engine.clone()),
            self.engine.allocate_xid(),
        )
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Result<Table> {
        let id = self.engine.catalog.read().get(name).copied();
        id.map(|file_id| Table {
            name: name.to_string(),
            file_id,
        })
        .ok_or_else(|| Error::NoSuchTable(name.to_string()))
    }

    /// Every table, by name.
    pub fn tables(&self) -> Vec<Table> {
        let mut v: Vec<Table> = self
            .engine
            .catalog
            .read()
            .iter()
            .map(|(n, id)| Table {
                name: n.clone(),
                file_id: *id,
            })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Rows per transaction when loading in bulk. Each commit pins its
    /// leaves: keep a batch well inside the pool (and the write-set limit).
    pub(crate) fn bulk_batch_rows(&self) -> usize {
        let engine = &*self.engine;
        engine
            .options
            .max_write_set_rows
            .min(1000)
            .min(engine.pool.nframes() / 4)
            .max(1)
    }

    /// Loads rows in bounded transactions without waiting for each to be
    /// durable; returns when all are. Keys need not be sorted; existing keys
    /// are replaced.
    pub fn bulk_load<I, K, V>(&self, table: &Table, rows: I) -> Result<u64>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let batch = self.bulk_batch_rows();
        let mut tx = self.begin();
        let (mut n, mut in_tx, mut last) = (0u64, 0usize, Lsn::INVALID);
        for (k, v) in rows {
            tx.upsert(table, k.as_ref(), v.as_ref())?;
            n += 1;
            in_tx += 1;
            if in_tx == batch {
                last = last.max(crate::txn::commit_nowait(tx)?);
                tx = self.begin();
                in_tx = 0;
            }
        }
        last = last.max(crate::txn::commit_nowait(tx)?);
        if last.is_valid() {
            self.engine.wal.flush(last, Issuer::Client)?;
        }
        Ok(n)
    }

    /// Reads every table's pages into the buffer pool in a fixed order
    /// until the pool is full: level by level from the roots (inner nodes
    /// first, which every descent needs), and within a level one block of
    /// each table in turn, tables by name; it stops when no frame is free,
    /// so nothing it read is evicted. Two openings of the same files start
    /// with the same pages cached, so a benchmark's configurations start
    /// alike. Returns the pages read.
    pub fn prewarm(&self) -> Result<usize> {
        use crate::btree::{node, tree, Tree};
        let pool = &self.engine.pool;
        let trees: Vec<Tree<'_>> = self
            .tables()
            .iter()
            .map(|t| Tree::new(pool, t.file_id))
            .collect();
        let mut level: Vec<Vec<u32>> = Vec::with_capacity(trees.len());
        for t in &trees {
            level.push(vec![t.root(Issuer::Client)?.0]);
        }
        // A damaged tree may point a child back at an ancestor: each block
        // is read once, so such a cycle cannot keep this loop going.
        let mut seen: Vec<std::collections::HashSet<u32>> =
            vec![std::collections::HashSet::new(); trees.len()];
        let mut read = 0;
        while level.iter().any(|l| !l.is_empty()) {
            let mut below = vec![Vec::new(); trees.len()];
            let widest = level.iter().map(Vec::len).max().unwrap_or(0);
            for i in 0..widest {
                for (t, tree) in trees.iter().enumerate() {
                    let Some(&block) = level[t].get(i) else {
                        continue;
                    };
                    if !seen[t].insert(block) {
                        continue;
                    }
                    if pool.free_frames() == 0 {
                        return Ok(read);
                    }
                    let page = pool.pin(tree.page(block), Issuer::Client)?.into_read();
                    read += 1;
                    let b = page.bytes();
                    if tree::is_node(b) && !node::is_leaf(b) {
                        below[t].extend((0..node::count(b)).map(|c| node::child_at(b, c)));
                    }
                }
            }
            level = below;
        }
        Ok(read)
    }

    /// Runs a checkpoint now.
    pub fn checkpoint(&self) -> Result<Lsn> {
        checkpoint::procedure::run(&self.engine, Reason::Requested).map(|c| c.redo)
    }

    /// Runs a checkpoint now, spread over `checkpoint_completion_target`
    /// of `checkpoint_timeout` as an automatic one is (PostgreSQL's
    /// checkpoint requested without "immediate"). Returns what it did.
    pub fn checkpoint_spread(&self) -> Result<checkpoint::CheckpointLog> {
        checkpoint::procedure::run_paced(&self.engine, Reason::Requested, true)
    }

    /// Checkpointer figures since opening, with a line per checkpoint.
    pub fn checkpoint_stats(&self) -> checkpoint::CheckpointStats {
        self.engine.checkpoint.stats.lock().clone()
    }

    /// Background writer figures since opening.
    pub fn bgwriter_stats(&self) -> checkpoint::BgWriterStats {
        self.engine.bgwriter.stats()
    }

    /// WAL figures.
    pub fn wal_stats(&self) -> crate::wal::WalStats {
        self.engine.wal.stats()
    }

    /// I/O figures per issuer and file kind.
    pub fn io_stats(&self) -> &Arc<IoStats> {
        &self.engine.io_stats
    }

    /// Buffer pool figures.
    pub fn buffer_stats(&self) -> &crate::buffer::BufferStats {
        &self.engine.pool.stats
    }

    /// Every counter, totals since the last crash (kept across clean
    /// shutdowns), grouped like PostgreSQL's pg_stat views.
    pub fn statistics(&self) -> Statistics {
        let e = &*self.engine;
        Statistics::collect(stats::Sources {
            wal: e.wal.stats(),
            io: &e.io_stats,
            buffer: &e.pool.stats,
            checkpoints: self.checkpoint_stats(),
            recovery: &self.recovery,
            double_writes: &e.double_write_stats,
        })
        .plus(&self.earlier_stats)
    }

    /// Number of checkpoints completed since opening.
    pub fn checkpoints(&self) -> u64 {
        let stats = self.engine.checkpoint.stats.lock();
        stats.timed + stats.requested
    }

    /// Number of checkpoints started since opening (one more than
    /// [`Database::checkpoints`] while one runs).
    pub fn checkpoints_started(&self) -> u64 {
        self.engine.checkpoint.started.load(Relaxed)
    }

    /// The running checkpoint's progress, 0 to 1 (pages written and files
    /// fsynced of those it has to); `None` when none runs.
    pub fn checkpoint_progress(&self) -> Option<f64> {
        let (done, units) = self.engine.checkpoint.progress()?;
        Some((done as f64 / units as f64).min(1.0))
    }

    /// A new temporary file in the database's `spill/` directory, removed
    /// when dropped (file/temp.rs), bounded by `temp_file_limit`.
    pub(crate) fn temp_file(&self) -> Result<crate::file::temp::TempFile> {
        let e = &self.engine;
        crate::file::temp::TempFile::create(
            &e.fs,
            &e.dir.join(crate::txn::spill::SPILL_DIR),
            e.options.temp_file_limit,
        )
    }

    /// The database's directory.
    pub fn directory(&self) -> &Path {
        &self.engine.dir
    }

    /// Closes cleanly: a shutdown checkpoint, control file "shut down",
    /// then the statistics saved (a failure to save them is only logged).
    pub fn close(mut self) -> Result<()> {
        self.stop_background();
        self.engine.refuse_commits();
        checkpoint::procedure::run(&self.engine, Reason::Shutdown)?;
        // Saved after the shutdown checkpoint, naming it, as PostgreSQL
        // writes pg_stat/ at shutdown: an opening uses them only if the
        // control file still names that checkpoint.
        let at = self.engine.control.lock().checkpoint_lsn;
        stats::save_at_close(
            self.engine.fs.as_ref(),
            &self.engine.dir,
            at,
            &self.statistics(),
        );
        Ok(())
    }

    fn stop_background(&mut self) {
        self.engine.stop.store(true, SeqCst);
        for h in self.background.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // Without close(): like a crash, except that commits already
        // returned with synchronous_commit off are flushed.
        self.stop_background();
        let _ = self
            .engine
            .wal
            .flush(self.engine.wal.insert_lsn(), Issuer::WalWriter);
    }
}
