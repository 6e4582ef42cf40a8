//! The real file layer: POSIX calls through libc (std::fs and the `libc`
//! crate), so strace and LD_PRELOAD-based recorders see every write and fsync.

use super::{File, FileKind, FileSystem, Issuer, LockMode, OpenOptions};
use crate::error::{Error, Result};
use crate::file::{IoOp, IoStats};
use parking_lot::Mutex;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Shared between a file system and its files: set at the first failed
/// fsync, after which nothing may be written or synced again.
#[derive(Default)]
struct Poison {
    failed_path: Mutex<Option<PathBuf>>,
}

impl Poison {
    fn check(&self) -> Result<()> {
        match &*self.failed_path.lock() {
            Some(path) => Err(Error::Poisoned { path: path.clone() }),
            None => Ok(()),
        }
    }

    fn set(&self, path: &Path) {
        let mut guard = self.failed_path.lock();
        if guard.is_none() {
            *guard = Some(path.to_path_buf());
        }
    }
}

/// The POSIX file system.
pub struct PosixFileSystem {
    stats: Arc<IoStats>,
    poison: Arc<Poison>,
}

impl PosixFileSystem {
    pub fn new(stats: Arc<IoStats>) -> Self {
        PosixFileSystem {
            stats,
            poison: Arc::new(Poison::default()),
        }
    }

    /// The statistics this layer records into.
    pub fn stats(&self) -> &Arc<IoStats> {
        &self.stats
    }
}

impl Default for PosixFileSystem {
    fn default() -> Self {
        PosixFileSystem::new(Arc::new(IoStats::default()))
    }
}

struct PosixFile {
    file: std::fs::File,
    path: PathBuf,
    kind: FileKind,
    /// Opened O_DIRECT: reads go through aligned memory.
    direct: bool,
    /// [`OpenOptions::atomic_unit`]: writes are whole units, RWF_ATOMIC.
    atomic_unit: Option<u32>,
    stats: Arc<IoStats>,
    poison: Arc<Poison>,
}

/// True when sync_file_range failed because the file system does not
/// support it (the request then falls to the fsync that follows).
fn unsupported(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EINVAL))
}

