//! The extended protocol's implicit transactions, and a session's end.
//!
//! Rules, as PostgreSQL's: the statements an extended-protocol client
//! sends up to Sync, and the statements of one Query message of several
//! (unless one is a COPY), run in one implicit transaction. It begins with the
//! first statement that is not BEGIN, COMMIT or ROLLBACK; Sync commits it;
//! an error rolls all of it back at once (the client's later messages are
//! discarded up to Sync). BEGIN inside it makes it an explicit block that
//! Sync leaves open; COMMIT or ROLLBACK inside it ends it early. A client
//! gone before Sync (or a closed connection at any time) rolls back.

use super::parse::Prepared;
use super::session::{Session, State};
use super::types::{codes, Outcome, SqlError, Value};
use std::sync::Arc;

impl Session {
    /// Runs one statement of an extended-protocol batch (or of a Query
    /// message of several), in the batch's implicit transaction.
    pub fn execute_in_batch(
        &mut self,
        stmt: &Arc<Prepared>,
        params: &[Value],
    ) -> Result<Outcome, SqlError> {
        let started = self.start_in_batch(stmt, params)?;
        self.collect(started)
    }

    /// `execute_in_batch`, a SELECT opened as a cursor (`Session::start`).
    pub fn start_in_batch(
        &mut self,
        stmt: &Arc<Prepared>,
        params: &[Value],
    ) -> Result<Outcome, SqlError> {
        if matches!(self.state, State::Idle) && !stmt.is_transaction_control() {
            self.state = State::Block(None);
            self.implicit = true;
        }
        if self.implicit && stmt.is_begin() {
            self.implicit = false;
        }
        let r = self.start(stmt, params);
        if matches!(self.state, State::Idle) {
            self.implicit = false;
        }
        r
    }

    /// Sync (or a Query message's end): the batch's implicit transaction
    /// commits, or, failed, is over (it was rolled back at its error). An
    /// explicit block stays.
    pub fn sync(&mut self) -> Result<(), SqlError> {
        if self.implicit {
            self.end_block()?;
        }
        Ok(())
    }

    /// The client is gone: a COPY in progress and an open block (explicit
    /// or implicit) roll back, with the bulk loads they did.
    pub fn close(&mut self) {
        if self.copy.is_some() {
            self.copy_fail("the connection ended");
        }
        let ended = SqlError::new(codes::CONNECTION_FAILURE, "the connection ended");
        self.fail(&ended);
        self.cursors.clear();
        self.let_definitions_go();
        self.script = None;
        self.state = State::Idle;
        self.implicit = false;
        if let Some(pid) = self.pid.take() {
            self.engine.backends.remove(pid);
        }
    }
}
