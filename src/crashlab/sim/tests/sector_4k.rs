//! 4 KB-sector devices: the engine learns the device's sector at creation,
//! pads every WAL flush to it and refuses a device with larger sectors;
//! the simulated device destroys a damaged sector whole; and the crash
//! laboratory's iterations that lost commits at 4 KB sectors (issue 34,
//! every one a WAL flush that began inside a sector of durable WAL, torn,
//! the sector then unreadable), replayed.

use super::*;
use crate::crashlab::{self, CrashTestOptions, Fault};
use crate::db::Database;
use crate::options::Options;
use crate::settings::{ChecksumAlgorithm, TornPageProtection};
use crate::table::key_u64;

fn db_dir() -> &'static Path {
    Path::new("/sim/sector")
}

fn create_on(fs: &SimFileSystem, wal_block_size: u32) -> Database {
    let mut o = Options::default();
    o.creation.wal_block_size = Some(wal_block_size);
    o.creation.wal_segment_size = Some(1 << 20);
    Database::create_with(
        Arc::new(fs.clone()),
        Arc::new(IoStats::default()),
        db_dir(),
        o,
    )
    .unwrap()
}

/// Every WAL write starts and ends on the device's sector, so no flush
/// rewrites a sector that holds durable WAL (with 512-byte padding on a
/// 4 KB-sector device, flushes began mid-sector: the failing replays).
#[test]
fn every_wal_write_starts_and_ends_on_the_device_sector() {
    for (sector, block) in [
        (512, 8192),
        (4096, 8192),
        (4096, 1024),
        (4096, 2048),
        (8192, 4096),
    ] {
        let fs = new_fs();
        fs.set_sector_size(sector);
        let db = create_on(&fs, block);
        assert_eq!(db.settings().sector_size, sector, "probed at creation");
        let t = db.create_table("t").unwrap();
        for i in 0..40u64 {
            let mut tx = db.begin();
            // Rows of varied length, so flushes end all over a block.
            tx.insert(&t, &key_u64(i), &vec![7u8; 1 + (i as usize * 97) % 700])
                .unwrap();
            tx.commit().unwrap();
        }
        db.close().unwrap();
        let wal_writes: Vec<_> = fs
            .trace()
            .into_iter()
            .filter(|op| op.op == TraceKind::Write && op.file_kind == Some(FileKind::Wal))
            .collect();
        assert!(wal_writes.len() >= 40, "{}", wal_writes.len());
        for op in wal_writes {
            let s = sector as u64;
            assert!(
                op.offset % s == 0 && (op.offset + op.len) % s == 0,
                "sector {sector}, block {block}: WAL write at {} of {} bytes",
                op.offset,
                op.len
            );
        }
        // The WAL reads back whole: the padding is records like any other.
        let db = Database::open_with(
            Arc::new(fs.clone()),
            Arc::new(IoStats::default()),
            db_dir(),
            Options::default(),
        )
        .unwrap();
        let t = db.table("t").unwrap();
        assert_eq!(db.begin().scan(&t, &[], None, 100).unwrap().len(), 40);
        db.close().unwrap();
    }
}

/// A database made for 512-byte sectors, moved to a 4 KB-sector device,
/// is refused with a clear error; one asked for explicitly is recorded.
#[test]
fn a_device_with_larger_sectors_than_recorded_is_refused() {
    let fs = new_fs();
    let mut o = Options::default();
    o.creation.sector_size = Some(512);
    let fs_arc: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db =
        Database::create_with(fs_arc.clone(), Arc::new(IoStats::default()), db_dir(), o).unwrap();
    db.close().unwrap();
    fs.set_sector_size(4096);
    let e = Database::open_with(
        fs_arc.clone(),
        Arc::new(IoStats::default()),
        db_dir(),
        Options::default(),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("512-byte sectors") && e.contains("4096"), "{e}");
    // A smaller device sector than recorded is safe.
    fs.set_sector_size(512);
    let mut o = Options::default();
    o.creation.sector_size = Some(4096);
    let e = Database::open_with(fs_arc, Arc::new(IoStats::default()), db_dir(), o)
        .err()
        .expect("a contradiction")
        .to_string();
    assert!(e.contains("sector_size"), "{e}");
}

/// A torn write that began inside a sector and left that sector old and
/// damaged takes the sector's earlier bytes too, as a real 4 KB-sector
/// drive does; the report says durable data was lost there.
#[test]
fn a_damaged_sector_loses_its_bytes_before_the_write() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0xAA; 512]);
    f.write_at(&[0xBB; 8192], 512, WHO).unwrap();
    let cfg = CrashConfig {
        sector_size: 4096,
        zero_sector_probability: 1.0,
        ..tear_only()
    };
    let mut seen = 0;
    for (seed, c, report) in crashes(&fs, 0..SEEDS, &cfg) {
        let first_unit_old = report
            .damaged_units
            .iter()
            .any(|u| u.offset == 512 && u.durable_data_lost);
        if first_unit_old {
            seen += 1;
            let bytes = c.live_bytes(&path).unwrap();
            assert!(bytes[..4096].iter().all(|b| *b == 0), "seed {seed}");
        }
    }
    assert!(seen > 20, "{seen}");
}

/// The replays of issue 34 (4 KB sectors, every fault): each lost
/// acknowledged commits, or refused to open on damaged durable WAL, at
/// commit ea70a1c; the WAL now pads its flushes to the device's sector.
#[test]
fn the_4k_sector_replays_of_issue_34_lose_nothing() {
    let replays: [(TornPageProtection, u64, u64, ChecksumAlgorithm, u32, bool); 4] = [
        (
            TornPageProtection::DoubleWrites,
            94001,
            3723,
            ChecksumAlgorithm::Crc32c,
            16384,
            true,
        ),
        (
            TornPageProtection::DoubleWrites,
            97009,
            1519,
            ChecksumAlgorithm::Fnv,
            8192,
            true,
        ),
        (
            TornPageProtection::DoubleWrites,
            97015,
            2373,
            ChecksumAlgorithm::Crc32c,
            16384,
            false,
        ),
        (
            TornPageProtection::FullPages,
            97012,
            978,
            ChecksumAlgorithm::Crc32c,
            16384,
            true,
        ),
    ];
    for (mode, seed, first, checksums, page_size, defer) in replays {
        let opts = CrashTestOptions {
            protections: vec![mode],
            faults: Fault::POWER_AND_STORAGE.to_vec(),
            seed,
            first_iteration: first,
            iterations: 1,
            sector_size: 4096,
            data_checksums: checksums,
            page_size,
            double_write_defer_in_place: defer,
            ..CrashTestOptions::default()
        };
        let report = crashlab::run(&opts, |_| {}).expect("the laboratory runs");
        let m = &report.modes[0];
        assert_eq!(m.iterations, 1);
        assert!(
            m.passed() && m.lost_commits == 0 && m.silent_corruptions == 0,
            "seed {seed} iteration {first}: {:?}",
            m.failures
        );
    }
}
