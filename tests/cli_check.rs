//! End-to-end tests of `untorn check` on the real binary, over databases
//! that `untorn bench --keep` left, then broken through the library.

mod common;

use common::{flip_byte, untorn, untorn_on, Run};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use untorn::lab::workload::{sysbench, tpcb};
use untorn::{key_u64, Database, Options};

/// A tiny bench of tpcb and oltp_read_write, one mode, with --keep: the
/// directories it printed, tpcb's first.
fn kept_databases(dir: &Path) -> (PathBuf, PathBuf) {
    let dbs = dir.join("dbs");
    let mut args: Vec<&OsStr> = [
        "bench",
        "--workload",
        "tpcb,oltp_read_write",
        "--protection",
        "full_pages",
        "--duration",
        "0.3",
        "--warmup",
        "0",
        "--repeat",
        "1",
        "--clients",
        "2",
        "--tables",
        "2",
        "--table-size",
        "300",
        "--keep",
    ]
    .map(OsStr::new)
    .to_vec();
    let report = dir.join("report");
    for (flag, path) in [("--report", &report), ("--dir", &dbs)] {
        args.extend([OsStr::new(flag), path.as_os_str()]);
    }
    let run = untorn(args);
    run.expect_code(0)
        .expect_stdout("Last round's databases kept (check one with `untorn check DIR`):");
    let tpcb = dbs.join("tpcb-full_pages-crc32c-page8KB-wal8KB");
    let sysbench = dbs.join("oltp_read_write-full_pages-crc32c-page8KB-wal8KB");
    for db in [&tpcb, &sysbench] {
        run.expect_stdout(&format!("  {}", db.display()));
        assert!(
            db.join("data").is_dir(),
            "{}\n{}",
            db.display(),
            run.context()
        );
    }
    (tpcb, sysbench)
}

fn check(dir: &Path, flags: &[&str]) -> Run {
    let run = untorn_on("check", dir, flags);
    assert!(!run.stderr.contains("panicked"), "{}", run.context());
    run
}

#[test]
fn check_passes_on_kept_databases_and_fails_on_a_broken_invariant() {
    let tmp = tempfile::tempdir().unwrap();
    let (tpcb_dir, sysbench_dir) = kept_databases(tmp.path());

    // Detected from the tables, and named.
    let run = check(&tpcb_dir, &[]);
    run.expect_code(0)
        .expect_stdout("open: the database was shut down cleanly")
        .expect_stdout("verify: 5 files")
        .expect_stdout("tpcb: pgbench_accounts: 100000 rows, sum of account balances")
        .expect_stdout("tpcb: invariants hold")
        .expect_stdout("check: ok");
    // A database found shut down is left shut down.
    untorn_on("inspect", &tpcb_dir, &["--json"]).expect_json("/state", "shut_down");
    check(&sysbench_dir, &["--workload", "sysbench"])
        .expect_code(0)
        .expect_stdout("sysbench: sbtest1: 300 rows; index sbtest1_k_1: 300 entries")
        .expect_stdout("sysbench: sbtest2: 300 rows; index sbtest2_k_1: 300 entries")
        .expect_stdout("check: ok");
    // The other workload's tables are not there.
    check(&sysbench_dir, &["--workload", "tpcb"])
        .expect_code(1)
        .expect_stdout("table pgbench_accounts is missing");

    // One account balance changed without teller, branch or history.
    let db = Database::open(&tpcb_dir, Options::default()).unwrap();
    let accounts = db.table(tpcb::ACCOUNTS).unwrap();
    let mut tx = db.begin();
    let mut row = tx.get(&accounts, &key_u64(42)).unwrap().unwrap();
    row[16] ^= 1;
    tx.update(&accounts, &key_u64(42), &row).unwrap();
    tx.commit().unwrap();
    db.close().unwrap();
    check(&tpcb_dir, &["--workload", "tpcb"])
        .expect_code(1)
        .expect_stdout("FAILED: tpcb invariant broken: the four sums differ")
        .expect_stdout("check: FAILED");

    // A row whose k moved without its index entry; then a crash (no
    // close): check recovers the change and still finds it.
    let db = Database::open(&sysbench_dir, Options::default()).unwrap();
    let t = db.table(&sysbench::table_name(1)).unwrap();
    let mut tx = db.begin();
    let mut row = tx.get(&t, &key_u64(7)).unwrap().unwrap();
    row[0] ^= 0x40;
    tx.update(&t, &key_u64(7), &row).unwrap();
    tx.commit().unwrap();
    drop(db);
    check(&sysbench_dir, &[])
        .expect_code(1)
        .expect_stdout("open: recovered from")
        .expect_stdout(
            "FAILED: sysbench invariant broken: index sbtest1_k_1 does not match table sbtest1",
        )
        .expect_stdout("check: FAILED");
}

