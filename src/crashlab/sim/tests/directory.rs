use super::*;
use std::collections::HashSet;

#[test]
fn a_new_file_needs_its_directory_synced() {
    let fs = new_fs();
    fs.create_dir_all(dir()).unwrap();
    let path = dir().join("new");
    let f = fs
        .open(&path, FileKind::Wal, OpenOptions::create_new())
        .unwrap();
    f.write_at(b"durable data", 0, WHO).unwrap();
    f.sync_all(WHO).unwrap();
    let (mut vanished, mut survived) = (0, 0);
    for (_, c, report) in crashes(&fs, 0..64, &keep_all()) {
        match c.live_bytes(&path) {
            None => {
                vanished += 1;
                assert!(!c.exists(&path));
                assert_eq!(report.lost_files, vec![path.clone()]);
            }
            Some(bytes) => {
                survived += 1;
                assert_eq!(bytes, b"durable data");
            }
        }
    }
    assert!(vanished > 0 && survived > 0, "{vanished} {survived}");
    fs.sync_dir(dir(), WHO).unwrap();
    for (seed, c, _) in crashes(&fs, 0..64, &CrashConfig::default()) {
        assert_eq!(c.live_bytes(&path).unwrap(), b"durable data", "seed {seed}");
    }
}

#[test]
fn renames_and_removals_are_durable_after_sync_dir() {
    let fs = new_fs();
    let (a, _) = durable_file(&fs, "a", b"old");
    let (tmp, _) = durable_file(&fs, "a.tmp", b"new");
    let (gone, _) = durable_file(&fs, "gone", b"x");
    fs.rename(&tmp, &a, FileKind::Control, WHO).unwrap();
    fs.remove(&gone, FileKind::Data, WHO).unwrap();
    assert_eq!(fs.live_bytes(&a).unwrap(), b"new");
    let mut seen = HashSet::new();
    for (seed, c, _) in crashes(&fs, 0..64, &CrashConfig::default()) {
        let state = (c.live_bytes(&a).unwrap(), c.exists(&tmp), c.exists(&gone));
        // A prefix of (rename, remove) survives.
        assert!(
            [
                (b"old".to_vec(), true, true),
                (b"new".to_vec(), false, true),
                (b"new".to_vec(), false, false)
            ]
            .contains(&state),
            "seed {seed}: {state:?}"
        );
        seen.insert(state);
    }
    assert_eq!(seen.len(), 3);
    fs.sync_dir(dir(), WHO).unwrap();
    for (_, c, _) in crashes(&fs, 0..64, &CrashConfig::default()) {
        assert_eq!(c.live_bytes(&a).unwrap(), b"new");
        assert!(!c.exists(&tmp) && !c.exists(&gone));
    }
}
