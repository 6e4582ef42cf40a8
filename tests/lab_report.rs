//! The benchmark report: tables, JSON, CSV and the HTML report with plots,
//! from synthetic results.

use std::collections::BTreeMap;
use std::path::Path;

use untorn::lab::report::compare_workloads;
use untorn::lab::report::{
    checkpoint_running, comparison_table, comparison_table_compact, mode_labels, phase_stats,
    phase_table, write_csv, write_json, write_report, COMPARISON_CSV_COLUMNS, NOT_RESOLVED_LEGEND,
    SERIES_COLUMNS, SUMMARY_COLUMNS,
};
use untorn::lab::result::{ConfigResult, LatencyMs, Run, Sample};

const SECONDS: u32 = 20;
const CKPT_START: u32 = 5;
const CKPT_END: u32 = 9;

/// 20 seconds around `tps`, with a checkpoint from second 5 to 9 during
/// which TPS drops and latency spikes.
fn series(tps: f64) -> Vec<Sample> {
    (0..SECONDS)
        .map(|s| {
            let in_ckpt = (CKPT_START..=CKPT_END).contains(&s);
            let t = if in_ckpt { tps * 0.5 } else { tps };
            Sample {
                second: s,
                tps: t,
                latency_ms_avg: 1000.0 / t,
                latency_ms_p99: if in_ckpt { 40.0 } else { 5.0 },
                wal_bytes: (t * 300.0) as u64,
                data_writes: if in_ckpt { 500 } else { 10 },
                checkpoint_started: s == CKPT_START,
                checkpoint_ended: s == CKPT_END,
            }
        })
        .collect()
}

fn result(
    workload: &str,
    protection: &str,
    tps: &[f64],
    settings: &[(&str, &str)],
) -> ConfigResult {
    let runs = tps
        .iter()
        .enumerate()
        .map(|(repeat, &tps)| Run {
            repeat,
            seconds: SECONDS as f64,
            transactions: (tps * SECONDS as f64) as u64,
            tps,
            latency_ms: LatencyMs {
                avg: 1000.0 / tps,
                p90: 2.0,
                p99: 9.5,
                max: 120.0,
            },
            cpu_us_per_txn: 50.0,
            wal_bytes: (tps * SECONDS as f64 * 300.0) as u64,
            wal_fpi: if protection == "full_pages" { 1000 } else { 0 },
            data_writes: 2600,
            data_fsyncs: 8,
            dw_page_writes: if protection == "double_writes" {
                2600
            } else {
                0
            },
            dw_fsyncs: if protection == "double_writes" { 4 } else { 0 },
            checkpoints: 1,
            series: series(tps),
            ..Default::default()
        })
        .collect();
    let mut settings: BTreeMap<String, String> = settings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    settings.insert("protection".into(), protection.into());
    settings.insert("buffer_pool".into(), "64MiB".into());
    let mut r = ConfigResult {
        workload: workload.into(),
        protection: protection.into(),
        device: "real".into(),
        settings,
        runs,
        ..Default::default()
    };
    r.summarize();
    r
}

fn results() -> Vec<ConfigResult> {
    vec![
        result("oltp_write_only", "full_pages", &[13772.0, 13500.0], &[]),
        result("oltp_write_only", "double_writes", &[20660.0, 21000.0], &[]),
        result("tpcb", "full_pages", &[5000.0, 5100.0], &[]),
        result("tpcb", "double_writes", &[4400.0, 4300.0], &[]),
    ]
}

/// The TPS cell of `a` against `b`: its ratio and interval, marked when
/// not resolved.
fn vs(a: &ConfigResult, b: &ConfigResult) -> String {
    let i = a.ratio_to(b, |r| r.tps).unwrap();
    if i.resolved() {
        i.text()
    } else {
        format!("{} ~", i.text())
    }
}

