//! Reusable authentication driver.
//!
//! A [`StartupHandler`](super::StartupHandler) owns the startup protocol;
//! authentication logic
//! lives in [`AuthMechanism`] state machines. [`AuthDriver`] is the small shared core between the two: it
//! runs the mechanism state machine (`begin_authentication` /
//! `advance_authentication`) and completes the startup protocol, while the
//! handler keeps full control of everything around it — pre-auth
//! validation, per-connection mechanism selection, custom failure
//! responses. The built-in `*AuthStartupHandler` types are written against
//! it in exactly the same way a custom handler is:
//!
//! ```no_run
//! # use std::fmt::Debug;
//! # use std::sync::Arc;
//! # use async_trait::async_trait;
//! # use futures::sink::{Sink, SinkExt};
//! use pgwire::api::auth::AuthDriver;
//! use pgwire::api::auth::driver::AuthOutcome;
//! use pgwire::api::auth::mechanism::AuthMechanismFactory;
//! use pgwire::api::auth::cleartext::CleartextPasswordAuth;
//! use pgwire::api::auth::md5pass::Md5PasswordAuth;
//! # use pgwire::api::auth::{AuthSource, LoginInfo, Password, ServerParameterProvider, StartupHandler, DefaultServerParameterProvider};
//! # use pgwire::api::ClientInfo;
//! # use pgwire::error::{PgWireError, PgWireResult};
//! # use pgwire::messages::PgWireBackendMessage;
//! # use pgwire::messages::PgWireFrontendMessage;
//! # #[derive(Debug)]
//! # struct MyAuthSource;
//! # #[async_trait]
//! # impl AuthSource for MyAuthSource {
//! #     async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> { unimplemented!() }
//! # }
//! # struct MyQueryHandlers;
//! # impl pgwire::api::PgWireServerHandlers for MyQueryHandlers {}
//!
//! struct MyStartupHandler {
//!     driver: AuthDriver<DefaultServerParameterProvider>,
//!     cleartext: Arc<dyn AuthMechanismFactory>,
//!     md5: Arc<dyn AuthMechanismFactory>,
//! }
//!
//! #[async_trait]
//! impl StartupHandler for MyStartupHandler {
//!     async fn on_startup<C>(
//!         &self,
//!         client: &mut C,
//!         message: PgWireFrontendMessage,
//!     ) -> PgWireResult<()>
//!     where
//!         C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
//!         C::Error: Debug,
//!         PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
//!     {
//!         match message {
//!             PgWireFrontendMessage::Startup(ref startup) => {
//!                 pgwire::api::auth::protocol_negotiation(client, startup).await?;
//!                 pgwire::api::auth::save_startup_parameters_to_metadata(client, startup);
//!
//!                 // custom pre-auth validation goes here (force TLS, resolve
//!                 // database, ...) with full `&mut C` access
//!
//!                 // per-connection mechanism selection:
//!                 let mechanism = if client.metadata().get("user").is_some_and(|u| u == "legacy") {
//!                     self.cleartext.create()
//!                 } else {
//!                     self.md5.create()
//!                 };
//!                 self.driver.begin_authentication(client, mechanism).await?;
//!                 Ok(())
//!             }
//!             PgWireFrontendMessage::PasswordMessageFamily(message) => {
//!                 match self.driver.advance_authentication(client, message).await {
//!                     Ok(AuthOutcome::Authenticated {
//!                         identity,
//!                         final_message,
//!                     }) => {
//!                         // the mechanism verified the client; nothing
//!                         // terminal has been sent yet. Bind the identity
//!                         // (typed as your driver's identity parameter) to
//!                         // the session, run authorization, then finish:
//!                         let _ = identity;
//!                         self.driver
//!                             .complete_authentication(client, final_message)
//!                             .await?;
//!                     }
//!                     Ok(AuthOutcome::InProgress) => {}
//!                     // report failures your way, or propagate the error to
//!                     // let the server send the standard `ErrorResponse`:
//!                     Err(error) => return Err(error),
//!                 }
//!                 Ok(())
//!             }
//!             _ => Ok(()),
//!         }
//!     }
//! }
//!
//! let handler = MyStartupHandler {
//!     driver: AuthDriver::new(DefaultServerParameterProvider::default()),
//!     cleartext: Arc::new(CleartextPasswordAuth::new(Arc::new(MyAuthSource))),
//!     md5: Arc::new(Md5PasswordAuth::new(Arc::new(MyAuthSource))),
//! };
//! ```
//!
//! ## Customization guide
//!
//! The handler owns the flow, the driver owns the protocol mechanics and
//! the mechanisms own the authentication logic; everything else composes
//! from those three without further API surface:
//!
//! - **Pre-auth validation** (force TLS, resolve the database, validate
//!   timezone): handler code on the `Startup` message, before
//!   [`AuthDriver::begin_authentication`], with full `&mut C` access.
//! - **Per-connection mechanism selection**: plain handler code deciding
//!   which mechanism to `create()`. For SASL mechanisms chosen by the
//!   client, use the
//!   [`SaslMechanisms`](crate::api::auth::sasl::SaslMechanisms) registry.
//! - **Custom authentication methods** (LDAP, Kerberos, certificate
//!   based, ...): implement
//!   [`AuthMechanism`];
//!   `begin`/`next` receive the full `ClientInfo`, including TLS
//!   certificates and SNI. `AuthSource` implementations receive the same
//!   context through
//!   [`LoginInfo`](crate::api::auth::LoginInfo).
//! - **Recording authentication results** (metrics, audit): branch on
//!   [`AuthOutcome::Authenticated`] for success; catch the `Err` returned by
//!   [`AuthDriver::begin_authentication`] /
//!   [`AuthDriver::advance_authentication`] for failures — at that point
//!   nothing has been sent to the client yet.
//! - **Failing after successful verification** (authorization): on
//!   [`AuthOutcome::Authenticated`] nothing terminal has been sent yet;
//!   run your check and either call
//!   [`AuthDriver::complete_authentication`] or return an error to
//!   reject the client.
//! - **Custom failure responses**: same `Err` handling; send your own
//!   `ErrorResponse` and close, or propagate the error and let the server
//!   report it.
//! - **Server parameters**: implement
//!   [`ServerParameterProvider`];
//!   `server_parameters` receives the client, so values can depend on
//!   startup metadata. For parameters derived from the authenticated
//!   identity (e.g. a `session_authorization` reflecting a bearer-token
//!   user), have the mechanism record the identity in
//!   [`ClientInfo::session_extensions`] and read it back in the provider.
//! - **Connections that skip authentication**: a mechanism whose `begin`
//!   reports [`AuthState::Ok`](crate::api::auth::mechanism::AuthState)
//!   immediately.
//! - **Built-in handlers plus custom logic**: wrap the handler in your
//!   own `StartupHandler` that delegates `on_startup` and inspects the
//!   `Result`.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::sink::{Sink, SinkExt};

