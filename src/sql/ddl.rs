//! DDL outside a block: each statement takes effect at once: it writes
//! new engine tables, then switches the catalog row (its commit point),
//! then drops the tables it replaced. In a block every DDL statement is
//! the block's, undone by ROLLBACK (`session_ddl`), built from the pieces
//! here.

use super::catalog::{Catalog, ColumnDef, IndexDef, KeyColumns, TableDef, TableMeta};
use super::engine_err;
use super::exec::{index_entry, Sink};
use super::expr::Ctx;
use super::interrupt::UNWATCHED;
use super::plan::Access;
use super::source::{KeyedRow, Source, SCAN_CHUNK};
use super::types::{codes, SqlError, Value};
use crate::db::Database;
use std::sync::Arc;

pub fn create_table(
    db: &Database,
    cat: &Catalog,
    name: &str,
    columns: Vec<ColumnDef>,
    primary_key: Option<Vec<usize>>,
) -> Result<(), SqlError> {
    let mut tx = db.begin();
    // Taken by a block that created it and has not ended: wait for it.
    cat.claim(db, &mut tx, name)?;
    let meta = new_table(db, cat, name, columns, primary_key)?;
    cat.write_rows(db, &mut tx, name, Some(&meta.def))?;
    tx.commit().map_err(engine_err)?;
    cat.install(name, Some(Arc::new(meta)));
    Ok(())
}

/// A new table's definition, with its new, empty engine table.
pub(super) fn new_table(
    db: &Database,
    cat: &Catalog,
    name: &str,
    columns: Vec<ColumnDef>,
    primary_key: Option<Vec<usize>>,
) -> Result<TableMeta, SqlError> {
    let engine_table = cat.engine_name(&format!("t.{name}"));
    db.create_table(&engine_table).map_err(engine_err)?;
    let def = TableDef {
        name: name.to_string(),
        columns,
        primary_key: primary_key.map(KeyColumns),
        indexes: Vec::new(),
        engine_table,
    };
    Catalog::meta(db, def, None)
}

pub fn drop_table(db: &Database, cat: &Catalog, name: &str) -> Result<(), SqlError> {
    let meta = cat.get(name)?;
    cat.store(db, name, None)?;
    retire(db, cat, meta);
    Ok(())
}

/// Every engine table of `old`, a definition the catalog no longer
/// names, goes once no statement reads it (`retired`).
fn retire(db: &Database, cat: &Catalog, old: Arc<TableMeta>) {
    let tables = engine_tables(&old.def).cloned().collect();
    cat.retired.retire(db, old, tables);
}

pub(super) fn drop_engine_tables(db: &Database, def: &TableDef) {
    for t in engine_tables(def) {
        drop_engine_table(db, t);
    }
}

/// The engine tables of `def`: its rows', then each index's.
pub(super) fn engine_tables(def: &TableDef) -> impl Iterator<Item = &String> {
    std::iter::once(&def.engine_table).chain(def.indexes.iter().map(|i| &i.engine_table))
}

pub(super) use super::retired::drop_engine_table;

/// Writes `def` with new, empty engine tables for its rows and indexes.
pub(super) fn fresh_tables(
    db: &Database,
    cat: &Catalog,
    mut def: TableDef,
) -> Result<TableDef, SqlError> {
    def.engine_table = cat.engine_name(&format!("t.{}", def.name));
    db.create_table(&def.engine_table).map_err(engine_err)?;
    for i in &mut def.indexes {
        i.engine_table = cat.engine_name(&format!("i.{}", i.name));
        db.create_table(&i.engine_table).map_err(engine_err)?;
    }
    Ok(def)
}

pub fn truncate(db: &Database, cat: &Catalog, name: &str) -> Result<(), SqlError> {
    let old = cat.get(name)?;
    let def = fresh_tables(db, cat, old.def.clone())?;
    let meta = Catalog::meta(db, def, Some(old.next_id.clone()))?;
    cat.store(db, name, Some(meta))?;
    retire(db, cat, old);
    Ok(())
}

/// Copies every row of `old` into the tables of `def` (keyed by its
/// primary key or by fresh row ids), in batches.
fn rebuild(db: &Database, old: &Arc<TableMeta>, def: TableDef) -> Result<TableMeta, SqlError> {
    let new = Catalog::meta(db, def, Some(old.next_id.clone()))?;
    let cx = Ctx {
        params: &[],
        now: 0,
        watch: &UNWATCHED,
        // DDL copies a table in batches, holding none of it whole.
        session: None,
    };
    let mut reader = db.begin_shared();
    let mut sink = Sink::batched(db, &new);
    let result = (|| {
        let mut source = Source::open(old, &Access::Full, &cx, false)?;
        while !source.done() {
            for (_, row) in source.next_batch(&mut reader, &cx, SCAN_CHUNK)? {
                copy_row(&mut sink, &new, &row)?;
            }
        }
        sink.finish()
    })();
    if let Err(e) = result {
        drop_engine_tables(db, &new.def);
        return Err(e);
    }
    Ok(new)
}

