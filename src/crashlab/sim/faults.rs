//! The fault switches of [`SimFileSystem`] and the trace of its calls:
//! what a test or the crash laboratory sets (fsync EIO, ENOSPC, a power cut
//! after N calls, unreadable sectors, misdirected and lost writes, bit
//! flips) and the record that lets a failure be replayed.

use super::{os_error, SimFile, SimFileSystem, State};
use crate::error::{Error, Result};
use crate::file::{FileKind, Issuer};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Fault switches, settable at any time through
/// [`SimFileSystem::update_faults`].
#[derive(Clone, Debug)]
pub struct FaultConfig {
    /// `Some(n)`: `n` more fsyncs of files succeed, the next one fails with
    /// EIO and the switch clears. As on Linux, the failing file's pending
    /// writes are discarded: the live image keeps them, marked clean, and no
    /// later fsync makes them durable. Directory fsyncs do not count.
    pub fail_fsync_after: Option<u64>,
    /// `Some((kind, n))`: writes and allocations to files of `kind` fail
    /// with ENOSPC once those files grew by `n` more bytes; `n` counts
    /// down. Overwriting bytes a file has takes no space. Set it to `None`
    /// to let work continue.
    pub enospc_after_bytes: Option<(FileKind, u64)>,
    /// Sectors (path, index in units of `eio_sector_size`) whose reads fail
    /// with EIO until a write touches them. Filled by crashes with
    /// `eio_sector_probability > 0`; tests may add entries.
    pub read_eio_on: HashSet<(PathBuf, u64)>,
    /// The sector size of `read_eio_on`'s indices: 512 until a crash sets
    /// it to its `sector_size`.
    pub eio_sector_size: u64,
    /// `Some((kind, delta, block_size))`: the next write to a file of
    /// `kind` lands `delta` blocks away from its offset (clamped at 0),
    /// then the switch clears.
    pub misdirect_next_write: Option<(FileKind, i64, usize)>,
    /// `Some(kind)`: the next write to a file of `kind` is acknowledged and
    /// read back from the cache, but never reaches the device (no fsync
    /// makes it durable); then the switch clears.
    pub lose_next_write: Option<FileKind>,
    /// `Some(n)`: `n` more calls that change or sync anything (write,
    /// set_len, allocate, fsync, creation, rename, remove, sync_dir)
    /// succeed; every later one fails with EIO, as if power failed at that
    /// instant, until [`SimFileSystem::crash`] clears the switch. Reads
    /// still see the cache. Sweeping `n` sweeps the crash point.
    pub power_cut_after: Option<u64>,
    /// `Some(n)`: `n` more directory fsyncs succeed, the next one fails
    /// with EIO and the switch clears. Its name changes stay pending: a
    /// crash may still lose them.
    pub fail_sync_dir_after: Option<u64>,
    /// `Some(at)`: the calls `at` names panic in the caller, at the
    /// call (a bug in a layer below, met inside the engine's critical
    /// sections); then the switch clears. Nothing of the call is done.
    pub panic_at: Option<PanicAt>,
    /// `Some(n)`: what [`crate::file::FileSystem::free_space`] says (as
    /// statvfs would), whatever the ENOSPC switch holds; `None`: it cannot
    /// say.
    pub free_space_reported: Option<u64>,
}

/// The call [`FaultConfig::panic_at`] panics at: the one after `after`
/// more calls of kind `op` to files of kind `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PanicAt {
    pub kind: FileKind,
    pub op: TraceKind,
    pub after: u64,
}

impl PanicAt {
    /// Counts a call: true when it is the one to panic at.
    pub(super) fn strikes(&mut self, kind: FileKind, op: TraceKind) -> bool {
        if kind != self.kind || op != self.op {
            return false;
        }
        if self.after == 0 {
            return true;
        }
        self.after -= 1;
        false
    }
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            fail_fsync_after: None,
            enospc_after_bytes: None,
            read_eio_on: HashSet::new(),
            eio_sector_size: 512,
            misdirect_next_write: None,
            lose_next_write: None,
            power_cut_after: None,
            fail_sync_dir_after: None,
            panic_at: None,
            free_space_reported: None,
        }
    }
}

