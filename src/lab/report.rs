//! What a benchmark shows a person: the comparison tables in the seeds'
//! shape (`Mode  TPS  vs FPW  vs OFF`, seed 003) with the figures behind
//! them, the per-second behaviour over checkpoint cycles that averages hide
//! (seed 004), the JSON and CSV files, and an HTML report with plots.
//!
//! Within a workload, a configuration's "mode" is its `protection` plus
//! every setting whose value differs between the configurations of that
//! workload (`full_pages wal_block_size=16384`), so comparisons of other
//! knobs read as well as comparisons of protection modes.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use comfy_table::{presets, CellAlignment, Table};

use crate::error::{Error, Result};
pub use crate::lab::plot::{checkpoint_running, phase_stats, PhaseStats};
use crate::lab::result::ConfigResult;

#[path = "report_html.rs"]
mod html;

/// Settings never added to a mode label: the label already names them.
const NOT_IN_LABEL: [&str; 3] = ["protection", "torn_page_protection", "workload"];

/// The results grouped by workload, workloads in order of first appearance,
/// results in the order given.
pub fn group_by_workload(results: &[ConfigResult]) -> Vec<(&str, Vec<&ConfigResult>)> {
    let mut groups: Vec<(&str, Vec<&ConfigResult>)> = Vec::new();
    for r in results {
        match groups.iter_mut().find(|(w, _)| *w == r.workload) {
            Some((_, g)) => g.push(r),
            None => groups.push((&r.workload, vec![r])),
        }
    }
    groups
}

/// The mode label of each configuration of one workload: `protection`
/// plus `name=value` for every setting (and the device) that differs
/// between them, settings in name order.
pub fn mode_labels(group: &[&ConfigResult]) -> Vec<String> {
    let Some(first) = group.first() else {
        return Vec::new();
    };
    let keys: BTreeSet<&str> = group
        .iter()
        .flat_map(|r| r.settings.keys().map(String::as_str))
        .collect();
    let differing: Vec<&str> = keys
        .into_iter()
        .filter(|k| !NOT_IN_LABEL.contains(k))
        .filter(|k| {
            group
                .iter()
                .any(|r| r.settings.get(*k) != first.settings.get(*k))
        })
        .collect();
    let device_differs = group.iter().any(|r| r.device != first.device);
    group
        .iter()
        .map(|r| {
            let mut label = if r.protection.is_empty() {
                "-".to_string()
            } else {
                r.protection.clone()
            };
            for k in &differing {
                let v = r.settings.get(*k).map_or("-", String::as_str);
                let _ = write!(label, " {k}={v}");
            }
            if device_differs {
                let _ = write!(label, " device={}", r.device);
            }
            label
        })
        .collect()
}

