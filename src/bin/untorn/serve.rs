//! `untorn serve`: a database behind the PostgreSQL wire protocol.

use crate::CreationArgs;
use clap::builder::TypedValueParser as _;
use clap::Args;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use untorn::server::{Server, ServerConfig, DEFAULT_MAX_MESSAGE_SIZE};
use untorn::settings::{parse_size, WalCompression};
use untorn::sql::{Limits, SqlEngine};
use untorn::{Database, Error, Options};

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The database directory: opened (recovering it) if it holds one,
    /// else created with the creation settings given.
    dir: PathBuf,
    /// Address to listen on. Loopback connections are trusted; any other
    /// address needs a password (SCRAM-SHA-256).
    #[arg(long, default_value = "127.0.0.1:5433")]
    listen: SocketAddr,
    /// A file whose first line is the password clients must give
    /// (SCRAM-SHA-256); the UNTORN_PASSWORD environment variable also sets it.
    #[arg(long)]
    password_file: Option<PathBuf>,
    /// Connections beyond this many are refused (SQLSTATE 53300); 1 to
    /// 262143, PostgreSQL's range.
    #[arg(long, default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=262_143).map(|n| n as usize))]
    max_connections: usize,
    /// Deepest nesting of operators and parentheses in one expression;
    /// deeper is refused with SQLSTATE 54001 (1 to 100000).
    #[arg(long, default_value_t = Limits::default().max_expression_depth as u64,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_expression_depth: u64,
    /// Longest SQL text of one Query or Parse message; longer is refused
    /// with SQLSTATE 54000 [default: 1MB].
    #[arg(long, value_parser = parse_size)]
    max_query_length: Option<u64>,
    /// Most statements in one Query message; more are refused with
    /// SQLSTATE 54000.
    #[arg(long, default_value_t = Limits::default().max_statements_per_query as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_statements_per_query: u64,
    /// Tokens of SQL text all connections parse at once (text up to 1kB
    /// aside); more waits. At worst about 420 bytes of memory a token.
    #[arg(long, default_value_t = Limits::default().parse_budget as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    parse_budget: u64,
    /// Most rows the library's whole-result calls return (SQLSTATE 54000
    /// past it); the server streams SELECT's rows, and UPDATE and DELETE
    /// change rows as they read them, so nothing it runs holds them.
    #[arg(long, default_value_t = Limits::default().max_result_rows as u64,
          value_parser = clap::value_parser!(u64).range(1..))]
    max_result_rows: u64,
    /// work_mem: the most memory one sort (ORDER BY, DISTINCT) holds
    /// before it writes sorted runs to a temporary file in spill/.
    #[arg(long, value_parser = parse_size, default_value = "4MB")]
    work_mem: u64,
    /// The most memory one connection keeps between messages (prepared
    /// statements, portals and their parameters, sorts in memory); more
    /// is SQLSTATE 53200.
    #[arg(long, value_parser = parse_size, default_value = "16MB")]
    max_connection_memory: u64,
    /// The most memory all connections keep together; more is SQLSTATE
    /// 53200.
    #[arg(long, value_parser = parse_size, default_value = "1600MB")]
    max_server_memory: u64,
    /// temp_file_limit: the most disk one transaction's write set may
    /// spill to past its 10,000 rows / 16 MB in memory (a COPY of
    /// millions of rows is one transaction); more is SQLSTATE 53400; 0:
    /// none spills, such a transaction is SQLSTATE 54000 [default:
    /// unlimited, as PostgreSQL's -1].
    #[arg(long, value_parser = parse_size)]
    temp_file_limit: Option<u64>,
    /// statement_timeout in milliseconds, PostgreSQL's unit: a statement
    /// running longer is canceled (SQLSTATE 57014); 0: no limit.
    #[arg(long, default_value_t = 0)]
    statement_timeout: u64,
    /// idle_in_transaction_session_timeout in milliseconds: a session
    /// idle this long inside a transaction block is ended (SQLSTATE
    /// 25P03), its block rolled back and its locks released; 0: never.
    #[arg(long, default_value_t = 0)]
    idle_in_transaction_session_timeout: u64,
    /// idle_session_timeout in milliseconds: a session idle this long
    /// outside a block is ended (SQLSTATE 57P05); 0: never.
    #[arg(long, default_value_t = 0)]
    idle_session_timeout: u64,
    /// Longest message a client may send after start-up; a longer one
    /// ends its connection (SQLSTATE 08P01); 1kB to 1GB [default: 4MB].
    #[arg(long, value_parser = message_size)]
    max_message_size: Option<u64>,
    #[command(flatten)]
    creation: CreationArgs,
    /// Buffer pool size [default: the engine's, 128MB].
    #[arg(long, value_parser = parse_size)]
    buffer_pool: Option<u64>,
    /// max_wal_size: WAL between checkpoints that starts the next one
    /// [default: the engine's].
    #[arg(long, value_parser = parse_size)]
    max_wal_size: Option<u64>,
    /// checkpoint_timeout in seconds, 0.1 to 86400 [default: the engine's].
    #[arg(long, value_parser = crate::seconds)]
    checkpoint_timeout: Option<f64>,
    /// synchronous_commit: on or off.
    #[arg(long, default_value = "on")]
    synchronous_commit: String,
    /// wal_compression for page images: off, lz4 or zstd.
    #[arg(long)]
    wal_compression: Option<String>,
    /// double_write_buffer_size, when the database uses double writes.
    #[arg(long, value_parser = parse_size)]
    double_write_buffer_size: Option<u64>,
    /// double_write_deferred_size, when the database uses double writes
    /// [default: 16 times double_write_buffer_size].
    #[arg(long, value_parser = parse_size)]
    double_write_deferred_size: Option<u64>,
    /// double_write_flush_after in pages, when the database uses double
    /// writes (0: off) [default: the engine's, 128].
    #[arg(long)]
    double_write_flush_after: Option<u32>,
    /// max_files_per_process: the most data segment files open at once;
    /// past it the least recently used close and open again when used.
    /// Fewer where `ulimit -n` leaves fewer free after five per connection
    /// and the engine's own [default: the engine's, 1000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(8..=1_000_000))]
    max_files_per_process: Option<u64>,
    /// deadlock_timeout in milliseconds, PostgreSQL's unit: how long a
    /// transaction waits for a row lock before it checks for a deadlock
    /// [default: the engine's, 1000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    deadlock_timeout: Option<u64>,
}

