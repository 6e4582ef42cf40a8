//! A file system in memory that loses power on command: the crash
//! laboratory's stand-in for [`PosixFileSystem`](crate::file::posix::PosixFileSystem), after
//! SQLite's crash VFS (src/test6.c) and TigerBeetle's simulated storage.
//!
//! The model (brief: correctness.md, "The fault model of the crash laboratory"):
//! - A file (an inode) has a *durable* image, which survives a crash, and a
//!   *live* image, which reads see. Every write, `set_len` and `allocate`
//!   changes the live image at once and is queued, in issue order, in the
//!   file's pending list. `sync_all` and `sync_data` apply the list to the
//!   durable image; both make the size durable too, as fdatasync does on
//!   Linux after an append. `writeback_hint` makes nothing durable.
//! - Names (dirs.rs): a live namespace (what `open`, `exists` and
//!   `list_dir` see) and a durable one. A creation, `rename` or `remove`
//!   changes the live namespace at once and is queued in the directory of
//!   the (new) name; `sync_dir` applies that directory's queue to the
//!   durable namespace. A rename across directories is queued in the
//!   destination directory only.
//!   Directories are durable as soon as they are created: a simplification,
//!   as the engine creates its directories once, before anything else.
//! - [`SimFileSystem::crash`] (crash.rs) builds a new durable state from
//!   the pending operations and one seed, then makes the live state equal to
//!   it. Handles opened before a crash fail with ESTALE from then on, so a
//!   `Database` dropped after the crash cannot write into the surviving image.
//! - Locks (locks.rs): a table of whole-file locks per handle, as the
//!   kernel keeps OFD locks; a crash releases them all.
//! - Faults ([`FaultConfig`], faults.rs) are switches that may be set at any time.
//!   Unlike the POSIX layer the simulation never poisons itself after a
//!   failed fsync: stopping is the engine's job, and the laboratory checks it.
//! - Every call is counted and, unless turned off, appended to a trace
//!   ([`TraceOp`]) that can be saved as JSON next to a failing seed.
//!
//! Invariant: a file with an empty pending list that is not `diverged`
//! (no failed fsync or lost write since the last crash) has live == durable.

use crate::error::{Error, Result};
use crate::file::{File, FileKind, FileSystem, Issuer, LockMode, OpenOptions};
use crate::file::{IoOp, IoStats};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod crash;
mod dirs;
mod faults;
mod locks;
pub use crash::{CrashConfig, CrashReport, DamagedUnit, SimImage, TornWrite};
use dirs::DirOp;
use faults::trace_op;
pub use faults::{FaultConfig, PanicAt, TraceKind, TraceOp};

#[cfg(test)]
mod tests;

/// Largest file the simulation accepts (files live in memory): 16 GiB.
const FILE_SIZE_MAX: u64 = 1 << 34;
/// What O_DIRECT asks of offsets, lengths and buffer addresses.
const DIRECT_ALIGN: usize = 512;

/// True if every value (an offset, a length, an address) suits O_DIRECT.
fn direct_aligned(values: &[u64]) -> bool {
    values.iter().all(|v| v.is_multiple_of(DIRECT_ALIGN as u64))
}

/// One change to a file not yet made durable by an fsync.
#[derive(Clone, Debug)]
enum Pending {
    Write {
        offset: u64,
        data: Vec<u8>,
        /// Made with RWF_ATOMIC (a file opened with an atomic unit): a
        /// crash keeps it whole or drops it, never tears it.
        untorn: bool,
    },
    /// `set_len`.
    SetLen(u64),
    /// `allocate`: grows the file to at least this length.
    Extend(u64),
}

/// Applies one pending change to an image.
fn apply_pending(image: &mut Vec<u8>, op: &Pending) {
    match op {
        Pending::Write { offset, data, .. } => write_into(image, *offset, data),
        Pending::SetLen(len) => image.resize(*len as usize, 0),
        Pending::Extend(len) => {
            if (image.len() as u64) < *len {
                image.resize(*len as usize, 0);
            }
        }
    }
}

