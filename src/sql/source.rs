//! An access path's rows, read batch by batch: what a statement scans is
//! never held whole (UPDATE and DELETE change rows as they are read, or
//! set their keys aside within work_mem first: `exec`, `key_spool`).
//!
//! Rules:
//! - A key range (a primary-key range, an index prefix, a full scan) is
//!   read `want` entries at a time from where the last batch ended.
//! - With `lock` (UPDATE, DELETE, FOR UPDATE) each row is locked, then
//!   read again under its lock.
//! - Point reads (`Keys`) are read once each, in key order, repeats
//!   dropped.

use super::catalog::TableMeta;
use super::coerce::store_value;
use super::engine_err;
use super::expr::{Ctx, Expr};
use super::plan::Access;
use super::row::{decode_row, encode_key_into, index_row_key, prefix_end};
use super::types::{codes, SqlError, Value};
use crate::txn::Transaction;
use std::sync::Arc;

/// Rows read per engine scan call.
pub const SCAN_CHUNK: usize = 1000;

pub type Tx = Transaction<'static>;

/// A row's engine key and its decoded values.
pub type KeyedRow = (Vec<u8>, Vec<Value>);

enum Pending {
    /// Point reads left, in key order.
    Keys(std::vec::IntoIter<Vec<u8>>),
    /// A key range of the rows (`index: None`) or of index `i`, from
    /// `next` up to `end`.
    Range {
        index: Option<usize>,
        next: Vec<u8>,
        end: Option<Vec<u8>>,
    },
    /// One empty row: SELECT without FROM.
    One,
    Done,
}

pub struct Source {
    meta: Option<Arc<TableMeta>>,
    pending: Pending,
    lock: bool,
}

impl Source {
    /// SELECT without FROM: one row of no columns.
    pub fn one() -> Source {
        Source {
            meta: None,
            pending: Pending::One,
            lock: false,
        }
    }

    /// The rows `access` finds in `meta`'s table.
    pub fn open(
        meta: &Arc<TableMeta>,
        access: &Access,
        cx: &Ctx<'_>,
        lock: bool,
    ) -> Result<Source, SqlError> {
        let pending = Self::plan(meta, access, cx)?;
        Ok(Source {
            meta: Some(meta.clone()),
            pending,
            lock,
        })
    }

    fn plan(meta: &TableMeta, access: &Access, cx: &Ctx<'_>) -> Result<Pending, SqlError> {
        let pk = meta.def.primary_key.as_ref().map_or(&[][..], |k| &k.0[..]);
        Ok(match access {
            Access::Keys(tuples) => {
                let mut keys = Vec::new();
                for t in tuples {
                    cx.watch.check()?;
                    if let Some(k) = key_prefix(meta, pk, t, cx)? {
                        keys.push(k);
                    }
                }
                // An IN list may name a key twice; each row is read once.
                keys.sort_unstable();
                keys.dedup();
                Pending::Keys(keys.into_iter())
            }
            Access::Range { prefix, lo, hi } => {
                let Some(start) = key_prefix(meta, pk, prefix, cx)? else {
                    return Ok(Pending::Done);
                };
                let next = &pk[prefix.len()..pk.len().min(prefix.len() + 1)];
                // No bound leaves the range open; a NULL one matches nothing.
                // One no key can take (an int8 past an int4 column, a string
                // longer than varchar(n)) leaves its side open, as every key
                // is on its side of it, or matches nothing when none is (a
                // lower bound past the largest key, an upper one below the
                // smallest): PostgreSQL compares int4 with int8 in int8. The
                // filter checks every row read, so an open side is exact.
                let bound =
                    |e: &Option<Expr>, lower: bool| -> Result<Option<Option<Vec<u8>>>, SqlError> {
                        let Some(e) = e else { return Ok(Some(None)) };
                        if let Some(key) = key_prefix(meta, next, std::slice::from_ref(e), cx)? {
                            return Ok(Some(Some(key)));
                        }
                        Ok(match e.eval(&[], cx)? {
                            Value::Null => None,
                            Value::Int(x) if (x > 0) == lower => None,
                            _ => Some(None),
                        })
                    };
                let (Some(lo), Some(hi)) = (bound(lo, true)?, bound(hi, false)?) else {
                    return Ok(Pending::Done);
                };
                let lo = lo.unwrap_or_default();
                let end = match hi {
                    Some(h) => prefix_end(&[&start[..], &h[..]].concat()),
                    None if start.is_empty() => None,
                    None => prefix_end(&start),
                };
                let mut from = [&start[..], &lo[..]].concat();
                if from.is_empty() {
                    from.push(0);
                }
                Pending::Range {
                    index: None,
                    next: from,
                    end,
                }
            }
            Access::Index(i, values) => {
                let cols = &meta.def.indexes[*i].columns.0;
                match key_prefix(meta, &cols[..values.len()], values, cx)? {
                    Some(prefix) => Pending::Range {
                        index: Some(*i),
                        end: prefix_end(&prefix),
                        next: prefix,
                    },
                    None => Pending::Done,
                }
            }
            Access::Full => Pending::Range {
                index: None,
                next: vec![0],
                end: None,
            },
        })
    }

