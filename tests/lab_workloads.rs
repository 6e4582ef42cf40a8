//! The benchmark laboratory's workloads and runner, with tiny data and
//! sub-second runs: every workload runs on 4 clients without error, the
//! invariants hold after a run and after a crash, and a run's figures are
//! filled in.

use std::time::Duration;
use untorn::lab::result::Run;
use untorn::lab::runner::{fresh_database, run_once, RunSpec};
use untorn::lab::workload::{by_name, sysbench, Scale, Workload, NAMES};
use untorn::{key_u64, Database, Options};

fn scale() -> Scale {
    Scale {
        scale: 1,
        accounts_per_branch: 1000,
        tables: 2,
        table_size: 1000,
        warehouses: 1,
        tpcc_items: 1000,
        tpcc_customers: 30,
    }
}

fn options() -> Options {
    Options {
        buffer_pool_size: 8 * 1024 * 1024,
        ..Options::default()
    }
}

fn spec(ms: u64) -> RunSpec {
    RunSpec {
        clients: 4,
        warmup: Duration::from_millis(50),
        duration: Duration::from_millis(ms),
        think: false,
    }
}

fn run(db: &Database, w: &dyn Workload, ms: u64) -> Run {
    run_once(db, w, &spec(ms), 0, 42).unwrap_or_else(|e| panic!("{}: {e}", w.name()))
}

#[test]
fn every_workload_commits_with_four_clients_and_keeps_its_invariant() {
    for name in NAMES {
        let dir = tempfile::tempdir().unwrap();
        let w = by_name(name, &scale()).unwrap();
        let db = fresh_database(&dir.path().join("db"), options(), w.as_ref()).unwrap();
        // A loaded 2-core machine may commit no TPC-C transaction in
        // 300 ms: run longer until one commits, as a speed is no test.
        let mut ms = 300;
        let mut r = run(&db, w.as_ref(), ms);
        while r.transactions == 0 && ms < 20_000 {
            ms *= 2;
            r = run(&db, w.as_ref(), ms);
        }
        assert!(
            r.transactions > 0,
            "{name}: no transaction committed in {ms} ms"
        );
        assert!(r.tps > 0.0 && r.latency_ms.avg > 0.0, "{name}: {r:?}");
        if w.writes() {
            assert!(r.wal_bytes > 0 && r.wal_records > 0, "{name}: no WAL");
        }
        w.check(&db).unwrap_or_else(|e| panic!("{name}: {e}"));
        db.close().unwrap();
    }
}

#[test]
fn tpcb_sums_agree_after_a_run_and_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let w = by_name("tpcb", &scale()).unwrap();
    let db = fresh_database(&path, options(), w.as_ref()).unwrap();
    let first = run(&db, w.as_ref(), 300);
    assert!(first.transactions > 0);
    w.check(&db).unwrap();
    drop(db); // a crash: no shutdown checkpoint
    let db = Database::open(&path, options()).unwrap();
    w.check(&db).unwrap();
    // The history counter resumes past the rows already there.
    let again = run(&db, w.as_ref(), 200);
    assert!(again.transactions > 0);
    w.check(&db).unwrap();
    let history = db.table("pgbench_history").unwrap();
    let rows = db.begin().scan(&history, b"", None, usize::MAX).unwrap();
    assert!(rows.len() as u64 >= first.transactions + again.transactions);
    drop(db);
    let db = Database::open(&path, options()).unwrap();
    w.check(&db).unwrap();
    db.close().unwrap();
}

#[test]
fn sysbench_read_write_keeps_row_counts_and_the_k_index() {
    let dir = tempfile::tempdir().unwrap();
    let s = scale();
    let w = by_name("oltp_read_write", &s).unwrap();
    let db = fresh_database(&dir.path().join("db"), options(), w.as_ref()).unwrap();
    let r = run(&db, w.as_ref(), 400);
    assert!(r.transactions > 0);
    w.check(&db).unwrap();
    // The same check written out here, independent of the workload's own.
    for n in 1..=s.tables {
        let rows = db.table(&sysbench::table_name(n)).unwrap();
        let index = db.table(&sysbench::index_name(n)).unwrap();
        let tx = db.begin();
        let all = tx.scan(&rows, b"", None, usize::MAX).unwrap();
        assert_eq!(all.len() as u64, s.table_size, "{}", rows.name);
        let ids: Vec<Vec<u8>> = all.iter().map(|(k, _)| k.clone()).collect();
        let want: Vec<Vec<u8>> = (1..=s.table_size).map(|i| key_u64(i).to_vec()).collect();
        assert_eq!(ids, want, "ids of {}", rows.name);
        let mut expected: Vec<Vec<u8>> = all
            .iter()
            .map(|(k, v)| {
                let id = u64::from_be_bytes(k.as_slice().try_into().unwrap());
                sysbench::index_key(sysbench::row_k(v, &rows).unwrap(), id).to_vec()
            })
            .collect();
        expected.sort();
        let entries = tx.scan(&index, b"", None, usize::MAX).unwrap();
        assert!(entries.iter().all(|(_, v)| v.is_empty()));
        let got: Vec<Vec<u8>> = entries.into_iter().map(|(k, _)| k).collect();
        assert_eq!(got, expected, "index of {}", rows.name);
    }
    db.close().unwrap();
}

