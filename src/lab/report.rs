//! What a benchmark shows a person: the comparison tables in the seeds'
//! shape (`Mode  TPS  vs FPW  vs OFF`, seed 003) with the figures behind
//! them, the per-second behaviour over checkpoint cycles that averages hide
//! (seed 004), the JSON and CSV files, and an HTML report with plots.
//!
//! Within a workload, a configuration's "mode" is its `protection` plus
//! every setting whose value differs between the configurations of that
//! workload (`full_pages wal_block_size=16384`), so comparisons of other
//! knobs read as well as comparisons of protection modes.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use comfy_table::{presets, CellAlignment, Table};

use crate::error::{Error, Result};
use crate::lab::confidence::RatioInterval;
pub use crate::lab::plot::{checkpoint_running, phase_stats, PhaseStats};
use crate::lab::result::{Comparison, ConfigResult, PER_TXN};

#[path = "report_csv.rs"]
mod csv_files;
#[path = "report_html.rs"]
mod html;
#[path = "report_settings.rs"]
mod settings_list;
#[path = "report_words.rs"]
mod words;

pub use csv_files::{write_csv, COMPARISON_CSV_COLUMNS, SERIES_COLUMNS, SUMMARY_COLUMNS};
pub use html::{esc, ratio_chart, ChartRow, STYLE};
pub use words::{change_words, per_txn_words, tps_words, verdicts, Verdict};

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
/// between them and that its mode uses, settings in name order
/// (`+lz4` for a WAL compression, nothing for none).
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
            for k in differing.iter().filter(|k| settings_list::used_by(r, k)) {
                let v = r.settings.get(*k).map_or("-", String::as_str);
                // As seed 003 names them: full_pages, full_pages+lz4.
                match (*k, v) {
                    ("wal_compression", "off") => {}
                    ("wal_compression", v) => label.push_str(&format!("+{v}")),
                    _ => {
                        let _ = write!(label, " {k}={v}");
                    }
                }
            }
            if device_differs {
                let _ = write!(label, " device={}", r.device);
            }
            label
        })
        .collect()
}

/// Fills every result's `vs`: within each workload, the result against
/// every other one, labelled by [`mode_labels`](mode_labels).
pub fn compare_workloads(results: &mut [ConfigResult]) {
    let mut filled: Vec<(usize, Vec<Comparison>)> = Vec::new();
    for (_, group) in group_by_workload(results) {
        let labels = mode_labels(&group);
        for (i, a) in group.iter().enumerate() {
            let vs = group
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(j, b)| Comparison::between(a, b, labels[j].clone(), j))
                .collect();
            let at = results.iter().position(|r| std::ptr::eq(r, *a));
            filled.push((at.expect("a group holds references into results"), vs));
        }
    }
    for (at, vs) in filled {
        results[at].vs = vs;
    }
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

    /// The legend lines the cells need: see [`ratio_cell`].
    fn legend(&self) -> Vec<&'static str> {
        let cells = || self.rows.iter().flatten();
        let mut lines = Vec::new();
        if cells().any(|c| c.ends_with(" ~")) {
            lines.push(NOT_RESOLVED_LEGEND);
        }
        if cells().any(|c| c.ends_with(" round)") || c.ends_with(" rounds)")) {
            lines.push(FEW_ROUNDS_LEGEND);
        }
        lines
    }
}

