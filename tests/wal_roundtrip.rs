//! Round trips through the WAL under every block size: records of random
//! sizes (crossing pages and 1 MB segments) come back identical, in order,
//! with correct previous-record LSNs; the reader ends exactly at the flushed
//! position; the writer reopened there continues the same log.

use proptest::prelude::*;
use std::path::Path;
use std::sync::Arc;
use untorn::file::posix::PosixFileSystem;
use untorn::file::{FileSystem, Issuer};
use untorn::settings::{MB, WAL_BLOCK_SIZES};
use untorn::wal::{
    BlockRef, ImageCompression, PageImage, RecordData, RecordKind, Wal, WalConfig, WalReader,
};
use untorn::Lsn;

fn cfg(block_size: u32, epoch: u32) -> WalConfig {
    cfg_sector(block_size, epoch, 512)
}

fn cfg_sector(block_size: u32, epoch: u32, sector_size: u32) -> WalConfig {
    WalConfig {
        block_size,
        segment_size: MB,
        system_id: 0x5EED,
        epoch,
        sector_size,
    }
}

/// A record whose payload is about `size` bytes, its contents derived
/// from `seed`.
fn record(seed: u64, size: usize) -> RecordData {
    let bytes: Vec<u8> = (0..size)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) >> 3) as u8)
        .collect();
    if seed % 3 == 1 && size >= 16 {
        // Some records carry block references and an image.
        let (img, data) = bytes.split_at(size / 2);
        RecordData {
            kind: RecordKind::PageWrite,
            xid: seed,
            blocks: vec![BlockRef {
                file_id: seed as u32,
                block: 7,
                image: Some(PageImage {
                    bytes: img.to_vec(),
                    hole_offset: 100,
                    hole_length: 200,
                    compression: ImageCompression::None,
                }),
                data: data.to_vec(),
            }],
            main: vec![1, 2, 3],
        }
    } else {
        RecordData::with_main(RecordKind::Noop, seed, bytes)
    }
}

struct Written {
    lsn: Lsn,
    end: Lsn,
    data: RecordData,
}

/// Inserts `plan` (size, flush after?) and returns what was inserted.
fn write(wal: &Wal, seed0: u64, plan: &[(usize, bool)]) -> Vec<Written> {
    let mut out = Vec::new();
    for (i, (size, flush)) in plan.iter().enumerate() {
        let data = record(seed0 + i as u64, *size);
        let (lsn, end) = wal.insert(&data).unwrap();
        assert!(end > lsn);
        if *flush {
            wal.flush(end, Issuer::Client).unwrap();
            assert!(wal.flushed_lsn() >= end);
        }
        out.push(Written { lsn, end, data });
    }
    out
}

/// Reads everything from the start and checks it against `expect`;
/// returns the reader at its end.
fn check(fs: &Arc<dyn FileSystem>, dir: &Path, c: &WalConfig, expect: &[&Written]) -> WalReader {
    let mut reader = WalReader::new(fs.clone(), dir, c, Lsn(0)).unwrap();
    let got = reader.read_to_end().unwrap();
    assert_eq!(got.len(), expect.len(), "end: {:?}", reader.end());
    let (mut prev, mut prev_end) = (Lsn(0), Lsn(0));
    for (g, w) in got.iter().zip(expect) {
        assert_eq!(g.lsn, w.lsn);
        assert_eq!(g.end_lsn, w.end);
        // The previous record, or a padding record that ended a flush
        // after it (the reader skips those).
        assert!(
            g.prev_lsn == prev || (g.prev_lsn >= prev_end && g.prev_lsn < g.lsn),
            "{} after {prev}",
            g.prev_lsn
        );
        assert_eq!(g.data, w.data);
        (prev, prev_end) = (g.lsn, g.end_lsn);
    }
    reader
}

/// One run: write, drop (losing what was not flushed), read, reopen at the
/// reader's end with the next epoch, write more, read everything.
/// Returns the end after the first part and the final end.
fn run(block_size: u32, first: &[(usize, bool)], second: &[(usize, bool)]) -> (Lsn, Lsn) {
    run_sector(block_size, 512, first, second)
}

/// [`run`] for a device of `sector`-byte sectors: every flush ends on one,
/// blocks smaller than a sector included.
fn run_sector(
    block_size: u32,
    sector: u32,
    first: &[(usize, bool)],
    second: &[(usize, bool)],
) -> (Lsn, Lsn) {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let c1 = cfg_sector(block_size, 1, sector);
    let wal = Wal::create(fs.clone(), dir.path(), c1).unwrap();
    let w1 = write(&wal, 0, first);
    let flushed = wal.flushed_lsn();
    drop(wal);
    let kept: Vec<&Written> = w1.iter().filter(|w| w.end <= flushed).collect();
    let reader = check(&fs, dir.path(), &c1, &kept);
    let (end, why) = reader.end().unwrap();
    assert_eq!(end, flushed, "{why}");

    let c2 = cfg_sector(block_size, 2, sector);
    let wal = Wal::open(fs.clone(), dir.path(), c2, end, reader.prev_record()).unwrap();
    let mut w2 = write(&wal, 1000, second);
    let last = w2.last().map(|w| w.end).unwrap_or(end);
    wal.flush(last, Issuer::Client).unwrap();
    // Flushes end on sector boundaries (padding records).
    let last = wal.flushed_lsn();
    assert!(last.0.is_multiple_of(sector as u64), "{last}");
    drop(wal);
    let mut all = kept;
    all.extend(w2.iter_mut().map(|w| &*w));
    let reader = check(&fs, dir.path(), &c2, &all);
    assert_eq!(reader.end().unwrap().0, last);
    (end, last)
}

