//! End-to-end tests of `untorn verify` and `untorn waldump` on the real
//! binary, over databases filled through the library and then damaged.

mod common;

use common::{flip_byte, insert_rows, untorn_on, Run};
use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use untorn::settings::RequestedCreationSettings;
use untorn::{ChecksumAlgorithm, Database, Options, Table};

/// Default page size of a database created with `Options::default()`.
const PAGE: u64 = 8192;

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

    // --limit 0 printed one record.
    let zero = untorn_on("waldump", &dir, &["--limit", "0"]);
    assert_eq!(zero.code, Some(2), "{}", zero.context());
    zero.expect_stderr("--limit");
    let limited = untorn_on("waldump", &dir, &["--limit", "2"]);
    limited.expect_code(0);
    assert_eq!(limited.lines_starting("kind:"), 2, "{}", limited.context());
}

/// `untorn waldump DIR | head -1`: a reader that stops reading ends the
/// command by SIGPIPE, as it ends cat, with nothing on stderr. Before, the
/// first print panicked ("failed printing to stdout: Broken pipe").
#[test]
fn a_reader_that_stops_reading_ends_waldump_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    filled_database(&dir, Options::default(), 3000);
    // The reader is gone before the command starts: its first write fails
    // whatever the pipe's capacity.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_untorn"))
        .arg("waldump")
        .arg(&dir)
        .stdout(writer)
        .output()
        .expect("run the untorn binary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}\n{stderr}",
        out.status
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
