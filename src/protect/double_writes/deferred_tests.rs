//! The deferred pages' bookkeeping: slots, eras, manifests, claims.

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

#[test]
fn a_cold_claim_leaves_the_copies_of_the_current_era() {
    let d = DeferredPages::new(16);
    let cold = store(&d, page(1), 10).unwrap();
    store(&d, page(2), 11).unwrap();
    d.next_era();
    // Page 2 is stored again in this era, page 3 for the first time.
    let hot = store(&d, page(2), 20).unwrap();
    store(&d, page(3), 21).unwrap();
    let claimed = d.claim_cold();
    assert_eq!(claimed.pages, vec![(page(1), cold)]);
    d.finish(claimed);
    assert_eq!(d.len(), 2);
    assert_eq!(d.lookup(page(2)), Some(hot));
    // The next era makes this one's copies cold; a claim of all takes any.
    d.next_era();
    assert_eq!(d.claim_cold().pages.len(), 2);
}

#[test]
fn a_page_unclaimed_after_a_failed_write_back_is_cold() {
    let d = DeferredPages::new(8);
    let old = store(&d, page(1), 10).unwrap();
    d.unclaim(d.claim_all());
    d.next_era();
    assert_eq!(d.claim_cold().pages, vec![(page(1), old)]);
}

#[test]
fn a_manifests_pages_keep_their_slots_until_the_next_is_durable_and_take_no_room() {
    let d = DeferredPages::new(2);
    d.opened_with_manifest_at(1, 2, 0);
    d.allocated_up_to(100);
    // Slot 1 holds the opening's manifest: pages get slot 0, then 2.
    let a = store(&d, page(1), 10).unwrap();
    let b = store(&d, page(2), 11).unwrap();
    assert_eq!((a.slot, b.slot), (0, 2));
    assert!(store(&d, page(3), 12).is_none(), "two page images: full");
    d.snapshot_for_manifest();
    let pages = d.take_manifest_slots(2);
    assert_eq!(pages, [3, 4], "past the capacity: a manifest always fits");
    d.manifest_written(true);
    // The opening's page is free now; this manifest's are not.
    d.supersede([page(1), page(2)].into_iter());
    d.snapshot_for_manifest();
    let next = d.take_manifest_slots(1);
    assert_eq!(next, [1]);
    d.manifest_written(true);
    let got = d.take_slots(8);
    assert!(got.contains(&Some(3)) && got.contains(&Some(4)), "{got:?}");
    assert!(!got.contains(&Some(1)), "the durable manifest's page");
}

#[test]
fn a_copy_published_after_its_file_was_forgotten_is_dropped() {
    // drop_table forgets file 3 while an eviction that copied one of its
    // pages earlier is storing the copy.
    let d = DeferredPages::new(4);
    let slot = d.take_slots(1)[0].unwrap();
    d.forget_file(3);
    let copy = DeferredCopy {
        slot,
        lsn: Lsn(10),
        crc: 0,
    };
    assert_eq!(d.publish(&[(page(1), copy)]), 1, "obsolete at once");
    assert_eq!((d.lookup(page(1)), d.len()), (None, 0));
    assert_eq!(d.take_slots(1), vec![Some(slot)], "its slot is free");
    // Other files' pages are deferred as before.
    let other = PageId {
        file_id: 4,
        block: 1,
    };
    let kept = store(&d, other, 20).unwrap();
    assert_eq!(d.lookup(other), Some(kept));
}

#[test]
fn a_write_backs_list_keeps_its_slots_until_its_pages_are_durable_in_place() {
    let d = DeferredPages::new(2);
    store(&d, page(1), 10).unwrap();
    let mut claimed = d.claim_all();
    // Past the capacity, as a manifest's: taking no room from images.
    assert_eq!(d.take_list_slots(&mut claimed, 1), [1]);
    assert!(d.has_room_for(1));
    assert_eq!(store(&d, page(2), 20).unwrap().slot, 2);
    d.finish(claimed);
    // Both the claimed slot and the list's are free again.
    let got = d.take_slots(2);
    assert_eq!(got, [Some(0), Some(1)]);
}

