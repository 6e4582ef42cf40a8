//! The engine's own failures as scenarios of an iteration (issue 57):
//! - `panic`: a panic inside one of the engine's critical sections,
//!   between a WAL reservation and its copy, at a WAL write or fsync (a
//!   flush leader's), or at a data, double-write or control file write
//!   (an eviction's, a checkpoint's, a batch's). The call fails in its
//!   caller (the workload catches the unwind where a client would see an
//!   error). After a panic in the WAL the engine must refuse every later
//!   commit (a hole or an unfinished round in the WAL would otherwise be
//!   flushed past); after any, the power fails and nothing acknowledged
//!   may be missing.
//! - `atomic_refused`: under `atomic`, the device stops taking RWF_ATOMIC
//!   writes (EOPNOTSUPP, as after its atomic unit changed). The engine
//!   must stop with a fatal error naming the unit and the file; after the
//!   power cut the opening asks for `double_writes`, which must recover
//!   every acknowledged commit, and the database works on under it.

use super::iteration::{Iteration, Outcome};
use super::sim::{PanicAt, TraceKind};
use super::workload::{self, Tables, TxnEnd};
use crate::db::Database;
use crate::error::Error;
use crate::file::FileKind;
use crate::settings::TornPageProtection;
use std::sync::atomic::Ordering::SeqCst;

/// Where a panic is injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    /// Between a WAL insertion's reservation and its copy.
    CopyWindow,
    /// At a WAL write or fsync: inside a flush leader's round.
    Wal(TraceKind),
    /// At a write to a file of this kind.
    Write(FileKind),
}

impl Point {
    fn name(self) -> String {
        match self {
            Point::CopyWindow => "wal_copy_window".into(),
            Point::Wal(TraceKind::Write) => "wal_write".into(),
            Point::Wal(_) => "wal_fsync".into(),
            Point::Write(kind) => format!("{}_write", kind.name()),
        }
    }

    /// A panic here must stop the engine: the WAL cannot go on past it.
    fn in_wal(self) -> bool {
        matches!(self, Point::CopyWindow | Point::Wal(_))
    }
}

/// A panic at a random point of a workload; then the power goes.
pub fn injected_panic(it: &mut Iteration, db: Database, t: &Tables) -> Outcome {
    let txns = 10 + it.rng.below(40);
    let mut points = vec![
        Point::CopyWindow,
        Point::Wal(TraceKind::Write),
        Point::Wal(TraceKind::SyncData),
        Point::Write(FileKind::Data),
        Point::Write(FileKind::Control),
    ];
    if it.mode == TornPageProtection::DoubleWrites {
        points.push(Point::Write(FileKind::DoubleWrite));
    }
    let point = points[it.rng.below(points.len() as u64) as usize];
    // A transaction inserts a few records and flushes once; a checkpoint
    // writes a few pages and the control file once.
    let after = match point {
        Point::CopyWindow => it.rng.below(4 * txns),
        Point::Wal(_) => it.rng.below(txns + 2),
        Point::Write(FileKind::Control) => it.rng.below(2),
        Point::Write(_) => it.rng.below(8),
    };
    it.event(format!(
        "workload of {txns} transactions, a panic at {} number {after}",
        point.name()
    ));
    match point {
        Point::CopyWindow => db.engine.wal.copy_window_panic().arm(after),
        Point::Wal(op) => arm_file(it, FileKind::Wal, op, after),
        Point::Write(kind) => arm_file(it, kind, TraceKind::Write, after),
    }
    let end = workload::run_phase(&db, t, &mut it.oracle, &mut it.rng, &it.tags, txns, 0.15);
    it.c.commits_acknowledged += end.commits;
    let struck = match point {
        Point::CopyWindow => {
            db.engine.wal.copy_window_panic().disarm();
            db.engine.wal.copy_window_panic().struck()
        }
        _ => it.sim.update_faults(|f| f.panic_at.take().is_none()),
    };
    it.event(format!(
        "{} commits, {} checkpoints, panicked: {struck}, stops: {:?}",
        end.commits, end.checkpoints, end.stops
    ));
    it.settle(end.stops, |_, error| {
        if struck {
            Ok(())
        } else {
            Err(format!("error with no fault: {error}"))
        }
    })?;
    if struck {
        it.c.faults.panics += 1;
        *it.c.faults.panics_by_point.entry(point.name()).or_default() += 1;
        let stopped = !commits_after_the_fault(it, &db, t);
        if stopped {
            it.c.faults.engine_stopped_after_panic += 1;
        } else if point.in_wal() {
            it.deferred.push(format!(
                "a commit was acknowledged after a panic at {} (the engine did not stop)",
                point.name()
            ));
        }
    }
    it.crash(Some(db));
    Ok(())
}

