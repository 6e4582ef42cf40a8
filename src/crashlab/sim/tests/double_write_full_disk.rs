//! Deferred in-place writes on a full disk (issue 34, review item 3): the
//! area is preallocated whole, `dw/deferred` grows as slots are first
//! used, so a full disk must send evictions to the area and leave room for
//! a checkpoint's manifest, never fail a read or an opening.

use super::double_write_deferred::{create, open, options, rows_not_at, update_all, PAGE, ROWS};
use super::*;
use crate::settings::ChecksumAlgorithm;
use crate::table::key_u64;

const ALG: ChecksumAlgorithm = ChecksumAlgorithm::Crc32c;

/// Only `dw/deferred` can grow: every byte it would add is refused.
fn dw_disk_full(fs: &SimFileSystem) {
    fs.update_faults(|f| f.enospc_after_bytes = Some((FileKind::DoubleWrite, 0)));
}

/// Before: the opening cut `dw/deferred` to its empty manifest, so the
/// end-of-recovery checkpoint had to grow it again to store its pages,
/// and the opening failed with "No space left on device" where
/// `double_write_defer_in_place = off` opened the same image.
#[test]
fn a_full_disk_does_not_stop_an_opening_after_a_crash_with_deferred_pages() {
    let fs = new_fs();
    let (db, t) = create(&fs, options(ALG));
    update_all(&db, &t, 1);
    db.checkpoint().unwrap();
    update_all(&db, &t, 2);
    db.engine.pool.flush_dirty(Issuer::Client, 64).unwrap();
    update_all(&db, &t, 3);
    let protection = db.engine.pool.page_write_protection();
    assert!(protection.deferred_pages() > 0, "pages deferred");
    fs.crash(1, &keep_all());
    drop(db);
    let image = fs.snapshot_durable();
    for round in 0..2 {
        let fs = SimFileSystem::from_image(image.clone(), Arc::new(IoStats::default()));
        dw_disk_full(&fs);
        let db = open(&fs, options(ALG))
            .unwrap_or_else(|e| panic!("round {round}: the opening failed: {e}"));
        assert_eq!(rows_not_at(&db, &t, 3), Vec::<u64>::new());
        db.checkpoint().unwrap();
        update_all(&db, &t, 4);
        db.checkpoint().unwrap();
        assert_eq!(rows_not_at(&db, &t, 4), Vec::<u64>::new());
    }
}

/// Before: a read whose frame claim evicted a dirty page stored it in a
/// new slot of `dw/deferred`, and on a full disk the read itself failed
/// with ENOSPC, though the area could take the page. Now the evictions go
/// to the area, checkpoints still write their manifests, and every
/// commit survives a power cut.
#[test]
fn a_full_disk_sends_evictions_to_the_area_and_checkpoints_go_on() {
    let fs = new_fs();
    let mut o = options(ALG);
    o.buffer_pool_size = 24 * PAGE as u64;
    let (db, t) = create(&fs, o.clone());
    db.checkpoint().unwrap();
    update_all(&db, &t, 1);
    // Some pages deferred before the disk fills: the manifests must name
    // them from the reserved room.
    db.engine.pool.flush_dirty(Issuer::Client, 8).unwrap();
    dw_disk_full(&fs);
    for version in 2..=4 {
        for k in (0..ROWS).step_by(3) {
            db.begin()
                .get(&t, &key_u64(k))
                .unwrap_or_else(|e| panic!("read of row {k} on a full disk: {e}"));
        }
        update_all(&db, &t, version);
        db.checkpoint()
            .unwrap_or_else(|e| panic!("checkpoint on a full disk: {e}"));
    }
    update_all(&db, &t, 5);
    fs.crash(7, &tear_only());
    drop(db);
    fs.update_faults(|f| f.enospc_after_bytes = None);
    let db = open(&fs, o).unwrap();
    assert_eq!(rows_not_at(&db, &t, 5), Vec::<u64>::new());
}
