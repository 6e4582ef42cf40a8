//! Commit in two phases.
//!
//! 1. Prepare (may fail cleanly): find the leaf of every written row; where
//!    a leaf cannot take its changes, split it now, as its own structure
//!    change; keep every leaf pinned.
//! 2. Apply (must not fail): latch the pinned leaves exclusively in one
//!    global order (file id, then block); re-check that each still covers
//!    its keys and has room (a concurrent split or commit may have changed
//!    it: then let go and prepare again); mark them dirty, apply the
//!    changes, log one commit record holding every change, stamp the pages.
//!    A failure here leaves pages changed in memory without their WAL
//!    record: the database is poisoned (nothing more is written; the
//!    process must reopen it and recover from the WAL).
//!
//! Prepare also refuses a commit whose record could outgrow the WAL's
//! record limit and reserves WAL space for it (the segments it needs are
//! created), so apply and the flush after it cannot fail for space.
//!
//! Then, with no latch held, wait until the WAL is flushed past the commit:
//! a failure there is fatal too, never an ordinary "commit failed".

use super::Transaction;
use crate::btree::ops::{apply_op, encode_op, space_needed, RowChange};
use crate::btree::smo::{fits, free_empty_leaf, split_leaf, Pending};
use crate::btree::{node, Tree};
use crate::buffer::{PageId, PageWrite, Pinned};
use crate::error::{Error, Result};
use crate::file::Issuer;
use crate::lsn::Lsn;
use crate::protect::full_pages::{make_image, needs_image, Change};
use crate::settings::TornPageProtection;
use crate::wal::format::RECORD_HEADER_LEN;
use crate::wal::record::{BLOCK_DESCRIPTOR_LEN, MAIN_LEN_LEN, PL_DESCRIPTORS};
use crate::wal::{BlockRef, Purpose, RecordData, RecordKind, MAX_RECORD_LEN};

/// Prepare/apply rounds before giving up (each lost round means another
/// commit split or filled a leaf between our prepare and apply).
const MAX_ROUNDS: usize = 1000;

/// The changes bound for one leaf.
struct LeafGroup<'a> {
    pin: Pinned<'a>,
    /// Indexes into the transaction's ordered write list.
    writes: Vec<usize>,
}

pub(super) fn commit(tx: &mut Transaction<'_>, wait: bool) -> Result<Lsn> {
    let db = &*tx.engine;
    db.check_open()?;
    if tx.writes.is_empty() && tx.dropped_files.is_empty() {
        return Ok(Lsn::INVALID);
    }
    let writes: Vec<(u32, &[u8], &RowChange)> = tx
        .writes
        .iter()
        .map(|((f, k), c)| (*f, k.as_slice(), c))
        .collect();
    let mut applied = None;
    for _ in 0..MAX_ROUNDS {
        // Before any latch: the flush that bounds the WAL buffer.
        db.wal.make_room().inspect_err(|e| {
            if e.is_fatal() {
                db.poison(e);
            }
        })?;
        let groups = prepare(tx, &writes)?;
        // Apply must not fail: refuse here, with nothing changed, what its
        // record could not hold, and make room for it in the WAL.
        let len = check_record_len(tx, &writes, &groups)?;
        // Dropping tables frees space: such a commit may use the headroom
        // ordinary ones keep, so that a full disk can be emptied by SQL.
        let purpose = match tx.frees_space || !tx.dropped_files.is_empty() {
            false => Purpose::Ordinary,
            true => Purpose::FreesSpace,
        };
        let _space = db.wal.reserve_for(len, purpose).inspect_err(|e| {
            if e.is_fatal() {
                db.poison(e);
            }
        })?;
        if let Some(done) = apply(tx, &writes, groups)? {
            applied = Some(done);
            break;
        }
    }
    let (end, emptied) = applied.ok_or_else(|| Error::CommitContention {
        xid: tx.xid,
        why: format!("its leaves changed under it in {MAX_ROUNDS} rounds of concurrent splits"),
    })?;
    if wait && db.options.synchronous_commit {
        // Any failure here stops the database: this commit's changes are
        // visible and a later flush may make them durable, so the caller
        // must not hear "failed" (a retry would apply them twice); and its
        // record may never be durable, so nothing may read them
        // (PostgreSQL PANICs here). Space was reserved in prepare.
        db.wal.flush(end, Issuer::Client).map_err(|e| {
            db.poison(&e);
            if e.is_fatal() {
                e
            } else {
                Error::Stopped(format!(
                    "the WAL flush after a commit was applied failed: {e}"
                ))
            }
        })?;
    }
    // Leaves this commit emptied go back to their trees' free lists, each
    // as its own structure change. Best effort: a leaf left in place is
    // still correct, so only a fatal error is passed on.
    for (file_id, low) in emptied {
        let tree = Tree::new(&db.pool, file_id);
        let smo = db.smo_lock(file_id);
        if let Err(e) = free_empty_leaf(&tree, &db.wal, &smo, &low, Issuer::Client) {
            if e.is_fatal() {
                return Err(e);
            }
        }
    }
    Ok(end)
}

