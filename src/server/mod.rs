//! `untorn serve`: the PostgreSQL wire protocol (3.0) in front of the
//! SQL layer, so the real pgbench, sysbench and psql drive untorn.
//!
//! One thread per connection, as PostgreSQL has one process per
//! connection: a commit waits for its group flush without holding up
//! other clients, and the engine's blocking calls need no async runtime
//! beyond the connection's own. pgwire (pinned) speaks the protocol;
//! `handlers` translates its messages to `sql::Session` calls and
//! `codec` converts values.

pub mod codec;
mod handlers;
pub mod startup;

use crate::error::{Error, Result};
use crate::sql::SqlEngine;
use handlers::Connection;
use parking_lot::Mutex;
use pgwire::api::copy::CopyHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::PgWireServerHandlers;
use pgwire::error::ErrorInfo;
use pgwire::messages::response::ErrorResponse;
use pgwire::messages::Message;
use startup::Startup;
use std::collections::HashMap;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Where and how the server listens.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// SCRAM-SHA-256 password; required unless `listen` is loopback,
    /// where connections are trusted (as PostgreSQL's default
    /// pg_hba.conf trusts local connections).
    pub password: Option<String>,
    /// Connections beyond this are refused with SQLSTATE 53300.
    pub max_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 5433)),
            password: None,
            max_connections: 100,
        }
    }
}

/// A bound server: `run` serves until told to stop.
pub struct Server {
    listener: TcpListener,
    sql: Arc<SqlEngine>,
    startup: Arc<Startup>,
    max_connections: usize,
    /// Each open connection's socket, so a stop can close them.
    open: Arc<Mutex<HashMap<u64, TcpStream>>>,
}

/// How long the accept loop sleeps when no connection waits: the delay a
/// new connection or a stop may see.
const ACCEPT_POLL: Duration = Duration::from_millis(5);

impl Server {
    pub fn bind(sql: Arc<SqlEngine>, config: &ServerConfig) -> Result<Server> {
        let startup = match (&config.password, config.listen.ip().is_loopback()) {
            (Some(p), _) => Startup::scram(p),
            (None, true) => Startup::Trust,
            (None, false) => {
                return Err(Error::InvalidSetting {
                    name: "listen",
                    detail: format!(
                        "{} is not a loopback address: set a password (UNTORN_PASSWORD or \
                         --password-file) so clients authenticate with SCRAM-SHA-256",
                        config.listen
                    ),
                })
            }
        };
        let io = |op, e| Error::io(config.listen.to_string(), op, e);
        let listener = TcpListener::bind(config.listen).map_err(|e| io("bind", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| io("set_nonblocking", e))?;
        Ok(Server {
            listener,
            sql,
            startup: Arc::new(startup),
            max_connections: config.max_connections,
            open: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::io("listener", "getsockname", e))
    }

    /// Serves until `stop` is set, then closes every connection (their
    /// open transactions abort) and returns once their threads ended.
    pub fn run(&self, stop: &AtomicBool) -> Result<()> {
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        let mut next_id = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let (stream, peer) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(ACCEPT_POLL);
                    continue;
                }
                // A connection reset before accept, or out of descriptors:
                // the listener itself is fine.
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    std::thread::sleep(ACCEPT_POLL);
                    continue;
                }
            };
            threads.retain(|t| !t.is_finished());
            if self.open.lock().len() >= self.max_connections {
                refuse(stream, "53300", "sorry, too many clients already");
                continue;
            }
            next_id += 1;
            match self.spawn(next_id, stream) {
                Ok(t) => threads.push(t),
                Err(e) => tracing::warn!("connection from {peer} not served: {e}"),
            }
        }
        for s in self.open.lock().values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }

    fn spawn(&self, id: u64, stream: TcpStream) -> std::io::Result<JoinHandle<()>> {
        // Every statement is a round trip: Nagle would hold each reply.
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        self.open.lock().insert(id, stream.try_clone()?);
        let handlers = Handlers {
            conn: Arc::new(Connection::new(self.sql.session())),
            startup: self.startup.clone(),
        };
        let open = self.open.clone();
        std::thread::Builder::new()
            .name(format!("untorn-conn-{id}"))
            // Deep enough for the deepest expression the limits let through.
            .stack_size(self.sql.limits().stack_bytes())
            .spawn(move || {
                if let Err(e) = serve_connection(stream, handlers) {
                    tracing::debug!("connection {id} ended: {e}");
                }
                open.lock().remove(&id);
            })
    }
}

fn serve_connection(stream: TcpStream, handlers: Handlers) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    runtime.block_on(async move {
        let stream = tokio::net::TcpStream::from_std(stream)?;
        pgwire::tokio::process_socket(stream, None, handlers).await
    })
}

/// Refuses a connection before start-up with a FATAL ErrorResponse, as
/// PostgreSQL refuses one over max_connections.
fn refuse(mut stream: TcpStream, code: &str, message: &str) {
    let info = ErrorInfo::new("FATAL".into(), code.into(), message.into());
    let mut msg = bytes::BytesMut::new();
    if ErrorResponse::from(info).encode(&mut msg).is_ok() {
        let _ = stream.set_nonblocking(false);
        let _ = stream.write_all(&msg);
    }
}

/// One connection's handlers, as pgwire asks for them.
struct Handlers {
    conn: Arc<Connection>,
    startup: Arc<Startup>,
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.conn.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.conn.clone()
    }

    fn startup_handler(&self) -> Arc<impl pgwire::api::auth::StartupHandler> {
        self.startup.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.conn.clone()
    }
}
