//! The commit of a transaction whose write set spilled (spill.rs): atomic
//! at any size, in a redo-only engine that never writes uncommitted
//! changes to a page.
//!
//! 1. Seal the spill file (the write set still in memory as its last run,
//!    a footer, fsync), rename it `<xid>.committed` and fsync the
//!    directory: the commit point. Before it, nothing of the transaction
//!    is on a page or in the WAL, so a failure or a crash leaves nothing.
//! 2. Apply its changes in key order, in ordinary commits of at most
//!    `max_write_set_rows` / `max_write_set_bytes` each (commit.rs), under
//!    its own xid, without waiting for each flush. The transaction still
//!    holds its tables whole, so no other write meets its half-applied
//!    state; readers see its rows as each part lands, after the commit
//!    point.
//! 3. Flush the WAL past the last part, then remove the file durably (a
//!    file that came back would be applied again over later writes),
//!    release the locks, acknowledge.
//!
//! A crash during 2 or 3 leaves the committed file: the next opening
//! redoes the WAL, then applies the whole file again
//! ([`finish_committed`]); each change is a put or a delete of a key, so
//! applying one twice gives the same row. No other transaction wrote
//! those tables in between: they were held whole until 3 ended.
//!
//! A failure during 2 or 3 (a full disk, a failed fsync) stops the
//! database, as a failure in a commit's apply does: the transaction is
//! committed and must not be reported as not; the next opening finishes it.

use super::spill::{Sealed, SPILL_DIR};
use super::{commit, EngineRef, Transaction};
use crate::btree::ops::{space_needed, RowChange};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::file::{FileKind, Issuer};
use crate::lsn::Lsn;
use std::collections::BTreeMap;

pub(super) fn commit(tx: &mut Transaction<'_>) -> Result<Lsn> {
    let db = &*tx.engine;
    db.check_open()?;
    if !tx.dropped_files.is_empty() {
        return Err(Error::Invalid(
            "a transaction that drops a table cannot also spill its write set".into(),
        ));
    }
    let spill = tx.spill.take().expect("a spilled transaction");
    let writes = std::mem::take(&mut tx.writes);
    let in_memory: u64 = writes
        .iter()
        .map(|((_, k), c)| (k.len() + space_needed(k, c)) as u64)
        .sum();
    check_free_space(db, spill.runs_len() + in_memory)?;
    let sealed = db.stop_if_fatal(spill.seal(&writes))?;
    drop(writes);
    apply(db, &sealed, Issuer::Client)
        .and_then(|end| sealed.remove().map(|()| end))
        .map_err(|e| {
            db.poison(&e);
            Error::Stopped(format!(
                "transaction {} committed, but applying its spilled write set failed ({e}); \
                 the next opening of the database finishes it",
                tx.xid
            ))
        })
}

/// Refuses, before the commit point, a transaction whose apply would
/// clearly not fit on the disk: past the commit point a full disk stops
/// the database, and every opening stops again until space is freed
/// outside it. `write_set` is the write set's bytes; the apply writes
/// about twice that to the data files (leaves split half full) and, in
/// full_pages mode, about five times that to the WAL (splits and first
/// touches log whole pages; measured on a 200-byte-row load into a new
/// table), three times without images, of which checkpoints keep at most
/// max_wal_size. A hint, not a promise: other writers share the disk.
fn check_free_space(db: &Engine, write_set: u64) -> Result<()> {
    let Some(free) = db.fs.free_space(&db.dir) else {
        return Ok(());
    };
    let wal_factor = match db.protection() {
        crate::settings::TornPageProtection::FullPages => 5,
        _ => 3,
    };
    let wal = write_set
        .saturating_mul(wal_factor)
        .min(db.options.max_wal_size);
    let needed = write_set.saturating_mul(2).saturating_add(wal);
    if needed <= free {
        return Ok(());
    }
    Err(Error::io(
        &db.dir,
        "commit",
        std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!(
                "the write set of {write_set} bytes needs about {needed} bytes free to be \
                 applied, and the file system has {free}; nothing was committed"
            ),
        ),
    ))
}

