//! `double_write_defer_in_place`: evicted pages kept in a file of their own
//! across checkpoints (seed 000's "second log").
//!
//! With deferral on, a page the background writer or a client evicts is
//! not written in place and not written to the area: it goes to a slot of
//! `dw/deferred`, a plain buffered file. So does a page a checkpoint
//! writes, other than a shutdown's (`double_write_keep_deferred`): its
//! manifest, written after the page, names the slot. Reads of the page
//! are served from that slot until the page is written in place.
//!
//! Why the slot needs no fsync between checkpoints: its data file holds an
//! intact older version, and the WAL, flushed past the page's LSN before
//! its eviction, brings that version forward. A torn or lost slot costs
//! nothing. A checkpoint changes that: once its redo point passes the
//! page's changes, the WAL that would bring the data file's version
//! forward may be recycled. So a checkpoint writes a manifest naming every
//! live slot ([`super::manifest`]) into free slots of the same file and
//! fsyncs it once, before the control file; recovery trusts those slots
//! at any LSN. The page is
//! written in place only when it is written from a newer version, or by a
//! write-back (the file more than half full, a shutdown, a switch of mode).
//! A checkpoint's write-back takes only the cold pages, those not stored
//! again since the checkpoint began (its era, [`DeferredPages::next_era`]),
//! as a log cleaner moves only a segment's data nobody rewrote: a hot page
//! would otherwise be written in place at each write-back and deferred
//! again at once. It runs before the checkpoint's pool pass, less the
//! pages the checkpoint is about to store, and a manifest follows it, so
//! that the freed slots take the checkpoint's own copies. Shutdowns and
//! switches write back all.
//! A write-back uses the fsynced slots as the pages' double-write copies
//! and frees them only after the data files' fsync, but for a page written
//! in place from a newer version meanwhile: that version's durable copy
//! in the area stands in for the slot. It names them first
//! in a write-back list with their CRC-32C ([`Claimed::list_slots`]):
//! recovery uses a slot no manifest names only where a list does, since a
//! slot rewritten by a later eviction and torn may pass a 16-bit page
//! checksum.
//!
//! The reuse rule: a slot named by the newest durable manifest (or the one
//! being written) is the page's copy at the redo point until a later
//! manifest that no longer names it is durable, so a freed slot waits in
//! `pending` until then. A slot no manifest names is reused at once: a
//! page evicted many times in one cycle keeps overwriting the same few
//! slots, so the file's dirty pages stay about as many as the pages
//! deferred.
//!
//! Why a file of its own and not the area's ring (measured, BENCHMARKS
//! "Deferred pages in a file of their own"): the ring put each eviction
//! at a new offset, so the page cache held every eviction as a distinct
//! dirty page and the shard's fsync wrote them all to the disk (five
//! times `off`'s bytes). Here a page evicted again takes the lowest free
//! slot, and after a write-back the batches take consecutive slots from
//! the file's start (one sequential write each, as a disk head likes).
//!
//! Invariants:
//! - A page is deferred only where its segment file exists, so a file
//!   that exists only in the deferred file is never taken for a dropped one.
//! - No page of a dropped file is in `live` after `forget_file`: a copy
//!   published later is dropped, so no write-back creates the file again.
//! - `live` names, per page, its newest version not yet in place. A slot
//!   named there or in `writing_back` is never handed out again, so a
//!   reader that finds the slot's copy changed knows to look again.
//! - A slot a durable manifest names, or holds a page of, is never handed
//!   out again before a later manifest that does not is durable.
//! - Write-backs run one at a time (`order`), and a newer version's
//!   in-place write ([`DeferredPages::supersede`]) waits for a write-back
//!   batch holding the page `in_flight`, and takes a page not yet in one
//!   out of the claim: two versions of one page are never on their way in
//!   place at once, so the newest lands last.
//! - A page leaves `writing_back` only after its in-place write returned,
//!   or as its newer version goes in place, so a reader who no longer
//!   finds it finds it in the data file or the pool.
//! - A slot a write-back claimed, and a slot of its list, is handed out
//!   again only after the write-back's data-file fsyncs returned, or,
//!   after a failed write-back, once a later manifest is durable: until
//!   then an in-place write from it may be torn. A claimed slot whose page
//!   a newer version went in place over goes at once: that version's copy
//!   in the area is durable, and stands in for the slot.

