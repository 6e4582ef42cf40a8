use super::*;

const PS: usize = 4096;
const OWNER: ManifestOwner = ManifestOwner {
    page_size: PS as u32,
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

/// The pages of `m`, as found in slots `first..`.
fn gather(parts: &mut ManifestParts, m: &Manifest, first: u32) {
    for (i, page) in m.encode_pages(OWNER).iter().enumerate() {
        assert_eq!(page.len(), PS);
        parts.add(
            first + i as u32,
            decode_part(page, OWNER).expect("a valid page"),
        );
    }
}

#[test]
fn a_manifest_reads_back_from_its_pages_with_their_slots() {
    let per_page = entries_per_page(PS);
    assert_eq!(per_page, 167, "docs/FORMAT.md's figure");
    assert_eq!(entries_per_page(8192), 338);
    for n in [
        0,
        1,
        per_page as u32,
        per_page as u32 + 1,
        3 * per_page as u32,
    ] {
        let m = manifest(7, n);
        let pages = m.encode_pages(OWNER);
        assert_eq!(pages.len(), pages_for(n as usize, PS), "{n} entries");
        let mut parts = ManifestParts::default();
        gather(&mut parts, &m, 20);
        let whole = parts.whole();
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].manifest, m, "{n} entries");
        let slots: Vec<u32> = (20..20 + pages.len() as u32).collect();
        assert_eq!(whole[0].slots, slots);
    }
}

#[test]
fn a_torn_foreign_or_inconsistent_page_is_refused() {
    let page = &manifest(7, 3).encode_pages(OWNER)[0];
    let mut flipped = page.clone();
    flipped[70] ^= 1;
    assert_eq!(decode_part(&flipped, OWNER), None);
    assert_eq!(decode_part(&page[..PS - 1], OWNER), None);
    for other in [
        ManifestOwner {
            system_id: 43,
            ..OWNER
        },
        ManifestOwner {
            page_size: 8192,
            ..OWNER
        },
    ] {
        assert_eq!(decode_part(page, other), None);
    }
    // Counts that disagree are refused even under a valid CRC.
    for (at, value) in [(40, 400u32), (44, 1), (48, 2), (52, 2)] {
        let mut bad = page.clone();
        bad[at..at + 4].copy_from_slice(&value.to_le_bytes());
        let crc = crc32c(&bad[..PS - 4]);
        bad[PS - 4..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_part(&bad, OWNER), None, "field at {at}");
    }
    // A page image is not a manifest page.
    assert_eq!(decode_part(&vec![7u8; PS], OWNER), None);
}

#[test]
fn a_manifest_missing_a_page_is_not_whole_but_its_sequence_counts() {
    let big = manifest(9, 2 * entries_per_page(PS) as u32);
    let pages = big.encode_pages(OWNER);
    let mut parts = ManifestParts::default();
    parts.add(5, decode_part(&pages[1], OWNER).unwrap());
    gather(&mut parts, &manifest(8, 2), 30);
    assert_eq!(parts.max_seq(), Some(9));
    let whole = parts.whole();
    assert_eq!(whole.len(), 1);
    assert_eq!(whole[0].manifest.seq, 8);
    // Pages of one sequence that disagree make no manifest either.
    let mut parts = ManifestParts::default();
    gather(&mut parts, &manifest(4, 2), 0);
    let other = Manifest {
        redo_lsn: Lsn(1),
        ..manifest(4, 2 * entries_per_page(PS) as u32)
    };
    parts.add(
        9,
        decode_part(&other.encode_pages(OWNER)[1], OWNER).unwrap(),
    );
    assert!(parts.whole().is_empty());
}

