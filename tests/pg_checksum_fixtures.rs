//! Pages from a real PostgreSQL 15 cluster (`initdb -k`, see tests/fixtures/pg/README.md)
//! verify under `pg_checksum_page`: the proof that our FNV checksum is PostgreSQL's.

use std::path::{Path, PathBuf};

use untorn::checksum::{is_all_zero, pg_checksum_page, PG_CHECKSUM_OFFSET};

const PAGE_SIZE: usize = 8192;

/// Every `<relation>_block<N>.page` fixture with its block number.
fn fixtures() -> Vec<(PathBuf, u32)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pg");
    let mut found: Vec<(PathBuf, u32)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "page"))
        .map(|p| {
            let stem = p
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("utf-8 name")
                .to_owned();
            let (_, block) = stem
                .rsplit_once("_block")
                .expect("name <relation>_block<N>");
            let block = block
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, block)
        })
        .collect();
    found.sort();
    assert!(found.len() >= 3, "fixtures missing in {}", dir.display());
    assert!(
        found.iter().any(|&(_, b)| b != 0),
        "need a fixture with a block number other than 0"
    );
    found
}

fn read_page(path: &Path) -> Vec<u8> {
    let page = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(page.len(), PAGE_SIZE, "{}", path.display());
    assert!(
        !is_all_zero(&page),
        "{} is a new page: nothing to check",
        path.display()
    );
    page
}

fn stored(page: &[u8]) -> u16 {
    u16::from_le_bytes([page[PG_CHECKSUM_OFFSET], page[PG_CHECKSUM_OFFSET + 1]])
}

#[test]
fn stored_checksum_matches() {
    for (path, block) in fixtures() {
        let page = read_page(&path);
        assert_ne!(
            stored(&page),
            0,
            "{}: cluster made without checksums?",
            path.display()
        );
        assert_eq!(
            pg_checksum_page(&page, block),
            stored(&page),
            "{}",
            path.display()
        );
    }
}

#[test]
fn wrong_block_number_fails() {
    for (path, block) in fixtures() {
        let page = read_page(&path);
        for wrong in [block ^ 1, block + 1000, u32::MAX - block] {
            assert_ne!(
                pg_checksum_page(&page, wrong),
                stored(&page),
                "{} verified as block {wrong}",
                path.display()
            );
        }
    }
}

/// Every bit of every fixture, outside pd_checksum itself. A 16-bit checksum lets about
/// one flip in 65535 through (measured in the unit tests), so a handful of misses per page
/// is the expected rate, not a bug; more would be.
#[test]
fn flipped_bits_fail() {
    for (path, block) in fixtures() {
        let mut page = read_page(&path);
        let want = stored(&page);
        let mut missed = Vec::new();
        for bit in 0..PAGE_SIZE * 8 {
            let byte = bit / 8;
            if (PG_CHECKSUM_OFFSET..PG_CHECKSUM_OFFSET + 2).contains(&byte) {
                continue;
            }
            page[byte] ^= 1 << (bit % 8);
            if pg_checksum_page(&page, block) == want {
                missed.push(bit);
            }
            page[byte] ^= 1 << (bit % 8);
        }
        assert!(
            missed.len() <= 8,
            "{}: {} undetected flips {missed:?}",
            path.display(),
            missed.len()
        );
        // pd_flags, right after pd_checksum in the same 32-bit word, is covered.
        page[PG_CHECKSUM_OFFSET + 2] ^= 0x01;
        assert_ne!(
            pg_checksum_page(&page, block),
            want,
            "{}: pd_flags ignored",
            path.display()
        );
    }
}

#[test]
fn stored_checksum_bytes_are_ignored() {
    for (path, block) in fixtures() {
        let mut page = read_page(&path);
        let want = stored(&page);
        page[PG_CHECKSUM_OFFSET..PG_CHECKSUM_OFFSET + 2].copy_from_slice(&[0, 0]);
        assert_eq!(pg_checksum_page(&page, block), want, "{}", path.display());
    }
}
