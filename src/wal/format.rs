//! The bytes of the WAL: page headers, record headers, and the arithmetic
//! that maps an LSN to a segment, a page and an offset.
//!
//! Every offset and size here is a named constant checked at compile time;
//! docs/FORMAT.md describes the same bytes in tables. All integers are
//! little-endian. Decoding never panics: it takes any byte slice and returns
//! `None` when the slice is too short; the reader decides what the values
//! mean.

/// `"UNTW"` read as a little-endian u32: the first four bytes of every page.
pub const PAGE_MAGIC: u32 = 0x5754_4E55;
/// The only page header version written and accepted. Version 2: every
/// flush ends on a sector boundary (the control file's `sector_size`;
/// padding records fill the rest of the sector), and the reader keeps only
/// records up to such a boundary. A version 1 WAL read by that rule could lose commits.
pub const PAGE_HEADER_VERSION: u16 = 2;
/// Page flag: the long header follows (the page is the first of its segment).
pub const PAGE_FLAG_FIRST_IN_SEGMENT: u16 = 0x0001;
/// Page flag: the page starts with the remainder of a record.
pub const PAGE_FLAG_CONTINUATION: u16 = 0x0002;
/// Every page flag this version knows.
pub const PAGE_FLAGS_KNOWN: u16 = PAGE_FLAG_FIRST_IN_SEGMENT | PAGE_FLAG_CONTINUATION;

/// Offsets in the short page header (present on every page).
pub const PH_MAGIC: usize = 0;
pub const PH_FLAGS: usize = 4;
pub const PH_VERSION: usize = 6;
pub const PH_ADDRESS: usize = 8;
pub const PH_EPOCH: usize = 16;
pub const PH_CONT_REMAINING: usize = 20;
/// Length of the short page header.
pub const SHORT_PAGE_HEADER_LEN: usize = 24;
/// Offsets of the long header fields (first page of a segment only).
pub const LH_SYSTEM_ID: usize = 24;
pub const LH_SEGMENT_SIZE: usize = 32;
pub const LH_BLOCK_SIZE: usize = 40;
pub const LH_RESERVED: usize = 44;
/// Length of the long page header (short header included).
pub const LONG_PAGE_HEADER_LEN: usize = 48;

/// Offsets in the record header.
pub const RH_TOTAL_LEN: usize = 0;
pub const RH_KIND: usize = 4;
pub const RH_FLAGS: usize = 5;
pub const RH_RESERVED: usize = 6;
pub const RH_XID: usize = 8;
pub const RH_PREV_LSN: usize = 16;
pub const RH_EPOCH: usize = 24;
pub const RH_CRC: usize = 28;
/// Length of the record header. A header never straddles a page boundary.
pub const RECORD_HEADER_LEN: usize = 32;
/// Records start at multiples of this; the bytes after a record up to the
/// next multiple are zero.
pub const RECORD_ALIGN: u64 = 8;
/// The kind byte of a padding record: zero payload filling a sector's rest
/// at a flush. The reader checks it like any record and skips it.
pub const RECORD_KIND_PADDING: u8 = 0xFF;
/// The longest record (header plus payload) a writer inserts and a reader
/// believes: anything longer is "record longer than possible".
pub const MAX_RECORD_LEN: u32 = 64 * 1024 * 1024;

const _: () = assert!(PH_CONT_REMAINING + 4 == SHORT_PAGE_HEADER_LEN);
const _: () = assert!(LH_RESERVED + 4 == LONG_PAGE_HEADER_LEN);
const _: () = assert!((SHORT_PAGE_HEADER_LEN as u64).is_multiple_of(RECORD_ALIGN));
const _: () = assert!((LONG_PAGE_HEADER_LEN as u64).is_multiple_of(RECORD_ALIGN));
const _: () = assert!(RH_CRC + 4 == RECORD_HEADER_LEN);
const _: () = assert!((RECORD_HEADER_LEN as u64).is_multiple_of(RECORD_ALIGN));
// The smallest block must hold a long header, a record header and more.
const _: () = assert!(LONG_PAGE_HEADER_LEN + RECORD_HEADER_LEN < 1024);
// The smallest sector holds two record headers (padding needs one).
const _: () = assert!(crate::settings::MIN_SECTOR_SIZE as usize >= 2 * RECORD_HEADER_LEN);

