//! One buffer frame: a page-sized buffer, its latch, pin count and the
//! state the write path needs.
//!
//! Rules:
//! - `data` is read under the shared latch and changed under the exclusive
//!   latch; the latch is held only while the frame is pinned.
//! - Dirty means `dirty_gen != clean_gen`. Every change bumps `dirty_gen`
//!   (before its WAL record is inserted, so a checkpoint starting in between
//!   cannot miss the page); a completed data-file write of a copy taken at
//!   generation g raises `clean_gen` to g. A page is therefore clean only
//!   when its data-file write has completed, and a change made while the
//!   write was in flight keeps it dirty.
//! - `commit_lsn` is the end of the commit record of the last transaction
//!   (or structure change) that changed the page: the page may be written
//!   only after the WAL is flushed past it (the flush rule).

use crate::lsn::Lsn;
use parking_lot::{Mutex, RwLock};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::*};

/// A page's address: data file id and block number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageId {
    pub file_id: u32,
    pub block: u32,
}

impl PageId {
    pub fn new(file_id: u32, block: u32) -> PageId {
        PageId { file_id, block }
    }
    pub(crate) fn encode(self) -> u64 {
        (self.file_id as u64) << 32 | self.block as u64
    }
    /// Which of `n` shards the page falls in: the pool's mapping and the
    /// deferred pages' index are split by it.
    pub(crate) fn shard_of(self, n: usize) -> usize {
        let h = (self.file_id as usize).wrapping_mul(0x9E37_79B9) ^ self.block as usize;
        h % n
    }
    pub(crate) fn decode(v: u64) -> PageId {
        PageId {
            file_id: (v >> 32) as u32,
            block: v as u32,
        }
    }
}

/// The page table's hasher. A page id is no secret and no one picks it to
/// collide, so SipHash (the default, built against such attacks) is wasted
/// on it: one multiply per field does, with the high bits folded down
/// because the table indexes buckets by the low ones.
#[derive(Default)]
pub(crate) struct PageIdHasher(u64);

impl std::hash::Hasher for PageIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(u32::from(b));
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0.rotate_left(32) ^ u64::from(n)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// A map keyed by page id.
pub(crate) type PageMap<V> =
    std::collections::HashMap<PageId, V, std::hash::BuildHasherDefault<PageIdHasher>>;

/// A set of page ids, hashed as [`PageMap`].
pub(crate) type PageSet =
    std::collections::HashSet<PageId, std::hash::BuildHasherDefault<PageIdHasher>>;

impl std::fmt::Display for PageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "file {} block {}", self.file_id, self.block)
    }
}

/// "No page" in `Frame::page_id`.
pub(crate) const NO_PAGE: u64 = u64::MAX;

/// The bytes of a frame, behind its latch.
pub struct FrameData {
    pub(crate) bytes: Box<[u8]>,
}

/// `Frame::state`: no page, being read from disk, or holding a valid page.
pub(crate) const EMPTY: u8 = 0;
pub(crate) const LOADING: u8 = 1;
pub(crate) const VALID: u8 = 2;
pub(crate) const FREE: u8 = 3;

