//! The embedded database: open, tables, transactions, checkpoints, close.
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

use crate::btree::{self, smo, Tree};
use crate::buffer::{BufferPool, DataFiles, WalFlush};
use crate::checkpoint::CheckpointInfo;
use crate::control::{ControlFile, DbState};
use crate::database::{wal_config, DATA_DIR, WAL_DIR};
use crate::error::{Error, Result};
use crate::file::posix::PosixFileSystem;
use crate::file::{FileSystem, Issuer};
use crate::recovery::{self, RecoveryReport};
use crate::settings::{CreationSettings, RequestedCreationSettings};
use crate::stats::IoStats;
use crate::txn::lock::LockManager;
use crate::txn::Transaction;
use crate::wal::{RecordData, RecordKind, Wal};
use crate::Lsn;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The catalog's file id: a tree of table name -> file id.
pub const CATALOG_FILE_ID: u32 = 1;

/// Settings that may change from one opening to the next.
#[derive(Clone, Debug)]
pub struct Options {
    /// Creation settings: used by [`Database::create`]; on
    /// [`Database::open`] each one given must match the database.
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
    /// `wal_compression` (default off): how full-page images are compressed.
    pub wal_compression: crate::settings::WalCompression,
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
            wal_compression: Default::default(),
        }
    }
}

/// A table: its name and the data file holding its tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub file_id: u32,
}

/// A u64 key in big-endian bytes, so byte order is numeric order.
pub fn key_u64(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

/// The state shared by every handle and transaction.
pub(crate) struct Inner {
    pub(crate) dir: PathBuf,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) io_stats: Arc<IoStats>,
    pub(crate) settings: CreationSettings,
    pub(crate) options: Options,
    pub(crate) control: Mutex<ControlFile>,
    pub(crate) wal: Arc<Wal>,
    pub(crate) pool: BufferPool,
    pub(crate) locks: LockManager,
    next_xid: AtomicU64,
    next_file_id: AtomicU32,
    catalog: RwLock<HashMap<String, u32>>,
    ddl: Mutex<()>,
    smo: Mutex<HashMap<u32, Arc<Mutex<()>>>>,
    checkpoint_lock: Mutex<()>,
    /// Files of tables dropped in this opening.
    dropped: RwLock<std::collections::HashSet<u32>>,
    /// The redo point of the checkpoint in progress (or the last one). A
    /// commit holds it shared from its full-page-image decision until its
    /// record is inserted, so a checkpoint cannot move it in between (the
    /// record would land after the new redo point without the image).
    pub(crate) redo_point: RwLock<Lsn>,
    poisoned: Mutex<Option<String>>,
    stop: AtomicBool,
    pub(crate) checkpoints: AtomicU64,
    checkpoints_started: AtomicU64,
    /// The redo point of the last checkpoint, and when it started.
    last_checkpoint: Mutex<(Lsn, Instant)>,
}

/// An open database. Shareable between threads (`&Database` is `Sync`).
pub struct Database {
    pub(crate) inner: Arc<Inner>,
    /// The WAL writer and checkpoint trigger.
    background: Option<JoinHandle<()>>,
    /// What recovery did at this opening.
    pub recovery: RecoveryReport,
}

impl Inner {
    pub(crate) fn check_usable(&self) -> Result<()> {
        match &*self.poisoned.lock() {
            Some(why) => Err(Error::Stopped(why.clone())),
            None if self.pool.is_poisoned() => Err(Error::Stopped("a failed change".into())),
            None => Ok(()),
        }
    }

    /// Reads stop with writes after a failure: the pages may hold changes
    /// of a commit whose record never became durable. One atomic load.
    pub(crate) fn check_readable(&self) -> Result<()> {
        if self.pool.is_poisoned() {
            return self.check_usable();
        }
        Ok(())
    }

    /// True if the table of `file_id` was dropped in this opening.
    pub(crate) fn is_dropped(&self, file_id: u32) -> bool {
        self.dropped.read().contains(&file_id)
    }

