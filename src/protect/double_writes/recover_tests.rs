//! Opening a database whose `dw/` holds hand-made batches: the restore
//! before redo, end to end on a real directory.

use crate::control::ControlFile;
use crate::db::Database;
use crate::file::posix::PosixFileSystem;
use crate::file::Issuer;
use crate::lsn::Lsn;
use crate::options::Options;
use crate::page::{page_lsn, OFF_BLOCK};
use crate::protect::double_writes::area::{BatchPage, Shard};
use crate::settings::RequestedCreationSettings;
use crate::settings::TornPageProtection;
use crate::table::key_u64;
use std::path::{Path, PathBuf};

pub(crate) const PS: usize = 8192;
pub(crate) const ROWS: u64 = 2000;

pub(crate) fn options(p: TornPageProtection) -> Options {
    Options {
        creation: RequestedCreationSettings {
            torn_page_protection: Some(p),
            ..Default::default()
        },
        // The tests tear pages a client wrote in place; deferred, they
        // would stay in the area.
        double_write_defer_in_place: false,
        ..Options::default()
    }
}

pub(crate) fn row(i: u64, version: u32) -> Vec<u8> {
    let mut v = format!("ROW-{i:05}-v{version}-").into_bytes();
    v.resize(120, b'.');
    v
}

/// A crashed database and the on-disk page holding row 500.
struct Crashed {
    dir: PathBuf,
    file: PathBuf,
    file_id: u32,
    block: u32,
    /// The page as written in place after the update, before the crash.
    page: Vec<u8>,
}

/// Loads rows, checkpoints, updates row 500 and writes the dirty pages in
/// place without a checkpoint (as an eviction would), so the page on disk
/// carries an LSN between the redo point and the end of the WAL; then,
/// if `checkpoint_after`, checkpoints again (the page's LSN falls below the
/// new redo point); then crashes.
fn crash_after_update(p: TornPageProtection, root: &Path, checkpoint_after: bool) -> Crashed {
    crash_after_update_with(options(p), root, |db| {
        if checkpoint_after {
            db.checkpoint().unwrap();
        }
    })
}

/// [`crash_after_update`] with `options`, running `after_flush` after the
/// client's flush.
fn crash_after_update_with(
    options: Options,
    root: &Path,
    after_flush: impl FnOnce(&Database),
) -> Crashed {
    let dir = root.join("db");
    let file_id = update_and_flush(&dir, options, after_flush);
    let file = dir.join("data").join(file_id.to_string());
    let bytes = std::fs::read(&file).unwrap();
    let needle = b"ROW-00500-v1-";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the updated row 500 on disk");
    let block = at / PS;
    let page = bytes[block * PS..(block + 1) * PS].to_vec();
    assert_eq!(
        u32::from_le_bytes(page[OFF_BLOCK..OFF_BLOCK + 4].try_into().unwrap()),
        block as u32
    );
    Crashed {
        dir,
        file,
        file_id,
        block: block as u32,
        page,
    }
}

