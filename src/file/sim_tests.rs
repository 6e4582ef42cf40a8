//! Tests of the simulated file system: each rule of the fault model, then
//! the engine itself crashed on it.

use super::*;
use crate::stats::IoOp;
use crate::{key_u64, Database, Options, TornPageProtection};
use std::collections::HashSet;

const WHO: Issuer = Issuer::Client;
const SEEDS: u64 = 400;

fn new_fs() -> SimFileSystem {
    SimFileSystem::new(Arc::new(IoStats::default()))
}

fn dir() -> &'static Path {
    Path::new("/sim/d")
}

/// A file whose name and `content` are durable.
fn durable_file(fs: &SimFileSystem, name: &str, content: &[u8]) -> (PathBuf, Arc<dyn File>) {
    fs.create_dir_all(dir()).unwrap();
    let path = dir().join(name);
    let f = fs
        .open(&path, FileKind::Data, OpenOptions::create())
        .unwrap();
    f.write_at(content, 0, WHO).unwrap();
    f.sync_all(WHO).unwrap();
    fs.sync_dir(dir(), WHO).unwrap();
    (path, f)
}

fn os_code(e: &Error) -> Option<i32> {
    match e {
        Error::Io { source, .. } | Error::FsyncFailed { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

fn tear_only() -> CrashConfig {
    CrashConfig {
        keep_probability: 0.0,
        drop_probability: 0.0,
        tear_probability: 1.0,
        ..CrashConfig::default()
    }
}

fn keep_all() -> CrashConfig {
    CrashConfig {
        keep_probability: 1.0,
        drop_probability: 0.0,
        tear_probability: 0.0,
        ..CrashConfig::default()
    }
}

/// Crashes a copy of `fs` with `seed`; returns the copy and the report.
fn crashed(fs: &SimFileSystem, seed: u64, cfg: &CrashConfig) -> (SimFileSystem, CrashReport) {
    let copy = fs.fork();
    let report = copy.crash(seed, cfg);
    (copy, report)
}

/// Each `unit`-byte chunk of `bytes[from..to]` is all `a` or all `b`:
/// returns per chunk whether it is `b`.
fn chunks_uniform(bytes: &[u8], from: usize, to: usize, unit: usize, a: u8, b: u8) -> Vec<bool> {
    let mut out = Vec::new();
    let mut start = from;
    while start < to {
        let stop = ((start / unit + 1) * unit).min(to);
        let chunk = &bytes[start..stop];
        let is_b = chunk[0] == b;
        assert!(chunk[0] == a || is_b, "byte {} is {:#x}", start, chunk[0]);
        let want = if is_b { b } else { a };
        assert!(
            chunk.iter().all(|x| *x == want),
            "mixed bytes in [{start}, {stop})"
        );
        out.push(is_b);
        start = stop;
    }
    out
}

#[test]
fn reads_writes_sizes_and_stats() {
    let fs = new_fs();
    let (_, f) = durable_file(&fs, "a", b"hello");
    f.write_vectored_at(&[b" ", b"world"], 5, Issuer::Checkpointer)
        .unwrap();
    let mut buf = [0u8; 20];
    assert_eq!(f.read_at(&mut buf, 0, WHO).unwrap(), 11);
    assert_eq!(&buf[..11], b"hello world");
    assert_eq!(f.read_at(&mut buf, 11, WHO).unwrap(), 0);
    assert!(f.read_exact_at(&mut buf, 0, WHO).is_err());
    f.allocate(0, 4096, WHO).unwrap();
    assert_eq!(f.len().unwrap(), 4096);
    f.allocate(0, 100, WHO).unwrap();
    assert_eq!(f.len().unwrap(), 4096, "allocate never shrinks");
    f.set_len(3, WHO).unwrap();
    assert_eq!(f.len().unwrap(), 3);
    f.writeback_hint(0, 8192, Issuer::Checkpointer).unwrap();
    let s = fs.stats();
    assert_eq!(s.calls(FileKind::Data, IoOp::Write), 2);
    assert_eq!(s.bytes(FileKind::Data, IoOp::Write), 11);
    assert_eq!(s.calls(FileKind::Data, IoOp::Read), 3);
    assert_eq!(s.calls(FileKind::Data, IoOp::Fsync), 1);
    assert_eq!(s.calls(FileKind::Control, IoOp::Fsync), 1, "sync_dir");
    assert_eq!(s.bytes(FileKind::Data, IoOp::Writeback), 8192);
    assert_eq!(
        s.calls_by(Issuer::Checkpointer, FileKind::Data, IoOp::Write),
        1
    );
}

#[test]
fn open_follows_posix() {
    let fs = new_fs();
    let (path, _) = durable_file(&fs, "a", b"x");
    let e = fs
        .open(&path, FileKind::Data, OpenOptions::create_new())
        .err()
        .unwrap();
    assert_eq!(os_code(&e), Some(libc::EEXIST));
    let missing = dir().join("missing");
    let e = fs
        .open(&missing, FileKind::Data, OpenOptions::read_write())
        .err()
        .unwrap();
    assert_eq!(os_code(&e), Some(libc::ENOENT));
    let no_dir = Path::new("/nowhere/f");
    let e = fs
        .open(no_dir, FileKind::Data, OpenOptions::create())
        .err()
        .unwrap();
    assert_eq!(os_code(&e), Some(libc::ENOENT));
    let ro = fs
        .open(&path, FileKind::Data, OpenOptions::read_only())
        .unwrap();
    assert_eq!(
        os_code(&ro.write_at(b"y", 0, WHO).unwrap_err()),
        Some(libc::EBADF)
    );
    let mut b = [0u8; 1];
    assert_eq!(ro.read_at(&mut b, 0, WHO).unwrap(), 1);
    assert_eq!(&b, b"x");
    fs.create_dir_all(&dir().join("sub")).unwrap();
    let names = fs.list_dir(dir()).unwrap();
    assert_eq!(names, vec![dir().join("a"), dir().join("sub")]);
    assert!(fs.exists(&path) && fs.exists(dir()) && !fs.exists(&missing));
    assert!(fs.list_dir(Path::new("/nowhere")).is_err());
    fs.remove(&path, FileKind::Data, WHO).unwrap();
    assert!(!fs.exists(&path));
    // An open handle outlives the name, as on POSIX.
    assert_eq!(ro.read_at(&mut b, 0, WHO).unwrap(), 1);
}

#[test]
fn direct_io_asks_for_alignment() {
    let fs = new_fs();
    durable_file(&fs, "a", &[0u8; 4096]);
    let opts = OpenOptions {
        direct: true,
        ..OpenOptions::read_write()
    };
    let f = fs.open(&dir().join("a"), FileKind::Data, opts).unwrap();
    let e = f.write_at(&[1u8; 100], 0, WHO).unwrap_err();
    assert_eq!(os_code(&e), Some(libc::EINVAL));
    let mut v = vec![0u8; 2048];
    let off = v.as_ptr().align_offset(DIRECT_ALIGN);
    f.read_exact_at(&mut v[off..off + 512], 512, WHO).unwrap();
    let e = f.read_at(&mut v[off + 1..off + 513], 512, WHO).unwrap_err();
    assert_eq!(os_code(&e), Some(libc::EINVAL), "a misaligned buffer");
    let e = f.read_at(&mut v[off..off + 512], 100, WHO).unwrap_err();
    assert_eq!(os_code(&e), Some(libc::EINVAL), "a misaligned offset");
    f.write_at(&v[off..off + 512], 1024, WHO).unwrap();
}

#[test]
fn fsynced_data_survives_every_crash() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0x5A; 8192]);
    f.write_at(&[0x11; 8192], 8192, WHO).unwrap();
    f.write_at(&[0x22; 700], 9000, WHO).unwrap();
    let other = fs
        .open(&dir().join("b"), FileKind::Wal, OpenOptions::create())
        .unwrap();
    other.write_at(&[0x33; 4096], 0, WHO).unwrap();
    let cfg = CrashConfig {
        zero_sector_probability: 0.5,
        eio_sector_probability: 0.5,
        ..CrashConfig::default()
    };
    for seed in 0..SEEDS {
        let (c, _) = crashed(&fs, seed, &cfg);
        let f = c
            .open(&path, FileKind::Data, OpenOptions::read_only())
            .unwrap();
        let mut buf = vec![0u8; 8192];
        f.read_exact_at(&mut buf, 0, WHO).unwrap();
        assert!(buf.iter().all(|b| *b == 0x5A), "seed {seed}");
    }
}

