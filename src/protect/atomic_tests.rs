//! `torn_page_protection = atomic` on the simulated file system: refused
//! where statx reports no atomic writes, `auto`'s choice, page writes made
//! whole (RWF_ATOMIC) surviving a crash that tears everything else, and
//! the switch into and out of it.

use crate::crashlab::sim::{CrashConfig, SimFileSystem, TraceKind};
use crate::db::Database;
use crate::error::Error;
use crate::file::{FileKind, FileSystem, IoStats};
use crate::options::Options;
use crate::settings::{ChecksumAlgorithm, TornPageProtection as P};
use crate::table::key_u64;
use crate::table::Table;
use std::path::Path;
use std::sync::Arc;

const DIR: &str = "/sim/db";

fn options(mode: P) -> Options {
    let mut o = Options {
        buffer_pool_size: 1 << 20,
        ..Options::default()
    };
    o.creation.torn_page_protection = Some(mode);
    o
}

/// A simulated device of 512-byte sectors; `atomic`: it writes up to a
/// page all or nothing when asked.
fn device(atomic: bool) -> SimFileSystem {
    let sim = SimFileSystem::new(Arc::new(IoStats::default()));
    sim.set_atomic_unit(atomic.then_some(8192));
    sim
}

fn create(sim: &SimFileSystem, o: Options) -> crate::error::Result<Database> {
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    Database::create_with(fs, sim.stats().clone(), Path::new(DIR), o)
}

fn open(sim: &SimFileSystem, o: Options) -> crate::error::Result<Database> {
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    Database::open_with(fs, sim.stats().clone(), Path::new(DIR), o)
}

fn commit_rows(db: &Database, t: &Table, keys: std::ops::Range<u64>, fill: u8) {
    for k in keys {
        let mut tx = db.begin();
        tx.upsert(t, &key_u64(k), &[fill; 300]).unwrap();
        tx.commit().unwrap();
    }
}

fn rows_are(db: &Database, keys: std::ops::Range<u64>, fill: u8) {
    let t = db.table("t").unwrap();
    let tx = db.begin();
    for k in keys {
        let v = tx.get(&t, &key_u64(k)).unwrap();
        assert_eq!(v.as_deref(), Some(&[fill; 300][..]), "key {k}");
    }
}

/// Data-file writes made with RWF_ATOMIC, and made without it.
fn data_writes(sim: &SimFileSystem) -> (usize, usize) {
    sim.with_trace(|ops| {
        let data = ops.iter().filter(|o| {
            o.file_kind == Some(FileKind::Data) && o.op == TraceKind::Write && o.error.is_none()
        });
        data.fold((0, 0), |(a, p), o| {
            if o.note.as_deref() == Some("RWF_ATOMIC") {
                (a + 1, p)
            } else {
                (a, p + 1)
            }
        })
    })
}

