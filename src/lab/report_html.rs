//! The HTML page of the benchmark report: self-contained apart from the
//! plot files next to it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{
    create_dir, fmt_num, fmt_tps, group_by_workload, headline_grid, io_grid, latency_grid,
    mode_labels, per_txn_caption, per_txn_grid, phase_grid, slug, thousands, verdicts,
    workload_heading, write_csv, write_file, write_json, Grid, Verdict,
};
use crate::error::Result;
use crate::lab::confidence::RatioInterval;
use crate::lab::plot::{self, Metric};
use crate::lab::result::ConfigResult;

/// One workload's part of the HTML report.
struct Section<'a> {
    workload: &'a str,
    heading: String,
    labels: Vec<String>,
    headline: Grid,
    latency: Grid,
    io: Grid,
    per_txn: Grid,
    phases: Grid,
    /// Each configuration against every one before it.
    verdicts: Vec<Verdict>,
    group: Vec<&'a ConfigResult>,
    plots: Vec<plot::PlotFiles>,
    /// One folded checkpoint cycle per configuration.
    folds: Vec<plot::FoldFiles>,
}

/// The whole report: see [`super::write_report`].
pub(super) fn write_report(
    dir: &Path,
    results: &[ConfigResult],
    title: &str,
    command_line: &str,
    machine: &str,
) -> Result<PathBuf> {
    create_dir(dir)?;
    let mut sections = Vec::new();
    let mut all_verdicts = verdicts(results);
    for (n, (w, group)) in group_by_workload(results).into_iter().enumerate() {
        let labels = mode_labels(&group);
        let lines: Vec<(String, &ConfigResult)> =
            labels.iter().cloned().zip(group.iter().copied()).collect();
        let mut plots = Vec::new();
        if plot::has_series(&lines) {
            let stem = format!("{:02}_{}", n + 1, slug(w));
            for metric in Metric::ALL {
                plots.push(plot::plot_metric(dir, &stem, w, metric, &lines)?);
            }
        }
        let stem = format!("{:02}_{}", n + 1, slug(w));
        let mut folds = Vec::new();
        for (i, (label, r)) in lines.iter().enumerate() {
            let stem = format!("{stem}_{}", slug(label));
            folds.extend(plot::plot_fold(dir, &stem, w, (label, i), r)?);
        }
        sections.push(Section {
            workload: w,
            heading: format!("{}. {}", n + 1, workload_heading(w, &group)),
            headline: headline_grid(&group, &labels),
            latency: latency_grid(&group, &labels),
            io: io_grid(&group, &labels),
            per_txn: per_txn_grid(&group, &labels),
            phases: phase_grid(&group, &labels),
            verdicts: {
                let (mine, rest) = all_verdicts.drain(..).partition(|v| v.workload == w);
                all_verdicts = rest;
                mine
            },
            labels,
            group,
            plots,
            folds,
        });
    }
    write_json(dir.join("results.json"), results)?;
    write_csv(dir.join("csv"), results)?;

    let result_labels: Vec<String> = results
        .iter()
        .map(|r| {
            let group: Vec<&ConfigResult> = results
                .iter()
                .filter(|x| x.workload == r.workload)
                .collect();
            let at = group.iter().position(|x| std::ptr::eq(*x, r)).unwrap_or(0);
            mode_labels(&group).swap_remove(at)
        })
        .collect();
    let page = render(&Page {
        title,
        command_line,
        machine,
        results,
        result_labels: &result_labels,
        sections: &sections,
    });
    let index = dir.join("index.html");
    write_file(&index, page.as_bytes())?;
    Ok(index)
}

struct Page<'a> {
    pub title: &'a str,
    pub command_line: &'a str,
    pub machine: &'a str,
    pub results: &'a [ConfigResult],
    /// The mode label of each result, in the order of `results`.
    pub result_labels: &'a [String],
    pub sections: &'a [Section<'a>],
}

