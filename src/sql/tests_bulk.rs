//! Autocommit bulk loads into an empty table (COPY, INSERT ...
//! generate_series) commit in batches; a failed one deletes what it
//! committed, and only that: another session's rows stay.

use super::tests_concurrent::{ok, rows, run};
use super::*;
use crate::{Database, Options};
use std::sync::Arc;

fn open() -> (tempfile::TempDir, Arc<SqlEngine>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(&dir.path().join("db"), Options::default()).unwrap();
    (dir, SqlEngine::open(Arc::new(db)).unwrap())
}

fn count(s: &mut Session, sql: &str) -> Value {
    rows(s, sql)[0][0].clone()
}

/// Entries in table `t`'s first index, read from its engine table.
fn index_entries(e: &SqlEngine) -> usize {
    let meta = e.catalog.get("t").unwrap();
    let tx = e.db.begin_shared();
    tx.scan(&meta.indexes[0], &[], None, usize::MAX)
        .unwrap()
        .len()
}

fn copy_rows(s: &mut Session, ids: std::ops::Range<i64>) {
    for id in ids {
        s.copy_data(format!("{id}\tv{}\n", id % 7).as_bytes())
            .unwrap();
    }
}

/// Two sessions COPY into one empty table, both batched (each found it
/// empty). The second fails after committing batches: its rows go, and
/// the first's acknowledged COPY stays whole, rows and index entries.
/// Before, the failure emptied the table: the first COPY's 2,500
/// acknowledged rows were gone.
#[test]
fn a_failed_copy_undoes_its_own_rows_not_another_sessions() {
    let (_dir, e) = open();
    let (mut a, mut b) = (e.session(), e.session());
    ok(&mut a, "create table t (id int primary key, v text)");
    ok(&mut a, "create index t_v on t (v)");
    assert!(matches!(
        ok(&mut a, "copy t from stdin"),
        Outcome::CopyIn { .. }
    ));
    assert!(matches!(
        ok(&mut b, "copy t from stdin"),
        Outcome::CopyIn { .. }
    ));
    copy_rows(&mut a, 0..2_500);
    match a.copy_done().unwrap() {
        Outcome::Command { tag } => assert_eq!(tag, "COPY 2500"),
        o => panic!("{o:?}"),
    }
    // Several batches of b commit before its bad line.
    copy_rows(&mut b, 10_000..11_500);
    assert_eq!(
        b.copy_data(b"x\tbad\n").unwrap_err().code,
        codes::INVALID_TEXT_REPRESENTATION
    );
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(2_500));
    assert_eq!(
        count(&mut a, "select count(*) from t where id >= 10000"),
        Value::Int(0)
    );
    // The index holds a's entries and none of b's.
    assert_eq!(index_entries(&e), 2_500);
    // Both sessions go on.
    ok(&mut b, "insert into t values (10000, 'again')");
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(2_501));
}

/// The same path for INSERT ... generate_series outside a block: a
/// failure part way (division by zero at g = 5000) deletes the batches
/// it committed, index entries too.
#[test]
fn a_failed_series_insert_undoes_the_batches_it_committed() {
    let (_dir, e) = open();
    let mut a = e.session();
    ok(&mut a, "create table t (id int primary key, v int)");
    ok(&mut a, "create index t_v on t (v)");
    let err = run(
        &mut a,
        "insert into t select g, 1 / (g - 5000) from generate_series(1, 6000) as g",
    )
    .unwrap_err();
    assert_eq!(err.code, codes::DIVISION_BY_ZERO, "{err}");
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(0));
    assert_eq!(index_entries(&e), 0);
    // Loaded again, whole.
    ok(
        &mut a,
        "insert into t select g, 0 from generate_series(1, 6000) as g",
    );
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(6_000));
}

/// A new database's SQL engine keeping at most `bytes` of a load's keys.
fn with_undo_bound(dir: &std::path::Path, bytes: usize) -> Arc<SqlEngine> {
    let db = Database::create(&dir.join("db"), Options::default()).unwrap();
    let limits = limits::Limits {
        max_load_undo_bytes: bytes,
        ..limits::Limits::default()
    };
    SqlEngine::open_with_limits(Arc::new(db), limits).unwrap()
}

/// A load past `max_load_undo_bytes` (a client may not make the server
/// keep keys without bound) is refused with 54000 and undone, its
/// committed first batch too; the session goes on.
#[test]
fn a_load_past_the_key_bound_is_54000_and_undone() {
    let dir = tempfile::tempdir().unwrap();
    let e = with_undo_bound(dir.path(), 40_000);
    let mut a = e.session();
    ok(&mut a, "create table t (id int primary key, v text)");
    ok(&mut a, "copy t from stdin");
    // Every other id: no two keys consecutive, so each is kept whole (13
    // bytes and 8 of run): the bound falls past the first 1,000-row batch.
    let mut refused = None;
    for id in (0..6_000).step_by(2) {
        if let Err(err) = a.copy_data(format!("{id}\tv\n").as_bytes()) {
            refused = Some((id, err));
            break;
        }
    }
    let (at, err) = refused.expect("the bound refused a row");
    assert_eq!(err.code, codes::PROGRAM_LIMIT_EXCEEDED, "{err}");
    assert!(at > 2_000, "refused at id {at}, before a batch committed");
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(0));
    ok(&mut a, "insert into t values (1, 'after')");
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(1));
}

/// A load in key order keeps its keys as runs: far more rows than the
/// bound holds keys of load, and a failure still undoes every one.
#[test]
fn a_load_in_key_order_passes_the_key_bound_and_is_undone_whole() {
    let dir = tempfile::tempdir().unwrap();
    let e = with_undo_bound(dir.path(), 2_000);
    let mut a = e.session();
    ok(&mut a, "create table t (id int primary key, v text)");
    ok(&mut a, "create table h (v text)");
    // 2,000 bytes hold about 95 keys kept one by one; 20,000 rows in
    // 1,000-row batches make 20 runs.
    let rows = 20_000;
    ok(&mut a, "copy t from stdin");
    for id in 0..rows {
        a.copy_data(format!("{id}\tv\n").as_bytes()).unwrap();
    }
    // A bad row after 20 committed batches: the load fails, undone whole.
    assert!(a.copy_data(b"oops\tv\n").is_err());
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(0));
    // Hidden row ids (no primary key) are consecutive too.
    ok(
        &mut a,
        &format!("insert into h select 'x' from generate_series(1, {rows}) as g"),
    );
    assert_eq!(count(&mut a, "select count(*) from h"), Value::Int(rows));
}
