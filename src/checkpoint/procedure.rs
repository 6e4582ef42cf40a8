//! The checkpoint procedure (steps in `checkpoint/mod.rs`).

use super::record::{log_checkpoint, CheckpointInfo};
use super::Reason;
use crate::engine::Engine;
use crate::error::Result;
use crate::file::Issuer;
use crate::Lsn;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// Runs a checkpoint; returns its redo point. A fatal failure (a failed
/// fsync) stops the engine: a later checkpoint must never complete over
/// page writes the kernel may have dropped (PostgreSQL's fsyncgate).
pub(crate) fn run(engine: &Engine, reason: Reason) -> Result<Lsn> {
    engine.stop_if_fatal(run_once(engine, reason))
}

fn run_once(engine: &Engine, reason: Reason) -> Result<Lsn> {
    let state = &engine.checkpoint;
    let _one = state.one_at_a_time.lock();
    engine.check_usable()?;
    state.started.fetch_add(1, Relaxed);
    let redo = engine.wal.insert_lsn();
    state.redo_point.advance(redo);
    *state.last.lock() = (redo, Instant::now());
    // Pins at most a quarter of the pool at once.
    let batch = (engine.pool.nframes() / 4).clamp(1, 64);
    engine.pool.flush_dirty(Issuer::Checkpointer, batch)?;
    engine.pool.files().sync_all(Issuer::Checkpointer)?;
    let info = CheckpointInfo {
        redo,
        next_xid: engine.next_xid.load(Relaxed),
        next_file_id: engine.next_file_id.load(Relaxed),
        shutdown: reason == Reason::Shutdown,
        time: CheckpointInfo::now(),
    };
    let lsn = log_checkpoint(&engine.wal, &info, Issuer::Checkpointer)?;
    {
        let mut control = engine.control.lock();
        info.note_in(&mut control, lsn);
        control.write(engine.fs.as_ref(), &engine.dir, Issuer::Checkpointer)?;
    }
    // Only now, with a durable control file naming a later redo point,
    // may older segments be recycled.
    engine
        .wal
        .recycle_segments_before(redo, Issuer::Checkpointer)?;
    state.completed.fetch_add(1, Relaxed);
    Ok(redo)
}

/// When the last checkpoint started and its redo point.
pub(crate) fn last(engine: &Engine) -> (Lsn, Instant) {
    *engine.checkpoint.last.lock()
}

/// Makes the triggers wait a full interval again after a failed attempt.
pub(crate) fn postpone(engine: &Engine, redo: Lsn) {
    *engine.checkpoint.last.lock() = (redo, Instant::now());
}