/// Rounds up to the record alignment.
pub fn align_up(pos: u64) -> u64 {
    (pos + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// The long header's fields: what the segment was written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongHeader {
    pub system_id: u64,
    pub segment_size: u64,
    pub block_size: u32,
}

/// A WAL page header as stored (decoded without judging the values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    pub magic: u32,
    pub flags: u16,
    pub version: u16,
    /// The LSN of the page's first byte.
    pub address: u64,
    /// The epoch of the writer that started the page.
    pub epoch: u32,
    /// Bytes of a record continued from the previous page that lie on this
    /// and later pages (0 when the page starts with no continuation).
    pub cont_remaining: u32,
    /// Present when `flags` has [`PAGE_FLAG_FIRST_IN_SEGMENT`].
    pub long: Option<LongHeader>,
}

impl PageHeader {
    /// The header's length on the page.
    pub fn header_len(&self) -> usize {
        if self.long.is_some() {
            LONG_PAGE_HEADER_LEN
        } else {
            SHORT_PAGE_HEADER_LEN
        }
    }

    /// Writes the header at the start of `page` (which must hold it).
    pub fn encode(&self, page: &mut [u8]) {
        assert!(
            page.len() >= self.header_len(),
            "page too small for its header"
        );
        page[PH_MAGIC..PH_MAGIC + 4].copy_from_slice(&self.magic.to_le_bytes());
        page[PH_FLAGS..PH_FLAGS + 2].copy_from_slice(&self.flags.to_le_bytes());
        page[PH_VERSION..PH_VERSION + 2].copy_from_slice(&self.version.to_le_bytes());
        page[PH_ADDRESS..PH_ADDRESS + 8].copy_from_slice(&self.address.to_le_bytes());
        page[PH_EPOCH..PH_EPOCH + 4].copy_from_slice(&self.epoch.to_le_bytes());
        page[PH_CONT_REMAINING..PH_CONT_REMAINING + 4]
            .copy_from_slice(&self.cont_remaining.to_le_bytes());
        if let Some(l) = &self.long {
            page[LH_SYSTEM_ID..LH_SYSTEM_ID + 8].copy_from_slice(&l.system_id.to_le_bytes());
            page[LH_SEGMENT_SIZE..LH_SEGMENT_SIZE + 8]
                .copy_from_slice(&l.segment_size.to_le_bytes());
            page[LH_BLOCK_SIZE..LH_BLOCK_SIZE + 4].copy_from_slice(&l.block_size.to_le_bytes());
            page[LH_RESERVED..LH_RESERVED + 4].copy_from_slice(&0u32.to_le_bytes());
        }
    }

    /// Reads a header; the long part is read when the flag says so. `None`
    /// when `page` is too short.
    pub fn decode(page: &[u8]) -> Option<PageHeader> {
        let flags = u16_at(page, PH_FLAGS)?;
        let long = if flags & PAGE_FLAG_FIRST_IN_SEGMENT != 0 {
            Some(LongHeader {
                system_id: u64_at(page, LH_SYSTEM_ID)?,
                segment_size: u64_at(page, LH_SEGMENT_SIZE)?,
                block_size: u32_at(page, LH_BLOCK_SIZE)?,
            })
        } else {
            None
        };
        Some(PageHeader {
            magic: u32_at(page, PH_MAGIC)?,
            flags,
            version: u16_at(page, PH_VERSION)?,
            address: u64_at(page, PH_ADDRESS)?,
            epoch: u32_at(page, PH_EPOCH)?,
            cont_remaining: u32_at(page, PH_CONT_REMAINING)?,
            long,
        })
    }
}

