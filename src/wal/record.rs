//! What a WAL record carries: its kind, its transaction, the pages it touches
//! (block references, as in PostgreSQL) and its main data.
//!
//! The payload layout is the same for every kind, so a tool can list the
//! pages a record touches (and whether it carries a full-page image) without
//! knowing the kind. Little-endian:
//!
//! ```text
//! u16 block_count, u16 reserved (0)
//! block_count x 24-byte descriptor (see BD_* offsets)
//! u32 main_len, main_len bytes of main data
//! for each block in order: its image bytes, then its data bytes
//! ```
//!
//! Decoding checks every length against the payload and fails with a
//! corruption error naming the record's LSN; it never panics.

use crate::error::{Error, Result};
use crate::lsn::Lsn;
use std::fmt;
use std::path::Path;

/// What a record does. The byte is stored in the record header.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordKind {
    /// Does nothing (tests and tools).
    Noop = 1,
    /// A checkpoint (its redo point in the main data).
    Checkpoint = 2,
    /// A transaction committed.
    Commit = 3,
    /// A transaction aborted.
    Abort = 4,
    /// A generic change to one or more pages (block references carry what).
    PageWrite = 10,
    /// A self-contained structure change (a split), always replayed.
    StructureChange = 11,
}

impl RecordKind {
    /// Every kind, in code order.
    pub const ALL: [RecordKind; 6] = [
        RecordKind::Noop,
        RecordKind::Checkpoint,
        RecordKind::Commit,
        RecordKind::Abort,
        RecordKind::PageWrite,
        RecordKind::StructureChange,
    ];

    /// The kind stored as `code`, if it is one this version knows.
    pub fn from_u8(code: u8) -> Option<RecordKind> {
        RecordKind::ALL.into_iter().find(|k| *k as u8 == code)
    }

    pub fn name(self) -> &'static str {
        match self {
            RecordKind::Noop => "noop",
            RecordKind::Checkpoint => "checkpoint",
            RecordKind::Commit => "commit",
            RecordKind::Abort => "abort",
            RecordKind::PageWrite => "page_write",
            RecordKind::StructureChange => "structure_change",
        }
    }
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a full-page image is compressed (the codecs come in a later issue;
/// the code is carried as is).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageCompression {
    None = 0,
    Lz4 = 1,
    Zstd = 2,
}

impl ImageCompression {
    pub fn from_u8(code: u8) -> Option<ImageCompression> {
        match code {
            0 => Some(ImageCompression::None),
            1 => Some(ImageCompression::Lz4),
            2 => Some(ImageCompression::Zstd),
            _ => None,
        }
    }
}

/// A full-page image: the page without its hole (the free space between
/// the line pointers and the tuples), possibly compressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageImage {
    pub bytes: Vec<u8>,
    pub hole_offset: u16,
    pub hole_length: u16,
    pub compression: ImageCompression,
}

/// A page a record touches: which page, its image if the record carries
/// one, and kind-specific data for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRef {
    pub file_id: u32,
    pub block: u32,
    pub image: Option<PageImage>,
    pub data: Vec<u8>,
}

/// A record as the engine builds it and as the reader returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordData {
    pub kind: RecordKind,
    pub xid: u64,
    pub blocks: Vec<BlockRef>,
    pub main: Vec<u8>,
}

/// Offsets in the payload.
pub const PL_BLOCK_COUNT: usize = 0;
pub const PL_RESERVED: usize = 2;
pub const PL_DESCRIPTORS: usize = 4;
/// Offsets in a block descriptor.
pub const BD_FILE_ID: usize = 0;
pub const BD_BLOCK: usize = 4;
pub const BD_FLAGS: usize = 8;
pub const BD_COMPRESSION: usize = 9;
pub const BD_HOLE_OFFSET: usize = 10;
pub const BD_HOLE_LENGTH: usize = 12;
pub const BD_RESERVED: usize = 14;
pub const BD_IMAGE_LEN: usize = 16;
pub const BD_DATA_LEN: usize = 20;
/// Length of a block descriptor.
pub const BLOCK_DESCRIPTOR_LEN: usize = 24;
/// Descriptor flag: the block carries a full-page image.
pub const BD_FLAG_IMAGE: u8 = 0x01;
/// Length of the main-data length field.
pub const MAIN_LEN_LEN: usize = 4;

