//! What a benchmark run measures. These types are the JSON written by
//! `untorn bench --json` (documented in docs/BENCHMARKS.md), the rows of the
//! CSV files and the input of the report.

use crate::lab::confidence::{paired_ratio, RatioInterval, StopReason};
use crate::lab::page_io::PageIo;
use crate::stats::DoubleWriteView;
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

/// One transaction type's figures in a run (seed 001's DBT-2 columns:
/// response time avg / 90 % / max).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KindFigures {
    pub name: String,
    /// Completed in the measured part (rolled back ones included).
    pub transactions: u64,
    /// Rolled back by the transaction's own logic (TPC-C's New-Order).
    pub rollbacks: u64,
    pub latency_ms: LatencyMs,
}

impl Run {
    /// Completed transactions of type `name` per minute (TPC-C's notpm
    /// for `new_order`); None when the run has no such type.
    pub fn per_minute(&self, name: &str) -> Option<f64> {
        let k = self.by_kind.iter().find(|k| k.name == name)?;
        Some(k.transactions as f64 * 60.0 / self.seconds.max(1e-9))
    }

    /// One line of a run's per-type figures (none without types): notpm,
    /// tpm, and each type's count, rollbacks and latency avg / 90 % / max.
    pub fn kinds_line(&self) -> Option<String> {
        if self.by_kind.is_empty() {
            return None;
        }
        let mut line = format!(
            "{:.0} notpm, {:.0} tpm, {} retries",
            self.per_minute("new_order").unwrap_or(0.0),
            self.tps * 60.0,
            self.retries
        );
        for k in &self.by_kind {
            let l = &k.latency_ms;
            line.push_str(&format!(
                "; {} {} ({} rolled back) {:.2}/{:.2}/{:.2} ms",
                k.name, k.transactions, k.rollbacks, l.avg, l.p90, l.max
            ));
        }
        Some(line)
    }
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
    /// Client threads that ran (the configuration's `clients`, or the
    /// plan's).
    #[serde(default)]
    pub clients: usize,
    /// Whether the clients paused for keying and think times (`--think`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub think: bool,
    pub seconds: f64,
    pub transactions: u64,
    /// Deadlocks (retried) and other retryable conflicts.
    pub retries: u64,
    pub tps: f64,
    pub latency_ms: LatencyMs,
    /// Per transaction type, for workloads that have several (TPC-C's
    /// five; empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_kind: Vec<KindFigures>,
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
    /// Data-file page reads (buffer pool misses), every issuer.
    #[serde(default)]
    pub data_reads: u64,
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
    /// Page images written to the double-write area or stored in
    /// `dw/deferred` (header blocks not counted), and fsyncs of the area,
    /// of `dw/deferred` and of its manifests, every writer (0 without
    /// double writes). By writer in `statistics.double_write`.
    pub dw_page_writes: u64,
    pub dw_fsyncs: u64,
    /// Every page written and read, by destination, and the bytes written
    /// to each kind of file (all zero in results from before them: see
    /// [`Run::page_io`]).
    #[serde(default)]
    pub io: PageIo,
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
    /// Double-write pages per fsync of the area by the checkpointer (the
    /// issue's goal: >= 1,000) and by clients writing dirty victims (an
    /// fsync per page is the eviction cliff), over all runs; 0 where that
    /// writer wrote none.
    #[serde(default)]
    pub dw_checkpoint_pages_per_fsync: f64,
    #[serde(default)]
    pub dw_client_pages_per_fsync: f64,
    /// Data-file fsyncs double-write writers ran to reuse slots whose
    /// pages were not yet durable in place, over all runs.
    #[serde(default)]
    pub dw_slot_syncs: u64,
    #[serde(default)]
    pub data_reads: u64,
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
    /// Every page read and written, wherever (data files, the
    /// double-write area, `dw/deferred`), per transaction.
    #[serde(default)]
    pub page_reads_per_txn: f64,
    pub page_writes_per_txn: f64,
    /// Kilobytes written per transaction, to every file (WAL, data,
    /// double writes, control).
    #[serde(default)]
    pub kb_written_per_txn: f64,
    /// The runs' I/O by destination, summed.
    #[serde(default)]
    pub io: PageIo,
    #[serde(default)]
    pub wal_fsyncs_per_txn: f64,
    /// Runs the noise monitor flagged as disturbed, and runs left out of
    /// every figure (`--drop-disturbed`); both count all runs.
    #[serde(default)]
    pub disturbed_runs: usize,
    #[serde(default)]
    pub excluded_runs: usize,
    /// This configuration against each other one of its workload, paired
    /// by round (filled by [`compare_workloads`](crate::lab::report::compare_workloads)).
    #[serde(default)]
    pub vs: Vec<Comparison>,
    /// Every setting the runs used, by name.
    pub settings: std::collections::BTreeMap<String, String>,
    /// The workload's loaded rows, in bytes (keys and rows, without page
    /// overhead; 0 in results from before it was recorded).
    #[serde(default)]
    pub data_bytes: u64,
    pub runs: Vec<Run>,
    /// Rounds the workload ran (every configuration once per round), and
    /// why no more were added (`None` in results from before adaptive
    /// repeats). Equal in every configuration of a workload.
    #[serde(default)]
    pub rounds: usize,
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// Instructions per transaction under Callgrind, where a study's
    /// claim asked for them (`lab::instructions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<crate::lab::instruction_counts::PerTransaction>,
}

