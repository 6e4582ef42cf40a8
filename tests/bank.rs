//! Many threads run bank transfers (pgbench-style balances) at once: the
//! sum of balances never changes, no update is lost, deadlocks are retried.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use untorn::rng::SplitMix64;
use untorn::{key_u64, Database, Options, Table};

const ACCOUNTS: u64 = 200;
const INITIAL: i64 = 1_000;
const HOT_COUNTERS: u64 = 4;

fn balance(db_tx: &mut untorn::Transaction<'_>, t: &Table, k: u64) -> untorn::Result<i64> {
    let v = db_tx
        .get_for_update(t, &key_u64(k))?
        .expect("account exists");
    Ok(i64::from_le_bytes(v.try_into().expect("8-byte balance")))
}

/// One transfer plus an increment of a hot counter; Ok(false) on a
/// deadlock (the caller retries).
fn transfer(
    db: &Database,
    acc: &Table,
    counters: &Table,
    rng: &mut SplitMix64,
) -> untorn::Result<bool> {
    let from = rng.below(ACCOUNTS);
    let to = (from + 1 + rng.below(ACCOUNTS - 1)) % ACCOUNTS;
    let amount = rng.below(100) as i64;
    let counter = rng.below(HOT_COUNTERS);
    let mut tx = db.begin();
    let result = (|| -> untorn::Result<()> {
        let a = balance(&mut tx, acc, from)?;
        let b = balance(&mut tx, acc, to)?;
        tx.update(acc, &key_u64(from), &(a - amount).to_le_bytes())?;
        tx.update(acc, &key_u64(to), &(b + amount).to_le_bytes())?;
        let c = balance(&mut tx, counters, counter)?;
        tx.update(counters, &key_u64(counter), &(c + 1).to_le_bytes())?;
        Ok(())
    })();
    match result {
        Ok(()) => {
            tx.commit()?;
            Ok(true)
        }
        Err(e) if e.is_retryable() => Ok(false),
        Err(e) => Err(e),
    }
}

fn sum(db: &Database, t: &Table) -> i64 {
    db.begin()
        .scan(t, b"", None, usize::MAX)
        .unwrap()
        .iter()
        .map(|(_, v)| i64::from_le_bytes(v.as_slice().try_into().unwrap()))
        .sum()
}

#[test]
fn concurrent_transfers_keep_the_sum_and_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options = Options {
        synchronous_commit: false,
        ..Options::default()
    };
    let db = Database::create(&path, options.clone()).unwrap();
    let acc = db.create_table("accounts").unwrap();
    let counters = db.create_table("counters").unwrap();
    db.bulk_load(
        &acc,
        (0..ACCOUNTS).map(|k| (key_u64(k), INITIAL.to_le_bytes())),
    )
    .unwrap();
    db.bulk_load(
        &counters,
        (0..HOT_COUNTERS).map(|k| (key_u64(k), 0i64.to_le_bytes())),
    )
    .unwrap();
    let commits = AtomicU64::new(0);
    let deadlocks = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (db, acc, counters, commits, deadlocks) =
                (&db, &acc, &counters, &commits, &deadlocks);
            s.spawn(move || {
                let mut rng = SplitMix64::new(t * 7919 + 1);
                let mut done = 0;
                while done < 400 {
                    if transfer(db, acc, counters, &mut rng).unwrap() {
                        done += 1;
                        commits.fetch_add(1, Relaxed);
                    } else {
                        deadlocks.fetch_add(1, Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(sum(&db, &acc), ACCOUNTS as i64 * INITIAL);
    // Every commit incremented one counter under its row lock: a lost
    // update would make the total fall short.
    assert_eq!(sum(&db, &counters), commits.load(Relaxed) as i64);
    eprintln!(
        "commits {} deadlock retries {}",
        commits.load(Relaxed),
        deadlocks.load(Relaxed)
    );
    db.close().unwrap();
    let db = Database::open(&path, options).unwrap();
    assert_eq!(
        sum(&db, &db.table("accounts").unwrap()),
        ACCOUNTS as i64 * INITIAL
    );
    assert_eq!(sum(&db, &db.table("counters").unwrap()), 3200);
}

/// Transfers while a thread checkpoints in a loop and a small pool evicts
/// all the time: eviction writes, checkpoint writes and commits race on the
/// same frames. (A review found an older copy landing after a newer one,
/// losing updates in process; this is its stress test.)
#[test]
fn transfers_survive_concurrent_checkpoints_and_evictions() {
    const N: u64 = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options = Options {
        creation: untorn::settings::RequestedCreationSettings {
            page_size: Some(4096),
            ..Default::default()
        },
        buffer_pool_size: 128 * 4096,
        synchronous_commit: false,
        ..Options::default()
    };
    let db = Database::create(&path, options.clone()).unwrap();
    let acc = db.create_table("accounts").unwrap();
    db.bulk_load(&acc, (0..N).map(|k| (key_u64(k), INITIAL.to_le_bytes())))
        .unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let (db, acc, done) = (&db, &acc, &done);
        let checkpointer = s.spawn(move || {
            while !done.load(Relaxed) {
                db.checkpoint().unwrap();
            }
        });
        let workers: Vec<_> = (0..8u64)
            .map(|t| {
                s.spawn(move || {
                    let mut rng = SplitMix64::new(t * 104_729 + 7);
                    let mut committed = 0;
                    while committed < 300 {
                        let (from, to) = (rng.below(N), rng.below(N));
                        if from == to {
                            continue;
                        }
                        let mut tx = db.begin();
                        let r = (|| -> untorn::Result<()> {
                            let a = balance(&mut tx, acc, from)?;
                            let b = balance(&mut tx, acc, to)?;
                            tx.update(acc, &key_u64(from), &(a - 3).to_le_bytes())?;
                            tx.update(acc, &key_u64(to), &(b + 3).to_le_bytes())?;
                            Ok(())
                        })();
                        match r {
                            Ok(()) => {
                                tx.commit().unwrap();
                                committed += 1;
                            }
                            Err(e) if e.is_retryable() => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, Relaxed);
        checkpointer.join().unwrap();
    });
    assert_eq!(sum(&db, &acc), N as i64 * INITIAL, "in process");
    drop(db); // crash
    let db = Database::open(&path, options).unwrap();
    assert_eq!(
        sum(&db, &db.table("accounts").unwrap()),
        N as i64 * INITIAL,
        "after recovery"
    );
    db.close().unwrap();
}
