//! The one place data pages go to disk, and the data files they go to.

use super::{BufferPool, PageId};
use crate::error::Result;
use crate::file::open_files::OpenFileLimit;
use crate::file::segmented::SegmentedFile;
use crate::file::{FileKind, FileSystem, Issuer};
use crate::lsn::Lsn;
use crate::settings::CreationSettings;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;

/// The data files of a database, opened on first use.
pub struct DataFiles {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    page_size: usize,
    pages_per_segment: u64,
    files: RwLock<HashMap<u32, Arc<SegmentedFile>>>,
    /// The atomic write unit every segment is opened with (0: none; the
    /// page size under `torn_page_protection = atomic`).
    atomic_unit: Arc<AtomicU32>,
    /// The bound on segments open at once, shared by every file.
    open_files: Arc<OpenFileLimit>,
}

impl DataFiles {
    pub fn new(fs: Arc<dyn FileSystem>, dir: &Path, settings: &CreationSettings) -> DataFiles {
        DataFiles {
            fs,
            dir: dir.to_path_buf(),
            page_size: settings.page_size as usize,
            pages_per_segment: settings.pages_per_data_segment(),
            files: RwLock::new(HashMap::new()),
            atomic_unit: Arc::default(),
            open_files: OpenFileLimit::unlimited(),
        }
    }

    /// At most `limit` data segments open at once (`max_files_per_process`):
    /// past it the least recently used close, to open again when used.
    pub fn with_open_file_limit(mut self, limit: usize) -> DataFiles {
        self.open_files = OpenFileLimit::new(limit);
        self
    }

    /// The bound on open segments, and how many are open.
    pub fn open_files(&self) -> &OpenFileLimit {
        &self.open_files
    }

    /// Opens every data file from now on with (`true`) or without atomic
    /// page writes (O_DIRECT, RWF_ATOMIC, a page each). What was written
    /// is made durable first, and files already open are reopened.
    pub fn set_atomic_page_writes(&self, on: bool, who: Issuer) -> Result<()> {
        let unit = if on { self.page_size as u32 } else { 0 };
        if self.atomic_unit.load(SeqCst) == unit {
            return Ok(());
        }
        self.sync_all(who)?;
        self.atomic_unit.store(unit, SeqCst);
        for f in self.files.read().values() {
            f.close_segments();
        }
        Ok(())
    }

    /// Whether data files are opened with atomic page writes.
    pub fn atomic_page_writes(&self) -> bool {
        self.atomic_unit.load(SeqCst) != 0
    }

    /// The data file `file_id`.
    pub fn get(&self, file_id: u32) -> Result<Arc<SegmentedFile>> {
        if let Some(f) = self.files.read().get(&file_id) {
            return Ok(f.clone());
        }
        let mut files = self.files.write();
        let f = files.entry(file_id).or_insert_with(|| {
            SegmentedFile::new(
                self.fs.clone(),
                &self.dir,
                file_id,
                self.page_size,
                self.pages_per_segment,
                self.atomic_unit.clone(),
                self.open_files.clone(),
            )
        });
        Ok(f.clone())
    }

    /// fsyncs every data file this process opened, then the directory
    /// (new segment files).
    pub fn sync_all(&self, who: Issuer) -> Result<()> {
        self.sync_each(who, |_, _| {}).map(|_| ())
    }

