//! Commits and row locks against a real database in a temporary directory.

use crate::{key_u64, Database, Options};

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
