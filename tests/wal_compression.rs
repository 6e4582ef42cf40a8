//! `wal_compression`: full-page images compressed with lz4 or zstd when a
//! record is inserted, kept only when smaller, and restored by recovery
//! whatever the setting of the opening that recovers.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use untorn::control::ControlFile;
use untorn::db::directory::{wal_config, WAL_DIR};
use untorn::file::posix::PosixFileSystem;
use untorn::file::{FileSystem, Issuer};
use untorn::rng::SplitMix64;
use untorn::settings::{RequestedCreationSettings, MB};
use untorn::wal::{
    BlockRef, ImageCompression, PageImage, RecordData, RecordKind, Wal, WalConfig, WalReader,
};
use untorn::{key_u64, Database, Lsn, Options, TornPageProtection, WalCompression};

fn options(c: WalCompression) -> Options {
    Options {
        creation: RequestedCreationSettings {
            torn_page_protection: Some(TornPageProtection::FullPages),
            ..Default::default()
        },
        wal_compression: c,
        ..Options::default()
    }
}

fn row(i: u64, version: u32) -> Vec<u8> {
    let mut v = format!("ROW-{i:05}-v{version}-").into_bytes();
    v.resize(120, b'.');
    v
}

fn fs() -> Arc<dyn FileSystem> {
    Arc::new(PosixFileSystem::default())
}

/// Every record of the database's WAL from its first segment.
fn wal_records(path: &Path) -> Vec<untorn::wal::ReadRecord> {
    let fs = fs();
    let control = ControlFile::read(fs.as_ref(), path, Issuer::Tool).unwrap();
    let cfg = wal_config(&control);
    let dir = path.join(WAL_DIR);
    let start = untorn::wal::first_segment_start(fs.as_ref(), &dir, &cfg)
        .unwrap()
        .unwrap();
    WalReader::new(fs, &dir, &cfg, start)
        .unwrap()
        .read_to_end()
        .unwrap()
}

/// Loads rows, checkpoints, updates every 50th row (each leaf's first
/// change after the checkpoint logs its image, compressed with `codec`),
/// crashes, tears the on-disk copy of every page those rows are on, then
/// recovers with compression off and gets every committed row back.
fn torn_pages_are_repaired_from_compressed_images(codec: WalCompression) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::create(&path, options(codec)).unwrap();
    let t = db.create_table("t").unwrap();
    db.bulk_load(&t, (0..3000u64).map(|i| (key_u64(i), row(i, 0))))
        .unwrap();
    db.checkpoint().unwrap();
    let before = db.wal_stats();
    let updated: Vec<u64> = (0..3000).step_by(50).collect();
    for chunk in updated.chunks(10) {
        let mut tx = db.begin();
        for &i in chunk {
            tx.update(&t, &key_u64(i), &row(i, 1)).unwrap();
        }
        tx.commit().unwrap();
    }
    let s = db.wal_stats();
    let (fpi, logged, raw) = (
        s.fpi - before.fpi,
        s.fpi_bytes - before.fpi_bytes,
        s.fpi_bytes_uncompressed - before.fpi_bytes_uncompressed,
    );
    assert!(fpi >= 10, "{s:?}");
    // Rows of text: both codecs at least halve the images.
    assert!(logged * 2 < raw, "{codec}: {logged} of {raw} bytes");
    drop(db); // crash: the updates are only in the WAL

    let file = path.join("data").join(t.file_id.to_string());
    let mut bytes = std::fs::read(&file).unwrap();
    let mut torn = BTreeSet::new();
    for &i in &updated {
        let needle = format!("ROW-{i:05}-v0-").into_bytes();
        let at = bytes
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("row on disk");
        torn.insert(at / 8192);
    }
    for &block in &torn {
        // A torn write: the second half of the page holds other bytes.
        for b in &mut bytes[block * 8192 + 4096..(block + 1) * 8192] {
            *b ^= 0x5A;
        }
    }
    std::fs::write(&file, &bytes).unwrap();
    assert!(torn.len() >= 10, "{torn:?}");

    // The images logged since the checkpoint are in the WAL compressed
    // with the codec (a nearly empty page may not shrink under zstd's frame
    // header, and stays uncompressed); no other codec appears.
    let expected = ImageCompression::from(codec);
    let images: Vec<PageImage> = wal_records(&path)
        .into_iter()
        .filter(|r| r.data.kind == RecordKind::Commit)
        .flat_map(|r| r.data.blocks.into_iter().filter_map(|b| b.image))
        .collect();
    let compressed = images.iter().filter(|i| i.compression == expected).count();
    assert!(compressed as u64 >= fpi, "{compressed} of {}", images.len());
    assert!(images
        .iter()
        .all(|i| i.compression == expected || i.compression == ImageCompression::None));

    // waldump names each image's codec and both of its sizes.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_untorn"))
        .arg("waldump")
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let shown = format!("compression {codec}]");
    let line = text
        .lines()
        .find(|l| l.contains(&shown))
        .unwrap_or_else(|| {
            panic!("no {shown:?} in waldump's output:\n{text}");
        });
    assert!(line.contains("bytes uncompressed"), "{line}");

    let db = Database::open(&path, Options::default()).unwrap();
    let r = &db.recovery;
    assert!(r.compressed_images_restored as usize >= torn.len(), "{r:?}");
    for block in &torn {
        let name = format!("block {block}");
        assert!(
            r.damaged_pages_repaired.iter().any(|p| p.ends_with(&name)),
            "{name} not repaired: {r:?}"
        );
    }
    let tx = db.begin();
    for i in 0..3000u64 {
        let want = row(i, if i % 50 == 0 { 1 } else { 0 });
        assert_eq!(tx.get(&t, &key_u64(i)).unwrap().unwrap(), want, "row {i}");
    }
    drop(tx);
    db.close().unwrap();
    let report = untorn::verify::verify_database(&PosixFileSystem::default(), &path).unwrap();
    assert!(report.ok(), "{:?}", report.failures);
}

