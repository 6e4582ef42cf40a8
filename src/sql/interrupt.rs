//! Stopping a running statement from outside it: a CancelRequest,
//! pg_cancel_backend and `statement_timeout` (57014), a server shutting
//! down and pg_terminate_backend (57P01), a client that went away
//! (08006).
//!
//! Rules: a session owns one `Interrupt`; other threads hold it in an Arc
//! and only set it. A statement's executor loops call `Watch::check` for
//! each row (and each chunk of a scan), so a statement stops within one
//! row's work of being told. A wait for a row lock looks at it every
//! 10 ms (`Interrupt::stopper`), and so does a wait for the parse budget.
//! A cancel that arrives between statements is dropped when the next one
//! starts, as PostgreSQL drops it; a shutdown stops every statement after
//! it.
//! - A running statement asks whether its client is still there every
//!   `PROBE_EVERY` checks and in each lock wait's look (the server's
//!   probe polls the socket for a hang-up, as PostgreSQL's
//!   client_connection_check_interval does): a client gone stops it and
//!   every later one with 08006, and the session ends, rolled back.

use super::types::{codes, SqlError};
use crate::lock_table::Stop;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const RUNNING: u8 = 0;
const CANCELED: u8 = 1;
const SHUTTING_DOWN: u8 = 2;
const TERMINATED: u8 = 3;
const CLIENT_GONE: u8 = 4;

/// Checks between two asks of the client probe: a probe is a poll(2),
/// about a microsecond, so at a row's few hundred nanoseconds of work
/// it costs well under 1 %.
const PROBE_EVERY: u32 = 1024;

/// What other threads may tell a session's running statement.
#[derive(Default)]
pub struct Interrupt {
    state: AtomicU8,
    /// Wakes the session's connection where it waits for a message, so
    /// that a terminated idle session ends too (the server sets it).
    on_terminate: OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Whether the session's client has gone (the server sets it).
    client_gone: OnceLock<Box<dyn Fn() -> bool + Send + Sync>>,
}

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupt")
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish()
    }
}

impl Interrupt {
    /// A CancelRequest: the running statement stops with 57014.
    pub fn cancel(&self) {
        let _ = self
            .state
            .compare_exchange(RUNNING, CANCELED, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The server stops: this statement and every later one stop with
    /// 57P01, and the session's connection is told to end (it sends the
    /// FATAL 57P01 PostgreSQL sends at a shutdown).
    pub fn shut_down(&self) {
        self.state.store(SHUTTING_DOWN, Ordering::SeqCst);
        if let Some(wake) = self.on_terminate.get() {
            wake();
        }
    }

    /// pg_terminate_backend: this statement and every later one stop with
    /// 57P01, and the session's connection is told to end.
    pub fn terminate(&self) {
        let _ = self.state.fetch_max(TERMINATED, Ordering::SeqCst);
        if let Some(wake) = self.on_terminate.get() {
            wake();
        }
    }

    /// Whether the session was told to end (terminated or shut down), or
    /// its client was found gone.
    pub fn ending(&self) -> bool {
        matches!(
            self.state.load(Ordering::SeqCst),
            SHUTTING_DOWN | TERMINATED | CLIENT_GONE
        )
    }

    /// How a running statement learns that its client has gone: `gone`
    /// answers whether it has (set once, by the connection serving the
    /// session; it must not block).
    pub fn on_client_check(&self, gone: impl Fn() -> bool + Send + Sync + 'static) {
        let _ = self.client_gone.set(Box::new(gone));
    }

    /// Asks the client probe; a client gone is remembered.
    fn probe_client(&self) -> bool {
        let gone = self.client_gone.get().is_some_and(|gone| gone());
        if gone {
            self.state.fetch_max(CLIENT_GONE, Ordering::SeqCst);
        }
        gone
    }

    /// What [`Interrupt::terminate`] calls besides stopping the statement
    /// (set once, by the connection serving the session).
    pub fn on_terminate(&self, wake: impl Fn() + Send + Sync + 'static) {
        let _ = self.on_terminate.set(Box::new(wake));
    }

    /// A statement starts, with `timeout` (statement_timeout) if any.
    pub(super) fn watch(&self, timeout: Option<Duration>) -> Watch<'_> {
        let _ = self
            .state
            .compare_exchange(CANCELED, RUNNING, Ordering::SeqCst, Ordering::SeqCst);
        Watch {
            interrupt: Some(self),
            deadline: timeout.map(|t| Instant::now() + t),
            checks: AtomicU32::new(0),
        }
    }
}

impl Interrupt {
    /// What the engine checks while the statement `watch` watches waits
    /// for a row lock: whether it must stop (the error is `watch`'s).
    pub(super) fn stopper(self: &Arc<Self>, watch: &Watch) -> Stop {
        let (interrupt, deadline) = (self.clone(), watch.deadline);
        Arc::new(move || {
            interrupt.state.load(Ordering::Relaxed) != RUNNING
                || deadline.is_some_and(|d| Instant::now() >= d)
                || interrupt.probe_client()
        })
    }
}

/// One running statement's view of its interrupt and deadline.
#[derive(Debug)]
pub struct Watch<'a> {
    interrupt: Option<&'a Interrupt>,
    deadline: Option<Instant>,
    /// Checks so far, to ask the client probe every `PROBE_EVERY`.
    checks: AtomicU32,
}

