//! `untorn serve`: the PostgreSQL wire protocol (3.0) in front of the
//! SQL layer, so the real pgbench, sysbench and psql drive untorn.
//!
//! One thread per connection, as PostgreSQL has one process per
//! connection: a commit waits for its group flush without holding up
//! other clients, and the engine's blocking calls need no async runtime
//! beyond the connection's own. pgwire (pinned) speaks the protocol;
//! `handlers` translates its messages to `sql::Session` calls and
//! `codec` converts values.

mod cancel;
pub mod codec;
mod handlers;
mod refuse;
pub mod startup;

use crate::error::{Error, Result};
use crate::sql::{Interrupt, SqlEngine};
use cancel::CancelRequests;
use handlers::Connection;
use parking_lot::Mutex;
use pgwire::api::copy::CopyHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::PgWireServerHandlers;
use refuse::{send_fatal, Refuser};
use startup::{Gate, Gated, Startup};
use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    /// The longest message a client may send after start-up, in bytes:
    /// a longer one ends its connection (08P01) from its header, so no
    /// connection buffers more of an unfinished message than this.
    pub max_message_size: usize,
}

impl ServerConfig {
    /// Refuses what the server would refuse at [`Server::bind`] (a
    /// non-loopback address without a password), so that `untorn serve`
    /// can before it creates a database.
    pub fn validate(&self) -> Result<()> {
        self.startup().map(|_| ())
    }

    fn startup(&self) -> Result<Startup> {
        match (&self.password, self.listen.ip().is_loopback()) {
            (Some(p), _) => Ok(Startup::scram(p)),
            (None, true) => Ok(Startup::Trust),
            (None, false) => Err(Error::InvalidSetting {
                name: "listen",
                detail: format!(
                    "{} is not a loopback address: set a password (UNTORN_PASSWORD or \
                     --password-file) so clients authenticate with SCRAM-SHA-256",
                    self.listen
                ),
            }),
        }
    }
}

/// `max_message_size` unless set: room for the longest query text
/// (`max_query_length`, 1 MB) several times over.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 << 20;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 5433)),
            password: None,
            max_connections: 100,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
        }
    }
}

/// The open connections by id: each one's socket (a second handle on
/// it, `spawn`) and its session's interrupt, so a stop can end them.
type Open = Arc<Mutex<HashMap<u64, (Arc<TcpStream>, Arc<Interrupt>)>>>;

/// A bound server: `run` serves until told to stop.
pub struct Server {
    listener: TcpListener,
    sql: Arc<SqlEngine>,
    startup: Arc<Startup>,
    max_connections: usize,
    max_message_size: usize,
    /// Each open connection's socket and its session's interrupt, so a
    /// stop can end them.
    open: Open,
    /// Answers CancelRequests.
    cancels: Arc<CancelRequests>,
    /// Connections past their start-up packet (`startup::Gate`).
    started: Arc<AtomicUsize>,
    refuser: Refuser,
}

/// How long the accept loop sleeps when no connection waits: the delay a
/// new connection or a stop may see.
const ACCEPT_POLL: Duration = Duration::from_millis(5);

/// How long a stop waits for connections to end by themselves, with
/// their FATAL 57P01 sent, before it closes their sockets.
const SHUTDOWN_FAREWELL: Duration = Duration::from_secs(1);

/// How long a stop waits for connections to end: their statements check
/// for it per row and while they wait for a row lock or the parse
/// budget, so only a stuck thread takes longer.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