pub const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}\
th,td{border:1px solid #ccc;padding:3px 8px}th{background:#f0f0f0}\
td:first-child{white-space:nowrap}td.n{text-align:right;font-variant-numeric:tabular-nums}\
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap}\
.sw{display:inline-block;width:.9em;height:.9em;margin-right:.4em;vertical-align:middle}\
figure{margin:1em 0}figcaption{font-size:13px;color:#555}img{max-width:100%}\
.note{font-size:13px;color:#555}li.res{font-weight:bold}li.nores{color:#555}\
tr.dist td{background:#fff3cd}tr.excl td{color:#999;text-decoration:line-through}\
svg.ratios text{font-size:12px}";

/// `s` made safe for HTML text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A grid as an HTML table; with `swatches`, each row's first cell gets the
/// colour of its line in the plots.
fn table(out: &mut String, grid: &Grid, swatches: bool) {
    table_start(out, grid.headers.iter().map(|h| esc(h)));
    for (i, row) in grid.rows.iter().enumerate() {
        out.push_str("<tr>");
        for (j, cell) in row.iter().enumerate() {
            if j == 0 {
                out.push_str("<td>");
                if swatches {
                    let _ = write!(
                        out,
                        "<span class=\"sw\" style=\"background:{}\"></span>",
                        plot::css_color(i)
                    );
                }
                let _ = write!(out, "{}</td>", esc(cell));
            } else {
                let _ = write!(out, "<td class=\"n\">{}</td>", esc(cell));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str(TABLE_END);
    for line in grid.legend() {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(line));
    }
}

/// Opens a table: its header row of `headers`, each already HTML.
pub(super) fn table_start(out: &mut String, headers: impl IntoIterator<Item = String>) {
    out.push_str("<table><thead><tr>");
    for h in headers {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr></thead><tbody>\n");
}

/// A row of text cells.
pub(super) fn text_row<'a>(out: &mut String, cells: impl IntoIterator<Item = &'a str>) {
    out.push_str("<tr>");
    for c in cells {
        let _ = write!(out, "<td>{}</td>", esc(c));
    }
    out.push_str("</tr>\n");
}

pub(super) const TABLE_END: &str = "</tbody></table>\n";

fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn render(p: &Page) -> String {
    let mut o = String::new();
    let title = esc(p.title);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title}</title><style>{STYLE}</style></head><body>\n<h1>{title}</h1>\n"
    );
    let mut devices: Vec<&str> = p.results.iter().map(|r| r.device.as_str()).collect();
    devices.sort_unstable();
    devices.dedup();
    let device_text = if devices.is_empty() {
        "-".to_string()
    } else {
        devices.join(", ")
    };
    let mut regime_text = crate::lab::regime::regime_line(p.results).unwrap_or_default();
    if let Some(w) = crate::lab::regime::disturbed_warning(p.results) {
        regime_text = format!("{regime_text} {w}");
    }
    let _ = write!(
        o,
        "<h2>How it was run</h2>\n<p><b>Command line</b></p><pre>{}</pre>\n\
         <p><b>Machine</b></p><pre>{}</pre>\n\
         <p><b>Device model</b>: {} <span class=\"note\">(<code>real</code>: the \
         real file system, no modelled latency)</span></p>\n<p>{}</p>\n\
         <p class=\"note\">Data: <a href=\"results.json\">results.json</a>, \
         <a href=\"csv/summary.csv\">csv/summary.csv</a> and per-second series in \
         <code>csv/</code>.</p>\n",
        esc(p.command_line),
        esc(p.machine),
        esc(&device_text),
        esc(&regime_text),
    );
    if p.sections.is_empty() {
        o.push_str("<p>No results.</p>\n");
    }

    summary(&mut o, p.sections);

    o.push_str(
        "<h2>Comparison</h2>\n<p class=\"note\">TPS is the median of the \
        repeats not excluded; a <i>vs</i> cell is the ratio of this mode's figure to \
        the other's, paired by round, with its 95 % interval; latencies are those of \
        the median run; counts are totals over the repeats not excluded; spread is \
        (max - min) / median of their TPS.</p>\n",
    );
    for s in p.sections {
        let _ = writeln!(o, "<h3>{}</h3>", esc(&s.heading));
        table(&mut o, &s.headline, true);
        o.push_str("<p>Details:</p>\n");
        table(&mut o, &s.latency, true);
        table(&mut o, &s.io, true);
        let _ = writeln!(o, "<p>{}</p>", esc(&per_txn_caption(&s.labels)));
        table(&mut o, &s.per_txn, true);
        runs(&mut o, s);
    }

    o.push_str(
        "<h2>Checkpoint cycles, second by second</h2>\n<p class=\"note\">What \
        averages hide: the lowest, median and highest TPS of a second over all \
        repeats, and the mean TPS of the seconds in which a checkpoint was running \
        against the others.</p>\n",
    );
    section_tables(&mut o, p.sections, |s| &s.phases);

    o.push_str(
        "<h2>Over time</h2>\n<p class=\"note\">One line per mode: bold, \
        repeat 0; faint, the other repeats. A solid vertical line marks the second \
        in which a checkpoint started, a dashed one the second in which it ended, \
        in the colour of its mode (repeat 0). Click a plot for its PNG.</p>\n",
    );
    for s in p.sections {
        let _ = writeln!(o, "<h3>{}</h3>", esc(&s.heading));
        o.push_str("<p>");
        for (i, l) in s.labels.iter().enumerate() {
            let _ = write!(
                o,
                "<span class=\"sw\" style=\"background:{}\"></span>{} &nbsp; ",
                plot::css_color(i),
                esc(l)
            );
        }
        o.push_str("</p>\n");
        if s.plots.is_empty() {
            o.push_str("<p>No per-second series were recorded.</p>\n");
        }
        for f in &s.plots {
            let (svg, png) = (esc(&file_name(&f.svg)), esc(&file_name(&f.png)));
            let _ = writeln!(
                o,
                "<figure><a href=\"{png}\"><img src=\"{svg}\" alt=\"{w}: {m}\"></a>\
                 <figcaption>{w}: {m} (<a href=\"{svg}\">SVG</a>, <a href=\"{png}\">PNG</a>)\
                 </figcaption></figure>",
                w = esc(s.workload),
                m = esc(f.metric.title()),
            );
        }
    }

    folded_cycles(&mut o, p.sections);
    super::settings_list::html(&mut o, p.results, p.result_labels);
    o.push_str("</body></html>\n");
    o
}

/// Per workload, each configuration's checkpoint cycles folded onto one.
fn folded_cycles(o: &mut String, sections: &[Section]) {
    o.push_str(
        "<h2>Checkpoint cycles folded</h2>\n<p class=\"note\">Every 100 ms sample of \
        every complete checkpoint cycle of every run kept, placed at its time since the \
        checkpoint started as a fraction of the cycle (start to next start); the line is \
        the median per 5 % of the cycle: the ramp-up, spike and trough of seed 004.</p>\n",
    );
    for s in sections {
        let _ = writeln!(o, "<h3>{}</h3>", esc(&s.heading));
        if s.folds.is_empty() {
            o.push_str("<p>No run had a complete checkpoint cycle.</p>\n");
        }
        for f in &s.folds {
            let (svg, png) = (esc(&file_name(&f.svg)), esc(&file_name(&f.png)));
            let _ = writeln!(
                o,
                "<figure><a href=\"{png}\"><img src=\"{svg}\" alt=\"{w}: {l}\"></a>\
                 <figcaption>{w}, {l}: checkpoint cycle (<a href=\"{svg}\">SVG</a>, \
                 <a href=\"{png}\">PNG</a>)</figcaption></figure>",
                w = esc(s.workload),
                l = esc(&f.label),
            );
        }
    }
}

/// Per workload, its heading and the table `grid` picks from its section.
fn section_tables(o: &mut String, sections: &[Section], grid: for<'s> fn(&'s Section) -> &'s Grid) {
    for s in sections {
        let _ = writeln!(o, "<h3>{}</h3>", esc(&s.heading));
        table(o, grid(s), true);
    }
}

/// What the data resolve, in words and as a chart of TPS ratios with
/// their intervals, per workload.
fn summary(o: &mut String, sections: &[Section]) {
    o.push_str(
        "<h2>What the data resolve</h2>\n<p class=\"note\">Each mode against every \
         mode listed before it. A ratio is the geometric mean of the rounds' ratios \
         (the two modes' runs of one round as a pair) with its 95 % confidence \
         interval; a difference is <b>resolved</b> when the interval does not \
         contain 1, and otherwise inside the noise of this run.</p>\n",
    );
    for s in sections.iter().filter(|s| !s.verdicts.is_empty()) {
        let _ = writeln!(o, "<h3>{}</h3>\n<ul>", esc(&s.heading));
        for v in &s.verdicts {
            let resolved = v.comparison.tps.is_some_and(|i| i.resolved());
            let class = if resolved { "res" } else { "nores" };
            let _ = write!(o, "<li class=\"{class}\">{}", esc(&v.tps));
            if !v.per_txn.is_empty() {
                let _ = write!(o, "<br><span class=\"note\">{}</span>", esc(&v.per_txn));
            }
            o.push_str("</li>\n");
        }
        o.push_str("</ul>\n");
        let rows: Vec<ChartRow> = s
            .verdicts
            .iter()
            .map(|v| ChartRow {
                label: format!("{} vs {}", s.labels[v.a], s.labels[v.b]),
                interval: v.comparison.tps,
                plain: s.group[v.a].tps / s.group[v.b].tps,
                color: plot::css_color(v.a),
                reference: None,
            })
            .collect();
        ratio_chart(o, &rows);
    }
}

/// One row of [`ratio_chart`].
pub struct ChartRow {
    pub label: String,
    pub interval: Option<RatioInterval>,
    /// The ratio of the medians, drawn as a hollow dot without an interval.
    pub plain: f64,
    pub color: String,
    /// A reference ratio drawn as a hollow diamond (a study's seed figure).
    pub reference: Option<f64>,
}

/// TPS ratios as dots with their intervals as error bars, on a log scale
/// (0.5x and 2x equally far from 1x) with a dashed line at 1: a bar that
/// crosses it is not resolved and is drawn grey.
pub fn ratio_chart(o: &mut String, rows: &[ChartRow]) {
    // About 7 px a character at 12 px: the longest label fits.
    let longest = rows.iter().map(|r| r.label.chars().count()).max();
    let label_w = (longest.unwrap_or(0) as f64 * 7.0).max(120.0);
    const PLOT_W: f64 = 420.0;
    const ROW_H: f64 = 24.0;
    const TOP: f64 = 8.0;
    let (x0, x1) = (label_w + 10.0, label_w + 10.0 + PLOT_W);
    let width = x1 + 220.0;
    let height = TOP + ROW_H * rows.len() as f64 + 28.0;
    let values = rows.iter().flat_map(|r| {
        let mut v = match r.interval {
            Some(i) => vec![i.low, i.high],
            None => vec![r.plain],
        };
        v.extend(r.reference);
        v
    });
    let values: Vec<f64> = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .chain([1.0])
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min).ln();
    let hi = values.iter().copied().fold(0.0, f64::max).ln();
    // A margin of a tenth of the span, and at least ±2 % around 1.
    let pad = ((hi - lo) * 0.1).max(0.02);
    let (lo, hi) = (lo - pad, hi + pad);
    let x = |v: f64| x0 + (v.ln() - lo) / (hi - lo) * PLOT_W;
    let _ = writeln!(
        o,
        "<svg class=\"ratios\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"TPS ratios with 95 % intervals\">"
    );
    let axis_y = TOP + ROW_H * rows.len() as f64 + 4.0;
    let _ = writeln!(
        o,
        "<line x1=\"{x0}\" y1=\"{axis_y}\" x2=\"{x1}\" y2=\"{axis_y}\" stroke=\"#888\"/>"
    );
    let mut ticks: Vec<f64> = vec![1.0];
    for t in [
        0.1, 0.2, 0.25, 0.5, 0.67, 0.8, 0.9, 0.95, 0.98, 1.02, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0,
        5.0, 10.0,
    ] {
        let inside = (lo..=hi).contains(&f64::ln(t));
        if inside && ticks.iter().all(|k| (x(*k) - x(t)).abs() >= 40.0) {
            ticks.push(t);
        }
    }
    for t in ticks {
        let tx = x(t);
        let dash = if t == 1.0 {
            " stroke-dasharray=\"4 3\""
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "<line x1=\"{tx:.1}\" y1=\"{TOP}\" x2=\"{tx:.1}\" y2=\"{axis_y}\" stroke=\"#ccc\"{dash}/>\
             <text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{t}x</text>",
            axis_y + 16.0
        );
    }
    for (k, r) in rows.iter().enumerate() {
        let y = TOP + ROW_H * (k as f64 + 0.5);
        let _ = write!(
            o,
            "<text x=\"{label_w}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            y + 4.0,
            esc(&r.label)
        );
        if let Some(s) = r.reference.filter(|s| s.is_finite() && *s > 0.0) {
            let sx = x(s);
            let _ = write!(
                o,
                "<path d=\"M{sx:.1} {:.1} l5 5 l-5 5 l-5 -5 z\" fill=\"none\" stroke=\"#000\"/>",
                y - 5.0
            );
        }
        let note = match r.interval {
            Some(i) => {
                let color = if i.resolved() {
                    r.color.as_str()
                } else {
                    "#999"
                };
                let (a, b, m) = (x(i.low), x(i.high), x(i.ratio));
                let _ = write!(
                    o,
                    "<g class=\"ci\" stroke=\"{color}\" stroke-width=\"2\">\
                     <line x1=\"{a:.1}\" y1=\"{y}\" x2=\"{b:.1}\" y2=\"{y}\"/>\
                     <line x1=\"{a:.1}\" y1=\"{:.1}\" x2=\"{a:.1}\" y2=\"{:.1}\"/>\
                     <line x1=\"{b:.1}\" y1=\"{:.1}\" x2=\"{b:.1}\" y2=\"{:.1}\"/></g>\
                     <circle cx=\"{m:.1}\" cy=\"{y}\" r=\"4\" fill=\"{color}\"/>",
                    y - 5.0,
                    y + 5.0,
                    y - 5.0,
                    y + 5.0,
                );
                if i.resolved() {
                    i.text()
                } else {
                    format!("{} not resolved", i.text())
                }
            }
            None if r.plain.is_finite() && r.plain > 0.0 => {
                let _ = write!(
                    o,
                    "<circle cx=\"{:.1}\" cy=\"{y}\" r=\"4\" fill=\"none\" stroke=\"#999\"/>",
                    x(r.plain)
                );
                format!("{:.2}x, no interval", r.plain)
            }
            None => "no ratio".to_string(),
        };
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            x1 + 10.0,
            y + 4.0,
            esc(&note)
        );
    }
    o.push_str("</svg>\n");
}

