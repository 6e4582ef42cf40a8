//! The WAL writer: concurrent inserts into an in-memory copy of the
//! unflushed blocks, and group commit.
//!
//! Locks, always taken in this order and never held across disk I/O unless
//! said so: `io` (held by the one flush leader for its whole I/O, and by
//! recycling), then an insertion lock (held by an inserter while it
//! reserves and copies its record; [`insertion_locks`]), then `inner` (the
//! reservation lock: the insert position and the blocks, held for a
//! record's reservation or a few pointer copies, never for a copy). Group
//! commit (the flushed position, the leader, a sticky error) takes no lock
//! ([`group_commit`]).
//!
//! Invariants:
//! - `inner.blocks` holds blocks `base_block ..` with no gap, from the block
//!   holding the flushed position to the block holding the insert position.
//!   A block's bytes are written once: a page header when its block is
//!   started, a record's bytes by its inserter after reserving them
//!   ([`super::buffer`]). A flush leader takes `Arc` clones of the blocks
//!   and reads only below its target, after every copy reserved below it
//!   finished, so it writes a stable image without holding `inner`.
//! - A flush first pads the insert position to a 512-byte sector boundary
//!   with a padding record, then writes the sectors from the flushed
//!   position (a sector boundary) to it. A sector holding durable WAL is
//!   never written again: a torn write, even one whose old sectors read
//!   back as zeros or fail, cannot damage an acknowledged commit. The
//!   reader keeps only records up to such a boundary, so the WAL always
//!   ends where a writer may continue without touching durable sectors.
//! - The flushed position advances only after every written segment file
//!   was fdatasynced; a segment is created (zero-filled, fsynced, renamed,
//!   directory fsynced) before the first write into it.

use super::buffer::{record_header, Inner, Placement, SharedBlock};
use super::config::{add, Counters, WalConfig, WalStats};
use super::format::{Geometry, PageHeader, MAX_RECORD_LEN, PAGE_MAGIC, RECORD_HEADER_LEN};
use super::image_codec;
use super::record::{ImageCompression, RecordData};
use super::segment;
use crate::error::{Error, Result};
use crate::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use crate::lsn::Lsn;
use insertion_locks::{Inserting, InsertionLocks};
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

mod group_commit;
#[cfg(test)]
mod insert_tests;
mod insertion_locks;
mod reserve;
use group_commit::{GroupCommit, Turn};
pub use reserve::{Purpose, Reservation};

/// At most this many recycled segments wait for reuse; older ones beyond
/// that are removed.
pub const MAX_RECYCLED_SEGMENTS: usize = 4;
/// When the unflushed blocks in memory exceed this, the next commit
/// flushes before it latches anything ([`Wal::make_room`]).
pub const WAL_BUFFER_LIMIT_BYTES: usize = 16 * 1024 * 1024;

/// Held by the flush leader during its I/O.
struct IoState {
    files: BTreeMap<u64, Arc<dyn File>>,
}

// Shared by many threads through `Arc`.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Wal>();
};

/// The write-ahead log writer. Shared by many threads through `Arc`.
pub struct Wal {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    cfg: WalConfig,
    geo: Geometry,
    io: Mutex<IoState>,
    insertion_locks: InsertionLocks,
    inner: Mutex<Inner>,
    group_commit: GroupCommit,
    /// `inner`'s insert position and block count, stored under `inner` at
    /// each change: every commit asks them twice before its insert
    /// ([`Wal::reserve`], [`Wal::make_room`]), without the lock.
    insert_end: AtomicU64,
    buffered_blocks: AtomicUsize,
    counters: Counters,
    space: reserve::Space,
    /// `wal_compression`: how [`Wal::insert`] compresses page images.
    image_compression: ImageCompression,
    /// The crash laboratory's panic between a reservation and its copy.
    copy_window_panic: crate::injected_panic::PanicPoint,
}

