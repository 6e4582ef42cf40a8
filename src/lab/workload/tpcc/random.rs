//! The specification's random inputs (clause 2.1.6 and 4.3.2): NURand,
//! customer last names from syllables, random text.

use crate::lab::workload::Rng;

/// The run-time constants C of NURand for C_LAST, C_ID and OL_I_ID; the
/// load uses [`C_LAST_LOAD`]. C_LAST's run value differs from the load's
/// by 66, inside the specification's 65..=119 (and not 96 or 112).
pub const C_LAST_LOAD: u64 = 157;
pub const C_LAST_RUN: u64 = 223;
pub const C_ID: u64 = 259;
pub const C_OL_I_ID: u64 = 7911;

/// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
pub fn nurand(rng: &mut Rng, a: u64, c: u64, x: u64, y: u64) -> u64 {
    let r1 = rng.below(a + 1);
    let r2 = x + rng.below(y - x + 1);
    (((r1 | r2) + c) % (y - x + 1)) + x
}

/// Uniform in `lo..=hi`.
pub fn uniform(rng: &mut Rng, lo: u64, hi: u64) -> u64 {
    lo + rng.below(hi - lo + 1)
}

const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The last name of number `n` (0..=999): its three digits' syllables.
pub fn last_name(n: u64) -> Vec<u8> {
    let mut s = Vec::with_capacity(15);
    for digit in [n / 100, n / 10 % 10, n % 10] {
        s.extend_from_slice(SYLLABLES[digit as usize].as_bytes());
    }
    s
}

/// A random alphanumeric string of `lo..=hi` characters (a-string).
pub fn astring(rng: &mut Rng, lo: usize, hi: usize) -> Vec<u8> {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let n = uniform(rng, lo as u64, hi as u64) as usize;
    (0..n)
        .map(|_| CHARS[rng.below(CHARS.len() as u64) as usize])
        .collect()
}

/// `n` random digits (an n-string).
pub fn nstring(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| b'0' + rng.below(10) as u8).collect()
}

/// `n` random capital letters (a state's code).
pub fn letters(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| b'A' + rng.below(26) as u8).collect()
}

/// `astring` into a fixed-width field, padded with spaces.
pub fn field<const N: usize>(rng: &mut Rng, lo: usize, hi: usize) -> [u8; N] {
    let s = astring(rng, lo, hi.min(N));
    let mut f = [b' '; N];
    f[..s.len()].copy_from_slice(&s);
    f
}

/// `text` padded with spaces to a fixed width (cut if longer).
pub fn padded<const N: usize>(text: &[u8]) -> [u8; N] {
    let mut f = [b' '; N];
    let n = text.len().min(N);
    f[..n].copy_from_slice(&text[..n]);
    f
}

/// I_DATA / S_DATA: 26..=50 characters, 10 % of them with "ORIGINAL" in
/// a random place.
pub fn data_with_original(rng: &mut Rng) -> [u8; 50] {
    let mut s = astring(rng, 26, 50);
    if rng.below(10) == 0 {
        let at = rng.below((s.len() - 8) as u64 + 1) as usize;
        s[at..at + 8].copy_from_slice(b"ORIGINAL");
    }
    padded(&s)
}

/// Microseconds since 1970, now.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nurand_stays_in_range_and_skews() {
        let mut rng = Rng::new(1, 0);
        let mut hits = vec![0u32; 3000];
        for _ in 0..100_000 {
            let v = nurand(&mut rng, 1023, C_ID, 1, 3000);
            assert!((1..=3000).contains(&v));
            hits[v as usize - 1] += 1;
        }
        let max = *hits.iter().max().unwrap();
        let min = *hits.iter().min().unwrap();
        assert!(max > 4 * min.max(1), "NURand is not skewed: {min}..{max}");
    }

    #[test]
    fn last_names_are_the_specifications() {
        assert_eq!(last_name(371), b"PRICALLYOUGHT");
        assert_eq!(last_name(0), b"BARBARBAR");
        assert_eq!(last_name(999), b"EINGEINGEING");
    }
}
