//! CREATE TABLE, CREATE INDEX and ALTER TABLE ... ADD PRIMARY KEY in a
//! block are the block's (`session_ddl`), as DROP and TRUNCATE are: undone
//! by ROLLBACK or a failed statement, unseen by others until COMMIT,
//! durable with it. And DDL that changes a table waits for the
//! transactions writing it, so no write is left out of a new index.

use super::tests_concurrent::{ok, rows, run};
use super::*;
use crate::db::Database;
use crate::options::Options;
use std::sync::Arc;
use std::time::Duration;

fn open(dir: &std::path::Path) -> Arc<SqlEngine> {
    let path = dir.join("db");
    let opts = Options {
        deadlock_timeout: Duration::from_millis(50),
        ..Options::default()
    };
    let db = if path.exists() {
        Database::open(&path, opts)
    } else {
        Database::create(&path, opts)
    };
    SqlEngine::open(Arc::new(db.unwrap())).unwrap()
}

fn int(s: &mut Session, sql: &str) -> i64 {
    match &rows(s, sql)[0][0] {
        Value::Int(n) => *n,
        other => panic!("{sql}: {other:?}"),
    }
}

/// Entries in index `i` of table `t`, read from its engine table.
fn index_entries(e: &SqlEngine, t: &str, i: usize) -> usize {
    let meta = e.catalog.get(t).unwrap();
    let entries =
        e.db.begin_shared()
            .scan(&meta.indexes[i], &[], None, usize::MAX);
    entries.unwrap().len()
}

fn schema(s: &mut Session) {
    ok(s, "create table t (id int primary key, v int)");
    ok(s, "insert into t values (1, 1), (2, 2), (3, 3)");
    ok(s, "create table u (a int, b int)");
    ok(s, "insert into u values (1, 10), (2, 20)");
}

/// Before: each took effect at once and stayed after ROLLBACK (issue 56,
/// "CREATE INDEX / ALTER TABLE in a block not undone").
#[test]
fn a_rollback_takes_back_create_table_create_index_and_add_primary_key() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let tables = {
        let mut s = e.session();
        schema(&mut s);
        e.db.tables().len()
    };
    let (mut a, mut b) = (e.session(), e.session());
    ok(&mut a, "begin");
    ok(&mut a, "create table n (id int primary key, w text)");
    ok(&mut a, "insert into n values (1, 'x')");
    ok(&mut a, "insert into t values (4, 2)");
    ok(&mut a, "create index t_v on t (v)");
    ok(&mut a, "alter table u add primary key (a)");
    // The block sees all three, its own row 4 in the new index.
    assert_eq!(int(&mut a, "select count(*) from n"), 1);
    assert_eq!(int(&mut a, "select count(*) from t where v = 2"), 2);
    assert_eq!(
        run(&mut a, "insert into u values (1, 11)")
            .unwrap_err()
            .code,
        "23505"
    );
    ok(&mut a, "rollback");
    // Nothing of it is left, in this session or another.
    for s in [&mut a, &mut b] {
        assert_eq!(run(s, "select * from n").unwrap_err().code, "42P01");
        assert_eq!(int(s, "select count(*) from t"), 3);
        ok(s, "insert into u values (1, 11)");
        ok(s, "delete from u where b = 11");
    }
    assert!(e.catalog.get("t").unwrap().def.indexes.is_empty());
    assert!(e.catalog.get("u").unwrap().def.primary_key.is_none());
    assert_eq!(e.db.tables().len(), tables);
    // They can be made again, outside a block.
    ok(&mut b, "create table n (id int primary key)");
    ok(&mut b, "create index t_v on t (v)");
    ok(&mut b, "alter table u add primary key (a)");
}

/// Others see a block's new table, index and key only once it commits;
/// then durably, with every row the block wrote (its own rows before
/// CREATE INDEX in the index).
#[test]
fn a_blocks_ddl_is_seen_once_it_commits_and_durably() {
    let dir = tempfile::tempdir().unwrap();
    {
        let e = open(dir.path());
        let (mut a, mut b) = (e.session(), e.session());
        schema(&mut a);
        ok(&mut a, "begin");
        ok(&mut a, "create table n (id int primary key)");
        ok(
            &mut a,
            "insert into n select x from generate_series(1, 20000) as x",
        );
        ok(&mut a, "insert into t values (4, 2)");
        ok(&mut a, "create index t_v on t (v)");
        ok(&mut a, "insert into t values (5, 2)");
        ok(&mut a, "alter table u add primary key (a)");
        assert_eq!(run(&mut b, "select * from n").unwrap_err().code, "42P01");
        assert!(e.catalog.get("t").unwrap().def.indexes.is_empty());
        ok(&mut a, "commit");
        assert_eq!(int(&mut b, "select count(*) from n"), 20000);
        assert_eq!(index_entries(&e, "t", 0), 5);
        assert_eq!(int(&mut b, "select count(*) from t where v = 2"), 3);
        assert_eq!(
            run(&mut b, "insert into u values (2, 1)").unwrap_err().code,
            "23505"
        );
    }
    let e = open(dir.path());
    let mut s = e.session();
    assert_eq!(int(&mut s, "select count(*) from n"), 20000);
    assert_eq!(int(&mut s, "select count(*) from t where v = 2"), 3);
    assert_eq!(index_entries(&e, "t", 0), 5);
    assert!(e.catalog.get("u").unwrap().def.primary_key.is_some());
}