/// Finds (splitting where needed) and pins the leaf of every write.
///
/// Each round groups the writes by leaf, then splits every leaf that
/// cannot take its changes. A commit into an empty key range needs as many
/// splits as new leaves (over a thousand for a COPY of wide rows), so it
/// gives up only after MAX_ROUNDS rounds in a row in which none of ours
/// split: other commits kept changing the leaves first.
fn prepare<'a>(
    tx: &'a Transaction<'_>,
    writes: &[(u32, &[u8], &RowChange)],
) -> Result<Vec<LeafGroup<'a>>> {
    let db = &*tx.engine;
    let mut stalled_rounds = 0;
    while stalled_rounds < MAX_ROUNDS {
        let groups = group_by_leaf(tx, writes)?;
        let full: Vec<(u32, &[u8], Vec<Pending<'_>>)> = groups
            .iter()
            .filter_map(|g| {
                let pending = pending_of(g, writes);
                let (file_id, key, _) = writes[g.writes[0]];
                (!fits(pin_read(&g.pin).bytes(), &pending)).then_some((file_id, key, pending))
            })
            .collect();
        if full.is_empty() {
            return Ok(groups);
        }
        // The splits latch these leaves: no pin of ours may be read-held.
        drop(groups);
        let mut split_any = false;
        for (file_id, key, pending) in full {
            let tree = Tree::new(&db.pool, file_id);
            let smo = db.smo_lock(file_id);
            split_any |= split_leaf(&tree, &db.wal, &smo, key, &pending, Issuer::Client)?;
        }
        stalled_rounds = if split_any { 0 } else { stalled_rounds + 1 };
    }
    Err(Error::CommitContention {
        xid: tx.xid,
        why: format!(
            "for {MAX_ROUNDS} rounds in a row other commits filled or split its leaves first"
        ),
    })
}

/// Groups the writes (in key order) by the leaf that covers each, pinned.
fn group_by_leaf<'a>(
    tx: &'a Transaction<'_>,
    writes: &[(u32, &[u8], &RowChange)],
) -> Result<Vec<LeafGroup<'a>>> {
    let db = &*tx.engine;
    let mut groups: Vec<LeafGroup<'a>> = Vec::new();
    for (i, (file_id, key, _)) in writes.iter().enumerate() {
        if let Some(g) = groups.last_mut() {
            if g.pin.id().file_id == *file_id && covers_now(&g.pin, key) {
                g.writes.push(i);
                continue;
            }
        }
        // Every leaf stays pinned until the commit is applied: bound
        // them, so one transaction cannot exhaust the buffer pool.
        let max_leaves = db.pool.nframes() / 2;
        if groups.len() >= max_leaves {
            return Err(Error::TooManyLeaves {
                xid: tx.xid,
                max_leaves,
                frames: db.pool.nframes(),
            });
        }
        let tree = Tree::new(&db.pool, *file_id);
        let pin = tree.find_leaf(key, Issuer::Client)?;
        groups.push(LeafGroup {
            pin,
            writes: vec![i],
        });
    }
    Ok(groups)
}

