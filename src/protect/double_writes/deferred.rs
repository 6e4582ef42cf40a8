//! `double_write_defer_in_place`: evicted pages kept in a file of their own
//! across checkpoints (seed 000's "second log").
//!
//! With deferral on, a page the background writer or a client evicts is
//! not written in place and not written to the area: it goes to a slot of
//! `dw/deferred`, a plain buffered file. So does a page a checkpoint
//! writes when it writes nothing back (`double_write_keep_deferred`): its
//! manifest, written after the page, names the slot. Reads of the page are served from
//! that slot until the page is written in place.
//!
//! Why the slot needs no fsync between checkpoints: its data file holds an
//! intact older version, and the WAL, flushed past the page's LSN before
//! its eviction, brings that version forward. A torn or lost slot costs
//! nothing. A checkpoint changes that: once its redo point passes the
//! page's changes, the WAL that would bring the data file's version
//! forward may be recycled. So a checkpoint fsyncs the file and writes a
//! manifest naming every live slot ([`super::manifest`]), fsynced before
//! the control file; recovery trusts those slots at any LSN. The page is
//! written in place only when it is written from a newer version, or by a
//! write-back (the file more than half full, a shutdown, a switch of mode).
//! A write-back uses the fsynced slots as the pages' double-write copies
//! and frees them only after the data files' fsync.
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
//! - `live` names, per page, its newest version not yet in place. A slot
//!   named there or in `writing_back` is never handed out again, so a
//!   reader that finds the slot's copy changed knows to look again.
//! - A slot a durable manifest names is never handed out again before a
//!   later manifest that does not name it is durable.
//! - Write-backs run one at a time (`order`): two versions of one page are
//!   never on their way in place at once, so the newest lands last.
//! - A page leaves `writing_back` only after its in-place write returned,
//!   so a reader who no longer finds it finds it in the data file.

use crate::buffer::{PageId, PageMap};
use crate::lsn::Lsn;
use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeSet, HashSet};

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

#[derive(Default)]
struct Slots {
    /// Looked up on every buffer-pool miss: keyed with the page table's
    /// cheap hasher (SipHash took 2 % of oltp_write_only's CPU here).
    live: PageMap<DeferredCopy>,
    /// Claimed by the write-back in progress.
    writing_back: PageMap<DeferredCopy>,
    /// Freed slots, reused lowest first.
    free: BTreeSet<u32>,
    /// Slots `0..used` were handed out at least once.
    used: u32,
    /// Slots the newest durable manifest names.
    named_durable: HashSet<u32>,
    /// Slots the manifest being written names.
    named_next: Option<HashSet<u32>>,
    /// Freed slots a manifest names: free once a later one is durable.
    pending: Vec<u32>,
}

impl Slots {
    /// `slot` no longer holds a copy anyone reads: free, or pending while
    /// a manifest may name it.
    fn release(&mut self, slot: u32) {
        let named = self.named_durable.contains(&slot)
            || self.named_next.as_ref().is_some_and(|n| n.contains(&slot));
        if named {
            self.pending.push(slot);
        } else {
            self.free.insert(slot);
        }
    }

    fn take(&mut self, capacity: u32) -> Option<u32> {
        if let Some(slot) = self.free.pop_first() {
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
    order: Mutex<()>,
}

/// A write-back in progress: the pages claimed, sorted by page, and the
/// order lock, held until [`DeferredPages::finish`] or
/// [`DeferredPages::unclaim`].
pub struct Claimed<'a> {
    _order: MutexGuard<'a, ()>,
    pub pages: Vec<(PageId, DeferredCopy)>,
}

impl DeferredPages {
    pub fn new(capacity: u32) -> DeferredPages {
        DeferredPages {
            capacity,
            slots: Mutex::new(Slots::default()),
            order: Mutex::new(()),
        }
    }

    /// A slot for each page to store, by index (None: the file is full, so
    /// the page goes in place as without deferral).
    pub fn take_slots(&self, n: usize) -> Vec<Option<u32>> {
        let mut s = self.slots.lock();
        (0..n).map(|_| s.take(self.capacity)).collect()
    }

    /// Slots taken for a store that failed: free again.
    pub fn give_back(&self, slots: impl Iterator<Item = u32>) {
        let mut s = self.slots.lock();
        slots.for_each(|slot| s.release(slot));
    }

