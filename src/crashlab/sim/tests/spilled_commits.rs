//! Transactions whose write set spilled to disk (txn/spill.rs) across
//! power cuts at any call of their commit (the spill file's writes, its
//! fsync, the rename that is the commit point, the applied parts, the
//! removal) and of the reopening that finishes one; and on a full disk.
//! Each is there whole after the crash, or, if it was not acknowledged,
//! absent.

use super::engine::{acked_after_crash, all_rows, apply, engine_options, Changes, Rows};
use super::*;
use crate::db::Database;
use crate::options::Options;
use crate::settings::TornPageProtection;
use crate::table::key_u64;

/// A write set of 64 rows in memory: a transaction of hundreds spills.
fn options() -> Options {
    let mut o = engine_options(TornPageProtection::FullPages);
    o.max_write_set_rows = 64;
    o
}

/// One spilled transaction of `n` random upserts and deletes. `Ok` with
/// its changes, and whether its commit was acknowledged; `Err` if it
/// failed before its commit.
fn spilled_txn(
    db: &Database,
    table: &crate::table::Table,
    rng: &mut SplitMix64,
    n: u64,
    tag: &str,
) -> std::result::Result<(Changes, bool), Error> {
    let mut tx = db.begin();
    let mut changes = Vec::new();
    for _ in 0..n {
        let k = rng.below(3000);
        if rng.chance(0.1) {
            tx.delete(table, &key_u64(k))?;
            changes.push((k, None));
        } else {
            let v = format!("{tag}/{k};").repeat(1 + rng.below(20) as usize);
            tx.upsert(table, &key_u64(k), v.as_bytes())?;
            changes.push((k, Some(v.into_bytes())));
        }
    }
    let committed = tx.commit().is_ok();
    Ok((changes, committed))
}

/// Commits in flight at a power cut: found whole after it, and absent.
#[derive(Default)]
struct InFlight {
    present: u64,
    absent: u64,
}

fn spilled_crash_rounds(
    seed: u64,
    cfg: &CrashConfig,
    in_flight_commits: &mut InFlight,
) -> std::result::Result<(), String> {
    let stats = Arc::new(IoStats::default());
    let fs = SimFileSystem::new(stats.clone());
    let dir = Path::new("/sim/db");
    let sim = || -> Arc<dyn FileSystem> { Arc::new(fs.clone()) };
    let fail = |what: String| format!("seed {seed}: {what}");
    let opts = options();
    let mut db = Database::create_with(sim(), stats.clone(), dir, opts.clone())
        .map_err(|e| fail(format!("create: {e}")))?;
    let mut table = db.create_table("t").map_err(|e| fail(e.to_string()))?;
    let mut acked = Rows::new();
    let mut rng = SplitMix64::new(seed ^ 0x5_9111);
    for round in 0..3u64 {
        let n = 150 + rng.below(500);
        // A spilled commit makes some tens of calls: most cuts fall in it.
        let cut = rng.chance(0.85).then(|| rng.below(60));
        fs.update_faults(|f| f.power_cut_after = cut);
        let tag = format!("{seed}/{round}");
        let in_flight = match spilled_txn(&db, &table, &mut rng, n, &tag) {
            Ok((changes, true)) => {
                apply(&mut acked, &changes);
                None
            }
            Ok((changes, false)) => Some(changes),
            Err(_) => None,
        };
        if fs.faults().power_cut_after != Some(0) && in_flight.is_some() {
            return Err(fail(format!(
                "round {round}: a commit failed with the power on"
            )));
        }
        let report = fs.crash(seed * 16 + round, cfg);
        drop(db);
        // Sometimes the power fails again while the reopening finishes
        // the committed transaction.
        if rng.chance(0.5) {
            fs.update_faults(|f| f.power_cut_after = Some(rng.below(300)));
            drop(Database::open_with(sim(), stats.clone(), dir, opts.clone()));
            fs.crash(seed * 16 + round + 8, cfg);
        }
        fs.update_faults(|f| f.power_cut_after = None);
        db = Database::open_with(sim(), stats.clone(), dir, opts.clone())
            .map_err(|e| fail(format!("round {round} reopen: {e}; {report:?}")))?;
        table = db.table("t").map_err(|e| fail(e.to_string()))?;
        let got = all_rows(&db, &table).map_err(|e| fail(format!("round {round} scan: {e}")))?;
        let before = acked.clone();
        acked = acked_after_crash(acked, in_flight.as_ref(), &got).map_err(|wrong| {
            fail(format!(
                "round {round} (power cut after {cut:?} calls, {n} changes, commit in flight: {}): {wrong}",
                in_flight.is_some()
            ))
        })?;
        if in_flight.is_some() {
            match acked == before {
                true => in_flight_commits.absent += 1,
                false => in_flight_commits.present += 1,
            }
        }
        if fs.exists(&dir.join("spill")) && !fs.list_dir(&dir.join("spill")).unwrap().is_empty() {
            return Err(fail(format!(
                "round {round}: spill files left after the opening"
            )));
        }
    }
    db.close().map_err(|e| fail(format!("close: {e}")))
}

