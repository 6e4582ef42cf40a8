//! Compression of full-page images (`wal_compression`), as PostgreSQL's
//! XLogRecordAssemble does it: each image (its hole already left out) is
//! compressed when its record is inserted, and kept compressed only when
//! that makes it smaller. docs/FORMAT.md describes the bytes.
//!
//! Rules:
//! - lz4 is lz4_flex's block format without a size prefix, zstd one zstd
//!   frame at level 3 (PostgreSQL's ZSTD_CLEVEL_DEFAULT). Neither stores
//!   anything the descriptor already says: the decompressed length is the
//!   page size less the hole.
//! - Decompression writes into a buffer of exactly that length, so a
//!   corrupt image can never make it allocate or write more than a page;
//!   any other length is an error, never a panic.
//! - Compression never fails: a codec error means "keep it uncompressed".

use super::record::{BlockRef, ImageCompression, PageImage, RecordData};
use crate::settings::WalCompression;
use std::cell::RefCell;

/// zstd's default level, as PostgreSQL uses.
pub const ZSTD_LEVEL: i32 = 3;

impl From<WalCompression> for ImageCompression {
    fn from(c: WalCompression) -> ImageCompression {
        match c {
            WalCompression::Off => ImageCompression::None,
            WalCompression::Lz4 => ImageCompression::Lz4,
            WalCompression::Zstd => ImageCompression::Zstd,
        }
    }
}

impl ImageCompression {
    /// The codec's name as `wal_compression` spells it ("off" for none).
    pub fn name(self) -> &'static str {
        match self {
            ImageCompression::None => "off",
            ImageCompression::Lz4 => "lz4",
            ImageCompression::Zstd => "zstd",
        }
    }
}

thread_local! {
    // A zstd context costs allocations: one per thread, reused.
    static ZSTD_COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { RefCell::new(None) };
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// `raw` compressed with `codec`, if that is strictly shorter; `None` for
/// [`ImageCompression::None`], for data that does not shrink, and on any
/// codec error.
pub fn compress(codec: ImageCompression, raw: &[u8]) -> Option<Vec<u8>> {
    let out = match codec {
        ImageCompression::None => return None,
        ImageCompression::Lz4 => lz4_flex::block::compress(raw),
        ImageCompression::Zstd => ZSTD_COMPRESSOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = zstd::bulk::Compressor::new(ZSTD_LEVEL).ok();
            }
            let c = slot.as_mut()?;
            // A capacity one byte short of the input: zstd gives up as
            // soon as the frame would not be smaller.
            let mut out = Vec::with_capacity(raw.len().checked_sub(1)?);
            c.compress_to_buffer(raw, &mut out).ok()?;
            Some(out)
        })?,
    };
    (out.len() < raw.len()).then_some(out)
}

/// Decompresses `bytes` (compressed with `codec`) into exactly `len`
/// bytes. `Err` says what did not add up; the caller names the place.
pub fn decompress(codec: ImageCompression, bytes: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; len];
    let n = match codec {
        ImageCompression::None => {
            out.clear();
            out.extend_from_slice(bytes);
            bytes.len()
        }
        ImageCompression::Lz4 => {
            lz4_flex::block::decompress_into(bytes, &mut out).map_err(|e| {
                format!(
                    "lz4 image of {} bytes does not decompress: {e}",
                    bytes.len()
                )
            })?
        }
        ImageCompression::Zstd => ZSTD_DECOMPRESSOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = Some(
                    zstd::bulk::Decompressor::new()
                        .map_err(|e| format!("no zstd decompression context: {e}"))?,
                );
            }
            let d = slot.as_mut().expect("set above");
            d.decompress_to_buffer(bytes, out.as_mut_slice())
                .map_err(|e| {
                    format!(
                        "zstd image of {} bytes does not decompress: {e}",
                        bytes.len()
                    )
                })
        })?,
    };
    if n != len {
        return Err(format!(
            "{} image of {} bytes decompresses to {n} bytes, not the {len} its descriptor implies",
            codec.name(),
            bytes.len()
        ));
    }
    Ok(out)
}