#[test]
fn an_unsynced_write_is_kept_dropped_or_torn() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0xAA; 4096]);
    f.write_at(&[0xBB; 4096], 0, WHO).unwrap();
    let (mut kept, mut dropped, mut torn) = (0, 0, 0);
    for seed in 0..SEEDS {
        let (c, report) = crashed(&fs, seed, &CrashConfig::default());
        let bytes = c.live_bytes(&path).unwrap();
        assert_eq!(
            bytes,
            c.durable_bytes(&path).unwrap(),
            "live == durable after a crash"
        );
        let new = chunks_uniform(&bytes, 0, 4096, 512, 0xAA, 0xBB);
        match (new.iter().all(|n| *n), new.iter().any(|n| *n)) {
            (true, _) => kept += 1,
            (false, false) => dropped += 1,
            (false, true) => {
                torn += 1;
                assert_eq!(report.writes_torn, 1, "seed {seed}");
                let want = TornWrite {
                    path: path.clone(),
                    offset: 0,
                    len: 4096,
                };
                assert_eq!(report.torn_writes, vec![want]);
                let old = new.iter().filter(|n| !**n).count() as u64;
                assert_eq!(report.sectors_torn, old);
            }
        }
    }
    assert!(
        kept > 50 && dropped > 50 && torn > 50,
        "{kept} {dropped} {torn}"
    );
}

