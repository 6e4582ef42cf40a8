//! DROP TABLE and TRUNCATE in a block are the block's (`session_ddl`):
//! undone by ROLLBACK, an error or the connection's end, seen by others
//! only once the block commits, and durable with it.

use super::tests_concurrent::{ok, rows, run};
use super::*;
use crate::db::Database;
use crate::options::Options;
use std::sync::Arc;

fn open(dir: &std::path::Path) -> Arc<SqlEngine> {
    let path = dir.join("db");
    let db = if path.exists() {
        Database::open(&path, Options::default())
    } else {
        Database::create(&path, Options::default())
    };
    SqlEngine::open(Arc::new(db.unwrap())).unwrap()
}

fn count(s: &mut Session, table: &str) -> i64 {
    match &rows(s, &format!("select count(*) from {table}"))[0][0] {
        Value::Int(n) => *n,
        other => panic!("{other:?}"),
    }
}

/// Before: `BEGIN; DROP TABLE t (or TRUNCATE t); ROLLBACK` did not bring
/// the table's contents back (issue 56, item 6).
#[test]
fn a_rollback_takes_back_drop_and_truncate() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let mut s = e.session();
    ok(&mut s, "create table t (id int primary key, v int)");
    ok(&mut s, "create index t_v on t (v)");
    ok(&mut s, "insert into t values (1, 1), (2, 2), (3, 3)");
    ok(&mut s, "begin");
    ok(&mut s, "truncate t");
    assert_eq!(count(&mut s, "t"), 0);
    ok(&mut s, "insert into t values (9, 9)");
    assert_eq!(count(&mut s, "t"), 1);
    ok(&mut s, "drop table t");
    assert_eq!(run(&mut s, "select * from t").unwrap_err().code, "42P01");
    ok(&mut s, "rollback");
    assert_eq!(count(&mut s, "t"), 3);
    assert_eq!(
        rows(&mut s, "select id from t where v = 2"),
        [[Value::Int(2)]]
    );
    // An error that fails the block takes them back too.
    ok(&mut s, "begin");
    ok(&mut s, "drop table t");
    assert!(run(&mut s, "select 1 / 0").is_err());
    ok(&mut s, "commit");
    assert_eq!(count(&mut s, "t"), 3);
    // So does the connection's end.
    ok(&mut s, "begin");
    ok(&mut s, "truncate t");
    s.close();
    drop(s);
    let mut s = e.session();
    assert_eq!(count(&mut s, "t"), 3);
    // Nothing the rolled-back TRUNCATEs made is left behind.
    let engine_tables = e.db.tables().len();
    drop(s);
    drop(e);
    let e = open(dir.path());
    assert_eq!(e.db.tables().len(), engine_tables);
}

/// Until its block commits, others see the table as committed; after,
/// the new one, durably; the old engine tables are gone.
#[test]
fn others_see_a_blocks_truncate_and_drop_only_once_it_commits() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = open(dir.path());
        let (mut a, mut b) = (e.session(), e.session());
        ok(&mut a, "create table t (id int primary key, v int)");
        ok(&mut a, "create table u (id int primary key)");
        ok(&mut a, "insert into t values (1, 1), (2, 2)");
        ok(&mut a, "insert into u values (1)");
        let before = e.db.tables().len();
        ok(&mut a, "begin");
        ok(&mut a, "truncate t");
        ok(&mut a, "insert into t values (7, 7)");
        ok(&mut a, "drop table u");
        assert_eq!(count(&mut b, "t"), 2);
        assert_eq!(count(&mut b, "u"), 1);
        ok(&mut a, "commit");
        assert_eq!(rows(&mut b, "select id from t"), [[Value::Int(7)]]);
        assert_eq!(run(&mut b, "select * from u").unwrap_err().code, "42P01");
        // t's old rows table went, u's too; t's new one came.
        assert_eq!(e.db.tables().len(), before - 1);
    }
    let e = open(dir.path());
    let mut s = e.session();
    assert_eq!(
        rows(&mut s, "select id, v from t"),
        [[Value::Int(7), Value::Int(7)]]
    );
    assert_eq!(run(&mut s, "select * from u").unwrap_err().code, "42P01");
}

/// What a crash leaves of a block that truncated a table (its session
/// and the database dropped, nothing closed: the block's new engine
/// tables exist, no catalog row names them): the table as committed, and
/// the next opening drops the block's tables.
#[test]
fn a_crash_before_the_blocks_commit_leaves_the_table_as_committed() {
    let dir = tempfile::tempdir().unwrap();
    let tables;
    {
        let e = open(dir.path());
        let mut s = e.session();
        ok(&mut s, "create table t (id int primary key)");
        ok(&mut s, "insert into t values (1), (2)");
        tables = e.db.tables().len();
        ok(&mut s, "begin");
        ok(&mut s, "truncate t");
        ok(&mut s, "insert into t values (3)");
        // No rollback, no close: the process ends here.
        drop(s);
    }
    let e = open(dir.path());
    let mut s = e.session();
    assert_eq!(count(&mut s, "t"), 2);
    assert_eq!(e.db.tables().len(), tables);
}

/// CREATE INDEX reads its table a scan batch at a time (it read every
/// row into memory first): over 25 batches, every row has its entry.
#[test]
fn an_index_built_over_many_scan_batches_has_an_entry_per_row() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let mut s = e.session();
    ok(&mut s, "create table t (id int primary key, v int)");
    ok(
        &mut s,
        "insert into t select x, x % 1000 from generate_series(1, 25000) as x",
    );
    ok(&mut s, "create index t_v on t (v)");
    let meta = e.catalog.get("t").unwrap();
    let tx = e.db.begin_shared();
    let entries = tx.scan(&meta.indexes[0], &[], None, usize::MAX).unwrap();
    assert_eq!(entries.len(), 25000);
    drop(tx);
    assert_eq!(count(&mut s, "t where v = 7"), 25);
}