#[test]
fn check_names_a_damaged_page_and_a_database_it_cannot_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Database::create(&dir, Options::default()).unwrap();
    let t = db.create_table("t").unwrap();
    common::insert_rows(&db, &t, 0..2000);
    db.close().unwrap();
    // No workload's tables: open and verify only.
    let run = check(&dir, &[]);
    run.expect_code(0)
        .expect_stdout("workload: no tpcb, sysbench or tpcc tables; invariants not checked")
        .expect_stdout(
            "check: pages ok; invariants not checked (no tpcb, sysbench or tpcc tables)",
        );
    assert!(!run.stdout.contains("check: ok"), "{}", run.context());

    let file = dir.join("data").join(t.file_id.to_string());
    flip_byte(&file, 8192 + 4000);
    check(&dir, &[])
        .expect_code(1)
        .expect_stdout(&format!("FAILED: verify: {}: block 1:", file.display()));

    let nothing = tmp.path().join("nothing");
    check(&nothing, &[])
        .expect_code(3)
        .expect_stderr("untorn: check: could not open")
        .expect_stderr("nothing");
    check(&dir, &["--workload", "tpcx"]).expect_refused(&["tpcx"]);
}

/// `untorn serve` opens the SQL layer too, reading its catalog: a
/// database whose catalog it refuses is one that check must fail, as not
/// opened, whatever verify and the (absent) workload say.
#[test]
fn check_fails_a_database_that_serve_cannot_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Database::create(&dir, Options::default()).unwrap();
    let catalog = db.create_table("sql.catalog").unwrap();
    let mut tx = db.begin();
    tx.insert(&catalog, b"t", b"not a table definition")
        .unwrap();
    tx.commit().unwrap();
    db.close().unwrap();
    let run = check(&dir, &[]);
    run.expect_code(3)
        .expect_stderr("untorn: check: could not open")
        .expect_stderr("the SQL catalog: malformed SQL catalog row");
    assert!(!run.stdout.contains("check: ok"), "{}", run.context());
    // Left shut down, as it was found.
    untorn_on("inspect", &dir, &["--json"]).expect_json("/state", "shut_down");
    common::serve_expecting_refusal(&dir).expect_refused(&["malformed SQL catalog row"]);
}

/// A check never changes a setting: a mode other than the database's is
/// refused before the opening (it switched the database, issue 36).
#[test]
fn check_never_switches_torn_page_protection() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn_on("init", &dir, &["--torn-page-protection", "off"]).expect_code(0);
    let control = dir.join(untorn::control::CONTROL_FILE_NAME);
    let before = std::fs::read(&control).unwrap();
    let run = check(&dir, &["--torn-page-protection", "double_writes"]);
    run.expect_refused(&["the database's is off, not double_writes"]);
    assert_eq!(
        std::fs::read(&control).unwrap(),
        before,
        "control file changed"
    );
    assert!(!dir.join("dw").exists(), "{}", run.context());
    // Its own mode is accepted, and the check keeps it.
    check(&dir, &["--torn-page-protection", "off"]).expect_code(0);
    check(&dir, &[]).expect_code(0);
    untorn_on("inspect", &dir, &["--json"]).expect_json("/settings/torn_page_protection", "off");
    assert!(!dir.join("dw").exists());
}

