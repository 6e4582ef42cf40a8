//! What a benchmark run measures. These types are the JSON written by
//! `untorn bench --json` (documented in docs/BENCHMARKS.md), the rows of the
//! CSV files and the input of the report.

use crate::lab::confidence::{paired_ratio, RatioInterval};
use serde::{Deserialize, Serialize};

/// Latency figures in milliseconds (from an HdrHistogram of every
/// transaction of the run, warm-up excluded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    pub avg: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// One second of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the measured part of the run began (warm-up excluded).
    pub second: u32,
    pub tps: f64,
    pub latency_ms_avg: f64,
    pub latency_ms_p99: f64,
    pub wal_bytes: u64,
    pub data_writes: u64,
    /// A checkpoint started / ended during this second.
    pub checkpoint_started: bool,
    pub checkpoint_ended: bool,
}

/// 100 ms of a run (`Run::fine_series`): short names keep the JSON small.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FineSample {
    /// Milliseconds from the start of the measured part to this sample's
    /// start.
    pub ms: u32,
    pub tps: f32,
    /// 99th-percentile latency, milliseconds.
    pub p99: f32,
    /// WAL bytes written.
    pub wal: u64,
    /// Data pages written by clients, the background writer and the
    /// checkpointer.
    pub writes: [u64; 3],
    /// A checkpoint started in these 100 ms.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ckpt_start: bool,
    /// How far the running checkpoint was at the end (0 to 1; absent: none
    /// was running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ckpt: Option<f32>,
}

/// One run (one repeat) of one configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// 0-based repeat number.
    pub repeat: usize,
    pub seconds: f64,
    pub transactions: u64,
    /// Deadlocks (retried) and other retryable conflicts.
    pub retries: u64,
    pub tps: f64,
    pub latency_ms: LatencyMs,
    /// Process CPU time (user + system) per transaction, microseconds.
    pub cpu_us_per_txn: f64,
    pub wal_bytes: u64,
    pub wal_records: u64,
    pub wal_fpi: u64,
    /// Bytes of those images as logged, and before `wal_compression`.
    #[serde(default)]
    pub wal_fpi_bytes: u64,
    #[serde(default)]
    pub wal_fpi_bytes_uncompressed: u64,
    pub wal_fsyncs: u64,
    /// Data-file page writes and fsyncs, every issuer.
    pub data_writes: u64,
    pub data_fsyncs: u64,
    /// Data-file page writes by clients (dirty victims), the background
    /// writer and the checkpointer (pg_stat_io's split).
    #[serde(default)]
    pub client_page_writes: u64,
    #[serde(default)]
    pub bgwriter_page_writes: u64,
    #[serde(default)]
    pub checkpointer_page_writes: u64,
    /// Double-write area page writes and fsyncs (0 without double writes).
    pub dw_page_writes: u64,
    pub dw_fsyncs: u64,
    pub checkpoints: u64,
    pub series: Vec<Sample>,
    /// The same run every 100 ms, for the checkpoint phases.
    #[serde(default)]
    pub fine_series: Vec<FineSample>,
    /// Every counter's change over the measured part (the views of
    /// `untorn stats`): WAL writes, fsyncs and commits per fsync, WAL bytes
    /// written with padding, I/O by issuer (data writes, writebacks,
    /// fsyncs), checkpoints timed and requested with their write and sync
    /// time, and in `checkpoint_log` each checkpoint completed in the run.
    #[serde(default)]
    pub statistics: crate::stats::Statistics,
    /// The noise monitor saw the machine disturbed during this run.
    #[serde(default)]
    pub disturbed: bool,
    /// Left out of every figure and ratio (a disturbed run under
    /// `--drop-disturbed`); kept in the JSON to show what was dropped.
    #[serde(default)]
    pub excluded: bool,
    /// What the noise monitor saw (`None`: no monitor, not on Linux).
    #[serde(default)]
    pub noise: Option<crate::lab::noise::NoiseReport>,
}

/// Every run of one (workload, settings) combination and their summary:
/// the object `untorn bench --json` writes, one per combination.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigResult {
    pub workload: String,
    pub protection: String,
    /// The device model the file layer used (`real` for none).
    pub device: String,
    /// Median TPS of the runs.
    pub tps: f64,
    pub tps_runs: Vec<f64>,
    /// (max - min) / median of the runs' TPS, in percent.
    pub tps_spread_pct: f64,
    /// Of the median run (by TPS).
    pub latency_ms: LatencyMs,
    pub wal_bytes_per_txn: f64,
    pub wal_fpi: u64,
    /// Full-page image bytes per transaction as logged, and before
    /// `wal_compression` (equal when it is off).
    #[serde(default)]
    pub fpi_bytes_per_txn: f64,
    #[serde(default)]
    pub fpi_bytes_uncompressed_per_txn: f64,
    pub dw_page_writes: u64,
    pub dw_fsyncs: u64,
    pub data_writes: u64,
    pub data_fsyncs: u64,
    /// Page writes by writer over all runs, and the clients' share of
    /// the three in percent (each run's share in `client_write_pct_runs`).
    #[serde(default)]
    pub client_page_writes: u64,
    #[serde(default)]
    pub bgwriter_page_writes: u64,
    #[serde(default)]
    pub checkpointer_page_writes: u64,
    #[serde(default)]
    pub client_write_pct: f64,
    #[serde(default)]
    pub client_write_pct_runs: Vec<f64>,
    pub checkpoints: u64,
    /// WAL flush requests (commits) per WAL fsync over all runs.
    #[serde(default)]
    pub commits_per_wal_fsync: f64,
    pub cpu_us_per_txn: f64,
    pub page_writes_per_txn: f64,
    /// Every setting the runs used, by name.
    pub settings: std::collections::BTreeMap<String, String>,
    pub runs: Vec<Run>,
}

