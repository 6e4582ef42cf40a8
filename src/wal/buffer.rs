//! The in-memory copy of the unflushed WAL blocks, and the insert position.
//!
//! Invariants: `blocks` holds blocks `base_block ..` with no gap, from the
//! block holding the flushed position to the block holding the insert
//! position. A block's bytes never change once inserted: a page header is
//! written when its block is started, records only fill zero bytes past the
//! insert position. Blocks are shared (`Arc`) with a flush leader writing
//! them; writing into a shared block copies it first (`Arc::make_mut`).
//! A flush first pads the insert position to a sector boundary
//! ([`Inner::pad_to_sector`]), so the next flush starts in a fresh sector.

use super::config::WalConfig;
use super::format::{
    align_up, Geometry, LongHeader, PageHeader, RecordHeader, PAGE_FLAG_CONTINUATION,
    PAGE_FLAG_FIRST_IN_SEGMENT, PAGE_HEADER_VERSION, PAGE_MAGIC, RECORD_HEADER_LEN,
    RECORD_KIND_PADDING, RH_CRC,
};
use super::record::RecordData;
use std::collections::VecDeque;
use std::sync::Arc;

/// Insert state: the position, the last record, the unflushed blocks.
pub(crate) struct Inner {
    pub insert_pos: u64,
    pub prev_record: u64,
    pub base_block: u64,
    pub blocks: VecDeque<Arc<Vec<u8>>>,
}

