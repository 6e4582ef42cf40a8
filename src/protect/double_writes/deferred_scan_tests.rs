//! Opening a database whose `dw/deferred` holds pages kept across a
//! checkpoint: the manifest recovery takes, end to end on a real directory.

use super::super::recover::tests::{
    assert_rows_and_verify, load_and_update, options, row, update_and_flush, update_in_place, PS,
    ROWS,
};
use crate::control::ControlFile;
use crate::db::Database;
use crate::file::posix::PosixFileSystem;
use crate::file::Issuer;
use crate::lsn::Lsn;
use crate::options::Options;
use crate::protect::double_writes::manifest::{
    self, FoundManifest, Manifest, ManifestEntry, ManifestOwner, ManifestParts,
};
use crate::settings::TornPageProtection;
use crate::table::key_u64;
use std::path::{Path, PathBuf};

/// Loads rows, checkpoints, updates row 500, lets a client's eviction
/// defer its page, and checkpoints again: the redo point passes the
/// update while the page stays in `dw/deferred`, named by the manifest.
/// Then crashes. Returns the directory and the options.
fn crash_with_a_page_deferred_across_a_checkpoint(root: &Path) -> (PathBuf, Options) {
    let opts = Options {
        double_write_defer_in_place: true,
        ..options(TornPageProtection::DoubleWrites)
    };
    let dir = root.join("db");
    let file_id = update_and_flush(&dir, opts.clone(), |db| {
        let protection = db.engine.pool.page_write_protection();
        assert!(protection.deferred_pages() >= 1);
        db.checkpoint().unwrap();
        assert!(
            protection.deferred_pages() >= 1,
            "kept across the checkpoint"
        );
    });
    assert!(
        !update_in_place(&dir, file_id),
        "the update is only in dw/deferred"
    );
    (dir, opts)
}

/// A copy of `dir` at `root/name`.
fn copy_of_dir(dir: &Path, root: &Path, name: &str) -> PathBuf {
    let to = root.join(name);
    std::fs::create_dir_all(&to).unwrap();
    let cp = std::process::Command::new("cp")
        .args([
            "-a",
            &format!("{}/.", dir.display()),
            &to.display().to_string(),
        ])
        .status()
        .unwrap();
    assert!(cp.success());
    to
}

fn control(dir: &Path) -> ControlFile {
    ControlFile::read(&PosixFileSystem::default(), dir, Issuer::Tool).unwrap()
}

fn owner(dir: &Path) -> ManifestOwner {
    ManifestOwner {
        page_size: PS as u32,
        system_id: control(dir).system_id,
    }
}

fn deferred_path(dir: &Path) -> PathBuf {
    dir.join("dw").join("deferred")
}

/// The whole manifests in `dir`'s `dw/deferred`, newest first.
fn manifests(dir: &Path) -> Vec<FoundManifest> {
    let file = std::fs::read(deferred_path(dir)).unwrap();
    let mut parts = ManifestParts::default();
    for (slot, page) in file.chunks_exact(PS).enumerate() {
        if let Some(part) = manifest::decode_part(page, owner(dir)) {
            parts.add(slot as u32, part);
        }
    }
    parts.whole()
}

/// Applies `f` to the bytes of `dir`'s `dw/deferred`.
fn edit_deferred(dir: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut bytes = std::fs::read(deferred_path(dir)).unwrap();
    f(&mut bytes);
    std::fs::write(deferred_path(dir), &bytes).unwrap();
}

/// Zeroes every manifest page in `dir`'s `dw/deferred`.
fn erase_manifests(dir: &Path) {
    let slots: Vec<u32> = manifests(dir).into_iter().flat_map(|f| f.slots).collect();
    assert!(!slots.is_empty());
    edit_deferred(dir, |bytes| {
        for s in slots {
            bytes[s as usize * PS..(s as usize + 1) * PS].fill(0);
        }
    });
}

fn set_relied_manifest(dir: &Path, seq: u64) {
    let mut c = control(dir);
    c.deferred_manifest = seq;
    c.write(&PosixFileSystem::default(), dir, Issuer::Tool)
        .unwrap();
}