fn arm_file(it: &mut Iteration, kind: FileKind, op: TraceKind, after: u64) {
    let at = PanicAt { kind, op, after };
    it.sim.update_faults(|f| f.panic_at = Some(at));
}

/// Whether one more transaction commits; its outcome goes to the oracle.
fn commits_after_the_fault(it: &mut Iteration, db: &Database, t: &Tables) -> bool {
    let tag = it.tags.fetch_add(1, SeqCst);
    let parts = it.oracle.parts.len();
    match workload::run_txn(db, t, &mut it.oracle.parts[0], &mut it.rng, tag, parts) {
        TxnEnd::Committed => {
            it.c.commits_acknowledged += 1;
            true
        }
        TxnEnd::Wrong(w) => {
            it.deferred
                .push(format!("after the fault, a live read was wrong: {w}"));
            false
        }
        TxnEnd::InFlight(_) => {
            it.c.commits_in_flight += 1;
            false
        }
        TxnEnd::Aborted(_) | TxnEnd::Refused(_) => false,
    }
}

/// Under `atomic`: the device refuses RWF_ATOMIC from a random point of
/// the workload on; the engine must stop; the power goes; the next
/// opening asks for `double_writes`.
pub fn atomic_refused(it: &mut Iteration, db: Database, t: &Tables) -> Outcome {
    let before = it.rng.below(30);
    let txns = 10 + it.rng.below(40);
    it.event(format!(
        "workload of {before} transactions, then the device refuses RWF_ATOMIC during {txns} more"
    ));
    it.phase(&db, t, before, 0.1)?;
    it.sim.set_atomic_unit(None);
    let end = workload::run_phase(&db, t, &mut it.oracle, &mut it.rng, &it.tags, txns, 0.3);
    it.c.commits_acknowledged += end.commits;
    it.event(format!(
        "{} commits, {} checkpoints, stops: {:?}",
        end.commits, end.checkpoints, end.stops
    ));
    let mut refused = false;
    it.settle(end.stops, |_, error| match error {
        Error::AtomicWriteRefused { .. } => {
            refused = true;
            Ok(())
        }
        e if e.is_fatal() => Ok(()),
        e => Err(format!("a refused atomic write reached the caller as: {e}")),
    })?;
    if refused {
        it.c.faults.atomic_refusals += 1;
        if !commits_after_the_fault(it, &db, t) {
            it.c.faults.atomic_refusals_stopped += 1;
        } else {
            it.deferred.push(
                "a commit was acknowledged after RWF_ATOMIC was refused (the engine did not stop)"
                    .into(),
            );
        }
    }
    let checksums = it.opts.data_checksums != crate::settings::ChecksumAlgorithm::Off;
    if refused && checksums {
        // The files cannot be opened under `atomic` now: the opening
        // after the crash asks for double writes, and the iteration works
        // and crashes once more under them.
        it.options.creation.torn_page_protection = Some(TornPageProtection::DoubleWrites);
        it.switched = true;
        it.protection_fixed = true;
    } else {
        // No page write came (all fit the pool), or double writes cannot
        // run (they need page checksums): the device's unit comes back
        // before the opening, which stays under `atomic`.
        it.sim.set_atomic_unit(it.opts.atomic_unit());
    }
    it.crash(Some(db));
    Ok(())
}
