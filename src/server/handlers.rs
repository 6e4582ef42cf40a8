//! One connection's handlers: simple and extended query and COPY, each a
//! thin translation between pgwire's messages and a SQL `Session`.
//!
//! A connection runs on its own thread, so the session's mutex is never
//! contended; it exists because pgwire's handlers take `&self`.

use super::codec;
use crate::sql::settings_at_start::options;
use crate::sql::{codes, Outcome, Prepared, Session, SqlError, SqlType, TxStatus, Value};
use async_trait::async_trait;
use futures::{stream, Sink, SinkExt};
use parking_lot::Mutex;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{CopyResponse, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::data::DataRow;
use pgwire::messages::extendedquery::Sync as SyncMessage;
use pgwire::messages::response::{CommandComplete, ReadyForQuery, TransactionStatus};
use pgwire::messages::simplequery::Query;
use pgwire::messages::PgWireBackendMessage;
use std::fmt::Debug;
use std::sync::Arc;

/// The per-connection handler: its SQL session and a COPY error waiting
/// for CopyDone.
pub struct Connection {
    session: Arc<Mutex<Session>>,
    parser: Arc<StatementParser>,
    /// An error from a CopyData message. PostgreSQL reports it after the
    /// client ends the copy; reporting it mid-copy would leave the client
    /// sending CopyData into a connection that no longer expects it.
    copy_error: Mutex<Option<SqlError>>,
    /// Whether the session is listed under its process id yet.
    enlisted: std::sync::atomic::AtomicBool,
    /// Told when pg_terminate_backend ends the session: wakes the
    /// connection where it waits for the client's next message.
    terminated: Arc<tokio::sync::Notify>,
}

impl Connection {
    /// The session's idle timeout now (`Session::idle_timeout`).
    pub(super) fn idle_timeout(&self) -> Option<(std::time::Duration, &'static str, &'static str)> {
        self.session.lock().idle_timeout()
    }

    pub fn new(session: Session) -> Connection {
        let interrupt = session.interrupt();
        let terminated = Arc::new(tokio::sync::Notify::new());
        let told = terminated.clone();
        // notify_one keeps a permit: a termination during a statement
        // ends the connection before its next message is read.
        interrupt.on_terminate(move || told.notify_one());
        let session = Arc::new(Mutex::new(session));
        Connection {
            parser: Arc::new(StatementParser {
                session: session.clone(),
            }),
            session,
            copy_error: Mutex::new(None),
            enlisted: Default::default(),
            terminated,
        }
    }

    /// What ends the connection while it waits for a message, and how
    /// (pgwire's `termination` hook).
    pub(super) fn termination(&self) -> (Arc<tokio::sync::Notify>, &'static str, &'static str) {
        (
            self.terminated.clone(),
            codes::ADMIN_SHUTDOWN,
            "terminating connection due to administrator command",
        )
    }

    /// Lists the connection for CancelRequests, once it has its key (at
    /// the end of its start-up, `startup::Gated`; a message handler makes
    /// sure).
    pub(super) fn enlist<C: ClientInfo>(&self, client: &C) {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.enlisted.swap(true, Relaxed) {
            let (p, key) = client.pid_and_secret_key();
            let mut session = self.session.lock();
            session.enlist(p, key.to_bytes().to_vec());
            // The start-up packet's options (checked at start-up) set
            // the session as its SETs would, before its first statement.
            let given = client.metadata().get("options").cloned();
            for set in given.and_then(|o| options(&o).ok()).unwrap_or_default() {
                for r in session.simple_query(&set) {
                    if let Err(e) = r {
                        tracing::warn!("backend {p}: start-up option {set:?} failed: {e}");
                    }
                }
            }
        }
    }

    /// The connection ended: what its session left open rolls back.
    pub fn close(&self) {
        let mut session = self.session.lock();
        session.close();
        session.protocol_holds(0);
    }
}

/// Parses (and plans) statements for the extended protocol.
pub struct StatementParser {
    session: Arc<Mutex<Session>>,
}

fn user_error(e: SqlError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(e)))
}

