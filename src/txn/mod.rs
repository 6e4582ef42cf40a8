//! Transactions: private write sets, row locks, two-phase commit.
//!
//! Rules (see docs/ARCHITECTURE.md):
//! - Writes stay in the transaction's write set until commit; reads see the
//!   transaction's own write, else the newest committed row (read committed).
//! - Every write takes the row's lock first and keeps it to the end, so a
//!   read-modify-write through [`Transaction::get_for_update`] never loses
//!   an update. A lock conflict waits; a transaction that finds itself in
//!   a cycle of waits ends with the retryable [`crate::error::Error::Deadlock`].
//! - Abort throws the write set away: nothing reached a page or the WAL.
//! - Commit (in [`commit`]) is two-phase: prepare may fail cleanly; apply
//!   may not, and the commit returns only when durable (group commit)
//!   unless `synchronous_commit` is off.
//! - A write set past its memory budget spills to disk ([`spill`]) and the
//!   transaction locks the tables it writes whole instead of row by row;
//!   its commit point is its spill file's rename, and its changes are then
//!   applied in commits of a budget each ([`spilled`]): atomic at any size.

pub mod commit;
pub(crate) mod spill;
pub(crate) mod spilled;

#[cfg(test)]
mod spill_tests;
#[cfg(test)]
mod tests;

use crate::btree::ops::RowChange;
use crate::btree::{node, Tree};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::file::Issuer;
use crate::lock_table::{self, RowId};
use crate::lsn::Lsn;
use crate::table::Table;
use std::collections::BTreeMap;
use std::ops::{Bound, Deref};
use std::sync::Arc;

/// Rows a scan's buffer is sized for up front (a larger scan grows it).
const SCAN_PREALLOCATED_ROWS: usize = 1024;

/// The engine a transaction works on: borrowed from a [`crate::db::Database`]
/// (`Database::begin`), or shared so that the transaction can live beside
/// an `Arc<Database>` in one struct (`Database::begin_shared`, the SQL
/// layer's sessions).
pub(crate) enum EngineRef<'db> {
    Borrowed(&'db Engine),
    Shared(Arc<Engine>),
}

impl Deref for EngineRef<'_> {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        match self {
            EngineRef::Borrowed(e) => e,
            EngineRef::Shared(e) => e,
        }
    }
}

/// A transaction. Dropping it without [`Transaction::commit`] aborts it.
pub struct Transaction<'db> {
    pub(crate) engine: EngineRef<'db>,
    pub(crate) xid: u64,
    /// (table file id, key) -> change, in the global order commits use.
    pub(crate) writes: BTreeMap<(u32, Vec<u8>), RowChange>,
    pub(crate) write_bytes: usize,
    pub(crate) locked: Vec<RowId>,
    /// File ids of tables this transaction drops (logged in its commit).
    pub(crate) dropped_files: Vec<u32>,
    /// The write set past its memory budget, on disk.
    pub(crate) spill: Option<Box<spill::Spill>>,
    /// Tables this transaction holds whole (since its write set spilled).
    whole_tables: Vec<u32>,
    pub(crate) finished: bool,
    /// Whether a wait for a row lock must stop (`set_stop`).
    stop: Option<lock_table::Stop>,
    /// Whether committing this transaction frees space ([`Self::frees_space`]).
    pub(crate) frees_space: bool,
}

impl<'db> Transaction<'db> {
    pub(crate) fn new(engine: EngineRef<'db>, xid: u64) -> Transaction<'db> {
        Transaction {
            engine,
            xid,
            writes: BTreeMap::new(),
            write_bytes: 0,
            locked: Vec::new(),
            dropped_files: Vec::new(),
            spill: None,
            whole_tables: Vec::new(),
            finished: false,
            stop: None,
            frees_space: false,
        }
    }

    /// Marks this transaction as one whose commit frees space (it drops
    /// tables, as a DROP TABLE through SQL does): its commit may use the
    /// WAL headroom ordinary commits keep, so that on a full disk space
    /// can still be freed (wal/writer/reserve.rs).
    pub fn frees_space(&mut self) {
        self.frees_space = true;
    }

    /// What a wait of this transaction for a row lock checks, until
    /// changed: once it says stop, the wait ends with
    /// [`Error::LockWaitInterrupted`].
    pub fn set_stop(&mut self, stop: Option<lock_table::Stop>) {
        self.stop = stop;
    }

    /// This transaction's id.
    pub fn id(&self) -> u64 {
        self.xid
    }

    fn tree(&self, table: &Table) -> Tree<'_> {
        Tree::new(&self.engine.pool, table.file_id)
    }