    /// [`DataFiles::sync_all`], one file at a time, calling `after(done, of)`
    /// after each (a spread checkpoint paces its fsyncs there). Returns the
    /// number of files.
    pub fn sync_each(&self, who: Issuer, mut after: impl FnMut(usize, usize)) -> Result<usize> {
        // In file-id order, so a replayed crash sees the same fsync order.
        let mut files: Vec<_> = self.files.read().values().cloned().collect();
        files.sort_by_key(|f| f.file_id());
        for (i, f) in files.iter().enumerate() {
            f.sync(who)?;
            after(i + 1, files.len());
        }
        self.fs.sync_dir(&self.dir, who)?;
        Ok(files.len())
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// How many data files this process opened.
    pub fn open_count(&self) -> usize {
        self.files.read().len()
    }

    /// Asks the kernel to start writing back `pages` (sorted or not): one
    /// request per run of consecutive blocks.
    pub fn writeback(&self, pages: &[PageId], who: Issuer) -> Result<()> {
        let mut sorted = pages.to_vec();
        sorted.sort_unstable();
        for run in block_runs(&sorted) {
            let first = sorted[run.start];
            let file = self.get(first.file_id)?;
            file.writeback(first.block as u64, run.len() as u64, who)?;
        }
        Ok(())
    }

    /// Writes sorted `pages` in place, one vectored write per run of
    /// consecutive blocks.
    pub fn write_in_place(&self, pages: &[(PageId, &[u8])], who: Issuer) -> Result<()> {
        let ids: Vec<PageId> = pages.iter().map(|p| p.0).collect();
        for run in block_runs(&ids) {
            let first = ids[run.start];
            let file = self.get(first.file_id)?;
            let bufs: Vec<&[u8]> = pages[run].iter().map(|p| p.1).collect();
            file.write_pages(first.block as u64, &bufs, who)?;
        }
        Ok(())
    }

    /// Whether the segment file holding `block` of `file_id` exists.
    pub fn has_segment_for(&self, file_id: u32, block: u32) -> Result<bool> {
        self.get(file_id)?.has_segment_for(block as u64)
    }

    /// Deletes every segment of `file_id` (a dropped table).
    pub fn remove(&self, file_id: u32, who: Issuer) -> Result<()> {
        self.files.write().remove(&file_id);
        for path in self.fs.list_dir(&self.dir)? {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if crate::file::segmented::parse_segment_name(name).map(|(id, _)| id) == Some(file_id) {
                self.fs.remove(&path, FileKind::Data, who)?;
            }
        }
        self.fs.sync_dir(&self.dir, who)
    }

    /// The ids of every data file on disk.
    pub fn ids_on_disk(&self) -> Result<Vec<u32>> {
        let mut ids: Vec<u32> = self
            .fs
            .list_dir(&self.dir)?
            .iter()
            .filter_map(|p| p.file_name()?.to_str())
            .filter_map(|n| crate::file::segmented::parse_segment_name(n).map(|(id, _)| id))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }
}

/// Splits sorted `ids` into runs of consecutive blocks of one file.
fn block_runs(ids: &[PageId]) -> Vec<std::ops::Range<usize>> {
    let mut runs = Vec::new();
    let mut start = 0;
    for i in 1..=ids.len() {
        let continues = i < ids.len()
            && ids[i].file_id == ids[start].file_id
            && ids[i].block == ids[i - 1].block + 1;
        if !continues {
            runs.push(start..i);
            start = i;
        }
    }
    runs
}

/// A page copied out of its frame, on its way to disk.
pub struct PageCopy {
    idx: usize,
    id: PageId,
    gen: u64,
    commit_lsn: Lsn,
    bytes: Vec<u8>,
    /// CRC-32C of `bytes`, where stamping the checksum gave it for free.
    image_crc: Option<u32>,
}

impl PageCopy {
    /// The page this is a copy of.
    pub fn id(&self) -> PageId {
        self.id
    }

    /// The bytes about to be written: checksummed, final.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// CRC-32C of [`Self::bytes`] (double writes name images by it).
    pub fn image_crc(&self) -> u32 {
        let crc = self
            .image_crc
            .unwrap_or_else(|| crate::checksum::crc::crc32c(&self.bytes));
        debug_assert_eq!(crc, crate::checksum::crc::crc32c(&self.bytes));
        crc
    }

