//! Connection start-up: authentication (trust on loopback, SCRAM-SHA-256
//! otherwise) and the ParameterStatus set PostgreSQL 15 sends.

use crate::sql::settings_at_start::{client_encoding, options};
use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramAuth};
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata, AuthSource,
    LoginInfo, Password, ServerParameterProvider, StartupHandler,
};
use pgwire::api::{
    ClientInfo, PgWireConnectionState, PidSecretKeyGenerator, RandomPidSecretKeyGenerator,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, LazyLock};

/// What clients learn of the server at start-up. `server_version` says
/// 15 because clients choose statements by it (pgbench's COPY FREEZE
/// from 14, sysbench's multi-row INSERT from 8.2), and the statements
/// untorn runs are PostgreSQL 15's.
#[derive(Debug)]
pub struct Parameters;

pub const SERVER_VERSION: &str = concat!("15.0 (untorn ", env!("CARGO_PKG_VERSION"), ")");

impl ServerParameterProvider for Parameters {
    fn server_parameters<C: ClientInfo>(&self, client: &C) -> Option<HashMap<String, String>> {
        let meta = client.metadata();
        let mut p: HashMap<String, String> = [
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO, MDY"),
            ("default_transaction_read_only", "off"),
            ("in_hot_standby", "off"),
            ("integer_datetimes", "on"),
            ("IntervalStyle", "postgres"),
            ("is_superuser", "on"),
            ("server_encoding", "UTF8"),
            ("server_version", SERVER_VERSION),
            ("standard_conforming_strings", "on"),
            ("TimeZone", "Etc/UTC"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let echo = |key: &str| meta.get(key).cloned().unwrap_or_default();
        // As asked (checked at start-up), by its canonical name.
        let encoding = meta.get("client_encoding").map(|e| client_encoding(e));
        if let Some(Ok(name)) = encoding {
            p.insert("client_encoding".into(), name.into());
        }
        p.insert("application_name".into(), echo("application_name"));
        p.insert("session_authorization".into(), echo("user"));
        Some(p)
    }
}

static PIDS: LazyLock<RandomPidSecretKeyGenerator> =
    LazyLock::new(RandomPidSecretKeyGenerator::default);

/// How connections authenticate.
pub enum Startup {
    /// Every user is let in: for loopback, where the benchmarks run.
    Trust,
    /// SCRAM-SHA-256 against one password, for any user name.
    Scram(SASLAuthStartupHandler<Parameters>),
}

/// SCRAM's stored secret: salted once at start, as PostgreSQL stores a
/// verifier rather than the password.
#[derive(Debug)]
struct Secret {
    salt: Vec<u8>,
    salted: Vec<u8>,
}

#[async_trait]
impl AuthSource for Secret {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        Ok(Password::new(Some(self.salt.clone()), self.salted.clone()))
    }
}

const SCRAM_ITERATIONS: usize = 4096;

impl Startup {
    pub fn scram(password: &str) -> Startup {
        let salt: [u8; 16] = rand::random();
        let salted = gen_salted_password(password, &salt, SCRAM_ITERATIONS);
        let mut scram = ScramAuth::new(Arc::new(Secret {
            salt: salt.to_vec(),
            salted,
        }));
        scram.set_iterations(SCRAM_ITERATIONS);
        Startup::Scram(SASLAuthStartupHandler::new(Arc::new(Parameters)).with_scram(scram))
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let PgWireFrontendMessage::Startup(ref startup) = message {
            let fatal = |code: &str, message: String| {
                PgWireError::UserError(Box::new(ErrorInfo::new(
                    "FATAL".into(),
                    code.into(),
                    message,
                )))
            };
            // As PostgreSQL: a user name is required (any, with trust).
            if startup.parameters.get("user").is_none_or(|u| u.is_empty()) {
                return Err(fatal(
                    "28000",
                    "no PostgreSQL user name specified in startup packet".into(),
                ));
            }
            // What the session is to be set to: refused here, not ignored
            // (settings_at_start); the options are applied at its first
            // statement.
            let given = |key: &str| startup.parameters.get(key);
            let checked = given("client_encoding")
                .map(|e| client_encoding(e).map(|_| ()))
                .transpose()
                .and_then(|_| given("options").map(|o| options(o).map(|_| ())).transpose());
            if let Err(e) = checked {
                return Err(fatal(e.code, e.message));
            }
        }
        match self {
            Startup::Scram(sasl) => sasl.on_startup(client, message).await,
            Startup::Trust => {
                if let PgWireFrontendMessage::Startup(ref startup) = message {
                    protocol_negotiation(client, startup).await?;
                    save_startup_parameters_to_metadata(client, startup);
                    let (pid, key) = PIDS.generate(client);
                    client.set_pid_and_secret_key(pid, key);
                    finish_authentication(client, &Parameters).await?;
                }
                Ok(())
            }
        }
    }
}

/// A connection's place among `max_connections`, taken when its start-up
/// packet comes: a connection still in start-up (or one that never sends
/// its packet) takes none, as PostgreSQL does not count backends before
/// authentication (before, each took a place for up to 60 s from its
/// accept). Given back when the connection ends.
pub struct Gate {
    started: Arc<AtomicUsize>,
    max: usize,
    taken: AtomicBool,
}

impl Gate {
    pub fn new(started: Arc<AtomicUsize>, max: usize) -> Gate {
        Gate {
            started,
            max,
            taken: AtomicBool::new(false),
        }
    }

    /// Takes a place; false if all are taken.
    fn take(&self) -> bool {
        if self.taken.load(SeqCst) {
            return true;
        }
        if self.started.fetch_add(1, SeqCst) >= self.max {
            self.started.fetch_sub(1, SeqCst);
            return false;
        }
        self.taken.store(true, SeqCst);
        true
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        if self.taken.load(SeqCst) {
            self.started.fetch_sub(1, SeqCst);
        }
    }
}

/// `Startup`, behind one connection's `Gate`; once the start-up is done
/// the connection is listed (`Connection::enlist`), so pg_terminate_backend
/// and CancelRequests reach it before its first statement.
pub struct Gated {
    pub startup: Arc<Startup>,
    pub gate: Gate,
    pub conn: Arc<super::handlers::Connection>,
}

#[async_trait]
impl StartupHandler for Gated {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if matches!(message, PgWireFrontendMessage::Startup(_)) && !self.gate.take() {
            return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".into(),
                "53300".into(),
                "sorry, too many clients already".into(),
            ))));
        }
        self.startup.on_startup(client, message).await?;
        if matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            self.conn.enlist(client);
        }
        Ok(())
    }
}