const _: () = assert!(BD_DATA_LEN + 4 == BLOCK_DESCRIPTOR_LEN);
const _: () = assert!(PL_RESERVED + 2 == PL_DESCRIPTORS);

impl RecordData {
    /// A record with no block references and no main data.
    pub fn new(kind: RecordKind, xid: u64) -> RecordData {
        RecordData {
            kind,
            xid,
            blocks: Vec::new(),
            main: Vec::new(),
        }
    }

    /// A record with main data only.
    pub fn with_main(kind: RecordKind, xid: u64, main: Vec<u8>) -> RecordData {
        RecordData {
            main,
            ..RecordData::new(kind, xid)
        }
    }

    /// Full-page images carried, and their bytes (pg_stat_wal's wal_fpi).
    pub fn images(&self) -> (u64, u64) {
        self.blocks
            .iter()
            .filter_map(|b| b.image.as_ref())
            .fold((0, 0), |(n, bytes), i| {
                (n + 1, bytes + i.bytes.len() as u64)
            })
    }

    /// The payload's length once encoded.
    pub fn encoded_len(&self) -> usize {
        let per_block: usize = self
            .blocks
            .iter()
            .map(|b| {
                BLOCK_DESCRIPTOR_LEN + b.data.len() + b.image.as_ref().map_or(0, |i| i.bytes.len())
            })
            .sum();
        PL_DESCRIPTORS + per_block + MAIN_LEN_LEN + self.main.len()
    }

    /// Encodes the payload. Fails (without panicking) when a count or a
    /// length does not fit its field.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let count = u16::try_from(self.blocks.len()).map_err(|_| {
            Error::Invalid(format!(
                "a WAL record may reference at most {} blocks, not {}",
                u16::MAX,
                self.blocks.len()
            ))
        })?;
        let len32 = |what: &str, n: usize| {
            u32::try_from(n)
                .map_err(|_| Error::Invalid(format!("WAL record {what} of {n} bytes is too long")))
        };
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        for b in &self.blocks {
            let mut d = [0u8; BLOCK_DESCRIPTOR_LEN];
            d[BD_FILE_ID..BD_FILE_ID + 4].copy_from_slice(&b.file_id.to_le_bytes());
            d[BD_BLOCK..BD_BLOCK + 4].copy_from_slice(&b.block.to_le_bytes());
            if let Some(img) = &b.image {
                d[BD_FLAGS] = BD_FLAG_IMAGE;
                d[BD_COMPRESSION] = img.compression as u8;
                d[BD_HOLE_OFFSET..BD_HOLE_OFFSET + 2]
                    .copy_from_slice(&img.hole_offset.to_le_bytes());
                d[BD_HOLE_LENGTH..BD_HOLE_LENGTH + 2]
                    .copy_from_slice(&img.hole_length.to_le_bytes());
                let n = len32("page image", img.bytes.len())?;
                d[BD_IMAGE_LEN..BD_IMAGE_LEN + 4].copy_from_slice(&n.to_le_bytes());
            }
            let n = len32("block data", b.data.len())?;
            d[BD_DATA_LEN..BD_DATA_LEN + 4].copy_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&d);
        }
        out.extend_from_slice(&len32("main data", self.main.len())?.to_le_bytes());
        out.extend_from_slice(&self.main);
        for b in &self.blocks {
            if let Some(img) = &b.image {
                out.extend_from_slice(&img.bytes);
            }
            out.extend_from_slice(&b.data);
        }
        debug_assert_eq!(out.len(), self.encoded_len());
        Ok(out)
    }

    /// Decodes a payload read from the record at `lsn` in `path` (both only
    /// name the place in errors).
    pub fn decode(
        kind: RecordKind,
        xid: u64,
        payload: &[u8],
        path: &Path,
        lsn: Lsn,
    ) -> Result<RecordData> {
        decode_payload(kind, xid, payload).map_err(|detail| {
            Error::corruption(
                path,
                format!("LSN {lsn}"),
                format!("malformed {kind} record payload: {detail}"),
            )
        })
    }
}

