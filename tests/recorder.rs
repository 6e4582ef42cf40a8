//! The external crash laboratory's recorder (issue 38,
//! src/crashlab/external/): every intercepted call of a small C program is
//! in the log, the replay gives the live directory back byte for byte, and
//! `untorn serve` recorded under pgbench, killed, gives crash images that
//! keep every acknowledged commit under full_pages.

mod common;

use common::serve::client;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, UNIX_EPOCH};
use untorn::crashlab::external::image::{self, copy_tree, Faults};
use untorn::crashlab::external::log::{self, Log, Op};
use untorn::crashlab::external::{recorder, replay::Model};
use untorn::rng::SplitMix64;

fn library() -> PathBuf {
    recorder::build(Path::new(env!("CARGO_TARGET_TMPDIR"))).expect("build the recorder")
}

fn run_calls(dir: &Path, outside: &Path, log_path: &Path) {
    // Built beside `dir`, in the caller's temporary directory: two tests
    // building one shared path raced (one ran it while the other's cc
    // wrote it: "Text file busy").
    let bin = dir.with_file_name("recorder_calls");
    let cc = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/recorder_calls.c"
        ))
        .status()
        .unwrap();
    assert!(cc.success());
    let mut c = Command::new(&bin);
    c.arg(dir).arg(outside);
    recorder::under_recorder(&mut c, &library(), dir, log_path);
    assert!(c.status().unwrap().success());
}

#[test]
fn every_intercepted_call_is_logged_and_the_replay_matches_the_live_directory() {
    let t = tempfile::tempdir().unwrap();
    let (dir, snap, log_path) = (
        t.path().join("d"),
        t.path().join("snap"),
        t.path().join("log"),
    );
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("before"), b"in the snapshot").unwrap();
    copy_tree(&dir, &snap).unwrap();
    run_calls(&dir, &t.path().join("outside"), &log_path);

    let log = Log::read(&log_path).unwrap();
    let ops: BTreeSet<_> = log.records.iter().map(|r| format!("{:?}", r.op)).collect();
    for op in [
        Op::Open,
        Op::Write,
        Op::Fsync,
        Op::Fdatasync,
        Op::Syncfs,
        Op::SyncFileRange,
        Op::Truncate,
        Op::Fallocate,
        Op::Rename,
        Op::Link,
        Op::Unlink,
        Op::Mkdir,
        Op::Rmdir,
        Op::Dup,
        Op::Close,
    ] {
        assert!(
            ops.contains(&format!("{op:?}")),
            "no {op:?} record: {ops:?}"
        );
    }
    let writes = |f: &dyn Fn(&log::Record) -> bool| log.records.iter().filter(|r| f(r)).count();
    // write, pwrite, pwrite64, writev, pwritev, pwritev2, the one after the
    // rename (a); write, the O_APPEND write (b); four through duplicates and
    // one O_DSYNC (c).
    assert_eq!(
        writes(&|r| r.op == Op::Write),
        7 + 2 + 5,
        "{:#?}",
        log.records
    );
    assert_eq!(
        writes(&|r| r.op == Op::Write && r.flags & log::F_DSYNC != 0),
        1
    );
    assert_eq!(
        writes(&|r| r.op == Op::Write && r.offset == 1234 && r.length == 4321),
        1
    );
    assert_eq!(writes(&|r| r.op == Op::Dup), 4);
    assert_eq!(
        writes(&|r| r.path.contains("outside")),
        0,
        "outside recorded"
    );
    assert_eq!(writes(&|r| r.op == Op::Mkdir), 3);

    let mut model = Model::from_snapshot(&snap, &log).unwrap();
    model.replay_to(log.records.len());
    assert!(model.unplaced.is_empty(), "{:?}", model.unplaced);
    let live = image::live_view(&model);
    assert_eq!(live.diff(&dir).unwrap(), Vec::<String>::new());
    // Written out, the replay is the live directory.
    let out = t.path().join("out");
    live.write_to(&out).unwrap();
    let mut again = Model::from_snapshot(&out, &log).unwrap();
    again.replay_to(0);
    assert_eq!(
        image::live_view(&again).diff(&dir).unwrap(),
        Vec::<String>::new()
    );

    // The log ends with a syncfs: every crash there keeps everything.
    for seed in 0..20 {
        let (img, c) = image::crash(
            &model,
            Faults {
                tear: true,
                sector: 512,
            },
            &mut SplitMix64::new(seed),
        );
        assert_eq!(c.pending_writes, 0);
        assert_eq!(img.diff(&dir).unwrap(), Vec::<String>::new());
    }
    // Before the first fsync of `a`, its writes are pending: some crash
    // loses or tears them, and none keeps a name the directory sync had not
    // covered beyond a prefix.
    let first_fsync = log.records.iter().position(|r| r.op == Op::Fsync).unwrap();
    let mut early = Model::from_snapshot(&snap, &log).unwrap();
    early.replay_to(first_fsync);
    let differs = (0..20).any(|seed| {
        let (img, c) = image::crash(
            &early,
            Faults {
                tear: true,
                sector: 512,
            },
            &mut SplitMix64::new(seed),
        );
        assert!(c.pending_writes >= 6);
        !image::live_view(&early)
            .files
            .values()
            .eq(img.files.values())
    });
    assert!(differs, "no crash changed anything");

    // A change the recorder did not see (as an mmap write would be) is
    // reported.
    std::fs::write(dir.join("c3"), b"changed behind the recorder's back").unwrap();
    let diff = live.diff(&dir).unwrap();
    assert!(diff.len() == 1 && diff[0].starts_with("c3:"), "{diff:?}");
}

