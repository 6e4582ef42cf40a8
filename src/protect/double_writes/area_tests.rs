use super::*;
use crate::page::{init_page, set_checksum, set_page_lsn, PageKind};
use crate::settings::ChecksumAlgorithm;
use proptest::prelude::*;

const PS: usize = 4096;
const SYSTEM_ID: u64 = 0xABCD_0000_1234;

fn image(file_id: u32, block: u32, lsn: u64, fill: u8) -> Vec<u8> {
    let mut p = vec![0u8; PS];
    init_page(&mut p, PageKind::Raw, file_id, block, 0);
    p[64..PS].fill(fill);
    set_page_lsn(&mut p, Lsn(lsn));
    set_checksum(&mut p, ChecksumAlgorithm::Crc32c);
    p
}

fn pages(images: &[(u32, u32, u64, Vec<u8>)]) -> Vec<BatchPage<'_>> {
    images
        .iter()
        .map(|(f, b, l, img)| BatchPage {
            file_id: *f,
            block: *b,
            lsn: Lsn(*l),
            image: img,
        })
        .collect()
}

fn expect() -> Expect {
    Expect {
        page_size: PS as u32,
        system_id: SYSTEM_ID,
        shard: Shard::BackgroundWriter,
    }
}

/// (batch_seq, position, pages as (file, block, lsn)).
type TestBatch = (u64, u32, Vec<(u32, u32, u64)>);

/// A shard file of `area_blocks` with `batches` written at their positions.
fn shard_file(area_blocks: u32, batches: &[TestBatch]) -> Vec<u8> {
    let header = FileHeader {
        page_size: PS as u32,
        area_blocks,
        shard: Shard::BackgroundWriter,
        system_id: SYSTEM_ID,
    };
    let mut file = header.encode();
    file.resize((1 + area_blocks as usize) * PS, 0);
    for (seq, pos, ps) in batches {
        let imgs: Vec<_> = ps
            .iter()
            .map(|&(f, b, l)| (f, b, l, image(f, b, l, (l % 251) as u8)))
            .collect();
        let bytes = encode_batch(Shard::BackgroundWriter, *seq, *pos, PS, &pages(&imgs)).unwrap();
        let at = *pos as usize * PS;
        file[at..at + bytes.len()].copy_from_slice(&bytes);
    }
    file
}

fn path() -> PathBuf {
    PathBuf::from("db/dw/shard-1")
}

fn ids(copies: &[SlotCopy]) -> Vec<(u32, u32, u64, u64)> {
    copies
        .iter()
        .map(|c| (c.file_id, c.block, c.lsn.0, c.batch_seq))
        .collect()
}

#[test]
fn batch_capacity_matches_the_format_doc() {
    assert_eq!(slots_per_batch(4096), 169);
    assert_eq!(slots_per_batch(8192), 339);
}

#[test]
fn file_header_round_trips_and_names_the_file_when_bad() {
    let h = FileHeader {
        page_size: 8192,
        area_blocks: 2047,
        shard: Shard::ClientEvictions,
        system_id: 77,
    };
    let b = h.encode();
    assert_eq!(b.len(), 8192);
    assert_eq!(FileHeader::decode(&path(), &b).unwrap(), h);
    for (at, why) in [(3, "magic"), (17, "CRC"), (509, "CRC")] {
        let mut bad = b.clone();
        bad[at] ^= 0x10;
        let e = FileHeader::decode(&path(), &bad).unwrap_err().to_string();
        assert!(e.contains("db/dw/shard-1") && e.contains(why), "{e}");
    }
    let e = FileHeader::decode(&path(), &b[..100])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("db/dw/shard-1") && e.contains("100 bytes"),
        "{e}"
    );
}

#[test]
fn scan_refuses_a_file_of_another_database_or_shard() {
    let file = shard_file(8, &[]);
    let mut e = expect();
    e.system_id += 1;
    let err = scan_shard(&path(), &file, &e).unwrap_err().to_string();
    assert!(err.contains("system id"), "{err}");
    let mut e = expect();
    e.shard = Shard::Checkpointer;
    let err = scan_shard(&path(), &file, &e).unwrap_err().to_string();
    assert!(err.contains("shard 1") && err.contains("shard 0"), "{err}");
    let mut e = expect();
    e.page_size = 8192;
    let err = scan_shard(&path(), &file, &e).unwrap_err().to_string();
    assert!(err.contains("page size 4096"), "{err}");
}

