//! Recovery's restore from the double-write area, on the simulated file
//! system: the area is read, the data page written and fsynced through the
//! file traits, so the crash laboratory sees every step.

use super::*;
use crate::db::Database;
use crate::lsn::Lsn;
use crate::options::Options;
use crate::page::page_lsn;
use crate::protect::double_writes::area::BatchPage;
use crate::protect::double_writes::recover::shard_0_for_tests;
use crate::settings::TornPageProtection;
use crate::table::key_u64;

const PAGE: usize = 8192;

fn db_dir() -> &'static Path {
    Path::new("/sim/db")
}

fn options() -> Options {
    let mut o = Options::default();
    o.creation.torn_page_protection = Some(TornPageProtection::Off);
    o.creation.wal_segment_size = Some(1 << 20);
    o
}

fn value(k: u64, version: u32) -> Vec<u8> {
    format!("row {k} v{version};").repeat(8).into_bytes()
}

/// A database on the simulation whose page holding row 250 (updated and
/// written in place after the redo point) is torn on disk, with
/// `dw/shard-0` holding the page's last copy at block 1 of the area (its
/// image at block 2): the image, the data file's path, the block and the
/// page's intact bytes, the table.
fn torn_page_with_its_copy() -> (SimImage, PathBuf, usize, Vec<u8>, crate::db::Table) {
    let fs = new_fs();
    let sim: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db = Database::create_with(sim, Arc::new(IoStats::default()), db_dir(), options()).unwrap();
    let t = db.create_table("t").unwrap();
    db.bulk_load(&t, (0..500u64).map(|k| (key_u64(k), value(k, 0))))
        .unwrap();
    db.checkpoint().unwrap();
    let mut tx = db.begin();
    tx.update(&t, &key_u64(250), &value(250, 1)).unwrap();
    tx.commit().unwrap();
    // Written in place after the redo point, as an eviction would.
    db.engine.pool.flush_dirty(WHO, 64).unwrap();
    let system_id = db.engine.control.lock().system_id;
    fs.crash(1, &keep_all());
    drop(db);
    let mut image = fs.snapshot_durable();
    let path = db_dir().join("data").join(t.file_id.to_string());
    let bytes = image.files.get_mut(&path).unwrap();
    let needle = value(250, 1);
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .expect("the updated row on disk");
    let block = at / PAGE;
    let page = bytes[block * PAGE..(block + 1) * PAGE].to_vec();
    for b in &mut bytes[block * PAGE + PAGE / 2..(block + 1) * PAGE] {
        *b ^= 0x5A;
    }
    let copy = BatchPage {
        file_id: t.file_id,
        block: block as u32,
        lsn: Lsn(page_lsn(&page).0),
        image: &page,
    };
    let dw = db_dir().join("dw");
    image.dirs.insert(dw.clone());
    image.files.insert(
        dw.join("shard-0"),
        shard_0_for_tests(PAGE, system_id, &[copy]),
    );
    (image, path, block, page, t)
}

/// Opens `fs` and checks the torn page was restored from its copy and
/// every row reads back.
fn assert_restored(
    fs: &SimFileSystem,
    path: &Path,
    block: usize,
    page: &[u8],
    t: &crate::db::Table,
) {
    let stats = fs.stats().clone();
    let sim: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db = Database::open_with(sim, stats.clone(), db_dir(), options()).unwrap();
    assert_eq!(db.recovery.pages_repaired_from_double_writes, 1);
    assert!(stats.calls_by(Issuer::Recovery, FileKind::DoubleWrite, IoOp::Read) > 0);
    let live = fs.live_bytes(path).unwrap();
    assert_eq!(&live[block * PAGE..(block + 1) * PAGE], page);
    let got = db.begin().scan(t, &[], None, usize::MAX).unwrap();
    assert_eq!(got.len(), 500);
    for (k, (key, v)) in got.into_iter().enumerate() {
        let k = k as u64;
        assert_eq!(key, key_u64(k));
        assert_eq!(v, value(k, u32::from(k == 250)), "row {k}");
    }
}

#[test]
fn a_torn_page_is_restored_from_the_area_through_the_file_traits() {
    let (image, path, block, page, t) = torn_page_with_its_copy();
    let fs = SimFileSystem::from_image(image, Arc::new(IoStats::default()));
    assert_restored(&fs, &path, block, &page, &t);
}

/// An area block that fails reads (a sector a torn write left unreadable,
/// the `unreadable` fault) is a torn block, not the end of recovery: it
/// stopped opening with EIO on `dw/shard-0` (crash laboratory, seed 1,
/// iteration 57 with every fault).
#[test]
fn an_unreadable_area_block_does_not_stop_recovery() {
    let (image, path, block, page, t) = torn_page_with_its_copy();
    let fs = SimFileSystem::from_image(image, Arc::new(IoStats::default()));
    // Block 5 of the shard file: past the batch (header at 1, image at 2).
    let shard = db_dir().join("dw").join("shard-0");
    let sector = (5 * PAGE as u64) / 512 + 3;
    fs.update_faults(|f| {
        f.eio_sector_size = 512;
        f.read_eio_on.insert((shard.clone(), sector));
    });
    assert_restored(&fs, &path, block, &page, &t);
}
