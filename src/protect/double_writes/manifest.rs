//! Manifests (docs/FORMAT.md, "Manifest pages in `dw/deferred`"): which
//! slots of `dw/deferred` a checkpoint made durable, so recovery trusts
//! them at any LSN, even below the redo point.
//!
//! Deferred pages stay in `dw/deferred` across checkpoints (seed 000's
//! "second log"): once a checkpoint's redo point passes a deferred page's
//! changes, its slot holds the only copy of the page as of that point. The
//! manifest names those slots. It is written into free slots of the same
//! file, so one fsync makes the slots and the manifest durable together,
//! before the control file names the redo point and the manifest's
//! sequence. A crash before that fsync returns may leave the manifest on
//! disk without some slot it names: recovery passes over such a manifest
//! to the one before it ([`choose`]), whose pages and slots are reused
//! only after a later manifest is durable (`deferred.rs`).
//!
//! A write-back lists the slots it claimed in the same layout under a
//! magic of its own ([`Manifest::encode_list_pages`], [`decode_list_part`]),
//! before its fsync: between that fsync and its data-file fsyncs a slot no
//! manifest names may be its page's only whole copy, and recovery uses
//! such a slot only where a list names it with its CRC-32C (a page
//! checksum may be 16 bits).
//!
//! Earlier builds wrote each manifest to a file of its own,
//! `dw/manifest-<seq mod 2>` (format version 1), fsynced after an fsync of
//! `dw/deferred`: two fsyncs per checkpoint. Recovery still reads those.

use crate::checksum::crc::crc32c;
use crate::error::Result;
use crate::file::{File, Issuer};
use crate::lsn::Lsn;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"UNTORNDM";
/// A write-back list's pages: a manifest's layout under their own magic.
const LIST_MAGIC: &[u8; 8] = b"UNTORNWB";
/// What this build writes: a slot no manifest names is a copy only where
/// a write-back list names it.
pub const FORMAT_VERSION: u32 = 3;
/// Manifests of earlier builds in `dw/deferred`: read; any intact slot
/// they do not name was a copy then.
const UNLISTED_VERSION: u32 = 2;
const LEGACY_VERSION: u32 = 1;
const LEGACY_HEADER_BYTES: usize = 48;
const PART_HEADER_BYTES: usize = 64;
const ENTRY_BYTES: usize = 24;
const CRC_BYTES: usize = 4;

/// One durable slot: page `(file_id, block)` at `lsn` in slot `slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestEntry {
    pub file_id: u32,
    pub block: u32,
    pub slot: u32,
    /// CRC-32C of the slot's `page_size` bytes.
    pub image_crc: u32,
    pub lsn: Lsn,
}

/// A manifest, as written by one checkpoint (or an opening: empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub seq: u64,
    /// The writing checkpoint's redo point (an opening's: the control
    /// file's). [`choose`] compares it with the control file's.
    pub redo_lsn: Lsn,
    /// Sorted by (file_id, block).
    pub entries: Vec<ManifestEntry>,
}

/// What a manifest must match to be this database's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestOwner {
    pub page_size: u32,
    pub system_id: u64,
}

/// Entries on one manifest page.
pub fn entries_per_page(page_size: usize) -> usize {
    (page_size - PART_HEADER_BYTES - CRC_BYTES) / ENTRY_BYTES
}

/// The pages a manifest of `entries` entries takes.
pub fn pages_for(entries: usize, page_size: usize) -> usize {
    entries.div_ceil(entries_per_page(page_size)).max(1)
}

fn put_entry(b: &mut Vec<u8>, e: &ManifestEntry) {
    b.extend_from_slice(&e.file_id.to_le_bytes());
    b.extend_from_slice(&e.block.to_le_bytes());
    b.extend_from_slice(&e.slot.to_le_bytes());
    b.extend_from_slice(&e.image_crc.to_le_bytes());
    b.extend_from_slice(&e.lsn.0.to_le_bytes());
}

/// Reads the little-endian integers of a byte string the caller has
/// checked to be long enough.
struct Le<'a>(&'a [u8]);

