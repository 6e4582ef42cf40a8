//! End-to-end tests of the `untorn` command-line tools (init, inspect,
//! verify, waldump) driving the real binary, with databases filled through
//! the library where data is needed.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use untorn::settings::RequestedCreationSettings;
use untorn::{key_u64, ChecksumAlgorithm, Database, Options, Table};

/// Default page size of a database created with `Options::default()`.
const PAGE: u64 = 8192;

/// The outcome of one run of the binary, printed in full on any failure.
struct Run {
    what: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn context(&self) -> String {
        format!(
            "command: {}\nexit status: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.what, self.code, self.stdout, self.stderr
        )
    }

    fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "{}", self.context());
        self
    }

    fn expect_stdout(&self, needle: &str) -> &Self {
        assert!(
            self.stdout.contains(needle),
            "stdout should contain {needle:?}\n{}",
            self.context()
        );
        self
    }

    fn expect_stderr(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.contains(needle),
            "stderr should contain {needle:?}\n{}",
            self.context()
        );
        self
    }

    /// A refusal: exit status 2, a message on stderr, no panic.
    fn expect_refused(&self, needles: &[&str]) -> &Self {
        self.expect_code(2);
        assert!(
            !self.stderr.contains("panicked"),
            "the tool panicked instead of refusing\n{}",
            self.context()
        );
        assert!(
            self.stderr.contains("untorn: error:"),
            "no error message on stderr\n{}",
            self.context()
        );
        for n in needles {
            self.expect_stderr(n);
        }
        self
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON: {e}\n{}", self.context()))
    }
}

fn untorn<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(|a| a.as_ref().into()).collect();
    let out: Output = Command::new(env!("CARGO_BIN_EXE_untorn"))
        .args(&args)
        .output()
        .expect("run the untorn binary");
    Run {
        what: format!(
            "untorn {}",
            args.iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn p(path: &Path) -> &std::ffi::OsStr {
    path.as_os_str()
}

fn row(i: u64) -> Vec<u8> {
    let mut v = format!("row {i:>10}:").into_bytes();
    v.resize(100, b'v');
    v
}

/// Creates a database in `dir` with one table holding `rows` rows committed
/// in transactions of 500, closes it cleanly, and returns the table.
fn filled_database(dir: &Path, options: Options, rows: u64) -> Table {
    let db = Database::create(dir, options).expect("create the database");
    let table = db.create_table("t").expect("create the table");
    insert_rows(&db, &table, 0..rows);
    db.close().expect("close cleanly");
    table
}

fn insert_rows(db: &Database, table: &Table, rows: std::ops::Range<u64>) {
    let keys: Vec<u64> = rows.collect();
    for chunk in keys.chunks(500) {
        let mut tx = db.begin();
        for &i in chunk {
            tx.insert(table, &key_u64(i), &row(i)).expect("insert");
        }
        tx.commit().expect("commit");
    }
}

fn data_file(dir: &Path, table: &Table) -> PathBuf {
    dir.join("data").join(table.file_id.to_string())
}

fn read_block(path: &Path, block: u64) -> Vec<u8> {
    let f = std::fs::File::open(path).expect("open the data file");
    let mut buf = vec![0u8; PAGE as usize];
    f.read_exact_at(&mut buf, block * PAGE)
        .expect("read the block");
    buf
}

fn write_block(path: &Path, block: u64, bytes: &[u8]) {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open the data file");
    f.write_all_at(bytes, block * PAGE)
        .expect("write the block");
    f.sync_all().unwrap();
}

fn flip_byte(path: &Path, offset: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open the file to damage");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= 0x5A;
    f.write_all_at(&b, offset).unwrap();
    f.sync_all().unwrap();
}

/// The number after `label` on the line of the verify report that starts with it.
fn report_number(run: &Run, label: &str) -> u64 {
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line\n{}", run.context()));
    line[label.len()..]
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{label:?} line {line:?}: {e}\n{}", run.context()))
}

fn blocks_in(path: &Path) -> u64 {
    std::fs::metadata(path).expect("data file").len() / PAGE
}

// 1. init with every creation setting, then inspect (JSON and text).
#[test]
fn init_then_inspect_shows_the_settings() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn([
        "init".as_ref(),
        p(&dir),
        "--page-size".as_ref(),
        "16KB".as_ref(),
        "--wal-block-size".as_ref(),
        "4KB".as_ref(),
        "--data-checksums".as_ref(),
        "fnv".as_ref(),
        "--torn-page-protection".as_ref(),
        "off".as_ref(),
    ])
    .expect_code(0)
    .expect_stdout("created database");
    assert!(dir.join("untorn.control").is_file());

    let run = untorn(["inspect".as_ref(), p(&dir), "--json".as_ref()]);
    run.expect_code(0);
    let j = run.json();
    let ctx = run.context();
    assert_eq!(j["settings"]["page_size"], 16384, "{ctx}");
    assert_eq!(j["settings"]["wal_block_size"], 4096, "{ctx}");
    assert_eq!(j["settings"]["data_checksums"], "fnv", "{ctx}");
    assert_eq!(j["settings"]["torn_page_protection"], "off", "{ctx}");
    assert_eq!(j["state"], "shut_down", "{ctx}");
    let system_id = j["system_id"].as_u64().expect("system_id is a number");
    assert_ne!(system_id, 0, "{ctx}");
    let checkpoint = j["checkpoint_lsn"].as_u64().expect("checkpoint_lsn");
    let redo = j["redo_lsn"].as_u64().expect("redo_lsn");
    assert!(checkpoint > 0, "{ctx}");
    assert!(redo <= checkpoint, "{ctx}");

    let text = untorn(["inspect".as_ref(), p(&dir)]);
    text.expect_code(0);
    let line = text
        .stdout
        .lines()
        .find(|l| l.starts_with("Database page size"))
        .unwrap_or_else(|| panic!("no page size line\n{}", text.context()));
    assert!(line.contains("16384"), "{}", text.context());
    text.expect_stdout(&system_id.to_string())
        .expect_stdout("shut down")
        .expect_stdout("fnv");
}

// 2. init refuses bad settings and an existing database, exit 2, no panic.
#[test]
fn init_refuses_a_page_size_of_12kb() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn([
        "init".as_ref(),
        p(&dir),
        "--page-size".as_ref(),
        "12KB".as_ref(),
    ])
    .expect_refused(&["page_size", "12288"]);
    assert!(!dir.join("untorn.control").exists());
}

