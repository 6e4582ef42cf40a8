use super::*;
use crate::db::Database;
use crate::options::Options;
use crate::settings::TornPageProtection;
use crate::table::key_u64;

pub(super) fn engine_options(protection: TornPageProtection) -> Options {
    let mut o = Options::default();
    o.creation.torn_page_protection = Some(protection);
    // A small pool, so pages are evicted (written without fsync) between
    // checkpoints, and small WAL segments, so the crashes copy less.
    o.buffer_pool_size = 32 * 8192;
    o.creation.wal_segment_size = Some(1 << 20);
    o
}

/// Totals over the crashes of a run, to check that they lost something.
#[derive(Default, Debug)]
struct Totals {
    crashes: u64,
    power_cuts: u64,
    in_flight_commits: u64,
    writes_dropped: u64,
    writes_torn: u64,
    data_writes_torn: u64,
    dir_ops_lost: u64,
}

impl Totals {
    /// Counts what a crash of the database in `db_dir` lost.
    fn add_crash(&mut self, report: &CrashReport, db_dir: &Path) {
        self.crashes += 1;
        self.writes_dropped += report.writes_dropped;
        self.writes_torn += report.writes_torn;
        let data = report
            .torn_writes
            .iter()
            .filter(|t| t.path.starts_with(db_dir.join("data")));
        self.data_writes_torn += data.count() as u64;
        self.dir_ops_lost += report.dir_ops_lost;
    }
}

pub(super) type Rows = BTreeMap<u64, Vec<u8>>;
pub(super) type Changes = Vec<(u64, Option<Vec<u8>>)>;

pub(super) fn apply(model: &mut Rows, changes: &Changes) {
    for (k, v) in changes {
        match v {
            Some(v) => model.insert(*k, v.clone()),
            None => model.remove(k),
        };
    }
}

/// How a transaction ended: committed, failed before its commit, or failed
/// in its commit (in flight: it may or may not survive the crash).
enum TxnEnd {
    Committed(Changes),
    Failed(Error),
    InFlight(Changes, Error),
}

/// One transaction of random upserts and deletes.
fn random_txn(
    db: &Database,
    table: &crate::table::Table,
    rng: &mut SplitMix64,
    tag: &str,
) -> TxnEnd {
    let mut tx = db.begin();
    let mut changes = Vec::new();
    // At most 8 rows: a commit may pin at most half the pool's 32 leaves.
    for _ in 0..1 + rng.below(8) {
        let k = rng.below(2000);
        let res = if rng.chance(0.1) {
            changes.push((k, None));
            tx.delete(table, &key_u64(k)).map(|_| ())
        } else {
            // At most ~1 KB: under the row limit of 8 KB pages.
            let v = format!("{tag}/{k};").repeat(1 + rng.below(80) as usize);
            let res = tx.upsert(table, &key_u64(k), v.as_bytes());
            changes.push((k, Some(v.into_bytes())));
            res
        };
        if let Err(e) = res {
            return TxnEnd::Failed(e);
        }
    }
    match tx.commit() {
        Ok(_) => TxnEnd::Committed(changes),
        Err(e) => TxnEnd::InFlight(changes, e),
    }
}

/// Runs `txns` random transactions tagged `tag`, adding the acknowledged
/// ones to `acked`, until the first failure, which must come from the power
/// cut. Returns the changes of a commit in flight when the power went.
fn commit_until_power_cut(
    fs: &SimFileSystem,
    db: &Database,
    table: &crate::table::Table,
    rng: &mut SplitMix64,
    acked: &mut Rows,
    txns: u64,
    tag: &str,
) -> std::result::Result<Option<Changes>, String> {
    for txn in 0..txns {
        let (error, in_flight) = match random_txn(db, table, rng, &format!("{tag}/{txn}")) {
            TxnEnd::Committed(changes) => {
                apply(acked, &changes);
                continue;
            }
            TxnEnd::Failed(e) => (e, None),
            TxnEnd::InFlight(changes, e) => (e, Some(changes)),
        };
        if fs.faults().power_cut_after != Some(0) {
            return Err(format!("{error} with the power on"));
        }
        return Ok(in_flight);
    }
    Ok(None)
}