/// Applies a committed transaction's changes in parts (module doc, step
/// 2) and flushes the WAL past them. Returns the last part's end.
fn apply(db: &Engine, sealed: &Sealed, who: Issuer) -> Result<Lsn> {
    let max_rows = db.options.max_write_set_rows.max(1);
    let max_bytes = db.options.max_write_set_bytes.max(1);
    let mut merged = sealed.merged();
    let mut part = BTreeMap::new();
    let mut bytes = 0;
    let mut end = Lsn::INVALID;
    while let Some((key, change)) = merged.next_entry()? {
        bytes += key.1.len() + space_needed(&key.1, &change);
        part.insert(key, change);
        if part.len() >= max_rows || bytes >= max_bytes {
            end = end.max(apply_part(db, sealed.xid(), std::mem::take(&mut part))?);
            bytes = 0;
        }
    }
    if !part.is_empty() {
        end = end.max(apply_part(db, sealed.xid(), part)?);
    }
    if end != Lsn::INVALID {
        db.wal.flush(end, who)?;
    }
    Ok(end)
}

/// One part as an ordinary commit; a part whose leaves or record do not
/// fit at once (a small buffer pool, wide rows) goes in halves.
fn apply_part(db: &Engine, xid: u64, part: BTreeMap<(u32, Vec<u8>), RowChange>) -> Result<Lsn> {
    let mut sub = Transaction::new(EngineRef::Borrowed(db), xid);
    sub.writes = part;
    match commit::commit(&mut sub, false) {
        Ok(end) => Ok(end),
        Err(Error::TooManyLeaves { .. } | Error::CommitTooLarge { .. }) if sub.writes.len() > 1 => {
            let mut first = std::mem::take(&mut sub.writes);
            let middle = first
                .keys()
                .nth(first.len() / 2)
                .cloned()
                .expect("two or more");
            let second = first.split_off(&middle);
            let a = apply_part(db, xid, first)?;
            let b = apply_part(db, xid, second)?;
            Ok(a.max(b))
        }
        Err(e) => Err(e),
    }
}

/// At opening, after redo and with the catalog loaded: removes the files
/// of transactions that never committed and applies those that did
/// (module doc). Returns how many were applied.
pub(crate) fn finish_committed(db: &Engine) -> Result<usize> {
    let dir = db.dir.join(SPILL_DIR);
    if !db.fs.exists(&dir) {
        return Ok(0);
    }
    let mut committed = Vec::new();
    for path in db.fs.list_dir(&dir)? {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        match name.rsplit_once('.') {
            Some((xid, "committed")) if xid.parse::<u64>().is_ok() => {
                committed.push((xid.parse::<u64>().expect("checked"), path))
            }
            _ => {
                // A transaction that never reached its commit point.
                db.fs.remove(&path, FileKind::Spill, Issuer::Recovery)?;
            }
        }
    }
    committed.sort();
    let tables: std::collections::HashSet<u32> = db.catalog.read().values().copied().collect();
    let n = committed.len();
    for (xid, path) in committed {
        let sealed = Sealed::open(&db.fs, &path)?;
        if sealed.xid() != xid {
            return Err(Error::corruption(
                &path,
                "header",
                format!(
                    "the file of transaction {xid} names transaction {}",
                    sealed.xid()
                ),
            ));
        }
        check_tables(&sealed, &tables, &path)?;
        tracing::info!(xid, path = %path.display(), "finishing a committed transaction's spilled write set");
        apply(db, &sealed, Issuer::Recovery)?;
        sealed.remove()?;
    }
    db.fs.sync_dir(&dir, Issuer::Recovery)?;
    Ok(n)
}

/// Refuses a file that writes to a table the catalog does not hold,
/// before anything of it is applied.
fn check_tables(
    sealed: &Sealed,
    tables: &std::collections::HashSet<u32>,
    path: &std::path::Path,
) -> Result<()> {
    let mut merged = sealed.merged();
    let mut last = None;
    while let Some(((file_id, _), _)) = merged.next_entry()? {
        if last != Some(file_id) {
            if file_id != crate::table::CATALOG_FILE_ID && !tables.contains(&file_id) {
                return Err(Error::corruption(
                    path,
                    "entries",
                    format!("a change of data file {file_id}, which no table owns"),
                ));
            }
            last = Some(file_id);
        }
    }
    Ok(())
}

/// Applies a sealed file without removing it: a crash after the apply.
#[cfg(test)]
pub(super) fn tests_apply(db: &Engine, sealed: &Sealed) {
    apply(db, sealed, Issuer::Client).unwrap();
}