#[test]
fn a_torn_write_never_mixes_bytes_within_a_sector() {
    for sector in [512usize, 4096] {
        let fs = new_fs();
        let (path, f) = durable_file(&fs, "a", &[0xAA; 16384]);
        f.write_at(&[0xBB; 9000], 700, WHO).unwrap();
        let cfg = CrashConfig {
            sector_size: sector,
            ..tear_only()
        };
        for seed in 0..100 {
            let (c, report) = crashed(&fs, seed, &cfg);
            let bytes = c.live_bytes(&path).unwrap();
            let new = chunks_uniform(&bytes, 700, 9700, sector, 0xAA, 0xBB);
            assert!(
                new.iter().any(|n| *n) && new.iter().any(|n| !*n),
                "seed {seed}"
            );
            assert!(bytes[..700]
                .iter()
                .chain(&bytes[9700..])
                .all(|b| *b == 0xAA));
            assert_eq!(report.writes_torn, 1);
        }
    }
}

#[test]
fn atomic_page_writes_never_tear_inside_a_page() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0xAA; 65536]);
    f.write_at(&[0xBB; 8192], 8192, WHO).unwrap();
    f.write_at(&[0xBB; 32768], 32768, WHO).unwrap();
    let cfg = CrashConfig {
        atomic_page_writes: Some(8192),
        ..tear_only()
    };
    let mut big_torn = 0;
    for seed in 0..200 {
        let (c, report) = crashed(&fs, seed, &cfg);
        let bytes = c.live_bytes(&path).unwrap();
        chunks_uniform(&bytes, 8192, 16384, 8192, 0xAA, 0xBB);
        let big = chunks_uniform(&bytes, 32768, 65536, 8192, 0xAA, 0xBB);
        assert!(
            report.torn_writes.iter().all(|t| t.offset == 32768),
            "seed {seed}"
        );
        big_torn += (big.iter().any(|n| *n) && big.iter().any(|n| !*n)) as u32;
    }
    assert_eq!(big_torn, 200, "a 32 KB write tears at 8 KB boundaries");
}

#[test]
fn a_new_file_needs_its_directory_synced() {
    let fs = new_fs();
    fs.create_dir_all(dir()).unwrap();
    let path = dir().join("new");
    let f = fs
        .open(&path, FileKind::Wal, OpenOptions::create_new())
        .unwrap();
    f.write_at(b"durable data", 0, WHO).unwrap();
    f.sync_all(WHO).unwrap();
    let (mut vanished, mut survived) = (0, 0);
    for seed in 0..64 {
        let (c, report) = crashed(&fs, seed, &keep_all());
        match c.live_bytes(&path) {
            None => {
                vanished += 1;
                assert!(!c.exists(&path));
                assert_eq!(report.lost_files, vec![path.clone()]);
            }
            Some(bytes) => {
                survived += 1;
                assert_eq!(bytes, b"durable data");
            }
        }
    }
    assert!(vanished > 0 && survived > 0, "{vanished} {survived}");
    fs.sync_dir(dir(), WHO).unwrap();
    for seed in 0..64 {
        let (c, _) = crashed(&fs, seed, &CrashConfig::default());
        assert_eq!(c.live_bytes(&path).unwrap(), b"durable data", "seed {seed}");
    }
}

#[test]
fn renames_and_removals_are_durable_after_sync_dir() {
    let fs = new_fs();
    let (a, _) = durable_file(&fs, "a", b"old");
    let (tmp, _) = durable_file(&fs, "a.tmp", b"new");
    let (gone, _) = durable_file(&fs, "gone", b"x");
    fs.rename(&tmp, &a, FileKind::Control, WHO).unwrap();
    fs.remove(&gone, FileKind::Data, WHO).unwrap();
    assert_eq!(fs.live_bytes(&a).unwrap(), b"new");
    let mut seen = HashSet::new();
    for seed in 0..64 {
        let (c, _) = crashed(&fs, seed, &CrashConfig::default());
        let state = (c.live_bytes(&a).unwrap(), c.exists(&tmp), c.exists(&gone));
        // A prefix of (rename, remove) survives.
        assert!(
            [
                (b"old".to_vec(), true, true),
                (b"new".to_vec(), false, true),
                (b"new".to_vec(), false, false)
            ]
            .contains(&state),
            "seed {seed}: {state:?}"
        );
        seen.insert(state);
    }
    assert_eq!(seen.len(), 3);
    fs.sync_dir(dir(), WHO).unwrap();
    for seed in 0..64 {
        let (c, _) = crashed(&fs, seed, &CrashConfig::default());
        assert_eq!(c.live_bytes(&a).unwrap(), b"new");
        assert!(!c.exists(&tmp) && !c.exists(&gone));
    }
}

