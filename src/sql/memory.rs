//! Memory that sessions hold between messages, bounded per connection
//! and for the whole server.
//!
//! Rules:
//! - What a connection holds past one message is charged: the prepared
//!   statements and portals (with their parameters) the protocol keeps,
//!   and each open result's buffered rows (a sort's rows in memory, up to
//!   `work_mem` each before they spill to disk: `sort`).
//! - A charge that would take a connection past `max_connection_memory`,
//!   or all connections together past `max_server_memory`, is refused
//!   with 53200 (out of memory), as PostgreSQL answers a palloc it
//!   cannot serve: the statement fails, the server and every other
//!   session go on.
//! - A charge is given back when its `Charge` is dropped (a sort ends, a
//!   result closes) or when the protocol's holdings shrink.

use super::types::{codes, SqlError};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// The server-wide total, shared by every connection.
#[derive(Debug)]
pub struct ServerMemory {
    limit: usize,
    used: AtomicUsize,
}

impl ServerMemory {
    pub fn new(limit: usize) -> Arc<ServerMemory> {
        Arc::new(ServerMemory {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes charged now, by every connection.
    pub fn used(&self) -> usize {
        self.used.load(SeqCst)
    }

    fn take(&self, n: usize) -> bool {
        self.used
            .fetch_update(SeqCst, SeqCst, |u| {
                u.checked_add(n).filter(|&t| t <= self.limit)
            })
            .is_ok()
    }

    fn give(&self, n: usize) {
        let before = self.used.fetch_sub(n, SeqCst);
        debug_assert!(before >= n, "more memory given back than taken");
    }
}

/// One connection's account.
#[derive(Debug)]
pub struct ConnectionMemory {
    server: Arc<ServerMemory>,
    limit: usize,
    used: Mutex<usize>,
    /// The part of `used` the protocol's statements and portals hold.
    protocol: Mutex<usize>,
}

/// Bytes charged to a connection until dropped.
#[derive(Debug)]
pub struct Charge {
    account: Arc<ConnectionMemory>,
    bytes: usize,
}

fn out_of_memory(what: &str, bytes: usize, limit_name: &str, limit: usize) -> SqlError {
    SqlError::new(
        codes::OUT_OF_MEMORY,
        format!("out of memory: {what} needs {bytes} more bytes past {limit_name} ({limit} bytes)"),
    )
}

impl ConnectionMemory {
    pub fn new(server: &Arc<ServerMemory>, limit: usize) -> Arc<ConnectionMemory> {
        Arc::new(ConnectionMemory {
            server: server.clone(),
            limit,
            used: Mutex::new(0),
            protocol: Mutex::new(0),
        })
    }

    /// Bytes this connection holds now.
    #[cfg(test)]
    pub fn used(&self) -> usize {
        *self.used.lock()
    }

    /// Takes `n` bytes, or refuses with 53200 naming `what`.
    fn take(&self, n: usize, what: &str) -> Result<(), SqlError> {
        let mut used = self.used.lock();
        if used.saturating_add(n) > self.limit {
            return Err(out_of_memory(what, n, "max_connection_memory", self.limit));
        }
        if !self.server.take(n) {
            return Err(out_of_memory(
                what,
                n,
                "max_server_memory",
                self.server.limit,
            ));
        }
        *used += n;
        Ok(())
    }

    fn give(&self, n: usize) {
        let mut used = self.used.lock();
        debug_assert!(*used >= n, "more memory given back than taken");
        *used -= n;
        self.server.give(n);
    }

    /// A new, empty charge against this connection.
    pub fn charge(self: &Arc<Self>) -> Charge {
        Charge {
            account: self.clone(),
            bytes: 0,
        }
    }

    /// Whether the protocol may keep `incoming` more bytes (a Parse's
    /// text, a Bind's parameters) beside the `held` it keeps now: the
    /// account is brought to `held + incoming` or the message refused.
    pub fn admit_protocol(&self, held: usize, incoming: usize, what: &str) -> Result<(), SqlError> {
        let mut protocol = self.protocol.lock();
        let want = held.saturating_add(incoming);
        if want > *protocol {
            self.take(want - *protocol, what)?;
        } else {
            self.give(*protocol - want);
        }
        *protocol = want;
        Ok(())
    }

    /// The protocol now keeps `held` bytes (after a Close, a Sync, the end
    /// of a transaction, or the connection's end with 0).
    pub fn protocol_holds(&self, held: usize) {
        let mut protocol = self.protocol.lock();
        if held < *protocol {
            self.give(*protocol - held);
            *protocol = held;
        }
    }
}

impl Charge {
    /// Grows the charge by `n` bytes, or refuses with 53200 naming `what`.
    pub fn grow(&mut self, n: usize, what: &str) -> Result<(), SqlError> {
        self.account.take(n, what)?;
        self.bytes += n;
        Ok(())
    }

    /// Bytes charged.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gives all of it back (the rows it counted are gone).
    pub fn clear(&mut self) {
        self.account.give(self.bytes);
        self.bytes = 0;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_and_the_server_are_each_bounded_and_charges_come_back() {
        let server = ServerMemory::new(1000);
        let a = ConnectionMemory::new(&server, 600);
        let b = ConnectionMemory::new(&server, 600);
        let mut ca = a.charge();
        ca.grow(500, "a sort").unwrap();
        // Past the connection's own limit.
        let e = ca.grow(200, "a sort").unwrap_err();
        assert_eq!(e.code, "53200");
        assert!(e.message.contains("max_connection_memory"), "{}", e.message);
        // Past the server's, though within b's own.
        a.admit_protocol(0, 100, "a Bind").unwrap();
        let e = b.admit_protocol(0, 450, "a Bind").unwrap_err();
        assert!(e.message.contains("max_server_memory"), "{}", e.message);
        assert_eq!(server.used(), 600);
        drop(ca);
        assert_eq!(server.used(), 100);
        b.admit_protocol(0, 450, "a Bind").unwrap();
        // The protocol holding less gives the difference back.
        b.protocol_holds(50);
        a.protocol_holds(0);
        assert_eq!((a.used(), b.used(), server.used()), (0, 50, 50));
    }
}
