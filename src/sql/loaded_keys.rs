//! The keys an autocommit bulk load inserted, batch by batch, kept so that
//! a failure undoes exactly its committed batches (bulk_undo.rs says why).
//! Here apart from the undo: the batched sink (exec.rs) keeps them, and
//! the undo deletes through a sink.
//!
//! The keys are bounded (`Limits::max_load_undo_bytes`): a client may
//! not make the server hold unbounded memory. A load past the bound fails
//! (54000) and is undone.

use super::types::{codes, SqlError};

pub struct LoadedKeys {
    /// The most key bytes (with a 4-byte length each) kept.
    max_bytes: usize,
    /// Each key as its length (u32, little-endian), then its bytes.
    bytes: Vec<u8>,
    /// The bytes of the keys whose batches committed. Those after are
    /// the open batch's: aborted with it, their keys may be another
    /// session's rows by the time the undo runs.
    committed: usize,
}

impl LoadedKeys {
    pub fn new(max_bytes: usize) -> LoadedKeys {
        LoadedKeys {
            max_bytes,
            bytes: Vec::new(),
            committed: 0,
        }
    }

    /// Keeps the key of a row the load inserts (before its batch commits).
    pub fn push(&mut self, table: &str, key: &[u8]) -> Result<(), SqlError> {
        if self.bytes.len() + 4 + key.len() > self.max_bytes {
            return Err(SqlError::new(
                codes::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "a load into empty table \"{table}\" outside a transaction block keeps its rows' keys \
                     to undo them on failure, and they passed {} bytes (max_load_undo_bytes): load it in a \
                     block that creates or truncates the table first, or in several statements",
                    self.max_bytes
                ),
            ));
        }
        self.bytes
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(key);
        Ok(())
    }

    /// The batch holding every key pushed so far committed.
    pub fn batch_committed(&mut self) {
        self.committed = self.bytes.len();
    }

    /// The keys of the committed batches.
    pub(super) fn keys(&self) -> impl Iterator<Item = &[u8]> {
        let bytes = &self.bytes[..self.committed];
        let mut at = 0;
        std::iter::from_fn(move || {
            let len = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize;
            let key = &bytes[at + 4..at + 4 + len];
            at += 4 + len;
            Some(key)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_back_in_order_and_the_bound_refuses() {
        let mut k = LoadedKeys::new(64);
        k.push("t", b"a").unwrap();
        k.push("t", b"").unwrap();
        k.batch_committed();
        k.push("t", b"ccc").unwrap();
        // The open batch's key is not undone: aborted, it may be anyone's.
        let got: Vec<&[u8]> = k.keys().collect();
        assert_eq!(got, [&b"a"[..], b""]);
        k.batch_committed();
        assert_eq!(k.keys().count(), 3);
        // Past the bound: refused before its row's batch can commit.
        let big = [0u8; 64];
        assert_eq!(
            k.push("t", &big).unwrap_err().code,
            codes::PROGRAM_LIMIT_EXCEEDED
        );
        k.batch_committed();
        assert_eq!(k.keys().count(), 3);
    }
}
