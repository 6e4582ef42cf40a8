//! Tests of the checkpointer: redo point, order, pacing, statistics.
use super::*;
use crate::engine::checkpoint_state::RedoPoint;
use crate::lsn::Lsn;

#[test]
fn the_redo_point_moves_forward() {
    let p = RedoPoint::default();
    p.advance(|| Lsn(10));
    assert_eq!(p.advance(|| Lsn(10)), (Lsn(10), Lsn(10)));
    assert_eq!(*p.hold(), Lsn(10));
}

#[test]
#[should_panic(expected = "redo point moving back")]
fn the_redo_point_never_moves_back() {
    let p = RedoPoint::default();
    p.advance(|| Lsn(10));
    p.advance(|| Lsn(9));
}

use crate::clock::{Clock, ClockSource, ManualClock};
use crate::crashlab::sim::{SimFileSystem, TraceKind};
use crate::db::Database;
use crate::file::{FileKind, FileSystem, Issuer};
use crate::file::{IoOp, IoStats};
use crate::options::Options;
use crate::table::key_u64;
use crate::table::Table;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/sim/db";

/// A database on the simulated file system with `tables` tables of
/// `rows` rows each, loaded in an order that scatters their pages.
fn loaded(options: Options, tables: u64, rows: u64) -> (Database, Vec<Table>, SimFileSystem) {
    let stats = Arc::new(IoStats::default());
    let sim = SimFileSystem::new(stats.clone());
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let db = Database::create_with(fs, stats, Path::new(DIR), options).unwrap();
    let ts: Vec<Table> = (0..tables)
        .map(|i| db.create_table(&format!("t{i}")).unwrap())
        .collect();
    for k in 0..rows {
        let mut tx = db.begin();
        for t in &ts {
            tx.upsert(t, &key_u64(k * 7919 % rows), &[7u8; 200])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    (db, ts, sim)
}

/// Dirties pages all over every table, touching them in an order unlike
/// their (file, block) order, so frame order is not block order.
fn dirty_scattered(db: &Database, tables: &[Table], rows: u64) {
    for i in 0..rows / 4 {
        let mut tx = db.begin();
        let t = &tables[(i * 5 % tables.len() as u64) as usize];
        tx.upsert(t, &key_u64(i * 104_729 % rows), &[9u8; 200])
            .unwrap();
        tx.commit().unwrap();
    }
}

/// The (file id, block) of every data write the checkpointer made, in order.
fn checkpoint_writes(sim: &SimFileSystem, page_size: u64) -> Vec<(u32, u64)> {
    sim.trace()
        .iter()
        .filter(|op| op.op == TraceKind::Write && op.issuer == Some(Issuer::Checkpointer))
        .filter(|op| op.file_kind == Some(FileKind::Data))
        .map(|op| {
            let name = op.path.file_name().unwrap().to_str().unwrap();
            let (id, segment) = crate::file::segmented::parse_segment_name(name).unwrap();
            assert_eq!(segment, 0, "one segment per file here");
            (id, op.offset / page_size)
        })
        .collect()
}

fn sort_options(sort: bool) -> Options {
    Options {
        checkpoint_sort: sort,
        buffer_pool_size: 4 << 20,
        ..Options::default()
    }
}

#[test]
fn a_sorted_checkpoint_writes_in_file_and_block_order() {
    let mut orders = Vec::new();
    for sort in [true, false] {
        let (db, tables, sim) = loaded(sort_options(sort), 3, 3000);
        db.checkpoint().unwrap();
        dirty_scattered(&db, &tables, 3000);
        sim.clear_trace();
        let dirty_before = db.checkpoint_stats().pages_written;
        db.checkpoint().unwrap();
        let log = db.checkpoint_stats().log.last().unwrap().clone();
        let writes = checkpoint_writes(&sim, db.settings().page_size as u64);
        assert!(
            log.pages_written >= 20,
            "{sort}: {} pages",
            log.pages_written
        );
        assert!(writes.len() >= 2 && dirty_before > 0);
        let sorted = writes.windows(2).all(|w| w[0] < w[1]);
        orders.push((sort, sorted, writes.len(), log.pages_written));
    }
    let (_, sorted_on, writes_on, pages_on) = orders[0];
    let (_, sorted_off, writes_off, pages_off) = orders[1];
    assert!(
        sorted_on,
        "checkpoint_sort = on wrote out of (file, block) order"
    );
    // The check can fail: unsorted, the same pages go in buffer order.
    assert!(
        !sorted_off,
        "checkpoint_sort = off wrote in block order anyway"
    );
    // Sorted, runs of consecutive blocks go as one write.
    assert_eq!(writes_off as u64, pages_off, "off writes one page per call");
    assert!(writes_on as u64 <= pages_on);
}

/// A manual clock that notes, at each nap, how many data pages the
/// checkpointer has written.
struct NotingClock {
    time: ManualClock,
    stats: parking_lot::Mutex<Option<Arc<IoStats>>>,
    naps: parking_lot::Mutex<Vec<(f64, u64)>>,
    /// The checkpointer's own progress at each nap.
    engine: parking_lot::Mutex<Option<std::sync::Weak<crate::engine::Engine>>>,
    progress: parking_lot::Mutex<Vec<Option<(u64, u64)>>>,
}

impl ClockSource for NotingClock {
    fn now(&self) -> std::time::Duration {
        self.time.now()
    }
    fn sleep(&self, d: std::time::Duration) {
        self.time.sleep(d);
        if let Some(stats) = &*self.stats.lock() {
            let pages = stats.bytes_by(Issuer::Checkpointer, FileKind::Data, IoOp::Write);
            self.naps
                .lock()
                .push((self.time.now().as_secs_f64(), pages / 8192));
        }
        if let Some(engine) = self.engine.lock().as_ref().and_then(|e| e.upgrade()) {
            self.progress.lock().push(engine.checkpoint.progress());
        }
    }
}

/// A noting manual clock, and options under which a spread checkpoint
/// should take 150 s (half of a 300-s checkpoint_timeout).
fn spread_over_150_s() -> (Arc<NotingClock>, Options) {
    let clock = Arc::new(NotingClock {
        time: ManualClock::default(),
        stats: Default::default(),
        naps: Default::default(),
        engine: Default::default(),
        progress: Default::default(),
    });
    let options = Options {
        clock: Clock::new(clock.clone()),
        checkpoint_timeout: std::time::Duration::from_secs(300),
        checkpoint_completion_target: 0.5,
        ..sort_options(true)
    };
    (clock, options)
}

#[test]
fn a_spread_checkpoint_is_paced_over_the_target() {
    let (clock, options) = spread_over_150_s();
    let (db, tables, _sim) = loaded(options, 3, 3000);
    db.checkpoint().unwrap();
    // Checkpoints asked for run at full speed: no nap.
    assert_eq!(clock.now(), std::time::Duration::ZERO);
    dirty_scattered(&db, &tables, 3000);
    *clock.stats.lock() = Some(db.io_stats().clone());
    *clock.engine.lock() = Some(Arc::downgrade(&db.engine));
    assert_eq!(db.checkpoint_progress(), None);
    let before = db
        .io_stats()
        .bytes_by(Issuer::Checkpointer, FileKind::Data, IoOp::Write)
        / 8192;
    let log = db.checkpoint_spread().unwrap();
    let pages = log.pages_written;
    assert!(pages >= 50, "only {pages} pages to spread");
    // Done when half of checkpoint_timeout has passed (within one nap).
    assert!(
        (149.0..=150.2).contains(&log.total_s),
        "a spread checkpoint took {} s of 150",
        log.total_s
    );
    // Paced all along: at each nap, the share of pages written is the
    // share of the 150 s passed, within one batch of pages.
    let naps = clock.naps.lock().clone();
    assert!(naps.len() > 100, "{} naps", naps.len());
    let units = (log.pages_marked + log.files_synced + 1) as f64;
    for (t, written) in naps {
        let share_time = t / 150.0;
        let share_pages = (written - before) as f64 / units;
        assert!(
            (share_pages - share_time).abs() <= 64.0 / units + 0.01,
            "at {t:.1} s, {share_pages:.3} of the pages were written"
        );
    }
    // The checkpointer's own progress, read at each nap, moves forward
    // through the work it counted and is gone once it is done.
    let progress = clock.progress.lock().clone();
    assert!(progress.len() > 100);
    let mut last = 0;
    for p in progress {
        let (done, units) = p.expect("a checkpoint runs during its naps");
        assert_eq!(units, log.pages_marked + log.files_synced);
        assert!(
            done >= last && done <= units,
            "{done} of {units} after {last}"
        );
        last = done;
    }
    assert!(
        last >= log.pages_marked,
        "{last} of {} pages",
        log.pages_marked
    );
    assert_eq!(db.checkpoint_progress(), None);
}

#[test]
fn checkpoints_are_counted_by_reason_with_a_line_each() {
    let (clock, manual) = Clock::manual();
    let options = Options {
        clock,
        checkpoint_timeout: std::time::Duration::from_secs(60),
        ..sort_options(true)
    };
    let (db, tables, _sim) = loaded(options, 1, 500);
    db.checkpoint().unwrap();
    let stats = db.checkpoint_stats();
    // The end of recovery at opening, then the one asked for.
    assert_eq!((stats.timed, stats.requested), (0, 2));
    assert_eq!(stats.log[0].reason, Reason::EndOfRecovery);
    assert_eq!(stats.log[1].reason, Reason::Requested);
    assert!(stats.log[1].pages_written > 0);
    assert!(stats.log[1].distance > 0, "WAL was written between the two");
    // Time passes on the engine's clock: the checkpointer starts a timed
    // one (spread, and the manual clock makes its naps instant).
    dirty_scattered(&db, &tables, 500);
    manual.sleep(std::time::Duration::from_secs(61));
    let mut waited = 0;
    while db.checkpoint_stats().timed == 0 {
        assert!(waited < 1000, "no timed checkpoint after 10 s");
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
    }
    let stats = db.checkpoint_stats();
    let timed = stats
        .log
        .iter()
        .find(|c| c.reason == Reason::Timed)
        .unwrap();
    assert!(timed.pages_written > 0);
    assert_eq!(
        stats.pages_written,
        stats.log.iter().map(|c| c.pages_written).sum::<u64>()
    );
}

thread_local! {
    static EVENTS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Writes into this thread's [`EVENTS`].
struct ThisThread;

impl std::io::Write for ThisThread {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        EVENTS.with(|e| e.borrow_mut().extend_from_slice(buf));
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Routes every thread's events to that thread's buffer. Global, not
/// scoped: tracing caches whether a call site is wanted across threads,
/// so a scoped subscriber misses events other tests' threads reached first.
fn capture_events() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(|| ThisThread)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
    });
    EVENTS.with(|e| e.borrow_mut().clear());
}

#[test]
fn a_checkpoint_is_reported_through_tracing() {
    let (clock, _) = Clock::manual();
    let options = Options {
        clock,
        ..sort_options(true)
    };
    let (db, tables, _sim) = loaded(options, 1, 300);
    dirty_scattered(&db, &tables, 300);
    capture_events();
    let log = db.checkpoint_spread().unwrap();
    let text = EVENTS.with(|e| String::from_utf8(e.borrow().clone()).unwrap());
    assert!(text.contains("checkpoint starting"), "{text}");
    let done = text.lines().find(|l| l.contains("checkpoint complete"));
    let done = done.unwrap_or_else(|| panic!("no completion line in {text}"));
    assert!(
        done.contains(&format!("pages_written={}", log.pages_written)),
        "{done}"
    );
    assert!(done.contains("reason=Requested"), "{done}");
}

#[test]
fn a_spread_checkpoint_paces_its_deferred_write_back_too() {
    let (clock, options) = spread_over_150_s();
    let options = Options {
        creation: crate::settings::RequestedCreationSettings {
            torn_page_protection: Some(crate::settings::TornPageProtection::DoubleWrites),
            ..Default::default()
        },
        // A small pool, so the scattered rows' pages are evicted (and
        // deferred); a small area, so their write-back takes many batches.
        buffer_pool_size: 512 << 10,
        double_write_buffer_size: 64 * 8192,
        bgwriter_lru_maxpages: 0,
        double_write_keep_deferred: false,
        ..options
    };
    let (db, tables, _sim) = loaded(options, 3, 3000);
    db.checkpoint().unwrap();
    dirty_scattered(&db, &tables, 3000);
    let protection = db.engine.pool.page_write_protection();
    let deferred = protection.deferred_pages() as u64;
    let batch = protection.max_batch() as u64;
    assert!(
        deferred >= 4 * batch,
        "{deferred} deferred pages, batches of {batch}"
    );
    *clock.stats.lock() = Some(db.io_stats().clone());
    let before = db
        .io_stats()
        .bytes_by(Issuer::Checkpointer, FileKind::Data, IoOp::Write)
        / 8192;
    let log = db.checkpoint_spread().unwrap();
    assert_eq!(protection.deferred_pages(), 0);
    let pool_pages = log.pages_marked;
    // Paced over the target as a whole: at each nap, the share of the
    // pool's and the deferred pages written is the share of the 150 s
    // passed, within one batch. The pacer counts a unit for every page
    // marked or deferred when it began; a page both dirty in the pool and
    // deferred is written once (its deferred copy is obsolete then), so
    // each such page may put it one unit off the pages written.
    let naps = clock.naps.lock().clone();
    let units = (pool_pages + deferred + log.files_synced + 1) as f64;
    let after = db
        .io_stats()
        .bytes_by(Issuer::Checkpointer, FileKind::Data, IoOp::Write)
        / 8192;
    let unwritten = (pool_pages + deferred).saturating_sub(after - before);
    for &(t, written) in &naps {
        let share_pages = (written - before) as f64 / units;
        assert!(
            (share_pages - t / 150.0).abs() <= (batch + unwritten) as f64 / units + 0.01,
            "at {t:.1} s, {share_pages:.3} of the pages were written \
             ({pool_pages} marked, {deferred} deferred, {unwritten} never written)"
        );
    }
    // Only such pages: every one is a marked page.
    assert!(
        unwritten <= pool_pages,
        "{unwritten} of {} pages never written",
        pool_pages + deferred
    );
    // Some naps fall within the write-back: it is not one burst at the
    // end of the pool's pages.
    let within = naps
        .iter()
        .filter(|&&(_, w)| w - before > pool_pages && w - before < pool_pages + deferred)
        .count();
    assert!(within >= 3, "{within} naps in the write-back of {deferred}");
}
