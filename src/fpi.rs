//! Full-page images: a page as logged in the WAL, with its free hole
//! (between `lower` and `upper`) left out, as PostgreSQL does.
//!
//! Structure changes log images of every page they touch; the
//! `full_pages` protection mode will log one at a page's first change after
//! each checkpoint. The WAL compresses images at insert
//! (`wal_compression`, wal/image_codec.rs); they are restored here.

use crate::page::{lower_upper, PAGE_HEADER_SIZE};
use crate::wal::{ImageCompression, PageImage};

/// The image of `page` with its hole left out.
pub fn make_image(page: &[u8]) -> PageImage {
    let (lower, upper) = lower_upper(page);
    let (lower, upper) = (lower as usize, upper as usize);
    let hole_ok = lower >= PAGE_HEADER_SIZE && lower <= upper && upper <= page.len();
    let (hole_offset, hole_length) = if hole_ok && page[lower..upper].iter().all(|b| *b == 0) {
        (lower, upper - lower)
    } else {
        (0, 0)
    };
    let mut bytes = Vec::with_capacity(page.len() - hole_length);
    bytes.extend_from_slice(&page[..hole_offset]);
    bytes.extend_from_slice(&page[hole_offset + hole_length..]);
    PageImage {
        bytes,
        hole_offset: hole_offset as u16,
        hole_length: hole_length as u16,
        compression: ImageCompression::None,
    }
}

/// Rebuilds a page from its image into `out` (page-sized); the hole becomes
/// zeros. A compressed image is decompressed to exactly the page less its
/// hole. `Err` says what does not add up.
pub fn restore_image(img: &PageImage, out: &mut [u8]) -> Result<(), String> {
    let (off, len) = (img.hole_offset as usize, img.hole_length as usize);
    let expanded;
    let bytes = match img.compression {
        ImageCompression::None => &img.bytes,
        codec => {
            let want = out.len().checked_sub(len).ok_or_else(|| {
                format!(
                    "hole of {len} bytes is larger than a {}-byte page",
                    out.len()
                )
            })?;
            expanded = crate::wal::image_codec::decompress(codec, &img.bytes, want)?;
            &expanded
        }
    };
    if bytes.len() + len != out.len() || off + len > out.len() {
        return Err(format!(
            "image of {} bytes with a hole of {len} at {off} does not make a {}-byte page",
            bytes.len(),
            out.len()
        ));
    }
    out[..off].copy_from_slice(&bytes[..off]);
    out[off..off + len].fill(0);
    out[off + len..].copy_from_slice(&bytes[off..]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{init_page, PageKind};

    #[test]
    fn image_round_trip_leaves_out_the_hole() {
        let mut p = vec![0u8; 8192];
        init_page(&mut p, PageKind::Raw, 1, 2, 64);
        crate::page::set_lower_upper(&mut p, 100, 8000);
        p[40..100].fill(7);
        p[8000..8128].fill(9);
        let img = make_image(&p);
        assert_eq!(img.bytes.len(), 8192 - 7900);
        let mut out = vec![1u8; 8192];
        restore_image(&img, &mut out).unwrap();
        assert_eq!(out, p);
        // A non-zero hole is kept whole, so nothing is lost.
        p[5000] = 1;
        let img = make_image(&p);
        assert_eq!(img.bytes.len(), 8192);
        restore_image(&img, &mut out).unwrap();
        assert_eq!(out, p);
        let bad = PageImage {
            bytes: vec![0; 10],
            ..img
        };
        assert!(restore_image(&bad, &mut out).is_err());
    }
}
