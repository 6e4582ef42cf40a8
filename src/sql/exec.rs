//! Running DML and queries on an engine transaction.

use super::catalog::{ColumnDef, IndexDef, TableMeta};
use super::engine_err;
use super::expr::{as_int, compare, Ctx, Expr};
use super::plan::{Access, Item, Select};
use super::row::{
    decode_row, encode_key, encode_key_into, encode_keys, encode_row, index_key, index_row_key,
    prefix_end,
};
use super::types::{codes, SqlError, SqlType, Value};
use crate::db::Database;
use crate::txn::Transaction;
use std::cmp::Ordering;

/// Rows read per engine scan call.
const SCAN_CHUNK: usize = 1000;

pub type Tx = Transaction<'static>;

/// A row's engine key and its decoded values.
pub type KeyedRow = (Vec<u8>, Vec<Value>);

/// A value as column `col` stores it: typed, range-checked, char(n)
/// padded, NULL refused for NOT NULL columns.
pub fn store_value(v: Value, col: &ColumnDef) -> Result<Value, SqlError> {
    if v == Value::Null {
        if col.not_null {
            return Err(SqlError::new(
                codes::NOT_NULL_VIOLATION,
                format!(
                    "null value in column \"{}\" violates not-null constraint",
                    col.name
                ),
            ));
        }
        return Ok(v);
    }
    let text = |v: Value| match v {
        Value::Text(s) => Ok(s),
        Value::Int(x) => Ok(x.to_string()),
        Value::Bool(b) => Ok(if b { "true" } else { "false" }.into()),
        Value::Timestamp(_) | Value::Null => Err(SqlError::new(
            codes::DATATYPE_MISMATCH,
            "a text value was expected",
        )),
    };
    let too_long = |n: u32| {
        SqlError::new(
            codes::STRING_DATA_RIGHT_TRUNCATION,
            format!("value too long for type character varying({n})"),
        )
    };
    Ok(match col.ty {
        SqlType::Int4 => {
            let x = as_int(&v)?.expect("not null");
            if i32::try_from(x).is_err() {
                return Err(SqlError::new(
                    codes::NUMERIC_VALUE_OUT_OF_RANGE,
                    "integer out of range",
                ));
            }
            Value::Int(x)
        }
        SqlType::Int8 => Value::Int(as_int(&v)?.expect("not null")),
        SqlType::Bpchar(n) => {
            let s = text(v)?;
            let t = s.trim_end_matches(' ');
            let len = t.chars().count();
            if len > n as usize {
                return Err(SqlError::new(
                    codes::STRING_DATA_RIGHT_TRUNCATION,
                    format!("value too long for type character({n})"),
                ));
            }
            let mut out = String::with_capacity(n as usize);
            out.push_str(t);
            out.extend(std::iter::repeat_n(' ', n as usize - len));
            Value::Text(out)
        }
        SqlType::Varchar(Some(n)) => {
            let s = text(v)?;
            if s.chars().count() > n as usize {
                if s.trim_end_matches(' ').chars().count() > n as usize {
                    return Err(too_long(n));
                }
                Value::Text(s.chars().take(n as usize).collect())
            } else {
                Value::Text(s)
            }
        }
        SqlType::Varchar(None) | SqlType::Text | SqlType::Char | SqlType::Unknown => {
            Value::Text(text(v)?)
        }
        SqlType::Bool => match v {
            Value::Bool(b) => Value::Bool(b),
            Value::Text(s) => match s.trim().to_ascii_lowercase().as_str() {
                "t" | "true" | "yes" | "on" | "1" => Value::Bool(true),
                "f" | "false" | "no" | "off" | "0" => Value::Bool(false),
                _ => {
                    return Err(SqlError::new(
                        codes::INVALID_TEXT_REPRESENTATION,
                        format!("invalid input syntax for type boolean: \"{s}\""),
                    ))
                }
            },
            _ => {
                return Err(SqlError::new(
                    codes::DATATYPE_MISMATCH,
                    "a boolean was expected",
                ))
            }
        },
        SqlType::Timestamp => match v {
            Value::Timestamp(t) => Value::Timestamp(t),
            Value::Text(s) => Value::Timestamp(super::timestamp::parse(&s)?),
            _ => {
                return Err(SqlError::new(
                    codes::DATATYPE_MISMATCH,
                    "a timestamp was expected",
                ))
            }
        },
    })
}

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
fn index_entry(def: &IndexDef, row: &[Value], key: &[u8]) -> Vec<u8> {
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

fn dup(e: crate::Error, meta: &TableMeta, row: &[Value]) -> SqlError {
    match (&e, &meta.def.primary_key) {
        (crate::Error::DuplicateKey { .. }, Some(pk)) => {
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

/// The (key, row) pairs the access path finds, before the filter.
/// With `lock`, each row is locked and read again (UPDATE, DELETE, FOR
/// UPDATE). With `cap`, a key range stops after that many rows.
pub fn candidates(
    tx: &mut Tx,
    meta: &TableMeta,
    access: &Access,
    cx: &Ctx<'_>,
    lock: bool,
    cap: Option<usize>,
) -> Result<Vec<KeyedRow>, SqlError> {
    let cap = cap.unwrap_or(usize::MAX);
    let mut keys: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    let scan_range = |tx: &Tx,
                      start: Vec<u8>,
                      end: Option<Vec<u8>>,
                      out: &mut Vec<(Vec<u8>, Option<Vec<u8>>)>,
                      table: &crate::Table,
                      want_rows: bool|
     -> Result<(), SqlError> {
        let mut start = start;
        while out.len() < cap {
            cx.watch.check()?;
            let want = SCAN_CHUNK.min(cap - out.len());
            let chunk = tx
                .scan(table, &start, end.as_deref(), want)
                .map_err(engine_err)?;
            let n = chunk.len();
            if let Some((k, _)) = chunk.last() {
                start = k.clone();
                start.push(0);
            }
            out.extend(chunk.into_iter().map(|(k, v)| (k, want_rows.then_some(v))));
            // What a statement reads is held whole until it ends.
            if out.len() > cx.max_rows {
                return Err(too_many_rows(cx));
            }
            if n < want {
                break;
            }
        }
        Ok(())
    };
    let pk = meta.def.primary_key.as_ref().map_or(&[][..], |k| &k.0[..]);
    match access {
        Access::Keys(tuples) => {
            for t in tuples {
                if let Some(k) = key_prefix(meta, pk, t, cx)? {
                    keys.push((k, None));
                }
            }
            if keys.len() > cx.max_rows {
                return Err(too_many_rows(cx));
            }
            // An IN list may name a key twice; each row is read once.
            if keys.len() > 1 {
                keys.sort_unstable();
                keys.dedup();
            }
        }
        Access::Range { prefix, lo, hi } => {
            let Some(start) = key_prefix(meta, pk, prefix, cx)? else {
                return Ok(Vec::new());
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
                return Ok(Vec::new());
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
            scan_range(tx, from, end, &mut keys, &meta.rows, !lock)?;
        }
        Access::Index(i, values) => {
            let cols = &meta.def.indexes[*i].columns.0;
            if let Some(prefix) = key_prefix(meta, &cols[..values.len()], values, cx)? {
                let mut entries = Vec::new();
                scan_range(
                    tx,
                    prefix.clone(),
                    prefix_end(&prefix),
                    &mut entries,
                    &meta.indexes[*i],
                    false,
                )?;
                let types = || cols.iter().map(|&c| meta.types[c]);
                for (entry, _) in entries {
                    keys.push((index_row_key(types(), &entry)?.to_vec(), None));
                }
            }
        }
        Access::Full => scan_range(tx, vec![0], None, &mut keys, &meta.rows, !lock)?,
    }
    let mut out = Vec::with_capacity(keys.len());
    for (k, row) in keys {
        cx.watch.check()?;
        let bytes = match (row, lock) {
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

fn too_many_rows(cx: &Ctx<'_>) -> SqlError {
    SqlError::new(
        codes::PROGRAM_LIMIT_EXCEEDED,
        format!(
            "statement reads more than max_result_rows ({}) rows, all held in memory",
            cx.max_rows
        ),
    )
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

/// The rows `filter` keeps among the access path's candidates. With
/// `lock` (UPDATE, DELETE, FOR UPDATE) each row is locked first, so the
/// filter sees the row as it is once the lock is held. With `enough`,
/// the path's rows come in the order asked for and reading stops once
/// that many passed the filter.
fn matching(
    tx: &mut Tx,
    meta: &TableMeta,
    access: &Access,
    filter: Option<&Expr>,
    cx: &Ctx<'_>,
    lock: bool,
    enough: Option<usize>,
) -> Result<Vec<KeyedRow>, SqlError> {
    let mut cap = enough.map(|n| n.max(1));
    loop {
        let rows = candidates(tx, meta, access, cx, lock, cap)?;
        let exhausted = cap.is_none_or(|c| rows.len() < c);
        let mut kept = Vec::with_capacity(rows.len());
        for (key, row) in rows {
            cx.watch.check()?;
            if filter.map_or(Ok(true), |f| f.holds(&row, cx))? {
                kept.push((key, row));
            }
        }
        // The filter dropped rows the cap counted: read further.
        if exhausted || enough.is_some_and(|n| kept.len() >= n) {
            return Ok(kept);
        }
        cap = cap.map(|c| c.saturating_mul(4));
    }
}

/// UPDATE: returns the rows changed.
pub fn update(
    tx: &mut Tx,
    meta: &TableMeta,
    sets: &[(usize, Expr)],
    filter: Option<&Expr>,
    access: &Access,
    cx: &Ctx<'_>,
) -> Result<u64, SqlError> {
    let mut n = 0;
    for (key, old) in matching(tx, meta, access, filter, cx, true, None)? {
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
        n += 1;
    }
    Ok(n)
}

/// DELETE: returns the rows deleted.
pub fn delete(
    tx: &mut Tx,
    meta: &TableMeta,
    filter: Option<&Expr>,
    access: &Access,
    cx: &Ctx<'_>,
) -> Result<u64, SqlError> {
    let mut n = 0;
    for (key, old) in matching(tx, meta, access, filter, cx, true, None)? {
        delete_row(tx, meta, &key, &old)?;
        n += 1;
    }
    Ok(n)
}

fn order_cmp(a: &Value, b: &Value, desc: bool) -> Ordering {
    // NULLs sort last ascending, first descending, as in PostgreSQL.
    let o = match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Greater,
        (_, Value::Null) => Ordering::Less,
        _ => compare(a, b).unwrap_or(Ordering::Equal),
    };
    if desc {
        o.reverse()
    } else {
        o
    }
}

/// SELECT: the result rows.
pub fn select(
    tx: &mut Tx,
    meta: Option<&TableMeta>,
    s: &Select,
    cx: &Ctx<'_>,
) -> Result<Vec<Vec<Value>>, SqlError> {
    // LIMIT NULL is no limit; a negative one is an error, as in
    // PostgreSQL (it returned no row).
    let limit = match &s.limit {
        Some(e) => match as_int(&e.eval(&[], cx)?)? {
            Some(n) if n < 0 => {
                return Err(SqlError::new(
                    codes::INVALID_ROW_COUNT_IN_LIMIT_CLAUSE,
                    "LIMIT must not be negative",
                ))
            }
            n => n.map(|n| n as usize),
        },
        None => None,
    };
    let enough = limit.filter(|_| s.in_access_order);
    let source: Vec<Vec<Value>> = match meta {
        None => vec![Vec::new()],
        Some(m) => matching(tx, m, &s.access, s.filter.as_ref(), cx, s.lock, enough)?
            .into_iter()
            .map(|(_, r)| r)
            .collect(),
    };
    if s.aggregate {
        let mut out = Vec::new();
        for item in &s.items {
            out.push(match item {
                Item::Expr(e) => e.eval(&[], cx)?,
                Item::Count(None) => Value::Int(source.len() as i64),
                Item::Count(Some(e)) => {
                    let mut n = 0;
                    for r in &source {
                        n += (e.eval(r, cx)? != Value::Null) as i64;
                    }
                    Value::Int(n)
                }
                Item::Sum(e) => {
                    let mut sum: Option<i64> = None;
                    for r in &source {
                        if let Some(x) = as_int(&e.eval(r, cx)?)? {
                            sum = Some(sum.unwrap_or(0).checked_add(x).ok_or_else(|| {
                                SqlError::new(
                                    codes::NUMERIC_VALUE_OUT_OF_RANGE,
                                    "bigint out of range",
                                )
                            })?);
                        }
                    }
                    sum.map_or(Value::Null, Value::Int)
                }
                Item::Min(e) | Item::Max(e) => {
                    let want = if matches!(item, Item::Min(_)) {
                        Ordering::Less
                    } else {
                        Ordering::Greater
                    };
                    let mut best = Value::Null;
                    for r in &source {
                        let v = e.eval(r, cx)?;
                        if v != Value::Null && (best == Value::Null || compare(&v, &best)? == want)
                        {
                            best = v;
                        }
                    }
                    best
                }
            });
        }
        return Ok(if limit == Some(0) {
            Vec::new()
        } else {
            vec![out]
        });
    }
    let mut rows: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(source.len());
    for r in &source {
        cx.watch.check()?;
        let keys = s
            .order
            .iter()
            .map(|(e, _)| e.eval(r, cx))
            .collect::<Result<Vec<_>, _>>()?;
        let out = s
            .items
            .iter()
            .map(|i| match i {
                Item::Expr(e) => e.eval(r, cx),
                _ => unreachable!("aggregates handled above"),
            })
            .collect::<Result<Vec<_>, _>>()?;
        rows.push((keys, out));
    }
    if !s.order.is_empty() {
        rows.sort_by(|a, b| {
            for (i, (_, desc)) in s.order.iter().enumerate() {
                let o = order_cmp(&a.0[i], &b.0[i], *desc);
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        });
    }
    let mut out: Vec<Vec<Value>> = Vec::with_capacity(rows.len());
    let mut seen = std::collections::HashSet::new();
    for (_, r) in rows {
        if s.distinct && !seen.insert(r.clone()) {
            continue;
        }
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        out.push(r);
    }
    Ok(out)
}
