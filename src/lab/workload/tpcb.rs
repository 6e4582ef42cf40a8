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

use super::check::{CheckReport, Malformed};
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
/// The four tables, in the order [`check`] sums them.
pub const TABLES: [&str; 4] = [ACCOUNTS, TELLERS, BRANCHES, HISTORY];

const TELLERS_PER_BRANCH: u64 = 10;
const ROW_LEN: usize = 100;
const BALANCE_AT: usize = 16;
const HISTORY_DELTA_AT: usize = 24;
const HISTORY_LEN: usize = 40;

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
fn add_balance(
    tx: &mut crate::txn::Transaction<'_>,
    table: &Table,
    id: u64,
    delta: i64,
) -> Result<()> {
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
        check(db)?.into_result()
    }
}

/// Checks pgbench's invariant on the tables of `db`: every row well formed
/// (its length, and its id field equal to its key), and sum(abalance) ==
/// sum(tbalance) == sum(bbalance) == sum(history delta). Needs no scale:
/// it reads whatever rows are there.
pub fn check(db: &Database) -> Result<CheckReport> {
    let mut report = CheckReport::new("tpcb");
    let mut sums = Vec::with_capacity(TABLES.len());
    for name in TABLES {
        let table = match db.table(name) {
            Ok(t) => t,
            Err(Error::NoSuchTable(_)) => {
                report
                    .broken
                    .push(format!("tpcb invariant broken: table {name} is missing"));
                continue;
            }
            Err(e) => return Err(e),
        };
        let (what, len, at) = match name {
            HISTORY => ("history deltas", HISTORY_LEN, HISTORY_DELTA_AT),
            ACCOUNTS => ("account balances", ROW_LEN, BALANCE_AT),
            TELLERS => ("teller balances", ROW_LEN, BALANCE_AT),
            _ => ("branch balances", ROW_LEN, BALANCE_AT),
        };
        // i128: no sum of i64s overflows it, whatever the rows hold.
        let mut sum = 0i128;
        let mut bad = Malformed::default();
        let rows = scan_all(db, &table, |k, v| {
            let key = <[u8; 8]>::try_from(k).ok().map(u64::from_be_bytes);
            let id_field = v
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_le_bytes);
            if key.is_none() || v.len() != len {
                bad.add(|| format!("key {k:02x?}: {} bytes, not {len}", v.len()));
            } else if name != HISTORY && id_field != key {
                bad.add(|| format!("key {key:?} holds id {id_field:?}"));
            } else {
                sum += i128::from(read_i64(v, at, &table)?);
            }
            Ok(())
        })?;
        bad.report(&mut report, name);
        report
            .checked
            .push(format!("{name}: {rows} rows, sum of {what} {sum}"));
        sums.push((what, sum));
    }
    if sums.len() == TABLES.len() && sums.iter().any(|&(_, s)| s != sums[0].1) {
        let list: Vec<String> = sums.iter().map(|(w, s)| format!("{w} {s}")).collect();
        report.broken.push(format!(
            "tpcb invariant broken: the four sums differ ({}); all must be equal",
            list.join(", ")
        ));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;

    fn loaded(dir: &std::path::Path) -> (Tpcb, Database) {
        let scale = Scale {
            accounts_per_branch: 200,
            scale: 2,
            ..Scale::default()
        };
        let w = Tpcb::new(&scale).unwrap();
        let db = Database::create(dir, Options::default()).unwrap();
        w.load(&db).unwrap();
        (w, db)
    }

    #[test]
    fn check_sums_the_four_tables_and_names_a_broken_sum() {
        let dir = tempfile::tempdir().unwrap();
        let (w, db) = loaded(dir.path());
        let tables = w.tables(&db).unwrap();
        let mut rng = Rng::new(7, 0);
        for _ in 0..50 {
            assert_eq!(
                w.transaction(&db, &tables, &mut rng, 0).unwrap(),
                Outcome::Committed
            );
        }
        let report = check(&db).unwrap();
        assert!(report.ok(), "{report:?}");
        assert_eq!(report.checked.len(), 4);
        assert!(report.checked[0].starts_with("pgbench_accounts: 400 rows"));
        assert!(report.checked[1].starts_with("pgbench_tellers: 20 rows"));
        assert!(report.checked[3].starts_with("pgbench_history: 50 rows"));

        // One account changed alone: the sums no longer agree.
        let mut tx = db.begin();
        add_balance(&mut tx, &tables.tables[0], 3, 1).unwrap();
        tx.commit().unwrap();
        let report = check(&db).unwrap();
        assert_eq!(report.broken.len(), 1, "{report:?}");
        assert!(report.broken[0].contains("the four sums differ"));
        assert!(w
            .check(&db)
            .unwrap_err()
            .to_string()
            .contains("tpcb invariant"));

        // A short row is named, and a missing table too.
        let mut tx = db.begin();
        tx.update(&tables.tables[1], &key_u64(2), b"short").unwrap();
        tx.commit().unwrap();
        db.drop_table(BRANCHES).unwrap();
        let report = check(&db).unwrap();
        let all = report.broken.join("\n");
        assert!(all.contains("1 malformed rows in pgbench_tellers"), "{all}");
        assert!(all.contains("table pgbench_branches is missing"), "{all}");
    }
}
