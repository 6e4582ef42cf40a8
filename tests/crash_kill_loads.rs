//! `untorn serve` killed with SIGKILL at random instants while clients
//! load through SQL (issue 56): COPY and INSERT ... SELECT
//! generate_series, inside and outside a block, into a non-empty table and
//! into tables just created, of up to 60,000 rows (past the 10,000-row
//! write set in memory, so most spill to disk). After each restart every
//! acknowledged load is there whole, every other load whole or absent,
//! and the rows from before all loads are intact.
//!
//! Before, a load outside a block committed in batches: a kill at 4 s of
//! a 3M-row COPY left 672,000 unacknowledged rows.
//!
//! Replay with `UNTORN_CRASH_SEED=<seed> cargo test --test crash_kill_loads`.

mod common;

use common::serve::{error_field, Raw, Serve};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use untorn::rng::SplitMix64;

/// Rows in `base` before any load; their ids are below every load's.
const BASE_ROWS: i64 = 100;
/// A load's ids: `load * ID_SPAN ..`, its `v` column `load:rows`.
const ID_SPAN: i64 = 1_000_000;

/// How one load is sent.
#[derive(Clone, Copy, Debug)]
enum Kind {
    CopyAutocommit,
    CopyInBlock,
    SeriesAutocommit,
    SeriesInBlock,
}

#[derive(Clone, Debug)]
struct Load {
    id: i64,
    rows: i64,
    table: String,
    kind: Kind,
}

/// What a connection that may die at any moment answers: `None` once the
/// server is gone.
struct Conn(Raw);

impl Conn {
    fn send(&mut self, kind: u8, body: &[u8]) -> Option<()> {
        let mut m = vec![kind];
        m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        self.0 .0.write_all(&m).ok()
    }

    /// Messages up to ReadyForQuery: the first error's SQLSTATE, if any.
    fn until_ready(&mut self) -> Option<Option<String>> {
        let mut code = None;
        loop {
            let (kind, body) = self.0.message()?;
            if kind == b'E' && code.is_none() {
                code = error_field(&body, b'C');
            }
            if kind == b'Z' {
                return Some(code);
            }
        }
    }

    fn query(&mut self, sql: &str) -> Option<Option<String>> {
        self.send(b'Q', &[sql.as_bytes(), b"\0"].concat())?;
        self.until_ready()
    }

    /// A COPY FROM STDIN of `load`'s rows in chunks: its error's
    /// SQLSTATE, if it failed.
    fn copy(&mut self, load: &Load) -> Option<Option<String>> {
        let sql = format!("copy {} from stdin", load.table);
        self.send(b'Q', &[sql.as_bytes(), b"\0"].concat())?;
        let (kind, _) = self.0.message()?;
        assert_eq!(kind, b'G', "no CopyInResponse");
        let mut chunk = String::new();
        for i in 0..load.rows {
            chunk.push_str(&format!(
                "{}\t{}:{}\n",
                load.id * ID_SPAN + i,
                load.id,
                load.rows
            ));
            if chunk.len() > 32 * 1024 {
                self.send(b'd', chunk.as_bytes())?;
                chunk.clear();
            }
        }
        self.send(b'd', chunk.as_bytes())?;
        self.send(b'c', &[])?;
        self.until_ready()
    }

    fn series(&mut self, load: &Load) -> Option<Option<String>> {
        let from = load.id * ID_SPAN;
        let sql = format!(
            "insert into {} select g, '{}:{}' from generate_series({from}, {}) as g",
            load.table,
            load.id,
            load.rows,
            from + load.rows - 1
        );
        self.query(&sql)
    }

    /// Sends the load: `Some(None)` when its commit was acknowledged,
    /// else the SQLSTATE that refused it.
    fn load(&mut self, load: &Load) -> Option<Option<String>> {
        let in_block = matches!(load.kind, Kind::CopyInBlock | Kind::SeriesInBlock);
        if in_block {
            self.query("begin")?;
        }
        let failed = match load.kind {
            Kind::CopyAutocommit | Kind::CopyInBlock => self.copy(load)?,
            Kind::SeriesAutocommit | Kind::SeriesInBlock => self.series(load)?,
        };
        if in_block {
            // After a failure COMMIT answers ROLLBACK, no error.
            let commit = self.query("commit")?;
            return Some(failed.or(commit));
        }
        Some(failed)
    }
}

fn connect(port: u16) -> Conn {
    Conn(Raw::connect(port))
}

/// Every row of `table` at or past the first load's ids, counted by its
/// `v` ("load:rows"), and the number of rows below.
fn census(port: u16, table: &str) -> (BTreeMap<String, i64>, i64) {
    let mut r = Raw::connect(port);
    r.send(b'Q', format!("select id, v from {table}\0").as_bytes());
    let mut loads = BTreeMap::new();
    let mut below = 0;
    loop {
        let (kind, body) = r.message().expect("the server answered");
        match kind {
            b'D' => {
                let field = |at: &mut usize| {
                    let len = i32::from_be_bytes(body[*at..*at + 4].try_into().unwrap()) as usize;
                    let s = String::from_utf8(body[*at + 4..*at + 4 + len].to_vec()).unwrap();
                    *at += 4 + len;
                    s
                };
                let mut at = 2;
                let id: i64 = field(&mut at).parse().unwrap();
                let v = field(&mut at);
                if id >= ID_SPAN {
                    *loads.entry(v).or_insert(0) += 1;
                } else {
                    below += 1;
                }
            }
            b'E' => panic!("census of {table}: {:?}", error_field(&body, b'M')),
            b'Z' => return (loads, below),
            _ => {}
        }
    }
}

