//! CancelRequest: the open connection a (process id, secret key) pair
//! names, and stopping its running statement. The sessions are listed in
//! the SQL engine (`sql::backends`), where pg_cancel_backend and
//! pg_terminate_backend find them too.
//!
//! A connection is listed from its first statement (pgwire gives it its
//! key at start-up, which runs in pgwire) until it ends; a cancel before
//! its first statement has nothing to stop.

use crate::sql::SqlEngine;
use async_trait::async_trait;
use pgwire::api::cancel::CancelHandler;
use pgwire::messages::cancel::CancelRequest;
use std::sync::Arc;

/// Answers CancelRequests from the engine's list of sessions.
pub struct CancelRequests(pub Arc<SqlEngine>);

#[async_trait]
impl CancelHandler for CancelRequests {
    async fn on_cancel_request(&self, request: CancelRequest) {
        let secret = request.secret_key.to_bytes();
        self.0.backends().cancel_request(request.pid, &secret);
    }
}
