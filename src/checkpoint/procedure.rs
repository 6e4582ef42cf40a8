//! The checkpoint procedure (steps in `checkpoint/mod.rs`).

use super::pacing::Schedule;
use super::record::{log_checkpoint, CheckpointInfo};
use super::{CheckpointLog, Reason};
use crate::engine::Engine;
use crate::error::Result;
use crate::file::Issuer;
use crate::lsn::Lsn;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// Pages written per batch when sorted (runs of consecutive blocks become
/// one vectored write); unsorted, one page per write.
const SORTED_BATCH: usize = 64;

/// Runs a checkpoint; returns what it did. A fatal failure (a failed
/// fsync) stops the engine: a later checkpoint must never complete over
/// page writes the kernel may have dropped (PostgreSQL's fsyncgate).
pub(crate) fn run(engine: &Engine, reason: Reason) -> Result<CheckpointLog> {
    run_paced(engine, reason, reason.is_spread())
}

/// [`run`], spread over `checkpoint_completion_target` or not.
pub(crate) fn run_paced(engine: &Engine, reason: Reason, spread: bool) -> Result<CheckpointLog> {
    let state = &engine.checkpoint;
    // A spread checkpoint in progress stops napping while we wait.
    let hurry = !spread;
    if hurry {
        state.waiting.fetch_add(1, SeqCst);
    }
    let result = {
        let _one = state.one_at_a_time.lock();
        if hurry {
            state.waiting.fetch_sub(1, SeqCst);
        }
        let result = engine.stop_if_fatal(run_once(engine, reason, spread));
        state.set_progress(0, 0);
        result
    };
    match &result {
        Ok(log) => {
            tracing::info!(
                reason = ?log.reason,
                pages_written = log.pages_written,
                pages_marked = log.pages_marked,
                files_synced = log.files_synced,
                write_s = log.write_s,
                sync_s = log.sync_s,
                total_s = log.total_s,
                distance_kb = log.distance / 1024,
                redo = %log.redo,
                "checkpoint complete"
            );
            state.stats.lock().add(log.clone());
        }
        Err(e) => tracing::error!(reason = ?reason, error = %e, "checkpoint failed"),
    }
    result
}

fn run_once(engine: &Engine, reason: Reason, spread: bool) -> Result<CheckpointLog> {
    let state = &engine.checkpoint;
    let clock = &engine.options.clock;
    engine.check_usable()?;
    state.started.fetch_add(1, Relaxed);
    // Running, with its work not yet counted.
    state.set_progress(0, 1);
    let start = clock.now();
    let (previous_redo, redo) = state.redo_point.advance(|| engine.wal.insert_lsn());
    *state.last.lock() = (redo, start);
    tracing::info!(reason = ?reason, spread, redo = %redo, "checkpoint starting");
    let schedule = Schedule::new(engine, spread, start, redo);

    let mut pages = engine.pool.mark_for_checkpoint();
    let sort = engine.options.checkpoint_sort;
    if sort {
        pages.sort_unstable();
    }
    let quarter = (engine.pool.nframes() / 4).max(1);
    let batch = match engine.pool.page_write_protection().checkpoint_batch() {
        // Double writes: phase one puts a whole batch through the area with
        // one fsync, phase two writes it in place (seed 003's two phases,
        // a batch at a time); a quarter of the pool at most stays pinned.
        Some(large) => large.min(quarter),
        None if sort => quarter.min(SORTED_BATCH),
        None => 1,
    };
    // Work units: pages to write, deferred pages to write back (those
    // deferred now; more may come), then files to fsync (the open files
    // now, a close bound: a file first opened meanwhile adds one).
    let protection = engine.pool.page_write_protection();
    let write_back = protection.begin_checkpoint(reason == Reason::Shutdown);
    let deferred = if write_back {
        protection.deferred_pages()
    } else {
        0
    };
    let units_n = (pages.len() + deferred + engine.pool.files().open_count()).max(1);
    let units = units_n as f64;
    state.set_progress(0, units_n);
    let flush_after = engine.options.checkpoint_flush_after as usize;
    let mut not_written_back = Vec::new();
    // A checkpoint that stores its own pages among the deferred ones, in
    // a file more than half taken, first writes back the pages it will not
    // store again, so that their slots are free for its own.
    let room = if write_back {
        protection.make_room(&pages, redo, Issuer::Checkpointer, &mut |n| {
            let done = n.min(deferred);
            state.set_progress(done, units_n);
            schedule.pause(done as f64 / units);
        })?
    } else {
        0
    };
    let room = room.min(deferred);
    let (mut done, mut written) = (room, 0u64);
    for chunk in pages.chunks(batch) {
        written += engine
            .pool
            .write_for_checkpoint(chunk, Issuer::Checkpointer)? as u64;
        done += chunk.len();
        state.set_progress(done, units_n);
        if flush_after > 0 {
            not_written_back.extend_from_slice(chunk);
            if not_written_back.len() >= flush_after {
                engine
                    .pool
                    .files()
                    .writeback(&not_written_back, Issuer::Checkpointer)?;
                not_written_back.clear();
            }
        }
        schedule.pause(done as f64 / units);
    }
    // Pages whose in-place write was deferred (evicted ones, and this
    // checkpoint's own unless it is the shutdown one) stay where they are
    // (persist_deferred below). At a shutdown, or with keep off, they go in
    // place now, made durable by the fsyncs below; where room was made,
    // the cold pages deferred meanwhile do.
    // Paced like the pool's pages: at full speed they were a burst of
    // writes at the checkpoint's end.
    if write_back {
        protection.write_back_paced(Issuer::Checkpointer, &mut |n| {
            let done = pages.len() + (room + n).min(deferred);
            state.set_progress(done, units_n);
            schedule.pause(done as f64 / units);
        })?;
    }
    let writes_done = clock.now();
    let before_syncs = pages.len() + deferred;
    let files_synced = engine
        .pool
        .files()
        .sync_each(Issuer::Checkpointer, |i, _| {
            state.set_progress(before_syncs + i, units_n);
            schedule.pause((before_syncs + i) as f64 / units);
        })?;
    // After the fsyncs: a page the deferred pages' manifest stops naming
    // must be durable in place by now.
    protection.persist_deferred(redo, Issuer::Checkpointer)?;
    let syncs_done = clock.now();

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
        control.deferred_manifest = protection.durable_manifest();
        control.write(engine.fs.as_ref(), &engine.dir, Issuer::Checkpointer)?;
    }
    // Only now, with a durable control file naming a later redo point,
    // may older segments be recycled.
    engine
        .wal
        .recycle_segments_before(redo, Issuer::Checkpointer)?;
    let secs = |d: Duration| d.as_secs_f64();
    Ok(CheckpointLog {
        reason,
        redo,
        started_s: secs(start),
        pages_marked: pages.len() as u64,
        pages_written: written,
        files_synced: files_synced as u64,
        write_s: secs(writes_done - start),
        sync_s: secs(syncs_done - writes_done),
        total_s: secs(clock.now() - start),
        distance: if previous_redo.is_valid() {
            redo.0 - previous_redo.0
        } else {
            0
        },
    })
}

/// The last checkpoint's redo point and when it started (engine clock).
pub(crate) fn last(engine: &Engine) -> (Lsn, Duration) {
    *engine.checkpoint.last.lock()
}

/// Makes the triggers wait a full interval again after a failed attempt.
pub(crate) fn postpone(engine: &Engine, redo: Lsn) {
    *engine.checkpoint.last.lock() = (redo, engine.options.clock.now());
}
