//! The I/O of deferred in-place writes ([`super::super::deferred`]): reads
//! of deferred pages from the area, and write-backs of a ring entry's
//! pages when its slots are needed again.

use super::{DoubleWrites, FileMark, ShardWriter};
use crate::buffer::PageId;
use crate::error::{Error, Result};
use crate::file::Issuer;
use crate::page::{page_lsn, verify_page, PageState};
use crate::protect::double_writes::deferred::Location;
use crate::protect::double_writes::shard_file::AlignedBuf;
use std::sync::atomic::Ordering::Relaxed;

impl DoubleWrites {
    /// Reads page `id` into `buf` from its newest copy, if its in-place
    /// write is deferred. A slot being reused under the reader shows as a
    /// copy of another page or LSN: the lookup is tried again, and the page
    /// is found in place once its write-back retired it.
    pub(super) fn read_deferred_page(
        &self,
        id: PageId,
        buf: &mut [u8],
        who: Issuer,
    ) -> Result<bool> {
        let mut direct = false;
        loop {
            let Some(at) = self.deferred.lookup(id) else {
                return Ok(false);
            };
            let w = &self.shards[at.shard.number() as usize];
            self.read_block(w, at.block, buf, direct, who)?;
            if self.is_copy_of(buf, id, at) {
                w.stats.reads.fetch_add(1, Relaxed);
                return Ok(true);
            }
            if self.deferred.lookup(id) != Some(at) {
                direct = false;
                continue;
            }
            if !direct {
                // The page cache may hold what the slot held before an
                // O_DIRECT write replaced it: read past it once.
                direct = true;
                continue;
            }
            return Err(Error::corruption(
                at.shard.path(&self.dir),
                format!("block {}", at.block),
                format!(
                    "the double-write copy of data file {} block {} (LSN {}) fails its checks: \
                     the page's newest version is unreadable",
                    id.file_id, id.block, at.lsn
                ),
            ));
        }
    }

    fn is_copy_of(&self, buf: &[u8], id: PageId, at: Location) -> bool {
        matches!(
            verify_page(buf, self.settings.checksums, id.file_id, id.block),
            Ok(PageState::Valid)
        ) && page_lsn(buf) == at.lsn
    }

    /// Reads block `block` of `w`'s file, through the page cache or past it.
    fn read_block(
        &self,
        w: &ShardWriter,
        block: u32,
        buf: &mut [u8],
        direct: bool,
        who: Issuer,
    ) -> Result<()> {
        let offset = block as u64 * self.page_size as u64;
        if direct && w.direct {
            let mut aligned = AlignedBuf::new(buf.len());
            w.file.read_exact_at(aligned.as_mut_slice(), offset, who)?;
            buf.copy_from_slice(aligned.as_slice());
            Ok(())
        } else {
            w.reader.read_exact_at(buf, offset, who)
        }
    }

    /// Writes back the claimed entries of `w` in turn; on an error, gives
    /// the ones not written back to the ring again. Returns the pages
    /// written in place.
    pub(super) fn write_back_claimed(
        &self,
        w: &ShardWriter,
        entries: &[u64],
        who: Issuer,
    ) -> Result<usize> {
        let mut done = 0;
        for (i, &entry) in entries.iter().enumerate() {
            match self.write_back_entry(w, entry, who) {
                Ok(n) => done += n,
                Err(e) => {
                    let mut ring = w.ring.lock();
                    for &left in &entries[i + 1..] {
                        ring.write_back_failed(left);
                    }
                    drop(ring);
                    w.ring_changed.notify_all();
                    return Err(e);
                }
            }
        }
        Ok(done)
    }

    /// Writes back entry `entry` of `w`, claimed by a reservation in its
    /// way.
    pub(super) fn write_back(&self, w: &ShardWriter, entry: u64, who: Issuer) -> Result<()> {
        self.write_back_claimed(w, &[entry], who).map(|_| ())
    }

    /// Writes the newest copies entry `entry` holds in place, then hands
    /// the entry back to the ring with their data files' marks. On an
    /// error the entry is deferred again, holding its pages.
    fn write_back_entry(&self, w: &ShardWriter, entry: u64, who: Issuer) -> Result<usize> {
        let (order, wb) = self.deferred.begin_write_back(w.shard, entry);
        let written = (|| {
            // The copies durable before their pages are overwritten in
            // place: a torn in-place write is repaired from them.
            if !wb.newest.is_empty() && w.group.sync_all_written(w.file.as_ref(), who)? {
                w.stats.fsyncs.fetch_add(1, Relaxed);
            }
            let mut images = Vec::with_capacity(wb.newest.len());
            for c in &wb.newest {
                let mut image = vec![0u8; self.page_size];
                self.read_block(w, c.at.block, &mut image, false, who)?;
                if !self.is_copy_of(&image, c.id, c.at) {
                    self.read_block(w, c.at.block, &mut image, true, who)?;
                }
                if !self.is_copy_of(&image, c.id, c.at) {
                    return Err(Error::corruption(
                        w.shard.path(&self.dir),
                        format!("block {}", c.at.block),
                        format!(
                            "the double-write copy of data file {} block {} (LSN {}) fails its \
                             checks before its deferred in-place write",
                            c.id.file_id, c.id.block, c.at.lsn
                        ),
                    ));
                }
                images.push((c.id, image));
            }
            images.sort_by_key(|p| p.0);
            let pages: Vec<(PageId, &[u8])> =
                images.iter().map(|(id, b)| (*id, b.as_slice())).collect();
            self.files.write_in_place(&pages, who)?;
            Ok(images.len())
        })();
        match written {
            Ok(n) => {
                self.deferred.finish_write_back(&wb);
                drop(order);
                let marks: Vec<FileMark> = self.marks_of(wb.newest.iter().map(|c| c.id));
                w.ring.lock().written_back(entry, marks);
                w.ring_changed.notify_all();
                w.stats.written_back.fetch_add(n as u64, Relaxed);
                w.stats.obsolete.fetch_add(wb.obsolete as u64, Relaxed);
                Ok(n)
            }
            Err(e) => {
                self.deferred.undo_write_back(wb);
                drop(order);
                w.ring.lock().write_back_failed(entry);
                w.ring_changed.notify_all();
                Err(e)
            }
        }
    }
}
