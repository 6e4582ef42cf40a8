//! sysbench's OLTP scripts (oltp_common.lua) on the embedded engine.
//!
//! Tables `sbtest1..N` (`--tables`), each `--table-size` rows:
//! `id` (the key, u64 big-endian, 1-based), then the row
//! `[k u32 LE][c: 120 bytes][pad: 60 bytes]` (c: ten groups of 11 digits
//! joined by dashes, pad: five groups; CHAR columns blank-padded). The
//! secondary index `k_1` is a table `sbtestN_k_1` of keys
//! `k u32 BE ++ id u64 BE` with empty rows, changed by the workload in the
//! same transaction as the row (as InnoDB keeps a secondary index).
//!
//! Statements per transaction, sysbench's defaults (uniform random ids,
//! one random table per statement group, ranges of 100 rows):
//! - point_select: 1 point select;
//! - read_only: 10 point selects, a simple range, a SUM(k) range, an
//!   ORDER BY c range, a DISTINCT c range;
//! - read_write: read_only's, then an update of k (the index entry moves),
//!   an update of c, a delete and an insert of the same id (the table keeps
//!   its size);
//! - write_only: read_write's last four; update_index: one update of k;
//!   update_non_index: one update of c.

use super::{in_transaction, Outcome, Rng, Scale, Tables, Workload};
use crate::db::{key_u64, Database, Table};
use crate::error::{Error, Result};
use crate::txn::Transaction;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

mod check;
pub use check::{check, check_tables};

const K_LEN: usize = 4;
const C_LEN: usize = 120;
const PAD_LEN: usize = 60;
const ROW_LEN: usize = K_LEN + C_LEN + PAD_LEN;
const POINT_SELECTS: usize = 10;
const RANGE_SIZE: u64 = 100;

/// Rows a range statement read: (key, row).
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// Which sysbench script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    PointSelect,
    ReadOnly,
    ReadWrite,
    WriteOnly,
    UpdateIndex,
    UpdateNonIndex,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::PointSelect,
        Kind::ReadOnly,
        Kind::ReadWrite,
        Kind::WriteOnly,
        Kind::UpdateIndex,
        Kind::UpdateNonIndex,
    ];

    /// sysbench's script name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::PointSelect => "oltp_point_select",
            Kind::ReadOnly => "oltp_read_only",
            Kind::ReadWrite => "oltp_read_write",
            Kind::WriteOnly => "oltp_write_only",
            Kind::UpdateIndex => "oltp_update_index",
            Kind::UpdateNonIndex => "oltp_update_non_index",
        }
    }

    pub fn by_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A sysbench script over `tables` tables of `table_size` rows.
#[derive(Clone, Debug)]
pub struct Sysbench {
    kind: Kind,
    tables: usize,
    table_size: u64,
}

/// The name of table `n` (1-based) and of its index on k.
pub fn table_name(n: usize) -> String {
    format!("sbtest{n}")
}
pub fn index_name(n: usize) -> String {
    format!("sbtest{n}_k_1")
}

/// `n` when `name` is table `sbtest{n}` (not its index).
pub fn table_number(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("sbtest")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n >= 1)
}

/// The index key of row `id` with `k`: ordered by k, then id.
pub fn index_key(k: u32, id: u64) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..4].copy_from_slice(&k.to_be_bytes());
    key[4..].copy_from_slice(&id.to_be_bytes());
    key
}

/// The k column of a row.
pub fn row_k(row: &[u8], table: &Table) -> Result<u32> {
    row.get(..K_LEN)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| {
            Error::Invalid(format!(
                "row of {} bytes in {:?} is not a sysbench row",
                row.len(),
                table.name
            ))
        })
}

fn set_k(row: &mut [u8], k: u32) {
    row[..K_LEN].copy_from_slice(&k.to_le_bytes());
}

fn c_of(row: &[u8]) -> &[u8] {
    row.get(K_LEN..K_LEN + C_LEN).unwrap_or(&[])
}

/// A new row as sysbench's prepare and insert statements make it.
fn new_row(rng: &mut Rng, k: u32) -> [u8; ROW_LEN] {
    let mut row = [0u8; ROW_LEN];
    set_k(&mut row, k);
    rng.digit_groups(&mut row[K_LEN..K_LEN + C_LEN], 10, 11);
    rng.digit_groups(&mut row[K_LEN + C_LEN..], 5, 11);
    row
}

impl Sysbench {
    pub fn new(kind: Kind, scale: &Scale) -> Result<Sysbench> {
        if scale.tables == 0 || scale.table_size == 0 {
            return Err(Error::Invalid(format!(
                "sysbench needs --tables and --table-size of at least 1 (got {} and {})",
                scale.tables, scale.table_size
            )));
        }
        if scale.table_size > u64::from(u32::MAX) / 2 {
            return Err(Error::Invalid(format!(
                "--table-size {} is too large: k is a 32-bit INT",
                scale.table_size
            )));
        }
        Ok(Sysbench {
            kind,
            tables: scale.tables,
            table_size: scale.table_size,
        })
    }