/// `1234567.8` → `1,234,568`.
pub fn thousands(v: f64) -> String {
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
pub fn fmt_num(v: f64) -> String {
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
pub fn fmt_tps(v: f64) -> String {
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

/// The legend line of a table with a ratio whose interval contains 1,
/// which its cell marks with a trailing ` ~`.
pub const NOT_RESOLVED_LEGEND: &str = "~ not resolved: the 95 % interval contains 1";

/// The legend line of a table with a ratio from fewer than two rounds.
const FEW_ROUNDS_LEGEND: &str =
    "(n rounds): fewer than two rounds paired, so the plain ratio and no interval";

/// A ratio cell: `0.93x [0.89, 0.97]`; `1.02x [0.97, 1.07] ~` when the
/// interval contains 1; without an interval (fewer than two rounds paired)
/// the plain ratio `value / reference` and the rounds, `1.05x (1 round)`;
/// `-` where rounds paired but the figure was zero (no ratio exists).
pub fn ratio_cell(
    interval: Option<RatioInterval>,
    rounds: usize,
    value: f64,
    reference: f64,
) -> String {
    match interval {
        Some(i) if i.resolved() => i.text(),
        Some(i) => format!("{} ~", i.text()),
        None if rounds >= 2 => "-".to_string(),
        None => {
            let plain = value / reference;
            let plain = if plain.is_finite() && reference > 0.0 {
                format!("{plain:.2}x")
            } else {
                "-".to_string()
            };
            let s = if rounds == 1 { "" } else { "s" };
            format!("{plain} ({rounds} round{s})")
        }
    }
}

/// Row `i` against row `j` of a workload's group.
fn compare(group: &[&ConfigResult], labels: &[String], i: usize, j: usize) -> Comparison {
    Comparison::between(group[i], group[j], labels[j].clone(), j)
}

/// The `vs <first>` and `vs <last>` cells of row `i`: TPS ratios paired
/// by round.
fn vs_cells(group: &[&ConfigResult], labels: &[String], i: usize) -> Vec<String> {
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
                let c = compare(group, labels, i, j);
                ratio_cell(c.tps, c.rounds, group[i].tps, group[j].tps)
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

/// The headline's columns after `Mode | TPS | vs ...`: what a mode costs
/// per transaction, every destination counted (see [`headline_table`]).
const HEADLINE_COLUMNS: [Column; 4] = [
    ("CPU µs/txn", |r| fmt_num(r.cpu_us_per_txn)),
    ("WAL B/txn", |r| thousands(r.wal_bytes_per_txn)),
    ("page writes/txn", |r| fmt_num(r.page_writes_per_txn)),
    ("KB written/txn", |r| fmt_num(r.kb_written_per_txn)),
];

/// `count` per transaction of the runs `r`'s figures count.
fn per_txn_of(r: &ConfigResult, count: u64) -> f64 {
    let txns: u64 = r
        .runs
        .iter()
        .filter(|run| !run.excluded)
        .map(|run| run.transactions)
        .sum();
    count as f64 / txns.max(1) as f64
}

/// The details' columns (see [`detail_table`]), in two tables; a column
/// that is zero in every row of a workload is left out of the printed
/// table (the CSV and the JSON keep it).
const LATENCY_COLUMNS: [Column; 9] = [
    ("lat avg ms", |r| fmt_num(r.latency_ms.avg)),
    ("p90 ms", |r| fmt_num(r.latency_ms.p90)),
    ("p99 ms", |r| fmt_num(r.latency_ms.p99)),
    ("max ms", |r| fmt_num(r.latency_ms.max)),
    ("FPI B/txn", |r| thousands(r.fpi_bytes_per_txn)),
    ("FPI raw B/txn", |r| {
        thousands(r.fpi_bytes_uncompressed_per_txn)
    }),
    ("commits/WAL fsync", |r| fmt_num(r.commits_per_wal_fsync)),
    ("checkpoints", |r| thousands(r.checkpoints as f64)),
    ("spread %", spread),
];

/// I/O per transaction by destination: see [`LATENCY_COLUMNS`].
const IO_COLUMNS: [Column; 13] = [
    ("data pages/txn", |r| {
        fmt_num(per_txn_of(r, r.io.data_writes))
    }),
    ("area pages/txn", |r| {
        fmt_num(per_txn_of(r, r.io.area_writes))
    }),
    ("deferred pages/txn", |r| {
        fmt_num(per_txn_of(r, r.io.deferred_writes))
    }),
    ("data reads/txn", |r| {
        fmt_num(per_txn_of(r, r.io.data_reads))
    }),
    ("DW reads/txn", |r| {
        fmt_num(per_txn_of(r, r.io.double_write_reads))
    }),
    ("WAL KB/txn", |r| {
        fmt_num(per_txn_of(r, r.io.wal_bytes_written) / 1024.0)
    }),
    ("data KB/txn", |r| {
        fmt_num(per_txn_of(r, r.io.data_bytes_written) / 1024.0)
    }),
    ("DW KB/txn", |r| {
        fmt_num(per_txn_of(r, r.io.double_write_bytes_written) / 1024.0)
    }),
    ("DW fsyncs", |r| thousands(r.dw_fsyncs as f64)),
    ("ckpt DW pages/fsync", |r| {
        fmt_num(r.dw_checkpoint_pages_per_fsync)
    }),
    ("client DW pages/fsync", |r| {
        fmt_num(r.dw_client_pages_per_fsync)
    }),
    ("data fsyncs", |r| thousands(r.data_fsyncs as f64)),
    ("client writes %", |r| format!("{:.1}", r.client_write_pct)),
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
            row.extend(vs_cells(group, labels, i));
            row.extend(columns.iter().map(|(_, cell)| cell(r)));
            row
        })
        .collect();
    Grid { headers, rows }
}

fn headline_grid(group: &[&ConfigResult], labels: &[String]) -> Grid {
    tps_grid(group, labels, &HEADLINE_COLUMNS)
}

/// `Mode` and `columns`, without those that are zero in every row.
fn plain_grid(group: &[&ConfigResult], labels: &[String], columns: &[Column]) -> Grid {
    let zero = |cell: &str| {
        cell.trim_end_matches('%')
            .parse::<f64>()
            .is_ok_and(|v| v == 0.0)
    };
    let columns: Vec<&Column> = columns
        .iter()
        .filter(|(_, cell)| !group.iter().all(|r| zero(&cell(r))))
        .collect();
    let mut headers = vec!["Mode".to_string()];
    headers.extend(columns.iter().map(|(header, _)| header.to_string()));
    let rows = group
        .iter()
        .zip(labels)
        .map(|(r, label)| {
            let mut row = vec![label.clone()];
            row.extend(columns.iter().map(|(_, cell)| cell(r)));
            row
        })
        .collect();
    Grid { headers, rows }
}

fn latency_grid(group: &[&ConfigResult], labels: &[String]) -> Grid {
    plain_grid(group, labels, &LATENCY_COLUMNS)
}

fn io_grid(group: &[&ConfigResult], labels: &[String]) -> Grid {
    plain_grid(group, labels, &IO_COLUMNS)
}

fn compact_grid(group: &[&ConfigResult], labels: &[String]) -> Grid {
    tps_grid(group, labels, &COMPACT_COLUMNS)
}

/// The figures of [`PER_TXN`], each followed by its ratio to the first
/// configuration paired by round: what TPS is made of, and far steadier
/// than TPS on a shared machine.
fn per_txn_grid(group: &[&ConfigResult], labels: &[String]) -> Grid {
    let mut headers = vec!["Mode".to_string()];
    for f in &PER_TXN {
        headers.push(f.heading.to_string());
        headers.push(format!("vs {}", labels[0]));
    }
    let rows = group
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let c = (i > 0).then(|| compare(group, labels, i, 0));
            let mut row = vec![labels[i].clone()];
            for (k, f) in PER_TXN.iter().enumerate() {
                let value = (f.summary)(r);
                row.push(fmt_num(value));
                row.push(match &c {
                    Some(c) => ratio_cell(c.per_txn()[k], c.rounds, value, (f.summary)(group[0])),
                    None => "-".to_string(),
                });
            }
            row
        })
        .collect();
    Grid { headers, rows }
}

