//! A frame's life: free, claimed, loading, holding a page, evicted.
//!
//! States (`Frame::state`): FREE (on the free list, owned by nobody),
//! EMPTY (unmapped, owned by whoever pinned it), LOADING (mapped; the
//! loader holds the exclusive latch), VALID (mapped, holding the page).
//! Only the owner moves a frame out of EMPTY; a compare-and-swap to FREE
//! decides who returns an abandoned frame, so it is listed once.

use super::frame::{EMPTY, FREE, LOADING, MAX_USAGE, NO_PAGE, VALID};
use super::{BufferPool, ClaimedFrame, PageId, Pinned};
use crate::error::{Error, Result};
use crate::file::segmented::PageRead;
use crate::file::Issuer;
use crate::page::{page_lsn, verify_page, PageError, PageState};
use std::sync::atomic::Ordering::*;

/// How many dirty eviction candidates (unpinned, usage 0) one clock sweep
/// passes over in search of a clean one before it writes a dirty one. The
/// bound matters when nearly every frame is dirty (a write-heavy load on a
/// small pool): an unbounded preference would walk the pool on every miss
/// (it cost a third of the engine's CPU under oltp_write_only).
const DIRTY_VICTIMS_SKIPPED: usize = 8;

/// Sweeps after the first before a claim calls the pool exhausted, with
/// pauses from 50 µs doubling to 10 ms between them: about 50 ms in all.
const CLAIM_RETRIES: u32 = 12;

