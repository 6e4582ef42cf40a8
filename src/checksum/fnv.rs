//! PostgreSQL's 32-lane FNV-1a block checksum (`checksum_impl.h`), bit-compatible.
//!
//! The page is read as native-endian `u32` words in rows of [`N_SUMS`] lanes. Each lane
//! keeps its own running sum, so the 32 lanes are independent and fit 4 AVX2 or 2
//! AVX-512 registers; two extra rounds with zero words let the last row's bits spread
//! before the lanes are xored together.
//!
//! Invariants:
//! - the page length is a non-zero multiple of [`ROW_BYTES`] (128 bytes);
//! - word index 2 (bytes 8..12, where both untorn's and PostgreSQL's checksum field live)
//!   is ANDed with the caller's `word2_mask`, so the stored checksum never feeds into
//!   its own computation and no copy of the page is needed;
//! - every variant returns the same value for the same input (tests compare them).
//!
//! Speed: each lane is a serial chain of `rows + 2` multiplies, so a single page is
//! bounded by multiply *latency*, not throughput. The SIMD variants keep
//! `t = sum ^ word` as state: `t' = t * P ^ ((t >> 17) ^ next_word)`, which takes the
//! shift and the load of the next word off the critical path, leaving one multiply and
//! one xor per row.

use std::sync::OnceLock;

/// Number of lanes (PostgreSQL's `N_SUMS`).
pub const N_SUMS: usize = 32;
/// Bytes in one row of lanes.
pub const ROW_BYTES: usize = N_SUMS * 4;
/// The FNV-1a 32-bit prime.
pub const FNV_PRIME: u32 = 16_777_619;

/// Initial lane values, copied from PostgreSQL's `checksumBaseOffsets`.
pub const BASE: [u32; N_SUMS] = [
    0x5B1F36E9, 0xB8525960, 0x02AB50AA, 0x1DE66D2A, 0x79FF467A, 0x9BB9F8A3, 0x217E7CD2, 0x83E13D2C,
    0xF8D4474F, 0xE39EB970, 0x42C6AE16, 0x993216FA, 0x7B093B5D, 0x98DAFF3C, 0xF718902A, 0x0B1C9CDB,
    0xE58F764B, 0x187636BC, 0x5D7B3BB1, 0xE73DE7DE, 0x92BEC979, 0xCCA6C0B2, 0x304A0979, 0x85AA43D4,
    0x783125BB, 0x6CA8EAA2, 0xE407EAC6, 0x4B5CFC3E, 0x9FBF8C76, 0x15CA20BE, 0xF2CA9FD3, 0x959BD756,
];

const _: () = assert!(ROW_BYTES == 128);

/// Panics unless `page` is a whole number of rows: a partial row would be silently
/// dropped, and the mask of word 2 needs a first row to apply to.
#[inline]
fn check_len(page: &[u8]) {
    assert!(
        !page.is_empty() && page.len().is_multiple_of(ROW_BYTES),
        "fnv checksum needs a non-zero multiple of {ROW_BYTES} bytes, got {}",
        page.len()
    );
}

#[inline(always)]
fn mix(sum: u32, word: u32) -> u32 {
    let tmp = sum ^ word;
    tmp.wrapping_mul(FNV_PRIME) ^ (tmp >> 17)
}

#[inline(always)]
fn mix_row(sums: &mut [u32; N_SUMS], words: &[u32; N_SUMS]) {
    for (sum, &word) in sums.iter_mut().zip(words) {
        *sum = mix(*sum, word);
    }
}

#[inline(always)]
fn read_row(row: &[u8]) -> [u32; N_SUMS] {
    let mut words = [0u32; N_SUMS];
    for (word, bytes) in words.iter_mut().zip(row.chunks_exact(4)) {
        *word = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    }
    words
}

/// The reference: a direct transcription of PostgreSQL's loop, for any CPU.
pub fn checksum_block_portable(page: &[u8], word2_mask: u32) -> u32 {
    check_len(page);
    let (first, rest) = page.split_at(ROW_BYTES);
    let mut sums = BASE;
    let mut words = read_row(first);
    words[2] &= word2_mask;
    mix_row(&mut sums, &words);
    for row in rest.chunks_exact(ROW_BYTES) {
        mix_row(&mut sums, &read_row(row));
    }
    for _ in 0..2 {
        mix_row(&mut sums, &[0; N_SUMS]);
    }
    sums.iter().fold(0, |acc, &s| acc ^ s)
}