impl PosixFile {
    /// sync_file_range over `len` bytes at `offset` with `flags`.
    fn sync_range(&self, offset: u64, len: u64, flags: libc::c_uint) -> std::io::Result<()> {
        // SAFETY: plain syscall on an fd we own; no memory is passed.
        let rc = unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                offset as libc::off64_t,
                len as libc::off64_t,
                flags,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    fn fsync_result(&self, res: std::io::Result<()>) -> Result<()> {
        res.map_err(|source| {
            // The kernel may have dropped the dirty pages and marked them
            // clean: poison everything so nobody retries (fsyncgate).
            self.poison.set(&self.path);
            Error::FsyncFailed {
                path: self.path.clone(),
                source,
            }
        })
    }
}

impl File for PosixFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn kind(&self) -> FileKind {
        self.kind
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, who: Issuer) -> Result<usize> {
        if self.direct {
            let done = super::direct::read_direct(&self.file, buf, offset)
                .map_err(|e| Error::io(&self.path, "pread (O_DIRECT)", e))?;
            self.stats.record(who, self.kind, IoOp::Read, done as u64);
            return Ok(done);
        }
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&self.path, "pread", e)),
            }
        }
        self.stats.record(who, self.kind, IoOp::Read, done as u64);
        Ok(done)
    }

    fn write_at(&self, buf: &[u8], offset: u64, who: Issuer) -> Result<()> {
        if self.atomic_unit.is_some() {
            return self.write_vectored_at(&[buf], offset, who);
        }
        self.poison.check()?;
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| Error::io(&self.path, "pwrite", e))?;
        self.stats
            .record(who, self.kind, IoOp::Write, buf.len() as u64);
        Ok(())
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()> {
        if let Some(unit) = self.atomic_unit {
            self.poison.check()?;
            super::direct::write_whole_units(&self.file, bufs, offset, unit)
                .map_err(|e| Error::atomic_write(&self.path, unit, e))?;
            let total: usize = bufs.iter().map(|b| b.len()).sum();
            self.stats.record(who, self.kind, IoOp::Write, total as u64);
            return Ok(());
        }
        // One buffer (a lone evicted page) is a pwrite: no iovec to build,
        // and the kernel's plain write path is the shorter one.
        if let [one] = bufs {
            return self.write_at(one, offset, who);
        }
        self.poison.check()?;
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let mut written = 0usize;
        // Loop because pwritev may write less than asked; IOV_MAX bounds
        // one call, so go in chunks.
        while written < total {
            let mut iov = Vec::with_capacity(bufs.len().min(1024));
            let mut skip = written;
            for b in bufs {
                if skip >= b.len() {
                    skip -= b.len();
                    continue;
                }
                iov.push(libc::iovec {
                    iov_base: b[skip..].as_ptr() as *mut libc::c_void,
                    iov_len: b.len() - skip,
                });
                skip = 0;
                if iov.len() == 1024 {
                    break;
                }
            }
            // SAFETY: every iovec points into a live slice of `bufs`, which
            // outlives the call; pwritev only reads from them.
            let n = unsafe {
                libc::pwritev(
                    self.file.as_raw_fd(),
                    iov.as_ptr(),
                    iov.len() as libc::c_int,
                    (offset + written as u64) as libc::off_t,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io(&self.path, "pwritev", e));
            }
            if n == 0 {
                return Err(Error::io(
                    &self.path,
                    "pwritev",
                    std::io::Error::new(std::io::ErrorKind::WriteZero, "wrote zero bytes"),
                ));
            }
            written += n as usize;
        }
        self.stats.record(who, self.kind, IoOp::Write, total as u64);
        Ok(())
    }

    fn sync_all(&self, who: Issuer) -> Result<()> {
        self.poison.check()?;
        let res = self.file.sync_all();
        self.stats.record(who, self.kind, IoOp::Fsync, 0);
        self.fsync_result(res)
    }

    fn sync_data(&self, who: Issuer) -> Result<()> {
        self.poison.check()?;
        let res = self.file.sync_data();
        self.stats.record(who, self.kind, IoOp::Fsync, 0);
        self.fsync_result(res)
    }

    fn writeback_hint(&self, offset: u64, len: u64, who: Issuer) -> Result<()> {
        self.poison.check()?;
        match self.sync_range(offset, len, libc::SYNC_FILE_RANGE_WRITE) {
            // Not every file system supports it; it is only a hint.
            Err(e) if !unsupported(&e) => return Err(Error::io(&self.path, "sync_file_range", e)),
            _ => {}
        }
        self.stats.record(who, self.kind, IoOp::Writeback, len);
        Ok(())
    }

    fn write_back_and_wait(&self, offset: u64, len: u64, who: Issuer) -> Result<()> {
        self.poison.check()?;
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        match self.sync_range(offset, len, flags) {
            Ok(()) => {}
            // Unsupported: the fsync that follows writes the range.
            Err(e) if unsupported(&e) => {}
            // Waiting consumed the file's writeback error: the fsync after
            // may not see it, so this is a failed fsync (fsyncgate).
            Err(e) => self.fsync_result(Err(e))?,
        }
        self.stats.record(who, self.kind, IoOp::Writeback, len);
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64, _who: Issuer) -> Result<()> {
        self.poison.check()?;
        // SAFETY: plain syscall on an fd we own.
        let rc = unsafe {
            libc::posix_fallocate(
                self.file.as_raw_fd(),
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        match rc {
            0 => Ok(()),
            // File systems without fallocate: extend with set_len instead.
            libc::EOPNOTSUPP | libc::EINVAL => {
                let cur = self.len()?;
                if cur < offset + len {
                    self.file
                        .set_len(offset + len)
                        .map_err(|e| Error::io(&self.path, "ftruncate", e))?;
                }
                Ok(())
            }
            code => Err(Error::io(
                &self.path,
                "posix_fallocate",
                std::io::Error::from_raw_os_error(code),
            )),
        }
    }

    fn set_len(&self, len: u64, _who: Issuer) -> Result<()> {
        self.poison.check()?;
        self.file
            .set_len(len)
            .map_err(|e| Error::io(&self.path, "ftruncate", e))
    }

    fn len(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| Error::io(&self.path, "fstat", e))
    }

    fn try_lock(&self, mode: LockMode) -> Result<bool> {
        // An open file description lock (F_OFD_SETLK): like flock, it
        // belongs to this open file, so a second opening in this process
        // conflicts too, and the kernel drops it when the last descriptor
        // closes, at exit or SIGKILL included. Unlike flock, which NFS
        // turns into a lock of the process, it stays per open file there.
        // SAFETY: a plain C struct, for which all zeros is a valid value.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = match mode {
            LockMode::Shared => libc::F_RDLCK,
            LockMode::Exclusive => libc::F_WRLCK,
        } as libc::c_short;
        // l_start 0 and l_len 0 from SEEK_SET: the whole file, however long.
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        loop {
            // SAFETY: an fd we own and a flock struct that outlives the call.
            let rc = unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
            if rc == 0 {
                return Ok(true);
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EACCES) => return Ok(false),
                Some(libc::EINTR) => continue,
                _ => return Err(Error::io(&self.path, "fcntl(F_OFD_SETLK)", e)),
            }
        }
    }

    fn unlock(&self) -> Result<()> {
        // SAFETY: a plain C struct, for which all zeros is a valid value.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_UNLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        // SAFETY: an fd we own and a flock struct that outlives the call.
        let rc = unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        Err(Error::io(&self.path, "fcntl(F_OFD_SETLK, F_UNLCK)", e))
    }
}

