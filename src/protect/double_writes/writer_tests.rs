//! The write path on a real directory: what goes into a shard, and when a
//! slot may be reused.

use super::*;
use crate::buffer::PageId;
use crate::file::posix::PosixFileSystem;
use crate::file::FileKind;
use crate::file::{IoOp, IoStats};
use crate::lsn::Lsn;
use crate::page::{init_page, set_checksum, set_page_lsn, PageKind};
use crate::protect::double_writes::area::{scan_shard, Expect};
use crate::protect::double_writes::deferred_scan::ManifestStart;
use crate::protect::double_writes::manifest;
use crate::settings::{ChecksumAlgorithm, CreationSettings};

const PS: usize = 4096;
const SYSTEM_ID: u64 = 0xD0D0;

struct Setup {
    _tmp: tempfile::TempDir,
    dir: std::path::PathBuf,
    files: Arc<DataFiles>,
    dw: DoubleWrites,
    io: Arc<IoStats>,
}

/// An opening's start with batch sequences above `first_batch_seq - 1`
/// and no manifest found.
fn start(first_batch_seq: u64) -> AreaStart {
    AreaStart {
        first_batch_seq,
        ..AreaStart::default()
    }
}

fn setup(area_blocks: u32, batch_pages: usize) -> Setup {
    setup_with(area_blocks, batch_pages, false)
}

fn area(area_blocks: u32, batch_pages: usize, defer_in_place: bool) -> AreaSettings {
    AreaSettings {
        area_blocks,
        batch_pages,
        eviction_pages: 32,
        defer_in_place,
        keep_deferred: true,
        deferred_slots: area_blocks,
        flush_after: 0,
        checksums: ChecksumAlgorithm::Crc32c,
    }
}

fn setup_with(area_blocks: u32, batch_pages: usize, defer_in_place: bool) -> Setup {
    setup_area(area(area_blocks, batch_pages, defer_in_place))
}

fn setup_area(settings: AreaSettings) -> Setup {
    setup_area_on(settings, |fs| fs)
}

/// The real file layer, with `dw/`'s files wrapped by `.1` (a test's
/// fault or hook); every other file as it is.
struct WrapDoubleWriteFiles<W>(Arc<dyn FileSystem>, W);

impl<W> FileSystem for WrapDoubleWriteFiles<W>
where
    W: Fn(Arc<dyn File>) -> Arc<dyn File> + Send + Sync,
{
    fn open(
        &self,
        path: &Path,
        kind: FileKind,
        opts: crate::file::OpenOptions,
    ) -> Result<Arc<dyn File>> {
        let inner = self.0.open(path, kind, opts)?;
        Ok(match kind {
            FileKind::DoubleWrite => (self.1)(inner),
            _ => inner,
        })
    }
    crate::forward_file_system_methods!(0: rename, remove, sync_dir, create_dir_all, exists,
        list_dir, sector_size);
}

/// As [`setup_area`], on the file layer `layer` makes of the real one.
fn setup_area_on(
    settings: AreaSettings,
    layer: impl FnOnce(Arc<dyn FileSystem>) -> Arc<dyn FileSystem>,
) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let io = Arc::new(IoStats::default());
    let fs = layer(Arc::new(PosixFileSystem::new(io.clone())));
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let creation = CreationSettings {
        page_size: PS as u32,
        ..Default::default()
    };
    let files = Arc::new(DataFiles::new(fs.clone(), &dir.join("data"), &creation));
    let dw = DoubleWrites::open(
        fs.as_ref(),
        &dir,
        SYSTEM_ID,
        files.clone(),
        settings,
        &start(40),
        &DoubleWriteStats::default(),
    )
    .unwrap();
    Setup {
        _tmp: tmp,
        dir,
        files,
        dw,
        io,
    }
}

fn page(file_id: u32, block: u32, lsn: u64) -> PageCopy {
    let mut bytes = vec![0u8; PS];
    init_page(&mut bytes, PageKind::Raw, file_id, block, 0);
    set_page_lsn(&mut bytes, Lsn(lsn));
    set_checksum(&mut bytes, ChecksumAlgorithm::Crc32c);
    PageCopy::for_tests(PageId::new(file_id, block), bytes)
}

