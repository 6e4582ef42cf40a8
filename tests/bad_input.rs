//! Bad input gets a clear error and loses nothing.

use untorn::settings::RequestedCreationSettings;
use untorn::{key_u64, Database, Error, Options};

fn msg<T>(r: untorn::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn opening_a_missing_directory_or_a_non_database_is_a_clear_error() {
    let e = msg(Database::open(
        std::path::Path::new("/nonexistent/untorn"),
        Options::default(),
    ));
    assert!(e.contains("does not exist"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("something"), b"x").unwrap();
    let e = msg(Database::open(dir.path(), Options::default()));
    assert!(e.contains("not an untorn database"), "{e}");
    // Creating over a non-empty directory is refused and leaves it alone.
    let e = msg(Database::create(dir.path(), Options::default()));
    assert!(e.contains("not empty"), "{e}");
    assert_eq!(std::fs::read(dir.path().join("something")).unwrap(), b"x");
}

#[test]
fn opening_with_other_sizes_names_both_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    Database::create(&path, Options::default())
        .unwrap()
        .close()
        .unwrap();
    let other = Options {
        creation: RequestedCreationSettings {
            page_size: Some(16384),
            ..Default::default()
        },
        ..Options::default()
    };
    let e = msg(Database::open(&path, other));
    assert!(
        e.contains("page_size") && e.contains("8192") && e.contains("16384"),
        "{e}"
    );
    // Nothing was touched: the database opens with its own sizes.
    Database::open(&path, Options::default())
        .unwrap()
        .close()
        .unwrap();
}

#[test]
fn missing_tables_and_oversized_rows_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(&dir.path().join("db"), Options::default()).unwrap();
    assert!(matches!(db.table("nope"), Err(Error::NoSuchTable(_))));
    assert!(msg(db.table("nope")).contains("\"nope\" does not exist"));
    let t = db.create_table("t").unwrap();
    assert!(msg(db.create_table("t")).contains("already exists"));
    let mut tx = db.begin();
    let e = msg(tx.insert(&t, &key_u64(1), &vec![0u8; 100_000]));
    assert!(
        e.contains("row of 100000 bytes is too large") && e.contains("1264"),
        "{e}"
    );
    let e = msg(tx.insert(&t, &vec![1u8; 4000], b"v"));
    assert!(e.contains("key of 4000 bytes is too large"), "{e}");
    assert!(msg(tx.insert(&t, b"", b"v")).contains("empty key"));
    // The transaction is still usable after refused writes.
    tx.insert(&t, &key_u64(1), b"fine").unwrap();
    assert!(msg(tx.insert(&t, &key_u64(1), b"again")).contains("duplicate key"));
    tx.commit().unwrap();
    assert_eq!(db.begin().get(&t, &key_u64(1)).unwrap().unwrap(), b"fine");
    db.close().unwrap();
}

#[test]
fn create_and_drop_table_survive_restarts_and_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::create(&path, Options::default()).unwrap();
    let keep = db.create_table("keep").unwrap();
    let gone = db.create_table("gone").unwrap();
    for t in [&keep, &gone] {
        let mut tx = db.begin();
        for i in 0..500 {
            tx.insert(t, &key_u64(i), &[7u8; 50]).unwrap();
        }
        tx.commit().unwrap();
    }
    db.drop_table("gone").unwrap();
    assert!(db.table("gone").is_err());
    drop(db); // crash right after the drop
    let db = Database::open(&path, Options::default()).unwrap();
    let names: Vec<String> = db.tables().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["keep".to_string()]);
    assert!(!path.join("data").join(gone.file_id.to_string()).exists());
    assert_eq!(
        db.begin().scan(&keep, b"", None, usize::MAX).unwrap().len(),
        500
    );
    // A new table never reuses the dropped file id.
    let again = db.create_table("gone").unwrap();
    assert!(again.file_id > gone.file_id);
    assert!(db.begin().scan(&again, b"", None, 10).unwrap().is_empty());
    db.close().unwrap();
    let db = Database::open(&path, Options::default()).unwrap();
    assert_eq!(db.tables().len(), 2);
    db.close().unwrap();
}