    /// The pages were written to their slots: each copy is now its page's
    /// newest version. Returns how many older copies this made obsolete
    /// (their slots are free).
    pub fn publish(&self, stored: &[(PageId, DeferredCopy)]) -> usize {
        let mut s = self.slots.lock();
        let mut obsolete = 0;
        for &(id, copy) in stored {
            if let Some(old) = s.live.insert(id, copy) {
                s.release(old.slot);
                obsolete += 1;
            }
        }
        obsolete
    }

    /// Pages `ids` are about to be written in place from newer versions (a
    /// checkpoint's, a page without a slot): their deferred copies become
    /// obsolete. Waits out a write-back in progress, which may be writing
    /// an older version of one of them that must land first. Returns how
    /// many copies were dropped.
    pub fn supersede(&self, ids: impl Iterator<Item = PageId> + Clone) -> usize {
        {
            let s = self.slots.lock();
            if s.live.is_empty() && s.writing_back.is_empty()
                || !ids
                    .clone()
                    .any(|id| s.live.contains_key(&id) || s.writing_back.contains_key(&id))
            {
                return 0;
            }
        }
        let _order = self.order.lock();
        let mut s = self.slots.lock();
        let mut dropped = 0;
        for id in ids {
            if let Some(old) = s.live.remove(&id) {
                s.release(old.slot);
                dropped += 1;
            }
        }
        dropped
    }

    /// Where page `id`'s newest copy lies, if its in-place write waits.
    pub fn lookup(&self, id: PageId) -> Option<DeferredCopy> {
        let s = self.slots.lock();
        s.live.get(&id).or_else(|| s.writing_back.get(&id)).copied()
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

    /// Claims every page deferred now for a write-back, sorted by page. A
    /// page deferred again meanwhile gets a new slot, so the claimed ones
    /// stay as they are until the write-back ends.
    pub fn claim_all(&self) -> Claimed<'_> {
        let order = self.order.lock();
        let mut s = self.slots.lock();
        let live = std::mem::take(&mut s.live);
        let mut pages: Vec<(PageId, DeferredCopy)> = live.into_iter().collect();
        pages.sort_by_key(|p| p.0);
        s.writing_back.extend(pages.iter().copied());
        Claimed {
            _order: order,
            pages,
        }
    }

    /// The write-back's in-place writes returned: its slots are free, and
    /// its pages are read from their data files (or from newer copies).
    pub fn finish(&self, claimed: Claimed<'_>) {
        let mut s = self.slots.lock();
        for (id, _) in &claimed.pages {
            if let Some(c) = s.writing_back.remove(id) {
                s.release(c.slot);
            }
        }
    }

    /// The write-back failed: its pages are deferred again, unless a newer
    /// copy replaced them meanwhile.
    pub fn unclaim(&self, claimed: Claimed<'_>) {
        let mut s = self.slots.lock();
        for (id, _) in &claimed.pages {
            let Some(c) = s.writing_back.remove(id) else {
                continue;
            };
            if s.live.contains_key(id) {
                s.release(c.slot);
            } else {
                s.live.insert(*id, c);
            }
        }
    }

    /// File `file_id` was dropped: its pages are never written back. Waits
    /// out a write-back in progress, which may be writing one of them.
    pub fn forget_file(&self, file_id: u32) {
        let _order = self.order.lock();
        let mut s = self.slots.lock();
        let gone: Vec<u32> = s
            .live
            .iter()
            .filter(|(id, _)| id.file_id == file_id)
            .map(|(_, c)| c.slot)
            .collect();
        s.live.retain(|id, _| id.file_id != file_id);
        gone.into_iter().for_each(|slot| s.release(slot));
    }

    /// Whether a checkpoint should write every deferred page back: the
    /// file holds more than half its capacity in slots not free (live,
    /// claimed, or waiting for a manifest), so it would soon turn
    /// evictions away to the area.
    pub fn half_full(&self) -> bool {
        let s = self.slots.lock();
        let taken = s.used as usize - s.free.len();
        taken * 2 > self.capacity as usize
    }

