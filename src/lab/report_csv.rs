//! The CSV files of a benchmark: `summary.csv` (a row per configuration),
//! `comparisons.csv` (a row per pair of configurations and figure, with the
//! interval) and a series file per run. Quoting is the `csv` crate's.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use super::{create_dir, group_by_workload, mode_labels, slug, write_file};
use crate::error::{Error, Result};
use crate::lab::confidence::RatioInterval;
use crate::lab::result::{Comparison, ConfigResult, PER_TXN};

/// The columns of summary.csv before the settings. The last six are the
/// TPS ratio against the workload's first configuration (`vs`), with its
/// interval; empty on that first configuration's row and where fewer than
/// two rounds paired.
pub const SUMMARY_COLUMNS: [&str; 51] = [
    "workload",
    "mode",
    "protection",
    "device",
    "repeats",
    "tps",
    "tps_runs",
    "tps_spread_pct",
    "latency_ms_avg",
    "latency_ms_p90",
    "latency_ms_p99",
    "latency_ms_max",
    "cpu_us_per_txn",
    "page_writes_per_txn",
    "wal_bytes_per_txn",
    "wal_fpi",
    "fpi_bytes_per_txn",
    "fpi_bytes_uncompressed_per_txn",
    "dw_page_writes",
    "dw_fsyncs",
    "dw_checkpoint_pages_per_fsync",
    "dw_client_pages_per_fsync",
    "dw_slot_syncs",
    "data_writes",
    "data_fsyncs",
    "commits_per_wal_fsync",
    "client_page_writes",
    "bgwriter_page_writes",
    "checkpointer_page_writes",
    "client_write_pct",
    "checkpoints",
    "runs_transactions",
    "data_reads",
    "page_reads_per_txn",
    "wal_fsyncs_per_txn",
    "disturbed_runs",
    "excluded_runs",
    "kb_written_per_txn",
    "area_page_writes",
    "deferred_page_writes",
    "double_write_page_reads",
    "wal_bytes_written",
    "data_bytes_written",
    "double_write_bytes_written",
    "data_bytes",
    "vs",
    "tps_ratio",
    "tps_ratio_low",
    "tps_ratio_high",
    "tps_ratio_pairs",
    "tps_ratio_resolved",
];

/// The columns of comparisons.csv: one row per configuration, other
/// configuration of its workload and figure (`tps` and the names of
/// [`PER_TXN`]). `ratio`, `low`, `high`, `pairs` and `resolved` are empty
/// where fewer than two rounds paired; `rounds` counts the rounds both ran.
pub const COMPARISON_CSV_COLUMNS: [&str; 10] = [
    "workload", "mode", "against", "figure", "ratio", "low", "high", "pairs", "resolved", "rounds",
];

/// The columns of each series CSV.
pub const SERIES_COLUMNS: [&str; 8] = [
    "second",
    "tps",
    "latency_ms_avg",
    "latency_ms_p99",
    "wal_bytes",
    "data_writes",
    "checkpoint_started",
    "checkpoint_ended",
];

/// Rows written into memory, then into a file.
struct Sheet {
    w: csv::Writer<Vec<u8>>,
}

impl Sheet {
    fn new(header: &[String]) -> Result<Sheet> {
        let mut s = Sheet {
            w: csv::Writer::from_writer(Vec::new()),
        };
        s.row(header)?;
        Ok(s)
    }

    fn row<S: AsRef<[u8]>>(&mut self, fields: impl IntoIterator<Item = S>) -> Result<()> {
        self.w
            .write_record(fields)
            .map_err(|e| Error::Invalid(format!("cannot write a CSV row: {e}")))
    }

    fn bytes(self) -> Result<Vec<u8>> {
        self.w
            .into_inner()
            .map_err(|e| Error::Invalid(format!("cannot finish a CSV file: {e}")))
    }
}

/// `ratio, low, high, pairs, resolved` of an interval, empty without one.
fn interval_fields(i: Option<RatioInterval>) -> [String; 5] {
    match i {
        Some(i) => [
            i.ratio.to_string(),
            i.low.to_string(),
            i.high.to_string(),
            i.pairs.to_string(),
            i.resolved().to_string(),
        ],
        None => Default::default(),
    }
}

