//! End-to-end tests of `untorn bench` on the real binary: the JSON report
//! and the refusal of settings it does not have.

mod common;

use common::{bench_into, untorn, Run};
use std::ffi::OsStr;
use std::path::Path;

/// `untorn bench` with tiny sizes and durations: the JSON has every field
/// the issue names, for every (workload, mode); tpcb's invariant is checked
/// by the run itself (a broken sum fails the command).
#[test]
fn bench_writes_json_with_every_field_and_keeps_tpcb_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let dbs = dir.path().join("dbs");
    let (out, v) = bench_into(
        dir.path(),
        &[
            "--workload",
            "tpcb,oltp_read_write",
            "--duration",
            "0.4",
            "--warmup",
            "0.1",
            "--repeat",
            "2",
            "--clients",
            "3",
            "--tables",
            "2",
            "--table-size",
            "500",
            "--scale",
            "1",
        ],
    );
    out.expect_code(0)
        .expect_stdout("vs full_pages")
        .expect_stdout("vs off")
        .expect_stdout("KB written/txn")
        .expect_stdout("Regime: tpcb: data ")
        .expect_stdout("3 clients.");
    let results = v.as_array().unwrap();
    // The default modes are seed 003's: FPW (without and with lz4), DWB, off.
    assert_eq!(results.len(), 8, "2 workloads x 4 modes");
    let modes: Vec<String> = results[..4]
        .iter()
        .map(|r| {
            let compression = r["settings"]["wal_compression"].as_str().unwrap();
            format!("{} {compression}", r["protection"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        modes,
        [
            "full_pages off",
            "full_pages lz4",
            "double_writes off",
            "off off"
        ]
    );
    for r in results {
        for field in [
            "workload",
            "protection",
            "tps",
            "tps_runs",
            "latency_ms",
            "wal_bytes_per_txn",
            "wal_fpi",
            "dw_page_writes",
            "dw_fsyncs",
            "data_writes",
            "data_fsyncs",
            "client_page_writes",
            "bgwriter_page_writes",
            "checkpointer_page_writes",
            "client_write_pct",
            "checkpoints",
            "commits_per_wal_fsync",
            "cpu_us_per_txn",
            "page_writes_per_txn",
            "kb_written_per_txn",
            "io",
            "data_bytes",
            "device",
            "settings",
        ] {
            assert!(r.get(field).is_some(), "missing {field} in {r}");
        }
        for q in ["avg", "p90", "p99", "max"] {
            assert!(r["latency_ms"][q].is_number(), "{r}");
        }
        assert_eq!(r["tps_runs"].as_array().unwrap().len(), 2);
        assert!(r["tps"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["settings"]["torn_page_protection"], r["protection"]);
        // The other modes of the workload, every figure's ratio paired by
        // round with its interval.
        let vs = r["vs"].as_array().unwrap();
        assert_eq!(vs.len(), 3, "{r}");
        assert_eq!(vs[0]["rounds"], 2, "{r}");
        let tps = &vs[0]["tps"];
        assert_eq!(tps["pairs"], 2, "{r}");
        assert!(tps["low"].as_f64() <= tps["ratio"].as_f64(), "{r}");
        assert!(vs[0]["wal_bytes_per_txn"]["high"].is_number(), "{r}");
        assert!(r["wal_fsyncs_per_txn"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["runs"][0]["data_reads"].is_u64(), "{r}");
        // Each run carries every view's change over its measured part.
        for run in r["runs"].as_array().unwrap() {
            let s = &run["statistics"];
            let fsyncs = s["wal"]["fsyncs"].as_u64().unwrap();
            assert!(fsyncs >= 1, "commits fsync the WAL: {run}");
            // Not >= 1: with one commit per fsync, the fsyncs of new WAL
            // segments and of checkpoint records come on top.
            let per_fsync = s["wal"]["commits_per_fsync"].as_f64().unwrap();
            assert!(per_fsync > 0.5, "{run}");
            assert!(s["io"]
                .as_array()
                .unwrap()
                .iter()
                .any(|row| row["kind"] == "wal" && row["fsyncs"].as_u64() >= Some(1)));
            let log = s["checkpoint_log"].as_array().unwrap();
            let c = &s["checkpointer"];
            let done = c["timed"].as_u64().unwrap() + c["requested"].as_u64().unwrap();
            assert_eq!(log.len() as u64, done, "{run}");
        }
    }
    assert!(dir.path().join("report/index.html").exists());
    // Without --keep the databases are removed.
    let left: Vec<_> = std::fs::read_dir(&dbs).unwrap().collect();
    assert!(left.is_empty(), "databases left in --dir: {left:?}");
}

#[test]
fn bench_refuses_settings_it_does_not_have() {
    for args in [
        ["--protection", "triple_writes"],
        ["--wal-compression", "pglz"],
        ["--checkpoint-sort", "sideways"],
        ["--device", "floppy"],
        ["--bgwriter", "sometimes"],
        ["--workload", "tpcx"],
        ["--wal-block-size", "3KB"],
    ] {
        let run = untorn(["bench", args[0], args[1]]);
        run.expect_refused(&[]);
        let named = args[1] == "3KB" && run.stderr.contains("wal_block_size");
        assert!(
            named || run.stderr.contains(args[1]),
            "{args:?} should be named\n{}",
            run.context()
        );
    }
}

/// Keying and think times are TPC-C's: asked of another workload, the
/// run is refused before anything is loaded, naming the flag.
#[test]
fn bench_refuses_think_times_for_a_workload_without_terminals() {
    let run = untorn(["bench", "--workload", "tpcc,tpcb", "--think"]);
    run.expect_refused(&[]);
    run.expect_stderr("--think: tpcb has no keying or think times");
}

/// Times and sizes a run cannot use are refused by name: NaN and infinite
/// times panicked in `Duration::from_secs_f64`; negative and NaN warm-ups
/// and checkpoint timeouts were clamped; a zero buffer pool was raised to
/// 2 MB and a zero max_wal_size ran (issue 36).
#[test]
fn bench_refuses_times_and_sizes_it_cannot_use() {
    for (flag, says) in [
        ("--duration=nan", "--duration"),
        ("--duration=-1", "--duration"),
        ("--warmup=nan", "--warmup"),
        ("--warmup=-1", "--warmup"),
        ("--checkpoint-timeout=nan", "--checkpoint-timeout"),
        ("--checkpoint-timeout=0.01", "checkpoint_timeout"),
        ("--budget=inf", "--budget"),
        ("--buffer-pool=0", "buffer_pool"),
        ("--max-wal-size=0", "max_wal_size"),
    ] {
        let run = untorn(["bench", flag]);
        assert_eq!(run.code, Some(2), "{flag}\n{}", run.context());
        assert!(!run.stderr.contains("panicked"), "{}", run.context());
        run.expect_stderr(says);
    }
}

/// `bench-checksums --seconds 0` (and NaN) panicked in the measuring
/// thread (issue 36); every time it cannot use is refused by name.
#[test]
fn bench_checksums_refuses_a_time_it_cannot_measure() {
    for seconds in ["0", "nan", "-1", "inf", "4000"] {
        let run = untorn([
            "bench-checksums".to_string(),
            format!("--seconds={seconds}"),
        ]);
        run.expect_refused(&["seconds"]);
    }
}

/// One round of 0.2-s runs of update_non_index on 500 rows: enough to
/// see which configurations ran, and how.
const TINY_RUN: [&str; 12] = [
    "--workload",
    "oltp_update_non_index",
    "--duration",
    "0.2",
    "--warmup",
    "0.05",
    "--repeat",
    "1",
    "--tables",
    "1",
    "--table-size",
    "500",
];

/// `--protection atomic` runs on a device that writes pages whole (the
/// `nvme-atomic` model; before the fix its template, loaded without the
/// model, was refused) and is refused on a disk without atomic writes.
#[test]
fn bench_runs_atomic_on_an_atomic_device_and_refuses_it_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let mut flags = vec!["--device", "nvme-atomic", "--protection", "atomic,off"];
    flags.extend(TINY_RUN);
    let (run, v) = common::bench_into(dir.path(), &flags);
    run.expect_code(0);
    let modes: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["protection"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["atomic", "off"]);
    let plain = tempfile::tempdir().unwrap();
    let probe = plain.path().join("probe");
    std::fs::write(&probe, b"").unwrap();
    let figures = untorn::file::atomic::AtomicWrites::probe(&probe).unwrap();
    if figures.page_writes(8192) == untorn::file::atomic::AtomicPageWrites::Unsupported {
        let mut flags = vec!["--protection", "atomic"];
        flags.extend(TINY_RUN);
        common::bench_into(plain.path(), &flags)
            .0
            .expect_refused(&["atomic needs", "statx"]);
    }
}

/// `--clients 1,3` is an axis: each mode runs once per count, labelled
/// with it, and each run used that many client threads.
#[test]
fn bench_clients_is_an_axis_of_the_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let mut flags = vec!["--protection", "off,double_writes", "--clients", "1,3"];
    flags.extend(TINY_RUN);
    let (run, v) = common::bench_into(dir.path(), &flags);
    run.expect_code(0).expect_stdout("clients=3");
    let mut seen = Vec::new();
    for r in v.as_array().unwrap() {
        let mode = r["settings"]["torn_page_protection"]
            .as_str()
            .unwrap()
            .to_string();
        let clients: usize = r["settings"]["clients"].as_str().unwrap().parse().unwrap();
        for one in r["runs"].as_array().unwrap() {
            assert_eq!(one["clients"], clients, "{mode}: {one}");
        }
        seen.push((mode, clients));
    }
    let want = [
        ("off", 1),
        ("off", 3),
        ("double_writes", 1),
        ("double_writes", 3),
    ];
    assert_eq!(seen, want.map(|(m, n)| (m.to_string(), n)).to_vec());
    // Zero clients is refused.
    let zero = common::bench_into(dir.path(), &["--clients", "4,0"]).0;
    zero.expect_refused(&["--clients"]);
}

/// `--aa` runs one configuration under two names; `--repeat auto` stops
/// at whole order cycles and says why: here the most rounds allowed, as no
/// two runs give a ratio within ±0.001 %.
#[test]
fn bench_aa_runs_one_configuration_twice_and_auto_says_why_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let report = dir.path().join("report");
    let mut args: Vec<&OsStr> = [
        "bench",
        "--aa",
        "--protection",
        "off,full_pages",
        "--workload",
        "oltp_write_only",
        "--duration",
        "0.2",
        "--warmup",
        "0.05",
        "--repeat",
        "auto",
        "--precision",
        "0.001",
        "--max-rounds",
        "4",
        "--clients",
        "2",
        "--tables",
        "1",
        "--table-size",
        "500",
    ]
    .map(OsStr::new)
    .to_vec();
    for (flag, path) in [("--json", &json), ("--report", &report)] {
        args.extend([OsStr::new(flag), path.as_os_str()]);
    }
    untorn(args)
        .expect_code(0)
        .expect_stdout("off copy=a")
        .expect_stdout("off copy=b")
        .expect_stdout("oltp_write_only: 4 rounds; the most rounds allowed were run");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let results = v.as_array().unwrap();
    assert_eq!(results.len(), 2, "the first configuration, twice");
    let mut a = results[0]["settings"].as_object().unwrap().clone();
    let mut b = results[1]["settings"].as_object().unwrap().clone();
    assert_eq!(a.remove("copy"), Some("a".into()));
    assert_eq!(b.remove("copy"), Some("b".into()));
    assert_eq!(a, b);
    for r in results {
        assert_eq!(r["protection"], "off");
        assert_eq!(r["rounds"], 4);
        assert_eq!(r["stop_reason"], "max_rounds");
        assert_eq!(r["runs"].as_array().unwrap().len(), 4);
    }
}

/// `--drop-disturbed`: each run carries the noise monitor's report and its
/// 100 ms series, and exactly the disturbed runs are excluded (which runs
/// are disturbed depends on the machine, so only that is asserted).
#[test]
fn bench_drop_disturbed_excludes_exactly_the_disturbed_runs() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let mut args: Vec<&OsStr> = [
        "bench",
        "--workload",
        "tpcb",
        "--duration",
        "0.5",
        "--warmup",
        "0.1",
        "--repeat",
        "2",
        "--drop-disturbed",
    ]
    .map(OsStr::new)
    .to_vec();
    let report = dir.path().join("report");
    for (flag, path) in [("--json", &json), ("--report", &report)] {
        args.extend([OsStr::new(flag), path.as_os_str()]);
    }
    let run = untorn(args);
    run.expect_code(0);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let runs: Vec<&serde_json::Value> = v
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["runs"].as_array().unwrap())
        .collect();
    assert_eq!(runs.len(), 8, "4 modes x 2 rounds");
    let mut disturbed = 0;
    for r in &runs {
        assert_eq!(r["excluded"], r["disturbed"], "{r}");
        assert!(!r["fine_series"].as_array().unwrap().is_empty(), "{r}");
        if cfg!(target_os = "linux") {
            let n = &r["noise"];
            assert!(n["probe_copy_ms"].as_f64().unwrap() > 0.0, "{n}");
            assert!(n["probe_copy_ratio"].as_f64().unwrap() > 0.0, "{n}");
            let why = n["reasons"].as_array().unwrap();
            assert_eq!(why.is_empty(), r["disturbed"] == false, "{n}");
        }
        disturbed += usize::from(r["disturbed"] == true);
    }
    if cfg!(target_os = "linux") {
        // The noise line comes after the stop line ("tpcb: 2 rounds; ...").
        let line = run.line_starting(&format!("tpcb: {disturbed} of 8 runs disturbed"));
        assert_eq!(line.ends_with(", excluded"), disturbed > 0, "{line}");
    }
}

