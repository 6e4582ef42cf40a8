//! Sessions: transaction blocks and statement execution (COPY's state
//! and data are in `copy`).
//!
//! Outside a block each statement is its own engine transaction,
//! committed (durable) before its result. In a block the statements share
//! one; an error aborts it at once and the block is failed (25P02) until
//! ROLLBACK or COMMIT. A load (COPY, INSERT ... SELECT FROM
//! generate_series) of any size is part of that one transaction, too: its
//! write set spills to disk past its memory budget (txn/spill.rs), so all
//! of it commits or none, and no one else sees it before.

use super::backends::Backends;
use super::budget::ParseBudget;
use super::catalog::Catalog;
use super::copy::CopyState;
use super::cursor::Cursor;
use super::ddl;
use super::engine_err;
use super::exec::{self, Sink, Tx};
use super::expr::{as_int, Ctx};
use super::interrupt::Interrupt;
use super::key_spool::KeySpool;
use super::limits::Limits;
use super::memory::{ConnectionMemory, ServerMemory};
use super::parse::Prepared;
use super::plan::{InsertSource, Plan};
use super::types::{codes, Outcome, SqlError, SqlType, TxStatus, Value};
use crate::db::Database;
use parking_lot::Mutex;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

pub struct SqlEngine {
    pub(crate) db: Arc<Database>,
    pub(super) catalog: Catalog,
    /// DDL statements run one at a time.
    pub(super) ddl: Mutex<()>,
    limits: Limits,
    /// The text all sessions parse at once (`budget`).
    pub(super) budget: Arc<ParseBudget>,
    /// What all sessions hold between messages (`memory`).
    pub(super) memory: Arc<ServerMemory>,
    /// The sessions a server lists by process id (`backends`).
    pub(super) backends: Backends,
}

impl SqlEngine {
    /// Opens the SQL catalog kept in the database (creating it on first
    /// use) and drops engine tables no SQL table owns.
    pub fn open(db: Arc<Database>) -> Result<Arc<SqlEngine>, SqlError> {
        SqlEngine::open_with_limits(db, Limits::default())
    }