/// Writes `dir/summary.csv` (one row per configuration: the figures of
/// [`SUMMARY_COLUMNS`], then one `setting_<name>` column per setting any
/// configuration has), `dir/comparisons.csv` (the columns of
/// [`COMPARISON_CSV_COLUMNS`]) and one `series_<workload>_<mode>_r<repeat>.csv`
/// per run (the columns of [`SERIES_COLUMNS`], checkpoint flags as 0/1).
/// Returns the paths written: summary, comparisons, then the series.
pub fn write_csv(dir: impl AsRef<Path>, results: &[ConfigResult]) -> Result<Vec<PathBuf>> {
    let dir = dir.as_ref();
    create_dir(dir)?;
    let setting_keys: BTreeSet<&str> = results
        .iter()
        .flat_map(|r| r.settings.keys().map(String::as_str))
        .collect();
    let mut header: Vec<String> = SUMMARY_COLUMNS.map(String::from).to_vec();
    header.extend(setting_keys.iter().map(|k| format!("setting_{k}")));
    let mut summary = Sheet::new(&header)?;
    let mut comparisons = Sheet::new(&COMPARISON_CSV_COLUMNS.map(String::from))?;

    let mut series_files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    let mut names = HashSet::new();
    for (w, group) in group_by_workload(results) {
        let labels = mode_labels(&group);
        for (i, (r, label)) in group.iter().zip(&labels).enumerate() {
            let join = |v: Vec<String>| v.join(";");
            let vs_first = (i > 0).then(|| Comparison::between(r, group[0], labels[0].clone(), 0));
            let mut row = vec![
                r.workload.clone(),
                label.clone(),
                r.protection.clone(),
                r.device.clone(),
                r.runs.len().to_string(),
                r.tps.to_string(),
                join(r.tps_runs.iter().map(f64::to_string).collect()),
                r.tps_spread_pct.to_string(),
                r.latency_ms.avg.to_string(),
                r.latency_ms.p90.to_string(),
                r.latency_ms.p99.to_string(),
                r.latency_ms.max.to_string(),
                r.cpu_us_per_txn.to_string(),
                r.page_writes_per_txn.to_string(),
                r.wal_bytes_per_txn.to_string(),
                r.wal_fpi.to_string(),
                r.fpi_bytes_per_txn.to_string(),
                r.fpi_bytes_uncompressed_per_txn.to_string(),
                r.dw_page_writes.to_string(),
                r.dw_fsyncs.to_string(),
                r.dw_checkpoint_pages_per_fsync.to_string(),
                r.dw_client_pages_per_fsync.to_string(),
                r.dw_slot_syncs.to_string(),
                r.data_writes.to_string(),
                r.data_fsyncs.to_string(),
                r.commits_per_wal_fsync.to_string(),
                r.client_page_writes.to_string(),
                r.bgwriter_page_writes.to_string(),
                r.checkpointer_page_writes.to_string(),
                r.client_write_pct.to_string(),
                r.checkpoints.to_string(),
                join(r.runs.iter().map(|x| x.transactions.to_string()).collect()),
                r.data_reads.to_string(),
                r.page_reads_per_txn.to_string(),
                r.wal_fsyncs_per_txn.to_string(),
                r.disturbed_runs.to_string(),
                r.excluded_runs.to_string(),
                r.kb_written_per_txn.to_string(),
                r.io.area_writes.to_string(),
                r.io.deferred_writes.to_string(),
                r.io.double_write_reads.to_string(),
                r.io.wal_bytes_written.to_string(),
                r.io.data_bytes_written.to_string(),
                r.io.double_write_bytes_written.to_string(),
                r.data_bytes.to_string(),
                vs_first
                    .as_ref()
                    .map_or(String::new(), |c| c.against.clone()),
            ];
            row.extend(interval_fields(vs_first.and_then(|c| c.tps)));
            row.extend(
                setting_keys
                    .iter()
                    .map(|k| r.settings.get(*k).cloned().unwrap_or_default()),
            );
            summary.row(&row)?;

            for (j, other) in group.iter().enumerate().filter(|(j, _)| *j != i) {
                let c = Comparison::between(r, other, labels[j].clone(), j);
                let figures = std::iter::once(("tps", c.tps))
                    .chain(PER_TXN.iter().map(|f| f.name).zip(c.per_txn()));
                for (figure, interval) in figures {
                    let mut row = vec![
                        w.to_string(),
                        label.clone(),
                        c.against.clone(),
                        figure.to_string(),
                    ];
                    row.extend(interval_fields(interval));
                    row.push(c.rounds.to_string());
                    comparisons.row(&row)?;
                }
            }

            for run in &r.runs {
                let base = format!("series_{}_{}_r{}", slug(w), slug(label), run.repeat);
                let mut name = format!("{base}.csv");
                let mut n = 1;
                while !names.insert(name.clone()) {
                    n += 1;
                    name = format!("{base}_{n}.csv");
                }
                let mut sheet = Sheet::new(&SERIES_COLUMNS.map(String::from))?;
                for s in &run.series {
                    sheet.row([
                        s.second.to_string(),
                        s.tps.to_string(),
                        s.latency_ms_avg.to_string(),
                        s.latency_ms_p99.to_string(),
                        s.wal_bytes.to_string(),
                        s.data_writes.to_string(),
                        u8::from(s.checkpoint_started).to_string(),
                        u8::from(s.checkpoint_ended).to_string(),
                    ])?;
                }
                series_files.push((dir.join(name), sheet.bytes()?));
            }
        }
    }
    let mut paths = Vec::new();
    for (name, sheet) in [("summary.csv", summary), ("comparisons.csv", comparisons)] {
        let path = dir.join(name);
        write_file(&path, &sheet.bytes()?)?;
        paths.push(path);
    }
    for (path, bytes) in series_files {
        write_file(&path, &bytes)?;
        paths.push(path);
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_with_commas_and_quotes_are_quoted() {
        let dir = tempfile::tempdir().unwrap();
        let r = ConfigResult {
            workload: "w,\"x\"".into(),
            protection: "off".into(),
            ..Default::default()
        };
        let paths = write_csv(dir.path(), &[r]).unwrap();
        let text = std::fs::read_to_string(&paths[0]).unwrap();
        let row = text.lines().nth(1).unwrap();
        assert!(row.starts_with("\"w,\"\"x\"\"\",off,off,"), "{row}");
        let mut rd = csv::Reader::from_path(&paths[0]).unwrap();
        let rec = rd.records().next().unwrap().unwrap();
        assert_eq!(&rec[0], "w,\"x\"");
        assert_eq!(rec.len(), SUMMARY_COLUMNS.len());
    }
}
