use super::*;
use crate::file::posix::PosixFileSystem;
use crate::file::FileSystem;
use crate::page::{init_page, page_lsn, PageKind};
use crate::settings::CreationSettings;
use parking_lot::Mutex;
use std::collections::HashMap;

/// A WAL stand-in that records the flushes asked of it.
#[derive(Default)]
struct FakeWal {
    flushed: AtomicU64,
    flush_calls: AtomicU64,
}

impl WalFlush for FakeWal {
    fn flush(&self, upto: Lsn, _who: Issuer) -> Result<()> {
        self.flush_calls.fetch_add(1, SeqCst);
        self.flushed.fetch_max(upto.0, SeqCst);
        Ok(())
    }
    fn flushed_lsn(&self) -> Lsn {
        Lsn(self.flushed.load(SeqCst))
    }
}

/// A pool of `frames` 4 KB pages over the files in `dir`, flushing `wal`.
fn pool_over(dir: &std::path::Path, frames: usize, wal: Arc<dyn WalFlush>) -> BufferPool {
    let settings = CreationSettings {
        page_size: 4096,
        ..Default::default()
    };
    pool_with(
        dir,
        frames,
        wal,
        &settings,
        Arc::new(crate::protect::InPlaceWrites),
    )
}

fn pool_with(
    dir: &std::path::Path,
    frames: usize,
    wal: Arc<dyn WalFlush>,
    settings: &CreationSettings,
    protection: Arc<dyn PageWriteProtection>,
) -> BufferPool {
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let files = Arc::new(DataFiles::new(fs, dir, settings));
    BufferPool::new(
        frames,
        settings.page_size as usize,
        settings.data_checksums,
        files,
        wal,
        protection,
        None,
    )
    .unwrap()
}

/// Records, per page handed to the protection, the CRC the copy names and
/// the CRC of its bytes.
#[derive(Default)]
struct ImageCrcs(Mutex<Vec<(u32, u32)>>);

impl PageWriteProtection for ImageCrcs {
    fn before_in_place_writes(&self, pages: &[PageCopy], _who: Issuer) -> Result<WriteTicket> {
        let mut seen = self.0.lock();
        seen.extend(
            pages
                .iter()
                .map(|p| (p.image_crc(), crate::checksum::crc::crc32c(p.bytes()))),
        );
        Ok(WriteTicket::default())
    }
}

#[test]
fn a_copy_names_the_crc_of_the_bytes_it_carries() {
    use crate::settings::ChecksumAlgorithm;
    for checksums in [ChecksumAlgorithm::Crc32c, ChecksumAlgorithm::Fnv] {
        for page_size in [4096, 8192] {
            let dir = tempfile::tempdir().unwrap();
            let settings = CreationSettings {
                page_size,
                data_checksums: checksums,
                ..Default::default()
            };
            let crcs = Arc::new(ImageCrcs::default());
            let wal = Arc::new(FakeWal::default());
            let pool = pool_with(dir.path(), 16, wal, &settings, crcs.clone());
            for b in 0..32u32 {
                new_page(&pool, PageId::new(3, b), 100 + b as u64, b as u8);
            }
            let seen = crcs.0.lock();
            assert!(
                seen.len() >= 16,
                "{checksums:?}: {} pages written",
                seen.len()
            );
            for (named, actual) in seen.iter() {
                assert_eq!(named, actual, "{checksums:?}, {page_size}-byte pages");
            }
        }
    }
}

fn pool(dir: &std::path::Path, frames: usize) -> (BufferPool, Arc<FakeWal>) {
    let wal = Arc::new(FakeWal::default());
    (pool_over(dir, frames, wal.clone()), wal)
}

fn new_page(pool: &BufferPool, id: PageId, lsn: u64, fill: u8) {
    let claimed = pool.claim_frame(Issuer::Client).unwrap();
    let mut w = pool.install_new(claimed, id).into_write();
    w.mark_dirty();
    init_page(w.bytes_mut(), PageKind::Raw, id.file_id, id.block, 0);
    w.bytes_mut()[100] = fill;
    w.set_lsns(Lsn(lsn), Lsn(lsn + 10));
}