#[test]
fn lz4_images_repair_torn_pages() {
    torn_pages_are_repaired_from_compressed_images(WalCompression::Lz4);
}

#[test]
fn zstd_images_repair_torn_pages() {
    torn_pages_are_repaired_from_compressed_images(WalCompression::Zstd);
}

/// A compressed image whose bytes do not decompress to a page (the record's
/// CRC is right: a writer's bug, not a torn WAL write) stops recovery with
/// a corruption error naming the record's LSN, never a panic.
#[test]
fn a_corrupt_compressed_image_is_a_corruption_error_naming_its_lsn() {
    for codec in [ImageCompression::Lz4, ImageCompression::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Database::create(&path, options(WalCompression::Lz4)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut tx = db.begin();
        tx.insert(&t, &key_u64(1), &row(1, 0)).unwrap();
        tx.commit().unwrap();
        db.close().unwrap();

        let fs = fs();
        let control = ControlFile::read(fs.as_ref(), &path, Issuer::Tool).unwrap();
        let cfg = wal_config(&control);
        let wal_dir = path.join(WAL_DIR);
        let scan = untorn::recovery::scan(&fs, &wal_dir, &cfg, control.redo_lsn).unwrap();
        let wal = Wal::open(fs.clone(), &wal_dir, cfg, scan.end, scan.prev_record).unwrap();
        let (lsn, end) = wal
            .insert(&RecordData {
                kind: RecordKind::Commit,
                xid: 1000,
                blocks: vec![BlockRef {
                    file_id: t.file_id,
                    block: 1,
                    image: Some(PageImage {
                        bytes: vec![0xF0; 64],
                        hole_offset: 0,
                        hole_length: 0,
                        compression: codec,
                    }),
                    data: vec![],
                }],
                main: vec![],
            })
            .unwrap();
        wal.flush(end, Issuer::Tool).unwrap();
        drop(wal);

        let e = Database::open(&path, Options::default())
            .err()
            .expect("the image cannot be restored");
        let msg = e.to_string();
        assert!(
            msg.contains("corruption") && msg.contains(&format!("LSN {lsn}")),
            "{msg}"
        );
        assert!(msg.contains(codec.name()), "{msg}");
    }
}

fn wal_cfg() -> WalConfig {
    WalConfig {
        block_size: 8192,
        segment_size: MB,
        system_id: 0xC0DEC,
        epoch: 1,
        sector_size: 512,
    }
}

fn image_block(block: u32, bytes: Vec<u8>) -> BlockRef {
    BlockRef {
        file_id: 5,
        block,
        image: Some(PageImage {
            bytes,
            hole_offset: 64,
            hole_length: 8192 - 5000,
            compression: ImageCompression::None,
        }),
        data: vec![],
    }
}

/// The writer compresses what shrinks, keeps what does not, counts both
/// sizes, and the reader gives back the compressed images.
#[test]
fn the_writer_compresses_what_shrinks_and_counts_both_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let wal_dir = dir.path().join("wal");
    let wal = Wal::create(fs(), &wal_dir, wal_cfg())
        .unwrap()
        .with_image_compression(ImageCompression::Zstd);
    let text: Vec<u8> = (0..5000).map(|i| b"balance=100;"[i % 12]).collect();
    let mut rng = SplitMix64::new(77);
    let noise: Vec<u8> = (0..5000).map(|_| rng.next_u64() as u8).collect();
    let commit = RecordData {
        kind: RecordKind::Commit,
        xid: 1,
        blocks: vec![image_block(1, text.clone()), image_block(2, noise.clone())],
        main: vec![],
    };
    let split = RecordData {
        kind: RecordKind::StructureChange,
        xid: 0,
        blocks: vec![image_block(3, text.clone())],
        main: vec![],
    };
    wal.insert(&commit).unwrap();
    let (_, end) = wal.insert(&split).unwrap();
    wal.flush(end, Issuer::Client).unwrap();
    let s = wal.stats();
    // Only the commit's images are counted (as wal_fpi), both sizes.
    assert_eq!((s.fpi, s.fpi_bytes_uncompressed), (2, 10_000));
    assert!(s.fpi_bytes > 5000 && s.fpi_bytes < 5100, "{s:?}");
    assert!(s.bytes < 5000 + 5100 + 300, "{s:?}");

    let recs = WalReader::new(fs(), &wal_dir, &wal_cfg(), Lsn(0))
        .unwrap()
        .read_to_end()
        .unwrap();
    assert_eq!(recs.len(), 2);
    let img = |r: usize, b: usize| recs[r].data.blocks[b].image.clone().unwrap();
    for (r, b) in [(0, 0), (1, 0)] {
        let i = img(r, b);
        assert_eq!(i.compression, ImageCompression::Zstd);
        let mut page = vec![0u8; 8192];
        untorn::protect::full_pages::restore_image(&i, &mut page).unwrap();
        assert_eq!(&page[..64], &text[..64]);
        assert!(page[64..64 + 3192].iter().all(|b| *b == 0));
        assert_eq!(&page[64 + 3192..], &text[64..]);
    }
    assert_eq!(img(0, 1).compression, ImageCompression::None);
    assert_eq!(img(0, 1).bytes, noise);
}