#[test]
fn size_changes_are_durable_with_the_files_fsync() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[7u8; 4096]);
    f.set_len(8192, WHO).unwrap();
    let mut lens = HashSet::new();
    for seed in 0..64 {
        let (c, _) = crashed(&fs, seed, &CrashConfig::default());
        lens.insert(c.live_bytes(&path).unwrap().len());
    }
    assert_eq!(lens, HashSet::from([4096, 8192]));
    f.sync_data(WHO).unwrap();
    f.allocate(0, 16384, WHO).unwrap();
    let mut lens = HashSet::new();
    for seed in 0..64 {
        let (c, _) = crashed(&fs, seed, &CrashConfig::default());
        let bytes = c.live_bytes(&path).unwrap();
        assert!(bytes[4096..].iter().all(|b| *b == 0));
        lens.insert(bytes.len());
    }
    assert_eq!(lens, HashSet::from([8192, 16384]));
    f.sync_data(WHO).unwrap();
    for seed in 0..64 {
        let (c, _) = crashed(&fs, seed, &CrashConfig::default());
        assert_eq!(c.live_bytes(&path).unwrap().len(), 16384);
    }
}

#[test]
fn a_failed_fsync_loses_the_pending_writes_for_good() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0xAA; 512]);
    fs.update_faults(|c| c.fail_fsync_after = Some(1));
    f.write_at(&[0xBB; 512], 0, WHO).unwrap();
    f.sync_data(WHO).unwrap();
    f.write_at(&[0xCC; 512], 0, WHO).unwrap();
    let e = f.sync_data(WHO).unwrap_err();
    assert!(
        e.is_fatal() && matches!(e, Error::FsyncFailed { .. }),
        "{e}"
    );
    assert_eq!(os_code(&e), Some(libc::EIO));
    assert_eq!(fs.faults().fail_fsync_after, None);
    // The page cache still holds the write, marked clean.
    assert_eq!(fs.live_bytes(&path).unwrap(), vec![0xCC; 512]);
    // No poisoning here: the next fsync succeeds, over nothing.
    f.sync_data(WHO).unwrap();
    f.write_at(&[0xDD; 10], 1000, WHO).unwrap();
    f.sync_data(WHO).unwrap();
    assert_eq!(fs.pending_ops(), (0, 0));
    for seed in 0..32 {
        let (c, _) = crashed(&fs, seed, &keep_all());
        let bytes = c.live_bytes(&path).unwrap();
        assert_eq!(&bytes[..512], &[0xBB; 512][..], "the failed write is gone");
        assert_eq!(&bytes[1000..], &[0xDD; 10][..]);
    }
}

#[test]
fn enospc_triggers_and_clears() {
    let fs = new_fs();
    let (_, f) = durable_file(&fs, "a", b"");
    let wal = fs
        .open(&dir().join("w"), FileKind::Wal, OpenOptions::create())
        .unwrap();
    fs.update_faults(|c| c.enospc_after_bytes = Some((FileKind::Data, 1000)));
    f.write_at(&[1; 600], 0, WHO).unwrap();
    let e = f.write_at(&[1; 600], 600, WHO).unwrap_err();
    assert!(e.is_disk_full(), "{e}");
    assert_eq!(f.len().unwrap(), 600, "a failed write changes nothing");
    assert!(f.allocate(0, 2000, WHO).unwrap_err().is_disk_full());
    f.allocate(0, 900, WHO).unwrap();
    wal.write_at(&[2; 5000], 0, WHO).unwrap();
    fs.update_faults(|c| c.enospc_after_bytes = None);
    f.write_at(&[1; 600], 600, WHO).unwrap();
    f.allocate(0, 65536, WHO).unwrap();
}

#[test]
fn eio_and_zeroed_sectors_after_a_crash() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0xAA; 4096]);
    f.write_at(&[0xBB; 4096], 0, WHO).unwrap();
    let cfg = CrashConfig {
        zero_sector_probability: 1.0,
        eio_sector_probability: 1.0,
        ..tear_only()
    };
    let (c, report) = crashed(&fs, 3, &cfg);
    assert!(report.sectors_eio > 0 && report.sectors_eio == report.sectors_zeroed);
    let bytes = c.live_bytes(&path).unwrap();
    let zero = chunks_uniform(&bytes, 0, 4096, 512, 0xBB, 0x00);
    let bad: Vec<u64> = (0..8).filter(|s| zero[*s as usize]).collect();
    assert_eq!(bad.len() as u64, report.sectors_eio);
    let expected: HashSet<_> = bad.iter().map(|s| (path.clone(), *s)).collect();
    assert_eq!(c.faults().read_eio_on, expected);
    let g = c
        .open(&path, FileKind::Data, OpenOptions::read_write())
        .unwrap();
    let mut buf = [0u8; 512];
    let e = g.read_at(&mut buf, bad[0] * 512 + 10, WHO).unwrap_err();
    assert_eq!(os_code(&e), Some(libc::EIO));
    let mut whole = vec![0u8; 4096];
    assert!(g.read_at(&mut whole, 0, WHO).is_err());
    if let Some(good) = (0..8).find(|s| !zero[*s as usize]) {
        g.read_exact_at(&mut buf, good * 512, WHO).unwrap();
    }
    g.write_at(&[0xEE; 512], bad[0] * 512, WHO).unwrap();
    g.read_exact_at(&mut buf, bad[0] * 512, WHO).unwrap();
    assert_eq!(buf, [0xEE; 512]);
}