/// Writes `row` into the table `new` being built (ADD PRIMARY KEY), as
/// PostgreSQL words what its key refuses.
pub(super) fn copy_row(
    sink: &mut Sink<'_>,
    new: &TableMeta,
    row: &[Value],
) -> Result<(), SqlError> {
    let mut key_columns = new.def.primary_key.iter().flat_map(|k| &k.0);
    if let Some(&c) = key_columns.find(|&&c| row[c] == Value::Null) {
        return Err(SqlError::new(
            codes::NOT_NULL_VIOLATION,
            format!(
                "column \"{}\" of relation \"{}\" contains null values",
                new.def.columns[c].name, new.def.name
            ),
        ));
    }
    super::exec::insert_row(sink, new, row).map_err(|e| match e.code {
        codes::UNIQUE_VIOLATION => SqlError::new(
            codes::UNIQUE_VIOLATION,
            format!(
                "could not create unique index \"{}_pkey\": {}",
                new.def.name, e.message
            ),
        ),
        _ => e,
    })
}

pub fn add_primary_key(
    db: &Database,
    cat: &Catalog,
    name: &str,
    columns: &[usize],
) -> Result<(), SqlError> {
    let old = cat.get(name)?;
    let def = fresh_tables(db, cat, keyed_def(&old.def, columns)?)?;
    let new = rebuild(db, &old, def)?;
    cat.store(db, name, Some(new))?;
    retire(db, cat, old);
    Ok(())
}

/// `def` with the primary key `columns` (42P16 if it has one).
pub(super) fn keyed_def(def: &TableDef, columns: &[usize]) -> Result<TableDef, SqlError> {
    if def.primary_key.is_some() {
        return Err(SqlError::new(
            "42P16",
            format!(
                "multiple primary keys for table \"{}\" are not allowed",
                def.name
            ),
        ));
    }
    let mut def = def.clone();
    def.primary_key = Some(KeyColumns(columns.to_vec()));
    for &c in columns {
        def.columns[c].not_null = true;
    }
    Ok(def)
}

pub fn create_index(
    db: &Database,
    cat: &Catalog,
    name: &str,
    table: &str,
    columns: &[usize],
) -> Result<(), SqlError> {
    let old = cat.get(table)?;
    let (def, index) = indexed_def(db, cat, &old.def, name, columns)?;
    let idef = def.indexes.last().expect("just added").clone();
    let cx = Ctx {
        params: &[],
        now: 0,
        watch: &UNWATCHED,
        session: None,
    };
    // The entries go to the index a scan batch at a time, as they are
    // read: nothing holds the table whole (before, every row was read
    // into memory first). A read error ends the entries, and the build.
    let mut reader = db.begin_shared();
    let mut source = Some(Source::open(&old, &Access::Full, &cx, false)?);
    let mut batch: std::vec::IntoIter<KeyedRow> = Vec::new().into_iter();
    let mut failed = None;
    let entries = std::iter::from_fn(|| loop {
        if let Some((k, r)) = batch.next() {
            return Some((index_entry(&idef, &r, &k), Vec::<u8>::new()));
        }
        let s = source.as_mut().filter(|s| !s.done())?;
        match s.next_batch(&mut reader, &cx, SCAN_CHUNK) {
            Ok(rows) => batch = rows.into_iter(),
            Err(e) => {
                failed = Some(e);
                source = None;
            }
        }
    });
    let loaded = db.bulk_load(&index, entries).map_err(engine_err);
    if let Some(e) = failed.map(Err).unwrap_or(loaded.map(|_| ())).err() {
        drop_engine_table(db, &index.name);
        return Err(e);
    }
    let meta = Catalog::meta(db, def, Some(old.next_id.clone()))?;
    cat.store(db, table, Some(meta))
}

/// `def` with a new index `name` on `columns` (42P07 if the table has
/// one of that name), and the index's new, empty engine table.
pub(super) fn indexed_def(
    db: &Database,
    cat: &Catalog,
    def: &TableDef,
    name: &str,
    columns: &[usize],
) -> Result<(TableDef, crate::table::Table), SqlError> {
    if def.indexes.iter().any(|i| i.name == name) {
        return Err(SqlError::new(
            codes::DUPLICATE_TABLE,
            format!("relation \"{name}\" already exists"),
        ));
    }
    let engine_table = cat.engine_name(&format!("i.{name}"));
    let index = db.create_table(&engine_table).map_err(engine_err)?;
    let mut def = def.clone();
    def.indexes.push(IndexDef {
        name: name.to_string(),
        columns: KeyColumns(columns.to_vec()),
        engine_table,
    });
    Ok((def, index))
}

/// What a block's DDL changed, until it ends (`session_ddl`).
#[derive(Default)]
pub struct BlockDdl {
    /// This session's view of the tables the block created, changed or
    /// dropped (`None`).
    pub(super) view: std::collections::HashMap<String, Option<Arc<TableMeta>>>,
    /// Engine tables the block made.
    pub(super) made: Vec<String>,
    /// Committed definitions the block dropped or replaced.
    pub(super) replaced: Vec<Arc<TableMeta>>,
    /// The tables held whole until the block ends.
    pub(super) locks: Vec<crate::db::TableLocks>,
}