impl FileSystem for PosixFileSystem {
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>> {
        let mut o = std::fs::OpenOptions::new();
        o.read(true);
        if !opts.read_only {
            o.write(true);
        }
        if opts.create_new {
            o.create_new(true);
        } else if opts.create {
            o.create(true);
        }
        let direct = opts.direct || opts.atomic_unit.is_some();
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        let file = o.open(path).map_err(|e| Error::io(path, "open", e))?;
        Ok(Arc::new(PosixFile {
            file,
            path: path.to_path_buf(),
            kind,
            direct,
            atomic_unit: opts.atomic_unit,
            stats: self.stats.clone(),
            poison: self.poison.clone(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path, _kind: FileKind, _who: Issuer) -> Result<()> {
        self.poison.check()?;
        std::fs::rename(from, to).map_err(|e| Error::io(from, "rename", e))
    }

    fn remove(&self, path: &Path, _kind: FileKind, _who: Issuer) -> Result<()> {
        self.poison.check()?;
        std::fs::remove_file(path).map_err(|e| Error::io(path, "unlink", e))
    }

    fn sync_dir(&self, dir: &Path, who: Issuer) -> Result<()> {
        self.poison.check()?;
        let d = std::fs::File::open(dir).map_err(|e| Error::io(dir, "open directory", e))?;
        let res = d.sync_all();
        self.stats.record(who, FileKind::Control, IoOp::Fsync, 0);
        res.map_err(|source| {
            self.poison.set(dir);
            Error::FsyncFailed {
                path: dir.to_path_buf(),
                source,
            }
        })
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "mkdir", e))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, "readdir", e))? {
            let entry = entry.map_err(|e| Error::io(dir, "readdir", e))?;
            out.push(entry.path());
        }
        out.sort();
        Ok(out)
    }

    fn sector_size(&self, path: &Path) -> Option<u32> {
        super::sector::probe_sector_size(path)
    }

    fn atomic_writes(&self, path: &Path) -> Result<super::atomic::AtomicWrites> {
        super::atomic::AtomicWrites::probe(path).map_err(|e| Error::io(path, "statx", e))
    }

    fn free_space(&self, path: &Path) -> Option<u64> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: a zeroed statvfs is a valid out-parameter.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a NUL-terminated path, `st` a valid pointer.
        let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
        (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_sync_and_vectored() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::default();
        let f = fs
            .open(&dir.path().join("a"), FileKind::Data, OpenOptions::create())
            .unwrap();
        f.write_at(b"hello", 0, Issuer::Client).unwrap();
        f.write_vectored_at(&[b" ", b"world", b"!"], 5, Issuer::Checkpointer)
            .unwrap();
        f.sync_data(Issuer::Checkpointer).unwrap();
        let mut buf = [0u8; 12];
        f.read_exact_at(&mut buf, 0, Issuer::Client).unwrap();
        assert_eq!(&buf, b"hello world!");
        let mut big = [0u8; 20];
        assert!(f.read_exact_at(&mut big, 0, Issuer::Client).is_err());
        assert_eq!(fs.stats().calls(FileKind::Data, IoOp::Write), 2);
        assert_eq!(fs.stats().calls(FileKind::Data, IoOp::Fsync), 1);
        f.allocate(0, 65536, Issuer::Client).unwrap();
        assert_eq!(f.len().unwrap(), 65536);
        f.writeback_hint(0, 8192, Issuer::Checkpointer).unwrap();
    }

    #[test]
    fn fsync_failure_poisons_the_layer() {
        let fs = PosixFileSystem::default();
        let dir = tempfile::tempdir().unwrap();
        let f = fs
            .open(&dir.path().join("a"), FileKind::Wal, OpenOptions::create())
            .unwrap();
        fs.poison.set(&dir.path().join("a"));
        let e = f.write_at(b"x", 0, Issuer::Client).unwrap_err();
        assert!(e.is_fatal(), "{e}");
        assert!(f.sync_data(Issuer::WalWriter).unwrap_err().is_fatal());
    }

