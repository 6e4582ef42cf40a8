//! Tests of the statistics: that the views add up, and that they survive a
//! clean shutdown and reset after a crash.
use super::*;
use crate::checkpoint::Reason;
use crate::crashlab::sim::SimFileSystem;
use crate::db::Database;
use crate::options::Options;
use crate::table::key_u64;
use crate::table::Table;
use std::sync::Arc;

const DIR: &str = "/sim/db";

fn options() -> Options {
    Options {
        buffer_pool_size: 4 << 20,
        ..Options::default()
    }
}

fn open(sim: &SimFileSystem) -> Database {
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    Database::open_with(fs, sim.stats().clone(), Path::new(DIR), options()).unwrap()
}

/// A database on the simulated file system with one table of `rows` rows,
/// one commit each.
fn loaded(rows: u64) -> (Database, Table, SimFileSystem) {
    let stats = Arc::new(IoStats::default());
    let sim = SimFileSystem::new(stats.clone());
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let db = Database::create_with(fs, stats, Path::new(DIR), options()).unwrap();
    let t = db.create_table("t").unwrap();
    commit_rows(&db, &t, rows);
    (db, t, sim)
}

fn commit_rows(db: &Database, t: &Table, rows: u64) {
    for k in 0..rows {
        let mut tx = db.begin();
        tx.upsert(t, &key_u64(k), &[7u8; 100]).unwrap();
        tx.commit().unwrap();
    }
}

#[test]
fn commits_show_in_the_wal_view() {
    let (db, t, _sim) = loaded(0);
    let base = db.statistics();
    let n = 20;
    commit_rows(&db, &t, n);
    let d = db.statistics().since(&base);
    assert!(d.wal.records >= n, "{:?}", d.wal);
    assert!(d.wal.flush_requests >= n, "{:?}", d.wal);
    // synchronous_commit on: every commit waits for an fsync, and group
    // commit can only make them fewer.
    assert!(d.wal.fsyncs >= 1 && d.wal.fsyncs <= n, "{:?}", d.wal);
    assert!(d.wal.commits_per_fsync >= 1.0, "{:?}", d.wal);
    assert!(d.wal.bytes_written >= d.wal.bytes, "{:?}", d.wal);
    assert!(d.wal.writes >= 1);
    // The io view sees the same fsyncs the WAL counted (and maybe more:
    // segment creation).
    assert!(d.io_of_kind(FileKind::Wal).fsyncs >= d.wal.fsyncs);
    assert_eq!(d.openings, 0, "a delta within one opening");
}

#[test]
fn a_checkpoint_shows_in_the_checkpointer_and_io_views() {
    let (db, _t, _sim) = loaded(200);
    let page = u64::from(db.settings().page_size);
    let base = db.statistics();
    db.checkpoint().unwrap();
    let d = db.statistics().since(&base);
    assert_eq!((d.checkpointer.requested, d.checkpointer.timed), (1, 0));
    let written = d.checkpointer.pages_written;
    assert!(written >= 2, "200 rows dirty more than one page: {written}");
    let io = d.io(Issuer::Checkpointer, FileKind::Data);
    assert_eq!(io.write_bytes, written * page, "{io:?}");
    assert!(io.writes >= 1 && io.writes <= written, "{io:?}");
    assert!(io.fsyncs >= 1, "{io:?}");
    // The pool holds everything: no client wrote a page.
    assert_eq!(d.io(Issuer::Client, FileKind::Data).writes, 0);
    assert_eq!(d.checkpoint_log.len(), 1);
    assert_eq!(d.checkpoint_log[0].reason, Reason::Requested);
    assert_eq!(d.checkpoint_log[0].pages_written, written);
    // The snapshot before holds the checkpoints of opening and none since.
    let before = base.checkpointer.timed + base.checkpointer.requested;
    assert_eq!(base.checkpoint_log.len() as u64, before);
}

