//! DROP TABLE and TRUNCATE in a block: undone by ROLLBACK, as in
//! PostgreSQL.
//!
//! Rules:
//! - In a block (explicit, or the implicit one of an extended batch or
//!   of a Query message of several statements) the statement first holds
//!   its tables whole until the block ends (waiting for every other
//!   transaction writing them: `Database::lock_tables`), then writes the
//!   catalog's change into the block's transaction and changes only this
//!   session's view: the table gone, or new empty engine tables in its
//!   place. Other sessions see the committed table until the block
//!   commits (they read it; their writes wait for the block's end).
//! - COMMIT makes the catalog change durable in the block's one commit,
//!   with the rows written to the new tables, then installs it in memory
//!   and drops the engine tables it replaced. ROLLBACK, an error that
//!   fails the block, or the connection's end drops the engine tables the
//!   block made; nothing else changed.
//! - A crash before the commit leaves new engine tables no catalog row
//!   names, one after it old ones: the next opening drops both
//!   (`SqlEngine::open`).
//! - Outside a block each statement is its own transaction, at once
//!   (`ddl`).

use super::catalog::{TableDef, TableMeta};
use super::ddl;
use super::session::{Session, State};
use super::types::{codes, SqlError};
use crate::db::TableLocks;
use std::sync::Arc;

fn undefined(name: &str) -> SqlError {
    SqlError::new(
        codes::UNDEFINED_TABLE,
        format!("relation \"{name}\" does not exist"),
    )
}

impl Session {
    /// Table `name` as this session sees it: a block's DROP or TRUNCATE
    /// first, then the catalog.
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

    /// DROP TABLE `names` in a block: held whole, the catalog rows gone in
    /// the block's transaction, gone from this session's view.
    pub(super) fn drop_in_block(
        &mut self,
        names: &[String],
        locks: TableLocks,
    ) -> Result<(), SqlError> {
        self.block_ddl.locks.push(locks);
        for n in names {
            let meta = self.table(n)?;
            self.write_catalog(n, None)?;
            self.forget(n, &meta);
            self.block_ddl.view.insert(n.clone(), None);
        }
        Ok(())
    }

    /// TRUNCATE `names` in a block: held whole, new empty engine tables
    /// in this session's view and in the block's catalog rows.
    pub(super) fn truncate_in_block(
        &mut self,
        names: &[String],
        locks: TableLocks,
    ) -> Result<(), SqlError> {
        self.block_ddl.locks.push(locks);
        let db = self.engine.db.clone();
        for n in names {
            let old = self.table(n)?;
            let def = ddl::fresh_tables(&db, &self.engine.catalog, old.def.clone())?;
            self.block_ddl.made.push(def.clone());
            let meta = Arc::new(super::catalog::Catalog::meta(
                &db,
                def,
                Some(old.next_id.clone()),
            )?);
            self.write_catalog(n, Some(&meta.def))?;
            self.forget(n, &old);
            self.block_ddl.view.insert(n.clone(), Some(meta));
        }
        Ok(())
    }

    /// `old`, replaced in this session's view: a committed definition goes
    /// at commit (one the block made goes at its end either way).
    fn forget(&mut self, name: &str, old: &Arc<TableMeta>) {
        if !self.block_ddl.view.contains_key(name) {
            self.block_ddl.replaced.push(old.def.clone());
        }
    }

    /// Writes `name`'s catalog rows (`None`: deletes them) in the block's
    /// transaction.
    fn write_catalog(&mut self, name: &str, def: Option<&TableDef>) -> Result<(), SqlError> {
        let engine = self.engine.clone();
        let State::Block(tx) = &mut self.state else {
            unreachable!("block DDL runs in a block")
        };
        let tx = tx.get_or_insert_with(|| engine.db.begin_shared());
        engine.catalog.write_rows(&engine.db, tx, name, def)
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
            current.extend(meta.as_ref().map(|m| m.def.engine_table.clone()));
            engine.catalog.install(&name, meta);
        }
        for def in done.replaced.iter().chain(&done.made) {
            if !current.contains(&def.engine_table) {
                ddl::drop_engine_tables(&engine.db, def);
            }
        }
        drop(done.locks);
    }

    /// The block ended without committing: the engine tables it made go.
    pub(super) fn block_ddl_aborted(&mut self) {
        let done = std::mem::take(&mut self.block_ddl);
        for def in &done.made {
            ddl::drop_engine_tables(&self.engine.db, def);
        }
        drop(done.locks);
    }
}