    /// [`SqlEngine::open`], with limits on what one statement may ask.
    pub fn open_with_limits(db: Arc<Database>, limits: Limits) -> Result<Arc<SqlEngine>, SqlError> {
        let catalog = Catalog::open(&db)?;
        Ok(Arc::new(SqlEngine {
            db,
            catalog,
            ddl: Mutex::new(()),
            budget: ParseBudget::new(limits.parse_budget),
            memory: ServerMemory::new(limits.max_server_memory),
            backends: Backends::default(),
            limits,
        }))
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Reads what [`SqlEngine::open`] reads (the SQL catalog, and each
    /// table's largest id), without creating or dropping anything: `None`
    /// if `db` has no SQL catalog. `untorn check` queries through it.
    pub fn open_existing(db: Arc<Database>) -> Result<Option<Arc<SqlEngine>>, SqlError> {
        Ok(Catalog::open_existing(&db)?.map(|catalog| {
            let limits = Limits::default();
            Arc::new(SqlEngine {
                db,
                catalog,
                ddl: Mutex::new(()),
                budget: ParseBudget::new(limits.parse_budget),
                memory: ServerMemory::new(limits.max_server_memory),
                backends: Backends::default(),
                limits,
            })
        }))
    }

    /// The SQL tables' names, sorted.
    pub fn table_names(&self) -> Vec<String> {
        self.catalog.names()
    }

    pub fn session(self: &Arc<Self>) -> Session {
        Session {
            engine: self.clone(),
            state: State::Idle,
            statement_timeout: self.limits.statement_timeout,
            idle_in_block: self.limits.idle_in_transaction_session_timeout,
            idle_outside: self.limits.idle_session_timeout,
            work_mem: self.limits.work_mem,
            local_timeout: None,
            settings_before_block: None,
            copy: None,
            interrupt: Arc::new(Interrupt::default()),
            implicit: false,
            memory: ConnectionMemory::new(&self.memory, self.limits.max_connection_memory),
            cursors: Vec::new(),
            next_cursor: 0,
            block_ddl: Default::default(),
            script: None,
            pid: None,
        }
    }

    /// The sessions listed by process id (CancelRequests find them here).
    pub fn backends(&self) -> &Backends {
        &self.backends
    }

    /// Bytes all sessions hold between messages now (`memory`).
    pub fn memory_used(&self) -> usize {
        self.memory.used()
    }

    pub fn database(&self) -> &Database {
        &self.db
    }
}

pub(super) enum State {
    Idle,
    /// In a block; its engine transaction begins with its first read or write.
    Block(Option<Tx>),
    Failed,
}

pub struct Session {
    pub(super) engine: Arc<SqlEngine>,
    pub(super) state: State,
    pub(super) copy: Option<CopyState>,
    /// Set from other threads to stop the running statement.
    pub(super) interrupt: Arc<Interrupt>,
    /// The server's `statement_timeout` until SET changes it.
    statement_timeout: Option<std::time::Duration>,
    /// idle_in_transaction_session_timeout and idle_session_timeout: the
    /// server's until SET changes them.
    idle_in_block: Option<std::time::Duration>,
    idle_outside: Option<std::time::Duration>,
    /// work_mem: the server's until SET changes it (`sort`).
    pub(super) work_mem: usize,
    /// SET LOCAL's statement_timeout, until the block ends.
    local_timeout: Option<Option<std::time::Duration>>,
    /// The session's settings before the block's first SET: what a
    /// rollback of the block restores, as PostgreSQL restores its GUCs
    /// at abort.
    settings_before_block: Option<Settings>,
    /// The block is an extended-protocol batch's implicit transaction
    /// (`implicit`), which Sync ends.
    pub(super) implicit: bool,
    /// What this connection holds between messages (`memory`).
    pub(super) memory: Arc<ConnectionMemory>,
    /// Open results (`cursor`), by id; the block's end closes them.
    pub(super) cursors: Vec<(u64, Cursor)>,
    pub(super) next_cursor: u64,
    /// What the block's DROP and TRUNCATE changed (`session_ddl`).
    pub(super) block_ddl: ddl::BlockDdl,
    /// A Query message's statements not run yet (`query`).
    pub(super) script: Option<super::script::PendingScript>,
    /// The process id the server gave this session (pg_backend_pid),
    /// under which it is listed in the engine's `backends`.
    pub(super) pid: Option<i32>,
}

/// The settings a session's SET changes (those a rollback restores).
#[derive(Clone, Copy)]
struct Settings {
    statement_timeout: Option<std::time::Duration>,
    idle_in_block: Option<std::time::Duration>,
    idle_outside: Option<std::time::Duration>,
    work_mem: usize,
}

pub(super) fn failed_block() -> SqlError {
    SqlError::new(
        codes::IN_FAILED_SQL_TRANSACTION,
        "current transaction is aborted, commands ignored until end of transaction block",
    )
}

impl Session {
    /// What stops this session's running statement (a CancelRequest, a
    /// shutdown), for other threads to hold.
    pub fn interrupt(&self) -> Arc<Interrupt> {
        self.interrupt.clone()
    }

    /// Lists the session under `pid` with its cancel key's `secret`, for
    /// CancelRequests, pg_cancel_backend and pg_terminate_backend; the
    /// session's end removes it.
    pub fn enlist(&mut self, pid: i32, secret: Vec<u8>) {
        if let Some(old) = self.pid.replace(pid) {
            self.engine.backends.remove(old);
        }
        self.engine
            .backends
            .enlist(pid, secret, self.interrupt.clone());
    }

    pub fn status(&self) -> TxStatus {
        match self.state {
            State::Idle => TxStatus::Idle,
            State::Block(_) => TxStatus::InBlock,
            State::Failed => TxStatus::Failed,
        }
    }

    /// Ends a block as COMMIT does: its transaction commits (a failed
    /// one is rolled back already); the tag says which.
    pub(super) fn end_block(&mut self) -> Result<&'static str, SqlError> {
        self.implicit = false;
        self.close_block_cursors();
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Failed => {
                self.end_settings(false);
                self.block_ddl_aborted();
                Ok("ROLLBACK")
            }
            State::Idle => Ok("COMMIT"),
            State::Block(tx) => match tx.map(|t| t.commit().map_err(engine_err)).transpose() {
                Ok(_) => {
                    self.end_settings(true);
                    self.block_ddl_committed();
                    Ok("COMMIT")
                }
                Err(e) => {
                    self.end_settings(false);
                    self.block_ddl_aborted();
                    Err(e)
                }
            },
        }
    }