use super::mechanism::AuthMechanism;
use super::mechanism::AuthState;
use super::{ClientInfo, PgWireConnectionState, ServerParameterProvider};
use crate::api::{ConnectionManager, PidSecretKeyGenerator, RandomPidSecretKeyGenerator};
use crate::error::{PgWireError, PgWireResult};
use crate::messages::PgWireBackendMessage;
use crate::messages::startup::{Authentication, PasswordMessageFamily};

/// The outcome of one authentication step driven by [`AuthDriver`].
///
/// This type is deliberately not `#[must_use]`: callers that do not need
/// the outcome can discard it with `?` and continue.
#[derive(Debug)]
pub enum AuthOutcome<I = ()> {
    /// The handshake continues: the mechanism's `Authentication` message
    /// was sent; feed the next password-family message to
    /// [`AuthDriver::advance_authentication`].
    InProgress,
    /// The mechanism verified the client; the startup protocol is one
    /// step from complete and **nothing terminal has been sent yet**.
    /// Run any post-verification logic now (authorization, binding
    /// `identity` to the session, metrics), then either finish the
    /// startup with [`AuthDriver::complete_authentication`], or fail the
    /// authentication by returning an error.
    Authenticated {
        /// The identity the mechanism reported, if any.
        identity: Option<I>,
        /// The mechanism's final message (for example SCRAM's
        /// `SASLFinal`), to hand back to
        /// [`AuthDriver::complete_authentication`].
        final_message: Option<Authentication>,
    },
}

/// Reusable authentication driver: runs a per-connection
/// [`AuthMechanism`] state machine to
/// completion and finishes the startup protocol around it.
///
/// This is the building block for custom
/// [`StartupHandler`](super::StartupHandler)
/// implementations. Create one (it is stateless and can be shared across
/// connections), then:
///
/// - after your pre-auth logic, call [`AuthDriver::begin_authentication`]
///   with a fresh mechanism,
/// - feed every password-family message to
///   [`AuthDriver::advance_authentication`],
/// - on success the driver completes the startup protocol itself and
///   reports [`AuthOutcome::Authenticated`]; failures are returned as `Err`,
///   before anything has been sent, so you can report them your way.
///
/// Connections that skip authentication can use a mechanism whose `begin`
/// returns [`AuthState::Ok`] immediately.
///
/// The built-in `*AuthStartupHandler` types embed this driver alongside a
/// fixed [`AuthMechanismFactory`](super::mechanism::AuthMechanismFactory);
/// custom handlers embed it the same way.
pub struct AuthDriver<P, I = ()> {
    parameter_provider: P,
    pid_secret_key_generator: Arc<dyn PidSecretKeyGenerator>,
    connection_manager: Option<Arc<ConnectionManager>>,
    _identity: PhantomData<fn() -> I>,
}

