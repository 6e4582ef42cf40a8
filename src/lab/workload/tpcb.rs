//! pgbench's built-in TPC-B-like script on the embedded engine.
//!
//! Tables (pgbench_*): per scale unit 1 branch, 10 tellers and (by default)
//! 100,000 accounts; keys are 1-based ids as u64 big-endian. Accounts,
//! tellers and branches share one 100-byte row shape, like
//! pgbench_accounts (aid int, bid int, abalance int, filler char(84)):
//!
//! ```text
//! [id u64 LE][bid u64 LE][balance i64 LE][filler: 76 spaces]
//! ```
//!
//! History rows are `[tid][bid][aid][delta][time]` (5 x 8 bytes LE) under
//! an ascending counter key, so inserts take the right-edge split.
//!
//! One transaction, as pgbench's script: `abalance += delta` on a random
//! account, read it back, `tbalance += delta` on a random teller,
//! `bbalance += delta` on a random branch, insert a history row. Invariant:
//! sum(abalance) == sum(tbalance) == sum(bbalance) == sum(history delta).

use super::{
    in_transaction, max_u64_key, read_i64, scan_all, Outcome, Rng, Scale, Tables, Workload,
};
use crate::db::{key_u64, Database, Table};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const ACCOUNTS: &str = "pgbench_accounts";
pub const TELLERS: &str = "pgbench_tellers";
pub const BRANCHES: &str = "pgbench_branches";
pub const HISTORY: &str = "pgbench_history";

const TELLERS_PER_BRANCH: u64 = 10;
const ROW_LEN: usize = 100;
const BALANCE_AT: usize = 16;
const HISTORY_DELTA_AT: usize = 24;

/// The TPC-B-like workload at a scale.
#[derive(Clone, Debug)]
pub struct Tpcb {
    branches: u64,
    tellers: u64,
    accounts: u64,
    accounts_per_branch: u64,
}

/// A 100-byte account/teller/branch row with balance 0 (pgbench's initial).
fn balance_row(id: u64, bid: u64, balance: i64) -> [u8; ROW_LEN] {
    let mut row = [b' '; ROW_LEN];
    row[0..8].copy_from_slice(&id.to_le_bytes());
    row[8..16].copy_from_slice(&bid.to_le_bytes());
    row[BALANCE_AT..BALANCE_AT + 8].copy_from_slice(&balance.to_le_bytes());
    row
}

/// `balance += delta` on the row `id` of `table`, locked first so no
/// update is lost.
fn add_balance(tx: &mut crate::Transaction<'_>, table: &Table, id: u64, delta: i64) -> Result<()> {
    let key = key_u64(id);
    let mut row = tx
        .get_for_update(table, &key)?
        .ok_or_else(|| missing(table, id))?;
    let balance = read_i64(&row, BALANCE_AT, table)?;
    row[BALANCE_AT..BALANCE_AT + 8].copy_from_slice(&(balance + delta).to_le_bytes());
    tx.update(table, &key, &row)?;
    Ok(())
}

fn missing(table: &Table, id: u64) -> Error {
    Error::Invalid(format!("row {id} of table {:?} is missing", table.name))
}

impl Tpcb {
    pub fn new(scale: &Scale) -> Result<Tpcb> {
        if scale.scale == 0 || scale.accounts_per_branch == 0 {
            return Err(Error::Invalid(format!(
                "tpcb needs a scale and accounts per branch of at least 1 (got {} and {})",
                scale.scale, scale.accounts_per_branch
            )));
        }
        Ok(Tpcb {
            branches: scale.scale,
            tellers: scale.scale * TELLERS_PER_BRANCH,
            accounts: scale.scale * scale.accounts_per_branch,
            accounts_per_branch: scale.accounts_per_branch,
        })
    }

    /// Sum of the balances of a table, and of the deltas of history.
    fn sum(&self, db: &Database, table: &Table, at: usize) -> Result<i64> {
        let mut sum = 0i64;
        scan_all(db, table, |_, v| {
            sum += read_i64(v, at, table)?;
            Ok(())
        })?;
        Ok(sum)
    }
}

