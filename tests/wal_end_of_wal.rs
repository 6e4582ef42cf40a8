//! The end of valid WAL, in the style of PostgreSQL's
//! src/test/recovery/t/039_end_of_wal.pl: each case forges or damages exact
//! bytes and checks the exact LSN where the reader stops and why.
//!
//! Layout used (1 KB blocks, 1 MB segments): the first record starts at
//! LSN 48 (after the long header); a Noop record with `m` bytes of main data
//! is 40 + m bytes long (32-byte header, 8 bytes of payload framing), so
//! m = 24 gives 64-byte records.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tempfile::TempDir;
use untorn::crashlab::sim::SimFileSystem;
use untorn::file::posix::PosixFileSystem;
use untorn::file::{FileSystem, Issuer};
use untorn::settings::MB;
use untorn::wal::format::{RecordHeader, PH_CONT_REMAINING, PH_EPOCH, PH_FLAGS, RECORD_HEADER_LEN};
use untorn::wal::reader::first_segment_start;
use untorn::wal::{
    segment_path, EndOfWal, ReadRecord, RecordData, RecordKind, Wal, WalConfig, WalReader,
};
use untorn::Lsn;

const BS: u64 = 1024;

fn cfg(epoch: u32) -> WalConfig {
    WalConfig {
        block_size: BS as u32,
        segment_size: MB,
        system_id: 77,
        epoch,
        sector_size: 512,
    }
}

fn fs() -> Arc<dyn FileSystem> {
    Arc::new(PosixFileSystem::default())
}

struct Db {
    dir: TempDir,
    /// (start, end) of every record written.
    recs: Vec<(Lsn, Lsn)>,
}

impl Db {
    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The largest record end at or before `lsn`: where the WAL ends when
    /// the page at `lsn` is bad and everything before it is good.
    fn end_before(&self, lsn: u64) -> Lsn {
        Db::end_of(&self.recs, lsn)
    }

    /// The largest end among `recs` at or before `lsn`.
    fn end_of(recs: &[(Lsn, Lsn)], lsn: u64) -> Lsn {
        recs.iter()
            .map(|r| r.1)
            .filter(|e| e.0 <= lsn)
            .max()
            .unwrap()
    }

    fn count_before(&self, lsn: u64) -> usize {
        self.recs.iter().filter(|r| r.1 .0 <= lsn).count()
    }
}

fn insert_all(wal: &Wal, sizes: &[usize], xid0: u64) -> Vec<(Lsn, Lsn)> {
    let recs: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let main = vec![(i as u8).wrapping_mul(13); *m];
            wal.insert(&RecordData::with_main(
                RecordKind::Noop,
                xid0 + i as u64,
                main,
            ))
            .unwrap()
        })
        .collect();
    wal.flush(recs.last().unwrap().1, Issuer::Client).unwrap();
    recs
}

/// A WAL (epoch 1) holding Noop records with `sizes` bytes of main data.
fn build(sizes: &[usize]) -> Db {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::create(fs(), dir.path(), cfg(1)).unwrap();
    let recs = insert_all(&wal, sizes, 0);
    Db { dir, recs }
}

fn locate(dir: &Path, lsn: u64) -> (PathBuf, u64) {
    (segment_path(dir, lsn / MB), lsn % MB)
}

fn poke(dir: &Path, lsn: u64, bytes: &[u8]) {
    let (path, off) = locate(dir, lsn);
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, off).unwrap();
    f.sync_all().unwrap();
}

fn peek(dir: &Path, lsn: u64, len: usize) -> Vec<u8> {
    let (path, off) = locate(dir, lsn);
    let f = std::fs::File::open(path).unwrap();
    let mut buf = vec![0; len];
    f.read_exact_at(&mut buf, off).unwrap();
    buf
}

fn read(dir: &Path, start: Lsn) -> (Vec<ReadRecord>, Lsn, EndOfWal) {
    // Every record: these cases damage one flush's middle, which the
    // flush-boundary rule would drop whole (tested on its own below).
    let mut r = WalReader::new(fs(), dir, &cfg(0), start)
        .unwrap()
        .every_record();
    let recs = r.read_to_end().unwrap();
    let (end, why) = r.end().unwrap();
    (recs, end, why)
}

