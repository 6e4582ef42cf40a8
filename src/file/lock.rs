//! The lock of a database directory: one opening at a time.
//!
//! An opening holds an exclusive lock on the directory's `untorn.lock`
//! for as long as it lives; a tool that only reads holds a shared one
//! while it reads. Two openings of one directory would each write WAL the
//! other does not know of, over each other's, and pages that name their
//! LSNs: the directory would soon no longer open. (PostgreSQL's
//! postmaster.pid, SQLite's file locks and InnoDB's lock on its system
//! tablespace guard the same.)
//!
//! The lock is [`File::try_lock`]'s, which the kernel drops when its
//! holder's process ends, however it ends, so a lock file that a dead
//! process left never blocks. The file's text (docs/FORMAT.md) only names
//! the holder in a refusal: nothing trusts it, so it is never fsynced.

use super::{File, FileKind, FileSystem, Issuer, LockMode, OpenOptions};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The lock file's name in a database directory.
pub const LOCK_FILE_NAME: &str = "untorn.lock";

/// Most bytes of the holder's command line written to the lock file.
const COMMAND_MAX: usize = 512;

/// The lock file's path in directory `dir`.
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join(LOCK_FILE_NAME)
}

/// A held lock on a directory; dropping it releases it (first by
/// [`File::unlock`], then by closing the lock file).
pub struct DirLock {
    file: Arc<dyn File>,
    mode: LockMode,
}

impl std::fmt::Debug for DirLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirLock")
            .field("path", &self.file.path())
            .field("mode", &self.mode)
            .finish()
    }
}

impl Drop for DirLock {
    /// Unlocks before the file closes. Before: `untorn stats` run by a
    /// test right after `close()` was now and then refused as "in use by"
    /// the test itself (cli_stats, cli_check): another test thread's
    /// fork held a copy of the descriptor, and with it the lock, until
    /// its exec.
    fn drop(&mut self) {
        if let Err(e) = self.file.unlock() {
            tracing::warn!(error = %e, "could not unlock the database directory; it is released as the lock file closes");
        }
    }
}

impl DirLock {
    /// Takes the exclusive lock of `dir` (which must exist), creating the
    /// lock file if needed, and writes this process's PID, start time and
    /// command line into it. Refused with [`Error::InUse`], naming the
    /// holder, while anyone else holds the lock.
    pub fn exclusive(fs: &dyn FileSystem, dir: &Path) -> Result<DirLock> {
        let path = lock_path(dir);
        let file = fs.open(&path, FileKind::Lock, OpenOptions::create())?;
        if !file.try_lock(LockMode::Exclusive)? {
            return Err(refusal(dir, file.as_ref(), true));
        }
        let text = holder_text();
        file.set_len(0, Issuer::Tool)?;
        file.write_at(text.as_bytes(), 0, Issuer::Tool)?;
        Ok(DirLock {
            file,
            mode: LockMode::Exclusive,
        })
    }