    /// Stops all writing after a failure in a commit's apply phase.
    pub(crate) fn poison(&self, e: &Error) {
        self.pool.poison();
        self.poisoned.lock().get_or_insert_with(|| e.to_string());
    }

    pub(crate) fn smo_lock(&self, file_id: u32) -> Arc<Mutex<()>> {
        self.smo.lock().entry(file_id).or_default().clone()
    }

    fn begin(&self) -> Transaction<'_> {
        Transaction::new(self, self.next_xid.fetch_add(1, Relaxed))
    }

    /// Writes every dirty page, fsyncs the data files, logs the checkpoint
    /// and makes the control file name it. Returns the redo point.
    fn checkpoint(&self, shutdown: bool) -> Result<Lsn> {
        // A failed fsync may have dropped page writes the kernel then
        // counts as clean: the engine must stop, never complete a later
        // checkpoint over them (PostgreSQL's fsyncgate).
        self.checkpoint_inner(shutdown).inspect_err(|e| {
            if e.is_fatal() {
                self.poison(e);
            }
        })
    }

    fn checkpoint_inner(&self, shutdown: bool) -> Result<Lsn> {
        let _one = self.checkpoint_lock.lock();
        self.check_usable()?;
        self.checkpoints_started.fetch_add(1, Relaxed);
        let redo = {
            let mut point = self.redo_point.write();
            *point = self.wal.insert_lsn();
            *point
        };
        *self.last_checkpoint.lock() = (redo, Instant::now());
        // Pins at most a quarter of the pool at once.
        let batch = (self.pool.nframes() / 4).clamp(1, 64);
        self.pool.flush_dirty(Issuer::Checkpointer, batch)?;
        self.pool.files().sync_all(Issuer::Checkpointer)?;
        let info = CheckpointInfo {
            redo,
            next_xid: self.next_xid.load(Relaxed),
            next_file_id: self.next_file_id.load(Relaxed),
            shutdown,
            time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        };
        let (lsn, end) = self.wal.insert(&RecordData {
            kind: RecordKind::Checkpoint,
            xid: 0,
            blocks: Vec::new(),
            main: info.encode(),
        })?;
        self.wal.flush(end, Issuer::Checkpointer)?;
        {
            let mut c = self.control.lock();
            c.checkpoint_lsn = lsn;
            c.redo_lsn = redo;
            c.next_xid = info.next_xid;
            c.next_file_id = info.next_file_id;
            c.checkpoint_time = info.time;
            c.state = if shutdown {
                DbState::ShutDown
            } else {
                DbState::InProduction
            };
            c.write(self.fs.as_ref(), &self.dir, Issuer::Checkpointer)?;
        }
        // Only now, with a durable control file naming a later redo point,
        // may older segments be recycled.
        self.wal
            .recycle_segments_before(redo, Issuer::Checkpointer)?;
        self.checkpoints.fetch_add(1, Relaxed);
        Ok(redo)
    }

    fn load_catalog(&self) -> Result<()> {
        let mut map = HashMap::new();
        let mut bad = None;
        Tree::new(&self.pool, CATALOG_FILE_ID).scan(&[], Issuer::Client, |k, v| {
            match (std::str::from_utf8(k), <[u8; 4]>::try_from(v)) {
                (Ok(name), Ok(id)) => {
                    map.insert(name.to_string(), u32::from_le_bytes(id));
                }
                _ => bad = Some(format!("catalog row {k:?} -> {v:?}")),
            }
            true
        })?;
        if let Some(detail) = bad {
            return Err(Error::corruption(
                format!("data file {CATALOG_FILE_ID}"),
                "catalog",
                detail,
            ));
        }
        *self.catalog.write() = map;
        Ok(())
    }
}