    fn random_k(&self, rng: &mut Rng) -> u32 {
        (rng.below(self.table_size) + 1) as u32
    }

    fn random_id(&self, rng: &mut Rng) -> u64 {
        rng.below(self.table_size) + 1
    }

    /// A random table: (rows, index on k).
    fn pick<'t>(&self, tables: &'t Tables, rng: &mut Rng) -> (&'t Table, &'t Table) {
        let n = rng.below(self.tables as u64) as usize;
        (&tables.tables[2 * n], &tables.tables[2 * n + 1])
    }

    /// Loads table `n`: rows in key order, then the index sorted.
    fn load_table(&self, db: &Database, n: usize) -> Result<()> {
        let rows = db.create_table(&table_name(n))?;
        let index = db.create_table(&index_name(n))?;
        // A fixed seed per table: every configuration gets the same data.
        let mut rng = Rng::new(0x5EED_5B7E_5700_0000, n as u64);
        let ks: Vec<u32> = (0..self.table_size)
            .map(|_| self.random_k(&mut rng))
            .collect();
        db.bulk_load(
            &rows,
            ks.iter()
                .enumerate()
                .map(|(i, &k)| (key_u64(i as u64 + 1), new_row(&mut rng, k))),
        )?;
        let mut entries: Vec<[u8; 12]> = ks
            .iter()
            .enumerate()
            .map(|(i, &k)| index_key(k, i as u64 + 1))
            .collect();
        entries.sort_unstable();
        db.bulk_load(&index, entries.iter().map(|e| (e, [])))?;
        Ok(())
    }

    /// `count` times SELECT c FROM sbtest WHERE id = ?, on one random table.
    fn point_selects(
        &self,
        tx: &mut Transaction<'_>,
        tables: &Tables,
        rng: &mut Rng,
        count: usize,
    ) -> Result<()> {
        let (t, _) = self.pick(tables, rng);
        for _ in 0..count {
            let row = tx.get(t, &key_u64(self.random_id(rng)))?;
            std::hint::black_box(row.as_deref().map(c_of));
        }
        Ok(())
    }

    /// `id BETWEEN x AND x + 99` of a random table.
    fn range<'t>(
        &self,
        tx: &mut Transaction<'_>,
        tables: &'t Tables,
        rng: &mut Rng,
    ) -> Result<(&'t Table, Rows)> {
        let (t, _) = self.pick(tables, rng);
        let lo = self.random_id(rng);
        let rows = tx.scan(
            t,
            &key_u64(lo),
            Some(&key_u64(lo + RANGE_SIZE)),
            RANGE_SIZE as usize,
        )?;
        Ok((t, rows))
    }

    fn ranges(&self, tx: &mut Transaction<'_>, tables: &Tables, rng: &mut Rng) -> Result<()> {
        // SELECT c ... BETWEEN
        let (_, rows) = self.range(tx, tables, rng)?;
        std::hint::black_box(rows.iter().map(|(_, v)| c_of(v).len()).sum::<usize>());
        // SELECT SUM(k) ... BETWEEN
        let (t, rows) = self.range(tx, tables, rng)?;
        let mut sum = 0u64;
        for (_, v) in &rows {
            sum += u64::from(row_k(v, t)?);
        }
        std::hint::black_box(sum);
        // SELECT c ... BETWEEN ORDER BY c
        let (_, rows) = self.range(tx, tables, rng)?;
        let mut cs: Vec<&[u8]> = rows.iter().map(|(_, v)| c_of(v)).collect();
        cs.sort_unstable();
        std::hint::black_box(&cs);
        // SELECT DISTINCT c ... BETWEEN ORDER BY c
        let (_, rows) = self.range(tx, tables, rng)?;
        let cs: std::collections::BTreeSet<&[u8]> = rows.iter().map(|(_, v)| c_of(v)).collect();
        std::hint::black_box(&cs);
        Ok(())
    }

    /// UPDATE sbtest SET k = k + 1 WHERE id = ?: the index entry moves.
    fn update_index(&self, tx: &mut Transaction<'_>, tables: &Tables, rng: &mut Rng) -> Result<()> {
        let (t, index) = self.pick(tables, rng);
        let id = self.random_id(rng);
        let key = key_u64(id);
        // No row: the UPDATE matches nothing, as in SQL.
        let Some(mut row) = tx.get_for_update(t, &key)? else {
            return Ok(());
        };
        let k = row_k(&row, t)?;
        let new_k = k.wrapping_add(1);
        set_k(&mut row, new_k);
        tx.update(t, &key, &row)?;
        move_index_entry(tx, index, id, Some(k), Some(new_k))
    }

    /// UPDATE sbtest SET c = ? WHERE id = ?
    fn update_non_index(
        &self,
        tx: &mut Transaction<'_>,
        tables: &Tables,
        rng: &mut Rng,
    ) -> Result<()> {
        let (t, _) = self.pick(tables, rng);
        let key = key_u64(self.random_id(rng));
        let Some(mut row) = tx.get_for_update(t, &key)? else {
            return Ok(());
        };
        rng.digit_groups(&mut row[K_LEN..K_LEN + C_LEN], 10, 11);
        tx.update(t, &key, &row)?;
        Ok(())
    }

    /// DELETE FROM sbtest WHERE id = ?; INSERT INTO sbtest (id, k, c, pad)
    /// VALUES (that id, random k, c, pad).
    fn delete_insert(
        &self,
        tx: &mut Transaction<'_>,
        tables: &Tables,
        rng: &mut Rng,
    ) -> Result<()> {
        let (t, index) = self.pick(tables, rng);
        let id = self.random_id(rng);
        let key = key_u64(id);
        let old_k = match tx.get_for_update(t, &key)? {
            Some(row) => {
                tx.delete(t, &key)?;
                Some(row_k(&row, t)?)
            }
            None => None,
        };
        let new_k = self.random_k(rng);
        tx.insert(t, &key, &new_row(rng, new_k))?;
        move_index_entry(tx, index, id, old_k, Some(new_k))
    }
}

