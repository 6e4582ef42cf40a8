//! What an autocommit bulk load committed, to undo exactly that.
//!
//! A COPY (or INSERT ... generate_series) into an empty table outside a
//! block commits in batches (exec::Sink::Batched): one transaction could
//! not hold a big load. If it then fails, its committed batches must go.
//! Emptying the table would take other sessions' rows too: a second loader
//! that also found the table empty, or any insert committed meanwhile. So
//! the load keeps the keys of the rows it inserted and a failure deletes
//! the rows of its committed batches, with their index entries, and
//! nothing else (its open batch is aborted: its keys may be another
//! session's rows by then).
//!
//! The keys are kept in `LoadedKeys` (loaded_keys.rs), bounded; a load in
//! a block into a table created or truncated in it keeps nothing (its
//! undo empties the table, which only that block wrote).

use super::catalog::TableMeta;
use super::engine_err;
use super::exec::{self, Sink};
use super::loaded_keys::LoadedKeys;
use super::row::decode_row;
use super::types::SqlError;
use crate::lock_table::Stop;
use crate::Database;

/// Deletes the rows of `loaded`'s committed batches, in transactions
/// of a batch each; a wait for a row lock ends when `stop` says (a
/// cancel, the server's shutdown). Returns how many it deleted.
pub fn undo(
    loaded: &LoadedKeys,
    db: &Database,
    meta: &TableMeta,
    stop: &Stop,
) -> Result<u64, SqlError> {
    let mut deleted = 0;
    let mut sink = Sink::batched(db, meta, None);
    for key in loaded.keys() {
        let t = sink.tx();
        t.set_stop(Some(stop.clone()));
        if let Some(bytes) = t.get_for_update(&meta.rows, &key).map_err(engine_err)? {
            let old = decode_row(&meta.types, &bytes)?;
            exec::delete_row(t, meta, &key, &old)?;
            deleted += 1;
        }
        sink.row_done()?;
    }
    sink.finish()?;
    Ok(deleted)
}
