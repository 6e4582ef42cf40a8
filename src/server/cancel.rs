//! CancelRequest: the open connection a (process id, secret key) pair
//! names, and stopping its running statement.
//!
//! A connection is listed from its first statement (pgwire gives it its
//! key at start-up, which runs in pgwire) until it ends; a cancel before
//! its first statement has nothing to stop.

use crate::sql::Interrupt;
use async_trait::async_trait;
use parking_lot::Mutex;
use pgwire::api::cancel::CancelHandler;
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::startup::SecretKey;
use std::collections::HashMap;
use std::sync::Arc;

/// The open connections by their process id.
#[derive(Default)]
pub struct Backends {
    by_pid: Mutex<HashMap<i32, (SecretKey, Arc<Interrupt>)>>,
}

impl Backends {
    pub fn enlist(&self, pid: i32, key: SecretKey, interrupt: Arc<Interrupt>) {
        self.by_pid.lock().insert(pid, (key, interrupt));
    }

    pub fn remove(&self, pid: i32) {
        self.by_pid.lock().remove(&pid);
    }
}

#[async_trait]
impl CancelHandler for Backends {
    async fn on_cancel_request(&self, request: CancelRequest) {
        // A wrong key is ignored without a word, as PostgreSQL ignores it.
        if let Some((key, interrupt)) = self.by_pid.lock().get(&request.pid) {
            if key.eq_value(&request.secret_key) {
                interrupt.cancel();
            }
        }
    }
}
