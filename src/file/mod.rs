//! The file layer: every open, read, write, fsync, rename and directory
//! fsync of the engine passes through the [`FileSystem`] and [`File`] traits.
//!
//! Rules:
//! - Each call names who issues it ([`Issuer`]); each file knows its
//!   [`FileKind`]. The I/O statistics ([`IoStats`], io_stats.rs) are kept
//!   per (issuer, kind).
//! - A failed fsync is fatal. The implementation returns
//!   [`Error::FsyncFailed`](crate::error::Error::FsyncFailed) and from then on
//!   refuses every write and sync with `Error::Poisoned`: a second fsync must
//!   never report success over writes the kernel already dropped.
//! - A file can be locked as a whole ([`File::try_lock`]); the lock
//!   belongs to that open file and goes when it closes, or when its
//!   process dies. [`lock::DirLock`] keeps a database directory to one
//!   opening with it (`untorn.lock`).
//! - Implementations: [`posix::PosixFileSystem`] (libc pread/pwrite, so strace
//!   and LD_PRELOAD recorders see every call). The crash laboratory's
//!   simulated file system (`crashlab::sim`) and the benchmark laboratory's
//!   device model stand in behind the same traits, outside this module.

pub mod aligned;
pub mod atomic;
mod direct;
mod io_stats;
pub mod lock;
pub mod open_files;
pub mod overlay;
pub mod posix;
pub mod sector;
pub mod segmented;
pub mod temp;

use crate::error::Result;
pub use io_stats::{IoOp, IoStats};
pub use lock::DirLock;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Who issues an I/O call, as in PostgreSQL's pg_stat_io `backend_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Issuer {
    /// A client (foreground) thread.
    Client,
    /// The background writer.
    BackgroundWriter,
    /// The checkpointer.
    Checkpointer,
    /// The WAL writer / a group-commit flush leader.
    WalWriter,
    /// Crash recovery.
    Recovery,
    /// An offline tool (init, inspect, verify).
    Tool,
}

impl Issuer {
    pub const ALL: [Issuer; 6] = [
        Issuer::Client,
        Issuer::BackgroundWriter,
        Issuer::Checkpointer,
        Issuer::WalWriter,
        Issuer::Recovery,
        Issuer::Tool,
    ];
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        match self {
            Issuer::Client => "client",
            Issuer::BackgroundWriter => "background_writer",
            Issuer::Checkpointer => "checkpointer",
            Issuer::WalWriter => "wal_writer",
            Issuer::Recovery => "recovery",
            Issuer::Tool => "tool",
        }
    }
}

/// What a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    Data,
    Wal,
    DoubleWrite,
    Control,
    /// A directory's lock file (`untorn.lock`).
    Lock,
    /// A transaction's write set spilled to disk (`spill/`, txn/spill.rs).
    Spill,
}

impl FileKind {
    pub const ALL: [FileKind; 6] = [
        FileKind::Data,
        FileKind::Wal,
        FileKind::DoubleWrite,
        FileKind::Control,
        FileKind::Lock,
        FileKind::Spill,
    ];
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Data => "data",
            FileKind::Wal => "wal",
            FileKind::DoubleWrite => "double_write",
            FileKind::Control => "control",
            FileKind::Lock => "lock",
            FileKind::Spill => "spill",
        }
    }
}

/// How to open a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Create the file if it does not exist.
    pub create: bool,
    /// Fail if the file exists (with `create`).
    pub create_new: bool,
    /// Open read-only.
    pub read_only: bool,
    /// Bypass the page cache (O_DIRECT): buffers and offsets must be aligned.
    pub direct: bool,
    /// `Some(unit)`: every write is cut into writes of exactly `unit`
    /// bytes at multiples of `unit`, each made all or nothing by the kernel
    /// and the device (O_DIRECT with pwritev2's RWF_ATOMIC; implies
    /// `direct`). A write of another length or offset is refused. For
    /// `torn_page_protection = atomic`, whose unit is the page.
    pub atomic_unit: Option<u32>,
}