/// What a traced call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    Open,
    Read,
    Write,
    SyncAll,
    SyncData,
    Writeback,
    Allocate,
    SetLen,
    Len,
    Rename,
    Remove,
    SyncDir,
    CreateDir,
    Exists,
    ListDir,
    /// `File::try_lock`; the note says the mode, and whether it was refused.
    Lock,
    FlipBit,
    Crash,
    ProcessCrash,
}

/// One call on the simulated file system.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TraceOp {
    /// The call's number, from 0 (see [`SimFileSystem::op_count`]).
    pub seq: u64,
    pub op: TraceKind,
    pub path: PathBuf,
    /// The new name of a rename.
    pub to: Option<PathBuf>,
    /// Where the bytes went (for a misdirected write: where they landed).
    pub offset: u64,
    pub len: u64,
    pub issuer: Option<Issuer>,
    pub file_kind: Option<FileKind>,
    /// CRC-32C of the bytes written, so a replay can tell where it diverged.
    pub crc32c: Option<u32>,
    /// A fault that struck this call, or a crash's seed.
    pub note: Option<String>,
    /// The error returned, if the call failed.
    pub error: Option<String>,
}

/// Most calls the trace keeps: past it the oldest half goes (the `seq`
/// numbers show the gap), so a long laboratory run stays bounded.
const TRACE_OPS_MAX: usize = 1 << 20;

pub(super) fn trace_op(op: TraceKind, path: &Path) -> TraceOp {
    TraceOp {
        seq: 0,
        op,
        path: path.to_path_buf(),
        to: None,
        offset: 0,
        len: 0,
        issuer: None,
        file_kind: None,
        crc32c: None,
        note: None,
        error: None,
    }
}

impl State {
    /// Numbers the call and appends it to the trace with its outcome.
    pub(super) fn log<T>(&mut self, mut op: TraceOp, res: &Result<T>) {
        op.seq = self.op_count;
        self.op_count += 1;
        if let Err(e) = res {
            op.error = Some(e.to_string());
        }
        if self.trace_enabled {
            if self.trace.len() >= TRACE_OPS_MAX {
                self.trace.drain(..TRACE_OPS_MAX / 2);
            }
            self.trace.push(op);
        }
    }

