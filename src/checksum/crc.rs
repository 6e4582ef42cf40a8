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
    assert!(
        page.len() >= FIELD_END,
        "page of {} bytes has no checksum field",
        page.len()
    );
    let crc = ::crc32c::crc32c(&page[..FIELD_START]);
    let crc = ::crc32c::crc32c_append(crc, &[0; FIELD_END - FIELD_START]);
    let crc = ::crc32c::crc32c_append(crc, &page[FIELD_END..]);
    ::crc32c::crc32c_append(crc, &block.to_le_bytes())
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
    fn equals_crc_of_the_spelled_out_stream() {
        let mut page: Vec<u8> = (0..8192u32).map(|i| (i * 31 % 251) as u8).collect();
        page[8..12].copy_from_slice(&[9, 9, 9, 9]);
        let mut stream = page.clone();
        stream[8..12].fill(0);
        stream.extend_from_slice(&77u32.to_le_bytes());
        assert_eq!(page_crc32c(&page, 77), crc32c(&stream));
    }
}
