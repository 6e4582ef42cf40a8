//! How the benchmark laboratory prepares and orders its runs: rounds in
//! the balanced order with one run's database at a time, every run on a
//! fresh copy of an untouched template, the buffer pool prewarmed alike,
//! and the A/A pair differing only in its name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use untorn::lab::adaptive::Repeats;
use untorn::lab::compare::{run_plan, BenchConfig, BenchPlan, Progress};
use untorn::lab::confidence::{round_order, StopReason};
use untorn::lab::prepare::{make_template, open_copy};
use untorn::lab::report::mode_labels;
use untorn::lab::result::ConfigResult;
use untorn::lab::runner::{fresh_database, run_once, RunSpec};
use untorn::lab::workload::{by_name, Scale};
use untorn::settings::TornPageProtection;
use untorn::Options;

fn scale() -> Scale {
    Scale {
        tables: 2,
        table_size: 2000,
        ..Scale::default()
    }
}

fn spec() -> RunSpec {
    RunSpec {
        clients: 2,
        warmup: Duration::from_millis(20),
        duration: Duration::from_millis(150),
        think: false,
    }
}

/// Every file under `dir`, by path relative to it, with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn data_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    files(dir)
        .into_iter()
        .filter(|(p, _)| p.starts_with("data"))
        .collect()
}

#[test]
fn rounds_follow_the_balanced_order_with_one_database_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let configs = vec![
        BenchConfig::default(),
        BenchConfig {
            protection: TornPageProtection::Off,
            ..BenchConfig::default()
        },
        BenchConfig {
            protection: TornPageProtection::Off,
            bgwriter_lru_maxpages: 0,
            ..BenchConfig::default()
        },
    ];
    let plan = BenchPlan {
        workloads: vec!["oltp_write_only".into()],
        configs,
        scale: scale(),
        spec: spec(),
        repeats: Repeats::Fixed(3),
        dir: dir.path().join("dbs"),
        seed: 7,
        keep: false,
        drop_disturbed: false,
    };
    let mut order: Vec<(usize, usize)> = Vec::new();
    let mut loads = 0;
    let results = run_plan(&plan, |p| match p {
        Progress::Loading { .. } => loads += 1,
        Progress::Running { config, repeat, .. } => order.push((repeat, config)),
        Progress::Ran { run } => {
            // The run's database is closed and gone before the next one
            // is made: only templates are left beside it.
            let left: Vec<String> = std::fs::read_dir(&plan.dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.contains("-template-"))
                .collect();
            assert!(left.is_empty(), "round {}: {left:?}", run.repeat);
        }
        Progress::Round { .. } => {}
    })
    .unwrap();
    // Two sets of creation settings (full_pages, off): two templates.
    assert_eq!(loads, 2);
    for round in 0..3 {
        let ran: Vec<usize> = order
            .iter()
            .filter(|(r, _)| *r == round)
            .map(|(_, c)| *c)
            .collect();
        assert_eq!(ran, round_order(3, round), "round {round}");
    }
    // Rounds run one after another, never interleaved.
    assert!(order.windows(2).all(|w| w[0].0 <= w[1].0), "{order:?}");
    for r in &results {
        assert_eq!(r.rounds, 3);
        assert_eq!(r.stop_reason, Some(StopReason::Fixed));
        let repeats: Vec<usize> = r.runs.iter().map(|run| run.repeat).collect();
        assert_eq!(repeats, vec![0, 1, 2]);
    }
    // Templates go too.
    assert_eq!(std::fs::read_dir(&plan.dir).unwrap().count(), 0);
}

/// Workloads take turns a round at a time, so time one does not need goes
/// to the others whatever their order in the plan; results stay in plan
/// order.
#[test]
fn workloads_take_turns_a_round_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let plan = BenchPlan {
        workloads: vec!["oltp_write_only".into(), "tpcb".into()],
        configs: vec![
            BenchConfig::default(),
            BenchConfig {
                protection: TornPageProtection::Off,
                ..BenchConfig::default()
            },
        ],
        scale: scale(),
        spec: spec(),
        repeats: Repeats::Fixed(2),
        dir: dir.path().join("dbs"),
        seed: 7,
        keep: false,
        drop_disturbed: false,
    };
    let mut rounds: Vec<(String, usize)> = Vec::new();
    let results = run_plan(&plan, |p| {
        if let Progress::Round {
            workload,
            rounds: n,
            ..
        } = p
        {
            rounds.push((workload.to_string(), n));
        }
    })
    .unwrap();
    let turns: Vec<(&str, usize)> = rounds.iter().map(|(w, n)| (w.as_str(), *n)).collect();
    assert_eq!(
        turns,
        [
            ("oltp_write_only", 1),
            ("tpcb", 1),
            ("oltp_write_only", 2),
            ("tpcb", 2)
        ]
    );
    let order: Vec<&str> = results.iter().map(|r| r.workload.as_str()).collect();
    assert_eq!(
        order,
        ["oltp_write_only", "oltp_write_only", "tpcb", "tpcb"]
    );
    assert!(results.iter().all(|r| r.runs.len() == 2 && r.rounds == 2));
    assert_eq!(std::fs::read_dir(&plan.dir).unwrap().count(), 0);
}

