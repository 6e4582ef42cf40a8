//! The per-second side of a benchmark: where checkpoints ran and what the
//! seconds in and between them look like ([`PhaseStats`]), and the plots:
//! one chart per workload and metric, one
//! line per mode, with the checkpoints marked so that the phases of a
//! checkpoint cycle (ramp-up, spike, trough, normal running) that averages
//! hide are seen at a glance.
//!
//! Every chart is written twice, as SVG (text left to the browser) and PNG
//! (text drawn with the DejaVu Sans font embedded in the binary, so no
//! system font is needed).

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::lab::result::{ConfigResult, FineSample, Run, Sample};

/// Size of every chart, in pixels.
pub const WIDTH: u32 = 960;
pub const HEIGHT: u32 = 400;

/// One line colour per mode, in the order the modes are given.
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The colour of the `i`th mode, as a CSS colour (for the HTML legend).
pub fn css_color(i: usize) -> String {
    let RGBColor(r, g, b) = COLORS[i % COLORS.len()];
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// What a chart shows, per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Committed transactions per second.
    Tps,
    /// The 99th-percentile latency of the second, milliseconds.
    LatencyP99,
    /// WAL bytes written in the second, shown in MiB.
    WalBytes,
}

impl Metric {
    pub const ALL: [Metric; 3] = [Metric::Tps, Metric::LatencyP99, Metric::WalBytes];

    /// Short name used in file names.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Tps => "tps",
            Metric::LatencyP99 => "p99",
            Metric::WalBytes => "wal",
        }
    }

    /// The chart's title and the y axis' description.
    pub fn title(self) -> &'static str {
        match self {
            Metric::Tps => "transactions per second",
            Metric::LatencyP99 => "p99 latency per second (ms)",
            Metric::WalBytes => "WAL written per second (MiB)",
        }
    }

    fn axis(self) -> &'static str {
        match self {
            Metric::Tps => "TPS",
            Metric::LatencyP99 => "p99 ms",
            Metric::WalBytes => "WAL MiB/s",
        }
    }

    /// The value of this metric in one sample.
    pub fn value(self, s: &Sample) -> f64 {
        match self {
            Metric::Tps => s.tps,
            Metric::LatencyP99 => s.latency_ms_p99,
            Metric::WalBytes => s.wal_bytes as f64 / (1024.0 * 1024.0),
        }
    }
}

/// The two files of one chart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlotFiles {
    pub metric: Metric,
    pub svg: PathBuf,
    pub png: PathBuf,
}

/// The run drawn bold for a configuration: its median run by TPS, the
/// one whose latencies the tables give (else the first run kept).
pub fn primary_run(r: &ConfigResult) -> Option<&Run> {
    let kept = || r.runs.iter().filter(|run| !run.excluded);
    kept()
        .find(|run| run.tps == r.tps)
        .or_else(|| kept().next())
        .or(r.runs.first())
}

/// The legend's word on the bold lines.
const BOLD_IS: &str = "bold: the median run by TPS";

/// At most this many x-axis labels, and never more than whole seconds
/// (`0 0 1 2 2 3` came from half-second ticks printed without decimals).
fn x_label_count(x_max: f64) -> usize {
    (x_max as usize + 1).clamp(2, 11)
}

/// True when some run of some line has a per-second series to draw.
pub fn has_series(lines: &[(String, &ConfigResult)]) -> bool {
    lines
        .iter()
        .any(|(_, r)| r.runs.iter().any(|run| !run.series.is_empty()))
}

/// Draws `metric` for `lines` (label, configuration) into
/// `dir/<stem>_<metric>.svg` and `.png`. The median run of each
/// configuration is drawn bold with its checkpoints marked (solid vertical
/// line: started, dashed: ended); the other runs faint.
pub fn plot_metric(
    dir: &Path,
    stem: &str,
    title: &str,
    metric: Metric,
    lines: &[(String, &ConfigResult)],
) -> Result<PlotFiles> {
    register_fonts();
    let svg = dir.join(format!("{stem}_{}.svg", metric.name()));
    let png = dir.join(format!("{stem}_{}.png", metric.name()));
    let caption = format!("{title}: {}", metric.title());
    {
        let root = SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(root, &caption, metric, lines).map_err(|e| plot_error(&svg, e))?;
    }
    {
        let root = BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area();
        draw(root, &caption, metric, lines).map_err(|e| plot_error(&png, e))?;
    }
    Ok(PlotFiles { metric, svg, png })
}