/// Every spilled commit survives whole or not at all, across power cuts
/// with torn sectors, in its commit and in the opening that finishes it.
#[test]
fn a_spilled_commit_is_whole_or_absent_after_any_power_cut() {
    let mut in_flight = InFlight::default();
    let failures: Vec<String> = (0..40)
        .filter_map(|seed| {
            spilled_crash_rounds(seed, &CrashConfig::default(), &mut in_flight).err()
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Power cuts fell inside commits both before their commit point (the
    // commit absent after) and after it (finished by the reopening).
    let (present, absent) = (in_flight.present, in_flight.absent);
    eprintln!(
        "spilled commits in flight at a power cut: {present} whole after it, {absent} absent"
    );
    assert!(
        present >= 5 && absent >= 5,
        "in flight: {present} present, {absent} absent"
    );
}

/// A full disk while the write set spills fails the transaction cleanly
/// (53100 in SQL): nothing of it applied, no file left, the database
/// goes on. A full disk for the data files while a committed one is
/// applied stops the database; the reopening (with room again) finishes
/// it whole.
#[test]
fn a_full_disk_before_the_commit_point_leaves_nothing_and_after_it_is_finished() {
    let fs = new_fs();
    let stats = Arc::new(IoStats::default());
    let dir = Path::new("/sim/db");
    let sim = || -> Arc<dyn FileSystem> { Arc::new(fs.clone()) };
    let db = Database::create_with(sim(), stats.clone(), dir, options()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut rng = SplitMix64::new(7);
    let (before, _) = spilled_txn(&db, &t, &mut rng, 100, "before").unwrap();
    let mut acked = Rows::new();
    apply(&mut acked, &before);
    fs.update_faults(|f| f.enospc_after_bytes = Some((FileKind::Spill, 20_000)));
    let e = spilled_txn(&db, &t, &mut rng, 2000, "full").unwrap_err();
    assert!(e.is_disk_full(), "{e}");
    assert!(fs.list_dir(&dir.join("spill")).unwrap().is_empty());
    assert_eq!(all_rows(&db, &t).unwrap(), acked);
    // After the commit point: the data files' growth fails.
    fs.update_faults(|f| f.enospc_after_bytes = Some((FileKind::Data, 0)));
    let (changes, committed) = spilled_txn(&db, &t, &mut rng, 3000, "applied").unwrap();
    assert!(!committed, "the data files could not grow");
    assert!(db.begin().get(&t, &key_u64(1)).is_err() || db.checkpoint().is_err());
    drop(db);
    fs.update_faults(|f| f.enospc_after_bytes = None);
    let db = Database::open_with(sim(), stats, dir, options()).unwrap();
    let t = db.table("t").unwrap();
    apply(&mut acked, &changes);
    assert_eq!(all_rows(&db, &t).unwrap(), acked);
    db.close().unwrap();
}

/// A spilled transaction the file system clearly has no room to apply is
/// refused before its commit point (53100 in SQL): nothing applied, no
/// file left, the database goes on. Before: it committed, its apply met
/// the full disk, the database stopped, and every opening stopped again
/// until space was freed outside it.
#[test]
fn a_write_set_the_disk_has_no_room_for_is_refused_before_its_commit_point() {
    let fs = new_fs();
    let stats = Arc::new(IoStats::default());
    let dir = Path::new("/sim/db");
    let sim = || -> Arc<dyn FileSystem> { Arc::new(fs.clone()) };
    let db = Database::create_with(sim(), stats, dir, options()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut rng = SplitMix64::new(11);
    let (before, _) = spilled_txn(&db, &t, &mut rng, 100, "before").unwrap();
    let mut acked = Rows::new();
    apply(&mut acked, &before);
    fs.update_faults(|f| f.free_space_reported = Some(100_000));
    let mut tx = db.begin();
    for k in 0..2000u64 {
        tx.upsert(&t, &key_u64(k), &[9; 100]).unwrap();
    }
    let e = tx.commit().expect_err("no room to apply the write set");
    assert!(e.is_disk_full() && !e.is_fatal(), "{e}");
    assert!(e.to_string().contains("nothing was committed"), "{e}");
    assert!(fs.list_dir(&dir.join("spill")).unwrap().is_empty());
    assert_eq!(all_rows(&db, &t).unwrap(), acked);
    // With room reported, the same size commits.
    fs.update_faults(|f| f.free_space_reported = Some(1 << 30));
    let (changes, committed) = spilled_txn(&db, &t, &mut rng, 2000, "room").unwrap();
    assert!(committed);
    apply(&mut acked, &changes);
    assert_eq!(all_rows(&db, &t).unwrap(), acked);
    db.close().unwrap();
}
