//! Recovery's reading of `dw/deferred` (docs/FORMAT.md): which manifest to
//! trust, the slots it names, and the other intact page images.
//!
//! One pass over the file finds the manifest and write-back list pages and
//! a CRC and page header of every other slot, which is all
//! [`manifest::choose`] needs to tell a manifest whose fsync never
//! returned. Then the named slots are read again, one by one, and checked.
//! No image is kept in memory: a copy names its slot, read a third time
//! only if it is restored.
//!
//! A slot the manifest taken does not name is a copy only where a
//! write-back list names it with its CRC-32C: a write-back's in-place
//! writes rely on no other, and a slot an eviction rewrote that a power
//! cut tore may pass a 16-bit page checksum (docs/FORMAT.md). An earlier
//! build's manifest (version 2 or 1) keeps that build's rule: any intact
//! slot.

use super::area::{check_image, CopyImage, SlotCopy, SlotDamage, AREA_DIR, DEFERRED_FILE};
use super::manifest::{
    self, legacy_manifest_path, FoundManifest, ManifestEntry, ManifestOwner, ManifestParts,
};
use super::restore::DamagedDurable;
use super::shard_file::read_blocks;
use crate::checksum::crc::crc32c;
use crate::control::ControlFile;
use crate::error::{Error, Result};
use crate::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use crate::lsn::Lsn;
use crate::page::{read_header, verify_page, PageState};
use crate::settings::ChecksumAlgorithm;
use std::collections::HashMap;
use std::path::Path;

/// Slots read from `dw/deferred` at a time: the file may hold a gigabyte.
const READ_SLOTS: usize = 256;

/// Where an opening's first manifest may go, as recovery left
/// `dw/deferred`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManifestStart {
    /// The highest manifest sequence seen (any page of one, an older
    /// build's file, the control file's): the opening's goes above it.
    pub last_seq: u64,
    /// Slots holding the pages of the manifest recovery took, and the
    /// slots it names, sorted: the opening's must not overwrite them
    /// before it is durable, or a torn write there makes that manifest fail
    /// and the next recovery refuse what this one recovered.
    pub keep_slots: Vec<u32>,
    /// The control file's redo point, stamped on the opening's manifest.
    pub redo: Lsn,
}

/// What `dw/deferred` held.
#[derive(Default)]
pub(super) struct DeferredScan {
    /// Slots read (whole pages in the file).
    pub slots: u64,
    /// Slots that failed with EIO.
    pub unreadable: u64,
    /// The newest copy of each page within the window, among slots the
    /// manifest taken does not name and a write-back list does.
    pub copies: Vec<SlotCopy>,
    /// The slots the manifest taken names, intact or not.
    pub durable: Vec<SlotCopy>,
    pub durable_damaged: Vec<DamagedDurable>,
    /// Entries of the manifest taken.
    pub manifest_entries: u64,
    /// Newer manifests passed over: one of their slots failed and they
    /// were written after the control file's redo point (0 or 1).
    pub manifests_passed_over: u64,
    pub start: ManifestStart,
}

/// A slot's page header, as pass one found it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Head {
    file_id: u32,
    block: u32,
    lsn: Lsn,
    /// It passes `verify_page` (what an earlier build's rule asks).
    intact: bool,
}

