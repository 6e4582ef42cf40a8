//! Crash recovery: redo from the last checkpoint's redo point.
//!
//! Rules:
//! - Two passes over the WAL from the redo point. The first finds the end of
//!   valid WAL (where new WAL continues), the highest transaction and file
//!   ids used, and the files dropped later in the log (their records are
//!   skipped: the file is gone or about to be removed).
//! - The second replays, in LSN order, every commit record (each holds a
//!   whole transaction: a commit that is not in the WAL left nothing on any
//!   page, by the flush rule) and every structure change, skipping a change
//!   to a page whose LSN already covers the record.
//! - A structure change restores full images, so it does not need the old
//!   page: a page that fails its checks is handed out as zeros and restored.
//!   So is a page the data file ends inside of (an append a power loss cut
//!   short): it is new since the last checkpoint (an older page was fsynced
//!   whole), so the split that made it logged its image after the redo
//!   point, in every mode.
//!   A row change to a damaged page cannot be replayed: recovery stops with
//!   an error naming the page (with `torn_page_protection = off` this is how
//!   a torn page is reported).

use crate::btree::node;
use crate::btree::ops::{apply_op, decode_ops};
use crate::buffer::{BufferPool, PageId};
use crate::checkpoint::CheckpointInfo;
use crate::control::ControlFile;
use crate::error::{Error, Result};
use crate::file::{FileSystem, Issuer};
use crate::lsn::Lsn;
use crate::page::page_lsn;
use crate::wal::{EndOfWal, ReadRecord, RecordKind, WalConfig, WalReader};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

/// What the first pass found.
#[derive(Debug, Clone)]
pub struct WalScan {
    /// Where valid WAL ends: new WAL is written from here.
    pub end: Lsn,
    pub end_reason: EndOfWal,
    /// The LSN of the last valid record.
    pub prev_record: Lsn,
    pub records: u64,
    pub max_xid: u64,
    pub max_file_id: u32,
    pub dropped_files: HashSet<u32>,
}

/// Figures of a recovery, for reports and the crash laboratory.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RecoveryReport {
    pub redo_start: Lsn,
    pub redo_end: Lsn,
    pub end_reason: String,
    pub records_replayed: u64,
    pub commits_replayed: u64,
    pub pages_restored_from_images: u64,
    /// Of those, the images stored compressed (`wal_compression`).
    pub compressed_images_restored: u64,
    pub changes_skipped_by_lsn: u64,
    /// Pages that failed their checks and were restored from an image.
    pub damaged_pages_repaired: Vec<String>,
    /// Pages restored from the double-write area before redo (0 without
    /// `dw/`; nothing writes the area until the double_writes mode exists).
    pub pages_repaired_from_double_writes: u64,
    /// Of those, copies below the redo point that the manifest of
    /// `dw/deferred` named (pages kept deferred across a checkpoint).
    pub pages_repaired_below_redo: u64,
    /// Of those, pages whose bytes were damaged (checksum, header, an
    /// unreadable sector); the rest were missing or older than their copy:
    /// an in-place write the crash lost.
    pub damaged_pages_repaired_from_double_writes: u64,
    /// Manifests of `dw/deferred` passed over: written after the control
    /// file's redo point with a slot that failed, their fsync perhaps
    /// never returned (docs/FORMAT.md, "Why one fsync is enough").
    pub double_write_manifests_passed_over: u64,
    /// Pages that failed their checks and that no record restored: they
    /// stay damaged on disk and fail when read.
    pub damaged_pages_left: Vec<String>,
    /// After an unclean shutdown: WAL segments, data files and
    /// double-write shard files fsynced before recovery trusted them, and
    /// how long that took.
    pub startup_sync_files: u64,
    pub startup_sync_ms: f64,
}

/// The file ids a commit record drops (its main data).
pub fn dropped_files(rec: &ReadRecord) -> Vec<u32> {
    if rec.data.kind != RecordKind::Commit {
        return Vec::new();
    }
    rec.data
        .main
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4")))
        .collect()
}