/// Loads rows into table `t` of a new database in `dir` and closes it
/// (the loaded pages go in place), reopens it and updates row 500.
pub(crate) fn load_and_update(dir: &Path, options: Options) -> (Database, u32) {
    let db = Database::create(dir, options.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    db.bulk_load(&t, (0..ROWS).map(|i| (key_u64(i), row(i, 0))))
        .unwrap();
    db.close().unwrap();
    let db = Database::open(dir, options).unwrap();
    let t = db.table("t").unwrap();
    let mut tx = db.begin();
    tx.update(&t, &key_u64(500), &row(500, 1)).unwrap();
    tx.commit().unwrap();
    (db, t.file_id)
}

/// [`load_and_update`], then lets a client write the dirty pages (as an
/// eviction would), runs `after_flush`, and crashes. Returns `t`'s file.
pub(crate) fn update_and_flush(
    dir: &Path,
    options: Options,
    after_flush: impl FnOnce(&Database),
) -> u32 {
    let (db, file_id) = load_and_update(dir, options);
    db.engine.pool.flush_dirty(Issuer::Client, 64).unwrap();
    after_flush(&db);
    drop(db); // a crash: no shutdown checkpoint
    file_id
}

/// Whether `dir`'s data file `file_id` holds row 500's update in place.
pub(crate) fn update_in_place(dir: &Path, file_id: u32) -> bool {
    let data = std::fs::read(dir.join("data").join(file_id.to_string())).unwrap();
    let needle = b"ROW-00500-v1-";
    data.windows(needle.len()).any(|w| w == needle)
}

/// Tears the page: its second half holds other bytes.
fn tear(c: &Crashed) {
    let mut bytes = std::fs::read(&c.file).unwrap();
    let start = c.block as usize * PS + PS / 2;
    for b in &mut bytes[start..start + PS / 2] {
        *b ^= 0x5A;
    }
    std::fs::write(&c.file, &bytes).unwrap();
}

/// The crashed page's block as it is on disk now.
fn page_on_disk(c: &Crashed) -> Vec<u8> {
    let bytes = std::fs::read(&c.file).unwrap();
    let block = c.block as usize;
    bytes[block * PS..(block + 1) * PS].to_vec()
}

fn control(dir: &Path) -> ControlFile {
    ControlFile::read(&PosixFileSystem::default(), dir, Issuer::Tool).unwrap()
}

/// Writes `dw/shard-0` with one batch holding `pages` (none: an empty area).
fn write_shard(dir: &Path, pages: &[BatchPage<'_>]) -> PathBuf {
    let bytes = super::shard_0_for_tests(PS, control(dir).system_id, pages);
    std::fs::create_dir_all(dir.join("dw")).unwrap();
    let path = Shard::Checkpointer.path(dir);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn copy_of(c: &Crashed) -> BatchPage<'_> {
    BatchPage {
        file_id: c.file_id,
        block: c.block,
        lsn: Lsn(page_lsn(&c.page).0),
        image: &c.page,
    }
}

pub(crate) fn assert_rows_and_verify(db: Database, dir: &Path) {
    let t = db.table("t").unwrap();
    let tx = db.begin();
    for i in 0..ROWS {
        let want = row(i, u32::from(i == 500));
        assert_eq!(tx.get(&t, &key_u64(i)).unwrap().unwrap(), want, "row {i}");
    }
    drop(tx);
    db.close().unwrap();
    let report = crate::verify::verify_database(&PosixFileSystem::default(), dir).unwrap();
    assert!(report.ok(), "{:?}", report.failures);
}

#[test]
fn a_torn_page_is_restored_from_its_copy_before_redo() {
    let root = tempfile::tempdir().unwrap();
    // `off`: nothing in the WAL could repair the page, only the area.
    let c = crash_after_update(TornPageProtection::Off, root.path(), false);
    let redo = control(&c.dir).redo_lsn;
    assert!(page_lsn(&c.page) >= redo, "the copy lies in the window");
    write_shard(&c.dir, &[copy_of(&c)]);
    // A shard being created when the crash came: deleted, never read.
    let tmp = c.dir.join("dw").join("shard-1.tmp");
    std::fs::write(&tmp, b"half a header").unwrap();
    tear(&c);
    let db = Database::open(&c.dir, options(TornPageProtection::Off)).unwrap();
    assert_eq!(db.recovery.pages_repaired_from_double_writes, 1);
    assert!(db.recovery.damaged_pages_left.is_empty());
    assert!(db.recovery.damaged_pages_repaired.is_empty());
    assert!(!tmp.exists());
    assert_eq!(page_on_disk(&c), c.page);
    assert_rows_and_verify(db, &c.dir);
}

#[test]
fn without_a_copy_a_torn_page_is_handled_as_before() {
    let root = tempfile::tempdir().unwrap();
    // full_pages: the update logged the page's image, which repairs it.
    let c = crash_after_update(TornPageProtection::FullPages, root.path(), false);
    write_shard(&c.dir, &[]);
    tear(&c);
    let db = Database::open(&c.dir, options(TornPageProtection::FullPages)).unwrap();
    assert_eq!(db.recovery.pages_repaired_from_double_writes, 0);
    let name = format!("data file {} block {}", c.file_id, c.block);
    assert!(
        db.recovery
            .damaged_pages_repaired
            .iter()
            .any(|p| p.ends_with(&format!("block {}", c.block))),
        "{name}: {:?}",
        db.recovery
    );
    assert_rows_and_verify(db, &c.dir);
}

/// A copy stored by `store` whose LSN lies below the new redo point is
/// not restored over a torn page: the page stays torn on disk, and reading
/// it fails naming it, as it would without the copy.
fn a_copy_below_the_redo_point_is_ignored_in(store: impl Fn(&Crashed)) {
    let root = tempfile::tempdir().unwrap();
    let c = crash_after_update(TornPageProtection::Off, root.path(), true);
    assert!(page_lsn(&c.page) < control(&c.dir).redo_lsn);
    store(&c);
    tear(&c);
    let db = Database::open(&c.dir, options(TornPageProtection::Off)).unwrap();
    assert_eq!(db.recovery.pages_repaired_from_double_writes, 0);
    assert_ne!(page_on_disk(&c), c.page);
    let t = db.table("t").unwrap();
    let e = db.begin().get(&t, &key_u64(500)).expect_err("a torn page");
    assert!(e.to_string().contains(&format!("block {}", c.block)), "{e}");
}

#[test]
fn a_copy_below_the_redo_point_is_ignored() {
    a_copy_below_the_redo_point_is_ignored_in(|c| {
        write_shard(&c.dir, &[copy_of(c)]);
    });
}

#[test]
fn a_shard_with_a_bad_header_stops_the_opening_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let c = crash_after_update(TornPageProtection::Off, root.path(), false);
    let path = write_shard(&c.dir, &[copy_of(&c)]);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[100] ^= 1; // inside the header's CRC
    std::fs::write(&path, bytes).unwrap();
    let e = Database::open(&c.dir, options(TornPageProtection::Off))
        .err()
        .expect("a damaged shard header must stop the opening");
    let msg = e.to_string();
    assert!(msg.contains("shard-0") && msg.contains("CRC"), "{msg}");
}

#[test]
fn a_torn_page_whose_copy_is_damaged_stops_the_opening_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let c = crash_after_update(TornPageProtection::Off, root.path(), false);
    let path = write_shard(&c.dir, &[copy_of(&c)]);
    // The image (area block 2, after the batch header) fails its CRC.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[2 * PS + PS / 2] ^= 0xFF;
    std::fs::write(&path, bytes).unwrap();
    tear(&c);
    let e = Database::open(&c.dir, options(TornPageProtection::Off))
        .err()
        .expect("a bad page without a usable copy must stop the opening");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("data file {}", c.file_id))
            && msg.contains(&format!("block {}", c.block))
            && msg.contains("double-write"),
        "{msg}"
    );
}

