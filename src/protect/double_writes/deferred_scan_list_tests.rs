//! Recovery's reading of hand-made `dw/deferred` files on the simulated
//! file system: which slots the manifest taken does not name are copies
//! (only those a write-back list names with their CRC-32C; under an
//! earlier build's manifest, version 2, any intact one, as that build read
//! them), and which slots the opening's manifest must leave alone.

use super::*;
use crate::crashlab::sim::SimFileSystem;
use crate::file::IoStats;
use crate::page::{init_page, set_checksum, set_page_lsn, PageKind};
use crate::protect::double_writes::manifest::Manifest;
use crate::settings::{CreationSettings, TornPageProtection};
use std::sync::Arc;

const PS: usize = 8192;
const FILE_ID: u32 = 9;
const REDO: Lsn = Lsn(1000);
const WAL_END: Lsn = Lsn(5000);

fn dir() -> &'static Path {
    Path::new("/sim/scan")
}

fn control() -> ControlFile {
    let settings = CreationSettings {
        data_checksums: ChecksumAlgorithm::Fnv,
        torn_page_protection: TornPageProtection::DoubleWrites,
        ..CreationSettings::default()
    };
    let mut c = ControlFile::new(settings, 42);
    c.redo_lsn = REDO;
    c
}

fn owner() -> ManifestOwner {
    ManifestOwner {
        page_size: PS as u32,
        system_id: 42,
    }
}

/// A page of `FILE_ID` at `block` and `lsn`, its body `fill`, checksummed
/// with fnv (16 bits).
fn page(block: u32, lsn: u64, fill: u8) -> Vec<u8> {
    let mut p = vec![0u8; PS];
    init_page(&mut p, PageKind::Raw, FILE_ID, block, 0);
    p[PS / 2..].fill(fill);
    set_page_lsn(&mut p, Lsn(lsn));
    set_checksum(&mut p, ChecksumAlgorithm::Fnv);
    p
}

/// An entry naming `image` in `slot`.
fn entry(slot: u32, image: &[u8]) -> ManifestEntry {
    let h = read_header(image).unwrap();
    ManifestEntry {
        file_id: h.file_id,
        block: h.block,
        slot,
        image_crc: crc32c(image),
        lsn: h.lsn,
    }
}

fn list(entries: Vec<ManifestEntry>) -> Vec<u8> {
    let m = Manifest {
        seq: 1,
        redo_lsn: Lsn(0),
        entries,
    };
    m.encode_list_pages(owner()).remove(0)
}

/// An empty manifest of the control file's checkpoint.
fn empty_manifest() -> Manifest {
    Manifest {
        seq: 1,
        redo_lsn: REDO,
        entries: Vec::new(),
    }
}

/// What recovery reads in a `dw/deferred` holding `slots`.
fn scan_of(slots: &[Vec<u8>]) -> DeferredScan {
    let fs = SimFileSystem::new(Arc::new(IoStats::default()));
    let path = dir().join(AREA_DIR).join(DEFERRED_FILE);
    fs.create_dir_all(path.parent().unwrap()).unwrap();
    let file = fs
        .open(&path, FileKind::DoubleWrite, OpenOptions::create())
        .unwrap();
    file.write_at(&slots.concat(), 0, Issuer::Tool).unwrap();
    scan(&fs, dir(), &control(), (REDO, WAL_END)).unwrap()
}

/// The copies recovery finds in a `dw/deferred` holding `slots`: (slot,
/// block, LSN), sorted.
fn copies(slots: &[Vec<u8>]) -> Vec<(u32, u32, u64)> {
    let scan = scan_of(slots);
    let mut out: Vec<(u32, u32, u64)> = scan
        .copies
        .iter()
        .map(|c| match c.image {
            CopyImage::DeferredSlot { slot, .. } => (slot, c.block, c.lsn.0),
            CopyImage::Held(_) => unreachable!("a slot"),
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn an_intact_slot_no_list_names_is_no_copy() {
    let p = page(3, 2000, 0xAA);
    assert!(verify_page(&p, ChecksumAlgorithm::Fnv, FILE_ID, 3).is_ok());
    // Without any manifest, and beside this build's (empty) one.
    assert_eq!(copies(std::slice::from_ref(&p)), vec![]);
    let m = empty_manifest().encode_pages(owner()).remove(0);
    assert_eq!(copies(&[p, m]), vec![]);
}

#[test]
fn a_slot_a_write_back_list_names_is_a_copy_while_it_holds_those_bytes() {
    let (a, b) = (page(3, 2000, 0xAA), page(4, 2100, 0xBB));
    let l = list(vec![entry(0, &a), entry(1, &b)]);
    assert_eq!(
        copies(&[a.clone(), b.clone(), l.clone()]),
        vec![(0, 3, 2000), (1, 4, 2100)]
    );
    // Slot 0 rewritten by a later eviction and torn: a mix of two versions
    // whose 16-bit checksum happens to pass (here: computed again). The
    // list's CRC-32C is the whole slot's: no copy.
    let mut torn = page(3, 2000, 0xCC);
    torn[PS / 2..PS / 2 + 512].copy_from_slice(&a[PS / 2..PS / 2 + 512]);
    set_checksum(&mut torn, ChecksumAlgorithm::Fnv);
    assert!(verify_page(&torn, ChecksumAlgorithm::Fnv, FILE_ID, 3).is_ok());
    assert_eq!(copies(&[torn, b.clone(), l.clone()]), vec![(1, 4, 2100)]);
    // Listed but outside the window: below the redo point, past the WAL.
    let (old, new) = (page(3, 900, 0xAA), page(4, 6000, 0xBB));
    let l = list(vec![entry(0, &old), entry(1, &new)]);
    assert_eq!(copies(&[old, new, l]), vec![]);
}

#[test]
fn a_slot_the_manifest_taken_names_is_not_also_a_listed_copy() {
    let a = page(3, 2000, 0xAA);
    let m = Manifest {
        entries: vec![entry(0, &a)],
        ..empty_manifest()
    };
    let m = m.encode_pages(owner()).remove(0);
    assert_eq!(copies(&[a.clone(), m, list(vec![entry(0, &a)])]), vec![]);
}

#[test]
fn under_an_earlier_builds_manifest_any_intact_slot_in_the_window_is_a_copy() {
    let (a, b) = (page(3, 2000, 0xAA), page(4, 900, 0xBB));
    let m = empty_manifest().encode_pages_version_2(owner()).remove(0);
    assert_eq!(copies(&[a, b, m]), vec![(0, 3, 2000)]);
}

/// The opening writes its empty manifest to the lowest slot outside
/// `keep_slots`. A slot the manifest taken names must be in it: a torn
/// write there made that manifest fail, and the next recovery fell back
/// past it to one older than the control file relies on.
#[test]
fn the_opening_keeps_the_slots_the_manifest_taken_names_and_holds() {
    let (a, b) = (page(3, 2000, 0xAA), page(4, 2100, 0xBB));
    let m = Manifest {
        entries: vec![entry(0, &a), entry(2, &b)],
        ..empty_manifest()
    };
    let m = m.encode_pages(owner()).remove(0);
    let free = page(5, 2200, 0xCC);
    let scan = scan_of(&[a, free, b, m]);
    assert_eq!(scan.manifest_entries, 2);
    assert_eq!(scan.start.keep_slots, vec![0, 2, 3]);
}