#[test]
fn codec_round_trip() {
    let file = shard_file(
        16,
        &[
            (5, 1, vec![(3, 10, 100), (3, 11, 120), (4, 0, 90)]),
            (6, 5, vec![(3, 10, 130)]),
        ],
    );
    let scan = scan_shard(&path(), &file, &expect()).unwrap();
    assert_eq!(scan.batches, 2);
    assert_eq!(scan.headers_damaged, 0);
    assert!(scan.damaged.is_empty());
    assert_eq!(scan.max_batch_seq, 6);
    assert_eq!(
        ids(&scan.copies),
        vec![
            (3, 10, 100, 5),
            (3, 11, 120, 5),
            (4, 0, 90, 5),
            (3, 10, 130, 6)
        ]
    );
    assert_eq!(
        scan.copies[1].image,
        CopyImage::Held(image(3, 11, 120, 120))
    );
}

#[test]
fn encode_refuses_impossible_batches() {
    let img = image(1, 1, 1, 0);
    let one = [BatchPage {
        file_id: 1,
        block: 1,
        lsn: Lsn(1),
        image: &img,
    }];
    assert!(encode_batch(Shard::Checkpointer, 1, 1, PS, &[]).is_err());
    assert!(encode_batch(Shard::Checkpointer, 1, 0, PS, &one).is_err());
    let short = [BatchPage {
        image: &img[..100],
        ..one[0]
    }];
    assert!(encode_batch(Shard::Checkpointer, 1, 1, PS, &short).is_err());
    let many = vec![one[0]; slots_per_batch(PS) + 1];
    assert!(encode_batch(Shard::Checkpointer, 1, 1, PS, &many).is_err());
    let full = &many[..slots_per_batch(PS)];
    assert!(encode_batch(Shard::Checkpointer, 1, 1, PS, full).is_ok());
}

#[test]
fn a_torn_batch_header_is_skipped_and_counted() {
    let mut file = shard_file(
        16,
        &[
            (5, 1, vec![(3, 10, 100), (3, 11, 120)]),
            (6, 4, vec![(3, 12, 130)]),
        ],
    );
    // The last sector of batch 5's header (its CRC) is old bytes: torn.
    let at = 2 * PS - 512;
    file[at..at + 512].fill(0);
    let scan = scan_shard(&path(), &file, &expect()).unwrap();
    assert_eq!(scan.headers_damaged, 1);
    assert_eq!(scan.batches, 1);
    assert_eq!(ids(&scan.copies), vec![(3, 12, 130, 6)]);
}

#[test]
fn a_stale_batch_loses_only_the_slots_a_later_batch_overwrote() {
    // Batch 5 spans blocks 1..=4; batch 6, after the ring wrapped, starts
    // at block 4 and overwrites batch 5's last image.
    let file = shard_file(
        16,
        &[
            (5, 1, vec![(3, 10, 100), (3, 11, 120), (4, 0, 90)]),
            (6, 4, vec![(3, 10, 130)]),
        ],
    );
    let scan = scan_shard(&path(), &file, &expect()).unwrap();
    assert_eq!(
        ids(&scan.copies),
        vec![(3, 10, 100, 5), (3, 11, 120, 5), (3, 10, 130, 6)]
    );
    assert_eq!(scan.damaged.len(), 1);
    assert_eq!((scan.damaged[0].file_id, scan.damaged[0].block), (4, 0));
    assert_eq!(scan.damaged[0].damage, SlotDamage::ImageCrc);
}

#[test]
fn a_header_at_the_wrong_block_is_refused() {
    let mut file = shard_file(16, &[(5, 1, vec![(3, 10, 100)])]);
    // The same (valid) header landing at block 8: a misdirected write.
    let hdr = file[PS..2 * PS].to_vec();
    file[8 * PS..9 * PS].copy_from_slice(&hdr);
    let scan = scan_shard(&path(), &file, &expect()).unwrap();
    assert_eq!((scan.batches, scan.headers_damaged), (1, 1));
    assert_eq!(scan.copies.len(), 1);
}

#[test]
fn a_slot_with_a_flipped_byte_is_skipped_the_others_kept() {
    let mut file = shard_file(
        16,
        &[(5, 1, vec![(3, 10, 100), (3, 11, 120), (3, 12, 140)])],
    );
    // The image of slot 1 sits at block 3.
    file[3 * PS + 2000] ^= 0x01;
    let scan = scan_shard(&path(), &file, &expect()).unwrap();
    assert_eq!(ids(&scan.copies), vec![(3, 10, 100, 5), (3, 12, 140, 5)]);
    assert_eq!(
        scan.damaged,
        vec![DamagedSlot {
            file_id: 3,
            block: 11,
            lsn: Lsn(120),
            batch_seq: 5,
            damage: SlotDamage::ImageCrc,
        }]
    );
}