/// The legend: one entry per mode, then what the faint lines, the shading
/// and the vertical lines mean.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[(String, &ConfigResult)],
) -> DrawResult<DB> {
    let font = ("sans-serif", 13).into_font();
    let grey = BLACK.mix(0.6);
    let mut y = 40;
    let text = |y: i32, s: &str| area.draw(&Text::new(s.to_string(), (34, y - 7), font.clone()));
    for (i, (label, _)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        area.draw(&PathElement::new(
            vec![(4, y), (28, y)],
            color.stroke_width(2),
        ))?;
        text(y, label)?;
        y += 20;
    }
    text(y, BOLD_IS)?;
    y += 20;
    y += 8;
    if lines.iter().any(|(_, r)| r.runs.len() > 1) {
        area.draw(&PathElement::new(vec![(4, y), (28, y)], BLACK.mix(0.25)))?;
        text(y, "other runs")?;
        y += 20;
    }
    area.draw(&Rectangle::new(
        [(4, y - 7), (28, y + 7)],
        BLACK.mix(0.1).filled(),
    ))?;
    text(y, "checkpoint running")?;
    y += 20;
    area.draw(&PathElement::new(vec![(16, y - 7), (16, y + 7)], grey))?;
    text(y, "checkpoint started")?;
    y += 20;
    area.draw(&DashedPathElement::new(
        vec![(16, y - 7), (16, y + 7)],
        3,
        3,
        grey,
    ))?;
    text(y, "checkpoint ended")?;
    Ok(())
}

/// An axis label: fewer decimals the larger the axis.
fn axis_number(v: f64, max: f64) -> String {
    if max >= 100.0 {
        format!("{v:.0}")
    } else if max >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn plot_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("cannot draw the plot {}: {e}", path.display()))
}

static FONTS: Once = Once::new();

/// Registers the embedded DejaVu Sans as plotters' "sans-serif".
fn register_fonts() {
    FONTS.call_once(|| {
        // The bytes are a known-good font; a failure would only lose text.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold());
    });
}

