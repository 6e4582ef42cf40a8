//! Relation data split into segment files, as PostgreSQL does: file id `N`
//! lives in `data/N`, `data/N.1`, `data/N.2`, ... each `data_segment_size`
//! bytes (default 1 GB). Block numbers are file-wide.

use super::open_files::{OpenFileLimit, SegmentAge, SegmentOwner};
use super::{File, FileKind, FileSystem, Issuer, OpenOptions};
use crate::error::{Error, Result};
use parking_lot::RwLock;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The on-disk name of segment `segment` of data file `file_id`.
pub fn segment_path(dir: &Path, file_id: u32, segment: u64) -> PathBuf {
    if segment == 0 {
        dir.join(file_id.to_string())
    } else {
        dir.join(format!("{file_id}.{segment}"))
    }
}

/// Parses a data segment file name: `N` or `N.S`.
pub fn parse_segment_name(name: &str) -> Option<(u32, u64)> {
    match name.split_once('.') {
        None => Some((name.parse().ok()?, 0)),
        Some((id, seg)) => Some((id.parse().ok()?, seg.parse().ok().filter(|s| *s > 0)?)),
    }
}

/// What a page read found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageRead {
    /// The whole page.
    Whole,
    /// The block lies beyond the end of the file (the buffer is zeroed).
    BeyondEnd,
    /// The file ends inside the page after `bytes` bytes (the rest of the
    /// buffer is zeroed): a page being appended when the power failed, as
    /// ext4 with 4 KB blocks can leave one.
    Short { bytes: usize },
}

/// A segment's open file, and what its closing needs to know.
pub(super) struct OpenSegment {
    file: Arc<dyn File>,
    /// [`OpenFileLimit`]'s clock at its latest use.
    last_use: AtomicU64,
    /// Set before every write through it, cleared before every fsync of
    /// it: set, the segment may hold writes no fsync covered.
    dirty: AtomicBool,
}

/// One data file made of segments.
pub struct SegmentedFile {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    file_id: u32,
    page_size: usize,
    pages_per_segment: u64,
    /// Opened segments, by number; `None` where not opened yet, or
    /// closed to stay under `open_files`.
    segments: RwLock<Vec<Option<Arc<OpenSegment>>>>,
    /// The bound on open segments this file shares with every data file
    /// of its database.
    open_files: Arc<OpenFileLimit>,
    /// The atomic write unit segments are opened with (0: none), shared by
    /// every data file of a database (`torn_page_protection = atomic`).
    atomic_unit: Arc<AtomicU32>,
    /// Writes completed, counted after each. Starts at 1: a crashed
    /// process may have left writes in the OS cache that no fsync covered,
    /// and the first checkpoint after recovery must make them durable
    /// before it moves the redo point past their records.
    writes_done: AtomicU64,
    /// `writes_done` as read at the start of the latest successful fsync:
    /// when it still equals `writes_done`, an fsync would find nothing new.
    writes_synced: AtomicU64,
    /// fsyncs started, numbered from 1 in start order.
    syncs_started: AtomicU64,
    /// The highest number of an fsync that completed successfully: every
    /// write completed before that fsync started is durable.
    synced_through: AtomicU64,
}

/// A point in a data file's history: "every write completed so far".
/// [`SegmentedFile::is_durable`] says when an fsync that started after it
/// has completed (the double-write area's rule for reusing a slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DurabilityMark(u64);

