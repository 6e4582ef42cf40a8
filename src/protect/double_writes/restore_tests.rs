//! The restore rule's cases, as a pure function.

use super::*;
use crate::protect::double_writes::area::{CopyImage, SlotDamage};
use std::collections::HashMap;

fn copy(file_id: u32, block: u32, lsn: u64, batch_seq: u64) -> SlotCopy {
    SlotCopy {
        file_id,
        block,
        lsn: Lsn(lsn),
        batch_seq,
        // Tells copies of one page apart.
        image: CopyImage::Held(vec![batch_seq as u8; 8]),
    }
}

/// Plans with redo point 100, WAL end 1000, file 9 dropped, and the
/// data pages in `pages` (a page not listed is a test bug: it panics).
fn plan(
    copies: Vec<SlotCopy>,
    damaged: &[DamagedSlot],
    pages: &[((u32, u32), PageCheck)],
) -> (Result<RestorePlan>, Vec<(u32, u32)>) {
    plan_with_durable(copies, damaged, Vec::new(), &[], pages)
}

/// [`plan`] with copies the manifest of `dw/deferred` names.
fn plan_with_durable(
    copies: Vec<SlotCopy>,
    damaged: &[DamagedSlot],
    durable: Vec<SlotCopy>,
    durable_damaged: &[DamagedDurable],
    pages: &[((u32, u32), PageCheck)],
) -> (Result<RestorePlan>, Vec<(u32, u32)>) {
    let pages: HashMap<_, _> = pages.iter().copied().collect();
    let mut checked = Vec::new();
    let r = plan_restore(
        RestoreInput {
            copies,
            damaged,
            durable,
            durable_damaged,
            redo_lsn: Lsn(100),
            wal_end: Lsn(1000),
        },
        |f| f == 9,
        |f, b| {
            checked.push((f, b));
            Ok(pages[&(f, b)])
        },
    );
    (r, checked)
}

fn restored(p: &RestorePlan) -> Vec<(u32, u32, u64, u64, RestoreReason)> {
    p.restores
        .iter()
        .map(|r| {
            (
                r.copy.file_id,
                r.copy.block,
                r.copy.lsn.0,
                r.copy.batch_seq,
                r.reason,
            )
        })
        .collect()
}

#[test]
fn a_torn_page_carrying_the_copys_lsn_is_restored() {
    // The tear kept the new first sector (the copy's LSN) but the
    // checksum fails; and if the checksum missed the tear, the equal LSN
    // alone restores it.
    for page in [PageCheck::Bad(BadPage::Checksum), PageCheck::Good(Lsn(500))] {
        let (p, _) = plan(vec![copy(1, 7, 500, 3)], &[], &[((1, 7), page)]);
        let p = p.unwrap();
        let reason = match page {
            PageCheck::Good(l) => RestoreReason::NotNewer { page_lsn: l },
            PageCheck::Bad(b) => RestoreReason::Bad(b),
        };
        assert_eq!(restored(&p), vec![(1, 7, 500, 3, reason)]);
        assert_eq!(p.counts.restored, 1);
    }
}

#[test]
fn a_good_page_newer_than_its_copy_is_kept() {
    let (p, _) = plan(
        vec![copy(1, 7, 400, 3)],
        &[],
        &[((1, 7), PageCheck::Good(Lsn(450)))],
    );
    let p = p.unwrap();
    assert!(p.restores.is_empty());
    assert_eq!((p.counts.kept_newer_page, p.counts.restored), (1, 0));
}

#[test]
fn a_copy_newer_than_a_good_page_is_restored() {
    // The in-place write never landed; the page still holds its old version.
    let (p, _) = plan(
        vec![copy(1, 7, 400, 3)],
        &[],
        &[((1, 7), PageCheck::Good(Lsn(300)))],
    );
    let reason = RestoreReason::NotNewer { page_lsn: Lsn(300) };
    assert_eq!(restored(&p.unwrap()), vec![(1, 7, 400, 3, reason)]);
}

#[test]
fn every_kind_of_bad_page_is_restored_from_its_copy() {
    for bad in [
        BadPage::Checksum,
        BadPage::Header,
        BadPage::AllZeros,
        BadPage::Short,
        BadPage::Unreadable,
    ] {
        let (p, _) = plan(
            vec![copy(1, 7, 400, 3)],
            &[],
            &[((1, 7), PageCheck::Bad(bad))],
        );
        assert_eq!(
            restored(&p.unwrap()),
            vec![(1, 7, 400, 3, RestoreReason::Bad(bad))]
        );
    }
}