#[test]
fn a_run_fills_its_figures_and_series() {
    let dir = tempfile::tempdir().unwrap();
    let w = by_name("oltp_update_non_index", &scale()).unwrap();
    let db = fresh_database(&dir.path().join("db"), options(), w.as_ref()).unwrap();
    let r = run_once(&db, w.as_ref(), &spec(1300), 3, 7).unwrap();
    assert_eq!(r.repeat, 3);
    assert!((r.seconds - 1.3).abs() < 1e-9);
    assert!(r.transactions > 0 && r.tps > 0.0);
    let l = r.latency_ms;
    assert!(
        l.avg > 0.0 && l.p90 > 0.0 && l.p99 >= l.p90 && l.max >= l.p99,
        "{l:?}"
    );
    assert!(r.cpu_us_per_txn > 0.0);
    assert!(r.wal_bytes > 0 && r.wal_records >= r.transactions && r.wal_fsyncs > 0);
    // One full second and the 0.3 s after it.
    assert_eq!(r.series.len(), 2, "{:?}", r.series);
    assert_eq!(r.series[0].second, 0);
    assert_eq!(r.series[1].second, 1);
    assert!(r.series.iter().all(|s| s.tps > 0.0 && s.wal_bytes > 0));
    // The 100 ms series: a sample per tick (fewer if the sampler woke
    // late), in order, inside the run, adding up to the seconds' WAL.
    let fine = &r.fine_series;
    assert!((2..=13).contains(&fine.len()), "{fine:?}");
    assert_eq!(fine[0].ms, 0);
    assert!(fine.windows(2).all(|w| w[0].ms < w[1].ms && w[1].ms < 1300));
    assert!(fine.iter().any(|s| s.tps > 0.0 && s.p99 > 0.0));
    let wal = |it: &mut dyn Iterator<Item = u64>| it.sum::<u64>();
    assert_eq!(
        wal(&mut fine.iter().map(|s| s.wal)),
        wal(&mut r.series.iter().map(|s| s.wal_bytes))
    );
    // The noise monitor looked (on Linux) and judged nothing yet.
    if cfg!(target_os = "linux") {
        let n = r.noise.as_ref().expect("a noise report on Linux");
        assert!(n.probe_copy_ms.is_some_and(|ms| ms > 0.0), "{n:?}");
        assert!(n.probe_fsync_ms.is_some_and(|ms| ms > 0.0), "{n:?}");
        assert!(n.other_cores >= 0.0 && n.steal_pct >= 0.0, "{n:?}");
        assert!(!r.disturbed && n.reasons.is_empty());
    }
    db.close().unwrap();
}

#[test]
fn a_checkpoint_during_the_run_is_marked_in_its_second() {
    let dir = tempfile::tempdir().unwrap();
    let w = by_name("oltp_update_non_index", &scale()).unwrap();
    let db = fresh_database(&dir.path().join("db"), options(), w.as_ref()).unwrap();
    let r = std::thread::scope(|s| {
        let runner = s.spawn(|| run_once(&db, w.as_ref(), &spec(400), 0, 9));
        std::thread::sleep(Duration::from_millis(200));
        db.checkpoint().unwrap();
        runner.join().unwrap().unwrap()
    });
    assert!(r.checkpoints >= 1, "{r:?}");
    assert!(r.series.iter().any(|s| s.checkpoint_started));
    assert!(r.series.iter().any(|s| s.checkpoint_ended));
    assert!(r.fine_series.iter().any(|s| s.ckpt_start), "{r:?}");
    assert!(r.data_writes > 0 && r.data_fsyncs > 0, "{r:?}");
    assert_eq!((r.dw_page_writes, r.dw_fsyncs), (0, 0));
    db.close().unwrap();
}

