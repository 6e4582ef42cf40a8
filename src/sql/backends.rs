//! The sessions a server serves, by process id: what a CancelRequest,
//! pg_cancel_backend and pg_terminate_backend reach, and pg_backend_pid
//! names.
//!
//! A session is listed from the moment the server gives it its key
//! (BackendKeyData) until it ends. Every connection runs as the one role
//! the server has, so any session may signal any other, as a PostgreSQL
//! role may signal its own backends.

use super::interrupt::Interrupt;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

struct Backend {
    /// The cancel key's secret, as the client was sent it.
    secret: Vec<u8>,
    interrupt: Arc<Interrupt>,
}

/// The listed sessions.
#[derive(Default)]
pub struct Backends {
    by_pid: Mutex<HashMap<i32, Backend>>,
}

/// What pg_cancel_backend and pg_terminate_backend send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// The running statement stops with 57014; the session goes on.
    Cancel,
    /// The session ends with 57P01, its statement stopped, its
    /// transaction rolled back.
    Terminate,
}

impl Backends {
    pub(super) fn enlist(&self, pid: i32, secret: Vec<u8>, interrupt: Arc<Interrupt>) {
        self.by_pid
            .lock()
            .insert(pid, Backend { secret, interrupt });
    }

    pub(super) fn remove(&self, pid: i32) {
        self.by_pid.lock().remove(&pid);
    }

    /// A CancelRequest: cancels `pid`'s statement if `secret` is its key's.
    /// A wrong key is ignored without a word, as PostgreSQL ignores it.
    pub fn cancel_request(&self, pid: i32, secret: &[u8]) {
        if let Some(b) = self.by_pid.lock().get(&pid) {
            if b.secret == secret {
                b.interrupt.cancel();
            }
        }
    }

    /// pg_cancel_backend / pg_terminate_backend: false where `pid` names
    /// no session (PostgreSQL warns "PID n is not a PostgreSQL backend
    /// process" and returns false).
    pub fn signal(&self, pid: i32, signal: Signal) -> bool {
        let Some(b) = self.by_pid.lock().get(&pid).map(|b| b.interrupt.clone()) else {
            return false;
        };
        match signal {
            Signal::Cancel => b.cancel(),
            Signal::Terminate => b.terminate(),
        }
        true
    }

    /// Whether `pid` names a listed session.
    pub fn contains(&self, pid: i32) -> bool {
        self.by_pid.lock().contains_key(&pid)
    }

    /// How many sessions are listed.
    pub fn len(&self) -> usize {
        self.by_pid.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
