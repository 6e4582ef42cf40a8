//! Tests of result.rs: summaries, ratios and comparisons of runs.
use super::*;
use crate::lab::report::compare_workloads;

#[test]
fn summary_takes_the_median_and_totals() {
    let run = |repeat, tps: f64, txns| Run {
        repeat,
        tps,
        transactions: txns,
        wal_bytes: txns * 100,
        wal_fpi_bytes: txns * 30,
        wal_fpi_bytes_uncompressed: txns * 90,
        data_writes: txns,
        client_page_writes: txns / 10,
        bgwriter_page_writes: txns / 10,
        checkpointer_page_writes: txns * 8 / 10,
        cpu_us_per_txn: 10.0,
        statistics: crate::stats::Statistics {
            wal: crate::stats::WalView {
                flush_requests: txns,
                fsyncs: txns / 10,
                ..Default::default()
            },
            ..Default::default()
        },
        latency_ms: LatencyMs {
            avg: tps,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut c = ConfigResult {
        runs: vec![run(0, 100.0, 10), run(1, 300.0, 30), run(2, 200.0, 20)],
        ..Default::default()
    };
    c.summarize();
    assert_eq!(c.tps, 200.0);
    assert_eq!(c.tps_runs, vec![100.0, 300.0, 200.0]);
    assert_eq!(c.latency_ms.avg, 200.0);
    assert_eq!(c.wal_bytes_per_txn, 100.0);
    assert_eq!(c.page_writes_per_txn, 1.0);
    assert_eq!(c.fpi_bytes_per_txn, 30.0);
    assert_eq!(c.fpi_bytes_uncompressed_per_txn, 90.0);
    assert_eq!(c.tps_spread_pct, 100.0);
    assert_eq!(c.cpu_us_per_txn, 10.0);
    assert_eq!(c.commits_per_wal_fsync, 10.0);
    assert_eq!(c.client_page_writes, 6);
    assert_eq!(c.client_write_pct, 10.0);
    assert_eq!(c.client_write_pct_runs, vec![10.0; 3]);
}

#[test]
fn double_write_ratios_pool_the_runs() {
    use crate::stats::{DoubleWriteFigures, DoubleWriteView, Statistics};
    let run = |ckpt_pages, ckpt_fsyncs, client_pages, client_fsyncs| {
        let row = |pages, fsyncs| DoubleWriteFigures {
            pages,
            fsyncs,
            slot_syncs: 1,
            // Per run, as `since` leaves it; the summary must not
            // average these.
            pages_per_fsync: pages as f64 / fsyncs as f64,
            ..Default::default()
        };
        Run {
            tps: 1.0,
            statistics: Statistics {
                double_write: DoubleWriteView {
                    checkpointer: row(ckpt_pages, ckpt_fsyncs),
                    client: row(client_pages, client_fsyncs),
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        }
    };
    let mut c = ConfigResult {
        runs: vec![run(3000, 1, 10, 10), run(1000, 3, 90, 10)],
        ..Default::default()
    };
    c.summarize();
    // 4,000 pages in 4 fsyncs, not the mean of 3,000 and 333.
    assert_eq!(c.dw_checkpoint_pages_per_fsync, 1000.0);
    assert_eq!(c.dw_client_pages_per_fsync, 5.0);
    assert_eq!(c.dw_slot_syncs, 4);
}

#[test]
fn ratios_pair_runs_by_round_and_skip_excluded_ones() {
    let run = |repeat, tps, excluded| Run {
        repeat,
        tps,
        excluded,
        ..Default::default()
    };
    let a = ConfigResult {
        runs: vec![run(1, 90.0, false), run(0, 100.0, false), run(2, 1.0, true)],
        ..Default::default()
    };
    let b = ConfigResult {
        runs: vec![
            run(0, 100.0, false),
            run(1, 100.0, false),
            run(2, 100.0, false),
        ],
        ..Default::default()
    };
    let i = a.ratio_to(&b, |r| r.tps).unwrap();
    assert_eq!(i.pairs, 2);
    assert!((i.ratio - 0.9f64.sqrt()).abs() < 1e-12);
    assert!(b.ratio_to(&b, |r| r.tps).is_some_and(|i| !i.resolved()));
}

#[test]
fn summary_skips_excluded_runs_and_counts_them() {
    let run = |repeat, tps: f64, disturbed, excluded| Run {
        repeat,
        tps,
        transactions: 100,
        data_reads: 50,
        data_writes: 200,
        wal_fsyncs: 10,
        disturbed,
        excluded,
        ..Default::default()
    };
    let mut c = ConfigResult {
        runs: vec![
            run(0, 100.0, false, false),
            run(1, 5.0, true, true),
            run(2, 300.0, true, false),
            run(3, 1.0, true, true),
        ],
        ..Default::default()
    };
    c.summarize();
    // The median of 100 and 300 alone: excluded runs would pull it down.
    assert_eq!(c.tps, 300.0);
    assert_eq!(c.tps_runs, vec![100.0, 300.0]);
    assert_eq!(c.tps_spread_pct, 200.0 / 3.0);
    assert_eq!(c.data_reads, 100);
    assert_eq!(c.page_reads_per_txn, 0.5);
    assert_eq!(c.page_writes_per_txn, 2.0);
    assert_eq!(c.wal_fsyncs_per_txn, 0.1);
    assert_eq!((c.disturbed_runs, c.excluded_runs), (3, 2));
}

#[test]
fn comparisons_cover_every_other_configuration_of_a_workload() {
    let config = |workload: &str, protection: &str, tps: [f64; 3], reads: u64| {
        let runs = tps
            .iter()
            .enumerate()
            .map(|(repeat, &tps)| Run {
                repeat,
                tps,
                transactions: 1000,
                data_reads: reads * (repeat as u64 + 1),
                wal_bytes: 1000 * 300,
                ..Default::default()
            })
            .collect();
        let mut c = ConfigResult {
            workload: workload.into(),
            protection: protection.into(),
            runs,
            ..Default::default()
        };
        c.summarize();
        c
    };
    let mut rs = vec![
        config("w", "off", [100.0, 110.0, 90.0], 10),
        config("v", "off", [10.0, 10.0, 10.0], 10),
        config("w", "full_pages", [90.0, 99.0, 81.0], 20),
    ];
    compare_workloads(&mut rs);
    assert_eq!(rs[1].vs, vec![]);
    let (fp, off) = (&rs[2].vs, &rs[0].vs);
    assert_eq!((fp.len(), off.len()), (1, 1));
    assert_eq!((fp[0].against.as_str(), fp[0].against_index), ("off", 0));
    assert_eq!(off[0].against, "full_pages");
    assert_eq!(fp[0].rounds, 3);
    let tps = fp[0].tps.unwrap();
    assert!((tps.ratio - 0.9).abs() < 1e-12 && tps.resolved(), "{tps:?}");
    assert!((fp[0].page_reads_per_txn.unwrap().ratio - 2.0).abs() < 1e-12);
    // Equal WAL bytes in every round: the ratio is exactly 1.
    assert!(!fp[0].wal_bytes_per_txn.unwrap().resolved());
    // No fsyncs at all: no ratio rather than 0/0.
    assert_eq!(fp[0].wal_fsyncs_per_txn, None);
}