    /// Whether a new manifest would say anything the durable one does not:
    /// some page is deferred, or the durable manifest names a slot.
    pub fn manifest_needed(&self) -> bool {
        let s = self.slots.lock();
        !(s.live.is_empty() && s.writing_back.is_empty() && s.named_durable.is_empty())
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
        copies.extend(s.live.iter().map(|(i, c)| (*i, *c)));
        copies.sort_by_key(|c| c.0);
        s.named_next = Some(copies.iter().map(|c| c.1.slot).collect());
        copies
    }

    /// The manifest of the last snapshot is durable (`ok`), or its write
    /// failed: then both it and the previous one may be on disk, and the
    /// slots either names stay unavailable.
    pub fn manifest_written(&self, ok: bool) {
        let mut s = self.slots.lock();
        let next = s.named_next.take().expect("a snapshot was taken");
        if !ok {
            s.named_durable.extend(next);
            return;
        }
        s.named_durable = next;
        let pending = std::mem::take(&mut s.pending);
        for slot in pending {
            s.release(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(b: u32) -> PageId {
        PageId {
            file_id: 3,
            block: b,
        }
    }

    /// Takes a slot for `id` and publishes a copy at `lsn` there.
    fn store(d: &DeferredPages, id: PageId, lsn: u64) -> Option<DeferredCopy> {
        let slot = d.take_slots(1)[0]?;
        let copy = DeferredCopy {
            slot,
            lsn: Lsn(lsn),
            crc: 0,
        };
        d.publish(&[(id, copy)]);
        Some(copy)
    }

    #[test]
    fn a_page_stored_again_frees_its_old_slot_for_the_next() {
        let d = DeferredPages::new(4);
        let a = store(&d, page(7), 10).unwrap();
        let b = store(&d, page(7), 20).unwrap();
        assert_ne!(a.slot, b.slot, "never over the copy readers may be reading");
        assert_eq!(d.lookup(page(7)), Some(b));
        // The freed slot is the next one handed out: the file stays small.
        let c = store(&d, page(8), 30).unwrap();
        assert_eq!(c.slot, a.slot);
        assert_eq!((d.len(), d.slots_used()), (2, 2));
    }

    #[test]
    fn after_a_write_back_slots_are_handed_out_from_the_start_in_order() {
        let d = DeferredPages::new(16);
        for (b, lsn) in [(5, 1), (1, 2), (9, 3), (1, 4)] {
            store(&d, page(b), lsn).unwrap();
        }
        d.finish(d.claim_all());
        // A batch of three takes consecutive slots: one sequential write.
        assert_eq!(d.take_slots(3), vec![Some(0), Some(1), Some(2)]);
    }

    #[test]
    fn a_full_file_hands_out_no_slot() {
        let d = DeferredPages::new(2);
        assert!(store(&d, page(1), 1).is_some());
        assert!(store(&d, page(2), 1).is_some());
        assert_eq!(d.take_slots(2), vec![None, None]);
        // A failed store's slots come back.
        d.supersede([page(1)].into_iter());
        let got = d.take_slots(1);
        assert!(got[0].is_some());
        d.give_back(got.into_iter().flatten());
        assert!(d.take_slots(1)[0].is_some());
    }

    #[test]
    fn a_copy_stored_during_its_write_back_stays_live() {
        let d = DeferredPages::new(8);
        let old = store(&d, page(1), 10).unwrap();
        let claimed = d.claim_all();
        assert_eq!(claimed.pages, vec![(page(1), old)]);
        assert_eq!(d.lookup(page(1)), Some(old), "read while written back");
        // An eviction lands while the old copy goes in place.
        let new = store(&d, page(1), 30).unwrap();
        assert_ne!(new.slot, old.slot);
        assert_eq!(d.lookup(page(1)), Some(new));
        d.finish(claimed);
        assert_eq!(d.lookup(page(1)), Some(new));
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn a_written_back_page_is_read_from_its_data_file_again() {
        let d = DeferredPages::new(8);
        store(&d, page(1), 10).unwrap();
        store(&d, page(2), 11).unwrap();
        let claimed = d.claim_all();
        assert_eq!(claimed.pages.len(), 2);
        d.finish(claimed);
        assert_eq!((d.lookup(page(1)), d.len()), (None, 0));
        assert!(d.claim_all().pages.is_empty());
    }

    #[test]
    fn a_failed_write_back_can_be_tried_again() {
        let d = DeferredPages::new(8);
        let old = store(&d, page(1), 10).unwrap();
        store(&d, page(2), 10).unwrap();
        let claimed = d.claim_all();
        let newer = store(&d, page(2), 20).unwrap();
        d.unclaim(claimed);
        let again = d.claim_all();
        assert_eq!(again.pages, vec![(page(1), old), (page(2), newer)]);
    }

    #[test]
    fn pages_of_a_dropped_file_are_forgotten() {
        let d = DeferredPages::new(8);
        let other = PageId {
            file_id: 4,
            block: 1,
        };
        store(&d, page(1), 10).unwrap();
        let kept = store(&d, other, 10).unwrap();
        d.forget_file(3);
        assert_eq!(d.lookup(page(1)), None);
        assert_eq!(d.claim_all().pages, vec![(other, kept)]);
    }

    #[test]
    fn a_page_written_in_place_from_a_newer_version_drops_its_copy() {
        let d = DeferredPages::new(8);
        store(&d, page(1), 10).unwrap();
        assert_eq!(d.supersede([page(1), page(2)].into_iter()), 1);
        assert_eq!(d.lookup(page(1)), None);
        assert_eq!(d.supersede([page(1)].into_iter()), 0);
    }

    #[test]
    fn a_slot_a_durable_manifest_names_waits_for_the_next_manifest() {
        let d = DeferredPages::new(8);
        let a = store(&d, page(1), 10).unwrap();
        let named = d.snapshot_for_manifest();
        assert_eq!(named, vec![(page(1), a)]);
        d.manifest_written(true);
        // The page is evicted again: its old slot is the copy the manifest
        // names, so the next store must not take it.
        let b = store(&d, page(1), 20).unwrap();
        let c = store(&d, page(2), 30).unwrap();
        assert!(![b.slot, c.slot].contains(&a.slot));
        // A slot no manifest names is reused at once.
        let b2 = store(&d, page(1), 25).unwrap();
        let e = store(&d, page(3), 26).unwrap();
        assert_eq!(e.slot, b.slot);
        // Freed while the next manifest is written: still waits for it.
        let next = d.snapshot_for_manifest();
        assert_eq!(next, vec![(page(1), b2), (page(2), c), (page(3), e)]);
        d.supersede([page(2)].into_iter());
        assert!(!d.take_slots(1).contains(&Some(c.slot)));
        d.manifest_written(true);
        // Now a's slot is free (named by neither), c's waits once more.
        let got = d.take_slots(4);
        assert!(got.contains(&Some(a.slot)) && !got.contains(&Some(c.slot)));
    }

    #[test]
    fn after_a_failed_manifest_both_manifests_slots_stay_taken() {
        let d = DeferredPages::new(8);
        let a = store(&d, page(1), 10).unwrap();
        d.snapshot_for_manifest();
        d.manifest_written(true);
        let b = store(&d, page(1), 20).unwrap();
        d.snapshot_for_manifest();
        d.manifest_written(false);
        store(&d, page(1), 30).unwrap();
        let got = d.take_slots(5);
        assert!(!got.contains(&Some(a.slot)) && !got.contains(&Some(b.slot)));
    }

    #[test]
    fn a_file_half_taken_asks_for_a_write_back() {
        let d = DeferredPages::new(4);
        store(&d, page(1), 1).unwrap();
        store(&d, page(2), 1).unwrap();
        assert!(!d.half_full(), "2 of 4 is not more than half");
        store(&d, page(3), 1).unwrap();
        assert!(d.half_full());
        d.finish(d.claim_all());
        assert!(!d.half_full());
    }

    #[test]
    fn a_manifest_is_needed_until_one_names_nothing() {
        let d = DeferredPages::new(4);
        assert!(!d.manifest_needed(), "the opening's empty one holds");
        store(&d, page(1), 1).unwrap();
        assert!(d.manifest_needed());
        d.snapshot_for_manifest();
        d.manifest_written(true);
        d.supersede([page(1)].into_iter());
        assert!(d.manifest_needed(), "the durable one still names a slot");
        assert!(d.snapshot_for_manifest().is_empty());
        d.manifest_written(true);
        assert!(!d.manifest_needed());
    }
}