/// What the pool does around a call: protect, write in place (the pages
/// not deferred), complete.
fn write(s: &Setup, pages: &[PageCopy], who: Issuer) {
    let ticket = s.dw.before_in_place_writes(pages, who).unwrap();
    for (_, p) in pages
        .iter()
        .enumerate()
        .filter(|&(i, _)| ticket.in_place(i))
    {
        let file = s.files.get(p.id().file_id).unwrap();
        file.write_pages(p.id().block as u64, &[p.bytes()], who)
            .unwrap();
    }
    s.dw.after_in_place_writes(ticket, pages);
}

fn scan(s: &Setup, shard: Shard) -> crate::protect::double_writes::area::ShardScan {
    let path = shard.path(&s.dir);
    let bytes = std::fs::read(&path).unwrap();
    let expect = Expect {
        page_size: PS as u32,
        system_id: SYSTEM_ID,
        shard,
    };
    scan_shard(&path, &bytes, &expect).unwrap()
}

#[test]
fn each_writer_has_its_shard_and_batches_are_numbered_across_them() {
    let s = setup(64, 2);
    // Three pages at two per batch: two batches in one write, one fsync.
    let pages = [page(7, 1, 100), page(7, 2, 101), page(8, 0, 102)];
    write(&s, &pages, Issuer::Checkpointer);
    write(&s, &[page(7, 3, 103)], Issuer::BackgroundWriter);
    write(&s, &[page(7, 4, 104)], Issuer::Client);
    let ckpt = scan(&s, Shard::Checkpointer);
    let mut got: Vec<_> = ckpt
        .copies
        .iter()
        .map(|c| (c.file_id, c.block, c.lsn.0))
        .collect();
    got.sort();
    assert_eq!(got, [(7, 1, 100), (7, 2, 101), (8, 0, 102)]);
    assert_eq!(ckpt.max_batch_seq, 41, "started at 40, two batches");
    assert_eq!(scan(&s, Shard::BackgroundWriter).max_batch_seq, 42);
    assert_eq!(scan(&s, Shard::ClientEvictions).copies[0].block, 4);
    let st = s.dw.stats(Shard::Checkpointer);
    assert_eq!(st.pages.load(Relaxed), 3);
    assert_eq!(st.batches.load(Relaxed), 2);
    assert_eq!(st.writes.load(Relaxed), 1);
    assert_eq!(st.fsyncs.load(Relaxed), 1);
}

#[test]
fn a_slot_is_reused_only_after_its_data_file_was_fsynced() {
    // Four blocks: two one-page batches fill the area.
    let s = setup(4, 8);
    write(&s, &[page(7, 1, 100)], Issuer::Client);
    write(&s, &[page(7, 2, 101)], Issuer::Client);
    let data = s.files.get(7).unwrap();
    let stats = s.dw.stats(Shard::ClientEvictions);
    assert_eq!(stats.slot_syncs.load(Relaxed), 0);
    // The third batch takes the first one's blocks: block 1's in-place
    // write was never fsynced, so the writer fsyncs the data file first.
    let mark = data.durability_mark();
    assert!(!data.is_durable(mark));
    write(&s, &[page(7, 3, 102)], Issuer::Client);
    assert_eq!(stats.slot_syncs.load(Relaxed), 1);
    assert!(data.is_durable(mark));
    // A data fsync that covers the next entry (a checkpoint's) spares the
    // writer its own.
    s.files.sync_all(Issuer::Checkpointer).unwrap();
    write(&s, &[page(7, 4, 103)], Issuer::Client);
    assert_eq!(stats.slot_syncs.load(Relaxed), 1);
    let copies = scan(&s, Shard::ClientEvictions).copies;
    let mut blocks: Vec<u32> = copies.iter().map(|c| c.block).collect();
    blocks.sort();
    assert_eq!(blocks, [3, 4], "the first two batches were overwritten");
}