impl ConfigResult {
    /// Fills the summary fields from the runs not excluded: the median by
    /// TPS for latencies, totals over those runs for counts,
    /// per-transaction figures over those runs. Excluded runs are only
    /// counted (`excluded_runs`).
    pub fn summarize(&mut self) {
        self.disturbed_runs = self.runs.iter().filter(|r| r.disturbed).count();
        self.excluded_runs = self.runs.iter().filter(|r| r.excluded).count();
        let runs: Vec<&Run> = self.runs.iter().filter(|r| !r.excluded).collect();
        let mut tps: Vec<f64> = runs.iter().map(|r| r.tps).collect();
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
        if let Some(m) = runs.iter().find(|r| r.tps == median) {
            self.latency_ms = m.latency_ms;
        }
        let txns: u64 = runs.iter().map(|r| r.transactions).sum::<u64>().max(1);
        let sum = |f: fn(&Run) -> u64| runs.iter().map(|r| f(r)).sum::<u64>();
        self.wal_bytes_per_txn = sum(|r| r.wal_bytes) as f64 / txns as f64;
        self.wal_fpi = sum(|r| r.wal_fpi);
        self.fpi_bytes_per_txn = sum(|r| r.wal_fpi_bytes) as f64 / txns as f64;
        self.fpi_bytes_uncompressed_per_txn =
            sum(|r| r.wal_fpi_bytes_uncompressed) as f64 / txns as f64;
        self.dw_page_writes = sum(|r| r.dw_page_writes);
        self.dw_fsyncs = sum(|r| r.dw_fsyncs);
        let dw = runs
            .iter()
            .fold(DoubleWriteView::default(), |a, r| {
                a.plus(&r.statistics.double_write)
            })
            .with_ratios();
        self.dw_checkpoint_pages_per_fsync = dw.checkpointer.pages_per_fsync;
        self.dw_client_pages_per_fsync = dw.client.pages_per_fsync;
        self.dw_slot_syncs = dw.total().slot_syncs;
        self.data_reads = sum(|r| r.data_reads);
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
        self.client_write_pct_runs = runs
            .iter()
            .map(|r| {
                client_pct(
                    r.client_page_writes,
                    r.bgwriter_page_writes,
                    r.checkpointer_page_writes,
                )
            })
            .collect();
        self.io = runs
            .iter()
            .fold(PageIo::default(), |a, r| a.plus(&r.page_io()));
        self.page_reads_per_txn = self.io.page_reads() as f64 / txns as f64;
        self.page_writes_per_txn = self.io.page_writes() as f64 / txns as f64;
        self.kb_written_per_txn = self.io.bytes_written() as f64 / 1024.0 / txns as f64;
        self.wal_fsyncs_per_txn = sum(|r| r.wal_fsyncs) as f64 / txns as f64;
        let cpu: f64 = runs
            .iter()
            .map(|r| r.cpu_us_per_txn * r.transactions as f64)
            .sum();
        self.cpu_us_per_txn = cpu / txns as f64;
    }
}