#[test]
fn after_a_failed_write_back_its_list_and_replaced_slots_wait_for_a_manifest() {
    let d = DeferredPages::new(8);
    let old = store(&d, page(1), 10).unwrap();
    let mut claimed = d.claim_all();
    let list = d.take_list_slots(&mut claimed, 1);
    // Evicted again during the write-back: a newer copy elsewhere.
    let newer = store(&d, page(1), 20).unwrap();
    d.unclaim(claimed);
    assert_eq!(d.lookup(page(1)), Some(newer));
    // An in-place write of the old copy may be torn on disk: its slot and
    // the list naming it stay until a manifest names the newer copy.
    let taken = |d: &DeferredPages| d.take_slots(8).into_iter().flatten().collect::<Vec<_>>();
    let free = taken(&d);
    assert!(
        !free.contains(&old.slot) && !free.contains(&list[0]),
        "{free:?}"
    );
    d.give_back(free.into_iter());
    assert!(d.manifest_needed());
    let named = d.snapshot_for_manifest();
    assert_eq!(named, vec![(page(1), newer)]);
    d.manifest_written(true);
    let free = taken(&d);
    assert!(
        free.contains(&old.slot) && free.contains(&list[0]),
        "{free:?}"
    );
}

#[test]
fn a_claimed_page_written_in_place_newer_leaves_the_write_back() {
    let d = DeferredPages::new(8);
    let a = store(&d, page(1), 10).unwrap();
    store(&d, page(2), 20).unwrap();
    let claimed = d.claim_all();
    let first = d.start_batch(&claimed.pages[..1]);
    assert_eq!(first.pages, vec![(page(1), a)]);
    drop(first);
    // Page 1 landed, page 2 is in no batch yet: neither waits.
    assert_eq!(d.supersede([page(1), page(2)].into_iter()), 2);
    assert_eq!((d.lookup(page(1)), d.lookup(page(2))), (None, None));
    let second = d.start_batch(&claimed.pages[1..]);
    assert!(
        second.pages.is_empty(),
        "the old page 2 goes in place no more"
    );
    drop(second);
    d.finish(claimed);
    // Their slots were freed once, by the supersede.
    assert_eq!(d.take_slots(3), vec![Some(0), Some(1), Some(2)]);
}

#[test]
fn a_newer_version_waits_for_the_batch_writing_an_older_one() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let d = DeferredPages::new(8);
    store(&d, page(1), 10).unwrap();
    let claimed = d.claim_all();
    let batch = d.start_batch(&claimed.pages);
    let landed = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let newer = sc.spawn(|| {
            let dropped = d.supersede([page(1)].into_iter());
            (dropped, landed.load(SeqCst))
        });
        // Room for a supersede that does not wait to return first (it is
        // caught then); one that waits never fails here.
        std::thread::sleep(std::time::Duration::from_millis(50));
        landed.store(true, SeqCst);
        drop(batch);
        assert_eq!(newer.join().unwrap(), (1, true), "returned after the batch");
    });
    d.finish(claimed);
    assert!(d.is_empty());
}

#[test]
fn page_images_leave_the_reserve_of_the_allocated_room_to_manifests() {
    let d = DeferredPages::new(100);
    // A file of 10 slots, its manifest in slot 0, 3 slots kept back.
    d.opened_with_manifest_at(0, 10, 3);
    assert_eq!(d.room_wanted(1, 4), Some((10, 14)), "room for one more");
    // The disk refused it: images stop where 3 spare slots remain.
    d.growth_refused();
    assert_eq!(d.room_wanted(1, 4), None, "not asked again this cycle");
    let got: Vec<u32> = (0..8)
        .filter_map(|i| store(&d, page(i), 10 + i as u64))
        .map(|c| c.slot)
        .collect();
    assert_eq!(got, [1, 2, 3, 4, 5, 6]);
    d.snapshot_for_manifest();
    assert_eq!(d.take_manifest_slots(3), [7, 8, 9], "inside the room");
    d.manifest_written(true);
    // The next checkpoint asks again; the room grew.
    d.next_era();
    assert_eq!(d.room_wanted(1, 4), Some((10, 14)));
    d.allocated_up_to(14);
    assert_eq!(store(&d, page(50), 60).map(|c| c.slot), Some(0));
}