#[test]
fn sigkill_during_large_loads_leaves_each_whole_or_absent() {
    let seed: u64 = std::env::var("UNTORN_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let rounds: u32 = std::env::var("UNTORN_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    eprintln!("seed {seed} ({rounds} rounds); replay with UNTORN_CRASH_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let serve = Serve::start_in(&path, &[]);
    let mut c = connect(serve.port);
    c.query("create table base (id int primary key, v text)")
        .unwrap();
    c.query("create index base_v on base (v)").unwrap();
    c.query(&format!(
        "insert into base select g, 'base' from generate_series(0, {}) as g",
        BASE_ROWS - 1
    ))
    .unwrap();
    drop(c);
    let mut serve = Some(serve);
    let mut rng = SplitMix64::new(seed);
    let mut next_load = 1i64;
    // Every load sent (table, load id) and whether it was acknowledged.
    let mut sent: Vec<(Load, bool)> = Vec::new();
    let mut tables = vec!["base".to_string()];
    for round in 0..rounds {
        let port = serve.as_ref().unwrap().port;
        // Two clients load at once; their loads into `base` contend for
        // its whole-table lock once they spill.
        let log: Arc<Mutex<Vec<(Load, bool)>>> = Arc::default();
        let mut plans = Vec::new();
        for client in 0..2 {
            let mut plan = Vec::new();
            for i in 0..6 {
                let kind = [
                    Kind::CopyAutocommit,
                    Kind::CopyInBlock,
                    Kind::SeriesAutocommit,
                    Kind::SeriesInBlock,
                ][rng.below(4) as usize];
                let table = if rng.chance(0.3) {
                    format!("new_{round}_{client}_{i}")
                } else {
                    "base".to_string()
                };
                plan.push(Load {
                    id: next_load,
                    rows: 2_000 + rng.below(58_000) as i64,
                    table,
                    kind,
                });
                next_load += 1;
            }
            plans.push(plan);
        }
        let kill_after = Duration::from_millis(200 + rng.below(2_500));
        let workers: Vec<_> = plans
            .into_iter()
            .map(|plan| {
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut c = connect(port);
                    for load in plan {
                        if load.table != "base" {
                            let sql =
                                format!("create table {} (id int primary key, v text)", load.table);
                            if c.query(&sql).is_none() {
                                return;
                            }
                        }
                        // Logged before it is sent: a load may commit and
                        // the server die before the acknowledgement.
                        let at = {
                            let mut log = log.lock().unwrap();
                            log.push((load.clone(), false));
                            log.len() - 1
                        };
                        let Some(failed) = c.load(&load) else { return };
                        log.lock().unwrap()[at].1 = failed.is_none();
                        // Two loads into base that spilled may wait for
                        // each other's rows: one ends in a deadlock.
                        if let Some(code) = failed {
                            assert!(
                                code == "40P01" || code == "40001",
                                "load {load:?} failed with the server up: {code}"
                            );
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(kill_after);
        serve.take().unwrap().kill();
        for w in workers {
            w.join().expect("a loader thread failed");
        }
        let logged = std::mem::take(&mut *log.lock().unwrap());
        for (load, _) in &logged {
            if !tables.contains(&load.table) {
                tables.push(load.table.clone());
            }
        }
        sent.extend(logged);
        let restarted = Serve::start_in(&path, &[]);
        let acked = sent.iter().filter(|(_, a)| *a).count();
        let mut present = 0;
        for table in &tables {
            let (loads, below) = census(restarted.port, table);
            if table == "base" {
                assert_eq!(
                    below, BASE_ROWS,
                    "seed {seed} round {round}: base's first rows"
                );
            }
            for (load, was_acked) in sent.iter().filter(|(l, _)| &l.table == table) {
                let key = format!("{}:{}", load.id, load.rows);
                let got = loads.get(&key).copied().unwrap_or(0);
                assert!(
                    got == 0 || got == load.rows,
                    "seed {seed} round {round}: load {load:?} has {got} of its {} rows",
                    load.rows
                );
                assert!(
                    !was_acked || got == load.rows,
                    "seed {seed} round {round}: acknowledged load {load:?} lost; {table} holds {loads:?}"
                );
                present += (got > 0) as usize;
            }
            let known = sent.iter().filter(|(l, _)| &l.table == table).count();
            assert!(
                loads.len() <= known,
                "seed {seed} round {round}: rows of loads never sent in {table}: {loads:?}"
            );
        }
        eprintln!(
            "round {round}: killed after {kill_after:?}; {} loads sent, {acked} acknowledged, {present} present",
            sent.len()
        );
        assert!(
            !path.join("spill").exists()
                || std::fs::read_dir(path.join("spill")).unwrap().count() == 0,
            "seed {seed} round {round}: spill files left after the opening"
        );
        serve = Some(restarted);
    }
    assert!(serve.take().unwrap().stop().success());
}
