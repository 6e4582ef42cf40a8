//! A session's open results (`cursor`): opened by a SELECT, fetched a
//! batch at a time, closed when done, when dropped by the client, or
//! with their block.

use super::cursor::{Cursor, FetchEnv};
use super::exec::too_many_rows;
use super::session::{Session, State};
use super::types::{codes, Column, Outcome, SqlError, Value};

/// A fetch's rows, and the command tag once the last was returned.
#[derive(Debug)]
pub struct Fetched {
    pub rows: Vec<Vec<Value>>,
    pub tag: Option<String>,
}

/// Rows per fetch when a SELECT's rows are all read at once.
const COLLECT_BATCH: usize = 1000;

impl Session {
    /// Lists `cursor`: outside a block with a transaction of its own, in
    /// one with the block's (begun now if it was not).
    pub(super) fn open_cursor(&mut self, mut cursor: Cursor, columns: Vec<Column>) -> Outcome {
        match &mut self.state {
            State::Block(tx) => {
                tx.get_or_insert_with(|| self.engine.db.begin_shared());
            }
            _ => cursor.own = Some(self.engine.db.begin_shared()),
        }
        let id = self.next_cursor;
        self.next_cursor += 1;
        self.cursors.push((id, cursor));
        Outcome::Cursor { columns, id }
    }

    /// Up to `max` more rows of cursor `id`; the tag once it is done (and
    /// closed: its own transaction committed). An error closes it and
    /// fails an open block, as any statement's error does.
    pub fn fetch(&mut self, id: u64, max: usize) -> Result<Fetched, SqlError> {
        let r = self.fetch_inner(id, max);
        if let Err(e) = &r {
            self.close_cursor(id);
            self.fail(e);
            self.end_script();
        }
        r
    }

    fn fetch_inner(&mut self, id: u64, max: usize) -> Result<Fetched, SqlError> {
        let Some(at) = self.cursors.iter().position(|(i, _)| *i == id) else {
            return Err(SqlError::new(
                codes::INVALID_CURSOR_NAME,
                "portal does not exist (its transaction ended)",
            ));
        };
        let interrupt = self.interrupt.clone();
        let watch = interrupt.watch(self.timeout());
        let stop = interrupt.stopper(&watch);
        let engine = self.engine.clone();
        let env = FetchEnv {
            db: &engine.db,
            memory: &self.memory,
            work_mem: self.work_mem,
            session: super::functions::SessionView {
                backends: &engine.backends,
                pid: self.pid,
            },
        };
        let cursor = &mut self.cursors[at].1;
        let mut own = cursor.own.take();
        let tx = match (&mut own, &mut self.state) {
            (Some(t), _) => t,
            (None, State::Block(Some(t))) => t,
            _ => unreachable!("a cursor without a transaction of its own is in a block's"),
        };
        tx.set_stop(Some(stop));
        let rows = cursor
            .fetch(tx, &env, &watch, max)
            .map_err(|e| match e.code {
                // A wait the interrupt ended fails as the statement's check does.
                codes::QUERY_CANCELED => watch.check().err().unwrap_or(e),
                _ => e,
            });
        cursor.own = own;
        let rows = rows?;
        if !cursor.done() {
            return Ok(Fetched { rows, tag: None });
        }
        let tag = format!("SELECT {}", cursor.produced());
        let (_, mut cursor) = self.cursors.remove(at);
        let own = cursor.own.take();
        drop(cursor);
        let committed = own.map(|t| t.commit()).transpose();
        self.let_definitions_go();
        committed.map_err(super::engine_err)?;
        Ok(Fetched {
            rows,
            tag: Some(tag),
        })
    }

    /// Closes cursor `id` (its own transaction aborted); a closed one is
    /// no error.
    pub fn close_cursor(&mut self, id: u64) {
        self.cursors.retain(|(i, _)| *i != id);
        self.let_definitions_go();
    }

    /// A cursor or a COPY let a table's definition go: engine tables DDL
    /// replaced that no one reads now are dropped (`retired`).
    pub(super) fn let_definitions_go(&self) {
        self.engine.catalog.retired.sweep(&self.engine.db);
    }

    /// Whether the protocol may keep `incoming` more bytes (a Parse, a
    /// Bind) beside the `held` its statements and portals keep; 53200
    /// fails an open block, as any error does.
    pub fn admit_protocol(
        &mut self,
        held: usize,
        incoming: usize,
        what: &str,
    ) -> Result<(), SqlError> {
        let r = self.memory.admit_protocol(held, incoming, what);
        if let Err(e) = &r {
            self.fail(e);
        }
        r
    }

    /// The protocol's statements and portals keep `held` bytes now.
    pub fn protocol_holds(&self, held: usize) {
        self.memory.protocol_holds(held)
    }

    /// The block ended: its cursors go with it.
    pub(super) fn close_block_cursors(&mut self) {
        self.cursors.retain(|(_, c)| c.own.is_some());
        self.let_definitions_go();
    }

    /// `started` with a cursor's rows all read (at most
    /// `max_result_rows`).
    pub(super) fn collect(&mut self, started: Outcome) -> Result<Outcome, SqlError> {
        let Outcome::Cursor { columns, id } = started else {
            return Ok(started);
        };
        let mut rows = Vec::new();
        loop {
            let f = self.fetch(id, COLLECT_BATCH)?;
            rows.extend(f.rows);
            if rows.len() > self.engine.limits().max_result_rows {
                self.close_cursor(id);
                let e = too_many_rows(self.engine.limits().max_result_rows);
                self.fail(&e);
                return Err(e);
            }
            if let Some(tag) = f.tag {
                return Ok(Outcome::Rows { columns, rows, tag });
            }
        }
    }
}