    /// How long this session may wait for its next message before the
    /// server ends it, with PostgreSQL's SQLSTATE and message: in a block
    /// (failed or not) idle_in_transaction_session_timeout, else
    /// idle_session_timeout. `None`: no limit (a COPY in progress waits
    /// as long as it takes: its data is the next message).
    pub fn idle_timeout(&self) -> Option<(std::time::Duration, &'static str, &'static str)> {
        if self.copy.is_some() {
            return None;
        }
        match self.state {
            State::Idle => self.idle_outside.map(|d| {
                (
                    d,
                    "57P05",
                    "terminating connection due to idle-session timeout",
                )
            }),
            State::Block(_) | State::Failed => self.idle_in_block.map(|d| {
                (
                    d,
                    "25P03",
                    "terminating connection due to idle-in-transaction timeout",
                )
            }),
        }
    }

    /// The statement_timeout statements run under: SET LOCAL's in a
    /// block, else the session's.
    pub(super) fn timeout(&self) -> Option<std::time::Duration> {
        self.local_timeout.unwrap_or(self.statement_timeout)
    }

    /// SET [LOCAL] statement_timeout. In a block (an implicit one too) a
    /// rollback undoes it; SET LOCAL lasts until the block ends, and
    /// outside one does nothing (PostgreSQL warns).
    fn set_statement_timeout(&mut self, t: Option<std::time::Duration>, local: bool) {
        let in_block = matches!(self.state, State::Block(_));
        match (in_block, local) {
            (true, true) => self.local_timeout = Some(t),
            (true, false) => {
                self.keep_settings_for_rollback();
                self.statement_timeout = t;
                self.local_timeout = None;
            }
            (false, true) => {}
            (false, false) => self.statement_timeout = t,
        }
    }

    /// The settings now.
    fn settings(&self) -> Settings {
        Settings {
            statement_timeout: self.statement_timeout,
            idle_in_block: self.idle_in_block,
            idle_outside: self.idle_outside,
            work_mem: self.work_mem,
        }
    }

    /// A SET is about to change a setting: in a block, the settings from
    /// before it are kept (once) for a rollback to restore.
    fn keep_settings_for_rollback(&mut self) {
        if matches!(self.state, State::Block(_)) && self.settings_before_block.is_none() {
            self.settings_before_block = Some(self.settings());
        }
    }

    /// A block ended: SET LOCAL's value ends, and an abort restores the
    /// session's settings from before the block.
    fn end_settings(&mut self, committed: bool) {
        self.local_timeout = None;
        if let Some(before) = self.settings_before_block.take() {
            if !committed {
                self.statement_timeout = before.statement_timeout;
                self.idle_in_block = before.idle_in_block;
                self.idle_outside = before.idle_outside;
                self.work_mem = before.work_mem;
            }
        }
    }

    /// A message the server refused before the session saw it (text not
    /// UTF-8, 22021): an open block fails, as after any error.
    pub fn refused(&mut self, why: &str) {
        self.fail(&SqlError::new(codes::CHARACTER_NOT_IN_REPERTOIRE, why));
    }

    /// After an error: a block fails, its transaction aborted.
    pub(super) fn fail(&mut self, _e: &SqlError) {
        self.close_block_cursors();
        if let State::Block(tx) = &mut self.state {
            if let Some(t) = tx.take() {
                t.abort();
            }
            self.state = State::Failed;
            self.block_ddl_aborted();
        }
    }

    /// Runs `stmt`; a SELECT's rows are all read and returned (at most
    /// `max_result_rows`: 54000 past it). The server streams them instead
    /// (`start`).
    pub fn execute(&mut self, stmt: &Arc<Prepared>, params: &[Value]) -> Result<Outcome, SqlError> {
        let started = self.start(stmt, params)?;
        self.collect(started)
    }

    /// Runs `stmt`; a SELECT opens a cursor (`Outcome::Cursor`) whose rows
    /// `fetch` returns.
    pub fn start(&mut self, stmt: &Arc<Prepared>, params: &[Value]) -> Result<Outcome, SqlError> {
        let r = self.execute_inner(stmt, params);
        if let Err(e) = &r {
            self.fail(e);
        }
        r
    }