#[test]
fn a_misdirected_write_lands_in_another_block() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0xAA; 32768]);
    let wal = fs
        .open(&dir().join("w"), FileKind::Wal, OpenOptions::create())
        .unwrap();
    fs.update_faults(|c| c.misdirect_next_write = Some((FileKind::Data, 2, 8192)));
    wal.write_at(&[1; 100], 0, WHO).unwrap();
    f.write_at(&[0xBB; 8192], 8192, WHO).unwrap();
    f.write_at(&[0xCC; 8192], 0, WHO).unwrap();
    let bytes = fs.live_bytes(&path).unwrap();
    assert_eq!(
        bytes[8192..16384],
        [0xAA; 8192],
        "the intended block keeps old bytes"
    );
    assert_eq!(
        bytes[24576..32768],
        [0xBB; 8192],
        "the write went 2 blocks further"
    );
    assert_eq!(
        bytes[0..8192],
        [0xCC; 8192],
        "the switch clears after one write"
    );
    assert_eq!(fs.live_bytes(&dir().join("w")).unwrap(), vec![1; 100]);
    let traced = fs
        .trace()
        .into_iter()
        .find(|t| t.note.as_deref().is_some_and(|n| n.contains("misdirected")));
    assert_eq!(traced.unwrap().offset, 24576);
    fs.update_faults(|c| c.misdirect_next_write = Some((FileKind::Data, -5, 8192)));
    f.write_at(&[0xDD; 8192], 16384, WHO).unwrap();
    assert_eq!(
        fs.live_bytes(&path).unwrap()[0..8192],
        [0xDD; 8192],
        "clamped at block 0"
    );
}

#[test]
fn a_lost_write_is_read_back_but_never_durable() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0xAA; 512]);
    fs.update_faults(|c| c.lose_next_write = Some(FileKind::Data));
    f.write_at(&[0xBB; 512], 0, WHO).unwrap();
    f.sync_data(WHO).unwrap();
    assert_eq!(fs.live_bytes(&path).unwrap(), vec![0xBB; 512]);
    assert_eq!(fs.durable_bytes(&path).unwrap(), vec![0xAA; 512]);
    let (c, _) = crashed(&fs, 0, &keep_all());
    assert_eq!(c.live_bytes(&path).unwrap(), vec![0xAA; 512]);
}

#[test]
fn a_bit_flips_at_rest() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0u8; 100]);
    fs.flip_bit(&path, 10, 3).unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 10, WHO).unwrap();
    assert_eq!(b[0], 8);
    assert_eq!(fs.durable_bytes(&path).unwrap()[10], 8);
    assert!(fs.flip_bit(&path, 100, 0).is_err());
    let (c, _) = crashed(&fs, 0, &CrashConfig::default());
    assert_eq!(c.live_bytes(&path).unwrap()[10], 8);
}

#[test]
fn a_power_cut_stops_every_change_until_the_crash() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0xAA; 512]);
    fs.update_faults(|c| c.power_cut_after = Some(2));
    f.write_at(&[0xBB; 512], 0, WHO).unwrap();
    f.write_at(&[0xCC; 512], 512, WHO).unwrap();
    let e = f.sync_data(WHO).unwrap_err();
    assert_eq!(os_code(&e), Some(libc::EIO));
    assert!(!e.is_fatal(), "a power cut is not an fsync failure");
    assert_eq!(
        os_code(&f.write_at(b"x", 0, WHO).unwrap_err()),
        Some(libc::EIO)
    );
    assert!(f.set_len(0, WHO).is_err() && f.allocate(0, 1 << 20, WHO).is_err());
    let other = dir().join("b");
    assert!(fs
        .open(&other, FileKind::Data, OpenOptions::create())
        .is_err());
    assert!(fs.rename(&path, &other, FileKind::Data, WHO).is_err());
    assert!(fs.remove(&path, FileKind::Data, WHO).is_err());
    assert!(fs.sync_dir(dir(), WHO).is_err());
    let mut buf = [0u8; 1024];
    assert_eq!(
        f.read_at(&mut buf, 0, WHO).unwrap(),
        1024,
        "reads see the cache"
    );
    let report = fs.crash(7, &CrashConfig::default());
    assert_eq!(
        report.writes_kept + report.writes_dropped + report.writes_torn,
        2
    );
    assert_eq!(fs.faults().power_cut_after, None);
    let g = fs
        .open(&path, FileKind::Data, OpenOptions::read_write())
        .unwrap();
    g.write_at(b"power is back", 0, WHO).unwrap();
    g.sync_data(WHO).unwrap();
}