/// AVX2: the 32 lanes are 4 independent `ymm` chains.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub unsafe fn checksum_block_avx2(page: &[u8], word2_mask: u32) -> u32 {
    use std::arch::x86_64::*;
    check_len(page);
    let rows = page.len() / ROW_BYTES;
    let src = page.as_ptr() as *const __m256i;
    let base = BASE.as_ptr() as *const __m256i;
    let prime = _mm256_set1_epi32(FNV_PRIME as i32);
    let zero = _mm256_setzero_si256();
    let mask = _mm256_setr_epi32(-1, -1, word2_mask as i32, -1, -1, -1, -1, -1);

    // A nested fn does not inherit the caller's target features; without its own,
    // the intrinsics in it could stay out-of-line calls.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn step(t: __m256i, next: __m256i, prime: __m256i) -> __m256i {
        let low = _mm256_xor_si256(_mm256_srli_epi32::<17>(t), next);
        _mm256_xor_si256(_mm256_mullo_epi32(t, prime), low)
    }

    // SAFETY: the loads stay inside `page` (rows * 4 registers of 32 bytes) and BASE.
    let (mut t0, mut t1, mut t2, mut t3) = unsafe {
        (
            _mm256_xor_si256(
                _mm256_loadu_si256(base),
                _mm256_and_si256(_mm256_loadu_si256(src), mask),
            ),
            _mm256_xor_si256(
                _mm256_loadu_si256(base.add(1)),
                _mm256_loadu_si256(src.add(1)),
            ),
            _mm256_xor_si256(
                _mm256_loadu_si256(base.add(2)),
                _mm256_loadu_si256(src.add(2)),
            ),
            _mm256_xor_si256(
                _mm256_loadu_si256(base.add(3)),
                _mm256_loadu_si256(src.add(3)),
            ),
        )
    };
    for r in 1..rows {
        // SAFETY: r < rows, so the row lies inside `page`.
        let row = unsafe { src.add(r * 4) };
        unsafe {
            t0 = step(t0, _mm256_loadu_si256(row), prime);
            t1 = step(t1, _mm256_loadu_si256(row.add(1)), prime);
            t2 = step(t2, _mm256_loadu_si256(row.add(2)), prime);
            t3 = step(t3, _mm256_loadu_si256(row.add(3)), prime);
        }
    }
    // Two rounds of zero words, then the final mix that has no next word.
    unsafe {
        for _ in 0..2 {
            t0 = step(t0, zero, prime);
            t1 = step(t1, zero, prime);
            t2 = step(t2, zero, prime);
            t3 = step(t3, zero, prime);
        }
        let s = _mm256_xor_si256(
            _mm256_xor_si256(step(t0, zero, prime), step(t1, zero, prime)),
            _mm256_xor_si256(step(t2, zero, prime), step(t3, zero, prime)),
        );
        let mut lanes = [0u32; 8];
        _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, s);
        lanes.iter().fold(0, |acc, &l| acc ^ l)
    }
}

/// AVX-512: the 32 lanes are 2 independent `zmm` chains.
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
pub unsafe fn checksum_block_avx512(page: &[u8], word2_mask: u32) -> u32 {
    use std::arch::x86_64::*;
    check_len(page);
    let rows = page.len() / ROW_BYTES;
    let src = page.as_ptr() as *const __m512i;
    let base = BASE.as_ptr() as *const __m512i;
    let prime = _mm512_set1_epi32(FNV_PRIME as i32);
    let zero = _mm512_setzero_si512();
    let mut mask_lanes = [u32::MAX; 16];
    mask_lanes[2] = word2_mask;

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn step(t: __m512i, next: __m512i, prime: __m512i) -> __m512i {
        let low = _mm512_xor_si512(_mm512_srli_epi32::<17>(t), next);
        _mm512_xor_si512(_mm512_mullo_epi32(t, prime), low)
    }

    // SAFETY: the loads stay inside `page` (rows * 2 registers of 64 bytes), BASE and
    // `mask_lanes`.
    let (mut t0, mut t1) = unsafe {
        let mask = _mm512_loadu_si512(mask_lanes.as_ptr() as *const __m512i);
        (
            _mm512_xor_si512(
                _mm512_loadu_si512(base),
                _mm512_and_si512(_mm512_loadu_si512(src), mask),
            ),
            _mm512_xor_si512(
                _mm512_loadu_si512(base.add(1)),
                _mm512_loadu_si512(src.add(1)),
            ),
        )
    };
    for r in 1..rows {
        // SAFETY: r < rows, so the row lies inside `page`.
        unsafe {
            let row = src.add(r * 2);
            t0 = step(t0, _mm512_loadu_si512(row), prime);
            t1 = step(t1, _mm512_loadu_si512(row.add(1)), prime);
        }
    }
    unsafe {
        for _ in 0..2 {
            t0 = step(t0, zero, prime);
            t1 = step(t1, zero, prime);
        }
        let s = _mm512_xor_si512(step(t0, zero, prime), step(t1, zero, prime));
        let mut lanes = [0u32; 16];
        _mm512_storeu_si512(lanes.as_mut_ptr() as *mut __m512i, s);
        lanes.iter().fold(0, |acc, &l| acc ^ l)
    }
}

