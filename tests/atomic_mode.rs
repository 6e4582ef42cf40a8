//! `torn_page_protection = atomic` end to end (issue 40): refused, with
//! what the file system offers, on a disk without atomic writes; on an XFS
//! loop device (whose reflink gives RWF_ATOMIC a software fallback) a
//! database under it keeps every acknowledged commit through SIGKILL, and
//! switches into and out of it. The loop-device test needs root,
//! /dev/loop-control and mkfs.xfs; where one is missing it says which on
//! stderr instead of checking anything.

mod common;

use common::xfs::XfsLoop;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use untorn::file::atomic::{AtomicPageWrites, AtomicWrites};
use untorn::{key_u64, Database, Options, TornPageProtection as P};

const CHILD_ENV: &str = "UNTORN_ATOMIC_CHILD_DIR";

fn options(mode: Option<P>) -> Options {
    let mut o = Options {
        // Small, so that pages are evicted (written) between checkpoints.
        buffer_pool_size: 64 * 8192,
        ..Options::default()
    };
    o.creation.torn_page_protection = mode;
    o
}

fn value(k: u64) -> Vec<u8> {
    let mut v = k.to_le_bytes().to_vec();
    v.resize(200, (k % 251) as u8);
    v
}

#[test]
fn atomic_is_refused_where_the_file_system_has_no_atomic_writes() {
    let t = tempfile::tempdir().unwrap();
    let probe_file = t.path().join("probe");
    std::fs::write(&probe_file, b"").unwrap();
    let figures = AtomicWrites::probe(&probe_file).unwrap();
    if figures.page_writes(8192) != AtomicPageWrites::Unsupported {
        eprintln!(
            "CANNOT RUN: the temporary directory's file system has atomic writes ({figures:?})"
        );
        return;
    }
    let dir = t.path().join("db");
    let run = common::untorn_on("init", &dir, &["--torn-page-protection", "atomic"]);
    run.expect_refused(&["atomic needs", "statx", "double_writes or full_pages"]);
    assert!(!dir.join("untorn.control").exists(), "nothing made");
    // auto: double writes here (no hardware atomic writes).
    common::untorn_on("init", &dir, &["--torn-page-protection", "auto"]).expect_code(0);
    common::untorn_on("inspect", &dir, &[]).expect_stdout("double_writes");
    // And an opening cannot switch to it here.
    let e = Database::open(&dir, options(Some(P::Atomic)))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("atomic needs"), "{e}");
}

/// The child: commits rows one at a time, printing "ack K" after each
/// commit returned, until killed.
#[test]
fn atomic_child_entry() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Database::open(Path::new(&dir), options(None)).unwrap();
    let t = db.table("t").unwrap();
    for k in 0.. {
        let mut tx = db.begin();
        tx.upsert(&t, &key_u64(k % 5000), &value(k)).unwrap();
        tx.commit().unwrap();
        println!("ack {k}");
    }
}

#[test]
fn atomic_on_xfs_keeps_every_commit_through_sigkill_and_switches() {
    let xfs = match XfsLoop::new(true) {
        Ok(x) => x,
        Err(why) => {
            eprintln!("CANNOT RUN the atomic-mode test on an XFS loop device: {why}");
            return;
        }
    };
    let dir = xfs.mount.join("db");
    let db = Database::create(&dir, options(Some(P::Atomic))).unwrap();
    assert_eq!(db.settings().torn_page_protection, P::Atomic);
    db.create_table("t").unwrap();
    db.close().unwrap();
    for round in 0..3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["atomic_child_entry", "--exact", "--nocapture"])
            .env(CHILD_ENV, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut acked = None;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Enough commits that the 64-page pool evicts pages many times.
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some(k) = line.strip_prefix("ack ") {
                acked = Some(k.parse::<u64>().unwrap());
                if acked >= Some(3000) {
                    break;
                }
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // The last acknowledged commit and every key's last acknowledged
        // version are there.
        let last = acked.expect("the child committed");
        let db = Database::open(&dir, options(None)).unwrap();
        assert_eq!(
            db.settings().torn_page_protection,
            P::Atomic,
            "round {round}"
        );
        let t = db.table("t").unwrap();
        let tx = db.begin();
        for k in last.saturating_sub(4999)..=last {
            let got = tx.get(&t, &key_u64(k % 5000)).unwrap();
            let got = got.unwrap_or_else(|| panic!("round {round}: key {} lost", k % 5000));
            let version = u64::from_le_bytes(got[..8].try_into().unwrap());
            assert!(
                version >= k,
                "round {round}: key {} at {version}, acked {k}",
                k % 5000
            );
        }
        drop(tx);
        db.close().unwrap();
        common::untorn_on("verify", &dir, &[]).expect_code(0);
    }
    // `untorn check` opens it in memory, under its own mode.
    common::untorn_on("check", &dir, &[]).expect_code(0);
    // Out of atomic and back: each opening runs its mode's writes.
    for mode in [P::DoubleWrites, P::Atomic, P::Off, P::Atomic] {
        let db = Database::open(&dir, options(Some(mode))).unwrap();
        assert_eq!(db.settings().torn_page_protection, mode);
        let t = db.table("t").unwrap();
        for k in 0..500 {
            let mut tx = db.begin();
            tx.upsert(&t, &key_u64(k), &value(k)).unwrap();
            tx.commit().unwrap();
        }
        db.close().unwrap();
        common::untorn_on("verify", &dir, &[]).expect_code(0);
    }
    common::untorn_on("inspect", &dir, &[]).expect_stdout("atomic");
}
