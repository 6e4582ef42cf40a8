use super::*;

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