/// `oltp_write_only (device real, 3 repeats; runs disturbed: 1, excluded: 0)`.
fn workload_heading(workload: &str, group: &[&ConfigResult]) -> String {
    let mut devices: Vec<&str> = group.iter().map(|r| r.device.as_str()).collect();
    devices.dedup();
    let repeats = group.iter().map(|r| r.runs.len()).max().unwrap_or(0);
    let s = if repeats == 1 { "" } else { "s" };
    let runs = group.iter().flat_map(|r| &r.runs);
    let disturbed = runs.clone().filter(|r| r.disturbed).count();
    let excluded = runs.filter(|r| r.excluded).count();
    format!(
        "{workload} (device {}, {repeats} repeat{s}; runs disturbed: {disturbed}, \
         excluded: {excluded})",
        devices.join("/")
    )
}

/// The tables of one workload, each with the caption to print above it.
type Tables = Vec<(Option<String>, Grid)>;

fn per_workload(
    results: &[ConfigResult],
    tables: fn(&[&ConfigResult], &[String]) -> Tables,
) -> String {
    let mut out = String::new();
    for (n, (w, group)) in group_by_workload(results).iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let labels = mode_labels(group);
        let _ = writeln!(out, "{}. {}", n + 1, workload_heading(w, group));
        for (caption, grid) in tables(group, &labels) {
            if let Some(c) = caption {
                let _ = writeln!(out, "\n{c}");
            }
            let _ = writeln!(out, "{}", grid.text());
            for line in grid.legend() {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    out
}

/// The caption of [`per_txn_grid`].
fn per_txn_caption(labels: &[String]) -> String {
    format!("Per transaction, vs {} (paired by round):", labels[0])
}

/// Per workload, the seed's table `Mode | TPS | vs <first> | vs <last>`
/// (ratios with their 95 % interval, paired by round) with what a mode
/// costs per transaction: CPU µs, WAL bytes, pages written (to the data
/// files, the double-write area and `dw/deferred`) and kilobytes written
/// (to every file). Markdown-shaped, so it can be pasted into docs as it
/// is.
pub fn headline_table(results: &[ConfigResult]) -> String {
    per_workload(results, |group, labels| {
        vec![(None, headline_grid(group, labels))]
    })
}

/// Per workload, the figures behind the headline: latency avg/p90/p99/max
/// (ms), full-page image bytes, pages written by destination and read by
/// source, kilobytes written by kind of file, fsyncs, commits per WAL
/// fsync, the clients' share of page writes, checkpoints and the spread
/// between repeats (columns zero in every row left out); then a table of
/// the per-transaction figures with their ratios to the first
/// configuration.
pub fn detail_table(results: &[ConfigResult]) -> String {
    per_workload(results, |group, labels| {
        vec![
            (None, latency_grid(group, labels)),
            (None, io_grid(group, labels)),
            (Some(per_txn_caption(labels)), per_txn_grid(group, labels)),
        ]
    })
}

/// [`headline_table`] and [`detail_table`] in one, a workload at a time.
pub fn comparison_table(results: &[ConfigResult]) -> String {
    per_workload(results, |group, labels| {
        vec![
            (None, headline_grid(group, labels)),
            (Some("Details:".to_string()), latency_grid(group, labels)),
            (None, io_grid(group, labels)),
            (Some(per_txn_caption(labels)), per_txn_grid(group, labels)),
        ]
    })
}

/// The seed's columns plus p99 latency, WAL bytes per transaction and the
/// spread between repeats: for narrow terminals.
pub fn comparison_table_compact(results: &[ConfigResult]) -> String {
    per_workload(results, |group, labels| {
        vec![(None, compact_grid(group, labels))]
    })
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
    per_workload(results, |group, labels| {
        vec![(None, phase_grid(group, labels))]
    })
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