/// Refuses a commit whose record could exceed the WAL's limits, and
/// returns the most bytes the record can take (its header included). The
/// bound is the worst case apply can meet: with `full_pages`, a
/// checkpoint between now and apply may make every leaf log its whole
/// image (at most a page) instead of its changes. `wal_compression` does
/// not change it: the WAL keeps a compressed image only when it is shorter
/// than the uncompressed one, so the uncompressed page stays the worst case.
fn check_record_len(
    tx: &Transaction<'_>,
    writes: &[(u32, &[u8], &RowChange)],
    groups: &[LeafGroup<'_>],
) -> Result<u64> {
    let db = &*tx.engine;
    let full_pages = db.protection() == TornPageProtection::FullPages;
    // Groups naming the same leaf are merged by apply: count each once.
    let mut data: std::collections::BTreeMap<PageId, usize> = Default::default();
    for g in groups {
        let n: usize = g
            .writes
            .iter()
            .map(|&i| op_len(writes[i].1, writes[i].2))
            .sum();
        *data.entry(g.pin.id()).or_default() += n;
    }
    let page = db.pool.page_size();
    let blocks: u64 = data
        .values()
        .map(|&n| (BLOCK_DESCRIPTOR_LEN + if full_pages { n.max(page) } else { n }) as u64)
        .sum();
    let main = 4 * tx.dropped_files.len() as u64;
    let len = (RECORD_HEADER_LEN + PL_DESCRIPTORS + MAIN_LEN_LEN) as u64 + blocks + main;
    let max_blocks = u16::MAX as usize;
    if len > MAX_RECORD_LEN as u64 || data.len() > max_blocks {
        return Err(Error::CommitTooLarge {
            xid: tx.xid,
            len,
            blocks: data.len(),
            limit: MAX_RECORD_LEN,
            max_blocks,
        });
    }
    Ok(len)
}

/// The bytes [`encode_op`] writes for one change.
fn op_len(key: &[u8], change: &RowChange) -> usize {
    let value = match change {
        RowChange::Put(v) => 4 + v.len(),
        RowChange::Delete => 0,
    };
    1 + 2 + key.len() + value
}

fn pin_read<'a>(pin: &Pinned<'a>) -> crate::buffer::PageRead<'a> {
    pin.clone().into_read()
}

fn covers_now(pin: &Pinned<'_>, key: &[u8]) -> bool {
    let r = pin_read(pin);
    crate::btree::tree::is_node(r.bytes())
        && node::is_leaf(r.bytes())
        && node::covers(r.bytes(), key)
}