#[test]
fn init_refuses_a_wal_block_size_of_3kb() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn([
        "init".as_ref(),
        p(&dir),
        "--wal-block-size".as_ref(),
        "3KB".as_ref(),
    ])
    .expect_refused(&["wal_block_size", "3072"]);
    assert!(!dir.join("untorn.control").exists());
}

#[test]
fn init_refuses_an_unknown_checksum_algorithm() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn([
        "init".as_ref(),
        p(&dir),
        "--data-checksums".as_ref(),
        "md5".as_ref(),
    ])
    .expect_refused(&["data_checksums", "md5", "crc32c"]);
    assert!(!dir.join("untorn.control").exists());
}

#[test]
fn init_refuses_a_directory_that_holds_a_database() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn(["init".as_ref(), p(&dir)]).expect_code(0);
    let before = std::fs::read(dir.join("untorn.control")).unwrap();
    untorn([
        "init".as_ref(),
        p(&dir),
        "--page-size".as_ref(),
        "4KB".as_ref(),
    ])
    .expect_refused(&["already holds a database"]);
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
    let dir = tmp.path().join("nothing-here");
    untorn(["inspect".as_ref(), p(&dir)]).expect_refused(&["does not exist"]);
    untorn(["inspect".as_ref(), p(&dir), "--json".as_ref()]).expect_refused(&["does not exist"]);
}

#[test]
fn inspect_refuses_an_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    untorn(["inspect".as_ref(), p(tmp.path())]).expect_refused(&["not an untorn database"]);
}

#[test]
fn inspect_refuses_a_control_file_with_one_flipped_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    untorn(["init".as_ref(), p(&dir)]).expect_code(0);
    // Offset 200: inside the sector's reserved zeros, covered by the CRC.
    flip_byte(&dir.join("untorn.control"), 200);
    untorn(["inspect".as_ref(), p(&dir)]).expect_refused(&["untorn.control", "CRC mismatch"]);
    untorn(["inspect".as_ref(), p(&dir), "--json".as_ref()])
        .expect_refused(&["untorn.control", "CRC mismatch"]);
}

