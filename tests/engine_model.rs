//! The engine against a model: random operation sequences (inserts,
//! updates, deletes, scans; enough to split and re-split pages) checked
//! against a BTreeMap, across page sizes, with reopening (clean and after a
//! simulated crash) mid-sequence.

use proptest::prelude::*;
use std::collections::BTreeMap;
use untorn::settings::RequestedCreationSettings;
use untorn::{Database, Options};

#[derive(Clone, Debug)]
enum Op {
    Insert(u16, u16),
    Update(u16, u16),
    Delete(u16),
    Scan(u16, u8),
    /// Commit the pending transaction and start another.
    Commit,
    /// Throw the pending transaction away.
    Abort,
    /// Close cleanly and reopen.
    Reopen,
    /// Drop without closing (a crash after the last commit) and reopen.
    CrashReopen,
    Checkpoint,
}

fn op() -> impl Strategy<Value = Op> {
    // Keys from a small range so updates and deletes hit; value sizes
    // from tiny to several hundred bytes so pages split often.
    let key = 0u16..3000;
    prop_oneof![
        30 => (key.clone(), 0u16..600).prop_map(|(k, n)| Op::Insert(k, n)),
        15 => (key.clone(), 0u16..600).prop_map(|(k, n)| Op::Update(k, n)),
        15 => key.clone().prop_map(Op::Delete),
        4 => (key, any::<u8>()).prop_map(|(k, n)| Op::Scan(k, n)),
        8 => Just(Op::Commit),
        2 => Just(Op::Abort),
        1 => Just(Op::Reopen),
        1 => Just(Op::CrashReopen),
        1 => Just(Op::Checkpoint),
    ]
}

fn key(k: u16) -> Vec<u8> {
    format!("key{k:05}").into_bytes()
}

fn value(k: u16, n: u16, salt: usize) -> Vec<u8> {
    let mut v = format!("{k}:{salt}:").into_bytes();
    v.resize(n as usize + v.len(), b'a' + (salt % 26) as u8);
    v
}

fn options(page_size: u32) -> Options {
    Options {
        creation: RequestedCreationSettings {
            page_size: Some(page_size),
            ..Default::default()
        },
        buffer_pool_size: 64 * page_size as u64, // small: evictions happen
        ..Default::default()
    }
}

fn check_all(db: &Database, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let t = db.table("t").unwrap();
    let tx = db.begin();
    let all = tx.scan(&t, b"", None, usize::MAX).unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all.len(), want.len(), "row count");
    assert!(all == want, "table differs from the model");
}