#[test]
fn each_run_starts_from_a_fresh_copy_of_an_untouched_template() {
    let dir = tempfile::tempdir().unwrap();
    let w = by_name("oltp_write_only", &scale()).unwrap();
    let config = BenchConfig::default();
    let template = dir.path().join("template");
    let run_dir = dir.path().join("run");
    make_template(&template, &config, w.as_ref()).unwrap();
    let before = files(&template);
    for round in 0..2 {
        let db = open_copy(&template, &run_dir, &config, w.as_ref()).unwrap();
        // Opening and prewarming only read the pages: the copy's pages
        // are the template's, whatever the last run left in this place.
        assert_eq!(data_files(&run_dir), data_files(&template), "round {round}");
        let run = run_once(&db, w.as_ref(), &spec(), round, 1).unwrap();
        assert!(run.transactions > 0, "{run:?}");
        w.check(&db).unwrap();
        db.close().unwrap();
        assert_ne!(data_files(&run_dir), data_files(&template));
    }
    assert!(files(&template) == before, "a run changed the template");
}

#[test]
fn a_copy_that_was_not_shut_down_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let w = by_name("oltp_write_only", &scale()).unwrap();
    let config = BenchConfig::default();
    let template = dir.path().join("template");
    let options = config.options(w.data_bytes());
    // Dropped without close(): as after a crash.
    drop(fresh_database(&template, options, w.as_ref()).unwrap());
    let err = open_copy(&template, &dir.path().join("run"), &config, w.as_ref())
        .err()
        .expect("a copy needing recovery is refused");
    assert!(err.to_string().contains("not shut down"), "{err}");
}

#[test]
fn prewarm_reads_inner_levels_first_and_fills_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let w = by_name("oltp_write_only", &scale()).unwrap();
    let path = dir.path().join("db");
    let big = Options {
        buffer_pool_size: 64 << 20,
        ..Options::default()
    };
    fresh_database(&path, big.clone(), w.as_ref())
        .unwrap()
        .close()
        .unwrap();
    // A pool larger than the tables: every page is read, once.
    let db = untorn::Database::open(&path, big.clone()).unwrap();
    let all = db.prewarm().unwrap();
    let reads = || db.buffer_stats().reads.load();
    let after_prewarm = reads();
    assert!(all > 2 * w.tables(&db).unwrap().tables.len(), "{all} pages");
    w.check(&db).unwrap();
    assert_eq!(
        reads(),
        after_prewarm,
        "a full check read pages prewarm missed"
    );
    db.close().unwrap();
    // A pool of half as many pages holds that many, and the same ones at
    // every opening: the inner levels among them (no descent misses).
    let half = all / 2;
    let small = Options {
        buffer_pool_size: half as u64 * 8192,
        ..Options::default()
    };
    let mut warmed = Vec::new();
    for _ in 0..2 {
        let db = untorn::Database::open(&path, small.clone()).unwrap();
        let read = db.prewarm().unwrap();
        // The pages the opening cached (meta, catalog) fill the rest.
        assert!(read < half && read + 16 > half, "{read} of {half}");
        warmed.push(read);
        let before = reads_of(&db);
        let tables = w.tables(&db).unwrap();
        let tx = db.begin();
        for t in &tables.tables {
            // The first leaf of every table is among the first leaves
            // read, and every inner node before them: no miss.
            tx.get(t, &[0u8]).unwrap();
        }
        assert_eq!(reads_of(&db), before, "a descent missed after prewarm");
        drop(tx);
        db.close().unwrap();
    }
    assert_eq!(warmed[0], warmed[1]);
}

fn reads_of(db: &untorn::Database) -> u64 {
    db.buffer_stats().reads.load()
}

#[test]
fn the_aa_pair_differs_only_in_its_name() {
    let base = BenchConfig {
        protection: TornPageProtection::Off,
        ..BenchConfig::default()
    };
    let pair = base.aa_pair();
    assert_eq!(pair.len(), 2);
    let data = 20 << 20;
    assert_eq!(
        format!("{:?}", pair[0].options(data)),
        format!("{:?}", pair[1].options(data)),
        "the engine sees the same options"
    );
    let results: Vec<ConfigResult> = pair
        .iter()
        .map(|c| ConfigResult {
            protection: c.protection.to_string(),
            settings: c.settings(data),
            ..Default::default()
        })
        .collect();
    let mut a = results[0].settings.clone();
    let mut b = results[1].settings.clone();
    assert_ne!(a.remove("copy"), b.remove("copy"));
    assert_eq!(a, b);
    let labels = mode_labels(&results.iter().collect::<Vec<_>>());
    assert_eq!(labels, vec!["off copy=a", "off copy=b"]);
}
