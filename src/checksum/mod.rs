//! Page checksums. (Being written: see the checksum helper's task.)
use crate::settings::ChecksumAlgorithm;

/// The checksum of a page in untorn's format (the 4-byte field at offset 8
/// counts as zero), mixed with the block number.
pub fn page_checksum(alg: ChecksumAlgorithm, page: &[u8], block: u32) -> u32 {
    let _ = (alg, page, block);
    0
}
