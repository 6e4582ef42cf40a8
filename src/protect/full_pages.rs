//! Full-page images: the image decision, and a page as logged in the WAL
//! with its free hole (between `lower` and `upper`) left out, as
//! PostgreSQL does.
//!
//! Structure changes log an image of every page they touch, in every mode:
//! their redo replays images only. With `full_pages`, a row change logs the
//! page's image instead of its changes at the page's first change after each
//! checkpoint's redo point, so redo never needs a page a torn write damaged.
//! The WAL compresses images at insert (`wal_compression`,
//! wal/image_codec.rs); they are restored here.

use crate::lsn::Lsn;
use crate::page::{lower_upper, PAGE_HEADER_SIZE};
use crate::settings::TornPageProtection;
use crate::wal::{ImageCompression, PageImage};

/// What a WAL record logs a page for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A structure change (create, split, free): redone from images only.
    Structure,
    /// A commit's row changes, under `protection`, while the checkpoint in
    /// progress (or the last) has its redo point at `redo`.
    Rows {
        protection: TornPageProtection,
        redo: Lsn,
    },
}

/// The one image decision, as PostgreSQL's XLogRecordAssemble makes it at
/// WAL insert: must the record carry the whole page (`page_lsn` is the
/// page's LSN before this change)?
///
/// A page last changed at or before the redo point may have been written
/// since, and that write may tear: redo from the redo point must find an
/// image before any change to it. The caller must hold the redo point
/// from this decision until its record is inserted.
pub fn needs_image(change: Change, page_lsn: Lsn) -> bool {
    match change {
        Change::Structure => true,
        Change::Rows { protection, redo } => {
            protection == TornPageProtection::FullPages && page_lsn <= redo
        }
    }
}

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
    fn images_at_first_change_after_the_redo_point_only() {
        let rows = |protection| Change::Rows {
            protection,
            redo: Lsn(100),
        };
        assert!(needs_image(rows(TornPageProtection::FullPages), Lsn(100)));
        assert!(needs_image(rows(TornPageProtection::FullPages), Lsn(7)));
        assert!(!needs_image(rows(TornPageProtection::FullPages), Lsn(101)));
        assert!(!needs_image(rows(TornPageProtection::Off), Lsn(7)));
        assert!(needs_image(Change::Structure, Lsn(101)));
    }

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