/// A copy of `rec` with each uncompressed image compressed by `codec`
/// where that makes it shorter; `None` when nothing changes (no codec, no
/// image, nothing shrank), so the caller inserts `rec` itself.
pub fn compress_images(rec: &RecordData, codec: ImageCompression) -> Option<RecordData> {
    if codec == ImageCompression::None {
        return None;
    }
    let compressed: Vec<Option<Vec<u8>>> = rec
        .blocks
        .iter()
        .map(|b| match &b.image {
            Some(img) if img.compression == ImageCompression::None => compress(codec, &img.bytes),
            _ => None,
        })
        .collect();
    if compressed.iter().all(Option::is_none) {
        return None;
    }
    let mut out = RecordData {
        kind: rec.kind,
        xid: rec.xid,
        blocks: Vec::with_capacity(rec.blocks.len()),
        main: rec.main.clone(),
    };
    for (b, c) in rec.blocks.iter().zip(compressed) {
        let image = match (c, &b.image) {
            (Some(bytes), Some(img)) => Some(PageImage {
                bytes,
                hole_offset: img.hole_offset,
                hole_length: img.hole_length,
                compression: codec,
            }),
            (_, img) => img.clone(),
        };
        out.blocks.push(BlockRef {
            file_id: b.file_id,
            block: b.block,
            image,
            data: b.data.clone(),
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{init_page, set_lower_upper, PageKind};
    use crate::protect::full_pages::{make_image, restore_image};
    use proptest::prelude::*;

    const CODECS: [ImageCompression; 2] = [ImageCompression::Lz4, ImageCompression::Zstd];

    /// A page as a leaf looks: header, slots, and rows of text at the end,
    /// with a zero hole between.
    fn page() -> Vec<u8> {
        let mut p = vec![0u8; 8192];
        init_page(&mut p, PageKind::Raw, 3, 9, 0);
        set_lower_upper(&mut p, 400, 4000);
        for (i, chunk) in p[4000..].chunks_mut(120).enumerate() {
            let row = format!("ROW-{i:05}-balance={}-", i * 37);
            let n = row.len().min(chunk.len());
            chunk[..n].copy_from_slice(&row.as_bytes()[..n]);
        }
        for (i, b) in p[40..400].iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        p
    }

    fn random(n: usize, seed: u64) -> Vec<u8> {
        let mut rng = crate::rng::SplitMix64::new(seed);
        (0..n).map(|_| rng.next_u64() as u8).collect()
    }

    #[test]
    fn images_round_trip_through_both_codecs() {
        let p = page();
        let raw = make_image(&p);
        assert_eq!(raw.bytes.len(), 8192 - 3600);
        for codec in CODECS {
            let bytes = compress(codec, &raw.bytes).expect("text rows compress");
            assert!(
                bytes.len() < raw.bytes.len() / 2,
                "{codec:?}: {}",
                bytes.len()
            );
            if codec == ImageCompression::Zstd {
                // One frame (FORMAT.md) recording its content size.
                assert_eq!(bytes[..4], [0x28, 0xB5, 0x2F, 0xFD]);
                let size = zstd::zstd_safe::get_frame_content_size(&bytes);
                assert_eq!(size.ok(), Some(Some(raw.bytes.len() as u64)));
            }
            assert_eq!(
                decompress(codec, &bytes, raw.bytes.len()).unwrap(),
                raw.bytes
            );
            let img = PageImage {
                bytes,
                compression: codec,
                ..raw.clone()
            };
            let mut out = vec![0xEEu8; 8192];
            restore_image(&img, &mut out).unwrap();
            assert_eq!(out, p, "{codec:?}");
        }
        assert_eq!(compress(ImageCompression::None, &raw.bytes), None);
    }

    #[test]
    fn an_image_that_does_not_shrink_stays_uncompressed() {
        let noise = random(8192, 5);
        for codec in CODECS {
            assert_eq!(compress(codec, &noise), None, "{codec:?}");
            assert_eq!(compress(codec, &[]), None, "{codec:?}");
        }
        let block = |bytes: Vec<u8>| BlockRef {
            file_id: 1,
            block: 2,
            image: Some(PageImage {
                bytes,
                hole_offset: 0,
                hole_length: 0,
                compression: ImageCompression::None,
            }),
            data: vec![],
        };
        let mut rec = RecordData::new(crate::wal::RecordKind::Commit, 7);
        rec.blocks.push(block(noise.clone()));
        assert_eq!(compress_images(&rec, ImageCompression::Lz4), None);
        // One block shrinks, the other is kept as it was.
        rec.blocks.push(block(make_image(&page()).bytes));
        rec.blocks.push(BlockRef {
            image: None,
            data: vec![1, 2, 3],
            ..block(vec![])
        });
        assert_eq!(compress_images(&rec, ImageCompression::None), None);
        for codec in CODECS {
            let c = compress_images(&rec, codec).expect("the page shrinks");
            assert_eq!(c.blocks[0], rec.blocks[0]);
            let img = c.blocks[1].image.as_ref().unwrap();
            assert_eq!(img.compression, codec);
            assert!(img.bytes.len() < 4592);
            assert_eq!(c.blocks[2], rec.blocks[2]);
            assert_eq!((c.kind, c.xid, &c.main), (rec.kind, rec.xid, &rec.main));
        }
    }

    #[test]
    fn corrupt_or_wrong_length_images_are_errors() {
        let raw = make_image(&page()).bytes;
        for codec in CODECS {
            let good = compress(codec, &raw).unwrap();
            let name = codec.name();
            for len in [raw.len() - 1, raw.len() + 1, 0] {
                let e = decompress(codec, &good, len).unwrap_err();
                assert!(e.contains(name), "{e}");
            }
            let cut = &good[..good.len() / 2];
            assert!(decompress(codec, cut, raw.len()).is_err(), "{codec:?}");
            assert!(decompress(codec, &random(300, 9), raw.len()).is_err());
            // Through the page restore: an error, the page size bounds it.
            let img = PageImage {
                bytes: cut.to_vec(),
                hole_offset: 400,
                hole_length: 3600,
                compression: codec,
            };
            let mut out = vec![0u8; 8192];
            let e = restore_image(&img, &mut out).unwrap_err();
            assert!(e.contains(name), "{e}");
            let too_big = PageImage {
                hole_length: 9000,
                ..img
            };
            assert!(restore_image(&too_big, &mut out).is_err());
        }
    }

    proptest! {
        #[test]
        fn decompression_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..400),
            len in 0usize..9000,
            zstd in any::<bool>(),
        ) {
            let codec = if zstd { ImageCompression::Zstd } else { ImageCompression::Lz4 };
            if let Ok(out) = decompress(codec, &bytes, len) {
                prop_assert_eq!(out.len(), len);
            }
        }

        #[test]
        fn every_flip_decompresses_to_a_page_or_fails(at in 0usize..2000, bit in 0u8..8) {
            let raw = make_image(&page()).bytes;
            for codec in CODECS {
                let mut c = compress(codec, &raw).unwrap();
                let i = at % c.len();
                c[i] ^= 1 << bit;
                if let Ok(out) = decompress(codec, &c, raw.len()) {
                    prop_assert_eq!(out.len(), raw.len());
                }
            }
        }
    }
}