use crate::buffer::{PageId, PageMap, PageSet};
use crate::lsn::Lsn;
use crate::protect::double_writes::deferred_index::CopyIndex;
use crate::protect::double_writes::slot_set::SlotSet;
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::HashSet;

/// A deferred page's newest copy in the deferred file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeferredCopy {
    /// The slot: bytes `slot * page_size ..` of `dw/deferred`.
    pub slot: u32,
    /// The copy's page LSN.
    pub lsn: Lsn,
    /// CRC-32C of the copy's bytes (for the manifest).
    pub crc: u32,
}

/// A copy in `live`, with the checkpoint era it was stored in.
#[derive(Clone, Copy)]
struct Live {
    copy: DeferredCopy,
    era: u64,
}

#[derive(Default)]
struct Slots {
    /// Keyed with the page table's cheap hasher (SipHash took 2 % of
    /// oltp_write_only's CPU here when every miss looked here).
    live: PageMap<Live>,
    /// Bumped as each checkpoint starts ([`DeferredPages::next_era`]).
    era: u64,
    /// Claimed by the write-back in progress.
    writing_back: PageMap<DeferredCopy>,
    /// Claimed pages of the write-back's batch being written in place now.
    in_flight: PageSet,
    /// Freed slots, reused lowest first.
    free: SlotSet,
    /// Slots `0..used` were handed out at least once.
    used: u32,
    /// Slots the newest durable manifest names.
    named_durable: SlotSet,
    /// Slots the manifest being written names.
    named_next: Option<SlotSet>,
    /// Slots holding the pages of the newest durable manifest (after a
    /// failed write, of the ones that may be on disk): recovery's way to
    /// the slots named, reused once a later manifest is durable.
    manifest_pages_durable: Vec<u32>,
    /// Slots taken for the pages of the manifest being written.
    manifest_pages_next: Vec<u32>,
    /// Slots holding the write-back list of the write-back in progress.
    list_pages: Vec<u32>,
    /// Freed slots a manifest names: free once a later one is durable.
    pending: Vec<u32>,
    /// Files dropped in this opening ([`DeferredPages::forget_file`]).
    forgotten: HashSet<u32>,
    /// Slots `0..allocated` have room on the disk (the file's length at
    /// the opening, then what `allocate` added): a write there cannot
    /// fail for a full disk.
    allocated: u32,
    /// Slots of that room page images leave to manifest and list pages.
    reserve: u32,
    /// The disk refused more room in this checkpoint cycle.
    growth_refused: bool,
}

impl Slots {
    /// Page `id`'s newest copy not yet in place: what
    /// [`DeferredPages::lookup`] finds (through the index).
    fn newest(&self, id: PageId) -> Option<DeferredCopy> {
        self.live
            .get(&id)
            .map(|l| l.copy)
            .or_else(|| self.writing_back.get(&id).copied())
    }

    /// `slot` no longer holds a copy anyone reads: free, or pending while
    /// a manifest may name it.
    fn release(&mut self, slot: u32) {
        let named = self.named_durable.contains(slot)
            || self.named_next.as_ref().is_some_and(|n| n.contains(slot));
        if named {
            self.pending.push(slot);
        } else {
            self.free.insert(slot);
        }
    }

    /// Slots holding manifest or write-back list pages: they take no room
    /// from page images.
    fn manifest_pages(&self) -> usize {
        self.manifest_pages_durable.len() + self.manifest_pages_next.len() + self.list_pages.len()
    }

    /// Slots of page images not free: live, claimed, or waiting for a
    /// manifest.
    fn taken(&self) -> usize {
        self.used as usize - self.free.len() - self.manifest_pages()
    }

    /// A slot for a page image, leaving `reserve` slots of the allocated
    /// room (free, or not yet handed out) to manifests and lists: on a
    /// full disk evictions go to the area, and a checkpoint still finds
    /// room for its manifest.
    fn take_image(&mut self, capacity: u32) -> Option<u32> {
        let spare = self.free.len() + self.allocated.saturating_sub(self.used) as usize;
        if spare <= self.reserve as usize {
            return None;
        }
        self.take(capacity.min(self.allocated))
    }