    /// A copy of `bytes` for page `id`, as the write path would hand it to
    /// torn-page protection (tests of protection modes).
    #[cfg(test)]
    pub(crate) fn for_tests(id: PageId, bytes: Vec<u8>) -> PageCopy {
        PageCopy {
            idx: 0,
            id,
            gen: 0,
            commit_lsn: Lsn(0),
            bytes,
            image_crc: None,
        }
    }
}

impl BufferPool {
    fn stopped(&self) -> crate::error::Error {
        crate::error::Error::Stopped("a failed commit or WAL fsync".into())
    }

    /// Writes the given frames (which the caller has pinned) if dirty: copy
    /// each under the shared latch, flush the WAL past every copy's commit
    /// LSN, stamp checksums, write in file/block order (runs of consecutive
    /// blocks as one vectored write), then mark each clean unless it changed
    /// meanwhile. Returns the number of pages written.
    pub fn write_frames(&self, idxs: &[usize], who: Issuer) -> Result<usize> {
        if self.is_poisoned() {
            return Err(self.stopped());
        }
        // A panic while pages are on their way out (a bug below, met
        // inside a write) leaves their frames' state and the writes'
        // accounting unknown: the pool stops, as after a failed fsync, and
        // recovery from the WAL decides (the crash laboratory's `panic`
        // found a commit acknowledged after one lost at the power cut).
        let _unwinding_stops = super::CriticalSection::new(self);
        // One writer per frame at a time, taken in frame order so two
        // batches cannot wait for each other.
        let mut order: Vec<usize> = idxs.to_vec();
        order.sort_unstable();
        order.dedup();
        let io_guards: Vec<_> = order.iter().map(|&i| self.frames[i].io.lock()).collect();
        let mut copies = Vec::with_capacity(order.len());
        for &idx in &order {
            let f = &self.frames[idx];
            assert!(f.pins.load(Acquire) > 0, "writing an unpinned frame");
            let g = f.latch.read();
            let Some(id) = f.page() else { continue };
            let gen = f.dirty_gen.load(Acquire);
            if gen == f.clean_gen.load(Acquire) || f.state.load(Acquire) != super::frame::VALID {
                continue;
            }
            copies.push(PageCopy {
                idx,
                id,
                gen,
                commit_lsn: f.commit_lsn(),
                bytes: g.bytes.to_vec(),
                image_crc: None,
            });
        }
        // Pages of dropped files count as written: their file is gone.
        {
            let dropped = self.dropped_files.lock();
            if !dropped.is_empty() {
                copies.retain(|c| {
                    let gone = dropped.contains(&c.id.file_id);
                    if gone {
                        self.frames[c.idx].clean_gen.fetch_max(c.gen, AcqRel);
                        self.frames[c.idx].checkpoint_needed.store(0, Release);
                    }
                    !gone
                });
            }
        }
        if copies.is_empty() {
            return Ok(0);
        }
        // Checked again after copying: a failing commit poisons the pool
        // before it lets go of its latches, so a copy taken after that sees it.
        if self.is_poisoned() {
            return Err(self.stopped());
        }
        let need = copies
            .iter()
            .map(|c| c.commit_lsn)
            .max()
            .unwrap_or_default();
        if need > self.wal.flushed_lsn() {
            // A failed WAL fsync stops the pool: pages in memory may hold
            // changes whose log never became durable.
            self.wal.flush(need, who).inspect_err(|e| {
                if e.is_fatal() {
                    self.poison();
                }
            })?;
        }
        assert!(
            self.wal.flushed_lsn() >= need,
            "flush rule: WAL not flushed past {need}"
        );
        for c in &mut copies {
            c.image_crc = crate::page::set_checksum_and_image_crc(&mut c.bytes, self.checksums);
        }
        copies.sort_by_key(|c| c.id);
        if cfg!(debug_assertions) {
            // The bytes about to go out are the ones stamped: nothing wrote
            // to a copy after its checksum.
            for c in &copies {
                let check =
                    crate::page::verify_page(&c.bytes, self.checksums, c.id.file_id, c.id.block);
                assert!(
                    check.is_ok(),
                    "{} fails its checks before its write: {check:?}",
                    c.id
                );
            }
        }
        let protection = self.page_write_protection();
        for part in copies.chunks(protection.max_batch().max(1)) {
            let ticket = protection
                .before_in_place_writes(part, who)
                .inspect_err(|e| {
                    // A failed fsync of the double-write area: nothing
                    // written under it may be trusted again.
                    if e.is_fatal() {
                        self.poison();
                    }
                })?;
            let in_place: Vec<&PageCopy> = part
                .iter()
                .enumerate()
                .filter(|&(i, _)| ticket.in_place(i))
                .map(|(_, c)| c)
                .collect();
            let written = self.write_runs(&in_place, who).inspect_err(|e| {
                // An atomic write refused: no page can be written untorn
                // any more, so nothing more is acknowledged.
                if e.is_fatal() {
                    self.poison();
                }
            });
            protection.after_in_place_writes(ticket, part);
            written?;
        }
        for c in &copies {
            let f = &self.frames[c.idx];
            f.clean_gen.fetch_max(c.gen, AcqRel);
            // Clear the checkpoint's mark only if this copy is at least as
            // new as the generation the checkpoint saw dirty.
            let _ = f.checkpoint_needed.fetch_update(AcqRel, Acquire, |need| {
                (need != 0 && c.gen >= need).then_some(0)
            });
        }
        drop(io_guards);
        self.stats
            .pages_written
            .fetch_add(copies.len() as u64, Relaxed);
        self.stats.write_batches.fetch_add(1, Relaxed);
        Ok(copies.len())
    }

