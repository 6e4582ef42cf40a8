//! Recovery's restore rule for double writes (issue 11 item 6), as a pure
//! function: which data pages to overwrite with which copy from the area,
//! before redo.
//!
//! Per page named by some slot, the usable copies are the valid ones of a
//! live file whose LSN lies in [redo point, end of the WAL]: older ones were
//! made durable in place by the checkpoint's fsync (and may be stale), newer
//! ones describe changes the WAL no longer holds. The newest usable copy
//! (highest LSN, then highest batch sequence) is restored when its LSN is at
//! least the data page's or the data page is bad. "At least", not "above":
//! a torn page usually carries the copy's own LSN in its first sector, and
//! the restore must not depend on a checksum catching the tear.
//!
//! A bad page whose in-range slots are all damaged cannot be repaired: an
//! error naming the data file and block, never a guess. Except a page that
//! is all zeros or short: its only copies come from a torn batch, so it was
//! never written in place; it is new, and redo rebuilds it from the image
//! its structure change logged (or stops naming it).

use super::area::{DamagedSlot, SlotCopy};
use crate::error::{Error, Result};
use crate::lsn::Lsn;
use std::collections::BTreeMap;

/// Why a data page failed its checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadPage {
    Checksum,
    Header,
    AllZeros,
    /// The file ends before the page.
    Short,
    /// The read failed (a sector a write was cut off in).
    Unreadable,
}

impl std::fmt::Display for BadPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BadPage::Checksum => "fails its checksum",
            BadPage::Header => "has a bad header",
            BadPage::AllZeros => "is all zeros",
            BadPage::Short => "lies past the end of its file",
            BadPage::Unreadable => "cannot be read",
        })
    }
}

/// A data page as read from its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageCheck {
    /// Passes every check; carries its LSN.
    Good(Lsn),
    Bad(BadPage),
}

/// Why a copy is written over its page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreReason {
    /// The page is good but its LSN is not above the copy's: its in-place
    /// write may be torn, or never landed.
    NotNewer {
        page_lsn: Lsn,
    },
    Bad(BadPage),
}

/// One page to overwrite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restore {
    pub copy: SlotCopy,
    pub reason: RestoreReason,
}

/// What the plan looked at, for the recovery report and the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RestoreCounts {
    /// Valid copies given.
    pub copies: u64,
    /// Copies of dropped files (void).
    pub void_dropped: u64,
    /// Copies below the redo point.
    pub before_redo: u64,
    /// Copies beyond the end of the WAL.
    pub beyond_wal_end: u64,
    /// Usable copies left aside for a newer one of the same page.
    pub superseded: u64,
    /// Pages checked against their newest usable copy.
    pub pages_checked: u64,
    /// Pages kept: good and newer than their copy.
    pub kept_newer_page: u64,
    /// Pages never written in place whose only copies are damaged: left to
    /// redo (all zeros or short, not torn).
    pub left_to_redo: u64,
    /// Pages to restore (`RecoveryReport.pages_repaired_from_double_writes`).
    pub restored: u64,
}

/// The plan: restores sorted by (file, block), so they go out in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestorePlan {
    pub restores: Vec<Restore>,
    pub counts: RestoreCounts,
}

/// What recovery knows when it plans.
pub struct RestoreInput<'a> {
    /// Valid copies from every shard.
    pub copies: Vec<SlotCopy>,
    /// Slots with an intact descriptor and an unusable image.
    pub damaged: &'a [DamagedSlot],
    /// The checkpoint's redo point.
    pub redo_lsn: Lsn,
    /// The end of the valid WAL.
    pub wal_end: Lsn,
}

