//! The in-memory copy of the unflushed WAL blocks, and the insert position.
//!
//! Inserting is two steps, as in PostgreSQL 9.4: [`Inner::reserve`], under
//! the writer's reservation lock, moves the insert position past the
//! record and starts the pages it spans (their headers written then); then
//! [`Placement::fill`] copies the record into its reserved bytes with no
//! lock but the inserter's insertion lock, so many records are copied at
//! once and a long one (a page image) holds nobody up.
//!
//! Invariants: `blocks` holds blocks `base_block ..` with no gap, from the
//! block holding the flushed position to the block holding the insert
//! position. A block's bytes are written once: a page header when its
//! block is started (before anyone else sees the block), each record's
//! bytes by the one inserter that reserved them, padding by the flush
//! leader that reserved it. Nobody reads a byte before its writer is done:
//! a flush leader reads only below its target, after every copy reserved
//! below it finished (the insertion locks). A flush first pads the insert
//! position to a sector boundary ([`Inner::reserve_padding`]), so the next
//! flush starts in a fresh sector.

use super::config::WalConfig;
use super::format::{
    align_up, Geometry, LongHeader, PageHeader, RecordHeader, PAGE_FLAG_CONTINUATION,
    PAGE_FLAG_FIRST_IN_SEGMENT, PAGE_HEADER_VERSION, PAGE_MAGIC, RECORD_HEADER_LEN,
    RECORD_KIND_PADDING, RH_CRC,
};
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::Arc;

/// One WAL block in memory, written by many inserters at once, each only
/// in the bytes it reserved. Reached through a raw pointer: a `&mut` to
/// the whole block would alias another inserter's bytes.
pub(crate) struct SharedBlock {
    ptr: NonNull<u8>,
    len: usize,
}

// The bytes are owned; who may touch which byte is the reservation's rule
// (module comment), kept by the callers of the unsafe methods.
unsafe impl Send for SharedBlock {}
unsafe impl Sync for SharedBlock {}

impl SharedBlock {
    /// A block holding `bytes` (a new block with its header, or the block
    /// holding the end of WAL read back at opening).
    pub fn from_vec(bytes: Vec<u8>) -> Arc<SharedBlock> {
        let len = bytes.len();
        let raw = Box::into_raw(bytes.into_boxed_slice()) as *mut u8;
        let ptr = NonNull::new(raw).expect("a box is never null");
        Arc::new(SharedBlock { ptr, len })
    }

    /// Copies `data` to `off`.
    ///
    /// # Safety
    /// The caller reserved `[off, off + data.len())` and nobody reads it
    /// until the caller's insertion lock (or the reservation lock) is
    /// released.
    unsafe fn write(&self, off: usize, data: &[u8]) {
        assert!(
            off + data.len() <= self.len,
            "WAL block write out of bounds"
        );
        // SAFETY: in bounds (checked); no other writer or reader of these
        // bytes at once (the caller's promise).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len())
        }
    }

    /// The bytes `[lo, hi)`.
    ///
    /// # Safety
    /// Every write into `[lo, hi)` happened before this call (a lock the
    /// writer released was taken since) and none comes while the slice
    /// lives.
    pub unsafe fn bytes(&self, lo: usize, hi: usize) -> &[u8] {
        assert!(lo <= hi && hi <= self.len, "WAL block read out of bounds");
        // SAFETY: in bounds (checked); the bytes are stable (the caller's
        // promise).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(lo), hi - lo) }
    }
}

impl Drop for SharedBlock {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len);
        // SAFETY: made by `Box::into_raw` of a boxed slice of `len` bytes
        // in `from_vec`, freed once here.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// Insert state: the position, the last record, the unflushed blocks.
/// Guarded by the writer's reservation lock.
pub(crate) struct Inner {
    pub insert_pos: u64,
    pub prev_record: u64,
    pub base_block: u64,
    pub blocks: VecDeque<Arc<SharedBlock>>,
}

