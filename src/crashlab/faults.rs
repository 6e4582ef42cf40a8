//! The fault switches beyond power loss, each as a scenario of an
//! iteration:
//! - `eio`: an fsync of the WAL, a data file or the control file (one of
//!   [`super::CrashTestOptions::eio_targets`]) fails. The caller must get a fatal error, the engine
//!   must then refuse every commit and checkpoint (after "fsyncgate", a
//!   retried fsync may report success over dropped writes), and after the
//!   crash nothing acknowledged may be missing.
//! - `enospc`: a data file, the WAL or (double writes) `dw/deferred` is
//!   full. The caller must get a clear
//!   error (disk full); once space returns, work must go on, at worst after
//!   reopening the database; nothing acknowledged may be missing.
//! - `bitflip`: after the oracle's check, a bit of a data page flips at
//!   rest. `verify` must name the file and block (always with crc32c), and
//!   reads must refuse the page rather than return wrong rows.
//! - `misdirect`: a checkpoint's first page write lands a few blocks away.
//!   Where the misplaced page survives, `verify` must name it (the header
//!   carries file and block, the checksum covers the block number). The
//!   intended block keeps its old bytes, a lost write that no checksum can
//!   see: the commits that cost are counted, not failed.
//! - `process_crash`: the process is killed mid-work (kill -9) while the
//!   machine stays up, so its unsynced writes stay in the page cache. The
//!   next run recovers (the oracle then settles the commit in flight by
//!   what it reads), works, and the power fails: whatever the restart read
//!   and acted on must survive, not only what the dead process fsynced.

use super::iteration::{Damage, Iteration, Outcome, DB_DIR};
use super::oracle::Tab;
use super::workload::{self, Tables, TxnEnd};
use super::Fault;
use crate::db::{key_u64, Database};
use crate::error::Error;
use crate::file::segmented::parse_segment_name;
use crate::file::{FileKind, FileSystem};
use crate::settings::{ChecksumAlgorithm, TornPageProtection};
use crate::verify::verify_database;
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;

/// The extra fault an iteration injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extra {
    ProcessCrash,
    Eio,
    Enospc,
    Bitflip,
    Misdirect,
    Panic,
    AtomicRefused,
}

/// Picks this iteration's extra fault among those switched on (none in a
/// quarter of the iterations, so plain crashes go on too).
pub fn choose(it: &mut Iteration) -> Option<Extra> {
    let on: Vec<Extra> = [
        (Fault::Eio, Extra::Eio),
        (Fault::Enospc, Extra::Enospc),
        (Fault::Bitflip, Extra::Bitflip),
        (Fault::Misdirect, Extra::Misdirect),
        (Fault::Panic, Extra::Panic),
        (Fault::AtomicRefused, Extra::AtomicRefused),
    ]
    .into_iter()
    .filter(|(f, _)| it.opts.has(*f))
    // The device can refuse RWF_ATOMIC only where the mode asks for it.
    .filter(|(f, _)| *f != Fault::AtomicRefused || it.mode == TornPageProtection::Atomic)
    .map(|(_, e)| e)
    .collect();
    // A process crash comes on top of the others' odds: it ends in a
    // power loss, so plain power cuts keep their share.
    if it.opts.has(Fault::ProcessCrash) && it.rng.chance(0.25) {
        return Some(Extra::ProcessCrash);
    }
    if on.is_empty() || !it.rng.chance(0.75) {
        return None;
    }
    Some(on[it.rng.below(on.len() as u64) as usize])
}

fn dir() -> &'static Path {
    Path::new(DB_DIR)
}

