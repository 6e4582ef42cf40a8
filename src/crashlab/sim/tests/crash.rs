use super::*;
use std::collections::HashSet;

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
    for (seed, c, _) in crashes(&fs, 0..SEEDS, &cfg) {
        let f = open(&c, &path, OpenOptions::read_only());
        let mut buf = vec![0u8; 8192];
        f.read_exact_at(&mut buf, 0, WHO).unwrap();
        assert!(buf.iter().all(|b| *b == 0x5A), "seed {seed}");
    }
}

#[test]
fn an_unsynced_write_is_kept_dropped_or_torn() {
    let fs = new_fs();
    let path = pending_overwrites(&fs, 4096, &[(0, 4096)]);
    let (mut kept, mut dropped, mut torn) = (0, 0, 0);
    for (seed, c, report) in crashes(&fs, 0..SEEDS, &CrashConfig::default()) {
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
                    file_cut_at: None,
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
        let path = pending_overwrites(&fs, 16384, &[(700, 9000)]);
        let cfg = CrashConfig {
            sector_size: sector,
            ..tear_only()
        };
        for (seed, c, report) in crashes(&fs, 0..100, &cfg) {
            let bytes = c.live_bytes(&path).unwrap();
            let new = chunks_uniform(&bytes, 700, 9700, sector, 0xAA, 0xBB);
            assert!(mixed(&new), "seed {seed}");
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
    let path = pending_overwrites(&fs, 65536, &[(8192, 8192), (32768, 32768)]);
    let cfg = CrashConfig {
        atomic_page_writes: Some(8192),
        ..tear_only()
    };
    let mut big_torn = 0;
    for (seed, c, report) in crashes(&fs, 0..200, &cfg) {
        let bytes = c.live_bytes(&path).unwrap();
        chunks_uniform(&bytes, 8192, 16384, 8192, 0xAA, 0xBB);
        let big = chunks_uniform(&bytes, 32768, 65536, 8192, 0xAA, 0xBB);
        assert!(
            report.torn_writes.iter().all(|t| t.offset == 32768),
            "seed {seed}"
        );
        big_torn += mixed(&big) as u32;
    }
    assert_eq!(big_torn, 200, "a 32 KB write tears at 8 KB boundaries");
}

#[test]
fn a_torn_extension_may_leave_the_file_ending_inside_it() {
    // 4 KB durable, then an 8 KB write that extends the file to 12 KB.
    for atomic in [None, Some(8192)] {
        let fs = new_fs();
        let path = pending_overwrites(&fs, 4096, &[(4096, 8192)]);
        let cfg = CrashConfig {
            atomic_page_writes: atomic,
            ..tear_only()
        };
        let unit = cfg.sector_size.max(atomic.unwrap_or(0));
        let mut lengths = HashSet::new();
        for (seed, c, report) in crashes(&fs, 0..200, &cfg) {
            let bytes = c.live_bytes(&path).unwrap();
            assert!(bytes[..4096].iter().all(|b| *b == 0xAA), "seed {seed}");
            // Units left old past the old end read as zeros.
            chunks_uniform(&bytes, 4096, bytes.len(), unit, 0, 0xBB);
            let cut = report.torn_writes.first().and_then(|t| t.file_cut_at);
            assert_eq!(cut.unwrap_or(12288), bytes.len() as u64, "seed {seed}");
            assert!(cut.is_none_or(|c| c % unit as u64 == 0), "seed {seed}");
            assert_eq!(report.writes_cut_short, cut.is_some() as u64);
            lengths.insert(bytes.len());
        }
        if atomic.is_none() {
            // Every sector boundary past the old end, and the whole write.
            let want: HashSet<usize> = (9..=24).map(|s| s * 512).collect();
            assert_eq!(lengths, want);
        } else {
            // An 8 KB unit holds the old end: the file ends at 8 or 12 KB.
            assert_eq!(lengths, HashSet::from([8192, 12288]));
        }
    }
}

#[test]
fn size_changes_are_durable_with_the_files_fsync() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[7u8; 4096]);
    let crashed_lengths = |fs: &SimFileSystem| -> HashSet<usize> {
        crashes(fs, 0..64, &CrashConfig::default())
            .map(|(_, c, _)| {
                let bytes = c.live_bytes(&path).unwrap();
                // Whatever length survives, the bytes past the first 4 KB
                // are the zeros of the extension.
                assert!(bytes[4096..].iter().all(|b| *b == 0));
                bytes.len()
            })
            .collect()
    };
    f.set_len(8192, WHO).unwrap();
    assert_eq!(crashed_lengths(&fs), HashSet::from([4096, 8192]));
    f.sync_data(WHO).unwrap();
    f.allocate(0, 16384, WHO).unwrap();
    assert_eq!(crashed_lengths(&fs), HashSet::from([8192, 16384]));
    f.sync_data(WHO).unwrap();
    assert_eq!(crashed_lengths(&fs), HashSet::from([16384]));
}

#[test]
fn later_writes_win_but_may_be_lost_alone() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", &[0; 512]);
    f.write_at(&[1; 512], 0, WHO).unwrap();
    f.write_at(&[2; 512], 0, WHO).unwrap();
    let mut seen = HashSet::new();
    for (_, c, r) in crashes(&fs, 0..64, &CrashConfig::no_tearing()) {
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
fn handles_from_before_a_crash_are_stale() {
    let fs = new_fs();
    let (path, f) = durable_file(&fs, "a", b"abc");
    fs.crash(1, &CrashConfig::default());
    let e = f.write_at(b"x", 0, WHO).unwrap_err();
    assert_eq!(os_code(&e), Some(libc::ESTALE));
    assert!(f.sync_all(WHO).is_err() && f.len().is_err());
    drop(f);
    let g = open(&fs, &path, OpenOptions::read_write());
    assert_eq!(g.len().unwrap(), 3);
}