#[test]
fn another_size_creates_the_shard_again_and_another_database_is_refused() {
    let s = setup(8, 4);
    write(&s, &[page(7, 1, 100)], Issuer::Checkpointer);
    let fs = PosixFileSystem::default();
    let bigger = area(16, 4, false);
    let stats = DoubleWriteStats::default();
    DoubleWrites::open(
        &fs,
        &s.dir,
        SYSTEM_ID,
        s.files.clone(),
        bigger,
        &start(1),
        &stats,
    )
    .unwrap();
    let len = std::fs::metadata(Shard::Checkpointer.path(&s.dir))
        .unwrap()
        .len();
    assert_eq!(len, 17 * PS as u64);
    assert!(scan(&s, Shard::Checkpointer).copies.is_empty());
    let e = DoubleWrites::open(
        &fs,
        &s.dir,
        SYSTEM_ID + 1,
        s.files.clone(),
        bigger,
        &start(1),
        &stats,
    )
    .err()
    .expect("a shard of another database");
    assert!(e.to_string().contains("shard-0"), "{e}");
}

#[test]
fn sync_ahead_makes_the_next_slots_durable_so_the_writer_does_not_wait() {
    // Four blocks, two one-page batches: the next reservation reuses the
    // first batch's blocks.
    let s = setup(4, 8);
    write(&s, &[page(7, 1, 100)], Issuer::Client);
    write(&s, &[page(7, 2, 101)], Issuer::Client);
    let stats = s.dw.stats(Shard::ClientEvictions);
    assert_eq!(s.dw.sync_ahead(Issuer::BackgroundWriter).unwrap(), 1);
    assert_eq!(stats.syncs_ahead.load(Relaxed), 1);
    // Nothing left to do ahead; the writer reuses without an fsync.
    assert_eq!(s.dw.sync_ahead(Issuer::BackgroundWriter).unwrap(), 0);
    write(&s, &[page(7, 3, 102)], Issuer::Client);
    assert_eq!(stats.slot_syncs.load(Relaxed), 0);
}

/// The LSN of page `block` of file 7 as its data file holds it (None: not
/// written in place).
fn lsn_in_place(s: &Setup, block: u32) -> Option<u64> {
    let mut buf = vec![0u8; PS];
    let file = s.files.get(7).unwrap();
    match file
        .try_read_page(block as u64, &mut buf, Issuer::Client)
        .unwrap()
    {
        crate::file::segmented::PageRead::Whole if buf.iter().any(|&b| b != 0) => {
            Some(page_lsn(&buf).0)
        }
        _ => None,
    }
}

fn lsn_read(s: &Setup, block: u32) -> Option<u64> {
    let mut buf = vec![0u8; PS];
    s.dw.read_deferred(PageId::new(7, block), &mut buf, Issuer::Client)
        .unwrap()
        .then(|| page_lsn(&buf).0)
}

