//! The write path of `double_writes`: every batch of pages the buffer pool
//! writes goes first to its writer's shard of the area, in one sequential
//! write, fsynced, and only then in place.
//!
//! Order per call of [`PageWriteProtection::before_in_place_writes`] (the
//! buffer pool has already flushed the WAL past every page's LSN):
//! 1. Reserve consecutive blocks in the shard's ring ([`Ring`]); blocks
//!    still holding pages not durable in place are freed first by an fsync
//!    of their data files (counted as `slot_syncs`).
//! 2. Write the batches (a header block per `double_write_batch_pages`
//!    pages, each followed by its images) in one vectored write.
//! 3. fsync the shard file, shared with the shard's other writers
//!    ([`GroupSync`]).
//! 4. The pool writes the pages in place, then calls
//!    `after_in_place_writes`, which records each data file's durability
//!    mark: the entry's blocks are reusable once those are durable.
//!
//! With `double_write_defer_in_place`, pages the background writer or a
//! client evicts skip all of this ([`super::deferred`]): they go to slots
//! of `dw/deferred`, unfsynced; the pool skips their in-place writes and
//! reads them from there meanwhile. Each checkpoint fsyncs that file and
//! names the slots in a manifest; a write-back (the file half full, a
//! shutdown, a switch) writes them in place, the slots serving as their
//! copies (`write_back.rs`).

use super::area::{
    encode_batch_header, slots_per_batch, BatchPage, FileHeader, Shard, DEFERRED_FILE,
};
use super::deferred::DeferredPages;
use super::manifest::ManifestOwner;
use super::recover::AreaStart;
use super::ring::{Mark, Reserve, Ring};
use super::settings::AreaSettings;
use super::shard_file::{self, shard_of, AlignedBuf, GroupSync};
use crate::buffer::{DataFiles, PageCopy, PageId, PageSet, PageWriteProtection, WriteTicket};
use crate::engine::double_write_stats::{DoubleWriteStats, ShardStats};
use crate::error::Result;
use crate::file::segmented::{DurabilityMark, SegmentedFile};
use crate::file::{File, FileSystem, Issuer};
use crate::lsn::Lsn;
use crate::page::page_lsn;
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;

/// A data file's mark, for the ring.
#[derive(Clone)]
struct FileMark {
    file: Arc<SegmentedFile>,
    mark: DurabilityMark,
}

impl Mark for FileMark {
    fn is_durable(&self) -> bool {
        self.file.is_durable(self.mark)
    }
}

struct ShardWriter {
    shard: Shard,
    file: Arc<dyn File>,
    /// Opened with O_DIRECT: a write goes from an aligned copy.
    direct: bool,
    ring: Mutex<Ring<FileMark>>,
    ring_changed: Condvar,
    group: GroupSync,
    /// The aligned copy of an O_DIRECT write, kept between writes: fresh
    /// memory costs page faults and zeroing on every batch.
    aligned: Mutex<AlignedBuf>,
    /// The shard's part of the opening's [`DoubleWriteStats`].
    stats: Arc<ShardStats>,
}

/// `torn_page_protection = double_writes` as the buffer pool sees it.
pub struct DoubleWrites {
    /// The database directory (the area lies under it).
    dir: std::path::PathBuf,
    files: Arc<DataFiles>,
    page_size: usize,
    settings: AreaSettings,
    /// Shared by all shards, so batches are ordered across them; starts
    /// above the highest an opening found.
    next_batch_seq: AtomicU64,
    /// Indexed by [`Shard::number`].
    shards: Vec<ShardWriter>,
    /// `dw/deferred`, the slots of deferred pages (fsynced once per
    /// checkpoint).
    deferred_file: Arc<dyn File>,
    deferred: DeferredPages,
    /// The next manifest's sequence.
    next_manifest_seq: AtomicU64,
    /// The newest durable manifest's sequence, for the control file.
    durable_manifest_seq: AtomicU64,
    /// What a manifest is stamped with.
    owner: ManifestOwner,
    /// The images of a write-back read back from `dw/deferred`, kept
    /// between checkpoints (write-backs run one at a time).
    write_back_images: Mutex<Vec<u8>>,
    /// Whether the checkpoint running now stores its pages in
    /// `dw/deferred` too (it writes none back: see `begin_checkpoint`).
    checkpoint_defers: AtomicBool,
}

/// A ticket's entry when no page went through the area.
const NO_ENTRY: u64 = u64::MAX;

/// A ticket's entry: the shard in the top byte, the ring's entry below.
fn ticket_of(shard: Shard, entry: u64) -> u64 {
    (shard.number() as u64) << 56 | entry
}