#[test]
fn an_image_naming_another_page_is_refused() {
    let other = image(9, 9, 100, 7);
    let b = encode_batch(
        Shard::BackgroundWriter,
        5,
        1,
        PS,
        &[BatchPage {
            file_id: 3,
            block: 10,
            lsn: Lsn(100),
            image: &other,
        }],
    )
    .unwrap();
    let mut file = shard_file(8, &[]);
    file[PS..PS + b.len()].copy_from_slice(&b);
    let scan = scan_shard(&path(), &file, &expect()).unwrap();
    assert!(scan.copies.is_empty());
    assert_eq!(scan.damaged[0].damage, SlotDamage::WrongPage);
}

#[test]
fn a_truncated_file_keeps_what_it_holds() {
    let file = shard_file(
        16,
        &[(5, 1, vec![(3, 10, 100), (3, 11, 120), (3, 12, 140)])],
    );
    // Cut in the middle of the third image (block 4).
    let cut = &file[..4 * PS + 100];
    let scan = scan_shard(&path(), cut, &expect()).unwrap();
    assert_eq!(ids(&scan.copies), vec![(3, 10, 100, 5), (3, 11, 120, 5)]);
    assert_eq!(scan.damaged.len(), 1);
    assert_eq!(scan.damaged[0].damage, SlotDamage::BeyondEnd);
    // Cut inside the batch header: nothing, and no error.
    let scan = scan_shard(&path(), &file[..PS + 100], &expect()).unwrap();
    assert!(scan.copies.is_empty() && scan.damaged.is_empty());
}

#[test]
fn images_past_the_area_are_not_read() {
    // The header says 2 area blocks; a batch of 3 pages would run past it.
    let mut file = shard_file(2, &[]);
    let b = {
        let imgs: Vec<_> = (0..3).map(|i| (3, i, 100, image(3, i, 100, 1))).collect();
        encode_batch(Shard::BackgroundWriter, 5, 1, PS, &pages(&imgs)).unwrap()
    };
    file.resize(PS + b.len(), 0);
    file[PS..].copy_from_slice(&b);
    let scan = scan_shard(&path(), &file, &expect()).unwrap();
    assert_eq!(scan.copies.len(), 1);
    assert_eq!(scan.damaged.len(), 2);
    assert!(scan
        .damaged
        .iter()
        .all(|d| d.damage == SlotDamage::BeyondEnd));
}

/// A valid header block with hostile field values and a CRC that passes.
fn resealed(mut file: Vec<u8>, field: usize, value: u32) -> Vec<u8> {
    let h = &mut file[PS..2 * PS];
    put_u32(h, field, value);
    let crc = crc32c::crc32c(&h[..PS - 4]);
    put_u32(h, PS - 4, crc);
    file
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3 * PS)) {
        let _ = scan_shard(&path(), &bytes, &expect());
        let _ = FileHeader::decode(&path(), &bytes);
    }

    #[test]
    fn a_damaged_file_never_panics_and_yields_only_true_copies(
        flips in proptest::collection::vec((0..8 * PS, any::<u8>()), 0..8),
        cut in 0..=8 * PS,
        field in prop_oneof![Just(8usize), Just(12), Just(24), Just(32), Just(36)],
        value in any::<u32>(),
        reseal in any::<bool>(),
    ) {
        let clean = shard_file(7, &[(5, 1, vec![(3, 10, 100), (3, 11, 120)]), (6, 4, vec![(3, 12, 130), (4, 1, 90)])]);
        let truth = scan_shard(&path(), &clean, &expect()).unwrap().copies;
        let mut file = if reseal { resealed(clean, field, value) } else { clean };
        for (at, x) in flips {
            file[at] ^= x;
        }
        file.truncate(cut);
        if let Ok(scan) = scan_shard(&path(), &file, &expect()) {
            // Whatever survives is a copy that was written (or a rewritten
            // descriptor whose image still matches it, page header included).
            for c in &scan.copies {
                let CopyImage::Held(image) = &c.image else {
                    panic!("a shard's copy is held");
                };
                prop_assert!(truth.iter().any(|t| t.image == c.image));
                prop_assert_eq!(crate::page::page_lsn(image), c.lsn);
            }
        }
    }
}
