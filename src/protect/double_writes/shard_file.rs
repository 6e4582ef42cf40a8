//! A shard's file on disk: created whole, checked at each opening, and
//! fsynced by groups (several writers' batches share one fsync, as
//! commits share a WAL flush).

use super::area::{FileHeader, Shard, AREA_DIR};
use crate::error::{Error, Result};
use crate::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::Arc;

/// Opens `shard`'s file under `dir`, creating it (or creating it again, at
/// another size) when it is missing or of another size. Called at an
/// opening after recovery restored what the area held and fsynced it, so
/// the old file's batches are no longer needed. `direct`: try O_DIRECT.
pub fn open_or_create(
    fs: &dyn FileSystem,
    dir: &Path,
    want: &FileHeader,
    direct: bool,
    who: Issuer,
) -> Result<BatchFile> {
    let area_dir = dir.join(AREA_DIR);
    if !fs.exists(&area_dir) {
        fs.create_dir_all(&area_dir)?;
        fs.sync_dir(dir, who)?;
    }
    let path = want.shard.path(dir);
    if fs.exists(&path) {
        let file = fs.open(&path, FileKind::DoubleWrite, OpenOptions::read_write())?;
        let mut head = vec![0u8; want.page_size as usize];
        let got = if file.len()? >= head.len() as u64 {
            file.read_exact_at(&mut head, 0, who)?;
            Some(FileHeader::decode(&path, &head)?)
        } else {
            None
        };
        match got {
            Some(h) if h.system_id != want.system_id || h.page_size != want.page_size => {
                return Err(Error::corruption(
                    &path,
                    "offset 0",
                    format!(
                        "double-write file of another database (system id {:#x}, {}-byte pages; \
                         this database: {:#x}, {}-byte pages)",
                        h.system_id, h.page_size, want.system_id, want.page_size
                    ),
                ));
            }
            Some(h) if h == *want && file.len()? == file_len(want) => {
                drop(file);
                return open_for_batches(fs, &path, direct);
            }
            _ => {
                tracing::info!(
                    file = %path.display(),
                    area_blocks = want.area_blocks,
                    "double-write shard of another size: created again"
                );
            }
        }
    }
    create(fs, dir, want, direct, who)
}

fn file_len(h: &FileHeader) -> u64 {
    (1 + h.area_blocks as u64) * h.page_size as u64
}

/// Creates `dw/shard-<n>` whole: the header and a zeroed, allocated area in
/// `shard-<n>.tmp`, fsynced, renamed, and the directory fsynced
/// (docs/FORMAT.md). A crash leaves the old file or the new one, whole.
fn create(
    fs: &dyn FileSystem,
    dir: &Path,
    h: &FileHeader,
    direct: bool,
    who: Issuer,
) -> Result<BatchFile> {
    let path = h.shard.path(dir);
    let tmp = path.with_file_name(format!("shard-{}.tmp", h.shard.number()));
    if fs.exists(&tmp) {
        fs.remove(&tmp, FileKind::DoubleWrite, who)?;
    }
    {
        let file = fs.open(&tmp, FileKind::DoubleWrite, OpenOptions::create_new())?;
        file.write_at(&h.encode(), 0, who)?;
        // Allocated now so that a batch's fdatasync has no block
        // allocation to journal.
        file.allocate(0, file_len(h), who)?;
        file.sync_all(who)?;
    }
    fs.rename(&tmp, &path, FileKind::DoubleWrite, who)?;
    fs.sync_dir(&dir.join(AREA_DIR), who)?;
    open_for_batches(fs, &path, direct)
}

/// A shard file opened for writing batches: with O_DIRECT where the file
/// system has it (InnoDB's choice for its doublewrite file), so that a
/// batch, written once and read only by recovery, neither fills the page
/// cache nor leaves writeback for its fsync; else buffered.
pub struct BatchFile {
    pub file: Arc<dyn File>,
    pub direct: bool,
}