/// An fsync fails during the workload; then the power goes.
pub fn fsync_eio(it: &mut Iteration, db: Database, t: &Tables) -> Outcome {
    let txns = 10 + it.rng.below(40);
    let kinds = &it.opts.eio_targets;
    let kind = kinds[it.rng.below(kinds.len() as u64) as usize];
    // A commit fsyncs the WAL once; a checkpoint each data file and the
    // control file once.
    let after = match kind {
        FileKind::Wal => it.rng.below(txns + 4),
        _ => it.rng.below(3),
    };
    it.event(format!(
        "workload of {txns} transactions, {} fsync number {after} fails with EIO",
        kind.name()
    ));
    it.fs.fail_fsync(kind, after);
    let end = workload::run_phase(&db, t, &mut it.oracle, &mut it.rng, &it.tags, txns, 0.08);
    it.c.commits_acknowledged += end.commits;
    let struck = !it.fs.fsync_failure_pending() && it.sim.faults().fail_fsync_after.is_none();
    it.sim.update_faults(|f| f.fail_fsync_after = None);
    it.event(format!(
        "{} commits, {} checkpoints, stops: {:?}",
        end.commits, end.checkpoints, end.stops
    ));
    if struck {
        it.c.faults.fsync_failures += 1;
        *it.c
            .faults
            .fsync_failures_by_file
            .entry(kind.name().to_string())
            .or_default() += 1;
        if end.stops.is_empty() {
            return Err("an fsync failed and no caller heard of it".into());
        }
    }
    it.settle(end.stops, |_, error| {
        if !struck {
            Err(format!("error with no fault: {error}"))
        } else if !error.is_fatal() {
            Err(format!("a failed fsync reached the caller as: {error}"))
        } else {
            Ok(())
        }
    })?;
    if struck {
        // The engine must have stopped: no commit, no checkpoint.
        let mut stopped = true;
        let tag = it.tags.fetch_add(1, SeqCst);
        let parts = it.oracle.parts.len();
        match workload::run_txn(&db, t, &mut it.oracle.parts[0], &mut it.rng, tag, parts) {
            TxnEnd::Committed => {
                stopped = false;
                it.c.commits_acknowledged += 1;
                it.deferred.push(
                    "a commit was acknowledged after an fsync had failed (the engine did not stop)"
                        .into(),
                );
            }
            TxnEnd::Wrong(w) => {
                return Err(format!(
                    "after the failed fsync, a live read was wrong: {w}"
                ))
            }
            TxnEnd::InFlight(_) => it.c.commits_in_flight += 1,
            TxnEnd::Aborted(_) | TxnEnd::Refused(_) => {}
        }
        if db.checkpoint().is_ok() {
            stopped = false;
            it.deferred.push(
                "a checkpoint completed after an fsync had failed (the engine did not stop)".into(),
            );
        }
        it.c.faults.engine_stopped += stopped as u64;
        if stopped {
            *it.c
                .faults
                .engine_stopped_by_file
                .entry(kind.name().to_string())
                .or_default() += 1;
        }
    }
    it.crash(Some(db));
    Ok(())
}

/// The process is killed during a workload; the next run recovers, is
/// checked, works, and then the power fails. `Ok(false)`: the iteration
/// ended early (damage it may only detect was named).
pub fn process_crash(it: &mut Iteration, db: Database, t: &Tables) -> Result<bool, String> {
    let txns = 10 + it.rng.below(40);
    let cut = it.rng.below(3 * txns + 10);
    it.event(format!(
        "workload of {txns} transactions, process killed after {cut} calls"
    ));
    it.sim.update_faults(|f| f.power_cut_after = Some(cut));
    it.phase(&db, t, txns, 0.05)?;
    it.kill(db);
    if it.rng.chance(0.5) {
        // The power fails during the restart itself, at any of its calls:
        // its recovery and checkpoint read and write what the dead process
        // left in the page cache.
        let calls = it.calls_to_open();
        it.recovery_power_cut = Some(it.rng.below(calls.max(1)));
    }
    let Some(db) = it.recover()? else {
        return Ok(false);
    };
    if !it.check(&db)? {
        return Ok(false);
    }
    let t = Tables::of(&db).map_err(|e| e.to_string())?;
    it.power_cut(db, &t)?;
    Ok(true)
}

/// True for an error that says the disk is full.
pub fn says_disk_full(e: &Error) -> bool {
    let s = e.to_string();
    e.is_disk_full() || s.contains("No space left") || s.contains("disk full")
}