/// A pgbench database loaded through `untorn serve` is checked through
/// the SQL catalog (issue 36: "table pgbench_accounts is missing" x4).
#[test]
fn check_reads_a_pgbench_database_made_by_serve() {
    use common::serve::{client, psql, run, Serve};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let serve = Serve::start_in(&dir, &[]);
    let pgbench = |args: &[&str]| {
        let mut c = client("pgbench");
        c.args([
            "-h",
            "127.0.0.1",
            "-p",
            &serve.port.to_string(),
            "-U",
            "bench",
        ])
        .args(args)
        .arg("bench");
        run(c);
    };
    pgbench(&["-i", "-s", "1", "-q"]);
    pgbench(&["-n", "-c", "2", "-t", "50"]);
    assert!(serve.stop().success());
    let run = check(&dir, &[]);
    run.expect_code(0)
        .expect_stdout("tpcb: pgbench_accounts: 100000 rows, sum of account balances")
        .expect_stdout("tpcb: pgbench_history: 100 rows, sum of history deltas")
        .expect_stdout("tpcb: invariants hold")
        .expect_stdout("check: ok");

    // One branch's balance changed alone.
    let serve = Serve::start_in(&dir, &[]);
    psql(
        serve.port,
        "update pgbench_branches set bbalance = bbalance + 7 where bid = 1",
    );
    assert!(serve.stop().success());
    let run = check(&dir, &[]);
    run.expect_code(1)
        .expect_stdout("FAILED: tpcb invariant broken: the four sums differ")
        .expect_stdout("check: FAILED");
    assert!(!run.stdout.contains("check: ok"), "{}", run.context());
}

/// sysbench's index invariant cannot be checked through SQL: the check
/// says so, and does not print `check: ok`.
#[test]
fn check_says_what_it_could_not_check() {
    use common::serve::{psql, Serve};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let serve = Serve::start_in(&dir, &[]);
    psql(
        serve.port,
        "create table sbtest1 (id integer primary key, k integer, c char(120), pad char(60))",
    );
    assert!(serve.stop().success());
    let run = check(&dir, &[]);
    run.expect_code(0)
        .expect_stdout("sysbench: tables made through SQL; only the tpcb invariant is checked through it: invariants not checked")
        .expect_stdout("check: pages ok; invariants not checked");
    assert!(!run.stdout.contains("check: ok"), "{}", run.context());
}

/// Every file of the directory, by path, with its bytes (the lock file
/// left out: a check holds the directory while it runs).
fn files_of(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.file_name() != Some(OsStr::new(untorn::file::lock::LOCK_FILE_NAME)) {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A check changes no byte: on a database left crashed it recovers in
/// memory (the control file was rewritten by the opening's recovery and
/// checkpoints, issue 36), and the next check recovers it again.
#[test]
fn check_leaves_every_file_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    for mode in ["full_pages", "double_writes", "off"] {
        let dir = tmp.path().join(mode);
        let options = Options {
            creation: untorn::settings::RequestedCreationSettings {
                torn_page_protection: Some(mode.parse().unwrap()),
                ..Default::default()
            },
            ..Options::default()
        };
        let db = Database::create(&dir, options).unwrap();
        let table = db.create_table("t").unwrap();
        common::insert_rows(&db, &table, 0..2000);
        db.checkpoint().unwrap();
        common::insert_rows(&db, &table, 2000..3000);
        drop(db); // no shutdown checkpoint: left as a crash leaves it
        let before = files_of(&dir);
        for _ in 0..2 {
            let run = check(&dir, &[]);
            run.expect_code(0)
                .expect_stdout("open: recovered from")
                .expect_stdout("directory unchanged");
            assert!(
                files_of(&dir) == before,
                "{mode}: files changed\n{}",
                run.context()
            );
        }
        untorn_on("inspect", &dir, &["--json"]).expect_json("/state", "in_production");
        // A database shut down cleanly stays so, byte for byte.
        Database::open(&dir, Options::default())
            .unwrap()
            .close()
            .unwrap();
        let before = files_of(&dir);
        check(&dir, &[])
            .expect_code(0)
            .expect_stdout("shut down cleanly");
        assert!(
            files_of(&dir) == before,
            "{mode}: files of a shut-down database changed"
        );
    }
}
