//! Deferred in-place writes (`dw/deferred`) on the simulated file system:
//! the holes an outside review found (issue 34, part 3), each as the
//! scenario that opened it.

use super::*;
use crate::db::Database;
use crate::options::Options;
use crate::page::{read_header, set_checksum, verify_page, PageState};
use crate::settings::ChecksumAlgorithm;
use crate::settings::TornPageProtection;
use crate::table::key_u64;
use crate::table::Table;
use std::time::Duration;

pub(super) const PAGE: usize = 8192;
const SECTOR: usize = 512;
pub(super) const ROWS: u64 = 400;

pub(super) fn db_dir() -> &'static Path {
    Path::new("/sim/deferred")
}

pub(super) fn deferred_path() -> PathBuf {
    db_dir().join("dw").join("deferred")
}

/// Deferral on and kept across checkpoints; no thread writes pages but
/// the test's own calls.
pub(super) fn options(checksums: ChecksumAlgorithm) -> Options {
    let mut o = Options::default();
    o.creation.torn_page_protection = Some(TornPageProtection::DoubleWrites);
    o.creation.data_checksums = Some(checksums);
    o.creation.page_size = Some(PAGE as u32);
    o.creation.wal_segment_size = Some(1 << 20);
    o.buffer_pool_size = 512 * PAGE as u64;
    o.max_wal_size = 1 << 40;
    o.checkpoint_timeout = Duration::from_secs(3600);
    o.bgwriter_lru_maxpages = 0;
    o.double_write_sync_ahead = false;
    o.double_write_buffer_size = 64 * PAGE as u64;
    o.double_write_defer_in_place = true;
    o.double_write_keep_deferred = true;
    o
}

/// The same length for every version, so a leaf keeps its layout.
pub(super) fn value(k: u64, version: u32) -> Vec<u8> {
    format!("row {k:05} v{version:03};").repeat(6).into_bytes()
}

pub(super) fn update_all(db: &Database, t: &Table, version: u32) {
    let mut tx = db.begin();
    for k in 0..ROWS {
        tx.update(t, &key_u64(k), &value(k, version)).unwrap();
    }
    tx.commit().unwrap();
}

pub(super) fn create(fs: &SimFileSystem, o: Options) -> (Database, Table) {
    let sim: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let db = Database::create_with(sim, Arc::new(IoStats::default()), db_dir(), o).unwrap();
    let t = db.create_table("t").unwrap();
    db.bulk_load(&t, (0..ROWS).map(|k| (key_u64(k), value(k, 0))))
        .unwrap();
    (db, t)
}

pub(super) fn open(fs: &SimFileSystem, o: Options) -> crate::error::Result<Database> {
    let sim: Arc<dyn FileSystem> = Arc::new(fs.clone());
    Database::open_with(sim, Arc::new(IoStats::default()), db_dir(), o)
}

/// Every row reads back at `version`; else the rows that do not.
pub(super) fn rows_not_at(db: &Database, t: &Table, version: u32) -> Vec<u64> {
    let rows = db.begin().scan(t, &[], None, usize::MAX).unwrap();
    assert_eq!(rows.len() as u64, ROWS);
    (0..ROWS)
        .filter(|&k| rows[k as usize].1 != value(k, version))
        .collect()
}

/// (file id, block, LSN) of the page image in each slot of `file` that
/// passes its checks under `alg`.
fn slot_pages(file: &[u8], alg: ChecksumAlgorithm) -> BTreeMap<usize, (u32, u32, u64)> {
    let mut out = BTreeMap::new();
    for (slot, img) in file.chunks_exact(PAGE).enumerate() {
        let Ok(h) = read_header(img) else { continue };
        if matches!(
            verify_page(img, alg, h.file_id, h.block),
            Ok(PageState::Valid)
        ) {
            out.insert(slot, (h.file_id, h.block, h.lsn.0));
        }
    }
    out
}

