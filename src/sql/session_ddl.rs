//! DDL statements, and DDL in a block: undone by ROLLBACK, as in
//! PostgreSQL.
//!
//! Rules:
//! - DDL that changes or drops a table (DROP, TRUNCATE, CREATE INDEX,
//!   ALTER TABLE) first holds its tables whole (waiting for every other
//!   transaction writing them: `Database::lock_tables`), until the
//!   statement ends outside a block, until the block ends in one.
//! - In a block (explicit, or the implicit one of an extended batch or
//!   of a Query message of several statements) a statement writes the
//!   catalog's change into the block's transaction and changes only this
//!   session's view (`Session::table`, which planning reads too): a new
//!   table, a table gone, new engine tables in its place (TRUNCATE, ADD
//!   PRIMARY KEY), or a new index. What it writes into engine tables
//!   (rows copied, index entries) is written in the block's transaction,
//!   read from the table as the block sees it. Other sessions see the
//!   committed table until the block commits (they read it; their writes
//!   wait for the block's end); a table the block created they do not
//!   see, and a CREATE TABLE of its name waits for the block.
//! - COMMIT makes the catalog change durable in the block's one commit,
//!   with the rows written, then installs it in memory and drops the
//!   engine tables it replaced. ROLLBACK, an error that fails the block,
//!   or the connection's end drops the engine tables the block made;
//!   nothing else changed. Either way plans made meanwhile plan again.
//! - A crash before the commit leaves new engine tables no catalog row
//!   names, one after it old ones: the next opening drops both
//!   (`SqlEngine::open`).
//! - A write that found its table's definition before a DDL statement
//!   changed it fails with 40001 rather than write rows the new
//!   definition does not know of (`Current`).

use super::catalog::{Catalog, TableMeta, Tables};
use super::ddl;
use super::engine_err;
use super::exec::{index_entry, Sink};
use super::expr::Ctx;
use super::plan::{Access, Plan};
use super::session::{Session, State, Stop};
use super::source::{Source, SCAN_CHUNK};
use super::types::{codes, Outcome, SqlError};
use crate::db::TableLocks;
use std::sync::Arc;

fn undefined(name: &str) -> SqlError {
    SqlError::new(
        codes::UNDEFINED_TABLE,
        format!("relation \"{name}\" does not exist"),
    )
}

impl Tables for Session {
    fn get(&self, name: &str) -> Result<Arc<TableMeta>, SqlError> {
        self.table(name)
    }
}

impl Session {
    /// Table `name` as this session sees it: a block's DDL first, then
    /// the catalog.
    pub(super) fn table(&self, name: &str) -> Result<Arc<TableMeta>, SqlError> {
        match self.block_ddl.view.get(name) {
            Some(Some(meta)) => Ok(meta.clone()),
            Some(None) => Err(undefined(name)),
            None => self.engine.catalog.get(name),
        }
    }

    pub(super) fn table_exists(&self, name: &str) -> bool {
        match self.block_ddl.view.get(name) {
            Some(v) => v.is_some(),
            None => self.engine.catalog.exists(name),
        }
    }

    /// Whether DDL runs in the block's transaction (module rules).
    pub(super) fn in_block(&self) -> bool {
        matches!(self.state, State::Block(_))
    }