    /// Up to `want` more rows (fewer only at the end; a lock's row gone
    /// since its key was read is skipped); empty at the end.
    pub fn next_batch(
        &mut self,
        tx: &mut Tx,
        cx: &Ctx<'_>,
        want: usize,
    ) -> Result<Vec<KeyedRow>, SqlError> {
        let want = want.max(1);
        let Some(meta) = self.meta.clone() else {
            return Ok(match std::mem::replace(&mut self.pending, Pending::Done) {
                Pending::One => vec![(Vec::new(), Vec::new())],
                _ => Vec::new(),
            });
        };
        let mut keys: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        match &mut self.pending {
            Pending::Done | Pending::One => return Ok(Vec::new()),
            Pending::Keys(left) => {
                keys.extend(left.by_ref().take(want).map(|k| (k, None)));
                if left.len() == 0 {
                    self.pending = Pending::Done;
                }
            }
            Pending::Range { index, next, end } => {
                cx.watch.check()?;
                let table = match index {
                    Some(i) => &meta.indexes[*i],
                    None => &meta.rows,
                };
                let chunk = tx
                    .scan(table, next, end.as_deref(), want)
                    .map_err(engine_err)?;
                let exhausted = chunk.len() < want;
                if let Some((k, _)) = chunk.last() {
                    *next = k.clone();
                    next.push(0);
                }
                match index {
                    Some(i) => {
                        let cols = &meta.def.indexes[*i].columns.0;
                        let types = || cols.iter().map(|&c| meta.types[c]);
                        for (entry, _) in chunk {
                            keys.push((index_row_key(types(), &entry)?.to_vec(), None));
                        }
                    }
                    None => keys.extend(
                        chunk
                            .into_iter()
                            .map(|(k, v)| (k, (!self.lock).then_some(v))),
                    ),
                }
                if exhausted {
                    self.pending = Pending::Done;
                }
            }
        }
        let mut out = Vec::with_capacity(keys.len());
        for (k, row) in keys {
            cx.watch.check()?;
            let bytes = match (row, self.lock) {
                (Some(r), false) => Some(r),
                (_, true) => tx.get_for_update(&meta.rows, &k).map_err(engine_err)?,
                (None, false) => tx.get(&meta.rows, &k).map_err(engine_err)?,
            };
            if let Some(b) = bytes {
                out.push((k, decode_row(&meta.types, &b)?));
            }
        }
        Ok(out)
    }

    /// Whether every row was returned.
    pub fn done(&self) -> bool {
        matches!(self.pending, Pending::Done)
    }
}

/// `values` as key columns `cols` store them, encoded one after another;
/// `None` when no key can match (a NULL, or an integer outside a column's
/// range, as PostgreSQL compares int4 with a larger int8).
fn key_prefix(
    meta: &TableMeta,
    cols: &[usize],
    values: &[Expr],
    cx: &Ctx<'_>,
) -> Result<Option<Vec<u8>>, SqlError> {
    let mut out = Vec::with_capacity(9 * values.len());
    for (&c, e) in cols.iter().zip(values) {
        let v = e.eval(&[], cx)?;
        if v == Value::Null {
            return Ok(None);
        }
        match store_value(v, &meta.def.columns[c]) {
            Ok(v) => encode_key_into(&mut out, &v),
            Err(e)
                if e.code == codes::NUMERIC_VALUE_OUT_OF_RANGE
                    || e.code == codes::STRING_DATA_RIGHT_TRUNCATION =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Some(out))
}