#[test]
fn a_shard_file_of_an_unknown_shard_stops_the_opening_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let c = crash_after_update(TornPageProtection::Off, root.path(), false);
    let path = write_shard(&c.dir, &[]);
    std::fs::rename(&path, c.dir.join("dw").join("shard-9")).unwrap();
    let e = Database::open(&c.dir, options(TornPageProtection::Off))
        .err()
        .expect("an unknown shard must stop the opening");
    assert!(e.to_string().contains("shard-9"), "{e}");
}

#[test]
fn the_write_path_leaves_a_copy_that_repairs_a_torn_page() {
    let root = tempfile::tempdir().unwrap();
    // The update's page went through shard 2 (a client's write) before
    // its in-place write; nothing in the WAL holds its image.
    let c = crash_after_update(TornPageProtection::DoubleWrites, root.path(), false);
    assert!(page_lsn(&c.page) >= control(&c.dir).redo_lsn);
    tear(&c);
    let db = Database::open(&c.dir, Options::default()).unwrap();
    assert!(db.recovery.pages_repaired_from_double_writes >= 1);
    assert!(db.recovery.damaged_pages_left.is_empty());
    assert!(db.recovery.damaged_pages_repaired.is_empty());
    assert_eq!(
        db.settings().torn_page_protection,
        TornPageProtection::DoubleWrites
    );
    assert_rows_and_verify(db, &c.dir);
}