/// `--max-message-size`: 0 ended every connection at its first message.
fn message_size(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        n if (1 << 10..=1 << 30).contains(&n) => Ok(n),
        n => Err(format!("{n} bytes is not 1kB to 1GB")),
    }
}

fn options(a: &ServeArgs) -> untorn::Result<Options> {
    let mut o = Options {
        creation: a.creation.to_requested()?,
        ..Options::default()
    };
    if let Some(b) = a.buffer_pool {
        o.buffer_pool_size = b;
    }
    if let Some(w) = a.max_wal_size {
        o.max_wal_size = w;
    }
    if let Some(t) = a.checkpoint_timeout {
        o.checkpoint_timeout = Duration::from_secs_f64(t);
    }
    o.synchronous_commit = match a.synchronous_commit.as_str() {
        "on" => true,
        "off" => false,
        other => {
            return Err(Error::InvalidSetting {
                name: "synchronous_commit",
                detail: format!("{other:?} is not on or off"),
            })
        }
    };
    if let Some(c) = &a.wal_compression {
        o.wal_compression = c.parse::<WalCompression>()?;
    }
    if let Some(d) = a.double_write_buffer_size {
        o.double_write_buffer_size = d;
    }
    if let Some(d) = a.double_write_deferred_size {
        o.double_write_deferred_size = d;
    }
    if let Some(n) = a.double_write_flush_after {
        o.double_write_flush_after = n;
    }
    if let Some(limit) = a.temp_file_limit {
        o.temp_file_limit = limit;
    }
    if let Some(ms) = a.deadlock_timeout {
        o.deadlock_timeout = Duration::from_millis(ms);
    }
    if let Some(n) = a.max_files_per_process {
        o.max_files_per_process = n as usize;
    }
    // Two handles on a socket (server/mod.rs spawn) for each connection
    // and each in start-up (as many again), and a sort's temporary file
    // per connection, but never more
    // than half of what is free: a small `ulimit -n` with a large
    // max_connections still opens, its connections then meet EMFILE.
    let free = untorn::file::open_files::descriptors_free().unwrap_or(usize::MAX);
    o.reserved_file_descriptors += (5 * a.max_connections).min(free / 2);
    o.validate()?;
    Ok(o)
}