/// What the deferred pages do, step by step, for the model below.
#[derive(Clone, Debug)]
enum Step {
    Store(PageId),
    Supersede(PageId),
    Claim { cold: bool },
    Batch,
    Finish,
    Unclaim,
    ForgetFile(u32),
    NextEra,
}

fn any_step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    let id = (3u32..5, 0u32..6).prop_map(|(f, b)| PageId::new(f, b));
    prop_oneof![
        4 => id.clone().prop_map(Step::Store),
        1 => id.prop_map(Step::Supersede),
        1 => any::<bool>().prop_map(|cold| Step::Claim { cold }),
        1 => Just(Step::Batch),
        1 => Just(Step::Finish),
        1 => Just(Step::Unclaim),
        1 => (3u32..5).prop_map(Step::ForgetFile),
        1 => Just(Step::NextEra),
    ]
}

proptest::proptest! {
    /// `lookup` (the sharded index) finds what a model of the rules says:
    /// a page's newest stored copy, until a newer version goes in place, a
    /// write-back that claimed that very copy finishes, or its file is
    /// dropped; and no two pages' copies share a slot.
    #[test]
    fn lookups_follow_a_model_of_stores_write_backs_and_drops(
        steps in proptest::collection::vec(any_step(), 1..80)
    ) {
        use std::collections::{BTreeMap, BTreeSet};
        let d = DeferredPages::new(16);
        // Page -> (newest copy, era stored in); the claim in progress.
        let mut model: BTreeMap<PageId, (DeferredCopy, u64)> = BTreeMap::new();
        let mut forgotten: BTreeSet<u32> = BTreeSet::new();
        let (mut era, mut lsn) = (0u64, 0u64);
        let mut claimed: Option<Claimed<'_>> = None;
        for step in steps {
            match step {
                Step::Store(id) => {
                    lsn += 1;
                    if let Some(copy) = store(&d, id, lsn) {
                        if !forgotten.contains(&id.file_id) {
                            model.insert(id, (copy, era));
                        }
                    }
                }
                Step::Supersede(id) => {
                    d.supersede([id].into_iter());
                    model.remove(&id);
                }
                Step::Claim { cold } if claimed.is_none() => {
                    let c = if cold { d.claim_cold() } else { d.claim_all() };
                    let want: Vec<(PageId, DeferredCopy)> = model
                        .iter()
                        .filter(|(_, (_, e))| !cold || *e < era)
                        .map(|(id, (c, _))| (*id, *c))
                        .collect();
                    proptest::prop_assert_eq!(&c.pages, &want);
                    claimed = Some(c);
                }
                Step::Batch => {
                    if let Some(c) = &claimed {
                        drop(d.start_batch(&c.pages));
                    }
                }
                Step::Finish => {
                    if let Some(c) = claimed.take() {
                        for (id, copy) in &c.pages {
                            if model.get(id).map(|m| m.0) == Some(*copy) {
                                model.remove(id);
                            }
                        }
                        d.finish(c);
                    }
                }
                Step::Unclaim => {
                    if let Some(c) = claimed.take() {
                        // Back as cold, unless stored again meanwhile.
                        for (id, copy) in &c.pages {
                            if let Some(m) = model.get_mut(id).filter(|m| m.0 == *copy) {
                                m.1 = 0;
                            }
                        }
                        d.unclaim(c);
                    }
                }
                Step::ForgetFile(f) if claimed.is_none() => {
                    d.forget_file(f);
                    forgotten.insert(f);
                    model.retain(|id, _| id.file_id != f);
                }
                Step::NextEra => {
                    d.next_era();
                    era += 1;
                }
                Step::Claim { .. } | Step::ForgetFile(_) => {}
            }
            let mut slots = BTreeSet::new();
            for f in 3..5 {
                for b in 0..6 {
                    let id = PageId::new(f, b);
                    let want = model.get(&id).map(|m| m.0);
                    proptest::prop_assert_eq!(d.lookup(id), want, "{}", id);
                    if let Some(c) = want {
                        proptest::prop_assert!(slots.insert(c.slot), "slot {} twice", c.slot);
                    }
                }
            }
        }
        if let Some(c) = claimed.take() {
            d.unclaim(c);
        };
    }
}
