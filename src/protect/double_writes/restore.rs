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

use super::area::{DamagedSlot, SlotCopy, SlotDamage};
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
    /// Copies the manifest of `dw/deferred` names (trusted at any LSN).
    pub durable: u64,
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
    /// Of those, from copies below the redo point (the manifest's).
    pub restored_below_redo: u64,
    /// Of those, pages whose bytes were damaged (checksum, header, an
    /// unreadable sector: torn or corrupted); the rest were missing (all
    /// zeros, past the file's end) or good but no newer than their copy:
    /// an in-place write the crash lost, or the same version.
    pub restored_damaged: u64,
}

/// The plan: restores sorted by (file, block), so they go out in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestorePlan {
    pub restores: Vec<Restore>,
    pub counts: RestoreCounts,
}

/// A slot of `dw/deferred` the manifest names whose image is unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DamagedDurable {
    pub slot: u32,
    pub file_id: u32,
    pub block: u32,
    pub lsn: Lsn,
    pub damage: SlotDamage,
}

/// What recovery knows when it plans.
pub struct RestoreInput<'a> {
    /// Valid copies from every shard.
    pub copies: Vec<SlotCopy>,
    /// Slots with an intact descriptor and an unusable image.
    pub damaged: &'a [DamagedSlot],
    /// Valid copies the manifest of `dw/deferred` names: usable at any LSN
    /// (a checkpoint's redo point passed them while their data files kept
    /// older versions).
    pub durable: Vec<SlotCopy>,
    /// Slots the manifest names whose image is unusable: their pages must
    /// be good and at least as new, or they are lost.
    pub durable_damaged: &'a [DamagedDurable],
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
        durable,
        durable_damaged,
        redo_lsn,
        wal_end,
    } = input;
    let in_range = |lsn: Lsn| redo_lsn <= lsn && lsn <= wal_end;
    let mut counts = RestoreCounts {
        copies: (copies.len() + durable.len()) as u64,
        durable: durable.len() as u64,
        ..RestoreCounts::default()
    };
    // The newest usable copy of each page.
    let mut newest: BTreeMap<(u32, u32), SlotCopy> = BTreeMap::new();
    let tagged = durable
        .into_iter()
        .map(|c| (c, true))
        .chain(copies.into_iter().map(|c| (c, false)));
    for (c, durable) in tagged {
        if is_dropped(c.file_id) {
            counts.void_dropped += 1;
        } else if c.lsn < redo_lsn && !durable {
            counts.before_redo += 1;
        } else if c.lsn > wal_end && !durable {
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
    // Pages whose durable deferred copy is damaged: unless a newer copy
    // stands in, the data page must hold that version or a later one.
    for d in durable_damaged {
        let newer_copy = newest
            .get(&(d.file_id, d.block))
            .is_some_and(|c| c.lsn >= d.lsn);
        if is_dropped(d.file_id) || newer_copy {
            continue;
        }
        let why = match check_page(d.file_id, d.block)? {
            PageCheck::Good(page_lsn) if page_lsn >= d.lsn => continue,
            PageCheck::Good(page_lsn) => format!("holds an older version (LSN {page_lsn})"),
            PageCheck::Bad(why) => why.to_string(),
        };
        return Err(Error::corruption(
            format!("data file {}", d.file_id),
            format!("block {}", d.block),
            format!(
                "the page {why}, and its durable copy in dw/deferred (slot {}, LSN {}) is \
                 damaged ({:?}): the page's version at the redo point is lost",
                d.slot, d.lsn, d.damage
            ),
        ));
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
    counts.restored_below_redo = restores.iter().filter(|r| r.copy.lsn < redo_lsn).count() as u64;
    counts.restored_damaged = restores
        .iter()
        .filter(|r| {
            matches!(
                r.reason,
                RestoreReason::Bad(BadPage::Checksum | BadPage::Header | BadPage::Unreadable)
            )
        })
        .count() as u64;
    Ok(RestorePlan { restores, counts })
}

#[cfg(test)]
#[path = "restore_tests.rs"]
mod tests;