impl<P, I> AuthDriver<P, I> {
    /// Creates a driver with the given server parameter provider.
    pub fn new(parameter_provider: P) -> Self {
        Self {
            parameter_provider,
            pid_secret_key_generator: Arc::new(RandomPidSecretKeyGenerator::default()),
            connection_manager: None,
            _identity: PhantomData,
        }
    }

    /// Sets a custom PID/secret key generator.
    pub fn with_pid_secret_key_generator(
        mut self,
        generator: Arc<dyn PidSecretKeyGenerator>,
    ) -> Self {
        self.pid_secret_key_generator = generator;
        self
    }

    /// Sets a connection manager.
    pub fn with_connection_manager(mut self, manager: Arc<ConnectionManager>) -> Self {
        self.connection_manager = Some(manager);
        self
    }
}

impl<P: ServerParameterProvider, I: Send + 'static> AuthDriver<P, I> {
    /// Begins authenticating a connection with a fresh mechanism: calls
    /// [`AuthMechanism::begin`], sends the initial `Authentication` request
    /// and keeps the mechanism for the following password-family messages.
    ///
    /// If the mechanism completes immediately (`Ok` with or without a final
    /// message), the startup is completed right away.
    ///
    /// Authentication failures are returned as `Err`; handle them in your
    /// `StartupHandler` to send custom error responses, or let the server
    /// turn them into an `ErrorResponse`.
    pub async fn begin_authentication<C>(
        &self,
        client: &mut C,
        mut mechanism: Box<dyn AuthMechanism<I>>,
    ) -> PgWireResult<AuthOutcome<I>>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let state = mechanism.begin(client).await;
        self.handle_state(client, mechanism, state).await
    }

    /// Feeds one password-family message to the mechanism started by
    /// [`AuthDriver::begin_authentication`], sending whatever the mechanism
    /// returns; on success the startup protocol is completed
    /// (`AuthenticationOk`, server parameters, `BackendKeyData`,
    /// `ReadyForQuery`).
    ///
    /// Returns `Err` when authentication fails, or
    /// [`PgWireError::NoAuthenticationInProgress`] when a password-family
    /// message arrives while no authentication handshake is running (before
    /// one began or after it already finished).
    pub async fn advance_authentication<C>(
        &self,
        client: &mut C,
        message: PasswordMessageFamily,
    ) -> PgWireResult<AuthOutcome<I>>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some(mut mechanism) = take_mechanism(client) else {
            return Err(PgWireError::NoAuthenticationInProgress);
        };

        let state = mechanism.next(client, message).await;
        self.handle_state(client, mechanism, state).await
    }

    /// Applies one step of the mechanism state machine: on
    /// [`AuthState::InProgress`] the message is sent and the mechanism kept
    /// for the next round; on [`AuthState::Ok`] the startup protocol is
    /// completed; failures are propagated to the caller.
    async fn handle_state<C>(
        &self,
        client: &mut C,
        mechanism: Box<dyn AuthMechanism<I>>,
        state: PgWireResult<AuthState<I>>,
    ) -> PgWireResult<AuthOutcome<I>>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match state {
            Ok(AuthState::InProgress(next)) => {
                client.set_state(PgWireConnectionState::AuthenticationInProgress);
                store_mechanism(client, mechanism);
                client
                    .send(PgWireBackendMessage::Authentication(next))
                    .await?;
                Ok(AuthOutcome::InProgress)
            }
            Ok(AuthState::Ok {
                final_message,
                identity,
            }) => {
                client.set_state(PgWireConnectionState::AuthenticationInProgress);
                Ok(AuthOutcome::Authenticated {
                    identity,
                    final_message,
                })
            }
            Ok(AuthState::Failed(error)) | Err(error) => Err(error),
        }
    }

    /// Completes the startup protocol: sends `final_message` (the one
    /// carried by [`AuthOutcome::Authenticated`], if any), generates the
    /// pid/secret key, registers the connection and sends
    /// `AuthenticationOk`, server parameters, `BackendKeyData` and
    /// `ReadyForQuery`.
    ///
    /// Called after [`AuthOutcome::Authenticated`], this is the point of
    /// no return decided by the startup handler; without a handshake,
    /// `final_message` is `None` and the startup is completed for
    /// connections that skip authentication.
    pub async fn complete_authentication<C>(
        &self,
        client: &mut C,
        final_message: Option<Authentication>,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(message) = final_message {
            client
                .send(PgWireBackendMessage::Authentication(message))
                .await?;
        }

        let (pid, secret_key) = self.pid_secret_key_generator.generate(client);
        client.set_pid_and_secret_key(pid, secret_key);
        if let Some(manager) = &self.connection_manager {
            super::register_connection(client, manager);
        }

        super::finish_authentication(client, &self.parameter_provider).await
    }
}

