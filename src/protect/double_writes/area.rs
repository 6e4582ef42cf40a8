//! The double-write area's bytes (docs/FORMAT.md, "The double-write area"):
//! encoding a shard's file header and a batch, and scanning a shard file's
//! bytes back into the copies recovery may use.
//!
//! Rules:
//! - Scanning never panics on any bytes. A torn batch header, an image
//!   failing its CRC, a file cut short: skipped and counted, because a batch
//!   is fsynced before any of its pages is written in place, so a damaged one
//!   was never relied on. Only a file header that cannot be read is an error
//!   (naming the file): shard files are created whole, so it is corruption.
//! - A slot whose descriptor is intact but whose image is not is still
//!   reported ([`DamagedSlot`]): recovery needs to know a bad page had a copy
//!   that cannot help, to name it in its error.

use crate::error::{Error, Result};
use crate::lsn::Lsn;
use crate::page::{OFF_BLOCK, OFF_FILE_ID, OFF_LSN};
use crate::settings::PAGE_SIZES;
use std::path::{Path, PathBuf};

/// First bytes of a shard file.
pub const FILE_MAGIC: &[u8; 8] = b"UNTORNDW";
/// First bytes of a batch header block.
pub const BATCH_MAGIC: &[u8; 8] = b"UNTORNDB";
/// The area's format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// The directory of the shard files, under the database directory.
pub const AREA_DIR: &str = "dw";

/// The file of deferred pages, in the area's directory.
pub const DEFERRED_FILE: &str = "deferred";

/// The file header is one sector, so it is never torn after creation.
const FILE_HEADER_LEN: usize = 512;
const FILE_HEADER_CRC_AT: usize = FILE_HEADER_LEN - 4;
/// Batch header fields before the slot array.
const BATCH_FIXED_LEN: usize = 32;
/// One slot descriptor.
const SLOT_LEN: usize = 24;

/// Which writer a shard belongs to: one shard per writer kind, so writers
/// never queue on one lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shard {
    Checkpointer = 0,
    BackgroundWriter = 1,
    ClientEvictions = 2,
}

impl Shard {
    pub const ALL: [Shard; 3] = [
        Shard::Checkpointer,
        Shard::BackgroundWriter,
        Shard::ClientEvictions,
    ];

    /// The number stored on disk and in the file name.
    pub fn number(self) -> u32 {
        self as u32
    }

    pub fn from_number(n: u32) -> Option<Shard> {
        Shard::ALL.into_iter().find(|s| s.number() == n)
    }

    /// `DIR/dw/shard-<n>`.
    pub fn path(self, dir: &Path) -> PathBuf {
        dir.join(AREA_DIR).join(format!("shard-{}", self.number()))
    }
}

/// Pages one batch header can describe at `page_size`.
pub fn slots_per_batch(page_size: usize) -> usize {
    (page_size - BATCH_FIXED_LEN - 4) / SLOT_LEN
}

fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}
fn get_u64(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}
fn put_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// A shard file's header (block 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    pub page_size: u32,
    /// Blocks after the header: `double_write_buffer_size / page_size`.
    pub area_blocks: u32,
    pub shard: Shard,
    /// The control file's system id.
    pub system_id: u64,
}

impl FileHeader {
    /// Block 0 of the shard file: `page_size` bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; self.page_size as usize];
        b[0..8].copy_from_slice(FILE_MAGIC);
        put_u32(&mut b, 8, FORMAT_VERSION);
        put_u32(&mut b, 12, self.page_size);
        put_u32(&mut b, 16, self.area_blocks);
        put_u32(&mut b, 20, self.shard.number());
        put_u64(&mut b, 24, self.system_id);
        let crc = crc32c::crc32c(&b[..FILE_HEADER_CRC_AT]);
        put_u32(&mut b, FILE_HEADER_CRC_AT, crc);
        b
    }

    /// Reads the header at the start of `bytes`, the contents of `path`.
    pub fn decode(path: &Path, bytes: &[u8]) -> Result<FileHeader> {
        let bad = |offset: usize, detail: String| {
            Error::corruption(
                path,
                format!("offset {offset}"),
                format!("double-write file header: {detail}"),
            )
        };
        if bytes.len() < FILE_HEADER_LEN {
            return Err(bad(
                0,
                format!("the file has {} bytes, fewer than its header", bytes.len()),
            ));
        }
        if &bytes[0..8] != FILE_MAGIC {
            return Err(bad(0, "no UNTORNDW magic: not a double-write file".into()));
        }
        let stored = get_u32(bytes, FILE_HEADER_CRC_AT);
        let calculated = crc32c::crc32c(&bytes[..FILE_HEADER_CRC_AT]);
        if stored != calculated {
            return Err(bad(
                FILE_HEADER_CRC_AT,
                format!("CRC mismatch: calculated {calculated:#x}, stored {stored:#x}"),
            ));
        }
        let version = get_u32(bytes, 8);
        if version != FORMAT_VERSION {
            return Err(bad(
                8,
                format!("format version {version} (this build reads {FORMAT_VERSION})"),
            ));
        }
        let page_size = get_u32(bytes, 12);
        if !PAGE_SIZES.contains(&page_size) {
            return Err(bad(12, format!("page size {page_size}")));
        }
        let shard_no = get_u32(bytes, 20);
        let shard =
            Shard::from_number(shard_no).ok_or_else(|| bad(20, format!("shard {shard_no}")))?;
        Ok(FileHeader {
            page_size,
            area_blocks: get_u32(bytes, 16),
            shard,
            system_id: get_u64(bytes, 24),
        })
    }
}