/// `untorn bench` of a small oltp_write_only (2 rounds, 2 clients, one
/// table of 500 rows) with `flags`, writing its JSON to `json` and its
/// report to `report` (never the default `untorn-report/`, which is the
/// user's: a test once wrote its run over the main job's report there).
fn small_write_only_bench(flags: &[&str], json: &Path, report: &Path) -> Run {
    let mut args: Vec<&OsStr> = [
        "bench",
        "--workload",
        "oltp_write_only",
        "--warmup",
        "0.05",
        "--repeat",
        "2",
        "--clients",
        "2",
        "--tables",
        "1",
        "--table-size",
        "500",
        // Checkpoints within runs of a fraction of a second.
        "--checkpoint-timeout",
        "0.1",
    ]
    .map(OsStr::new)
    .to_vec();
    args.extend(flags.iter().map(OsStr::new));
    args.extend([OsStr::new("--json"), json.as_os_str()]);
    args.extend([OsStr::new("--report"), report.as_os_str()]);
    untorn(args)
}

/// In a log (stderr not a terminal) progress is whole lines, one per run
/// at least; it was nothing at all, indicatif drawing only on a terminal
/// (issue 36).
#[test]
fn bench_progress_in_a_log_is_whole_lines() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let report = dir.path().join("report");
    let run = small_write_only_bench(
        &["--protection", "off", "--duration", "0.2"],
        &json,
        &report,
    );
    run.expect_code(0);
    assert!(!run.stderr.contains('\r'), "{}", run.context());
    assert!(
        run.stderr.contains(" 2/2 runs  oltp_write_only: off "),
        "{}",
        run.context()
    );
}