/// Item 1. With `data_checksums = fnv` a slot no manifest names was a
/// copy on its 16-bit page checksum alone. A page evicted again takes the
/// lowest free slot, so its version r lands on the slot of version r-2; a
/// power cut tears that write, keeping r's header sector and r-2's other
/// sectors. About one such tear in 65,536 passes fnv: here its checksum is
/// computed again over the mix, which stands for that one. Recovery took it
/// for the newest copy, restored it over the intact older data page and
/// skipped the WAL up to its LSN: an acknowledged commit half applied, with
/// no error. No in-place write relied on that slot (no write-back listed
/// it), so recovery must not use it.
#[test]
fn fnv_a_torn_slot_no_write_back_listed_is_not_restored() {
    let alg = ChecksumAlgorithm::Fnv;
    let fs = new_fs();
    let (db, t) = create(&fs, options(alg));
    // The first update splits full leaves; the checkpoint after it puts
    // those images before the redo point.
    update_all(&db, &t, 1);
    db.checkpoint().unwrap();
    let mut history: Vec<Vec<u8>> = Vec::new();
    let mut found = None;
    for version in 2..=40u32 {
        update_all(&db, &t, version);
        db.engine.pool.flush_dirty(Issuer::Client, 64).unwrap();
        let file = fs.live_bytes(&deferred_path()).unwrap();
        if let Some(old_file) = history.len().checked_sub(2).map(|i| &history[i]) {
            let then = slot_pages(old_file, alg);
            for (&slot, &(f, b, lsn)) in &slot_pages(&file, alg) {
                let same_page_older = then
                    .get(&slot)
                    .is_some_and(|&(f0, b0, lsn0)| (f0, b0) == (f, b) && lsn0 < lsn);
                if f != t.file_id || !same_page_older {
                    continue;
                }
                let (new, old) = (
                    &file[slot * PAGE..(slot + 1) * PAGE],
                    &old_file[slot * PAGE..(slot + 1) * PAGE],
                );
                // The header sector from r, the first sector that differs
                // from r-2, a checksum that passes.
                let Some(s) = (1..PAGE / SECTOR).find(|&s| {
                    new[s * SECTOR..(s + 1) * SECTOR] != old[s * SECTOR..(s + 1) * SECTOR]
                }) else {
                    continue;
                };
                let mut mix = new.to_vec();
                mix[s * SECTOR..(s + 1) * SECTOR]
                    .copy_from_slice(&old[s * SECTOR..(s + 1) * SECTOR]);
                set_checksum(&mut mix, alg);
                assert!(matches!(verify_page(&mix, alg, f, b), Ok(PageState::Valid)));
                found = Some((version, slot, mix));
                break;
            }
        }
        history.push(file);
        if found.is_some() {
            break;
        }
    }
    let (version, slot, mix) = found.expect("a page took the slot of its version before last");
    fs.crash(1, &keep_all());
    drop(db);
    let mut image = fs.snapshot_durable();
    image.files.get_mut(&deferred_path()).unwrap()[slot * PAGE..(slot + 1) * PAGE]
        .copy_from_slice(&mix);
    let fs = SimFileSystem::from_image(image, Arc::new(IoStats::default()));
    let db = open(&fs, options(alg)).expect("recovery opens");
    let stale = rows_not_at(&db, &t, version);
    assert!(
        stale.is_empty(),
        "the commit setting every row to version {version} came back half applied: \
         {} of {ROWS} rows read an older version (the torn slot {slot} was restored)",
        stale.len()
    );
}

/// The whole manifests in a `dw/deferred` image, newest first: (seq, page
/// slots).
fn whole_manifests(file: &[u8], system_id: u64) -> Vec<(u64, Vec<u32>)> {
    use crate::protect::double_writes::manifest::{decode_part, ManifestOwner, ManifestParts};
    let owner = ManifestOwner {
        page_size: PAGE as u32,
        system_id,
    };
    let mut parts = ManifestParts::default();
    for (slot, page) in file.chunks_exact(PAGE).enumerate() {
        if let Some(part) = decode_part(page, owner) {
            parts.add(slot as u32, part);
        }
    }
    parts
        .whole()
        .into_iter()
        .map(|f| (f.manifest.seq, f.slots))
        .collect()
}

/// Item 2. A checkpoint's manifest M_new is durable and its control file
/// is not: the control file relies on M_old, whose pages were reused once
/// M_new was durable (make_room's pool pass stores pages there), and an
/// older manifest's page outlives it further on. Run B takes M_new,
/// restores and fsyncs, and writes its empty manifest to "the lowest slot
/// holding no page of the manifest taken", which may be a slot M_new
/// names; the power fails during that write. Run C then found M_new
/// failing, passed over it (its redo point is after the control file's)
/// to the older manifest and refused to open ("relied on manifest n, and
/// the newest whole one is n-2"), though run B had restored every page.
/// Every power cut in run B must leave a database that opens, whole.
#[test]
fn a_power_cut_in_the_opening_after_a_manifest_the_control_file_missed_leaves_it_openable() {
    let alg = ChecksumAlgorithm::Crc32c;
    let fs = new_fs();
    let (db, t) = create(&fs, options(alg));
    let control_path = db_dir().join("untorn.control");
    let system_id = db.engine.control.lock().system_id;
    let mut controls = Vec::new();
    let mut older_manifest_page = None;
    for version in 1..=4u32 {
        update_all(&db, &t, version);
        db.engine.pool.flush_dirty(Issuer::Client, 64).unwrap();
        db.checkpoint().unwrap();
        controls.push(fs.live_bytes(&control_path).unwrap());
        if version == 2 {
            let file = fs.live_bytes(&deferred_path()).unwrap();
            let s = whole_manifests(&file, system_id)[0].1[0] as usize;
            older_manifest_page = Some(file[s * PAGE..(s + 1) * PAGE].to_vec());
        }
    }
    fs.crash(1, &keep_all());
    drop(db);
    let mut image = fs.snapshot_durable();
    // The control file of the checkpoint before the last: it relies on
    // M_old, the second newest manifest.
    image
        .files
        .insert(control_path, controls[controls.len() - 2].clone());
    let found = whole_manifests(&image.files[&deferred_path()], system_id);
    let file = image.files.get_mut(&deferred_path()).unwrap();
    for &s in &found[1].1 {
        file[s as usize * PAGE..(s as usize + 1) * PAGE].fill(0x11);
    }
    file.extend_from_slice(&older_manifest_page.unwrap());
    let mut cuts = 0;
    for n in 0..400u64 {
        let b = SimFileSystem::from_image(image.clone(), Arc::new(IoStats::default()));
        b.update_faults(|f| f.power_cut_after = Some(n));
        if open(&b, options(alg)).is_ok() {
            break;
        }
        cuts += 1;
        b.crash(n, &tear_only());
        let db = open(&b, options(alg)).unwrap_or_else(|e| {
            panic!("a power cut in run B after {n} changes: run C refuses to open: {e}")
        });
        assert_eq!(rows_not_at(&db, &t, 4), Vec::<u64>::new(), "cut after {n}");
    }
    assert!(cuts > 10, "run B was cut at {cuts} places only");
}