impl Le<'_> {
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.0[at..at + 4].try_into().unwrap())
    }
    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.0[at..at + 8].try_into().unwrap())
    }
    fn entry(&self, at: usize) -> ManifestEntry {
        ManifestEntry {
            file_id: self.u32(at),
            block: self.u32(at + 4),
            slot: self.u32(at + 8),
            image_crc: self.u32(at + 12),
            lsn: Lsn(self.u64(at + 16)),
        }
    }
    /// Magic, page size and system id.
    fn owned_by(&self, owner: ManifestOwner, magic: &[u8; 8]) -> bool {
        &self.0[..8] == magic && self.u32(12) == owner.page_size && self.u64(16) == owner.system_id
    }
}

impl Manifest {
    /// Bytes 0 to 43, the same in every version: magic, version, owner,
    /// sequence, redo point, entry count.
    fn put_header(&self, b: &mut Vec<u8>, owner: ManifestOwner, magic: &[u8; 8], version: u32) {
        b.extend_from_slice(magic);
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&owner.page_size.to_le_bytes());
        b.extend_from_slice(&owner.system_id.to_le_bytes());
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&self.redo_lsn.0.to_le_bytes());
        b.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
    }

    /// The manifest as `dw/deferred` pages, each `owner.page_size` bytes.
    pub fn encode_pages(&self, owner: ManifestOwner) -> Vec<Vec<u8>> {
        self.encode_as(owner, MAGIC)
    }

    /// The entries as a write-back list's pages (docs/FORMAT.md,
    /// "Write-back lists"): the same layout, another magic.
    pub fn encode_list_pages(&self, owner: ManifestOwner) -> Vec<Vec<u8>> {
        self.encode_as(owner, LIST_MAGIC)
    }

    fn encode_as(&self, owner: ManifestOwner, magic: &[u8; 8]) -> Vec<Vec<u8>> {
        let page_size = owner.page_size as usize;
        let per_page = entries_per_page(page_size);
        let parts = pages_for(self.entries.len(), page_size);
        (0..parts)
            .map(|part| {
                let from = (part * per_page).min(self.entries.len());
                let to = (from + per_page).min(self.entries.len());
                let mut b = Vec::with_capacity(page_size);
                self.put_header(&mut b, owner, magic, FORMAT_VERSION);
                b.extend_from_slice(&(part as u32).to_le_bytes());
                b.extend_from_slice(&(parts as u32).to_le_bytes());
                b.extend_from_slice(&((to - from) as u32).to_le_bytes());
                b.extend_from_slice(&[0u8; 8]);
                self.entries[from..to]
                    .iter()
                    .for_each(|e| put_entry(&mut b, e));
                b.resize(page_size - CRC_BYTES, 0);
                let crc = crc32c(&b);
                b.extend_from_slice(&crc.to_le_bytes());
                b
            })
            .collect()
    }

    /// An older build's manifest file (format version 1), or None where it
    /// fails a check (torn, never written, another database's).
    pub fn decode_legacy(bytes: &[u8], owner: ManifestOwner) -> Option<Manifest> {
        if bytes.len() < LEGACY_HEADER_BYTES + CRC_BYTES {
            return None;
        }
        let le = Le(bytes);
        if !le.owned_by(owner, MAGIC) || le.u32(8) != LEGACY_VERSION {
            return None;
        }
        // Checked before anything is allocated for the entries.
        let end = (le.u32(40) as usize)
            .checked_mul(ENTRY_BYTES)
            .and_then(|n| n.checked_add(LEGACY_HEADER_BYTES))
            .filter(|&end| end + CRC_BYTES <= bytes.len())?;
        if crc32c(&bytes[..end]) != le.u32(end) {
            return None;
        }
        Some(Manifest {
            seq: le.u64(24),
            redo_lsn: Lsn(le.u64(32)),
            entries: (LEGACY_HEADER_BYTES..end)
                .step_by(ENTRY_BYTES)
                .map(|at| le.entry(at))
                .collect(),
        })
    }
}

