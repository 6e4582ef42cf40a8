//! The I/O of deferred in-place writes ([`super::super::deferred`]): storing
//! evicted pages in `dw/deferred`, reading them back, naming them in a
//! manifest at each checkpoint, opening the file, and
//! writing them back in place, with their fsynced slots as their
//! double-write copies.

use super::{sync_files, DoubleWrites, ShardWriter, DEFERRED_FILE};
use crate::buffer::{PageCopy, PageId, PageWriteProtection};
use crate::error::{Error, Result};
use crate::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use crate::lsn::Lsn;
use crate::page::{page_lsn, verify_page, PageState};
use crate::protect::double_writes::area::{Shard, AREA_DIR};
use crate::protect::double_writes::deferred::{Claimed, DeferredCopy};
use crate::protect::double_writes::deferred_scan::ManifestStart;
use crate::protect::double_writes::manifest::{self, Manifest, ManifestEntry, ManifestOwner};
use crate::protect::double_writes::shard_file::shard_of;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The most bytes one write of consecutive slots carries: on a disk with
/// one head a commit's WAL write waits behind the requests queued ahead
/// of it, and a checkpoint's run of slots is background work.
pub const DEFERRED_WRITE_BYTES: usize = 64 * 1024;

/// `dw/deferred` grows on the disk by at least this many slots at a time:
/// one `fallocate` per 64 first uses of a slot.
const DEFERRED_GROWTH_SLOTS: u32 = 64;

impl DoubleWrites {
    /// Stores the pages of `pages` that `deferred` marks in slots of the
    /// deferred file; a page that gets no slot (the file is full) is marked
    /// for its in-place write instead. Unfsynced: see the module's doc.
    pub(super) fn store_deferred(
        &self,
        w: &ShardWriter,
        pages: &[PageCopy],
        deferred: &mut [bool],
        who: Issuer,
    ) -> Result<()> {
        let wanted: Vec<usize> = (0..pages.len()).filter(|&i| deferred[i]).collect();
        self.make_deferred_room(wanted.len(), who)?;
        let slots = self.deferred.take_slots(wanted.len());
        let mut stored: Vec<(u32, usize)> = Vec::with_capacity(wanted.len());
        for (&i, slot) in wanted.iter().zip(slots) {
            match slot {
                Some(slot) => stored.push((slot, i)),
                None => deferred[i] = false,
            }
        }
        stored.sort_unstable();
        let images: Vec<(u32, &[u8])> = stored
            .iter()
            .map(|&(slot, i)| (slot, pages[i].bytes()))
            .collect();
        if let Err(e) = self.write_slots(&images, who) {
            self.deferred.give_back(stored.iter().map(|s| s.0));
            return Err(e);
        }
        let copies: Vec<(PageId, DeferredCopy)> = stored
            .iter()
            .map(|&(slot, i)| {
                let copy = DeferredCopy {
                    slot,
                    lsn: page_lsn(pages[i].bytes()),
                    crc: pages[i].image_crc(),
                };
                (pages[i].id(), copy)
            })
            .collect();
        let obsolete = self.deferred.publish(&copies);
        w.stats.deferred.fetch_add(copies.len() as u64, Relaxed);
        w.stats.obsolete.fetch_add(obsolete as u64, Relaxed);
        Ok(())
    }

