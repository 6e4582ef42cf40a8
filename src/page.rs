//! The page: a fixed-size block of a data file with a versioned header.
//!
//! Rules:
//! - Every page starts with a 32-byte header (docs/FORMAT.md, "Page header")
//!   naming the file id and block number it belongs to, so a write that
//!   landed in the wrong file or block is caught on read even when its
//!   checksum is internally fine.
//! - The checksum is computed over the whole page (the free hole too: a
//!   non-zero hole shows up as a failure) with the checksum field counted as
//!   zero, mixed with the block number, when the page is written; it is
//!   verified on every read.
//! - An all-zero page is "new": accepted unchecked. (The buffer pool accepts
//!   it only beyond the file's known size.)
//! - Bytes read from disk never panic: every check returns a [`PageError`].

use crate::checksum::{is_all_zero, page_checksum};
use crate::lsn::Lsn;
use crate::settings::ChecksumAlgorithm;

/// Size of the page header in bytes.
pub const PAGE_HEADER_SIZE: usize = 32;
/// The page layout version this build writes and reads.
pub const PAGE_LAYOUT_VERSION: u8 = 1;

// Header field offsets (docs/FORMAT.md).
pub const OFF_LSN: usize = 0;
pub const OFF_CHECKSUM: usize = 8;
pub const OFF_FLAGS: usize = 12;
pub const OFF_LAYOUT_VERSION: usize = 14;
pub const OFF_PAGE_SIZE_LOG2: usize = 15;
pub const OFF_LOWER: usize = 16;
pub const OFF_UPPER: usize = 18;
pub const OFF_SPECIAL: usize = 20;
pub const OFF_KIND: usize = 22;
pub const OFF_FILE_ID: usize = 24;
pub const OFF_BLOCK: usize = 28;
const _: () = assert!(OFF_BLOCK + 4 == PAGE_HEADER_SIZE);
const _: () = assert!(OFF_CHECKSUM + 4 == OFF_FLAGS);

/// What a page holds. Stored as a u16; unknown values are corruption.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum PageKind {
    /// A freed page, ready for reuse.
    Free = 0,
    /// A file's first page: what the file is and where its root lives.
    Meta = 1,
    /// A B+tree leaf.
    Leaf = 2,
    /// A B+tree inner node.
    Inner = 3,
    /// Raw bytes (tools and tests).
    Raw = 4,
}

impl PageKind {
    pub fn from_u16(v: u16) -> Option<PageKind> {
        Some(match v {
            0 => PageKind::Free,
            1 => PageKind::Meta,
            2 => PageKind::Leaf,
            3 => PageKind::Inner,
            4 => PageKind::Raw,
            _ => return None,
        })
    }
}

/// The header of a page, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    pub lsn: Lsn,
    pub checksum: u32,
    pub flags: u16,
    pub layout_version: u8,
    pub page_size: u32,
    pub lower: u16,
    pub upper: u16,
    pub special: u16,
    pub kind: PageKind,
    pub file_id: u32,
    pub block: u32,
}

/// Why a page read from disk was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageError {
    /// The stored checksum differs from the one computed.
    Checksum { calculated: u32, stored: u32 },
    /// The header names another file or block: a misdirected write.
    WrongAddress {
        expected_file: u32,
        expected_block: u32,
        found_file: u32,
        found_block: u32,
    },
    /// The header itself is impossible.
    BadHeader(String),
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageError::Checksum { calculated, stored } => write!(
                f,
                "checksum mismatch: calculated {calculated:#x}, stored {stored:#x}"
            ),
            PageError::WrongAddress {
                expected_file,
                expected_block,
                found_file,
                found_block,
            } => write!(
                f,
                "page belongs to file {found_file} block {found_block}, \
                 not file {expected_file} block {expected_block} (misdirected write)"
            ),
            PageError::BadHeader(detail) => write!(f, "bad page header: {detail}"),
        }
    }
}

/// The outcome of a successful page check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageState {
    /// All zeros: never written.
    New,
    /// Header and checksum valid.
    Valid,
}

