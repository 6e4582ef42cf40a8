//! Commits and row locks against a real database in a temporary directory.

use crate::db::Database;
use crate::options::Options;
use crate::table::key_u64;

fn new_db(options: Options) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(&dir.path().join("db"), options).unwrap();
    (dir, db)
}

/// Commits that do not wait for their flush fill the WAL buffer past its
/// limit; the flush that makes room must run with no leaf latched (the
/// library's tests count latches and a flush asserts none is held).
#[test]
fn making_room_in_the_wal_buffer_flushes_with_no_latch_held() {
    let (_dir, db) = new_db(Options::default());
    let t = db.create_table("t").unwrap();
    let value = vec![7u8; 1000];
    let rows = 24 * 1024u64;
    let before = db.wal_stats();
    let loaded = db.bulk_load(&t, (0..rows).map(|k| (key_u64(k), value.clone())));
    assert_eq!(loaded.unwrap(), rows);
    let wal_bytes = db.wal_stats().bytes - before.bytes;
    assert!(
        wal_bytes > 2 * crate::wal::WAL_BUFFER_LIMIT_BYTES as u64,
        "only {wal_bytes} bytes of WAL: the limit was not reached"
    );
    let tx = db.begin();
    assert_eq!(tx.get(&t, &key_u64(rows - 1)).unwrap().unwrap(), value);
    drop(tx);
    db.close().unwrap();
}

fn options_with_deadlock_timeout(ms: u64) -> Options {
    Options {
        deadlock_timeout: std::time::Duration::from_millis(ms),
        ..Options::default()
    }
}

/// Spins until transaction `xid` waits for a row lock.
fn until_waiting(db: &Database, xid: u64) {
    while db.engine.locks.waiting_for(xid).is_none() {
        std::thread::yield_now();
    }
}