#[test]
fn a_page_deferred_across_a_checkpoint_is_restored_from_its_manifest() {
    let root = tempfile::tempdir().unwrap();
    let (dir, opts) = crash_with_a_page_deferred_across_a_checkpoint(root.path());
    let relied = manifests(&dir)[0].manifest.seq;
    assert_eq!(control(&dir).deferred_manifest, relied);
    // Without its manifest the control file's checkpoint cannot be
    // recovered: the WAL that made the update lies before the redo point
    // (what the manifest is for). The opening says so.
    let bare = copy_of_dir(&dir, root.path(), "bare");
    erase_manifests(&bare);
    let e = Database::open(&bare, opts.clone())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("dw/deferred") && e.contains(&format!("manifest {relied}")),
        "{e}"
    );
    // So is one whose whole area is gone.
    let gone = copy_of_dir(&dir, root.path(), "gone");
    std::fs::remove_dir_all(gone.join("dw")).unwrap();
    let e = Database::open(&gone, opts.clone())
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("dw/deferred") && e.contains("manifest"), "{e}");
    // A control file that relies on none (an older build's) opens, and
    // loses the update: the check is what stands between the two.
    set_relied_manifest(&bare, 0);
    let db = Database::open(&bare, opts.clone()).unwrap();
    let t = db.table("t").unwrap();
    let got = db.begin().get(&t, &key_u64(500)).unwrap().unwrap();
    assert_eq!(got, row(500, 0), "the update lost without the manifest");
    drop(db);

    let db = Database::open(&dir, opts).unwrap();
    assert!(db.recovery.pages_repaired_from_double_writes >= 1);
    assert_rows_and_verify(db, &dir);
}

#[test]
fn a_damaged_slot_the_manifest_names_stops_the_opening_naming_the_page() {
    let root = tempfile::tempdir().unwrap();
    let (dir, opts) = crash_with_a_page_deferred_across_a_checkpoint(root.path());
    let named: Vec<u32> = manifests(&dir)[0]
        .manifest
        .entries
        .iter()
        .map(|e| e.slot)
        .collect();
    edit_deferred(&dir, |bytes| {
        for s in named {
            bytes[s as usize * PS..(s as usize + 1) * PS]
                .iter_mut()
                .for_each(|b| *b ^= 0x5A);
        }
    });
    let e = Database::open(&dir, opts)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("data file") && e.contains("block") && e.contains("dw/deferred"),
        "{e}"
    );
}

/// Appends to `dir`'s `dw/deferred` a manifest above the newest, naming
/// its slots with CRCs that do not match (as if its fsync had not
/// returned), stamped with redo point `redo`.
fn append_unfinished_manifest(dir: &Path, redo: Lsn) {
    let newest = manifests(dir).remove(0).manifest;
    let unfinished = Manifest {
        seq: newest.seq + 1,
        redo_lsn: redo,
        entries: newest
            .entries
            .iter()
            .map(|e| ManifestEntry {
                image_crc: !e.image_crc,
                ..*e
            })
            .collect(),
    };
    edit_deferred(dir, |bytes| {
        unfinished
            .encode_pages(owner(dir))
            .iter()
            .for_each(|p| bytes.extend_from_slice(p));
    });
}

#[test]
fn a_manifest_whose_fsync_never_returned_is_passed_over() {
    let root = tempfile::tempdir().unwrap();
    let (dir, opts) = crash_with_a_page_deferred_across_a_checkpoint(root.path());
    let redo = control(&dir).redo_lsn;
    // Written after the control file's redo point: never relied on, so
    // recovery takes the one before it.
    let later = copy_of_dir(&dir, root.path(), "later");
    append_unfinished_manifest(&later, Lsn(redo.0 + 1));
    let db = Database::open(&later, opts.clone()).unwrap();
    assert_eq!(db.recovery.double_write_manifests_passed_over, 1);
    assert!(db.recovery.pages_repaired_below_redo >= 1);
    assert_rows_and_verify(db, &later);
    // At the control file's redo point it may be the one relied on: its
    // slots' damage is damage.
    append_unfinished_manifest(&dir, redo);
    let e = Database::open(&dir, opts)
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("data file") && e.contains("dw/deferred"), "{e}");
}

