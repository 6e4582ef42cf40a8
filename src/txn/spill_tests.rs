//! Transactions whose write set spills to disk: atomic at any size, their
//! own writes read back, their tables held whole, finished after a crash.

use super::spill::{committed_path, pending_path, SPILL_DIR};
use crate::db::Database;
use crate::options::Options;
use crate::table::key_u64;
use crate::table::Table;

/// A write set of 100 rows in memory: a few thousand rows spill many runs.
fn small_budget() -> Options {
    Options {
        max_write_set_rows: 100,
        deadlock_timeout: std::time::Duration::from_millis(20),
        ..Options::default()
    }
}

fn new_db(options: Options) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(&dir.path().join("db"), options).unwrap();
    (dir, db)
}

fn count(db: &Database, t: &Table) -> usize {
    db.begin().scan(t, &[0], None, usize::MAX).unwrap().len()
}

fn spill_files(db: &Database) -> usize {
    let dir = db.directory().join(SPILL_DIR);
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

const ROWS: u64 = 5000;

/// Inserts ROWS rows, then changes some of them again (an update of a
/// spilled row, a delete of one, a re-insert of a deleted one).
fn load(tx: &mut crate::txn::Transaction<'_>, t: &Table) {
    for k in 0..ROWS {
        tx.insert(t, &key_u64(k), &k.to_le_bytes()).unwrap();
    }
    assert!(tx.update(t, &key_u64(10), b"ten").unwrap());
    assert!(tx.delete(t, &key_u64(20)).unwrap());
    assert!(tx.delete(t, &key_u64(30)).unwrap());
    tx.insert(t, &key_u64(30), b"thirty").unwrap();
}

/// The state `load` leaves, as a committed reader sees it.
fn check_loaded(db: &Database, t: &Table) {
    let tx = db.begin();
    assert_eq!(tx.get(t, &key_u64(10)).unwrap().unwrap(), b"ten");
    assert_eq!(tx.get(t, &key_u64(20)).unwrap(), None);
    assert_eq!(tx.get(t, &key_u64(30)).unwrap().unwrap(), b"thirty");
    assert_eq!(
        tx.get(t, &key_u64(ROWS - 1)).unwrap().unwrap(),
        (ROWS - 1).to_le_bytes()
    );
    assert_eq!(count(db, t), ROWS as usize - 1);
}

/// Before this, a transaction past 100 rows failed (WriteSetFull): now it
/// spills, reads its own writes from the runs (get and scan, merged with
/// committed rows), stays invisible to others until its commit, then is
/// whole, across a reopening, with no spill file left.
#[test]
fn a_spilled_transaction_reads_its_writes_and_commits_whole() {
    let (dir, db) = new_db(small_budget());
    let t = db.create_table("t").unwrap();
    // Committed rows between the ones the load writes.
    let mut tx = db.begin();
    for k in [5_000_000u64, 5_000_002] {
        tx.insert(&t, &key_u64(k), b"committed").unwrap();
    }
    tx.commit().unwrap();
    let mut tx = db.begin();
    load(&mut tx, &t);
    assert!(tx.spill.is_some(), "the write set did not spill");
    assert_eq!(tx.get(&t, &key_u64(10)).unwrap().unwrap(), b"ten");
    assert_eq!(tx.get(&t, &key_u64(20)).unwrap(), None);
    let dup = tx.insert(&t, &key_u64(7), b"again").unwrap_err();
    assert!(
        matches!(dup, crate::error::Error::DuplicateKey { .. }),
        "{dup}"
    );
    tx.insert(&t, &key_u64(5_000_001), b"mine").unwrap();
    let all = tx.scan(&t, &[0], None, usize::MAX).unwrap();
    assert_eq!(all.len(), ROWS as usize - 1 + 3);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "out of order");
    let tail: Vec<&[u8]> = all[all.len() - 3..].iter().map(|r| &r.1[..]).collect();
    assert_eq!(tail, [&b"committed"[..], b"mine", b"committed"]);
    let page = tx.scan(&t, &key_u64(18), Some(&key_u64(23)), 3).unwrap();
    let keys: Vec<Vec<u8>> = page.into_iter().map(|r| r.0).collect();
    assert_eq!(keys, [key_u64(18), key_u64(19), key_u64(21)]);
    // Nobody else sees any of it yet.
    assert_eq!(count(&db, &t), 2);
    tx.commit().unwrap();
    assert_eq!(spill_files(&db), 0);
    assert_eq!(count(&db, &t), ROWS as usize - 1 + 3);
    let path = db.directory().to_path_buf();
    db.close().unwrap();
    let db = Database::open(&path, small_budget()).unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(count(&db, &t), ROWS as usize - 1 + 3);
    drop(dir);
}

/// An abort (or a drop) of a spilled transaction leaves no row and no file.
#[test]
fn an_aborted_spilled_transaction_leaves_nothing() {
    let (_dir, db) = new_db(small_budget());
    let t = db.create_table("t").unwrap();
    let mut tx = db.begin();
    load(&mut tx, &t);
    assert_eq!(spill_files(&db), 1);
    tx.abort();
    assert_eq!(spill_files(&db), 0);
    assert_eq!(count(&db, &t), 0);
    // Its tables are free again.
    let mut tx = db.begin();
    tx.insert(&t, &key_u64(1), b"x").unwrap();
    tx.commit().unwrap();
}