/// Many pending writes over two files and a pending rename.
fn busy_fs() -> SimFileSystem {
    let fs = new_fs();
    let (_, a) = durable_file(&fs, "a", &[0xAA; 65536]);
    let (_, b) = durable_file(&fs, "b", &[0xAB; 16384]);
    let mut rng = SplitMix64::new(99);
    for i in 0..200u64 {
        let (f, len) = if i % 3 == 0 { (&b, 16384) } else { (&a, 65536) };
        let off = rng.below(len - 1);
        let n = 1 + rng.below(6000.min(len - off)) as usize;
        f.write_at(&vec![i as u8; n], off, WHO).unwrap();
    }
    fs.rename(&dir().join("b"), &dir().join("c"), FileKind::Data, WHO)
        .unwrap();
    fs
}

#[test]
fn the_same_seed_gives_the_same_image() {
    let fs = busy_fs();
    let mut images = Vec::new();
    for seed in 0..8 {
        let (c1, r1) = crashed(&fs, seed, &CrashConfig::default());
        let (c2, r2) = crashed(&fs, seed, &CrashConfig::default());
        assert_eq!(c1.snapshot_durable(), c2.snapshot_durable(), "seed {seed}");
        assert_eq!(r1, r2);
        assert!(r1.writes_torn > 0 && r1.writes_kept > 0 && r1.writes_dropped > 0);
        images.push(c1.snapshot_durable());
    }
    images.dedup();
    assert_eq!(images.len(), 8, "different seeds give different images");
    // Restarting from a saved image gives the same bytes.
    let restored = SimFileSystem::from_image(images[3].clone(), Arc::new(IoStats::default()));
    assert_eq!(restored.snapshot_durable(), images[3]);
}

#[test]
fn later_writes_win_but_may_be_lost_alone() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0; 512]);
    f.write_at(&[1; 512], 0, WHO).unwrap();
    f.write_at(&[2; 512], 0, WHO).unwrap();
    let mut seen = HashSet::new();
    for seed in 0..64 {
        let (c, r) = crashed(&fs, seed, &CrashConfig::no_tearing());
        let v = c.live_bytes(&path).unwrap()[0];
        if r.writes_kept == 2 {
            assert_eq!(v, 2, "both kept: the later one wins");
        }
        seen.insert(v);
    }
    assert_eq!(
        seen,
        HashSet::from([0, 1, 2]),
        "1 alone: the later write was lost"
    );
}

#[test]
fn the_generator_never_changes() {
    // SplitMix64's published stream from seed 0: crash images replay from
    // their seeds whatever the rand crate does.
    let mut rng = SplitMix64::new(0);
    let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
    assert_eq!(
        first,
        [
            0xE220_A839_7B1D_CDAF,
            0x6E78_9E6A_A1B9_65F4,
            0x06C4_5D18_8009_454F
        ]
    );
    let mut rng = SplitMix64::new(42);
    assert!((0..1000)
        .map(|_| rng.next_f64())
        .all(|x| (0.0..1.0).contains(&x)));
}

#[test]
fn handles_from_before_a_crash_are_stale() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", b"abc");
    fs.crash(1, &CrashConfig::default());
    let e = f.write_at(b"x", 0, WHO).unwrap_err();
    assert_eq!(os_code(&e), Some(libc::ESTALE));
    assert!(f.sync_all(WHO).is_err() && f.len().is_err());
    drop(f);
    let g = fs
        .open(&path, FileKind::Data, OpenOptions::read_write())
        .unwrap();
    assert_eq!(g.len().unwrap(), 3);
}

#[test]
fn the_trace_records_every_call_and_saves_as_json() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", b"abc");
    f.write_at(b"d", 3, Issuer::WalWriter).unwrap();
    fs.crash(5, &CrashConfig::default());
    let trace = fs.trace();
    assert_eq!(trace.len() as u64, fs.op_count());
    assert!(trace.iter().enumerate().all(|(i, t)| t.seq == i as u64));
    let kinds: Vec<TraceKind> = trace.iter().map(|t| t.op).collect();
    assert_eq!(
        kinds,
        [
            TraceKind::CreateDir,
            TraceKind::Open,
            TraceKind::Write,
            TraceKind::SyncAll,
            TraceKind::SyncDir,
            TraceKind::Write,
            TraceKind::Crash
        ]
    );
    let w = &trace[5];
    assert_eq!((w.path.as_path(), w.offset, w.len), (path.as_path(), 3, 1));
    assert_eq!(
        (w.issuer, w.file_kind),
        (Some(Issuer::WalWriter), Some(FileKind::Data))
    );
    assert_eq!(w.crc32c, Some(crc32c::crc32c(b"d")));
    assert_eq!(trace[6].note.as_deref(), Some("seed 5"));
    let out = tempfile::NamedTempFile::new().unwrap();
    fs.save_trace(out.path()).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.path()).unwrap()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 7);
    assert_eq!(v[5]["op"], "write");
    fs.set_trace_enabled(false);
    fs.exists(&path);
    assert_eq!((fs.trace().len(), fs.op_count()), (7, 8));
}

