//! The HTML page of the benchmark report: self-contained apart from the
//! plot files next to it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{
    comparison_grid, create_dir, group_by_workload, mode_labels, phase_grid, slug,
    workload_heading, write_csv, write_file, write_json, Grid,
};
use crate::error::Result;
use crate::lab::plot::{self, Metric};
use crate::lab::result::ConfigResult;

/// One workload's part of the HTML report.
struct Section<'a> {
    workload: &'a str,
    heading: String,
    labels: Vec<String>,
    comparison: Grid,
    phases: Grid,
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
            comparison: comparison_grid(&group, &labels),
            phases: phase_grid(&group, &labels),
            labels,
            plots,
            folds,
        });
    }
    write_json(dir.join("results.json"), results)?;
    write_csv(dir.join("csv"), results)?;

    let mut settings: BTreeMap<&str, Vec<Option<&str>>> = BTreeMap::new();
    for (i, r) in results.iter().enumerate() {
        for (k, v) in &r.settings {
            settings
                .entry(k)
                .or_insert_with(|| vec![None; results.len()])[i] = Some(v);
        }
    }
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
        settings: &settings,
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
    /// Every setting by name: its value in each result (`None`: not set).
    pub settings: &'a BTreeMap<&'a str, Vec<Option<&'a str>>>,
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}\
th,td{border:1px solid #ccc;padding:3px 8px}th{background:#f0f0f0}\
td:first-child{white-space:nowrap}td.n{text-align:right;font-variant-numeric:tabular-nums}\
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap}\
.sw{display:inline-block;width:.9em;height:.9em;margin-right:.4em;vertical-align:middle}\
figure{margin:1em 0}figcaption{font-size:13px;color:#555}img{max-width:100%}\
.note{font-size:13px;color:#555}";

/// `s` made safe for HTML text and attribute values.
pub(super) fn esc(s: &str) -> String {
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
}

/// Opens a table: its header row of `headers`, each already HTML.
fn table_start(out: &mut String, headers: impl IntoIterator<Item = String>) {
    out.push_str("<table><thead><tr>");
    for h in headers {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr></thead><tbody>\n");
}

/// A row of text cells.
fn text_row<'a>(out: &mut String, cells: impl IntoIterator<Item = &'a str>) {
    out.push_str("<tr>");
    for c in cells {
        let _ = write!(out, "<td>{}</td>", esc(c));
    }
    out.push_str("</tr>\n");
}

const TABLE_END: &str = "</tbody></table>\n";

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
    let _ = write!(
        o,
        "<h2>How it was run</h2>\n<p><b>Command line</b></p><pre>{}</pre>\n\
         <p><b>Machine</b></p><pre>{}</pre>\n\
         <p><b>Device model</b>: {} <span class=\"note\">(<code>real</code>: the \
         real file system, no modelled latency)</span></p>\n\
         <p class=\"note\">Data: <a href=\"results.json\">results.json</a>, \
         <a href=\"csv/summary.csv\">csv/summary.csv</a> and per-second series in \
         <code>csv/</code>.</p>\n",
        esc(p.command_line),
        esc(p.machine),
        esc(&device_text),
    );
    if p.sections.is_empty() {
        o.push_str("<p>No results.</p>\n");
    }

    o.push_str(
        "<h2>Comparison</h2>\n<p class=\"note\">TPS is the median of the \
        repeats; latencies are those of the median run; counts are totals over all \
        repeats; spread is (max - min) / median of the repeats' TPS.</p>\n",
    );
    section_tables(&mut o, p.sections, |s| &s.comparison);

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
    settings(&mut o, p);
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

/// Every setting used: those all configurations share, then those that
/// differ, one column per configuration.
fn settings(o: &mut String, p: &Page) {
    o.push_str("<h2>Settings</h2>\n");
    let all_same = |vals: &Vec<Option<&str>>| vals.iter().all(|v| v.is_some() && *v == vals[0]);
    o.push_str("<h3>Common to every configuration</h3>\n");
    table_start(o, ["setting", "value"].map(String::from));
    for (k, vals) in p.settings.iter().filter(|(_, v)| all_same(v)) {
        text_row(o, [*k, vals[0].unwrap_or("-")]);
    }
    o.push_str(TABLE_END);
    let differing: Vec<_> = p.settings.iter().filter(|(_, v)| !all_same(v)).collect();
    if differing.is_empty() {
        return;
    }
    o.push_str("<h3>Differing between configurations</h3>\n");
    let configurations = p.results.iter().zip(p.result_labels);
    let headers =
        configurations.map(|(r, label)| format!("{}<br>{}", esc(&r.workload), esc(label)));
    table_start(o, std::iter::once("setting".to_string()).chain(headers));
    for (k, vals) in differing {
        text_row(
            o,
            std::iter::once(*k).chain(vals.iter().map(|v| v.unwrap_or("-"))),
        );
    }
    o.push_str(TABLE_END);
}