#[test]
fn deferred_pages_are_read_from_their_file_and_go_in_place_at_a_checkpoint() {
    let s = setup_with(8, 8, true);
    // A page whose file has no segment yet goes in place at once.
    write(&s, &[page(7, 5, 1)], Issuer::Client);
    assert_eq!(lsn_in_place(&s, 5), Some(1));
    let stats = s.dw.stats(Shard::ClientEvictions);
    assert_eq!(stats.deferred.load(Relaxed), 0);
    let area_pages = stats.pages.load(Relaxed);
    // Now the segment exists: pages 0 and 1 are deferred, served from
    // dw/deferred, and neither written in place nor to the area.
    write(&s, &[page(7, 0, 50), page(7, 1, 100)], Issuer::Client);
    assert_eq!((lsn_in_place(&s, 0), lsn_in_place(&s, 1)), (None, None));
    assert_eq!((lsn_read(&s, 0), lsn_read(&s, 1)), (Some(50), Some(100)));
    assert_eq!(stats.pages.load(Relaxed), area_pages, "not in the area");
    // A newer copy of page 1 makes the older one obsolete.
    write(&s, &[page(7, 1, 200)], Issuer::BackgroundWriter);
    assert_eq!(lsn_read(&s, 1), Some(200));
    let bgwriter = s.dw.stats(Shard::BackgroundWriter);
    assert_eq!(bgwriter.obsolete.load(Relaxed), 1);
    assert_eq!(
        stats.deferred.load(Relaxed) + bgwriter.deferred.load(Relaxed),
        3
    );
    assert!(stats.reads.load(Relaxed) >= 3);
    // A checkpoint fsyncs dw/deferred once, its slots standing in for the
    // area's copies, and writes every deferred page in place; reads go to
    // the data file again.
    let area_before = scan(&s, Shard::Checkpointer).copies.len();
    assert_eq!(s.dw.write_back_all(Issuer::Checkpointer).unwrap(), 2);
    assert_eq!(
        (lsn_in_place(&s, 0), lsn_in_place(&s, 1)),
        (Some(50), Some(200))
    );
    assert_eq!((lsn_read(&s, 0), lsn_read(&s, 1)), (None, None));
    let checkpointer = s.dw.stats(Shard::Checkpointer);
    assert_eq!(checkpointer.written_back.load(Relaxed), 2);
    assert_eq!(checkpointer.deferred_fsyncs.load(Relaxed), 1);
    assert_eq!(
        scan(&s, Shard::Checkpointer).copies.len(),
        area_before,
        "not through the area"
    );
    assert_eq!(s.dw.write_back_all(Issuer::Checkpointer).unwrap(), 0);
}

/// An 8-block area that defers, and file 7's segment on disk (a page of
/// a file without one goes in place at once).
fn deferring_with_file_7() -> Setup {
    let s = setup_with(8, 8, true);
    s.files
        .get(7)
        .unwrap()
        .write_pages(0, &[page(7, 0, 1).bytes()], Issuer::Client)
        .unwrap();
    s
}

#[test]
fn a_full_deferred_file_sends_pages_in_place_through_the_area() {
    // Here the deferred file holds as many pages as a shard's area: 8.
    let s = deferring_with_file_7();
    let pages: Vec<PageCopy> = (1..=10).map(|b| page(7, b, 100 + b as u64)).collect();
    write(&s, &pages, Issuer::Client);
    let stats = s.dw.stats(Shard::ClientEvictions);
    assert_eq!(stats.deferred.load(Relaxed), 8);
    assert_eq!(stats.pages.load(Relaxed), 2, "the two without a slot");
    assert_eq!(
        (lsn_in_place(&s, 9), lsn_in_place(&s, 10)),
        (Some(109), Some(110))
    );
    assert_eq!((lsn_in_place(&s, 1), lsn_read(&s, 1)), (None, Some(101)));
    // A slot freed by a write-back is handed out again.
    s.dw.write_back_all(Issuer::Checkpointer).unwrap();
    write(&s, &[page(7, 1, 300)], Issuer::Client);
    assert_eq!(lsn_read(&s, 1), Some(300));
    assert_eq!(lsn_in_place(&s, 1), Some(101));
}

#[test]
fn deferred_pages_of_a_dropped_file_are_never_written() {
    let s = deferring_with_file_7();
    write(&s, &[page(7, 1, 100)], Issuer::Client);
    assert_eq!(lsn_read(&s, 1), Some(100));
    s.dw.forget_file(7);
    assert_eq!(lsn_read(&s, 1), None);
    assert_eq!(s.dw.write_back_all(Issuer::Checkpointer).unwrap(), 0);
    assert_eq!(lsn_in_place(&s, 1), None);
}

#[test]
fn a_page_written_in_place_later_is_no_longer_read_from_its_old_copy() {
    // The crash laboratory's "live read was wrong": a page the background
    // writer deferred, changed again and written by the checkpoint (in
    // place at once), was then read from its stale copy.
    let s = setup_with(8, 8, true);
    write(&s, &[page(7, 0, 1)], Issuer::Client); // creates the segment
    write(&s, &[page(7, 1, 100)], Issuer::BackgroundWriter);
    assert_eq!(lsn_read(&s, 1), Some(100));
    write(&s, &[page(7, 1, 200)], Issuer::Checkpointer);
    assert_eq!(lsn_in_place(&s, 1), Some(200));
    assert_eq!(lsn_read(&s, 1), None, "the data file holds the newest");
    // Nor is the old copy written back over it.
    s.dw.write_back_all(Issuer::Checkpointer).unwrap();
    assert_eq!(lsn_in_place(&s, 1), Some(200));
}