/// Writes `dw/deferred` holding `slots`, each a page image, in order,
/// then a write-back list naming each slot as holding itself.
fn write_deferred(dir: &Path, slots: &[&[u8]]) {
    write_listed(dir, slots, slots);
}

/// Writes `dw/deferred` holding `slots` in order, then a write-back list
/// naming slot `i` as holding `listed[i]` (what a write-back stored there
/// before a tear).
fn write_listed(dir: &Path, slots: &[&[u8]], listed: &[&[u8]]) {
    use super::super::manifest::{Manifest, ManifestEntry, ManifestOwner};
    use crate::checksum::crc::crc32c;
    let entries = listed
        .iter()
        .enumerate()
        .map(|(slot, image)| {
            let h = crate::page::read_header(image).unwrap();
            ManifestEntry {
                file_id: h.file_id,
                block: h.block,
                slot: slot as u32,
                image_crc: crc32c(image),
                lsn: h.lsn,
            }
        })
        .collect();
    let list = Manifest {
        seq: 0,
        redo_lsn: Lsn(0),
        entries,
    };
    let owner = ManifestOwner {
        page_size: PS as u32,
        system_id: control(dir).system_id,
    };
    let mut bytes = slots.concat();
    bytes.extend(list.encode_list_pages(owner).concat());
    std::fs::create_dir_all(dir.join("dw")).unwrap();
    std::fs::write(dir.join("dw").join("deferred"), bytes).unwrap();
}

/// `c.page` carrying `lsn` instead of its own, checksummed again.
fn with_lsn(c: &Crashed, lsn: Lsn) -> Vec<u8> {
    let mut p = c.page.clone();
    // Not set_page_lsn: it refuses to move an LSN back.
    p[crate::page::OFF_LSN..crate::page::OFF_LSN + 8].copy_from_slice(&lsn.0.to_le_bytes());
    crate::page::set_checksum(&mut p, crate::settings::ChecksumAlgorithm::Crc32c);
    p
}

#[test]
fn a_torn_page_is_restored_from_its_deferred_slot() {
    let root = tempfile::tempdir().unwrap();
    let c = crash_after_update(TornPageProtection::Off, root.path(), false);
    // A torn slot, an older copy and the page's copy, all listed by a
    // write-back: the newest intact one wins, the torn one is skipped.
    let mut torn = c.page.clone();
    torn[PS / 2..].fill(0x77);
    let older = with_lsn(&c, control(&c.dir).redo_lsn);
    write_listed(
        &c.dir,
        &[&torn, &older, &c.page],
        &[&c.page, &older, &c.page],
    );
    tear(&c);
    let db = Database::open(&c.dir, options(TornPageProtection::Off)).unwrap();
    assert_eq!(db.recovery.pages_repaired_from_double_writes, 1);
    assert_eq!(page_on_disk(&c), c.page);
    assert_rows_and_verify(db, &c.dir);
}

