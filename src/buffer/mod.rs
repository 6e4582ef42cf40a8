//! The buffer pool: a fixed set of page frames shared by every thread.
//!
//! Rules:
//! - A pinned frame is never evicted (asserted where a frame changes page).
//! - The frame latch is the only lock held across a disk read, and only by
//!   the thread reading that frame; callers must not hold another page's
//!   latch when a pin may miss (use [`BufferPool::pin_cached`] while latched).
//! - Every data-page write goes through [`BufferPool::write_frames`]: it
//!   copies pages under the shared latch, flushes the WAL past every copy's
//!   commit LSN (the flush rule that makes redo-only recovery correct),
//!   stamps checksums on the copies, hands them to torn-page protection
//!   ([`PageWriteProtection`]) and writes them in file/block order.
//! - Every read from disk is verified (checksum, address, header, and the
//!   node validator): a failure is an error naming file and block, never
//!   data handed to a caller.
//! - Replacement is a clock sweep that prefers clean frames, within a bound
//!   (`DIRTY_VICTIMS_SKIPPED`). The background writer cleans frames ahead
//!   of the hand ([`BufferPool::clean_ahead`]) so that the sweep finds
//!   clean ones.

mod ahead;
mod frame;
mod guard;
mod lifecycle;
mod pool_io;

pub use crate::latch_count::latches_held;
pub use ahead::CleanScan;
pub use frame::{FrameData, PageId};
pub use guard::{PageRead, PageWrite};
pub use pool_io::{DataFiles, PageCopy};

use crate::error::{Error, Result};
use crate::file::Issuer;
use crate::lsn::Lsn;
use crate::settings::ChecksumAlgorithm;
use crate::striped::StripedCounter;
use arc_swap::ArcSwap;
use frame::Frame;
pub(crate) use frame::{PageMap, PageSet};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;

const SHARDS: usize = 64;

/// The protection in force, as [`BufferPool::page_write_protection`] hands
/// it out.
pub type ProtectionGuard = arc_swap::Guard<Arc<Arc<dyn PageWriteProtection>>>;

/// The WAL as the buffer pool sees it: what it must flush before a write.
pub trait WalFlush: Send + Sync {
    /// Makes the WAL durable up to `upto`.
    fn flush(&self, upto: Lsn, who: Issuer) -> Result<()>;
    /// How far the WAL is durable.
    fn flushed_lsn(&self) -> Lsn;
}

/// What [`PageWriteProtection::before_in_place_writes`] hands back, for
/// the matching [`PageWriteProtection::after_in_place_writes`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteTicket {
    /// The protection's own handle on the batch.
    pub entry: u64,
    /// By index in the batch: pages whose in-place write the protection
    /// deferred (it holds their durable copy, serves their reads and
    /// writes them in place later). Empty: none.
    pub deferred: Vec<bool>,
}

impl WriteTicket {
    /// Whether the pool writes page `i` of the batch in place now.
    pub fn in_place(&self, i: usize) -> bool {
        !self.deferred.get(i).copied().unwrap_or(false)
    }
}

/// Torn-page protection as the buffer pool sees it (implemented in
/// `crate::protect`): called with every batch of page copies, in
/// (file, block) order, before any of them is written in place. With
/// double writes it returns once the batch is durable in the double-write
/// area; modes that protect pages in the WAL do nothing here.
pub trait PageWriteProtection: Send + Sync {
    fn before_in_place_writes(&self, pages: &[PageCopy], who: Issuer) -> Result<WriteTicket>;

    /// Called once the in-place writes of that batch have returned, failed
    /// or not (a failed write may still have changed the OS cache).
    fn after_in_place_writes(&self, _ticket: WriteTicket, _pages: &[PageCopy]) {}

    /// Pages a client that must write a dirty victim writes at once (the
    /// victim and the next dirty ones the sweep would take): more than one
    /// where each batch costs an fsync, so that it is shared.
    /// Whether `read_deferred` may ever find a page (the pool skips the
    /// call on every miss otherwise).
    fn defers_in_place(&self) -> bool {
        false
    }

    fn eviction_batch(&self) -> usize {
        1
    }

    /// [`PageWriteProtection::eviction_batch`] as it stands for the dirty
    /// victim a client is about to write, where a mode's cost per batch
    /// changes as it runs.
    fn eviction_batch_now(&self) -> usize {
        self.eviction_batch()
    }

    /// The most pages a checkpoint should hand over in one batch, where the
    /// mode wants larger batches than the checkpoint's own (`None`: the
    /// checkpoint decides).
    fn checkpoint_batch(&self) -> Option<usize> {
        None
    }