fn open_for_batches(fs: &dyn FileSystem, path: &Path, direct: bool) -> Result<BatchFile> {
    if !direct {
        return Ok(BatchFile {
            file: fs.open(path, FileKind::DoubleWrite, OpenOptions::read_write())?,
            direct: false,
        });
    }
    let direct = OpenOptions {
        direct: true,
        ..OpenOptions::read_write()
    };
    match fs.open(path, FileKind::DoubleWrite, direct) {
        Ok(file) => Ok(BatchFile { file, direct: true }),
        // tmpfs and some others refuse O_DIRECT (EINVAL).
        Err(_) => Ok(BatchFile {
            file: fs.open(path, FileKind::DoubleWrite, OpenOptions::read_write())?,
            direct: false,
        }),
    }
}

pub use crate::file::aligned::AlignedBuf;

/// Removes every file of `dir`'s double-write area (a mode without one is
/// in force, and recovery restored what it held); returns how many.
pub fn remove_area(fs: &dyn FileSystem, dir: &Path, who: Issuer) -> Result<u64> {
    let area_dir = dir.join(AREA_DIR);
    if !fs.exists(&area_dir) {
        return Ok(0);
    }
    let mut removed = 0;
    for path in fs.list_dir(&area_dir)? {
        fs.remove(&path, FileKind::DoubleWrite, who)?;
        removed += 1;
    }
    if removed > 0 {
        fs.sync_dir(&area_dir, who)?;
    }
    Ok(removed)
}

/// Group fsync of one shard file: a writer whose batch is written waits for
/// an fsync that started after its write, and leads one if none runs.
#[derive(Default)]
pub struct GroupSync {
    state: Mutex<SyncState>,
    done: Condvar,
}

#[derive(Default)]
struct SyncState {
    /// Writes completed, numbered in completion order.
    written: u64,
    /// Every write numbered up to this is durable.
    synced: u64,
    running: bool,
}

impl GroupSync {
    /// Call after a write to `file` returned: returns once that write is
    /// durable, and whether this caller ran the fsync.
    pub fn after_write(&self, file: &dyn File, who: Issuer) -> Result<bool> {
        let mine = {
            let mut s = self.state.lock();
            s.written += 1;
            s.written
        };
        self.sync_through(file, mine, who)
    }

    /// Returns once write `mine` is durable, and whether this caller ran
    /// the fsync.
    fn sync_through(&self, file: &dyn File, mine: u64, who: Issuer) -> Result<bool> {
        let mut s = self.state.lock();
        loop {
            if s.synced >= mine {
                return Ok(false);
            }
            if !s.running {
                s.running = true;
                let target = s.written;
                drop(s);
                let result = file.sync_data(who);
                s = self.state.lock();
                s.running = false;
                if result.is_ok() {
                    s.synced = s.synced.max(target);
                }
                self.done.notify_all();
                return result.map(|()| true);
            }
            self.done.wait(&mut s);
        }
    }
}

/// The shard a writer's batches go to.
pub fn shard_of(who: Issuer) -> Shard {
    match who {
        Issuer::Checkpointer => Shard::Checkpointer,
        Issuer::BackgroundWriter => Shard::BackgroundWriter,
        // Clients, and recovery's and tools' evictions.
        _ => Shard::ClientEvictions,
    }
}

/// Fills `buf` from `offset` of `file`, a block that fails with EIO
/// reading as zeros; returns how many did.
pub(super) fn read_blocks(
    file: &dyn crate::file::File,
    offset: u64,
    buf: &mut [u8],
    page_size: usize,
) -> Result<u64> {
    match file.read_exact_at(buf, offset, Issuer::Recovery) {
        Err(e) if is_eio(&e) => {}
        other => return other.map(|()| 0),
    }
    // Block by block, to lose only the unreadable ones.
    let mut unreadable = 0;
    for (i, block) in buf.chunks_mut(page_size).enumerate() {
        match file.read_exact_at(block, offset + (i * page_size) as u64, Issuer::Recovery) {
            Ok(()) => {}
            Err(e) if is_eio(&e) => {
                block.fill(0);
                unreadable += 1;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(unreadable)
}

pub(super) fn is_eio(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.raw_os_error() == Some(libc::EIO))
}