#[test]
fn both_bad_is_an_error_naming_the_page() {
    let damaged = [DamagedSlot {
        file_id: 4,
        block: 21,
        lsn: Lsn(600),
        batch_seq: 8,
        damage: SlotDamage::ImageCrc,
    }];
    let (p, _) = plan(
        vec![],
        &damaged,
        &[((4, 21), PageCheck::Bad(BadPage::Checksum))],
    );
    let e = p.unwrap_err().to_string();
    assert!(
        e.contains("data file 4") && e.contains("block 21") && e.contains("checksum"),
        "{e}"
    );
    for why in [BadPage::Header, BadPage::Unreadable] {
        let (p, _) = plan(vec![], &damaged, &[((4, 21), PageCheck::Bad(why))]);
        let e = p.unwrap_err().to_string();
        assert!(e.contains("data file 4") && e.contains("block 21"), "{e}");
    }
    // The same damaged slot beside a good page is no error and no restore.
    let (p, _) = plan(vec![], &damaged, &[((4, 21), PageCheck::Good(Lsn(550)))]);
    assert_eq!(p.unwrap().restores, vec![]);
    // Nor beside a page never written in place: left to redo.
    for why in [BadPage::AllZeros, BadPage::Short] {
        let (p, _) = plan(vec![], &damaged, &[((4, 21), PageCheck::Bad(why))]);
        let p = p.unwrap();
        assert_eq!((p.restores.len(), p.counts.left_to_redo), (0, 1));
    }
}

#[test]
fn a_damaged_slot_beside_a_usable_copy_does_not_stop_recovery() {
    // A torn later batch of the page: never relied on; the older copy serves.
    let damaged = [DamagedSlot {
        file_id: 4,
        block: 21,
        lsn: Lsn(700),
        batch_seq: 9,
        damage: SlotDamage::ImageCrc,
    }];
    let (p, _) = plan(
        vec![copy(4, 21, 600, 8)],
        &damaged,
        &[((4, 21), PageCheck::Bad(BadPage::Checksum))],
    );
    assert_eq!(restored(&p.unwrap()).len(), 1);
}

#[test]
fn copies_of_a_dropped_file_are_void() {
    let damaged = [DamagedSlot {
        file_id: 9,
        block: 2,
        lsn: Lsn(600),
        batch_seq: 8,
        damage: SlotDamage::ImageCrc,
    }];
    let (p, checked) = plan(vec![copy(9, 1, 500, 3)], &damaged, &[]);
    let p = p.unwrap();
    assert!(p.restores.is_empty());
    assert_eq!(p.counts.void_dropped, 1);
    assert!(
        checked.is_empty(),
        "a dropped file's page was read: {checked:?}"
    );
}

#[test]
fn copies_outside_the_redo_point_and_the_wal_end_are_ignored() {
    let damaged = [DamagedSlot {
        file_id: 1,
        block: 3,
        lsn: Lsn(99),
        batch_seq: 1,
        damage: SlotDamage::ImageCrc,
    }];
    let (p, checked) = plan(vec![copy(1, 1, 99, 1), copy(1, 2, 1001, 2)], &damaged, &[]);
    let p = p.unwrap();
    assert!(p.restores.is_empty());
    assert_eq!((p.counts.before_redo, p.counts.beyond_wal_end), (1, 1));
    assert!(checked.is_empty(), "{checked:?}");
    // The bounds themselves are inside.
    let (p, _) = plan(
        vec![copy(1, 1, 100, 1), copy(1, 2, 1000, 2)],
        &[],
        &[
            ((1, 1), PageCheck::Bad(BadPage::AllZeros)),
            ((1, 2), PageCheck::Bad(BadPage::AllZeros)),
        ],
    );
    assert_eq!(p.unwrap().counts.restored, 2);
}

#[test]
fn an_old_copy_does_not_undo_a_newer_one_below_the_redo_point() {
    // The copy below the redo point is ignored even though its batch
    // sequence is higher: only the in-range one is compared.
    let (p, _) = plan(
        vec![copy(1, 1, 50, 9), copy(1, 1, 150, 2)],
        &[],
        &[((1, 1), PageCheck::Bad(BadPage::Checksum))],
    );
    assert_eq!(
        restored(&p.unwrap()),
        vec![(1, 1, 150, 2, RestoreReason::Bad(BadPage::Checksum))]
    );
}

