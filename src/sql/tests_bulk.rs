//! Loads (COPY, INSERT ... generate_series) of any size are one
//! transaction: all of it after its commit, none of it after a rollback
//! or an error, and nothing of it seen by others before its commit. Past
//! 10,000 rows their write set spills to disk (txn/spill.rs).

use super::tests_concurrent::{ok, rows, run};
use super::*;
use crate::db::Database;
use crate::options::Options;
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

/// Two sessions COPY into one empty table. The second fails: its rows
/// go, and the first's acknowledged COPY stays whole, rows and index
/// entries. (When loads committed in batches, the failure once emptied
/// the table: the first COPY's 2,500 acknowledged rows were gone.)
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

/// INSERT ... generate_series outside a block: a failure part way
/// (division by zero at g = 5000) leaves nothing, index entries neither.
#[test]
fn a_failed_series_insert_leaves_nothing() {
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

fn copy_in(s: &mut Session, ids: std::ops::Range<i64>) -> Result<Outcome, SqlError> {
    assert!(matches!(ok(s, "copy t from stdin"), Outcome::CopyIn { .. }));
    copy_rows(s, ids);
    s.copy_done()
}

/// Issue 56, item 1: a session creates a table, 3 rows are committed to
/// it, then the same session's `BEGIN; COPY (2 rows); ROLLBACK` left 0
/// rows, durably (the session took the table as created in its block).
/// Now the rollback takes back the COPY's rows and only those; the same
/// for INSERT ... generate_series in a block, and for a COPY that fails
/// in a block before its ROLLBACK.
#[test]
fn a_rollback_takes_back_its_load_and_nothing_committed_before() {
    let (_dir, e) = open();
    let (mut a, mut b) = (e.session(), e.session());
    ok(&mut a, "create table t (id int primary key, v text)");
    ok(&mut a, "create index t_v on t (v)");
    ok(&mut a, "insert into t values (1, 'a'), (2, 'b')");
    ok(&mut b, "insert into t values (3, 'c')");
    let three = Value::Int(3);
    ok(&mut a, "begin");
    copy_in(&mut a, 100..102).unwrap();
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(5));
    ok(&mut a, "rollback");
    assert_eq!(count(&mut a, "select count(*) from t"), three);
    ok(&mut a, "begin");
    ok(
        &mut a,
        "insert into t select g, 'g' from generate_series(100, 199) as g",
    );
    ok(&mut a, "rollback");
    assert_eq!(count(&mut a, "select count(*) from t"), three);
    ok(&mut a, "begin");
    assert!(matches!(
        ok(&mut a, "copy t from stdin"),
        Outcome::CopyIn { .. }
    ));
    copy_rows(&mut a, 100..102);
    assert!(a.copy_data(b"x\tbad\n").is_err());
    ok(&mut a, "rollback");
    assert_eq!(count(&mut a, "select count(*) from t"), three);
    assert_eq!(index_entries(&e), 3);
    // And after a reopening.
    let db = e.db.clone();
    drop((a, b, e));
    let db = Arc::try_unwrap(db).ok().expect("the only handle");
    let dir = db.directory().to_path_buf();
    db.close().unwrap();
    let e = SqlEngine::open(Arc::new(Database::open(&dir, Options::default()).unwrap())).unwrap();
    assert_eq!(count(&mut e.session(), "select count(*) from t"), three);
}

/// Issue 56, item 7: another session saw an unfinished COPY's rows (its
/// committed batches), in a block too. Now a load past the in-memory
/// write set (40,000 rows and index entries: it spills) is seen by its
/// own session, by nobody else until it commits, then whole; and a
/// rollback of one such in a block leaves the rows from before.
#[test]
fn a_large_load_is_invisible_until_it_commits_and_whole_after() {
    let (_dir, e) = open();
    let (mut a, mut b) = (e.session(), e.session());
    ok(&mut a, "create table t (id int primary key, v text)");
    ok(&mut a, "create index t_v on t (v)");
    ok(&mut b, "insert into t values (-1, 'before')");
    assert!(matches!(
        ok(&mut a, "copy t from stdin"),
        Outcome::CopyIn { .. }
    ));
    copy_rows(&mut a, 0..20_000);
    assert_eq!(count(&mut b, "select count(*) from t"), Value::Int(1));
    assert!(matches!(a.copy_done().unwrap(), Outcome::Command { tag } if tag == "COPY 20000"));
    assert_eq!(count(&mut b, "select count(*) from t"), Value::Int(20_001));
    assert_eq!(index_entries(&e), 20_001);
    // In a block: seen inside, rolled back whole.
    ok(&mut a, "begin");
    ok(
        &mut a,
        "insert into t select g, 'g' from generate_series(100000, 124999) as g",
    );
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(45_001));
    assert_eq!(
        count(&mut a, "select count(*) from t where id >= 124990"),
        Value::Int(10)
    );
    assert_eq!(count(&mut b, "select count(*) from t"), Value::Int(20_001));
    ok(&mut a, "rollback");
    assert_eq!(count(&mut b, "select count(*) from t"), Value::Int(20_001));
    assert_eq!(index_entries(&e), 20_001);
    // A failure at its very end leaves none of it either.
    ok(&mut a, "begin");
    copy_in(&mut a, 200_000..230_000).unwrap();
    assert!(run(&mut a, "insert into t values (0, 'dup')").is_err());
    ok(&mut a, "commit");
    assert_eq!(count(&mut b, "select count(*) from t"), Value::Int(20_001));
}

/// A spilled load past temp_file_limit is refused with 53400, as
/// PostgreSQL's temporary files are, and leaves nothing.
#[test]
fn a_load_past_temp_file_limit_is_53400_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        temp_file_limit: 256 * 1024,
        ..Options::default()
    };
    let db = Database::create(&dir.path().join("db"), options).unwrap();
    let e = SqlEngine::open(Arc::new(db)).unwrap();
    let mut a = e.session();
    ok(&mut a, "create table t (id int primary key, v text)");
    let err = run(
        &mut a,
        "insert into t select g, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' from generate_series(1, 40000) as g",
    )
    .unwrap_err();
    assert_eq!(err.code, codes::CONFIGURATION_LIMIT_EXCEEDED, "{err}");
    assert_eq!(count(&mut a, "select count(*) from t"), Value::Int(0));
    assert_eq!(
        std::fs::read_dir(dir.path().join("db/spill"))
            .unwrap()
            .count(),
        0
    );
}