/// A data file or the WAL fills up during the workload; space returns;
/// work must go on; then the power goes.
pub fn disk_full(it: &mut Iteration, db: Database, t: &Tables) -> Outcome {
    let mut txns = 10 + it.rng.below(40);
    let ps = it.opts.page_size as u64;
    // Only growth takes space. The WAL grows by whole segments, created
    // ahead of the commits that need them: run until one is, and let its
    // creation fail part way.
    let (kind, budget) = if it.rng.chance(0.5) {
        txns = 2000;
        let segment = it.base.options.creation.or_defaults().wal_segment_size;
        (FileKind::Wal, it.rng.below(segment))
    } else if it.mode == TornPageProtection::DoubleWrites && it.rng.chance(0.4) {
        // The area is preallocated; `dw/deferred` grows as slots are
        // first used, so evictions and checkpoints meet the full disk
        // there (review item 3 of issue 34): they must go on unharmed.
        (FileKind::DoubleWrite, it.rng.below(txns * ps / 4 + ps))
    } else {
        (FileKind::Data, it.rng.below(txns * ps / 2 + ps))
    };
    let refused_before: Vec<usize> = it.oracle.parts.iter().map(|p| p.refused.len()).collect();
    it.sim
        .update_faults(|f| f.enospc_after_bytes = Some((kind, budget)));
    let end = workload::run_phase(&db, t, &mut it.oracle, &mut it.rng, &it.tags, txns, 0.08);
    it.c.commits_acknowledged += end.commits;
    it.sim.update_faults(|f| f.enospc_after_bytes = None);
    if end.stops.is_empty() {
        it.crash(Some(db));
        return Ok(());
    }
    it.c.faults.disk_full += 1;
    it.settle(end.stops, |it, error| {
        if !says_disk_full(error) {
            let kind = kind.name();
            return Err(format!("a full {kind} disk reached the caller as: {error}"));
        }
        it.c.faults.disk_full_clear_errors += 1;
        Ok(())
    })?;
    // Space is back. Go on in place if the engine can, else reopen.
    let db = if db.checkpoint().is_ok() && none_refused_visible(it, &db, t, &refused_before)? {
        db
    } else {
        drop(db);
        let db = it
            .open()
            .map_err(|e| format!("reopening once the disk had room again: {e}"))?;
        it.c.faults.disk_full_reopened += 1;
        if !it.check(&db)? {
            return Err("reads failed after a full disk".into());
        }
        db
    };
    let more = 3 + it.rng.below(10);
    it.phase(&db, t, more, 0.1)
        .map_err(|e| format!("once the disk had room again, work did not go on: {e}"))?;
    it.c.faults.disk_full_continued += 1;
    it.crash(Some(db));
    Ok(())
}

/// Checks that no commit the caller was told failed for a full disk is
/// visible: a caller would retry it and apply it twice. `Ok(false)`: the
/// rows could not be read. Only the commits refused since `before` (each
/// part's count of refused commits) are checked: a later commit may have
/// written what an older one wanted.
fn none_refused_visible(
    it: &mut Iteration,
    db: &Database,
    t: &Tables,
    before: &[usize],
) -> Result<bool, String> {
    for (part, from) in it.oracle.parts.iter().zip(before) {
        let tx = db.begin();
        for txn in &part.refused[*from..] {
            let mut there = 0;
            for ((tab, k), v) in &txn.changes {
                let table = if *tab == Tab::Accounts {
                    &t.accounts
                } else {
                    &t.items
                };
                match tx.get(table, &key_u64(*k)) {
                    Ok(got) => there += (got.as_ref() == v.as_ref()) as usize,
                    Err(_) => return Ok(false),
                }
            }
            if there > 0 {
                return Err(format!(
                    "commit {} was told it failed for a full disk, yet {there} of its {} rows are visible",
                    txn.tag,
                    txn.changes.len()
                ));
            }
        }
    }
    Ok(true)
}

/// A data page's path, file-wide block and offset in its segment.
fn pick_page(it: &mut Iteration) -> Option<(std::path::PathBuf, u32, u64)> {
    let ps = it.opts.page_size as u64;
    let per_segment = it
        .base
        .options
        .creation
        .or_defaults()
        .pages_per_data_segment();
    let data = dir().join(crate::db::directory::DATA_DIR);
    let files = it.sim.list_dir(&data).ok()?;
    for _ in 0..32 {
        let path = files
            .get(it.rng.below(files.len().max(1) as u64) as usize)?
            .clone();
        let name = path.file_name()?.to_str()?.to_string();
        let (_, segment) = parse_segment_name(&name)?;
        let bytes = it.sim.live_bytes(&path)?;
        let pages = bytes.len() as u64 / ps;
        if pages == 0 {
            continue;
        }
        let p = it.rng.below(pages);
        if bytes[(p * ps) as usize..((p + 1) * ps) as usize]
            .iter()
            .all(|b| *b == 0)
        {
            continue;
        }
        return Some((path, (segment * per_segment + p) as u32, p * ps));
    }
    None
}