/// The newest whole manifest in `dir`'s `dw/deferred`, and the slots of
/// its pages.
fn newest_manifest_at(dir: &Path) -> manifest::FoundManifest {
    let file = std::fs::read(dir.join("dw").join(DEFERRED_FILE)).unwrap();
    let owner = ManifestOwner {
        page_size: PS as u32,
        system_id: SYSTEM_ID,
    };
    let mut parts = manifest::ManifestParts::default();
    for (slot, page) in file.chunks_exact(PS).enumerate() {
        if let Some(part) = manifest::decode_part(page, owner) {
            parts.add(slot as u32, part);
        }
    }
    parts.whole().into_iter().next().expect("a whole manifest")
}

fn newest_manifest(dir: &Path) -> manifest::Manifest {
    newest_manifest_at(dir).manifest
}

#[test]
fn a_checkpoint_names_every_deferred_page_in_a_durable_manifest() {
    let s = deferring_with_file_7();
    let opened = newest_manifest(&s.dir);
    assert!(opened.entries.is_empty(), "an opening starts empty");
    let pages = [page(7, 1, 100), page(7, 2, 101)];
    write(&s, &pages, Issuer::Client);
    assert!(!s.dw.begin_checkpoint(false), "2 of 8 slots taken");
    assert!(s.dw.begin_checkpoint(true), "a shutdown writes them back");
    let fsyncs = || {
        s.io.calls_by(Issuer::Checkpointer, FileKind::DoubleWrite, IoOp::Fsync)
    };
    let before = fsyncs();
    s.dw.persist_deferred(Lsn(150), Issuer::Checkpointer)
        .unwrap();
    assert_eq!(fsyncs() - before, 1, "the slots and the manifest together");
    let m = newest_manifest(&s.dir);
    assert_eq!((m.seq, m.redo_lsn), (opened.seq + 1, Lsn(150)));
    let named: Vec<(u32, u32, u64, u32)> = m
        .entries
        .iter()
        .map(|e| (e.file_id, e.block, e.lsn.0, e.image_crc))
        .collect();
    let crc = |p: &PageCopy| crate::checksum::crc::crc32c(p.bytes());
    assert_eq!(
        named,
        vec![(7, 1, 100, crc(&pages[0])), (7, 2, 101, crc(&pages[1]))]
    );
    let checkpointer = s.dw.stats(Shard::Checkpointer);
    assert_eq!(checkpointer.manifests.load(Relaxed), 1);
    // The pages stay deferred, not written in place.
    assert_eq!((lsn_read(&s, 1), lsn_in_place(&s, 1)), (Some(100), None));
    // A newer copy of page 1 never takes the slot the manifest names, which
    // keeps the older copy until a later manifest is durable.
    write(&s, &[page(7, 1, 200), page(7, 3, 201)], Issuer::Client);
    let slots: Vec<u32> = [1, 3]
        .iter()
        .map(|&b| s.dw.deferred.lookup(PageId::new(7, b)).unwrap().slot)
        .collect();
    assert!(!slots.contains(&m.entries[0].slot), "{slots:?}");
    let file = std::fs::read(s.dir.join("dw").join(DEFERRED_FILE)).unwrap();
    let at = m.entries[0].slot as usize * PS;
    assert_eq!(page_lsn(&file[at..at + PS]), Lsn(100));
    assert_eq!(s.dw.durable_manifest(), m.seq, "for the control file");
    // Another opening writes an empty manifest above the one recovery
    // took, in the lowest slot that holds none of its pages (and is named
    // by none of its entries), and keeps the file's room on disk.
    let kept = newest_manifest_at(&s.dir).slots;
    let deferred_len = || {
        std::fs::metadata(s.dir.join("dw").join(DEFERRED_FILE))
            .unwrap()
            .len()
    };
    let had = deferred_len();
    drop(s.dw);
    let recovered = AreaStart {
        first_batch_seq: 1,
        manifest: ManifestStart {
            last_seq: m.seq,
            keep_slots: kept.clone(),
            redo: Lsn(150),
        },
    };
    let again = DoubleWrites::open(
        &PosixFileSystem::default(),
        &s.dir,
        SYSTEM_ID,
        s.files.clone(),
        area(8, 8, true),
        &recovered,
        &DoubleWriteStats::default(),
    )
    .unwrap();
    assert_eq!(again.durable_manifest(), m.seq + 1);
    drop(again);
    let reopened = newest_manifest_at(&s.dir);
    assert_eq!(
        (reopened.manifest.seq, reopened.manifest.entries.len()),
        (m.seq + 1, 0)
    );
    let slot = (0..).find(|s| !kept.contains(s)).unwrap();
    assert_eq!(reopened.slots, [slot]);
    assert!(had > (slot as u64 + 1) * PS as u64);
    assert_eq!(deferred_len(), had);
}