// 4. verify: a clean database passes; one flipped byte in block 2 fails.
#[test]
fn verify_passes_a_clean_database_and_names_a_damaged_block() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let table = filled_database(&dir, Options::default(), 3000);
    let file = data_file(&dir, &table);
    assert!(
        blocks_in(&file) >= 4,
        "the table should span several pages, has {}",
        blocks_in(&file)
    );

    let clean = untorn(["verify".as_ref(), p(&dir)]);
    clean.expect_code(0).expect_stdout("Bad checksums:   0");
    assert!(
        report_number(&clean, "Blocks scanned:") > 0,
        "{}",
        clean.context()
    );
    assert_eq!(
        report_number(&clean, "Bad blocks:"),
        0,
        "{}",
        clean.context()
    );
    let clean_json = untorn(["verify".as_ref(), p(&dir), "--json".as_ref()]);
    clean_json.expect_code(0);
    let j = clean_json.json();
    assert_eq!(j["failures"].as_array().map(Vec::len), Some(0));
    assert!(j["pages_scanned"].as_u64().unwrap() > 0);

    let block2 = read_block(&file, 2);
    assert!(
        block2.iter().any(|&b| b != 0),
        "block 2 should be a written page"
    );
    flip_byte(&file, 2 * PAGE + PAGE / 2);

    let bad = untorn(["verify".as_ref(), p(&dir)]);
    bad.expect_code(1)
        .expect_stdout(&file.display().to_string())
        .expect_stdout("block 2")
        .expect_stdout("calculated checksum")
        .expect_stdout("block contains")
        .expect_stdout("Bad checksums:   1");
    assert_eq!(report_number(&bad, "Bad blocks:"), 1, "{}", bad.context());

    let bad_json = untorn(["verify".as_ref(), p(&dir), "--json".as_ref()]);
    bad_json.expect_code(1);
    let j = bad_json.json();
    let ctx = bad_json.context();
    let failures = j["failures"].as_array().expect("failures array");
    assert_eq!(failures.len(), 1, "{ctx}");
    let f = &failures[0];
    assert_eq!(f["block"], 2, "{ctx}");
    assert_eq!(f["file_id"], table.file_id, "{ctx}");
    let calculated = f["calculated"].as_u64().expect("calculated");
    let stored = f["stored"].as_u64().expect("stored");
    assert_ne!(calculated, stored, "{ctx}");
    assert_eq!(
        f["path"].as_str(),
        Some(file.display().to_string().as_str()),
        "{ctx}"
    );
}

// 5. A page written at the wrong block is caught, with and without checksums.
#[test]
fn verify_catches_a_misdirected_write_by_checksum() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let table = filled_database(&dir, Options::default(), 3000);
    let file = data_file(&dir, &table);
    assert!(blocks_in(&file) >= 4, "{} blocks", blocks_in(&file));
    untorn(["verify".as_ref(), p(&dir)]).expect_code(0);

    let block1 = read_block(&file, 1);
    assert!(block1.iter().any(|&b| b != 0), "block 1 should be written");
    write_block(&file, 3, &block1);

    let run = untorn(["verify".as_ref(), p(&dir)]);
    run.expect_code(1)
        .expect_stdout("block 3")
        .expect_stdout(&file.display().to_string());
    assert!(
        !run.stdout.contains("block 1:"),
        "block 1 itself is intact\n{}",
        run.context()
    );
    let j = untorn(["verify".as_ref(), p(&dir), "--json".as_ref()]).json();
    let failures = j["failures"].as_array().expect("failures array");
    assert_eq!(failures.len(), 1, "{j:#}");
    assert_eq!(failures[0]["block"], 3, "{j:#}");
}

#[test]
fn verify_catches_a_misdirected_write_without_checksums() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let options = Options {
        creation: RequestedCreationSettings {
            data_checksums: Some(ChecksumAlgorithm::Off),
            ..Default::default()
        },
        ..Default::default()
    };
    let table = filled_database(&dir, options, 3000);
    let file = data_file(&dir, &table);
    assert!(blocks_in(&file) >= 4, "{} blocks", blocks_in(&file));
    let j = untorn(["inspect".as_ref(), p(&dir), "--json".as_ref()]).json();
    assert_eq!(j["settings"]["data_checksums"], "off");
    untorn(["verify".as_ref(), p(&dir)]).expect_code(0);

    let block1 = read_block(&file, 1);
    assert!(block1.iter().any(|&b| b != 0), "block 1 should be written");
    write_block(&file, 3, &block1);

    let run = untorn(["verify".as_ref(), p(&dir)]);
    run.expect_code(1)
        .expect_stdout("block 3")
        .expect_stdout(&file.display().to_string());
    let failure_line = run
        .stdout
        .lines()
        .find(|l| l.contains("block 3"))
        .unwrap_or_default();
    assert!(
        failure_line.contains("misdirected") || failure_line.contains("block 1"),
        "the failure should say the page belongs elsewhere\n{}",
        run.context()
    );
    let j = untorn(["verify".as_ref(), p(&dir), "--json".as_ref()]).json();
    let failures = j["failures"].as_array().expect("failures array");
    assert_eq!(failures.len(), 1, "{j:#}");
    assert_eq!(failures[0]["block"], 3, "{j:#}");
    assert!(failures[0]["calculated"].is_null(), "{j:#}");
}