#[test]
fn a_deferred_copy_older_than_its_good_page_is_not_restored() {
    let root = tempfile::tempdir().unwrap();
    let c = crash_after_update(TornPageProtection::Off, root.path(), false);
    let redo = control(&c.dir).redo_lsn;
    assert!(page_lsn(&c.page) > redo);
    write_deferred(&c.dir, &[&with_lsn(&c, redo)]);
    let db = Database::open(&c.dir, options(TornPageProtection::Off)).unwrap();
    assert_eq!(db.recovery.pages_repaired_from_double_writes, 0);
    assert_eq!(page_on_disk(&c), c.page);
    assert_rows_and_verify(db, &c.dir);
}

#[test]
fn a_deferred_copy_below_the_redo_point_is_ignored() {
    a_copy_below_the_redo_point_is_ignored_in(|c| write_deferred(&c.dir, &[&c.page]));
}

#[test]
fn a_written_back_page_is_repaired_from_its_deferred_slot_not_the_area() {
    let root = tempfile::tempdir().unwrap();
    let opts = Options {
        double_write_defer_in_place: true,
        ..options(TornPageProtection::DoubleWrites)
    };
    // The client's eviction defers the page; a write-back (a checkpoint's,
    // cut off before its control file) writes it in place from its slot.
    let c = crash_after_update_with(opts.clone(), root.path(), |db| {
        let protection = db.engine.pool.page_write_protection();
        assert!(protection.deferred_pages() >= 1);
        assert!(protection.write_back_all(Issuer::Checkpointer).unwrap() >= 1);
    });
    let area = std::fs::read(Shard::Checkpointer.path(&c.dir)).unwrap();
    let expect = super::Expect {
        page_size: PS as u32,
        system_id: control(&c.dir).system_id,
        shard: Shard::Checkpointer,
    };
    let scan = super::scan_shard(Path::new("shard-0"), &area, &expect).unwrap();
    let in_area = |lsn| {
        scan.copies
            .iter()
            .any(|a| (a.file_id, a.block, a.lsn) == (c.file_id, c.block, lsn))
    };
    assert!(!in_area(page_lsn(&c.page)), "a write-back skips the area");
    tear(&c);
    let db = Database::open(&c.dir, opts).unwrap();
    assert!(db.recovery.pages_repaired_from_double_writes >= 1);
    assert_eq!(page_on_disk(&c), c.page);
    assert_rows_and_verify(db, &c.dir);
}

#[test]
fn a_deferred_copy_is_read_again_to_be_restored_and_must_be_as_found() {
    use super::{CopyImage, CopyReader, SlotCopy};
    use crate::checksum::crc::crc32c;
    let root = tempfile::tempdir().unwrap();
    let c = crash_after_update(TornPageProtection::Off, root.path(), false);
    let older = with_lsn(&c, control(&c.dir).redo_lsn);
    write_deferred(&c.dir, &[&older, &c.page]);
    let fs = PosixFileSystem::default();
    let mut reader = CopyReader::new(&fs, &c.dir, PS);
    let copy = SlotCopy {
        file_id: c.file_id,
        block: c.block,
        lsn: page_lsn(&c.page),
        batch_seq: 0,
        image: CopyImage::DeferredSlot {
            slot: 1,
            crc: crc32c(&c.page),
        },
    };
    assert_eq!(reader.bytes(&copy).unwrap(), &c.page[..]);
    // The slot no longer holds what the scan found there (here: the scan's
    // CRC is another's): an error naming the file and the slot.
    let changed = SlotCopy {
        image: CopyImage::DeferredSlot {
            slot: 1,
            crc: crc32c(&older),
        },
        ..copy.clone()
    };
    let err = reader.bytes(&changed).unwrap_err().to_string();
    assert!(
        err.contains("dw/deferred") && err.contains("slot 1"),
        "{err}"
    );
    let elsewhere = SlotCopy {
        image: CopyImage::DeferredSlot {
            slot: 0,
            crc: crc32c(&older),
        },
        ..copy
    };
    let err = reader.bytes(&elsewhere).unwrap_err().to_string();
    assert!(err.contains("WrongPage") && err.contains("slot 0"), "{err}");
}
