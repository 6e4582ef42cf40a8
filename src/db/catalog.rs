//! The catalog: a tree of table name -> file id in data file 1; creating
//! and dropping tables; removing files no table owns.

use super::Database;
use crate::btree::{smo, Tree};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::file::Issuer;
use crate::table::{Table, CATALOG_FILE_ID};
use crate::txn::{EngineRef, Transaction};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;

/// Reads the catalog's tree into the engine's name -> file id map.
pub(super) fn load(engine: &Engine) -> Result<()> {
    let mut map = HashMap::new();
    let mut bad = None;
    Tree::new(&engine.pool, CATALOG_FILE_ID).scan(&[], Issuer::Client, |k, v| {
        match (std::str::from_utf8(k), <[u8; 4]>::try_from(v)) {
            (Ok(name), Ok(id)) => {
                map.insert(name.to_string(), u32::from_le_bytes(id));
            }
            _ => bad = Some(format!("catalog row {k:?} -> {v:?}")),
        }
        true
    })?;
    if let Some(detail) = bad {
        return Err(Error::corruption(
            format!("data file {CATALOG_FILE_ID}"),
            "catalog",
            detail,
        ));
    }
    *engine.catalog.write() = map;
    Ok(())
}

impl Database {
    /// Creates a table; durable when it returns.
    pub fn create_table(&self, name: &str) -> Result<Table> {
        let engine = &*self.engine;
        engine.check_usable()?;
        let _ddl = engine.ddl.lock();
        if name.is_empty() || name.len() > 255 {
            return Err(Error::Invalid(format!(
                "table name {name:?} must be 1 to 255 bytes"
            )));
        }
        if engine.catalog.read().contains_key(name) {
            return Err(Error::Invalid(format!("table {name:?} already exists")));
        }
        let file_id = engine.next_file_id.fetch_add(1, Relaxed);
        smo::create_tree(
            &Tree::new(&engine.pool, file_id),
            &engine.wal,
            Issuer::Client,
        )?;
        let mut tx = Transaction::new(EngineRef::Borrowed(engine), engine.allocate_xid());
        tx.insert(&Table::catalog(), name.as_bytes(), &file_id.to_le_bytes())?;
        let end = tx.commit()?;
        engine.wal.flush(end, Issuer::Client)?;
        engine.catalog.write().insert(name.to_string(), file_id);
        Ok(Table {
            name: name.to_string(),
            file_id,
        })
    }

    /// Drops a table: durable when it returns; its file is removed.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let engine = &*self.engine;
        engine.check_usable()?;
        let _ddl = engine.ddl.lock();
        let table = self.table(name)?;
        // Waits out every commit in its apply phase; later ones see the
        // table dropped and fail, so no commit record for the file follows
        // the drop's.
        engine.mark_dropped(table.file_id);
        let mut tx = Transaction::new(EngineRef::Borrowed(engine), engine.allocate_xid());
        let committed = tx.delete(&Table::catalog(), name.as_bytes()).and_then(|_| {
            tx.dropped_files.push(table.file_id);
            tx.commit()
        });
        let end = match committed {
            Ok(end) => end,
            Err(e) => {
                // Not dropped (a full disk refused the commit, nothing of
                // it applied): the table takes writes again. A failure in
                // the apply phase stopped the database anyway.
                engine.unmark_dropped(table.file_id);
                return Err(e);
            }
        };
        engine.wal.flush(end, Issuer::Client)?;
        engine.catalog.write().remove(name);
        engine.pool.discard_file(table.file_id);
        // A failed directory fsync is a failed fsync: stop, as PostgreSQL
        // PANICs, rather than go on over a removal of unknown durability.
        engine.stop_if_fatal(engine.pool.files().remove(table.file_id, Issuer::Client))
    }
}

/// Tables held whole until this is dropped ([`Database::lock_tables`]).
pub struct TableLocks {
    engine: std::sync::Arc<Engine>,
    xid: u64,
    tables: Vec<u32>,
}

impl Drop for TableLocks {
    fn drop(&mut self) {
        let tables = std::mem::take(&mut self.tables);
        self.engine.locks.release_tables(self.xid, tables);
    }
}

impl Database {
    /// Holds `tables` whole until the guard drops, first waiting until no
    /// other transaction holds a row of any of them (lock_table.rs): DDL
    /// that drops or replaces a table waits for the transactions writing
    /// it, as PostgreSQL's AccessExclusiveLock makes DROP and TRUNCATE
    /// wait, instead of failing their commits afterwards. `as_xid`: the
    /// caller's own open transaction, whose rows do not count (else it
    /// would wait for itself). A wait ends with a deadlock, or when `stop`
    /// says so.
    pub fn lock_tables(
        &self,
        tables: &[Table],
        as_xid: Option<u64>,
        stop: Option<&crate::lock_table::Stop>,
    ) -> Result<TableLocks> {
        let engine = &*self.engine;
        let xid = as_xid.unwrap_or_else(|| engine.allocate_xid());
        let mut held = TableLocks {
            engine: self.engine.clone(),
            xid,
            tables: Vec::new(),
        };
        for t in tables {
            // A table the transaction holds already stays held after.
            if engine.locks.lock_table(xid, t.file_id, stop)? {
                held.tables.push(t.file_id);
            }
        }
        Ok(held)
    }
}

/// Removes data files no table owns: left by a crash between creating a
/// table's file and committing its catalog row, or between dropping a
/// table and removing its file.
pub(super) fn remove_orphan_files(engine: &Engine) -> Result<()> {
    let owned: HashSet<u32> = engine.catalog.read().values().copied().collect();
    let on_disk: HashSet<u32> = engine.pool.files().ids_on_disk()?.into_iter().collect();
    for id in CATALOG_FILE_ID + 1..engine.next_file_id.load(Relaxed) {
        if !owned.contains(&id) {
            // Pages redo restored for it must not be written back.
            engine.pool.discard_file(id);
            if on_disk.contains(&id) {
                engine.pool.files().remove(id, Issuer::Recovery)?;
            }
        }
    }
    Ok(())
}
