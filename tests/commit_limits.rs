//! A commit whose WAL record could outgrow the record limit is refused in
//! prepare, cleanly: the database goes on, nothing of it is visible. One
//! just under the limit commits and survives a reopening.

use untorn::btree::node::{leaf_cell_size, max_value_len};
use untorn::settings::RequestedCreationSettings;
use untorn::wal::record::BLOCK_DESCRIPTOR_LEN;
use untorn::wal::MAX_RECORD_LEN;
use untorn::{key_u64, Database, Error, Options, Table, TornPageProtection};

const PAGE: u32 = 32 * 1024;
/// Big rows, so that few rows fill a leaf and few leaves fill a record.
const ROW: usize = 5000;

fn options(protection: TornPageProtection) -> Options {
    Options {
        creation: RequestedCreationSettings {
            page_size: Some(PAGE),
            torn_page_protection: Some(protection),
            ..Default::default()
        },
        buffer_pool_size: 512 * 1024 * 1024,
        max_write_set_bytes: 128 * 1024 * 1024,
        max_write_set_rows: 100_000,
        ..Options::default()
    }
}

fn row(k: u64, version: u8) -> Vec<u8> {
    let mut r = vec![version; ROW];
    r[..8].copy_from_slice(&k.to_le_bytes());
    r
}

/// Updates every `stride`-th row from 0, `n` rows in all, in one commit.
fn update_spread(db: &Database, t: &Table, stride: u64, n: u64, version: u8) -> untorn::Result<()> {
    let mut tx = db.begin();
    for i in 0..n {
        let k = i * stride;
        assert!(tx.update(t, &key_u64(k), &row(k, version))?);
    }
    tx.commit().map(|_| ())
}

#[test]
fn a_commit_over_the_record_limit_is_refused_before_apply() {
    let page = PAGE as usize;
    assert!(ROW <= max_value_len(page));
    // No leaf holds more than `stride` rows, so rows `stride` apart lie
    // in different leaves: n such rows make n block references.
    let stride = (page / leaf_cell_size(8, ROW)) as u64;
    // Worst case with full_pages: a whole image per leaf, and a descriptor.
    let per_leaf = (BLOCK_DESCRIPTOR_LEN + page) as u64;
    let fixed = 32 + 4 + 4; // record header, block count, main length
    let under = (MAX_RECORD_LEN as u64 - fixed) / per_leaf;
    let over = under + 1;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::create(&path, options(TornPageProtection::FullPages)).unwrap();
    let t = db.create_table("t").unwrap();
    let rows = over * stride;
    db.bulk_load(&t, (0..rows).map(|k| (key_u64(k), row(k, 1))))
        .unwrap();

    let e = update_spread(&db, &t, stride, over, 2).unwrap_err();
    assert!(
        matches!(e, Error::CommitTooLarge { .. }),
        "not refused as too large: {e}"
    );
    assert!(!e.is_fatal(), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(&MAX_RECORD_LEN.to_string()), "{msg}");
    assert!(msg.contains("smaller transactions"), "{msg}");
    // Nothing of it is visible, and the database goes on.
    let tx = db.begin();
    for k in [0, stride, (over - 1) * stride] {
        assert_eq!(tx.get(&t, &key_u64(k)).unwrap(), Some(row(k, 1)));
    }
    drop(tx);

    update_spread(&db, &t, stride, under, 3).unwrap();
    let tx = db.begin();
    for i in 0..over {
        let k = i * stride;
        let want = if i < under { 3 } else { 1 };
        assert_eq!(tx.get(&t, &key_u64(k)).unwrap(), Some(row(k, want)));
    }
    drop(tx);
    drop(db);

    // The big record replays.
    let db = Database::open(&path, options(TornPageProtection::FullPages)).unwrap();
    let t = db.table("t").unwrap();
    let tx = db.begin();
    for k in [0, (under - 1) * stride, under * stride] {
        let want = if k < under * stride { 3 } else { 1 };
        assert_eq!(tx.get(&t, &key_u64(k)).unwrap(), Some(row(k, want)));
    }
}

/// The review's case: the rows alone outgrow the record (no images with
/// protection off). Before prepare checked the size, apply failed and the
/// database stopped.
#[test]
fn a_commit_of_more_row_data_than_a_record_holds_leaves_the_database_working() {
    let page = PAGE as usize;
    let op = (1 + 2 + 4 + 8 + ROW) as u64; // a put's change in the record
    let fixed = 32 + 4 + 4;
    let limit = MAX_RECORD_LEN as u64;
    // At most one leaf per row, at least one per `per_leaf` rows.
    let per_leaf = (page / leaf_cell_size(8, ROW)) as u64;
    let under = (limit - fixed) / (op + BLOCK_DESCRIPTOR_LEN as u64);
    let over = (limit - fixed) / (op + BLOCK_DESCRIPTOR_LEN as u64 / per_leaf) + 1;
    assert!(under < over);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::create(&path, options(TornPageProtection::Off)).unwrap();
    let t = db.create_table("t").unwrap();
    // Loaded twice: rewriting every row in small commits splits the leaves
    // until each has room for its rows' new versions (a change does not
    // reuse its row's old space), so the big commit needs no split.
    for _ in 0..2 {
        db.bulk_load(&t, (0..over).map(|k| (key_u64(k), row(k, 1))))
            .unwrap();
    }

    let e = update_spread(&db, &t, 1, over, 2).unwrap_err();
    assert!(!e.is_fatal(), "the database stopped: {e}");
    assert!(
        matches!(e, Error::CommitTooLarge { .. }),
        "not refused as too large: {e}"
    );
    let tx = db.begin();
    for k in [0, over / 2, over - 1] {
        assert_eq!(tx.get(&t, &key_u64(k)).unwrap(), Some(row(k, 1)));
    }
    drop(tx);
    update_spread(&db, &t, 1, under, 3).unwrap();
    let tx = db.begin();
    for k in [0, under - 1, under, over - 1] {
        let want = if k < under { 3 } else { 1 };
        assert_eq!(tx.get(&t, &key_u64(k)).unwrap(), Some(row(k, want)));
    }
}