fn run(page_size: u32, ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut db = Database::create(&path, options(page_size)).unwrap();
    db.create_table("t").unwrap();
    let mut committed: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut pending = committed.clone();
    let mut dirty = false;
    for (salt, op) in ops.into_iter().enumerate() {
        // One transaction per batch of ops between commits, replayed on
        // a fresh handle each time because a Transaction borrows the db.
        match op {
            Op::Commit | Op::Abort | Op::Reopen | Op::CrashReopen | Op::Checkpoint => {}
            _ => dirty = true,
        }
        let t = db.table("t").unwrap();
        match op {
            Op::Insert(k, n) => {
                let mut tx = db.begin();
                let r = tx.insert(&t, &key(k), &value(k, n, salt));
                assert_eq!(
                    r.is_ok(),
                    !pending.contains_key(&key(k)),
                    "insert {k}: {r:?}"
                );
                if r.is_ok() {
                    tx.commit().unwrap();
                    pending.insert(key(k), value(k, n, salt));
                }
            }
            Op::Update(k, n) => {
                let mut tx = db.begin();
                let hit = tx.update(&t, &key(k), &value(k, n, salt)).unwrap();
                assert_eq!(hit, pending.contains_key(&key(k)));
                tx.commit().unwrap();
                if hit {
                    pending.insert(key(k), value(k, n, salt));
                }
            }
            Op::Delete(k) => {
                let mut tx = db.begin();
                let hit = tx.delete(&t, &key(k)).unwrap();
                assert_eq!(hit, pending.remove(&key(k)).is_some());
                tx.commit().unwrap();
            }
            Op::Scan(k, n) => {
                let tx = db.begin();
                let got = tx.scan(&t, &key(k), None, n as usize).unwrap();
                let want: Vec<_> = pending
                    .range(key(k)..)
                    .take(n as usize)
                    .map(|(a, b)| (a.clone(), b.clone()))
                    .collect();
                assert!(got == want, "scan from {k} limit {n}");
            }
            Op::Commit | Op::Abort => {
                committed = pending.clone();
                dirty = false;
            }
            Op::Checkpoint => {
                db.checkpoint().unwrap();
            }
            Op::Reopen => {
                db.close().unwrap();
                db = Database::open(&path, options(page_size)).unwrap();
                check_all(&db, &pending);
            }
            Op::CrashReopen => {
                drop(db);
                db = Database::open(&path, options(page_size)).unwrap();
                check_all(&db, &pending);
            }
        }
    }
    let _ = (committed, dirty);
    check_all(&db, &pending);
    db.close().unwrap();
    let db = Database::open(&path, options(page_size)).unwrap();
    check_all(&db, &pending);
    db.close().unwrap();
    let report =
        untorn::verify::verify_database(&untorn::file::posix::PosixFileSystem::default(), &path)
            .unwrap();
    assert!(report.ok(), "verify: {:?}", report.failures);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn model_4k_pages(ops in prop::collection::vec(op(), 200..1500)) {
        run(4096, ops);
    }

    #[test]
    fn model_32k_pages(ops in prop::collection::vec(op(), 200..1500)) {
        run(32768, ops);
    }
}

/// Enough ascending and random inserts to grow a tree several levels deep
/// on 4 KB pages, then delete most of it, reopening in between.
#[test]
fn deep_tree_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let big_pool = || Options {
        buffer_pool_size: 4 << 20,
        ..options(4096)
    };
    let db = Database::create(&path, big_pool()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut model = BTreeMap::new();
    for batch in 0..40u64 {
        let mut tx = db.begin();
        for i in 0..500u64 {
            let k = if batch % 2 == 0 {
                batch * 500 + i
            } else {
                (batch * 7919 + i * 104729) % 1_000_000 + 2_000_000
            };
            let v = vec![(k % 251) as u8; 40 + (k % 200) as usize];
            tx.upsert(&t, &untorn::key_u64(k), &v).unwrap();
            model.insert(untorn::key_u64(k).to_vec(), v);
        }
        tx.commit().unwrap();
    }
    db.close().unwrap();
    let db = Database::open(&path, big_pool()).unwrap();
    check_all(&db, &model);
    let t = db.table("t").unwrap();
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for chunk in keys.chunks(700).step_by(2) {
        let mut tx = db.begin();
        for k in chunk {
            assert!(tx.delete(&t, k).unwrap());
            model.remove(k);
        }
        tx.commit().unwrap();
    }
    drop(db); // crash
    let db = Database::open(&path, big_pool()).unwrap();
    check_all(&db, &model);
    db.close().unwrap();
}

/// A transaction touching more leaves than half the buffer pool is refused
/// with a clear error, and the database stays usable.
#[test]
fn write_set_wider_than_the_pool_is_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(&dir.path().join("db"), options(4096)).unwrap();
    let t = db.create_table("t").unwrap();
    db.bulk_load(
        &t,
        (0..20_000u64).map(|k| (untorn::key_u64(k), vec![7u8; 100])),
    )
    .unwrap();
    let mut tx = db.begin();
    for k in (0..20_000u64).step_by(97) {
        tx.update(&t, &untorn::key_u64(k), &[8u8; 100]).unwrap();
    }
    let e = tx.commit().unwrap_err().to_string();
    assert!(e.contains("buffer_pool_size"), "{e}");
    let mut tx = db.begin();
    assert!(tx.update(&t, &untorn::key_u64(5), &[9u8; 10]).unwrap());
    tx.commit().unwrap();
    assert_eq!(
        db.begin().get(&t, &untorn::key_u64(5)).unwrap().unwrap(),
        vec![9u8; 10]
    );
}