/// For work no client waits on (an index build inside DDL).
pub static UNWATCHED: Watch<'static> = Watch {
    interrupt: None,
    deadline: None,
    checks: AtomicU32::new(0),
};

impl Watch<'_> {
    /// Whether the statement must stop, as the error it stops with.
    pub fn check(&self) -> Result<(), SqlError> {
        if let Some(i) = self.interrupt {
            if self.checks.fetch_add(1, Ordering::Relaxed) % PROBE_EVERY == PROBE_EVERY - 1 {
                i.probe_client();
            }
        }
        match self.interrupt.map(|i| i.state.load(Ordering::Relaxed)) {
            Some(CANCELED) => Err(SqlError::new(
                codes::QUERY_CANCELED,
                "canceling statement due to user request",
            )),
            Some(SHUTTING_DOWN | TERMINATED) => Err(SqlError::new(
                codes::ADMIN_SHUTDOWN,
                "terminating connection due to administrator command",
            )),
            Some(CLIENT_GONE) => Err(SqlError::new(
                codes::CONNECTION_FAILURE,
                "connection to client lost",
            )),
            _ if self.deadline.is_some_and(|d| Instant::now() >= d) => Err(SqlError::new(
                codes::QUERY_CANCELED,
                "canceling statement due to statement timeout",
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_stops_the_running_statement_only() {
        let i = Interrupt::default();
        let w = i.watch(None);
        assert!(w.check().is_ok());
        i.cancel();
        assert_eq!(w.check().unwrap_err().code, "57014");
        // The next statement starts afresh.
        assert!(i.watch(None).check().is_ok());
        i.shut_down();
        i.cancel();
        assert_eq!(i.watch(None).check().unwrap_err().code, "57P01");
    }

    /// A terminated session's statements all stop with 57P01, a cancel
    /// does not undo it, and its connection is woken once.
    #[test]
    fn a_termination_stops_every_later_statement_and_wakes_the_connection() {
        let i = Interrupt::default();
        let woken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w = woken.clone();
        i.on_terminate(move || {
            w.fetch_add(1, Ordering::SeqCst);
        });
        assert!(!i.ending());
        i.terminate();
        i.cancel();
        assert!(i.ending());
        assert_eq!(i.watch(None).check().unwrap_err().code, "57P01");
        assert_eq!(i.watch(None).check().unwrap_err().code, "57P01");
        assert_eq!(woken.load(Ordering::SeqCst), 1);
    }

    /// A statement asks the probe every PROBE_EVERY checks and in a lock
    /// wait; once the client is gone, it and every later statement stop
    /// with 08006, a cancel does not undo it, and the session is ending.
    #[test]
    fn a_client_gone_stops_the_statement_at_its_next_probe() {
        let i = Arc::new(Interrupt::default());
        let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let g = gone.clone();
        i.on_client_check(move || g.load(Ordering::SeqCst));
        let w = i.watch(None);
        for _ in 0..3 * PROBE_EVERY {
            w.check().unwrap();
        }
        gone.store(true, Ordering::SeqCst);
        let mut stopped_at = None;
        for n in 0..=PROBE_EVERY {
            if let Err(e) = w.check() {
                assert_eq!(e.code, "08006", "{e}");
                stopped_at = Some(n);
                break;
            }
        }
        assert!(stopped_at.is_some(), "never stopped");
        assert!(i.ending());
        i.cancel();
        assert_eq!(i.watch(None).check().unwrap_err().code, "08006");

        // A lock wait's look asks the probe at once.
        let j = Arc::new(Interrupt::default());
        j.on_client_check(|| true);
        let w = j.watch(None);
        assert!((j.stopper(&w))());
        assert_eq!(w.check().unwrap_err().code, "08006");
    }

    #[test]
    fn a_passed_deadline_is_a_statement_timeout() {
        let i = Interrupt::default();
        let e = i.watch(Some(Duration::ZERO)).check().unwrap_err();
        assert_eq!(e.code, "57014");
        assert!(e.message.contains("statement timeout"), "{e}");
        assert!(UNWATCHED.check().is_ok());
    }
}