/// A checkpoint's last step, at redo point `redo`: (block, LSN) of each
/// page its manifest names.
fn persist_and_name(s: &Setup, redo: u64) -> Vec<(u32, u64)> {
    s.dw.persist_deferred(Lsn(redo), Issuer::Checkpointer)
        .unwrap();
    newest_manifest(&s.dir)
        .entries
        .iter()
        .map(|e| (e.block, e.lsn.0))
        .collect()
}

#[test]
fn a_checkpoint_that_writes_nothing_back_defers_its_own_pages() {
    let s = deferring_with_file_7();
    let checkpointer = s.dw.stats(Shard::Checkpointer);
    assert!(!s.dw.begin_checkpoint(false), "nothing to write back");
    write(&s, &[page(7, 1, 100)], Issuer::Checkpointer);
    assert_eq!((lsn_read(&s, 1), lsn_in_place(&s, 1)), (Some(100), None));
    assert_eq!(checkpointer.deferred.load(Relaxed), 1);
    assert_eq!(checkpointer.pages.load(Relaxed), 0, "nothing in the area");
    assert_eq!(
        persist_and_name(&s, 150),
        vec![(1, 100)],
        "durable by its manifest"
    );
    // Outside a checkpoint, and in one that writes the deferred pages
    // back (here a shutdown's), the checkpointer's pages go in place.
    write(&s, &[page(7, 2, 200)], Issuer::Checkpointer);
    assert!(s.dw.begin_checkpoint(true));
    write(&s, &[page(7, 3, 300)], Issuer::Checkpointer);
    assert_eq!(
        (lsn_in_place(&s, 2), lsn_in_place(&s, 3)),
        (Some(200), Some(300))
    );
    assert_eq!(checkpointer.pages.load(Relaxed), 2);
    assert_eq!(checkpointer.deferred.load(Relaxed), 1);
}

#[test]
fn a_checkpoint_finding_the_file_half_taken_writes_back_only_cold_pages() {
    let s = deferring_with_file_7();
    // Five of eight slots: more than half taken.
    let evicted: Vec<PageCopy> = (1..=5).map(|b| page(7, b, 100 + b as u64)).collect();
    write(&s, &evicted, Issuer::Client);
    assert!(s.dw.begin_checkpoint(false), "half taken: a write-back");
    // The checkpoint writes a newer page 1 and a page 6: deferred, both.
    write(
        &s,
        &[page(7, 1, 200), page(7, 6, 201)],
        Issuer::Checkpointer,
    );
    let checkpointer = s.dw.stats(Shard::Checkpointer);
    assert_eq!(checkpointer.deferred.load(Relaxed), 2);
    // Only pages 2 to 5 are cold: page 1's newest copy is this era's.
    assert_eq!(
        s.dw.write_back_paced(Issuer::Checkpointer, &mut |_| {})
            .unwrap(),
        4
    );
    let in_place: Vec<Option<u64>> = (1..=6).map(|b| lsn_in_place(&s, b)).collect();
    let want = vec![None, Some(102), Some(103), Some(104), Some(105), None];
    assert_eq!(in_place, want);
    assert_eq!((lsn_read(&s, 1), lsn_read(&s, 6)), (Some(200), Some(201)));
    assert_eq!(persist_and_name(&s, 250), vec![(1, 200), (6, 201)]);
    // The shutdown checkpoint writes back all.
    assert!(s.dw.begin_checkpoint(true));
    assert_eq!(
        s.dw.write_back_paced(Issuer::Checkpointer, &mut |_| {})
            .unwrap(),
        2
    );
    assert_eq!(
        (lsn_in_place(&s, 1), lsn_in_place(&s, 6)),
        (Some(200), Some(201))
    );
}