/// A record header as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Header plus payload, excluding the alignment padding.
    pub total_len: u32,
    pub kind: u8,
    pub flags: u8,
    pub reserved: u16,
    pub xid: u64,
    /// Start LSN of the previous record (0 for the very first).
    pub prev_lsn: u64,
    /// The epoch of the writer that inserted the record.
    pub epoch: u32,
    /// CRC-32C of the payload, then of header bytes 0..28.
    pub crc: u32,
}

impl RecordHeader {
    pub fn encode(&self) -> [u8; RECORD_HEADER_LEN] {
        let mut b = [0u8; RECORD_HEADER_LEN];
        b[RH_TOTAL_LEN..RH_TOTAL_LEN + 4].copy_from_slice(&self.total_len.to_le_bytes());
        b[RH_KIND] = self.kind;
        b[RH_FLAGS] = self.flags;
        b[RH_RESERVED..RH_RESERVED + 2].copy_from_slice(&self.reserved.to_le_bytes());
        b[RH_XID..RH_XID + 8].copy_from_slice(&self.xid.to_le_bytes());
        b[RH_PREV_LSN..RH_PREV_LSN + 8].copy_from_slice(&self.prev_lsn.to_le_bytes());
        b[RH_EPOCH..RH_EPOCH + 4].copy_from_slice(&self.epoch.to_le_bytes());
        b[RH_CRC..RH_CRC + 4].copy_from_slice(&self.crc.to_le_bytes());
        b
    }

    /// `None` when `b` is shorter than a header.
    pub fn decode(b: &[u8]) -> Option<RecordHeader> {
        Some(RecordHeader {
            total_len: u32_at(b, RH_TOTAL_LEN)?,
            kind: *b.get(RH_KIND)?,
            flags: *b.get(RH_FLAGS)?,
            reserved: u16_at(b, RH_RESERVED)?,
            xid: u64_at(b, RH_XID)?,
            prev_lsn: u64_at(b, RH_PREV_LSN)?,
            epoch: u32_at(b, RH_EPOCH)?,
            crc: u32_at(b, RH_CRC)?,
        })
    }

    /// The CRC this header should carry over `payload`: CRC-32C of the
    /// payload, continued over header bytes 0..28 (the CRC field itself is
    /// left out). Payload first, as PostgreSQL does, so the payload's part
    /// can be computed before the insert lock fixes `prev_lsn`.
    pub fn compute_crc(&self, payload: &[u8]) -> u32 {
        Self::crc_with_payload_crc(&self.encode(), crc32c::crc32c(payload))
    }

    /// The record CRC given the header bytes and the payload's own CRC.
    pub fn crc_with_payload_crc(header: &[u8; RECORD_HEADER_LEN], payload_crc: u32) -> u32 {
        crc32c::crc32c_append(payload_crc, &header[..RH_CRC])
    }
}

/// LSN arithmetic for one block size and segment size (both powers of
/// two), and the device sector every flush starts and ends on: a flush
/// never writes into a sector that holds durable WAL, so a torn write
/// cannot damage an acknowledged commit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub block: u64,
    pub segment: u64,
    pub sector: u64,
}

impl Geometry {
    pub fn new(cfg: &super::WalConfig) -> Geometry {
        Geometry {
            block: cfg.block_size as u64,
            segment: cfg.segment_size,
            sector: cfg.sector_size as u64,
        }
    }

    /// Offset of `lsn` within its page.
    pub fn page_offset(&self, lsn: u64) -> u64 {
        lsn & (self.block - 1)
    }

    /// LSN of the first byte of the page holding `lsn`.
    pub fn page_start(&self, lsn: u64) -> u64 {
        lsn & !(self.block - 1)
    }

    /// Segment number holding `lsn`.
    pub fn segment_of(&self, lsn: u64) -> u64 {
        lsn / self.segment
    }

    /// Offset of `lsn` within its segment file.
    pub fn segment_offset(&self, lsn: u64) -> u64 {
        lsn & (self.segment - 1)
    }

    /// Length of the header of the page starting at `page_start`.
    pub fn header_len(&self, page_start: u64) -> u64 {
        if self.segment_offset(page_start) == 0 {
            LONG_PAGE_HEADER_LEN as u64
        } else {
            SHORT_PAGE_HEADER_LEN as u64
        }
    }