/// The first pass.
pub fn scan(fs: &Arc<dyn FileSystem>, dir: &Path, cfg: &WalConfig, start: Lsn) -> Result<WalScan> {
    let mut reader = WalReader::new(fs.clone(), dir, cfg, start)?;
    let (mut records, mut max_xid, mut max_file_id) = (0u64, 0u64, 0u32);
    let mut dropped = HashSet::new();
    while let Some(rec) = reader.next()? {
        records += 1;
        max_xid = max_xid.max(rec.data.xid);
        for b in &rec.data.blocks {
            max_file_id = max_file_id.max(b.file_id);
        }
        if rec.data.kind == RecordKind::Checkpoint {
            let info = CheckpointInfo::decode(&rec.data.main, rec.lsn)?;
            max_xid = max_xid.max(info.next_xid.saturating_sub(1));
            max_file_id = max_file_id.max(info.next_file_id.saturating_sub(1));
        }
        dropped.extend(dropped_files(&rec));
    }
    let (end, end_reason) = reader.end().expect("reader stopped");
    Ok(WalScan {
        end,
        end_reason,
        // The reader's: a padding record it skipped may be the last.
        prev_record: reader.prev_record(),
        records,
        max_xid,
        max_file_id,
        dropped_files: dropped,
    })
}

/// Refuses a WAL whose valid part ends before the end of the checkpoint
/// record the control file names: WAL that was durable (the control file
/// was written after it) is damaged, and continuing would write new WAL over
/// it and lose every commit after the damage. PostgreSQL stops there too
/// ("could not locate a valid checkpoint record").
pub fn check_reached_checkpoint(
    scan: &WalScan,
    wal_dir: &Path,
    control: &ControlFile,
) -> Result<()> {
    let checkpoint = control.checkpoint_lsn;
    if checkpoint == Lsn::INVALID || scan.end > checkpoint {
        return Ok(());
    }
    Err(Error::corruption(
        wal_dir,
        format!("LSN {}", scan.end),
        format!(
            "valid WAL ends at {} ({}), before the end of the checkpoint record at {checkpoint} that the control file names: WAL that was durable is damaged, and the commits after the damage cannot be recovered",
            scan.end, scan.end_reason
        ),
    ))
}

/// Redo logs its position every this many records.
const PROGRESS_EVERY: u64 = 100_000;

/// The second pass: replays every record from `start` into the pool
/// (which must be in recovery mode).
pub fn redo(
    pool: &BufferPool,
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    cfg: &WalConfig,
    start: Lsn,
    scan: &WalScan,
) -> Result<RecoveryReport> {
    let mut report = RecoveryReport {
        redo_start: start,
        ..Default::default()
    };
    let mut reader = WalReader::new(fs.clone(), dir, cfg, start)?;
    let mut restored = HashSet::new();
    tracing::info!(redo = %start, end = %scan.end, "redo starting");
    while let Some(rec) = reader.next()? {
        if rec.lsn >= scan.end {
            break;
        }
        report.records_replayed += 1;
        if report.records_replayed.is_multiple_of(PROGRESS_EVERY) {
            tracing::info!(at = %rec.lsn, end = %scan.end, records = report.records_replayed, "redo in progress");
        }
        match rec.data.kind {
            RecordKind::Commit => {
                report.commits_replayed += 1;
                replay_blocks(pool, &rec, scan, &mut report, &mut restored)?;
            }
            RecordKind::StructureChange => {
                replay_blocks(pool, &rec, scan, &mut report, &mut restored)?
            }
            _ => {}
        }
    }
    report.redo_end = scan.end;
    report.end_reason = scan.end_reason.to_string();
    for id in pool.damaged_pages() {
        if restored.contains(&id) {
            tracing::warn!(page = %id, "damaged page repaired from its WAL image");
            report.damaged_pages_repaired.push(id.to_string());
        } else {
            tracing::warn!(page = %id, "damaged page left as it is: no WAL record needs it");
            // Not needed by redo: drop the zeroed stand-in so that the next
            // read meets the damaged page itself and reports it.
            pool.discard_page(id);
            report.damaged_pages_left.push(id.to_string());
        }
    }
    tracing::info!(
        records = report.records_replayed,
        commits = report.commits_replayed,
        images_restored = report.pages_restored_from_images,
        repaired = report.damaged_pages_repaired.len(),
        left = report.damaged_pages_left.len(),
        end = %scan.end,
        end_reason = %report.end_reason,
        "redo done"
    );
    Ok(report)
}

