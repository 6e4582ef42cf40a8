//! Sessions of one SqlEngine on real threads: increments are never lost,
//! a lock cycle fails exactly one block with 40P01, and racing
//! DELETE + INSERT of one id (sysbench's) leaves it once.

use super::*;
use crate::db::Database;
use crate::options::Options;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// A new database whose lock waits check for deadlocks after 50 ms, so a
/// cycle is broken quickly.
fn open(dir: &std::path::Path) -> Arc<SqlEngine> {
    let opts = Options {
        deadlock_timeout: Duration::from_millis(50),
        ..Options::default()
    };
    SqlEngine::open(Arc::new(Database::create(dir, opts).unwrap())).unwrap()
}

/// Runs one statement; its error is returned, never hidden.
pub(super) fn run(s: &mut Session, sql: &str) -> Result<Outcome, SqlError> {
    let mut r = s.simple_query(sql);
    assert_eq!(r.len(), 1, "{sql}");
    r.pop().unwrap()
}

pub(super) fn ok(s: &mut Session, sql: &str) -> Outcome {
    run(s, sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

pub(super) fn rows(s: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    match ok(s, sql) {
        Outcome::Rows { rows, .. } => rows,
        o => panic!("{sql}: {o:?}"),
    }
}

fn int(s: &mut Session, sql: &str) -> i64 {
    match rows(s, sql).as_slice() {
        [r] => match r[0] {
            Value::Int(v) => v,
            ref v => panic!("{sql}: {v:?}"),
        },
        r => panic!("{sql}: {r:?}"),
    }
}

/// Runs `body` until it succeeds, retrying on 40P01 only; returns the
/// number of retries. Any other error fails the test.
fn retry(s: &mut Session, mut body: impl FnMut(&mut Session) -> Result<(), SqlError>) -> u64 {
    let mut retries = 0;
    loop {
        match body(s) {
            Ok(()) => return retries,
            Err(e) if e.code == codes::DEADLOCK_DETECTED => {
                if s.status() != TxStatus::Idle {
                    ok(s, "rollback");
                }
                retries += 1;
            }
            Err(e) => panic!("unexpected error: {} {}", e.code, e.message),
        }
    }
}

const THREADS: usize = 4;
const INCREMENTS: usize = 200;

fn increments(block: bool) {
    let dir = tempfile::tempdir().unwrap();
    let eng = open(dir.path());
    let mut s = eng.session();
    ok(&mut s, "create table t(id int primary key, v int not null)");
    ok(&mut s, "insert into t values (1, 0), (2, 0)");
    let retries = AtomicU64::new(0);
    std::thread::scope(|sc| {
        for _ in 0..THREADS {
            sc.spawn(|| {
                let mut s = eng.session();
                for _ in 0..INCREMENTS {
                    let n = retry(&mut s, |s| {
                        if block {
                            // pgbench's tpcb: a read of the row, then its update.
                            run(s, "begin")?;
                            let seen = match run(s, "select v from t where id = 1")? {
                                Outcome::Rows { rows, .. } => rows,
                                o => panic!("{o:?}"),
                            };
                            assert!(
                                matches!(seen.as_slice(), [r] if matches!(r[0], Value::Int(_)))
                            );
                        }
                        match run(s, "update t set v = v + 1 where id = 1")? {
                            Outcome::Command { tag } => assert_eq!(tag, "UPDATE 1"),
                            o => panic!("{o:?}"),
                        }
                        if block {
                            run(s, "commit")?;
                        }
                        Ok(())
                    });
                    retries.fetch_add(n, Relaxed);
                }
                assert_eq!(s.status(), TxStatus::Idle);
            });
        }
    });
    let want = (THREADS * INCREMENTS) as i64;
    assert_eq!(int(&mut s, "select v from t where id = 1"), want);
    assert_eq!(int(&mut s, "select v from t where id = 2"), 0);
    println!(
        "block={block}: {want} increments, {} retries on 40P01",
        retries.load(Relaxed)
    );
}

#[test]
fn autocommit_increments_are_never_lost() {
    increments(false);
}

#[test]
fn block_increments_after_a_select_are_never_lost() {
    increments(true);
}

#[test]
fn a_lock_cycle_fails_exactly_one_block_with_40p01() {
    let dir = tempfile::tempdir().unwrap();
    let eng = open(dir.path());
    let mut s = eng.session();
    ok(&mut s, "create table t(id int primary key, v int not null)");
    ok(&mut s, "insert into t values (1, 0), (2, 0)");
    let barrier = Barrier::new(2);
    // Session A adds 10 to rows 1 then 2, session B 100 to rows 2 then 1.
    let sides = [(1, 2, 10), (2, 1, 100)];
    let won: Vec<bool> = std::thread::scope(|sc| {
        let hs: Vec<_> = sides
            .iter()
            .map(|&(first, second, add)| {
                let (eng, barrier) = (&eng, &barrier);
                sc.spawn(move || {
                    let mut s = eng.session();
                    ok(&mut s, "begin");
                    let up = |id| format!("update t set v = v + {add} where id = {id}");
                    ok(&mut s, &up(first));
                    // Both hold their first row before either asks for its second.
                    barrier.wait();
                    match run(&mut s, &up(second)) {
                        Ok(_) => {
                            assert_eq!(s.status(), TxStatus::InBlock);
                            ok(&mut s, "commit");
                            true
                        }
                        Err(e) => {
                            assert_eq!(e.code, codes::DEADLOCK_DETECTED, "{}", e.message);
                            assert_eq!(s.status(), TxStatus::Failed);
                            let e = run(&mut s, "select v from t where id = 1").unwrap_err();
                            assert_eq!(e.code, codes::IN_FAILED_SQL_TRANSACTION);
                            match ok(&mut s, "rollback") {
                                Outcome::Command { tag } => assert_eq!(tag, "ROLLBACK"),
                                o => panic!("{o:?}"),
                            }
                            assert_eq!(s.status(), TxStatus::Idle);
                            false
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
    let add = if won[0] { 10 } else { 100 };
    assert_eq!(int(&mut s, "select v from t where id = 1"), add);
    assert_eq!(int(&mut s, "select v from t where id = 2"), add);
}

#[test]
fn racing_delete_and_insert_of_one_id_leave_it_once() {
    const IDS: i64 = 8;
    const ROUNDS: i64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let eng = open(dir.path());
    let mut s = eng.session();
    ok(
        &mut s,
        "create table sbtest1(id int not null, k int not null default 0, \
         c char(120) not null default '', pad char(60) not null default '', primary key (id))",
    );
    ok(&mut s, "create index k_1 on sbtest1(k)");
    for id in 1..=IDS {
        ok(
            &mut s,
            &format!("insert into sbtest1 values ({id}, 0, 'c', 'p')"),
        );
    }
    let barrier = Barrier::new(2);
    let (dups, deadlocks) = (AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|sc| {
        for me in 0..2i64 {
            let (eng, barrier, dups, deadlocks) = (&eng, &barrier, &dups, &deadlocks);
            sc.spawn(move || {
                let mut s = eng.session();
                for round in 0..ROUNDS {
                    // Both threads take the same id in the same round.
                    let id = round % IDS + 1;
                    let k = round * 2 + me;
                    // Odd rounds as autocommit statements, even ones in a block.
                    let block = round % 2 == 0;
                    barrier.wait();
                    let r = (|| {
                        if block {
                            run(&mut s, "begin")?;
                        }
                        run(&mut s, &format!("delete from sbtest1 where id = {id}"))?;
                        run(
                            &mut s,
                            &format!("insert into sbtest1 (id, k, c, pad) values ({id}, {k}, 'c{round}', 'p')"),
                        )?;
                        if block {
                            run(&mut s, "commit")
                        } else {
                            Ok(Outcome::Command { tag: "COMMIT".into() })
                        }
                    })();
                    match r {
                        Ok(Outcome::Command { tag }) => assert_eq!(tag, "COMMIT"),
                        Ok(o) => panic!("{o:?}"),
                        Err(e) => {
                            match e.code {
                                codes::UNIQUE_VIOLATION => dups.fetch_add(1, Relaxed),
                                codes::DEADLOCK_DETECTED => deadlocks.fetch_add(1, Relaxed),
                                _ => panic!("unexpected error: {} {}", e.code, e.message),
                            };
                            if block {
                                assert_eq!(s.status(), TxStatus::Failed);
                                ok(&mut s, "rollback");
                            }
                        }
                    }
                    assert_eq!(s.status(), TxStatus::Idle);
                }
            });
        }
    });
    println!(
        "{} rounds: {} duplicate-key failures, {} deadlocks",
        ROUNDS,
        dups.load(Relaxed),
        deadlocks.load(Relaxed)
    );
    // A full scan: each id once, and every id still there.
    let all: Vec<(i64, i64)> = rows(&mut s, "select id, k from sbtest1")
        .iter()
        .map(|r| match (&r[0], &r[1]) {
            (Value::Int(id), Value::Int(k)) => (*id, *k),
            r => panic!("{r:?}"),
        })
        .collect();
    let mut ids: Vec<i64> = all.iter().map(|r| r.0).collect();
    assert_eq!(ids.len() as i64, IDS, "{all:?}");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids, (1..=IDS).collect::<Vec<_>>(), "{all:?}");
    assert_eq!(int(&mut s, "select count(*) from sbtest1"), IDS);
    // Through the index on k, each row is found under its k and only there.
    let mut ks: Vec<i64> = all.iter().map(|r| r.1).collect();
    ks.sort_unstable();
    ks.dedup();
    let mut via_index = 0;
    for k in ks {
        for r in rows(&mut s, &format!("select id from sbtest1 where k = {k}")) {
            assert!(all.contains(&(int_of(&r[0]), k)), "k {k}: {r:?} {all:?}");
            via_index += 1;
        }
    }
    assert_eq!(via_index, all.len());
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(v) => *v,
        v => panic!("{v:?}"),
    }
}

/// A wait for a row lock ignored statement_timeout and CancelRequest
/// (only the server's 10 s shutdown bound ended it); now both end it
/// with 57014, and the holder keeps its lock and its write.
#[test]
fn statement_timeout_and_a_cancel_end_a_wait_for_a_row_lock() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path());
    let (mut holder, mut waiter) = (engine.session(), engine.session());
    ok(&mut holder, "create table t (id int primary key, v int)");
    ok(&mut holder, "insert into t values (1, 0)");
    ok(&mut holder, "begin");
    ok(&mut holder, "update t set v = 1 where id = 1");
    ok(&mut waiter, "set statement_timeout = 100");
    let e = run(&mut waiter, "update t set v = 2 where id = 1").unwrap_err();
    assert_eq!(e.code, codes::QUERY_CANCELED);
    assert!(e.message.contains("statement timeout"), "{e}");
    ok(&mut waiter, "set statement_timeout = 0");
    // A cancel between statements is dropped: sent until the wait ends.
    let interrupt = waiter.interrupt();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = done.clone();
    let canceler = std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            interrupt.cancel();
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let e = run(&mut waiter, "delete from t where id = 1").unwrap_err();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    canceler.join().unwrap();
    assert_eq!(e.code, codes::QUERY_CANCELED);
    assert!(e.message.contains("user request"), "{e}");
    ok(&mut holder, "commit");
    assert_eq!(int(&mut waiter, "select v from t where id = 1"), 1);
}

/// Issue 56, item 6: DROP TABLE and TRUNCATE went ahead while another
/// session's block had written the table, whose COMMIT then failed as if
/// the data were corrupt. Now they wait for it (PostgreSQL's
/// AccessExclusiveLock), and its COMMIT succeeds; the session's own block
/// does not make it wait for itself; a cancel ends the wait.
#[test]
fn drop_and_truncate_wait_for_the_transactions_writing_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(dir.path());
    let (mut a, mut b) = (e.session(), e.session());
    ok(&mut a, "create table t (id int primary key, v int)");
    ok(&mut a, "create index t_v on t (v)");
    for ddl in ["truncate t", "drop table t"] {
        ok(&mut a, "begin");
        ok(&mut a, "insert into t values (1, 1)");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| run(&mut b, ddl).map(|_| ()));
            // It waits: a's row holds it.
            std::thread::sleep(std::time::Duration::from_millis(200));
            assert!(!waiter.is_finished(), "{ddl} did not wait");
            assert!(matches!(ok(&mut a, "commit"), Outcome::Command { tag } if tag == "COMMIT"));
            waiter.join().unwrap().unwrap();
        });
        if ddl == "truncate t" {
            assert_eq!(int(&mut a, "select count(*) from t"), 0);
        }
    }
    // In its own block a session's DROP does not wait for itself.
    ok(&mut a, "create table u (id int primary key)");
    ok(&mut a, "begin");
    ok(&mut a, "insert into u values (1)");
    ok(&mut a, "truncate u");
    ok(&mut a, "rollback");
    // Another's open block: a cancel ends the wait with 57014.
    ok(&mut b, "begin");
    ok(&mut b, "insert into u values (2)");
    let interrupt = a.interrupt();
    std::thread::scope(|s| {
        let waiter = s.spawn(|| run(&mut a, "drop table u"));
        // A cancel before the statement starts is forgotten: repeat it.
        while !waiter.is_finished() {
            interrupt.cancel();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let err = waiter.join().unwrap().unwrap_err();
        assert_eq!(err.code, codes::QUERY_CANCELED, "{err}");
    });
    ok(&mut b, "commit");
    assert_eq!(int(&mut b, "select count(*) from u"), 1);
}