type DrawResult<DB> =
    std::result::Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    caption: &str,
    metric: Metric,
    lines: &[(String, &ConfigResult)],
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let samples = || {
        lines
            .iter()
            .flat_map(|(_, r)| r.runs.iter())
            .flat_map(|run| run.series.iter())
    };
    let x_max = samples().map(|s| s.second + 1).max().unwrap_or(1).max(1) as f64;
    let y_top = samples().map(|s| metric.value(s)).fold(0.0, f64::max);
    let y_max = if y_top > 0.0 && y_top.is_finite() {
        y_top * 1.1
    } else {
        1.0
    };

    // The legend gets a column of its own so that it hides no data.
    let longest = lines
        .iter()
        .map(|(l, _)| l.chars().count())
        .chain(std::iter::once(BOLD_IS.len()))
        .max()
        .unwrap_or(0);
    let legend_width = (longest as u32 * 13 / 2 + 48).clamp(150, 380);
    let body = root.titled(caption, ("sans-serif", 18))?;
    let (plot_area, legend) = body.split_horizontally(WIDTH.saturating_sub(legend_width));
    let mut chart = ChartBuilder::on(&plot_area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("second")
        .y_desc(metric.axis())
        .light_line_style(RGBColor(238, 238, 238))
        .max_light_lines(2)
        .x_labels(x_label_count(x_max))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| axis_number(*y, y_max))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;

    // Checkpoint markers first, so the lines are drawn over them: the
    // seconds a checkpoint ran shaded, its start and end as vertical lines.
    for (i, (_, r)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let Some(run) = primary_run(r) else { continue };
        let running = checkpoint_running(&run.series);
        let mut from = None;
        for (k, s) in run.series.iter().enumerate() {
            let x = s.second as f64;
            match (running[k], from) {
                (true, None) => from = Some(x),
                (false, Some(x0)) => {
                    from = None;
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x0, 0.0), (x - 1.0, y_max)],
                        color.mix(0.07).filled(),
                    )))?;
                }
                _ => {}
            }
        }
        if let (Some(x0), Some(last)) = (from, run.series.last()) {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0, 0.0), (last.second as f64, y_max)],
                color.mix(0.07).filled(),
            )))?;
        }
        for s in &run.series {
            let x = s.second as f64;
            if s.checkpoint_started {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(x, 0.0), (x, y_max)],
                    color.mix(0.55).stroke_width(1),
                )))?;
            }
            if s.checkpoint_ended {
                chart.draw_series(std::iter::once(DashedPathElement::new(
                    vec![(x, 0.0), (x, y_max)],
                    6,
                    4,
                    color.mix(0.55).stroke_width(1),
                )))?;
            }
        }
    }

    for (i, (_, r)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let primary = primary_run(r);
        for run in &r.runs {
            if primary.is_some_and(|p| std::ptr::eq(p, run)) {
                continue;
            }
            chart.draw_series(LineSeries::new(
                run.series
                    .iter()
                    .map(|s| (s.second as f64, metric.value(s))),
                color.mix(0.25).stroke_width(1),
            ))?;
        }
        let Some(run) = primary else { continue };
        chart.draw_series(LineSeries::new(
            run.series
                .iter()
                .map(|s| (s.second as f64, metric.value(s))),
            color.stroke_width(2),
        ))?;
    }
    draw_legend(&legend, lines)?;
    root.present()?;
    Ok(())
}

/// The two files of one configuration's folded checkpoint cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoldFiles {
    /// The configuration's mode label.
    pub label: String,
    pub svg: PathBuf,
    pub png: PathBuf,
}

/// Bins of the median line of a folded cycle (5 % of the cycle each).
const FOLD_BINS: usize = 20;

/// Draws configuration `r`'s checkpoint cycles folded onto one
/// ([`crate::lab::cycles`]) into `dir/<stem>_cycle.svg` and `.png`: TPS
/// above, p99 latency below, a faint point per 100 ms sample of every
/// cycle of every run kept, and the median per 5 % of the cycle as a line.
/// `None` when no run has a complete cycle.
pub fn plot_fold(
    dir: &Path,
    stem: &str,
    title: &str,
    (label, color): (&str, usize),
    r: &ConfigResult,
) -> Result<Option<FoldFiles>> {
    let folded = crate::lab::cycles::fold_config(r);
    if folded.is_empty() {
        return Ok(None);
    }
    register_fonts();
    let cycles: usize = r
        .runs
        .iter()
        .filter(|run| !run.excluded)
        .map(|run| {
            run.fine_series
                .iter()
                .filter(|s| s.ckpt_start)
                .count()
                .saturating_sub(1)
        })
        .sum();
    let caption = format!("{title}, {label}: {cycles} checkpoint cycles folded");
    let svg = dir.join(format!("{stem}_cycle.svg"));
    let png = dir.join(format!("{stem}_cycle.png"));
    let size = (WIDTH, HEIGHT * 3 / 2);
    let color = COLORS[color % COLORS.len()];
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        draw_fold(root, &caption, color, &folded).map_err(|e| plot_error(&svg, e))?;
    }
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        draw_fold(root, &caption, color, &folded).map_err(|e| plot_error(&png, e))?;
    }
    Ok(Some(FoldFiles {
        label: label.to_string(),
        svg,
        png,
    }))
}

/// One figure of a 100 ms sample.
type FineValue = fn(&FineSample) -> f64;