/// A statement's error as the client gets it: ERROR, or FATAL where the
/// session ends with it (terminated, shut down, its client gone), as
/// PostgreSQL sends a terminated backend's running statement FATAL 57P01
/// only (it got ERROR 57P01, then FATAL 57P01, before).
fn error_info(e: SqlError) -> ErrorInfo {
    let severity = match e.code {
        codes::ADMIN_SHUTDOWN | codes::CONNECTION_FAILURE => "FATAL",
        _ => "ERROR",
    };
    ErrorInfo::new(severity.to_string(), e.code.to_string(), e.message)
}

fn pg_type(ty: SqlType) -> Type {
    Type::from_oid(ty.oid()).unwrap_or(Type::UNKNOWN)
}

/// The format of result column `i`, refusing a Bind whose format codes
/// do not fit the columns (pgwire would index out of bounds).
fn column_format(format: &Format, i: usize, columns: usize) -> Result<FieldFormat, SqlError> {
    match format {
        Format::Individual(codes_) if codes_.len() != columns => Err(SqlError::new(
            codes::PROTOCOL_VIOLATION,
            format!(
                "bind message has {} result formats but query has {columns} columns",
                codes_.len()
            ),
        )),
        f => Ok(f.format_for(i)),
    }
}

fn fields(
    columns: &[crate::sql::Column],
    format: Option<&Format>,
) -> Result<Vec<FieldInfo>, SqlError> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let f = match format {
                Some(fmt) => column_format(fmt, i, columns.len())?,
                None => FieldFormat::Text,
            };
            Ok(codec::field_info(&c.name, c.ty, f))
        })
        .collect()
}

/// Rows per fetch from a cursor: what a result holds in memory while it
/// is sent (and while a portal is suspended).
const FETCH_BATCH: usize = 256;

/// A cursor's rows as they are fetched, for pgwire's row stream. Dropped
/// before its end (a portal closed, a client gone) it closes the cursor.
struct CursorRows {
    session: Arc<Mutex<Session>>,
    id: u64,
    buf: std::vec::IntoIter<Vec<Value>>,
    done: bool,
}

impl Drop for CursorRows {
    fn drop(&mut self) {
        // Never blocks: a session locked here is ending the cursor's
        // transaction, which closes it anyway.
        if !self.done {
            if let Some(mut s) = self.session.try_lock() {
                s.close_cursor(self.id);
            }
        }
    }
}

fn row_stream(
    rows: CursorRows,
    schema: Arc<Vec<FieldInfo>>,
    types: Arc<Vec<SqlType>>,
) -> impl futures::Stream<Item = PgWireResult<DataRow>> + Send + 'static {
    stream::unfold(rows, move |mut rows| {
        let (schema, types) = (schema.clone(), types.clone());
        async move {
            loop {
                if let Some(r) = rows.buf.next() {
                    return Some((Ok(codec::encode_row(&r, &schema, &types)), rows));
                }
                if rows.done {
                    return None;
                }
                let fetched = rows.session.lock().fetch(rows.id, FETCH_BATCH);
                match fetched {
                    Ok(f) => {
                        rows.done = f.tag.is_some();
                        rows.buf = f.rows.into_iter();
                    }
                    Err(e) => {
                        rows.done = true;
                        return Some((Err(user_error(e)), rows));
                    }
                }
            }
        }
    })
}

