//! The seeds' workloads: pgbench's TPC-B-like transaction ([`tpcb`]),
//! sysbench's OLTP set ([`sysbench`]) and TPC-C ([`tpcc`], DBT-2's), run by
//! client threads against the embedded engine.
//!
//! Rules:
//! - Loading uses [`Database::bulk_load`] with deterministic data (fixed
//!   seeds), so every configuration of a comparison gets the same rows.
//! - A transaction either commits ([`Outcome::Committed`]), or hit a
//!   retryable error ([`Outcome::Retry`], a deadlock: the
//!   caller counts it and runs a new transaction, as sysbench does), or
//!   failed ([`Err`], which stops the run).
//! - Each client has its own [`Rng`]: no shared state on the hot path.
//! - Table handles are opened once per run ([`Workload::tables`]).

pub mod check;
pub mod sql_check;
pub mod sysbench;
pub mod tpcb;
pub mod tpcc;

use crate::db::{Database, Table};
use crate::error::{Error, Result};
use crate::rng::SplitMix64;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Sizes of the loaded data.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Scale {
    /// pgbench's scale factor: branches (each with 10 tellers).
    pub scale: u64,
    /// Accounts per branch: pgbench's 100,000; smaller only for tests.
    pub accounts_per_branch: u64,
    /// sysbench `--tables`.
    pub tables: usize,
    /// sysbench `--table-size`: rows per table.
    pub table_size: u64,
    /// TPC-C `--warehouses`.
    pub warehouses: u64,
    /// TPC-C items, and stock rows per warehouse: the specification's
    /// 100,000 unless scaled down (`--tpcc-items`, not the specification).
    pub tpcc_items: u64,
    /// TPC-C customers and loaded orders per district: 3,000 unless scaled
    /// down (`--tpcc-customers`, not the specification).
    pub tpcc_customers: u64,
}

impl Default for Scale {
    /// pgbench's and sysbench's own defaults (scale 1; 1 table of 10,000 rows).
    fn default() -> Self {
        Scale {
            scale: 1,
            accounts_per_branch: 100_000,
            tables: 1,
            table_size: 10_000,
            warehouses: 1,
            tpcc_items: 100_000,
            tpcc_customers: 3_000,
        }
    }
}

/// How one transaction ended (errors that stop the run are `Err`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    /// A retryable error (deadlock): nothing was written; run another.
    Retry,
    /// A transaction of type `kind` (an index into [`Workload::kinds`])
    /// finished: committed, or rolled back by its own logic (TPC-C's 1 %
    /// of New-Orders); both count as done.
    Done {
        kind: usize,
        rolled_back: bool,
    },
}

/// The table handles of a loaded database, opened once per run, plus a
/// counter for the ascending keys of an insert-only table (pgbench's
/// history), started past the largest key already there.
#[derive(Debug)]
pub struct Tables {
    pub tables: Vec<Table>,
    pub next_id: AtomicU64,
}

/// A benchmark workload.
pub trait Workload: Send + Sync {
    /// The name `untorn bench --workload` takes (`tpcb`, `oltp_read_write`...).
    fn name(&self) -> &'static str;
    /// False for workloads that never write (`oltp_read_only`, `oltp_point_select`).
    fn writes(&self) -> bool;
    /// Approximate bytes of loaded rows (keys and rows, without page
    /// overhead): to size a buffer pool as a fraction of the data.
    fn data_bytes(&self) -> u64;
    /// Creates the tables and loads the data in bulk.
    fn load(&self, db: &Database) -> Result<()>;
    /// Opens the loaded tables of `db`.
    fn tables(&self, db: &Database) -> Result<Tables>;
    /// The names of the workload's transaction types, when it has several
    /// and reports them apart ([`Outcome::Done`]); none by default.
    fn kinds(&self) -> &'static [&'static str] {
        &[]
    }
    /// Whether a retry after a deadlock must redo the same transaction
    /// (the runner hands it the generator as it was before the first
    /// attempt); false: a new one is drawn, as sysbench does.
    fn retries_same_inputs(&self) -> bool {
        false
    }
    /// A terminal user's pauses around the transaction `next` draws, for
    /// runs that ask for them (`--think`): the keying time before it and a
    /// think time after it (drawn from `thinking`). None: the workload has
    /// no terminal model, and such a run is refused.
    fn pauses(&self, next: &Rng, thinking: &mut Rng) -> Option<(Duration, Duration)> {
        let _ = (next, thinking);
        None
    }
    /// Runs one transaction for client `client`.
    fn transaction(
        &self,
        db: &Database,
        tables: &Tables,
        rng: &mut Rng,
        client: usize,
    ) -> Result<Outcome>;
    /// Checks the workload's invariant (after a run, or a crash and
    /// recovery); an error saying what is broken.
    fn check(&self, db: &Database) -> Result<()>;
}

/// Every workload name [`by_name`] knows.
pub const NAMES: &[&str] = &[
    "tpcb",
    "tpcc",
    "oltp_write_only",
    "oltp_update_non_index",
    "oltp_update_index",
    "oltp_read_write",
    "oltp_read_only",
    "oltp_point_select",
];

/// The workload named `name` at `scale`.
pub fn by_name(name: &str, scale: &Scale) -> Result<Box<dyn Workload>> {
    if name == "tpcb" {
        return Ok(Box::new(tpcb::Tpcb::new(scale)?));
    }
    if name == "tpcc" {
        return Ok(Box::new(tpcc::Tpcc::new(scale)?));
    }
    match sysbench::Kind::by_name(name) {
        Some(kind) => Ok(Box::new(sysbench::Sysbench::new(kind, scale)?)),
        None => Err(Error::Invalid(format!(
            "unknown workload {name:?}; the workloads are: {}",
            NAMES.join(", ")
        ))),
    }
}

