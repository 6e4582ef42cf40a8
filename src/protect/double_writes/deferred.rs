//! `double_write_defer_in_place`: the area as a second home of evicted
//! pages until the next checkpoint (seed 000's suggestion).
//!
//! A page written through the area is durable once its batch is fsynced;
//! its in-place write can wait. With deferral on, a page the background
//! writer or a client evicts is not written in place: the area's copy is
//! the page's newest version, reads of the page are served from it, and it
//! goes in place at the next checkpoint (or earlier, when the ring needs
//! its slot again: "write-back"), unless a newer copy of the page made it
//! obsolete first. A page evicted again and again between two checkpoints
//! is then written once per eviction, to the area, and once in place,
//! instead of twice per eviction; and its in-place write is part of a
//! sorted batch.
//!
//! A batch of deferred pages only is not fsynced: until a write-back, the
//! data file holds an intact older version of each page, and the WAL,
//! flushed past every copy's LSN before the batch, brings it forward. A
//! write-back fsyncs the shard before its first in-place write, so a torn
//! in-place write finds its copy. An eviction then costs one buffered,
//! sequential write.
//!
//! Why recovery needs nothing new: every checkpoint writes back all
//! deferred pages before its data-file fsyncs, so below its redo point the
//! data files hold every page, as without deferral; at or above it, the
//! restore rule already restores each copy newer than its data page
//! (`restore.rs`). The checkpoint's own pages are not deferred.
//!
//! Invariants:
//! - A page is deferred only where its segment file exists, so a file
//!   that exists only in the area is never taken for a dropped one.
//! - `live` names, per page, the newest copy not yet written in place;
//!   only that copy is ever written back.
//! - Write-backs run one at a time (`order`): two versions of one page are
//!   never on their way in place at once, so the newest lands last.
//! - A page leaves `live` only after its in-place write returned, so a
//!   reader who no longer finds it there finds it in the data file.

use super::area::Shard;
use crate::buffer::PageId;
use crate::lsn::Lsn;
use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;

/// Where the newest copy of a deferred page lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    pub shard: Shard,
    /// The block in the shard's file.
    pub block: u32,
    /// The copy's page LSN.
    pub lsn: Lsn,
}

/// A page one ring entry deferred.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeferredCopy {
    pub id: PageId,
    pub at: Location,
}

/// The deferred pages of one opening.
#[derive(Default)]
pub struct DeferredPages {
    live: Mutex<HashMap<PageId, Location>>,
    /// By (shard, ring entry): the pages that entry deferred.
    by_entry: Mutex<HashMap<(Shard, u64), Vec<DeferredCopy>>>,
    order: Mutex<()>,
}

impl DeferredPages {
    /// Entry `entry` of `shard` holds these copies, durable now: each is
    /// its page's newest version.
    pub fn defer(&self, shard: Shard, entry: u64, copies: Vec<DeferredCopy>) {
        {
            let mut live = self.live.lock();
            for c in &copies {
                live.insert(c.id, c.at);
            }
        }
        self.by_entry.lock().insert((shard, entry), copies);
    }

    /// Pages `ids` are about to be written in place from newer versions (a
    /// checkpoint's, a new segment's): their deferred copies become
    /// obsolete. Waits out a write-back in progress, which may be writing
    /// an older version of one of them that must land first.
    pub fn supersede(&self, ids: impl Iterator<Item = PageId> + Clone) {
        {
            let live = self.live.lock();
            if live.is_empty() || !ids.clone().any(|id| live.contains_key(&id)) {
                return;
            }
        }
        let _order = self.order.lock();
        let mut live = self.live.lock();
        for id in ids {
            live.remove(&id);
        }
    }

    /// Where page `id`'s newest copy lies, if its in-place write waits.
    pub fn lookup(&self, id: PageId) -> Option<Location> {
        self.live.lock().get(&id).copied()
    }