    /// Refuses every change once the power is cut.
    pub(super) fn power(&mut self, path: &Path) -> Result<()> {
        match &mut self.faults.power_cut_after {
            Some(0) => Err(os_error(path, "power cut", libc::EIO)),
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Charges `bytes` against the ENOSPC switch.
    pub(super) fn take_space(&mut self, f: &SimFile, bytes: u64) -> Result<()> {
        if let Some((kind, left)) = &mut self.faults.enospc_after_bytes {
            if *kind == f.kind {
                if bytes > *left {
                    return Err(os_error(&f.path, "pwrite", libc::ENOSPC));
                }
                *left -= bytes;
            }
        }
        Ok(())
    }

    /// The sectors `[offset, offset + len)` touches, in EIO-set units.
    pub(super) fn eio_range(&self, offset: u64, len: u64) -> (u64, u64) {
        let sector = self.faults.eio_sector_size.max(1);
        (offset / sector, (offset + len.max(1) - 1) / sector)
    }

    pub(super) fn check_eio(&self, path: &Path, offset: u64, len: u64) -> Result<()> {
        if self.faults.read_eio_on.is_empty() || len == 0 {
            return Ok(());
        }
        let (first, last) = self.eio_range(offset, len);
        let bad = self.faults.read_eio_on.iter();
        if bad
            .filter(|(p, _)| p == path)
            .any(|(_, s)| (first..=last).contains(s))
        {
            return Err(os_error(path, "pread", libc::EIO));
        }
        Ok(())
    }

    /// A write to a bad sector remaps it: reads work again.
    pub(super) fn clear_eio(&mut self, path: &Path, offset: u64, len: u64) {
        if self.faults.read_eio_on.is_empty() || len == 0 {
            return;
        }
        let (first, last) = self.eio_range(offset, len);
        let bad = &mut self.faults.read_eio_on;
        bad.retain(|(p, s)| p != path || !(first..=last).contains(s));
    }
}

impl SimFileSystem {
    /// Every call traced so far.
    pub fn trace(&self) -> Vec<TraceOp> {
        self.shared.state.lock().trace.clone()
    }

    /// Runs `f` on the trace, without copying it.
    pub fn with_trace<R>(&self, f: impl FnOnce(&[TraceOp]) -> R) -> R {
        f(&self.shared.state.lock().trace)
    }

    /// Empties the trace (the call count goes on).
    pub fn clear_trace(&self) {
        self.shared.state.lock().trace.clear();
    }

    /// The sector the device reports to the engine (512 by default).
    pub fn set_sector_size(&self, bytes: u32) {
        self.shared.state.lock().sector_size = bytes;
    }

    /// `Some(n)`: the device writes up to `n` bytes all or nothing when
    /// asked (RWF_ATOMIC), and statx says so; `None` (the default): it
    /// has no atomic writes.
    pub fn set_atomic_unit(&self, unit: Option<u32>) {
        self.shared.state.lock().atomic_unit = unit;
    }

    /// Turns the trace on or off (on by default); calls are counted anyway.
    pub fn set_trace_enabled(&self, on: bool) {
        self.shared.state.lock().trace_enabled = on;
    }

    /// Calls made so far (each traced call's `seq` is its number).
    pub fn op_count(&self) -> u64 {
        self.shared.state.lock().op_count
    }

    /// Writes the trace as JSON to a real file.
    pub fn save_trace(&self, path: &Path) -> Result<()> {
        let trace = self.trace();
        let file = std::fs::File::create(path).map_err(|e| Error::io(path, "create", e))?;
        serde_json::to_writer(std::io::BufWriter::new(file), &trace)
            .map_err(|e| Error::io(path, "write trace", e.into()))
    }

    /// The fault switches now.
    pub fn faults(&self) -> FaultConfig {
        self.shared.state.lock().faults.clone()
    }

    /// Replaces the fault switches.
    pub fn set_faults(&self, faults: FaultConfig) {
        self.shared.state.lock().faults = faults;
    }

    /// Changes the fault switches in place.
    pub fn update_faults<R>(&self, f: impl FnOnce(&mut FaultConfig) -> R) -> R {
        f(&mut self.shared.state.lock().faults)
    }

    /// Flips bit `bit` (0..8) of byte `offset` of the live file `path`, at
    /// rest: in the durable image and in the live image, where each holds it.
    pub fn flip_bit(&self, path: &Path, offset: u64, bit: u8) -> Result<()> {
        assert!(bit < 8, "a byte has 8 bits, not {bit}");
        let mut st = self.shared.state.lock();
        let res = match st.live_ns.get(path).copied() {
            None => Err(os_error(path, "flip bit", libc::ENOENT)),
            Some(ino) => {
                let inode = st.inodes.get_mut(&ino).expect("a live name has its inode");
                let mut flipped = false;
                for image in [&mut inode.durable, &mut inode.live] {
                    if let Some(b) = image.get_mut(offset as usize) {
                        *b ^= 1 << bit;
                        flipped = true;
                    }
                }
                let past_end = || os_error(path, "flip bit past the end", libc::EINVAL);
                flipped.then_some(()).ok_or_else(past_end)
            }
        };
        let op = TraceOp {
            offset,
            len: 1,
            note: Some(format!("bit {bit}")),
            ..trace_op(TraceKind::FlipBit, path)
        };
        st.log(op, &res);
        res
    }
}