    /// The most pages one call of `before_in_place_writes` may carry; the
    /// pool splits larger writes.
    fn max_batch(&self) -> usize {
        usize::MAX
    }

    /// Background work a thread may do ahead of the writers (double writes:
    /// fsync the data files of slots to be reused next, so a writer seldom
    /// waits for one). Returns the fsyncs done.
    fn sync_ahead(&self, _who: Issuer) -> Result<usize> {
        Ok(0)
    }

    /// Reads page `id` into `buf` if the protection holds its newest
    /// version (a deferred in-place write), checked as `verify_page` would
    /// (the pool does not check it again); false: read the data file.
    fn read_deferred(&self, _id: PageId, _buf: &mut [u8], _who: Issuer) -> Result<bool> {
        Ok(false)
    }

    /// Pages whose in-place write is deferred now.
    fn deferred_pages(&self) -> usize {
        0
    }

    /// Called as a checkpoint starts: whether it writes deferred pages in
    /// place ([`Self::write_back_paced`]); a shutdown checkpoint always
    /// does, and writes them all. Other checkpoints may have their own page
    /// writes deferred too, until [`Self::persist_deferred`] makes them
    /// durable, and then write back only the pages deferred before they
    /// began.
    fn begin_checkpoint(&self, _shutdown: bool) -> bool {
        false
    }

    /// A checkpoint's step after its data-file fsyncs, before its control
    /// file: makes the deferred pages durable where they are, so that the
    /// redo point `redo` may pass their changes.
    fn persist_deferred(&self, _redo: Lsn, _who: Issuer) -> Result<()> {
        Ok(())
    }

    /// The sequence of the newest durable manifest of deferred pages, for
    /// the control file (0: none, as in every mode but double writes).
    fn durable_manifest(&self) -> u64 {
        0
    }

    /// Called before the pool pass of a checkpoint that writes deferred
    /// pages back: writes back at once those it will not store again
    /// (none of `marked`, its dirty pages), so that their slots are free
    /// for its own pages; `redo` is its redo point. Returns the pages
    /// written, like [`Self::write_back_paced`].
    fn make_room(
        &self,
        _marked: &[PageId],
        _redo: Lsn,
        _who: Issuer,
        _progress: &mut dyn FnMut(usize),
    ) -> Result<usize> {
        Ok(0)
    }

    /// Writes the deferred pages [`Self::begin_checkpoint`] chose in place
    /// (all of them, unless the checkpoint defers its own), before the
    /// checkpoint's data-file fsyncs, calling `progress` with the pages written so far
    /// after each batch (where a spread checkpoint naps). Returns the pages
    /// written.
    fn write_back_paced(&self, _who: Issuer, _progress: &mut dyn FnMut(usize)) -> Result<usize> {
        Ok(0)
    }

    /// Writes every deferred page in place at full speed (a switch of
    /// mode, a test).
    fn write_back_all(&self, who: Issuer) -> Result<usize> {
        self.write_back_paced(who, &mut |_| {})
    }

    /// File `file_id` was dropped: its deferred pages are never written.
    fn forget_file(&self, _file_id: u32) {}
}

/// Checks a page's own structure after the header checks (for B+tree nodes).
pub type PageValidator = fn(&[u8]) -> std::result::Result<(), String>;

/// Buffer pool counters. Those bumped at every page access or miss are
/// striped: all clients bump them.
#[derive(Default)]
pub struct BufferStats {
    pub hits: StripedCounter,
    pub reads: StripedCounter,
    /// Frames handed out for a new page, from the free list or the clock
    /// sweep (PostgreSQL's buffers_alloc): the background writer's measure
    /// of demand.
    pub claims: StripedCounter,
    pub evictions: StripedCounter,
    /// Dirty victims the claiming thread had to write itself.
    pub dirty_evictions: AtomicU64,
    pub pages_written: AtomicU64,
    pub write_batches: AtomicU64,
    /// Pages read whose stored checksum differed from the computed one.
    pub checksum_failures: AtomicU64,
}

