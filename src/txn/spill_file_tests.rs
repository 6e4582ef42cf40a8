//! The spill file alone: runs, lookups, the merge, sealing and its checks.
use super::*;
use crate::file::posix::PosixFileSystem;

fn fs() -> Arc<dyn FileSystem> {
    Arc::new(PosixFileSystem::default())
}

fn put(v: &[u8]) -> RowChange {
    RowChange::Put(v.to_vec())
}

fn set(pairs: &[(u32, &[u8], RowChange)]) -> BTreeMap<WriteKey, RowChange> {
    pairs
        .iter()
        .map(|(f, k, c)| ((*f, k.to_vec()), c.clone()))
        .collect()
}

/// A later run's change of a key hides an earlier one's, for a
/// lookup and for the merge, and keys no run holds are not found.
#[test]
fn later_runs_shadow_earlier_ones() {
    let dir = tempfile::tempdir().unwrap();
    let fs = fs();
    let mut spill = Spill::create(&fs, dir.path(), 7, u64::MAX).unwrap();
    let many: BTreeMap<WriteKey, RowChange> = (0..1000u32)
        .map(|i| ((1, i.to_be_bytes().to_vec()), put(&i.to_le_bytes())))
        .collect();
    spill.write_run(&many).unwrap();
    spill
        .write_run(&set(&[
            (1, &5u32.to_be_bytes(), RowChange::Delete),
            (1, &6u32.to_be_bytes(), put(b"six")),
        ]))
        .unwrap();
    assert_eq!(
        spill.get(1, &4u32.to_be_bytes()).unwrap(),
        Some(put(&4u32.to_le_bytes()))
    );
    assert_eq!(
        spill.get(1, &5u32.to_be_bytes()).unwrap(),
        Some(RowChange::Delete)
    );
    assert_eq!(
        spill.get(1, &6u32.to_be_bytes()).unwrap(),
        Some(put(b"six"))
    );
    assert_eq!(spill.get(2, &6u32.to_be_bytes()).unwrap(), None);
    assert_eq!(spill.get(1, &5000u32.to_be_bytes()).unwrap(), None);
    let memory = set(&[(1, &7u32.to_be_bytes(), put(b"seven"))]);
    let sealed = spill.seal(&memory).unwrap();
    assert!(committed_path(dir.path(), 7).exists());
    assert!(!pending_path(dir.path(), 7).exists());
    let reopened = Sealed::open(&fs, &committed_path(dir.path(), 7)).unwrap();
    let mut m = reopened.merged();
    let mut all = Vec::new();
    while let Some(e) = m.next_entry().unwrap() {
        all.push(e);
    }
    assert_eq!(all.len(), 1000);
    assert_eq!(all[5].1, RowChange::Delete);
    assert_eq!(all[6].1, put(b"six"));
    assert_eq!(all[7].1, put(b"seven"));
    assert_eq!(all[999].1, put(&999u32.to_le_bytes()));
    drop(sealed);
    reopened.remove().unwrap();
    assert!(!committed_path(dir.path(), 7).exists());
}

/// An aborted transaction's file is removed; one past
/// temp_file_limit is refused with the limit named.
#[test]
fn an_abort_removes_the_file_and_the_limit_holds() {
    let dir = tempfile::tempdir().unwrap();
    let fs = fs();
    let mut spill = Spill::create(&fs, dir.path(), 9, 1000).unwrap();
    let big = set(&[(1, b"k", put(&[0u8; 2000]))]);
    let e = spill.write_run(&big).unwrap_err();
    assert!(matches!(e, Error::TempFileLimit { limit: 1000 }), "{e}");
    drop(spill);
    assert!(!pending_path(dir.path(), 9).exists());
}

/// A committed file whose bytes changed is refused, naming the file,
/// before anything of it is applied; so is one cut short.
#[test]
fn a_damaged_committed_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fs = fs();
    let spill = Spill::create(&fs, dir.path(), 3, u64::MAX).unwrap();
    spill
        .seal(&set(&[(1, b"a", put(b"x")), (1, b"b", put(b"y"))]))
        .unwrap();
    let path = committed_path(dir.path(), 3);
    let good = std::fs::read(&path).unwrap();
    let mut bad = good.clone();
    bad[HEADER_LEN as usize + 9] ^= 1;
    std::fs::write(&path, &bad).unwrap();
    let e = Sealed::open(&fs, &path).err().unwrap().to_string();
    assert!(e.contains("3.committed") && e.contains("CRC"), "{e}");
    std::fs::write(&path, &good[..good.len() - 3]).unwrap();
    let e = Sealed::open(&fs, &path).err().unwrap().to_string();
    assert!(e.contains("not sealed") || e.contains("footer"), "{e}");
    for len in 0..good.len() {
        std::fs::write(&path, &good[..len]).unwrap();
        assert!(Sealed::open(&fs, &path).is_err());
    }
}
