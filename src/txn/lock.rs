//! Row locks: taken when a transaction first writes (or reads for update) a
//! row, held until it commits or aborts.
//!
//! Rules:
//! - Exclusive locks only; a transaction re-locking its own row is free.
//! - Wait-die: an older transaction (smaller xid) waits for a younger
//!   holder; a younger one asking for a row an older one holds dies at once
//!   with [`Error::Deadlock`]. Waits only ever go from older to younger, so
//!   no cycle can form and no detector is needed.
//! - The table is sharded by key hash so unrelated rows never share a mutex
//!   for long.

use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::hash::BuildHasher;

const SHARDS: usize = 64;

/// A row: the table's file id and the key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowId {
    pub table: u32,
    pub key: Vec<u8>,
}

#[derive(Default)]
struct Shard {
    /// Row -> holding transaction.
    held: Mutex<HashMap<RowId, u64>>,
    /// Signalled when a lock in this shard is released.
    released: Condvar,
}

/// The row lock table.
pub struct LockManager {
    shards: Vec<Shard>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for LockManager {
    fn default() -> Self {
        LockManager {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            hasher: Default::default(),
        }
    }
}

impl LockManager {
    fn shard(&self, row: &RowId) -> &Shard {
        &self.shards[self.hasher.hash_one(row) as usize % SHARDS]
    }

    /// Locks `row` for transaction `xid`. Returns `Ok(true)` if newly taken,
    /// `Ok(false)` if `xid` already held it, and `Err(Deadlock)` if `xid` is
    /// younger than the holder (wait-die).
    pub fn lock(&self, xid: u64, row: &RowId) -> Result<bool> {
        let shard = self.shard(row);
        let mut held = shard.held.lock();
        loop {
            match held.get(row) {
                None => {
                    held.insert(row.clone(), xid);
                    return Ok(true);
                }
                Some(&holder) if holder == xid => return Ok(false),
                Some(&holder) if xid > holder => {
                    return Err(Error::Deadlock { xid, holder });
                }
                Some(_) => shard.released.wait(&mut held),
            }
        }
    }

    /// Releases every lock in `rows` held by `xid`.
    pub fn release_all<'a>(&self, xid: u64, rows: impl IntoIterator<Item = &'a RowId>) {
        for row in rows {
            let shard = self.shard(row);
            let mut held = shard.held.lock();
            if held.get(row) == Some(&xid) {
                held.remove(row);
                shard.released.notify_all();
            }
        }
    }

    /// Number of rows locked (for tests and statistics).
    pub fn locked_rows(&self) -> usize {
        self.shards.iter().map(|s| s.held.lock().len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn row(k: &str) -> RowId {
        RowId {
            table: 1,
            key: k.as_bytes().to_vec(),
        }
    }

    #[test]
    fn reentrant_and_released() {
        let lm = LockManager::default();
        assert!(lm.lock(5, &row("a")).unwrap());
        assert!(!lm.lock(5, &row("a")).unwrap());
        assert_eq!(lm.locked_rows(), 1);
        lm.release_all(5, [&row("a")]);
        assert_eq!(lm.locked_rows(), 0);
    }

    #[test]
    fn younger_dies_older_waits() {
        let lm = Arc::new(LockManager::default());
        lm.lock(10, &row("a")).unwrap();
        // Younger (11) asking for a row held by older (10): dies.
        let e = lm.lock(11, &row("a")).unwrap_err();
        assert!(e.is_retryable(), "{e}");
        // Older (9) waits until 10 releases.
        let lm2 = lm.clone();
        let waiter = std::thread::spawn(move || lm2.lock(9, &row("a")).unwrap());
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished());
        lm.release_all(10, [&row("a")]);
        assert!(waiter.join().unwrap());
    }
}
