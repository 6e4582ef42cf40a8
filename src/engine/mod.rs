//! The engine's shared state: what every handle, transaction and
//! background thread of one open database reaches.
//!
//! It sits below the transaction layer and the API ([`crate::db`]): txn
//! and the checkpointer take an `&Engine`; nothing here imports them.

pub(crate) mod bgwriter_state;
pub(crate) mod checkpoint_state;
pub(crate) mod double_write_stats;

use crate::buffer::BufferPool;
use crate::control::ControlFile;
use crate::error::{Error, Result};
use crate::file::IoStats;
use crate::file::{DirLock, FileSystem};
use crate::lock_table::LockManager;
use crate::options::Options;
use crate::settings::{CreationSettings, TornPageProtection};
use crate::striped::StripedRwLock;
use crate::wal::Wal;
use checkpoint_state::CheckpointState;
use double_write_stats::DoubleWriteStats;
use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::Arc;

/// The state shared by every handle and transaction of an open database.
pub(crate) struct Engine {
    pub(crate) dir: PathBuf,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) io_stats: Arc<IoStats>,
    /// As the control file had them at opening; the torn-page protection
    /// in force is [`Engine::protection`] (an opening may switch it).
    pub(crate) settings: CreationSettings,
    pub(crate) options: Options,
    /// The torn-page protection in force, by its on-disk code: the control
    /// file's until `protect::switch` records another.
    protection: AtomicU8,
    pub(crate) control: Mutex<ControlFile>,
    pub(crate) wal: Arc<Wal>,
    pub(crate) pool: BufferPool,
    /// The double-write counters of this opening, whichever write path
    /// (the opening's or a switch's) counted into them.
    pub(crate) double_write_stats: Arc<DoubleWriteStats>,
    pub(crate) locks: LockManager,
    pub(crate) checkpoint: CheckpointState,
    pub(crate) bgwriter: bgwriter_state::BgWriter,
    pub(crate) next_xid: AtomicU64,
    pub(crate) next_file_id: AtomicU32,
    /// Table name -> file id, loaded from the catalog's tree.
    pub(crate) catalog: RwLock<HashMap<String, u32>>,
    /// One table creation or drop at a time.
    pub(crate) ddl: Mutex<()>,
    smo: Mutex<HashMap<u32, Arc<Mutex<()>>>>,
    /// Files of tables dropped in this opening. A commit holds it shared
    /// through its apply phase, so a drop taking it exclusively waits out
    /// every commit already applying, and every later one sees the drop.
    /// Striped: commits on different cores share no lock word.
    dropped: StripedRwLock<HashSet<u32>>,
    poisoned: Mutex<Option<String>>,
    /// Tells the background threads to end.
    pub(crate) stop: AtomicBool,
    /// `Database::close` began: no commit may follow its shutdown
    /// checkpoint (a shared transaction outliving the handle included).
    closed: AtomicBool,
    /// The directory's exclusive lock: held while anything (a shared
    /// transaction included) can still reach this engine's files.
    _dir_lock: DirLock,
}