/// `--double-write-buffer-size 64KB,128KB`: double_writes once per size,
/// the other modes once, each run with its size in force.
#[test]
fn bench_compares_double_write_area_sizes_for_double_writes_only() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let report = dir.path().join("report");
    let run = small_write_only_bench(
        &[
            "--protection",
            "double_writes,off",
            "--double-write-buffer-size",
            "64KB,128KB",
            "--duration",
            "0.2",
        ],
        &json,
        &report,
    );
    run.expect_code(0);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut got: Vec<(String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let size = r["settings"]["double_write_buffer_size"].as_str().unwrap();
            (
                r["protection"].as_str().unwrap().to_string(),
                size.to_string(),
            )
        })
        .collect();
    got.sort();
    let want = [
        ("double_writes", "131072"),
        ("double_writes", "65536"),
        ("off", "65536"),
    ]
    .map(|(p, s)| (p.to_string(), s.to_string()));
    assert_eq!(got, want);
    for r in v.as_array().unwrap() {
        if r["protection"] == "double_writes" {
            // Page images went through the area of that size.
            assert!(r["dw_page_writes"].as_u64().unwrap() > 0, "{r}");
        }
    }
}

/// A short double_writes bench over one axis of the area's settings, with
/// a 64 KB area: the JSON's rows.
fn small_double_writes_axis(flag: &str, values: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let run = small_write_only_bench(
        &[
            "--protection",
            "double_writes",
            "--double-write-buffer-size",
            "64KB",
            flag,
            values,
            "--duration",
            "0.5",
        ],
        &json,
        &dir.path().join("report"),
    );
    run.expect_code(0);
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

/// `--double-write-deferred-size auto,16KB`: the file of deferred pages
/// sized apart from the area; at two slots the checkpoints' pages find it
/// full and go through the area instead.
#[test]
fn bench_compares_deferred_file_sizes_and_each_is_in_force() {
    let v = small_double_writes_axis("--double-write-deferred-size", "auto,16KB");
    // By size: (deferred pages, pages through the area) of the checkpointer.
    let mut by_size = std::collections::BTreeMap::new();
    for r in v.as_array().unwrap() {
        let size = r["settings"]["double_write_deferred_size"]
            .as_str()
            .unwrap();
        let sum = |field: &str| -> u64 {
            r["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|run| {
                    run["statistics"]["double_write"]["checkpointer"][field]
                        .as_u64()
                        .unwrap()
                })
                .sum()
        };
        by_size.insert(size.to_string(), (sum("deferred"), sum("pages")));
    }
    let sizes: Vec<&str> = by_size.keys().map(String::as_str).collect();
    // auto: 16 times the 64 KB area.
    assert_eq!(sizes, ["1048576", "16384"]);
    let (auto_deferred, _) = by_size["1048576"];
    let (small_deferred, small_area) = by_size["16384"];
    assert!(small_area > 0, "{by_size:?}");
    assert!(small_deferred < auto_deferred, "{by_size:?}");
}