/// The bytes reserved for one record, filled outside the reservation
/// lock.
///
/// It points at its blocks without owning them (no allocation, no shared
/// reference count to bump under the reservation lock): they live while
/// its reserver holds its insertion lock, since only a flush drops blocks
/// ([`Inner::trim`], those wholly below its target) and a flush whose
/// target lies past a reservation waits for that lock first. Padding is
/// filled by the one leader that reserved it, before it flushes.
pub(crate) struct Placement {
    pub start: u64,
    pub end: u64,
    /// The record before it: its header's previous-record LSN.
    pub prev: u64,
    /// The block holding `start`.
    first: *const SharedBlock,
    /// The blocks after it through the one holding the record's last
    /// byte: empty (unallocated) for a record within one block.
    more: Vec<*const SharedBlock>,
}

/// A record header with its CRC, for a record of `total` bytes (header
/// included) after the record at `prev`, whose payload's CRC-32C is
/// `payload_crc`.
pub(crate) fn record_header(
    kind: u8,
    xid: u64,
    total: u64,
    prev: u64,
    epoch: u32,
    payload_crc: u32,
) -> [u8; RECORD_HEADER_LEN] {
    let mut header = RecordHeader {
        total_len: total as u32,
        kind,
        flags: 0,
        reserved: 0,
        xid,
        prev_lsn: prev,
        epoch,
        crc: 0,
    }
    .encode();
    let crc = RecordHeader::crc_with_payload_crc(&header, payload_crc);
    header[RH_CRC..RH_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    header
}

impl Inner {
    /// Reserves `total` bytes (a record's header and payload; the caller
    /// checked the length against the maximum) at the insert position:
    /// starts the pages they span and moves the insert position past
    /// them.
    pub fn reserve(&mut self, cfg: &WalConfig, geo: &Geometry, total: u64) -> Placement {
        let mut pos = self.insert_pos;
        let off = geo.page_offset(pos);
        if off == 0 || geo.block - off < RECORD_HEADER_LEN as u64 {
            // A record header never straddles pages: skip the tail.
            pos = self.start_page(cfg, geo, pos.next_multiple_of(geo.block), 0);
        }
        let start = pos;
        let mut remaining = total;
        while remaining > 0 {
            if geo.page_offset(pos) == 0 {
                pos = self.start_page(cfg, geo, pos, remaining as u32);
            }
            let n = (geo.block - geo.page_offset(pos)).min(remaining);
            pos += n;
            remaining -= n;
        }
        let place = self.placement(geo, start, pos, align_up(pos));
        self.insert_pos = place.end;
        self.prev_record = start;
        place
    }

    /// A placement of `[start, end)` whose bytes run to `last_byte_end`
    /// (the rest is alignment or padding), after the last record.
    fn placement(&self, geo: &Geometry, start: u64, last_byte_end: u64, end: u64) -> Placement {
        let first = (start / geo.block - self.base_block) as usize;
        let last = ((last_byte_end - 1) / geo.block - self.base_block) as usize;
        Placement {
            start,
            end,
            prev: self.prev_record,
            first: Arc::as_ptr(&self.blocks[first]),
            more: (self.blocks.range(first + 1..=last))
                .map(Arc::as_ptr)
                .collect(),
        }
    }

    /// Reserves padding from the insert position to the next sector
    /// boundary: padding records (zero payload, chained and CRC-checked
    /// like any record), one per page crossed when a sector spans pages. A
    /// rest too short for a record header pads through the next sector as
    /// well; fewer than a header's bytes at a page's end need none (records
    /// skip them anyway). Returns how far the insert position moved and the
    /// padding records, each to be written with [`Placement::fill_padding`].
    pub fn reserve_padding(&mut self, cfg: &WalConfig, geo: &Geometry) -> (u64, Vec<Placement>) {
        let start = self.insert_pos;
        let mut padding = Vec::new();
        loop {
            let mut pos = self.insert_pos;
            if let Some(next) = geo.flush_boundary(pos) {
                self.insert_pos = next;
                return (next - start, padding);
            }
            let off = geo.page_offset(pos);
            if off == 0 || geo.block - off < RECORD_HEADER_LEN as u64 {
                // The page at a page start is not started yet (`reserve`
                // starts it); a tail too short for a header is skipped.
                pos = self.start_page(cfg, geo, pos.next_multiple_of(geo.block), 0);
            }
            let page_end = geo.page_start(pos) + geo.block;
            let mut len = pos.next_multiple_of(geo.sector).min(page_end) - pos;
            if len < RECORD_HEADER_LEN as u64 {
                // A sector boundary inside the page (a page's end that is
                // one was taken by `flush_boundary`), so the next sector
                // lies on the same page.
                len += geo.sector;
            }
            debug_assert!(geo.page_offset(pos) + len <= geo.block);
            padding.push(self.placement(geo, pos, pos + len, pos + len));
            self.insert_pos = pos + len;
            self.prev_record = pos;
        }
    }

    /// Starts the page at `page_start` in memory (its header is written now
    /// and never changes); returns the position after the header.
    fn start_page(&mut self, cfg: &WalConfig, geo: &Geometry, page_start: u64, cont: u32) -> u64 {
        let block_no = page_start / geo.block;
        assert_eq!(geo.page_offset(page_start), 0, "page start not aligned");
        assert_eq!(
            block_no,
            self.base_block + self.blocks.len() as u64,
            "WAL block gap"
        );
        let long = (geo.segment_offset(page_start) == 0).then_some(LongHeader {
            system_id: cfg.system_id,
            segment_size: cfg.segment_size,
            block_size: cfg.block_size,
        });
        let mut flags = if cont > 0 { PAGE_FLAG_CONTINUATION } else { 0 };
        if long.is_some() {
            flags |= PAGE_FLAG_FIRST_IN_SEGMENT;
        }
        let header = PageHeader {
            magic: PAGE_MAGIC,
            flags,
            version: PAGE_HEADER_VERSION,
            address: page_start,
            epoch: cfg.epoch,
            cont_remaining: cont,
            long,
        };
        let mut block = vec![0u8; geo.block as usize];
        header.encode(&mut block);
        self.blocks.push_back(SharedBlock::from_vec(block));
        page_start + header.header_len() as u64
    }

    /// Drops the blocks before `keep_from` (all flushed).
    pub fn trim(&mut self, keep_from: u64) {
        while self.base_block < keep_from && !self.blocks.is_empty() {
            self.blocks.pop_front();
            self.base_block += 1;
        }
        if self.blocks.is_empty() {
            self.base_block = self.base_block.max(keep_from);
        }
    }
}

impl Placement {
    /// Copies a record's header and payload into the reserved bytes,
    /// skipping the page headers the reservation wrote.
    ///
    /// # Safety
    /// The caller reserved this placement while holding its insertion
    /// lock and still holds it (or is the flush leader that reserved this
    /// padding, before its flush): the blocks are alive and the bytes are
    /// its own.
    pub unsafe fn fill(&self, geo: &Geometry, header: &[u8; RECORD_HEADER_LEN], payload: &[u8]) {
        let first_block = self.start / geo.block;
        let mut pos = self.start;
        for data in [&header[..], payload] {
            let mut done = 0;
            while done < data.len() {
                if geo.page_offset(pos) == 0 {
                    pos += geo.header_len(pos);
                }
                let off = geo.page_offset(pos) as usize;
                let n = (geo.block as usize - off).min(data.len() - done);
                let block = match (pos / geo.block - first_block) as usize {
                    0 => self.first,
                    i => self.more[i - 1],
                };
                // SAFETY: the block lives while the caller holds its
                // insertion lock (the type's comment); these bytes lie in
                // `[start, end)`, reserved for this record alone, and no
                // flush reads them before that lock is released.
                unsafe { (*block).write(off, &data[done..done + n]) };
                done += n;
                pos += n as u64;
            }
        }
        debug_assert!(align_up(pos) <= self.end, "record overran its reservation");
    }

    /// Writes a padding record into its reserved bytes: its header (its
    /// payload's bytes are zero already).
    ///
    /// # Safety
    /// As for [`Placement::fill`].
    pub unsafe fn fill_padding(&self, cfg: &WalConfig, geo: &Geometry) {
        let len = self.end - self.start;
        // The payload is zeros: its CRC from a static block, no buffer
        // allocated per flush round.
        const ZEROS: [u8; 4096] = [0; 4096];
        let mut left = len as usize - RECORD_HEADER_LEN;
        let mut payload_crc = 0;
        while left > 0 {
            let n = left.min(ZEROS.len());
            payload_crc = crc32c::crc32c_append(payload_crc, &ZEROS[..n]);
            left -= n;
        }
        let header = record_header(
            RECORD_KIND_PADDING,
            0,
            len,
            self.prev,
            cfg.epoch,
            payload_crc,
        );
        // SAFETY: the caller's promise.
        unsafe { self.fill(geo, &header, &[]) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::MB;
    use crate::wal::record::{RecordData, RecordKind};

    fn append(inner: &mut Inner, cfg: &WalConfig, geo: &Geometry, main: usize) -> (u64, u64) {
        let rec = RecordData::with_main(RecordKind::Noop, 1, vec![7; main]);
        let payload = rec.encode().unwrap();
        let total = (RECORD_HEADER_LEN + payload.len()) as u64;
        let place = inner.reserve(cfg, geo, total);
        let crc = crc32c::crc32c(&payload);
        let header = record_header(rec.kind as u8, 1, total, place.prev, cfg.epoch, crc);
        // SAFETY: one thread; nothing is trimmed before the fill.
        unsafe { place.fill(geo, &header, &payload) };
        (place.start, place.end)
    }

    /// The bytes of `block` below `upto`, single-threaded.
    fn below(block: &SharedBlock, upto: usize) -> Vec<u8> {
        // SAFETY: one thread; every write returned.
        unsafe { block.bytes(0, upto) }.to_vec()
    }

    #[test]
    fn appended_bytes_never_change_and_headers_are_written_once() {
        let cfg = WalConfig {
            block_size: 1024,
            segment_size: MB,
            system_id: 1,
            epoch: 3,
            sector_size: 512,
        };
        let geo = Geometry::new(&cfg);
        let mut inner = Inner {
            insert_pos: 0,
            prev_record: 0,
            base_block: 0,
            blocks: VecDeque::new(),
        };
        let mut snapshots: Vec<(u64, Vec<Vec<u8>>)> = Vec::new();
        let mut prev = 0;
        for main in [24, 2000, 950, 0, 3000, 10, 984] {
            let (start, end) = append(&mut inner, &cfg, &geo, main);
            assert!(start >= prev && end > start && end % 8 == 0);
            assert!(geo.block - geo.page_offset(start) >= RECORD_HEADER_LEN as u64);
            prev = end;
            // What a flush leader up to `end` would have written.
            let image = (inner.blocks.iter().enumerate())
                .map(|(i, b)| below(b, (end - i as u64 * geo.block).min(geo.block) as usize))
                .collect();
            snapshots.push((end, image));
        }
        // Every byte below each snapshot's end is still the same now.
        for (end, blocks) in &snapshots {
            for (i, b) in blocks.iter().enumerate() {
                let now = below(&inner.blocks[i], b.len());
                assert_eq!(b, &now, "block {i} changed below {end}");
            }
        }
        // Page headers: addresses, epoch, the continued lengths.
        for (i, b) in inner.blocks.iter().enumerate() {
            let h = PageHeader::decode(&below(b, geo.block as usize)).unwrap();
            assert_eq!(h.address, i as u64 * geo.block);
            assert_eq!((h.magic, h.epoch), (PAGE_MAGIC, 3));
            assert_eq!(h.long.is_some(), i == 0);
        }
        let (moved, padding) = inner.reserve_padding(&cfg, &geo);
        // SAFETY: one thread; nothing is trimmed before the fills.
        padding
            .iter()
            .for_each(|p| unsafe { p.fill_padding(&cfg, &geo) });
        assert!(inner.insert_pos.is_multiple_of(geo.sector));
        assert_eq!(moved, inner.insert_pos - prev);
        let keep = inner.insert_pos / geo.block;
        inner.trim(keep);
        assert_eq!(inner.base_block, keep);
        assert!(inner.blocks.len() <= 1);
    }
}
