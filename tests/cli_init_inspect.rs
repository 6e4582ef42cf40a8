//! End-to-end tests of `untorn init` and `untorn inspect` on the real
//! binary: the settings a new database gets, the refusals of bad settings
//! and of what is not a database, and the state a crash leaves.

mod common;

use common::{flip_byte, insert_rows, row, untorn_on};
use std::path::Path;
use untorn::{key_u64, Database, Options};

/// `untorn init` of a new directory with `flags` is refused, naming each of
/// `needles`, and leaves no database behind.
fn assert_init_refused(flags: &[&str], needles: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn_on("init", &dir, flags).expect_refused(needles);
    assert!(!dir.join("untorn.control").exists());
}

/// `untorn inspect` refuses `dir`, as text and as JSON, naming each of
/// `needles`.
fn assert_inspect_refused(dir: &Path, needles: &[&str]) {
    untorn_on("inspect", dir, &[]).expect_refused(needles);
    untorn_on("inspect", dir, &["--json"]).expect_refused(needles);
}

// 1. init with every creation setting, then inspect (JSON and text).
#[test]
fn init_then_inspect_shows_the_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let flags = [
        "--page-size",
        "16KB",
        "--wal-block-size",
        "4KB",
        "--data-checksums",
        "fnv",
        "--torn-page-protection",
        "off",
    ];
    untorn_on("init", &dir, &flags)
        .expect_code(0)
        .expect_stdout("created database");
    assert!(dir.join("untorn.control").is_file());

    let run = untorn_on("inspect", &dir, &["--json"]);
    run.expect_code(0)
        .expect_json("/settings/page_size", 16384)
        .expect_json("/settings/wal_block_size", 4096)
        .expect_json("/settings/data_checksums", "fnv")
        .expect_json("/settings/torn_page_protection", "off")
        .expect_json("/state", "shut_down");
    let j = run.json();
    let ctx = run.context();
    let system_id = j["system_id"].as_u64().expect("system_id is a number");
    assert_ne!(system_id, 0, "{ctx}");
    let checkpoint = j["checkpoint_lsn"].as_u64().expect("checkpoint_lsn");
    let redo = j["redo_lsn"].as_u64().expect("redo_lsn");
    assert!(checkpoint > 0, "{ctx}");
    assert!(redo <= checkpoint, "{ctx}");

    let text = untorn_on("inspect", &dir, &[]);
    text.expect_code(0);
    let line = text.line_starting("Database page size");
    assert!(line.contains("16384"), "{}", text.context());
    text.expect_stdout(&system_id.to_string())
        .expect_stdout("shut down")
        .expect_stdout("fnv");
}

// 2. init refuses bad settings and an existing database, exit 2, no panic.
#[test]
fn init_refuses_a_page_size_of_12kb() {
    assert_init_refused(&["--page-size", "12KB"], &["page_size", "12288"]);
}

#[test]
fn init_refuses_a_wal_block_size_of_3kb() {
    assert_init_refused(&["--wal-block-size", "3KB"], &["wal_block_size", "3072"]);
}

#[test]
fn init_refuses_a_sector_larger_than_the_page_or_not_a_power_of_two() {
    assert_init_refused(
        &["--page-size", "4KB", "--sector-size", "8KB"],
        &["sector_size", "8192"],
    );
    assert_init_refused(&["--sector-size", "3000"], &["sector_size", "3000"]);
}

/// The sector is recorded: the one asked for, else the device's (or 4 KB
/// where the device does not say), and inspect shows it.
#[test]
fn init_records_the_device_sector() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn_on("init", &dir, &["--sector-size", "512"]).expect_code(0);
    untorn_on("inspect", &dir, &["--json"])
        .expect_code(0)
        .expect_json("/settings/sector_size", 512);
    let probed = tmp.path().join("probed");
    untorn_on("init", &probed, &[]).expect_code(0);
    let want = untorn::file::sector::probe_sector_size(tmp.path())
        .unwrap_or(untorn::settings::SAFE_SECTOR_SIZE);
    untorn_on("inspect", &probed, &["--json"])
        .expect_code(0)
        .expect_json("/settings/sector_size", want as u64);
    let text = untorn_on("inspect", &probed, &[]);
    let line = text.line_starting("Device sector size");
    assert!(line.contains(&want.to_string()), "{}", text.context());
}

#[test]
fn init_refuses_an_unknown_checksum_algorithm() {
    assert_init_refused(
        &["--data-checksums", "md5"],
        &["data_checksums", "md5", "crc32c"],
    );
}

#[test]
fn init_refuses_a_directory_that_holds_a_database() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn_on("init", &dir, &[]).expect_code(0);
    let before = std::fs::read(dir.join("untorn.control")).unwrap();
    untorn_on("init", &dir, &["--page-size", "4KB"]).expect_refused(&["already holds a database"]);
    assert_eq!(
        std::fs::read(dir.join("untorn.control")).unwrap(),
        before,
        "a refused init must leave the existing control file alone"
    );
}

// 3. inspect refuses what is not a database, and a damaged control file.
#[test]
fn inspect_refuses_a_missing_directory() {
    let tmp = tempfile::tempdir().unwrap();
    assert_inspect_refused(&tmp.path().join("nothing-here"), &["does not exist"]);
}

#[test]
fn inspect_refuses_an_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    untorn_on("inspect", tmp.path(), &[]).expect_refused(&["not an untorn database"]);
}

#[test]
fn inspect_refuses_a_control_file_with_one_flipped_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn_on("init", &dir, &[]).expect_code(0);
    // Offset 200: inside the sector's reserved zeros, covered by the CRC.
    flip_byte(&dir.join("untorn.control"), 200);
    assert_inspect_refused(&dir, &["untorn.control", "CRC mismatch"]);
}

// 7. A database dropped without close() is in production and recovers.
#[test]
fn reopen_after_a_crash_recovers_every_committed_row() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let rows = 1200u64;
    {
        let db = Database::create(&dir, Options::default()).expect("create");
        let table = db.create_table("t").expect("create table");
        insert_rows(&db, &table, 0..rows);
        drop(db); // no close(): like a crash
    }
    untorn_on("inspect", &dir, &["--json"])
        .expect_code(0)
        .expect_json("/state", "in_production");
    untorn_on("inspect", &dir, &[])
        .expect_code(0)
        .expect_stdout("in production");

    let db = Database::open(&dir, Options::default()).expect("open and recover");
    let table = db.table("t").expect("the table survives the crash");
    let tx = db.begin();
    for i in 0..rows {
        let got = tx.get(&table, &key_u64(i)).expect("get");
        assert_eq!(got.as_deref(), Some(&row(i)[..]), "row {i} after recovery");
    }
    assert_eq!(tx.get(&table, &key_u64(rows)).expect("get"), None);
    drop(tx);
    db.close().expect("close");

    untorn_on("inspect", &dir, &["--json"])
        .expect_code(0)
        .expect_json("/state", "shut_down");
    untorn_on("verify", &dir, &[])
        .expect_code(0)
        .expect_stdout("Bad checksums:   0");
}