    /// A piece that fails to be written out (sync_file_range with
    /// WAIT_AFTER) consumed the file's writeback error, so it is a failed
    /// fsync: fatal, and the layer poisoned. A FIFO makes the kernel refuse
    /// the call for real (ESPIPE), which a regular file cannot be made to.
    #[test]
    fn a_failed_write_back_and_wait_poisons_like_a_failed_fsync() {
        let fs = PosixFileSystem::default();
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        // Read and write: opening a FIFO so does not wait for a peer.
        let f = fs
            .open(&fifo, FileKind::DoubleWrite, OpenOptions::read_write())
            .unwrap();
        let other = fs
            .open(&dir.path().join("a"), FileKind::Data, OpenOptions::create())
            .unwrap();
        let e = f
            .write_back_and_wait(0, 8192, Issuer::Checkpointer)
            .unwrap_err();
        assert!(
            matches!(e, Error::FsyncFailed { ref path, .. } if path == &fifo),
            "{e}"
        );
        assert!(e.is_fatal(), "{e}");
        assert_eq!(fs.stats().calls(FileKind::DoubleWrite, IoOp::Writeback), 0);
        assert!(other
            .write_at(b"x", 0, Issuer::Client)
            .unwrap_err()
            .is_fatal());
        assert!(other.sync_all(Issuer::Checkpointer).unwrap_err().is_fatal());
    }

    /// The lock belongs to the open file: a second opening of the same
    /// file in this very process is refused, as one in another process
    /// would be, and closing the first frees it.
    #[test]
    fn a_lock_belongs_to_its_open_file_even_within_one_process() {
        let fs = PosixFileSystem::default();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let open = || {
            fs.open(&path, FileKind::Lock, OpenOptions::create())
                .unwrap()
        };
        let (a, b) = (open(), open());
        assert!(a.try_lock(LockMode::Exclusive).unwrap());
        assert!(a.try_lock(LockMode::Exclusive).unwrap(), "again: kept");
        assert!(!b.try_lock(LockMode::Exclusive).unwrap());
        assert!(!b.try_lock(LockMode::Shared).unwrap());
        // Converted to shared, a shares it with others.
        assert!(a.try_lock(LockMode::Shared).unwrap());
        assert!(b.try_lock(LockMode::Shared).unwrap());
        assert!(!a.try_lock(LockMode::Exclusive).unwrap());
        drop(b);
        assert!(a.try_lock(LockMode::Exclusive).unwrap());
        // Read-only handles take shared locks only (F_RDLCK needs read
        // access, F_WRLCK write access).
        let reader = fs
            .open(&path, FileKind::Lock, OpenOptions::read_only())
            .unwrap();
        assert!(!reader.try_lock(LockMode::Shared).unwrap());
        drop(a);
        assert!(reader.try_lock(LockMode::Shared).unwrap());
        assert!(reader.try_lock(LockMode::Exclusive).is_err());
        let c = open();
        assert!(!c.try_lock(LockMode::Exclusive).unwrap());
        drop(reader);
        assert!(c.try_lock(LockMode::Exclusive).unwrap());
    }

    /// The descriptor this process has open on `path` (exactly one).
    fn fd_of(path: &Path) -> i32 {
        let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| {
                let e = e.ok()?;
                (std::fs::read_link(e.path()).ok()? == path)
                    .then(|| e.file_name().to_str()?.parse().ok())?
            })
            .collect();
        assert_eq!(fds.len(), 1, "{fds:?}");
        fds[0]
    }

    /// A copy of the descriptor (what a process forked by another thread
    /// holds until it execs) keeps the lock after the handle closes;
    /// `unlock` releases it even so. Before: DirLock only closed its
    /// handle, and `untorn stats` or `check` run by a test right after
    /// `close()` was sometimes refused as "in use" by the test itself.
    #[test]
    fn unlock_releases_a_lock_a_copy_of_the_descriptor_still_holds() {
        let fs = PosixFileSystem::default();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let open = || {
            fs.open(&path, FileKind::Lock, OpenOptions::create())
                .unwrap()
        };
        for unlock_first in [false, true] {
            let a = open();
            assert!(a.try_lock(LockMode::Exclusive).unwrap());
            // SAFETY: dup of a descriptor this process has open.
            let copy = unsafe { libc::dup(fd_of(&path)) };
            assert!(copy >= 0);
            if unlock_first {
                a.unlock().unwrap();
            }
            drop(a);
            let b = open();
            assert_eq!(b.try_lock(LockMode::Exclusive).unwrap(), unlock_first);
            drop(b);
            // SAFETY: the copy made above, closed once.
            unsafe { libc::close(copy) };
        }
    }
}