type BlockFn = fn(&[u8], u32) -> u32;

#[cfg(target_arch = "x86_64")]
fn avx512_entry(page: &[u8], word2_mask: u32) -> u32 {
    // SAFETY: only selected after `is_x86_feature_detected!("avx512f")`.
    unsafe { checksum_block_avx512(page, word2_mask) }
}

#[cfg(target_arch = "x86_64")]
fn avx2_entry(page: &[u8], word2_mask: u32) -> u32 {
    // SAFETY: only selected after `is_x86_feature_detected!("avx2")`.
    unsafe { checksum_block_avx2(page, word2_mask) }
}

fn detect() -> (BlockFn, &'static str) {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            return (avx512_entry, "avx512");
        }
        if is_x86_feature_detected!("avx2") {
            return (avx2_entry, "avx2");
        }
    }
    (checksum_block_portable, "portable")
}

fn selected() -> &'static (BlockFn, &'static str) {
    static SELECTED: OnceLock<(BlockFn, &'static str)> = OnceLock::new();
    SELECTED.get_or_init(detect)
}

/// The name of the variant [`checksum_block`] runs on this CPU.
pub fn selected_variant() -> &'static str {
    selected().1
}

/// PostgreSQL's block checksum (before the block number and the 16-bit reduction), on
/// the fastest variant this CPU runs.
#[inline]
pub fn checksum_block(page: &[u8], word2_mask: u32) -> u32 {
    (selected().0)(page, word2_mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngCore, SeedableRng};

    const SIZES: [usize; 5] = [128, 4096, 8192, 16384, 32768];

    fn variants() -> Vec<(&'static str, BlockFn)> {
        #[allow(unused_mut)]
        let mut v: Vec<(&'static str, BlockFn)> = vec![
            ("portable", checksum_block_portable),
            ("dispatched", checksum_block),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") {
                v.push(("avx2", avx2_entry));
            }
            if is_x86_feature_detected!("avx512f") {
                v.push(("avx512", avx512_entry));
            }
        }
        v
    }

    #[test]
    fn variants_agree_on_random_pages() {
        let seed = 0x5eed_f1f0;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let variants = variants();
        for &size in &SIZES {
            for _ in 0..50 {
                let mut page = vec![0u8; size];
                rng.fill_bytes(&mut page);
                let mask = match rng.gen_range(0..4) {
                    0 => 0,
                    1 => u32::MAX,
                    2 => 0xFFFF_0000,
                    _ => rng.gen(),
                };
                let want = checksum_block_portable(&page, mask);
                for (name, f) in &variants {
                    assert_eq!(
                        f(&page, mask),
                        want,
                        "{name} size {size} mask {mask:#x} seed {seed:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn mask_hides_exactly_the_masked_bits() {
        let mut page = vec![0x5Au8; 8192];
        let before = checksum_block(&page, 0xFFFF_0000);
        let hidden = if cfg!(target_endian = "little") {
            8..10
        } else {
            10..12
        };
        for i in hidden.clone() {
            page[i] = 0xC3;
        }
        assert_eq!(checksum_block(&page, 0xFFFF_0000), before);
        let shown = if cfg!(target_endian = "little") {
            10
        } else {
            8
        };
        page[shown] ^= 1;
        assert_ne!(checksum_block(&page, 0xFFFF_0000), before);
        // Mask 0 (untorn's pages) hides the whole word.
        let mut zeroed = page.clone();
        zeroed[8..12].fill(0);
        let want = checksum_block_portable(&zeroed, u32::MAX);
        for fill in [0x00u8, 0x01, 0x80, 0xFF] {
            page[8..12].fill(fill);
            assert_eq!(
                checksum_block(&page, 0),
                want,
                "field filled with {fill:#x}"
            );
        }
    }

    #[test]
    #[should_panic(expected = "multiple of 128")]
    fn rejects_partial_rows() {
        checksum_block(&[0u8; 200], 0);
    }

    #[test]
    fn every_variant_sees_every_row_and_the_zero_rounds() {
        // A word in the last row only reaches the lane sum through the zero rounds; a
        // variant that skipped a row or a round would miss it.
        for (name, f) in variants() {
            for &size in &SIZES {
                let mut page = vec![0u8; size];
                let a = f(&page, 0);
                page[size - 1] = 1;
                assert_ne!(f(&page, 0), a, "{name} size {size}");
            }
        }
    }
}