    fn lock(&mut self, table: &Table, key: &[u8]) -> Result<()> {
        if self.whole_tables.contains(&table.file_id) {
            return Ok(());
        }
        if self.spill.is_some() {
            return self.lock_whole(table.file_id);
        }
        let row = RowId {
            table: table.file_id,
            key: key.to_vec(),
        };
        if self.engine.locks.lock(self.xid, &row, self.stop.as_ref())? {
            self.locked.push(row);
        }
        Ok(())
    }

    /// Locks a table whole (lock_table.rs): a spilled write set keeps no
    /// lock per row.
    fn lock_whole(&mut self, file_id: u32) -> Result<()> {
        if !self.whole_tables.contains(&file_id) {
            self.engine
                .locks
                .lock_table(self.xid, file_id, self.stop.as_ref())?;
            self.whole_tables.push(file_id);
        }
        Ok(())
    }

    /// Moves the in-memory write set to a new run on disk, first locking
    /// whole every table it writes.
    fn spill_writes(&mut self) -> Result<()> {
        let limits = &self.engine.options;
        if limits.temp_file_limit == 0 {
            return Err(Error::WriteSetFull {
                rows: limits.max_write_set_rows,
                bytes: limits.max_write_set_bytes,
            });
        }
        let mut tables: Vec<u32> = self.writes.keys().map(|(f, _)| *f).collect();
        tables.dedup();
        for t in tables {
            self.lock_whole(t)?;
        }
        if self.spill.is_none() {
            let e = &self.engine;
            let spill = spill::Spill::create(&e.fs, &e.dir, self.xid, e.options.temp_file_limit)?;
            self.spill = Some(Box::new(spill));
        }
        self.spill
            .as_mut()
            .expect("created above")
            .write_run(&self.writes)?;
        self.writes.clear();
        self.write_bytes = 0;
        Ok(())
    }

    fn check_sizes(&self, key: &[u8], row: Option<&[u8]>) -> Result<()> {
        let page_size = self.engine.settings.page_size;
        let kmax = node::max_key_len(page_size as usize);
        if key.len() > kmax {
            return Err(Error::TooLarge {
                what: "key",
                len: key.len(),
                limit: kmax,
                page_size,
            });
        }
        if key.is_empty() {
            return Err(Error::Invalid(
                "the empty key is reserved; use a key of at least one byte".into(),
            ));
        }
        let vmax = node::max_value_len(page_size as usize);
        match row {
            Some(r) if r.len() > vmax => Err(Error::TooLarge {
                what: "row",
                len: r.len(),
                limit: vmax,
                page_size,
            }),
            _ => Ok(()),
        }
    }

    /// The row under `key`: this transaction's own write, else the newest
    /// committed one.
    pub fn get(&self, table: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.engine.check_readable()?;
        let own = |change: &RowChange| match change {
            RowChange::Put(v) => Some(v.clone()),
            RowChange::Delete => None,
        };
        if let Some(change) = self.writes.get(&(table.file_id, key.to_vec())) {
            return Ok(own(change));
        }
        if let Some(spill) = &self.spill {
            if let Some(change) = spill.get(table.file_id, key)? {
                return Ok(own(&change));
            }
        }
        self.tree(table).get(key, Issuer::Client)
    }

    /// Locks the row, then reads it: the basis of a read-modify-write that
    /// cannot lose an update.
    pub fn get_for_update(&mut self, table: &Table, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.lock(table, key)?;
        self.get(table, key)
    }