impl OpenOptions {
    pub fn read_write() -> Self {
        OpenOptions::default()
    }
    pub fn read_only() -> Self {
        OpenOptions {
            read_only: true,
            ..Default::default()
        }
    }
    pub fn create() -> Self {
        OpenOptions {
            create: true,
            ..Default::default()
        }
    }
    pub fn create_new() -> Self {
        OpenOptions {
            create: true,
            create_new: true,
            ..Default::default()
        }
    }
}

/// A lock on a whole file ([`File::try_lock`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Any number of holders, while nobody holds it exclusively.
    Shared,
    /// One holder, and no shared ones.
    Exclusive,
}

/// An open file. All offsets are absolute (pread/pwrite); a file may be
/// shared between threads.
pub trait File: Send + Sync {
    /// The path the file was opened with (for error messages).
    fn path(&self) -> &Path;
    /// What the file holds.
    fn kind(&self) -> FileKind;
    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read
    /// (fewer only at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64, who: Issuer) -> Result<usize>;
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64, who: Issuer) -> Result<()>;
    /// Writes the buffers back to back starting at `offset` (pwritev).
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()>;
    /// fsync: data and metadata durable.
    fn sync_all(&self, who: Issuer) -> Result<()>;
    /// fdatasync: data (and the size, if it changed) durable.
    fn sync_data(&self, who: Issuer) -> Result<()>;
    /// Asks the kernel to start writing back a range (sync_file_range
    /// SYNC_FILE_RANGE_WRITE). Makes nothing durable.
    fn writeback_hint(&self, offset: u64, len: u64, who: Issuer) -> Result<()>;
    /// Writes a range's dirty pages to the device and waits for them
    /// (sync_file_range WAIT_BEFORE | WRITE | WAIT_AFTER), so that an
    /// fsync after it finds little left to write. Makes nothing durable
    /// (no metadata, no device cache flush); a failure is a failed fsync.
    /// By default only the hint.
    fn write_back_and_wait(&self, offset: u64, len: u64, who: Issuer) -> Result<()> {
        self.writeback_hint(offset, len, who)
    }
    /// Reserves space (posix_fallocate) so later writes do not hit ENOSPC
    /// and fdatasync need not write metadata.
    fn allocate(&self, offset: u64, len: u64, who: Issuer) -> Result<()>;
    /// Sets the file's length.
    fn set_len(&self, len: u64, who: Issuer) -> Result<()>;
    /// The file's current length.
    fn len(&self) -> Result<u64>;
    /// Locks the whole file without waiting: true if taken, false if
    /// another open file holds a lock in the way, in this process or
    /// another. The lock belongs to this open file, not to the process:
    /// it goes when this handle is dropped (closed), or when its process
    /// dies or the machine loses power. Asking again in the other mode
    /// converts the lock held. Exclusive needs a handle opened for writing.
    fn try_lock(&self, mode: LockMode) -> Result<bool>;
    /// Releases the lock [`File::try_lock`] took, before the handle
    /// closes. Closing alone may not release it at once: a process forked
    /// by another thread of this one holds a copy of the descriptor until
    /// it execs, and the lock belongs to the open file all copies share.
    /// By default nothing (a lock that goes with its handle).
    fn unlock(&self) -> Result<()> {
        Ok(())
    }

    /// True if the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Reads exactly `buf.len()` bytes, or fails with a corruption error
    /// naming the file and offset when the file is shorter.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64, who: Issuer) -> Result<()> {
        let n = self.read_at(buf, offset, who)?;
        if n < buf.len() {
            return Err(crate::error::Error::corruption(
                self.path(),
                format!("offset {offset}"),
                format!(
                    "short read: wanted {} bytes, file ends after {n}",
                    buf.len()
                ),
            ));
        }
        Ok(())
    }
}