    /// Pages deferred now.
    pub fn len(&self) -> usize {
        self.live.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts the write-back of `shard`'s entry `entry`: holds the order
    /// lock and returns the copies still newest (the others are
    /// obsolete), in area order.
    pub fn begin_write_back(&self, shard: Shard, entry: u64) -> (MutexGuard<'_, ()>, WriteBack) {
        let order = self.order.lock();
        let all = self
            .by_entry
            .lock()
            .remove(&(shard, entry))
            .unwrap_or_default();
        let live = self.live.lock();
        let (newest, obsolete): (Vec<_>, Vec<_>) =
            all.iter().partition(|c| live.get(&c.id) == Some(&c.at));
        drop(live);
        let write_back = WriteBack {
            shard,
            entry,
            newest: newest.into_iter().copied().collect(),
            obsolete: obsolete.len(),
            all,
        };
        (order, write_back)
    }

    /// The write-back's in-place writes returned: its pages leave `live`
    /// unless a newer copy replaced them meanwhile.
    pub fn finish_write_back(&self, done: &WriteBack) {
        let mut live = self.live.lock();
        for c in &done.newest {
            if live.get(&c.id) == Some(&c.at) {
                live.remove(&c.id);
            }
        }
    }

    /// The write-back failed: the entry holds its pages again.
    pub fn undo_write_back(&self, failed: WriteBack) {
        self.by_entry
            .lock()
            .insert((failed.shard, failed.entry), failed.all);
    }

    /// File `file_id` was dropped: its pages are never written back. Waits
    /// out a write-back in progress, which may be writing one of them.
    pub fn forget_file(&self, file_id: u32) {
        let _order = self.order.lock();
        self.live.lock().retain(|id, _| id.file_id != file_id);
    }
}

/// One entry's write-back in progress.
pub struct WriteBack {
    shard: Shard,
    entry: u64,
    /// The copies to write in place, in area order.
    pub newest: Vec<DeferredCopy>,
    /// Copies a newer copy of their page made obsolete: never written.
    pub obsolete: usize,
    all: Vec<DeferredCopy>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(block: u32, lsn: u64) -> Location {
        Location {
            shard: Shard::ClientEvictions,
            block,
            lsn: Lsn(lsn),
        }
    }
    fn page(b: u32) -> PageId {
        PageId {
            file_id: 3,
            block: b,
        }
    }

    #[test]
    fn only_the_newest_copy_of_a_page_is_written_back() {
        let d = DeferredPages::default();
        let shard = Shard::ClientEvictions;
        d.defer(
            shard,
            1,
            vec![
                DeferredCopy {
                    id: page(7),
                    at: at(2, 10),
                },
                DeferredCopy {
                    id: page(8),
                    at: at(3, 11),
                },
            ],
        );
        // Page 7 evicted again: its newer copy lies in entry 2.
        d.defer(
            shard,
            2,
            vec![DeferredCopy {
                id: page(7),
                at: at(5, 20),
            }],
        );
        assert_eq!(d.lookup(page(7)), Some(at(5, 20)));
        let (order, wb) = d.begin_write_back(shard, 1);
        assert_eq!(
            wb.newest,
            vec![DeferredCopy {
                id: page(8),
                at: at(3, 11)
            }]
        );
        assert_eq!(wb.obsolete, 1);
        d.finish_write_back(&wb);
        drop(order);
        assert_eq!(
            d.lookup(page(8)),
            None,
            "in place now: read from the data file"
        );
        assert_eq!(d.lookup(page(7)), Some(at(5, 20)));
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn a_copy_replaced_during_its_write_back_stays_live() {
        let d = DeferredPages::default();
        let shard = Shard::Checkpointer;
        d.defer(
            shard,
            1,
            vec![DeferredCopy {
                id: page(1),
                at: at(2, 10),
            }],
        );
        let (order, wb) = d.begin_write_back(shard, 1);
        // An eviction's batch lands while the old copy goes in place.
        d.defer(
            shard,
            2,
            vec![DeferredCopy {
                id: page(1),
                at: at(9, 30),
            }],
        );
        d.finish_write_back(&wb);
        drop(order);
        assert_eq!(d.lookup(page(1)), Some(at(9, 30)));
    }

    #[test]
    fn a_failed_write_back_can_be_tried_again() {
        let d = DeferredPages::default();
        let shard = Shard::BackgroundWriter;
        d.defer(
            shard,
            4,
            vec![DeferredCopy {
                id: page(1),
                at: at(2, 10),
            }],
        );
        let (order, wb) = d.begin_write_back(shard, 4);
        d.undo_write_back(wb);
        drop(order);
        let (_order, again) = d.begin_write_back(shard, 4);
        assert_eq!(again.newest.len(), 1);
    }

    #[test]
    fn pages_of_a_dropped_file_are_forgotten() {
        let d = DeferredPages::default();
        let shard = Shard::ClientEvictions;
        let other = PageId {
            file_id: 4,
            block: 1,
        };
        d.defer(
            shard,
            1,
            vec![
                DeferredCopy {
                    id: page(1),
                    at: at(2, 10),
                },
                DeferredCopy {
                    id: other,
                    at: at(3, 10),
                },
            ],
        );
        d.forget_file(3);
        assert_eq!(d.lookup(page(1)), None);
        let (_order, wb) = d.begin_write_back(shard, 1);
        assert_eq!(
            wb.newest,
            vec![DeferredCopy {
                id: other,
                at: at(3, 10)
            }]
        );
    }
}