impl BufferPool {
    /// Pins the frame mapped to `id`, whatever its state; the page table's
    /// shard mutex makes the lookup and the pin one step, so the frame
    /// cannot be evicted in between.
    pub(super) fn pin_mapped(&self, id: PageId) -> Option<Pinned<'_>> {
        let map = self.shard(id).lock();
        let idx = *map.get(&id)?;
        self.frames[idx].pins.fetch_add(1, AcqRel);
        Some(Pinned {
            pool: self,
            idx,
            id,
        })
    }

    /// Pins `id` if it is in the pool; never does I/O or waits for it. Safe
    /// to call while holding other latches.
    pub fn pin_cached(&self, id: PageId) -> Option<Pinned<'_>> {
        let pinned = self.pin_mapped(id)?;
        let idx = pinned.idx;
        // A frame still being read would make us wait for its disk read; a
        // failed read leaves it unmapped: both count as a miss.
        if self.frames[idx].state.load(Acquire) != VALID {
            drop(pinned);
            self.release_if_abandoned(idx);
            return None;
        }
        self.frames[idx].touch();
        self.stats.hits.add(1);
        Some(pinned)
    }

    /// Pins `id`, reading it from disk on a miss. The caller must hold no
    /// page latch (a miss may read, or write a dirty victim).
    pub fn pin(&self, id: PageId, who: Issuer) -> Result<Pinned<'_>> {
        loop {
            if let Some(p) = self.pin_cached(id) {
                return Ok(p);
            }
            if let Some(p) = self.wait_for_load(id) {
                return Ok(p);
            }
            let mut claimed = self.claim_frame(who)?;
            let idx = claimed.idx.expect("claimed");
            let f = &self.frames[idx];
            let mut guard = {
                let mut map = self.shard(id).lock();
                if map.contains_key(&id) {
                    continue; // someone else is loading it; `claimed` goes back
                }
                let guard = f.latch.write();
                f.state.store(LOADING, Release);
                f.page_id.store(id.encode(), Release);
                map.insert(id, idx);
                guard
            };
            claimed.idx = None; // the pin now belongs to `pinned`
            let pinned = Pinned {
                pool: self,
                idx,
                id,
            };
            match self.load(id, &mut guard.bytes, who) {
                Ok(()) => {
                    f.clean_gen.store(f.dirty_gen.load(Acquire), Release);
                    f.commit_lsn.store(0, Release);
                    f.state.store(VALID, Release);
                    f.touch();
                    return Ok(pinned);
                }
                Err(e) => {
                    self.shard(id).lock().remove(&id);
                    f.page_id.store(NO_PAGE, Release);
                    f.state.store(EMPTY, Release);
                    drop(guard);
                    drop(pinned);
                    self.release_if_abandoned(idx);
                    return Err(e);
                }
            }
        }
    }

    /// If another thread is reading `id` from disk, waits for it (no latch
    /// of ours is held here) and pins the result.
    fn wait_for_load(&self, id: PageId) -> Option<Pinned<'_>> {
        let pinned = self.pin_mapped(id)?;
        let idx = pinned.idx;
        drop(self.frames[idx].latch.read()); // the loader holds it exclusively
        if self.frames[idx].state.load(Acquire) == VALID {
            return Some(pinned);
        }
        drop(pinned);
        self.release_if_abandoned(idx);
        None
    }

    /// Returns an unmapped, unpinned EMPTY frame to the free list (once).
    pub(super) fn release_if_abandoned(&self, idx: usize) {
        // Every move into or out of FREE happens under the free-list mutex,
        // so a frame is listed at most once and never while owned.
        let mut free = self.free.lock();
        let f = &self.frames[idx];
        if f.pins.load(Acquire) == 0 && f.page().is_none() && f.state.load(Acquire) == EMPTY {
            f.state.store(FREE, Release);
            free.push(idx);
        }
    }

    /// Puts a frame the caller owns (pinned once, unmapped) on the free list.
    pub(super) fn push_free(&self, idx: usize) {
        let f = &self.frames[idx];
        debug_assert!(f.page().is_none());
        let mut free = self.free.lock();
        f.pins.store(0, Release);
        f.state.store(FREE, Release);
        free.push(idx);
    }

    /// Reads and checks a page from disk.
    fn load(&self, id: PageId, buf: &mut [u8], who: Issuer) -> Result<()> {
        let file = self.files.get(id.file_id)?;
        self.stats.reads.add(1);
        let recovery = self.recovery.load(Acquire);
        // A page whose in-place write is deferred is read from its copy,
        // which the protection has checked (checksum, file, block, LSN).
        let deferred = self.defers_in_place.load(Relaxed)
            && self.page_write_protection().read_deferred(id, buf, who)?;
        let read = if deferred {
            Ok(PageRead::Whole)
        } else {
            file.try_read_page(id.block as u64, buf, who)
        };
        let existed = match read {
            // As a page that fails its checks: redo may rewrite it whole
            // from an image (a rewrite replaces a bad sector).
            Err(Error::UnreadablePage { .. }) if recovery => {
                buf.fill(0);
                self.damaged.lock().push(id);
                return Ok(());
            }
            // The file ends inside the page: an append the power cut short
            // (ext4 journals a size that covers only the blocks written
            // back). Damaged, not new: its first bytes may be all that is
            // left of committed rows, so redo must restore it from an image
            // or name it; never hand it out as an empty page. PostgreSQL's
            // mdread zero-fills a short block in recovery and refuses it
            // outside.
            Ok(PageRead::Short { .. }) if recovery => {
                buf.fill(0);
                self.damaged.lock().push(id);
                return Ok(());
            }
            Ok(PageRead::Short { bytes }) => {
                return Err(file.short_page_error(id.block as u64, bytes))
            }
            res => res? == PageRead::Whole,
        };
        let path = || file.path_of_block(id.block as u64);
        let at = || format!("block {}", id.block);
        if !existed && !recovery {
            return Err(Error::corruption(
                path(),
                at(),
                "block lies beyond the end of the file",
            ));
        }
        let verified = if deferred {
            Ok(PageState::Valid)
        } else {
            verify_page(buf, self.checksums, id.file_id, id.block)
        };
        let checked = verified.and_then(|state| match (state, self.validator) {
            (PageState::Valid, Some(validate)) => {
                validate(buf).map(|()| state).map_err(PageError::BadHeader)
            }
            _ => Ok(state),
        });
        if matches!(checked, Err(PageError::Checksum { .. })) {
            self.stats.checksum_failures.fetch_add(1, Relaxed);
        }
        let result = match checked {
            Ok(PageState::New) if !recovery => Err(Error::corruption(
                path(),
                at(),
                "all-zero page inside the file (a lost write?)",
            )),
            Ok(PageState::Valid) if page_lsn(buf) > self.wal.flushed_lsn() => {
                // The flush rule wrote the page only after the WAL up to its
                // LSN was durable: that WAL is gone (damaged or lost), and
                // the page holds changes no log can account for.
                Err(Error::corruption(
                    path(),
                    at(),
                    format!(
                        "the page's LSN {} is beyond the end of the WAL {}: the WAL that logged its changes is damaged or lost",
                        page_lsn(buf),
                        self.wal.flushed_lsn()
                    ),
                ))
            }
            Ok(_) => Ok(()),
            Err(_) if recovery => {
                // Redo may restore it from a full image; if a change needs
                // it first, redo reports the page as damaged.
                buf.fill(0);
                self.damaged.lock().push(id);
                Ok(())
            }
            Err(PageError::Checksum { calculated, stored }) => Err(Error::ChecksumMismatch {
                path: path(),
                block: id.block as u64,
                calculated,
                stored,
            }),
            Err(e) => Err(Error::corruption(path(), at(), e.to_string())),
        };
        if let Err(e) = &result {
            tracing::error!(page = %id, error = %e, "damaged page: refused to the reader");
        }
        result
    }

    /// Claims an unpinned, unmapped frame (free list first, then the clock
    /// sweep, preferring clean frames; a dirty victim is written first).
    /// Call it without holding latches; the frame is then installed with
    /// [`BufferPool::install_new`] or returned when dropped.
    ///
    /// Most pins are brief (a page read, a victim's write), so with many
    /// threads on a small pool a sweep may find every frame pinned for a
    /// moment: it looks again, backing off, for about 50 ms before it
    /// calls the pool exhausted. (A PostgreSQL backend errors at once, but
    /// its pool is at least twice its connections.)
    pub fn claim_frame(&self, who: Issuer) -> Result<ClaimedFrame<'_>> {
        let mut pause = std::time::Duration::from_micros(50);
        for attempt in 0..=CLAIM_RETRIES {
            if let Some(claimed) = self.claim_free() {
                return Ok(claimed);
            }
            if let Some(claimed) = self.sweep_for_victim(who)? {
                return Ok(claimed);
            }
            if attempt < CLAIM_RETRIES {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(10));
            }
        }
        Err(Error::Invalid(format!(
            "buffer pool exhausted: all {} frames are pinned or busy; raise buffer_pool_size",
            self.frames.len()
        )))
    }

    /// A frame from the free list, if any.
    fn claim_free(&self) -> Option<ClaimedFrame<'_>> {
        let popped = {
            let mut free = self.free.lock();
            free.pop().inspect(|&idx| {
                let f = &self.frames[idx];
                assert_eq!(f.pins.swap(1, AcqRel), 0, "a free frame was pinned");
                assert_eq!(
                    f.state.swap(EMPTY, AcqRel),
                    FREE,
                    "free list held a frame not free"
                );
            })
        };
        popped.map(|idx| {
            self.stats.claims.add(1);
            ClaimedFrame {
                pool: self,
                idx: Some(idx),
            }
        })
    }

    /// One clock sweep for a victim: None if every frame it met was
    /// pinned or busy.
    fn sweep_for_victim(&self, who: Issuer) -> Result<Option<ClaimedFrame<'_>>> {
        let n = self.frames.len();
        let mut dirty_skipped = 0;
        // Where writing a dirty victim costs an fsync (double writes batch
        // evictions), pass over many more dirty candidates first: a clean
        // one is nearly always near, and the dirty ones are left to the
        // checkpoint's and the background writer's large batches. Whether
        // it does right now is asked at the first dirty candidate (a
        // deferred victim costs no fsync, and goes alone).
        let mut batch = self.eviction_batch.load(Relaxed);
        let mut skip_bound = None;
        for _ in 0..n * (MAX_USAGE as usize + 4) {
            let idx = self.clock_hand.fetch_add(1, Relaxed) % n;
            let f = &self.frames[idx];
            if f.pins.load(Acquire) != 0 || f.state.load(Acquire) != VALID {
                continue;
            }
            if f.cool() {
                continue;
            }
            // Prefer a clean victim (a dirty one costs a WAL flush and a
            // write in the foreground), but only for a few candidates.
            let dirty = f.is_dirty();
            if dirty {
                let bound = *skip_bound.get_or_insert_with(|| {
                    if batch > 1 {
                        batch = self.page_write_protection().eviction_batch_now();
                    }
                    if batch > 1 {
                        (n / 8).clamp(DIRTY_VICTIMS_SKIPPED, 1024)
                    } else {
                        DIRTY_VICTIMS_SKIPPED
                    }
                });
                if dirty_skipped < bound {
                    dirty_skipped += 1;
                    continue;
                }
            }
            if f.pins.compare_exchange(0, 1, AcqRel, Acquire).is_err() {
                continue;
            }
            if dirty {
                // Where a write costs an fsync (double writes), the victim
                // goes with the next dirty frames the sweep would take, so
                // that the fsync is shared instead of paid per page.
                let (_, ahead) = if batch > 1 {
                    let from = self.clock_hand.load(Relaxed) as u64;
                    // Scan until the batch is full (or 4 batches' worth of
                    // frames were looked at), clean frames not counting.
                    self.pin_dirty_ahead(from, batch * 4, batch * 4, batch - 1)
                } else {
                    Default::default()
                };
                let mut idxs = vec![idx];
                idxs.extend(ahead.iter().map(|p| p.idx));
                match self.write_frames(&idxs, who) {
                    Err(e) => {
                        f.pins.fetch_sub(1, AcqRel);
                        return Err(e);
                    }
                    // 0: another writer cleaned it meanwhile.
                    Ok(written) => {
                        self.stats
                            .dirty_evictions
                            .fetch_add(written as u64, Relaxed);
                    }
                }
            }
            if self.unmap_if_unused(idx) {
                self.stats.evictions.add(1);
                self.stats.claims.add(1);
                return Ok(Some(ClaimedFrame {
                    pool: self,
                    idx: Some(idx),
                }));
            }
            f.pins.fetch_sub(1, AcqRel);
        }
        Ok(None)
    }

    /// Removes the frame's mapping if only the caller pins it and it is
    /// clean; the frame is then EMPTY and the caller's.
    fn unmap_if_unused(&self, idx: usize) -> bool {
        let f = &self.frames[idx];
        let Some(id) = f.page() else { return false };
        let mut map = self.shard(id).lock();
        if f.pins.load(Acquire) != 1 || f.is_dirty() || f.state.load(Acquire) != VALID {
            return false;
        }
        assert_eq!(map.get(&id), Some(&idx), "page table and frame disagree");
        map.remove(&id);
        f.page_id.store(NO_PAGE, Release);
        f.state.store(EMPTY, Release);
        true
    }

    /// Installs a claimed frame as the new page `id` (a block just
    /// allocated, never read from disk). If a stale copy of the block (a
    /// freed page) is still cached, that frame is handed out instead. The
    /// caller latches the page, marks it dirty and initializes every byte.
    pub fn install_new<'p>(&'p self, mut claimed: ClaimedFrame<'p>, id: PageId) -> Pinned<'p> {
        loop {
            let mut map = self.shard(id).lock();
            if let Some(&other) = map.get(&id) {
                self.frames[other].pins.fetch_add(1, AcqRel);
                drop(map);
                let pinned = Pinned {
                    pool: self,
                    idx: other,
                    id,
                };
                drop(self.frames[other].latch.read()); // wait out a load
                if self.frames[other].state.load(Acquire) == VALID {
                    return pinned; // `claimed` goes back to the free list
                }
                drop(pinned);
                self.release_if_abandoned(other);
                continue;
            }
            let idx = claimed.idx.take().expect("claimed frame");
            let f = &self.frames[idx];
            f.latch.write().bytes.fill(0);
            f.commit_lsn.store(0, Release);
            f.clean_gen.store(f.dirty_gen.load(Acquire), Release);
            f.page_id.store(id.encode(), Release);
            f.state.store(VALID, Release);
            map.insert(id, idx);
            drop(map);
            f.touch();
            return Pinned {
                pool: self,
                idx,
                id,
            };
        }
    }

    /// Frees the frame holding `id` if nobody pins it (and, unless `force`,
    /// if it is clean). A forced discard drops unwritten changes: only for
    /// pages of a dropped file.
    fn discard(&self, id: PageId, force: bool) {
        let mut map = self.shard(id).lock();
        let Some(&idx) = map.get(&id) else { return };
        let f = &self.frames[idx];
        if f.pins.compare_exchange(0, 1, AcqRel, Acquire).is_err() {
            return;
        }
        if (!force && f.is_dirty()) || f.state.load(Acquire) != VALID {
            f.pins.fetch_sub(1, AcqRel);
            return;
        }
        map.remove(&id);
        drop(map);
        f.page_id.store(NO_PAGE, Release);
        f.clean_gen.store(f.dirty_gen.load(Acquire), Release);
        f.state.store(EMPTY, Release);
        self.push_free(idx);
    }

    /// True if `id` is in the pool (in any state).
    pub fn is_cached(&self, id: PageId) -> bool {
        self.shard(id).lock().contains_key(&id)
    }

    /// Forgets one page if it is cached, unpinned and clean.
    pub fn discard_page(&self, id: PageId) {
        self.discard(id, false);
    }

    /// Discards every frame of a dropped file without writing it.
    pub fn discard_file(&self, file_id: u32) {
        self.dropped_files.lock().insert(file_id);
        self.page_write_protection().forget_file(file_id);
        for f in self.frames.iter() {
            if let Some(id) = f.page().filter(|p| p.file_id == file_id) {
                self.discard(id, true);
            }
        }
    }
}