#[test]
fn a_checkpoint_makes_room_for_its_own_pages_before_storing_them() {
    let s = deferring_with_file_7();
    // Six of eight slots: more than half taken, two free.
    let evicted: Vec<PageCopy> = (1..=6).map(|b| page(7, b, 100 + b as u64)).collect();
    write(&s, &evicted, Issuer::Client);
    persist_and_name(&s, 150);
    assert!(s.dw.begin_checkpoint(false));
    // Its dirty pages: a newer page 1, and pages 7 and 8. The cold ones
    // (2 to 6) go in place first, and a manifest frees their slots.
    let marked = [PageId::new(7, 1), PageId::new(7, 7), PageId::new(7, 8)];
    let room =
        s.dw.make_room(&marked, Lsn(300), Issuer::Checkpointer, &mut |_| {});
    assert_eq!(room.unwrap(), 5);
    let named: Vec<u32> = newest_manifest(&s.dir)
        .entries
        .iter()
        .map(|e| e.block)
        .collect();
    assert_eq!(named, [1], "make_room's manifest names only page 1");
    let own = [page(7, 1, 301), page(7, 7, 302), page(7, 8, 303)];
    write(&s, &own, Issuer::Checkpointer);
    let checkpointer = s.dw.stats(Shard::Checkpointer);
    assert_eq!(
        checkpointer.deferred.load(Relaxed),
        3,
        "all three found a slot"
    );
    assert_eq!(checkpointer.pages.load(Relaxed), 0, "none through the area");
    let paced = s.dw.write_back_paced(Issuer::Checkpointer, &mut |_| {});
    assert_eq!(paced.unwrap(), 0, "nothing cold is left");
    let in_place: Vec<Option<u64>> = (1..=8).map(|b| lsn_in_place(&s, b)).collect();
    let cold = (2..=6).map(|b| Some(100 + b));
    let want: Vec<Option<u64>> = [None].into_iter().chain(cold).chain([None, None]).collect();
    assert_eq!(in_place, want);
    assert_eq!(persist_and_name(&s, 300), [(1, 301), (7, 302), (8, 303)]);
}

#[test]
fn a_victim_goes_alone_while_the_deferred_file_has_room_for_a_batch() {
    // Eight slots in the deferred file.
    let s = deferring_with_file_7();
    let batch = s.dw.eviction_batch();
    assert!(batch > 1, "a batch of {batch}");
    assert_eq!(s.dw.eviction_batch_now(), 1);
    // Fill the file until a whole batch no longer fits: victims then go
    // through the area in batches, which share its fsync.
    let fill = 8 - batch + 1;
    let pages: Vec<PageCopy> = (1..=fill as u32).map(|b| page(7, b, 100)).collect();
    write(&s, &pages, Issuer::Client);
    assert_eq!(s.dw.eviction_batch_now(), batch);
    // Room again once a write-back frees the slots.
    s.dw.write_back_all(Issuer::Checkpointer).unwrap();
    assert_eq!(s.dw.eviction_batch_now(), 1);
    // Without deferral a victim always takes its batch.
    assert_eq!(
        setup(8, 8).dw.eviction_batch_now(),
        setup(8, 8).dw.eviction_batch()
    );
}

#[path = "write_back_tests.rs"]
mod write_back_tests;

#[path = "write_back_race_tests.rs"]
mod write_back_race_tests;