/// Reads from 0; checks the number of records, the end and the reason.
fn expect(db: &Db, n: usize, end: Lsn, why: EndOfWal) {
    let (recs, got_end, got_why) = read(db.path(), Lsn(0));
    assert_eq!((got_end, &got_why), (end, &why), "ended because: {got_why}");
    assert_eq!(recs.len(), n);
    for (r, w) in recs.iter().zip(&db.recs) {
        assert_eq!((r.lsn, r.end_lsn), *w);
    }
}

fn flip(dir: &Path, lsn: u64) {
    let b = peek(dir, lsn, 1)[0];
    poke(dir, lsn, &[b ^ 0x40]);
}

/// Record 2 (main 2000) starts at 176 and continues over pages 1 and 2.
fn with_continued_record() -> Db {
    let db = build(&[24, 24, 2000, 24]);
    assert_eq!(db.recs[2], (Lsn(176), Lsn(176 + 2040 + 2 * 24)));
    db
}

#[test]
fn intact_wal_ends_with_zero_length() {
    let db = build(&[24; 5]);
    assert_eq!(db.recs[4], (Lsn(304), Lsn(368)));
    expect(&db, 5, Lsn(368), EndOfWal::ZeroLength);
}

#[test]
fn zero_length_at_a_record_start() {
    let db = build(&[24; 5]);
    poke(db.path(), db.recs[3].0 .0, &[0; 4]);
    expect(&db, 3, db.recs[3].0, EndOfWal::ZeroLength);
}

#[test]
fn flipped_payload_byte_is_a_bad_crc() {
    let db = build(&[24; 5]);
    flip(db.path(), db.recs[2].0 .0 + 40);
    let (recs, end, why) = read(db.path(), Lsn(0));
    assert_eq!((recs.len(), end), (2, db.recs[2].0));
    assert!(matches!(why, EndOfWal::BadCrc { .. }), "{why}");
}

#[test]
fn flipped_byte_in_a_continued_part_is_a_bad_crc() {
    let db = with_continued_record();
    flip(db.path(), BS + 24 + 100);
    let (recs, end, why) = read(db.path(), Lsn(0));
    assert_eq!((recs.len(), end), (2, Lsn(176)));
    assert!(matches!(why, EndOfWal::BadCrc { .. }), "{why}");
}

#[test]
fn bad_magic_on_a_page_a_record_continues_onto() {
    let db = with_continued_record();
    poke(db.path(), BS, b"XXXX");
    let found = u32::from_le_bytes(*b"XXXX");
    expect(
        &db,
        2,
        Lsn(176),
        EndOfWal::BadPageMagic {
            page: Lsn(BS),
            found,
        },
    );
}

#[test]
fn bad_magic_on_a_page_where_a_record_starts() {
    // 14 records of 64 bytes and one of 80 fill page 0 exactly.
    let mut sizes = vec![24; 14];
    sizes.extend([40, 24]);
    let db = build(&sizes);
    assert_eq!(db.recs[14].1, Lsn(BS));
    assert_eq!(db.recs[15].0, Lsn(BS + 24));
    poke(db.path(), BS, &[0; 4]);
    expect(
        &db,
        15,
        Lsn(BS),
        EndOfWal::BadPageMagic {
            page: Lsn(BS),
            found: 0,
        },
    );

    // 15 records of 64 bytes end 16 bytes before the page end: the next
    // record starts on page 1, and the WAL ends in page 0's tail.
    let db = build(&[24; 16]);
    assert_eq!(db.recs[14].1, Lsn(BS - 16));
    assert_eq!(db.recs[15].0, Lsn(BS + 24));
    poke(db.path(), BS, &[0; 4]);
    expect(
        &db,
        15,
        Lsn(BS - 16),
        EndOfWal::BadPageMagic {
            page: Lsn(BS),
            found: 0,
        },
    );
}

#[test]
fn page_copied_from_elsewhere_has_a_wrong_address() {
    let db = build(&[24; 60]);
    let page1 = peek(db.path(), BS, BS as usize);
    poke(db.path(), 3 * BS, &page1);
    let why = EndOfWal::WrongPageAddress {
        expected: Lsn(3 * BS),
        found: Lsn(BS),
    };
    expect(&db, db.count_before(3 * BS), db.end_before(3 * BS), why);
}

