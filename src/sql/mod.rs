//! SQL over the engine: a table catalog with column types, primary keys,
//! secondary indexes and sequences, and the statements pgbench and
//! sysbench send (docs/ARCHITECTURE.md, "SQL").
//!
//! - `script`: one message's text split into statements, within limits;
//!   `budget`: the text all sessions parse at once; `query`: text to
//!   planned statements (Query, Parse, a replan);
//! - `parse`: the pre-parse shim, statement dispatch and DML mapped onto
//!   plans; `parse_ddl`, `parse_select`: DDL and SELECT mapped onto plans;
//! - `plan`, `expr`: plans, access paths, expressions;
//! - `exec`: DML on an engine transaction; `source`: an access path's
//!   rows, batch by batch; `cursor`: a SELECT's rows as they are fetched
//!   (`session_cursor`: a session's open ones); `sort`: ORDER BY and
//!   DISTINCT within work_mem, spilling to disk; `memory`: what a
//!   connection and the server hold between messages, bounded;
//! - `ddl`, `catalog`: schema changes and where schemas are kept;
//! - `row`: the row and key codecs (docs/FORMAT.md);
//! - `limits`: what one statement may ask (expression depth, ...);
//! - `interrupt`: stopping a running statement (cancel, timeout, shutdown);
//! - `session`: transaction blocks and executing each plan; `implicit`:
//!   the extended protocol's implicit transactions and a session's end;
//! - `copy`: COPY FROM STDIN, its text decoder and a session's COPY state
//!   (a load of any size is one transaction: its write set spills to disk,
//!   txn/spill.rs);
//! - `timestamp`: the `timestamp` type's text form and the clock.

pub mod backends;
mod budget;
mod catalog;
mod catalog_rows;
mod coerce;
mod copy;
mod cursor;
mod ddl;
mod exec;
mod expr;
mod functions;
mod implicit;
mod in_set;
pub mod interrupt;
mod key_spool;
pub mod limits;
mod memory;
mod or_chain;
mod parse;
mod parse_ddl;
mod parse_select;
mod plan;
mod query;
mod retired;
mod row;
mod script;
mod session;
mod session_copy;
mod session_cursor;
mod session_ddl;
pub mod settings_at_start;
mod sort;
mod source;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bulk;
#[cfg(test)]
mod tests_concurrent;
#[cfg(test)]
mod tests_ddl;
#[cfg(test)]
mod tests_ddl_block;
#[cfg(test)]
mod tests_dml;
#[cfg(test)]
mod tests_keys;
#[cfg(test)]
mod tests_limits;
pub mod timestamp;
pub mod types;

pub use backends::{Backends, Signal};
pub use interrupt::Interrupt;
pub use limits::Limits;
pub use parse::Prepared;
pub use session::{Session, SqlEngine};
pub use session_cursor::Fetched;
pub use types::{codes, Column, Outcome, SqlError, SqlType, TxStatus, Value};

use crate::error::Error;

/// An engine error as the SQLSTATE clients act on, with its message.
pub(crate) fn engine_err(e: Error) -> SqlError {
    let code = match &e {
        Error::Deadlock { .. } => codes::DEADLOCK_DETECTED,
        Error::CommitContention { .. } => codes::SERIALIZATION_FAILURE,
        Error::LockWaitInterrupted { .. } => codes::QUERY_CANCELED,
        Error::DuplicateKey { .. } => codes::UNIQUE_VIOLATION,
        Error::NoSuchTable(_) => codes::UNDEFINED_TABLE,
        Error::InUse { .. } => codes::OBJECT_IN_USE,
        Error::TooLarge { .. }
        | Error::CommitTooLarge { .. }
        | Error::WriteSetFull { .. }
        | Error::TooManyLeaves { .. } => codes::PROGRAM_LIMIT_EXCEEDED,
        Error::TempFileLimit { .. } => codes::CONFIGURATION_LIMIT_EXCEEDED,
        _ if e.is_disk_full() => codes::DISK_FULL,
        Error::Corruption { .. } | Error::ChecksumMismatch { .. } => codes::DATA_CORRUPTED,
        Error::Io { .. } | Error::UnreadablePage { .. } => codes::IO_ERROR,
        _ => codes::INTERNAL_ERROR,
    };
    SqlError::new(code, e.to_string())
}

#[cfg(test)]
mod engine_err_tests {
    use super::*;

    /// A database open elsewhere is PostgreSQL's "object in use", as for
    /// a database other sessions are using.
    #[test]
    fn a_directory_in_use_is_55006() {
        let e = Error::InUse {
            dir: "/x".into(),
            lock_file: "/x/untorn.lock".into(),
            pid: Some(1234),
            holder: "process 1234".into(),
        };
        let sql = engine_err(e);
        assert_eq!(sql.code, codes::OBJECT_IN_USE);
        assert!(sql.message.contains("in use by process 1234"), "{sql}");
    }

    /// A commit that lost its leaves to other commits' splits round after
    /// round applied nothing: retryable, PostgreSQL's serialization
    /// failure, not an internal error.
    #[test]
    fn commit_contention_is_40001_and_retryable() {
        let e = Error::CommitContention {
            xid: 7,
            why: "for 1000 rounds in a row other commits filled or split its leaves first".into(),
        };
        assert!(e.is_retryable());
        let sql = engine_err(e);
        assert_eq!(sql.code, codes::SERIALIZATION_FAILURE);
        assert!(sql.message.contains("retry it"), "{sql}");
    }
}