// ---- The engine on the simulated file system ----

fn engine_options(protection: TornPageProtection) -> Options {
    let mut o = Options::default();
    o.creation.torn_page_protection = Some(protection);
    // A small pool, so pages are evicted (written without fsync) between
    // checkpoints, and small WAL segments, so the crashes copy less.
    o.buffer_pool_size = 32 * 8192;
    o.creation.wal_segment_size = Some(1 << 20);
    o
}

/// Totals over the crashes of a run, to check that they lost something.
#[derive(Default, Debug)]
struct Totals {
    crashes: u64,
    power_cuts: u64,
    in_flight_commits: u64,
    writes_dropped: u64,
    writes_torn: u64,
    data_writes_torn: u64,
    dir_ops_lost: u64,
}

type Changes = Vec<(u64, Option<Vec<u8>>)>;

fn apply(model: &mut BTreeMap<u64, Vec<u8>>, changes: &Changes) {
    for (k, v) in changes {
        match v {
            Some(v) => model.insert(*k, v.clone()),
            None => model.remove(k),
        };
    }
}

/// How a transaction ended: committed, failed before its commit, or failed
/// in its commit (in flight: it may or may not survive the crash).
enum TxnEnd {
    Committed(Changes),
    Failed(Error),
    InFlight(Changes, Error),
}

/// One transaction of random upserts and deletes.
fn random_txn(db: &Database, table: &crate::Table, rng: &mut SplitMix64, tag: &str) -> TxnEnd {
    let mut tx = db.begin();
    let mut changes = Vec::new();
    // At most 8 rows: a commit may pin at most half the pool's 32 leaves.
    for _ in 0..1 + rng.below(8) {
        let k = rng.below(2000);
        let res = if rng.chance(0.1) {
            changes.push((k, None));
            tx.delete(table, &key_u64(k)).map(|_| ())
        } else {
            // At most ~1 KB: under the row limit of 8 KB pages.
            let v = format!("{tag}/{k};").repeat(1 + rng.below(80) as usize);
            let res = tx.upsert(table, &key_u64(k), v.as_bytes());
            changes.push((k, Some(v.into_bytes())));
            res
        };
        if let Err(e) = res {
            return TxnEnd::Failed(e);
        }
    }
    match tx.commit() {
        Ok(_) => TxnEnd::Committed(changes),
        Err(e) => TxnEnd::InFlight(changes, e),
    }
}