/// A Query message of several statements is one transaction: a CREATE
/// TABLE in it goes when a later statement fails (it stayed before).
#[test]
fn a_create_table_goes_with_its_failed_implicit_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let mut s = e.session();
    let r = s.simple_query("create table x (a int); insert into x values (1); select 1 / 0");
    assert!(r.last().unwrap().is_err(), "{r:?}");
    assert_eq!(run(&mut s, "select * from x").unwrap_err().code, "42P01");
    ok(&mut s, "create table x (a int)");
}

/// CREATE INDEX while another block has written the table: it waits for
/// that block, and the index has its rows. Before, it went ahead, and
/// the block's rows, committed after, had no index entries.
#[test]
fn create_index_waits_for_a_block_writing_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let mut a = e.session();
    schema(&mut a);
    ok(&mut a, "begin");
    ok(&mut a, "insert into t values (10, 7), (11, 7)");
    let e2 = e.clone();
    let builder = std::thread::spawn(move || {
        let mut b = e2.session();
        ok(&mut b, "create index t_v on t (v)");
    });
    std::thread::sleep(Duration::from_millis(300));
    ok(&mut a, "commit");
    builder.join().unwrap();
    assert_eq!(index_entries(&e, "t", 0), 5);
    assert_eq!(int(&mut a, "select count(*) from t where v = 7"), 2);
}

/// A COPY that found its table before a CREATE INDEX changed it writes
/// nothing the index lacks: 40001 at its first rows, nothing stored.
#[test]
fn a_copy_begun_before_create_index_fails_rather_than_miss_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let (mut a, mut b) = (e.session(), e.session());
    schema(&mut a);
    ok(&mut a, "copy t from stdin");
    ok(&mut b, "create index t_v on t (v)");
    let err = a.copy_data(b"20\t7\n").unwrap_err();
    assert_eq!(err.code, "40001", "{err}");
    assert_eq!(int(&mut b, "select count(*) from t"), 3);
    assert_eq!(index_entries(&e, "t", 0), 3);
}

/// A CREATE TABLE of a name a block has created and not ended waits for
/// it: 42P07 once the block commits (without the catalog row's lock it
/// would write its own definition over the block's, and lose the block's
/// committed rows).
#[test]
fn create_table_of_a_name_a_block_made_waits_and_is_42p07() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let mut a = e.session();
    ok(&mut a, "begin");
    ok(&mut a, "create table z (id int primary key)");
    ok(&mut a, "insert into z values (1)");
    let e2 = e.clone();
    let other = std::thread::spawn(move || {
        let mut b = e2.session();
        run(&mut b, "create table z (id int primary key)")
            .unwrap_err()
            .code
    });
    std::thread::sleep(Duration::from_millis(300));
    ok(&mut a, "commit");
    assert_eq!(other.join().unwrap(), "42P07");
    assert_eq!(int(&mut a, "select count(*) from z"), 1);
}

/// A cursor reads on through another session's DROP TABLE (and
/// TRUNCATE), which do not wait for it: it returns the rows as they were,
/// and the old engine tables go once it is done (`retired`). Before, the
/// old tables went at once and the cursor's next fetch failed with a
/// false XX001 ("corruption ... block lies beyond the end of the file").
#[test]
fn a_cursor_reads_on_through_a_drop_and_the_tables_go_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let (mut a, mut b) = (e.session(), e.session());
    for t in ["t", "u"] {
        ok(
            &mut a,
            &format!("create table {t} (id int primary key, v int)"),
        );
        ok(
            &mut a,
            &format!("insert into {t} select x, x from generate_series(1, 3000) as x"),
        );
    }
    let tables = e.db.tables().len();
    let mut cursors = Vec::new();
    for t in ["t", "u"] {
        let stmt = a.prepare(&format!("select v from {t}"), &[]).unwrap();
        let Outcome::Cursor { id, .. } = a.start(&stmt, &[]).unwrap() else {
            panic!("no cursor")
        };
        assert_eq!(a.fetch(id, 100).unwrap().rows.len(), 100);
        cursors.push(id);
    }
    ok(&mut b, "drop table t");
    ok(&mut b, "truncate u");
    assert_eq!(run(&mut b, "select * from t").unwrap_err().code, "42P01");
    assert_eq!(int(&mut b, "select count(*) from u"), 0);
    // Two definitions wait for the cursors; u's new table is there.
    assert_eq!(e.catalog.retired.waiting(), 2);
    assert_eq!(e.db.tables().len(), tables + 1);
    for id in cursors {
        let mut sum = 0;
        loop {
            let f = a.fetch(id, 500).unwrap();
            sum += f
                .rows
                .iter()
                .map(|r| match r[0] {
                    Value::Int(v) => v,
                    _ => 0,
                })
                .sum::<i64>();
            if f.tag.is_some() {
                break;
            }
        }
        assert_eq!(sum, (101..=3000).sum::<i64>());
    }
    assert_eq!(e.catalog.retired.waiting(), 0);
    assert_eq!(e.db.tables().len(), tables - 1);
}