#[cfg(test)]
impl Manifest {
    /// The manifest's pages as the build before write-back lists wrote
    /// them (format version 2).
    pub fn encode_pages_version_2(&self, owner: ManifestOwner) -> Vec<Vec<u8>> {
        let mut pages = self.encode_pages(owner);
        for page in &mut pages {
            let n = page.len() - CRC_BYTES;
            page[8..12].copy_from_slice(&UNLISTED_VERSION.to_le_bytes());
            let crc = crc32c(&page[..n]);
            page[n..].copy_from_slice(&crc.to_le_bytes());
        }
        pages
    }

    /// The manifest as an older build wrote it to its own file.
    pub fn encode_legacy(&self, owner: ManifestOwner) -> Vec<u8> {
        let mut b = Vec::new();
        self.put_header(&mut b, owner, MAGIC, LEGACY_VERSION);
        b.extend_from_slice(&0u32.to_le_bytes());
        self.entries.iter().for_each(|e| put_entry(&mut b, e));
        let crc = crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }
}

/// One page of a manifest, as read from a slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestPart {
    /// The format version it was written in (2 or 3).
    pub version: u32,
    pub seq: u64,
    pub redo_lsn: Lsn,
    pub entry_count: u32,
    pub part: u32,
    pub parts: u32,
    pub entries: Vec<ManifestEntry>,
}

/// The manifest page in `page`, or None where `page` is not one that
/// passes its checks (a page image, a torn or foreign manifest page).
pub fn decode_part(page: &[u8], owner: ManifestOwner) -> Option<ManifestPart> {
    decode_as(page, owner, MAGIC, UNLISTED_VERSION)
}

/// The write-back list page in `page`, or None where `page` is not one
/// that passes its checks. Each stands on its own (docs/FORMAT.md).
pub fn decode_list_part(page: &[u8], owner: ManifestOwner) -> Option<ManifestPart> {
    decode_as(page, owner, LIST_MAGIC, FORMAT_VERSION)
}

/// A page with `magic` of a version from `oldest` to this build's.
fn decode_as(
    page: &[u8],
    owner: ManifestOwner,
    magic: &[u8; 8],
    oldest: u32,
) -> Option<ManifestPart> {
    let page_size = owner.page_size as usize;
    if page.len() != page_size || page_size < PART_HEADER_BYTES + ENTRY_BYTES + CRC_BYTES {
        return None;
    }
    let le = Le(page);
    let version = le.u32(8);
    if !le.owned_by(owner, magic)
        || !(oldest..=FORMAT_VERSION).contains(&version)
        || crc32c(&page[..page_size - 4]) != le.u32(page_size - 4)
    {
        return None;
    }
    let (entry_count, part, parts, here) = (
        le.u32(40) as usize,
        le.u32(44),
        le.u32(48),
        le.u32(52) as usize,
    );
    // The counts must agree with each other, so a whole set of parts
    // holds exactly `entry_count` entries.
    let per_page = entries_per_page(page_size);
    let first = part as usize * per_page;
    let consistent = parts as usize == pages_for(entry_count, page_size)
        && part < parts
        && here == entry_count.saturating_sub(first).min(per_page);
    if !consistent {
        return None;
    }
    Some(ManifestPart {
        version,
        seq: le.u64(24),
        redo_lsn: Lsn(le.u64(32)),
        entry_count: entry_count as u32,
        part,
        parts,
        entries: (0..here)
            .map(|i| le.entry(PART_HEADER_BYTES + i * ENTRY_BYTES))
            .collect(),
    })
}

/// A whole manifest found, and the slots of `dw/deferred` holding its
/// pages (none for an older build's file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundManifest {
    pub manifest: Manifest,
    pub slots: Vec<u32>,
    /// The format version it was written in.
    pub version: u32,
}

impl FoundManifest {
    /// Whether its build used a slot it does not name only where a
    /// write-back list names it (format version 3); earlier builds took
    /// any intact one in the window (docs/FORMAT.md).
    pub fn wants_lists(&self) -> bool {
        self.version >= FORMAT_VERSION
    }
}