/// Four rounds of: commits (with the power cut at a random call in most
/// rounds), a crash, a reopening, and the check that every acknowledged
/// commit is there and the one in flight is there entirely or not at all.
/// Returns what went wrong, naming the seed.
fn engine_crash_rounds(
    seed: u64,
    cfg: &CrashConfig,
    opts: &Options,
    totals: &mut Totals,
) -> std::result::Result<(), String> {
    let stats = Arc::new(IoStats::default());
    let fs = SimFileSystem::new(stats.clone());
    let dir = Path::new("/sim/db");
    let sim = || -> Arc<dyn FileSystem> { Arc::new(fs.clone()) };
    // A failing seed saves its trace where UNTORN_SIM_TRACE_DIR says.
    let fail = |what: String| {
        if let Some(d) = std::env::var_os("UNTORN_SIM_TRACE_DIR") {
            let path = Path::new(&d).join(format!("sim-trace-seed-{seed}.json"));
            fs.save_trace(&path).expect("save the trace");
        }
        format!("seed {seed}: {what}")
    };
    let db = Database::create_with(sim(), stats.clone(), dir, opts.clone());
    let mut db = db.map_err(|e| fail(format!("create: {e}")))?;
    let mut table = db.create_table("t").map_err(|e| fail(e.to_string()))?;
    let mut acked: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut rng = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9) ^ 0xC0FFEE);
    for round in 0..4u64 {
        // Each commit makes two calls (WAL write, fsync), evictions more.
        let txns = 20 + rng.below(40);
        let cut = rng.chance(0.8).then(|| rng.below(3 * txns));
        fs.update_faults(|f| f.power_cut_after = cut);
        let mut in_flight = None;
        for txn in 0..txns {
            let end = random_txn(&db, &table, &mut rng, &format!("{seed}/{round}/{txn}"));
            let error = match end {
                TxnEnd::Committed(changes) => {
                    apply(&mut acked, &changes);
                    continue;
                }
                TxnEnd::Failed(e) => e,
                TxnEnd::InFlight(changes, e) => {
                    in_flight = Some(changes);
                    e
                }
            };
            if fs.faults().power_cut_after != Some(0) {
                return Err(fail(format!("round {round}: {error} with the power on")));
            }
            break;
        }
        if in_flight.is_none() && rng.chance(0.5) {
            let _ = db.checkpoint();
        }
        totals.power_cuts += (fs.faults().power_cut_after == Some(0)) as u64;
        totals.in_flight_commits += in_flight.is_some() as u64;
        let report = fs.crash(seed * 16 + round, cfg);
        totals.crashes += 1;
        totals.writes_dropped += report.writes_dropped;
        totals.writes_torn += report.writes_torn;
        let data = report
            .torn_writes
            .iter()
            .filter(|t| t.path.starts_with(dir.join("data")));
        totals.data_writes_torn += data.count() as u64;
        totals.dir_ops_lost += report.dir_ops_lost;
        drop(db);
        let reopened = Database::open_with(sim(), stats.clone(), dir, opts.clone());
        db = reopened.map_err(|e| fail(format!("round {round} reopen: {e}; {report:?}")))?;
        table = db
            .table("t")
            .map_err(|e| fail(format!("round {round}: {e}")))?;
        let rows = db.begin().scan(&table, &[], None, usize::MAX);
        let rows = rows.map_err(|e| fail(format!("round {round} scan: {e}")))?;
        let got: BTreeMap<u64, Vec<u8>> = rows
            .into_iter()
            .map(|(k, v)| (u64::from_be_bytes(k.try_into().expect("8-byte keys")), v))
            .collect();
        let mut with_in_flight = acked.clone();
        if let Some(changes) = &in_flight {
            apply(&mut with_in_flight, changes);
        }
        if got == with_in_flight {
            acked = with_in_flight;
        } else if got != acked {
            let wrong: Vec<_> = acked
                .keys()
                .filter(|k| got.get(k) != acked.get(k))
                .collect();
            let extra: Vec<_> = got.keys().filter(|k| !acked.contains_key(k)).collect();
            return Err(fail(format!(
                "round {round} (power cut after {cut:?} calls, commit in flight: {}): \
                 rows wrong or missing {wrong:?}, extra {extra:?}; {report:?}",
                in_flight.is_some()
            )));
        }
    }
    db.close().map_err(|e| fail(format!("close: {e}")))
}

/// Runs the seeds; returns the totals and the failures.
fn engine_run(cfg: &CrashConfig, p: TornPageProtection, seeds: u64) -> (Totals, Vec<String>) {
    let mut totals = Totals::default();
    let opts = engine_options(p);
    let failures = (0..seeds)
        .filter_map(|s| engine_crash_rounds(s, cfg, &opts, &mut totals).err())
        .collect();
    (totals, failures)
}

fn assert_no_failures(failures: &[String]) {
    let n = failures.len();
    assert!(n == 0, "{n} seeds failed:\n{}", failures.join("\n"));
}

#[test]
fn the_engine_keeps_every_commit_across_crashes_without_tearing() {
    let (totals, failures) = engine_run(
        &CrashConfig::no_tearing(),
        TornPageProtection::FullPages,
        50,
    );
    assert_no_failures(&failures);
    assert!(
        totals.power_cuts > 30 && totals.in_flight_commits > 5,
        "{totals:?}"
    );
    assert!(
        totals.writes_dropped > 10 && totals.dir_ops_lost > 0,
        "{totals:?}"
    );
}

#[test]
fn full_pages_keeps_every_commit_across_torn_sectors() {
    let (totals, failures) = engine_run(&CrashConfig::default(), TornPageProtection::FullPages, 50);
    assert_no_failures(&failures);
    assert!(totals.data_writes_torn > 50, "{totals:?}");
}

#[test]
fn atomic_8k_writes_need_no_torn_page_protection() {
    // Data pages (8 KB) cannot tear; WAL writes of several blocks can, at
    // 8 KB boundaries.
    let cfg = CrashConfig {
        atomic_page_writes: Some(8192),
        ..CrashConfig::default()
    };
    let (totals, failures) = engine_run(&cfg, TornPageProtection::Off, 50);
    assert_no_failures(&failures);
    // Some multi-block WAL writes tore (how many depends on the I/O
    // pattern), and no commit was lost.
    assert!(
        totals.writes_torn > 0 && totals.power_cuts > 30,
        "{totals:?}"
    );
}

#[test]
fn without_protection_a_torn_page_is_detected_never_silently_wrong() {
    let (_, failures) = engine_run(&CrashConfig::default(), TornPageProtection::Off, 50);
    assert!(!failures.is_empty(), "512-byte sectors tear 8 KB pages");
    for f in &failures {
        let named = f.contains("checksum") || f.contains("damaged");
        assert!(named && !f.contains("rows wrong"), "{f}");
    }
}