impl Server {
    pub fn bind(sql: Arc<SqlEngine>, config: &ServerConfig) -> Result<Server> {
        let startup = config.startup()?;
        let io = |op, e| Error::io(config.listen.to_string(), op, e);
        let listener = TcpListener::bind(config.listen).map_err(|e| io("bind", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| io("set_nonblocking", e))?;
        Ok(Server {
            listener,
            startup: Arc::new(startup),
            max_connections: config.max_connections,
            max_message_size: config.max_message_size,
            open: Arc::new(Mutex::new(HashMap::new())),
            cancels: Arc::new(CancelRequests(sql.clone())),
            started: Arc::new(AtomicUsize::new(0)),
            refuser: Refuser::start()
                .map_err(|e| Error::io("untorn-refuser", "spawning a thread", e))?,
            sql,
        })
    }

    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::io("listener", "getsockname", e))
    }

    /// Serves until `stop` is set, then ends every connection: its running
    /// statement stops (57P01), its socket closes and its open transaction
    /// aborts. Returns once their threads ended, or with an error if some
    /// did not within `SHUTDOWN_GRACE` (one waiting on a row lock, say):
    /// a stop takes bounded time whatever the connections are doing.
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
            // A connection counts against max_connections from its
            // start-up packet (`startup::Gate`); as many again may be
            // in start-up, as PostgreSQL lets its postmaster have twice
            // as many children as connections.
            if self.open.lock().len() >= 2 * self.max_connections {
                self.refuser.refuse(stream);
                continue;
            }
            next_id += 1;
            match self.spawn(next_id, stream) {
                Ok(t) => threads.push(t),
                Err(e) => tracing::warn!("connection from {peer} not served: {e}"),
            }
        }
        // Each connection is told first, so that it ends with the FATAL
        // 57P01 PostgreSQL sends; those that have not ended by a moment
        // later (mid-message, or stuck) have their sockets closed.
        for (_, interrupt) in self.open.lock().values() {
            interrupt.shut_down();
        }
        let told = std::time::Instant::now() + SHUTDOWN_FAREWELL;
        while threads.iter().any(|t| !t.is_finished()) && std::time::Instant::now() < told {
            std::thread::sleep(ACCEPT_POLL);
        }
        for (s, _) in self.open.lock().values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let deadline = std::time::Instant::now() + SHUTDOWN_GRACE;
        while threads.iter().any(|t| !t.is_finished()) && std::time::Instant::now() < deadline {
            std::thread::sleep(ACCEPT_POLL);
        }
        let stuck = threads.iter().filter(|t| !t.is_finished()).count();
        if stuck > 0 {
            return Err(Error::Invalid(format!(
                "{stuck} connection(s) did not end within {SHUTDOWN_GRACE:?} of the stop"
            )));
        }
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }

    /// Serves one connection on a thread of its own, which is a fault
    /// boundary: however it ends (a panic included, ours or pgwire's),
    /// its session rolls back, its client hears why, and its slot is
    /// released, while the server and every other connection go on.
    fn spawn(&self, id: u64, stream: TcpStream) -> std::io::Result<JoinHandle<()>> {
        // Every statement is a round trip: Nagle would hold each reply.
        stream.set_nodelay(true)?;
        keepalive(&stream)?;
        stream.set_nonblocking(true)?;
        // One more handle on the socket, for what is not the protocol
        // loop's: a stop's shutdown, a panic's FATAL, the client probe.
        let side = Arc::new(stream.try_clone()?);
        let session = self.sql.session();
        let interrupt = session.interrupt();
        let probed = side.clone();
        interrupt.on_client_check(move || client_gone(&probed));
        self.open.lock().insert(id, (side.clone(), interrupt));
        let slot = Slot {
            open: self.open.clone(),
            id,
        };
        let conn = Arc::new(Connection::new(session));
        let handlers = Handlers {
            conn: conn.clone(),
            startup: Arc::new(Gated {
                startup: self.startup.clone(),
                gate: Gate::new(self.started.clone(), self.max_connections),
                conn: conn.clone(),
            }),
            max_message_size: self.max_message_size,
            cancels: self.cancels.clone(),
        };
        std::thread::Builder::new()
            .name(format!("untorn-conn-{id}"))
            // Deep enough for the deepest expression the limits let through.
            .stack_size(self.sql.limits().stack_bytes())
            .spawn(move || {
                let _slot = slot;
                guarded(id, &side, &conn, || serve_connection(stream, handlers));
            })
    }
}

