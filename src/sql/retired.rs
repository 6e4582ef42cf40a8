//! Engine tables DDL replaced (DROP TABLE, TRUNCATE, ADD PRIMARY KEY),
//! dropped only once no statement still reads them: a cursor that found
//! the table before the DDL committed keeps reading the rows as they were,
//! as PostgreSQL's DROP waits for its readers (here the DDL does not wait:
//! the old tables wait instead).
//!
//! Rules:
//! - What reads a table holds its definition (`Arc<TableMeta>`: a cursor,
//!   a COPY, a statement running). Once the catalog no longer names it,
//!   no one new can take it, so when only the list here holds it, its
//!   engine tables are dropped.
//! - The list is swept after each DDL statement and wherever a session
//!   lets a definition go (a cursor closed or done, a COPY ended, the
//!   session's end). A sweep with nothing listed costs one atomic load.
//! - A crash before the drop leaves engine tables no catalog row names:
//!   the next opening drops them (`SqlEngine::open`).

use crate::db::Database;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

/// Definitions (`T`: the catalog's `TableMeta`) waiting for their
/// readers.
pub struct Retired<T> {
    /// Each replaced definition with the engine tables of it to drop.
    list: Mutex<Vec<(Arc<T>, Vec<String>)>>,
    listed: AtomicUsize,
}

impl<T> Default for Retired<T> {
    fn default() -> Self {
        Retired {
            list: Mutex::new(Vec::new()),
            listed: AtomicUsize::new(0),
        }
    }
}

impl<T> Retired<T> {
    /// `tables` of `meta`, a definition the catalog no longer names, go
    /// once nothing else holds `meta`.
    pub fn retire(&self, db: &Database, meta: Arc<T>, tables: Vec<String>) {
        {
            let mut list = self.list.lock();
            list.push((meta, tables));
            self.listed.store(list.len(), SeqCst);
        }
        self.sweep(db);
    }

    /// Drops the tables of the definitions no one holds any more.
    pub fn sweep(&self, db: &Database) {
        if self.listed.load(SeqCst) == 0 {
            return;
        }
        let free: Vec<Vec<String>> = {
            let mut list = self.list.lock();
            let mut free = Vec::new();
            list.retain_mut(|(meta, tables)| {
                let unread = Arc::strong_count(meta) == 1;
                if unread {
                    free.push(std::mem::take(tables));
                }
                !unread
            });
            self.listed.store(list.len(), SeqCst);
            free
        };
        for t in free.iter().flatten() {
            drop_engine_table(db, t);
        }
    }

    /// Definitions still waiting for their readers.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.listed.load(SeqCst)
    }
}

/// Drops engine table `name`; a failure leaves an orphan that the next
/// opening drops.
pub fn drop_engine_table(db: &Database, name: &str) {
    if let Err(e) = db.drop_table(name) {
        tracing::warn!("could not drop engine table {name}: {e}");
    }
}