    /// Takes a shared lock of `dir`, for a tool that only reads: any
    /// number of tools at once, but none while an opening holds the
    /// exclusive lock (refused with [`Error::InUse`] naming it), and no
    /// opening while a tool reads. `None` where the lock file neither
    /// exists nor can be created by this user: nobody can have taken the
    /// lock, as the file is created before it is locked.
    pub fn shared(fs: &dyn FileSystem, dir: &Path) -> Result<Option<DirLock>> {
        let path = lock_path(dir);
        let file = match fs.open(&path, FileKind::Lock, OpenOptions::create()) {
            Ok(f) => f,
            // A directory this user may only read: a shared lock needs
            // only a read-only handle, if the file is there.
            Err(e) if os_error_is(&e, &[libc::EACCES, libc::EPERM, libc::EROFS]) => {
                match fs.open(&path, FileKind::Lock, OpenOptions::read_only()) {
                    Ok(f) => f,
                    Err(e) if os_error_is(&e, &[libc::ENOENT]) => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        if !file.try_lock(LockMode::Shared)? {
            return Err(refusal(dir, file.as_ref(), false));
        }
        Ok(Some(DirLock {
            file,
            mode: LockMode::Shared,
        }))
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Exclusive (an opening's) or shared (a tool's).
    pub fn mode(&self) -> LockMode {
        self.mode
    }
}

/// True if `e` is a failed system call with one of `codes`.
fn os_error_is(e: &Error, codes: &[i32]) -> bool {
    match e {
        Error::Io { source, .. } => source.raw_os_error().is_some_and(|c| codes.contains(&c)),
        _ => false,
    }
}

/// What the lock file says of its holder: `key value` lines.
fn holder_text() -> String {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut command = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
        .replace(['\n', '\r'], " ");
    if command.len() > COMMAND_MAX {
        let mut end = COMMAND_MAX;
        while !command.is_char_boundary(end) {
            end -= 1;
        }
        command.truncate(end);
    }
    format!(
        "pid {}\nstarted {started}\ncommand {command}\n",
        std::process::id()
    )
}

/// The holder as the lock file names it: its PID and command line, if
/// the file holds them (a holder that has just taken the lock may not
/// have written them yet).
fn read_holder(file: &dyn File) -> (Option<u32>, Option<String>) {
    let mut buf = vec![0u8; 4096];
    let n = file.read_at(&mut buf, 0, Issuer::Tool).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let pid = value("pid").and_then(|p| p.parse().ok());
    (pid, value("command").map(str::to_string))
}

/// The refusal of a lock that `file` could not take, naming the holder.
/// `probe`: the lock asked for was exclusive, so the holders may be tools
/// with shared locks, whose PIDs the file does not hold.
fn refusal(dir: &Path, file: &dyn File, probe: bool) -> Error {
    let lock_file = file.path().to_path_buf();
    // A shared lock still to be had: only tools hold it. (This handle is
    // dropped with the error, and the probe's lock with it.)
    if probe && matches!(file.try_lock(LockMode::Shared), Ok(true)) {
        return Error::InUse {
            dir: dir.to_path_buf(),
            lock_file,
            pid: None,
            holder: "a tool reading it (a shared lock)".into(),
        };
    }
    let (pid, command) = read_holder(file);
    let mut holder = match pid {
        Some(pid) => format!("process {pid}"),
        None => "another process (the lock file does not name it yet)".into(),
    };
    if let Some(c) = command {
        holder += &format!(" ({c})");
    }
    if pid == Some(std::process::id()) {
        holder += ", this very process, which has it open already";
    }
    Error::InUse {
        dir: dir.to_path_buf(),
        lock_file,
        pid,
        holder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::posix::PosixFileSystem;

    fn in_use(e: Error) -> (Option<u32>, String) {
        match e {
            Error::InUse { pid, .. } => (pid, e.to_string()),
            other => panic!("not InUse: {other}"),
        }
    }

    #[test]
    fn a_second_exclusive_lock_is_refused_naming_the_holder() {
        let fs = PosixFileSystem::default();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let held = DirLock::exclusive(&fs, dir).unwrap();
        assert_eq!(held.path(), lock_path(dir));
        let text = std::fs::read_to_string(lock_path(dir)).unwrap();
        let me = std::process::id();
        assert!(text.starts_with(&format!("pid {me}\nstarted ")), "{text}");
        assert!(text.contains("\ncommand "), "{text}");

        let (pid, msg) = in_use(DirLock::exclusive(&fs, dir).unwrap_err());
        assert_eq!(pid, Some(me));
        assert!(msg.contains(&format!("in use by process {me}")), "{msg}");
        assert!(msg.contains(&lock_path(dir).display().to_string()), "{msg}");
        assert!(msg.contains("this very process"), "{msg}");
        // A tool is refused too, naming the same holder.
        let (pid, _) = in_use(DirLock::shared(&fs, dir).unwrap_err());
        assert_eq!(pid, Some(me));

        drop(held);
        let again = DirLock::exclusive(&fs, dir).unwrap();
        assert_eq!(again.mode(), LockMode::Exclusive);
    }

    #[test]
    fn tools_share_the_lock_and_keep_openings_out() {
        let fs = PosixFileSystem::default();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let a = DirLock::shared(&fs, dir).unwrap().unwrap();
        let b = DirLock::shared(&fs, dir).unwrap().unwrap();
        assert_eq!(a.mode(), LockMode::Shared);
        let (pid, msg) = in_use(DirLock::exclusive(&fs, dir).unwrap_err());
        assert_eq!(pid, None);
        assert!(msg.contains("a tool reading it"), "{msg}");
        drop((a, b));
        DirLock::exclusive(&fs, dir).unwrap();
    }

    /// The file's text is never trusted: what a dead holder left (its
    /// PID, or anything at all) does not keep the lock from being taken,
    /// and is replaced.
    #[test]
    fn a_lock_file_left_behind_does_not_block() {
        let fs = PosixFileSystem::default();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        for left in ["pid 1\nstarted 0\ncommand untorn serve\n", "\u{0}garbage"] {
            std::fs::write(lock_path(dir), left).unwrap();
            let lock = DirLock::exclusive(&fs, dir).unwrap();
            let text = std::fs::read_to_string(lock_path(dir)).unwrap();
            assert!(text.starts_with(&format!("pid {}\n", std::process::id())));
            drop(lock);
        }
    }
}