/// Runs `body` in a new transaction and commits it; a retryable error
/// (from a statement or the commit) becomes [`Outcome::Retry`].
pub(crate) fn in_transaction(
    db: &Database,
    body: impl FnOnce(&mut crate::txn::Transaction<'_>) -> Result<()>,
) -> Result<Outcome> {
    let mut tx = db.begin();
    let result = body(&mut tx).and_then(|()| tx.commit().map(|_| ()));
    match result {
        Ok(()) => Ok(Outcome::Committed),
        Err(e) if e.is_retryable() => Ok(Outcome::Retry),
        Err(e) => Err(e),
    }
}

/// Calls `f` on every row of `table` in key order, reading in chunks so a
/// large table never sits in memory at once. Returns the number of rows.
pub(crate) fn scan_all(
    db: &Database,
    table: &Table,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<u64> {
    const CHUNK: usize = 10_000;
    let mut start = Vec::new();
    let mut n = 0u64;
    loop {
        let rows = db.begin().scan(table, &start, None, CHUNK)?;
        for (k, v) in &rows {
            f(k, v)?;
        }
        n += rows.len() as u64;
        match rows.last() {
            Some((k, _)) if rows.len() == CHUNK => {
                // The smallest key after `k`.
                start = k.clone();
                start.push(0);
            }
            _ => return Ok(n),
        }
    }
}

/// The largest u64 big-endian key in `table` (0 when empty): a binary
/// search with one-row scans, so it costs ~64 descents, not a full scan.
pub(crate) fn max_u64_key(db: &Database, table: &Table) -> Result<u64> {
    let tx = db.begin();
    let exists_from =
        |k: u64| -> Result<bool> { Ok(!tx.scan(table, &k.to_be_bytes(), None, 1)?.is_empty()) };
    if !exists_from(0)? {
        return Ok(0);
    }
    // Invariant: some key >= lo exists; none >= hi (or hi is past u64).
    let (mut lo, mut hi) = (0u64, u128::from(u64::MAX) + 1);
    while u128::from(lo) + 1 < hi {
        let mid = ((u128::from(lo) + hi) / 2) as u64;
        if exists_from(mid)? {
            lo = mid;
        } else {
            hi = u128::from(mid);
        }
    }
    Ok(lo)
}

/// Reads a little-endian i64 at `at` of a row, naming the table on a short row.
pub(crate) fn read_i64(row: &[u8], at: usize, table: &Table) -> Result<i64> {
    row.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map(i64::from_le_bytes)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "row of {} bytes in table {:?} is too short for an integer at {at}",
                row.len(),
                table.name
            ))
        })
}

/// A small, fast generator (the crate's [`SplitMix64`]), one per
/// client: good enough spread for picking rows, and no shared state. Its
/// `below` is multiply-shift (unbiased enough, no division).
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    /// A generator for `stream` (a client, a table) of run `seed`.
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut r = Rng(SplitMix64::new(
            seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F),
        ));
        r.next_u64();
        r
    }

    /// The generator of client `client`'s pauses ([`Workload::pauses`]):
    /// apart from its inputs', so that a run with pauses draws the same
    /// transactions as one without.
    pub fn for_pauses(seed: u64, client: u64) -> Rng {
        Rng::new(seed ^ 0x7417_c0de, client)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (`n > 0`); the multiply-shift bias is below 2^-32
    /// for the sizes used here.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range_i64(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo) as u64 + 1) as i64
    }

    /// Fills `out` with groups of random digits joined by dashes, padded
    /// with spaces: sysbench's `c` and `pad` columns ("###########-###...").
    pub fn digit_groups(&mut self, out: &mut [u8], groups: usize, digits: usize) {
        out.fill(b' ');
        let mut pool = 0u64;
        let mut left = 0;
        let mut at = 0;
        for g in 0..groups {
            if g > 0 && at < out.len() {
                out[at] = b'-';
                at += 1;
            }
            for _ in 0..digits {
                if left == 0 {
                    // 19 decimal digits fit in a u64.
                    pool = self.next_u64() % 10_000_000_000_000_000_000;
                    left = 19;
                }
                if at < out.len() {
                    out[at] = b'0' + (pool % 10) as u8;
                    at += 1;
                }
                pool /= 10;
                left -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_stays_in_range_and_streams_differ() {
        let mut a = Rng::new(1, 0);
        let mut b = Rng::new(1, 1);
        assert_ne!(a.next_u64(), b.next_u64());
        for _ in 0..10_000 {
            assert!(a.below(7) < 7);
            let d = a.range_i64(-5000, 5000);
            assert!((-5000..=5000).contains(&d));
        }
    }

    #[test]
    fn digit_groups_have_sysbench_shape() {
        let mut r = Rng::new(3, 0);
        let mut c = [0u8; 120];
        r.digit_groups(&mut c, 10, 11);
        let s = std::str::from_utf8(&c).unwrap();
        let groups: Vec<&str> = s.trim_end().split('-').collect();
        assert_eq!(groups.len(), 10);
        assert!(groups
            .iter()
            .all(|g| g.len() == 11 && g.bytes().all(|b| b.is_ascii_digit())));
        assert_eq!(s.len(), 120);
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let e = by_name("tpcx", &Scale::default())
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("tpcx")
                && e.contains("tpcc")
                && e.contains("oltp_read_write")
                && e.contains("tpcb")
        );
        for name in NAMES {
            assert_eq!(by_name(name, &Scale::default()).unwrap().name(), *name);
        }
    }
}