    /// What checks, after a statement's writes of table `name` found as
    /// `meta`, that `meta` is still its definition (`Current`).
    pub(super) fn current<'a>(
        &self,
        catalog: &'a Catalog,
        name: &'a str,
        meta: &'a Arc<TableMeta>,
    ) -> Current<'a> {
        Current {
            catalog: (!self.block_ddl.view.contains_key(name)).then_some(catalog),
            name,
            meta,
        }
    }

    /// Runs a DDL statement (module rules).
    pub(super) fn ddl_statement(
        &mut self,
        plan: &Plan,
        stop: &Stop<'_>,
        cx: &Ctx<'_>,
    ) -> Result<Outcome, SqlError> {
        let r = self.ddl_statement_inner(plan, stop, cx);
        self.engine.catalog.retired.sweep(&self.engine.db);
        r
    }

    fn ddl_statement_inner(
        &mut self,
        plan: &Plan,
        stop: &Stop<'_>,
        cx: &Ctx<'_>,
    ) -> Result<Outcome, SqlError> {
        let eng = self.engine.clone();
        let (db, cat) = (&*eng.db, &eng.catalog);
        let tag = |t: &str| Ok(Outcome::Command { tag: t.to_string() });
        match plan {
            Plan::CreateTable {
                name,
                columns,
                primary_key,
                if_not_exists,
            } => {
                if self.table_exists(name) {
                    if *if_not_exists {
                        return tag("CREATE TABLE");
                    }
                    return Err(duplicate(name));
                }
                if self.in_block() {
                    let tx = self.block_tx(stop);
                    cat.claim(db, tx, name)?;
                    let meta = ddl::new_table(db, cat, name, columns.clone(), primary_key.clone())?;
                    self.block_ddl.made.push(meta.def.engine_table.clone());
                    self.put_in_view(name, Some(Arc::new(meta)), None)?;
                } else {
                    let _g = eng.ddl.lock();
                    ddl::create_table(db, cat, name, columns.clone(), primary_key.clone())?;
                }
                tag("CREATE TABLE")
            }
            Plan::DropTables { names, if_exists } => {
                let present: Vec<String> = names
                    .iter()
                    .filter(|n| self.table_exists(n))
                    .cloned()
                    .collect();
                if !if_exists {
                    if let Some(n) = names.iter().find(|n| !self.table_exists(n)) {
                        self.table(n)?;
                    }
                }
                let held = self.hold_whole(&present, stop)?;
                if self.in_block() {
                    self.block_ddl.locks.push(held);
                    self.block_tx(stop).frees_space();
                    for n in &present {
                        let old = self.table(n)?;
                        self.put_in_view(n, None, Some(&old))?;
                    }
                    return tag("DROP TABLE");
                }
                let _g = eng.ddl.lock();
                for n in &present {
                    ddl::drop_table(db, cat, n)?;
                }
                tag("DROP TABLE")
            }
            Plan::Truncate(names) => {
                for n in names {
                    self.table(n)?;
                }
                let held = self.hold_whole(names, stop)?;
                if self.in_block() {
                    self.block_ddl.locks.push(held);
                    for n in names {
                        let old = self.table(n)?;
                        let def = ddl::fresh_tables(db, cat, old.def.clone())?;
                        self.block_ddl
                            .made
                            .extend(ddl::engine_tables(&def).cloned());
                        let meta = Catalog::meta(db, def, Some(old.next_id.clone()))?;
                        self.put_in_view(n, Some(Arc::new(meta)), Some(&old))?;
                    }
                    return tag("TRUNCATE TABLE");
                }
                let _g = eng.ddl.lock();
                for n in names {
                    ddl::truncate(db, cat, n)?;
                }
                tag("TRUNCATE TABLE")
            }
            Plan::CreateIndex {
                name,
                table,
                columns,
            } => {
                self.table(table)?;
                let held = self.hold_whole(std::slice::from_ref(table), stop)?;
                if self.in_block() {
                    self.block_ddl.locks.push(held);
                    self.create_index_in_block(name, table, columns, stop, cx)?;
                } else {
                    let _g = eng.ddl.lock();
                    ddl::create_index(db, cat, name, table, columns)?;
                }
                tag("CREATE INDEX")
            }
            Plan::AddPrimaryKey { table, columns } => {
                self.table(table)?;
                let held = self.hold_whole(std::slice::from_ref(table), stop)?;
                if self.in_block() {
                    self.block_ddl.locks.push(held);
                    self.add_primary_key_in_block(table, columns, stop, cx)?;
                } else {
                    let _g = eng.ddl.lock();
                    ddl::add_primary_key(db, cat, table, columns)?;
                }
                tag("ALTER TABLE")
            }
            _ => unreachable!("not DDL: {plan:?}"),
        }
    }

    /// CREATE INDEX in a block: the entries of the table's rows as the
    /// block sees them, written in the block's transaction.
    fn create_index_in_block(
        &mut self,
        name: &str,
        table: &str,
        columns: &[usize],
        stop: &Stop<'_>,
        cx: &Ctx<'_>,
    ) -> Result<(), SqlError> {
        let eng = self.engine.clone();
        let old = self.table(table)?;
        let (def, index) = ddl::indexed_def(&eng.db, &eng.catalog, &old.def, name, columns)?;
        self.block_ddl.made.push(index.name.clone());
        let idef = def.indexes.last().expect("just added").clone();
        self.each_row_in_block(&old, stop, cx, |tx, key, row| {
            tx.insert(&index, &index_entry(&idef, &row, &key), b"")
                .map_err(engine_err)
        })?;
        let meta = Catalog::meta(&eng.db, def, Some(old.next_id.clone()))?;
        self.put_in_view(table, Some(Arc::new(meta)), Some(&old))
    }

    /// ALTER TABLE ... ADD PRIMARY KEY in a block: the rows as the block
    /// sees them, copied into new engine tables in the block's
    /// transaction.
    fn add_primary_key_in_block(
        &mut self,
        table: &str,
        columns: &[usize],
        stop: &Stop<'_>,
        cx: &Ctx<'_>,
    ) -> Result<(), SqlError> {
        let eng = self.engine.clone();
        let old = self.table(table)?;
        let def = ddl::fresh_tables(&eng.db, &eng.catalog, ddl::keyed_def(&old.def, columns)?)?;
        self.block_ddl
            .made
            .extend(ddl::engine_tables(&def).cloned());
        let new = Catalog::meta(&eng.db, def, Some(old.next_id.clone()))?;
        self.each_row_in_block(&old, stop, cx, |tx, _, row| {
            ddl::copy_row(&mut Sink::Tx(tx), &new, &row)
        })?;
        self.put_in_view(table, Some(Arc::new(new)), Some(&old))
    }

    /// Calls `f` with each row of `table` as the block sees it (the block
    /// holds the table whole: no row is locked), a scan batch at a time.
    fn each_row_in_block(
        &mut self,
        table: &Arc<TableMeta>,
        stop: &Stop<'_>,
        cx: &Ctx<'_>,
        mut f: impl FnMut(
            &mut super::exec::Tx,
            Vec<u8>,
            Vec<super::types::Value>,
        ) -> Result<(), SqlError>,
    ) -> Result<(), SqlError> {
        let tx = self.block_tx(stop);
        let mut source = Source::open(table, &Access::Full, cx, false)?;
        while !source.done() {
            for (key, row) in source.next_batch(tx, cx, SCAN_CHUNK)? {
                cx.watch.check()?;
                f(tx, key, row)?;
            }
        }
        Ok(())
    }

    /// The block's transaction (begun if it has not yet), its lock waits
    /// stopping as `stop` says.
    fn block_tx(&mut self, stop: &Stop<'_>) -> &mut super::exec::Tx {
        let db = &self.engine.db;
        let State::Block(tx) = &mut self.state else {
            unreachable!("block DDL runs in a block")
        };
        let tx = tx.get_or_insert_with(|| db.begin_shared());
        tx.set_stop(Some(stop.engine.clone()));
        tx
    }

    /// Table `name` is `meta` in this session's view (`None`: dropped) and
    /// in the block's catalog rows; `old`, the definition it replaces,
    /// goes at commit if it was the committed one.
    fn put_in_view(
        &mut self,
        name: &str,
        meta: Option<Arc<TableMeta>>,
        old: Option<&Arc<TableMeta>>,
    ) -> Result<(), SqlError> {
        let engine = self.engine.clone();
        let State::Block(tx) = &mut self.state else {
            unreachable!("block DDL runs in a block")
        };
        let tx = tx.get_or_insert_with(|| engine.db.begin_shared());
        let def = meta.as_ref().map(|m| &m.def);
        engine.catalog.write_rows(&engine.db, tx, name, def)?;
        if let Some(old) = old {
            if !self.block_ddl.view.contains_key(name) {
                self.block_ddl.replaced.push(old.clone());
            }
        }
        self.block_ddl.view.insert(name.to_string(), meta);
        engine.catalog.invalidate_plans();
        Ok(())
    }

    /// Holds the engine tables of the SQL tables `names` whole (rows and
    /// indexes) before DDL drops or changes them: waits for every other
    /// transaction writing them (`Database::lock_tables`; a cancel or
    /// statement_timeout ends the wait). This session's own block does
    /// not count. Before, DROP and TRUNCATE went ahead and those
    /// transactions' COMMIT failed, as if the data were corrupt, and a
    /// CREATE INDEX missed the rows they wrote.
    fn hold_whole(&self, names: &[String], stop: &Stop<'_>) -> Result<TableLocks, SqlError> {
        let mut tables = Vec::new();
        for n in names {
            let meta = self.table(n)?;
            tables.push(meta.rows.clone());
            tables.extend(meta.indexes.iter().cloned());
        }
        let own = match &self.state {
            State::Block(Some(tx)) => Some(tx.id()),
            _ => None,
        };
        self.engine
            .db
            .lock_tables(&tables, own, Some(&stop.engine))
            .map_err(|e| match e {
                crate::error::Error::LockWaitInterrupted { .. } => {
                    stop.watch.check().err().unwrap_or_else(|| engine_err(e))
                }
                e => engine_err(e),
            })
    }

    /// The block committed: its catalog changes are installed in memory
    /// and the engine tables they replaced dropped, then its tables are
    /// let go.
    pub(super) fn block_ddl_committed(&mut self) {
        let done = std::mem::take(&mut self.block_ddl);
        if done.view.is_empty() {
            return;
        }
        let engine = self.engine.clone();
        let _g = engine.ddl.lock();
        let mut current = Vec::new();
        for (name, meta) in done.view {
            if let Some(m) = &meta {
                current.extend(ddl::engine_tables(&m.def).cloned());
            }
            engine.catalog.install(&name, meta);
        }
        // What the block made and replaced again goes now; what was
        // committed waits for its readers (`retired`).
        for t in &done.made {
            if !current.contains(t) {
                ddl::drop_engine_table(&engine.db, t);
            }
        }
        for old in done.replaced {
            let gone = ddl::engine_tables(&old.def).filter(|t| !current.contains(t));
            let gone = gone.cloned().collect();
            engine.catalog.retired.retire(&engine.db, old, gone);
        }
        drop(done.locks);
    }

    /// The block ended without committing: the engine tables it made go.
    pub(super) fn block_ddl_aborted(&mut self) {
        let done = std::mem::take(&mut self.block_ddl);
        for t in &done.made {
            ddl::drop_engine_table(&self.engine.db, t);
        }
        if !done.view.is_empty() {
            self.engine.catalog.invalidate_plans();
        }
        drop(done.locks);
    }
}

/// Whether a definition a write used is still its table's: 40001 if a
/// DDL statement changed it between the statement finding it and
/// writing (DDL holds the table whole only from its own start). Once a
/// statement has written rows of the table, DDL waits for its
/// transaction, so a check after the writes is enough. A table in the
/// block's own view no one else can change.
pub(super) struct Current<'a> {
    catalog: Option<&'a Catalog>,
    name: &'a str,
    meta: &'a Arc<TableMeta>,
}

impl Current<'_> {
    pub(super) fn check(&self) -> Result<(), SqlError> {
        let Some(catalog) = self.catalog else {
            return Ok(());
        };
        match catalog.get(self.name) {
            Ok(m) if Arc::ptr_eq(&m, self.meta) => Ok(()),
            _ => Err(SqlError::new(
                codes::SERIALIZATION_FAILURE,
                format!(
                    "could not serialize access: table \"{}\" was changed by a concurrent DDL statement",
                    self.name
                ),
            )),
        }
    }
}

fn duplicate(name: &str) -> SqlError {
    SqlError::new(
        codes::DUPLICATE_TABLE,
        format!("relation \"{name}\" already exists"),
    )
}
