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