#[test]
fn continuation_length_that_disagrees() {
    let db = with_continued_record();
    // 848 bytes of record 2 lie on page 0; 1192 remain at page 1.
    let stored = peek(db.path(), BS + PH_CONT_REMAINING as u64, 4);
    assert_eq!(u32::from_le_bytes(stored.try_into().unwrap()), 1192);
    poke(
        db.path(),
        BS + PH_CONT_REMAINING as u64,
        &1000u32.to_le_bytes(),
    );
    let why = EndOfWal::BadContinuation {
        page: Lsn(BS),
        expected: 1192,
        found: 1000,
    };
    expect(&db, 2, Lsn(176), why);

    // The flag cleared while the length stays: the header contradicts itself.
    let db = with_continued_record();
    poke(db.path(), BS + PH_FLAGS as u64, &0u16.to_le_bytes());
    let (_, end, why) = read(db.path(), Lsn(0));
    assert_eq!(end, Lsn(176));
    assert!(
        matches!(why, EndOfWal::BadPageHeader { page: Lsn(BS), .. }),
        "{why}"
    );

    // A continuation on a page where a record must start.
    let mut sizes = vec![24; 14];
    sizes.extend([40, 24]);
    let db = build(&sizes);
    poke(db.path(), BS + PH_FLAGS as u64, &2u16.to_le_bytes());
    poke(
        db.path(),
        BS + PH_CONT_REMAINING as u64,
        &8u32.to_le_bytes(),
    );
    let why = EndOfWal::BadContinuation {
        page: Lsn(BS),
        expected: 0,
        found: 8,
    };
    expect(&db, 15, Lsn(BS), why);
}

#[test]
fn record_longer_than_possible_and_shorter_than_a_header() {
    let db = build(&[24; 5]);
    poke(db.path(), db.recs[3].0 .0, &0x7fff_ffffu32.to_le_bytes());
    expect(
        &db,
        3,
        db.recs[3].0,
        EndOfWal::RecordTooLong { len: 0x7fff_ffff },
    );
    poke(db.path(), db.recs[3].0 .0, &12u32.to_le_bytes());
    expect(&db, 3, db.recs[3].0, EndOfWal::RecordTooShort { len: 12 });
}

/// Rewrites record `i`'s header through `edit`, with a correct CRC.
fn forge(db: &Db, i: usize, edit: impl FnOnce(&mut RecordHeader)) {
    let (start, end) = db.recs[i];
    let bytes = peek(db.path(), start.0, (end.0 - start.0) as usize);
    let mut h = RecordHeader::decode(&bytes).unwrap();
    let payload = &bytes[RECORD_HEADER_LEN..h.total_len as usize];
    edit(&mut h);
    h.crc = h.compute_crc(payload);
    poke(db.path(), start.0, &h.encode());
}

#[test]
fn forged_record_with_a_correct_crc_but_a_wrong_prev_lsn() {
    let db = build(&[24; 5]);
    let wrong = db.recs[1].0;
    forge(&db, 3, |h| h.prev_lsn = wrong.0);
    let why = EndOfWal::BadPrevLsn {
        expected: db.recs[2].0,
        found: wrong,
    };
    expect(&db, 3, db.recs[3].0, why);
}

#[test]
fn crc_valid_record_of_unknown_kind_is_an_error_not_an_end() {
    let db = build(&[24; 5]);
    forge(&db, 2, |h| h.kind = 99);
    let mut r = WalReader::new(fs(), db.path(), &cfg(0), Lsn(0))
        .unwrap()
        .every_record();
    assert!(r.next().unwrap().is_some());
    assert!(r.next().unwrap().is_some());
    let e = r.next().unwrap_err().to_string();
    assert!(e.contains("unknown kind 99") && e.contains("0/B0"), "{e}");
}

#[test]
fn page_with_an_older_epoch_is_stale() {
    let db = build(&[24; 60]);
    poke(db.path(), 2 * BS + PH_EPOCH as u64, &0u32.to_le_bytes());
    let why = EndOfWal::StaleEpoch {
        at: Lsn(2 * BS),
        previous: 1,
        found: 0,
    };
    expect(&db, db.count_before(2 * BS), db.end_before(2 * BS), why);
}