impl FrameData {
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

pub(crate) struct Frame {
    pub(crate) latch: RwLock<FrameData>,
    /// The page held, encoded; changed only by the thread that claimed the
    /// frame, under the page table shard's mutex.
    pub(crate) page_id: AtomicU64,
    pub(crate) pins: AtomicU32,
    /// EMPTY, LOADING or VALID; LOADING while the loader holds the
    /// exclusive latch, so a thread holding other latches can see that a
    /// pin would wait for a disk read and back off instead.
    pub(crate) state: AtomicU8,
    /// Clock-sweep usage count (0..=MAX_USAGE).
    pub(crate) usage: AtomicU8,
    pub(crate) dirty_gen: AtomicU64,
    pub(crate) clean_gen: AtomicU64,
    pub(crate) commit_lsn: AtomicU64,
    /// Set by a checkpoint for the pages dirty when it started (PostgreSQL's
    /// BM_CHECKPOINT_NEEDED) to the dirty generation it must see written;
    /// cleared by a completed write of a copy at least that new. 0: none.
    pub(crate) checkpoint_needed: AtomicU64,
    /// Held by the one writer of this frame from its copy until the
    /// data-file write completed and `clean_gen` rose (PostgreSQL's
    /// BM_IO_IN_PROGRESS): without it an older copy could land after a newer
    /// one and the frame still count as clean.
    pub(crate) io: Mutex<()>,
}

pub(crate) const MAX_USAGE: u8 = 5;

impl Frame {
    pub(crate) fn new(page_size: usize) -> Frame {
        Frame {
            latch: RwLock::new(FrameData {
                bytes: vec![0u8; page_size].into_boxed_slice(),
            }),
            state: AtomicU8::new(FREE),
            page_id: AtomicU64::new(NO_PAGE),
            pins: AtomicU32::new(0),
            usage: AtomicU8::new(0),
            dirty_gen: AtomicU64::new(0),
            clean_gen: AtomicU64::new(0),
            commit_lsn: AtomicU64::new(0),
            checkpoint_needed: AtomicU64::new(0),
            io: Mutex::new(()),
        }
    }

    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty_gen.load(Acquire) != self.clean_gen.load(Acquire)
    }

    pub(crate) fn page(&self) -> Option<PageId> {
        match self.page_id.load(Acquire) {
            NO_PAGE => None,
            v => Some(PageId::decode(v)),
        }
    }

    pub(crate) fn commit_lsn(&self) -> Lsn {
        Lsn(self.commit_lsn.load(Acquire))
    }

    pub(crate) fn touch(&self) {
        let u = self.usage.load(Relaxed);
        if u < MAX_USAGE {
            self.usage.store(u + 1, Relaxed);
        }
    }

    /// One pass of the clock hand: true if the frame was recently used
    /// (its count is then one lower), false if it may be evicted.
    /// One compare-and-swap: two sweeps that both read 1 and both
    /// subtracted would wrap it to 255 (`touch` may lose a count to a race,
    /// but never leaves 0..=MAX_USAGE).
    pub(crate) fn cool(&self) -> bool {
        self.usage
            .fetch_update(Relaxed, Relaxed, |u| u.checked_sub(1))
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sweeps passing a frame at usage 1 at the same moment must not
    /// take it below 0: a wrap to 255 keeps it from eviction for 255 passes.
    #[test]
    fn concurrent_sweeps_never_wrap_the_usage_count() {
        use std::sync::atomic::AtomicU32;
        const ROUNDS: u32 = 20_000;
        let f = Frame::new(64);
        // Round r starts when `start` is r and ends when both sweeps have
        // counted themselves in `done`; spinning starts them together.
        let start = AtomicU32::new(0);
        let done = AtomicU32::new(0);
        let mut wrapped = 0;
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for r in 1..=ROUNDS {
                        wait_until(|| start.load(Acquire) >= r);
                        f.cool();
                        done.fetch_add(1, AcqRel);
                    }
                });
            }
            for r in 1..=ROUNDS {
                f.usage.store(1, Relaxed);
                done.store(0, Relaxed);
                start.store(r, Release);
                wait_until(|| done.load(Acquire) >= 2);
                if f.usage.load(Relaxed) > MAX_USAGE {
                    wrapped += 1;
                }
            }
        });
        assert_eq!(wrapped, 0, "the usage count wrapped in {wrapped} rounds");
    }

    /// Spins briefly (to start both sweeps together), then yields, so the
    /// test does not starve a busy machine.
    fn wait_until(ready: impl Fn() -> bool) {
        let mut spins = 0u32;
        while !ready() {
            spins += 1;
            if spins < 1000 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
