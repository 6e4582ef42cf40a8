//! Switching `torn_page_protection` at an opening (docs/SETTINGS.md):
//! recovery runs under the mode the WAL was written with, the
//! end-of-recovery checkpoint completes, and only then is the new mode
//! recorded in the control file and used. The crash laboratory's `switch`
//! fault (tests/crashlab.rs) cuts the power at every step of such openings.

use std::path::{Path, PathBuf};
use untorn::control::ControlFile;
use untorn::file::{posix::PosixFileSystem, Issuer};
use untorn::settings::RequestedCreationSettings;
use untorn::{key_u64, Database, Options, TornPageProtection};
use TornPageProtection::{DoubleWrites, FullPages, Off};

fn options(p: Option<TornPageProtection>) -> Options {
    Options {
        creation: RequestedCreationSettings {
            torn_page_protection: p,
            ..Default::default()
        },
        ..Options::default()
    }
}

fn row(i: u64, version: u32) -> Vec<u8> {
    let mut v = format!("ROW-{i:05}-v{version}-").into_bytes();
    v.resize(120, b'.');
    v
}

fn mode_on_disk(path: &Path) -> TornPageProtection {
    let control = ControlFile::read(&PosixFileSystem::default(), path, Issuer::Tool).unwrap();
    control.settings.torn_page_protection
}

/// A database created in `mode` with 2000 rows, shut down cleanly; returns
/// the data file of its table.
fn create_loaded(path: &Path, mode: TornPageProtection) -> PathBuf {
    let db = Database::create(path, options(Some(mode))).unwrap();
    let t = db.create_table("t").unwrap();
    db.bulk_load(&t, (0..2000u64).map(|i| (key_u64(i), row(i, 0))))
        .unwrap();
    let file = path.join("data").join(t.file_id.to_string());
    db.close().unwrap();
    file
}

/// Updates row 500 to `version`, the page's first change since the
/// opening's checkpoint, then crashes (the update only in the WAL). Returns
/// how many page images the WAL took for it.
fn update_and_crash(db: Database, version: u32) -> u64 {
    let t = db.table("t").unwrap();
    let before = db.wal_stats().fpi;
    let mut tx = db.begin();
    tx.update(&t, &key_u64(500), &row(500, version)).unwrap();
    tx.commit().unwrap();
    let images = db.wal_stats().fpi - before;
    drop(db);
    images
}

/// Tears the on-disk page holding row 500 at `version` (its second half
/// other bytes); returns its block.
fn tear_row_500(file: &Path, version: u32) -> u64 {
    let mut bytes = std::fs::read(file).unwrap();
    let needle = format!("ROW-00500-v{version}-").into_bytes();
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("row 500 on disk");
    let block = (at / 8192) as u64;
    let start = block as usize * 8192 + 4096;
    for b in &mut bytes[start..start + 4096] {
        *b ^= 0x5A;
    }
    std::fs::write(file, &bytes).unwrap();
    block
}

fn assert_rows(db: &Database, row_500_version: u32) {
    let t = db.table("t").unwrap();
    let tx = db.begin();
    for i in 0..2000u64 {
        let want = row(i, if i == 500 { row_500_version } else { 0 });
        assert_eq!(tx.get(&t, &key_u64(i)).unwrap().unwrap(), want, "row {i}");
    }
}

fn repaired(db: &Database, block: u64) -> bool {
    let suffix = format!("block {block}");
    let r = &db.recovery.damaged_pages_repaired;
    r.iter().any(|p| p.ends_with(&suffix))
}