impl SegmentedFile {
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        file_id: u32,
        page_size: usize,
        pages_per_segment: u64,
        atomic_unit: Arc<AtomicU32>,
        open_files: Arc<OpenFileLimit>,
    ) -> Arc<Self> {
        assert!(pages_per_segment > 0 && page_size > 0);
        let file = Arc::new(SegmentedFile {
            fs,
            dir: dir.to_path_buf(),
            file_id,
            page_size,
            pages_per_segment,
            segments: RwLock::new(Vec::new()),
            open_files,
            atomic_unit,
            writes_done: AtomicU64::new(1),
            writes_synced: AtomicU64::new(0),
            syncs_started: AtomicU64::new(0),
            synced_through: AtomicU64::new(0),
        });
        let owner: std::sync::Weak<dyn SegmentOwner> = Arc::downgrade(&file) as _;
        file.open_files.register(owner);
        file
    }

    pub fn file_id(&self) -> u32 {
        self.file_id
    }

    /// Path of the segment holding `block` (for error messages).
    pub fn path_of_block(&self, block: u64) -> PathBuf {
        segment_path(&self.dir, self.file_id, block / self.pages_per_segment)
    }

    /// The segment's file, opened (and created if `create`) on first use
    /// or again after it was closed for the bound on open files.
    pub(super) fn segment(&self, segment: u64, create: bool) -> Result<Option<Arc<OpenSegment>>> {
        if let Some(Some(s)) = self.segments.read().get(segment as usize) {
            // Stored only when the clock moved: every page read of a hot
            // segment would otherwise write the one cache line all readers share.
            let now = self.open_files.now();
            if s.last_use.load(Ordering::Relaxed) != now {
                s.last_use.store(now, Ordering::Relaxed);
            }
            return Ok(Some(s.clone()));
        }
        let opened = {
            let mut segs = self.segments.write();
            if let Some(Some(s)) = segs.get(segment as usize) {
                return Ok(Some(s.clone()));
            }
            let path = segment_path(&self.dir, self.file_id, segment);
            if !create && !self.fs.exists(&path) {
                return Ok(None);
            }
            let mut opts = if create {
                OpenOptions::create()
            } else {
                OpenOptions::read_write()
            };
            opts.atomic_unit = Some(self.atomic_unit.load(Ordering::SeqCst)).filter(|u| *u > 0);
            let file = self.fs.open(&path, FileKind::Data, opts)?;
            let opened = Arc::new(OpenSegment {
                file,
                last_use: AtomicU64::new(self.open_files.opened()),
                dirty: AtomicBool::new(false),
            });
            if segs.len() <= segment as usize {
                segs.resize(segment as usize + 1, None);
            }
            segs[segment as usize] = Some(opened.clone());
            opened
        };
        // Outside this file's lock: closing others takes theirs. The
        // segment just opened is held here, so it is not among them.
        self.open_files.enforce(Issuer::Client)?;
        Ok(Some(opened))
    }

    /// Closes every segment, so that each opens again with the atomic unit
    /// now in force. The caller makes sure nothing written since the last
    /// fsync is left (an fsync reaches only open segments).
    pub fn close_segments(&self) {
        assert_eq!(
            self.writes_done.load(Ordering::SeqCst),
            self.writes_synced.load(Ordering::SeqCst),
            "data file {} closed with writes no fsync covered",
            self.file_id
        );
        let mut segs = self.segments.write();
        let open = segs.iter().flatten().count();
        segs.clear();
        self.open_files.released(open);
    }

    /// Whether the segment holding `block` exists (opened, or on disk).
    pub fn has_segment_for(&self, block: u64) -> Result<bool> {
        Ok(self
            .segment(block / self.pages_per_segment, false)?
            .is_some())
    }

    /// Reads one page. A block beyond the end of the file, or a partial
    /// one, is an error naming the file and block.
    pub fn read_page(&self, block: u64, buf: &mut [u8], who: Issuer) -> Result<()> {
        match self.try_read_page(block, buf, who)? {
            PageRead::Whole => Ok(()),
            PageRead::BeyondEnd => Err(Error::corruption(
                self.path_of_block(block),
                format!("block {block}"),
                "block lies beyond the end of the file",
            )),
            PageRead::Short { bytes } => Err(self.short_page_error(block, bytes)),
        }
    }

    /// The error for a page the file ends inside of (outside recovery, or
    /// in it when no WAL record restores the page).
    pub fn short_page_error(&self, block: u64, bytes: usize) -> Error {
        Error::corruption(
            self.path_of_block(block),
            format!("block {block}"),
            format!(
                "partial page at the end of the file ({bytes} of {} bytes)",
                self.page_size
            ),
        )
    }

    /// Reads one page; says whether it was whole, beyond the end of the
    /// file (as a page allocated but never written before a crash is), or
    /// cut short by the end of the file. The caller decides what the last
    /// two mean: only recovery may take them for pages redo rewrites.
    pub fn try_read_page(&self, block: u64, buf: &mut [u8], who: Issuer) -> Result<PageRead> {
        debug_assert_eq!(buf.len(), self.page_size);
        let seg = block / self.pages_per_segment;
        let off = (block % self.pages_per_segment) * self.page_size as u64;
        let Some(file) = self.segment(seg, false)? else {
            buf.fill(0);
            return Ok(PageRead::BeyondEnd);
        };
        // EIO is the page's own fault (a bad sector), not the file's.
        let n = file.file.read_at(buf, off, who).map_err(|e| match e {
            Error::Io { path, source, .. } if source.raw_os_error() == Some(libc::EIO) => {
                Error::UnreadablePage {
                    path,
                    block,
                    source,
                }
            }
            other => other,
        })?;
        if n == 0 {
            buf.fill(0);
            return Ok(PageRead::BeyondEnd);
        }
        if n != buf.len() {
            buf[n..].fill(0);
            return Ok(PageRead::Short { bytes: n });
        }
        Ok(PageRead::Whole)
    }

    /// Writes consecutive pages starting at `first_block`, one vectored write
    /// per segment touched.
    pub fn write_pages(&self, first_block: u64, pages: &[&[u8]], who: Issuer) -> Result<()> {
        let result = self.write_pages_uncounted(first_block, pages, who);
        // Counted even when it failed: a write that failed half-way may
        // have changed the OS cache, and the next fsync must not skip it.
        self.writes_done.fetch_add(1, Ordering::SeqCst);
        result
    }

    fn write_pages_uncounted(&self, first_block: u64, pages: &[&[u8]], who: Issuer) -> Result<()> {
        let mut i = 0;
        while i < pages.len() {
            let block = first_block + i as u64;
            let seg = block / self.pages_per_segment;
            let in_seg = (self.pages_per_segment - block % self.pages_per_segment) as usize;
            let n = in_seg.min(pages.len() - i);
            let off = (block % self.pages_per_segment) * self.page_size as u64;
            let open = self.segment(seg, true)?.expect("created on demand");
            // Before the write: a closing that misses the flag finds
            // nothing written yet.
            open.dirty.store(true, Ordering::SeqCst);
            if n == 1 {
                open.file.write_at(pages[i], off, who)?;
            } else {
                open.file.write_vectored_at(&pages[i..i + n], off, who)?;
            }
            i += n;
        }
        Ok(())
    }

    /// The mark of every write that has completed by now (call it after the
    /// writes it must cover returned).
    pub fn durability_mark(&self) -> DurabilityMark {
        // Any fsync numbered above this one increments the counter after
        // this read, so it starts after those writes completed.
        DurabilityMark(self.syncs_started.load(Ordering::SeqCst) + 1)
    }

    /// True once an fsync that started after `mark` was taken completed.
    pub fn is_durable(&self, mark: DurabilityMark) -> bool {
        self.synced_through.load(Ordering::SeqCst) >= mark.0
    }

    /// Asks the kernel to start writing `n` pages from `first_block` back
    /// (sync_file_range's SYNC_FILE_RANGE_WRITE): no durability, only less
    /// left for the fsync.
    pub fn writeback(&self, first_block: u64, n: u64, who: Issuer) -> Result<()> {
        let mut block = first_block;
        let end = first_block + n;
        while block < end {
            let seg = block / self.pages_per_segment;
            let in_seg = (self.pages_per_segment - block % self.pages_per_segment).min(end - block);
            let off = (block % self.pages_per_segment) * self.page_size as u64;
            if let Some(open) = self.segment(seg, false)? {
                open.file
                    .writeback_hint(off, in_seg * self.page_size as u64, who)?;
            }
            block += in_seg;
        }
        Ok(())
    }

    /// Number of blocks: the full segments plus the pages of the last one.
    pub fn nblocks(&self) -> Result<u64> {
        let mut seg = 0;
        loop {
            let path = segment_path(&self.dir, self.file_id, seg);
            if !self.fs.exists(&path) {
                return Ok(seg * self.pages_per_segment);
            }
            let f = self.segment(seg, false)?.expect("exists");
            let pages = f.file.len()? / self.page_size as u64;
            if pages < self.pages_per_segment {
                return Ok(seg * self.pages_per_segment + pages);
            }
            seg += 1;
        }
    }

    /// fsyncs every segment opened by this process, if anything was written
    /// since the last sync.
    pub fn sync(&self, who: Issuer) -> Result<()> {
        // Numbered before the writes are counted: a write counted after
        // this read takes a mark above this fsync's number.
        let number = self.syncs_started.fetch_add(1, Ordering::SeqCst) + 1;
        let writes = self.writes_done.load(Ordering::SeqCst);
        if writes != self.writes_synced.load(Ordering::SeqCst) {
            let segs: Vec<_> = self.segments.read().iter().flatten().cloned().collect();
            for s in segs {
                // Cleared first: a write after this point sets it again.
                s.dirty.store(false, Ordering::SeqCst);
                if let Err(e) = s.file.sync_data(who) {
                    s.dirty.store(true, Ordering::SeqCst);
                    return Err(e);
                }
            }
            self.writes_synced.fetch_max(writes, Ordering::SeqCst);
        }
        self.synced_through.fetch_max(number, Ordering::SeqCst);
        Ok(())
    }
}