/// A bit flips in a page at rest: verify and reads must catch it.
pub fn bit_flip(it: &mut Iteration, db: Database) -> Outcome {
    db.close().map_err(|e| format!("closing: {e}"))?;
    let Some((path, block, at)) = pick_page(it) else {
        return Ok(());
    };
    let offset = it.rng.below(it.opts.page_size as u64);
    let bit = it.rng.below(8) as u8;
    it.sim
        .flip_bit(&path, at + offset, bit)
        .map_err(|e| e.to_string())?;
    it.c.faults.bit_flips += 1;
    it.damage = Some(Damage::BitFlip);
    let report = verify_database(&it.sim, dir()).map_err(|e| format!("verify: {e}"))?;
    let here = |f: &&crate::verify::PageFailure| f.path == path && f.block == block;
    if let Some(other) = report.failures.iter().find(|f| !here(f)) {
        return Err(format!("verify found damage where no bit flipped: {other}"));
    }
    let what = format!("{} block {block} byte {offset} bit {bit}", path.display());
    if report.failures.iter().any(|f| here(&f)) {
        it.c.faults.bit_flips_detected += 1;
    } else if it.opts.data_checksums == ChecksumAlgorithm::Crc32c {
        return Err(format!(
            "a bit flipped at {what} and verify passed the page"
        ));
    }
    let db = match it.open() {
        Ok(db) => db,
        Err(e) => {
            it.c.faults.bit_flips_read_errors += 1;
            return it.detected(format!("opening after a bit flip at {what}: {e}"));
        }
    };
    if !it.check(&db)? {
        it.c.faults.bit_flips_read_errors += 1;
    }
    drop(db);
    Ok(())
}

/// A checkpoint's first page write lands `delta` blocks away.
pub fn misdirect(it: &mut Iteration, db: Database, t: &Tables) -> Outcome {
    let more = 3 + it.rng.below(8);
    it.phase(&db, t, more, 0.0)?;
    let delta = [-3i64, -2, -1, 1, 2, 3][it.rng.below(6) as usize];
    let ps = it.opts.page_size;
    it.sim
        .update_faults(|f| f.misdirect_next_write = Some((FileKind::Data, delta, ps as usize)));
    let seen = it.sim.op_count();
    db.checkpoint()
        .map_err(|e| format!("checkpoint with a misdirected write: {e}"))?;
    let trace = it.sim.trace();
    let hit = trace.iter().filter(|o| o.seq >= seen).find_map(|o| {
        let from = o
            .note
            .as_deref()?
            .strip_prefix("misdirected from offset ")?
            .parse::<u64>()
            .ok()?;
        Some((o.clone(), from))
    });
    it.sim.update_faults(|f| f.misdirect_next_write = None);
    let Some((op, from)) = hit.filter(|(op, from)| op.offset != *from) else {
        return it.close_and_verify(db);
    };
    it.c.faults.misdirected_writes += 1;
    it.damage = Some(Damage::Misdirect);
    it.lost_write = true;
    db.close()
        .map_err(|e| format!("closing after a misdirected write: {e}"))?;
    let bytes = it.sim.live_bytes(&op.path).unwrap_or_default();
    let landed = bytes.get(op.offset as usize..(op.offset + op.len) as usize);
    let intact = landed.is_some_and(|b| Some(crc32c::crc32c(b)) == op.crc32c);
    let report = verify_database(&it.sim, dir()).map_err(|e| format!("verify: {e}"))?;
    let name = op.path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let per_segment = it
        .base
        .options
        .creation
        .or_defaults()
        .pages_per_data_segment();
    let first = parse_segment_name(name).map_or(0, |(_, s)| s * per_segment);
    let blocks =
        (op.offset / ps as u64..=(op.offset + op.len - 1) / ps as u64).map(|b| (first + b) as u32);
    let flagged: Vec<u32> = blocks
        .clone()
        .filter(|b| {
            report
                .failures
                .iter()
                .any(|f| f.path == op.path && f.block == *b)
        })
        .collect();
    if intact {
        if flagged.len() as u64 != blocks.count() as u64 {
            return Err(format!(
                "pages written at offset {from} of {} landed at {} and verify flagged only blocks {flagged:?}",
                op.path.display(),
                op.offset
            ));
        }
        it.c.faults.misdirected_detected += 1;
    } else {
        it.c.faults.misdirected_overwritten += 1;
    }
    let db = match it.open() {
        Ok(db) => db,
        Err(e) => return it.detected(format!("opening after a misdirected write: {e}")),
    };
    it.check(&db)?;
    drop(db);
    Ok(())
}