#[test]
fn an_older_builds_manifest_file_is_read_then_removed() {
    let root = tempfile::tempdir().unwrap();
    let (dir, opts) = crash_with_a_page_deferred_across_a_checkpoint(root.path());
    let newest = manifests(&dir)[0].manifest.clone();
    // As an older build left it: the manifest in a file of its own, a
    // control file that names none.
    let legacy = manifest::legacy_manifest_path(&dir, newest.seq);
    std::fs::write(&legacy, newest.encode_legacy(owner(&dir))).unwrap();
    erase_manifests(&dir);
    set_relied_manifest(&dir, 0);
    let db = Database::open(&dir, opts).unwrap();
    assert!(db.recovery.pages_repaired_below_redo >= 1);
    assert!(
        !legacy.exists(),
        "removed once the opening's manifest is durable"
    );
    assert_rows_and_verify(db, &dir);
}

#[test]
fn a_page_a_checkpoint_deferred_is_restored_from_its_manifest() {
    let root = tempfile::tempdir().unwrap();
    let opts = Options {
        double_write_defer_in_place: true,
        ..options(TornPageProtection::DoubleWrites)
    };
    let dir = root.path().join("db");
    // No client writes the page: the checkpoint stores it in dw/deferred
    // and its redo point passes the update.
    let (db, file_id) = load_and_update(&dir, opts.clone());
    db.checkpoint().unwrap();
    let deferred = db.statistics().double_write.checkpointer.deferred;
    assert!(deferred >= 1, "{deferred}");
    drop(db); // a crash
    assert!(!update_in_place(&dir, file_id), "only in dw/deferred");
    let db = Database::open(&dir, opts).unwrap();
    assert!(db.recovery.pages_repaired_below_redo >= 1);
    assert_rows_and_verify(db, &dir);
}

/// Whether `dir`'s data file `file_id` holds `needle` in place.
fn in_place(dir: &Path, file_id: u32, needle: &[u8]) -> bool {
    let data = std::fs::read(dir.join("data").join(file_id.to_string())).unwrap();
    data.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_checkpoint_writes_back_the_cold_pages_and_keeps_the_hot_one_deferred() {
    let root = tempfile::tempdir().unwrap();
    let opts = Options {
        double_write_defer_in_place: true,
        // 10 area pages: dw/deferred holds 160 slots; after the updates
        // below the table takes about 100 pages.
        double_write_buffer_size: 10 * PS as u64,
        ..options(TornPageProtection::DoubleWrites)
    };
    let dir = root.path().join("db");
    let (db, file_id) = load_and_update(&dir, opts.clone());
    let t = db.table("t").unwrap();
    let version = |i: u64| if i == 500 { 3 } else { 2 };
    let stats = || db.statistics().double_write.checkpointer;
    // Every page dirty: the first checkpoint defers them all.
    let mut tx = db.begin();
    for i in (0..ROWS).filter(|&i| i != 500) {
        tx.update(&t, &key_u64(i), &row(i, 2)).unwrap();
    }
    tx.commit().unwrap();
    let s0 = stats();
    db.checkpoint().unwrap();
    let s1 = stats();
    let deferred = s1.deferred - s0.deferred;
    assert!(deferred > 80, "more than half the file: {s1:?}");
    assert_eq!((s1.written_back, s1.pages), (s0.written_back, s0.pages));
    // Only row 500's page changes: the next checkpoint finds the file more
    // than half taken, defers that page again, and writes the rest back.
    let mut tx = db.begin();
    tx.update(&t, &key_u64(500), &row(500, 3)).unwrap();
    tx.commit().unwrap();
    db.checkpoint().unwrap();
    let s2 = stats();
    assert!(s2.deferred > s1.deferred, "the hot page deferred: {s2:?}");
    assert_eq!(s2.pages, s1.pages, "nothing through the area");
    let cold = s2.written_back - s1.written_back;
    assert!(cold + 8 >= deferred, "{cold} of {deferred}");
    assert!(
        in_place(&dir, file_id, &row(1, 2)),
        "a cold page went in place"
    );
    assert!(
        !in_place(&dir, file_id, &row(500, 3)),
        "the hot one did not"
    );
    drop(db); // a crash: row 500's page is only in a slot the manifest names
    let db = Database::open(&dir, opts).unwrap();
    assert!(db.recovery.pages_repaired_below_redo >= 1);
    let t = db.table("t").unwrap();
    let tx = db.begin();
    for i in 0..ROWS {
        let got = tx.get(&t, &key_u64(i)).unwrap().unwrap();
        assert_eq!(got, row(i, version(i)), "row {i}");
    }
    drop(tx);
    db.close().unwrap();
    let report = crate::verify::verify_database(&PosixFileSystem::default(), &dir).unwrap();
    assert!(report.ok(), "{:?}", report.failures);
}