/// Every run of a section, the disturbed ones highlighted and the
/// excluded ones struck through, folded away unless the noise monitor
/// flagged one.
fn runs(o: &mut String, s: &Section) {
    let all = s.group.iter().flat_map(|r| &r.runs);
    let total = all.clone().count();
    let disturbed = all.clone().filter(|r| r.disturbed).count();
    let excluded = all.filter(|r| r.excluded).count();
    let open = if disturbed + excluded > 0 {
        " open"
    } else {
        ""
    };
    let _ = writeln!(
        o,
        "<details{open}><summary>Runs: {total}, disturbed {disturbed}, excluded \
         {excluded}</summary>"
    );
    table_start(
        o,
        ["Mode", "round", "TPS", "CPU µs/txn", "WAL B/txn", "noise"].map(esc),
    );
    for (i, (r, label)) in s.group.iter().zip(&s.labels).enumerate() {
        for run in &r.runs {
            let (class, noise) = match (run.disturbed, run.excluded) {
                (true, true) => (" class=\"excl\"", "disturbed, excluded"),
                (false, true) => (" class=\"excl\"", "excluded"),
                (true, false) => (" class=\"dist\"", "disturbed"),
                (false, false) => ("", ""),
            };
            let per_txn = |v: u64| v as f64 / run.transactions.max(1) as f64;
            let _ = writeln!(
                o,
                "<tr{class}><td><span class=\"sw\" style=\"background:{}\"></span>{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td>{noise}</td></tr>",
                plot::css_color(i),
                esc(label),
                run.repeat,
                fmt_tps(run.tps),
                fmt_num(run.cpu_us_per_txn),
                thousands(per_txn(run.wal_bytes)),
            );
        }
    }
    o.push_str(TABLE_END);
    o.push_str("</details>\n");
}