/// Plans the restores. `is_dropped(file_id)` says whether a file was
/// dropped; `check_page(file_id, block)` reads and checks a data page (an
/// `Err` is an I/O failure other than an unreadable page, and stops).
pub fn plan_restore(
    input: RestoreInput<'_>,
    is_dropped: impl Fn(u32) -> bool,
    mut check_page: impl FnMut(u32, u32) -> Result<PageCheck>,
) -> Result<RestorePlan> {
    let RestoreInput {
        copies,
        damaged,
        redo_lsn,
        wal_end,
    } = input;
    let in_range = |lsn: Lsn| redo_lsn <= lsn && lsn <= wal_end;
    let mut counts = RestoreCounts {
        copies: copies.len() as u64,
        ..RestoreCounts::default()
    };
    // The newest usable copy of each page.
    let mut newest: BTreeMap<(u32, u32), SlotCopy> = BTreeMap::new();
    for c in copies {
        if is_dropped(c.file_id) {
            counts.void_dropped += 1;
        } else if c.lsn < redo_lsn {
            counts.before_redo += 1;
        } else if c.lsn > wal_end {
            counts.beyond_wal_end += 1;
        } else {
            match newest.entry((c.file_id, c.block)) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(c);
                }
                std::collections::btree_map::Entry::Occupied(mut o) => {
                    counts.superseded += 1;
                    if (c.lsn, c.batch_seq) > (o.get().lsn, o.get().batch_seq) {
                        o.insert(c);
                    }
                }
            }
        }
    }
    // Pages whose only in-range slots are damaged: their page must be good.
    let mut unrepairable: BTreeMap<(u32, u32), &DamagedSlot> = BTreeMap::new();
    for d in damaged {
        let key = (d.file_id, d.block);
        if in_range(d.lsn) && !is_dropped(d.file_id) && !newest.contains_key(&key) {
            unrepairable.entry(key).or_insert(d);
        }
    }
    for (&(file_id, block), d) in &unrepairable {
        match check_page(file_id, block)? {
            PageCheck::Good(_) => {}
            // Never written in place (a batch is torn only before any of its
            // in-place writes): a new page whose structure change logged its
            // image, which redo restores; or redo stops naming it.
            PageCheck::Bad(BadPage::AllZeros | BadPage::Short) => counts.left_to_redo += 1,
            PageCheck::Bad(why) => {
                return Err(Error::corruption(
                    format!("data file {file_id}"),
                    format!("block {block}"),
                    format!(
                        "the page {why}, and its copy in the double-write area (LSN {}, batch {}) \
                     is damaged too ({:?}): the page cannot be repaired",
                        d.lsn, d.batch_seq, d.damage
                    ),
                ))
            }
        }
    }
    let mut restores = Vec::new();
    for ((file_id, block), copy) in newest {
        counts.pages_checked += 1;
        let reason = match check_page(file_id, block)? {
            PageCheck::Good(page_lsn) if page_lsn > copy.lsn => {
                counts.kept_newer_page += 1;
                continue;
            }
            PageCheck::Good(page_lsn) => RestoreReason::NotNewer { page_lsn },
            PageCheck::Bad(why) => RestoreReason::Bad(why),
        };
        restores.push(Restore { copy, reason });
    }
    counts.restored = restores.len() as u64;
    Ok(RestorePlan { restores, counts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protect::double_writes::area::SlotDamage;
    use std::collections::HashMap;

    fn copy(file_id: u32, block: u32, lsn: u64, batch_seq: u64) -> SlotCopy {
        SlotCopy {
            file_id,
            block,
            lsn: Lsn(lsn),
            batch_seq,
            // Tells copies of one page apart.
            image: vec![batch_seq as u8; 8],
        }
    }

    /// Plans with redo point 100, WAL end 1000, file 9 dropped, and the
    /// data pages in `pages` (a page not listed is a test bug: it panics).
    fn plan(
        copies: Vec<SlotCopy>,
        damaged: &[DamagedSlot],
        pages: &[((u32, u32), PageCheck)],
    ) -> (Result<RestorePlan>, Vec<(u32, u32)>) {
        let pages: HashMap<_, _> = pages.iter().copied().collect();
        let mut checked = Vec::new();
        let r = plan_restore(
            RestoreInput {
                copies,
                damaged,
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
            assert_eq!(p.restores[0].copy.image, vec![8u8; 8]);
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
                redo_lsn: Lsn(100),
                wal_end: Lsn(1000),
            },
            |_| false,
            |_, _| Err(Error::Invalid("disk gone".into())),
        );
        assert!(r.unwrap_err().to_string().contains("disk gone"));
    }
}