fn plan() -> impl Strategy<Value = Vec<(usize, bool)>> {
    let size = prop_oneof![6 => 0usize..3000, 1 => 0usize..200_000];
    proptest::collection::vec((size, proptest::bool::weighted(0.2)), 0..40)
}

macro_rules! round_trip_for {
    ($name:ident, $bs:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(10))]
            #[test]
            fn $name(first in plan(), second in plan()) {
                run($bs, &first, &second);
            }
        }
    };
}

round_trip_for!(round_trip_1k, 1024);
round_trip_for!(round_trip_2k, 2048);
round_trip_for!(round_trip_4k, 4096);
round_trip_for!(round_trip_8k, 8192);
round_trip_for!(round_trip_16k, 16384);
round_trip_for!(round_trip_32k, 32768);
round_trip_for!(round_trip_64k, 65536);

macro_rules! round_trip_4k_sectors_for {
    ($name:ident, $bs:expr) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(10))]
            #[test]
            fn $name(first in plan(), second in plan()) {
                run_sector($bs, 4096, &first, &second);
            }
        }
    };
}

// 4 KB sectors over blocks smaller than, equal to and larger than one.
round_trip_4k_sectors_for!(round_trip_1k_blocks_4k_sectors, 1024);
round_trip_4k_sectors_for!(round_trip_2k_blocks_4k_sectors, 2048);
round_trip_4k_sectors_for!(round_trip_4k_blocks_4k_sectors, 4096);
round_trip_4k_sectors_for!(round_trip_16k_blocks_4k_sectors, 16384);

/// Deterministic: every block size, several segments, a record larger than
/// a segment, records ending exactly at page ends and in a page's tail.
#[test]
fn crosses_segments_under_every_block_size() {
    for &bs in WAL_BLOCK_SIZES {
        let b = bs as usize;
        let mut first: Vec<(usize, bool)> = Vec::new();
        for i in 0..40 {
            first.push(((i * 7919) % (3 * b), i % 9 == 0));
        }
        first.push((1_200_000, false));
        first.push((b - 24, true));
        let second: Vec<(usize, bool)> = (0..60)
            .map(|i| ((i * 104_729) % 90_000, i % 7 == 0))
            .collect();
        let (_, last) = run(bs, &first, &second);
        assert!(last.0 > 3 * MB, "{last}");
    }
}

/// Reopen at an end left in a page's tail (fewer bytes left than a record
/// header), and at an end exactly on a page boundary.
#[test]
fn reopen_at_page_tail_and_boundary() {
    for &bs in &[1024u32, 8192] {
        // Payload p gives total 40 + p; the first record starts after the
        // 48-byte long header. Fill to 16 bytes before the page end, then
        // to exactly the page end.
        let tail = bs as usize - 48 - 16 - 40;
        // The tail needs no padding: the WAL ends at the next page.
        let (end, _) = run(bs, &[(tail, true)], &[(10, true), (20, true)]);
        assert_eq!(end, Lsn(bs as u64));
        let exact = bs as usize - 48 - 40;
        let (end, _) = run(bs, &[(exact, true)], &[(10, true)]);
        assert_eq!(end, Lsn(bs as u64));
    }
}

#[test]
fn too_long_record_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let wal = Wal::create(fs, dir.path(), cfg(8192, 1)).unwrap();
    let big = RecordData::with_main(
        RecordKind::Noop,
        1,
        vec![0; untorn::wal::MAX_RECORD_LEN as usize],
    );
    let e = wal.insert(&big).unwrap_err().to_string();
    assert!(e.contains("longer than the maximum"), "{e}");
    assert_eq!(wal.insert_lsn(), Lsn(0));
    let too_far = wal
        .flush(Lsn(4096), Issuer::Client)
        .unwrap_err()
        .to_string();
    assert!(too_far.contains("past the insert position"), "{too_far}");
}

/// Inserts never flush (their callers hold latches); past the buffer
/// limit, `make_room` writes out and syncs without counting a flush
/// request, and below it does nothing.
#[test]
fn make_room_flushes_past_the_buffer_limit() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let c = cfg(16384, 1);
    let wal = Wal::create(fs.clone(), dir.path(), c).unwrap();
    let plan: Vec<(usize, bool)> = (0..20).map(|_| (1_000_000, false)).collect();
    let mut written = write(&wal, 0, &plan[..10]);
    wal.make_room().unwrap();
    assert_eq!(wal.stats().flush_rounds, 0, "below the limit");
    written.extend(write(&wal, 10, &plan[10..]));
    assert_eq!(wal.flushed_lsn(), Lsn(0), "an insert flushed");
    wal.make_room().unwrap();
    let stats = wal.stats();
    assert_eq!(stats.flush_requests, 0);
    assert!(stats.flush_rounds >= 1, "{stats:?}");
    let flushed = wal.flushed_lsn();
    assert!(flushed.0 > untorn::wal::WAL_BUFFER_LIMIT_BYTES as u64);
    drop(wal);
    let kept: Vec<&Written> = written.iter().filter(|w| w.end <= flushed).collect();
    let reader = check(&fs, dir.path(), &c, &kept);
    assert_eq!(reader.end().unwrap().0, flushed);
}