/// The hole the epoch closes at a later page: recovery ended at E, the new
/// timeline wrote records of the same sizes from E up to a page boundary,
/// and the old timeline's next page follows with a matching prev LSN.
#[test]
fn old_timeline_page_after_new_records_is_stale() {
    let old = build(&[24; 60]);
    // Find an old record ending within 32 bytes of a page boundary (at page
    // 3 or later), so the next old record starts on the next page.
    let m = (0..old.recs.len() - 1)
        .find(|&i| {
            let (end, next) = (old.recs[i].1 .0, old.recs[i + 1].0 .0);
            end >= 2 * BS && next % BS == 24 && next - end < 56
        })
        .unwrap();
    let boundary = old.recs[m + 1].0 .0 - 24;
    let k = 15; // The first record on page 1.
    assert_eq!(old.recs[k].0, Lsn(BS + 24));
    poke(old.path(), old.recs[k].0 .0, &[0; 4]); // A torn tail: recovery ends there.
                                                 // Recovery ends in page 0's tail, after the record before it.
    let (_, end, _) = read(old.path(), Lsn(0));
    assert_eq!(end, old.recs[k - 1].1);
    assert_eq!(end, Lsn(BS - 16));

    let wal = Wal::open(fs(), old.path(), cfg(2), end, old.recs[k - 1].0).unwrap();
    let new = insert_all(&wal, &vec![24; m + 1 - k], 1000);
    assert_eq!(new.last().unwrap().1, old.recs[m].1);
    drop(wal);
    // Without epochs the old record would chain: its prev is the last new one.
    let next_old = RecordHeader::decode(&peek(old.path(), old.recs[m + 1].0 .0, 32)).unwrap();
    assert_eq!(Lsn(next_old.prev_lsn), new.last().unwrap().0);
    let (recs, end, why) = read(old.path(), Lsn(0));
    assert_eq!(recs.len(), m + 1);
    assert_eq!(end, old.recs[m].1);
    assert_eq!(
        why,
        EndOfWal::StaleEpoch {
            at: Lsn(boundary),
            previous: 2,
            found: 1
        }
    );
}

/// The same hole inside one page: the new timeline's rewrite of the block
/// holding E tears at a 512-byte sector, leaving an old record whose prev
/// LSN matches the last new record. Only the record epoch catches it.
#[test]
fn old_record_left_by_a_torn_rewrite_is_stale() {
    let mut sizes = vec![40];
    sizes.extend([24; 12]); // 48..128, then 64-byte records from 128.
    let old = build(&sizes);
    assert_eq!(old.recs[6].1, Lsn(512));
    let block0 = peek(old.path(), 0, BS as usize);
    poke(old.path(), old.recs[4].0 .0, &[0; 4]);
    let wal = Wal::open(fs(), old.path(), cfg(2), old.recs[4].0, old.recs[3].0).unwrap();
    let new = insert_all(&wal, &[24; 3], 1000);
    assert_eq!(new[2].1, Lsn(512));
    drop(wal);
    // The tear: the second half of block 0 keeps its old bytes.
    poke(old.path(), 512, &block0[512..]);
    let stale = RecordHeader::decode(&peek(old.path(), 512, 32)).unwrap();
    assert_eq!(Lsn(stale.prev_lsn), new[2].0);
    let (recs, end, why) = read(old.path(), Lsn(0));
    assert_eq!((recs.len(), end), (7, Lsn(512)));
    assert_eq!(
        why,
        EndOfWal::StaleEpoch {
            at: Lsn(512),
            previous: 2,
            found: 1
        }
    );
    assert_eq!(recs[6].epoch, 2);
}

fn three_segments() -> Db {
    let db = build(&[100_000; 25]);
    assert!(db.recs[24].1 .0 > 2 * MB);
    db
}

#[test]
fn missing_next_segment() {
    let db = three_segments();
    std::fs::remove_file(segment_path(db.path(), 2)).unwrap();
    let why = EndOfWal::MissingSegment { segment: 2 };
    expect(&db, db.count_before(2 * MB), db.end_before(2 * MB), why);
}

#[test]
fn short_segment() {
    let db = three_segments();
    let f = OpenOptions::new()
        .write(true)
        .open(segment_path(db.path(), 1))
        .unwrap();
    f.set_len(500_000).unwrap();
    let bad_page = MB + 500_000 / BS * BS;
    let why = EndOfWal::ShortSegment {
        segment: 1,
        len: 500_000,
    };
    expect(&db, db.count_before(bad_page), db.end_before(bad_page), why);
}

