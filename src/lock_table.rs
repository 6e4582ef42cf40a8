//! Row locks: taken when a transaction first writes (or reads for update) a
//! row, held until it commits or aborts.
//!
//! Rules:
//! - Exclusive locks only; a transaction re-locking its own row is free.
//! - A transaction asking for a row another holds waits, as in PostgreSQL
//!   and InnoDB. After waiting `deadlock_timeout` it checks the waits-for
//!   graph (each waiter waits for one holder); if the chain of holders
//!   leads back to itself, the wait would last forever: it leaves the
//!   graph and gets [`Error::Deadlock`], so exactly one transaction of the
//!   cycle ends. Otherwise it waits on, checking again each timeout (a
//!   holder it waits for may change).
//! - Wait-die (a younger transaction dying at once) was replaced: on a hot
//!   row it threw away half of all attempts, and a retry, younger still,
//!   could starve.
//! - A waiter given a `Stop` looks at it every `STOP_POLL` and leaves the
//!   graph with [`Error::LockWaitInterrupted`] once it says stop, so a
//!   CancelRequest or statement_timeout ends a wait as PostgreSQL's do.
//! - Lock order: a shard's mutex, then the graph's; never the reverse.
//! - The table is sharded by key hash so unrelated rows never share a mutex
//!   for long.
//! - A transaction whose write set spills to disk (txn/spill.rs) stops
//!   locking rows one by one: it locks each table it writes whole
//!   ([`LockManager::lock_table`], lock escalation as in SQL Server and
//!   DB2), so a load of any size holds a lock per table, not per row. A
//!   table lock waits until no other transaction holds a row of the table;
//!   while it is held, another transaction's row lock on the table waits
//!   for its holder (the same waits-for graph, the same deadlock check).
//!   Readers take no locks, so they never wait for it.
//! - A row lock looks at the table locks only when one is held anywhere
//!   (one atomic load otherwise), under its shard's mutex: a table lock
//!   is recorded before its taker scans the shards, so no row lock taken
//!   meanwhile escapes the scan.

use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

const SHARDS: usize = 64;

/// Whether the statement a waiter runs for must stop.
pub type Stop = std::sync::Arc<dyn Fn() -> bool + Send + Sync>;

/// How often a waiter with a `Stop` looks at it.
const STOP_POLL: Duration = Duration::from_millis(10);

/// How often a wait for a whole table looks again (such waits are rare:
/// a load that spilled, against the rows others hold).
const TABLE_LOCK_POLL: Duration = Duration::from_millis(1);

/// PostgreSQL's default `deadlock_timeout`.
pub const DEFAULT_DEADLOCK_TIMEOUT: Duration = Duration::from_secs(1);

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
    /// Waiting transaction -> the holder it waits for.
    waits_for: Mutex<HashMap<u64, u64>>,
    deadlock_timeout: Duration,
    /// Table (file id) -> the transaction holding it whole.
    tables: Mutex<HashMap<u32, u64>>,
    /// How many tables are locked whole: row locks skip `tables` at 0.
    table_locks: AtomicUsize,
}

impl Default for LockManager {
    fn default() -> Self {
        LockManager::new(DEFAULT_DEADLOCK_TIMEOUT)
    }
}

impl LockManager {
    /// A lock table whose waiters look for a deadlock after waiting
    /// `deadlock_timeout`.
    pub fn new(deadlock_timeout: Duration) -> Self {
        LockManager {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            hasher: Default::default(),
            waits_for: Mutex::new(HashMap::new()),
            deadlock_timeout,
            tables: Mutex::new(HashMap::new()),
            table_locks: AtomicUsize::new(0),
        }
    }

    /// The transaction holding `table` whole, if any (read under a
    /// shard's mutex by a row lock).
    fn table_holder(&self, table: u32) -> Option<u64> {
        if self.table_locks.load(SeqCst) == 0 {
            return None;
        }
        self.tables.lock().get(&table).copied()
    }

    fn shard(&self, row: &RowId) -> &Shard {
        &self.shards[self.hasher.hash_one(row) as usize % SHARDS]
    }