#[test]
fn an_older_builds_manifest_file_still_reads() {
    let m = manifest(7, 3);
    let bytes = m.encode_legacy(OWNER);
    assert_eq!(bytes.len(), 48 + 3 * 24 + 4);
    assert_eq!(Manifest::decode_legacy(&bytes, OWNER), Some(m.clone()));
    let mut longer = bytes.clone();
    longer.extend_from_slice(&manifest(5, 9).encode_legacy(OWNER));
    assert_eq!(Manifest::decode_legacy(&longer, OWNER), Some(m));
    for cut in [0, 10, 48, bytes.len() - 1] {
        assert_eq!(Manifest::decode_legacy(&bytes[..cut], OWNER), None);
    }
    // An entry count far past the bytes allocates nothing.
    let mut huge = bytes.clone();
    huge[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(Manifest::decode_legacy(&huge, OWNER), None);
    // Nor is a page of the new format taken for a file of the old.
    let page = &manifest(7, 3).encode_pages(OWNER)[0];
    assert_eq!(Manifest::decode_legacy(page, OWNER), None);
    let dir = Path::new("/db");
    assert_eq!(legacy_manifest_path(dir, 7), Path::new("/db/dw/manifest-1"));
    assert!(is_legacy_manifest_name("manifest-0") && !is_legacy_manifest_name("manifest-2"));
}

fn found(seq: u64, redo: u64) -> FoundManifest {
    FoundManifest {
        manifest: Manifest {
            redo_lsn: Lsn(redo),
            ..manifest(seq, 1)
        },
        slots: vec![seq as u32],
        version: FORMAT_VERSION,
    }
}

#[test]
fn recovery_passes_over_only_a_newest_manifest_that_was_never_relied_on() {
    let none_pass = |_: &Manifest| false;
    let all_pass = |_: &Manifest| true;
    assert_eq!(choose(&[], Lsn(100), 5, all_pass), None);
    // The newest passes: taken whatever its redo point.
    let two = [found(6, 300), found(5, 200)];
    assert_eq!(choose(&two, Lsn(100), 5, all_pass), Some(0));
    // Fails, written after the control file's redo point: its fsync may
    // not have returned, so the one before it.
    assert_eq!(choose(&two, Lsn(100), 5, none_pass), Some(1));
    assert_eq!(
        choose(&two, Lsn(299), 5, |m: &Manifest| m.seq == 5),
        Some(1)
    );
    // Fails, but the control file's checkpoint relied on it: damage.
    assert_eq!(choose(&two, Lsn(300), 5, none_pass), Some(0));
    // Never further down than the one before the newest: that one is
    // whole by the reuse rule, so its damage is damage.
    let three = [found(7, 400), found(6, 400), found(5, 200)];
    assert_eq!(choose(&three, Lsn(200), 5, none_pass), Some(1));
    // Nothing to fall back to.
    assert_eq!(choose(&two[..1], Lsn(100), 5, none_pass), Some(0));
    // Never to one older than the control file's `deferred_manifest`: the
    // manifest it relied on was reused, so the newest was durable.
    assert_eq!(choose(&two, Lsn(100), 6, none_pass), Some(0));
    let gap = [found(7, 400), found(5, 200)];
    assert_eq!(choose(&gap, Lsn(200), 6, none_pass), Some(0));
    assert_eq!(choose(&gap, Lsn(200), 5, none_pass), Some(1));
}

#[test]
fn a_write_back_list_reads_back_as_such_and_never_as_a_manifest() {
    let m = manifest(7, 3);
    let list = &m.encode_list_pages(OWNER)[0];
    let part = decode_list_part(list, OWNER).expect("a valid list page");
    assert_eq!(
        (part.version, part.entries),
        (FORMAT_VERSION, m.entries.clone())
    );
    assert_eq!(decode_part(list, OWNER), None, "not a manifest");
    let page = &m.encode_pages(OWNER)[0];
    assert_eq!(decode_list_part(page, OWNER), None, "not a list");
    let mut flipped = list.clone();
    flipped[70] ^= 1;
    assert_eq!(decode_list_part(&flipped, OWNER), None);
}

#[test]
fn an_earlier_builds_manifest_pages_read_back_with_their_version() {
    let m = manifest(7, 3);
    let mut parts = ManifestParts::default();
    for (i, page) in m.encode_pages_version_2(OWNER).iter().enumerate() {
        parts.add(
            i as u32,
            decode_part(page, OWNER).expect("version 2 is read"),
        );
    }
    let whole = parts.whole();
    assert_eq!((whole[0].version, &whole[0].manifest), (2, &m));
    assert!(!whole[0].wants_lists());
    let mut parts = ManifestParts::default();
    gather(&mut parts, &m, 0);
    assert!(parts.whole()[0].wants_lists());
}