fn draw_fold<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    caption: &str,
    color: RGBColor,
    folded: &[(f64, FineSample)],
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let body = root.titled(caption, ("sans-serif", 18))?;
    let panels = body.split_evenly((2, 1));
    let metrics: [(&str, FineValue); 2] = [
        ("TPS (100 ms)", |s| f64::from(s.tps)),
        ("p99 ms (100 ms)", |s| f64::from(s.p99)),
    ];
    for (area, (axis, value)) in panels.iter().zip(metrics) {
        let points: Vec<(f64, f64)> = folded.iter().map(|(x, s)| (*x, value(s))).collect();
        let top = points.iter().map(|p| p.1).fold(0.0, f64::max);
        let y_max = if top > 0.0 && top.is_finite() {
            top * 1.05
        } else {
            1.0
        };
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..1f64, 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_desc("time since the checkpoint started, fraction of the cycle")
            .y_desc(axis)
            .light_line_style(RGBColor(238, 238, 238))
            .max_light_lines(2)
            .x_label_formatter(&|x| format!("{x:.1}"))
            .y_label_formatter(&|y| axis_number(*y, y_max))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()?;
        chart.draw_series(
            points
                .iter()
                .map(|&p| Circle::new(p, 2, color.mix(0.25).filled())),
        )?;
        let median = crate::lab::cycles::median_by_bin(&points, FOLD_BINS);
        chart
            .draw_series(LineSeries::new(median, BLACK.stroke_width(2)))?
            .label("median per 5 % of the cycle")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(2)));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 13))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// What the per-second series show about the checkpoint cycle, over every
/// repeat of one configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseStats {
    /// Seconds sampled, all repeats together.
    pub seconds: usize,
    /// Lowest, median and highest TPS of a second.
    pub tps_min: f64,
    pub tps_median: f64,
    pub tps_max: f64,
    /// Mean TPS of the seconds in which a checkpoint was running, and of
    /// the others (`None` when there are no such seconds).
    pub tps_in_checkpoint: Option<f64>,
    pub tps_between: Option<f64>,
    /// The highest p99 latency of a second, milliseconds.
    pub p99_worst_ms: f64,
    /// Checkpoints that started during the sampled seconds.
    pub checkpoints_started: usize,
}

/// For each sample, whether a checkpoint was running during that second.
/// A series whose first marker is an end began inside a checkpoint.
pub fn checkpoint_running(series: &[Sample]) -> Vec<bool> {
    let mut inside = series
        .iter()
        .find(|s| s.checkpoint_started || s.checkpoint_ended)
        .is_some_and(|s| s.checkpoint_ended && !s.checkpoint_started);
    series
        .iter()
        .map(|s| match (s.checkpoint_started, s.checkpoint_ended) {
            // One ended and the next started, or one started and ended.
            (true, true) => true,
            (true, false) => {
                inside = true;
                true
            }
            (false, true) => {
                inside = false;
                true
            }
            (false, false) => inside,
        })
        .collect()
}

/// The [`PhaseStats`] of one configuration.
pub fn phase_stats(r: &ConfigResult) -> PhaseStats {
    let mut tps = Vec::new();
    let (mut inside, mut between) = (Vec::new(), Vec::new());
    let mut st = PhaseStats::default();
    for run in &r.runs {
        let running = checkpoint_running(&run.series);
        for (s, running) in run.series.iter().zip(running) {
            tps.push(s.tps);
            if running {
                inside.push(s.tps)
            } else {
                between.push(s.tps)
            }
            st.p99_worst_ms = st.p99_worst_ms.max(s.latency_ms_p99);
            st.checkpoints_started += usize::from(s.checkpoint_started);
        }
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    st.tps_in_checkpoint = mean(&inside);
    st.tps_between = mean(&between);
    st.seconds = tps.len();
    tps.sort_by(|a, b| a.total_cmp(b));
    if let (Some(lo), Some(hi)) = (tps.first(), tps.last()) {
        st.tps_min = *lo;
        st.tps_max = *hi;
        st.tps_median = tps[tps.len() / 2];
    }
    st
}
