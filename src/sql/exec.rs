//! Running DML and queries on an engine transaction.

use super::catalog::{IndexDef, TableMeta};
use super::coerce::store_value;
use super::engine_err;
use super::expr::{Ctx, Expr};
use super::key_spool::KeySpool;
use super::plan::Access;
use super::row::{decode_row, encode_key, encode_keys, encode_row, index_key};
pub use super::source::Tx;
use super::source::{Source, SCAN_CHUNK};
use super::types::{codes, SqlError, Value};
use crate::db::Database;
use std::sync::Arc;

/// Where rows go: the statement's transaction (every load and DML: one
/// transaction of any size), or, for DDL filling new tables no one sees
/// until the catalog names them (ddl.rs), transactions of their own
/// committed every `batch` rows.
pub enum Sink<'a> {
    Tx(&'a mut Tx),
    Batched {
        db: &'a Database,
        tx: Option<Tx>,
        in_tx: usize,
        batch: usize,
    },
}

impl Sink<'_> {
    /// Batches of `meta`'s rows.
    pub fn batched<'a>(db: &'a Database, meta: &TableMeta) -> Sink<'a> {
        let batch = db.bulk_batch_rows();
        Sink::Batched {
            db,
            tx: None,
            in_tx: 0,
            batch: (batch / (1 + meta.indexes.len())).max(1),
        }
    }

    pub fn tx(&mut self) -> &mut Tx {
        match self {
            Sink::Tx(t) => t,
            Sink::Batched { db, tx, .. } => tx.get_or_insert_with(|| db.begin_shared()),
        }
    }

    /// One row written; a full batch commits.
    pub(super) fn row_done(&mut self) -> Result<(), SqlError> {
        let full = match self {
            Sink::Batched { in_tx, batch, .. } => {
                *in_tx += 1;
                *in_tx >= *batch
            }
            Sink::Tx(_) => false,
        };
        if full {
            self.finish()?;
        }
        Ok(())
    }

    /// Commits the open batch.
    pub fn finish(&mut self) -> Result<(), SqlError> {
        if let Sink::Batched { tx, in_tx, .. } = self {
            *in_tx = 0;
            if let Some(t) = tx.take() {
                t.commit().map_err(engine_err)?;
            }
        }
        Ok(())
    }
}

/// A new row from target values: defaults, SERIAL and NULL fill the rest.
pub fn build_row(
    meta: &TableMeta,
    targets: &[usize],
    values: Vec<Value>,
) -> Result<Vec<Value>, SqlError> {
    let mut row: Vec<Option<Value>> = vec![None; meta.def.columns.len()];
    for (t, v) in targets.iter().zip(values) {
        row[*t] = Some(store_value(v, &meta.def.columns[*t])?);
    }
    row.into_iter()
        .zip(&meta.def.columns)
        .map(|(v, c)| match v {
            Some(v) => Ok(v),
            None if c.serial => store_value(Value::Int(meta.take_id()), c),
            None => store_value(c.default.clone().unwrap_or(Value::Null), c),
        })
        .collect()
}

/// A row's engine key: its primary-key columns' values, or a fresh
/// hidden row id.
fn row_key(meta: &TableMeta, row: &[Value]) -> Vec<u8> {
    match &meta.def.primary_key {
        Some(pk) => encode_keys(pk.0.iter().map(|&c| &row[c])),
        None => encode_key(&Value::Int(meta.take_id())),
    }
}

/// The entry of index `def` for the row `row` keyed `key`.
pub(super) fn index_entry(def: &IndexDef, row: &[Value], key: &[u8]) -> Vec<u8> {
    index_key(def.columns.0.iter().map(|&c| &row[c]), key)
}

/// Inserts `row` and its index entries.
pub fn insert_row(sink: &mut Sink<'_>, meta: &TableMeta, row: &[Value]) -> Result<(), SqlError> {
    let key = row_key(meta, row);
    let tx = sink.tx();
    tx.insert(&meta.rows, &key, &encode_row(&meta.types, row))
        .map_err(|e| dup(e, meta, row))?;
    for (def, t) in meta.def.indexes.iter().zip(&meta.indexes) {
        tx.insert(t, &index_entry(def, row, &key), b"")
            .map_err(engine_err)?;
    }
    sink.row_done()
}

/// Deletes the row keyed `key`, whose values are `old`, and its index entries.
pub fn delete_row(
    tx: &mut Tx,
    meta: &TableMeta,
    key: &[u8],
    old: &[Value],
) -> Result<(), SqlError> {
    tx.delete(&meta.rows, key).map_err(engine_err)?;
    for (def, t) in meta.def.indexes.iter().zip(&meta.indexes) {
        tx.delete(t, &index_entry(def, old, key))
            .map_err(engine_err)?;
    }
    Ok(())
}

fn dup(e: crate::error::Error, meta: &TableMeta, row: &[Value]) -> SqlError {
    match (&e, &meta.def.primary_key) {
        (crate::error::Error::DuplicateKey { .. }, Some(pk)) => {
            let names: Vec<&str> = pk.0.iter().map(|&c| &*meta.def.columns[c].name).collect();
            let values: Vec<String> = pk.0.iter().map(|&c| show(&row[c])).collect();
            SqlError::new(
                codes::UNIQUE_VIOLATION,
                format!(
                    "duplicate key value violates unique constraint \"{}_pkey\": Key ({})=({}) already exists.",
                    meta.def.name,
                    names.join(", "),
                    values.join(", ")
                ),
            )
        }
        _ => engine_err(e),
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Text(s) => s.clone(),
        Value::Int(x) => x.to_string(),
        other => format!("{other:?}"),
    }
}