impl DoubleWrites {
    /// Opens (or creates) the three shard files of the database in `dir`,
    /// counting into `stats`. Call only after recovery restored what an
    /// existing area held.
    pub fn open(
        fs: &dyn FileSystem,
        dir: &Path,
        system_id: u64,
        files: Arc<DataFiles>,
        settings: AreaSettings,
        start: &AreaStart,
        stats: &DoubleWriteStats,
    ) -> Result<DoubleWrites> {
        let page_size = files.page_size();
        assert!(
            (1..=slots_per_batch(page_size)).contains(&settings.batch_pages),
            "double_write_batch_pages is validated with the options"
        );
        let mut shards = Vec::new();
        for shard in Shard::ALL {
            let header = FileHeader {
                page_size: page_size as u32,
                area_blocks: settings.area_blocks,
                shard,
                system_id,
            };
            let opened = shard_file::open_or_create(fs, dir, &header, true, Issuer::Recovery)?;
            shards.push(ShardWriter {
                shard,
                file: opened.file,
                direct: opened.direct,
                ring: Mutex::new(Ring::new(settings.area_blocks)),
                ring_changed: Condvar::new(),
                group: GroupSync::default(),
                aligned: Mutex::new(AlignedBuf::new(0)),
                stats: stats.shard_handle(shard.number()),
            });
        }
        let owner = ManifestOwner {
            page_size: page_size as u32,
            system_id,
        };
        let reserve = write_back::manifest_reserve(settings.deferred_slots, page_size);
        let opened = write_back::open_deferred_file(
            fs,
            dir,
            owner,
            &start.manifest,
            // What `room_wanted` may allocate: the images, the manifest
            // and list pages among them, and the reserve.
            settings.deferred_slots.saturating_add(2 * reserve),
            Issuer::Recovery,
        )?;
        let deferred = DeferredPages::new(settings.deferred_slots);
        deferred.opened_with_manifest_at(opened.manifest_slot, opened.len_slots, reserve);
        Ok(DoubleWrites {
            dir: dir.to_path_buf(),
            files,
            page_size,
            settings,
            next_batch_seq: AtomicU64::new(start.first_batch_seq.max(1)),
            shards,
            deferred_file: opened.slots,
            deferred,
            next_manifest_seq: AtomicU64::new(opened.manifest_seq + 1),
            durable_manifest_seq: AtomicU64::new(opened.manifest_seq),
            owner,
            write_back_images: Mutex::new(Vec::new()),
            checkpoint_defers: AtomicBool::new(false),
        })
    }

    /// The counters of `shard`.
    pub fn stats(&self, shard: Shard) -> &ShardStats {
        &self.shards[shard.number() as usize].stats
    }

    /// Blocks `pages` pages take in the area: their images and a header
    /// block per batch.
    fn blocks_for(&self, pages: usize) -> u32 {
        (pages + pages.div_ceil(self.settings.batch_pages)) as u32
    }

    /// Reserves blocks for `pages` pages in `w`'s ring, freeing slots first
    /// where needed.
    fn reserve(&self, w: &ShardWriter, pages: usize, who: Issuer) -> Result<(u64, u32)> {
        let blocks = self.blocks_for(pages);
        let mut ring = w.ring.lock();
        loop {
            match ring.try_reserve(blocks) {
                Reserve::Ready { ticket, start } => return Ok((ticket, start)),
                Reserve::WaitInFlight => {
                    w.stats.slot_waits.fetch_add(1, Relaxed);
                    w.ring_changed.wait(&mut ring);
                }
                Reserve::SyncFirst(marks) => {
                    // Not under the ring's lock: entries completing
                    // meanwhile need it.
                    drop(ring);
                    sync_files(&marks, who, &w.stats.slot_syncs)?;
                    ring = w.ring.lock();
                }
            }
        }
    }