#[test]
fn atomic_is_refused_where_statx_reports_no_atomic_writes() {
    let sim = device(false);
    let e = create(&sim, options(P::Atomic)).err().expect("refused");
    let text = e.to_string();
    assert!(
        matches!(
            e,
            Error::InvalidSetting {
                name: "torn_page_protection",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(text.contains("statx reports no atomic writes"), "{text}");
    assert!(text.contains("double_writes or full_pages"), "{text}");
    // Nothing was made: the directory takes a database afterwards.
    create(&sim, options(P::DoubleWrites))
        .unwrap()
        .close()
        .unwrap();
    // Nor may an opening switch a database into it there.
    let e = open(&sim, options(P::Atomic)).err().expect("refused");
    assert!(e.to_string().contains("atomic needs"), "{e}");
    let db = open(&sim, Options::default()).unwrap();
    assert_eq!(db.settings().torn_page_protection, P::DoubleWrites);
}

#[test]
fn auto_picks_atomic_only_where_the_device_does_it() {
    let db = create(&device(true), options(P::Auto)).unwrap();
    assert_eq!(db.settings().torn_page_protection, P::Atomic);
    let db = create(&device(false), options(P::Auto)).unwrap();
    assert_eq!(db.settings().torn_page_protection, P::DoubleWrites);
    let mut no_checksums = options(P::Auto);
    no_checksums.creation.data_checksums = Some(ChecksumAlgorithm::Off);
    let db = create(&device(false), no_checksums).unwrap();
    assert_eq!(db.settings().torn_page_protection, P::FullPages);
}

/// Every data write goes out whole under `atomic`: a crash that tears
/// every write it can (at 512-byte sectors) leaves no data page torn, and
/// the committed rows are there after recovery. Under `off` the same
/// crash tears data pages (the check can fail).
#[test]
fn atomic_page_writes_survive_a_crash_that_tears_every_other_write() {
    for (mode, atomic_device) in [(P::Atomic, true), (P::Off, false)] {
        let sim = device(atomic_device);
        let db = create(&sim, options(mode)).unwrap();
        let t = db.create_table("t").unwrap();
        commit_rows(&db, &t, 0..600, 1);
        db.checkpoint().unwrap();
        // Rewritten and evicted (a 1 MB pool), not yet fsynced.
        commit_rows(&db, &t, 0..600, 2);
        db.engine
            .pool
            .flush_dirty(crate::file::Issuer::Client, 1000)
            .unwrap();
        let (atomic, plain) = data_writes(&sim);
        let tear_all = CrashConfig {
            tear_probability: 1.0,
            keep_probability: 0.0,
            drop_probability: 0.0,
            ..CrashConfig::default()
        };
        std::mem::forget(db);
        let report = sim.crash(7, &tear_all);
        let torn_data = report
            .torn_writes
            .iter()
            .filter(|w| w.path.starts_with(Path::new(DIR).join("data")))
            .count();
        if mode == P::Atomic {
            assert!(atomic > 0 && plain == 0, "{atomic} atomic, {plain} plain");
            assert_eq!(torn_data, 0, "{report:?}");
            let db = open(&sim, Options::default()).unwrap();
            rows_are(&db, 0..600, 2);
            let fs = sim.clone();
            db.close().unwrap();
            let v = crate::verify::verify_database(&fs, Path::new(DIR)).unwrap();
            assert!(v.ok(), "{v:?}");
        } else {
            assert_eq!(atomic, 0);
            assert!(torn_data > 0, "the crash tore no data write under off");
        }
    }
}

#[test]
fn switching_into_and_out_of_atomic_reopens_the_data_files() {
    let sim = device(true);
    let db = create(&sim, options(P::DoubleWrites)).unwrap();
    let t = db.create_table("t").unwrap();
    commit_rows(&db, &t, 0..300, 1);
    assert!(!db.engine.pool.files().atomic_page_writes());
    db.close().unwrap();
    for (mode, fill) in [
        (P::Atomic, 2),
        (P::Off, 3),
        (P::Atomic, 4),
        (P::FullPages, 5),
    ] {
        let db = open(&sim, options(mode)).unwrap();
        assert_eq!(db.settings().torn_page_protection, mode);
        assert_eq!(
            db.engine.pool.files().atomic_page_writes(),
            mode == P::Atomic
        );
        rows_are(&db, 0..300, fill - 1);
        sim.clear_trace();
        let t = db.table("t").unwrap();
        commit_rows(&db, &t, 0..300, fill);
        db.checkpoint().unwrap();
        let (atomic, plain) = data_writes(&sim);
        if mode == P::Atomic {
            assert!(
                atomic > 0 && plain == 0,
                "{mode}: {atomic} atomic, {plain} plain"
            );
        } else {
            assert!(
                atomic == 0 && plain > 0,
                "{mode}: {atomic} atomic, {plain} plain"
            );
        }
        db.close().unwrap();
    }
}

#[test]
fn a_database_under_atomic_on_files_without_it_opens_only_to_switch_after_a_clean_stop() {
    let sim = device(true);
    let db = create(&sim, options(P::Atomic)).unwrap();
    let t = db.create_table("t").unwrap();
    commit_rows(&db, &t, 0..100, 1);
    db.close().unwrap();
    // Moved to a device without atomic writes.
    sim.set_atomic_unit(None);
    let e = open(&sim, Options::default()).err().expect("refused");
    assert!(
        e.to_string().contains("or switch it to another mode"),
        "{e}"
    );
    let db = open(&sim, options(P::DoubleWrites)).unwrap();
    assert_eq!(db.settings().torn_page_protection, P::DoubleWrites);
    rows_are(&db, 0..100, 1);
    db.close().unwrap();
    // After a crash under atomic, recovery writes pages: refused under
    // full_pages (no image repairs a page its recovery tears) ...
    sim.set_atomic_unit(Some(8192));
    let db = open(&sim, options(P::Atomic)).unwrap();
    let t = db.table("t").unwrap();
    commit_rows(&db, &t, 0..100, 2);
    std::mem::forget(db);
    sim.process_crash();
    sim.set_atomic_unit(None);
    let e = open(&sim, options(P::FullPages)).err().expect("refused");
    assert!(
        e.to_string().contains("open it where it was made")
            && e.to_string()
                .contains("recover it with torn_page_protection = double_writes"),
        "{e}"
    );
    // ... and recovered under double_writes, whose area protects them.
    let db = open(&sim, options(P::DoubleWrites)).unwrap();
    assert_eq!(db.settings().torn_page_protection, P::DoubleWrites);
    rows_are(&db, 0..100, 2);
}

/// Issue 57, item 1 (the review's scenario): RWF_ATOMIC refused at run
/// time (the device no longer writes a page-sized unit) was an ordinary
/// I/O error: commits went on being acknowledged, no checkpoint or close
/// completed, and the next opening was refused in every mode. Now the
/// first refused page write stops the database with an error naming the
/// unit and the file, nothing more is acknowledged, and an opening with
/// `double_writes` recovers every acknowledged commit.
#[test]
fn atomic_writes_refused_at_run_time_stop_the_database_and_double_writes_recover_it() {
    let sim = device(true);
    let db = create(&sim, options(P::Atomic)).unwrap();
    let t = db.create_table("t").unwrap();
    commit_rows(&db, &t, 0..50, 1);
    db.checkpoint().unwrap();
    sim.set_atomic_unit(None);
    // Commits write WAL only: acknowledged until a page is written.
    commit_rows(&db, &t, 0..50, 2);
    let e = db.checkpoint().unwrap_err();
    assert!(
        matches!(e, Error::AtomicWriteRefused { unit: 8192, .. }),
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains("8192-byte page") && text.contains("/sim/db/data/"),
        "{text}"
    );
    // Stopped: nothing more is acknowledged, close fails.
    let late = (|| {
        let mut tx = db.begin();
        tx.upsert(&t, &key_u64(1), &[3; 300])?;
        tx.commit().map(|_| ())
    })();
    assert!(late.unwrap_err().is_fatal());
    assert!(db.close().is_err());
    // Every acknowledged commit is recovered under double_writes.
    let db = open(&sim, options(P::DoubleWrites)).unwrap();
    rows_are(&db, 0..50, 2);
    db.checkpoint().unwrap();
    db.close().unwrap();
    rows_are(&open(&sim, Options::default()).unwrap(), 0..50, 2);
}