#[test]
fn bad_names_and_specs_are_refused_clearly() {
    let e = by_name("oltp_insert", &scale()).err().unwrap().to_string();
    assert!(
        e.contains("oltp_insert") && e.contains("oltp_write_only"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let w = by_name("oltp_point_select", &scale()).unwrap();
    let db = fresh_database(&dir.path().join("db"), options(), w.as_ref()).unwrap();
    let zero = RunSpec {
        clients: 0,
        ..spec(100)
    };
    assert!(run_once(&db, w.as_ref(), &zero, 0, 1).is_err());
    // Only TPC-C has keying and think times.
    let think = RunSpec {
        think: true,
        ..spec(100)
    };
    let e = run_once(&db, w.as_ref(), &think, 0, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--think: oltp_point_select"), "{e}");
    db.close().unwrap();
}

/// A 400-ms oltp_update_non_index run under double writes on a fresh
/// database whose pool holds the data, with one checkpoint in its middle:
/// the only writer of pages (no background writer).
fn double_writes_run_with_a_checkpoint(
    dir: &std::path::Path,
    keep_deferred: bool,
) -> (Database, Run) {
    let w = by_name("oltp_update_non_index", &scale()).unwrap();
    let mut o = options();
    o.creation.torn_page_protection = Some(untorn::TornPageProtection::DoubleWrites);
    o.bgwriter_lru_maxpages = 0;
    o.double_write_keep_deferred = keep_deferred;
    let db = fresh_database(&dir.join("db"), o, w.as_ref()).unwrap();
    let r = std::thread::scope(|s| {
        let runner = s.spawn(|| run_once(&db, w.as_ref(), &spec(400), 0, 9));
        std::thread::sleep(Duration::from_millis(200));
        db.checkpoint().unwrap();
        runner.join().unwrap().unwrap()
    });
    (db, r)
}

#[test]
fn a_run_under_double_writes_counts_page_images_by_writer() {
    let dir = tempfile::tempdir().unwrap();
    // The checkpoint's pages go through the area (kept, they would stay in
    // dw/deferred: the next test).
    let (db, r) = double_writes_run_with_a_checkpoint(dir.path(), false);
    let dw = r.statistics.double_write;
    let ckpt = dw.checkpointer;
    assert!(ckpt.pages > 0 && ckpt.fsyncs > 0, "{dw:?}");
    // Page images only: the file layer's bytes also hold a header block
    // per batch.
    let page = u64::from(db.settings().page_size);
    let io = r.statistics.io_of_kind(untorn::file::FileKind::DoubleWrite);
    let total = dw.total();
    assert_eq!(r.dw_page_writes, total.pages);
    assert_eq!(io.write_bytes, (r.dw_page_writes + total.batches) * page);
    assert_eq!(r.dw_fsyncs, io.fsyncs);
    // The checkpointer wrote every data page of the run, each copied first.
    assert_eq!(ckpt.pages, r.checkpointer_page_writes, "{r:?}");

    let mut c = untorn::lab::result::ConfigResult {
        runs: vec![r.clone(), r],
        ..Default::default()
    };
    c.summarize();
    assert_eq!(c.dw_page_writes, 2 * total.pages);
    assert_eq!(
        c.dw_checkpoint_pages_per_fsync,
        ckpt.pages as f64 / ckpt.fsyncs as f64
    );
    assert_eq!(c.dw_client_pages_per_fsync, 0.0, "no client wrote a page");
    db.close().unwrap();
}

#[test]
fn a_checkpoint_that_keeps_its_pages_counts_them_deferred() {
    let dir = tempfile::tempdir().unwrap();
    let (db, r) = double_writes_run_with_a_checkpoint(dir.path(), true);
    let dw = r.statistics.double_write;
    let ckpt = dw.checkpointer;
    // Written once, to dw/deferred, and named by the checkpoint's manifest:
    // neither in the area nor in place.
    assert!(ckpt.deferred > 0 && ckpt.manifests >= 1, "{dw:?}");
    assert_eq!((ckpt.pages, r.checkpointer_page_writes), (0, 0), "{dw:?}");
    let total = dw.total();
    assert_eq!(r.dw_page_writes, total.pages + total.deferred);
    let mut c = untorn::lab::result::ConfigResult {
        runs: vec![r],
        ..Default::default()
    };
    c.summarize();
    // Made durable by one fsync per manifest, of dw/deferred, which holds
    // the manifest too.
    assert_eq!(
        c.dw_checkpoint_pages_per_fsync,
        ckpt.deferred as f64 / ckpt.manifests as f64
    );
    db.close().unwrap();
}