impl Wal {
    /// Creates the WAL of a new database in `dir`: segment 0, durable (file
    /// and directory fsynced). Fails if `dir` already holds a segment.
    pub fn create(fs: Arc<dyn FileSystem>, dir: &Path, cfg: WalConfig) -> Result<Wal> {
        cfg.validate()?;
        fs.create_dir_all(dir)?;
        if !segment::list_segments(fs.as_ref(), dir)?.is_empty() {
            return Err(Error::AlreadyExists {
                path: dir.to_path_buf(),
            });
        }
        let file = segment::create_segment(fs.as_ref(), dir, 0, cfg.segment_size)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent, Issuer::WalWriter)?;
        }
        let wal = Wal::new(fs, dir, cfg, Lsn(0), Lsn(0), None);
        wal.io.lock().files.insert(0, file);
        add(&wal.counters.segments_created, 1);
        Ok(wal)
    }

    /// Opens the WAL to continue writing at `end`, the end of valid WAL the
    /// reader found, after the record at `prev_record`. The reader ends the
    /// WAL on a sector boundary, so nothing below `end` is written again.
    /// The block holding `end` is read back (its header checked); its bytes
    /// past `end` become zero in memory. An `end` inside a sector (never
    /// from recovery) has its sector rewritten with the bytes read back.
    pub fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        cfg: WalConfig,
        end: Lsn,
        prev_record: Lsn,
    ) -> Result<Wal> {
        cfg.validate()?;
        let geo = Geometry::new(&cfg);
        let page_start = geo.page_start(end.0);
        let off = geo.page_offset(end.0);
        if !end.0.is_multiple_of(super::format::RECORD_ALIGN)
            || (off != 0 && off < geo.header_len(page_start))
        {
            return Err(Error::Invalid(format!(
                "WAL end {end} is not a record boundary"
            )));
        }
        // Segment names found now may have been renamed into place just
        // before a crash: make them durable before anything relies on them.
        fs.sync_dir(dir, Issuer::WalWriter)?;
        let partial = if off != 0 {
            Some(read_partial_block(fs.as_ref(), dir, &cfg, &geo, end.0)?)
        } else {
            None
        };
        Ok(Wal::new(fs, dir, cfg, end, prev_record, partial))
    }

    fn new(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        cfg: WalConfig,
        end: Lsn,
        prev: Lsn,
        partial: Option<Vec<u8>>,
    ) -> Wal {
        let geo = Geometry::new(&cfg);
        let blocks: VecDeque<_> = partial.into_iter().map(SharedBlock::from_vec).collect();
        let partial_blocks = blocks.len();
        Wal {
            fs,
            dir: dir.to_path_buf(),
            cfg,
            geo,
            io: Mutex::new(IoState {
                files: BTreeMap::new(),
            }),
            insertion_locks: InsertionLocks::default(),
            inner: Mutex::new(Inner {
                insert_pos: end.0,
                prev_record: prev.0,
                base_block: end.0 / geo.block,
                blocks,
            }),
            group_commit: GroupCommit::new(end.0),
            insert_end: AtomicU64::new(end.0),
            buffered_blocks: AtomicUsize::new(partial_blocks),
            counters: Counters::default(),
            space: reserve::Space::default(),
            image_compression: ImageCompression::None,
            copy_window_panic: Default::default(),
        }
    }

    /// This writer compressing the page images it inserts with `codec`
    /// (`wal_compression`; none by default).
    /// Where the crash laboratory injects a panic inside an insertion's
    /// copy window (its space reserved, its bytes not yet copied).
    pub fn copy_window_panic(&self) -> &crate::injected_panic::PanicPoint {
        &self.copy_window_panic
    }

    pub fn with_image_compression(mut self, codec: ImageCompression) -> Wal {
        self.image_compression = codec;
        self
    }

    /// The configuration this writer runs with.
    pub fn config(&self) -> &WalConfig {
        &self.cfg
    }

    /// The WAL directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Everything before this LSN is durable.
    pub fn flushed_lsn(&self) -> Lsn {
        Lsn(self.group_commit.flushed())
    }

    /// Where the next record goes (its page header, or padding, may come
    /// first).
    pub fn insert_lsn(&self) -> Lsn {
        Lsn(self.insert_end.load(SeqCst))
    }

    /// Publishes `g`'s insert position and block count; called under
    /// `inner` after each change, so they change in `inner`'s order.
    fn publish_insert_state(&self, g: &Inner) {
        self.insert_end.store(g.insert_pos, SeqCst);
        self.buffered_blocks.store(g.blocks.len(), SeqCst);
    }

    /// Reserves `total` bytes for a record at the insert position, shown
    /// on `copying` before the reservation lock is let go (a flush leader
    /// that reserves after it must see it).
    fn reserve_record(&self, copying: &Inserting<'_>, total: u64) -> Placement {
        let mut g = self.inner.lock();
        let place = g.reserve(&self.cfg, &self.geo, total);
        copying.reserved(place.start);
        self.publish_insert_state(&g);
        place
    }

    /// The counters so far.
    pub fn stats(&self) -> WalStats {
        self.counters.snapshot()
    }

    /// Appends a record; returns its start and end LSN. Durable only after
    /// [`Wal::flush`] up to the end LSN. Never waits for a flush's I/O: its
    /// callers hold latches (call [`Wal::make_room`] before taking them).
    pub fn insert(&self, rec: &RecordData) -> Result<(Lsn, Lsn)> {
        // Compressed here, before any WAL lock, so the CPU it costs is the
        // inserting thread's alone. A compressed image is kept only when
        // shorter, so the record never outgrows what its caller reserved.
        let (_, uncompressed) = rec.images();
        let compressed = image_codec::compress_images(rec, self.image_compression);
        let rec = compressed.as_ref().unwrap_or(rec);
        let payload = rec.encode()?;
        let total = RECORD_HEADER_LEN as u64 + payload.len() as u64;
        if total > MAX_RECORD_LEN as u64 {
            return Err(Error::Invalid(format!(
                "a {} WAL record of {total} bytes is longer than the maximum {MAX_RECORD_LEN}",
                rec.kind
            )));
        }
        let payload_crc = crc32c::crc32c(&payload);
        let copying = self.insertion_locks.mine();
        let place = self.reserve_record(&copying, total);
        self.copy_window_panic
            .pass("between a WAL reservation and its copy");
        let header = record_header(
            rec.kind as u8,
            rec.xid,
            total,
            place.prev,
            self.cfg.epoch,
            payload_crc,
        );
        // SAFETY: reserved under `copying`, still held.
        unsafe { place.fill(&self.geo, &header, &payload) };
        drop(copying);
        let (start, end) = (place.start, place.end);
        self.counters.records.add(1);
        self.counters.bytes.add(total);
        // wal_fpi counts the images torn-page protection logs, as
        // PostgreSQL's does; a structure change always carries the images of
        // its pages and is counted as a record only.
        if rec.kind != super::record::RecordKind::StructureChange {
            let (images, image_bytes) = rec.images();
            self.counters.fpi.add(images);
            self.counters.fpi_bytes.add(image_bytes);
            self.counters.fpi_bytes_uncompressed.add(uncompressed);
        }
        Ok((Lsn(start), Lsn(end)))
    }

    /// Flushes everything inserted if the unflushed blocks exceed
    /// [`WAL_BUFFER_LIMIT_BYTES`], so memory stays bounded. Every commit
    /// calls it before latching its leaves: a flush under a latch would
    /// make each reader of those pages wait for the WAL's I/O. The buffer
    /// may pass the limit by the records inserted since the last call.
    pub fn make_room(&self) -> Result<()> {
        let buffered = self.buffered_blocks.load(SeqCst) * self.geo.block as usize;
        let upto = self.insert_end.load(SeqCst);
        if buffered > WAL_BUFFER_LIMIT_BYTES {
            self.flush_to(upto, false)?;
        }
        Ok(())
    }

    /// Group commit: returns once everything before `upto` is durable. If
    /// another thread is flushing, waits for it and leaves without I/O when
    /// covered; otherwise becomes the leader and writes and fdatasyncs
    /// everything inserted so far. All WAL I/O is tagged
    /// [`Issuer::WalWriter`], whoever `who` is. After a fatal error (a
    /// failed fsync) every later flush fails.
    pub fn flush(&self, upto: Lsn, who: Issuer) -> Result<()> {
        let _ = who; // The leader's I/O is the WAL writer's, whoever leads.
        self.counters.flush_requests.add(1);
        self.flush_to(upto.0, true).map(|_| ())
    }

    /// [`Wal::flush`] for a page write that needs the WAL first (the
    /// write-ahead rule), also counted apart: a round such a request leads
    /// is an fsync no commit asked for.
    pub fn flush_for_page_write(&self, upto: Lsn, who: Issuer) -> Result<()> {
        let _ = who;
        self.counters.flush_requests.add(1);
        self.counters.page_write_flush_requests.add(1);
        if self.flush_to(upto.0, true)? {
            add(&self.counters.page_write_flush_rounds, 1);
        }
        Ok(())
    }

    /// [`Wal::flush`]; `count` says whether this is a counted request (an
    /// insert making room is not). Returns whether this thread led a flush
    /// round.
    fn flush_to(&self, upto: u64, count: bool) -> Result<bool> {
        // Every thread that wants a latch this thread holds would wait for
        // the flush's I/O (correctness.md: no latch across a WAL flush).
        #[cfg(any(test, debug_assertions))]
        assert_eq!(
            crate::latch_count::latches_held(),
            0,
            "a WAL flush with a page latch held"
        );
        let flushed = match self.group_commit.wait_turn(upto)? {
            Turn::Covered => {
                if count {
                    self.counters.flushes_without_io.add(1);
                }
                return Ok(false);
            }
            Turn::Lead { flushed } => flushed,
        };
        // A leader that unwinds ends its round as a fatal one: every
        // waiter wakes to an error (they parked forever before).
        let unwinding = EndRoundOnUnwind {
            group_commit: &self.group_commit,
            dir: &self.dir,
        };
        let res = self.lead_flush(flushed, upto);
        std::mem::forget(unwinding);
        self.group_commit.end_round(match &res {
            Ok(target) => Ok(*target),
            Err(e) if e.is_fatal() => Err(Some(match e {
                Error::FsyncFailed { path, .. } | Error::Poisoned { path } => path.clone(),
                _ => self.dir.clone(),
            })),
            Err(_) => Err(None),
        });
        res.map(|_| true)
    }

    /// The leader's work: pad the insert position to a sector boundary,
    /// write the sectors from the one holding `flushed` up to it, fdatasync
    /// them, drop the blocks no longer needed. Returns the new flushed
    /// position.
    fn lead_flush(&self, flushed: u64, upto: u64) -> Result<u64> {
        let mut io = self.io.lock();
        let geo = self.geo;
        // Flushes end on sector boundaries, so this is `flushed` itself
        // (unless the WAL was opened mid-sector): no sector holding only
        // durable WAL is written again.
        let from = flushed - flushed % geo.sector;
        let first = from / geo.block;
        let (target, blocks, padding) = {
            let mut g = self.inner.lock();
            if upto > g.insert_pos {
                return Err(Error::Invalid(format!(
                    "WAL flush request {} is past the insert position {}",
                    Lsn(upto),
                    Lsn(g.insert_pos)
                )));
            }
            let (pad, padding) = g.reserve_padding(&self.cfg, &geo);
            self.publish_insert_state(&g);
            add(&self.counters.padding_bytes, pad);
            let last = (g.insert_pos - 1) / geo.block;
            assert!(g.base_block <= first, "unflushed WAL block dropped");
            let idx = (first - g.base_block) as usize;
            let blocks: Vec<Arc<SharedBlock>> = g
                .blocks
                .range(idx..=(last - g.base_block) as usize)
                .cloned()
                .collect();
            (g.insert_pos, blocks, padding)
        };
        for pad in &padding {
            // SAFETY: this leader reserved it; its own trim comes after.
            unsafe { pad.fill_padding(&self.cfg, &geo) };
        }
        // Records reserved below the padding may still be copying in.
        self.insertion_locks
            .wait_for_copies_below(target)
            .map_err(|()| Error::Poisoned {
                path: self.dir.clone(),
            })?;
        let per_seg = geo.blocks_per_segment();
        let mut written: Vec<Arc<dyn File>> = Vec::new();
        let mut i = 0usize;
        while i < blocks.len() {
            let block_no = first + i as u64;
            let segno = block_no / per_seg;
            let n = (blocks.len() - i).min((per_seg - block_no % per_seg) as usize);
            let file = self.segment_file(&mut io, segno)?;
            // Only the sectors in [from, target) of these blocks.
            let bufs: Vec<&[u8]> = (i..i + n)
                .map(|j| {
                    let start = (first + j as u64) * geo.block;
                    let lo = from.saturating_sub(start).min(geo.block) as usize;
                    let hi = (target - start).min(geo.block) as usize;
                    // SAFETY: below `target`, every copy finished (the
                    // insertion locks, the padding written above) and
                    // nobody writes there again.
                    unsafe { blocks[j].bytes(lo, hi) }
                })
                .collect();
            let pos = if i == 0 { from } else { block_no * geo.block };
            let offset = geo.segment_offset(pos);
            file.write_vectored_at(&bufs, offset, Issuer::WalWriter)?;
            add(
                &self.counters.bytes_written,
                bufs.iter().map(|b| b.len() as u64).sum(),
            );
            written.push(file);
            i += n;
        }
        for file in &written {
            file.sync_data(Issuer::WalWriter)?;
            add(&self.counters.fsyncs, 1);
        }
        add(&self.counters.flush_rounds, 1);
        let last_seg = geo.segment_of(target - 1);
        io.files.retain(|segno, _| *segno >= last_seg);
        drop(io);
        {
            let mut g = self.inner.lock();
            g.trim(target / geo.block);
            self.publish_insert_state(&g);
        }
        Ok(target)
    }

    /// The open file of segment `segno`, created durably if it is new.
    fn segment_file(&self, io: &mut IoState, segno: u64) -> Result<Arc<dyn File>> {
        if let Some(f) = io.files.get(&segno) {
            return Ok(f.clone());
        }
        let (file, created) = segment::open_or_create_segment(
            self.fs.as_ref(),
            &self.dir,
            segno,
            self.cfg.segment_size,
        )?;
        if created {
            add(&self.counters.segments_created, 1);
        }
        io.files.insert(segno, file.clone());
        Ok(file)
    }

    /// Recycles the segments wholly before the one holding `redo`: up to
    /// [`MAX_RECYCLED_SEGMENTS`] future segments are kept (old ones renamed
    /// to the next unused future names), the others removed, then the
    /// directory is fsynced. The caller guarantees that the control file
    /// naming `redo` (or a later redo point) is durable. Segments at or
    /// past the flushed position are never touched. Returns how many
    /// segments were recycled or removed.
    pub fn recycle_segments_before(&self, redo: Lsn, who: Issuer) -> Result<usize> {
        let mut io = self.io.lock();
        let flushed = self.group_commit.flushed();
        let insert = self.inner.lock().insert_pos;
        let limit = self.geo.segment_of(redo.0.min(flushed));
        let current = self.geo.segment_of(insert);
        let all = segment::list_segments(self.fs.as_ref(), &self.dir)?;
        let old: Vec<u64> = all.iter().copied().filter(|s| *s < limit).collect();
        if old.is_empty() {
            return Ok(0);
        }
        let future_now = all.iter().filter(|s| **s > current).count();
        let first_future = all.last().copied().unwrap_or(0).max(current) + 1;
        for s in &old {
            io.files.remove(s);
        }
        let done = segment::recycle(
            self.fs.as_ref(),
            &self.dir,
            &old,
            first_future,
            future_now,
            MAX_RECYCLED_SEGMENTS,
            who,
        )?;
        add(&self.counters.segments_recycled, done.recycled as u64);
        add(&self.counters.segments_removed, done.removed as u64);
        Ok(done.recycled + done.removed)
    }
}

