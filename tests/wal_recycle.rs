//! Recycled segments: old segments renamed to future names keep their old
//! pages; the reader refuses those by their page address, so it stops
//! exactly at the end of the new records and never returns a stale one.

use std::path::Path;
use std::sync::Arc;
use untorn::file::posix::PosixFileSystem;
use untorn::file::{FileSystem, Issuer};
use untorn::settings::MB;
use untorn::wal::segment::list_segments;
use untorn::wal::{EndOfWal, RecordData, RecordKind, Wal, WalConfig, WalReader};
use untorn::Lsn;

const BS: u64 = 8192;

fn cfg(epoch: u32) -> WalConfig {
    WalConfig {
        block_size: BS as u32,
        segment_size: MB,
        system_id: 9,
        epoch,
        sector_size: 512,
    }
}

struct Log {
    recs: Vec<(Lsn, Lsn, RecordData)>,
}

impl Log {
    fn insert(&mut self, wal: &Wal, main_len: usize) {
        let n = self.recs.len() as u64;
        let data = RecordData::with_main(RecordKind::Noop, n, vec![n as u8; main_len]);
        let (lsn, end) = wal.insert(&data).unwrap();
        self.recs.push((lsn, end, data));
        if n.is_multiple_of(4) {
            wal.flush(end, Issuer::Client).unwrap();
        }
    }

    /// Inserts 30 KB records until the insert position passes `lsn`.
    fn fill_past(&mut self, wal: &Wal, lsn: u64) {
        while wal.insert_lsn().0 <= lsn {
            self.insert(wal, 30_000);
        }
    }

    /// Inserts records so that the last one ends exactly at a page end,
    /// then flushes: the next page read is whatever the segment held.
    fn end_at_page_end(&mut self, wal: &Wal) {
        // A Noop record is 40 + main bytes; the next record starts at the
        // insert position, or on the next page if fewer than 32 bytes are
        // left there.
        let left = |at: u64| BS - at % BS;
        let mut at = wal.insert_lsn().0;
        if at.is_multiple_of(BS) || left(at) < 32 {
            let page = at.next_multiple_of(BS);
            at = page + if page.is_multiple_of(MB) { 48 } else { 24 };
        }
        self.insert(wal, (left(at) - 40) as usize);
        let end = self.recs.last().unwrap().1;
        assert_eq!(end.0 % BS, 0);
        wal.flush(end, Issuer::Client).unwrap();
    }

    /// Reads from `from` (a record start) and checks that exactly the
    /// records from there on come back; returns the end and the reason.
    fn check(&self, fs: &Arc<dyn FileSystem>, dir: &Path, from: Lsn) -> (Lsn, EndOfWal, Lsn) {
        let mut r = WalReader::new(fs.clone(), dir, &cfg(0), from).unwrap();
        let got = r.read_to_end().unwrap();
        let want: Vec<_> = self.recs.iter().filter(|w| w.0 >= from).collect();
        assert_eq!(got.len(), want.len(), "{:?}", r.end());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((g.lsn, g.end_lsn), (w.0, w.1));
            assert_eq!(g.data, w.2);
        }
        let (end, why) = r.end().unwrap();
        (end, why, r.prev_record())
    }
}

#[test]
fn recycled_segments_are_reused_and_their_stale_pages_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let wal = Wal::create(fs.clone(), dir.path(), cfg(1)).unwrap();
    let mut log = Log { recs: Vec::new() };
    log.fill_past(&wal, 5 * MB + MB / 2);
    wal.flush(wal.insert_lsn(), Issuer::Client).unwrap();
    assert_eq!(
        list_segments(fs.as_ref(), dir.path()).unwrap(),
        vec![0, 1, 2, 3, 4, 5]
    );

    // A checkpoint's redo point in segment 4: segments 0-3 become 6-9.
    let redo = log.recs.iter().find(|r| r.0 .0 >= 4 * MB).unwrap().0;
    assert_eq!(
        wal.recycle_segments_before(redo, Issuer::Checkpointer)
            .unwrap(),
        4
    );
    assert_eq!(
        list_segments(fs.as_ref(), dir.path()).unwrap(),
        vec![4, 5, 6, 7, 8, 9]
    );
    let created = wal.stats().segments_created;

    // Reuse part of segment 6 (old segment 0).
    log.fill_past(&wal, 6 * MB + MB / 3);
    log.end_at_page_end(&wal);
    let stats = wal.stats();
    assert_eq!(
        stats.segments_created, created,
        "the recycled file was reused"
    );
    assert_eq!(stats.segments_recycled, 4);
    let flushed = wal.flushed_lsn();
    drop(wal);

    let (end, why, prev) = log.check(&fs, dir.path(), redo);
    assert_eq!(end, flushed);
    // The next page is old segment 0's page at the same offset.
    let stale = EndOfWal::WrongPageAddress {
        expected: flushed,
        found: Lsn(flushed.0 - 6 * MB),
    };
    assert_eq!(why, stale);

    // Reopen there, go on into segment 7 (old segment 1), read again.
    let wal = Wal::open(fs.clone(), dir.path(), cfg(2), end, prev).unwrap();
    log.fill_past(&wal, 7 * MB + MB / 4);
    log.end_at_page_end(&wal);
    let flushed = wal.flushed_lsn();
    let (end, why, _) = log.check(&fs, dir.path(), redo);
    assert_eq!(end, flushed);
    assert!(matches!(why, EndOfWal::WrongPageAddress { .. }), "{why}");

    // Segments 4 and 5 are recycled too (two future ones exist, four are
    // kept); then segment 6 is removed: four future segments wait already.
    let redo = log.recs.iter().find(|r| r.0 .0 >= 6 * MB).unwrap().0;
    assert_eq!(
        wal.recycle_segments_before(redo, Issuer::Checkpointer)
            .unwrap(),
        2
    );
    assert_eq!(
        list_segments(fs.as_ref(), dir.path()).unwrap(),
        vec![6, 7, 8, 9, 10, 11]
    );
    let redo = log.recs.iter().find(|r| r.0 .0 >= 7 * MB).unwrap().0;
    assert_eq!(
        wal.recycle_segments_before(redo, Issuer::Checkpointer)
            .unwrap(),
        1
    );
    assert_eq!(
        list_segments(fs.as_ref(), dir.path()).unwrap(),
        vec![7, 8, 9, 10, 11]
    );
    assert_eq!(wal.stats().segments_removed, 1);
    // A redo point past the flushed position recycles nothing beyond it.
    assert_eq!(
        wal.recycle_segments_before(Lsn(100 * MB), Issuer::Checkpointer)
            .unwrap(),
        0
    );
    drop(wal);
    let (end, _, _) = log.check(&fs, dir.path(), redo);
    assert_eq!(end, flushed);
}