/// A cursor that refuses to read past the end.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> std::result::Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| {
            format!(
                "{what} of {n} bytes at payload offset {} runs past the payload's {} bytes",
                self.pos,
                self.bytes.len()
            )
        })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> std::result::Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

fn le16(d: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([d[off], d[off + 1]])
}

fn le32(d: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([d[off], d[off + 1], d[off + 2], d[off + 3]])
}

/// The descriptor fields that say where a block's bytes are.
struct Descriptor {
    file_id: u32,
    block: u32,
    image: Option<(ImageCompression, u16, u16, usize)>,
    data_len: usize,
}

fn decode_descriptor(i: usize, d: &[u8]) -> std::result::Result<Descriptor, String> {
    let flags = d[BD_FLAGS];
    if flags & !BD_FLAG_IMAGE != 0 {
        return Err(format!("block {i}: unknown flags {flags:#04x}"));
    }
    if le16(d, BD_RESERVED) != 0 {
        return Err(format!("block {i}: reserved field is not zero"));
    }
    let (code, hole_offset, hole_length) = (
        d[BD_COMPRESSION],
        le16(d, BD_HOLE_OFFSET),
        le16(d, BD_HOLE_LENGTH),
    );
    let image_len = le32(d, BD_IMAGE_LEN) as usize;
    let image = if flags & BD_FLAG_IMAGE != 0 {
        let c = ImageCompression::from_u8(code)
            .ok_or_else(|| format!("block {i}: unknown image compression {code}"))?;
        if hole_offset as u32 + hole_length as u32 > u16::MAX as u32 + 1 {
            return Err(format!(
                "block {i}: hole {hole_offset}+{hole_length} past 64 KB"
            ));
        }
        Some((c, hole_offset, hole_length, image_len))
    } else {
        if code != 0 || hole_offset != 0 || hole_length != 0 || image_len != 0 {
            return Err(format!("block {i}: image fields set without an image"));
        }
        None
    };
    Ok(Descriptor {
        file_id: le32(d, BD_FILE_ID),
        block: le32(d, BD_BLOCK),
        image,
        data_len: le32(d, BD_DATA_LEN) as usize,
    })
}