#[test]
fn damaged_wal_before_the_checkpoint_record_is_refused_not_written_over() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::create(&path, Options::default()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut tx = db.begin();
    tx.insert(&t, &key_u64(1), b"one").unwrap();
    tx.commit().unwrap();
    db.close().unwrap();
    // The sectors holding the last checkpoint record read back as zeros.
    let wal = path.join("wal");
    for entry in std::fs::read_dir(&wal).unwrap() {
        let p = entry.unwrap().path();
        let len = std::fs::metadata(&p).unwrap().len();
        std::fs::write(&p, vec![0u8; len as usize]).unwrap();
    }
    let before = std::fs::read(path.join("untorn.control")).unwrap();
    for _ in 0..2 {
        let e = msg(Database::open(&path, Options::default()));
        assert!(
            e.contains("before the end of the checkpoint record") && e.contains("wal"),
            "{e}"
        );
    }
    // Refused before anything was written: the control file is as it was.
    assert_eq!(std::fs::read(path.join("untorn.control")).unwrap(), before);
}

#[test]
fn a_row_written_again_counts_once_against_the_write_set_budget() {
    let dir = tempfile::tempdir().unwrap();
    // temp_file_limit 0: the write set may not spill, so its budget is
    // the transaction's.
    let options = Options {
        max_write_set_bytes: 2000,
        temp_file_limit: 0,
        ..Options::default()
    };
    let db = Database::create(&dir.path().join("db"), options).unwrap();
    let t = db.create_table("t").unwrap();
    let row = [7u8; 500];
    let mut tx = db.begin();
    tx.insert(&t, &key_u64(1), &row).unwrap();
    for _ in 0..20 {
        tx.update(&t, &key_u64(1), &row).unwrap();
    }
    tx.insert(&t, &key_u64(2), &row).unwrap();
    tx.insert(&t, &key_u64(3), &row).unwrap();
    // A fourth row of 500 bytes is over the budget: a clear error.
    let e = msg(tx.insert(&t, &key_u64(4), &row));
    assert!(
        e.contains("write set too large") && e.contains("2000 bytes"),
        "{e}"
    );
    tx.commit().unwrap();
    let tx = db.begin();
    for k in 1..=3 {
        assert_eq!(tx.get(&t, &key_u64(k)).unwrap().unwrap(), row);
    }
    assert_eq!(tx.get(&t, &key_u64(4)).unwrap(), None);
    drop(tx);
    db.close().unwrap();
}

/// Every file under `dir` with its bytes, to show that nothing changed;
/// but the lock file, which names the last opening, refused or not.
fn snapshot(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(snapshot(&path));
        } else if path.file_name() != Some("untorn.lock".as_ref()) {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    out.sort();
    out
}

#[test]
fn a_control_file_asking_for_double_writes_without_checksums_is_refused_untouched() {
    use untorn::control::ControlFile;
    use untorn::file::{posix::PosixFileSystem, Issuer};
    use untorn::TornPageProtection;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    Database::create(&path, Options::default())
        .unwrap()
        .close()
        .unwrap();
    // Double writes find a torn page by its checksum: without one, every
    // torn page would pass as intact and its copy would never be used.
    let fs = PosixFileSystem::default();
    let mut control = ControlFile::read(&fs, &path, Issuer::Tool).unwrap();
    control.settings.torn_page_protection = TornPageProtection::DoubleWrites;
    control.settings.data_checksums = untorn::ChecksumAlgorithm::Off;
    control.write(&fs, &path, Issuer::Tool).unwrap();
    let before = snapshot(&path);
    let e = msg(Database::open(&path, Options::default()));
    assert!(
        e.contains("double_writes") && e.contains("needs page checksums"),
        "{e}"
    );
    assert!(before == snapshot(&path), "the refused open changed files");
}
