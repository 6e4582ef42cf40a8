use super::*;
use std::collections::HashSet;

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
    for (_, c, _) in crashes(&fs, 0..32, &keep_all()) {
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
    let path = pending_overwrites(&fs, 4096, &[(0, 4096)]);
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
    let g = open(&c, &path, OpenOptions::read_write());
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
    let g = open(&fs, &path, OpenOptions::read_write());
    g.write_at(b"power is back", 0, WHO).unwrap();
    g.sync_data(WHO).unwrap();
}

#[test]
fn a_failed_directory_fsync_keeps_its_names_pending() {
    let fs = new_fs();
    fs.create_dir_all(dir()).unwrap();
    let path = dir().join("new");
    fs.open(&path, FileKind::Data, OpenOptions::create_new())
        .unwrap();
    fs.update_faults(|c| c.fail_sync_dir_after = Some(1));
    fs.sync_dir(Path::new("/sim"), WHO).unwrap();
    let e = fs.sync_dir(dir(), WHO).unwrap_err();
    assert!(
        e.is_fatal() && matches!(e, Error::FsyncFailed { .. }),
        "{e}"
    );
    assert_eq!(fs.faults().fail_sync_dir_after, None);
    let lost = crashes(&fs, 0..64, &CrashConfig::default())
        .filter(|(_, c, _)| !c.exists(&path))
        .count();
    assert!(lost > 0, "the new name was made durable");
    fs.sync_dir(dir(), WHO).unwrap();
}