/// Forwards the named [`File`] methods unchanged to the field `inner`:
/// for wrappers (device models, the crash laboratory's tripwire, test
/// recorders) that change only a few calls and pass the rest through, as
/// in `forward_file_methods!(inner: path, kind, read_at, len);`.
#[macro_export]
macro_rules! forward_file_methods {
    ($inner:ident: $($method:ident),+ $(,)?) => {
        $( $crate::forward_file_methods!(@one $inner $method); )+
    };
    (@one $inner:ident path) => {
        fn path(&self) -> &::std::path::Path {
            self.$inner.path()
        }
    };
    (@one $inner:ident kind) => {
        fn kind(&self) -> $crate::file::FileKind {
            self.$inner.kind()
        }
    };
    (@one $inner:ident read_at) => {
        fn read_at(
            &self,
            buf: &mut [u8],
            offset: u64,
            who: $crate::file::Issuer,
        ) -> $crate::error::Result<usize> {
            self.$inner.read_at(buf, offset, who)
        }
    };
    (@one $inner:ident write_at) => {
        fn write_at(&self, buf: &[u8], offset: u64, who: $crate::file::Issuer) -> $crate::error::Result<()> {
            self.$inner.write_at(buf, offset, who)
        }
    };
    (@one $inner:ident write_vectored_at) => {
        fn write_vectored_at(
            &self,
            bufs: &[&[u8]],
            offset: u64,
            who: $crate::file::Issuer,
        ) -> $crate::error::Result<()> {
            self.$inner.write_vectored_at(bufs, offset, who)
        }
    };
    (@one $inner:ident sync_all) => {
        fn sync_all(&self, who: $crate::file::Issuer) -> $crate::error::Result<()> {
            self.$inner.sync_all(who)
        }
    };
    (@one $inner:ident sync_data) => {
        fn sync_data(&self, who: $crate::file::Issuer) -> $crate::error::Result<()> {
            self.$inner.sync_data(who)
        }
    };
    (@one $inner:ident writeback_hint) => {
        fn writeback_hint(&self, offset: u64, len: u64, who: $crate::file::Issuer) -> $crate::error::Result<()> {
            self.$inner.writeback_hint(offset, len, who)
        }
    };
    (@one $inner:ident write_back_and_wait) => {
        fn write_back_and_wait(&self, offset: u64, len: u64, who: $crate::file::Issuer) -> $crate::error::Result<()> {
            self.$inner.write_back_and_wait(offset, len, who)
        }
    };
    (@one $inner:ident allocate) => {
        fn allocate(&self, offset: u64, len: u64, who: $crate::file::Issuer) -> $crate::error::Result<()> {
            self.$inner.allocate(offset, len, who)
        }
    };
    (@one $inner:ident set_len) => {
        fn set_len(&self, len: u64, who: $crate::file::Issuer) -> $crate::error::Result<()> {
            self.$inner.set_len(len, who)
        }
    };
    (@one $inner:ident len) => {
        fn len(&self) -> $crate::error::Result<u64> {
            self.$inner.len()
        }
    };
    (@one $inner:ident try_lock) => {
        fn try_lock(&self, mode: $crate::file::LockMode) -> $crate::error::Result<bool> {
            self.$inner.try_lock(mode)
        }
    };
    (@one $inner:ident unlock) => {
        fn unlock(&self) -> $crate::error::Result<()> {
            self.$inner.unlock()
        }
    };
}