#[test]
fn comparison_table_has_the_seed_shape_and_percentages() {
    let rs = results();
    let t = comparison_table(&rs);
    assert!(t.contains("vs full_pages"), "{t}");
    assert!(t.contains("vs double_writes"), "{t}");
    assert!(t.contains("oltp_write_only") && t.contains("tpcb"), "{t}");
    for w in [0, 2] {
        let (fp, dw) = (&rs[w], &rs[w + 1]);
        assert!(t.contains(&vs(dw, fp)), "missing {} in\n{t}", vs(dw, fp));
        assert!(t.contains(&vs(fp, dw)), "missing {} in\n{t}", vs(fp, dw));
    }
    // Two rounds: double_writes is resolved 1.53x faster on
    // oltp_write_only, but its 0.86x on tpcb is inside the noise.
    assert!(t.contains("| 1.53x [1.21, 1.92] |"), "{t}");
    assert!(t.contains("| 0.86x [0.66, 1.13] ~ |"), "{t}");
    assert_eq!(t.matches(NOT_RESOLVED_LEGEND).count(), 3, "{t}");
    // Per transaction: double_writes writes 0.65x the pages per
    // transaction of full_pages (the same pages, more transactions).
    assert!(t.contains("Per transaction, vs full_pages"), "{t}");
    assert!(
        t.contains("page reads/txn") && t.contains("WAL fsyncs/txn"),
        "{t}"
    );
    // The median of two repeats is the higher one: 13,772 and 21,000.
    assert!(t.contains("13,772") && t.contains("21,000"), "{t}");
    for h in [
        "p99 ms",
        "CPU µs/txn",
        "WAL B/txn",
        "page writes/txn",
        "KB written/txn",
        "Details:",
        "DW fsyncs",
        "data pages/txn",
        "spread %",
    ] {
        assert!(t.contains(h), "missing header {h} in\n{t}");
    }
    // No run logged image bytes or had a writer split: the columns of
    // zeros are left out.
    assert!(
        !t.contains("FPI B/txn") && !t.contains("client writes %"),
        "{t}"
    );
    let c = comparison_table_compact(&rs);
    assert!(
        c.contains("vs full_pages") && c.contains(&vs(&rs[1], &rs[0])),
        "{c}"
    );
    assert_eq!(c.matches(NOT_RESOLVED_LEGEND).count(), 1, "{c}");
    assert!(
        c.lines().map(|l| l.chars().count()).max().unwrap()
            < t.lines().map(|l| l.chars().count()).max().unwrap()
    );
}

/// Seed 003's names (full_pages, full_pages+lz4), and a setting shown
/// only where the mode uses it: WAL compression under full_pages, the
/// area's sizes under double_writes.
#[test]
fn mode_names_only_the_settings_its_mode_uses() {
    let r = |mode: &str, compression: &str, area: &str| {
        let settings = [
            ("torn_page_protection", mode),
            ("wal_compression", compression),
            ("double_write_buffer_size", area),
        ];
        result("w", mode, &[100.0], &settings)
    };
    let group = [
        r("full_pages", "off", "1"),
        r("full_pages", "lz4", "1"),
        r("double_writes", "off", "1"),
        r("double_writes", "off", "2"),
        r("off", "off", "1"),
    ];
    assert_eq!(
        mode_labels(&group.iter().collect::<Vec<_>>()),
        [
            "full_pages",
            "full_pages+lz4",
            "double_writes double_write_buffer_size=1",
            "double_writes double_write_buffer_size=2",
            "off"
        ]
    );
}

#[test]
fn mode_names_the_settings_that_differ() {
    let a = result(
        "w",
        "full_pages",
        &[100.0],
        &[("wal_block_size", "8192"), ("page_size", "8192")],
    );
    let b = result(
        "w",
        "full_pages",
        &[120.0],
        &[("wal_block_size", "16384"), ("page_size", "8192")],
    );
    let labels = mode_labels(&[&a, &b]);
    assert_eq!(
        labels,
        [
            "full_pages wal_block_size=8192",
            "full_pages wal_block_size=16384"
        ]
    );
    let t = comparison_table(&[a, b]);
    assert!(t.contains("vs full_pages wal_block_size=16384"), "{t}");
    // One round: the plain ratio, and no interval.
    assert!(t.contains(" 1.20x (1 round) |"), "{t}");
    assert!(t.contains("fewer than two rounds paired"), "{t}");
    assert!(!t.contains(NOT_RESOLVED_LEGEND), "{t}");
}

#[test]
fn checkpoint_phases_are_found() {
    let s = series(1000.0);
    let running = checkpoint_running(&s);
    let expect: Vec<bool> = (0..SECONDS)
        .map(|i| (CKPT_START..=CKPT_END).contains(&i))
        .collect();
    assert_eq!(running, expect);
    let p = phase_stats(&results()[0]);
    assert_eq!(p.seconds, 2 * SECONDS as usize);
    assert_eq!(p.checkpoints_started, 2);
    assert_eq!(p.tps_min, 13500.0 * 0.5);
    assert_eq!(p.tps_max, 13772.0);
    assert_eq!(p.tps_in_checkpoint, Some((13772.0 + 13500.0) * 0.5 / 2.0));
    assert_eq!(p.p99_worst_ms, 40.0);
    assert!(phase_table(&results()).contains("TPS in checkpoint"));
}

