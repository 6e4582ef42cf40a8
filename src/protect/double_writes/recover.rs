//! Recovery's use of the double-write area (issue 11 item 6): before redo,
//! read every shard and `dw/deferred`, plan the restores ([`plan_restore`]),
//! write the planned copies in place and fsync their data files.
//!
//! `dw/deferred`'s slots are copies too ([`super::deferred`]). The slots the
//! newest valid manifest names hold pages whose data files may be older
//! than the redo point: they are checked against their entries and usable
//! at any LSN, and a damaged one is an error unless its page is as new. A
//! slot a write-back list names, holding the bytes the list's CRC-32C
//! names (a write-back writes pages in place straight from their fsynced
//! slots), is usable in the window like an area copy; any other slot was
//! never relied on and is skipped (`deferred_scan`).
//!
//! Runs whenever `DIR/dw/` exists, whatever mode the control file names: a
//! copy is only ever written over a page that is bad or not newer, so an
//! area left by an earlier mode can do no harm, and a crash in the middle of
//! a switch out of double writes still finds its copies. Without `dw/` the
//! only cost is one lookup of the directory.

use super::area::{
    check_image, scan_shard, CopyImage, Expect, Shard, SlotCopy, AREA_DIR, DEFERRED_FILE,
};
use super::deferred_scan::{self, ManifestStart};
use super::manifest::is_legacy_manifest_name;
use super::restore::{plan_restore, BadPage, PageCheck, Restore, RestoreCounts, RestoreInput};
use super::shard_file::read_blocks;
use crate::buffer::DataFiles;
use crate::control::ControlFile;
use crate::error::{Error, Result};
use crate::file::segmented::PageRead;
use crate::file::{FileKind, FileSystem, Issuer, OpenOptions};
use crate::page::{page_lsn, verify_page, PageError, PageState};
use crate::recovery::WalScan;
use std::collections::BTreeSet;
use std::path::Path;

/// What the area held and what was done with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AreaRecovery {
    /// Shard files read.
    pub shards: u64,
    /// Leftover `dw/shard-<n>.tmp` files deleted.
    pub tmp_removed: u64,
    /// Batch headers that failed a check (torn batches, never relied on).
    pub headers_damaged: u64,
    /// Area blocks that failed to read (EIO: a sector a torn write left
    /// unreadable), taken for torn ones.
    pub blocks_unreadable: u64,
    /// The highest batch sequence found: the write path starts above it.
    pub max_batch_seq: u64,
    /// Entries of the manifest of `dw/deferred` recovery took.
    pub manifest_entries: u64,
    /// Newer manifests it passed over, their fsync perhaps unreturned.
    pub manifests_passed_over: u64,
    /// `dw/deferred`: slots read, and the intact copies among them that
    /// may be restored (those the manifest names, and the newest of each
    /// page in the window of usable copies).
    pub deferred_slots: u64,
    pub deferred_copies: u64,
    pub counts: RestoreCounts,
    /// Where the opening's first manifest may go.
    pub manifest_start: ManifestStart,
}

/// What an opening's write path starts from, as recovery left the area.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AreaStart {
    /// Above every batch sequence the area held.
    pub first_batch_seq: u64,
    pub manifest: ManifestStart,
}

impl AreaRecovery {
    pub fn start(&self) -> AreaStart {
        AreaStart {
            first_batch_seq: self.max_batch_seq + 1,
            manifest: self.manifest_start.clone(),
        }
    }
}