/// Copies `data` into `image` at `offset`, growing it with zeros if needed.
fn write_into(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

/// A file's contents, durable and live.
#[derive(Clone, Default)]
struct Inode {
    durable: Vec<u8>,
    live: Vec<u8>,
    pending: Vec<Pending>,
    /// Live differs from durable by more than the pending list: a failed
    /// fsync discarded the list, or the device lost a write.
    diverged: bool,
    /// Open handles of the current generation.
    handles: usize,
}

/// Everything the simulation holds, behind one mutex.
#[derive(Clone)]
struct State {
    inodes: BTreeMap<u64, Inode>,
    next_ino: u64,
    live_ns: BTreeMap<PathBuf, u64>,
    durable_ns: BTreeMap<PathBuf, u64>,
    /// Directory -> its operations since its last `sync_dir`, in order.
    dir_pending: BTreeMap<PathBuf, Vec<DirOp>>,
    dirs: BTreeSet<PathBuf>,
    faults: FaultConfig,
    /// The sector the device reports (`FileSystem::sector_size`): 512
    /// unless the crash laboratory sets its `--sector-size`.
    sector_size: u32,
    /// The atomic write unit statx reports (`FileSystem::atomic_writes`):
    /// `Some(n)` for a device that writes up to `n` bytes all or nothing
    /// when asked (RWF_ATOMIC); `None`, as on most, for none.
    atomic_unit: Option<u32>,
    trace: Vec<TraceOp>,
    trace_enabled: bool,
    op_count: u64,
    /// Bumped by every crash; handles of older generations are stale.
    generation: u64,
    /// Inode -> the handles locking it (locks.rs).
    locks: BTreeMap<u64, locks::SimLock>,
    /// The number the next handle gets.
    next_handle: u64,
}

fn os_error(path: &Path, op: &'static str, code: i32) -> Error {
    Error::io(path, op, std::io::Error::from_raw_os_error(code))
}

impl State {
    fn new() -> State {
        State {
            inodes: BTreeMap::new(),
            next_ino: 1,
            live_ns: BTreeMap::new(),
            durable_ns: BTreeMap::new(),
            dir_pending: BTreeMap::new(),
            dirs: BTreeSet::new(),
            faults: FaultConfig::default(),
            sector_size: 512,
            atomic_unit: None,
            trace: Vec::new(),
            trace_enabled: true,
            op_count: 0,
            generation: 0,
            locks: BTreeMap::new(),
            next_handle: 0,
        }
    }

    /// The handle's inode, if the handle is of this generation and allows it.
    fn inode_of(&mut self, f: &SimFile, write: bool) -> Result<&mut Inode> {
        if f.generation != self.generation {
            return Err(os_error(&f.path, "stale handle", libc::ESTALE));
        }
        if write && f.read_only {
            return Err(os_error(&f.path, "write", libc::EBADF));
        }
        let inode = self.inodes.get_mut(&f.ino);
        Ok(inode.expect("a handle of the current generation keeps its inode"))
    }

    /// Writes `data` through a handle; notes in `t` where it landed and
    /// any fault that struck.
    fn write(&mut self, f: &SimFile, data: Vec<u8>, t: &mut TraceOp) -> Result<()> {
        self.inode_of(f, true)?;
        self.power(&f.path)?;
        let (offset, len) = (t.offset, data.len() as u64);
        if f.direct && !direct_aligned(&[offset, len]) {
            return Err(os_error(&f.path, "pwrite (O_DIRECT)", libc::EINVAL));
        }
        if let Some((kind, delta, block)) = self.faults.misdirect_next_write {
            if kind == f.kind {
                self.faults.misdirect_next_write = None;
                t.offset = (offset as i64 + delta * block as i64).max(0) as u64;
                t.note = Some(format!("misdirected from offset {offset}"));
            }
        }
        let at = t.offset;
        if at.checked_add(len).is_none_or(|end| end > FILE_SIZE_MAX) {
            return Err(os_error(&f.path, "pwrite", libc::EFBIG));
        }
        // Only growth takes space: overwriting a file's blocks needs none
        // (ext4, XFS; a copy-on-write file system is outside the model).
        let grown = (at + len).saturating_sub(self.inode_of(f, true)?.live.len() as u64);
        self.take_space(f, grown)?;
        let lost = self.faults.lose_next_write == Some(f.kind);
        if lost {
            self.faults.lose_next_write = None;
            t.note = Some("lost by the device".into());
        }
        self.clear_eio(&f.path, at, len);
        let inode = self.inode_of(f, true)?;
        write_into(&mut inode.live, at, &data);
        if lost {
            inode.diverged = true;
        } else if len > 0 {
            inode.pending.push(Pending::Write {
                offset: at,
                data,
                untorn: f.atomic_unit.is_some(),
            });
        }
        Ok(())
    }

    fn read(&mut self, f: &SimFile, buf: &mut [u8], offset: u64) -> Result<usize> {
        let inode = self.inode_of(f, false)?;
        let file_len = inode.live.len() as u64;
        if offset >= file_len {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(file_len - offset) as usize;
        self.check_eio(&f.path, offset, n as u64)?;
        let inode = self.inode_of(f, false)?;
        buf[..n].copy_from_slice(&inode.live[offset as usize..offset as usize + n]);
        Ok(n)
    }

    fn sync(&mut self, f: &SimFile) -> Result<()> {
        self.inode_of(f, false)?;
        self.power(&f.path)?;
        let fail = match &mut self.faults.fail_fsync_after {
            Some(0) => {
                self.faults.fail_fsync_after = None;
                true
            }
            Some(n) => {
                *n -= 1;
                false
            }
            None => false,
        };
        let inode = self.inode_of(f, false)?;
        if fail {
            // Linux: the dirty pages are dropped from the writeback and
            // marked clean, so they stay readable but never become durable.
            inode.diverged |= !inode.pending.is_empty();
            inode.pending.clear();
            return Err(Error::FsyncFailed {
                path: f.path.clone(),
                source: std::io::Error::from_raw_os_error(libc::EIO),
            });
        }
        for op in inode.pending.drain(..) {
            apply_pending(&mut inode.durable, &op);
        }
        assert!(inode.diverged || inode.durable.len() == inode.live.len());
        Ok(())
    }

    fn resize(&mut self, f: &SimFile, op: Pending) -> Result<()> {
        let (Pending::SetLen(len) | Pending::Extend(len)) = op else {
            unreachable!("resize takes a size change");
        };
        let current = self.inode_of(f, true)?.live.len() as u64;
        self.power(&f.path)?;
        if len > FILE_SIZE_MAX {
            return Err(os_error(&f.path, "ftruncate", libc::EFBIG));
        }
        if let Pending::Extend(_) = op {
            if len <= current {
                return Ok(());
            }
            self.take_space(f, len - current)?;
        }
        let inode = self.inode_of(f, true)?;
        apply_pending(&mut inode.live, &op);
        inode.pending.push(op);
        Ok(())
    }
}

struct Shared {
    state: Mutex<State>,
    stats: Arc<IoStats>,
}

/// The simulated file system. Clones share one state: hand a clone to the
/// engine and keep one to crash it.
#[derive(Clone)]
pub struct SimFileSystem {
    shared: Arc<Shared>,
}

impl SimFileSystem {
    /// An empty file system recording into `stats`.
    pub fn new(stats: Arc<IoStats>) -> Self {
        Self::with_state(State::new(), stats)
    }

    fn with_state(state: State, stats: Arc<IoStats>) -> Self {
        let state = Mutex::new(state);
        SimFileSystem {
            shared: Arc::new(Shared { state, stats }),
        }
    }

    /// The statistics this layer records into.
    pub fn stats(&self) -> &Arc<IoStats> {
        &self.shared.stats
    }

    /// The bytes reads of `path` see now.
    pub fn live_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.shared.state.lock();
        st.live_ns.get(path).map(|ino| st.inodes[ino].live.clone())
    }

    /// The durable bytes under the durable name `path`.
    pub fn durable_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.shared.state.lock();
        let ino = st.durable_ns.get(path)?;
        Some(st.inodes[ino].durable.clone())
    }

    /// Files locked now (by any handle, in any mode).
    pub fn locked_files(&self) -> usize {
        self.shared.state.lock().locks.len()
    }

    /// Pending file operations (writes and size changes) and directory
    /// operations: what a crash may lose.
    pub fn pending_ops(&self) -> (usize, usize) {
        let st = self.shared.state.lock();
        let files = st.inodes.values().map(|i| i.pending.len()).sum();
        (files, st.dir_pending.values().map(Vec::len).sum())
    }

    /// Runs `f` on the locked state and traces the call with its outcome.
    fn call<T>(
        &self,
        mut op: TraceOp,
        who: Option<Issuer>,
        f: impl FnOnce(&mut State) -> Result<T>,
    ) -> Result<T> {
        op.issuer = who;
        let mut st = self.shared.state.lock();
        let res = f(&mut st);
        st.log(op, &res);
        res
    }
}