    /// Locks `row` for transaction `xid`, waiting while another holds it.
    /// Returns `Ok(true)` if newly taken, `Ok(false)` if `xid` already held
    /// it, `Err(Deadlock)` if waiting would close a cycle, and
    /// `Err(LockWaitInterrupted)` if `stop` says stop while it waits.
    pub fn lock(&self, xid: u64, row: &RowId, stop: Option<&Stop>) -> Result<bool> {
        let shard = self.shard(row);
        let mut held = shard.held.lock();
        let mut check_at = None;
        loop {
            let holder = match (self.table_holder(row.table), held.get(row)) {
                (Some(owner), _) if owner == xid => return Ok(false),
                (Some(owner), _) => owner,
                (None, None) => {
                    held.insert(row.clone(), xid);
                    if check_at.is_some() {
                        self.waits_for.lock().remove(&xid);
                    }
                    return Ok(true);
                }
                (None, Some(&holder)) if holder == xid => return Ok(false),
                (None, Some(&holder)) => holder,
            };
            let now = Instant::now();
            self.note_wait(xid, holder, now, &mut check_at)?;
            let mut until = check_at.expect("set above");
            if let Some(stop) = stop {
                if stop() {
                    self.waits_for.lock().remove(&xid);
                    return Err(Error::LockWaitInterrupted { xid });
                }
                until = until.min(now + STOP_POLL);
            }
            shard.released.wait_until(&mut held, until);
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

    /// Locks `table` whole for `xid`: waits while another transaction
    /// holds the table whole or any row of it, with the deadlock check
    /// and `stop` of [`LockManager::lock`]. Row locks `xid` holds on it
    /// stay (released at its end as usual). `Ok(false)`: `xid` held it
    /// already.
    pub fn lock_table(&self, xid: u64, table: u32, stop: Option<&Stop>) -> Result<bool> {
        let mut check_at = None;
        // First the table itself, against another whole-table holder.
        loop {
            let holder = {
                let mut tables = self.tables.lock();
                match tables.get(&table) {
                    Some(&h) if h == xid => return Ok(false),
                    Some(&h) => h,
                    None => {
                        tables.insert(table, xid);
                        self.table_locks.fetch_add(1, SeqCst);
                        break;
                    }
                }
            };
            self.wait_a_while(xid, holder, &mut check_at, stop)?;
        }
        // Then every row of it another transaction holds: new ones wait
        // for us now, so this ends when the holders end.
        loop {
            let Some(holder) = self.row_holder_other_than(xid, table) else {
                if check_at.is_some() {
                    self.waits_for.lock().remove(&xid);
                }
                return Ok(true);
            };
            if let Err(e) = self.wait_a_while(xid, holder, &mut check_at, stop) {
                self.release_tables(xid, [table]);
                return Err(e);
            }
        }
    }

    /// Releases the tables in `tables` that `xid` holds whole, waking
    /// every row lock that waited for them.
    pub fn release_tables(&self, xid: u64, tables: impl IntoIterator<Item = u32>) {
        let mut released = false;
        {
            let mut held = self.tables.lock();
            for t in tables {
                if held.get(&t) == Some(&xid) {
                    held.remove(&t);
                    self.table_locks.fetch_sub(1, SeqCst);
                    released = true;
                }
            }
        }
        if released {
            // Under each shard's mutex: a waiter checks, then sleeps, with
            // it held, so the wake-up cannot fall between the two.
            for shard in &self.shards {
                let _held = shard.held.lock();
                shard.released.notify_all();
            }
        }
    }

    /// A transaction other than `xid` holding a row of `table`.
    fn row_holder_other_than(&self, xid: u64, table: u32) -> Option<u64> {
        self.shards.iter().find_map(|s| {
            s.held
                .lock()
                .iter()
                .find(|(row, &h)| row.table == table && h != xid)
                .map(|(_, &h)| h)
        })
    }

    /// One poll of a table lock's wait for `holder`: the waits-for edge,
    /// the deadlock check when due, the stop, a short sleep.
    fn wait_a_while(
        &self,
        xid: u64,
        holder: u64,
        check_at: &mut Option<Instant>,
        stop: Option<&Stop>,
    ) -> Result<()> {
        self.note_wait(xid, holder, Instant::now(), check_at)?;
        if stop.is_some_and(|stop| stop()) {
            self.waits_for.lock().remove(&xid);
            return Err(Error::LockWaitInterrupted { xid });
        }
        std::thread::sleep(TABLE_LOCK_POLL);
        Ok(())
    }

    /// Records that `xid` waits for `holder`; once `check_at` has come,
    /// checks the graph (a cycle: `xid` leaves it with the deadlock) and
    /// sets the next check a `deadlock_timeout` later.
    fn note_wait(
        &self,
        xid: u64,
        holder: u64,
        now: Instant,
        check_at: &mut Option<Instant>,
    ) -> Result<()> {
        let at = *check_at.get_or_insert(now + self.deadlock_timeout);
        let mut graph = self.waits_for.lock();
        graph.insert(xid, holder);
        if now >= at {
            if closes_cycle(&graph, xid, holder) {
                graph.remove(&xid);
                return Err(Error::Deadlock { xid, holder });
            }
            *check_at = Some(now + self.deadlock_timeout);
        }
        Ok(())
    }

    /// The holder `xid` waits for, if it waits (for tests).
    pub fn waiting_for(&self, xid: u64) -> Option<u64> {
        self.waits_for.lock().get(&xid).copied()
    }

    /// Number of rows locked (for tests and statistics).
    pub fn locked_rows(&self) -> usize {
        self.shards.iter().map(|s| s.held.lock().len()).sum()
    }
}

/// True if following the holders from `holder` comes back to `xid`. An edge
/// may be stale (its waiter not yet awake to a release), but then it points
/// at a finished transaction, which waits for nothing: no false cycle.
fn closes_cycle(graph: &HashMap<u64, u64>, xid: u64, holder: u64) -> bool {
    let mut at = holder;
    // A cycle that does not pass through `xid` is its members' to find.
    for _ in 0..graph.len() {
        match graph.get(&at) {
            Some(&next) if next == xid => return true,
            Some(&next) => at = next,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(k: &str) -> RowId {
        RowId {
            table: 1,
            key: k.as_bytes().to_vec(),
        }
    }

    #[test]
    fn reentrant_and_released() {
        let lm = LockManager::default();
        assert!(lm.lock(5, &row("a"), None).unwrap());
        assert!(!lm.lock(5, &row("a"), None).unwrap());
        assert_eq!(lm.locked_rows(), 1);
        lm.release_all(5, [&row("a")]);
        assert_eq!(lm.locked_rows(), 0);
    }

    /// With wait-die, 11 died at once here; now it waits for 10.
    #[test]
    fn a_younger_transaction_waits_for_an_older_one() {
        let lm = LockManager::new(Duration::from_millis(10));
        lm.lock(10, &row("a"), None).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| lm.lock(11, &row("a"), None));
            // Released only once 11 is seen waiting (its graph edge).
            while lm.waiting_for(11) != Some(10) {
                std::thread::yield_now();
            }
            lm.release_all(10, [&row("a")]);
            assert!(waiter.join().unwrap().unwrap());
        });
        assert!(lm.waits_for.lock().is_empty());
    }

    /// A wait without a stop lasted until the holder ended (or the
    /// server's 10 s shutdown bound); told to stop, it ends at once.
    #[test]
    fn a_waiter_told_to_stop_leaves_the_wait_and_the_graph() {
        let lm = LockManager::default();
        lm.lock(10, &row("a"), None).unwrap();
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = flag.clone();
        let stop: Stop =
            std::sync::Arc::new(move || seen.load(std::sync::atomic::Ordering::SeqCst));
        std::thread::scope(|s| {
            let waiter = s.spawn(|| lm.lock(11, &row("a"), Some(&stop)));
            while lm.waiting_for(11) != Some(10) {
                std::thread::yield_now();
            }
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            let e = waiter.join().unwrap().unwrap_err();
            assert!(matches!(e, Error::LockWaitInterrupted { xid: 11 }), "{e}");
        });
        assert!(lm.waits_for.lock().is_empty());
        // 10 still holds its row.
        assert!(!lm.lock(10, &row("a"), None).unwrap());
    }

    /// A table lock waits for another's row of the table, and then a row
    /// lock on it waits for the table lock; rows of other tables never do.
    #[test]
    fn a_table_lock_and_row_locks_of_its_table_wait_for_each_other() {
        let lm = LockManager::new(Duration::from_millis(10));
        lm.lock(10, &row("a"), None).unwrap();
        std::thread::scope(|s| {
            let taker = s.spawn(|| lm.lock_table(11, 1, None));
            while lm.waiting_for(11) != Some(10) {
                std::thread::yield_now();
            }
            // 11 is recorded as the table's holder: 12 waits for it.
            let other_table = RowId {
                table: 2,
                key: b"a".to_vec(),
            };
            assert!(lm.lock(12, &other_table, None).unwrap());
            lm.release_all(10, [&row("a")]);
            taker.join().unwrap().unwrap();
            let waiter = s.spawn(|| lm.lock(12, &row("b"), None));
            while lm.waiting_for(12) != Some(11) {
                std::thread::yield_now();
            }
            // The holder's own row locks on it are free.
            assert!(!lm.lock(11, &row("c"), None).unwrap());
            lm.release_tables(11, [1]);
            assert!(waiter.join().unwrap().unwrap());
        });
        assert_eq!(lm.table_locks.load(SeqCst), 0);
        assert!(lm.waits_for.lock().is_empty());
    }

    /// Two table lockers each holding a row of the other's table: one
    /// gets the deadlock and lets go of its table; the other gets it.
    #[test]
    fn two_table_locks_over_each_others_rows_end_in_one_deadlock() {
        let lm = LockManager::new(Duration::from_millis(10));
        let row_of = |t: u32| RowId {
            table: t,
            key: b"k".to_vec(),
        };
        lm.lock(1, &row_of(2), None).unwrap();
        lm.lock(2, &row_of(1), None).unwrap();
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(|| {
                let r = lm.lock_table(1, 1, None);
                if r.is_err() {
                    lm.release_all(1, [&row_of(2)]);
                }
                r
            });
            let b = s.spawn(|| {
                let r = lm.lock_table(2, 2, None);
                if r.is_err() {
                    lm.release_all(2, [&row_of(1)]);
                }
                r
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        assert!(a.is_err() != b.is_err(), "{a:?} {b:?}");
        let e = a.err().or(b.err()).unwrap();
        assert!(matches!(e, Error::Deadlock { .. }), "{e}");
    }

    #[test]
    fn a_cycle_is_found_and_one_chain_is_not() {
        let graph: HashMap<u64, u64> = [(1, 2), (2, 3), (3, 1), (7, 8)].into();
        assert!(closes_cycle(&graph, 1, 2));
        assert!(!closes_cycle(&graph, 7, 8));
        // 9 waits for 1, which is in a cycle without 9: not 9's to end.
        assert!(!closes_cycle(&graph, 9, 1));
    }
}