/// `off` to `full_pages`: the first change after the switch logs the page's
/// image, so a write of it that tears is repaired.
#[test]
fn off_to_full_pages_protects_the_first_change_after_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let file = create_loaded(&path, Off);
    let db = Database::open(&path, options(Some(FullPages))).unwrap();
    assert_eq!(db.settings().torn_page_protection, FullPages);
    assert_eq!(mode_on_disk(&path), FullPages);
    assert_eq!(update_and_crash(db, 1), 1, "one image for the first change");
    let block = tear_row_500(&file, 0);
    // No mode asked: the database's (now full_pages) is kept.
    let db = Database::open(&path, Options::default()).unwrap();
    assert!(repaired(&db, block), "{:?}", db.recovery);
    assert_rows(&db, 1);
    assert_eq!(db.settings().torn_page_protection, FullPages);
    db.close().unwrap();
    let report = untorn::verify::verify_database(&PosixFileSystem::default(), &path).unwrap();
    assert!(report.ok(), "{:?}", report.failures);
}

/// `full_pages` to `off`: the crashed WAL was written under `full_pages`,
/// so recovery repairs the torn page from its image; from the switch on,
/// no image is logged and a torn page is detected, not repaired.
#[test]
fn full_pages_to_off_recovers_with_the_images_then_logs_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let file = create_loaded(&path, FullPages);
    let db = Database::open(&path, Options::default()).unwrap();
    assert_eq!(update_and_crash(db, 1), 1);
    let block = tear_row_500(&file, 0);
    let db = Database::open(&path, options(Some(Off))).unwrap();
    assert!(repaired(&db, block), "{:?}", db.recovery);
    assert_rows(&db, 1);
    assert_eq!(db.settings().torn_page_protection, Off);
    assert_eq!(mode_on_disk(&path), Off);
    // The end-of-recovery checkpoint wrote row 500's page (v1); under
    // `off` its next change logs no image.
    assert_eq!(update_and_crash(db, 2), 0, "no image under off");
    let block = tear_row_500(&file, 1);
    let e = Database::open(&path, Options::default())
        .err()
        .expect("the torn page is detected, not repaired");
    assert!(e.to_string().contains(&format!("block {block}")), "{e}");
}

fn area_files(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path.join("dw"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `off` to `double_writes` and back to `full_pages`: the area is created
/// before the control file names the mode, every row survives a crash
/// under it, and the area is removed once the mode in force does not use it.
#[test]
fn a_switch_into_double_writes_creates_the_area_and_out_of_it_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    create_loaded(&path, Off);
    assert!(area_files(&path).is_empty());
    let db = Database::open(&path, options(Some(DoubleWrites))).unwrap();
    assert_eq!(db.settings().torn_page_protection, DoubleWrites);
    assert_eq!(mode_on_disk(&path), DoubleWrites);
    assert_eq!(
        area_files(&path),
        ["deferred", "shard-0", "shard-1", "shard-2"]
    );
    assert_eq!(update_and_crash(db, 1), 0, "no image under double_writes");
    let db = Database::open(&path, Options::default()).unwrap();
    assert_rows(&db, 1);
    db.close().unwrap();
    let db = Database::open(&path, options(Some(FullPages))).unwrap();
    assert_eq!(mode_on_disk(&path), FullPages);
    assert!(area_files(&path).is_empty(), "{:?}", area_files(&path));
    assert_rows(&db, 1);
    db.close().unwrap();
    let report = untorn::verify::verify_database(&PosixFileSystem::default(), &path).unwrap();
    assert!(report.ok(), "{:?}", report.failures);
}

/// Asking for `double_writes` on a database without page checksums is
/// refused before anything is written, naming both modes and the reason.
#[test]
fn a_switch_to_double_writes_without_checksums_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut create = options(Some(Off));
    create.creation.data_checksums = Some(untorn::ChecksumAlgorithm::Off);
    Database::create(&path, create).unwrap().close().unwrap();
    let control = std::fs::read(path.join("untorn.control")).unwrap();
    let e = Database::open(&path, options(Some(DoubleWrites)))
        .err()
        .expect("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("from off to double_writes") && msg.contains("checksums"),
        "{msg}"
    );
    assert_eq!(std::fs::read(path.join("untorn.control")).unwrap(), control);
    assert!(!path.join("dw").exists());
}