/// A handle on a simulated file.
struct SimFile {
    shared: Arc<Shared>,
    ino: u64,
    /// This handle's number, unique in its file system: what holds a lock.
    handle: u64,
    path: PathBuf,
    kind: FileKind,
    read_only: bool,
    direct: bool,
    /// [`OpenOptions::atomic_unit`]: each write is whole units, each made
    /// with RWF_ATOMIC. The real layer copies into aligned memory itself,
    /// so only offsets and lengths are checked.
    atomic_unit: Option<u32>,
    generation: u64,
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        if st.generation != self.generation {
            return;
        }
        st.unlock(self.ino, self.handle);
        let inode = st
            .inodes
            .get_mut(&self.ino)
            .expect("an open file has its inode");
        assert!(inode.handles > 0);
        inode.handles -= 1;
        st.maybe_free(self.ino);
    }
}

impl SimFile {
    /// Runs `f` on the locked state and traces the call with its outcome.
    fn call<T>(
        &self,
        op: TraceKind,
        (offset, len): (u64, u64),
        who: Option<Issuer>,
        f: impl FnOnce(&mut State, &mut TraceOp) -> Result<T>,
    ) -> Result<T> {
        let mut t = TraceOp {
            offset,
            len,
            issuer: who,
            file_kind: Some(self.kind),
            ..trace_op(op, &self.path)
        };
        let mut st = self.shared.state.lock();
        if st
            .faults
            .panic_at
            .as_mut()
            .is_some_and(|p| p.strikes(self.kind, op))
        {
            st.faults.panic_at = None;
            drop(st);
            let what = format!("{op:?} of {}", self.path.display());
            crate::injected_panic::quiet_hook();
            panic!("{}: {what}", crate::injected_panic::INJECTED);
        }
        let res = f(&mut st, &mut t);
        st.log(t, &res);
        res
    }