    fn take(&mut self, capacity: u32) -> Option<u32> {
        if let Some(slot) = self.free.pop_lowest() {
            return Some(slot);
        }
        (self.used < capacity).then(|| {
            self.used += 1;
            self.used - 1
        })
    }
}

/// The deferred pages of one opening, and the slots of their file.
pub struct DeferredPages {
    /// The most slots the file may have (`AreaSettings::deferred_slots`).
    capacity: u32,
    slots: Mutex<Slots>,
    /// `Slots::newest` of every page, for lookups without `slots`' mutex:
    /// set by [`Self::reindex`] wherever `live` or `writing_back` change.
    index: CopyIndex<DeferredCopy>,
    /// Held by a write-back from its claim to its end, naps included: only
    /// write-backs and `forget_file` (a drop) wait for it, never a write.
    order: Mutex<()>,
    /// Signalled as a write-back batch's in-place writes return.
    landed: Condvar,
}

/// A write-back in progress: the pages claimed, sorted by page, and the
/// order lock, held until [`DeferredPages::finish`] or
/// [`DeferredPages::unclaim`].
pub struct Claimed<'a> {
    _order: MutexGuard<'a, ()>,
    pub pages: Vec<(PageId, DeferredCopy)>,
    /// Slots of its write-back list ([`DeferredPages::take_list_slots`]).
    pub list_slots: Vec<u32>,
}

/// A write-back batch in flight: a newer version of one of its pages
/// waits to go in place until this drops ([`DeferredPages::supersede`]).
pub struct InFlight<'a> {
    deferred: &'a DeferredPages,
    pub pages: Vec<(PageId, DeferredCopy)>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut s = self.deferred.slots.lock();
        for (id, _) in &self.pages {
            s.in_flight.remove(id);
        }
        self.deferred.landed.notify_all();
    }
}

impl DeferredPages {
    /// Slots for at most `capacity` page images, with no bound from the
    /// disk until [`Self::opened_with_manifest_at`] says the file's size.
    pub fn new(capacity: u32) -> DeferredPages {
        DeferredPages {
            capacity,
            slots: Mutex::new(Slots {
                allocated: u32::MAX,
                ..Slots::default()
            }),
            index: CopyIndex::default(),
            order: Mutex::new(()),
            landed: Condvar::new(),
        }
    }

    /// A slot for each page to store, by index (None: the file is full, so
    /// the page goes in place as without deferral).
    pub fn take_slots(&self, n: usize) -> Vec<Option<u32>> {
        let mut s = self.slots.lock();
        let capacity = self.capacity.saturating_add(s.manifest_pages() as u32);
        (0..n).map(|_| s.take_image(capacity)).collect()
    }

    /// The room to allocate, as slots `from..to`, before `n` page images
    /// are stored: none if the allocated room holds them and the reserve.
    /// It grows by at least `step` slots at a time, and never past the
    /// capacity and the reserve.
    pub fn room_wanted(&self, n: usize, step: u32) -> Option<(u32, u32)> {
        let s = self.slots.lock();
        if s.allocated == u32::MAX || s.growth_refused {
            return None;
        }
        let growth = n.saturating_sub(s.free.len()) as u32;
        let most = self.capacity.saturating_add(s.manifest_pages() as u32);
        let images_end = s.used.saturating_add(growth).min(most);
        let wanted = images_end.saturating_add(s.reserve);
        if wanted <= s.allocated {
            return None;
        }
        let to = wanted
            .max(s.allocated.saturating_add(step))
            .min(most.saturating_add(s.reserve));
        (to > s.allocated).then_some((s.allocated, to))
    }

    /// The disk is full: no more room is asked for until the next
    /// checkpoint begins ([`Self::next_era`]).
    pub fn growth_refused(&self) {
        self.slots.lock().growth_refused = true;
    }

    /// Slots below `to` have room on the disk now.
    pub fn allocated_up_to(&self, to: u32) {
        let mut s = self.slots.lock();
        s.allocated = s.allocated.max(to);
    }

    /// Slots taken for a store that failed: free again.
    pub fn give_back(&self, slots: impl Iterator<Item = u32>) {
        let mut s = self.slots.lock();
        slots.for_each(|slot| s.release(slot));
    }