#[test]
fn totals_and_deltas_are_inverse() {
    let (db, t, _sim) = loaded(50);
    let a = db.statistics();
    commit_rows(&db, &t, 30);
    db.checkpoint().unwrap();
    let b = db.statistics();
    let d = b.since(&a);
    let again = d.plus(&a);
    assert_eq!(again.wal, b.wal);
    assert_eq!(again.io, b.io);
    assert_eq!(again.buffer, b.buffer);
    assert_eq!(
        again.checkpointer.pages_written,
        b.checkpointer.pages_written
    );
    assert_eq!(again.openings, b.openings);
    assert!(d.buffer.hits > 0 && d.wal.records > 0);
}

#[test]
fn statistics_survive_a_clean_close_and_reset_after_a_crash() {
    let (db, t, sim) = loaded(40);
    let first = db.statistics();
    assert_eq!(first.openings, 1);
    db.close().unwrap();
    let saved = read_saved(&sim, Path::new(DIR)).unwrap().expect("saved");
    // The totals saved at close include the shutdown checkpoint.
    assert_eq!(
        saved.statistics.checkpointer.requested,
        first.checkpointer.requested + 1
    );

    let db = open(&sim);
    let second = db.statistics();
    assert_eq!(second.openings, 2);
    assert!(second.wal.records > first.wal.records);
    // The earlier opening's checkpoints, its shutdown one, and this
    // opening's end-of-recovery one.
    assert_eq!(
        second.checkpointer.requested,
        first.checkpointer.requested + 2
    );
    assert!(second.buffer.hits >= first.buffer.hits);
    // Only this opening's checkpoints are listed.
    assert_eq!(second.checkpoint_log.len(), 1);
    assert_eq!(second.checkpoint_log[0].reason, Reason::EndOfRecovery);

    commit_rows(&db, &t, 10);
    drop(db); // no close: a crash
    let db = open(&sim);
    let third = db.statistics();
    assert_eq!(third.openings, 1, "reset after a crash");
    assert_eq!(third.checkpointer.requested, 1);
    assert!(third.wal.records < second.wal.records);
    // What this opening's crash recovery replayed is in the new figures.
    assert!(third.recovery.records_replayed >= 10);
    db.close().unwrap();
    let db = open(&sim);
    assert_eq!(db.statistics().openings, 2);
}

#[test]
fn an_unreadable_or_stale_file_starts_from_zero() {
    let (db, _t, sim) = loaded(5);
    db.close().unwrap();
    let dir = Path::new(DIR);
    let f = sim
        .open(&stats_path(dir), FileKind::Control, OpenOptions::create())
        .unwrap();
    f.write_at(b"{ not json", 0, Issuer::Tool).unwrap();
    drop(f);
    assert!(read_saved(&sim, dir).is_err());
    let db = open(&sim);
    assert_eq!(db.statistics().openings, 1);
    db.close().unwrap();

    // Saved at a shutdown the control file no longer names.
    let mut saved = read_saved(&sim, dir).unwrap().unwrap();
    assert_eq!(saved.statistics.openings, 1);
    saved.statistics.openings = 7;
    save(
        &sim,
        dir,
        Lsn(saved.checkpoint_lsn.0 + 8),
        &saved.statistics,
    )
    .unwrap();
    let db = open(&sim);
    assert_eq!(db.statistics().openings, 1, "a stale file is not loaded");
    db.close().unwrap();
    // And the same file naming the right checkpoint is.
    let saved = read_saved(&sim, dir).unwrap().unwrap();
    let mut s = saved.statistics.clone();
    s.openings = 7;
    save(&sim, dir, saved.checkpoint_lsn, &s).unwrap();
    assert_eq!(open(&sim).statistics().openings, 8);
}

#[test]
fn a_close_that_cannot_save_the_statistics_still_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Database::create(&dir, options()).unwrap();
    // A directory where the file goes: the rename over it fails.
    std::fs::create_dir(stats_path(&dir)).unwrap();
    db.close().unwrap();
    let db = Database::open(&dir, options()).unwrap();
    assert_eq!(db.statistics().openings, 1);
    db.close().unwrap();
}