/// One page of a batch to encode.
#[derive(Clone, Copy, Debug)]
pub struct BatchPage<'a> {
    pub file_id: u32,
    pub block: u32,
    pub lsn: Lsn,
    /// The page as it is to be written in place (checksum set).
    pub image: &'a [u8],
}

/// Encodes a batch to be written at area block `position` of `shard`'s
/// file: its header block, then the images, `(1 + pages.len()) * page_size`
/// bytes, for one sequential write.
pub fn encode_batch(
    shard: Shard,
    batch_seq: u64,
    position: u32,
    page_size: usize,
    pages: &[BatchPage<'_>],
) -> Result<Vec<u8>> {
    let mut out = encode_batch_header(shard, batch_seq, position, page_size, pages)?;
    for p in pages {
        out.extend_from_slice(p.image);
    }
    Ok(out)
}

/// The header block of [`encode_batch`] alone (`page_size` bytes): the
/// write path hands the images to one vectored write after it, uncopied.
pub fn encode_batch_header(
    shard: Shard,
    batch_seq: u64,
    position: u32,
    page_size: usize,
    pages: &[BatchPage<'_>],
) -> Result<Vec<u8>> {
    let cap = slots_per_batch(page_size);
    if pages.is_empty() || pages.len() > cap {
        return Err(Error::Invalid(format!(
            "a double-write batch holds 1 to {cap} pages of {page_size} bytes, not {}",
            pages.len()
        )));
    }
    if position == 0 {
        return Err(Error::Invalid(
            "a double-write batch cannot overwrite the file header (block 0)".into(),
        ));
    }
    let mut header = vec![0u8; page_size];
    header[0..8].copy_from_slice(BATCH_MAGIC);
    put_u32(&mut header, 8, shard.number());
    put_u32(&mut header, 12, pages.len() as u32);
    put_u64(&mut header, 16, batch_seq);
    put_u32(&mut header, 24, position);
    for (i, p) in pages.iter().enumerate() {
        if p.image.len() != page_size {
            return Err(Error::Invalid(format!(
                "double-write image of file {} block {} has {} bytes, not {page_size}",
                p.file_id,
                p.block,
                p.image.len()
            )));
        }
        let s = BATCH_FIXED_LEN + i * SLOT_LEN;
        put_u32(&mut header, s, p.file_id);
        put_u32(&mut header, s + 4, p.block);
        put_u64(&mut header, s + 8, p.lsn.0);
        put_u32(&mut header, s + 16, crc32c::crc32c(p.image));
    }
    let crc = crc32c::crc32c(&header[..page_size - 4]);
    put_u32(&mut header, page_size - 4, crc);
    Ok(header)
}

/// A valid page copy found in the area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotCopy {
    pub file_id: u32,
    pub block: u32,
    pub lsn: Lsn,
    pub batch_seq: u64,
    pub image: CopyImage,
}

/// Where a copy's bytes are at recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyImage {
    /// Read with its shard (a shard is `double_write_buffer_size`).
    Held(Vec<u8>),
    /// In a slot of `dw/deferred`, with the CRC-32C it was found with:
    /// read again only if restored, because the file may hold a gigabyte
    /// and recovery must not need as much memory.
    DeferredSlot { slot: u32, crc: u32 },
}

/// Why a slot with an intact descriptor gave no copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotDamage {
    /// The image fails its CRC: torn, or overwritten by a later batch.
    ImageCrc,
    /// The image lies past the end of the file or of the area.
    BeyondEnd,
    /// The image's page header names another page or LSN than the slot.
    WrongPage,
}

/// A slot whose descriptor is intact but whose image is not usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DamagedSlot {
    pub file_id: u32,
    pub block: u32,
    pub lsn: Lsn,
    pub batch_seq: u64,
    pub damage: SlotDamage,
}