    /// The pages were written to their slots: each copy is now its page's
    /// newest version, unless its file was dropped. Returns how many
    /// copies this made obsolete (their slots are free).
    pub fn publish(&self, stored: &[(PageId, DeferredCopy)]) -> usize {
        let mut s = self.slots.lock();
        let era = s.era;
        let mut obsolete = 0;
        for &(id, copy) in stored {
            if s.forgotten.contains(&id.file_id) {
                // Copied before its file was dropped, stored after the
                // drop forgot the file's pages: written back, it would
                // create the removed file again. File ids are never
                // reused, so no later page of that id is lost here.
                s.release(copy.slot);
                obsolete += 1;
                continue;
            }
            if let Some(old) = s.live.insert(id, Live { copy, era }) {
                s.release(old.copy.slot);
                obsolete += 1;
            }
            self.reindex(&s, id);
        }
        obsolete
    }

    /// The index takes page `id`'s newest copy from `s`: called, with the
    /// slots' mutex held, after every change of its `live` or
    /// `writing_back` entry, before a slot freed by it is handed out.
    fn reindex(&self, s: &Slots, id: PageId) {
        self.index.set(id, s.newest(id));
    }

    /// Pages `ids` are about to be written in place from newer versions (a
    /// checkpoint's, a page without a slot): their deferred copies become
    /// obsolete, claimed ones too. Waits only for a write-back batch
    /// writing an older version of one of them, which must land first: a
    /// write-back naps between batches, and the caller holds its frames'
    /// I/O locks. A claimed page not yet in a batch is taken out of the
    /// claim, so the write-back skips it. Returns how many copies were
    /// dropped.
    pub fn supersede(&self, ids: impl Iterator<Item = PageId> + Clone) -> usize {
        let mut s = self.slots.lock();
        if s.live.is_empty() && s.writing_back.is_empty() {
            return 0;
        }
        while ids.clone().any(|id| s.in_flight.contains(&id)) {
            self.landed.wait(&mut s);
        }
        // A claimed copy's slot may go now: the newer version's copy in
        // the area is durable (the caller's contract), so it stands in
        // for the slot if the write-back's in-place write tears.
        let mut dropped = 0;
        for id in ids {
            if let Some(old) = s.live.remove(&id) {
                s.release(old.copy.slot);
                dropped += 1;
            }
            if let Some(old) = s.writing_back.remove(&id) {
                s.release(old.slot);
                dropped += 1;
            }
            self.reindex(&s, id);
        }
        dropped
    }

    /// Slots for the `n` pages of the manifest being written: the lowest
    /// free ones, past the file's capacity if need be (a manifest always
    /// finds room; it takes a few slots per thousand pages it names).
    pub fn take_manifest_slots(&self, n: usize) -> Vec<u32> {
        let mut s = self.slots.lock();
        assert!(
            s.named_next.is_some(),
            "taken after the manifest's snapshot"
        );
        let slots: Vec<u32> = (0..n)
            .map(|_| s.take(u32::MAX).expect("a slot below u32::MAX"))
            .collect();
        s.manifest_pages_next.extend(&slots);
        slots
    }

    /// An opening wrote its empty manifest to `slot` of a file `slots`
    /// long, on disk: every other slot is free, `slot` holds the durable
    /// manifest's page, and `reserve` slots of the file's room are kept
    /// for manifest and list pages.
    pub fn opened_with_manifest_at(&self, slot: u32, slots: u32, reserve: u32) {
        let mut s = self.slots.lock();
        assert!(s.used == 0 && s.live.is_empty(), "at an opening");
        assert!(slot < slots, "the manifest lies in the file");
        s.used = slots;
        s.free = (0..slots).filter(|&f| f != slot).collect();
        s.manifest_pages_durable = vec![slot];
        s.allocated = slots;
        s.reserve = reserve;
    }

    /// Where page `id`'s newest copy lies, if its in-place write waits.
    /// Every pool miss asks: it takes one shard of the index, not the
    /// slots' mutex.
    pub fn lookup(&self, id: PageId) -> Option<DeferredCopy> {
        self.index.get(id)
    }