/// Restores a block's full image, whatever the page holds, as PostgreSQL
/// does: a torn page may carry a new header (and LSN) over old sectors, and
/// without a checksum that catches it (off, or a 16-bit miss) an LSN check
/// would keep it. Later records are replayed over the image in LSN order.
fn restore_block(
    pool: &BufferPool,
    rec: &ReadRecord,
    b: &crate::wal::BlockRef,
    report: &mut RecoveryReport,
    restored: &mut HashSet<PageId>,
) -> Result<()> {
    let img = b.image.as_ref().expect("caller checked");
    let id = PageId::new(b.file_id, b.block);
    let mut w = pool.pin(id, Issuer::Recovery)?.into_write();
    w.mark_dirty();
    crate::protect::full_pages::restore_image(img, w.bytes_mut())
        .map_err(|e| corrupt_record(rec, &e))?;
    w.set_lsns(rec.end_lsn, rec.end_lsn);
    report.pages_restored_from_images += 1;
    if img.compression != crate::wal::ImageCompression::None {
        report.compressed_images_restored += 1;
    }
    restored.insert(id);
    Ok(())
}

/// Replays a record's blocks: full images are restored (structure changes
/// carry nothing else; with full_pages a commit logs the page at its first
/// change after a checkpoint), row changes applied.
fn replay_blocks(
    pool: &BufferPool,
    rec: &ReadRecord,
    scan: &WalScan,
    report: &mut RecoveryReport,
    restored: &mut HashSet<PageId>,
) -> Result<()> {
    for b in &rec.data.blocks {
        if scan.dropped_files.contains(&b.file_id) {
            continue;
        }
        if b.image.is_some() {
            restore_block(pool, rec, b, report, restored)?;
            continue;
        }
        if rec.data.kind == RecordKind::StructureChange {
            return Err(corrupt_record(rec, "structure change without a page image"));
        }
        let id = PageId::new(b.file_id, b.block);
        let mut w = pool.pin(id, Issuer::Recovery)?.into_write();
        if page_lsn(w.bytes()) >= rec.end_lsn {
            report.changes_skipped_by_lsn += 1;
            continue;
        }
        if crate::checksum::is_all_zero(w.bytes())
            || !crate::btree::tree::is_node(w.bytes())
            || !node::is_leaf(w.bytes())
        {
            let damaged = pool.damaged_pages().contains(&id);
            return Err(Error::corruption(
                format!("data file {}", b.file_id),
                format!("block {}", b.block),
                format!(
                    "redo of the commit at LSN {} needs this page, but it is {} and the WAL holds no image of it: \
                     the rows on it since the last checkpoint are lost (a torn or lost write; \
                     torn_page_protection full_pages or double_writes would have repaired it)",
                    rec.lsn,
                    if damaged { "damaged (it failed its checksum or structure check, or could not be read)" } else { "missing (all zeros)" }
                ),
            ));
        }
        let ops = decode_ops(&b.data).map_err(|e| corrupt_record(rec, &e))?;
        w.mark_dirty();
        for (key, value) in ops {
            apply_op(w.bytes_mut(), key, value)
                .map_err(|_| corrupt_record(rec, &format!("no room to replay a change on {id}")))?;
        }
        w.set_lsns(rec.end_lsn, rec.end_lsn);
    }
    Ok(())
}

fn corrupt_record(rec: &ReadRecord, detail: &str) -> Error {
    Error::corruption("WAL", format!("LSN {}", rec.lsn), detail.to_string())
}