/// Every row of `table`, by key.
pub(super) fn all_rows(db: &Database, table: &crate::table::Table) -> Result<Rows> {
    let rows = db.begin().scan(table, &[], None, usize::MAX)?;
    Ok(rows
        .into_iter()
        .map(|(k, v)| (u64::from_be_bytes(k.try_into().expect("8-byte keys")), v))
        .collect())
}

/// The rows acknowledged after a crash: `got` must be `acked`, or `acked`
/// with the commit in flight applied entirely. Otherwise, says which rows
/// are wrong.
pub(super) fn acked_after_crash(
    acked: Rows,
    in_flight: Option<&Changes>,
    got: &Rows,
) -> std::result::Result<Rows, String> {
    let mut with_in_flight = acked.clone();
    if let Some(changes) = in_flight {
        apply(&mut with_in_flight, changes);
    }
    if *got == with_in_flight {
        return Ok(with_in_flight);
    }
    if *got == acked {
        return Ok(acked);
    }
    let wrong: Vec<_> = acked
        .keys()
        .filter(|k| got.get(k) != acked.get(k))
        .collect();
    let extra: Vec<_> = got.keys().filter(|k| !acked.contains_key(k)).collect();
    Err(format!("rows wrong or missing {wrong:?}, extra {extra:?}"))
}

/// Four rounds of: commits (with the power cut at a random call in most
/// rounds), a crash, a reopening, and the check that every acknowledged
/// commit is there and the one in flight is there entirely or not at all.
/// Returns what went wrong, naming the seed.
fn engine_crash_rounds(
    seed: u64,
    cfg: &CrashConfig,
    opts: &Options,
    totals: &mut Totals,
) -> std::result::Result<(), String> {
    let stats = Arc::new(IoStats::default());
    let fs = SimFileSystem::new(stats.clone());
    let dir = Path::new("/sim/db");
    let sim = || -> Arc<dyn FileSystem> { Arc::new(fs.clone()) };
    // A failing seed saves its trace where UNTORN_SIM_TRACE_DIR says.
    let fail = |what: String| {
        if let Some(d) = std::env::var_os("UNTORN_SIM_TRACE_DIR") {
            let path = Path::new(&d).join(format!("sim-trace-seed-{seed}.json"));
            fs.save_trace(&path).expect("save the trace");
        }
        format!("seed {seed}: {what}")
    };
    let db = Database::create_with(sim(), stats.clone(), dir, opts.clone());
    let mut db = db.map_err(|e| fail(format!("create: {e}")))?;
    let mut table = db.create_table("t").map_err(|e| fail(e.to_string()))?;
    let mut acked = Rows::new();
    let mut rng = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9) ^ 0xC0FFEE);
    for round in 0..4u64 {
        // Each commit makes two calls (WAL write, fsync), evictions more.
        let txns = 20 + rng.below(40);
        let cut = rng.chance(0.8).then(|| rng.below(3 * txns));
        fs.update_faults(|f| f.power_cut_after = cut);
        let tag = format!("{seed}/{round}");
        let in_flight = commit_until_power_cut(&fs, &db, &table, &mut rng, &mut acked, txns, &tag)
            .map_err(|e| fail(format!("round {round}: {e}")))?;
        if in_flight.is_none() && rng.chance(0.5) {
            let _ = db.checkpoint();
        }
        totals.power_cuts += (fs.faults().power_cut_after == Some(0)) as u64;
        totals.in_flight_commits += in_flight.is_some() as u64;
        let report = fs.crash(seed * 16 + round, cfg);
        totals.add_crash(&report, dir);
        drop(db);
        let reopened = Database::open_with(sim(), stats.clone(), dir, opts.clone());
        db = reopened.map_err(|e| fail(format!("round {round} reopen: {e}; {report:?}")))?;
        table = db
            .table("t")
            .map_err(|e| fail(format!("round {round}: {e}")))?;
        let got = all_rows(&db, &table).map_err(|e| fail(format!("round {round} scan: {e}")))?;
        acked = acked_after_crash(acked, in_flight.as_ref(), &got).map_err(|wrong| {
            fail(format!(
                "round {round} (power cut after {cut:?} calls, commit in flight: {}): \
                 {wrong}; {report:?}",
                in_flight.is_some()
            ))
        })?;
    }
    db.close().map_err(|e| fail(format!("close: {e}")))
}