/// A table before rendering: the first column is text, the others numbers.
struct Grid {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    fn text(&self) -> String {
        let mut t = Table::new();
        t.load_preset(presets::ASCII_MARKDOWN);
        t.set_header(&self.headers);
        for row in &self.rows {
            t.add_row(row);
        }
        for i in 1..self.headers.len() {
            if let Some(c) = t.column_mut(i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
        t.to_string()
    }
}

/// `1234567.8` → `1,234,568`.
fn thousands(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

/// A figure with the precision its size deserves: `1,234`, `12.35`,
/// `0.0726`.
fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        thousands(v)
    } else if a >= 1.0 || a == 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// TPS as the seed prints it (`13,772`), with a decimal below 100.
fn fmt_tps(v: f64) -> String {
    if v.abs() < 100.0 {
        format!("{v:.1}")
    } else {
        thousands(v)
    }
}

/// The seed's percent change: `+50.0%`, `-64.3%`.
fn pct_change(value: f64, reference: f64) -> String {
    if reference > 0.0 {
        format!("{:+.1}%", (value / reference - 1.0) * 100.0)
    } else {
        "n/a".to_string()
    }
}

/// The `vs <first>` and `vs <last>` cells of row `i`.
fn vs_cells(group: &[&ConfigResult], i: usize) -> Vec<String> {
    let last = group.len() - 1;
    let mut refs = vec![0];
    if last > 0 {
        refs.push(last);
    }
    refs.into_iter()
        .map(|j| {
            if i == j {
                "-".to_string()
            } else {
                pct_change(group[i].tps, group[j].tps)
            }
        })
        .collect()
}

fn vs_headers(labels: &[String]) -> Vec<String> {
    let mut h = vec![format!("vs {}", labels[0])];
    if labels.len() > 1 {
        h.push(format!("vs {}", labels[labels.len() - 1]));
    }
    h
}

/// A column after `Mode | TPS | vs ...`: its header, and its cell for a
/// result.
type Column = (&'static str, fn(&ConfigResult) -> String);

/// The full comparison's columns: see [`comparison_table`].
const COMPARISON_COLUMNS: [Column; 18] = [
    ("lat avg ms", |r| fmt_num(r.latency_ms.avg)),
    ("p90 ms", |r| fmt_num(r.latency_ms.p90)),
    ("p99 ms", |r| fmt_num(r.latency_ms.p99)),
    ("max ms", |r| fmt_num(r.latency_ms.max)),
    ("CPU µs/txn", |r| fmt_num(r.cpu_us_per_txn)),
    ("page writes/txn", |r| fmt_num(r.page_writes_per_txn)),
    ("WAL B/txn", |r| thousands(r.wal_bytes_per_txn)),
    ("FPI", |r| thousands(r.wal_fpi as f64)),
    ("FPI B/txn", |r| thousands(r.fpi_bytes_per_txn)),
    ("FPI raw B/txn", |r| {
        thousands(r.fpi_bytes_uncompressed_per_txn)
    }),
    ("DW page writes", |r| thousands(r.dw_page_writes as f64)),
    ("DW fsyncs", |r| thousands(r.dw_fsyncs as f64)),
    ("data writes", |r| thousands(r.data_writes as f64)),
    ("data fsyncs", |r| thousands(r.data_fsyncs as f64)),
    ("commits/WAL fsync", |r| fmt_num(r.commits_per_wal_fsync)),
    ("client writes %", |r| format!("{:.1}", r.client_write_pct)),
    ("checkpoints", |r| thousands(r.checkpoints as f64)),
    ("spread %", spread),
];

/// The compact comparison's columns: see [`comparison_table_compact`].
const COMPACT_COLUMNS: [Column; 3] = [
    ("p99 ms", |r| fmt_num(r.latency_ms.p99)),
    ("WAL B/txn", |r| thousands(r.wal_bytes_per_txn)),
    ("spread", spread),
];

/// The spread between repeats: `4.2%`.
fn spread(r: &ConfigResult) -> String {
    format!("{:.1}%", r.tps_spread_pct)
}

/// `Mode | TPS | vs <first> | vs <last>`, then `columns`, a row per
/// configuration of one workload.
fn tps_grid(group: &[&ConfigResult], labels: &[String], columns: &[Column]) -> Grid {
    let mut headers = vec!["Mode".to_string(), "TPS".to_string()];
    headers.extend(vs_headers(labels));
    headers.extend(columns.iter().map(|(header, _)| header.to_string()));
    let rows = group
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut row = vec![labels[i].clone(), fmt_tps(r.tps)];
            row.extend(vs_cells(group, i));
            row.extend(columns.iter().map(|(_, cell)| cell(r)));
            row
        })
        .collect();
    Grid { headers, rows }
}

fn comparison_grid(group: &[&ConfigResult], labels: &[String]) -> Grid {
    tps_grid(group, labels, &COMPARISON_COLUMNS)
}

fn compact_grid(group: &[&ConfigResult], labels: &[String]) -> Grid {
    tps_grid(group, labels, &COMPACT_COLUMNS)
}

/// `oltp_write_only (device real, 3 repeats)`.
fn workload_heading(workload: &str, group: &[&ConfigResult]) -> String {
    let mut devices: Vec<&str> = group.iter().map(|r| r.device.as_str()).collect();
    devices.dedup();
    let repeats = group.iter().map(|r| r.runs.len()).max().unwrap_or(0);
    let s = if repeats == 1 { "" } else { "s" };
    format!(
        "{workload} (device {}, {repeats} repeat{s})",
        devices.join("/")
    )
}

fn per_workload(results: &[ConfigResult], grid: fn(&[&ConfigResult], &[String]) -> Grid) -> String {
    let mut out = String::new();
    for (n, (w, group)) in group_by_workload(results).iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let labels = mode_labels(group);
        let _ = writeln!(out, "{}. {}", n + 1, workload_heading(w, group));
        let _ = writeln!(out, "{}", grid(group, &labels).text());
    }
    out
}

