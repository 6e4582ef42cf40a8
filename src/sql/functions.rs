//! The server's own functions a statement may call: pg_backend_pid(),
//! pg_cancel_backend(pid) and pg_terminate_backend(pid [, timeout]), as
//! PostgreSQL's signal functions (src/backend/storage/ipc/signalfuncs.c).

use super::backends::{Backends, Signal};
use super::types::{as_int, codes, SqlError, SqlType, Value};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Function {
    /// `pg_backend_pid()`: the process id this session was given.
    BackendPid,
    /// `pg_cancel_backend(pid)`: true if `pid` is a session (its running
    /// statement, if any, stops with 57014).
    CancelBackend,
    /// `pg_terminate_backend(pid [, timeout_ms])`: true if `pid` is a
    /// session, which ends with 57P01; with a timeout above 0, true only
    /// if it ended within it.
    TerminateBackend,
}

/// The session a statement runs in, as its functions see it.
#[derive(Clone, Copy)]
pub struct SessionView<'a> {
    pub backends: &'a Backends,
    pub pid: Option<i32>,
}

impl Function {
    /// The function `name` called with `args` arguments, if it is one.
    pub fn named(name: &str, args: usize) -> Option<Function> {
        match (name, args) {
            ("pg_backend_pid", 0) => Some(Function::BackendPid),
            ("pg_cancel_backend", 1) => Some(Function::CancelBackend),
            ("pg_terminate_backend", 1 | 2) => Some(Function::TerminateBackend),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Function::BackendPid => "pg_backend_pid",
            Function::CancelBackend => "pg_cancel_backend",
            Function::TerminateBackend => "pg_terminate_backend",
        }
    }

    pub fn result_type(self) -> SqlType {
        match self {
            Function::BackendPid => SqlType::Int4,
            Function::CancelBackend | Function::TerminateBackend => SqlType::Bool,
        }
    }

    /// The type argument `i` is typed as (a parameter takes it).
    pub fn argument_type(self, i: usize) -> SqlType {
        match (self, i) {
            (Function::TerminateBackend, 1) => SqlType::Int8,
            _ => SqlType::Int4,
        }
    }

    pub fn call(self, args: &[Value], session: Option<SessionView<'_>>) -> Result<Value, SqlError> {
        let Some(session) = session else {
            return Err(SqlError::new(
                codes::FEATURE_NOT_SUPPORTED,
                format!("{} cannot be called here", self.name()),
            ));
        };
        let int = |i: usize| args.get(i).map(as_int).transpose().map(Option::flatten);
        match self {
            Function::BackendPid => Ok(session.pid.map_or(Value::Null, |p| Value::Int(p as i64))),
            Function::CancelBackend | Function::TerminateBackend => {
                // A NULL argument: NULL, as for every strict function.
                let Some(pid) = int(0)? else {
                    return Ok(Value::Null);
                };
                let timeout = int(1)?.unwrap_or(0);
                if timeout < 0 {
                    return Err(SqlError::new(
                        codes::INVALID_PARAMETER_VALUE,
                        "\"timeout\" must not be negative",
                    ));
                }
                let Ok(pid) = i32::try_from(pid) else {
                    return Ok(Value::Bool(false));
                };
                let signal = match self {
                    Function::CancelBackend => Signal::Cancel,
                    _ => Signal::Terminate,
                };
                if !session.backends.signal(pid, signal) {
                    return Ok(Value::Bool(false));
                }
                if timeout == 0 || Some(pid) == session.pid {
                    return Ok(Value::Bool(true));
                }
                Ok(Value::Bool(wait_for_end(
                    session.backends,
                    pid,
                    timeout as u64,
                )))
            }
        }
    }
}

/// Waits up to `ms` milliseconds for `pid`'s session to end.
fn wait_for_end(backends: &Backends, pid: i32, ms: u64) -> bool {
    let deadline = Instant::now() + Duration::from_millis(ms);
    loop {
        if !backends.contains(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use crate::db::Database;
    use crate::options::Options;
    use crate::sql::{Outcome, Session, SqlEngine, Value};
    use std::sync::Arc;

    fn value(s: &mut Session, sql: &str) -> Result<Value, String> {
        match s.simple_query(sql).pop().unwrap() {
            Ok(Outcome::Rows { rows, .. }) => Ok(rows[0][0].clone()),
            Ok(o) => panic!("{sql}: {o:?}"),
            Err(e) => Err(e.code.to_string()),
        }
    }

    /// pg_backend_pid names the session's listing; pg_cancel_backend and
    /// pg_terminate_backend reach the session it names and say false for
    /// a pid no session has; a terminated session's every later
    /// statement is 57P01; a closed session is no longer listed.
    #[test]
    fn the_signal_functions_reach_the_session_a_pid_names() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path(), Options::default()).unwrap();
        let sql = SqlEngine::open(Arc::new(db)).unwrap();
        let (mut a, mut b) = (sql.session(), sql.session());
        assert_eq!(value(&mut a, "select pg_backend_pid()"), Ok(Value::Null));
        a.enlist(4242, vec![1, 2, 3, 4]);
        b.enlist(77, vec![9]);
        assert_eq!(
            value(&mut a, "select pg_backend_pid()"),
            Ok(Value::Int(4242))
        );
        assert_eq!(sql.backends().len(), 2);
        assert_eq!(
            value(&mut b, "select pg_cancel_backend(4242)"),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            value(&mut b, "select pg_cancel_backend(4243)"),
            Ok(Value::Bool(false))
        );
        assert_eq!(
            value(&mut b, "select pg_cancel_backend(null)"),
            Ok(Value::Null)
        );
        // A cancel between statements is dropped: a's next one runs.
        assert_eq!(value(&mut a, "select 1"), Ok(Value::Int(1)));
        assert_eq!(
            value(&mut b, "select pg_terminate_backend(4242, -1)"),
            Err("22023".into())
        );
        assert_eq!(
            value(&mut b, "select pg_terminate_backend(4242)"),
            Ok(Value::Bool(true))
        );
        assert!(a.interrupt().ending());
        assert_eq!(value(&mut a, "select 1"), Err("57P01".into()));
        assert_eq!(value(&mut a, "select 1"), Err("57P01".into()));
        // With a timeout, true once the session has ended.
        let waiter = std::thread::spawn({
            let sql = sql.clone();
            move || {
                let mut c = sql.session();
                value(&mut c, "select pg_terminate_backend(4242, 10000)")
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        a.close();
        assert_eq!(waiter.join().unwrap(), Ok(Value::Bool(true)));
        assert_eq!(sql.backends().len(), 1);
        assert_eq!(
            value(&mut b, "select pg_terminate_backend(4242, 1)"),
            Ok(Value::Bool(false))
        );
        // A CancelRequest needs the key's secret.
        sql.backends().cancel_request(77, &[8]);
        assert!(!b.interrupt().ending());
    }
}