impl SegmentOwner for SegmentedFile {
    /// The open segments' ages, for [`OpenFileLimit::enforce`].
    fn segment_ages(&self) -> Vec<SegmentAge> {
        let segs = self.segments.read();
        let open = segs.iter().enumerate();
        open.filter_map(|(n, s)| {
            let s = s.as_ref()?;
            Some(SegmentAge {
                segment: n as u64,
                last_use: s.last_use.load(Ordering::Relaxed),
                dirty: s.dirty.load(Ordering::SeqCst),
            })
        })
        .collect()
    }

    /// Closes `segment` if it is open and nobody is using it, after an
    /// fsync where it was written through since its last one (a data
    /// file's fsync reaches only open segments). True if it closed.
    fn close_if_idle(&self, segment: u64, who: Issuer) -> Result<bool> {
        let closing = {
            let mut segs = self.segments.write();
            let Some(slot) = segs.get_mut(segment as usize) else {
                return Ok(false);
            };
            // Only the list holds it: no call is in flight on it, and
            // none can start once it is out of the list.
            if slot.as_ref().is_none_or(|s| Arc::strong_count(s) != 1) {
                return Ok(false);
            }
            slot.take().expect("checked above")
        };
        let result = if closing.dirty.load(Ordering::SeqCst) {
            closing.file.sync_data(who)
        } else {
            Ok(())
        };
        drop(closing);
        self.open_files.released(1);
        result.map(|()| true)
    }
}