    /// Writes `pages` as batches at block `start` of `w`'s file, in one
    /// vectored write, and waits for an fsync covering it.
    fn write_batches(
        &self,
        w: &ShardWriter,
        start: u32,
        pages: &[(PageId, &[u8])],
        who: Issuer,
    ) -> Result<()> {
        let metas: Vec<BatchPage<'_>> = pages
            .iter()
            .map(|&(id, image)| BatchPage {
                file_id: id.file_id,
                block: id.block,
                lsn: page_lsn(image),
                image,
            })
            .collect();
        let mut headers = Vec::new();
        let mut position = start;
        for batch in metas.chunks(self.settings.batch_pages) {
            let seq = self.next_batch_seq.fetch_add(1, Relaxed);
            headers.push(encode_batch_header(
                w.shard,
                seq,
                position,
                self.page_size,
                batch,
            )?);
            position += 1 + batch.len() as u32;
        }
        let mut bufs: Vec<&[u8]> = Vec::with_capacity(headers.len() + pages.len());
        for (header, batch) in headers.iter().zip(metas.chunks(self.settings.batch_pages)) {
            bufs.push(header);
            bufs.extend(batch.iter().map(|p| p.image));
        }
        let offset = start as u64 * self.page_size as u64;
        if w.direct {
            // O_DIRECT wants aligned memory: one copy of the batches (the
            // page cache would have taken one too), into the shard's buffer
            // unless another writer of the shard holds it.
            let total = bufs.iter().map(|b| b.len()).sum();
            let mut own;
            let mut shared = w.aligned.try_lock();
            let aligned: &mut AlignedBuf = match shared.as_mut() {
                Some(buf) => {
                    buf.resize(total);
                    buf
                }
                None => {
                    own = AlignedBuf::new(total);
                    &mut own
                }
            };
            let mut at = 0;
            for b in &bufs {
                aligned.as_mut_slice()[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
            w.file.write_at(aligned.as_slice(), offset, who)?;
        } else {
            w.file.write_vectored_at(&bufs, offset, who)?;
        }
        w.stats.writes.fetch_add(1, Relaxed);
        w.stats.batches.fetch_add(headers.len() as u64, Relaxed);
        w.stats.pages.fetch_add(pages.len() as u64, Relaxed);
        if w.group.after_write(w.file.as_ref(), who)? {
            w.stats.fsyncs.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    fn complete(&self, ticket: u64, marks: Vec<FileMark>) {
        let w = &self.shards[(ticket >> 56) as usize];
        w.ring.lock().complete(ticket & ((1 << 56) - 1), marks);
        w.ring_changed.notify_all();
    }

    /// Which of `pages` wait for their slots' reuse to go in place: none
    /// unless `double_write_defer_in_place`, none of a checkpoint's that
    /// writes the deferred pages back (it would write them twice), and
    /// never a page whose segment file does not exist yet (recovery takes
    /// a missing file for a dropped one).
    fn to_defer(&self, pages: &[PageCopy], who: Issuer) -> Result<Vec<bool>> {
        let checkpoint = shard_of(who) == Shard::Checkpointer;
        if !self.settings.defer_in_place || (checkpoint && !self.checkpoint_defers.load(Acquire)) {
            return Ok(Vec::new());
        }
        pages
            .iter()
            .map(|c| self.files.has_segment_for(c.id().file_id, c.id().block))
            .collect()
    }

    /// Data-file marks of the files `ids` were written to.
    fn marks_of(&self, ids: impl Iterator<Item = PageId>) -> Vec<FileMark> {
        let mut marks: Vec<FileMark> = Vec::new();
        for id in ids {
            if marks.iter().any(|m| m.file.file_id() == id.file_id) {
                continue;
            }
            // DataFiles::get opens nothing (segments open lazily), so it
            // cannot fail for a file just written.
            if let Ok(file) = self.files.get(id.file_id) {
                let mark = file.durability_mark();
                marks.push(FileMark { file, mark });
            }
        }
        marks
    }
}

impl PageWriteProtection for DoubleWrites {
    fn before_in_place_writes(&self, pages: &[PageCopy], who: Issuer) -> Result<WriteTicket> {
        let w = &self.shards[shard_of(who).number() as usize];
        let mut deferred = self.to_defer(pages, who)?;
        if deferred.iter().any(|&d| d) {
            self.store_deferred(w, pages, &mut deferred, who)?;
        }
        let in_place: Vec<(PageId, &[u8])> = pages
            .iter()
            .enumerate()
            .filter(|&(i, _)| !deferred.get(i).copied().unwrap_or(false))
            .map(|(_, c)| (c.id(), c.bytes()))
            .collect();
        if in_place.is_empty() {
            return Ok(WriteTicket {
                entry: NO_ENTRY,
                deferred,
            });
        }
        let (entry, start) = self.reserve(w, in_place.len(), who)?;
        let ticket = ticket_of(w.shard, entry);
        if let Err(e) = self.write_batches(w, start, &in_place, who) {
            // Nothing goes in place: the entry holds nothing relied on.
            self.complete(ticket, Vec::new());
            return Err(e);
        }
        // Written in place from a newer version than any deferred copy. Only
        // now, with the area's copy durable: a manifest written meanwhile no
        // longer names the deferred copy, which may be the page's only
        // version at the redo point until this one is. Before the in-place
        // writes, as it waits out a write-back of an older version.
        let dropped = self.deferred.supersede(in_place.iter().map(|p| p.0));
        w.stats.obsolete.fetch_add(dropped as u64, Relaxed);
        Ok(WriteTicket {
            entry: ticket,
            deferred,
        })
    }

    fn after_in_place_writes(&self, ticket: WriteTicket, pages: &[PageCopy]) {
        if ticket.entry == NO_ENTRY {
            return;
        }
        let in_place = pages
            .iter()
            .enumerate()
            .filter(|&(i, _)| ticket.in_place(i))
            .map(|(_, c)| c.id());
        let marks = self.marks_of(in_place);
        self.complete(ticket.entry, marks);
    }

    fn eviction_batch(&self) -> usize {
        self.settings.eviction_pages.min(self.max_batch())
    }

    /// A victim that `dw/deferred` takes costs a slot write and no fsync,
    /// so it goes alone, as under `off`: the pages ahead would lengthen
    /// the client's write for no fsync saved. Only a full file sends
    /// victims through the area, in batches that share its fsync.
    fn eviction_batch_now(&self) -> usize {
        let batch = self.eviction_batch();
        if self.settings.defer_in_place && self.deferred.has_room_for(batch) {
            1
        } else {
            batch
        }
    }

    fn checkpoint_batch(&self) -> Option<usize> {
        Some(self.max_batch())
    }

    fn sync_ahead(&self, who: Issuer) -> Result<usize> {
        let mut done = 0;
        for w in &self.shards {
            let window = self.settings.area_blocks / 2;
            let marks = w.ring.lock().pending_ahead(window);
            done += sync_files(&marks, who, &w.stats.syncs_ahead)?;
        }
        Ok(done)
    }

    fn defers_in_place(&self) -> bool {
        self.settings.defer_in_place
    }

    fn read_deferred(&self, id: PageId, buf: &mut [u8], who: Issuer) -> Result<bool> {
        self.read_deferred_page(id, buf, who)
    }

    fn deferred_pages(&self) -> usize {
        self.deferred.len()
    }

    fn begin_checkpoint(&self, shutdown: bool) -> bool {
        let keep = self.settings.keep_deferred;
        self.deferred.next_era();
        // With keep on, a checkpoint other than the shutdown one stores its
        // own pages in dw/deferred: written once there, made durable by its
        // manifest, instead of twice (area, then in place). If it also
        // writes back (the file more than half taken), it writes back only
        // the cold pages (`make_room`, then `write_back_paced`).
        self.checkpoint_defers.store(keep && !shutdown, Release);
        shutdown || !keep || self.deferred.half_full()
    }

    fn write_back_paced(&self, who: Issuer, progress: &mut dyn FnMut(usize)) -> Result<usize> {
        let cold_only = self.checkpoint_defers.load(Acquire);
        self.write_back_deferred(who, cold_only, progress)
    }

    fn make_room(
        &self,
        marked: &[PageId],
        redo: Lsn,
        who: Issuer,
        progress: &mut dyn FnMut(usize),
    ) -> Result<usize> {
        if !self.checkpoint_defers.load(Acquire) {
            // Its write-back takes every page, after the pool pass.
            return Ok(0);
        }
        // The pages it will not store again go in place now, and a
        // manifest that no longer names them frees their slots (a slot a
        // durable manifest names waits for a later one: see `deferred`).
        // Written back after the pool pass, they came too late for its
        // copies, which went through the area once the file was full.
        let marked: PageSet = marked.iter().copied().collect();
        let claimed = self.deferred.claim_cold_except(&marked);
        let n = self.write_back_claimed(claimed, who, progress)?;
        if n > 0 {
            self.write_manifest(redo, who)?;
        }
        Ok(n)
    }

    fn write_back_all(&self, who: Issuer) -> Result<usize> {
        self.write_back_deferred(who, false, &mut |_| {})
    }

    fn persist_deferred(&self, redo: Lsn, who: Issuer) -> Result<()> {
        self.checkpoint_defers.store(false, Release);
        self.write_manifest(redo, who)
    }

    fn durable_manifest(&self) -> u64 {
        self.durable_manifest_seq.load(Relaxed)
    }

    fn forget_file(&self, file_id: u32) {
        self.deferred.forget_file(file_id);
    }

    fn max_batch(&self) -> usize {
        // Half the area, so that a second call can be in flight while one
        // waits for its fsync.
        let half = self.settings.area_blocks as usize / 2;
        let per = self.settings.batch_pages;
        (half * per / (per + 1)).max(1)
    }
}

/// fsyncs each data file of `marks` not yet durable, once, counting each
/// into `count`.
fn sync_files(marks: &[FileMark], who: Issuer, count: &AtomicU64) -> Result<usize> {
    let mut synced: Vec<u32> = Vec::new();
    for m in marks {
        if !m.is_durable() && !synced.contains(&m.file.file_id()) {
            m.file.sync(who)?;
            synced.push(m.file.file_id());
            count.fetch_add(1, Relaxed);
        }
    }
    Ok(synced.len())
}

#[path = "write_back.rs"]
mod write_back;

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