/// Restores pages from `dir`'s double-write area, if it has one, before
/// redo. The window of usable copies is [the control file's redo point,
/// `scan.end`]: the WAL's first pass has already run (step 3 of the opening
/// sequence), so its end is exact, not a guess; a page LSN is the end of the
/// last record applied to it, so no page that the WAL accounts for lies
/// beyond it.
pub fn restore_before_redo(
    fs: &dyn FileSystem,
    dir: &Path,
    control: &ControlFile,
    files: &DataFiles,
    scan: &WalScan,
) -> Result<AreaRecovery> {
    let area_dir = dir.join(AREA_DIR);
    let mut out = AreaRecovery::default();
    if !fs.exists(&area_dir) {
        // Nothing to restore; an error only if the control file relied on
        // a manifest there (the whole directory lost).
        deferred_scan::scan(fs, dir, control, (control.redo_lsn, scan.end))?;
        return Ok(out);
    }
    let settings = &control.settings;
    let d = deferred_scan::scan(fs, dir, control, (control.redo_lsn, scan.end))?;
    out.manifest_entries = d.manifest_entries;
    out.manifests_passed_over = d.manifests_passed_over;
    out.deferred_slots = d.slots;
    out.blocks_unreadable += d.unreadable;
    out.deferred_copies = (d.copies.len() + d.durable.len()) as u64;
    out.manifest_start = d.start;
    let mut copies = d.copies;
    let mut damaged = Vec::new();
    let durable = d.durable;
    let durable_damaged = d.durable_damaged;
    for path in fs.list_dir(&area_dir)? {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if is_legacy_manifest_name(name) || name == DEFERRED_FILE {
            continue;
        }
        let Some(rest) = name.strip_prefix("shard-") else {
            continue;
        };
        // A shard being created never held a batch (docs/FORMAT.md).
        if rest.ends_with(".tmp") {
            fs.remove(&path, FileKind::DoubleWrite, Issuer::Recovery)?;
            out.tmp_removed += 1;
            continue;
        }
        let shard = rest
            .parse::<u32>()
            .ok()
            .and_then(Shard::from_number)
            .ok_or_else(|| {
                Error::corruption(
                    &path,
                    "file name",
                    "not a shard this build knows (0 checkpointer, 1 background writer, 2 client evictions)",
                )
            })?;
        let file = fs.open(&path, FileKind::DoubleWrite, OpenOptions::read_only())?;
        let (bytes, unreadable) = read_shard(file.as_ref(), settings.page_size as usize)?;
        out.blocks_unreadable += unreadable;
        let expect = Expect {
            page_size: settings.page_size,
            system_id: control.system_id,
            shard,
        };
        let s = scan_shard(&path, &bytes, &expect)?;
        out.shards += 1;
        out.headers_damaged += s.headers_damaged;
        out.max_batch_seq = out.max_batch_seq.max(s.max_batch_seq);
        copies.extend(s.copies);
        damaged.extend(s.damaged);
    }
    if out.tmp_removed > 0 {
        fs.sync_dir(&area_dir, Issuer::Recovery)?;
    }
    // Void: files dropped later in the WAL, and files gone from disk (a drop
    // before the redo point whose removal completed). A file new since the
    // checkpoint whose first in-place write never happened is gone too; its
    // pages are new since the checkpoint, so redo rebuilds them from the
    // images their structure changes logged.
    let on_disk: BTreeSet<u32> = files.ids_on_disk()?.into_iter().collect();
    let is_dropped = |id: u32| scan.dropped_files.contains(&id) || !on_disk.contains(&id);
    let mut buf = vec![0u8; settings.page_size as usize];
    let check_page = |file_id: u32, block: u32| -> Result<PageCheck> {
        check_data_page(files, settings.data_checksums, file_id, block, &mut buf)
    };
    let plan = plan_restore(
        RestoreInput {
            copies,
            damaged: &damaged,
            durable,
            durable_damaged: &durable_damaged,
            redo_lsn: control.redo_lsn,
            wal_end: scan.end,
        },
        is_dropped,
        check_page,
    )?;
    let mut images = CopyReader::new(fs, dir, settings.page_size as usize);
    // Slots of dw/deferred in file order: its reads wait, one at a time,
    // while the in-place writes go to the page cache and are sorted by the
    // fsync below. One restore per page, so the order is free.
    let mut in_read_order: Vec<&Restore> = plan.restores.iter().collect();
    in_read_order.sort_by_key(|r| match r.copy.image {
        CopyImage::Held(_) => None,
        CopyImage::DeferredSlot { slot, .. } => Some(slot),
    });
    for r in in_read_order {
        let c = &r.copy;
        let image = images.bytes(c)?;
        let file = files.get(c.file_id)?;
        file.write_pages(c.block as u64, &[image], Issuer::Recovery)?;
        tracing::warn!(
            file = %file.path_of_block(c.block as u64).display(),
            file_id = c.file_id,
            block = c.block,
            copy_lsn = %c.lsn,
            batch = c.batch_seq,
            reason = ?r.reason,
            "page restored from the double-write area"
        );
    }
    // Durable before redo builds on them, as a checkpoint's pages are. Only
    // the files written are fsynced; the directory too, for a segment a
    // restore created.
    if !plan.restores.is_empty() {
        files.sync_all(Issuer::Recovery)?;
    }
    out.counts = plan.counts;
    tracing::info!(
        shards = out.shards,
        copies = out.counts.copies,
        restored = out.counts.restored,
        before_redo = out.counts.before_redo,
        beyond_wal_end = out.counts.beyond_wal_end,
        void_dropped = out.counts.void_dropped,
        torn_batches = out.headers_damaged,
        deferred_slots = out.deferred_slots,
        deferred_copies = out.deferred_copies,
        manifest_entries = out.manifest_entries,
        manifests_passed_over = out.manifests_passed_over,
        durable_copies = out.counts.durable,
        unreadable_blocks = out.blocks_unreadable,
        "double-write area read"
    );
    Ok(out)
}

