//! DDL: outside a block each statement takes effect at once: it writes
//! new engine tables, then switches the catalog row (its commit point),
//! then drops the tables it replaced. In a block DROP TABLE and TRUNCATE
//! are the block's (`session_ddl`); CREATE TABLE, CREATE INDEX and ALTER
//! TABLE still take effect at once (a ROLLBACK does not undo them).

use super::catalog::{Catalog, ColumnDef, IndexDef, KeyColumns, TableDef, TableMeta};
use super::engine_err;
use super::exec::Sink;
use super::expr::Ctx;
use super::interrupt::UNWATCHED;
use super::plan::Access;
use super::row::index_key;
use super::source::{KeyedRow, Source, SCAN_CHUNK};
use super::types::{codes, SqlError};
use crate::db::Database;
use std::sync::Arc;

pub fn create_table(
    db: &Database,
    cat: &Catalog,
    name: &str,
    columns: Vec<ColumnDef>,
    primary_key: Option<Vec<usize>>,
) -> Result<(), SqlError> {
    let engine_table = cat.engine_name(&format!("t.{name}"));
    db.create_table(&engine_table).map_err(engine_err)?;
    let def = TableDef {
        name: name.to_string(),
        columns,
        primary_key: primary_key.map(KeyColumns),
        indexes: Vec::new(),
        engine_table,
    };
    let meta = Catalog::meta(db, def, None)?;
    cat.store(db, name, Some(meta))
}

pub fn drop_table(db: &Database, cat: &Catalog, name: &str) -> Result<(), SqlError> {
    let meta = cat.get(name)?;
    cat.store(db, name, None)?;
    drop_engine_tables(db, &meta.def);
    Ok(())
}

pub(super) fn drop_engine_tables(db: &Database, def: &TableDef) {
    for t in std::iter::once(&def.engine_table).chain(def.indexes.iter().map(|i| &i.engine_table)) {
        // A failure leaves an orphan that the next opening drops.
        if let Err(e) = db.drop_table(t) {
            tracing::warn!("could not drop engine table {t}: {e}");
        }
    }
}

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
    drop_engine_tables(db, &old.def);
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
                let mut key_columns = new.def.primary_key.iter().flat_map(|k| &k.0);
                if let Some(&c) = key_columns.find(|&&c| row[c] == super::types::Value::Null) {
                    return Err(SqlError::new(
                        codes::NOT_NULL_VIOLATION,
                        format!(
                            "column \"{}\" of relation \"{}\" contains null values",
                            new.def.columns[c].name, new.def.name
                        ),
                    ));
                }
                super::exec::insert_row(&mut sink, &new, &row)?;
            }
        }
        sink.finish()
    })();
    if let Err(e) = result {
        drop_engine_tables(db, &new.def);
        return Err(if e.code == codes::UNIQUE_VIOLATION {
            SqlError::new(
                codes::UNIQUE_VIOLATION,
                format!(
                    "could not create unique index \"{}_pkey\": {}",
                    new.def.name, e.message
                ),
            )
        } else {
            e
        });
    }
    Ok(new)
}

pub fn add_primary_key(
    db: &Database,
    cat: &Catalog,
    name: &str,
    columns: &[usize],
) -> Result<(), SqlError> {
    let old = cat.get(name)?;
    if old.def.primary_key.is_some() {
        return Err(SqlError::new(
            "42P16",
            format!("multiple primary keys for table \"{name}\" are not allowed"),
        ));
    }
    let mut def = old.def.clone();
    def.primary_key = Some(KeyColumns(columns.to_vec()));
    for &c in columns {
        def.columns[c].not_null = true;
    }
    let def = fresh_tables(db, cat, def)?;
    let new = rebuild(db, &old, def)?;
    cat.store(db, name, Some(new))?;
    drop_engine_tables(db, &old.def);
    Ok(())
}

pub fn create_index(
    db: &Database,
    cat: &Catalog,
    name: &str,
    table: &str,
    columns: &[usize],
) -> Result<(), SqlError> {
    let old = cat.get(table)?;
    if old.def.indexes.iter().any(|i| i.name == name) {
        return Err(SqlError::new(
            codes::DUPLICATE_TABLE,
            format!("relation \"{name}\" already exists"),
        ));
    }
    let engine_table = cat.engine_name(&format!("i.{name}"));
    let index = db.create_table(&engine_table).map_err(engine_err)?;
    let cx = Ctx {
        params: &[],
        now: 0,
        watch: &UNWATCHED,
        // DDL copies a table in batches, holding none of it whole.
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
            return Some((
                index_key(columns.iter().map(|&c| &r[c]), &k),
                Vec::<u8>::new(),
            ));
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
    let built = match failed {
        Some(e) => Err(e),
        None => loaded.map(|_| ()),
    };
    if let Err(e) = built {
        let _ = db.drop_table(&engine_table);
        return Err(e);
    }
    let mut def = old.def.clone();
    def.indexes.push(IndexDef {
        name: name.to_string(),
        columns: KeyColumns(columns.to_vec()),
        engine_table,
    });
    let meta = Catalog::meta(db, def, Some(old.next_id.clone()))?;
    cat.store(db, table, Some(meta))
}

/// What a block's DROP and TRUNCATE statements changed, until it ends
/// (`session_ddl`).
#[derive(Default)]
pub struct BlockDdl {
    /// This session's view of the tables the block dropped (`None`) or
    /// truncated (their new engine tables).
    pub(super) view: std::collections::HashMap<String, Option<Arc<TableMeta>>>,
    /// Definitions of engine tables the block made (TRUNCATE's).
    pub(super) made: Vec<TableDef>,
    /// Committed definitions the block dropped or replaced.
    pub(super) replaced: Vec<TableDef>,
    /// The tables held whole until the block ends.
    pub(super) locks: Vec<crate::db::TableLocks>,
}