/// Leaves emptied by deletes are freed and their blocks reused: loading a
/// new key range after deleting an old one does not grow the file.
#[test]
fn emptied_leaves_are_freed_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let opts = || Options {
        buffer_pool_size: 4 << 20,
        ..options(4096)
    };
    let db = Database::create(&path, opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let file = path.join("data").join(t.file_id.to_string());
    db.bulk_load(
        &t,
        (0..20_000u64).map(|k| (untorn::key_u64(k), vec![1u8; 100])),
    )
    .unwrap();
    db.checkpoint().unwrap();
    let size_loaded = std::fs::metadata(&file).unwrap().len();
    for chunk in (0..20_000u64).collect::<Vec<_>>().chunks(500) {
        let mut tx = db.begin();
        for k in chunk {
            assert!(tx.delete(&t, &untorn::key_u64(*k)).unwrap());
        }
        tx.commit().unwrap();
    }
    db.close().unwrap();
    let db = Database::open(&path, opts()).unwrap();
    assert!(db.begin().scan(&t, b"", None, 10).unwrap().is_empty());
    db.bulk_load(
        &t,
        (1_000_000..1_020_000u64).map(|k| (untorn::key_u64(k), vec![2u8; 100])),
    )
    .unwrap();
    db.checkpoint().unwrap();
    let size_reloaded = std::fs::metadata(&file).unwrap().len();
    assert!(
        size_reloaded <= size_loaded + size_loaded / 5,
        "file grew from {size_loaded} to {size_reloaded} bytes: freed leaves were not reused"
    );
    let rows = db.begin().scan(&t, b"", None, usize::MAX).unwrap();
    assert_eq!(rows.len(), 20_000);
    db.close().unwrap();
}

/// With a small max_wal_size, checkpoints start on their own, old WAL
/// segments are recycled, and a crash afterwards still recovers everything.
#[test]
fn wal_volume_triggers_checkpoints_and_recycling() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let opts = || Options {
        creation: RequestedCreationSettings {
            wal_segment_size: Some(1 << 20),
            ..Default::default()
        },
        // A checkpoint every max_wal_size / (1 + target) = 2 MB of WAL.
        max_wal_size: 2 << 20,
        // Unspread: once the WAL stops, a spread checkpoint would pace
        // itself by checkpoint_timeout (minutes) and not complete here.
        checkpoint_completion_target: 0.0,
        ..Options::default()
    };
    let db = Database::create(&path, opts()).unwrap();
    let t = db.create_table("t").unwrap();
    db.bulk_load(
        &t,
        (0..2_000u64).map(|k| (untorn::key_u64(k), vec![0u8; 200])),
    )
    .unwrap();
    for round in 0..200u64 {
        let mut tx = db.begin();
        for k in (round % 7..2_000).step_by(7) {
            tx.update(&t, &untorn::key_u64(k), &[round as u8; 200])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    // The trigger runs every 10 ms in the background.
    std::thread::sleep(std::time::Duration::from_millis(100));
    eprintln!(
        "{} checkpoints, {} MB of WAL",
        db.checkpoints(),
        db.wal_stats().bytes >> 20
    );
    assert!(
        db.checkpoints() >= 4,
        "only {} checkpoints",
        db.checkpoints()
    );
    let segments = std::fs::read_dir(path.join("wal")).unwrap().count();
    let written_mb = db.wal_stats().bytes >> 20;
    assert!(
        segments <= 12,
        "{segments} WAL segments kept after writing {written_mb} MB"
    );
    let model: Vec<_> = db.begin().scan(&t, b"", None, usize::MAX).unwrap();
    drop(db); // crash
    let db = Database::open(&path, opts()).unwrap();
    assert!(db.begin().scan(&t, b"", None, usize::MAX).unwrap() == model);
    db.close().unwrap();
}