fn get_u16(p: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([p[off], p[off + 1]])
}
fn get_u32(p: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(p[off..off + 4].try_into().expect("4 bytes"))
}
fn put_u16(p: &mut [u8], off: usize, v: u16) {
    p[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(p: &mut [u8], off: usize, v: u32) {
    p[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// Formats an empty page in `buf`: header, free space from the header to the
/// special area of `special_size` bytes at the end.
pub fn init_page(buf: &mut [u8], kind: PageKind, file_id: u32, block: u32, special_size: usize) {
    let size = buf.len();
    assert!(
        crate::settings::PAGE_SIZES.contains(&(size as u32)),
        "page size {size}"
    );
    assert!(special_size <= size - PAGE_HEADER_SIZE);
    buf.fill(0);
    buf[OFF_LAYOUT_VERSION] = PAGE_LAYOUT_VERSION;
    buf[OFF_PAGE_SIZE_LOG2] = size.trailing_zeros() as u8;
    // lower/upper/special are u16; a 32 KB page's end (32768) fits.
    put_u16(buf, OFF_LOWER, PAGE_HEADER_SIZE as u16);
    put_u16(buf, OFF_UPPER, (size - special_size) as u16);
    put_u16(buf, OFF_SPECIAL, (size - special_size) as u16);
    put_u16(buf, OFF_KIND, kind as u16);
    put_u32(buf, OFF_FILE_ID, file_id);
    put_u32(buf, OFF_BLOCK, block);
}

/// The page LSN.
pub fn page_lsn(buf: &[u8]) -> Lsn {
    Lsn(u64::from_le_bytes(
        buf[OFF_LSN..OFF_LSN + 8].try_into().expect("8 bytes"),
    ))
}

/// Sets the page LSN. A page's LSN never goes backwards.
pub fn set_page_lsn(buf: &mut [u8], lsn: Lsn) {
    assert!(
        lsn >= page_lsn(buf),
        "page LSN would go backwards: {} -> {lsn}",
        page_lsn(buf)
    );
    buf[OFF_LSN..OFF_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
}

/// Free-space pointers (lower, upper).
pub fn lower_upper(buf: &[u8]) -> (u16, u16) {
    (get_u16(buf, OFF_LOWER), get_u16(buf, OFF_UPPER))
}

/// Sets the free-space pointers.
pub fn set_lower_upper(buf: &mut [u8], lower: u16, upper: u16) {
    assert!(
        lower as usize >= PAGE_HEADER_SIZE && lower <= upper && upper <= get_u16(buf, OFF_SPECIAL)
    );
    put_u16(buf, OFF_LOWER, lower);
    put_u16(buf, OFF_UPPER, upper);
}

/// Computes and stores the checksum. Called on the copy that is written, as
/// the last step before the write.
pub fn set_checksum(buf: &mut [u8], alg: ChecksumAlgorithm) {
    let block = get_u32(buf, OFF_BLOCK);
    let sum = page_checksum(alg, buf, block);
    put_u32(buf, OFF_CHECKSUM, sum);
}

/// [`set_checksum`], and the plain CRC-32C of the stamped page where it
/// comes from the same pass (`crc32c` checksums); `None` otherwise.
pub fn set_checksum_and_image_crc(buf: &mut [u8], alg: ChecksumAlgorithm) -> Option<u32> {
    if alg != ChecksumAlgorithm::Crc32c {
        set_checksum(buf, alg);
        return None;
    }
    let block = get_u32(buf, OFF_BLOCK);
    let (sum, image_crc) = crate::checksum::crc::page_crc32c_and_image_crc(buf, block);
    put_u32(buf, OFF_CHECKSUM, sum);
    Some(image_crc)
}

/// Decodes the header without checking it against a file or block.
pub fn read_header(buf: &[u8]) -> Result<PageHeader, PageError> {
    if buf.len() < PAGE_HEADER_SIZE {
        return Err(PageError::BadHeader(format!("page of {} bytes", buf.len())));
    }
    let kind_raw = get_u16(buf, OFF_KIND);
    let kind = PageKind::from_u16(kind_raw)
        .ok_or_else(|| PageError::BadHeader(format!("unknown page kind {kind_raw}")))?;
    let log2 = buf[OFF_PAGE_SIZE_LOG2];
    if !(12..=15).contains(&log2) {
        return Err(PageError::BadHeader(format!("page size code {log2}")));
    }
    Ok(PageHeader {
        lsn: page_lsn(buf),
        checksum: get_u32(buf, OFF_CHECKSUM),
        flags: get_u16(buf, OFF_FLAGS),
        layout_version: buf[OFF_LAYOUT_VERSION],
        page_size: 1 << log2,
        lower: get_u16(buf, OFF_LOWER),
        upper: get_u16(buf, OFF_UPPER),
        special: get_u16(buf, OFF_SPECIAL),
        kind,
        file_id: get_u32(buf, OFF_FILE_ID),
        block: get_u32(buf, OFF_BLOCK),
    })
}

/// Checks a page read from `file_id` block `block`: all zeros is new;
/// otherwise the checksum (unless off), then the header's version, size,
/// address and free-space pointers. The checksum is checked first because a
/// torn or flipped page usually has a garbage header too.
pub fn verify_page(
    buf: &[u8],
    alg: ChecksumAlgorithm,
    file_id: u32,
    block: u32,
) -> Result<PageState, PageError> {
    if is_all_zero(buf) {
        return Ok(PageState::New);
    }
    if alg != ChecksumAlgorithm::Off {
        let stored = get_u32(buf, OFF_CHECKSUM);
        let calculated = page_checksum(alg, buf, block);
        if stored != calculated {
            return Err(PageError::Checksum { calculated, stored });
        }
    }
    let h = read_header(buf)?;
    if h.layout_version != PAGE_LAYOUT_VERSION {
        return Err(PageError::BadHeader(format!(
            "layout version {} (this build reads {PAGE_LAYOUT_VERSION})",
            h.layout_version
        )));
    }
    if h.page_size as usize != buf.len() {
        return Err(PageError::BadHeader(format!(
            "page size {} in a file of {}-byte pages",
            h.page_size,
            buf.len()
        )));
    }
    if h.file_id != file_id || h.block != block {
        return Err(PageError::WrongAddress {
            expected_file: file_id,
            expected_block: block,
            found_file: h.file_id,
            found_block: h.block,
        });
    }
    let (lo, up, sp) = (h.lower as usize, h.upper as usize, h.special as usize);
    if lo < PAGE_HEADER_SIZE || lo > up || up > sp || sp > buf.len() {
        return Err(PageError::BadHeader(format!(
            "free-space pointers lower {lo}, upper {up}, special {sp}"
        )));
    }
    Ok(PageState::Valid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(size: usize, alg: ChecksumAlgorithm) -> Vec<u8> {
        let mut p = vec![0u8; size];
        init_page(&mut p, PageKind::Raw, 7, 42, 16);
        set_lower_upper(&mut p, 100, (size - 200) as u16);
        p[40..100].fill(0xAB);
        set_page_lsn(&mut p, Lsn(0x1234));
        set_checksum(&mut p, alg);
        p
    }

    #[test]
    fn fresh_page_verifies_under_every_algorithm_and_size() {
        for &size in crate::settings::PAGE_SIZES {
            for alg in [
                ChecksumAlgorithm::Off,
                ChecksumAlgorithm::Fnv,
                ChecksumAlgorithm::Crc32c,
            ] {
                let p = page(size as usize, alg);
                assert_eq!(verify_page(&p, alg, 7, 42), Ok(PageState::Valid));
                let h = read_header(&p).unwrap();
                assert_eq!(
                    (h.page_size, h.file_id, h.block, h.lsn),
                    (size, 7, 42, Lsn(0x1234))
                );
            }
        }
    }

    #[test]
    fn all_zero_page_is_new() {
        let p = vec![0u8; 8192];
        assert_eq!(
            verify_page(&p, ChecksumAlgorithm::Crc32c, 1, 5),
            Ok(PageState::New)
        );
    }

    #[test]
    fn misdirected_page_is_caught_by_address() {
        // A page whose checksum is internally fine but written to block 43.
        let p = page(8192, ChecksumAlgorithm::Off);
        assert!(matches!(
            verify_page(&p, ChecksumAlgorithm::Off, 7, 43),
            Err(PageError::WrongAddress {
                found_block: 42,
                ..
            })
        ));
        assert!(matches!(
            verify_page(&p, ChecksumAlgorithm::Off, 8, 42),
            Err(PageError::WrongAddress { found_file: 7, .. })
        ));
    }

    #[test]
    fn flipped_bit_fails_checksum() {
        for alg in [ChecksumAlgorithm::Fnv, ChecksumAlgorithm::Crc32c] {
            let mut p = page(8192, alg);
            p[5000] ^= 0x10;
            assert!(matches!(
                verify_page(&p, alg, 7, 42),
                Err(PageError::Checksum { .. })
            ));
        }
    }

    #[test]
    fn impossible_header_is_refused_not_panicked() {
        let mut p = page(8192, ChecksumAlgorithm::Off);
        p[OFF_LOWER..OFF_LOWER + 2].copy_from_slice(&9000u16.to_le_bytes());
        assert!(matches!(
            verify_page(&p, ChecksumAlgorithm::Off, 7, 42),
            Err(PageError::BadHeader(_))
        ));
        let mut p = page(8192, ChecksumAlgorithm::Off);
        p[OFF_KIND] = 99;
        assert!(verify_page(&p, ChecksumAlgorithm::Off, 7, 42).is_err());
        let mut p = page(8192, ChecksumAlgorithm::Off);
        p[OFF_PAGE_SIZE_LOG2] = 14;
        assert!(verify_page(&p, ChecksumAlgorithm::Off, 7, 42).is_err());
    }

    #[test]
    #[should_panic(expected = "backwards")]
    fn page_lsn_never_goes_backwards() {
        let mut p = page(4096, ChecksumAlgorithm::Off);
        set_page_lsn(&mut p, Lsn(1));
    }
}
