//! CRC-32C (Castagnoli) through the `crc32c` crate, which uses the SSE4.2 `crc32`
//! instruction (ARMv8 CRC on aarch64) with three interleaved streams, falling back to
//! tables elsewhere.
//!
//! Invariant: untorn's checksum field (bytes 8..12) enters the CRC as four zero bytes,
//! taken from a constant rather than from a zeroed copy of the page.

/// Bytes before untorn's checksum field.
const FIELD_START: usize = 8;
/// Bytes up to the end of untorn's checksum field.
const FIELD_END: usize = 12;

/// Plain CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    ::crc32c::crc32c(data)
}

/// CRC-32C of `page[0..8] ++ [0; 4] ++ page[12..] ++ block.to_le_bytes()`.
///
/// The block number is appended so a page written to the wrong place (a misdirected
/// write) fails its check even though its bytes are intact.
pub fn page_crc32c(page: &[u8], block: u32) -> u32 {
    ::crc32c::crc32c_append(crc_with_zero_field(page), &block.to_le_bytes())
}

/// CRC-32C of `page[0..8] ++ [0; 4] ++ page[12..]`.
fn crc_with_zero_field(page: &[u8]) -> u32 {
    assert!(
        page.len() >= FIELD_END,
        "page of {} bytes has no checksum field",
        page.len()
    );
    let crc = ::crc32c::crc32c(&page[..FIELD_START]);
    let crc = ::crc32c::crc32c_append(crc, &[0; FIELD_END - FIELD_START]);
    ::crc32c::crc32c_append(crc, &page[FIELD_END..])
}

/// A page's checksum ([`page_crc32c`]) and the plain CRC-32C of the page
/// once that checksum is in its field, for one pass over the page.
///
/// Why: double writes name each image by its plain CRC, and a second pass
/// over every page written cost about 1.5 % of oltp_write_only's CPU at
/// ten times the default data. The two CRCs differ only in the field's
/// four bytes, and a CRC is linear: `crc(a) ^ crc(b) = raw(a ^ b)` for
/// messages of equal length, where `raw` starts from zero and does not
/// invert. `a ^ b` is the field's bytes followed by zeros, whose `raw` is
/// the field's `raw` carried across the zeros by a fixed linear map.
pub fn page_crc32c_and_image_crc(page: &[u8], block: u32) -> (u32, u32) {
    let zero_field = crc_with_zero_field(page);
    let checksum = ::crc32c::crc32c_append(zero_field, &block.to_le_bytes());
    let field_raw = !::crc32c::crc32c_append(u32::MAX, &checksum.to_le_bytes());
    let image = match zeros_map(page.len() - FIELD_END) {
        Some(map) => zero_field ^ map.apply(field_raw),
        None => {
            let crc = ::crc32c::crc32c(&page[..FIELD_START]);
            let crc = ::crc32c::crc32c_append(crc, &checksum.to_le_bytes());
            ::crc32c::crc32c_append(crc, &page[FIELD_END..])
        }
    };
    (checksum, image)
}

/// The linear map that carries a raw CRC register across `n` zero bytes,
/// as four tables of 256 (one per byte of the register).
struct ZerosMap([[u32; 256]; 4]);

impl ZerosMap {
    fn new(n: usize) -> ZerosMap {
        let zeros = vec![0u8; n];
        // Bit i's image: the register 1 << i run across the zeros.
        let column = |i: u32| !::crc32c::crc32c_append(!(1u32 << i), &zeros);
        let columns: Vec<u32> = (0..32).map(column).collect();
        let mut tables = [[0u32; 256]; 4];
        for (byte, table) in tables.iter_mut().enumerate() {
            for (x, entry) in table.iter_mut().enumerate() {
                *entry = (0..8)
                    .filter(|bit| x >> bit & 1 == 1)
                    .fold(0, |acc, bit| acc ^ columns[byte * 8 + bit]);
            }
        }
        ZerosMap(tables)
    }

    fn apply(&self, v: u32) -> u32 {
        let t = &self.0;
        t[0][(v & 0xFF) as usize]
            ^ t[1][(v >> 8 & 0xFF) as usize]
            ^ t[2][(v >> 16 & 0xFF) as usize]
            ^ t[3][(v >> 24) as usize]
    }
}

/// The map for the bytes after the field of a page of 4 KB to 32 KB, built
/// once per page size; other lengths get none (the caller computes).
fn zeros_map(n: usize) -> Option<&'static ZerosMap> {
    use std::sync::OnceLock;
    static MAPS: [OnceLock<ZerosMap>; 4] = [const { OnceLock::new() }; 4];
    let page = n + FIELD_END;
    if !page.is_power_of_two() || !(4096..=32768).contains(&page) {
        return None;
    }
    let i = page.trailing_zeros() as usize - 12;
    Some(MAPS[i].get_or_init(|| ZerosMap::new(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector() {
        // The check value of CRC-32C (RFC 3720, "123456789").
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn the_image_crc_is_the_crc_of_the_stamped_page() {
        let mut rng = crate::rng::SplitMix64::new(7);
        for len in [12, 100, 4096, 8192, 16384, 32768, 65536] {
            for _ in 0..20 {
                let mut page: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                let block = rng.next_u64() as u32;
                let (checksum, image) = page_crc32c_and_image_crc(&page, block);
                assert_eq!(checksum, page_crc32c(&page, block));
                page[FIELD_START..FIELD_END].copy_from_slice(&checksum.to_le_bytes());
                assert_eq!(image, crc32c(&page), "{len} bytes");
            }
        }
    }

    #[test]
    fn equals_crc_of_the_spelled_out_stream() {
        let mut page: Vec<u8> = (0..8192u32).map(|i| (i * 31 % 251) as u8).collect();
        page[8..12].copy_from_slice(&[9, 9, 9, 9]);
        let mut stream = page.clone();
        stream[8..12].fill(0);
        stream.extend_from_slice(&77u32.to_le_bytes());
        assert_eq!(page_crc32c(&page, 77), crc32c(&stream));
    }
}