impl Connection {
    /// A statement's outcome as pgwire's response; a cursor's rows are
    /// fetched as pgwire sends them. Tags drive the transaction status
    /// pgwire reports in ReadyForQuery: BEGIN opens a block, COMMIT and
    /// ROLLBACK close one (also a failed one), and an error marks an open
    /// block failed.
    fn response(&self, outcome: Outcome, format: Option<&Format>) -> Result<Response, SqlError> {
        Ok(match outcome {
            Outcome::Cursor { columns, id } => {
                let types: Arc<Vec<SqlType>> = Arc::new(columns.iter().map(|c| c.ty).collect());
                let schema = match fields(&columns, format) {
                    Ok(f) => Arc::new(f),
                    Err(e) => {
                        self.session.lock().close_cursor(id);
                        return Err(e);
                    }
                };
                let rows = CursorRows {
                    session: self.session.clone(),
                    id,
                    buf: Vec::new().into_iter(),
                    done: false,
                };
                Response::Query(QueryResponse::new(
                    schema.clone(),
                    row_stream(rows, schema, types),
                ))
            }
            Outcome::Rows { columns, rows, .. } => {
                let types: Vec<SqlType> = columns.iter().map(|c| c.ty).collect();
                let schema = Arc::new(fields(&columns, format)?);
                let encoded: Vec<PgWireResult<_>> = rows
                    .iter()
                    .map(|r| Ok(codec::encode_row(r, &schema, &types)))
                    .collect();
                Response::Query(QueryResponse::new(schema, stream::iter(encoded)))
            }
            Outcome::Command { tag } => match tag.as_str() {
                "BEGIN" => Response::TransactionStart(Tag::new(&tag)),
                "COMMIT" | "ROLLBACK" => Response::TransactionEnd(Tag::new(&tag)),
                _ => Response::Execution(Tag::new(&tag)),
            },
            Outcome::CopyIn { columns } => Response::CopyIn(CopyResponse::new(
                0,
                columns,
                stream::empty::<PgWireResult<CopyData>>(),
            )),
        })
    }

    /// The running Query message's next statement as a response (its
    /// rows streamed before the one after runs); `None` at its end.
    fn next_simple_response(&self) -> Option<Response> {
        let r = self.session.lock().query_next()?;
        Some(match r.and_then(|o| self.response(o, None)) {
            Ok(resp) => resp,
            Err(e) => Response::Error(Box::new(error_info(e))),
        })
    }

    /// What the protocol keeps now, for the connection's memory account.
    fn protocol_holds<C>(&self, client: &C)
    where
        C: ClientPortalStore,
        C::PortalStore: PortalStore,
    {
        let held = client.portal_store().held_bytes();
        self.session.lock().protocol_holds(held);
    }
}

impl Connection {
    /// Outside a block no transaction is open any more: its portals go,
    /// as PostgreSQL drops a transaction's portals (and the parameters
    /// bound to them) when it ends, at Sync for an implicit one and at
    /// COMMIT or ROLLBACK for a block. Before, named portals outlived
    /// both: a client binding megabytes of parameters to new names grew
    /// the server without bound.
    fn end_of_transaction<C>(&self, client: &C)
    where
        C: ClientPortalStore,
        C::PortalStore: PortalStore,
    {
        if matches!(self.session.lock().status(), TxStatus::Idle) {
            client.portal_store().clear_portals();
        }
        self.protocol_holds(client);
    }
}

#[async_trait]
impl SimpleQueryHandler for Connection {
    fn on_refused(&self, error: &PgWireError) {
        self.session.lock().refused(&error.to_string());
    }

    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let result = self._on_query(client, query).await;
        self.end_of_transaction(client);
        result
    }

    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.enlist(client);
        self.session.lock().query_start(query);
        Ok(self.next_simple_response().into_iter().collect())
    }

    async fn next_response<C>(&self, _client: &mut C) -> PgWireResult<Option<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        Ok(self.next_simple_response())
    }

    fn status_after_error(&self, _status: TransactionStatus) -> TransactionStatus {
        match self.session.lock().status() {
            TxStatus::Idle => TransactionStatus::Idle,
            TxStatus::InBlock => TransactionStatus::Transaction,
            TxStatus::Failed => TransactionStatus::Error,
        }
    }
}

#[async_trait]
impl QueryParser for StatementParser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let declared: Vec<Option<SqlType>> = types
            .iter()
            .map(|t| t.as_ref().and_then(|t| SqlType::from_oid(t.oid())))
            .collect();
        self.session
            .lock()
            .prepare(sql, &declared)
            .map(Some)
            .map_err(user_error)
    }

    fn get_parameter_types(&self, stmt: &Self::Statement) -> PgWireResult<Vec<Type>> {
        Ok(stmt.params().iter().map(|t| pg_type(*t)).collect())
    }

    fn get_result_schema(
        &self,
        stmt: &Self::Statement,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        fields(stmt.columns(), column_format).map_err(user_error)
    }
}