/// Reads `dw/deferred` and an older build's manifest files. Copies of
/// slots no manifest names count only with an LSN in `window` (redo point,
/// end of the WAL). Without page checksums nothing tells a torn slot from
/// an intact one: none is used (double writes refuse to run without them).
pub(super) fn scan(
    fs: &dyn FileSystem,
    dir: &Path,
    control: &ControlFile,
    window: (Lsn, Lsn),
) -> Result<DeferredScan> {
    let settings = &control.settings;
    let page_size = settings.page_size as usize;
    let owner = ManifestOwner {
        page_size: settings.page_size,
        system_id: control.system_id,
    };
    let path = dir.join(AREA_DIR).join(DEFERRED_FILE);
    let mut out = DeferredScan {
        start: ManifestStart {
            last_seq: control.deferred_manifest,
            keep_slots: Vec::new(),
            redo: control.redo_lsn,
        },
        ..DeferredScan::default()
    };
    if settings.data_checksums == ChecksumAlgorithm::Off {
        return Ok(out);
    }
    let mut found = read_legacy(fs, dir, owner)?;
    let file = if fs.exists(&path) {
        Some(fs.open(&path, FileKind::DoubleWrite, OpenOptions::read_only())?)
    } else {
        None
    };
    // Pass one: manifest and list pages, each slot's CRC and header.
    let mut crcs: Vec<u32> = Vec::new();
    let mut heads: Vec<Option<Head>> = Vec::new();
    let mut listed: Vec<ManifestEntry> = Vec::new();
    if let Some(file) = &file {
        let mut parts = ManifestParts::default();
        out.slots = file.len()? / page_size as u64;
        let mut buf = vec![0u8; READ_SLOTS * page_size];
        let mut slot = 0u64;
        while slot < out.slots {
            let n = (out.slots - slot).min(READ_SLOTS as u64) as usize;
            let chunk = &mut buf[..n * page_size];
            out.unreadable +=
                read_blocks(file.as_ref(), slot * page_size as u64, chunk, page_size)?;
            for (i, image) in chunk.chunks_exact(page_size).enumerate() {
                let at = (slot as usize + i) as u32;
                crcs.push(crc32c(image));
                heads.push(None);
                if let Some(part) = manifest::decode_part(image, owner) {
                    parts.add(at, part);
                    continue;
                }
                if let Some(part) = manifest::decode_list_part(image, owner) {
                    listed.extend(part.entries);
                    continue;
                }
                let Some(h) = read_header(image).ok() else {
                    continue;
                };
                let intact = matches!(
                    verify_page(image, settings.data_checksums, h.file_id, h.block),
                    Ok(PageState::Valid)
                );
                heads[at as usize] = Some(Head {
                    file_id: h.file_id,
                    block: h.block,
                    lsn: h.lsn,
                    intact,
                });
            }
            slot += n as u64;
        }
        out.start.last_seq = out.start.last_seq.max(parts.max_seq().unwrap_or(0));
        found.extend(parts.whole());
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.manifest.seq));
    if let Some(seq) = found.first().map(|f| f.manifest.seq) {
        out.start.last_seq = out.start.last_seq.max(seq);
    }
    let holds_its_image = |e: &ManifestEntry| crcs.get(e.slot as usize) == Some(&e.image_crc);
    let relied = control.deferred_manifest;
    let taken = manifest::choose(&found, control.redo_lsn, relied, |m| {
        m.entries.iter().all(holds_its_image)
    })
    .map(|i| {
        out.manifests_passed_over = i as u64;
        found.swap_remove(i)
    });
    if relied > 0 && taken.as_ref().is_none_or(|t| t.manifest.seq < relied) {
        return Err(Error::corruption(
            &path,
            "manifest",
            format!(
                "the last checkpoint relied on manifest {relied}, and the newest whole one is {}: \
                 the versions at the redo point of the pages it named are not known to be anywhere",
                taken.map_or("none".to_string(), |t| t.manifest.seq.to_string())
            ),
        ));
    }
    let in_window = |lsn: Lsn| window.0 <= lsn && lsn <= window.1;
    // The slots that may be copies, whatever the manifest names.
    let candidates: Vec<SlotCopy> = if taken.as_ref().is_some_and(|t| !t.wants_lists()) {
        heads
            .iter()
            .enumerate()
            .filter_map(|(at, h)| h.map(|h| (at as u32, h)))
            .filter(|(_, h)| h.intact)
            .map(|(at, h)| copy_of(h.file_id, h.block, h.lsn, at, crcs[at as usize]))
            .collect()
    } else {
        listed
            .iter()
            .filter(|e| {
                let head = heads.get(e.slot as usize).copied().flatten();
                crcs.get(e.slot as usize) == Some(&e.image_crc)
                    && head
                        .is_some_and(|h| (h.file_id, h.block, h.lsn) == (e.file_id, e.block, e.lsn))
            })
            .map(|e| copy_of(e.file_id, e.block, e.lsn, e.slot, e.image_crc))
            .collect()
    };
    let Some(FoundManifest {
        manifest, slots, ..
    }) = taken
    else {
        out.copies = newest_in_window(candidates, in_window, |_| false);
        return Ok(out);
    };
    out.manifest_entries = manifest.entries.len() as u64;
    out.start.keep_slots = slots;
    out.start
        .keep_slots
        .extend(manifest.entries.iter().map(|e| e.slot));
    out.start.keep_slots.sort_unstable();
    out.start.keep_slots.dedup();
    // Pass two: the slots named, checked against their entries.
    let mut image = vec![0u8; page_size];
    let mut entries = manifest.entries;
    entries.sort_by_key(|e| e.slot);
    for e in &entries {
        let damage = match &file {
            Some(file) if (e.slot as u64) < out.slots => {
                let offset = e.slot as u64 * page_size as u64;
                read_blocks(file.as_ref(), offset, &mut image, page_size)?;
                check_image(Some(&image), e.file_id, e.block, e.lsn, e.image_crc)
            }
            _ => Some(SlotDamage::BeyondEnd),
        };
        match damage {
            None => out
                .durable
                .push(copy_of(e.file_id, e.block, e.lsn, e.slot, e.image_crc)),
            Some(damage) => out.durable_damaged.push(damaged_durable(e, damage)),
        }
    }
    // `entries` is sorted by slot: no set to build.
    let named = |slot: u32| entries.binary_search_by_key(&slot, |e| e.slot).is_ok();
    out.copies = newest_in_window(candidates, in_window, named);
    Ok(out)
}