/// The bytes of the copies a restore writes: held ones as they are, a
/// slot of `dw/deferred` read again and checked against what the scan
/// found there.
struct CopyReader<'a> {
    fs: &'a dyn FileSystem,
    path: std::path::PathBuf,
    file: Option<std::sync::Arc<dyn crate::file::File>>,
    buf: Vec<u8>,
}

impl<'a> CopyReader<'a> {
    fn new(fs: &'a dyn FileSystem, dir: &Path, page_size: usize) -> CopyReader<'a> {
        CopyReader {
            fs,
            path: dir.join(AREA_DIR).join(DEFERRED_FILE),
            file: None,
            buf: vec![0u8; page_size],
        }
    }

    fn bytes<'c>(&'c mut self, c: &'c SlotCopy) -> Result<&'c [u8]> {
        let (slot, crc) = match &c.image {
            CopyImage::Held(bytes) => return Ok(bytes),
            CopyImage::DeferredSlot { slot, crc } => (*slot, *crc),
        };
        if self.file.is_none() {
            let file = self
                .fs
                .open(&self.path, FileKind::DoubleWrite, OpenOptions::read_only())?;
            self.file = Some(file);
        }
        let file = self.file.as_deref().expect("opened above");
        let page_size = self.buf.len();
        read_blocks(
            file,
            slot as u64 * page_size as u64,
            &mut self.buf,
            page_size,
        )?;
        if let Some(damage) = check_image(Some(&self.buf), c.file_id, c.block, c.lsn, crc) {
            return Err(Error::corruption(
                &self.path,
                format!("slot {slot}"),
                format!(
                    "the copy of data file {} block {} (LSN {}) read back differently \
                     ({damage:?}) from how recovery found it a moment before",
                    c.file_id, c.block, c.lsn
                ),
            ));
        }
        Ok(&self.buf)
    }
}

/// Reads a whole shard file. A block that fails with EIO (a sector a write
/// was cut off in) reads as zeros, so it fails its checks as a torn block
/// does: a batch whose header is unreadable was never relied on (its pages
/// go in place only after its fsync, and its blocks are overwritten only
/// once they are durable in place), and an unreadable image is a damaged
/// slot. Returns the bytes and the count of such blocks.
fn read_shard(file: &dyn crate::file::File, page_size: usize) -> Result<(Vec<u8>, u64)> {
    let mut bytes = vec![0u8; file.len()? as usize];
    let unreadable = read_blocks(file, 0, &mut bytes, page_size)?;
    Ok((bytes, unreadable))
}

/// Reads a data page and checks it as the buffer pool does (checksum,
/// header naming file and block, free-space pointers), for the restore rule.
fn check_data_page(
    files: &DataFiles,
    alg: crate::settings::ChecksumAlgorithm,
    file_id: u32,
    block: u32,
    buf: &mut [u8],
) -> Result<PageCheck> {
    let file = files.get(file_id)?;
    match file.try_read_page(block as u64, buf, Issuer::Recovery) {
        Ok(PageRead::Whole) => {}
        Ok(PageRead::BeyondEnd | PageRead::Short { .. }) => {
            return Ok(PageCheck::Bad(BadPage::Short))
        }
        Err(Error::UnreadablePage { .. }) => return Ok(PageCheck::Bad(BadPage::Unreadable)),
        Err(e) => return Err(e),
    }
    let checked = verify_page(buf, alg, file_id, block).and_then(|state| match state {
        PageState::Valid => crate::btree::validate_page(buf)
            .map(|()| state)
            .map_err(PageError::BadHeader),
        PageState::New => Ok(state),
    });
    Ok(match checked {
        Ok(PageState::Valid) => PageCheck::Good(page_lsn(buf)),
        Ok(PageState::New) => PageCheck::Bad(BadPage::AllZeros),
        Err(PageError::Checksum { .. }) => PageCheck::Bad(BadPage::Checksum),
        Err(_) => PageCheck::Bad(BadPage::Header),
    })
}

/// A whole `dw/shard-0` file of 16 area blocks holding one batch of
/// `pages` at block 1 (none: an empty area), as the write path will leave
/// it: for tests that hand-craft an area.
#[cfg(test)]
pub(crate) fn shard_0_for_tests(
    page_size: usize,
    system_id: u64,
    pages: &[super::area::BatchPage<'_>],
) -> Vec<u8> {
    let area_blocks = 16u32;
    let header = super::area::FileHeader {
        page_size: page_size as u32,
        area_blocks,
        shard: Shard::Checkpointer,
        system_id,
    };
    let mut bytes = header.encode();
    if !pages.is_empty() {
        let batch = super::area::encode_batch(Shard::Checkpointer, 7, 1, page_size, pages);
        bytes.extend(batch.expect("a valid test batch"));
    }
    bytes.resize((1 + area_blocks as usize) * page_size, 0);
    bytes
}

#[cfg(test)]
#[path = "recover_tests.rs"]
pub(super) mod tests;
