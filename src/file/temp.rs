//! Temporary files: what a statement writes aside and reads back within
//! itself (a sort's runs, sql/sort.rs), as PostgreSQL's pgsql_tmp files.
//!
//! Rules:
//! - A temporary file lives in the database's `spill/` directory, named
//!   `sort.<n>`; it is removed when dropped, and an opening removes any a
//!   crash left (every file there but a committed write set,
//!   txn/spilled.rs).
//! - It is never fsynced: nothing in it has to survive a crash.
//! - It grows only at its end, and past `limit` bytes (temp_file_limit)
//!   a write is refused with `Error::TempFileLimit`.

use super::{File, FileKind, FileSystem, Issuer, OpenOptions};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Numbers temporary files within the process.
static NEXT: AtomicU64 = AtomicU64::new(0);

pub struct TempFile {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    file: Arc<dyn File>,
    end: u64,
    limit: u64,
}

impl TempFile {
    /// A new, empty temporary file in `dir` (created if missing).
    pub fn create(fs: &Arc<dyn FileSystem>, dir: &Path, limit: u64) -> Result<TempFile> {
        fs.create_dir_all(dir)?;
        loop {
            let path = dir.join(format!("sort.{}", NEXT.fetch_add(1, Relaxed)));
            if fs.exists(&path) {
                continue;
            }
            let file = fs.open(&path, FileKind::Spill, OpenOptions::create_new())?;
            return Ok(TempFile {
                fs: fs.clone(),
                path,
                file,
                end: 0,
                limit,
            });
        }
    }

    /// Appends `buf`; returns where it starts.
    pub fn append(&mut self, buf: &[u8]) -> Result<u64> {
        if self.end.saturating_add(buf.len() as u64) > self.limit {
            return Err(Error::TempFileLimit { limit: self.limit });
        }
        let at = self.end;
        self.file.write_at(buf, at, Issuer::Client)?;
        self.end += buf.len() as u64;
        Ok(at)
    }

    /// Reads up to `buf.len()` bytes at `offset`, none past what was
    /// appended; returns how many.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let n = (self.end.saturating_sub(offset)).min(buf.len() as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.file.read_at(&mut buf[..n], offset, Issuer::Client)
    }

    /// Bytes appended.
    pub fn len(&self) -> u64 {
        self.end
    }

    pub fn is_empty(&self) -> bool {
        self.end == 0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Err(e) = self.fs.remove(&self.path, FileKind::Spill, Issuer::Client) {
            tracing::warn!("temporary file {} not removed: {e}", self.path.display());
        }
    }
}