/// Per-connection storage for the running auth mechanism.
///
/// Stored in [`ClientInfo::session_extensions`] so a single shared
/// `AuthDriver` can drive any number of concurrent connections.
struct MechanismSlot<I = ()> {
    mechanism: std::sync::Mutex<Option<Box<dyn AuthMechanism<I>>>>,
}

impl<I> Default for MechanismSlot<I> {
    fn default() -> Self {
        Self {
            mechanism: std::sync::Mutex::new(None),
        }
    }
}

fn take_mechanism<I: 'static>(client: &impl ClientInfo) -> Option<Box<dyn AuthMechanism<I>>> {
    client
        .session_extensions()
        .get_or_insert_with(MechanismSlot::<I>::default)
        .mechanism
        .lock()
        .unwrap()
        .take()
}

fn store_mechanism<I: 'static>(client: &impl ClientInfo, mechanism: Box<dyn AuthMechanism<I>>) {
    *client
        .session_extensions()
        .get_or_insert_with(MechanismSlot::<I>::default)
        .mechanism
        .lock()
        .unwrap() = Some(mechanism);
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::messages::PgWireFrontendMessage;
    use async_trait::async_trait;

    use std::sync::Arc;

    use crate::api::PgWireConnectionState;
    use crate::api::auth::DefaultServerParameterProvider;
    use crate::api::auth::StartupHandler;
    use crate::api::auth::cleartext::CleartextPasswordAuth;
    use crate::api::auth::mechanism::AuthMechanism;
    use crate::api::auth::mechanism::AuthMechanismFactory;
    use crate::api::auth::test_util::{TestClient, startup_message};
    use crate::api::auth::{AuthSource, LoginInfo, Password};
    use crate::error::PgWireError;
    use crate::messages::PgWireBackendMessage;
    use crate::messages::startup::{
        Authentication, Password as PasswordMessage, PasswordMessageFamily,
    };

    #[derive(Debug, Default)]
    struct FixedAuthSource {
        password: String,
    }

    #[async_trait]
    impl AuthSource for FixedAuthSource {
        async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
            Ok(Password::new(None, self.password.as_bytes().to_vec()))
        }
    }

    /// A mechanism that authenticates instantly, exercising the
    /// `begin -> Ok` path.
    struct TrustMechanism;

    #[async_trait]
    impl AuthMechanism for TrustMechanism {
        async fn begin(
            &mut self,
            _client: &(dyn ClientInfo + Send + Sync),
        ) -> PgWireResult<AuthState> {
            Ok(AuthState::Ok {
                final_message: None,
                identity: None,
            })
        }

        async fn next(
            &mut self,
            _client: &(dyn ClientInfo + Send + Sync),
            _message: PasswordMessageFamily,
        ) -> PgWireResult<AuthState> {
            Err(PgWireError::NoAuthenticationInProgress)
        }
    }

    /// A mechanism that rejects instantly, exercising the fail-fast path.
    struct RejectMechanism;

    #[async_trait]
    impl AuthMechanism for RejectMechanism {
        async fn begin(
            &mut self,
            _client: &(dyn ClientInfo + Send + Sync),
        ) -> PgWireResult<AuthState> {
            Ok(AuthState::Failed(PgWireError::UserNameRequired))
        }

        async fn next(
            &mut self,
            _client: &(dyn ClientInfo + Send + Sync),
            _message: PasswordMessageFamily,
        ) -> PgWireResult<AuthState> {
            Err(PgWireError::NoAuthenticationInProgress)
        }
    }

    fn cleartext_driver_and_factory() -> (
        AuthDriver<DefaultServerParameterProvider>,
        CleartextPasswordAuth<FixedAuthSource>,
    ) {
        (
            AuthDriver::new(DefaultServerParameterProvider::default()),
            CleartextPasswordAuth::new(Arc::new(FixedAuthSource {
                password: "secret".to_owned(),
            })),
        )
    }

    #[tokio::test]
    async fn test_driver_cleartext_success() {
        let (driver, factory) = cleartext_driver_and_factory();
        let mut client = TestClient::new(Some("alice"));

        assert!(matches!(
            driver
                .begin_authentication(&mut client, factory.create())
                .await
                .unwrap(),
            AuthOutcome::InProgress
        ));

        assert!(matches!(
            client.state(),
            PgWireConnectionState::AuthenticationInProgress
        ));
        assert!(matches!(
            client.sent.last(),
            Some(PgWireBackendMessage::Authentication(
                Authentication::CleartextPassword
            ))
        ));

        let outcome = driver
            .advance_authentication(
                &mut client,
                PasswordMessageFamily::Password(PasswordMessage::new("secret".to_owned())),
            )
            .await
            .unwrap();
        let AuthOutcome::Authenticated {
            identity: None,
            final_message: None,
        } = outcome
        else {
            panic!("expected Authenticated without identity, got {outcome:?}")
        };
        // nothing terminal sent yet: the veto window
        assert!(matches!(
            client.state(),
            PgWireConnectionState::AuthenticationInProgress
        ));
        assert!(!client.sent.iter().any(|msg| {
            matches!(
                msg,
                PgWireBackendMessage::Authentication(Authentication::Ok)
            )
        }));

        driver
            .complete_authentication(&mut client, None)
            .await
            .unwrap();

        assert!(matches!(
            client.state(),
            PgWireConnectionState::ReadyForQuery
        ));
        assert!(client.sent.iter().any(|msg| {
            matches!(
                msg,
                PgWireBackendMessage::Authentication(Authentication::Ok)
            )
        }));
        assert!(matches!(
            client.sent.last(),
            Some(PgWireBackendMessage::ReadyForQuery(_))
        ));
    }

    #[tokio::test]
    async fn test_driver_cleartext_failure() {
        let (driver, factory) = cleartext_driver_and_factory();
        let mut client = TestClient::new(Some("alice"));

        driver
            .begin_authentication(&mut client, factory.create())
            .await
            .unwrap();

        let result = driver
            .advance_authentication(
                &mut client,
                PasswordMessageFamily::Password(PasswordMessage::new("wrong".to_owned())),
            )
            .await;

        assert!(matches!(result, Err(PgWireError::InvalidPassword(_))));
        assert!(matches!(
            client.state(),
            PgWireConnectionState::AuthenticationInProgress
        ));
    }

    #[derive(Debug)]
    struct TrustedUser {
        name: String,
    }

    struct TrustMechanismWithIdentity;

    #[async_trait]
    impl AuthMechanism<TrustedUser> for TrustMechanismWithIdentity {
        async fn begin(
            &mut self,
            _client: &(dyn ClientInfo + Send + Sync),
        ) -> PgWireResult<AuthState<TrustedUser>> {
            Ok(AuthState::Ok {
                final_message: None,
                identity: Some(TrustedUser {
                    name: "alice".to_owned(),
                }),
            })
        }

        async fn next(
            &mut self,
            _client: &(dyn ClientInfo + Send + Sync),
            _message: PasswordMessageFamily,
        ) -> PgWireResult<AuthState<TrustedUser>> {
            Err(PgWireError::NoAuthenticationInProgress)
        }
    }

    #[tokio::test]
    async fn test_driver_completed_identity() {
        let driver = AuthDriver::new(DefaultServerParameterProvider::default());
        let mut client = TestClient::new(None);

        let outcome = driver
            .begin_authentication(&mut client, Box::new(TrustMechanismWithIdentity))
            .await
            .unwrap();

        let AuthOutcome::Authenticated {
            identity: Some(user),
            final_message,
        } = outcome
        else {
            panic!("expected Authenticated with identity, got {outcome:?}")
        };
        assert_eq!(user.name, "alice");

        assert!(matches!(
            client.state(),
            PgWireConnectionState::AuthenticationInProgress
        ));
        driver
            .complete_authentication(&mut client, final_message)
            .await
            .unwrap();
        assert!(matches!(
            client.state(),
            PgWireConnectionState::ReadyForQuery
        ));
    }

    #[tokio::test]
    async fn test_driver_instant_ok_mechanism() {
        let driver = AuthDriver::new(DefaultServerParameterProvider::default());
        let mut client = TestClient::new(None);

        let outcome = driver
            .begin_authentication(&mut client, Box::new(TrustMechanism))
            .await
            .unwrap();
        let AuthOutcome::Authenticated { final_message, .. } = outcome else {
            panic!("expected Authenticated, got {outcome:?}")
        };

        driver
            .complete_authentication(&mut client, final_message)
            .await
            .unwrap();

        assert!(matches!(
            client.state(),
            PgWireConnectionState::ReadyForQuery
        ));
        assert!(matches!(
            client.sent.first(),
            Some(PgWireBackendMessage::Authentication(Authentication::Ok))
        ));
    }

    #[tokio::test]
    async fn test_driver_veto_after_authenticated() {
        let driver = AuthDriver::new(DefaultServerParameterProvider::default());
        let mut client = TestClient::new(Some("mallory"));

        let outcome = driver
            .begin_authentication(&mut client, Box::new(TrustMechanismWithIdentity))
            .await
            .unwrap();
        let AuthOutcome::Authenticated { .. } = outcome else {
            panic!("expected Authenticated, got {outcome:?}")
        };

        // the handler vetoes: no complete_authentication, return an error
        // instead. Nothing terminal has been sent; the connection stays in
        // the authentication phase for the server's error handling.
        assert!(matches!(
            client.state(),
            PgWireConnectionState::AuthenticationInProgress
        ));
        assert!(!client.sent.iter().any(|msg| {
            matches!(
                msg,
                PgWireBackendMessage::Authentication(Authentication::Ok)
                    | PgWireBackendMessage::ReadyForQuery(_)
            )
        }));
    }

    #[tokio::test]
    async fn test_driver_instant_failure_mechanism() {
        let driver = AuthDriver::new(DefaultServerParameterProvider::default());
        let mut client = TestClient::new(None);

        let result = driver
            .begin_authentication(&mut client, Box::new(RejectMechanism))
            .await;

        assert!(matches!(result, Err(PgWireError::UserNameRequired)));
    }

    #[tokio::test]
    async fn test_driver_password_message_without_mechanism() {
        let driver: AuthDriver<DefaultServerParameterProvider> =
            AuthDriver::new(DefaultServerParameterProvider::default());
        let mut client = TestClient::new(None);

        let result = driver
            .advance_authentication(
                &mut client,
                PasswordMessageFamily::Password(PasswordMessage::new("secret".to_owned())),
            )
            .await;

        assert!(matches!(
            result,
            Err(PgWireError::NoAuthenticationInProgress)
        ));
    }

    /// A custom StartupHandler built on an embedded [`AuthDriver`], with
    /// per-connection mechanism selection and pre-auth validation — the
    /// pattern recommended for database servers.
    struct CustomHandler {
        driver: AuthDriver<DefaultServerParameterProvider>,
        cleartext: Arc<dyn AuthMechanismFactory>,
    }

    #[async_trait]
    impl StartupHandler for CustomHandler {
        async fn on_startup<C>(
            &self,
            client: &mut C,
            message: PgWireFrontendMessage,
        ) -> PgWireResult<()>
        where
            C: ClientInfo + futures::sink::Sink<PgWireBackendMessage> + Unpin + Send + Sync,
            C::Error: std::fmt::Debug,
            PgWireError: From<<C as futures::sink::Sink<PgWireBackendMessage>>::Error>,
        {
            match message {
                PgWireFrontendMessage::Startup(ref startup) => {
                    crate::api::auth::protocol_negotiation(client, startup).await?;
                    crate::api::auth::save_startup_parameters_to_metadata(client, startup);

                    // custom pre-auth validation
                    if client.metadata().get("database").is_none() {
                        return Err(PgWireError::InvalidStartupMessage);
                    }

                    // per-connection mechanism selection
                    let mechanism = if client.metadata().get("user").is_some_and(|u| u == "trust") {
                        Box::new(TrustMechanism)
                    } else {
                        self.cleartext.create()
                    };
                    match self.driver.begin_authentication(client, mechanism).await? {
                        AuthOutcome::InProgress => Ok(()),
                        AuthOutcome::Authenticated { final_message, .. } => {
                            self.driver
                                .complete_authentication(client, final_message)
                                .await
                        }
                    }
                }
                PgWireFrontendMessage::PasswordMessageFamily(message) => {
                    match self.driver.advance_authentication(client, message).await? {
                        AuthOutcome::InProgress => Ok(()),
                        AuthOutcome::Authenticated { final_message, .. } => {
                            self.driver
                                .complete_authentication(client, final_message)
                                .await
                        }
                    }
                }
                _ => Ok(()),
            }
        }
    }

    #[tokio::test]
    async fn test_custom_handler_with_driver() {
        let handler = CustomHandler {
            driver: AuthDriver::new(DefaultServerParameterProvider::default()),
            cleartext: Arc::new(CleartextPasswordAuth::new(Arc::new(FixedAuthSource {
                password: "secret".to_owned(),
            }))),
        };

        // "trust" user: instant auth via custom mechanism selection
        let mut client = TestClient::new(Some("trust"));
        client.metadata_mut().remove("user");
        client
            .metadata_mut()
            .insert("user".to_owned(), "trust".to_owned());
        handler
            .on_startup(&mut client, startup_message("trust"))
            .await
            .unwrap();
        assert!(matches!(
            client.state(),
            PgWireConnectionState::ReadyForQuery
        ));

        // other users: cleartext via driver
        let mut client = TestClient::new(Some("alice"));
        handler
            .on_startup(&mut client, startup_message("alice"))
            .await
            .unwrap();
        assert!(matches!(
            client.state(),
            PgWireConnectionState::AuthenticationInProgress
        ));
        handler
            .on_startup(
                &mut client,
                PgWireFrontendMessage::PasswordMessageFamily(PasswordMessageFamily::Password(
                    PasswordMessage::new("secret".to_owned()),
                )),
            )
            .await
            .unwrap();
        assert!(matches!(
            client.state(),
            PgWireConnectionState::ReadyForQuery
        ));
    }

    #[cfg(all(any(feature = "_aws-lc-rs", feature = "_ring"), feature = "client-api"))]
    mod scram_tests {
        use super::*;

        use crate::api::auth::sasl::scram::ScramAuth;
        use crate::api::auth::sasl::scram::ScramClientAuth;
        use crate::api::auth::sasl::scram::{ScramSecret, gen_salted_password};
        use crate::messages::startup::{SASLInitialResponse, SASLResponse};

        const SALT: &[u8] = b"0123456789abcdef";
        const ITERATIONS: usize = 4096;

        /// A source that only stores a postgres-style verifier.
        #[derive(Debug)]
        struct VerifierAuthSource {
            password: String,
        }

        #[async_trait]
        impl AuthSource for VerifierAuthSource {
            async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
                Err(PgWireError::ApiError("must not be called".into()))
            }

            async fn get_scram_secret(
                &self,
                _login: &LoginInfo,
            ) -> PgWireResult<(crate::api::auth::sasl::scram::ScramSecret, Option<()>)>
            {
                let salted_password = gen_salted_password(&self.password, SALT, ITERATIONS);
                Ok((
                    ScramSecret::verifier_from_salted_password(
                        SALT.to_vec(),
                        salted_password,
                        ITERATIONS,
                    ),
                    None,
                ))
            }
        }

        #[tokio::test]
        async fn test_driver_scram_with_verifier_secret() {
            let scram = ScramAuth::new(Arc::new(VerifierAuthSource {
                password: "password".to_owned(),
            }));
            let driver = AuthDriver::new(DefaultServerParameterProvider::default());
            let mut client = TestClient::new(Some("alice"));

            let scram_client = ScramClientAuth::new("alice".to_owned(), "password".to_owned());

            driver
                .begin_authentication(&mut client, scram.create())
                .await
                .unwrap();
            assert!(matches!(
                client.state(),
                PgWireConnectionState::AuthenticationInProgress
            ));

            // step 1: SASL advertisement -> client first
            assert!(matches!(
                client.sent.last(),
                Some(PgWireBackendMessage::Authentication(Authentication::SASL(
                    _
                )))
            ));
            let (client_first, scram_client) = scram_client.build_client_first().unwrap();
            driver
                .advance_authentication(
                    &mut client,
                    PasswordMessageFamily::SASLInitialResponse(SASLInitialResponse::new(
                        "SCRAM-SHA-256".to_owned(),
                        Some(client_first.into()),
                    )),
                )
                .await
                .unwrap();

            // step 2: server first -> client final
            let server_first = match client.sent.last() {
                Some(PgWireBackendMessage::Authentication(Authentication::SASLContinue(data))) => {
                    data.clone()
                }
                other => panic!("unexpected message: {other:?}"),
            };
            let (client_final, scram_client) =
                scram_client.build_client_final(&server_first).unwrap();
            let outcome = driver
                .advance_authentication(
                    &mut client,
                    PasswordMessageFamily::SASLResponse(SASLResponse::new(client_final.into())),
                )
                .await
                .unwrap();
            let AuthOutcome::Authenticated {
                identity: _,
                final_message,
            } = outcome
            else {
                panic!("expected Authenticated, got {outcome:?}")
            };
            driver
                .complete_authentication(&mut client, final_message)
                .await
                .unwrap();

            // step 3: server final -> verified, connection ready
            let server_final = client
                .sent
                .iter()
                .find_map(|msg| match msg {
                    PgWireBackendMessage::Authentication(Authentication::SASLFinal(data)) => {
                        Some(data.clone())
                    }
                    _ => None,
                })
                .expect("SASLFinal should have been sent");
            scram_client.verify_server_final(&server_final).unwrap();

            assert!(matches!(
                client.state(),
                PgWireConnectionState::ReadyForQuery
            ));
        }

        #[derive(Debug, Clone, PartialEq)]
        struct ScramUser {
            name: String,
        }

        #[derive(Debug, Default)]
        struct IdentityScramSource;

        #[async_trait]
        impl AuthSource<ScramUser> for IdentityScramSource {
            async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
                Err(PgWireError::ApiError("must not be called".into()))
            }

            async fn get_scram_secret(
                &self,
                _login: &LoginInfo,
            ) -> PgWireResult<(
                crate::api::auth::sasl::scram::ScramSecret,
                Option<ScramUser>,
            )> {
                let salted_password = gen_salted_password("password", SALT, ITERATIONS);
                Ok((
                    ScramSecret::verifier_from_salted_password(
                        SALT.to_vec(),
                        salted_password,
                        ITERATIONS,
                    ),
                    Some(ScramUser {
                        name: "alice".to_owned(),
                    }),
                ))
            }
        }

        #[tokio::test]
        async fn test_driver_scram_identity() {
            let source = Arc::new(IdentityScramSource);
            let scram = ScramAuth::new(source.clone());
            let driver = AuthDriver::new(DefaultServerParameterProvider::default());
            let mut client = TestClient::new(Some("alice"));

            let scram_client = ScramClientAuth::new("alice".to_owned(), "password".to_owned());

            driver
                .begin_authentication(&mut client, scram.create())
                .await
                .unwrap();

            let (client_first, scram_client) = scram_client.build_client_first().unwrap();
            driver
                .advance_authentication(
                    &mut client,
                    PasswordMessageFamily::SASLInitialResponse(SASLInitialResponse::new(
                        "SCRAM-SHA-256".to_owned(),
                        Some(client_first.into()),
                    )),
                )
                .await
                .unwrap();
            let server_first = match client.sent.last() {
                Some(PgWireBackendMessage::Authentication(Authentication::SASLContinue(data))) => {
                    data.clone()
                }
                other => panic!("unexpected message: {other:?}"),
            };
            let (client_final, _) = scram_client.build_client_final(&server_first).unwrap();
            let outcome = driver
                .advance_authentication(
                    &mut client,
                    PasswordMessageFamily::SASLResponse(SASLResponse::new(client_final.into())),
                )
                .await
                .unwrap();

            let AuthOutcome::Authenticated {
                identity: Some(user),
                ..
            } = outcome
            else {
                panic!("expected Authenticated with identity, got {outcome:?}")
            };
            assert_eq!(user.name, "alice");
            drop(source);
        }

        #[tokio::test]
        async fn test_driver_cleartext_identity() {
            use crate::api::auth::cleartext::CleartextPasswordAuth;

            #[derive(Debug, Clone, PartialEq)]
            struct ClearUser {
                name: String,
            }

            #[derive(Debug, Default)]
            struct VerifyingSource;
            #[async_trait]
            impl AuthSource<ClearUser> for VerifyingSource {
                async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
                    Err(PgWireError::ApiError("must not be called".into()))
                }

                async fn verify_password(
                    &self,
                    login: &LoginInfo,
                    presented_password: &[u8],
                ) -> PgWireResult<Option<ClearUser>> {
                    if presented_password == b"pencil" {
                        Ok(Some(ClearUser {
                            name: login.user().unwrap_or_default().to_owned(),
                        }))
                    } else {
                        Err(PgWireError::InvalidPassword(
                            login.user().unwrap_or_default().to_owned(),
                        ))
                    }
                }
            }

            let source = Arc::new(VerifyingSource);
            let factory = CleartextPasswordAuth::new(source.clone());
            let driver = AuthDriver::new(DefaultServerParameterProvider::default());
            let mut client = TestClient::new(Some("alice"));

            driver
                .begin_authentication(&mut client, factory.create())
                .await
                .unwrap();
            let outcome = driver
                .advance_authentication(
                    &mut client,
                    PasswordMessageFamily::Password(PasswordMessage::new("pencil".to_owned())),
                )
                .await
                .unwrap();

            let AuthOutcome::Authenticated {
                identity: Some(user),
                final_message,
            } = outcome
            else {
                panic!("expected Authenticated with identity, got {outcome:?}")
            };
            assert_eq!(user.name, "alice");
            driver
                .complete_authentication(&mut client, final_message)
                .await
                .unwrap();
        }

        #[tokio::test]
        async fn test_driver_scram_wrong_password() {
            let scram = ScramAuth::new(Arc::new(VerifierAuthSource {
                password: "password".to_owned(),
            }));
            let driver = AuthDriver::new(DefaultServerParameterProvider::default());
            let mut client = TestClient::new(Some("alice"));

            let scram_client = ScramClientAuth::new("alice".to_owned(), "wrong".to_owned());

            driver
                .begin_authentication(&mut client, scram.create())
                .await
                .unwrap();

            let (client_first, scram_client) = scram_client.build_client_first().unwrap();
            driver
                .advance_authentication(
                    &mut client,
                    PasswordMessageFamily::SASLInitialResponse(SASLInitialResponse::new(
                        "SCRAM-SHA-256".to_owned(),
                        Some(client_first.into()),
                    )),
                )
                .await
                .unwrap();

            let server_first = match client.sent.last() {
                Some(PgWireBackendMessage::Authentication(Authentication::SASLContinue(data))) => {
                    data.clone()
                }
                other => panic!("unexpected message: {other:?}"),
            };
            let (client_final, _) = scram_client.build_client_final(&server_first).unwrap();
            let result = driver
                .advance_authentication(
                    &mut client,
                    PasswordMessageFamily::SASLResponse(SASLResponse::new(client_final.into())),
                )
                .await;

            assert!(matches!(result, Err(PgWireError::InvalidPassword(_))));
        }
    }
}