impl ConfigResult {
    /// Fills the summary fields from `runs`: the median by TPS for
    /// latencies, totals over all runs for counts, per-transaction figures
    /// over all runs.
    pub fn summarize(&mut self) {
        let mut tps: Vec<f64> = self.runs.iter().map(|r| r.tps).collect();
        self.tps_runs = tps.clone();
        if tps.is_empty() {
            return;
        }
        tps.sort_by(|a, b| a.total_cmp(b));
        let median = tps[tps.len() / 2];
        self.tps = median;
        self.tps_spread_pct = if median > 0.0 {
            100.0 * (tps[tps.len() - 1] - tps[0]) / median
        } else {
            0.0
        };
        if let Some(m) = self.runs.iter().find(|r| r.tps == median) {
            self.latency_ms = m.latency_ms;
        }
        let txns: u64 = self.runs.iter().map(|r| r.transactions).sum::<u64>().max(1);
        let sum = |f: fn(&Run) -> u64| self.runs.iter().map(f).sum::<u64>();
        self.wal_bytes_per_txn = sum(|r| r.wal_bytes) as f64 / txns as f64;
        self.wal_fpi = sum(|r| r.wal_fpi);
        self.fpi_bytes_per_txn = sum(|r| r.wal_fpi_bytes) as f64 / txns as f64;
        self.fpi_bytes_uncompressed_per_txn =
            sum(|r| r.wal_fpi_bytes_uncompressed) as f64 / txns as f64;
        self.dw_page_writes = sum(|r| r.dw_page_writes);
        self.dw_fsyncs = sum(|r| r.dw_fsyncs);
        self.data_writes = sum(|r| r.data_writes);
        self.data_fsyncs = sum(|r| r.data_fsyncs);
        self.checkpoints = sum(|r| r.checkpoints);
        let fsyncs = sum(|r| r.statistics.wal.fsyncs);
        self.commits_per_wal_fsync = if fsyncs > 0 {
            sum(|r| r.statistics.wal.flush_requests) as f64 / fsyncs as f64
        } else {
            0.0
        };
        self.client_page_writes = sum(|r| r.client_page_writes);
        self.bgwriter_page_writes = sum(|r| r.bgwriter_page_writes);
        self.checkpointer_page_writes = sum(|r| r.checkpointer_page_writes);
        self.client_write_pct = client_pct(
            self.client_page_writes,
            self.bgwriter_page_writes,
            self.checkpointer_page_writes,
        );
        self.client_write_pct_runs = self
            .runs
            .iter()
            .map(|r| {
                client_pct(
                    r.client_page_writes,
                    r.bgwriter_page_writes,
                    r.checkpointer_page_writes,
                )
            })
            .collect();
        self.page_writes_per_txn = self.data_writes as f64 / txns as f64;
        let cpu: f64 = self
            .runs
            .iter()
            .map(|r| r.cpu_us_per_txn * r.transactions as f64)
            .sum();
        self.cpu_us_per_txn = cpu / txns as f64;
    }
}

impl ConfigResult {
    /// This configuration's `figure` over `other`'s, paired by round (a
    /// run's `repeat`), with its confidence interval; excluded runs give no
    /// pair. `None` with fewer than two pairs.
    pub fn ratio_to(&self, other: &ConfigResult, figure: fn(&Run) -> f64) -> Option<RatioInterval> {
        let by_round = |r: &ConfigResult| {
            let rounds = r.runs.iter().map(|run| run.repeat + 1).max().unwrap_or(0);
            let mut v = vec![None; rounds];
            for run in r.runs.iter().filter(|run| !run.excluded) {
                v[run.repeat] = Some(figure(run));
            }
            v
        };
        let (mut a, mut b) = (by_round(self), by_round(other));
        let rounds = a.len().max(b.len());
        a.resize(rounds, None);
        b.resize(rounds, None);
        paired_ratio(&a, &b)
    }
}

/// The clients' share of the pages written by clients, the background
/// writer and the checkpointer, in percent (0 when none were written).
fn client_pct(client: u64, bgwriter: u64, checkpointer: u64) -> f64 {
    let all = client + bgwriter + checkpointer;
    if all == 0 {
        0.0
    } else {
        100.0 * client as f64 / all as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
