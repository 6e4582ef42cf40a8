//! The contracts of `close` and `drop_table` at their edges (issue 57):
//! a transaction that outlives `close` cannot commit, and a drop whose
//! own commit fails leaves the table as it was.

use super::*;
use crate::{key_u64, Database, Options};

fn create(fs: &SimFileSystem) -> Database {
    let sim: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Database::create_with(
        sim,
        Arc::new(IoStats::default()),
        Path::new("/sim/db"),
        Options::default(),
    )
    .unwrap()
}

fn put(db: &Database, t: &crate::Table, k: u64, v: u8) -> Result<()> {
    let mut tx = db.begin();
    tx.upsert(t, &key_u64(k), &[v; 300])?;
    tx.commit().map(|_| ())
}

/// Before: `begin_shared`'s documented "after close its commit fails"
/// was not enforced, and the commit wrote WAL past the shutdown
/// checkpoint of a control file saying "shut down".
#[test]
fn a_shared_transaction_cannot_commit_after_close() {
    let fs = new_fs();
    let db = create(&fs);
    let t = db.create_table("t").unwrap();
    let mut tx = db.begin_shared();
    tx.upsert(&t, &key_u64(1), &[1; 300]).unwrap();
    db.close().unwrap();
    let e = tx.commit().unwrap_err();
    assert!(e.to_string().contains("closed"), "{e}");
    let sim: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db = Database::open_with(
        sim,
        Arc::new(IoStats::default()),
        Path::new("/sim/db"),
        Options::default(),
    )
    .unwrap();
    let t = db.table("t").unwrap();
    assert_eq!(db.begin().get(&t, &key_u64(1)).unwrap(), None);
}

/// Before: `drop_table` marked the file dropped before its own commit
/// and never took that back when the commit failed (a full disk): the
/// table stayed, refusing every write until a reopening.
#[test]
fn a_failed_drop_table_leaves_the_table_writable() {
    let fs = new_fs();
    let db = create(&fs);
    let t = db.create_table("t").unwrap();
    for k in 0..20 {
        put(&db, &t, k, 1).unwrap();
    }
    // The disk fills: the WAL cannot grow by another segment.
    fs.update_faults(|f| f.enospc_after_bytes = Some((FileKind::Wal, 0)));
    let mut k = 20;
    let e = loop {
        match put(&db, &t, k, 1) {
            Ok(()) => k += 1,
            Err(e) => break e,
        }
        assert!(k < 100_000, "the WAL never filled the disk");
    };
    assert!(e.is_disk_full() && !e.is_fatal(), "{e}");
    let e = db.drop_table("t").unwrap_err();
    assert!(e.is_disk_full() && !e.is_fatal(), "{e}");
    fs.update_faults(|f| f.enospc_after_bytes = None);
    let t = db.table("t").expect("a failed drop keeps the table");
    put(&db, &t, 0, 2).expect("a write to a table whose drop failed");
    assert_eq!(db.begin().get(&t, &key_u64(0)).unwrap().unwrap(), [2; 300]);
}