/// Forwards the named [`FileSystem`] methods unchanged to a field, as
/// [`forward_file_methods!`] does for a [`File`]; the field may be a path
/// (`0`, `wire.sim`): `forward_file_system_methods!(inner: exists, list_dir);`.
#[macro_export]
macro_rules! forward_file_system_methods {
    (@one [$($inner:tt).+] rename) => {
        fn rename(
            &self,
            from: &::std::path::Path,
            to: &::std::path::Path,
            kind: $crate::file::FileKind,
            who: $crate::file::Issuer,
        ) -> $crate::error::Result<()> {
            self.$($inner).+.rename(from, to, kind, who)
        }
    };
    (@one [$($inner:tt).+] remove) => {
        fn remove(
            &self,
            path: &::std::path::Path,
            kind: $crate::file::FileKind,
            who: $crate::file::Issuer,
        ) -> $crate::error::Result<()> {
            self.$($inner).+.remove(path, kind, who)
        }
    };
    (@one [$($inner:tt).+] sync_dir) => {
        fn sync_dir(&self, dir: &::std::path::Path, who: $crate::file::Issuer) -> $crate::error::Result<()> {
            self.$($inner).+.sync_dir(dir, who)
        }
    };
    (@one [$($inner:tt).+] create_dir_all) => {
        fn create_dir_all(&self, dir: &::std::path::Path) -> $crate::error::Result<()> {
            self.$($inner).+.create_dir_all(dir)
        }
    };
    (@one [$($inner:tt).+] exists) => {
        fn exists(&self, path: &::std::path::Path) -> bool {
            self.$($inner).+.exists(path)
        }
    };
    (@one [$($inner:tt).+] list_dir) => {
        fn list_dir(&self, dir: &::std::path::Path) -> $crate::error::Result<Vec<::std::path::PathBuf>> {
            self.$($inner).+.list_dir(dir)
        }
    };
    (@one [$($inner:tt).+] sector_size) => {
        fn sector_size(&self, path: &::std::path::Path) -> Option<u32> {
            self.$($inner).+.sector_size(path)
        }
    };
    (@one [$($inner:tt).+] free_space) => {
        fn free_space(&self, path: &::std::path::Path) -> Option<u64> {
            self.$($inner).+.free_space(path)
        }
    };
    (@one [$($inner:tt).+] atomic_writes) => {
        fn atomic_writes(
            &self,
            path: &::std::path::Path,
        ) -> $crate::error::Result<$crate::file::atomic::AtomicWrites> {
            self.$($inner).+.atomic_writes(path)
        }
    };
    // The field path travels as one bracketed token tree, so that it can
    // repeat once per method.
    (@each $field:tt $($method:ident),+) => {
        $( $crate::forward_file_system_methods!(@one $field $method); )+
    };
    ($($inner:tt).+ : $($method:ident),+ $(,)?) => {
        $crate::forward_file_system_methods!(@each [$($inner).+] $($method),+);
    };
}

/// The directory-level operations and the factory for [`File`]s.
pub trait FileSystem: Send + Sync {
    /// Opens (or creates) a file.
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>>;
    /// Renames a file; durable only after [`FileSystem::sync_dir`].
    fn rename(&self, from: &Path, to: &Path, kind: FileKind, who: Issuer) -> Result<()>;
    /// Removes a file; durable only after [`FileSystem::sync_dir`].
    fn remove(&self, path: &Path, kind: FileKind, who: Issuer) -> Result<()>;
    /// fsyncs a directory, making creations, renames and removals in it durable.
    fn sync_dir(&self, dir: &Path, who: Issuer) -> Result<()>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// True if the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// The names of the entries in a directory, sorted.
    fn list_dir(&self, dir: &Path) -> Result<Vec<PathBuf>>;
    /// The sector of the device holding `path` (or its nearest existing
    /// ancestor): the larger of its logical and physical block sizes, the
    /// unit a power cut may tear or destroy whole. `None` where the device
    /// does not say (tmpfs, overlay, a network file system).
    fn sector_size(&self, path: &Path) -> Option<u32>;
    /// What the file system says about all-or-nothing writes to the file
    /// at `path` (statx's STATX_WRITE_ATOMIC): whether a page can be
    /// opened with [`OpenOptions::atomic_unit`]. By default none.
    fn atomic_writes(&self, path: &Path) -> Result<atomic::AtomicWrites> {
        let _ = path;
        Ok(atomic::AtomicWrites::default())
    }
    /// The bytes an unprivileged writer may still add to the file system
    /// holding `path` (statvfs's f_bavail), or `None` where it cannot say.
    /// A hint: other writers may take the space the moment after.
    fn free_space(&self, path: &Path) -> Option<u64> {
        let _ = path;
        None
    }
}