    fn record(&mut self, table: &Table, key: &[u8], change: RowChange) -> Result<()> {
        let size = key.len() + crate::btree::ops::space_needed(key, &change);
        let limits = &self.engine.options;
        let k = (table.file_id, key.to_vec());
        if !self.writes.contains_key(&k)
            && !self.writes.is_empty()
            && (self.writes.len() >= limits.max_write_set_rows
                || self.write_bytes + size > limits.max_write_set_bytes)
        {
            self.spill_writes()?;
        }
        self.write_bytes += size;
        // A row written again replaces its earlier change: only the last
        // one counts against the budget.
        if let Some(earlier) = self.writes.insert(k, change) {
            self.write_bytes -= key.len() + crate::btree::ops::space_needed(key, &earlier);
        }
        Ok(())
    }

    /// Inserts a new row; an error if the key exists.
    pub fn insert(&mut self, table: &Table, key: &[u8], row: &[u8]) -> Result<()> {
        self.check_sizes(key, Some(row))?;
        self.lock(table, key)?;
        if self.get(table, key)?.is_some() {
            return Err(Error::DuplicateKey {
                table: table.name.clone(),
                key: key.to_vec(),
            });
        }
        self.record(table, key, RowChange::Put(row.to_vec()))
    }

    /// Replaces an existing row; returns false (and changes nothing) if the
    /// key does not exist.
    pub fn update(&mut self, table: &Table, key: &[u8], row: &[u8]) -> Result<bool> {
        self.check_sizes(key, Some(row))?;
        self.lock(table, key)?;
        if self.get(table, key)?.is_none() {
            return Ok(false);
        }
        self.record(table, key, RowChange::Put(row.to_vec()))?;
        Ok(true)
    }

    /// Inserts or replaces a row.
    pub fn upsert(&mut self, table: &Table, key: &[u8], row: &[u8]) -> Result<()> {
        self.check_sizes(key, Some(row))?;
        self.lock(table, key)?;
        self.record(table, key, RowChange::Put(row.to_vec()))
    }

    /// Deletes a row; returns false if it did not exist.
    pub fn delete(&mut self, table: &Table, key: &[u8]) -> Result<bool> {
        self.check_sizes(key, None)?;
        self.lock(table, key)?;
        if self.get(table, key)?.is_none() {
            return Ok(false);
        }
        self.record(table, key, RowChange::Delete)?;
        Ok(true)
    }

