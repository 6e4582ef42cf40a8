//! End-to-end tests of `untorn study` on the real binary with tiny sizes
//! (one round of 0.2 s runs): every study prints the seed's tables, ours,
//! one verdict line per claim and the notes, and writes its HTML report.
//! The figures are not checked (too short to mean anything); the verdict
//! logic is tested on synthetic intervals in src/lab/study/mod.rs.

mod common;

use common::untorn;
use std::ffi::OsStr;
use untorn::lab::study;

const VERDICTS: [&str; 3] = ["reproduced: ", "not reproduced: ", "not resolved: "];

fn run_study(name: &str) -> common::Run {
    let s = study::by_name(name).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let dbs = dir.path().join("dbs");
    let mut args: Vec<&OsStr> = ["study", name, "--tiny"].map(OsStr::new).to_vec();
    args.extend([OsStr::new("--report"), report.as_os_str()]);
    args.extend([OsStr::new("--dir"), dbs.as_os_str()]);
    let run = untorn(args);
    run.expect_code(0)
        .expect_stdout(&format!("untorn study {name}: seed {}", s.seed_file()))
        .expect_stdout("== The seed's figures")
        .expect_stdout("== Here")
        .expect_stdout("== Notes");
    // In a log (stderr is a pipe here) progress is whole lines, a line
    // per run at least, never `\r` rewrites (issue 36).
    assert!(!run.stderr.contains('\r'), "{}", run.context());
    assert!(
        run.stderr.contains("configuration 1 (round 1)\n"),
        "{}",
        run.context()
    );
    let out = &run.stdout;
    // Every table of the seed and of ours, with its caption.
    for t in s.seed_tables() {
        assert!(out.contains(&t.caption), "{}", run.context());
        for row in &t.rows {
            assert!(out.contains(row[0].trim()), "{}", run.context());
        }
    }
    let ours = out
        .split("== Here")
        .nth(1)
        .and_then(|rest| rest.split("== Verdicts").next())
        .unwrap();
    // Our tables: each caption starts with "Here", a table under it.
    let captions = ours.lines().filter(|l| l.starts_with("Here")).count();
    let headers = ours.lines().filter(|l| l.starts_with("|--")).count();
    assert!(captions >= 1 && captions == headers, "{}", run.context());
    // One verdict line per claim, in the claims' order.
    let verdicts: Vec<&str> = out
        .split("== Verdicts")
        .nth(1)
        .unwrap()
        .lines()
        .filter(|l| VERDICTS.iter().any(|v| l.starts_with(v)))
        .collect();
    let claims = s.claims();
    assert_eq!(verdicts.len(), claims.len(), "{}", run.context());
    for (line, claim) in verdicts.iter().zip(&claims) {
        assert!(
            line.contains(&claim.ratio) && line.contains(&claim.context),
            "{line} / {claim:?}"
        );
    }
    // The HTML report: the study's page and each plan's bench report.
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    for needle in [
        "The seed's figures",
        "Verdicts",
        "<svg class=\"ratios\"",
        "plan-0/index.html",
    ] {
        assert!(html.contains(needle), "no {needle:?} in the report");
    }
    assert_eq!(html.matches("<li class=").count(), claims.len());
    assert!(report.join("plan-0/index.html").exists());
    assert!(report.join("plan-0/results.json").exists());
    run
}

#[test]
fn dwb_vs_fpw_prints_both_tables_and_a_verdict_per_claim() {
    run_study("dwb-vs-fpw");
}

#[test]
fn dw_eviction_cliff_runs_end_to_end() {
    run_study("dw-eviction-cliff");
}

#[test]
fn checksums_runs_end_to_end() {
    run_study("checksums");
}

#[test]
fn sorted_checkpoint_runs_end_to_end() {
    // TPC-C stands in for DBT-2 unless --workload says otherwise.
    run_study("sorted-checkpoint").expect_stdout("Here. TPC-C (this lab's DBT-2)");
}

#[test]
fn wal_block_size_runs_end_to_end() {
    run_study("wal-block-size");
}

#[test]
fn list_names_every_study_and_unknown_names_are_refused() {
    let run = untorn(["study", "--list"]);
    run.expect_code(0);
    for s in study::all() {
        run.expect_stdout(s.name());
    }
    untorn(["study", "nope", "--tiny"]).expect_refused(&["unknown study", "dwb-vs-fpw"]);
}

#[test]
fn rounds_given_are_the_rounds_run() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let dbs = dir.path().join("dbs");
    let mut args: Vec<&OsStr> = [
        "study",
        "sorted-checkpoint",
        "--tiny",
        "--rounds",
        "2",
        "--workload",
        "tpcb",
    ]
    .map(OsStr::new)
    .to_vec();
    args.extend([OsStr::new("--report"), report.as_os_str()]);
    args.extend([OsStr::new("--dir"), dbs.as_os_str()]);
    let run = untorn(args);
    // The tiny size runs one round on its own.
    run.expect_code(0)
        .expect_stdout("Rounds run: plan 1 tpcb: 2.")
        .expect_stdout("Here. tpcb (pgbench's, not DBT-2)");
    untorn(["study", "sorted-checkpoint", "--tiny", "--rounds", "0"])
        .expect_code(2)
        .expect_stderr("--rounds");
}
