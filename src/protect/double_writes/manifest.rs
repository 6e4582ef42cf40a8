//! `dw/manifest-0` and `dw/manifest-1` (docs/FORMAT.md): which slots of
//! `dw/deferred` a checkpoint made durable, so recovery trusts them at any
//! LSN, even below the redo point.
//!
//! Deferred pages stay in `dw/deferred` across checkpoints (seed 000's
//! "second log"): once a checkpoint's redo point passes a deferred page's
//! changes, its slot holds the only copy of the page as of that point. The
//! manifest names those slots; it is written after an fsync of
//! `dw/deferred` and fsynced before the control file names the redo point.
//! Two files, written alternately, so a torn write leaves the previous
//! manifest whole (the slots it names are reused only after a later one is
//! durable: `deferred.rs`).

use crate::checksum::crc::crc32c;
use crate::error::Result;
use crate::file::{File, Issuer};
use crate::lsn::Lsn;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"UNTORNDM";
const FORMAT_VERSION: u32 = 1;
const HEADER_BYTES: usize = 48;
const ENTRY_BYTES: usize = 24;

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
    /// The writing checkpoint's redo point (informative).
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

/// The file manifest `seq` goes to.
pub fn manifest_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(super::area::AREA_DIR)
        .join(format!("manifest-{}", seq % 2))
}

/// Whether `name` is one of the manifest files.
pub fn is_manifest_name(name: &str) -> bool {
    name == "manifest-0" || name == "manifest-1"
}

impl Manifest {
    pub fn encode(&self, owner: ManifestOwner) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_BYTES + ENTRY_BYTES * self.entries.len() + 4);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&owner.page_size.to_le_bytes());
        b.extend_from_slice(&owner.system_id.to_le_bytes());
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&self.redo_lsn.0.to_le_bytes());
        b.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        for e in &self.entries {
            b.extend_from_slice(&e.file_id.to_le_bytes());
            b.extend_from_slice(&e.block.to_le_bytes());
            b.extend_from_slice(&e.slot.to_le_bytes());
            b.extend_from_slice(&e.image_crc.to_le_bytes());
            b.extend_from_slice(&e.lsn.0.to_le_bytes());
        }
        let crc = crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// The manifest in `bytes`, or None where it fails a check (torn,
    /// never written, another database's or page size's).
    pub fn decode(bytes: &[u8], owner: ManifestOwner) -> Option<Manifest> {
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        if bytes.len() < HEADER_BYTES + 4 || &bytes[..8] != MAGIC {
            return None;
        }
        if u32_at(8) != FORMAT_VERSION
            || u32_at(12) != owner.page_size
            || u64_at(16) != owner.system_id
        {
            return None;
        }
        let count = u32_at(40) as usize;
        // Checked before anything is allocated for the entries.
        let end = count
            .checked_mul(ENTRY_BYTES)
            .and_then(|n| n.checked_add(HEADER_BYTES))
            .filter(|&end| end + 4 <= bytes.len())?;
        if crc32c(&bytes[..end]) != u32_at(end) {
            return None;
        }
        let entries = (0..count)
            .map(|i| {
                let at = HEADER_BYTES + i * ENTRY_BYTES;
                ManifestEntry {
                    file_id: u32_at(at),
                    block: u32_at(at + 4),
                    slot: u32_at(at + 8),
                    image_crc: u32_at(at + 12),
                    lsn: Lsn(u64_at(at + 16)),
                }
            })
            .collect();
        Some(Manifest {
            seq: u64_at(24),
            redo_lsn: Lsn(u64_at(32)),
            entries,
        })
    }
}

/// A manifest file's bytes; None where a read fails with EIO (a sector torn
/// at a power loss: as good as a torn manifest). Other errors stop.
pub fn read_bytes(file: &dyn File, who: Issuer) -> Result<Option<Vec<u8>>> {
    let mut bytes = vec![0u8; file.len()? as usize];
    match file.read_exact_at(&mut bytes, 0, who) {
        Ok(()) => Ok(Some(bytes)),
        Err(e) if super::recover::is_eio(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Of the manifests in `files` (each file's bytes; None: missing or
/// unreadable), the valid one with the highest sequence.
pub fn newest(files: &[Option<Vec<u8>>], owner: ManifestOwner) -> Option<Manifest> {
    files
        .iter()
        .flatten()
        .filter_map(|b| Manifest::decode(b, owner))
        .max_by_key(|m| m.seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: ManifestOwner = ManifestOwner {
        page_size: 8192,
        system_id: 42,
    };

    fn manifest(seq: u64, n: u32) -> Manifest {
        Manifest {
            seq,
            redo_lsn: Lsn(1000 + seq),
            entries: (0..n)
                .map(|i| ManifestEntry {
                    file_id: 3,
                    block: i,
                    slot: 10 + i,
                    image_crc: 0xdead_0000 + i,
                    lsn: Lsn(500 + i as u64),
                })
                .collect(),
        }
    }

    #[test]
    fn a_manifest_reads_back_as_written() {
        let m = manifest(7, 3);
        let bytes = m.encode(OWNER);
        assert_eq!(bytes.len(), 48 + 3 * 24 + 4);
        assert_eq!(Manifest::decode(&bytes, OWNER), Some(m));
        // Bytes left past the CRC by a longer, older manifest are ignored.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&manifest(5, 9).encode(OWNER));
        assert_eq!(Manifest::decode(&longer, OWNER).unwrap().seq, 7);
    }

    #[test]
    fn a_torn_or_foreign_manifest_is_refused() {
        let bytes = manifest(7, 3).encode(OWNER);
        for cut in [0, 10, 48, bytes.len() - 1] {
            assert_eq!(Manifest::decode(&bytes[..cut], OWNER), None, "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[60] ^= 1;
        assert_eq!(Manifest::decode(&flipped, OWNER), None);
        for other in [
            ManifestOwner {
                page_size: 4096,
                ..OWNER
            },
            ManifestOwner {
                system_id: 43,
                ..OWNER
            },
        ] {
            assert_eq!(Manifest::decode(&bytes, other), None);
        }
        // An entry count far past the bytes allocates nothing.
        let mut huge = bytes.clone();
        huge[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Manifest::decode(&huge, OWNER), None);
    }

    #[test]
    fn the_newest_valid_manifest_wins_and_a_torn_one_falls_back() {
        let old = manifest(4, 2).encode(OWNER);
        let new = manifest(5, 1).encode(OWNER);
        let got = newest(&[Some(old.clone()), Some(new.clone())], OWNER).unwrap();
        assert_eq!(got.seq, 5);
        let torn = new[..new.len() - 3].to_vec();
        assert_eq!(newest(&[Some(old), Some(torn)], OWNER).unwrap().seq, 4);
        assert_eq!(newest(&[None, None], OWNER), None);
    }

    #[test]
    fn manifests_alternate_between_two_files() {
        let dir = Path::new("/db");
        assert_eq!(manifest_path(dir, 6), Path::new("/db/dw/manifest-0"));
        assert_eq!(manifest_path(dir, 7), Path::new("/db/dw/manifest-1"));
        assert!(is_manifest_name("manifest-1") && !is_manifest_name("manifest-2"));
    }
}