/// The limits on one statement; `max_query_length` from 1kB to 16MB (a
/// connection's stack grows with it).
fn limits(a: &ServeArgs) -> untorn::Result<Limits> {
    let max_query_length = match a.max_query_length {
        None => Limits::default().max_query_length,
        Some(b) if (1 << 10..=16 << 20).contains(&b) => b as usize,
        Some(b) => {
            return Err(Error::InvalidSetting {
                name: "max_query_length",
                detail: format!("{b} is out of range: must be 1kB to 16MB"),
            })
        }
    };
    Ok(Limits {
        max_expression_depth: a.max_expression_depth as usize,
        max_query_length,
        max_statements_per_query: a.max_statements_per_query as usize,
        parse_budget: a.parse_budget as usize,
        max_result_rows: a.max_result_rows as usize,
        work_mem: a.work_mem as usize,
        max_connection_memory: a.max_connection_memory as usize,
        max_server_memory: a.max_server_memory as usize,
        statement_timeout: (a.statement_timeout > 0)
            .then(|| Duration::from_millis(a.statement_timeout)),
        idle_in_transaction_session_timeout: (a.idle_in_transaction_session_timeout > 0)
            .then(|| Duration::from_millis(a.idle_in_transaction_session_timeout)),
        idle_session_timeout: (a.idle_session_timeout > 0)
            .then(|| Duration::from_millis(a.idle_session_timeout)),
    })
}

fn password(a: &ServeArgs) -> untorn::Result<Option<String>> {
    if let Some(path) = &a.password_file {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path.clone(), "read", e))?;
        let line = text.lines().next().unwrap_or("").to_string();
        if line.is_empty() {
            return Err(Error::InvalidSetting {
                name: "password_file",
                detail: format!("{} holds no password on its first line", path.display()),
            });
        }
        return Ok(Some(line));
    }
    Ok(std::env::var("UNTORN_PASSWORD")
        .ok()
        .filter(|p| !p.is_empty()))
}

pub fn run(a: &ServeArgs) -> untorn::Result<ExitCode> {
    // Every setting refused before the database is created: a refusal
    // left an empty database directory behind (issue 36).
    let options = options(a)?;
    let limits = limits(a)?;
    let config = ServerConfig {
        listen: a.listen,
        password: password(a)?,
        max_connections: a.max_connections,
        max_message_size: a
            .max_message_size
            .map_or(DEFAULT_MAX_MESSAGE_SIZE, |b| b as usize),
    };
    config.validate()?;
    let exists = a.dir.join(untorn::control::CONTROL_FILE_NAME).exists();
    let db = if exists {
        Database::open(&a.dir, options)?
    } else {
        Database::create(&a.dir, options)?
    };
    let settings = db.settings();
    let db = Arc::new(db);
    let sql = SqlEngine::open_with_limits(db.clone(), limits)
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let server = Server::bind(sql.clone(), &config)?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .map_err(|e| Error::Invalid(format!("cannot handle SIGINT/SIGTERM: {e}")))?;
    // A closed stdout (a parent that stopped reading) must not stop the
    // server, so these lines are written without println!'s panic.
    let _ = writeln!(
        std::io::stdout(),
        "untorn serve: {} database {} (page size {}, checksums {}, protection {}); \
         listening on {} ({})",
        if exists { "opened" } else { "created" },
        a.dir.display(),
        settings.page_size,
        settings.data_checksums,
        settings.torn_page_protection,
        server.local_addr()?,
        if config.password.is_some() {
            "SCRAM-SHA-256"
        } else {
            "trust"
        },
    );
    server.run(&stop)?;
    drop(server);
    drop(sql);
    match Arc::try_unwrap(db) {
        Ok(db) => db.close()?,
        Err(_) => {
            return Err(Error::Invalid(
                "the database is still in use at shutdown".into(),
            ))
        }
    }
    let _ = writeln!(std::io::stdout(), "untorn serve: shut down cleanly");
    Ok(ExitCode::SUCCESS)
}