    fn write_bufs(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()> {
        if let Some(unit) = self.atomic_unit {
            return self.write_units(bufs, offset, unit, who);
        }
        let misaligned = |b: &&[u8]| !direct_aligned(&[b.as_ptr() as u64]);
        if self.direct && bufs.iter().any(misaligned) {
            return Err(os_error(&self.path, "pwrite (O_DIRECT)", libc::EINVAL));
        }
        let data = bufs.concat();
        let len = data.len() as u64;
        self.call(TraceKind::Write, (offset, len), Some(who), |st, t| {
            t.crc32c = Some(crc32c::crc32c(&data));
            st.write(self, data, t)
        })?;
        self.shared.stats.record(who, self.kind, IoOp::Write, len);
        Ok(())
    }

    /// An atomic file's write: one write per unit, each refused as the
    /// kernel refuses it (EINVAL off the unit, EOPNOTSUPP where the device
    /// has no atomic writes of that size).
    fn write_units(&self, bufs: &[&[u8]], offset: u64, unit: u32, who: Issuer) -> Result<()> {
        let data = bufs.concat();
        let u = u64::from(unit);
        let refused =
            |code| Error::atomic_write(&self.path, unit, std::io::Error::from_raw_os_error(code));
        if !offset.is_multiple_of(u) || !(data.len() as u64).is_multiple_of(u) {
            return Err(refused(libc::EINVAL));
        }
        let supported = self
            .shared
            .state
            .lock()
            .atomic_unit
            .is_some_and(|n| n >= unit);
        if !supported {
            return Err(refused(libc::EOPNOTSUPP));
        }
        for (i, chunk) in data.chunks(unit as usize).enumerate() {
            let at = offset + i as u64 * u;
            self.call(TraceKind::Write, (at, u), Some(who), |st, t| {
                t.crc32c = Some(crc32c::crc32c(chunk));
                t.note = Some("RWF_ATOMIC".into());
                st.write(self, chunk.to_vec(), t)
            })?;
            self.shared.stats.record(who, self.kind, IoOp::Write, u);
        }
        Ok(())
    }

    fn sync(&self, op: TraceKind, who: Issuer) -> Result<()> {
        let res = self.call(op, (0, 0), Some(who), |st, _| st.sync(self));
        self.shared.stats.record(who, self.kind, IoOp::Fsync, 0);
        res
    }
}

impl File for SimFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn kind(&self) -> FileKind {
        self.kind
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, who: Issuer) -> Result<usize> {
        let aligned = direct_aligned(&[offset, buf.len() as u64, buf.as_ptr() as u64]);
        if self.direct && !aligned {
            return Err(os_error(&self.path, "pread (O_DIRECT)", libc::EINVAL));
        }
        let range = (offset, buf.len() as u64);
        let n = self.call(TraceKind::Read, range, Some(who), |st, _| {
            st.read(self, buf, offset)
        })?;
        self.shared
            .stats
            .record(who, self.kind, IoOp::Read, n as u64);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64, who: Issuer) -> Result<()> {
        self.write_bufs(&[buf], offset, who)
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()> {
        self.write_bufs(bufs, offset, who)
    }

    fn sync_all(&self, who: Issuer) -> Result<()> {
        self.sync(TraceKind::SyncAll, who)
    }

    fn sync_data(&self, who: Issuer) -> Result<()> {
        self.sync(TraceKind::SyncData, who)
    }

    fn writeback_hint(&self, offset: u64, len: u64, who: Issuer) -> Result<()> {
        let check = |st: &mut State, _: &mut TraceOp| st.inode_of(self, false).map(|_| ());
        self.call(TraceKind::Writeback, (offset, len), Some(who), check)?;
        self.shared
            .stats
            .record(who, self.kind, IoOp::Writeback, len);
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64, who: Issuer) -> Result<()> {
        let change = Pending::Extend(offset.saturating_add(len));
        self.call(TraceKind::Allocate, (offset, len), Some(who), |st, _| {
            st.resize(self, change)
        })
    }

    fn set_len(&self, len: u64, who: Issuer) -> Result<()> {
        let change = Pending::SetLen(len);
        self.call(TraceKind::SetLen, (0, len), Some(who), |st, _| {
            st.resize(self, change)
        })
    }

    fn len(&self) -> Result<u64> {
        self.call(TraceKind::Len, (0, 0), None, |st, _| {
            st.inode_of(self, false).map(|i| i.live.len() as u64)
        })
    }

    fn try_lock(&self, mode: LockMode) -> Result<bool> {
        self.call(TraceKind::Lock, (0, 0), None, |st, t| {
            let taken = st.try_lock(self, mode)?;
            let refused = if taken { "" } else { ", refused" };
            t.note = Some(format!("{mode:?}{refused}"));
            Ok(taken)
        })
    }
}

impl FileSystem for SimFileSystem {
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>> {
        let op = TraceOp {
            file_kind: Some(kind),
            note: Some(format!("{opts:?}")),
            ..trace_op(TraceKind::Open, path)
        };
        self.call(op, None, |st| {
            let ino = st.open(path, opts)?;
            st.inodes
                .get_mut(&ino)
                .expect("an opened file has its inode")
                .handles += 1;
            st.next_handle += 1;
            Ok(Arc::new(SimFile {
                shared: self.shared.clone(),
                ino,
                handle: st.next_handle,
                path: path.to_path_buf(),
                kind,
                read_only: opts.read_only,
                direct: opts.direct,
                atomic_unit: opts.atomic_unit,
                generation: st.generation,
            }) as Arc<dyn File>)
        })
    }