#[test]
fn a_torn_write_leaves_each_sector_old_or_new() {
    let mut rng = SplitMix64::new(7);
    for _ in 0..200 {
        let old = vec![1u8; 4096];
        let new = vec![2u8; 8192];
        let mut bytes = old.clone();
        image::tear(&mut bytes, 1024, &new, 512, &mut rng);
        assert!(bytes.len() >= 4096 && bytes.len() <= 9216 && bytes.len().is_multiple_of(512));
        for s in bytes.chunks(512) {
            assert!(s.iter().all(|&b| b == s[0]), "a sector mixes old and new");
        }
    }
}

/// `untorn serve` on `db`, under the recorder when `record` names the
/// library and log; returns it and its port.
fn serve(db: &Path, record: Option<(&Path, &Path)>) -> (std::process::Child, u16) {
    let mut c = common::serve_command(
        db,
        &[
            "--torn-page-protection",
            "full_pages",
            "--checkpoint-timeout",
            "1",
        ],
    );
    if let Some((lib, log_path)) = record {
        recorder::under_recorder(&mut c, lib, db, log_path);
    }
    let mut child = c.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let port = line
        .rsplit_once("listening on 127.0.0.1:")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    (child, port)
}

fn pgbench(port: u16, args: &[&str]) -> std::process::Output {
    let mut c = client("pgbench");
    c.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "bench"])
        .args(args)
        .arg("bench");
    c.output().unwrap()
}

/// Completion times (ns since the epoch) of the transactions pgbench
/// logged with -l: every one was acknowledged.
fn acknowledged(dir: &Path) -> Vec<u64> {
    let mut acks = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        for l in text.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() >= 6 && f[2].parse::<u64>().is_ok() {
                let (s, us): (u64, u64) = (f[4].parse().unwrap(), f[5].parse().unwrap());
                acks.push(s * 1_000_000_000 + us * 1000);
            }
        }
    }
    acks
}

