//! Issue 56, item 9: the server kept one open file per table, so with
//! 1,500 tables and `ulimit -n 1024` it did not start ("Too many open
//! files"). Data segments now stay under max_files_per_process, or fewer
//! where RLIMIT_NOFILE leaves fewer: the least recently used close and
//! open again when used (file/open_files.rs).

mod common;

use common::serve::{psql_as, run, Serve};

const TABLES: usize = 300;
/// Fewer descriptors than tables: before, the CREATE TABLEs failed with
/// EMFILE about a hundred tables in.
const FILES: u64 = 256;

fn create_script() -> String {
    let mut sql = String::new();
    for t in 0..TABLES {
        sql += &format!("CREATE TABLE t{t} (id int PRIMARY KEY, v int); ");
        sql += &format!("INSERT INTO t{t} VALUES (1, {t}), (2, {});\n", t * 2);
    }
    sql
}

/// psql running `sql` as a script (every statement's rows printed).
fn psql_script(port: u16, sql: &str) -> String {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), sql).unwrap();
    let mut c = psql_as(port, "bench", "bench");
    c.args(["-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-f"])
        .arg(file.path());
    String::from_utf8(run(c).stdout).unwrap()
}

/// The sum of every table's `v`, read table by table.
fn total(port: u16) -> i64 {
    let sql: String = (0..TABLES)
        .map(|t| format!("SELECT sum(v) FROM t{t};\n"))
        .collect();
    let out = psql_script(port, &sql);
    assert_eq!(out.lines().count(), TABLES, "{out}");
    out.lines().map(|l| l.parse::<i64>().unwrap()).sum()
}

#[test]
fn more_tables_than_file_descriptors_are_served_written_and_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let want: i64 = (0..TABLES as i64).map(|t| 3 * t).sum();
    let serve = Serve::start_with_file_limit(&db, &[], FILES);
    psql_script(serve.port, &create_script());
    assert_eq!(total(serve.port), want);
    // Written through segments that were closed and opened again, then
    // a crash: recovery reads them all under the same bound.
    let updates: String = (0..TABLES)
        .map(|t| format!("UPDATE t{t} SET v = v + 1 WHERE id = 1;\n"))
        .collect();
    psql_script(serve.port, &updates);
    serve.kill();
    let serve = Serve::start_with_file_limit(&db, &[], FILES);
    assert_eq!(total(serve.port), want + TABLES as i64);
    assert!(serve.stop().success());
    // A clean start after a clean stop; then `untorn check` finds it sound.
    let serve = Serve::start_with_file_limit(&db, &[], FILES);
    assert_eq!(total(serve.port), want + TABLES as i64);
    assert!(serve.stop().success());
    common::untorn_on("check", &db, &[]).expect_code(0);
}

/// A bound the descriptors cannot meet is refused at start, naming the
/// setting and `ulimit -n`, not met with EMFILE later.
#[test]
fn too_few_descriptors_for_any_data_file_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = common::serve_command(&dir.path().join("db"), &[]);
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 40,
                rlim_max: 40,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("max_files_per_process") && stderr.contains("ulimit -n"),
        "{stderr}"
    );
}