#[test]
fn json_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let mut rs = results();
    compare_workloads(&mut rs);
    write_json(&path, &rs).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let back: Vec<ConfigResult> = serde_json::from_str(&text).unwrap();
    assert_eq!(back.len(), rs.len());
    // serde_json without its `float_roundtrip` feature may parse a
    // 17-digit float one unit in the last place off: compare with that slack.
    let (a, b) = (
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&rs).unwrap(),
    );
    assert_close(&a, &b, "$");
    assert_eq!(back[0].settings, rs[0].settings);
    assert_eq!(back[3].runs[1].series, rs[3].runs[1].series);
    // Every ratio comes with its interval, against the other configuration.
    let vs = &back[3].vs;
    assert_eq!(vs.len(), 1);
    assert_eq!(
        (vs[0].against.as_str(), vs[0].against_index),
        ("full_pages", 0)
    );
    let tps = vs[0].tps.unwrap();
    assert!(tps.low < tps.ratio && tps.ratio < tps.high && !tps.resolved());
    assert_eq!(tps.pairs, 2);
    assert!(vs[0].wal_bytes_per_txn.is_some() && vs[0].page_reads_per_txn.is_none());
    assert!(text.contains("\"page_reads_per_txn\": null"));
}

fn assert_close(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value;
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}");
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                assert_close(x, y, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{at}"
            );
            for (k, v) in x {
                assert_close(v, &y[k], &format!("{at}.{k}"));
            }
        }
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                "{at}: {x} != {y}"
            );
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

#[test]
fn csv_has_a_header_and_a_row_per_result_and_second() {
    let dir = tempfile::tempdir().unwrap();
    let rs = results();
    let files = write_csv(dir.path().join("csv"), &rs).unwrap();
    assert_eq!(files.len(), 2 + 4 * 2, "{files:?}");
    let summary = std::fs::read_to_string(&files[0]).unwrap();
    assert!(files[0].ends_with("summary.csv"));
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(lines.len(), 1 + rs.len());
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(&header[..SUMMARY_COLUMNS.len()], SUMMARY_COLUMNS);
    assert!(header.contains(&"setting_buffer_pool") && header.contains(&"setting_protection"));
    for l in &lines[1..] {
        assert_eq!(l.split(',').count(), header.len(), "{l}");
    }
    assert!(lines[1].starts_with("oltp_write_only,full_pages,full_pages,real,2,13772,"));
    // The TPS ratio against the workload's first configuration, with its
    // interval: empty on that first row.
    let mut rd = csv::Reader::from_path(&files[0]).unwrap();
    let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    let col = |name: &str| SUMMARY_COLUMNS.iter().position(|c| *c == name).unwrap();
    let tps = rs[3].ratio_to(&rs[2], |r| r.tps).unwrap();
    assert_eq!(&rows[3][col("vs")], "full_pages");
    assert_eq!(
        rows[3][col("tps_ratio_low")].parse::<f64>().unwrap(),
        tps.low
    );
    assert_eq!(&rows[3][col("tps_ratio_resolved")], "false");
    assert_eq!(&rows[2][col("tps_ratio")], "");

    assert!(files[1].ends_with("comparisons.csv"));
    let mut rd = csv::Reader::from_path(&files[1]).unwrap();
    assert_eq!(rd.headers().unwrap(), &COMPARISON_CSV_COLUMNS[..]);
    let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    // Per workload, two configurations each against the other, seven
    // figures (TPS and PER_TXN's).
    assert_eq!(rows.len(), 2 * 2 * 7);
    let row = rows
        .iter()
        .find(|r| &r[0] == "tpcb" && &r[1] == "double_writes" && &r[3] == "tps")
        .unwrap();
    assert_eq!(&row[2], "full_pages");
    assert_eq!(row[4].parse::<f64>().unwrap(), tps.ratio);
    assert_eq!((&row[7], &row[8], &row[9]), ("2", "false", "2"));
    let reads = rows.iter().find(|r| &r[3] == "page_reads_per_txn").unwrap();
    assert_eq!((&reads[4], &reads[9]), ("", "2"), "no reads, no ratio");

    let mut names: Vec<String> = files[2..]
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names[0], "series_oltp_write_only_double_writes_r0.csv");
    for f in &files[2..] {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], SERIES_COLUMNS.join(","));
        assert_eq!(lines.len(), 1 + SECONDS as usize);
        let started: Vec<&str> = lines[1..]
            .iter()
            .filter(|l| l.split(',').nth(6) == Some("1"))
            .copied()
            .collect();
        assert_eq!(started.len(), 1);
        assert!(started[0].starts_with(&format!("{CKPT_START},")));
    }
}

