//! Stopping a running statement from outside it: a CancelRequest,
//! pg_cancel_backend and `statement_timeout` (57014), a server shutting
//! down and pg_terminate_backend (57P01).
//!
//! Rules: a session owns one `Interrupt`; other threads hold it in an Arc
//! and only set it. A statement's executor loops call `Watch::check` for
//! each row (and each chunk of a scan), so a statement stops within one
//! row's work of being told. A wait for a row lock looks at it every
//! 10 ms (`Interrupt::stopper`), and so does a wait for the parse budget.
//! A cancel that arrives between statements is dropped when the next one
//! starts, as PostgreSQL drops it; a shutdown stops every statement after
//! it.

use super::types::{codes, SqlError};
use crate::lock_table::Stop;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const RUNNING: u8 = 0;
const CANCELED: u8 = 1;
const SHUTTING_DOWN: u8 = 2;
const TERMINATED: u8 = 3;

/// What other threads may tell a session's running statement.
#[derive(Default)]
pub struct Interrupt {
    state: AtomicU8,
    /// Wakes the session's connection where it waits for a message, so
    /// that a terminated idle session ends too (the server sets it).
    on_terminate: OnceLock<Box<dyn Fn() + Send + Sync>>,
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

    /// Whether the session was told to end (terminated or shut down).
    pub fn ending(&self) -> bool {
        matches!(
            self.state.load(Ordering::SeqCst),
            SHUTTING_DOWN | TERMINATED
        )
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
        })
    }
}

/// One running statement's view of its interrupt and deadline.
#[derive(Debug)]
pub struct Watch<'a> {
    interrupt: Option<&'a Interrupt>,
    deadline: Option<Instant>,
}

/// For work no client waits on (an index build inside DDL).
pub static UNWATCHED: Watch<'static> = Watch {
    interrupt: None,
    deadline: None,
};

impl Watch<'_> {
    /// Whether the statement must stop, as the error it stops with.
    pub fn check(&self) -> Result<(), SqlError> {
        match self.interrupt.map(|i| i.state.load(Ordering::Relaxed)) {
            Some(CANCELED) => Err(SqlError::new(
                codes::QUERY_CANCELED,
                "canceling statement due to user request",
            )),
            Some(SHUTTING_DOWN | TERMINATED) => Err(SqlError::new(
                codes::ADMIN_SHUTDOWN,
                "terminating connection due to administrator command",
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

    #[test]
    fn a_passed_deadline_is_a_statement_timeout() {
        let i = Interrupt::default();
        let e = i.watch(Some(Duration::ZERO)).check().unwrap_err();
        assert_eq!(e.code, "57014");
        assert!(e.message.contains("statement timeout"), "{e}");
        assert!(UNWATCHED.check().is_ok());
    }
}