// 6. waldump prints records and per-kind totals.
#[test]
fn waldump_prints_records_and_stats() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    filled_database(&dir, Options::default(), 3000);

    let run = untorn(["waldump".as_ref(), p(&dir)]);
    run.expect_code(0)
        .expect_stdout("kind: commit")
        .expect_stdout("kind: checkpoint")
        .expect_stdout("blkref")
        .expect_stderr("end of valid WAL at");
    assert!(
        run.stdout
            .lines()
            .filter(|l| l.starts_with("kind: commit"))
            .count()
            >= 6,
        "3000 rows in transactions of 500 are at least 6 commits\n{}",
        run.context()
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.context());

    let stats = untorn(["waldump".as_ref(), p(&dir), "--stats".as_ref()]);
    stats.expect_code(0).expect_stderr("end of valid WAL at");
    let total = stats
        .stdout
        .lines()
        .find(|l| l.starts_with("Total"))
        .unwrap_or_else(|| panic!("no Total line\n{}", stats.context()));
    let commit = stats
        .stdout
        .lines()
        .find(|l| l.starts_with("commit "))
        .unwrap_or_else(|| panic!("no commit row\n{}", stats.context()));
    let n = |line: &str| -> u64 {
        line.split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no count in {line:?}\n{}", stats.context()))
    };
    let records = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("kind:"))
        .count() as u64;
    assert_eq!(n(total), records, "{}", stats.context());
    assert!(n(commit) >= 6, "{}", stats.context());

    let limited = untorn([
        "waldump".as_ref(),
        p(&dir),
        "--limit".as_ref(),
        "2".as_ref(),
    ]);
    limited.expect_code(0);
    assert_eq!(
        limited
            .stdout
            .lines()
            .filter(|l| l.starts_with("kind:"))
            .count(),
        2,
        "{}",
        limited.context()
    );
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
    let run = untorn(["inspect".as_ref(), p(&dir), "--json".as_ref()]);
    run.expect_code(0);
    assert_eq!(run.json()["state"], "in_production", "{}", run.context());
    untorn(["inspect".as_ref(), p(&dir)])
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

    let run = untorn(["inspect".as_ref(), p(&dir), "--json".as_ref()]);
    run.expect_code(0);
    assert_eq!(run.json()["state"], "shut_down", "{}", run.context());
    untorn(["verify".as_ref(), p(&dir)])
        .expect_code(0)
        .expect_stdout("Bad checksums:   0");
}

/// `untorn bench` with tiny sizes and durations: the JSON has every field
/// the issue names, for every (workload, mode); tpcb's invariant is checked
/// by the run itself (a broken sum fails the command).
#[test]
fn bench_writes_json_with_every_field_and_keeps_tpcb_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let out = Command::new(env!("CARGO_BIN_EXE_untorn"))
        .args([
            "bench",
            "--workload",
            "tpcb,oltp_read_write",
            "--duration",
            "0.4",
            "--warmup",
            "0.1",
            "--repeat",
            "2",
        ])
        .args([
            "--clients",
            "3",
            "--tables",
            "2",
            "--table-size",
            "500",
            "--scale",
            "1",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--report")
        .arg(dir.path().join("report"))
        .arg("--dir")
        .arg(dir.path().join("dbs"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("vs full_pages") && stdout.contains("vs off"),
        "{stdout}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let results = v.as_array().unwrap();
    assert_eq!(results.len(), 4, "2 workloads x 2 modes");
    for r in results {
        for field in [
            "workload",
            "protection",
            "tps",
            "tps_runs",
            "latency_ms",
            "wal_bytes_per_txn",
            "wal_fpi",
            "dw_page_writes",
            "dw_fsyncs",
            "data_writes",
            "data_fsyncs",
            "checkpoints",
            "cpu_us_per_txn",
            "page_writes_per_txn",
            "device",
            "settings",
        ] {
            assert!(r.get(field).is_some(), "missing {field} in {r}");
        }
        for q in ["avg", "p90", "p99", "max"] {
            assert!(r["latency_ms"][q].is_number(), "{r}");
        }
        assert_eq!(r["tps_runs"].as_array().unwrap().len(), 2);
        assert!(r["tps"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["settings"]["torn_page_protection"], r["protection"]);
    }
    assert!(dir.path().join("report").join("index.html").exists());
}

#[test]
fn bench_refuses_settings_it_does_not_have() {
    for args in [
        vec!["--protection", "double_writes"],
        vec!["--wal-compression", "lz4"],
        vec!["--checkpoint-sort", "on"],
        vec!["--device", "floppy"],
        vec!["--workload", "tpcc"],
        vec!["--wal-block-size", "3KB"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_untorn"))
            .arg("bench")
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("untorn: error:") && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
        let named = args[1] == "3KB" && stderr.contains("wal_block_size");
        assert!(
            named || stderr.contains(args[1]),
            "{args:?} should be named: {stderr}"
        );
    }
}