fn decode_payload(
    kind: RecordKind,
    xid: u64,
    payload: &[u8],
) -> std::result::Result<RecordData, String> {
    let mut c = Cursor {
        bytes: payload,
        pos: 0,
    };
    let head = c.take(PL_DESCRIPTORS, "payload head")?;
    let count = le16(head, PL_BLOCK_COUNT) as usize;
    if le16(head, PL_RESERVED) != 0 {
        return Err("payload reserved field is not zero".into());
    }
    let mut descs = Vec::with_capacity(count.min(payload.len() / BLOCK_DESCRIPTOR_LEN));
    for i in 0..count {
        let d = c.take(BLOCK_DESCRIPTOR_LEN, "block descriptor")?;
        descs.push(decode_descriptor(i, d)?);
    }
    let main_len = c.u32("main data length")? as usize;
    let main = c.take(main_len, "main data")?.to_vec();
    let mut blocks = Vec::with_capacity(descs.len());
    for d in descs {
        let image = match d.image {
            Some((compression, hole_offset, hole_length, len)) => Some(PageImage {
                bytes: c.take(len, "page image")?.to_vec(),
                hole_offset,
                hole_length,
                compression,
            }),
            None => None,
        };
        let data = c.take(d.data_len, "block data")?.to_vec();
        blocks.push(BlockRef {
            file_id: d.file_id,
            block: d.block,
            image,
            data,
        });
    }
    if c.pos != payload.len() {
        return Err(format!(
            "{} bytes left over after the payload's {} bytes",
            payload.len() - c.pos,
            c.pos
        ));
    }
    Ok(RecordData {
        kind,
        xid,
        blocks,
        main,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> RecordData {
        RecordData {
            kind: RecordKind::PageWrite,
            xid: 42,
            blocks: vec![
                BlockRef {
                    file_id: 1,
                    block: 7,
                    image: Some(PageImage {
                        bytes: vec![9; 100],
                        hole_offset: 40,
                        hole_length: 8000,
                        compression: ImageCompression::Lz4,
                    }),
                    data: vec![1, 2, 3],
                },
                BlockRef {
                    file_id: 2,
                    block: 0,
                    image: None,
                    data: vec![],
                },
            ],
            main: b"main".to_vec(),
        }
    }

    #[test]
    fn round_trip() {
        let r = sample();
        let bytes = r.encode().unwrap();
        assert_eq!(bytes.len(), r.encoded_len());
        let back = RecordData::decode(r.kind, r.xid, &bytes, Path::new("w"), Lsn(1)).unwrap();
        assert_eq!(back, r);
        assert_eq!(r.images(), (1, 100));
        let empty = RecordData::new(RecordKind::Commit, 1);
        let bytes = empty.encode().unwrap();
        assert_eq!(bytes.len(), PL_DESCRIPTORS + MAIN_LEN_LEN);
        assert_eq!(
            RecordData::decode(empty.kind, 1, &bytes, Path::new("w"), Lsn(1)).unwrap(),
            empty
        );
    }

    #[test]
    fn malformed_payloads_are_corruption_errors() {
        let bytes = sample().encode().unwrap();
        let p = Path::new("wal/0000000000000000");
        for cut in [0, 3, 10, bytes.len() - 1] {
            let e = RecordData::decode(RecordKind::PageWrite, 1, &bytes[..cut], p, Lsn(0x30))
                .unwrap_err()
                .to_string();
            assert!(e.contains("0/30") && e.contains("corruption"), "{e}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(RecordData::decode(RecordKind::PageWrite, 1, &long, p, Lsn(1)).is_err());
        let mut bad_flags = bytes.clone();
        bad_flags[PL_DESCRIPTORS + BD_FLAGS] = 0x80;
        assert!(RecordData::decode(RecordKind::PageWrite, 1, &bad_flags, p, Lsn(1)).is_err());
        let mut bad_codec = bytes;
        bad_codec[PL_DESCRIPTORS + BD_COMPRESSION] = 9;
        assert!(RecordData::decode(RecordKind::PageWrite, 1, &bad_codec, p, Lsn(1)).is_err());
    }

    #[test]
    fn kinds() {
        for k in RecordKind::ALL {
            assert_eq!(RecordKind::from_u8(k as u8), Some(k));
        }
        assert_eq!(RecordKind::from_u8(0), None);
        assert_eq!(RecordKind::PageWrite as u8, 10);
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = RecordData::decode(RecordKind::Noop, 0, &bytes, Path::new("w"), Lsn(8));
        }

        #[test]
        fn encode_decode_round_trip(
            main in proptest::collection::vec(any::<u8>(), 0..64),
            blocks in proptest::collection::vec(
                (any::<u32>(), any::<u32>(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
                 proptest::collection::vec(any::<u8>(), 0..32)),
                0..5),
        ) {
            let r = RecordData {
                kind: RecordKind::PageWrite,
                xid: 3,
                blocks: blocks.into_iter().map(|(file_id, block, img, data)| BlockRef {
                    file_id,
                    block,
                    image: img.map(|bytes| PageImage { bytes, hole_offset: 24, hole_length: 100, compression: ImageCompression::None }),
                    data,
                }).collect(),
                main,
            };
            let bytes = r.encode().unwrap();
            prop_assert_eq!(RecordData::decode(r.kind, 3, &bytes, Path::new("w"), Lsn(8)).unwrap(), r);
        }
    }
}