/// The manifest pages found in `dw/deferred`, gathered by sequence.
#[derive(Default)]
pub struct ManifestParts {
    by_seq: BTreeMap<u64, BTreeMap<u32, (u32, ManifestPart)>>,
}

impl ManifestParts {
    /// The page in `slot`. A second page of the same sequence and part is
    /// ignored; pages of one sequence whose headers disagree never make a
    /// whole manifest.
    pub fn add(&mut self, slot: u32, part: ManifestPart) {
        let parts = self.by_seq.entry(part.seq).or_default();
        parts.entry(part.part).or_insert((slot, part));
    }

    /// The highest sequence of any page found.
    pub fn max_seq(&self) -> Option<u64> {
        self.by_seq.keys().next_back().copied()
    }

    /// The manifests every page of which was found, newest first.
    pub fn whole(self) -> Vec<FoundManifest> {
        let mut out = Vec::new();
        for (seq, parts) in self.by_seq.into_iter().rev() {
            let Some((_, first)) = parts.values().next() else {
                continue;
            };
            let same = |p: &ManifestPart| {
                (p.version, p.redo_lsn, p.entry_count, p.parts)
                    == (
                        first.version,
                        first.redo_lsn,
                        first.entry_count,
                        first.parts,
                    )
            };
            if parts.len() != first.parts as usize || !parts.values().all(|(_, p)| same(p)) {
                continue;
            }
            let (redo_lsn, version) = (first.redo_lsn, first.version);
            let mut slots = Vec::with_capacity(parts.len());
            let mut entries = Vec::new();
            for (slot, p) in parts.into_values() {
                slots.push(slot);
                entries.extend(p.entries);
            }
            out.push(FoundManifest {
                manifest: Manifest {
                    seq,
                    redo_lsn,
                    entries,
                },
                slots,
                version,
            });
        }
        out
    }
}

/// Which of `found` (newest first) recovery takes, by index. The newest,
/// if every entry `passes` (its slot holds the image it names) or its
/// `redo_lsn` is at or below `control_redo` (the one the control file's
/// checkpoint relied on, or an opening's: its damaged entries are damage).
/// Otherwise its fsync may not have returned, and the one before it is
/// taken: only the newest can be incomplete, since each manifest is
/// written after the fsync of the one before, whose pages and slots are
/// reused only after that later one is durable (docs/FORMAT.md, "Why one
/// fsync is enough"). Except where the one before is older than `relied`,
/// the control file's `deferred_manifest`: the manifest it relied on is
/// gone, which the reuse rule allows only once a later one was durable,
/// so the newest was, and its failing entries are damage.
pub fn choose(
    found: &[FoundManifest],
    control_redo: Lsn,
    relied: u64,
    passes: impl Fn(&Manifest) -> bool,
) -> Option<usize> {
    let newest = &found.first()?.manifest;
    let fallback_too_old = found.get(1).is_none_or(|f| f.manifest.seq < relied);
    if newest.redo_lsn <= control_redo || passes(newest) || fallback_too_old {
        Some(0)
    } else {
        Some(1)
    }
}

/// The file an older build wrote manifest `seq` to.
pub fn legacy_manifest_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(super::area::AREA_DIR)
        .join(format!("manifest-{}", seq % 2))
}

/// Whether `name` is one of an older build's manifest files.
pub fn is_legacy_manifest_name(name: &str) -> bool {
    name == "manifest-0" || name == "manifest-1"
}

/// A manifest file's bytes; None where a read fails with EIO (a sector torn
/// at a power loss: as good as a torn manifest). Other errors stop.
pub fn read_bytes(file: &dyn File, who: Issuer) -> Result<Option<Vec<u8>>> {
    let mut bytes = vec![0u8; file.len()? as usize];
    match file.read_exact_at(&mut bytes, 0, who) {
        Ok(()) => Ok(Some(bytes)),
        Err(e) if super::shard_file::is_eio(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