pub(super) fn too_many_rows(max_rows: usize) -> SqlError {
    SqlError::new(
        codes::PROGRAM_LIMIT_EXCEEDED,
        format!("statement reads more than max_result_rows ({max_rows}) rows, all held in memory"),
    )
}

/// Calls `f` with each row `filter` keeps among the access path's, as
/// the scan reads them, a batch at a time: each row is locked first
/// (UPDATE, DELETE), so the filter sees the row as it is once the lock
/// is held.
fn for_each_match(
    tx: &mut Tx,
    meta: &Arc<TableMeta>,
    access: &Access,
    filter: Option<&Expr>,
    cx: &Ctx<'_>,
    mut f: impl FnMut(&mut Tx, Vec<u8>, Vec<Value>) -> Result<(), SqlError>,
) -> Result<(), SqlError> {
    let mut source = Source::open(meta, access, cx, true)?;
    while !source.done() {
        for (key, row) in source.next_batch(tx, cx, SCAN_CHUNK)? {
            cx.watch.check()?;
            if filter.map_or(Ok(true), |f| f.holds(&row, cx))? {
                f(tx, key, row)?;
            }
        }
    }
    Ok(())
}

/// Whether changing the columns `sets` names can move a row ahead of
/// the scan `access` makes: a primary-key column moves the row, an
/// index's column its entry in that index.
fn moves_rows_ahead(meta: &TableMeta, sets: &[(usize, Expr)], access: &Access) -> bool {
    let changes = |cols: &[usize]| sets.iter().any(|(c, _)| cols.contains(c));
    let pk_moves = meta.def.primary_key.as_ref().is_some_and(|k| changes(&k.0));
    let index_moves =
        matches!(access, Access::Index(i, _) if changes(&meta.def.indexes[*i].columns.0));
    pk_moves || index_moves
}

/// UPDATE: returns the rows changed. Rows are changed as the scan reads
/// them, unless a change could move a row ahead of the scan: then the
/// keys of all it changes are set aside first (`key_spool`), within
/// `work_mem`, and the rows read again by key.
pub fn update(
    tx: &mut Tx,
    meta: &Arc<TableMeta>,
    sets: &[(usize, Expr)],
    filter: Option<&Expr>,
    access: &Access,
    cx: &Ctx<'_>,
    mut spool: KeySpool<'_>,
) -> Result<u64, SqlError> {
    let mut n = 0;
    if !moves_rows_ahead(meta, sets, access) {
        for_each_match(tx, meta, access, filter, cx, |tx, key, old| {
            n += 1;
            update_row(tx, meta, sets, key, old, cx)
        })?;
        return Ok(n);
    }
    for_each_match(tx, meta, access, filter, cx, |_, key, _| spool.push(key))?;
    let mut keys = spool.finish();
    while let Some(key) = keys.next_key()? {
        cx.watch.check()?;
        // Locked by the scan; no change of this statement reached it.
        let Some(bytes) = tx.get(&meta.rows, &key).map_err(engine_err)? else {
            continue;
        };
        let old = decode_row(&meta.types, &bytes)?;
        update_row(tx, meta, sets, key, old, cx)?;
        n += 1;
    }
    Ok(n)
}

/// Changes the row keyed `key`, whose values are `old`, as `sets` say,
/// and the index entries whose columns changed.
fn update_row(
    tx: &mut Tx,
    meta: &TableMeta,
    sets: &[(usize, Expr)],
    key: Vec<u8>,
    old: Vec<Value>,
    cx: &Ctx<'_>,
) -> Result<(), SqlError> {
    let mut new = old.clone();
    for (c, e) in sets {
        new[*c] = store_value(e.eval(&old, cx)?, &meta.def.columns[*c])?;
    }
    let new_key = match &meta.def.primary_key {
        Some(pk) if pk.0.iter().any(|&c| new[c] != old[c]) => row_key(meta, &new),
        _ => key.clone(),
    };
    if new_key != key {
        tx.delete(&meta.rows, &key).map_err(engine_err)?;
        tx.insert(&meta.rows, &new_key, &encode_row(&meta.types, &new))
            .map_err(|e| dup(e, meta, &new))?;
    } else {
        tx.update(&meta.rows, &key, &encode_row(&meta.types, &new))
            .map_err(engine_err)?;
    }
    for (def, t) in meta.def.indexes.iter().zip(&meta.indexes) {
        if def.columns.0.iter().any(|&c| new[c] != old[c]) || new_key != key {
            tx.delete(t, &index_entry(def, &old, &key))
                .map_err(engine_err)?;
            tx.insert(t, &index_entry(def, &new, &new_key), b"")
                .map_err(engine_err)?;
        }
    }
    Ok(())
}

/// DELETE: returns the rows deleted, each as the scan reads it (a
/// deleted row is behind the scan, never ahead of it).
pub fn delete(
    tx: &mut Tx,
    meta: &Arc<TableMeta>,
    filter: Option<&Expr>,
    access: &Access,
    cx: &Ctx<'_>,
) -> Result<u64, SqlError> {
    let mut n = 0;
    for_each_match(tx, meta, access, filter, cx, |tx, key, old| {
        n += 1;
        delete_row(tx, meta, &key, &old)
    })?;
    Ok(n)
}
