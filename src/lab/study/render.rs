//! What a study shows: the seed's tables and ours in the same shape, a
//! verdict line per claim, then the notes; as text and as an HTML page
//! that links each plan's bench report (its plots and folded checkpoint
//! cycles) and draws every claim's interval beside the seed's figure.

use super::{claim_interval, verdicts, Study, StudyPlan, Table, Verdict};
use crate::error::{Error, Result};
use crate::lab::report::{self, esc, ratio_chart, ChartRow, STYLE};
use crate::lab::result::ConfigResult;
use comfy_table::{presets, CellAlignment};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A table as text, its caption above it.
pub fn table_text(t: &Table) -> String {
    let mut grid = comfy_table::Table::new();
    grid.load_preset(presets::ASCII_MARKDOWN);
    grid.set_header(&t.headers);
    for row in &t.rows {
        grid.add_row(row);
    }
    for i in 1..t.headers.len() {
        if let Some(c) = grid.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    format!("{}\n{grid}", t.caption)
}

/// The whole study as text: the seed's tables, ours, the verdicts, the
/// extra lines and the notes.
pub fn text(study: &dyn Study, results: &[Vec<ConfigResult>]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "untorn study {}: seed {}\n{}\n",
        study.name(),
        study.seed_file(),
        study.summary()
    );
    o.push_str("== The seed's figures\n\n");
    for t in study.seed_tables() {
        let _ = writeln!(o, "{}\n", table_text(&t));
    }
    o.push_str("== Here\n\n");
    for t in study.our_tables(results) {
        let _ = writeln!(o, "{}\n", table_text(&t));
    }
    o.push_str("== Verdicts (95 % intervals, paired by round)\n\n");
    for (_, line) in verdicts(study, results) {
        let _ = writeln!(o, "{line}");
    }
    for line in study.extra_lines(results) {
        let _ = writeln!(o, "{line}");
    }
    o.push_str("\n== Notes\n\n");
    let _ = writeln!(o, "- {}", rounds_note(results));
    for n in study.notes() {
        let _ = writeln!(o, "- {n}");
    }
    o
}

/// How many rounds each plan ran, per workload: the adaptive rule (or
/// `--rounds`) decides, and an interval means little without it.
pub fn rounds_note(results: &[Vec<ConfigResult>]) -> String {
    let mut parts = Vec::new();
    for (i, plan) in results.iter().enumerate() {
        let mut seen: Vec<&str> = Vec::new();
        for c in plan {
            if seen.contains(&c.workload.as_str()) {
                continue;
            }
            seen.push(&c.workload);
            parts.push(format!(
                "plan {} {}: {}",
                i + 1,
                c.workload,
                c.tps_runs.len()
            ));
        }
    }
    format!("Rounds run: {}.", parts.join("; "))
}

fn html_table(o: &mut String, t: &Table) {
    let _ = writeln!(o, "<p><b>{}</b></p>\n<table><tr>", esc(&t.caption));
    for h in &t.headers {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>\n");
    for row in &t.rows {
        o.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let class = if i == 0 { "" } else { " class=\"n\"" };
            let _ = write!(o, "<td{class}>{}</td>", esc(c));
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");
}

/// Writes the study's report into `dir`: each plan's bench report under
/// `plan-N/` (plots, CSV, JSON), and `index.html` with the seed's tables
/// beside ours, the verdicts with a chart of every claim's interval and the
/// seed's figure, the notes, and each plan's TPS plots and folded cycles.
/// Returns the path of `index.html`.
pub fn write_html(
    dir: &Path,
    study: &dyn Study,
    plans: &[StudyPlan],
    results: &[Vec<ConfigResult>],
    command_line: &str,
    machine: &str,
) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, "create directory", e))?;
    let mut plan_pages = Vec::new();
    for (n, (p, r)) in plans.iter().zip(results).enumerate() {
        let sub = format!("plan-{n}");
        let title = format!("untorn study {}: {}", study.name(), p.title);
        report::write_report(dir.join(&sub), r, &title, command_line, machine)?;
        plan_pages.push((sub, p.title.clone()));
    }
    let title = format!("untorn study {}", study.name());
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\">\
         <title>{t}</title><style>{STYLE}</style></head><body>\n<h1>{t}</h1>\n\
         <p>{}</p><p class=\"note\">Seed: {} &middot; command: <code>{}</code> &middot; \
         machine: {}</p>",
        esc(study.summary()),
        esc(study.seed_file()),
        esc(command_line),
        esc(machine),
        t = esc(&title),
    );
    o.push_str("<h2>The seed's figures</h2>\n");
    for t in study.seed_tables() {
        html_table(&mut o, &t);
    }
    o.push_str("<h2>Here</h2>\n");
    for t in study.our_tables(results) {
        html_table(&mut o, &t);
    }
    o.push_str("<h2>Verdicts</h2>\n<ul>\n");
    for (v, line) in verdicts(study, results) {
        let class = if v == Verdict::NotResolved {
            "nores"
        } else {
            "res"
        };
        let _ = writeln!(o, "<li class=\"{class}\">{}</li>", esc(&line));
    }
    for line in study.extra_lines(results) {
        let _ = writeln!(o, "<li>{}</li>", esc(&line));
    }
    o.push_str(
        "</ul>\n<p class=\"note\">Each claim's ratio here with its 95 % interval \
         (grey where it contains 1); the hollow diamond is the seed's figure.</p>\n",
    );
    let rows: Vec<ChartRow> = study
        .claims()
        .iter()
        .map(|c| ChartRow {
            label: format!("{} ({})", c.ratio, c.context),
            interval: claim_interval(c, results),
            plain: f64::NAN,
            color: "#1f77b4".into(),
            reference: c.seed,
        })
        .collect();
    ratio_chart(&mut o, &rows);
    o.push_str("<h2>Notes</h2>\n<ul>\n");
    let _ = writeln!(o, "<li>{}</li>", esc(&rounds_note(results)));
    for n in study.notes() {
        let _ = writeln!(o, "<li>{}</li>", esc(n));
    }
    o.push_str("</ul>\n<h2>The runs</h2>\n");
    for (sub, t) in &plan_pages {
        let _ = writeln!(
            o,
            "<h3>{}</h3>\n<p><a href=\"{sub}/index.html\">The full bench report</a> \
             (every figure, setting and plot).</p>",
            esc(t)
        );
        for img in plots(&dir.join(sub))? {
            let _ = writeln!(o, "<figure><img src=\"{sub}/{}\"></figure>", esc(&img));
        }
    }
    o.push_str("</body></html>\n");
    let index = dir.join("index.html");
    std::fs::write(&index, o).map_err(|e| Error::io(&index, "write", e))?;
    Ok(index)
}

/// The TPS plots and folded cycles of a plan's report, by file name.
fn plots(dir: &Path) -> Result<Vec<String>> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, "read directory", e))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with("_tps.svg") || n.ends_with("_cycle.svg"))
        .collect();
    out.sort();
    Ok(out)
}