fn value(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

fn read_u64(bytes: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(bytes.unwrap().try_into().unwrap())
}

/// Two transactions locking two rows in opposite orders: a real deadlock.
/// Exactly one ends with the retryable Deadlock; the other commits.
#[test]
fn opposite_lock_orders_end_exactly_one_transaction() {
    let (_dir, db) = new_db(options_with_deadlock_timeout(20));
    let t = db.create_table("t").unwrap();
    let mut tx = db.begin();
    tx.insert(&t, &key_u64(1), &value(0)).unwrap();
    tx.insert(&t, &key_u64(2), &value(0)).unwrap();
    tx.commit().unwrap();
    let both_locked = std::sync::Barrier::new(2);
    let outcomes: Vec<Result<(), crate::error::Error>> = std::thread::scope(|s| {
        let run = |first: u64, second: u64| {
            let (db, t, both_locked) = (&db, &t, &both_locked);
            s.spawn(move || {
                let mut tx = db.begin();
                tx.update(t, &key_u64(first), &value(first)).unwrap();
                both_locked.wait();
                tx.update(t, &key_u64(second), &value(first))?;
                tx.commit().map(|_| ())
            })
        };
        let a = run(1, 2);
        let b = run(2, 1);
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    let deadlocks = outcomes.iter().filter(|r| r.is_err()).count();
    assert_eq!(deadlocks, 1, "{outcomes:?}");
    for e in outcomes.iter().filter_map(|r| r.as_ref().err()) {
        assert!(e.is_retryable(), "{e}");
    }
    assert_eq!(db.engine.locks.locked_rows(), 0);
}

/// A waits for B, B waits for C, no cycle: every transaction commits. The
/// younger ones wait for older holders (wait-die made B and A die here).
#[test]
fn a_chain_of_waits_without_a_cycle_commits_everyone() {
    let (_dir, db) = new_db(options_with_deadlock_timeout(5));
    let t = db.create_table("t").unwrap();
    let (mut c, mut b, mut a) = (db.begin(), db.begin(), db.begin());
    c.upsert(&t, &key_u64(3), b"c").unwrap();
    b.upsert(&t, &key_u64(2), b"b").unwrap();
    let (a_xid, b_xid) = (a.id(), b.id());
    let t = &t;
    std::thread::scope(|s| {
        let b_done = s.spawn(move || {
            b.upsert(t, &key_u64(3), b"b")?;
            b.commit()
        });
        until_waiting(&db, b_xid);
        let a_done = s.spawn(move || {
            a.upsert(t, &key_u64(2), b"a")?;
            a.commit()
        });
        until_waiting(&db, a_xid);
        // Several deadlock checks pass while both wait.
        std::thread::sleep(std::time::Duration::from_millis(30));
        c.commit().unwrap();
        b_done.join().unwrap().unwrap();
        a_done.join().unwrap().unwrap();
    });
    let tx = db.begin();
    assert_eq!(tx.get(t, &key_u64(2)).unwrap().unwrap(), b"a");
    assert_eq!(tx.get(t, &key_u64(3)).unwrap().unwrap(), b"b");
}

/// Many clients incrementing one row (pgbench's branch at scale 1) wait
/// their turn: none is told to retry, and no increment is lost.
#[test]
fn many_threads_incrementing_one_row_never_retry() {
    const THREADS: u64 = 4;
    const EACH: u64 = 100;
    let (_dir, db) = new_db(options_with_deadlock_timeout(20));
    let t = db.create_table("t").unwrap();
    let mut tx = db.begin();
    tx.insert(&t, &key_u64(1), &value(0)).unwrap();
    tx.commit().unwrap();
    let retries = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..EACH {
                    loop {
                        let mut tx = db.begin();
                        let res = tx.get_for_update(&t, &key_u64(1)).and_then(|v| {
                            tx.update(&t, &key_u64(1), &value(read_u64(v) + 1))?;
                            tx.commit()
                        });
                        match res {
                            Ok(_) => break,
                            Err(e) if e.is_retryable() => {
                                retries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
    });
    let sum = read_u64(db.begin().get(&t, &key_u64(1)).unwrap());
    assert_eq!(sum, THREADS * EACH);
    assert_eq!(retries.into_inner(), 0);
}

/// One transaction whose rows need more new leaves than prepare had
/// rounds (it split one leaf per round and gave up after 1,000 rounds):
/// 9,000 rows of 1,200 bytes, six to a leaf, into an empty table, as a
/// COPY of wide rows into a fresh table over the wire. Each split is
/// progress; only rounds without any may end a commit.
#[test]
fn a_commit_needing_over_a_thousand_splits_commits() {
    let (_dir, db) = new_db(Options::default());
    let t = db.create_table("t").unwrap();
    let rows = 9_000u64;
    let mut tx = db.begin();
    for k in 0..rows {
        tx.insert(&t, &key_u64(k), &[k as u8; 1_200]).unwrap();
    }
    tx.commit().unwrap();
    assert_wide_rows(&db, &t, rows);
    db.close().unwrap();
}

/// Six transactions of 800 wide rows each, into adjacent key ranges of one
/// empty table at once (the wire load's concurrent COPYs of customer): each
/// needs hundreds of splits of leaves the others split too. All commit.
#[test]
fn concurrent_big_commits_into_one_empty_table_all_commit() {
    let (_dir, db) = new_db(Options::default());
    let t = db.create_table("t").unwrap();
    let (threads, rows) = (6u64, 800u64);
    std::thread::scope(|s| {
        for n in 0..threads {
            let (db, t) = (&db, &t);
            s.spawn(move || {
                let mut tx = db.begin();
                for k in n * rows..(n + 1) * rows {
                    tx.insert(t, &key_u64(k), &[k as u8; 1_200]).unwrap();
                }
                tx.commit().unwrap();
            });
        }
    });
    assert_wide_rows(&db, &t, threads * rows);
    db.close().unwrap();
}

/// Table `t` holds keys 0..rows, key k with 1,200 bytes of k as u8.
fn assert_wide_rows(db: &Database, t: &crate::table::Table, rows: u64) {
    let tx = db.begin();
    let all = tx.scan(t, &[], None, usize::MAX).unwrap();
    assert_eq!(all.len() as u64, rows);
    for (k, (key, v)) in all.iter().enumerate() {
        assert_eq!(key.as_slice(), key_u64(k as u64));
        assert_eq!(v.as_slice(), [k as u8; 1_200]);
    }
}