    /// Writes sorted copies, one vectored write per run of consecutive blocks.
    fn write_runs(&self, copies: &[&PageCopy], who: Issuer) -> Result<()> {
        let pages: Vec<(PageId, &[u8])> = copies.iter().map(|c| (c.id, c.bytes())).collect();
        self.files.write_in_place(&pages, who)
    }

    /// Marks every page dirty now as one the running checkpoint must see
    /// written (PostgreSQL's BM_CHECKPOINT_NEEDED) and returns them, in
    /// frame order. Pages dirtied later wait for the next checkpoint; a
    /// marked page another writer writes meanwhile counts as done.
    pub fn mark_for_checkpoint(&self) -> Vec<PageId> {
        let mut marked = Vec::new();
        for f in self.frames.iter() {
            if let Some(id) = f.page() {
                if f.is_dirty() {
                    f.checkpoint_needed
                        .store(f.dirty_gen.load(Acquire).max(1), Release);
                    marked.push(id);
                }
            }
        }
        marked
    }

    /// Writes those of `ids` a checkpoint still needs, as one batch (in
    /// (file, block) order, runs of blocks as one vectored write). Returns
    /// the number of pages written.
    pub fn write_for_checkpoint(&self, ids: &[PageId], who: Issuer) -> Result<usize> {
        let mut pinned = Vec::with_capacity(ids.len());
        for &id in ids {
            // Pinned through the page table, so the frame cannot change page.
            let Some(p) = self.pin_cached(id) else {
                continue;
            };
            if self.frames[p.idx].checkpoint_needed.load(Acquire) != 0 {
                pinned.push(p);
            }
        }
        let idxs: Vec<usize> = pinned.iter().map(|p| p.idx).collect();
        self.write_frames(&idxs, who)
    }

    /// Writes every page that is dirty now, `batch` pages at a time in
    /// frame order (a checkpoint's first half, unpaced: the caller fsyncs
    /// the data files after). Returns the number of pages written.
    pub fn flush_dirty(&self, who: Issuer, batch: usize) -> Result<usize> {
        let marked = self.mark_for_checkpoint();
        let mut written = 0;
        for chunk in marked.chunks(batch.max(1)) {
            written += self.write_for_checkpoint(chunk, who)?;
        }
        Ok(written)
    }
}