/// Reads the block holding `end` (mid-block) up to `end`; the rest stays
/// zero.
fn read_partial_block(
    fs: &dyn FileSystem,
    dir: &Path,
    cfg: &WalConfig,
    geo: &Geometry,
    end: u64,
) -> Result<Vec<u8>> {
    let page_start = geo.page_start(end);
    let path = segment::segment_path(dir, geo.segment_of(end));
    let file = fs.open(&path, FileKind::Wal, OpenOptions::read_only())?;
    let mut block = vec![0u8; geo.block as usize];
    // Read as the reader read it: an unreadable sector below `end` was
    // zeros, or a record's CRC would have ended the WAL before it.
    let flushed = geo.page_offset(end) as usize;
    let (n, _) = super::reader::read_around_unreadable(
        file.as_ref(),
        &mut block[..flushed],
        geo.segment_offset(page_start),
        Issuer::WalWriter,
    )?;
    if n < flushed {
        return Err(Error::corruption(
            &path,
            format!("LSN {}", Lsn(page_start)),
            format!("the WAL page holding the end of WAL {} is short", Lsn(end)),
        ));
    }
    let header = PageHeader::decode(&block);
    let ok = header.is_some_and(|h| h.magic == PAGE_MAGIC && h.address == page_start);
    if !ok {
        return Err(Error::corruption(
            &path,
            format!("LSN {}", Lsn(page_start)),
            format!(
                "the WAL page holding the end of WAL {} has no valid header",
                Lsn(end)
            ),
        ));
    }
    if let Some(h) = header.filter(|h| h.epoch > cfg.epoch) {
        return Err(Error::Invalid(format!(
            "WAL page {} has epoch {}, newer than this opening's epoch {}: the epoch must grow at every opening",
            Lsn(page_start),
            h.epoch,
            cfg.epoch
        )));
    }
    Ok(block)
}

/// Ends a flush leader's round as fatal if the leader unwinds out of it.
struct EndRoundOnUnwind<'a> {
    group_commit: &'a group_commit::GroupCommit,
    dir: &'a std::path::Path,
}

impl Drop for EndRoundOnUnwind<'_> {
    fn drop(&mut self) {
        tracing::error!(
            "a WAL flush leader unwound: no more WAL can be flushed; reopen the database"
        );
        self.group_commit
            .end_round(Err(Some(self.dir.to_path_buf())));
    }
}
