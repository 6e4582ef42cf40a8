//! A tree file's meta page (block 0): where the root is, how far the file
//! has grown, and which blocks are free for reuse.
//!
//! Layout after the 32-byte page header (docs/FORMAT.md, "Tree meta page"):
//! u32 root, u32 next_block (blocks below it are allocated or free),
//! u16 height (1 = the root is a leaf), u16 free_count, then free_count u32
//! block numbers. `lower` is set past the free array so a full-page image
//! that leaves out the hole keeps every byte of it.

use crate::page::{init_page, lower_upper, set_lower_upper, PageKind, PAGE_HEADER_SIZE};

pub const META_BLOCK: u32 = 0;
const M_ROOT: usize = PAGE_HEADER_SIZE;
const M_NEXT: usize = M_ROOT + 4;
const M_HEIGHT: usize = M_NEXT + 4;
const M_FREE_COUNT: usize = M_HEIGHT + 2;
const M_FREE: usize = M_FREE_COUNT + 2;

fn rd32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}
fn rd16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

/// Formats a new meta page: the root leaf at block 1.
pub fn init_meta(b: &mut [u8], file_id: u32) {
    init_page(b, PageKind::Meta, file_id, META_BLOCK, 0);
    b[M_ROOT..M_ROOT + 4].copy_from_slice(&1u32.to_le_bytes());
    b[M_NEXT..M_NEXT + 4].copy_from_slice(&2u32.to_le_bytes());
    b[M_HEIGHT..M_HEIGHT + 2].copy_from_slice(&1u16.to_le_bytes());
    set_free(b, &[]);
}

pub fn root(b: &[u8]) -> u32 {
    rd32(b, M_ROOT)
}

pub fn height(b: &[u8]) -> u16 {
    rd16(b, M_HEIGHT)
}

pub fn next_block(b: &[u8]) -> u32 {
    rd32(b, M_NEXT)
}

pub fn set_root(b: &mut [u8], root: u32, height: u16) {
    b[M_ROOT..M_ROOT + 4].copy_from_slice(&root.to_le_bytes());
    b[M_HEIGHT..M_HEIGHT + 2].copy_from_slice(&height.to_le_bytes());
}

/// The free blocks, in the order they were freed.
pub fn free_blocks(b: &[u8]) -> Vec<u32> {
    let n = rd16(b, M_FREE_COUNT) as usize;
    (0..n).map(|i| rd32(b, M_FREE + 4 * i)).collect()
}

/// How many free blocks the meta page can remember.
pub fn free_capacity(page_size: usize) -> usize {
    (page_size - M_FREE) / 4
}

fn set_free(b: &mut [u8], free: &[u32]) {
    assert!(free.len() <= free_capacity(b.len()));
    b[M_FREE_COUNT..M_FREE_COUNT + 2].copy_from_slice(&(free.len() as u16).to_le_bytes());
    let end = M_FREE + 4 * free.len();
    for (i, blk) in free.iter().enumerate() {
        b[M_FREE + 4 * i..M_FREE + 4 * i + 4].copy_from_slice(&blk.to_le_bytes());
    }
    let (_, upper) = lower_upper(b);
    // Zero what the array no longer uses: the free hole stays zero.
    let old_lower = lower_upper(b).0 as usize;
    if old_lower > end {
        b[end..old_lower].fill(0);
    }
    set_lower_upper(b, end as u16, upper);
}

/// Takes a block for a new page: a freed one first, else the file grows.
pub fn allocate(b: &mut [u8]) -> u32 {
    allocate_where(b, |_| true)
}

/// Takes a block for a new page: the most recently freed one for which
/// `usable` holds, else the file grows.
pub fn allocate_where(b: &mut [u8], usable: impl Fn(u32) -> bool) -> u32 {
    let mut free = free_blocks(b);
    if let Some(pos) = free.iter().rposition(|blk| usable(*blk)) {
        let blk = free.remove(pos);
        set_free(b, &free);
        return blk;
    }
    let blk = next_block(b);
    assert!(blk < u32::MAX, "tree file is full");
    b[M_NEXT..M_NEXT + 4].copy_from_slice(&(blk + 1).to_le_bytes());
    blk
}

/// Returns a block to the free list; false (the block stays unused until
/// the file is rebuilt) when the list is full.
pub fn release(b: &mut [u8], blk: u32) -> bool {
    let mut free = free_blocks(b);
    if free.len() >= free_capacity(b.len()) {
        return false;
    }
    free.push(blk);
    set_free(b, &free);
    true
}

/// Checks a meta page read from disk (never panics).
pub fn check_meta(b: &[u8]) -> Result<(), String> {
    if b.len() < M_FREE {
        return Err("meta page too small".into());
    }
    let n = rd16(b, M_FREE_COUNT) as usize;
    if n > free_capacity(b.len()) {
        return Err(format!("free list of {n} entries"));
    }
    let next = rd32(b, M_NEXT);
    let root = rd32(b, M_ROOT);
    if root == 0 || root >= next {
        return Err(format!("root {root} outside the file (next block {next})"));
    }
    if height(b) == 0 {
        return Err("tree height 0".into());
    }
    for blk in free_blocks(b) {
        if blk == 0 || blk >= next {
            return Err(format!("free block {blk} outside the file"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocate_reuses_freed_blocks() {
        let mut b = vec![0u8; 4096];
        init_meta(&mut b, 5);
        check_meta(&b).unwrap();
        assert_eq!(allocate(&mut b), 2);
        assert_eq!(allocate(&mut b), 3);
        assert!(release(&mut b, 2));
        assert_eq!(allocate(&mut b), 2);
        assert_eq!(allocate(&mut b), 4);
        set_root(&mut b, 3, 2);
        assert_eq!((root(&b), height(&b)), (3, 2));
        check_meta(&b).unwrap();
    }
}