impl Database {
    /// Creates a new database in `dir` (which must not exist or be empty)
    /// and opens it.
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
        crate::database::create(&fs, dir, options.creation.or_defaults())?;
        Self::open_with(fs, io_stats, dir, options)
    }

    /// Opens an existing database, recovering it if it was not shut down
    /// cleanly. Creation settings given in `options` must match it.
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
        let mut control = crate::database::open_control(fs.as_ref(), dir, &options.creation)?;
        let settings = control.settings.clone();
        let wal_dir = dir.join(WAL_DIR);
        // Trust nothing the dead process left unsynced: a restart that
        // checkpointed pages over volatile WAL could lose half a commit.
        let sync_start = Instant::now();
        let synced = if control.state == DbState::ShutDown {
            None
        } else {
            Some(crate::database::sync_after_unclean_shutdown(
                fs.as_ref(),
                dir,
                &control,
            )?)
        };
        let sync_ms = sync_start.elapsed().as_secs_f64() * 1e3;
        let scan = recovery::scan(&fs, &wal_dir, &wal_config(&control), control.redo_lsn)?;
        recovery::check_reached_checkpoint(&scan, &wal_dir, &control)?;
        // A new epoch, durable before any new WAL is written, so the reader
        // never mistakes stale pages of this run's predecessor for new ones.
        control.wal_epoch += 1;
        control.state = DbState::InRecovery;
        control.write(fs.as_ref(), dir, Issuer::Recovery)?;
        let wal = Wal::open(
            fs.clone(),
            &wal_dir,
            wal_config(&control),
            scan.end,
            scan.prev_record,
        )?;
        let wal = Arc::new(wal.with_image_compression(options.wal_compression.into()));
        let files = Arc::new(DataFiles::new(fs.clone(), &dir.join(DATA_DIR), &settings));
        let nframes = (options.buffer_pool_size / settings.page_size as u64) as usize;
        let pool = BufferPool::new(
            nframes,
            settings.page_size as usize,
            settings.data_checksums,
            files.clone(),
            wal.clone() as Arc<dyn WalFlush>,
            Some(btree::validate_page),
        )?;
        pool.set_recovery(true);
        let mut report = recovery::redo(
            &pool,
            &fs,
            &wal_dir,
            &wal_config(&control),
            control.redo_lsn,
            &scan,
        )?;
        if let Some(s) = synced {
            report.startup_sync_files = s.wal_segments + s.data_files;
            report.startup_sync_ms = sync_ms;
        }
        pool.set_recovery(false);
        let on_disk_max = files.ids_on_disk()?.into_iter().max().unwrap_or(0);
        let next_file_id = control
            .next_file_id
            .max(scan.max_file_id + 1)
            .max(on_disk_max + 1);
        let next_xid = control.next_xid.max(scan.max_xid + 1);
        let catalog_meta = crate::buffer::PageId::new(CATALOG_FILE_ID, btree::meta::META_BLOCK);
        let needs_catalog = pool.pin_cached(catalog_meta).is_none()
            && !files.ids_on_disk()?.contains(&CATALOG_FILE_ID);
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            io_stats,
            fs,
            settings,
            options: options.clone(),
            control: Mutex::new(control),
            wal,
            pool,
            locks: LockManager::new(options.deadlock_timeout),
            next_xid: AtomicU64::new(next_xid),
            next_file_id: AtomicU32::new(next_file_id.max(CATALOG_FILE_ID + 1)),
            catalog: RwLock::new(HashMap::new()),
            ddl: Mutex::new(()),
            smo: Mutex::new(HashMap::new()),
            checkpoint_lock: Mutex::new(()),
            dropped: RwLock::new(Default::default()),
            redo_point: RwLock::new(Lsn::INVALID),
            poisoned: Mutex::new(None),
            stop: AtomicBool::new(false),
            checkpoints: AtomicU64::new(0),
            checkpoints_started: AtomicU64::new(0),
            last_checkpoint: Mutex::new((Lsn::INVALID, Instant::now())),
        });
        if needs_catalog {
            smo::create_tree(
                &Tree::new(&inner.pool, CATALOG_FILE_ID),
                &inner.wal,
                Issuer::Client,
            )?;
        }
        inner.load_catalog()?;
        remove_orphan_files(&inner)?;
        inner.checkpoint(false)?;
        let background = Some(spawn_background(inner.clone()));
        Ok(Database {
            inner,
            background,
            recovery: report,
        })
    }

    /// The creation settings of this database.
    pub fn settings(&self) -> &CreationSettings {
        &self.inner.settings
    }

    /// Starts a transaction.
    pub fn begin(&self) -> Transaction<'_> {
        self.inner.begin()
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Result<Table> {
        let id = self.inner.catalog.read().get(name).copied();
        id.map(|file_id| Table {
            name: name.to_string(),
            file_id,
        })
        .ok_or_else(|| Error::NoSuchTable(name.to_string()))
    }

    /// Every table, by name.
    pub fn tables(&self) -> Vec<Table> {
        let mut v: Vec<Table> = self
            .inner
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

    /// Creates a table; durable when it returns.
    pub fn create_table(&self, name: &str) -> Result<Table> {
        let inner = &*self.inner;
        inner.check_usable()?;
        let _ddl = inner.ddl.lock();
        if name.is_empty() || name.len() > 255 {
            return Err(Error::Invalid(format!(
                "table name {name:?} must be 1 to 255 bytes"
            )));
        }
        if inner.catalog.read().contains_key(name) {
            return Err(Error::Invalid(format!("table {name:?} already exists")));
        }
        let file_id = inner.next_file_id.fetch_add(1, Relaxed);
        smo::create_tree(&Tree::new(&inner.pool, file_id), &inner.wal, Issuer::Client)?;
        let catalog = Table {
            name: "catalog".into(),
            file_id: CATALOG_FILE_ID,
        };
        let mut tx = inner.begin();
        tx.insert(&catalog, name.as_bytes(), &file_id.to_le_bytes())?;
        let end = tx.commit()?;
        inner.wal.flush(end, Issuer::Client)?;
        inner.catalog.write().insert(name.to_string(), file_id);
        Ok(Table {
            name: name.to_string(),
            file_id,
        })
    }

    /// Drops a table: durable when it returns; its file is removed.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let inner = &*self.inner;
        inner.check_usable()?;
        let _ddl = inner.ddl.lock();
        let table = self.table(name)?;
        let catalog = Table {
            name: "catalog".into(),
            file_id: CATALOG_FILE_ID,
        };
        // Taken exclusively, the redo point lock waits out every commit in
        // its apply phase; later ones see the table dropped and fail, so no
        // commit record for the file follows the drop's.
        inner.dropped.write().insert(table.file_id);
        drop(inner.redo_point.write());
        let mut tx = inner.begin();
        tx.delete(&catalog, name.as_bytes())?;
        tx.dropped_files.push(table.file_id);
        let end = tx.commit()?;
        inner.wal.flush(end, Issuer::Client)?;
        inner.catalog.write().remove(name);
        inner.pool.discard_file(table.file_id);
        // A failed directory fsync is a failed fsync: stop, as PostgreSQL
        // PANICs, rather than go on over a removal of unknown durability.
        let removed = inner.pool.files().remove(table.file_id, Issuer::Client);
        removed.inspect_err(|e| {
            if e.is_fatal() {
                inner.poison(e);
            }
        })
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
        let inner = &*self.inner;
        // Each commit pins its leaves: keep a batch well inside the pool.
        let batch = inner
            .options
            .max_write_set_rows
            .min(1000)
            .min(inner.pool.nframes() / 4)
            .max(1);
        let mut tx = inner.begin();
        let (mut n, mut in_tx, mut last) = (0u64, 0usize, Lsn::INVALID);
        for (k, v) in rows {
            tx.upsert(table, k.as_ref(), v.as_ref())?;
            n += 1;
            in_tx += 1;
            if in_tx == batch {
                last = last.max(crate::txn::commit_nowait(tx)?);
                tx = inner.begin();
                in_tx = 0;
            }
        }
        last = last.max(crate::txn::commit_nowait(tx)?);
        if last.is_valid() {
            inner.wal.flush(last, Issuer::Client)?;
        }
        Ok(n)
    }

    /// Runs a checkpoint now.
    pub fn checkpoint(&self) -> Result<Lsn> {
        self.inner.checkpoint(false)
    }

    /// WAL figures.
    pub fn wal_stats(&self) -> crate::wal::WalStats {
        self.inner.wal.stats()
    }

    /// I/O figures per issuer and file kind.
    pub fn io_stats(&self) -> &Arc<IoStats> {
        &self.inner.io_stats
    }

    /// Buffer pool figures.
    pub fn buffer_stats(&self) -> &crate::buffer::BufferStats {
        &self.inner.pool.stats
    }

    /// Number of checkpoints completed since opening.
    pub fn checkpoints(&self) -> u64 {
        self.inner.checkpoints.load(Relaxed)
    }

    /// Number of checkpoints started since opening (one more than
    /// [`Database::checkpoints`] while one runs).
    pub fn checkpoints_started(&self) -> u64 {
        self.inner.checkpoints_started.load(Relaxed)
    }

    /// Closes cleanly: a shutdown checkpoint, control file "shut down".
    pub fn close(mut self) -> Result<()> {
        self.stop_background();
        self.inner.checkpoint(true)?;
        Ok(())
    }

    fn stop_background(&mut self) {
        self.inner.stop.store(true, SeqCst);
        if let Some(h) = self.background.take() {
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
            .inner
            .wal
            .flush(self.inner.wal.insert_lsn(), Issuer::WalWriter);
    }
}