/// Moves row `id`'s index entry from `old` k to `new` k. The row's lock,
/// held by the caller, makes the entry ours: a missing one is a broken
/// index, not a race.
fn move_index_entry(
    tx: &mut Transaction<'_>,
    index: &Table,
    id: u64,
    old: Option<u32>,
    new: Option<u32>,
) -> Result<()> {
    if let Some(k) = old {
        if !tx.delete(index, &index_key(k, id))? {
            return Err(Error::Invalid(format!(
                "index {:?} has no entry for k {k}, id {id}",
                index.name
            )));
        }
    }
    if let Some(k) = new {
        tx.insert(index, &index_key(k, id), &[])?;
    }
    Ok(())
}

impl Workload for Sysbench {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn writes(&self) -> bool {
        !matches!(self.kind, Kind::PointSelect | Kind::ReadOnly)
    }

    fn data_bytes(&self) -> u64 {
        self.tables as u64 * self.table_size * (8 + ROW_LEN as u64 + 12)
    }

    fn load(&self, db: &Database) -> Result<()> {
        // Tables load in parallel (each in key order from one thread, so
        // its pages fill as a sorted load fills them).
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .min(self.tables);
        let next = AtomicUsize::new(1);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| -> Result<()> {
                        loop {
                            let n = next.fetch_add(1, Relaxed);
                            if n > self.tables {
                                return Ok(());
                            }
                            self.load_table(db, n)?;
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        })
    }

    fn tables(&self, db: &Database) -> Result<Tables> {
        let mut tables = Vec::with_capacity(2 * self.tables);
        for n in 1..=self.tables {
            tables.push(db.table(&table_name(n))?);
            tables.push(db.table(&index_name(n))?);
        }
        Ok(Tables {
            tables,
            next_id: AtomicU64::new(0),
        })
    }

    fn transaction(
        &self,
        db: &Database,
        tables: &Tables,
        rng: &mut Rng,
        _client: usize,
    ) -> Result<Outcome> {
        if tables.tables.len() != 2 * self.tables {
            return Err(Error::Invalid(format!(
                "{} needs {} tables, got {}",
                self.name(),
                2 * self.tables,
                tables.tables.len()
            )));
        }
        let point_selects = match self.kind {
            Kind::PointSelect => 1,
            Kind::ReadOnly | Kind::ReadWrite => POINT_SELECTS,
            Kind::WriteOnly | Kind::UpdateIndex | Kind::UpdateNonIndex => 0,
        };
        let ranges = matches!(self.kind, Kind::ReadOnly | Kind::ReadWrite);
        let writes = matches!(self.kind, Kind::ReadWrite | Kind::WriteOnly);
        in_transaction(db, |tx| {
            // The statement groups in sysbench's order: the random stream,
            // and so every run's keys, depend on it.
            if point_selects > 0 {
                self.point_selects(tx, tables, rng, point_selects)?;
            }
            if ranges {
                self.ranges(tx, tables, rng)?;
            }
            if writes || self.kind == Kind::UpdateIndex {
                self.update_index(tx, tables, rng)?;
            }
            if writes || self.kind == Kind::UpdateNonIndex {
                self.update_non_index(tx, tables, rng)?;
            }
            if writes {
                self.delete_insert(tx, tables, rng)?;
            }
            Ok(())
        })
    }

    /// Every table has `table_size` rows, and its index holds exactly one
    /// entry (k, id) per row.
    fn check(&self, db: &Database) -> Result<()> {
        check_tables(db, self.tables, Some(self.table_size))?.into_result()
    }
}