#[test]
fn segment_of_another_database() {
    let db = three_segments();
    poke(db.path(), MB + 24, &78u64.to_le_bytes());
    let (recs, end, why) = read(db.path(), Lsn(0));
    assert_eq!((recs.len(), end), (db.count_before(MB), db.end_before(MB)));
    assert!(
        matches!(why, EndOfWal::ForeignSegment { segment: 1, .. }),
        "{why}"
    );
    assert!(
        why.to_string().contains("system id 78 instead of 77"),
        "{why}"
    );
}

#[test]
fn reading_from_a_page_boundary_skips_a_continued_record() {
    let db = with_continued_record();
    let (recs, end, why) = read(db.path(), Lsn(BS));
    assert_eq!(recs.len(), 1, "{why}");
    assert_eq!(recs[0].lsn, db.recs[3].0);
    assert_eq!(end, db.recs[3].1);
    let (recs, _, _) = read(db.path(), Lsn(2 * BS));
    assert_eq!(recs[0].lsn, db.recs[3].0);
    assert_eq!(
        first_segment_start(fs().as_ref(), db.path(), &cfg(0)).unwrap(),
        Some(Lsn(0))
    );
}

#[test]
fn reasons_say_it_in_words() {
    let reasons = [
        EndOfWal::ZeroLength,
        EndOfWal::BadCrc {
            stored: 1,
            calculated: 2,
        },
        EndOfWal::WrongPageAddress {
            expected: Lsn(8192),
            found: Lsn(0),
        },
        EndOfWal::MissingSegment { segment: 3 },
    ];
    let text: Vec<String> = reasons.iter().map(|r| r.to_string()).collect();
    assert_eq!(text[0], "record length is zero");
    assert!(text[1].contains("incorrect record CRC"));
    assert_eq!(text[2], "unexpected page address 0/0 in WAL page 0/2000");
    assert_eq!(text[3], "WAL segment 0000000000000003 does not exist");
}

const SIM_WAL: &str = "/sim/wal";

/// A WAL of Noop records (as [`build`]) on the simulated file system, whose
/// sectors can be made to fail reads.
fn sim_wal(sizes: &[usize]) -> (SimFileSystem, Arc<dyn FileSystem>, Vec<(Lsn, Lsn)>) {
    let sim = SimFileSystem::new(Arc::new(untorn::file::IoStats::default()));
    let dir = Path::new(SIM_WAL);
    sim.create_dir_all(dir).unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
    let wal = Wal::create(fs.clone(), dir, cfg(1)).unwrap();
    let recs = insert_all(&wal, sizes, 0);
    (sim, fs, recs)
}

/// A sector that fails reads (EIO, as one being written at a power loss
/// may) ends the WAL at the last record before it, not at the start of its
/// page: the records before it on the page may be acknowledged commits.
#[test]
fn an_unreadable_sector_ends_the_wal_at_the_last_record_before_it() {
    let (sim, fs, recs) = sim_wal(&[24; 38]);
    let dir = Path::new(SIM_WAL);
    // Sector 3 (bytes 1536..2048) lies on the second 1 KB page.
    let bad = 3 * 512;
    sim.update_faults(|f| {
        f.read_eio_on.insert((segment_path(dir, 0), 3));
    });
    let mut r = WalReader::new(fs.clone(), dir, &cfg(0), Lsn(0))
        .unwrap()
        .every_record();
    let got = r.read_to_end().unwrap();
    let (end, why) = r.end().unwrap();
    let before: Vec<_> = recs.iter().filter(|r| r.1 .0 <= bad).collect();
    assert!(
        before.iter().any(|r| r.0 .0 >= BS),
        "records on the page before the sector"
    );
    assert_eq!(got.len(), before.len(), "ended because: {why}");
    assert_eq!(end, before.last().unwrap().1);
    assert!(
        matches!(why, EndOfWal::Unreadable { page, .. } if page == Lsn(BS)),
        "{why}"
    );
    // A sector past the last record, zeros whatever it holds: read around
    // it, every record is there.
    let last_end = recs.last().unwrap().1 .0;
    let beyond = last_end / 512 + 1;
    assert!(
        beyond * 512 < (last_end / BS + 1) * BS,
        "on the last page: {last_end}"
    );
    sim.update_faults(|f| {
        f.read_eio_on.clear();
        f.read_eio_on.insert((segment_path(dir, 0), beyond));
    });
    let mut r = WalReader::new(fs.clone(), dir, &cfg(0), Lsn(0))
        .unwrap()
        .every_record();
    assert_eq!(r.read_to_end().unwrap().len(), recs.len());
    assert_eq!(r.end().unwrap().0, Lsn(last_end));
    // The header's sector unreadable: the WAL ends at the page's start.
    sim.update_faults(|f| {
        f.read_eio_on.clear();
        f.read_eio_on.insert((segment_path(dir, 0), 2));
    });
    let mut r = WalReader::new(fs, dir, &cfg(0), Lsn(0))
        .unwrap()
        .every_record();
    let got = r.read_to_end().unwrap();
    let (end, why) = r.end().unwrap();
    assert_eq!(end, Db::end_of(&recs, BS), "{why}");
    assert_eq!(got.len(), recs.iter().filter(|r| r.1 .0 <= BS).count());
    assert!(matches!(why, EndOfWal::Unreadable { .. }), "{why}");
}

