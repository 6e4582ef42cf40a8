//! UPDATE and DELETE of any size: rows are changed as the scan reads
//! them, within bounded memory (before, every row was read into memory
//! first, up to max_result_rows, 54000 past it), each row changed once
//! even where the change moves it ahead of the scan (the Halloween
//! problem), and a statement whose client has gone stops.

use super::tests_concurrent::{ok, rows, run};
use super::*;
use crate::db::Database;
use crate::options::Options;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// An engine whose scans may hold at most 100 rows.
fn open() -> (tempfile::TempDir, Arc<SqlEngine>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(&dir.path().join("db"), Options::default()).unwrap();
    let limits = limits::Limits {
        max_result_rows: 100,
        ..Default::default()
    };
    (
        dir,
        SqlEngine::open_with_limits(Arc::new(db), limits).unwrap(),
    )
}

fn int(s: &mut Session, sql: &str) -> i64 {
    match &rows(s, sql)[0][0] {
        Value::Int(x) => *x,
        v => panic!("{sql}: {v:?}"),
    }
}

fn tag(s: &mut Session, sql: &str) -> String {
    match ok(s, sql) {
        Outcome::Command { tag } => tag,
        o => panic!("{sql}: {o:?}"),
    }
}

const ROWS: i64 = 5000;

/// Far more rows than max_result_rows are updated and deleted, in one
/// transaction each (a rollback takes all of them back).
#[test]
fn update_and_delete_past_max_result_rows_change_every_row() {
    let (_dir, e) = open();
    let mut s = e.session();
    ok(&mut s, "create table t (id int primary key, v int)");
    ok(&mut s, "create index t_v on t (v)");
    let load = format!("insert into t select x, x % 10 from generate_series(1, {ROWS}) as x");
    ok(&mut s, &load);
    assert_eq!(
        tag(&mut s, "update t set v = v + 1"),
        format!("UPDATE {ROWS}")
    );
    assert_eq!(
        int(&mut s, "select count(*) from t where v = 10"),
        ROWS / 10
    );
    ok(&mut s, "begin");
    assert_eq!(tag(&mut s, "delete from t where id > 10"), "DELETE 4990");
    assert_eq!(int(&mut s, "select count(*) from t"), 10);
    ok(&mut s, "rollback");
    assert_eq!(int(&mut s, "select count(*) from t"), ROWS);
    assert_eq!(tag(&mut s, "delete from t where v = 10"), "DELETE 500");
    assert_eq!(int(&mut s, "select count(*) from t"), ROWS - 500);
    // The index agrees with the rows.
    assert_eq!(int(&mut s, "select count(*) from t where v = 5"), 500);
}

/// A change of the primary key moves each row ahead of a scan in key
/// order, and a change of an index's second column moves its entry
/// ahead of a scan of that index's first: each row is still changed
/// once. (Changing rows as the scan reads them reads the moved ones
/// again, and changes them again.)
#[test]
fn a_change_that_moves_rows_ahead_of_the_scan_changes_each_once() {
    let (_dir, e) = open();
    let mut s = e.session();
    ok(&mut s, "create table t (id int primary key, a int, b int)");
    ok(&mut s, "create index t_ab on t (a, b)");
    let load = format!("insert into t select x, 1, x from generate_series(1, {ROWS}) as x");
    ok(&mut s, &load);
    // Each new key is ahead of the scan (none meets an old one: that is
    // 23505 in key order, as in PostgreSQL).
    let shift = format!("update t set id = id + {ROWS}");
    assert_eq!(tag(&mut s, &shift), format!("UPDATE {ROWS}"));
    assert_eq!(int(&mut s, "select min(id) from t"), ROWS + 1);
    assert_eq!(int(&mut s, "select max(id) from t"), 2 * ROWS);
    // An index scan of a = 1 reads (1, b) in b's order; b + 1 moves each
    // entry one ahead.
    assert_eq!(
        tag(&mut s, "update t set b = b + 1 where a = 1"),
        format!("UPDATE {ROWS}")
    );
    assert_eq!(
        int(&mut s, "select sum(b) from t"),
        (2..=ROWS + 1).sum::<i64>()
    );
    assert_eq!(int(&mut s, "select count(*) from t where a = 1"), ROWS);
    assert_eq!(
        int(&mut s, &format!("select b from t where id = {}", ROWS + 1)),
        2
    );
}

/// The keys a moving UPDATE sets aside go to a temporary file past
/// work_mem, and the file is gone at the statement's end.
#[test]
fn a_moving_update_past_work_mem_spills_its_keys_and_removes_the_file() {
    let (dir, e) = open();
    let mut s = e.session();
    ok(&mut s, "create table t (id int primary key, v int)");
    ok(
        &mut s,
        "insert into t select x, x from generate_series(1, 20000) as x",
    );
    ok(&mut s, "set work_mem = '64kB'");
    assert_eq!(tag(&mut s, "update t set id = -id"), "UPDATE 20000");
    assert_eq!(
        int(&mut s, "select sum(v) from t where id < 0"),
        200_010_000
    );
    assert_eq!(int(&mut s, "select count(*) from t where id = -v"), 20000);
    let spill = dir.path().join("db").join("spill");
    let left: Vec<_> = std::fs::read_dir(&spill)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.iter()
            .all(|n| !n.to_string_lossy().starts_with("sort.")),
        "{left:?}"
    );
}

/// A statement whose client has gone stops at its next probe with
/// 08006, its changes undone; so does every later statement.
#[test]
fn an_update_whose_client_has_gone_stops_and_changes_nothing() {
    let (_dir, e) = open();
    let mut s = e.session();
    ok(&mut s, "create table t (id int primary key, v int)");
    let load = format!("insert into t select x, 0 from generate_series(1, {ROWS}) as x");
    ok(&mut s, &load);
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    // Gone from the third ask on: in the middle of the UPDATE.
    s.interrupt()
        .on_client_check(move || a.fetch_add(1, Ordering::SeqCst) >= 2);
    let e1 = run(&mut s, "update t set v = 1").unwrap_err();
    assert_eq!(e1.code, "08006", "{e1}");
    assert!(asked.load(Ordering::SeqCst) >= 3);
    assert_eq!(run(&mut s, "select 1").unwrap_err().code, "08006");
    let mut other = e.session();
    assert_eq!(int(&mut other, "select sum(v) from t"), 0);
}