impl Engine {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dir: PathBuf,
        fs: Arc<dyn FileSystem>,
        io_stats: Arc<IoStats>,
        control: ControlFile,
        options: Options,
        wal: Arc<Wal>,
        pool: BufferPool,
        double_write_stats: Arc<DoubleWriteStats>,
        next_xid: u64,
        next_file_id: u32,
        dir_lock: DirLock,
    ) -> Engine {
        let checkpoint = CheckpointState::starting_at(control.redo_lsn, options.clock.now());
        Engine {
            dir,
            fs,
            io_stats,
            settings: control.settings.clone(),
            protection: AtomicU8::new(control.settings.torn_page_protection.code()),
            locks: LockManager::new(options.deadlock_timeout),
            options,
            control: Mutex::new(control),
            wal,
            pool,
            double_write_stats,
            checkpoint,
            bgwriter: Default::default(),
            next_xid: AtomicU64::new(next_xid),
            next_file_id: AtomicU32::new(next_file_id),
            catalog: RwLock::new(HashMap::new()),
            ddl: Mutex::new(()),
            smo: Mutex::new(HashMap::new()),
            dropped: StripedRwLock::new(HashSet::new()),
            poisoned: Mutex::new(None),
            stop: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            _dir_lock: dir_lock,
        }
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        match &*self.poisoned.lock() {
            Some(why) => Err(Error::Stopped(why.clone())),
            None if self.pool.is_poisoned() => Err(Error::Stopped("a failed change".into())),
            None => Ok(()),
        }
    }

    /// Refuses every commit from now on: `close` calls it before its
    /// shutdown checkpoint, whose redo point waits out each commit
    /// applying, so each commit is before that checkpoint or refused.
    pub(crate) fn refuse_commits(&self) {
        self.closed.store(true, SeqCst);
    }

    /// A commit's check, at its start and again in its apply phase with
    /// the redo point held: the database must be usable and not closed.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(SeqCst) {
            return Err(Error::Stopped(
                "the database was closed: a transaction that outlived Database::close cannot commit"
                    .into(),
            ));
        }
        self.check_usable()
    }

    /// Reads stop with writes after a failure: the pages may hold changes
    /// of a commit whose record never became durable. One atomic load.
    pub(crate) fn check_readable(&self) -> Result<()> {
        if self.pool.is_poisoned() {
            return self.check_usable();
        }
        Ok(())
    }

    /// Stops all writing after a failure in a commit's apply phase.
    pub(crate) fn poison(&self, e: &Error) {
        self.pool.poison();
        let mut poisoned = self.poisoned.lock();
        if poisoned.is_none() {
            tracing::error!(error = %e, "stopping: no more writes; reopen the database to recover");
            *poisoned = Some(e.to_string());
        }
    }

    /// Runs `f` and stops the engine if it fails fatally (a failed fsync:
    /// never go on over writes of unknown durability).
    pub(crate) fn stop_if_fatal<T>(&self, result: Result<T>) -> Result<T> {
        result.inspect_err(|e| {
            if e.is_fatal() {
                self.poison(e);
            }
        })
    }

    /// The lock serializing structure changes of one tree.
    pub(crate) fn smo_lock(&self, file_id: u32) -> Arc<Mutex<()>> {
        self.smo.lock().entry(file_id).or_default().clone()
    }

    /// The set of files dropped in this opening, held shared: a commit
    /// holds it from its check until its record is in.
    pub(crate) fn dropped_files(&self) -> RwLockReadGuard<'_, HashSet<u32>> {
        self.dropped.read()
    }

    /// Marks `file_id` dropped once every commit applying now is done.
    pub(crate) fn mark_dropped(&self, file_id: u32) {
        self.dropped.write().update(|d| {
            d.insert(file_id);
        });
    }

    /// Takes back [`Engine::mark_dropped`]: the drop's own commit failed,
    /// so the table stays and must take writes again.
    pub(crate) fn unmark_dropped(&self, file_id: u32) {
        self.dropped.write().update(|d| {
            d.remove(&file_id);
        });
    }

    /// The torn-page protection in force: what the image decision uses.
    pub(crate) fn protection(&self) -> TornPageProtection {
        // Only codes of valid modes are ever stored.
        TornPageProtection::from_code(self.protection.load(Acquire))
            .unwrap_or(self.settings.torn_page_protection)
    }

    /// Puts `mode` in force; only `protect::switch` calls it, once the
    /// control file records `mode` durably.
    pub(crate) fn set_protection(&self, mode: TornPageProtection) {
        self.protection.store(mode.code(), Release);
    }

    /// The next transaction id.
    pub(crate) fn allocate_xid(&self) -> u64 {
        self.next_xid.fetch_add(1, Relaxed)
    }
}