impl Drop for SegmentedFile {
    fn drop(&mut self) {
        let open = self.segments.get_mut().iter().flatten().count();
        self.open_files.released(open);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::posix::PosixFileSystem;

    #[test]
    fn names_round_trip() {
        let d = Path::new("/x");
        assert_eq!(segment_path(d, 7, 0), Path::new("/x/7"));
        assert_eq!(segment_path(d, 7, 3), Path::new("/x/7.3"));
        assert_eq!(parse_segment_name("7"), Some((7, 0)));
        assert_eq!(parse_segment_name("7.3"), Some((7, 3)));
        assert_eq!(parse_segment_name("7.0"), None);
        assert_eq!(parse_segment_name("control"), None);
    }

    #[test]
    fn writes_cross_segment_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
        let limit = OpenFileLimit::unlimited();
        let f = SegmentedFile::new(fs, dir.path(), 5, 4096, 3, Default::default(), limit);
        let pages: Vec<Vec<u8>> = (0..7u8).map(|i| vec![i; 4096]).collect();
        let refs: Vec<&[u8]> = pages.iter().map(|p| p.as_slice()).collect();
        f.write_pages(0, &refs, Issuer::Client).unwrap();
        assert_eq!(f.nblocks().unwrap(), 7);
        assert!(dir.path().join("5.2").exists());
        let mut buf = vec![0u8; 4096];
        for b in 0..7u64 {
            f.read_page(b, &mut buf, Issuer::Client).unwrap();
            assert!(buf.iter().all(|x| *x == b as u8));
        }
        let e = f
            .read_page(9, &mut buf, Issuer::Client)
            .unwrap_err()
            .to_string();
        assert!(e.contains("block 9"), "{e}");
        f.sync(Issuer::Checkpointer).unwrap();
    }
}