/// Runs the seeds; returns the totals and the failures.
fn engine_run(cfg: &CrashConfig, p: TornPageProtection, seeds: u64) -> (Totals, Vec<String>) {
    let mut totals = Totals::default();
    let opts = engine_options(p);
    let failures = (0..seeds)
        .filter_map(|s| engine_crash_rounds(s, cfg, &opts, &mut totals).err())
        .collect();
    (totals, failures)
}

/// Runs 50 seeds that must all keep every commit; returns the totals.
fn engine_run_without_failures(cfg: &CrashConfig, p: TornPageProtection) -> Totals {
    let (totals, failures) = engine_run(cfg, p, 50);
    let n = failures.len();
    assert!(n == 0, "{n} seeds failed:\n{}", failures.join("\n"));
    totals
}

#[test]
fn the_engine_keeps_every_commit_across_crashes_without_tearing() {
    let totals =
        engine_run_without_failures(&CrashConfig::no_tearing(), TornPageProtection::FullPages);
    assert!(
        totals.power_cuts > 30 && totals.in_flight_commits > 5,
        "{totals:?}"
    );
    assert!(
        totals.writes_dropped > 10 && totals.dir_ops_lost > 0,
        "{totals:?}"
    );
}

#[test]
fn full_pages_keeps_every_commit_across_torn_sectors() {
    let totals =
        engine_run_without_failures(&CrashConfig::default(), TornPageProtection::FullPages);
    assert!(totals.data_writes_torn > 50, "{totals:?}");
}

#[test]
fn atomic_8k_writes_need_no_torn_page_protection() {
    // Data pages (8 KB) cannot tear; WAL writes of several blocks can, at
    // 8 KB boundaries.
    let cfg = CrashConfig {
        atomic_page_writes: Some(8192),
        ..CrashConfig::default()
    };
    let totals = engine_run_without_failures(&cfg, TornPageProtection::Off);
    // Some multi-block WAL writes tore (how many depends on the I/O
    // pattern), and no commit was lost.
    assert!(
        totals.writes_torn > 0 && totals.power_cuts > 30,
        "{totals:?}"
    );
}

#[test]
fn without_protection_a_torn_page_is_detected_never_silently_wrong() {
    let (_, failures) = engine_run(&CrashConfig::default(), TornPageProtection::Off, 50);
    assert!(!failures.is_empty(), "512-byte sectors tear 8 KB pages");
    for f in &failures {
        let named = f.contains("checksum") || f.contains("damaged");
        assert!(named && !f.contains("rows wrong"), "{f}");
    }
}

/// A failed directory fsync while dropping a table leaves the removal's
/// durability unknown: the database must stop, as at any failed fsync.
#[test]
fn a_failed_directory_fsync_in_drop_table_stops_the_database() {
    let stats = Arc::new(IoStats::default());
    let fs = SimFileSystem::new(stats.clone());
    let opts = engine_options(TornPageProtection::FullPages);
    let db =
        Database::create_with(Arc::new(fs.clone()), stats, Path::new("/sim/db"), opts).unwrap();
    let keep = db.create_table("keep").unwrap();
    db.create_table("gone").unwrap();
    fs.update_faults(|c| c.fail_sync_dir_after = Some(0));
    let e = db.drop_table("gone").unwrap_err();
    assert!(matches!(e, Error::FsyncFailed { .. }), "{e}");
    let mut tx = db.begin();
    let res = tx
        .insert(&keep, &key_u64(1), b"after")
        .and_then(|_| tx.commit());
    assert!(matches!(res, Err(Error::Stopped(_))), "{res:?}");
    assert!(matches!(db.checkpoint(), Err(Error::Stopped(_))));
}
