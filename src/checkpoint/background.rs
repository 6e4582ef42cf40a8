//! The background threads: the checkpointer, which starts a checkpoint
//! when `checkpoint_timeout` passed or the WAL since the last redo point
//! reached `max_wal_size / (1 + checkpoint_completion_target)`; the
//! background writer ([`super::bgwriter`]) unless `bgwriter_lru_maxpages`
//! is 0; with `double_writes` (and `double_write_sync_ahead`), the
//! double-write syncer, which fsyncs data files ahead of slot reuse; and,
//! with `synchronous_commit = off`, the WAL writer, which flushes every
//! 10 ms. They are separate so a spread checkpoint never
//! delays WAL flushes or the cleaning of frames.

use super::{procedure, Reason};
use crate::engine::Engine;
use crate::file::Issuer;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the threads look at their triggers (real time).
const POLL: Duration = Duration::from_millis(10);

pub(crate) fn spawn(engine: Arc<Engine>) -> Vec<JoinHandle<()>> {
    let mut threads = vec![spawn_named(
        "untorn-checkpointer",
        engine.clone(),
        checkpointer,
    )];
    if engine.options.bgwriter_lru_maxpages > 0 {
        threads.push(spawn_named(
            "untorn-bgwriter",
            engine.clone(),
            super::bgwriter::run,
        ));
    }
    if engine.protection() == crate::settings::TornPageProtection::DoubleWrites
        && engine.options.double_write_sync_ahead
    {
        threads.push(spawn_named("untorn-dwsync", engine.clone(), dw_syncer));
    }
    if !engine.options.synchronous_commit {
        threads.push(spawn_named("untorn-walwriter", engine, wal_writer));
    }
    threads
}

fn spawn_named(name: &str, engine: Arc<Engine>, body: fn(&Engine)) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || body(&engine))
        .expect("spawn a background thread")
}

/// The reason a checkpoint is due now, if one is.
fn due(engine: &Engine) -> Option<(Reason, crate::lsn::Lsn)> {
    let (redo, at) = procedure::last(engine);
    let wal_since = engine.wal.insert_lsn().0.saturating_sub(redo.0);
    if wal_since >= engine.options.wal_per_checkpoint() {
        Some((Reason::Wal, redo))
    } else if engine.options.clock.now().saturating_sub(at) >= engine.options.checkpoint_timeout {
        Some((Reason::Timed, redo))
    } else {
        None
    }
}

fn checkpointer(engine: &Engine) {
    while !engine.stop.load(SeqCst) {
        std::thread::sleep(POLL);
        let Some((reason, redo)) = due(engine) else {
            continue;
        };
        if engine.check_usable().is_err() {
            continue;
        }
        if let Err(e) = procedure::run(engine, reason) {
            if e.is_fatal() {
                return;
            }
            // Not fatal (a full disk, say): try again an interval later.
            procedure::postpone(engine, redo);
        }
    }
}

/// Double writes: fsyncs, every poll, the data files of the slots each
/// shard will reuse within its next half area, so that the writers find
/// them durable and do not wait for a data-file fsync themselves.
fn dw_syncer(engine: &Engine) {
    while !engine.stop.load(SeqCst) {
        std::thread::sleep(POLL);
        if engine.check_usable().is_err() {
            continue;
        }
        let protection = engine.pool.page_write_protection();
        if let Err(e) = protection.sync_ahead(Issuer::BackgroundWriter) {
            if e.is_fatal() {
                engine.poison(&e);
                return;
            }
        }
    }
}

fn wal_writer(engine: &Engine) {
    while !engine.stop.load(SeqCst) {
        std::thread::sleep(POLL);
        if let Err(e) = engine.wal.flush(engine.wal.insert_lsn(), Issuer::WalWriter) {
            engine.poison(&e);
            return;
        }
    }
}