    /// Allocates room in `dw/deferred` on the disk for `n` more page
    /// images and the manifest and list pages after them, ahead of the
    /// writes: on a full disk evictions then go to the area (preallocated
    /// whole) and a checkpoint's manifest still finds room, where a write
    /// growing the file failed the eviction (a client's read) or the
    /// opening (issue 34, review item 3).
    fn make_deferred_room(&self, n: usize, who: Issuer) -> Result<()> {
        let Some((from, to)) = self.deferred.room_wanted(n, DEFERRED_GROWTH_SLOTS) else {
            return Ok(());
        };
        let ps = self.page_size as u64;
        let len = u64::from(to - from) * ps;
        match self.deferred_file.allocate(u64::from(from) * ps, len, who) {
            Ok(()) => {
                self.deferred.allocated_up_to(to);
                Ok(())
            }
            Err(e) if e.is_disk_full() => {
                // Tried again once the next checkpoint begins.
                self.deferred.growth_refused();
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Writes `images` (sorted by slot) to their slots: a run of
    /// consecutive slots in one call, of at most `DEFERRED_WRITE_BYTES`.
    fn write_slots(&self, images: &[(u32, &[u8])], who: Issuer) -> Result<()> {
        let most = (DEFERRED_WRITE_BYTES / self.page_size).max(1);
        let mut run_start = 0;
        for k in 1..=images.len() {
            if k < images.len() && images[k].0 == images[k - 1].0 + 1 && k - run_start < most {
                continue;
            }
            let run = &images[run_start..k];
            let bufs: Vec<&[u8]> = run.iter().map(|&(_, bytes)| bytes).collect();
            let offset = run[0].0 as u64 * self.page_size as u64;
            self.deferred_file.write_vectored_at(&bufs, offset, who)?;
            run_start = k;
        }
        Ok(())
    }

    /// Reads page `id` into `buf` from its newest copy, if its in-place
    /// write is deferred. The copy counts only if the lookup still names
    /// it after the read: else its slot was freed and reused under the
    /// reader (the bytes may even pass the page checksum, at 16 bits),
    /// and the lookup is tried again (it finds the page in place once its
    /// write-back retired it).
    pub(super) fn read_deferred_page(
        &self,
        id: PageId,
        buf: &mut [u8],
        who: Issuer,
    ) -> Result<bool> {
        loop {
            let Some(copy) = self.deferred.lookup(id) else {
                return Ok(false);
            };
            let read = self.read_copy(copy, buf, who);
            let still_named = self.deferred.lookup(id) == Some(copy);
            if !still_named {
                continue;
            }
            read?;
            if !self.is_copy_of(buf, id, copy) {
                return Err(self.bad_copy(id, copy, "the page's newest version is unreadable"));
            }
            let w = &self.shards[shard_of(who).number() as usize];
            w.stats.reads.fetch_add(1, Relaxed);
            return Ok(true);
        }
    }

    fn read_copy(&self, copy: DeferredCopy, buf: &mut [u8], who: Issuer) -> Result<()> {
        let offset = copy.slot as u64 * self.page_size as u64;
        self.deferred_file.read_exact_at(buf, offset, who)
    }

    fn is_copy_of(&self, buf: &[u8], id: PageId, copy: DeferredCopy) -> bool {
        matches!(
            verify_page(buf, self.settings.checksums, id.file_id, id.block),
            Ok(PageState::Valid)
        ) && page_lsn(buf) == copy.lsn
    }

    fn bad_copy(&self, id: PageId, copy: DeferredCopy, why: &str) -> Error {
        Error::corruption(
            self.dir.join(AREA_DIR).join(DEFERRED_FILE),
            format!("slot {}", copy.slot),
            format!(
                "the deferred copy of data file {} block {} (LSN {}) fails its checks: {why}",
                id.file_id, id.block, copy.lsn
            ),
        )
    }

    /// Writes every page deferred now in place (or, `cold_only`, those
    /// deferred before the current checkpoint began: see
    /// [`super::super::deferred::DeferredPages::claim_cold`]), calling `progress` with the pages
    /// written after each batch. The claimed slots stand in for the
    /// area's copies: a write-back list names them with their CRC-32C,
    /// one fsync of `dw/deferred` makes both durable before any in-place
    /// write, recovery reads them back, and they are freed only once their
    /// data files are fsynced after the in-place writes (see the module
    /// doc of `deferred`). Returns the pages written back (not those a
    /// newer version went in place over meanwhile); on an error they stay
    /// deferred.
    pub(super) fn write_back_deferred(
        &self,
        who: Issuer,
        cold_only: bool,
        progress: &mut dyn FnMut(usize),
    ) -> Result<usize> {
        let claimed = if cold_only {
            self.deferred.claim_cold()
        } else {
            self.deferred.claim_all()
        };
        self.write_back_claimed(claimed, who, progress)
    }

    /// Writes `claimed` in place: see [`Self::write_back_deferred`].
    pub(super) fn write_back_claimed(
        &self,
        mut claimed: Claimed<'_>,
        who: Issuer,
        progress: &mut dyn FnMut(usize),
    ) -> Result<usize> {
        let w = &self.shards[Shard::Checkpointer.number() as usize];
        if claimed.pages.is_empty() {
            self.deferred.finish(claimed);
            return Ok(0);
        }
        let ps = self.page_size;
        let listed = self.write_list(&mut claimed, who);
        let mut images = self.write_back_images.lock();
        let written = (|| {
            listed?;
            // The list and the slots it names become durable together,
            // before any in-place write relies on them.
            self.deferred_file.sync_all(who)?;
            w.stats.deferred_fsyncs.fetch_add(1, Relaxed);
            let (mut done, mut written) = (0, 0);
            for chunk in claimed.pages.chunks(self.max_batch()) {
                // In flight until written: a newer version of one of these
                // waits to go in place, and one that went first is left out.
                let batch = self.deferred.start_batch(chunk);
                images.resize(batch.pages.len() * ps, 0);
                for (&(id, copy), image) in batch.pages.iter().zip(images.chunks_exact_mut(ps)) {
                    self.read_copy(copy, image, who)?;
                    if !self.is_copy_of(image, id, copy) {
                        return Err(self.bad_copy(id, copy, "before its deferred in-place write"));
                    }
                }
                // Sorted by page, as claimed.
                let pages: Vec<(PageId, &[u8])> = batch
                    .pages
                    .iter()
                    .zip(images.chunks_exact(ps))
                    .map(|(&(id, _), image)| (id, image))
                    .collect();
                self.files.write_in_place(&pages, who)?;
                written += pages.len();
                // Landed before the nap: nobody waits on a nap.
                drop(batch);
                done += chunk.len();
                progress(done);
            }
            // A slot is the page's only copy until its in-place write is
            // durable: fsync before the slots go back to the free list.
            let marks = self.marks_of(claimed.pages.iter().map(|p| p.0));
            sync_files(&marks, who, &w.stats.slot_syncs)?;
            Ok(written)
        })();
        drop(images);
        match written {
            Ok(n) => {
                self.deferred.finish(claimed);
                w.stats.written_back.fetch_add(n as u64, Relaxed);
                Ok(n)
            }
            Err(e) => {
                self.deferred.unclaim(claimed);
                Err(e)
            }
        }
    }

    /// Writes `claimed`'s write-back list (docs/FORMAT.md, "Write-back
    /// lists") into free slots, unfsynced: recovery uses a slot no manifest
    /// names only where a list names it with its CRC-32C.
    fn write_list(&self, claimed: &mut Claimed<'_>, who: Issuer) -> Result<()> {
        let list = Manifest {
            seq: self.durable_manifest_seq.load(Relaxed),
            redo_lsn: Lsn(0),
            entries: claimed
                .pages
                .iter()
                .map(|&(id, c)| entry_of(id, c))
                .collect(),
        };
        let pages = list.encode_list_pages(self.owner);
        let slots = self.deferred.take_list_slots(claimed, pages.len());
        let images = in_slot_order(&slots, &pages);
        self.write_slots(&images, who)?;
        let w = &self.shards[shard_of(who).number() as usize];
        w.stats
            .deferred_meta_pages
            .fetch_add(pages.len() as u64, Relaxed);
        Ok(())
    }

    /// A checkpoint's last step before its control file: names every
    /// deferred page's slot in a new manifest, written into free slots of
    /// `dw/deferred`, and fsyncs the file once, so that the redo point
    /// `redo` may pass the pages' changes. Call after the data files'
    /// fsyncs: a page the manifest no longer names must be durable in
    /// place (or have a durable copy in the area).
    pub(super) fn write_manifest(&self, redo: Lsn, who: Issuer) -> Result<()> {
        if !self.deferred.manifest_needed() {
            // Nothing deferred, none named: the durable (empty) manifest
            // holds, and no fsync is owed.
            return Ok(());
        }
        let copies = self.deferred.snapshot_for_manifest();
        let w = &self.shards[Shard::Checkpointer.number() as usize];
        let seq = self.next_manifest_seq.fetch_add(1, Relaxed);
        let entries = copies.iter().map(|&(id, c)| entry_of(id, c)).collect();
        let m = Manifest {
            seq,
            redo_lsn: redo,
            entries,
        };
        let pages = m.encode_pages(self.owner);
        let slots = self.deferred.take_manifest_slots(pages.len());
        let images = in_slot_order(&slots, &pages);
        // Every copy named was written before the snapshot: this one
        // fsync makes them and the manifest durable together.
        let written = self
            .write_slots(&images, who)
            .and_then(|()| self.write_out_in_pieces(who))
            .and_then(|()| self.deferred_file.sync_all(who));
        self.deferred.manifest_written(written.is_ok());
        if written.is_ok() {
            w.stats.manifests.fetch_add(1, Relaxed);
            w.stats
                .deferred_meta_pages
                .fetch_add(pages.len() as u64, Relaxed);
            self.durable_manifest_seq.store(seq, Relaxed);
        }
        written
    }

    /// Writes `dw/deferred`'s dirty pages to the device in pieces of
    /// `double_write_flush_after` pages, each waited for, so that the
    /// manifest's fsync finds little left. A cycle's slots wait in the
    /// page cache for that fsync (slots stored again meanwhile are written
    /// once), and at once they were a burst that the WAL's fsyncs queued
    /// behind (docs/BENCHMARKS.md, "Writing `dw/deferred` out before its
    /// fsync").
    fn write_out_in_pieces(&self, who: Issuer) -> Result<()> {
        let piece = self.settings.flush_after as u64 * self.page_size as u64;
        if piece == 0 {
            return Ok(());
        }
        // Past the slots handed out lies room allocated ahead: nothing
        // written there.
        let used = u64::from(self.deferred.slots_used()) * self.page_size as u64;
        let len = self.deferred_file.len()?.min(used);
        let mut offset = 0;
        while offset < len {
            let n = piece.min(len - offset);
            self.deferred_file.write_back_and_wait(offset, n, who)?;
            offset += n;
        }
        Ok(())
    }
}

/// Slots of `dw/deferred`'s room that page images leave free for the
/// pages of a manifest and a write-back list naming `capacity` pages each,
/// and the durable manifest's page.
pub(super) fn manifest_reserve(capacity: u32, page_size: usize) -> u32 {
    let one = manifest::pages_for(capacity as usize, page_size) as u32;
    2 * one + 1
}

/// Names `copy` of page `id` in a manifest or a write-back list.
fn entry_of(id: PageId, copy: DeferredCopy) -> ManifestEntry {
    ManifestEntry {
        file_id: id.file_id,
        block: id.block,
        slot: copy.slot,
        image_crc: copy.crc,
        lsn: copy.lsn,
    }
}

/// Opens `dw/deferred`, creating it if missing (and fsyncing the directory
/// then: a checkpoint's manifest makes slots the only copies of pages, so
/// the file may not vanish at a power loss, as the crash laboratory
/// found). Recovery has restored what the file held where a data page
/// needed it, and fsynced those restores, so the opening writes an empty
/// manifest to the lowest slot that neither holds a page of the manifest
/// recovery took nor is named by it (that manifest stays whole and
/// passing until this one is durable: else a tear here would make the
/// next recovery fall back past it) and fsyncs it. The file keeps its
/// length, up to `most_slots`: its room on disk is what lets a checkpoint
/// after a crash store its pages on a full disk (an opening that cut it
/// had to grow it again, and failed there). An older build's manifest
/// files go after that.
pub(super) fn open_deferred_file(
    fs: &dyn FileSystem,
    dir: &Path,
    owner: ManifestOwner,
    start: &ManifestStart,
    most_slots: u32,
    who: Issuer,
) -> Result<DeferredFile> {
    let area_dir = dir.join(AREA_DIR);
    let path = area_dir.join(DEFERRED_FILE);
    let created = !fs.exists(&path);
    let file = fs.open(&path, FileKind::DoubleWrite, OpenOptions::create())?;
    if created {
        fs.sync_dir(&area_dir, who)?;
    }
    let seq = start.last_seq + 1;
    let empty = Manifest {
        seq,
        redo_lsn: start.redo,
        entries: Vec::new(),
    };
    let slot = (0..)
        .find(|s| start.keep_slots.binary_search(s).is_err())
        .expect("a slot outside a finite list");
    let [page] = &empty.encode_pages(owner)[..] else {
        unreachable!("an empty manifest is one page")
    };
    let page_size = owner.page_size as u64;
    file.write_at(page, slot as u64 * page_size, who)?;
    file.sync_all(who)?;
    let had = u32::try_from(file.len()? / page_size).unwrap_or(u32::MAX);
    let slots = had.min(most_slots).max(slot + 1);
    if u64::from(slots) * page_size != file.len()? {
        // Only ever shorter: the manifest's slot lies in the file.
        file.set_len(u64::from(slots) * page_size, who)?;
    }
    let mut removed = false;
    for legacy in 0..2 {
        let path = manifest::legacy_manifest_path(dir, legacy);
        if fs.exists(&path) {
            fs.remove(&path, FileKind::DoubleWrite, who)?;
            removed = true;
        }
    }
    if removed {
        fs.sync_dir(&area_dir, who)?;
    }
    Ok(DeferredFile {
        slots: file,
        manifest_slot: slot,
        manifest_seq: seq,
        len_slots: slots,
    })
}

/// `dw/deferred` as an opening left it: its empty manifest, with sequence
/// `manifest_seq`, in slot `manifest_slot` of `len_slots`.
pub(super) struct DeferredFile {
    pub slots: Arc<dyn File>,
    pub manifest_slot: u32,
    pub manifest_seq: u64,
    pub len_slots: u32,
}

/// Pages paired with the slots they go to, in slot order (one sorted pass
/// over `dw/deferred`).
fn in_slot_order<'a>(slots: &[u32], pages: &'a [Vec<u8>]) -> Vec<(u32, &'a [u8])> {
    let mut images: Vec<(u32, &[u8])> = slots
        .iter()
        .zip(pages)
        .map(|(&slot, page)| (slot, page.as_slice()))
        .collect();
    images.sort_unstable_by_key(|i| i.0);
    images
}