#[test]
fn a_checksum_failure_is_counted() {
    let (db, t, sim) = loaded(5);
    db.close().unwrap();
    let path = Path::new(DIR)
        .join(crate::db::directory::DATA_DIR)
        .join(t.file_id.to_string());
    // Past the header of the table's first page (its meta page).
    sim.flip_bit(&path, 100, 3).unwrap();
    let db = open(&sim);
    assert_eq!(db.statistics().buffer.checksum_failures, 0);
    let err = db.begin().get(&t, &key_u64(1)).unwrap_err();
    assert!(
        matches!(err, crate::error::Error::ChecksumMismatch { .. }),
        "{err}"
    );
    assert_eq!(db.statistics().buffer.checksum_failures, 1);
}

fn double_write_options(mode: crate::settings::TornPageProtection) -> Options {
    Options {
        creation: crate::settings::RequestedCreationSettings {
            torn_page_protection: Some(mode),
            ..Default::default()
        },
        // Nothing writes pages on its own: no timed checkpoint, no
        // background writer round.
        clock: crate::clock::Clock::manual().0,
        // Every batch fsynced and written in place, as counted below
        // (deferral's counters: writer_tests.rs).
        double_write_defer_in_place: false,
        ..options()
    }
}

/// Rewrites rows `0..rows` in one transaction: dirty pages to write.
fn rewrite_rows(db: &Database, t: &Table, rows: u64, version: u8) {
    let mut tx = db.begin();
    for k in 0..rows {
        tx.upsert(t, &key_u64(k), &[version; 100]).unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn double_writes_show_in_their_view_by_writer() {
    let stats = Arc::new(IoStats::default());
    let sim = SimFileSystem::new(stats.clone());
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let mode = crate::settings::TornPageProtection::DoubleWrites;
    let db = Database::create_with(fs, stats, Path::new(DIR), double_write_options(mode)).unwrap();
    let t = db.create_table("t").unwrap();
    let rows = 2000;
    rewrite_rows(&db, &t, rows, 1);
    db.checkpoint().unwrap();
    let page = u64::from(db.settings().page_size);
    let base = db.statistics();
    // Each writer gets its own set of dirty pages.
    rewrite_rows(&db, &t, rows, 2);
    let by_client = db.engine.pool.flush_dirty(Issuer::Client, 4).unwrap() as u64;
    rewrite_rows(&db, &t, rows, 3);
    let by_bgwriter = db
        .engine
        .pool
        .flush_dirty(Issuer::BackgroundWriter, 64)
        .unwrap() as u64;
    rewrite_rows(&db, &t, rows, 4);
    db.checkpoint().unwrap();
    let d = db.statistics().since(&base);
    let dw = &d.double_write;
    assert!(by_client >= 8 && by_bgwriter >= 8, "{rows} rows span pages");
    assert_eq!(dw.client.pages, by_client, "{dw:?}");
    assert_eq!(dw.background_writer.pages, by_bgwriter, "{dw:?}");
    // Every page the checkpoint wrote went through the area first.
    assert_eq!(
        dw.checkpointer.pages, d.checkpointer.pages_written,
        "{dw:?}"
    );
    // Four pages a call: one write of one batch each.
    assert_eq!(dw.client.writes, by_client.div_ceil(4), "{dw:?}");
    assert_eq!(dw.client.batches, dw.client.writes, "{dw:?}");
    for (issuer, row) in [
        (Issuer::Checkpointer, &dw.checkpointer),
        (Issuer::BackgroundWriter, &dw.background_writer),
        (Issuer::Client, &dw.client),
    ] {
        // The file layer saw the same: images plus a header block a
        // batch, and the shard's fsyncs.
        let io = d.io(issuer, FileKind::DoubleWrite);
        assert_eq!(
            io.write_bytes,
            (row.pages + row.batches) * page,
            "{issuer:?} {row:?}"
        );
        assert_eq!(io.writes, row.writes, "{issuer:?} {row:?}");
        assert_eq!(io.fsyncs, row.fsyncs, "{issuer:?} {row:?}");
        // One writer at a time: a fsync per write.
        assert_eq!(row.fsyncs, row.writes, "{issuer:?} {row:?}");
        assert_eq!(row.pages_per_fsync, row.pages as f64 / row.fsyncs as f64);
    }
    let total = dw.total();
    assert_eq!(total.pages, by_client + by_bgwriter + dw.checkpointer.pages);
    let io = d.io_of_kind(FileKind::DoubleWrite);
    assert_eq!(io.write_bytes, (total.pages + total.batches) * page);
    assert_eq!(total.pages_per_fsync, total.pages as f64 / io.fsyncs as f64);

    // Saved at a clean close, loaded at the next opening.
    let before_close = db.statistics().double_write;
    db.close().unwrap();
    let db = Database::open_with(
        Arc::new(sim.clone()),
        sim.stats().clone(),
        Path::new(DIR),
        double_write_options(mode),
    )
    .unwrap();
    let after = db.statistics().double_write;
    assert_eq!(after.client, before_close.client);
    assert_eq!(after.background_writer, before_close.background_writer);
    // Plus what the shutdown checkpoint wrote.
    assert!(after.checkpointer.pages >= before_close.checkpointer.pages);
    assert_eq!(after.checkpointer.pages_per_fsync, {
        let c = &after.checkpointer;
        c.pages as f64 / c.fsyncs as f64
    });
}

#[test]
fn a_write_back_counts_its_pages_under_one_fsync_of_the_deferred_file() {
    let stats = Arc::new(IoStats::default());
    let sim = SimFileSystem::new(stats.clone());
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let options = Options {
        double_write_defer_in_place: true,
        // Every checkpoint writes the deferred pages back.
        double_write_keep_deferred: false,
        ..double_write_options(crate::settings::TornPageProtection::DoubleWrites)
    };
    let db = Database::create_with(fs, stats, Path::new(DIR), options).unwrap();
    let t = db.create_table("t").unwrap();
    rewrite_rows(&db, &t, 2000, 1);
    db.checkpoint().unwrap();
    let base = db.statistics();
    rewrite_rows(&db, &t, 2000, 2);
    let deferred = db.engine.pool.flush_dirty(Issuer::Client, 64).unwrap() as u64;
    db.checkpoint().unwrap();
    let d = db.statistics().since(&base);
    let (client, c) = (&d.double_write.client, &d.double_write.checkpointer);
    assert!(deferred >= 8, "2,000 rows span pages");
    assert_eq!((client.deferred, client.pages), (deferred, 0), "{client:?}");
    assert_eq!((c.written_back, c.deferred_fsyncs), (deferred, 1), "{c:?}");
    // The write-back's pages went in place from their slots, not through
    // the area, and its one fsync covered them all.
    assert_eq!(
        c.pages_per_fsync,
        (c.pages + c.written_back) as f64 / (c.fsyncs + 1) as f64,
        "{c:?}"
    );
}

#[test]
fn double_write_figures_outlive_a_switch_away_from_double_writes() {
    use crate::settings::TornPageProtection::{DoubleWrites, Off};
    let stats = Arc::new(IoStats::default());
    let sim = SimFileSystem::new(stats.clone());
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let db = Database::create_with(
        fs,
        stats,
        Path::new(DIR),
        double_write_options(DoubleWrites),
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    rewrite_rows(&db, &t, 2000, 1);
    drop(db); // a crash: redo dirties the pages again
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let db = Database::open_with(
        fs,
        sim.stats().clone(),
        Path::new(DIR),
        double_write_options(Off),
    )
    .unwrap();
    assert_eq!(db.engine.protection(), Off);
    // The end-of-recovery checkpoint ran under double_writes, before the
    // switch.
    let at_open = db.statistics().double_write.checkpointer;
    assert!(at_open.pages >= 2, "{at_open:?}");
    rewrite_rows(&db, &t, 2000, 2);
    db.checkpoint().unwrap();
    assert!(db.statistics().checkpointer.pages_written > at_open.pages);
    assert_eq!(db.statistics().double_write.checkpointer, at_open);
}

#[test]
fn a_file_without_double_write_figures_reads_them_as_zero() {
    let (db, _t, _sim) = loaded(5);
    let mut json = serde_json::to_value(db.statistics()).unwrap();
    json.as_object_mut().unwrap().remove("double_write");
    let old: Statistics = serde_json::from_value(json).unwrap();
    assert_eq!(old.double_write, DoubleWriteView::default());
    assert_eq!(old.wal, db.statistics().wal);
}
