//! End-to-end tests of `untorn stats` on the real binary: the figures a
//! clean shutdown saved, as tables and as JSON, the note when the database
//! was not shut down cleanly since, and the refusal when none were saved.

mod common;

use common::{insert_rows, untorn_on};
use untorn::{Database, Options};

fn options() -> Options {
    Options {
        buffer_pool_size: 8 << 20,
        ..Options::default()
    }
}

#[test]
fn stats_prints_what_the_last_clean_shutdown_saved() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Database::create(&dir, options()).unwrap();
    let t = db.create_table("t").unwrap();
    insert_rows(&db, &t, 0..2000);
    db.checkpoint().unwrap();
    let before_close = db.statistics();
    db.close().unwrap();

    let run = untorn_on("stats", &dir, &["--json"]);
    run.expect_code(0)
        .expect_json("/up_to_date", true)
        .expect_json("/database_state", "shut_down")
        .expect_json("/statistics/openings", 1);
    let j = run.json();
    let ctx = run.context();
    let s = &j["statistics"];
    let records = s["wal"]["records"].as_u64().expect("wal.records");
    assert!(records > before_close.wal.records, "{ctx}");
    let fsyncs = s["wal"]["fsyncs"].as_u64().expect("wal.fsyncs");
    assert!(fsyncs >= 1, "{ctx}");
    // Two requested checkpoints of the opening, one asked for, one at shutdown.
    assert_eq!(s["checkpointer"]["requested"].as_u64(), Some(3), "{ctx}");
    assert_eq!(
        s["checkpoint_log"].as_array().map(Vec::len),
        Some(3),
        "{ctx}"
    );
    let io = s["io"].as_array().expect("io rows");
    let checkpointer_data = io
        .iter()
        .find(|r| r["issuer"] == "checkpointer" && r["kind"] == "data")
        .unwrap_or_else(|| panic!("no checkpointer data row\n{ctx}"));
    assert!(checkpointer_data["writes"].as_u64().unwrap() >= 1, "{ctx}");
    assert_eq!(
        checkpointer_data["write_bytes"].as_u64(),
        s["checkpointer"]["pages_written"]
            .as_u64()
            .map(|p| p * 8192),
        "{ctx}"
    );

    let text = untorn_on("stats", &dir, &[]);
    text.expect_code(0)
        .expect_stdout("WAL (pg_stat_wal)")
        .expect_stdout("I/O (pg_stat_io)")
        .expect_stdout("Checkpointer (pg_stat_checkpointer)")
        .expect_stdout("commits per fsync")
        .expect_stdout("end_of_recovery")
        .expect_stdout("shutdown");
    assert!(!text.stdout.contains("note:"), "{}", text.context());
    let records_line = text
        .stdout
        .lines()
        .find(|l| l.contains(" records "))
        .unwrap_or_else(|| panic!("no records row\n{}", text.context()));
    assert!(
        records_line.contains(&records.to_string()),
        "{}",
        text.context()
    );

    // Opened again and left without a clean close: the saved figures are
    // still shown, marked as not current.
    let db = Database::open(&dir, options()).unwrap();
    insert_rows(&db, &t, 2000..2100);
    drop(db);
    untorn_on("stats", &dir, &["--json"])
        .expect_code(0)
        .expect_json("/up_to_date", false)
        .expect_json("/database_state", "in_production")
        .expect_json("/statistics/openings", 1);
    untorn_on("stats", &dir, &[])
        .expect_code(0)
        .expect_stdout("note: the database is")
        .expect_stdout("last clean shutdown");
}

#[test]
fn stats_refuses_a_database_with_no_saved_statistics() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn_on("init", &dir, &[]).expect_code(0);
    untorn_on("stats", &dir, &[]).expect_refused(&["untorn.stats", "clean shutdown"]);
    let nothing = tmp.path().join("nothing");
    untorn_on("stats", &nothing, &["--json"]).expect_refused(&["does not exist"]);
}

#[test]
fn stats_shows_double_writes_by_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut o = options();
    o.creation.torn_page_protection = Some(untorn::TornPageProtection::DoubleWrites);
    // Only checkpoints write pages, so the checkpointer has some to write.
    o.bgwriter_lru_maxpages = 0;
    let db = Database::create(&dir, o).unwrap();
    let t = db.create_table("t").unwrap();
    insert_rows(&db, &t, 0..2000);
    db.close().unwrap();

    let run = untorn_on("stats", &dir, &["--json"]);
    run.expect_code(0);
    let j = run.json();
    let ctx = run.context();
    let s = &j["statistics"];
    let ckpt = &s["double_write"]["checkpointer"];
    // Every page a checkpoint wrote went through the area first.
    let pages = ckpt["pages"]
        .as_u64()
        .expect("double_write.checkpointer.pages");
    assert!(pages >= 2, "{ctx}");
    assert_eq!(
        Some(pages),
        s["checkpointer"]["pages_written"].as_u64(),
        "{ctx}"
    );
    let fsyncs = ckpt["fsyncs"].as_u64().expect("fsyncs");
    assert!(fsyncs >= 1, "{ctx}");
    assert_eq!(
        ckpt["pages_per_fsync"].as_f64(),
        Some(pages as f64 / fsyncs as f64),
        "{ctx}"
    );

    let text = untorn_on("stats", &dir, &[]);
    text.expect_code(0)
        .expect_stdout("Double writes (by writer)")
        .expect_stdout("pages per fsync")
        .expect_stdout("background_writer");
    let line = text
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Double writes"))
        .find(|l| l.contains(" checkpointer "))
        .unwrap_or_else(|| panic!("no checkpointer row\n{}", text.context()));
    assert!(line.contains(&format!(" {pages} ")), "{}", text.context());
}