    fn rename(&self, from: &Path, to: &Path, kind: FileKind, who: Issuer) -> Result<()> {
        let op = TraceOp {
            to: Some(to.to_path_buf()),
            file_kind: Some(kind),
            ..trace_op(TraceKind::Rename, from)
        };
        self.call(op, Some(who), |st| st.rename(from, to))
    }

    fn remove(&self, path: &Path, kind: FileKind, who: Issuer) -> Result<()> {
        let op = TraceOp {
            file_kind: Some(kind),
            ..trace_op(TraceKind::Remove, path)
        };
        self.call(op, Some(who), |st| st.remove(path))
    }

    fn sync_dir(&self, dir: &Path, who: Issuer) -> Result<()> {
        let res = self.call(trace_op(TraceKind::SyncDir, dir), Some(who), |st| {
            st.sync_dir(dir)
        });
        self.shared
            .stats
            .record(who, FileKind::Control, IoOp::Fsync, 0);
        res
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.call(trace_op(TraceKind::CreateDir, dir), None, |st| {
            st.create_dir_all(dir)
        })
    }

    fn exists(&self, path: &Path) -> bool {
        let op = trace_op(TraceKind::Exists, path);
        let found = self.call(op, None, |st| {
            Ok(st.live_ns.contains_key(path) || st.dir_exists(path))
        });
        found.unwrap_or(false)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        self.call(trace_op(TraceKind::ListDir, dir), None, |st| {
            st.list_dir(dir)
        })
    }

    fn sector_size(&self, _path: &Path) -> Option<u32> {
        Some(self.shared.state.lock().sector_size)
    }

    fn free_space(&self, _path: &Path) -> Option<u64> {
        self.shared.state.lock().faults.free_space_reported
    }

    fn atomic_writes(&self, path: &Path) -> Result<crate::file::atomic::AtomicWrites> {
        let st = self.shared.state.lock();
        if !st.live_ns.contains_key(path) && !st.dir_exists(path) {
            return Err(os_error(path, "statx", libc::ENOENT));
        }
        Ok(match st.atomic_unit {
            // A device that does it in hardware: nothing above its unit.
            Some(unit) => crate::file::atomic::AtomicWrites {
                reported: true,
                unit_min: st.sector_size,
                unit_max: unit,
                segments_max: 1,
                unit_max_opt: unit,
                dio_mem_align: 4,
                dio_offset_align: st.sector_size,
            },
            None => crate::file::atomic::AtomicWrites::default(),
        })
    }
}