#[test]
fn pages_survive_eviction_and_flush_rule_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, wal) = pool(dir.path(), 16);
    for b in 0..64u32 {
        new_page(&pool, PageId::new(3, b), 100 + b as u64, b as u8);
    }
    // 64 pages through 16 frames: most were evicted dirty, each after the
    // WAL was flushed past its commit LSN.
    assert!(pool.stats.dirty_evictions.load(SeqCst) >= 48);
    assert!(wal.flushed_lsn() >= Lsn(100 + 47 + 10));
    for b in 0..64u32 {
        let r = pool
            .pin(PageId::new(3, b), Issuer::Client)
            .unwrap()
            .into_read();
        assert_eq!(r.bytes()[100], b as u8);
        assert_eq!(page_lsn(r.bytes()), Lsn(100 + b as u64));
    }
}

#[test]
fn pinned_frames_are_never_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, _) = pool(dir.path(), 16);
    for b in 0..16u32 {
        new_page(&pool, PageId::new(1, b), 10, 1);
    }
    let held: Vec<_> = (0..16u32)
        .map(|b| pool.pin(PageId::new(1, b), Issuer::Client).unwrap())
        .collect();
    let e = pool
        .claim_frame(Issuer::Client)
        .err()
        .expect("every frame is pinned");
    assert!(e.to_string().contains("buffer pool exhausted"), "{e}");
    drop(held);
    assert!(pool.claim_frame(Issuer::Client).is_ok());
}

#[test]
fn corrupt_page_on_disk_is_an_error_naming_file_and_block() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, _) = pool(dir.path(), 16);
    for b in 0..4u32 {
        new_page(&pool, PageId::new(9, b), 10, 1);
    }
    assert_eq!(pool.flush_dirty(Issuer::Checkpointer, 8).unwrap(), 4);
    pool.files().sync_all(Issuer::Checkpointer).unwrap();
    let path = dir.path().join("9");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[2 * 4096 + 500] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    // A page whose LSN the WAL does not reach: the WAL that logged it is lost.
    let (lost_wal, _) = self::pool(dir.path(), 16);
    let e = lost_wal
        .pin(PageId::new(9, 1), Issuer::Client)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("block 1") && e.contains("beyond the end of the WAL"),
        "{e}"
    );
    let (pool2, wal2) = self::pool(dir.path(), 16);
    wal2.flushed.store(10, SeqCst);
    let e = pool2
        .pin(PageId::new(9, 2), Issuer::Client)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("block 2") && e.contains("checksum"), "{e}");
    assert!(pool2.pin(PageId::new(9, 1), Issuer::Client).is_ok());
    let e = pool2
        .pin(PageId::new(9, 7), Issuer::Client)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("beyond the end"), "{e}");
}

#[test]
fn concurrent_readers_and_writers_keep_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, _) = pool(dir.path(), 32);
    for b in 0..100u32 {
        new_page(&pool, PageId::new(2, b), 1, 0);
    }
    let pool = &pool;
    std::thread::scope(|s| {
        for t in 0..4u32 {
            s.spawn(move || {
                for i in 0..500u32 {
                    let id = PageId::new(2, (i * 7 + t * 13) % 100);
                    let mut w = pool.pin(id, Issuer::Client).unwrap().into_write();
                    w.mark_dirty();
                    let v = w.bytes()[200];
                    w.bytes_mut()[200] = v.wrapping_add(1);
                    let lsn = page_lsn(w.bytes()).0 + 1;
                    w.set_lsns(Lsn(lsn), Lsn(lsn));
                }
            });
        }
    });
    let total: u64 = (0..100u32)
        .map(|b| {
            pool.pin(PageId::new(2, b), Issuer::Client)
                .unwrap()
                .into_read()
                .bytes()[200] as u64
        })
        .sum();
    // 2000 increments spread over 100 pages, every byte < 256 wraps never.
    assert_eq!(total, 2000);
}

/// A WAL whose flushes to chosen LSNs block until released, to force the
/// interleavings of the write path.
struct GateWal {
    flushed: AtomicU64,
    /// LSN -> (a flush is blocked there, released)
    gates: Mutex<HashMap<u64, (bool, bool)>>,
    cv: parking_lot::Condvar,
}