/// Every `attr="..."` value in `html`.
fn attr_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let pat = format!("{attr}=\"");
    html.match_indices(&pat)
        .map(|(i, _)| {
            let rest = &html[i + pat.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect()
}

#[test]
fn report_has_tables_settings_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let rs = results();
    let out = dir.path().join("report");
    let index = write_report(
        &out,
        &rs,
        "Torn-page protection",
        "untorn bench --repeat 2",
        "2 cores <test>",
    )
    .unwrap();
    assert_eq!(index, out.join("index.html"));
    let html = std::fs::read_to_string(&index).unwrap();
    for s in [
        "Torn-page protection",
        "untorn bench --repeat 2",
        "2 cores &lt;test&gt;",
        "vs full_pages",
        "buffer_pool",
        "64MiB",
        "real",
    ] {
        assert!(html.contains(s), "missing {s}");
    }
    assert!(html.contains(&vs(&rs[1], &rs[0])));
    let imgs = attr_values(&html, "src");
    assert_eq!(imgs.len(), 2 * 3, "{imgs:?}");
    let links = attr_values(&html, "href");
    let pngs: Vec<&str> = links
        .iter()
        .copied()
        .filter(|l| l.ends_with(".png"))
        .collect();
    assert!(pngs.len() >= 6, "{links:?}");
    for svg in &imgs {
        assert!(svg.ends_with(".svg"));
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(text.contains("<svg"), "{svg}");
        assert!(text.contains("full_pages"), "{svg} has no legend");
    }
    for png in pngs {
        let bytes = std::fs::read(out.join(png)).unwrap();
        assert!(bytes.len() > 1000, "{png}");
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{png}");
    }
    for l in links
        .iter()
        .filter(|l| !l.ends_with(".png") && !l.ends_with(".svg"))
    {
        assert!(Path::new(&out.join(l)).is_file(), "{l}");
    }
}

#[test]
fn report_states_what_is_resolved_and_flags_disturbed_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut rs = results();
    rs[3].runs[0].disturbed = true;
    rs[3].summarize();
    let index = write_report(dir.path(), &rs, "t", "untorn bench", "m").unwrap();
    let html = std::fs::read_to_string(index).unwrap();
    for s in [
        "double_writes vs full_pages on oltp_write_only: 1.53x [1.21, 1.92], resolved: \
         faster by 21-92 %",
        "double_writes vs full_pages on tpcb: 0.86x [0.66, 1.13], not resolved: the \
         interval contains 1",
        "Runs: 4, disturbed 1, excluded 0",
        "Runs: 4, disturbed 0, excluded 0",
        "runs disturbed: 1, excluded: 0",
        NOT_RESOLVED_LEGEND,
        "Per transaction, vs full_pages",
    ] {
        assert!(html.contains(s), "missing {s}");
    }
    // One error bar per pair, the unresolved one grey.
    assert_eq!(html.matches("<g class=\"ci\"").count(), 2);
    assert_eq!(html.matches("<g class=\"ci\" stroke=\"#999\"").count(), 1);
    assert_eq!(html.matches("<tr class=\"dist\">").count(), 1);
    assert_eq!(html.matches("<details open>").count(), 1);
}

/// The `<text>` elements of an SVG: (their y attribute, their text).
fn svg_texts(svg: &str) -> Vec<(&str, &str)> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let y = t.split(" y=\"").nth(1)?.split('"').next()?;
            let body = t.split_once('>')?.1.split("</text>").next()?;
            Some((y, body.trim()))
        })
        .collect()
}

/// A short run's plot labels each second at most once (it printed
/// `0 0 1 2 2 3 4 4 5`: half-second ticks without decimals), and its bold
/// line is the median run by TPS, not repeat 0 (issue 36).
#[test]
fn plots_label_seconds_once_and_draw_the_median_run_bold() {
    use untorn::lab::plot::{plot_metric, primary_run, Metric};
    let mut r = result("tpcb", "full_pages", &[100.0, 300.0, 200.0], &[]);
    for run in &mut r.runs {
        run.series.truncate(6);
    }
    assert_eq!(primary_run(&r).map(|run| run.repeat), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let lines = vec![("full_pages".to_string(), &r)];
    let files = plot_metric(dir.path(), "t", "tpcb", Metric::Tps, &lines).unwrap();
    let svg = std::fs::read_to_string(&files.svg).unwrap();
    let texts = svg_texts(&svg);
    // The x axis' labels: the numbers that share one y, the most of them.
    let mut by_y: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (y, t) in &texts {
        if t.parse::<f64>().is_ok() {
            by_y.entry(y).or_default().push(t);
        }
    }
    let x_labels = by_y.values().max_by_key(|v| v.len()).unwrap();
    let mut distinct = x_labels.clone();
    distinct.dedup();
    assert_eq!(&distinct, x_labels, "{texts:?}");
    assert!(x_labels.len() >= 3, "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|(_, t)| *t == "bold: the median run by TPS"),
        "{texts:?}"
    );
}