impl Workload for Tpcb {
    fn name(&self) -> &'static str {
        "tpcb"
    }

    fn writes(&self) -> bool {
        true
    }

    fn data_bytes(&self) -> u64 {
        (self.accounts + self.tellers + self.branches) * (8 + ROW_LEN as u64)
    }

    fn load(&self, db: &Database) -> Result<()> {
        let branches = db.create_table(BRANCHES)?;
        let tellers = db.create_table(TELLERS)?;
        let accounts = db.create_table(ACCOUNTS)?;
        db.create_table(HISTORY)?;
        db.bulk_load(
            &branches,
            (1..=self.branches).map(|b| (key_u64(b), balance_row(b, b, 0))),
        )?;
        db.bulk_load(
            &tellers,
            (1..=self.tellers).map(|t| {
                let bid = (t - 1) / TELLERS_PER_BRANCH + 1;
                (key_u64(t), balance_row(t, bid, 0))
            }),
        )?;
        // In key order from one thread, so the right-edge split leaves
        // full pages, as pgbench's COPY does.
        let per = self.accounts_per_branch;
        db.bulk_load(
            &accounts,
            (1..=self.accounts).map(|a| (key_u64(a), balance_row(a, (a - 1) / per + 1, 0))),
        )?;
        Ok(())
    }

    fn tables(&self, db: &Database) -> Result<Tables> {
        let history = db.table(HISTORY)?;
        // Past every history key already there (a database reused after a
        // run, or reopened after a crash).
        let next = max_u64_key(db, &history)? + 1;
        Ok(Tables {
            tables: vec![
                db.table(ACCOUNTS)?,
                db.table(TELLERS)?,
                db.table(BRANCHES)?,
                history,
            ],
            next_id: AtomicU64::new(next),
        })
    }

    fn transaction(
        &self,
        db: &Database,
        tables: &Tables,
        rng: &mut Rng,
        _client: usize,
    ) -> Result<Outcome> {
        let [accounts, tellers, branches, history] = &tables.tables[..] else {
            return Err(Error::Invalid("tpcb needs its four tables".into()));
        };
        // As pgbench: each id drawn on its own (the teller's and account's
        // branch need not be the branch updated).
        let aid = rng.below(self.accounts) + 1;
        let tid = rng.below(self.tellers) + 1;
        let bid = rng.below(self.branches) + 1;
        let delta = rng.range_i64(-5000, 5000);
        in_transaction(db, |tx| {
            add_balance(tx, accounts, aid, delta)?;
            let row = tx
                .get(accounts, &key_u64(aid))?
                .ok_or_else(|| missing(accounts, aid))?;
            std::hint::black_box(read_i64(&row, BALANCE_AT, accounts)?);
            add_balance(tx, tellers, tid, delta)?;
            add_balance(tx, branches, bid, delta)?;
            let time = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros() as i64)
                .unwrap_or(0);
            let mut row = [0u8; 40];
            for (i, v) in [tid as i64, bid as i64, aid as i64, delta, time]
                .into_iter()
                .enumerate()
            {
                row[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
            }
            let id = tables.next_id.fetch_add(1, Relaxed);
            tx.insert(history, &key_u64(id), &row)
        })
    }

    fn check(&self, db: &Database) -> Result<()> {
        let a = self.sum(db, &db.table(ACCOUNTS)?, BALANCE_AT)?;
        let t = self.sum(db, &db.table(TELLERS)?, BALANCE_AT)?;
        let b = self.sum(db, &db.table(BRANCHES)?, BALANCE_AT)?;
        let h = self.sum(db, &db.table(HISTORY)?, HISTORY_DELTA_AT)?;
        if a == t && t == b && b == h {
            Ok(())
        } else {
            Err(Error::Invalid(format!(
                "tpcb invariant broken: sum of account balances {a}, teller balances {t}, \
                 branch balances {b}, history deltas {h} (all must be equal)"
            )))
        }
    }
}