/// An unreadable sector whose bytes were zeros (a zero run in a payload)
/// costs nothing: it reads as zeros, and the record's CRC confirms it.
#[test]
fn an_unreadable_sector_of_zeros_is_read_around() {
    // Record 0's payload is 1200 zero bytes: sector 1 (512..1024) lies in it.
    let (sim, fs, recs) = sim_wal(&[1200, 24, 24, 24]);
    let dir = Path::new(SIM_WAL);
    assert!(recs[0].0 .0 < 512 && recs[0].1 .0 > 1024);
    sim.update_faults(|f| {
        f.read_eio_on.insert((segment_path(dir, 0), 1));
    });
    let mut r = WalReader::new(fs, dir, &cfg(0), Lsn(0))
        .unwrap()
        .every_record();
    let got = r.read_to_end().unwrap();
    assert_eq!(
        got.len(),
        recs.len(),
        "ended because: {}",
        r.end().unwrap().1
    );
    assert_eq!(r.end().unwrap().0, recs.last().unwrap().1);
}

/// Every flush ends on a 512-byte sector boundary and the next one writes
/// only its own sectors; a flush that did not complete (a record in it
/// damaged) is dropped whole, so the WAL ends on the boundary where the
/// writer continues without rewriting a sector that holds durable WAL.
#[test]
fn a_damaged_flush_is_dropped_whole_and_flushes_never_rewrite_a_sector() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::create(fs(), dir.path(), cfg(1)).unwrap();
    let first = insert_all(&wal, &[24, 300, 24], 0);
    let e1 = wal.flushed_lsn();
    assert!(e1.0.is_multiple_of(512));
    assert!(e1 > first[2].1, "padded to the sector's end");
    let written = wal.stats().bytes_written;
    let second = insert_all(&wal, &[24, 24, 700], 10);
    let e2 = wal.flushed_lsn();
    // After the page header if the sector starts a page.
    let at = |e: Lsn| Lsn(e.0 + if e.0.is_multiple_of(BS) { 24 } else { 0 });
    assert_eq!(second[0].0, at(e1), "the next flush starts a fresh sector");
    assert_eq!(wal.stats().bytes_written - written, e2.0 - e1.0);
    drop(wal);
    // The second flush's last record damaged: its first two are dropped too.
    flip(dir.path(), second[2].0 .0 + 40);
    let mut r = WalReader::new(fs(), dir.path(), &cfg(0), Lsn(0)).unwrap();
    let got = r.read_to_end().unwrap();
    let (end, why) = r.end().unwrap();
    assert_eq!(got.len(), 3, "{why}");
    assert_eq!(end, e1);
    assert!(matches!(why, EndOfWal::BadCrc { .. }), "{why}");
    // The writer continues there; the first flush's records stay whole.
    let wal = Wal::open(fs(), dir.path(), cfg(2), end, r.prev_record()).unwrap();
    let third = insert_all(&wal, &[24], 20);
    assert_eq!(third[0].0, at(e1));
    drop(wal);
    let (recs, _, _) = read(dir.path(), Lsn(0));
    let lsns: Vec<Lsn> = recs.iter().map(|r| r.lsn).collect();
    assert_eq!(lsns, vec![first[0].0, first[1].0, first[2].0, third[0].0]);
}