/// Runs `serve` (connection `id`'s protocol loop) as a fault boundary: a
/// panic in it ends the connection with a FATAL XX000 on `side` (the
/// connection's socket), and however it ends, `conn`'s session rolls back
/// what it left open.
fn guarded(
    id: u64,
    side: &TcpStream,
    conn: &Connection,
    serve: impl FnOnce() -> std::io::Result<()>,
) {
    match catch_unwind(AssertUnwindSafe(serve)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!("connection {id} ended: {e}"),
        Err(panic) => {
            let what = panic_message(panic.as_ref());
            tracing::error!("connection {id} ended by a panic: {what}");
            let message = format!("internal error, connection ended: {what}");
            send_fatal(side, crate::sql::codes::INTERNAL_ERROR, &message);
        }
    }
    if catch_unwind(AssertUnwindSafe(|| conn.close())).is_err() {
        tracing::error!("connection {id}: rolling back its session panicked");
    }
}

/// TCP keepalive on a client's socket, so that a client that vanished
/// (its machine gone, a cable pulled) is noticed and its session ended
/// after about two minutes of silence: a probe after 60 s idle, then
/// every 10 s, 6 unanswered ending it (PostgreSQL leaves the kernel's
/// two hours unless tcp_keepalives_idle is set).
fn keepalive(stream: &TcpStream) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = stream.as_raw_fd();
    for (level, name, value) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, 60),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 10),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 6),
    ] {
        let v: libc::c_int = value;
        // SAFETY: a valid socket and a c_int option of its size.
        let r = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                &v as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A connection's place among `max_connections`, given back when its
/// thread ends, however it ends.
struct Slot {
    open: Open,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((s, _)) = self.open.lock().remove(&self.id) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
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

/// Whether a client's socket says the client has gone: its peer closed
/// its side or reset it (poll(2) with POLLRDHUP, as PostgreSQL's
/// client_connection_check_interval asks). Never waits; bytes the client
/// sent ahead do not count as gone.
fn client_gone(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a zero timeout.
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n > 0 && fd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// One connection's handlers, as pgwire asks for them.
struct Handlers {
    conn: Arc<Connection>,
    startup: Arc<Gated>,
    max_message_size: usize,
    cancels: Arc<CancelRequests>,
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

    fn max_message_size(&self) -> usize {
        self.max_message_size
    }

    fn idle_timeout(&self) -> Option<(Duration, &'static str, &'static str)> {
        self.conn.idle_timeout()
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        self.cancels.clone()
    }

    fn termination(&self) -> Option<(Arc<tokio::sync::Notify>, &'static str, &'static str)> {
        Some(self.conn.termination())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A panic in a connection's loop reaches its client as a FATAL
    /// XX000, gives its slot back and rolls its open block back.
    #[test]
    fn a_panic_in_a_connection_is_contained() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            crate::db::Database::create(dir.path(), crate::options::Options::default()).unwrap();
        let sql = SqlEngine::open(Arc::new(db)).unwrap();
        let mut session = sql.session();
        for q in [
            "create table t (id int primary key)",
            "begin",
            "insert into t values (1)",
        ] {
            assert!(session.simple_query(q).pop().unwrap().is_ok(), "{q}");
        }
        let conn = Connection::new(session);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server_side, _) = listener.accept().unwrap();
        let server_side = Arc::new(server_side);
        let open = Arc::new(Mutex::new(HashMap::new()));
        let interrupt = Arc::new(Interrupt::default());
        open.lock().insert(7, (server_side.clone(), interrupt));
        let slot = Slot {
            open: open.clone(),
            id: 7,
        };
        guarded(7, &server_side, &conn, || panic!("boom"));
        drop(slot);
        assert!(open.lock().is_empty(), "the slot was kept");
        let mut reply = Vec::new();
        client.read_to_end(&mut reply).unwrap();
        let text = String::from_utf8_lossy(&reply);
        assert!(
            reply.first() == Some(&b'E') && text.contains("XX000"),
            "{text}"
        );
        assert!(text.contains("boom"), "{text}");
        // The block rolled back: its row lock is free and its row absent.
        let mut other = sql.session();
        assert!(other
            .simple_query("insert into t values (1)")
            .pop()
            .unwrap()
            .is_ok());
        drop(conn);
    }
}