impl GateWal {
    fn new(gates: &[u64]) -> GateWal {
        GateWal {
            flushed: AtomicU64::new(0),
            gates: Mutex::new(gates.iter().map(|g| (*g, (false, false))).collect()),
            cv: parking_lot::Condvar::new(),
        }
    }
    fn wait_blocked_at(&self, lsn: u64) {
        let mut g = self.gates.lock();
        while !g[&lsn].0 {
            self.cv.wait(&mut g);
        }
    }
    fn release(&self, lsn: u64) {
        self.gates.lock().get_mut(&lsn).unwrap().1 = true;
        self.cv.notify_all();
    }
}

impl WalFlush for GateWal {
    fn flush(&self, upto: Lsn, _who: Issuer) -> Result<()> {
        let mut g = self.gates.lock();
        if let Some(gate) = g.get_mut(&upto.0) {
            gate.0 = true;
            self.cv.notify_all();
            while !g[&upto.0].1 {
                self.cv.wait(&mut g);
            }
        }
        drop(g);
        self.flushed.fetch_max(upto.0, SeqCst);
        Ok(())
    }
    fn flushed_lsn(&self) -> Lsn {
        Lsn(self.flushed.load(SeqCst))
    }
}

/// A pool of 16 frames whose WAL flushes to `gates` block until released.
fn gated_pool(dir: &std::path::Path, gates: &[u64]) -> (BufferPool, Arc<GateWal>) {
    let wal = Arc::new(GateWal::new(gates));
    (pool_over(dir, 16, wal.clone()), wal)
}

/// Starts an eviction write of page `p` (1 at LSN 100, commit LSN 110),
/// waits until it is stuck in its WAL flush to 110, then changes the page
/// to 2 at LSN 200: the write in flight now carries the older copy.
/// Returns the eviction's thread.
fn stale_eviction<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    pool: &'s BufferPool,
    wal: &GateWal,
    p: PageId,
) -> std::thread::ScopedJoinHandle<'s, ()> {
    let evict = s.spawn(move || {
        let pin = pool.pin_cached(p).unwrap();
        pool.write_frames(&[pin.idx], Issuer::Client).unwrap();
    });
    wal.wait_blocked_at(110);
    let mut w = pool.pin(p, Issuer::Client).unwrap().into_write();
    w.mark_dirty();
    w.bytes_mut()[100] = 2;
    w.set_lsns(Lsn(200), Lsn(210));
    evict
}

fn on_disk(dir: &std::path::Path, file: u32, block: usize) -> u8 {
    std::fs::read(dir.join(file.to_string())).unwrap()[block * 4096 + 100]
}

/// An eviction write stuck in its WAL flush, a change, then a checkpoint
/// write of the newer copy: the older copy must not land last (and leave
/// the frame "clean" over stale bytes). Found in review; fixed by the
/// per-frame I/O lock.
#[test]
fn an_older_copy_never_lands_after_a_newer_one() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, wal) = gated_pool(dir.path(), &[110]);
    let p = PageId::new(3, 0);
    new_page(&pool, p, 100, 1);
    std::thread::scope(|s| {
        let evict = stale_eviction(s, &pool, &wal, p);
        let checkpoint = s.spawn(|| pool.flush_dirty(Issuer::Checkpointer, 64).unwrap());
        wal.release(110);
        evict.join().unwrap();
        checkpoint.join().unwrap();
    });
    assert_eq!(on_disk(dir.path(), 3, 0), 2);
    pool.discard_page(p);
    assert_eq!(
        pool.pin(p, Issuer::Client).unwrap().into_read().bytes()[100],
        2
    );
}

/// A write of an older copy completing during a checkpoint must not clear
/// the checkpoint's mark on a page changed before the redo point.
#[test]
fn a_stale_write_does_not_clear_the_checkpoint_mark() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, wal) = gated_pool(dir.path(), &[110, 60]);
    let q = PageId::new(4, 0);
    new_page(&pool, q, 50, 7);
    let p = PageId::new(3, 0);
    new_page(&pool, p, 100, 1);
    std::thread::scope(|s| {
        let evict = stale_eviction(s, &pool, &wal, p);
        let checkpoint = s.spawn(|| pool.flush_dirty(Issuer::Checkpointer, 1).unwrap());
        wal.wait_blocked_at(60);
        wal.release(110);
        evict.join().unwrap();
        wal.release(60);
        checkpoint.join().unwrap();
    });
    assert_eq!(
        on_disk(dir.path(), 3, 0),
        2,
        "the checkpoint skipped a page changed before it began"
    );
}