impl Run {
    /// This run's I/O by destination; for a run recorded before it was
    /// counted, its data-file pages alone.
    pub fn page_io(&self) -> PageIo {
        if self.io != PageIo::default() {
            return self.io;
        }
        PageIo {
            data_writes: self.data_writes,
            data_reads: self.data_reads,
            ..PageIo::default()
        }
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

/// A figure compared between configurations beside TPS: its name in the
/// JSON and CSV, its column heading, its value in a run and in the summary.
pub struct Figure {
    pub name: &'static str,
    pub heading: &'static str,
    pub per_run: fn(&Run) -> f64,
    pub summary: fn(&ConfigResult) -> f64,
}

/// `count` per transaction of `run` (infinite without transactions, which
/// a ratio skips).
fn per_txn(count: u64, run: &Run) -> f64 {
    count as f64 / run.transactions as f64
}

/// The per-transaction figures: they vary far less than TPS on a shared
/// machine and explain it. In the order of [`Comparison::per_txn`].
pub const PER_TXN: [Figure; 6] = [
    Figure {
        name: "cpu_us_per_txn",
        heading: "CPU µs/txn",
        per_run: |r| r.cpu_us_per_txn,
        summary: |c| c.cpu_us_per_txn,
    },
    Figure {
        name: "page_reads_per_txn",
        heading: "page reads/txn",
        per_run: |r| per_txn(r.page_io().page_reads(), r),
        summary: |c| c.page_reads_per_txn,
    },
    Figure {
        name: "page_writes_per_txn",
        heading: "page writes/txn",
        per_run: |r| per_txn(r.page_io().page_writes(), r),
        summary: |c| c.page_writes_per_txn,
    },
    Figure {
        name: "kb_written_per_txn",
        heading: "KB written/txn",
        per_run: |r| per_txn(r.page_io().bytes_written(), r) / 1024.0,
        summary: |c| c.kb_written_per_txn,
    },
    Figure {
        name: "wal_bytes_per_txn",
        heading: "WAL B/txn",
        per_run: |r| per_txn(r.wal_bytes, r),
        summary: |c| c.wal_bytes_per_txn,
    },
    Figure {
        name: "wal_fsyncs_per_txn",
        heading: "WAL fsyncs/txn",
        per_run: |r| per_txn(r.wal_fsyncs, r),
        summary: |c| c.wal_fsyncs_per_txn,
    },
];

/// One configuration against another of the same workload: each figure's
/// ratio (this one over the other) paired by round, with its 95 %
/// interval; `None` with fewer than two pairs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The other configuration's mode label, and its position among its
    /// workload's results.
    pub against: String,
    pub against_index: usize,
    /// Rounds in which both configurations have a run not excluded.
    pub rounds: usize,
    pub tps: Option<RatioInterval>,
    pub cpu_us_per_txn: Option<RatioInterval>,
    pub page_reads_per_txn: Option<RatioInterval>,
    pub page_writes_per_txn: Option<RatioInterval>,
    #[serde(default)]
    pub kb_written_per_txn: Option<RatioInterval>,
    pub wal_bytes_per_txn: Option<RatioInterval>,
    pub wal_fsyncs_per_txn: Option<RatioInterval>,
}

impl Comparison {
    /// `a` against `b`, which is called `against` and is `against_index`
    /// in its workload.
    pub fn between(
        a: &ConfigResult,
        b: &ConfigResult,
        against: String,
        against_index: usize,
    ) -> Comparison {
        let [cpu, reads, writes, kb, wal, fsyncs] =
            PER_TXN.each_ref().map(|f| a.ratio_to(b, f.per_run));
        let rounds_of = |c: &ConfigResult| -> std::collections::BTreeSet<usize> {
            c.runs
                .iter()
                .filter(|r| !r.excluded)
                .map(|r| r.repeat)
                .collect()
        };
        Comparison {
            against,
            against_index,
            rounds: rounds_of(a).intersection(&rounds_of(b)).count(),
            tps: a.ratio_to(b, |r| r.tps),
            cpu_us_per_txn: cpu,
            page_reads_per_txn: reads,
            page_writes_per_txn: writes,
            kb_written_per_txn: kb,
            wal_bytes_per_txn: wal,
            wal_fsyncs_per_txn: fsyncs,
        }
    }

    /// The ratios of [`PER_TXN`]'s figures, in its order.
    pub fn per_txn(&self) -> [Option<RatioInterval>; 6] {
        [
            self.cpu_us_per_txn,
            self.page_reads_per_txn,
            self.page_writes_per_txn,
            self.kb_written_per_txn,
            self.wal_bytes_per_txn,
            self.wal_fsyncs_per_txn,
        ]
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
#[path = "result_tests.rs"]
mod tests;
