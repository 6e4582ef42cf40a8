use super::*;
use crate::file::IoOp;

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
    let open_error =
        |path: &Path, opts| os_code(&fs.open(path, FileKind::Data, opts).err().unwrap());
    assert_eq!(
        open_error(&path, OpenOptions::create_new()),
        Some(libc::EEXIST)
    );
    let missing = dir().join("missing");
    assert_eq!(
        open_error(&missing, OpenOptions::read_write()),
        Some(libc::ENOENT)
    );
    let no_dir = Path::new("/nowhere/f");
    assert_eq!(
        open_error(no_dir, OpenOptions::create()),
        Some(libc::ENOENT)
    );
    let ro = open(&fs, &path, OpenOptions::read_only());
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
    let (path, _) = durable_file(&fs, "a", &[0u8; 4096]);
    let opts = OpenOptions {
        direct: true,
        ..OpenOptions::read_write()
    };
    let f = open(&fs, &path, opts);
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