#[test]
fn a_deferred_file_size_out_of_range_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let run = untorn([
        "bench",
        "--protection",
        "double_writes",
        "--double-write-deferred-size",
        "12KB",
        "--workload",
        "oltp_write_only",
        "--duration",
        "0.2",
        "--tables",
        "1",
        "--table-size",
        "100",
        "--dir",
        dir.path().join("db").to_str().unwrap(),
    ]);
    run.expect_refused(&["double_write_deferred_size", "12288 bytes"]);
}

/// `--double-write-flush-after 0,1`: each run with its value in force;
/// at 1 each checkpoint writes `dw/deferred` out a page at a time before
/// its fsync, at 0 the fsync alone writes it.
#[test]
fn bench_compares_deferred_flush_after_and_each_is_in_force() {
    let v = small_double_writes_axis("--double-write-flush-after", "0,1");
    // By value: (pages deferred, writeback requests on double-write files).
    let mut by_value = std::collections::BTreeMap::new();
    for r in v.as_array().unwrap() {
        let value = r["settings"]["double_write_flush_after"].as_str().unwrap();
        let (mut deferred, mut writebacks) = (0, 0);
        for run in r["runs"].as_array().unwrap() {
            let st = &run["statistics"];
            for shard in st["double_write"].as_object().unwrap().values() {
                deferred += shard["deferred"].as_u64().unwrap_or(0);
            }
            for io in st["io"].as_array().unwrap() {
                if io["kind"] == "double_write" {
                    writebacks += io["writebacks"].as_u64().unwrap();
                }
            }
        }
        by_value.insert(value.to_string(), (deferred, writebacks));
    }
    let values: Vec<&str> = by_value.keys().map(String::as_str).collect();
    assert_eq!(values, ["0", "1"]);
    assert!(by_value["0"].0 > 0 && by_value["1"].0 > 0, "{by_value:?}");
    assert_eq!(by_value["0"].1, 0, "{by_value:?}");
    assert!(by_value["1"].1 > 0, "{by_value:?}");
}

#[test]
fn a_flush_after_out_of_range_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let run = untorn([
        "bench",
        "--protection",
        "double_writes",
        "--double-write-flush-after",
        "65537",
        "--workload",
        "oltp_write_only",
        "--duration",
        "0.2",
        "--dir",
        dir.path().join("db").to_str().unwrap(),
    ]);
    run.expect_refused(&["double_write_flush_after", "65537"]);
}
