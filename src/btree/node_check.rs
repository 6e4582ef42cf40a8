//! Validation of a node read from disk: the one place that trusts nothing
//! in the page, so that [`node`](super::node)'s accessors and changes may
//! assume a well-formed page. Re-exported from `node`, where callers name it.

use super::key_order::less;
use super::node::{
    max_key_len, max_value_len, INNER_HDR, LEAF_HDR, SLOT, SP_FRAG, SP_LEVEL, SP_LOW, SP_LOW_LEN,
};
use crate::page::{read_header, PageKind, PAGE_HEADER_SIZE};

fn get16(b: &[u8], off: usize, what: &str) -> Result<usize, String> {
    b.get(off..off + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]) as usize)
        .ok_or_else(|| format!("{what} at offset {off} is past the page"))
}

fn get_bytes<'a>(b: &'a [u8], start: usize, len: usize, what: &str) -> Result<&'a [u8], String> {
    b.get(start..start + len)
        .ok_or_else(|| format!("{what} of {len} bytes at offset {start} is past the page"))
}

/// The largest page size: it sizes the one-bit-per-byte map of taken bytes.
const MAX_PAGE_SIZE: usize =
    crate::settings::PAGE_SIZES[crate::settings::PAGE_SIZES.len() - 1] as usize;

/// Marks bytes `start..end` as taken in a one-bit-per-byte map; false if
/// any of them already was.
#[inline]
fn claim_bytes(taken: &mut [u64], start: usize, end: usize) -> bool {
    let mut at = start;
    while at < end {
        let (word, bit) = (at / 64, at % 64);
        let bits = (end - at).min(64 - bit);
        let mask = if bits == 64 {
            u64::MAX
        } else {
            ((1u64 << bits) - 1) << bit
        };
        if taken[word] & mask != 0 {
            return false;
        }
        taken[word] |= mask;
        at += bits;
    }
    true
}

/// Fully validates a node read from disk: header kind, pointers, special
/// area, every slot and cell, key order, fences and space accounting. Never
/// panics. After it passes, every accessor and change in `node` is safe.
pub fn check_node(b: &[u8]) -> Result<(), String> {
    let p = b.len();
    if !crate::settings::PAGE_SIZES.contains(&(p as u32)) {
        return Err(format!("page of {p} bytes"));
    }
    let h = read_header(b).map_err(|e| e.to_string())?;
    if h.page_size as usize != p {
        return Err(format!("header says {} bytes, buffer has {p}", h.page_size));
    }
    let leaf = match h.kind {
        PageKind::Leaf => true,
        PageKind::Inner => false,
        k => return Err(format!("page kind {k:?} is not a B+tree node")),
    };
    let (lo, up, sp) = (h.lower as usize, h.upper as usize, h.special as usize);
    if lo < PAGE_HEADER_SIZE
        || !(lo - PAGE_HEADER_SIZE).is_multiple_of(SLOT)
        || lo > up
        || up > sp
        || sp > p
    {
        return Err(format!("pointers lower {lo}, upper {up}, special {sp}"));
    }
    let maxk = max_key_len(p);
    let level = get16(b, sp + SP_LEVEL, "level")?;
    let frag = get16(b, sp + SP_FRAG, "frag")?;
    let low_len = get16(b, sp + SP_LOW_LEN, "low fence length")?;
    let low = get_bytes(b, sp + SP_LOW, low_len, "low fence")?;
    let at = sp + SP_LOW + low_len;
    let high_len = get16(b, at, "high fence length")?;
    let high = match high_len {
        0xFFFF => None,
        n => Some(get_bytes(b, at + 2, n, "high fence")?),
    };
    let end = at + 2 + high.map_or(0, |h| h.len());
    if end != p {
        return Err(format!("special area at {sp} ends at {end}, not at {p}"));
    }
    if low_len > maxk || high.map_or(0, |h| h.len()) > maxk {
        return Err(format!("fence longer than {maxk} bytes"));
    }
    if high.is_some_and(|h| !less(low, h)) {
        return Err("low fence is not below the high fence".into());
    }
    if leaf != (level == 0) {
        return Err(format!("level {level} in a {:?} node", h.kind));
    }
    let n = (lo - PAGE_HEADER_SIZE) / SLOT;
    if !leaf && n == 0 {
        return Err("inner node without entries".into());
    }
    let hdr = if leaf { LEAF_HDR } else { INNER_HDR };
    // One bit per byte of the page: a cell claims its bytes, so an overlap
    // shows without sorting the cells (linear in the page, no allocation).
    let mut taken = [0u64; MAX_PAGE_SIZE / 64];
    let mut used = 0usize;
    let mut prev: Option<&[u8]> = None;
    for i in 0..n {
        let off = get16(b, PAGE_HEADER_SIZE + SLOT * i, "slot")?;
        if off < up || off + hdr > sp {
            return Err(format!("slot {i}: cell offset {off} outside [{up}, {sp})"));
        }
        let k = get16(b, off, "key length")?;
        let v = if leaf {
            get16(b, off + 2, "value length")?
        } else {
            0
        };
        let len = hdr + k + v;
        if off + len > sp || k > maxk || v > max_value_len(p) {
            return Err(format!("slot {i}: cell at {off}, key {k} bytes, value {v}"));
        }
        let key = &b[off + hdr..off + hdr + k];
        match prev {
            Some(pk) if !less(pk, key) => {
                return Err(format!("slot {i}: key not above the previous"))
            }
            None if !leaf && key != low => return Err("inner key 0 is not the low fence".into()),
            None if less(key, low) => return Err("slot 0: key below the low fence".into()),
            _ => {}
        }
        prev = Some(key);
        if !claim_bytes(&mut taken, off, off + len) {
            return Err(format!("slot {i}: cell at {off} overlaps another cell"));
        }
        used += len;
    }
    if let (Some(last), Some(h)) = (prev, high) {
        if !less(last, h) {
            return Err("last key not below the high fence".into());
        }
    }
    if used + frag != sp - up {
        return Err(format!(
            "cells {used} + fragmentation {frag} != {} bytes",
            sp - up
        ));
    }
    Ok(())
}