#[test]
fn of_two_copies_the_newest_lsn_wins_then_the_higher_batch() {
    let bad = PageCheck::Bad(BadPage::Checksum);
    // Newest LSN wins even from an older batch (another shard's).
    let (p, _) = plan(
        vec![copy(1, 1, 300, 7), copy(1, 1, 200, 8)],
        &[],
        &[((1, 1), bad)],
    );
    let p = p.unwrap();
    assert_eq!(
        (p.restores[0].copy.lsn, p.restores[0].copy.batch_seq),
        (Lsn(300), 7)
    );
    assert_eq!(p.counts.superseded, 1);
    // Equal LSN: the higher batch sequence, in either order.
    for copies in [
        vec![copy(1, 1, 300, 7), copy(1, 1, 300, 8)],
        vec![copy(1, 1, 300, 8), copy(1, 1, 300, 7)],
    ] {
        let (p, _) = plan(copies, &[], &[((1, 1), bad)]);
        let p = p.unwrap();
        assert_eq!(p.restores[0].copy.batch_seq, 8);
        assert_eq!(p.restores[0].copy.image, CopyImage::Held(vec![8u8; 8]));
    }
}

#[test]
fn restores_come_sorted_by_file_and_block_and_each_page_is_read_once() {
    let bad = PageCheck::Bad(BadPage::Checksum);
    let (p, checked) = plan(
        vec![
            copy(2, 5, 300, 1),
            copy(1, 9, 300, 1),
            copy(2, 1, 300, 1),
            copy(2, 5, 310, 2),
        ],
        &[],
        &[((2, 5), bad), ((1, 9), bad), ((2, 1), bad)],
    );
    let order: Vec<_> = restored(&p.unwrap()).iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(order, vec![(1, 9), (2, 1), (2, 5)]);
    assert_eq!(checked, vec![(1, 9), (2, 1), (2, 5)]);
}

#[test]
fn a_read_error_stops_the_plan() {
    let r = plan_restore(
        RestoreInput {
            copies: vec![copy(1, 1, 300, 1)],
            damaged: &[],
            durable: Vec::new(),
            durable_damaged: &[],
            redo_lsn: Lsn(100),
            wal_end: Lsn(1000),
        },
        |_| false,
        |_, _| Err(Error::Invalid("disk gone".into())),
    );
    assert!(r.unwrap_err().to_string().contains("disk gone"));
}

fn durable_damaged(block: u32, lsn: u64) -> DamagedDurable {
    DamagedDurable {
        slot: 17,
        file_id: 1,
        block,
        lsn: Lsn(lsn),
        damage: SlotDamage::ImageCrc,
    }
}

#[test]
fn a_durable_deferred_copy_is_restored_below_the_redo_point() {
    // Redo point 100: the copy at 40 is the page's version there; the data
    // file holds an older one, or a torn one.
    let (p, _) = plan_with_durable(
        vec![copy(1, 2, 40, 3)],
        &[],
        vec![copy(1, 1, 40, 0), copy(1, 2, 30, 0), copy(9, 1, 40, 0)],
        &[],
        &[
            ((1, 1), PageCheck::Good(Lsn(20))),
            ((1, 2), PageCheck::Bad(BadPage::Checksum)),
        ],
    );
    let p = p.unwrap();
    assert_eq!(
        restored(&p),
        vec![
            (1, 1, 40, 0, RestoreReason::NotNewer { page_lsn: Lsn(20) }),
            (1, 2, 30, 0, RestoreReason::Bad(BadPage::Checksum)),
        ],
        "an area copy below the redo point stays ignored; a dropped file's is void"
    );
    assert_eq!(
        (
            p.counts.durable,
            p.counts.before_redo,
            p.counts.void_dropped
        ),
        (3, 1, 1)
    );
}

#[test]
fn a_damaged_durable_copy_is_an_error_unless_the_page_holds_its_version() {
    let older = PageCheck::Good(Lsn(30));
    for page in [
        older,
        PageCheck::Bad(BadPage::AllZeros),
        PageCheck::Bad(BadPage::Short),
    ] {
        let (r, _) = plan_with_durable(
            vec![],
            &[],
            vec![],
            &[durable_damaged(5, 40)],
            &[((1, 5), page)],
        );
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("data file 1") && e.contains("block 5") && e.contains("slot 17"),
            "{e}"
        );
    }
    // The page holds that version or a later one: nothing is lost.
    for lsn in [40, 90] {
        let (r, _) = plan_with_durable(
            vec![],
            &[],
            vec![],
            &[durable_damaged(5, 40)],
            &[((1, 5), PageCheck::Good(Lsn(lsn)))],
        );
        assert!(r.unwrap().restores.is_empty());
    }
    // A newer copy stands in for it, and is restored.
    let (r, checked) = plan_with_durable(
        vec![copy(1, 5, 120, 4)],
        &[],
        vec![],
        &[durable_damaged(5, 40)],
        &[((1, 5), older)],
    );
    assert_eq!(restored(&r.unwrap()).len(), 1);
    assert_eq!(checked, vec![(1, 5)]);
}