/// A crash after the commit point, before or halfway through the apply
/// (here: all of it applied, the file not yet removed), is finished by
/// the next opening; a crash before it leaves nothing.
#[test]
fn a_crash_after_the_commit_point_is_finished_at_opening() {
    for applied_first in [false, true] {
        let (_dir, db) = new_db(small_budget());
        let t = db.create_table("t").unwrap();
        let mut tx = db.begin();
        load(&mut tx, &t);
        let xid = tx.id();
        let spill = tx.spill.take().unwrap();
        let sealed = spill.seal(&tx.writes).unwrap();
        if applied_first {
            super::spilled::tests_apply(&db.engine, &sealed);
        }
        drop(sealed);
        tx.abort();
        let path = db.directory().to_path_buf();
        drop(db); // a crash: no shutdown checkpoint
        assert!(committed_path(&path, xid).exists());
        let db = Database::open(&path, small_budget()).unwrap();
        let t = db.table("t").unwrap();
        check_loaded(&db, &t);
        assert_eq!(spill_files(&db), 0);
    }
    // Before the commit point: the pending file goes, nothing is applied.
    let (_dir, db) = new_db(small_budget());
    let t = db.create_table("t").unwrap();
    let mut tx = db.begin();
    load(&mut tx, &t);
    let xid = tx.id();
    std::mem::forget(tx.spill.take());
    tx.abort();
    let path = db.directory().to_path_buf();
    drop(db);
    assert!(pending_path(&path, xid).exists());
    let db = Database::open(&path, small_budget()).unwrap();
    assert_eq!(count(&db, &db.table("t").unwrap()), 0);
    assert_eq!(spill_files(&db), 0);
}

/// A spilled transaction holds its tables whole: another's row lock on
/// one waits for it to end; it waits for another's rows first; and two
/// that wait for each other end in one deadlock, not a hang.
#[test]
fn a_spilled_transaction_holds_its_tables_whole() {
    let (_dir, db) = new_db(small_budget());
    let t = db.create_table("t").unwrap();
    let u = db.create_table("u").unwrap();
    let (db, t, u) = (&db, &t, &u);
    let mut other = db.begin();
    other.insert(t, &key_u64(1_000_000), b"other").unwrap();
    std::thread::scope(|s| {
        let (xid_tx, xid_rx) = std::sync::mpsc::channel();
        let loader = s.spawn(move || {
            let mut tx = db.begin();
            xid_tx.send(tx.id()).unwrap();
            load(&mut tx, t);
            tx.commit().unwrap();
        });
        // The loader waits for `other`'s row before it can hold t whole.
        let loader_xid = xid_rx.recv().unwrap();
        while db.engine.locks.waiting_for(loader_xid) != Some(other.id()) {
            std::thread::yield_now();
        }
        other.commit().unwrap();
        loader.join().unwrap();
    });
    assert_eq!(count(db, t), ROWS as usize);
    // Now hold t whole, and see a row lock on it wait until the end.
    let mut big = db.begin();
    for k in 0..200 {
        big.upsert(t, &key_u64(k), b"big").unwrap();
    }
    assert!(big.spill.is_some());
    let big_xid = big.id();
    std::thread::scope(|s| {
        let (xid_tx, xid_rx) = std::sync::mpsc::channel();
        let writer = s.spawn(move || {
            let mut tx = db.begin();
            xid_tx.send(tx.id()).unwrap();
            tx.update(t, &key_u64(4000), b"after").unwrap();
            tx.commit().unwrap();
        });
        let writer_xid = xid_rx.recv().unwrap();
        while db.engine.locks.waiting_for(writer_xid) != Some(big_xid) {
            std::thread::yield_now();
        }
        big.commit().unwrap();
        writer.join().unwrap();
    });
    assert_eq!(
        db.begin().get(t, &key_u64(4000)).unwrap().unwrap(),
        b"after"
    );
    // A deadlock: A holds a row of u, B a row of t; B waits for A's row,
    // then A spills on t and waits for B's: one of them must end.
    let mut a = db.begin();
    a.insert(u, &key_u64(1), b"a").unwrap();
    let mut b = db.begin();
    b.insert(t, &key_u64(9_000_000), b"b").unwrap();
    let (a_xid, b_xid) = (a.id(), b.id());
    std::thread::scope(|s| {
        let bt = s.spawn(move || b.insert(u, &key_u64(1), b"b").is_err());
        while db.engine.locks.waiting_for(b_xid) != Some(a_xid) {
            std::thread::yield_now();
        }
        let mut a_failed = false;
        for k in 0..200u64 {
            if a.upsert(t, &key_u64(k), b"a").is_err() {
                a_failed = true;
                break;
            }
        }
        // Whichever lost, A's end lets B go on.
        drop(a);
        let b_failed = bt.join().unwrap();
        assert!(a_failed || b_failed, "neither side saw the deadlock");
    });
}
