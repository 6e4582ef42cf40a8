//! A file layer between the engine and the simulation that cuts the power
//! at a chosen step of the control file's replacement (open the temporary
//! file, truncate, write, fsync, rename, fsync the directory), which a
//! count of calls cannot aim at: how many pages a checkpoint writes first
//! is not known in advance.
//!
//! It also keeps a copy of every data-file write not yet covered by an
//! fsync, so that after a crash the laboratory can tell a torn page (bytes
//! that no write and no durable state ever held) from an old or new one.
//!
//! Everything else passes straight through to the [`SimFileSystem`].

use super::sim::SimFileSystem;
use crate::error::Result;
use crate::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Writes to data files since each file's last fsync: (offset, bytes).
pub type PendingWrites = HashMap<PathBuf, Vec<(u64, Vec<u8>)>>;

/// The armed cut: after `skip` more control-file steps, the power goes
/// `then` calls later.
#[derive(Clone, Copy, Debug)]
struct Armed {
    skip: u64,
    then: u64,
}

struct Wire {
    sim: SimFileSystem,
    /// The database directory (its fsync is the replacement's last step).
    dir: PathBuf,
    armed: Mutex<Option<Armed>>,
    writes: Mutex<PendingWrites>,
    /// `(kind, n)`: after `n` more fsyncs of files of `kind`, the next one
    /// fails (through the simulation's own switch, so that it drops the
    /// file's pending writes as Linux does).
    fail_fsync: Mutex<Option<(FileKind, u64)>>,
}

impl Wire {
    /// Called before every step of a control file replacement.
    fn step(&self) {
        let mut armed = self.armed.lock();
        if let Some(a) = *armed {
            if a.skip == 0 {
                self.sim.update_faults(|f| f.power_cut_after = Some(a.then));
                *armed = None;
            } else {
                *armed = Some(Armed {
                    skip: a.skip - 1,
                    then: a.then,
                });
            }
        }
    }
}

/// The laboratory's file layer: the simulation, plus the tripwire.
#[derive(Clone)]
pub struct TripwireFs {
    wire: Arc<Wire>,
}

impl TripwireFs {
    pub fn new(sim: SimFileSystem, dir: &Path) -> Self {
        let wire = Wire {
            sim,
            dir: dir.to_path_buf(),
            armed: Mutex::new(None),
            writes: Mutex::default(),
            fail_fsync: Mutex::new(None),
        };
        TripwireFs {
            wire: Arc::new(wire),
        }
    }

    /// Cuts the power at step `skip` (0 to 5) of the next control file
    /// replacement, `then` calls later (0: that step fails).
    pub fn arm(&self, skip: u64, then: u64) {
        *self.wire.armed.lock() = Some(Armed { skip, then });
    }

    /// Disarms; true if the wire had fired since [`TripwireFs::arm`].
    pub fn disarm(&self) -> bool {
        let was_armed = self.wire.armed.lock().take().is_some();
        !was_armed
    }

    /// Makes the fsync after `after` more fsyncs of files of `kind` fail
    /// with EIO.
    pub fn fail_fsync(&self, kind: FileKind, after: u64) {
        *self.wire.fail_fsync.lock() = Some((kind, after));
    }

    /// True if the fsync failure asked for has not struck yet (it is then
    /// called off).
    pub fn fsync_failure_pending(&self) -> bool {
        self.wire.fail_fsync.lock().take().is_some()
    }

    /// Takes the data-file writes not yet covered by an fsync (call it at
    /// the crash, which settles them all).
    pub fn take_pending_writes(&self) -> PendingWrites {
        std::mem::take(&mut *self.wire.writes.lock())
    }

    /// The simulation underneath.
    pub fn sim(&self) -> &SimFileSystem {
        &self.wire.sim
    }
}

struct WiredFile {
    inner: Arc<dyn File>,
    wire: Arc<Wire>,
}

impl WiredFile {
    fn step(&self) {
        if self.inner.kind() == FileKind::Control {
            self.wire.step();
        }
    }

    fn wrote(&self, res: Result<()>, offset: u64, bufs: &[&[u8]]) -> Result<()> {
        if res.is_ok() && self.inner.kind() == FileKind::Data {
            let mut w = self.wire.writes.lock();
            w.entry(self.path().to_path_buf())
                .or_default()
                .push((offset, bufs.concat()));
        }
        res
    }

    /// Before an fsync: makes it fail if its turn came.
    fn before_sync(&self) {
        let mut armed = self.wire.fail_fsync.lock();
        if let Some((kind, n)) = *armed {
            if kind == self.inner.kind() {
                if n == 0 {
                    self.wire
                        .sim
                        .update_faults(|f| f.fail_fsync_after = Some(0));
                    *armed = None;
                } else {
                    *armed = Some((kind, n - 1));
                }
            }
        }
    }

    fn synced(&self, res: Result<()>) -> Result<()> {
        // A completed fsync settles the pending writes, and so does a failed
        // one (it drops them for good, as Linux does); one refused because
        // the power is cut settles nothing.
        let settled = matches!(res, Ok(()) | Err(crate::error::Error::FsyncFailed { .. }));
        if settled && self.inner.kind() == FileKind::Data {
            self.wire.writes.lock().remove(self.path());
        }
        res
    }
}

impl File for WiredFile {
    crate::forward_file_methods!(inner: path, kind, read_at, writeback_hint, write_back_and_wait, len, try_lock, unlock);

    fn write_at(&self, buf: &[u8], offset: u64, who: Issuer) -> Result<()> {
        self.step();
        let res = self.inner.write_at(buf, offset, who);
        self.wrote(res, offset, &[buf])
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()> {
        self.step();
        let res = self.inner.write_vectored_at(bufs, offset, who);
        self.wrote(res, offset, bufs)
    }
    fn sync_all(&self, who: Issuer) -> Result<()> {
        self.step();
        self.before_sync();
        let res = self.inner.sync_all(who);
        self.synced(res)
    }
    fn sync_data(&self, who: Issuer) -> Result<()> {
        self.step();
        self.before_sync();
        let res = self.inner.sync_data(who);
        self.synced(res)
    }
    fn allocate(&self, offset: u64, len: u64, who: Issuer) -> Result<()> {
        self.step();
        self.inner.allocate(offset, len, who)
    }
    fn set_len(&self, len: u64, who: Issuer) -> Result<()> {
        self.step();
        self.inner.set_len(len, who)
    }
}

impl FileSystem for TripwireFs {
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>> {
        if kind == FileKind::Control && opts.create {
            self.wire.step();
        }
        let inner = self.wire.sim.open(path, kind, opts)?;
        Ok(Arc::new(WiredFile {
            inner,
            wire: self.wire.clone(),
        }))
    }
    fn rename(&self, from: &Path, to: &Path, kind: FileKind, who: Issuer) -> Result<()> {
        if kind == FileKind::Control {
            self.wire.step();
        }
        self.wire.sim.rename(from, to, kind, who)
    }
    fn sync_dir(&self, dir: &Path, who: Issuer) -> Result<()> {
        if dir == self.wire.dir {
            self.wire.step();
        }
        self.wire.sim.sync_dir(dir, who)
    }
    crate::forward_file_system_methods!(wire.sim: remove, create_dir_all, exists, list_dir, sector_size, atomic_writes, free_space);
}
