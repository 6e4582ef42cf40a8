//! End-to-end tests of the `untorn` command-line tools (init, inspect,
//! verify, waldump, bench) driving the real binary, with databases filled
//! through the library where data is needed.

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
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

    /// The JSON on stdout holds `want` at `pointer` (`/settings/page_size`).
    fn expect_json(&self, pointer: &str, want: impl Into<serde_json::Value>) -> &Self {
        let want = want.into();
        assert_eq!(
            self.json().pointer(pointer),
            Some(&want),
            "{pointer}\n{}",
            self.context()
        );
        self
    }

    /// The first line of stdout that starts with `prefix`.
    fn line_starting(&self, prefix: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?}\n{}", self.context()))
    }

    /// How many lines of stdout start with `prefix`.
    fn lines_starting(&self, prefix: &str) -> usize {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .count()
    }

    /// The number after `label` on the line of the verify report that
    /// starts with it.
    fn number_after(&self, label: &str) -> u64 {
        let line = self.line_starting(label);
        line[label.len()..]
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{label:?} line {line:?}: {e}\n{}", self.context()))
    }
}

fn untorn<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().into()).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_untorn"))
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

/// `untorn <command> <dir> <flags>...`: how every tool but bench is called.
fn untorn_on(command: &str, dir: &Path, flags: &[&str]) -> Run {
    let mut args = vec![OsStr::new(command), dir.as_os_str()];
    args.extend(flags.iter().map(OsStr::new));
    untorn(args)
}

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

/// A database in `dir` of 3000 rows over several blocks, which verify
/// passes: its table and the table's data file.
fn verified_database(dir: &Path, options: Options) -> (Table, PathBuf) {
    let table = filled_database(dir, options, 3000);
    let file = data_file(dir, &table);
    assert!(
        blocks_in(&file) >= 4,
        "the table should span several pages, has {}",
        blocks_in(&file)
    );
    untorn_on("verify", dir, &[]).expect_code(0);
    (table, file)
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

fn blocks_in(path: &Path) -> u64 {
    std::fs::metadata(path).expect("data file").len() / PAGE
}

/// Copies block 1 of `file` over block 3, as a write sent to the wrong
/// block would; then verify of `dir` must fail naming block 3 of `file`,
/// and only it in its JSON. Returns the text run and the JSON failure.
fn misdirect_block_1_to_3(dir: &Path, file: &Path) -> (Run, serde_json::Value) {
    let block1 = read_block(file, 1);
    assert!(block1.iter().any(|&b| b != 0), "block 1 should be written");
    write_block(file, 3, &block1);

    let run = untorn_on("verify", dir, &[]);
    run.expect_code(1)
        .expect_stdout("block 3")
        .expect_stdout(&file.display().to_string());
    let j = untorn_on("verify", dir, &["--json"]).json();
    let failures = j["failures"].as_array().expect("failures array");
    assert_eq!(failures.len(), 1, "{j:#}");
    assert_eq!(failures[0]["block"], 3, "{j:#}");
    (run, failures[0].clone())
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

// 4. verify: a clean database passes; one flipped byte in block 2 fails.
#[test]
fn verify_passes_a_clean_database_and_names_a_damaged_block() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (table, file) = verified_database(&dir, Options::default());

    let clean = untorn_on("verify", &dir, &[]);
    clean.expect_code(0).expect_stdout("Bad checksums:   0");
    assert!(
        clean.number_after("Blocks scanned:") > 0,
        "{}",
        clean.context()
    );
    assert_eq!(clean.number_after("Bad blocks:"), 0, "{}", clean.context());
    let clean_json = untorn_on("verify", &dir, &["--json"]);
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

    let bad = untorn_on("verify", &dir, &[]);
    bad.expect_code(1)
        .expect_stdout(&file.display().to_string())
        .expect_stdout("block 2")
        .expect_stdout("calculated checksum")
        .expect_stdout("block contains")
        .expect_stdout("Bad checksums:   1");
    assert_eq!(bad.number_after("Bad blocks:"), 1, "{}", bad.context());

    let bad_json = untorn_on("verify", &dir, &["--json"]);
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
    let (_, file) = verified_database(&dir, Options::default());
    let (run, _) = misdirect_block_1_to_3(&dir, &file);
    assert!(
        !run.stdout.contains("block 1:"),
        "block 1 itself is intact\n{}",
        run.context()
    );
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
    let (_, file) = verified_database(&dir, options);
    untorn_on("inspect", &dir, &["--json"]).expect_json("/settings/data_checksums", "off");

    let (run, failure) = misdirect_block_1_to_3(&dir, &file);
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
    assert!(failure["calculated"].is_null(), "{failure:#}");
}

// 6. waldump prints records and per-kind totals.
#[test]
fn waldump_prints_records_and_stats() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    filled_database(&dir, Options::default(), 3000);

    let run = untorn_on("waldump", &dir, &[]);
    run.expect_code(0)
        .expect_stdout("kind: commit")
        .expect_stdout("kind: checkpoint")
        .expect_stdout("blkref")
        .expect_stderr("end of valid WAL at");
    assert!(
        run.lines_starting("kind: commit") >= 6,
        "3000 rows in transactions of 500 are at least 6 commits\n{}",
        run.context()
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.context());

    let stats = untorn_on("waldump", &dir, &["--stats"]);
    stats.expect_code(0).expect_stderr("end of valid WAL at");
    let count = |prefix: &str| -> u64 {
        let line = stats.line_starting(prefix);
        line.split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no count in {line:?}\n{}", stats.context()))
    };
    let records = run.lines_starting("kind:") as u64;
    assert_eq!(count("Total"), records, "{}", stats.context());
    assert!(count("commit ") >= 6, "{}", stats.context());

    let limited = untorn_on("waldump", &dir, &["--limit", "2"]);
    limited.expect_code(0);
    assert_eq!(limited.lines_starting("kind:"), 2, "{}", limited.context());
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

/// `untorn bench` with tiny sizes and durations: the JSON has every field
/// the issue names, for every (workload, mode); tpcb's invariant is checked
/// by the run itself (a broken sum fails the command).
#[test]
fn bench_writes_json_with_every_field_and_keeps_tpcb_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let report = dir.path().join("report");
    let dbs = dir.path().join("dbs");
    let mut args: Vec<&OsStr> = [
        "bench",
        "--workload",
        "tpcb,oltp_read_write",
        "--duration",
        "0.4",
        "--warmup",
        "0.1",
        "--repeat",
        "2",
        "--clients",
        "3",
        "--tables",
        "2",
        "--table-size",
        "500",
        "--scale",
        "1",
    ]
    .map(OsStr::new)
    .to_vec();
    for (flag, path) in [("--json", &json), ("--report", &report), ("--dir", &dbs)] {
        args.extend([OsStr::new(flag), path.as_os_str()]);
    }
    untorn(args)
        .expect_code(0)
        .expect_stdout("vs full_pages")
        .expect_stdout("vs off");
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
    assert!(report.join("index.html").exists());
}

#[test]
fn bench_refuses_settings_it_does_not_have() {
    for args in [
        ["--protection", "double_writes"],
        ["--wal-compression", "lz4"],
        ["--checkpoint-sort", "on"],
        ["--device", "floppy"],
        ["--workload", "tpcc"],
        ["--wal-block-size", "3KB"],
    ] {
        let run = untorn(["bench", args[0], args[1]]);
        run.expect_refused(&[]);
        let named = args[1] == "3KB" && run.stderr.contains("wal_block_size");
        assert!(
            named || run.stderr.contains(args[1]),
            "{args:?} should be named\n{}",
            run.context()
        );
    }
}