/// The newest of `candidates` for each page, among those with an LSN
/// `in_window` in slots not `named` by the manifest taken.
fn newest_in_window(
    candidates: Vec<SlotCopy>,
    in_window: impl Fn(Lsn) -> bool,
    named: impl Fn(u32) -> bool,
) -> Vec<SlotCopy> {
    let mut newest: HashMap<(u32, u32), SlotCopy> = HashMap::new();
    for c in candidates {
        let CopyImage::DeferredSlot { slot, .. } = c.image else {
            unreachable!("a slot of dw/deferred")
        };
        if !in_window(c.lsn) || named(slot) {
            continue;
        }
        let key = (c.file_id, c.block);
        if newest.get(&key).is_some_and(|n| n.lsn >= c.lsn) {
            continue;
        }
        newest.insert(key, c);
    }
    newest.into_values().collect()
}

fn copy_of(file_id: u32, block: u32, lsn: Lsn, slot: u32, crc: u32) -> SlotCopy {
    SlotCopy {
        file_id,
        block,
        lsn,
        batch_seq: 0,
        image: CopyImage::DeferredSlot { slot, crc },
    }
}

fn damaged_durable(e: &ManifestEntry, damage: SlotDamage) -> DamagedDurable {
    DamagedDurable {
        slot: e.slot,
        file_id: e.file_id,
        block: e.block,
        lsn: e.lsn,
        damage,
    }
}

/// The manifests an older build left in `dw/manifest-<n>`, whole ones only.
fn read_legacy(
    fs: &dyn FileSystem,
    dir: &Path,
    owner: ManifestOwner,
) -> Result<Vec<FoundManifest>> {
    let mut found = Vec::new();
    for seq in 0..2 {
        let path = legacy_manifest_path(dir, seq);
        if !fs.exists(&path) {
            continue;
        }
        let file: std::sync::Arc<dyn File> =
            fs.open(&path, FileKind::DoubleWrite, OpenOptions::read_only())?;
        let bytes = manifest::read_bytes(file.as_ref(), Issuer::Recovery)?;
        if let Some(m) = bytes.and_then(|b| manifest::Manifest::decode_legacy(&b, owner)) {
            found.push(FoundManifest {
                manifest: m,
                slots: Vec::new(),
                version: 1,
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
#[path = "deferred_scan_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "deferred_scan_list_tests.rs"]
mod list_tests;
