//! Inserts copy outside the reservation lock: a flush waits for the copies
//! reserved below its target.

use super::*;
use crate::file::posix::PosixFileSystem;
use crate::settings::MB;
use crate::wal::reader::WalReader;
use crate::wal::record::RecordKind;
use std::time::Duration;

fn cfg() -> WalConfig {
    WalConfig {
        block_size: 8192,
        segment_size: MB,
        system_id: 9,
        epoch: 1,
        sector_size: 512,
    }
}

#[test]
fn a_flush_waits_for_a_copy_reserved_below_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let wal = Arc::new(Wal::create(fs.clone(), dir.path(), cfg()).unwrap());
    // An inserter stalled between its reservation and its copy, as one
    // copying a long page image is.
    let stalled = RecordData::with_main(RecordKind::Commit, 1, vec![0xAB; 20_000]);
    let payload = stalled.encode().unwrap();
    let total = (RECORD_HEADER_LEN + payload.len()) as u64;
    let copying = wal.insertion_locks.mine();
    let place = wal.reserve_record(&copying, total);
    // A commit after it flushes: its target lies past the stalled copy.
    let flusher = {
        let wal = wal.clone();
        std::thread::spawn(move || {
            let after = RecordData::with_main(RecordKind::Commit, 2, vec![1; 100]);
            let (_, end) = wal.insert(&after).unwrap();
            wal.flush(end, Issuer::Client).unwrap();
        })
    };
    // Time for the flusher to reach its wait. Not a timed assertion: a
    // correct writer never lets it finish here, however slow the machine;
    // a slow machine can only miss a broken one.
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        !flusher.is_finished(),
        "a flush returned with a copy below its target unfinished"
    );
    assert_eq!(wal.flushed_lsn(), Lsn(0));
    let crc = crc32c::crc32c(&payload);
    let header = record_header(stalled.kind as u8, 1, total, place.prev, 1, crc);
    // SAFETY: reserved under `copying`, still held.
    unsafe { place.fill(&wal.geo, &header, &payload) };
    drop(copying);
    flusher.join().unwrap();
    let mut reader = WalReader::new(fs, dir.path(), &cfg(), Lsn(0)).unwrap();
    let read: Vec<_> = reader.read_to_end().unwrap();
    let xids: Vec<u64> = read.iter().map(|r| r.data.xid).collect();
    assert_eq!(xids, [1, 2]);
    assert_eq!(read[0].data, stalled);
}

/// Issue 57, item 2: an inserter that unwound between its reservation and
/// its copy dropped its insertion lock as a finished copy; a flush wrote
/// the hole and reported the next record durable, and the reader stopped
/// at the hole, losing it. Now every flush after the unwind fails
/// (poisoned, as PostgreSQL PANICs in a critical section), and nothing
/// past the hole is written.
#[test]
fn a_panic_between_reservation_and_copy_stops_every_later_flush() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let wal = Arc::new(Wal::create(fs.clone(), dir.path(), cfg()).unwrap());
    let first = RecordData::with_main(RecordKind::Commit, 1, vec![0x11; 200]);
    let (_, end1) = wal.insert(&first).unwrap();
    wal.flush(end1, Issuer::Client).unwrap();
    let flushed_before = wal.flushed_lsn();
    let dies = RecordData::with_main(RecordKind::Commit, 2, vec![0xAB; 3000]);
    let total = (RECORD_HEADER_LEN + dies.encode().unwrap().len()) as u64;
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let copying = wal.insertion_locks.mine();
        let _place = wal.reserve_record(&copying, total);
        panic!("an inserter dies between its reservation and its copy");
    }));
    assert!(unwound.is_err());
    let after = RecordData::with_main(RecordKind::Commit, 3, vec![0x33; 100]);
    let (_, end3) = wal.insert(&after).unwrap();
    let e = wal.flush(end3, Issuer::Client).unwrap_err();
    assert!(e.is_fatal(), "{e}");
    assert!(
        wal.flush(end3, Issuer::Client).is_err(),
        "a later flush succeeded"
    );
    assert_eq!(wal.flushed_lsn(), flushed_before);
    let mut reader = WalReader::new(fs, dir.path(), &cfg(), Lsn(0)).unwrap();
    let xids: Vec<u64> = reader
        .read_to_end()
        .unwrap()
        .iter()
        .map(|r| r.data.xid)
        .collect();
    assert_eq!(xids, [1]);
}

/// A WAL file whose `sync_data` panics while `ARMED` is set (a bug in a
/// layer below): what a flush leader meets while it leads.
struct PanickingSync {
    inner: Arc<dyn File>,
    armed: Arc<std::sync::atomic::AtomicBool>,
}

impl File for PanickingSync {
    crate::forward_file_methods!(inner: path, kind, read_at, write_at, write_vectored_at,
        sync_all, writeback_hint, allocate, set_len, len, try_lock);

    fn sync_data(&self, who: Issuer) -> Result<()> {
        if self.armed.swap(false, SeqCst) {
            panic!("a flush leader's fdatasync panics");
        }
        self.inner.sync_data(who)
    }
}

struct PanickingWalFs(Arc<dyn FileSystem>, Arc<std::sync::atomic::AtomicBool>);

impl FileSystem for PanickingWalFs {
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>> {
        let inner = self.0.open(path, kind, opts)?;
        Ok(Arc::new(PanickingSync {
            inner,
            armed: self.1.clone(),
        }))
    }
    crate::forward_file_system_methods!(0: rename, remove, sync_dir, create_dir_all, exists,
        list_dir, sector_size);
}

/// Issue 57, item 3: a flush leader that unwound never ended its round,
/// and every later flush parked forever with no error. Now its round ends
/// as a fatal one: every later flush gets an error at once.
#[test]
fn a_flush_leader_that_unwinds_fails_every_waiter_and_later_flush() {
    let dir = tempfile::tempdir().unwrap();
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fs: Arc<dyn FileSystem> = Arc::new(PanickingWalFs(
        Arc::new(PosixFileSystem::default()),
        armed.clone(),
    ));
    let wal = Arc::new(Wal::create(fs, dir.path(), cfg()).unwrap());
    let (_, end) = wal
        .insert(&RecordData::with_main(RecordKind::Commit, 1, vec![1; 100]))
        .unwrap();
    armed.store(true, SeqCst);
    let leader = {
        let wal = wal.clone();
        std::thread::spawn(move || wal.flush(end, Issuer::Client))
    };
    assert!(leader.join().is_err(), "the leader did not panic");
    let (tx, rx) = std::sync::mpsc::channel();
    let later = {
        let wal = wal.clone();
        std::thread::spawn(move || tx.send(wal.flush(end, Issuer::Client).is_err()).unwrap())
    };
    let failed = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a flush after the leader's unwind parked forever");
    assert!(failed, "a flush after the leader's unwind succeeded");
    later.join().unwrap();
}