    fn execute_inner(
        &mut self,
        stmt: &Arc<Prepared>,
        params: &[Value],
    ) -> Result<Outcome, SqlError> {
        if self.copy.is_some() {
            return Err(SqlError::new(
                codes::PROTOCOL_VIOLATION,
                "a COPY is in progress",
            ));
        }
        let replanned;
        let stmt = if stmt.version != self.engine.catalog.version.load(SeqCst)
            && !matches!(
                stmt.planned.plan,
                Plan::Begin | Plan::Commit | Plan::Rollback | Plan::Noop(_) | Plan::Checkpoint
            ) {
            replanned = Arc::new(self.replan(stmt)?);
            &replanned
        } else {
            stmt
        };
        let plan = &stmt.planned.plan;
        if matches!(self.state, State::Failed) && !matches!(plan, Plan::Commit | Plan::Rollback) {
            return Err(failed_block());
        }
        if params.len() != stmt.planned.params.len() {
            return Err(SqlError::new(
                codes::PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but prepared statement requires {}",
                    params.len(),
                    stmt.planned.params.len()
                ),
            ));
        }
        let params = params
            .iter()
            .zip(&stmt.planned.params)
            .map(|(v, t)| coerce_param(v, *t))
            .collect::<Result<Vec<_>, _>>()?;
        let interrupt = self.interrupt.clone();
        let watch = interrupt.watch(self.timeout());
        let stop = Stop {
            engine: interrupt.stopper(&watch),
            watch: &watch,
        };
        let eng = self.engine.clone();
        let cx = Ctx {
            params: &params,
            now: super::timestamp::now(),
            watch: &watch,
            session: Some(super::functions::SessionView {
                backends: &eng.backends,
                pid: self.pid,
            }),
        };
        let cmd = |t: &str| Ok(Outcome::Command { tag: t.to_string() });
        let db = &*eng.db;
        match plan {
            Plan::Noop("EMPTY") => cmd(""),
            Plan::Noop(tag) => cmd(tag),
            Plan::SetStatementTimeout { timeout, local } => {
                self.set_statement_timeout(*timeout, *local);
                cmd("SET")
            }
            Plan::SetIdleTimeout { in_block, timeout } => {
                self.keep_settings_for_rollback();
                match in_block {
                    true => self.idle_in_block = *timeout,
                    false => self.idle_outside = *timeout,
                }
                cmd("SET")
            }
            Plan::SetWorkMem(bytes) => {
                self.keep_settings_for_rollback();
                self.work_mem = *bytes;
                cmd("SET")
            }
            Plan::Checkpoint => {
                db.checkpoint().map_err(engine_err)?;
                cmd("CHECKPOINT")
            }
            Plan::Begin => {
                if matches!(self.state, State::Idle) {
                    self.state = State::Block(None);
                }
                cmd("BEGIN")
            }
            Plan::Commit => cmd(self.end_block()?),
            Plan::Rollback => {
                self.close_block_cursors();
                if let State::Block(Some(t)) = std::mem::replace(&mut self.state, State::Idle) {
                    t.abort();
                }
                self.block_ddl_aborted();
                self.end_settings(false);
                cmd("ROLLBACK")
            }
            Plan::CreateTable { .. }
            | Plan::DropTables { .. }
            | Plan::Truncate(_)
            | Plan::CreateIndex { .. }
            | Plan::AddPrimaryKey { .. } => self.ddl_statement(plan, &stop, &cx),
            Plan::Copy { table, targets } => {
                let meta = self.table(table)?;
                self.copy = Some(CopyState {
                    meta,
                    targets: targets.clone(),
                    buf: Vec::new(),
                    count: 0,
                    ended: false,
                    tx: None,
                });
                Ok(Outcome::CopyIn {
                    columns: targets.len(),
                })
            }
            Plan::Insert {
                table,
                targets,
                source: InsertSource::Series { from, to, exprs },
            } => {
                let meta = self.table(table)?;
                let (Some(a), Some(b)) =
                    (as_int(&from.eval(&[], &cx)?)?, as_int(&to.eval(&[], &cx)?)?)
                else {
                    return cmd("INSERT 0 0");
                };
                let mut n = 0u64;
                let mut load = |sink: &mut Sink<'_>| -> Result<(), SqlError> {
                    for x in a..=b {
                        cx.watch.check()?;
                        let vals = exprs
                            .iter()
                            .map(|e| e.eval(&[Value::Int(x)], &cx))
                            .collect::<Result<Vec<_>, _>>()?;
                        let row = exec::build_row(&meta, targets, vals)?;
                        exec::insert_row(sink, &meta, &row)?;
                        n += 1;
                    }
                    Ok(())
                };
                let current = self.current(&eng.catalog, table, &meta);
                self.with_tx(&stop, |tx| {
                    load(&mut Sink::Tx(tx))?;
                    current.check()
                })?;
                cmd(&format!("INSERT 0 {n}"))
            }
            Plan::Insert {
                table,
                targets,
                source: InsertSource::Values(rows),
            } => {
                let meta = self.table(table)?;
                let current = self.current(&eng.catalog, table, &meta);
                self.with_tx(&stop, |tx| {
                    let mut sink = Sink::Tx(tx);
                    for r in rows {
                        cx.watch.check()?;
                        let vals = r
                            .iter()
                            .map(|e| e.eval(&[], &cx))
                            .collect::<Result<Vec<_>, _>>()?;
                        let row = exec::build_row(&meta, targets, vals)?;
                        exec::insert_row(&mut sink, &meta, &row)?;
                    }
                    current.check()
                })?;
                cmd(&format!("INSERT 0 {}", rows.len()))
            }
            Plan::Update {
                table,
                sets,
                filter,
                access,
            } => {
                let meta = self.table(table)?;
                let db = self.engine.db.clone();
                let spool = KeySpool::new(&db, self.work_mem, self.memory.charge());
                let current = self.current(&eng.catalog, table, &meta);
                let n = self.with_tx(&stop, |tx| {
                    let n = exec::update(tx, &meta, sets, filter.as_ref(), access, &cx, spool)?;
                    current.check().map(|()| n)
                })?;
                cmd(&format!("UPDATE {n}"))
            }
            Plan::Delete {
                table,
                filter,
                access,
            } => {
                let meta = self.table(table)?;
                let current = self.current(&eng.catalog, table, &meta);
                let n = self.with_tx(&stop, |tx| {
                    let n = exec::delete(tx, &meta, filter.as_ref(), access, &cx)?;
                    current.check().map(|()| n)
                })?;
                cmd(&format!("DELETE {n}"))
            }
            Plan::Select(s) => {
                let meta = s.table.as_ref().map(|t| self.table(t)).transpose()?;
                let cursor = Cursor::open(stmt.clone(), params.clone(), meta, &cx)?;
                Ok(self.open_cursor(cursor, stmt.planned.columns.clone()))
            }
        }
    }

    /// Runs `f` in the block's transaction, or in one of its own committed
    /// before returning; a wait for a row lock in it stops as `stop` says.
    fn with_tx<T>(
        &mut self,
        stop: &Stop<'_>,
        f: impl FnOnce(&mut Tx) -> Result<T, SqlError>,
    ) -> Result<T, SqlError> {
        let run = |tx: &mut Tx| {
            tx.set_stop(Some(stop.engine.clone()));
            // A wait the interrupt ended fails as the statement's check does.
            f(tx).map_err(|e| match e.code {
                codes::QUERY_CANCELED => stop.watch.check().err().unwrap_or(e),
                _ => e,
            })
        };
        match &mut self.state {
            State::Block(tx) => run(tx.get_or_insert_with(|| self.engine.db.begin_shared())),
            _ => {
                let mut tx = self.engine.db.begin_shared();
                let r = run(&mut tx)?;
                tx.commit().map_err(engine_err)?;
                Ok(r)
            }
        }
    }
}

/// A running statement's interrupt: as the engine checks it in a wait
/// for a row lock, and as the statement reports it.
pub(super) struct Stop<'a> {
    pub(super) engine: crate::lock_table::Stop,
    pub(super) watch: &'a super::interrupt::Watch<'a>,
}

/// A parameter as its type needs it (text from the client is parsed).
fn coerce_param(v: &Value, t: SqlType) -> Result<Value, SqlError> {
    Ok(match (t, v) {
        (_, Value::Null) => Value::Null,
        (SqlType::Int4 | SqlType::Int8, Value::Text(_)) => {
            Value::Int(as_int(v)?.expect("not null"))
        }
        (SqlType::Bool, Value::Text(s)) | (SqlType::Timestamp, Value::Text(s)) => {
            let col = super::catalog::ColumnDef {
                name: String::new(),
                ty: t,
                not_null: false,
                default: None,
                serial: false,
                smallint: false,
            };
            super::coerce::store_value(Value::Text(s.clone()), &col)?
        }
        _ => v.clone(),
    })
}