impl Inner {
    /// Appends a record (its encoded `payload`, whose CRC-32C is
    /// `payload_crc`) at the insert position; returns its start and end.
    /// The caller checked the length against the maximum.
    pub fn append(
        &mut self,
        cfg: &WalConfig,
        geo: &Geometry,
        rec: &RecordData,
        payload: &[u8],
        payload_crc: u32,
    ) -> (u64, u64) {
        let total = (RECORD_HEADER_LEN + payload.len()) as u64;
        let mut pos = self.insert_pos;
        let off = geo.page_offset(pos);
        if off == 0 || geo.block - off < RECORD_HEADER_LEN as u64 {
            // A record header never straddles pages: skip the tail.
            pos = self.start_page(cfg, geo, pos.next_multiple_of(geo.block), 0);
        }
        let start = pos;
        let mut header = RecordHeader {
            total_len: total as u32,
            kind: rec.kind as u8,
            flags: 0,
            reserved: 0,
            xid: rec.xid,
            prev_lsn: self.prev_record,
            epoch: cfg.epoch,
            crc: 0,
        }
        .encode();
        let crc = RecordHeader::crc_with_payload_crc(&header, payload_crc);
        header[RH_CRC..RH_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        let mut remaining = total;
        pos = self.copy_in(cfg, geo, pos, &header, &mut remaining);
        pos = self.copy_in(cfg, geo, pos, payload, &mut remaining);
        debug_assert_eq!(remaining, 0);
        let end = align_up(pos);
        self.insert_pos = end;
        self.prev_record = start;
        (start, end)
    }

    /// Moves the insert position to the next sector boundary, filling the
    /// rest with padding records (zero payload, chained and CRC-checked like
    /// any record), one per page crossed when a sector spans pages. A rest
    /// too short for a record header pads through the next sector as well;
    /// fewer than a header's bytes at a page's end need none (records skip
    /// them anyway). Returns how far the insert position moved.
    pub fn pad_to_sector(&mut self, cfg: &WalConfig, geo: &Geometry) -> u64 {
        let start = self.insert_pos;
        loop {
            let mut pos = self.insert_pos;
            if let Some(next) = geo.flush_boundary(pos) {
                self.insert_pos = next;
                return next - start;
            }
            let off = geo.page_offset(pos);
            if off == 0 || geo.block - off < RECORD_HEADER_LEN as u64 {
                // The page at a page start is not started yet (`append`
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
            self.pad_record(cfg, geo, pos, len);
        }
    }

    /// Writes a padding record of `len` bytes at `pos`, on one page.
    fn pad_record(&mut self, cfg: &WalConfig, geo: &Geometry, pos: u64, len: u64) {
        debug_assert!(geo.page_offset(pos) + len <= geo.block);
        let payload_crc = crc32c::crc32c(&vec![0u8; len as usize - RECORD_HEADER_LEN]);
        let mut header = RecordHeader {
            total_len: len as u32,
            kind: RECORD_KIND_PADDING,
            flags: 0,
            reserved: 0,
            xid: 0,
            prev_lsn: self.prev_record,
            epoch: cfg.epoch,
            crc: 0,
        }
        .encode();
        let crc = RecordHeader::crc_with_payload_crc(&header, payload_crc);
        header[RH_CRC..RH_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        // The payload's bytes past the insert position are zero already.
        let mut remaining = RECORD_HEADER_LEN as u64;
        self.copy_in(cfg, geo, pos, &header, &mut remaining);
        self.insert_pos = pos + len;
        self.prev_record = pos;
    }

    fn block_mut(&mut self, block_no: u64) -> &mut Vec<u8> {
        let idx = (block_no - self.base_block) as usize;
        Arc::make_mut(&mut self.blocks[idx])
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
        self.blocks.push_back(Arc::new(block));
        page_start + header.header_len() as u64
    }

    /// Copies `data`, part of a record of which `rec_remaining` bytes are
    /// still to copy, at `pos`; starts continuation pages as needed.
    fn copy_in(
        &mut self,
        cfg: &WalConfig,
        geo: &Geometry,
        mut pos: u64,
        data: &[u8],
        rec_remaining: &mut u64,
    ) -> u64 {
        let mut done = 0;
        while done < data.len() {
            if geo.page_offset(pos) == 0 {
                pos = self.start_page(cfg, geo, pos, *rec_remaining as u32);
            }
            let off = geo.page_offset(pos) as usize;
            let n = (geo.block as usize - off).min(data.len() - done);
            self.block_mut(pos / geo.block)[off..off + n].copy_from_slice(&data[done..done + n]);
            done += n;
            pos += n as u64;
            *rec_remaining -= n as u64;
        }
        pos
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::MB;
    use crate::wal::record::RecordKind;

    fn append(inner: &mut Inner, cfg: &WalConfig, geo: &Geometry, main: usize) -> (u64, u64) {
        let rec = RecordData::with_main(RecordKind::Noop, 1, vec![7; main]);
        let payload = rec.encode().unwrap();
        let crc = crc32c::crc32c(&payload);
        inner.append(cfg, geo, &rec, &payload, crc)
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
        let mut snapshots: Vec<(u64, Vec<Arc<Vec<u8>>>)> = Vec::new();
        let mut prev = 0;
        for main in [24, 2000, 950, 0, 3000, 10, 984] {
            let (start, end) = append(&mut inner, &cfg, &geo, main);
            assert!(start >= prev && end > start && end % 8 == 0);
            assert!(geo.block - geo.page_offset(start) >= RECORD_HEADER_LEN as u64);
            prev = end;
            // A flush leader would hold these clones while inserts go on.
            snapshots.push((end, inner.blocks.iter().cloned().collect()));
        }
        // Every byte below each snapshot's end is still the same now.
        for (end, blocks) in &snapshots {
            for (i, b) in blocks.iter().enumerate() {
                let now = &inner.blocks[i];
                let upto = (*end - i as u64 * geo.block).min(geo.block) as usize;
                assert_eq!(&b[..upto], &now[..upto], "block {i} changed below {end}");
            }
        }
        // Page headers: addresses, epoch, the continued lengths.
        for (i, b) in inner.blocks.iter().enumerate() {
            let h = PageHeader::decode(b).unwrap();
            assert_eq!(h.address, i as u64 * geo.block);
            assert_eq!((h.magic, h.epoch), (PAGE_MAGIC, 3));
            assert_eq!(h.long.is_some(), i == 0);
        }
        let keep = inner.insert_pos / geo.block;
        inner.trim(keep);
        assert_eq!(inner.base_block, keep);
        assert_eq!(inner.blocks.len(), 1);
    }
}
