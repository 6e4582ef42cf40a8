//! The background thread: with `synchronous_commit = off` it flushes the
//! WAL every 10 ms; it starts a checkpoint when `max_wal_size / 2` of WAL
//! was written since the last redo point or `checkpoint_timeout` passed.

use super::{procedure, Reason};
use crate::engine::Engine;
use crate::file::Issuer;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub(crate) fn spawn(engine: Arc<Engine>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("untorn-background".into())
        .spawn(move || {
            while !engine.stop.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
                if !engine.options.synchronous_commit {
                    let flushed = engine.wal.flush(engine.wal.insert_lsn(), Issuer::WalWriter);
                    if let Err(e) = flushed {
                        engine.poison(&e);
                        return;
                    }
                }
                let (redo, at) = procedure::last(&engine);
                let wal_since = engine.wal.insert_lsn().0.saturating_sub(redo.0);
                let reason = if wal_since >= engine.options.max_wal_size / 2 {
                    Reason::Wal
                } else if at.elapsed() >= engine.options.checkpoint_timeout {
                    Reason::Timed
                } else {
                    continue;
                };
                if engine.check_usable().is_err() {
                    continue;
                }
                if let Err(e) = procedure::run(&engine, reason) {
                    if e.is_fatal() {
                        return;
                    }
                    // Not fatal (a full disk, say): try again later.
                    procedure::postpone(&engine, redo);
                }
            }
        })
        .expect("spawn the background thread")
}