/// The background thread: with `synchronous_commit = off` it flushes the
/// WAL every 10 ms; it starts a checkpoint when `max_wal_size / 2` of WAL
/// was written since the last redo point or `checkpoint_timeout` passed.
fn spawn_background(inner: Arc<Inner>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("untorn-background".into())
        .spawn(move || {
            while !inner.stop.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
                if !inner.options.synchronous_commit {
                    if let Err(e) = inner.wal.flush(inner.wal.insert_lsn(), Issuer::WalWriter) {
                        inner.poison(&e);
                        return;
                    }
                }
                let (redo, at) = *inner.last_checkpoint.lock();
                let wal_since = inner.wal.insert_lsn().0.saturating_sub(redo.0);
                let due = wal_since >= inner.options.max_wal_size / 2
                    || at.elapsed() >= inner.options.checkpoint_timeout;
                if due && inner.check_usable().is_ok() {
                    if let Err(e) = inner.checkpoint(false) {
                        if e.is_fatal() {
                            inner.poison(&e);
                            return;
                        }
                        // Not fatal (a full disk, say): try again later.
                        *inner.last_checkpoint.lock() = (redo, Instant::now());
                    }
                }
            }
        })
        .expect("spawn the background thread")
}

/// Removes data files no table owns: left by a crash between creating a
/// table's file and committing its catalog row, or between dropping a
/// table and removing its file.
fn remove_orphan_files(inner: &Inner) -> Result<()> {
    let owned: std::collections::HashSet<u32> = inner.catalog.read().values().copied().collect();
    let on_disk: std::collections::HashSet<u32> =
        inner.pool.files().ids_on_disk()?.into_iter().collect();
    for id in CATALOG_FILE_ID + 1..inner.next_file_id.load(Relaxed) {
        if !owned.contains(&id) {
            // Pages redo restored for it must not be written back.
            inner.pool.discard_file(id);
            if on_disk.contains(&id) {
                inner.pool.files().remove(id, Issuer::Recovery)?;
            }
        }
    }
    Ok(())
}
