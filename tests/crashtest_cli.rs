//! `untorn crashtest` end to end: the real binary, its flags, its JSON, its
//! exit status and its replay command.

use std::process::Command;
use untorn::crashlab::{CrashTestOptions, Fault};
use untorn::file::FileKind;
use untorn::TornPageProtection;

fn untorn(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_untorn"))
        .args(args)
        .output()
        .expect("untorn runs")
}

#[test]
fn every_flag_reaches_the_laboratory_and_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = untorn(&[
        "crashtest",
        "--protection",
        "full_pages",
        "--iterations",
        "25",
        "--seed",
        "5",
        "--page-size",
        "4096",
        "--threads",
        "2",
        "--buffer-pool-pages",
        "48",
        "--atomic-page-writes",
        "--faults",
        "drop,reorder,tear,eio,zero,unreadable",
        "--eio-files",
        "wal",
        "--trace-dir",
        dir.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("full_pages") && stdout.contains("pass"),
        "{stdout}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let o = &report["options"];
    assert_eq!(o["page_size"], 4096);
    assert_eq!(o["threads"], 2);
    assert_eq!(o["buffer_pool_pages"], 48);
    assert_eq!(o["atomic_page_writes"], true);
    assert_eq!(o["eio_targets"], serde_json::json!(["wal"]));
    assert_eq!(o["trace_dir"], dir.path().to_str().unwrap());
    let mode = &report["modes"][0];
    assert_eq!(mode["mode"], "full_pages");
    assert_eq!(mode["iterations"], 25);
    assert_eq!(mode["lost_commits"], 0);
    assert!(mode["faults"]["sectors_unreadable"].is_u64(), "{mode}");
}

#[test]
fn a_replay_command_with_every_option_runs_as_printed() {
    let opts = CrashTestOptions {
        protections: vec![TornPageProtection::Off],
        seed: 9,
        page_size: 4096,
        threads: 2,
        faults: vec![Fault::Drop, Fault::Tear, Fault::Eio],
        eio_targets: vec![FileKind::Data],
        buffer_pool_pages: Some(40),
        ..CrashTestOptions::default()
    };
    let cmd = opts.replay_command(TornPageProtection::Off, 3);
    let args: Vec<&str> = cmd.split_whitespace().collect();
    assert_eq!(args[0], "untorn");
    for flag in [
        "--page-size",
        "--threads",
        "--eio-files",
        "--buffer-pool-pages",
    ] {
        assert!(args.contains(&flag), "{cmd}");
    }
    let out = untorn(&args[1..]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{cmd}\n{stdout}");
    assert!(stdout.contains("off: 1 iterations"), "{stdout}");
}

#[test]
fn bad_flags_are_refused_clearly() {
    for (args, says) in [
        (&["crashtest", "--faults", "drop,shred"][..], "shred"),
        (&["crashtest", "--page-size", "1000"], "page size 1000"),
        (&["crashtest", "--eio-files", "swap"], "swap"),
        (&["crashtest", "--threads", "0"], "threads 0"),
        (&["crashtest", "--protection", "sideways"], "sideways"),
        (&["crashtest", "--iterations", "0"], "iterations 0"),
        // Ran without faults, as `none`, saying nothing.
        (&["crashtest", "--faults", ""], "no fault named"),
        // The range saturated: fewer iterations than reported.
        (
            &["crashtest", "--first-iteration", "18446744073709551615"],
            "past the last iteration number",
        ),
        (
            &["crashtest", "--data-checksums", "off"],
            "double_writes needs page checksums",
        ),
    ] {
        let out = untorn(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// In a log (stderr not a terminal) progress is a line every few seconds
/// and at each mode's end, never `\r` rewrites (issue 36).
#[test]
fn progress_in_a_log_is_whole_lines() {
    let out = untorn(&[
        "crashtest",
        "--protection",
        "off",
        "--iterations",
        "30",
        "--faults",
        "none",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains('\r'), "{stderr:?}");
    assert!(
        stderr.contains("off: 30/30 iterations, 0 failed\n"),
        "{stderr:?}"
    );
}

/// Dropped writes tear no page, yet double writes restore hundreds: the
/// table counted every restore as a repair ("torn pages injected 0" beside
/// "repaired from double writes 234"). Its column now counts damaged
/// pages; the restores of missing and older pages are a line below
/// (issue 36).
#[test]
fn double_writes_restores_of_dropped_writes_are_not_called_repairs() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = untorn(&[
        "crashtest",
        "--protection",
        "double_writes",
        "--iterations",
        "30",
        "--faults",
        "drop",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mode = &report["modes"][0];
    assert_eq!(mode["torn_pages_injected"], 0, "{mode}");
    assert_eq!(
        mode["damaged_pages_repaired_from_double_writes"], 0,
        "{mode}"
    );
    let restored = mode["pages_repaired_from_double_writes"].as_u64().unwrap();
    assert!(restored > 0, "{mode}");
    assert!(
        stdout.contains(&format!(
            "pages restored from double writes: {restored}, 0 of them damaged"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("damaged pages repaired from double writes"));
}

/// `off` passes where it lost torn pages by name: the verdict says the
/// loss was detected, not prevented (issue 36).
#[test]
fn a_pass_that_lost_data_says_so() {
    let out = untorn(&[
        "crashtest",
        "--protection",
        "off",
        "--iterations",
        "60",
        "--faults",
        "tear",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("data lost, detected"), "{stdout}");
    assert!(stdout.contains("pass, loss detected"), "{stdout}");
    assert!(
        stdout.contains("detected, not prevented: the mode repairs nothing"),
        "{stdout}"
    );
}