    /// Rows with `start <= key` (and `key < end` when given), in key order,
    /// at most `limit`, with this transaction's own writes applied.
    pub fn scan(
        &self,
        table: &Table,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.engine.check_readable()?;
        if self.spill.is_some() {
            return self.scan_spilled(table, start, end, limit);
        }
        let in_range = |k: &[u8]| end.is_none_or(|e| k < e);
        let (lo, hi) = write_range(table, start, end);
        let mine: Vec<(&Vec<u8>, &RowChange)> = self
            .writes
            .range((Bound::Included(lo), hi))
            .map(|((_, k), c)| (k, c))
            .collect();
        // Committed rows, enough to fill `limit` after our deletes.
        let want = limit.saturating_add(mine.len());
        let mut committed = Vec::with_capacity(want.min(SCAN_PREALLOCATED_ROWS));
        self.tree(table).scan(start, Issuer::Client, |k, v| {
            if !in_range(k) || committed.len() >= want {
                return false;
            }
            committed.push((k.to_vec(), v.to_vec()));
            true
        })?;
        if mine.is_empty() {
            committed.truncate(limit);
            return Ok(committed);
        }
        // Merge, moving the committed rows (each was copied once, above).
        let mut out = Vec::with_capacity(limit.min(committed.len() + mine.len()));
        let mut committed = committed.into_iter().peekable();
        let mut mine = mine.into_iter().peekable();
        while out.len() < limit {
            let take_mine = match (mine.peek(), committed.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((mk, _)), Some((ck, _))) => **mk <= *ck,
            };
            if take_mine {
                let (key, change) = mine.next().expect("peeked");
                if committed.peek().is_some_and(|(ck, _)| ck == key) {
                    committed.next(); // our write replaces the committed row
                }
                if let RowChange::Put(v) = change {
                    out.push((key.clone(), v.clone()));
                }
            } else {
                out.push(committed.next().expect("peeked"));
            }
        }
        Ok(out)
    }

    /// [`Transaction::scan`] of a transaction whose write set spilled: its
    /// runs and memory merged, then merged with the committed rows in one
    /// pass over the tree.
    fn scan_spilled(
        &self,
        table: &Table,
        start: &[u8],
        end: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let spill = self.spill.as_ref().expect("spilled");
        let (lo, hi) = write_range(table, start, end);
        let mut sources: Vec<spill::Source<'_>> = spill
            .readers_from((table.file_id, start))
            .into_iter()
            .map(spill::Source::Run)
            .collect();
        sources.push(spill::Source::Memory(
            self.writes.range((Bound::Included(lo.clone()), hi.clone())),
        ));
        let mut mine = spill::Merge::new(sources);
        let in_mine_range = |k: &(u32, Vec<u8>)| {
            *k >= lo
                && match &hi {
                    Bound::Excluded(h) => k < h,
                    _ => true,
                }
        };
        // The next own change in range, skipping what the runs hold
        // before `start`.
        let mut next_mine = || -> Result<Option<(Vec<u8>, RowChange)>> {
            while let Some((k, c)) = mine.next_entry()? {
                if k < lo {
                    continue;
                }
                return Ok(in_mine_range(&k).then_some((k.1, c)));
            }
            Ok(None)
        };
        let in_range = |k: &[u8]| end.is_none_or(|e| k < e);
        let mut out = Vec::new();
        let mut head = next_mine()?;
        let mut failed = None;
        self.tree(table).scan(start, Issuer::Client, |k, v| {
            if !in_range(k) || out.len() >= limit {
                return false;
            }
            // Own changes before this committed row come first.
            loop {
                match &head {
                    Some((mk, _)) if mk.as_slice() <= k => {}
                    _ => break,
                }
                let (mk, change) = head.take().expect("matched");
                let replaces = mk.as_slice() == k;
                if let RowChange::Put(mv) = change {
                    out.push((mk, mv));
                }
                match next_mine() {
                    Ok(h) => head = h,
                    Err(e) => {
                        failed = Some(e);
                        return false;
                    }
                }
                if replaces {
                    return out.len() < limit;
                }
                if out.len() >= limit {
                    return false;
                }
            }
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        while out.len() < limit {
            let Some((mk, change)) = head.take() else {
                break;
            };
            if let RowChange::Put(mv) = change {
                out.push((mk, mv));
            }
            head = next_mine()?;
        }
        out.truncate(limit);
        Ok(out)
    }

    /// Commits: returns when the commit is durable (or, with
    /// `synchronous_commit = off`, when it is in the WAL buffer). Returns
    /// the commit record's end LSN (`Lsn::INVALID` for a read-only one).
    pub fn commit(mut self) -> Result<Lsn> {
        let result = if self.spill.is_some() {
            spilled::commit(&mut self)
        } else {
            commit::commit(&mut self, true)
        };
        self.finish();
        result
    }

    /// Aborts: the write set is thrown away.
    pub fn abort(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if !self.finished {
            self.finished = true;
            self.engine.locks.release_all(self.xid, self.locked.iter());
            self.locked.clear();
            self.writes.clear();
            // An uncommitted spill file is removed as it drops.
            self.spill = None;
            let whole = std::mem::take(&mut self.whole_tables);
            self.engine.locks.release_tables(self.xid, whole);
        }
    }
}

/// The write-set keys of `table` from `start` (included) to `end`
/// (excluded; none: the table's end).
fn write_range(
    table: &Table,
    start: &[u8],
    end: Option<&[u8]>,
) -> (spill::WriteKey, Bound<spill::WriteKey>) {
    let lo = (table.file_id, start.to_vec());
    let hi = match end {
        Some(e) => Bound::Excluded((table.file_id, e.to_vec())),
        None => Bound::Excluded((table.file_id + 1, Vec::new())),
    };
    (lo, hi)
}

/// Commits without waiting for the WAL flush (bulk loading, which waits
/// once at the end).
pub(crate) fn commit_nowait(mut tx: Transaction<'_>) -> Result<Lsn> {
    let result = if tx.spill.is_some() {
        spilled::commit(&mut tx)
    } else {
        commit::commit(&mut tx, false)
    };
    tx.finish();
    result
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}
