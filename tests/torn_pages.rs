//! A page torn by a crash: `full_pages` repairs it from the full-page image
//! logged at its first change after the checkpoint; `off` detects it and
//! says which page and which data were lost. (`double_writes` repairing a
//! page from its copy: protect/double_writes/recover_tests.rs and the
//! crash laboratory.)

use untorn::settings::RequestedCreationSettings;
use untorn::{key_u64, Database, Options, TornPageProtection};

fn options(p: TornPageProtection) -> Options {
    Options {
        creation: RequestedCreationSettings {
            torn_page_protection: Some(p),
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

/// Loads rows, checkpoints, updates row 500 (its page's first change since
/// the checkpoint), crashes, then tears the on-disk copy of that page.
/// Returns the database directory and the page's data file and block.
fn crash_with_a_torn_page(
    p: TornPageProtection,
    dir: &std::path::Path,
) -> (std::path::PathBuf, u64) {
    let path = dir.join("db");
    let db = Database::create(&path, options(p)).unwrap();
    let t = db.create_table("t").unwrap();
    db.bulk_load(&t, (0..2000u64).map(|i| (key_u64(i), row(i, 0))))
        .unwrap();
    db.checkpoint().unwrap();
    let mut tx = db.begin();
    tx.update(&t, &key_u64(500), &row(500, 1)).unwrap();
    tx.commit().unwrap();
    drop(db); // crash: the update is only in the WAL
    let file = path.join("data").join(t.file_id.to_string());
    let mut bytes = std::fs::read(&file).unwrap();
    let needle = b"ROW-00500-v0-";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("row 500 on disk");
    let block = (at / 8192) as u64;
    // A torn write: the second half of the page holds other bytes.
    let start = block as usize * 8192 + 4096;
    for b in &mut bytes[start..start + 4096] {
        *b ^= 0x5A;
    }
    std::fs::write(&file, &bytes).unwrap();
    (file, block)
}

#[test]
fn full_pages_repairs_a_torn_page() {
    let dir = tempfile::tempdir().unwrap();
    let (_, block) = crash_with_a_torn_page(TornPageProtection::FullPages, dir.path());
    let path = dir.path().join("db");
    let db = Database::open(&path, Options::default()).unwrap();
    assert!(db.recovery.pages_restored_from_images >= 1);
    assert!(
        db.recovery
            .damaged_pages_repaired
            .iter()
            .any(|p| p.ends_with(&format!("block {block}"))),
        "{:?}",
        db.recovery
    );
    let t = db.table("t").unwrap();
    let tx = db.begin();
    for i in 0..2000u64 {
        let want = row(i, if i == 500 { 1 } else { 0 });
        assert_eq!(tx.get(&t, &key_u64(i)).unwrap().unwrap(), want, "row {i}");
    }
    drop(tx);
    db.close().unwrap();
    let report =
        untorn::verify::verify_database(&untorn::file::posix::PosixFileSystem::default(), &path)
            .unwrap();
    assert!(report.ok(), "{:?}", report.failures);
}

#[test]
fn off_detects_a_torn_page_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (file, block) = crash_with_a_torn_page(TornPageProtection::Off, dir.path());
    let e = Database::open(&dir.path().join("db"), Options::default())
        .err()
        .expect("recovery must refuse the torn page");
    let msg = e.to_string();
    assert!(msg.contains(&format!("block {block}")), "{msg}");
    assert!(msg.contains("lost") && msg.contains("full_pages"), "{msg}");
    // verify names it too, with both checksums.
    let report = untorn::verify::verify_database(
        &untorn::file::posix::PosixFileSystem::default(),
        &dir.path().join("db"),
    )
    .unwrap();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    assert_eq!(report.failures[0].block as u64, block);
    assert_eq!(report.failures[0].path, file);
    assert!(report.failures[0].calculated.is_some());
}

#[test]
fn double_writes_without_checksums_is_refused_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(TornPageProtection::DoubleWrites);
    o.creation.data_checksums = Some(untorn::ChecksumAlgorithm::Off);
    let e = Database::create(&dir.path().join("db"), o).err().unwrap();
    assert!(
        e.to_string().contains("double_writes needs page checksums"),
        "{e}"
    );
    assert!(!dir.path().join("db").join("untorn.control").exists());
}
