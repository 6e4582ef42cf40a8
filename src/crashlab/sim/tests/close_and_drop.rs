//! The contracts of `close` and `drop_table` at their edges (issue 57):
//! a transaction that outlives `close` cannot commit, and a drop whose
//! own commit fails leaves the table as it was.

use super::*;
use crate::db::Database;
use crate::options::Options;
use crate::table::key_u64;

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

fn put(db: &Database, t: &crate::table::Table, k: u64, v: u8) -> Result<()> {
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

/// A full disk stops ordinary commits while the WAL still has room for
/// a drop, so space can be freed. Before: `drop_table` failed with ENOSPC
/// there like everything else, and so did DROP TABLE through SQL.
/// And a drop whose own commit fails still leaves the table writable.
/// Before: `drop_table` marked the file dropped before its own commit and
/// never took that back when the commit failed: the table stayed,
/// refusing every write until a reopening.
#[test]
fn a_drop_commits_on_a_full_disk_and_a_failed_one_leaves_the_table_writable() {
    let fs = new_fs();
    let db = create(&fs);
    let t = db.create_table("t").unwrap();
    let u = db.create_table("u").unwrap();
    for k in 0..20 {
        put(&db, &t, k, 1).unwrap();
        put(&db, &u, k, 1).unwrap();
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
    db.drop_table("u")
        .expect("a drop frees space: it commits on a full disk");
    assert!(db.table("u").is_err());
    // Take what headroom is left, so that the next drop cannot commit.
    let wal = &db.engine.wal;
    let mut held = Vec::new();
    while let Ok(r) = wal.reserve_for(1, crate::wal::Purpose::FreesSpace) {
        held.push(r);
        assert!(held.len() < 10_000_000, "the headroom never ran out");
    }
    let e = db.drop_table("t").unwrap_err();
    assert!(e.is_disk_full() && !e.is_fatal(), "{e}");
    drop(held);
    fs.update_faults(|f| f.enospc_after_bytes = None);
    let t = db.table("t").expect("a failed drop keeps the table");
    put(&db, &t, 0, 2).expect("a write to a table whose drop failed");
    assert_eq!(db.begin().get(&t, &key_u64(0)).unwrap().unwrap(), [2; 300]);
}

/// One statement through SQL: its outcome.
fn sql(s: &mut crate::sql::Session, text: &str) -> std::result::Result<(), crate::sql::SqlError> {
    let mut r = s.simple_query(text);
    assert_eq!(r.len(), 1, "{text}");
    r.pop().unwrap().map(|_| ())
}

/// On a full disk DROP TABLE still commits through SQL, alone and in a
/// block, so space can be freed there. Before: it failed with 53100 like
/// every other statement (issue 56's minor list).
#[test]
fn drop_table_through_sql_commits_on_a_full_disk() {
    use crate::sql::{codes, SqlEngine};
    let fs = new_fs();
    let e = SqlEngine::open(Arc::new(create(&fs))).unwrap();
    let mut s = e.session();
    for t in ["keep", "t", "u"] {
        sql(
            &mut s,
            &format!("create table {t} (id int primary key, v text)"),
        )
        .unwrap();
    }
    sql(&mut s, "insert into keep values (1, 'a')").unwrap();
    // The WAL cannot grow by another segment: inserts fill what it has.
    fs.update_faults(|f| f.enospc_after_bytes = Some((FileKind::Wal, 0)));
    let row = "x".repeat(500);
    let full = (0..100_000)
        .find_map(|i| sql(&mut s, &format!("insert into t values ({i}, '{row}')")).err())
        .expect("the WAL never filled the disk");
    assert_eq!(full.code, codes::DISK_FULL, "{full}");
    sql(&mut s, "drop table t").unwrap();
    for step in ["begin", "drop table u", "commit"] {
        sql(&mut s, step).unwrap();
    }
    for t in ["t", "u"] {
        let e = sql(&mut s, &format!("select count(*) from {t}")).unwrap_err();
        assert_eq!(e.code, codes::UNDEFINED_TABLE, "{e}");
    }
    sql(&mut s, "select count(*) from keep").unwrap();
}
