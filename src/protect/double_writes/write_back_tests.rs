//! `double_write_flush_after`: before a manifest's fsync, `dw/deferred` is
//! written to the device in pieces, each waited for, so the fsync finds
//! little left to write.

use super::*;

/// Deferring, with `flush_after` and file 7 on disk.
fn deferring_in_pieces_of(flush_after: usize) -> Setup {
    let s = setup_area(AreaSettings {
        flush_after,
        deferred_slots: 64,
        ..area(64, 8, true)
    });
    s.files
        .get(7)
        .unwrap()
        .write_pages(0, &[page(7, 0, 1).bytes()], Issuer::Client)
        .unwrap();
    s
}

/// The checkpointer's (writeback requests, their bytes, fsyncs) on `dw/`.
fn io_of_checkpointer(s: &Setup) -> (u64, u64, u64) {
    let (by, kind) = (Issuer::Checkpointer, FileKind::DoubleWrite);
    (
        s.io.calls_by(by, kind, IoOp::Writeback),
        s.io.bytes_by(by, kind, IoOp::Writeback),
        s.io.calls_by(by, kind, IoOp::Fsync),
    )
}

/// Stores five pages, then runs a checkpoint's manifest; returns the
/// checkpointer's I/O on `dw/` and the bytes of the slots used (the file
/// is longer: room allocated ahead).
fn five_pages_then_a_manifest(s: &Setup) -> ((u64, u64, u64), u64) {
    let pages: Vec<PageCopy> = (1..=5).map(|b| page(7, b, 100 + b as u64)).collect();
    write(s, &pages, Issuer::Client);
    assert!(!s.dw.begin_checkpoint(false));
    assert_eq!(io_of_checkpointer(s), (0, 0, 0), "stores write no piece");
    s.dw.persist_deferred(Lsn(150), Issuer::Checkpointer)
        .unwrap();
    let len = std::fs::metadata(s.dir.join("dw").join(DEFERRED_FILE))
        .unwrap()
        .len();
    let used = u64::from(s.dw.deferred.slots_used()) * PS as u64;
    assert!(len > used, "room allocated past the slots used");
    (io_of_checkpointer(s), used)
}

#[test]
fn a_manifests_fsync_follows_the_file_written_out_in_pieces() {
    let s = deferring_in_pieces_of(2);
    let (io, len) = five_pages_then_a_manifest(&s);
    // The empty manifest in slot 0, the pages in 1 to 5, the manifest in 6.
    assert_eq!(len, 7 * PS as u64);
    let pieces = len.div_ceil(2 * PS as u64);
    assert_eq!(io, (pieces, len, 1), "four pieces, then one fsync");
    // The pages are still read from their slots.
    for b in 1..=5 {
        assert_eq!(lsn_read(&s, b), Some(100 + b as u64));
    }
}

#[test]
fn with_flush_after_zero_the_fsync_writes_the_file_alone() {
    let s = deferring_in_pieces_of(0);
    let (io, _) = five_pages_then_a_manifest(&s);
    assert_eq!(io, (0, 0, 1));
}

/// A file of `dw/` whose pieces fail as a device error during
/// sync_file_range would (the kernel cannot be made to fail a regular
/// file's here).
struct PieceFailingFile {
    inner: Arc<dyn File>,
}

impl File for PieceFailingFile {
    crate::forward_file_methods!(inner: path, kind, read_at, write_at, write_vectored_at,
        sync_all, sync_data, writeback_hint, allocate, set_len, len, try_lock);

    fn write_back_and_wait(&self, _offset: u64, _len: u64, _who: Issuer) -> Result<()> {
        Err(crate::error::Error::FsyncFailed {
            path: self.inner.path().to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::EIO),
        })
    }
}

#[test]
fn a_failed_piece_fails_the_manifest_and_no_fsync_follows() {
    let s = setup_area_on(
        AreaSettings {
            flush_after: 2,
            deferred_slots: 64,
            ..area(64, 8, true)
        },
        |fs| {
            Arc::new(WrapDoubleWriteFiles(fs, |inner| {
                Arc::new(PieceFailingFile { inner }) as Arc<dyn File>
            }))
        },
    );
    let pages: Vec<PageCopy> = (1..=5).map(|b| page(7, b, 100 + b as u64)).collect();
    s.files
        .get(7)
        .unwrap()
        .write_pages(0, &[page(7, 0, 1).bytes()], Issuer::Client)
        .unwrap();
    write(&s, &pages, Issuer::Client);
    let before = s.dw.durable_manifest();
    assert!(!s.dw.begin_checkpoint(false));
    let e =
        s.dw.persist_deferred(Lsn(150), Issuer::Checkpointer)
            .unwrap_err();
    // The failed wait consumed the file's writeback error: an fsync after
    // it could succeed and call unwritten slots durable, so none is run.
    assert!(e.is_fatal(), "{e}");
    assert_eq!(
        io_of_checkpointer(&s).2,
        0,
        "no fsync of dw/ after the piece"
    );
    assert_eq!(
        s.dw.durable_manifest(),
        before,
        "the manifest is not durable"
    );
}