/// Per workload, the seed's table `Mode | TPS | vs <first> | vs <last>`
/// followed by latency avg/p90/p99/max (ms), CPU µs per transaction, page
/// writes per transaction, WAL bytes per transaction, full-page images,
/// double-write page writes and fsyncs, data-file writes and fsyncs,
/// checkpoints and the spread between repeats. Markdown-shaped, so it can
/// be pasted into docs as it is.
pub fn comparison_table(results: &[ConfigResult]) -> String {
    per_workload(results, comparison_grid)
}

/// The seed's columns plus p99 latency, WAL bytes per transaction and the
/// spread between repeats: for narrow terminals.
pub fn comparison_table_compact(results: &[ConfigResult]) -> String {
    per_workload(results, compact_grid)
}

fn phase_grid(group: &[&ConfigResult], labels: &[String]) -> Grid {
    let headers = [
        "Mode",
        "seconds",
        "TPS/s min",
        "TPS/s median",
        "TPS/s max",
        "TPS in checkpoint",
        "TPS between",
        "in vs between",
        "worst p99/s ms",
        "checkpoints started",
    ]
    .map(String::from)
    .to_vec();
    let opt = |v: Option<f64>| v.map_or("-".to_string(), fmt_tps);
    let rows = group
        .iter()
        .zip(labels)
        .map(|(r, label)| {
            let p = phase_stats(r);
            let ratio = match (p.tps_in_checkpoint, p.tps_between) {
                (Some(i), Some(b)) => pct_change(i, b),
                _ => "-".to_string(),
            };
            vec![
                label.clone(),
                p.seconds.to_string(),
                fmt_tps(p.tps_min),
                fmt_tps(p.tps_median),
                fmt_tps(p.tps_max),
                opt(p.tps_in_checkpoint),
                opt(p.tps_between),
                ratio,
                fmt_num(p.p99_worst_ms),
                p.checkpoints_started.to_string(),
            ]
        })
        .collect();
    Grid { headers, rows }
}

/// Per workload, the checkpoint cycle seen per second ([`PhaseStats`]):
/// what the averages of [`comparison_table`] hide.
pub fn phase_table(results: &[ConfigResult]) -> String {
    per_workload(results, phase_grid)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| Error::io(path, "write", e))
}

fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "create directory", e))
}

/// Writes `results` as a pretty-printed JSON array of [`ConfigResult`].
pub fn write_json(path: impl AsRef<Path>, results: &[ConfigResult]) -> Result<()> {
    let path = path.as_ref();
    let mut json = serde_json::to_string_pretty(results)
        .map_err(|e| Error::Invalid(format!("cannot encode the results as JSON: {e}")))?;
    json.push('\n');
    write_file(path, json.as_bytes())
}

/// One CSV field, quoted when it must be.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv_line(out: &mut String, fields: &[String]) {
    let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
    out.push_str(&line.join(","));
    out.push('\n');
}

/// A file-name-safe form of `s`.
fn slug(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' | '.' => c,
            '=' => '-',
            _ => '_',
        })
        .collect();
    if out.is_empty() {
        "_".to_string()
    } else {
        out
    }
}