#[test]
fn serve_killed_under_the_recorder_gives_images_that_keep_every_commit() {
    let t = tempfile::tempdir().unwrap();
    let (db, snap, log_path) = (
        t.path().join("db"),
        t.path().join("snap"),
        t.path().join("log"),
    );
    let (mut child, port) = serve(&db, None);
    assert!(pgbench(port, &["-i", "-s", "1"]).status.success());
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    copy_tree(&db, &snap).unwrap();

    let lib = library();
    let (mut child, port) = serve(&db, Some((&lib, &log_path)));
    let logs = t.path().join("pgbench");
    std::fs::create_dir(&logs).unwrap();
    let prefix = format!("--log-prefix={}/tx", logs.display());
    let bench =
        std::thread::spawn(move || pgbench(port, &["-n", "-c", "2", "-T", "6", "-l", &prefix]));
    std::thread::sleep(Duration::from_secs(4));
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let _ = bench.join().unwrap();
    let acks = acknowledged(&logs);
    assert!(acks.len() > 10, "only {} commits acknowledged", acks.len());

    let log = Log::read(&log_path).unwrap();
    let n = log.records.len();
    let mut model = Model::from_snapshot(&snap, &log).unwrap();
    model.replay_to(n);
    assert!(model.unplaced.is_empty(), "{:?}", model.unplaced);
    let diff = image::live_view(&model).diff(&db).unwrap();
    assert!(diff.is_empty(), "unrecorded changes: {diff:?}");

    let mut rng = SplitMix64::new(38);
    let mut control_losses = 0;
    for i in 0..4 {
        // Cuts spread over the run, the last at its end.
        let cut = if i == 3 {
            n
        } else {
            n / 4 * (i + 1) + rng.below(n as u64 / 8) as usize
        };
        let at = log.records.get(cut).map_or(killed, |r| r.time_ns);
        let kept_before = acks.iter().filter(|&&a| a < at).count() as u64;
        let mut m = Model::from_snapshot(&snap, &log).unwrap();
        m.replay_to(cut);
        let (img, counts) = image::crash(
            &m,
            Faults {
                tear: true,
                sector: 512,
            },
            &mut rng,
        );
        let dir = t.path().join(format!("image{i}"));
        img.write_to(&dir).unwrap();
        let check = common::untorn_on("check", &dir, &[]);
        assert_eq!(
            check.code,
            Some(0),
            "image {i} (cut {cut}, {counts:?}):\n{}",
            check.context()
        );
        let rows = check
            .stdout
            .lines()
            .find_map(|l| l.split_once("pgbench_history: ").map(|(_, r)| r))
            .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no history count:\n{}", check.stdout));
        assert!(
            rows >= kept_before,
            "image {i} (cut {cut} of {n}): {rows} history rows, {kept_before} commits acknowledged before the cut"
        );
        // The negative control: declared at the end of the run, an early
        // cut must show losses, or the oracle could not fail.
        if rows < acks.len() as u64 {
            control_losses += 1;
        }
    }
    assert!(control_losses > 0, "the negative control found no loss");
}

#[test]
fn recording_images_replays_a_recording_into_images_it_lists() {
    let t = tempfile::tempdir().unwrap();
    let (dir, snap, log_path, out) = (
        t.path().join("d"),
        t.path().join("snap"),
        t.path().join("log"),
        t.path().join("images"),
    );
    std::fs::create_dir(&dir).unwrap();
    copy_tree(&dir, &snap).unwrap();
    run_calls(&dir, &t.path().join("outside"), &log_path);
    let images = |flags: &[&str]| {
        let mut args: Vec<&OsStr> = vec!["recording".as_ref(), "images".as_ref()];
        args.extend([&snap, &log_path, &dir, &out].map(|p| p.as_os_str()));
        args.extend(flags.iter().map(OsStr::new));
        common::untorn(args)
    };
    let run = images(&["--images", "6", "--seed", "3", "--cuts", "mixed"]);
    assert_eq!(run.code, Some(0), "{}", run.context());
    let summary: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(summary["replay"]["unrecorded"], serde_json::json!([]));
    assert_eq!(summary["images"], 6);
    let listing: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("images.json")).unwrap()).unwrap();
    let log = Log::read(&log_path).unwrap();
    for (i, e) in listing.iter().enumerate() {
        assert!(Path::new(e["image"].as_str().unwrap()).is_dir());
        // Mixed: every other cut just before a sync with writes pending.
        assert_eq!(e["before_sync"], i % 2 == 1, "{e}");
        let cut = e["cut"].as_u64().unwrap() as usize;
        if i % 2 == 1 {
            assert!(
                matches!(
                    log.records[cut].op,
                    Op::Fsync | Op::Fdatasync | Op::Syncfs | Op::Sync
                ),
                "{e}"
            );
        }
    }
    // A second run into the same place is refused, the images left alone.
    let again = images(&[]);
    assert_eq!(again.code, Some(2), "{}", again.context());
    assert!(again.stderr.contains("is not empty"), "{}", again.stderr);
    assert!(out.join("image005").is_dir());
}