/// Bind's parameters as values of the statement's parameter types.
fn parameters(portal: &Portal<Arc<Prepared>>) -> Result<Vec<Value>, SqlError> {
    let stmt = &portal.statement.statement;
    let types = stmt.params();
    if portal.parameters.len() != types.len() {
        return Err(SqlError::new(
            codes::PROTOCOL_VIOLATION,
            format!(
                "bind message supplies {} parameters, but prepared statement requires {}",
                portal.parameters.len(),
                types.len()
            ),
        ));
    }
    if let Format::Individual(f) = &portal.parameter_format {
        if f.len() != types.len() {
            return Err(SqlError::new(
                codes::PROTOCOL_VIOLATION,
                format!(
                    "bind message has {} parameter formats but {} parameters",
                    f.len(),
                    types.len()
                ),
            ));
        }
    }
    let declared = &portal.statement.parameter_types;
    portal
        .parameters
        .iter()
        .zip(types)
        .enumerate()
        .map(|(i, (bytes, ty))| {
            let declared = declared.get(i).cloned().flatten();
            let binary = portal.parameter_format.is_binary(i);
            codec::decode_param(bytes.as_deref(), *ty, binary, declared.as_ref())
                .map_err(|e| codec::in_parameter(e, i))
        })
        .collect()
}

#[async_trait]
impl ExtendedQueryHandler for Connection {
    type Statement = Arc<Prepared>;
    type QueryParser = StatementParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    fn on_refused(&self, error: &PgWireError) {
        self.session.lock().refused(&error.to_string());
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.enlist(client);
        let params = parameters(portal).map_err(user_error)?;
        let outcome = self
            .session
            .lock()
            .start_in_batch(&portal.statement.statement, &params)
            .map_err(user_error)?;
        self.response(outcome, Some(&portal.result_column_format))
            .map_err(user_error)
    }

    fn admit(&self, held: usize, incoming: usize, what: &str) -> PgWireResult<()> {
        self.session
            .lock()
            .admit_protocol(held, incoming, what)
            .map_err(user_error)
    }

    /// Sync ends the batch's implicit transaction (committing it, or, after
    /// an error, leaving it rolled back) before ReadyForQuery, as pgwire's
    /// own Sync does otherwise.
    async fn on_sync<C>(&self, client: &mut C, _message: SyncMessage) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let committed = self.session.lock().sync();
        if let Err(e) = committed {
            // Some clients never read what follows a statement's
            // CommandComplete (rust-postgres's COPY returns there): a
            // commit that failed at Sync must be in the log too.
            let pid = client.pid_and_secret_key().0;
            tracing::warn!(
                "backend {pid}: an implicit transaction failed to commit at Sync: {} ({})",
                e.message,
                e.code
            );
            let info = error_info(e);
            client
                .feed(PgWireBackendMessage::ErrorResponse(info.into()))
                .await?;
        }
        client.portal_store().rm_portal("");
        self.end_of_transaction(client);
        let status = client.transaction_status();
        client
            .send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
                status,
            )))
            .await?;
        client.flush().await?;
        Ok(())
    }
}

#[async_trait]
impl CopyHandler for Connection {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut pending = self.copy_error.lock();
        if pending.is_none() {
            if let Err(e) = self.session.lock().copy_data(&copy_data.data) {
                *pending = Some(e);
            }
        }
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let pending = self.copy_error.lock().take();
        let result = {
            let mut session = self.session.lock();
            match pending {
                // The first error is the one to report; copy_fail only
                // ends the copy (and undoes what it loaded).
                Some(e) => {
                    session.copy_fail(&e.message);
                    Err(e)
                }
                None => session.copy_done(),
            }
        };
        match result {
            Ok(Outcome::Command { tag }) => {
                client
                    .send(PgWireBackendMessage::CommandComplete(CommandComplete::new(
                        tag,
                    )))
                    .await?;
                Ok(())
            }
            Ok(other) => Err(user_error(SqlError::new(
                codes::INTERNAL_ERROR,
                format!("COPY ended with {other:?}"),
            ))),
            Err(e) => Err(user_error(e)),
        }
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.copy_error.lock().take();
        user_error(self.session.lock().copy_fail(&fail.message))
    }
}
