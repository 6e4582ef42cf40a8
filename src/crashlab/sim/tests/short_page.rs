//! A data file that ends inside its last page after a power loss, as ext4
//! with 4 KB blocks can leave a file whose 8 KB page was being appended.

use super::*;
use crate::db::Database;
use crate::options::Options;
use crate::settings::TornPageProtection;
use crate::table::key_u64;

const PAGE: usize = 8192;

fn db_dir() -> &'static Path {
    Path::new("/sim/db")
}

fn options(protection: TornPageProtection) -> Options {
    let mut o = Options::default();
    o.creation.torn_page_protection = Some(protection);
    // A small pool: the new leaves are evicted (written, never fsynced).
    o.buffer_pool_size = 32 * PAGE as u64;
    o.creation.wal_segment_size = Some(1 << 20);
    o
}

fn value(k: u64) -> Vec<u8> {
    format!("row {k};").repeat(20).into_bytes()
}

/// Rows `0..rows` of table "t", committed after a checkpoint taken when
/// `checkpoint_at` rows were in: the leaves added after it are new pages
/// at the end of the data file. Then the power fails, keeping every write.
/// Returns the durable image and the data file's path.
fn build(protection: TornPageProtection, checkpoint_at: u64, rows: u64) -> (SimImage, PathBuf) {
    let fs = new_fs();
    let stats = Arc::new(IoStats::default());
    let sim: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db = Database::create_with(sim, stats, db_dir(), options(protection)).unwrap();
    let t = db.create_table("t").unwrap();
    for k in 0..rows {
        if k == checkpoint_at {
            db.checkpoint().unwrap();
        }
        let mut tx = db.begin();
        tx.upsert(&t, &key_u64(k), &value(k)).unwrap();
        tx.commit().unwrap();
    }
    if checkpoint_at == rows {
        db.checkpoint().unwrap();
    }
    let path = db_dir().join("data").join(t.file_id.to_string());
    fs.crash(1, &keep_all());
    drop(db);
    (fs.snapshot_durable(), path)
}

/// The image with its data file cut to end `cut` bytes into its last page.
fn cut_last_page(mut image: SimImage, path: &Path, cut: usize) -> SimImage {
    let bytes = image.files.get_mut(path).unwrap();
    assert_eq!(bytes.len() % PAGE, 0);
    let len = bytes.len() - PAGE + cut;
    bytes.truncate(len);
    image
}

fn open(image: SimImage, protection: TornPageProtection) -> (SimFileSystem, Result<Database>) {
    let stats = Arc::new(IoStats::default());
    let fs = SimFileSystem::from_image(image, stats.clone());
    let sim: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db = Database::open_with(sim, stats, db_dir(), options(protection));
    (fs, db)
}

fn check_rows(db: &Database, rows: u64) {
    let t = db.table("t").unwrap();
    let got = db.begin().scan(&t, &[], None, usize::MAX).unwrap();
    assert_eq!(got.len() as u64, rows);
    for (k, (key, v)) in got.into_iter().enumerate() {
        assert_eq!(key, key_u64(k as u64));
        assert_eq!(v, value(k as u64));
    }
}

/// The new leaf at the end of the file was being written when the power
/// failed: the WAL holds its image (the split that made it logs one, in
/// every mode), so recovery restores it and the file is whole again.
#[test]
fn recovery_restores_a_short_new_page_at_the_end_of_a_data_file() {
    for protection in [TornPageProtection::FullPages, TornPageProtection::Off] {
        let (image, path) = build(protection, 10, 3000);
        let len = image.files[&path].len();
        // Evictions wrote leaves made after the checkpoint (of 2 pages).
        assert!(len > 20 * PAGE, "{len}");
        for cut in [512, 4096, 7680] {
            let (fs, db) = open(cut_last_page(image.clone(), &path, cut), protection);
            let db = db.unwrap_or_else(|e| panic!("{protection} cut at {cut}: {e}"));
            let file = path.file_name().unwrap().to_str().unwrap();
            let block = format!("file {file} block {}", len / PAGE - 1);
            assert!(
                db.recovery.damaged_pages_repaired.contains(&block),
                "{protection}: {:?} has no {block}",
                db.recovery
            );
            check_rows(&db, 3000);
            db.close().unwrap();
            // Whole again (and longer: redo also wrote the leaves that
            // were never evicted).
            let now = fs.durable_bytes(&path).unwrap().len();
            assert!(now % PAGE == 0 && now >= len, "{now}");
            let report = crate::verify::verify_database(&fs, db_dir()).unwrap();
            assert!(report.ok(), "{report:?}");
        }
    }
}

/// A short page that no WAL record after the redo point restores holds
/// committed rows that are lost: it is reported, naming the file and the
/// block, never read as a new, empty page.
#[test]
fn a_short_page_the_wal_cannot_restore_is_reported() {
    let (image, path) = build(TornPageProtection::FullPages, 3000, 3000);
    let len = image.files[&path].len();
    let (fs, db) = open(
        cut_last_page(image, &path, 4096),
        TornPageProtection::FullPages,
    );
    let db = db.unwrap();
    let t = db.table("t").unwrap();
    let e = db
        .begin()
        .scan(&t, &[], None, usize::MAX)
        .unwrap_err()
        .to_string();
    let block = format!("block {}", len / PAGE - 1);
    assert!(
        e.contains(path.to_str().unwrap()) && e.contains(&block) && e.contains("partial page"),
        "{e}"
    );
    drop(db);
    let report = crate::verify::verify_database(&fs, db_dir()).unwrap();
    let named = report
        .failures
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>();
    let want = format!(
        "{}: {block}: partial page at the end of the file (4096 of 8192 bytes)",
        path.display()
    );
    assert_eq!(named, vec![want]);
    assert_eq!(report.partial_pages, vec![path]);
}