fn pending_of<'w>(g: &LeafGroup<'_>, writes: &[(u32, &'w [u8], &RowChange)]) -> Vec<Pending<'w>> {
    g.writes
        .iter()
        .map(|&i| Pending {
            key: writes[i].1,
            bytes: space_needed(writes[i].1, writes[i].2),
        })
        .collect()
}

/// A commit's end LSN and the leaves it emptied (file id, low fence).
type Applied = (Lsn, Vec<(u32, Vec<u8>)>);

/// Latches the leaves in page order, re-checks them, applies and logs.
/// Returns `None` when a leaf changed since prepare (prepare again).
fn apply(
    tx: &Transaction<'_>,
    writes: &[(u32, &[u8], &RowChange)],
    mut groups: Vec<LeafGroup<'_>>,
) -> Result<Option<Applied>> {
    let db = &*tx.engine;
    groups.sort_by_key(|g| g.pin.id());
    // Two groups may name the same leaf (writes of one leaf split by
    // another leaf's keys cannot happen in key order, but be safe): merge.
    let mut merged: Vec<LeafGroup<'_>> = Vec::with_capacity(groups.len());
    for g in groups {
        match merged.last_mut() {
            Some(last) if last.pin.id() == g.pin.id() => last.writes.extend(g.writes),
            _ => merged.push(g),
        }
    }
    let mut latched: Vec<(PageWrite<'_>, Vec<usize>)> = Vec::with_capacity(merged.len());
    for g in merged {
        let w = g.pin.into_write();
        latched.push((w, g.writes));
    }
    for (w, idxs) in &latched {
        let b = w.bytes();
        if !crate::btree::tree::is_node(b) || !node::is_leaf(b) {
            return Ok(None);
        }
        if !idxs.iter().all(|&i| node::covers(b, writes[i].1)) {
            return Ok(None);
        }
        let pending: Vec<Pending<'_>> = idxs
            .iter()
            .map(|&i| Pending {
                key: writes[i].1,
                bytes: space_needed(writes[i].1, writes[i].2),
            })
            .collect();
        if !fits(b, &pending) {
            return Ok(None);
        }
    }
    let protection = db.protection();
    // Held until the record is in: the redo point cannot move between the
    // image decision and the insert, and no table is dropped meanwhile.
    let redo = db.checkpoint.redo_point.hold();
    // Checked again with the redo point held: a close's shutdown
    // checkpoint moves it only once this commit is in, or after this
    // check refuses it.
    db.check_open()?;
    let dropped = db.dropped_files();
    if let Some((w, _)) = latched
        .iter()
        .find(|(w, _)| dropped.contains(&w.id().file_id))
    {
        return Err(Error::Invalid(format!(
            "transaction {}: the table of data file {} was dropped",
            tx.xid,
            w.id().file_id
        )));
    }
    // Critical section: from here a failure poisons the database.
    let _critical = crate::buffer::CriticalSection::new(&db.pool);
    let result = (|| -> Result<Applied> {
        let mut blocks = Vec::with_capacity(latched.len());
        for (w, idxs) in latched.iter_mut() {
            // The first change after the redo point logs the whole page, so
            // a write of it torn by a crash is repaired by redo.
            let change = Change::Rows {
                protection,
                redo: *redo,
            };
            let needs_image = needs_image(change, crate::page::page_lsn(w.bytes()));
            w.mark_dirty();
            let mut data = Vec::new();
            for &i in idxs.iter() {
                let (_, key, change) = writes[i];
                let value = match change {
                    RowChange::Put(v) => Some(v.as_slice()),
                    RowChange::Delete => None,
                };
                apply_op(w.bytes_mut(), key, value).map_err(|_| {
                    Error::Invalid(format!(
                        "no room in {} for a change prepare made room for",
                        w.id()
                    ))
                })?;
                encode_op(&mut data, key, change);
            }
            let PageId { file_id, block } = w.id();
            let (image, data) = if needs_image {
                (Some(make_image(w.bytes())), Vec::new())
            } else {
                (None, data)
            };
            blocks.push(BlockRef {
                file_id,
                block,
                image,
                data,
            });
        }
        let main = tx
            .dropped_files
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        let (_, end) = db.wal.insert(&RecordData {
            kind: RecordKind::Commit,
            xid: tx.xid,
            blocks,
            main,
        })?;
        drop(dropped);
        drop(redo);
        let mut emptied = Vec::new();
        for (w, _) in latched.iter_mut() {
            w.set_lsns(end, end);
            if node::count(w.bytes()) == 0 {
                emptied.push((w.id().file_id, node::low_fence(w.bytes()).to_vec()));
            }
        }
        Ok((end, emptied))
    })();
    match result {
        Ok(done) => Ok(Some(done)),
        Err(e) => {
            db.poison(&e);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_len_is_what_encode_op_writes() {
        for change in [RowChange::Put(vec![7; 300]), RowChange::Delete] {
            let mut out = Vec::new();
            encode_op(&mut out, b"some key", &change);
            assert_eq!(op_len(b"some key", &change), out.len());
        }
    }
}
