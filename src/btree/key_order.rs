//! The order of keys: bytewise, a shorter key before its extensions (the
//! order of `<[u8] as Ord>`).
//!
//! Why not `a.cmp(b)`: for `[u8]` it calls libc's `memcmp`, a call per
//! comparison, and a descent or the check of a page read from disk makes
//! hundreds of them on 8- to 16-byte keys. Comparing 8 bytes at a time as
//! big-endian integers, inlined, gives the same order at a fraction of the
//! cost; long keys still go to `memcmp`.

use std::cmp::Ordering;

/// Keys up to this many bytes are compared inline.
const INLINE_MAX: usize = 32;

/// `a.cmp(b)`, faster on short keys.
#[inline]
pub fn compare(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    if n > INLINE_MAX {
        return a.cmp(b);
    }
    let mut at = 0;
    while at + 8 <= n {
        let x = u64::from_be_bytes(a[at..at + 8].try_into().expect("8 bytes"));
        let y = u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        if x != y {
            return x.cmp(&y);
        }
        at += 8;
    }
    while at < n {
        if a[at] != b[at] {
            return a[at].cmp(&b[at]);
        }
        at += 1;
    }
    a.len().cmp(&b.len())
}

/// `a < b` in key order.
#[inline]
pub fn less(a: &[u8], b: &[u8]) -> bool {
    compare(a, b) == Ordering::Less
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_order_as_slices() {
        let keys: Vec<Vec<u8>> = [
            &b""[..],
            b"\x00",
            b"\x00\x00",
            b"a",
            b"ab",
            b"abcdefgh",
            b"abcdefgh\x00",
            b"abcdefgi",
            b"abcdefghijklmnop",
            b"abcdefghijklmnoq",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ]
        .iter()
        .map(|k| k.to_vec())
        .chain([vec![7u8; 40], vec![7u8; 41], {
            let mut k = vec![7u8; 40];
            k[39] = 8;
            k
        }])
        .chain((0..300u32).map(|i| {
            (i.wrapping_mul(2_654_435_761) as u64 * 977).to_be_bytes()[..(i % 9) as usize].to_vec()
        }))
        .collect();
        for a in &keys {
            for b in &keys {
                assert_eq!(compare(a, b), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(less(a, b), a < b);
            }
        }
    }
}