    /// Pages deferred now (claimed ones included).
    pub fn len(&self) -> usize {
        let s = self.slots.lock();
        s.live.len() + s.writing_back.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots handed out at least once: the file's length in pages.
    pub fn slots_used(&self) -> u32 {
        self.slots.lock().used
    }

    /// A checkpoint starts: copies stored from now on are of its era, and
    /// those stored before are cold unless stored again.
    pub fn next_era(&self) {
        let mut s = self.slots.lock();
        s.era += 1;
        s.growth_refused = false;
    }

    /// Claims every page deferred now for a write-back, sorted by page. A
    /// page deferred again meanwhile gets a new slot, so the claimed ones
    /// stay as they are until the write-back ends.
    pub fn claim_all(&self) -> Claimed<'_> {
        self.claim(false, &PageSet::default())
    }

    /// Claims the cold pages: those whose newest copy was stored before
    /// the current era began. A checkpoint that defers its own pages
    /// writes back only these: its own copies, and the pages evicted
    /// during it, would only be written twice, as a log cleaner leaves a
    /// segment's live data that is still being rewritten.
    pub fn claim_cold(&self) -> Claimed<'_> {
        self.claim(true, &PageSet::default())
    }

    /// [`Self::claim_cold`], less the pages of `marked`: a checkpoint's
    /// dirty pages, which it is about to store again.
    pub(crate) fn claim_cold_except(&self, marked: &PageSet) -> Claimed<'_> {
        self.claim(true, marked)
    }

    fn claim(&self, cold_only: bool, except: &PageSet) -> Claimed<'_> {
        let order = self.order.lock();
        let mut s = self.slots.lock();
        // The last write-back ended (`finish` or `unclaim`): a claim moves
        // each copy from `live` to `writing_back`, and the index stays.
        assert!(s.writing_back.is_empty(), "one write-back at a time");
        let era = s.era;
        let mut pages: Vec<(PageId, DeferredCopy)> = Vec::new();
        s.live.retain(|&id, l| {
            let claim = !cold_only || l.era < era && !except.contains(&id);
            if claim {
                pages.push((id, l.copy));
            }
            !claim
        });
        pages.sort_by_key(|p| p.0);
        s.writing_back.extend(pages.iter().copied());
        Claimed {
            _order: order,
            pages,
            list_slots: Vec::new(),
        }
    }

    /// Slots for the `n` pages of `claimed`'s write-back list: the lowest
    /// free ones, past the file's capacity if need be, as a manifest's.
    pub fn take_list_slots(&self, claimed: &mut Claimed<'_>, n: usize) -> Vec<u32> {
        let mut s = self.slots.lock();
        assert!(claimed.list_slots.is_empty(), "one list per write-back");
        let slots: Vec<u32> = (0..n)
            .map(|_| s.take(u32::MAX).expect("a slot below u32::MAX"))
            .collect();
        s.list_pages.extend(&slots);
        claimed.list_slots.clone_from(&slots);
        slots
    }

    /// The list's slots leave `list_pages`.
    fn drop_list(s: &mut Slots, claimed: &Claimed<'_>) {
        s.list_pages
            .retain(|slot| !claimed.list_slots.contains(slot));
    }

    /// The next batch of a write-back: the pages of `batch` still claimed
    /// (not superseded), in flight until the returned guard drops, after
    /// their in-place writes returned.
    pub fn start_batch(&self, batch: &[(PageId, DeferredCopy)]) -> InFlight<'_> {
        let mut s = self.slots.lock();
        assert!(s.in_flight.is_empty(), "one write-back batch at a time");
        let pages: Vec<(PageId, DeferredCopy)> = batch
            .iter()
            .filter(|(id, c)| s.writing_back.get(id) == Some(c))
            .copied()
            .collect();
        s.in_flight.extend(pages.iter().map(|p| p.0));
        InFlight {
            deferred: self,
            pages,
        }
    }

    /// The write-back's in-place writes are durable (its data files
    /// fsynced): its slots and its list's are free, and its pages are
    /// read from their data files (or from newer copies).
    pub fn finish(&self, claimed: Claimed<'_>) {
        let mut s = self.slots.lock();
        Self::drop_list(&mut s, &claimed);
        for &slot in &claimed.list_slots {
            s.release(slot);
        }
        for (id, _) in &claimed.pages {
            if let Some(c) = s.writing_back.remove(id) {
                s.release(c.slot);
                self.reindex(&s, *id);
            }
        }
    }

    /// The write-back failed: its pages are deferred again, unless a newer
    /// copy replaced them meanwhile. Some in-place writes may have
    /// happened and not be durable: the list and the slots it names stay
    /// until a later manifest is durable, which names each page's newest
    /// copy (a page written in place from a newer version meanwhile has
    /// its durable copy in the area).
    pub fn unclaim(&self, claimed: Claimed<'_>) {
        let mut s = self.slots.lock();
        Self::drop_list(&mut s, &claimed);
        s.pending.extend(&claimed.list_slots);
        for (id, _) in &claimed.pages {
            let Some(c) = s.writing_back.remove(id) else {
                continue;
            };
            if s.live.contains_key(id) {
                s.pending.push(c.slot);
            } else {
                // Cold: it was claimed as such, or by a claim of all.
                s.live.insert(*id, Live { copy: c, era: 0 });
            }
            self.reindex(&s, *id);
        }
    }

    /// File `file_id` was dropped: its pages are never written back, and
    /// a copy of one published later (an eviction that copied it before
    /// the drop) is dropped at once. Waits out a write-back in progress,
    /// which may be writing one of them.
    pub fn forget_file(&self, file_id: u32) {
        let _order = self.order.lock();
        let mut s = self.slots.lock();
        s.forgotten.insert(file_id);
        let gone: Vec<(PageId, u32)> = s
            .live
            .iter()
            .filter(|(id, _)| id.file_id == file_id)
            .map(|(id, l)| (*id, l.copy.slot))
            .collect();
        s.live.retain(|id, _| id.file_id != file_id);
        for (id, slot) in gone {
            s.release(slot);
            self.reindex(&s, id);
        }
    }

    /// Whether a checkpoint should write deferred pages back: the
    /// file holds more than half its capacity in slots not free (live,
    /// claimed, or waiting for a manifest), so it would soon turn
    /// evictions away to the area.
    pub fn half_full(&self) -> bool {
        self.slots.lock().taken() * 2 > self.capacity as usize
    }

    /// Whether `n` more pages would find free slots now.
    pub fn has_room_for(&self, n: usize) -> bool {
        self.slots.lock().taken() + n <= self.capacity as usize
    }

    /// Whether a new manifest would say anything the durable one does not:
    /// some page is deferred, or the durable manifest names a slot; or
    /// slots wait for one (a failed write-back's).
    pub fn manifest_needed(&self) -> bool {
        let s = self.slots.lock();
        !(s.live.is_empty()
            && s.writing_back.is_empty()
            && s.named_durable.is_empty()
            && s.pending.is_empty())
    }

    /// The copies a manifest must name now, sorted by page: every page's
    /// newest version not durable in place (a page claimed by a write-back
    /// in progress, if deferred again, by its newer copy). Until
    /// [`Self::manifest_written`], their slots stay named.
    pub fn snapshot_for_manifest(&self) -> Vec<(PageId, DeferredCopy)> {
        let mut s = self.slots.lock();
        assert!(s.named_next.is_none(), "one manifest at a time");
        let mut copies: Vec<(PageId, DeferredCopy)> =
            s.writing_back.iter().map(|(i, c)| (*i, *c)).collect();
        copies.retain(|(id, _)| !s.live.contains_key(id));
        copies.extend(s.live.iter().map(|(i, l)| (*i, l.copy)));
        copies.sort_by_key(|c| c.0);
        s.named_next = Some(copies.iter().map(|c| c.1.slot).collect());
        copies
    }

    /// The manifest of the last snapshot is durable (`ok`), or its write
    /// failed: then both it and the previous one may be on disk, and the
    /// slots either names or is written in stay unavailable.
    pub fn manifest_written(&self, ok: bool) {
        let mut s = self.slots.lock();
        let next = s.named_next.take().expect("a snapshot was taken");
        let pages = std::mem::take(&mut s.manifest_pages_next);
        if !ok {
            s.named_durable.extend(&next);
            s.manifest_pages_durable.extend(pages);
            return;
        }
        s.named_durable = next;
        let old_pages = std::mem::replace(&mut s.manifest_pages_durable, pages);
        let pending = std::mem::take(&mut s.pending);
        for slot in pending.into_iter().chain(old_pages) {
            s.release(slot);
        }
    }
}

#[cfg(test)]
#[path = "deferred_tests.rs"]
mod tests;
