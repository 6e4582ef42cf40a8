use super::*;
use crate::file::posix::PosixFileSystem;
use crate::file::segmented::SegmentedFile;
use crate::file::{File, FileKind, FileSystem, OpenOptions};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};

/// The file layer, with every write and fsync of a data file noted in order.
#[derive(Default)]
struct Noting {
    inner: PosixFileSystem,
    events: Arc<Mutex<Vec<(PathBuf, &'static str)>>>,
}

struct NotingFile {
    inner: Arc<dyn File>,
    events: Arc<Mutex<Vec<(PathBuf, &'static str)>>>,
}

impl NotingFile {
    fn note(&self, what: &'static str) {
        self.events
            .lock()
            .push((self.inner.path().to_path_buf(), what));
    }
}

impl File for NotingFile {
    crate::forward_file_methods!(inner: path, kind, read_at, sync_all, writeback_hint,
        allocate, set_len, len, try_lock);
    fn write_at(&self, buf: &[u8], offset: u64, who: Issuer) -> Result<()> {
        self.note("write");
        self.inner.write_at(buf, offset, who)
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()> {
        self.note("write");
        self.inner.write_vectored_at(bufs, offset, who)
    }
    fn sync_data(&self, who: Issuer) -> Result<()> {
        self.note("fsync");
        self.inner.sync_data(who)
    }
}

impl FileSystem for Noting {
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>> {
        let inner = self.inner.open(path, kind, opts)?;
        Ok(Arc::new(NotingFile {
            inner,
            events: self.events.clone(),
        }))
    }
    crate::forward_file_system_methods!(inner: rename, remove, sync_dir, create_dir_all,
        exists, list_dir, sector_size);
}

const PAGE: usize = 4096;

fn files(
    fs: Arc<dyn FileSystem>,
    dir: &Path,
    n: u32,
    limit: &Arc<OpenFileLimit>,
) -> Vec<Arc<SegmentedFile>> {
    // Two pages a segment: a file of three pages has two segments.
    (0..n)
        .map(|id| {
            SegmentedFile::new(
                fs.clone(),
                dir,
                id,
                PAGE,
                2,
                Default::default(),
                limit.clone(),
            )
        })
        .collect()
}

fn page(file: u32, block: u64) -> Vec<u8> {
    let mut p = vec![0u8; PAGE];
    p[..4].copy_from_slice(&file.to_le_bytes());
    p[4..12].copy_from_slice(&block.to_le_bytes());
    p
}

/// Forty files of two segments each under a bound of eight: every page
/// reads back, the bound holds between calls, and segments were closed
/// and opened again to keep it.
#[test]
fn more_segments_than_the_bound_stay_readable_with_at_most_the_bound_open() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let limit = OpenFileLimit::new(MIN_OPEN_DATA_FILES);
    let all = files(fs, dir.path(), 40, &limit);
    for f in &all {
        for block in 0..3 {
            f.write_pages(block, &[&page(f.file_id(), block)], Issuer::Client)
                .unwrap();
            assert!(
                limit.open_now() <= limit.limit(),
                "{} open",
                limit.open_now()
            );
        }
    }
    let mut buf = vec![0u8; PAGE];
    for round in 0..2 {
        for f in &all {
            for block in 0..3 {
                f.read_page(block, &mut buf, Issuer::Client).unwrap();
                assert_eq!(buf, page(f.file_id(), block), "round {round}");
                assert!(limit.open_now() <= limit.limit());
            }
            assert_eq!(f.nblocks().unwrap(), 3);
        }
    }
    assert!(
        limit.closed_for_limit() >= 80,
        "{}",
        limit.closed_for_limit()
    );
    drop(all);
    assert_eq!(
        limit.open_now(),
        0,
        "dropped files give their segments back"
    );
}

/// A data file's fsync reaches only its open segments, so a segment
/// written since its last fsync is fsynced before it closes: after each
/// file's own fsync, no path's last write lies after its last fsync.
/// Without the fsync at closing, the files closed early would keep their
/// writes out of every fsync.
#[test]
fn a_segment_written_since_its_last_fsync_is_fsynced_before_it_closes() {
    let dir = tempfile::tempdir().unwrap();
    let noting = Arc::new(Noting::default());
    let events = noting.events.clone();
    let fs: Arc<dyn FileSystem> = noting;
    let limit = OpenFileLimit::new(MIN_OPEN_DATA_FILES);
    let all = files(fs, dir.path(), 30, &limit);
    for f in &all {
        f.write_pages(0, &[&page(f.file_id(), 0)], Issuer::Client)
            .unwrap();
    }
    for f in &all {
        f.sync(Issuer::Checkpointer).unwrap();
    }
    let events = events.lock();
    let mut last: std::collections::HashMap<&PathBuf, (usize, usize)> = Default::default();
    for (i, (path, what)) in events.iter().enumerate() {
        let e = last.entry(path).or_default();
        match *what {
            "write" => e.0 = i + 1,
            _ => e.1 = i + 1,
        }
    }
    assert_eq!(last.len(), 30);
    for (path, (write, fsync)) in last {
        assert!(
            fsync > write,
            "{} written after its last fsync",
            path.display()
        );
    }
    assert!(limit.closed_for_limit() > 0);
}

/// A segment in use is never closed under it: the segment a call holds
/// is skipped, and the bound is exceeded by it for the moment instead.
#[test]
fn a_segment_in_use_is_not_closed() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let limit = OpenFileLimit::new(MIN_OPEN_DATA_FILES);
    let all = files(fs, dir.path(), 1, &limit);
    let f = &all[0];
    f.write_pages(0, &[&page(0, 0)], Issuer::Client).unwrap();
    let held = f.segment(0, false).unwrap().unwrap();
    assert!(!f.close_if_idle(0, Issuer::Client).unwrap());
    drop(held);
    assert!(f.close_if_idle(0, Issuer::Client).unwrap());
    assert_eq!(limit.open_now(), 0);
    let mut buf = vec![0u8; PAGE];
    f.read_page(0, &mut buf, Issuer::Client).unwrap();
    assert_eq!(buf, page(0, 0));
    assert_eq!(limit.open_now(), 1);
}

#[test]
fn a_limit_that_leaves_too_few_descriptors_is_refused_by_name() {
    let free = descriptors_free().expect("Linux counts its descriptors");
    let e = data_file_budget(1000, free).unwrap_err();
    assert!(e.to_string().contains("max_files_per_process"), "{e}");
    assert!(e.to_string().contains("ulimit -n"), "{e}");
    assert_eq!(
        data_file_budget(10, 0).unwrap(),
        10.min(free).max(MIN_OPEN_DATA_FILES)
    );
}