/// The buffer pool.
pub struct BufferPool {
    frames: Box<[Frame]>,
    shards: Vec<Mutex<PageMap<usize>>>,
    free: Mutex<Vec<usize>>,
    clock_hand: AtomicUsize,
    page_size: usize,
    checksums: ChecksumAlgorithm,
    files: Arc<DataFiles>,
    wal: Arc<dyn WalFlush>,
    /// Swapped only at an opening's protection switch, before any client.
    /// Read on every miss and page write: an `ArcSwap` load bumps no
    /// shared count (an `RwLock` read and an `Arc` clone wrote two lines
    /// every core shares).
    protection: ArcSwap<Arc<dyn PageWriteProtection>>,
    /// `protection`'s eviction_batch, read on every claim without its lock.
    eviction_batch: AtomicUsize,
    /// `protection`'s defers_in_place, read on every miss without its lock.
    defers_in_place: AtomicBool,
    validator: Option<PageValidator>,
    /// During recovery an all-zero or missing page is handed out (redo
    /// restores it from a full image); otherwise it is corruption.
    recovery: AtomicBool,
    /// Set when a commit failed half-way: pages in memory may hold changes
    /// without their WAL record, so none may be written again.
    poisoned: AtomicBool,
    /// Pages found damaged (failed checks) while recovering.
    damaged: Mutex<Vec<PageId>>,
    /// Files dropped: their pages are never written again (a frame pinned
    /// while its file was discarded is dropped at its next write).
    dropped_files: Mutex<std::collections::HashSet<u32>>,
    pub stats: BufferStats,
}

/// A pinned page: it stays in its frame until this is dropped.
pub struct Pinned<'a> {
    pool: &'a BufferPool,
    idx: usize,
    id: PageId,
}

/// Held while pages are changed ahead of their WAL record: if the thread
/// unwinds (a panic) before the record is in, the pool is poisoned, so the
/// half-made changes never reach disk.
pub struct CriticalSection<'a> {
    pool: &'a BufferPool,
}

impl<'a> CriticalSection<'a> {
    pub fn new(pool: &'a BufferPool) -> CriticalSection<'a> {
        CriticalSection { pool }
    }
}

impl Drop for CriticalSection<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.pool.poison();
        }
    }
}

/// A frame claimed for a new page (see [`BufferPool::claim_frame`]).
pub struct ClaimedFrame<'a> {
    pool: &'a BufferPool,
    idx: Option<usize>,
}

impl BufferPool {
    /// A pool of `nframes` frames of `page_size` bytes.
    pub fn new(
        nframes: usize,
        page_size: usize,
        checksums: ChecksumAlgorithm,
        files: Arc<DataFiles>,
        wal: Arc<dyn WalFlush>,
        protection: Arc<dyn PageWriteProtection>,
        validator: Option<PageValidator>,
    ) -> Result<BufferPool> {
        if nframes < 16 {
            return Err(Error::InvalidSetting {
                name: "buffer_pool_size",
                detail: format!(
                    "{nframes} frames of {page_size} bytes; at least 16 frames are needed"
                ),
            });
        }
        Ok(BufferPool {
            frames: (0..nframes).map(|_| Frame::new(page_size)).collect(),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(PageMap::default()))
                .collect(),
            free: Mutex::new((0..nframes).rev().collect()),
            clock_hand: AtomicUsize::new(0),
            page_size,
            checksums,
            files,
            wal,
            eviction_batch: AtomicUsize::new(protection.eviction_batch()),
            defers_in_place: AtomicBool::new(protection.defers_in_place()),
            protection: ArcSwap::from_pointee(protection),
            validator,
            recovery: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            damaged: Mutex::new(Vec::new()),
            dropped_files: Mutex::new(Default::default()),
            stats: BufferStats::default(),
        })
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }
    /// Frames that hold no page yet (the free list).
    pub fn free_frames(&self) -> usize {
        self.free.lock().len()
    }
    pub fn nframes(&self) -> usize {
        self.frames.len()
    }
    pub fn files(&self) -> &Arc<DataFiles> {
        &self.files
    }
    /// The torn-page protection pages are written under now (the guard
    /// keeps it alive; it is meant to be held briefly).
    pub fn page_write_protection(&self) -> ProtectionGuard {
        self.protection.load()
    }

    /// Writes every later page under `protection` (a switch of mode at an
    /// opening, with no page write in flight).
    pub fn set_page_write_protection(&self, protection: Arc<dyn PageWriteProtection>) {
        self.eviction_batch
            .store(protection.eviction_batch(), SeqCst);
        self.defers_in_place
            .store(protection.defers_in_place(), SeqCst);
        self.protection.store(Arc::new(protection));
    }

    pub fn set_recovery(&self, on: bool) {
        self.recovery.store(on, SeqCst);
    }

    /// Stops every further page write (see `poisoned`).
    pub fn poison(&self) {
        self.poisoned.store(true, SeqCst);
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(SeqCst)
    }

    /// Pages that failed their checks while recovering (handed out as
    /// all-zero so that a full image in the WAL can restore them).
    pub fn damaged_pages(&self) -> Vec<PageId> {
        self.damaged.lock().clone()
    }

    fn shard(&self, id: PageId) -> &Mutex<PageMap<usize>> {
        &self.shards[id.shard_of(SHARDS)]
    }
}

#[cfg(test)]
mod tests;
