//! WAL space reserved before a commit's apply: a full disk fails the
//! reservation cleanly, and once it succeeded the insert and the flush
//! after it need no more space.

use std::path::Path;
use std::sync::Arc;
use untorn::crashlab::sim::SimFileSystem;
use untorn::file::{FileKind, FileSystem, Issuer};
use untorn::settings::MB;
use untorn::wal::{segment_path, RecordData, RecordKind, Wal, WalConfig};

fn cfg() -> WalConfig {
    WalConfig {
        block_size: 1024,
        segment_size: MB,
        system_id: 77,
        epoch: 1,
        sector_size: 512,
    }
}

#[test]
fn a_reservation_creates_the_segments_its_record_and_flush_need() {
    let sim = SimFileSystem::new(Arc::new(untorn::file::IoStats::default()));
    let dir = Path::new("/sim/wal");
    sim.create_dir_all(dir).unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let wal = Wal::create(fs, dir, cfg()).unwrap();
    // A record of 1.5 segments from segment 0 ends in segment 1; with the
    // headroom, segment 2 is made too. Half a segment of space is not
    // enough: the reservation fails, cleanly, and nothing is inserted.
    let rec = RecordData::with_main(RecordKind::Noop, 1, vec![7; 3 * MB as usize / 2]);
    let len = rec.encoded_len() as u64 + 32;
    sim.update_faults(|f| f.enospc_after_bytes = Some((FileKind::Wal, MB / 2)));
    let e = wal.reserve(len).err().expect("no room for a segment");
    assert!(e.is_disk_full() && !e.is_fatal(), "{e}");
    assert_eq!(wal.insert_lsn().0, 0);
    // With room for the segments, the reservation succeeds; then the disk
    // is full again, and the insert and its flush still succeed.
    sim.update_faults(|f| f.enospc_after_bytes = Some((FileKind::Wal, 2 * MB)));
    let space = wal.reserve(len).unwrap();
    for segno in 1..=2 {
        assert!(sim.exists(&segment_path(dir, segno)), "segment {segno}");
    }
    sim.update_faults(|f| f.enospc_after_bytes = Some((FileKind::Wal, 0)));
    let (_, end) = wal.insert(&rec).unwrap();
    drop(space);
    wal.flush(end, Issuer::Client).unwrap();
    // The flush pads to the next sector boundary, at most one sector on.
    let flushed = wal.flushed_lsn();
    assert!(
        flushed >= end && flushed.0 - end.0 <= 512 + 24,
        "{flushed} vs {end}"
    );
}