/// The columns of summary.csv before the settings.
pub const SUMMARY_COLUMNS: [&str; 29] = [
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
    "data_writes",
    "data_fsyncs",
    "commits_per_wal_fsync",
    "client_page_writes",
    "bgwriter_page_writes",
    "checkpointer_page_writes",
    "client_write_pct",
    "checkpoints",
    "runs_transactions",
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

/// Writes `dir/summary.csv` (one row per configuration: the figures of
/// [`SUMMARY_COLUMNS`], then one `setting_<name>` column per setting any
/// configuration has) and one `series_<workload>_<mode>_r<repeat>.csv` per
/// run (the columns of [`SERIES_COLUMNS`], checkpoint flags as 0/1).
/// Returns the paths written, summary first.
pub fn write_csv(dir: impl AsRef<Path>, results: &[ConfigResult]) -> Result<Vec<PathBuf>> {
    let dir = dir.as_ref();
    create_dir(dir)?;
    let setting_keys: BTreeSet<&str> = results
        .iter()
        .flat_map(|r| r.settings.keys().map(String::as_str))
        .collect();
    let mut summary = String::new();
    let mut header: Vec<String> = SUMMARY_COLUMNS.map(String::from).to_vec();
    header.extend(setting_keys.iter().map(|k| format!("setting_{k}")));
    csv_line(&mut summary, &header);

    let mut series_files: Vec<(PathBuf, String)> = Vec::new();
    let mut names = HashSet::new();
    for (w, group) in group_by_workload(results) {
        for (r, label) in group.iter().zip(mode_labels(&group)) {
            let join = |v: Vec<String>| v.join(";");
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
                r.data_writes.to_string(),
                r.data_fsyncs.to_string(),
                r.commits_per_wal_fsync.to_string(),
                r.client_page_writes.to_string(),
                r.bgwriter_page_writes.to_string(),
                r.checkpointer_page_writes.to_string(),
                r.client_write_pct.to_string(),
                r.checkpoints.to_string(),
                join(r.runs.iter().map(|x| x.transactions.to_string()).collect()),
            ];
            row.extend(
                setting_keys
                    .iter()
                    .map(|k| r.settings.get(*k).cloned().unwrap_or_default()),
            );
            csv_line(&mut summary, &row);

            for run in &r.runs {
                let base = format!("series_{}_{}_r{}", slug(w), slug(&label), run.repeat);
                let mut name = format!("{base}.csv");
                let mut n = 1;
                while !names.insert(name.clone()) {
                    n += 1;
                    name = format!("{base}_{n}.csv");
                }
                let mut text = String::new();
                csv_line(&mut text, &SERIES_COLUMNS.map(String::from));
                for s in &run.series {
                    csv_line(
                        &mut text,
                        &[
                            s.second.to_string(),
                            s.tps.to_string(),
                            s.latency_ms_avg.to_string(),
                            s.latency_ms_p99.to_string(),
                            s.wal_bytes.to_string(),
                            s.data_writes.to_string(),
                            u8::from(s.checkpoint_started).to_string(),
                            u8::from(s.checkpoint_ended).to_string(),
                        ],
                    );
                }
                series_files.push((dir.join(name), text));
            }
        }
    }
    let summary_path = dir.join("summary.csv");
    write_file(&summary_path, summary.as_bytes())?;
    let mut paths = vec![summary_path];
    for (path, text) in series_files {
        write_file(&path, text.as_bytes())?;
        paths.push(path);
    }
    Ok(paths)
}

/// Writes the HTML report into `dir`: per workload and metric (TPS, p99
/// latency, WAL bytes per second) a plot as SVG and PNG with one line per
/// mode and the checkpoints marked; `results.json`; the CSV files under
/// `csv/`; and `index.html` with the title, the command line, the machine,
/// the device model, the comparison and checkpoint-cycle tables, every
/// setting used and the plots. Returns the path of `index.html`.
pub fn write_report(
    dir: impl AsRef<Path>,
    results: &[ConfigResult],
    title: &str,
    command_line: &str,
    machine: &str,
) -> Result<PathBuf> {
    html::write_report(dir.as_ref(), results, title, command_line, machine)
}