/// What one shard file held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardScan {
    pub header: FileHeader,
    pub copies: Vec<SlotCopy>,
    pub damaged: Vec<DamagedSlot>,
    /// Batch headers that passed every check.
    pub batches: u64,
    /// Blocks starting with the batch magic that failed a check (a torn or
    /// misplaced header): their slots are unknown.
    pub headers_damaged: u64,
    /// The highest batch sequence among valid headers (0 if none).
    pub max_batch_seq: u64,
}

/// What the database expects of a shard file.
#[derive(Clone, Copy, Debug)]
pub struct Expect {
    pub page_size: u32,
    pub system_id: u64,
    pub shard: Shard,
}

/// Scans the contents of `path` (a shard file) into its valid copies.
/// Errors only when the file header is unreadable or belongs elsewhere.
pub fn scan_shard(path: &Path, bytes: &[u8], expect: &Expect) -> Result<ShardScan> {
    let header = FileHeader::decode(path, bytes)?;
    let mismatch = |what: &str, found: String, wanted: String| {
        Error::corruption(
            path,
            "offset 0",
            format!("double-write file header: {what} {found}, but the database has {wanted}"),
        )
    };
    if header.page_size != expect.page_size {
        return Err(mismatch(
            "page size",
            header.page_size.to_string(),
            expect.page_size.to_string(),
        ));
    }
    if header.system_id != expect.system_id {
        return Err(mismatch(
            "system id",
            format!("{:#x}", header.system_id),
            format!("{:#x}", expect.system_id),
        ));
    }
    if header.shard != expect.shard {
        return Err(mismatch(
            "shard",
            header.shard.number().to_string(),
            format!("shard {} (the file name)", expect.shard.number()),
        ));
    }
    let ps = header.page_size as usize;
    let blocks = bytes.chunks_exact(ps).collect::<Vec<_>>();
    // Images and headers live in blocks 1 ..= area_blocks and within the file.
    let end = blocks.len().min(1 + header.area_blocks as usize);
    let mut scan = ShardScan {
        header,
        copies: Vec::new(),
        damaged: Vec::new(),
        batches: 0,
        headers_damaged: 0,
        max_batch_seq: 0,
    };
    let cap = slots_per_batch(ps);
    // Every block is a candidate header: stale batches partly overwritten by
    // later ones are found too, and their overwritten images fail the CRC.
    for (pos, b) in blocks.iter().enumerate().take(end).skip(1) {
        if &b[0..8] != BATCH_MAGIC {
            continue;
        }
        let crc_ok = get_u32(b, ps - 4) == crc32c::crc32c(&b[..ps - 4]);
        let n = get_u32(b, 12) as usize;
        if !crc_ok
            || get_u32(b, 8) != expect.shard.number()
            || get_u32(b, 24) as usize != pos
            || n == 0
            || n > cap
        {
            scan.headers_damaged += 1;
            continue;
        }
        let batch_seq = get_u64(b, 16);
        scan.batches += 1;
        scan.max_batch_seq = scan.max_batch_seq.max(batch_seq);
        for i in 0..n {
            let s = BATCH_FIXED_LEN + i * SLOT_LEN;
            let (file_id, block, lsn) = (get_u32(b, s), get_u32(b, s + 4), Lsn(get_u64(b, s + 8)));
            let image_crc = get_u32(b, s + 16);
            let image = blocks.get(pos + 1 + i).filter(|_| pos + 1 + i < end);
            match check_image(image.map(|b| &b[..]), file_id, block, lsn, image_crc) {
                Some(damage) => scan.damaged.push(DamagedSlot {
                    file_id,
                    block,
                    lsn,
                    batch_seq,
                    damage,
                }),
                None => scan.copies.push(SlotCopy {
                    file_id,
                    block,
                    lsn,
                    batch_seq,
                    image: CopyImage::Held(blocks[pos + 1 + i].to_vec()),
                }),
            }
        }
    }
    Ok(scan)
}

/// Whether `image` (None: past the end of its file) is the copy a
/// descriptor names: page `(file_id, block)` at `lsn`, with CRC-32C
/// `image_crc`.
pub fn check_image(
    image: Option<&[u8]>,
    file_id: u32,
    block: u32,
    lsn: Lsn,
    image_crc: u32,
) -> Option<SlotDamage> {
    match image {
        None => Some(SlotDamage::BeyondEnd),
        Some(img) if crc32c::crc32c(img) != image_crc => Some(SlotDamage::ImageCrc),
        Some(img)
            if get_u32(img, OFF_FILE_ID) != file_id
                || get_u32(img, OFF_BLOCK) != block
                || get_u64(img, OFF_LSN) != lsn.0 =>
        {
            Some(SlotDamage::WrongPage)
        }
        Some(_) => None,
    }
}

#[cfg(test)]
#[path = "area_tests.rs"]
mod tests;