    /// Where the next record goes if `pos` is a record's end: `pos`, or
    /// the next page when fewer than a record header's bytes remain.
    pub fn next_record_pos(&self, pos: u64) -> u64 {
        let off = self.page_offset(pos);
        if off != 0 && self.block - off < RECORD_HEADER_LEN as u64 {
            self.page_start(pos) + self.block
        } else {
            pos
        }
    }

    /// `Some(next record position)` when a record ending at `pos` ends a
    /// flush: the next record goes at a sector boundary.
    pub fn flush_boundary(&self, pos: u64) -> Option<u64> {
        let next = self.next_record_pos(pos);
        next.is_multiple_of(self.sector).then_some(next)
    }

    /// Blocks per segment file.
    pub fn blocks_per_segment(&self) -> u64 {
        self.segment / self.block
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::MB;
    use crate::wal::WalConfig;

    #[test]
    fn page_header_round_trip_short_and_long() {
        let short = PageHeader {
            magic: PAGE_MAGIC,
            flags: PAGE_FLAG_CONTINUATION,
            version: PAGE_HEADER_VERSION,
            address: 0x1234_5678_9000,
            epoch: 7,
            cont_remaining: 4000,
            long: None,
        };
        let mut page = vec![0u8; 1024];
        short.encode(&mut page);
        assert_eq!(&page[0..4], b"UNTW");
        assert_eq!(PageHeader::decode(&page), Some(short));
        let long = PageHeader {
            flags: PAGE_FLAG_FIRST_IN_SEGMENT,
            cont_remaining: 0,
            long: Some(LongHeader {
                system_id: 99,
                segment_size: 16 * MB,
                block_size: 8192,
            }),
            ..short
        };
        long.encode(&mut page);
        assert_eq!(PageHeader::decode(&page), Some(long));
        assert_eq!(long.header_len(), LONG_PAGE_HEADER_LEN);
        assert_eq!(PageHeader::decode(&page[..10]), None);
    }

    #[test]
    fn record_header_round_trip_and_crc() {
        let mut h = RecordHeader {
            total_len: 40,
            kind: 3,
            flags: 0,
            reserved: 0,
            xid: 17,
            prev_lsn: 48,
            epoch: 2,
            crc: 0,
        };
        let payload = b"12345678";
        h.crc = h.compute_crc(payload);
        let b = h.encode();
        assert_eq!(RecordHeader::decode(&b), Some(h));
        // The CRC covers the prev LSN.
        let mut forged = h;
        forged.prev_lsn = 56;
        assert_ne!(forged.compute_crc(payload), h.crc);
        assert_eq!(RecordHeader::decode(&b[..31]), None);
    }

    #[test]
    fn geometry() {
        let g = Geometry::new(&WalConfig {
            block_size: 8192,
            segment_size: MB,
            system_id: 1,
            epoch: 1,
            sector_size: 512,
        });
        assert_eq!(g.header_len(0), LONG_PAGE_HEADER_LEN as u64);
        assert_eq!(g.header_len(8192), SHORT_PAGE_HEADER_LEN as u64);
        assert_eq!(g.header_len(MB), LONG_PAGE_HEADER_LEN as u64);
        assert_eq!(g.segment_of(MB + 5), 1);
        assert_eq!(g.segment_offset(MB + 5), 5);
        assert_eq!(g.page_start(8195), 8192);
        assert_eq!(align_up(33), 40);
        assert_eq!(g.flush_boundary(1024), Some(1024));
        assert_eq!(g.flush_boundary(1016), None);
        assert_eq!(g.flush_boundary(8192 - 24), Some(8192));
        assert_eq!(g.flush_boundary(8192 - 32), None);
        // A sector larger than a block: boundaries only every 4 KB.
        let g4 = Geometry {
            block: 1024,
            sector: 4096,
            ..g
        };
        assert_eq!(g4.flush_boundary(1024 - 24), None);
        assert_eq!(g4.flush_boundary(4096 - 24), Some(4096));
        assert_eq!(g4.flush_boundary(4096), Some(4096));
    }
}
