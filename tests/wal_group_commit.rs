//! Group commit under many threads, through a file system wrapper that
//! checks the writer's I/O rules:
//! - no write ever changes a byte below the flushed position (a torn
//!   rewrite must not be able to destroy an acknowledged commit);
//! - every acknowledged commit is in the durable image (file contents as of
//!   each file's last fsync, names as of the directory's last fsync), taken
//!   at random moments during the run.

use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use untorn::file::posix::PosixFileSystem;
use untorn::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use untorn::settings::MB;
use untorn::wal::segment::parse_segment_name;
use untorn::wal::{RecordData, RecordKind, Wal, WalConfig, WalReader};
use untorn::{Error, Lsn, Result};

#[derive(Default)]
struct Node {
    shadow: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Default)]
struct State {
    nodes: Vec<Node>,
    names: HashMap<PathBuf, usize>,
    durable_names: HashMap<PathBuf, usize>,
    violations: Vec<String>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wal: OnceLock<Weak<Wal>>,
    segment_size: u64,
    /// While true, fsyncs wait.
    gate_closed: Mutex<bool>,
    gate: Condvar,
    syncs_waiting: AtomicUsize,
    fail_syncs: AtomicBool,
}

impl Shared {
    fn flushed(&self) -> u64 {
        self.wal
            .get()
            .and_then(Weak::upgrade)
            .map_or(0, |w| w.flushed_lsn().0)
    }

    fn sync(&self, node: usize, path: &Path) -> Result<()> {
        if self.fail_syncs.load(Ordering::SeqCst) {
            let source = std::io::Error::from_raw_os_error(libc_eio());
            return Err(Error::FsyncFailed {
                path: path.into(),
                source,
            });
        }
        self.syncs_waiting.fetch_add(1, Ordering::SeqCst);
        let mut closed = self.gate_closed.lock();
        while *closed {
            self.gate.wait(&mut closed);
        }
        drop(closed);
        self.syncs_waiting.fetch_sub(1, Ordering::SeqCst);
        let mut st = self.state.lock();
        let n = &mut st.nodes[node];
        n.durable = n.shadow.clone();
        Ok(())
    }

    /// The files a crash now would leave: durable names, durable contents.
    fn crash_image(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let st = self.state.lock();
        st.durable_names
            .iter()
            .map(|(p, id)| (p.clone(), st.nodes[*id].durable.clone()))
            .collect()
    }
}

fn libc_eio() -> i32 {
    5
}

struct CheckingFs {
    inner: PosixFileSystem,
    shared: Arc<Shared>,
}

struct CheckingFile {
    inner: Arc<dyn File>,
    node: usize,
    segno: Option<u64>,
    shared: Arc<Shared>,
}

impl CheckingFile {
    fn check_and_record(&self, buf: &[u8], offset: u64) {
        let flushed = self.shared.flushed();
        let mut st = self.shared.state.lock();
        let shadow = &mut st.nodes[self.node].shadow;
        let end = offset as usize + buf.len();
        let mut bad = None;
        if let Some(seg) = self.segno {
            let base = seg * self.shared.segment_size;
            for (i, b) in buf.iter().enumerate() {
                let pos = offset as usize + i;
                if base + (pos as u64) < flushed && pos < shadow.len() && shadow[pos] != *b {
                    bad = Some(format!(
                        "segment {seg} offset {pos} changed below flushed LSN {}",
                        Lsn(flushed)
                    ));
                    break;
                }
            }
        }
        if shadow.len() < end {
            shadow.resize(end, 0);
        }
        shadow[offset as usize..end].copy_from_slice(buf);
        if let Some(v) = bad {
            st.violations.push(v);
        }
    }
}

impl File for CheckingFile {
    untorn::forward_file_methods!(inner: path, kind, read_at, writeback_hint, allocate, set_len, len, try_lock);

    fn write_at(&self, buf: &[u8], offset: u64, who: Issuer) -> Result<()> {
        self.check_and_record(buf, offset);
        self.inner.write_at(buf, offset, who)
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()> {
        self.check_and_record(&bufs.concat(), offset);
        self.inner.write_vectored_at(bufs, offset, who)
    }
    fn sync_all(&self, who: Issuer) -> Result<()> {
        self.inner.sync_all(who)?;
        self.shared.sync(self.node, self.path())
    }
    fn sync_data(&self, who: Issuer) -> Result<()> {
        self.inner.sync_data(who)?;
        self.shared.sync(self.node, self.path())
    }
}

impl FileSystem for CheckingFs {
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>> {
        let inner = self.inner.open(path, kind, opts)?;
        let mut st = self.shared.state.lock();
        let node = match st.names.get(path) {
            Some(n) => *n,
            None => {
                st.nodes.push(Node::default());
                let n = st.nodes.len() - 1;
                st.names.insert(path.to_path_buf(), n);
                n
            }
        };
        let segno = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_segment_name);
        Ok(Arc::new(CheckingFile {
            inner,
            node,
            segno,
            shared: self.shared.clone(),
        }))
    }
    fn rename(&self, from: &Path, to: &Path, kind: FileKind, who: Issuer) -> Result<()> {
        self.inner.rename(from, to, kind, who)?;
        let mut st = self.shared.state.lock();
        if let Some(n) = st.names.remove(from) {
            st.names.insert(to.to_path_buf(), n);
        }
        Ok(())
    }
    fn remove(&self, path: &Path, kind: FileKind, who: Issuer) -> Result<()> {
        self.inner.remove(path, kind, who)?;
        self.shared.state.lock().names.remove(path);
        Ok(())
    }
    fn sync_dir(&self, dir: &Path, who: Issuer) -> Result<()> {
        self.inner.sync_dir(dir, who)?;
        let mut st = self.shared.state.lock();
        st.durable_names = st.names.clone();
        Ok(())
    }
    untorn::forward_file_system_methods!(inner: create_dir_all, exists, list_dir, sector_size, atomic_writes);
}

fn cfg(block_size: u32) -> WalConfig {
    WalConfig {
        block_size,
        segment_size: MB,
        system_id: 5,
        epoch: 1,
        sector_size: 512,
    }
}

fn setup(block_size: u32) -> (tempfile::TempDir, Arc<Shared>, Arc<Wal>) {
    let dir = tempfile::tempdir().unwrap();
    let shared = Arc::new(Shared {
        segment_size: MB,
        ..Default::default()
    });
    let fs = Arc::new(CheckingFs {
        inner: PosixFileSystem::default(),
        shared: shared.clone(),
    });
    let wal = Arc::new(Wal::create(fs, dir.path(), cfg(block_size)).unwrap());
    shared.wal.set(Arc::downgrade(&wal)).unwrap();
    (dir, shared, wal)
}

/// Thread `t`'s commit `j`: its xid and main data (sizes vary; some cross
/// pages).
fn commit(t: u64, j: u64) -> RecordData {
    let size = match j % 10 {
        0 => 20_000,
        1 | 2 => 3_000,
        _ => (j * 37 % 300) as usize,
    };
    RecordData::with_main(
        RecordKind::Commit,
        t * 1_000_000 + j,
        vec![(t ^ j) as u8; size],
    )
}

/// Reads every record of a directory: xid to (LSN, record).
fn read_all(dir: &Path, block_size: u32) -> HashMap<u64, (Lsn, RecordData)> {
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::default());
    let mut r = WalReader::new(fs, dir, &cfg(block_size), Lsn(0)).unwrap();
    let recs = r.read_to_end().unwrap();
    recs.into_iter()
        .map(|r| (r.data.xid, (r.lsn, r.data)))
        .collect()
}

#[test]
fn many_threads_commit_and_every_acknowledged_commit_is_durable() {
    const THREADS: u64 = 12;
    const COMMITS: u64 = 150;
    let bs = 4096;
    let (dir, shared, wal) = setup(bs);
    let acks: Arc<Mutex<Vec<(u64, Lsn)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let snapshotter = {
        let (shared, acks, done) = (shared.clone(), acks.clone(), done.clone());
        std::thread::spawn(move || {
            let mut images = Vec::new();
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(15));
                // Acknowledged first: each of these was durable before.
                let acked = acks.lock().clone();
                images.push((acked, shared.crash_image()));
            }
            images
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (wal, acks) = (wal.clone(), acks.clone());
            std::thread::spawn(move || {
                for j in 0..COMMITS {
                    let rec = commit(t, j);
                    let (lsn, end) = wal.insert(&rec).unwrap();
                    wal.flush(end, Issuer::Client).unwrap();
                    assert!(wal.flushed_lsn() >= end);
                    acks.lock().push((rec.xid, lsn));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let images = snapshotter.join().unwrap();

    let violations = shared.state.lock().violations.clone();
    assert!(violations.is_empty(), "{violations:?}");
    let stats = wal.stats();
    let n = THREADS * COMMITS;
    assert_eq!((stats.records, stats.flush_requests), (n, n));
    assert_eq!(stats.flush_rounds + stats.flushes_without_io, n);
    assert!(stats.fsyncs <= stats.flush_requests);
    assert!(wal.flushed_lsn().0 > 2 * MB, "crossed segments");
    eprintln!(
        "commits per fsync: {:.2} ({stats:?})",
        stats.commits_per_fsync()
    );

    // Everything reads back, each thread's commits in order.
    let all = read_all(dir.path(), bs);
    assert_eq!(all.len() as u64, n);
    for t in 0..THREADS {
        let lsns: Vec<Lsn> = (0..COMMITS).map(|j| all[&(t * 1_000_000 + j)].0).collect();
        assert!(lsns.windows(2).all(|w| w[0] < w[1]));
        for j in 0..COMMITS {
            assert_eq!(all[&(t * 1_000_000 + j)].1, commit(t, j));
        }
    }

    // Every crash image holds every commit acknowledged before it.
    assert!(!images.is_empty());
    for (acked, files) in images {
        let crash = tempfile::tempdir().unwrap();
        for (path, bytes) in files {
            std::fs::write(crash.path().join(path.file_name().unwrap()), bytes).unwrap();
        }
        let found = read_all(crash.path(), bs);
        for (xid, lsn) in acked {
            let got = found.get(&xid).map(|f| f.0);
            assert_eq!(got, Some(lsn), "acknowledged commit {xid} lost");
        }
    }
}

#[test]
fn insert_does_not_wait_for_a_flush_in_progress() {
    let (_dir, shared, wal) = setup(8192);
    let (_, end) = wal.insert(&commit(0, 5)).unwrap();
    *shared.gate_closed.lock() = true;
    let leader = {
        let wal = wal.clone();
        std::thread::spawn(move || wal.flush(end, Issuer::Client))
    };
    while shared.syncs_waiting.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    // The leader sits in its fdatasync. A follower for the same LSN waits;
    // inserts go on.
    let follower = {
        let wal = wal.clone();
        std::thread::spawn(move || wal.flush(end, Issuer::Client))
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let inserter = {
        let wal = wal.clone();
        std::thread::spawn(move || {
            let mut last = Lsn(0);
            for j in 0..200 {
                last = wal.insert(&commit(1, j)).unwrap().1;
            }
            tx.send(last).unwrap();
        })
    };
    let last = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("inserts blocked by a flush");
    assert_eq!(wal.flushed_lsn(), Lsn(0));
    *shared.gate_closed.lock() = false;
    shared.gate.notify_all();
    leader.join().unwrap().unwrap();
    follower.join().unwrap().unwrap();
    inserter.join().unwrap();
    assert!(wal.flushed_lsn() >= end);
    wal.flush(last, Issuer::Client).unwrap();
    let stats = wal.stats();
    assert_eq!(stats.flush_requests, 3);
    assert_eq!(stats.flushes_without_io, 1, "the follower did no I/O");
    assert!(shared.state.lock().violations.is_empty());
}

/// Records are copied in outside the reservation lock: a flush whose
/// target lies past a long record still being copied must wait for the
/// copy, or it writes the record's unfilled bytes and never again.
#[test]
fn a_flush_waits_for_the_copies_below_its_target() {
    const SMALL_THREADS: u64 = 3;
    const BIGS: u64 = 64;
    let (dir, shared, wal) = setup(8192);
    let copying = Arc::new(AtomicBool::new(true));
    let big = |j: u64| RecordData::with_main(RecordKind::Commit, j, vec![j as u8 | 1; 512 * 1024]);
    let copier = {
        let (wal, copying) = (wal.clone(), copying.clone());
        std::thread::spawn(move || {
            for j in 1..=BIGS {
                // As every commit does: memory stays bounded.
                wal.make_room().unwrap();
                wal.insert(&big(j)).unwrap();
            }
            copying.store(false, Ordering::SeqCst);
        })
    };
    // Small commits flush while the big ones copy in: many rounds'
    // targets lie past a copy in progress.
    let smalls: Vec<_> = (1..=SMALL_THREADS)
        .map(|t| {
            let (wal, copying) = (wal.clone(), copying.clone());
            std::thread::spawn(move || {
                let mut j = 0;
                while copying.load(Ordering::SeqCst) {
                    let (_, end) = wal.insert(&commit(t, j)).unwrap();
                    wal.flush(end, Issuer::Client).unwrap();
                    j += 1;
                }
                j
            })
        })
        .collect();
    let smalls: Vec<u64> = smalls.into_iter().map(|s| s.join().unwrap()).collect();
    copier.join().unwrap();
    wal.flush(wal.insert_lsn(), Issuer::Client).unwrap();
    assert!(shared.state.lock().violations.is_empty());
    let all = read_all(dir.path(), 8192);
    for j in 1..=BIGS {
        assert_eq!(all.get(&j).map(|r| &r.1), Some(&big(j)), "big record {j}");
    }
    for (t, n) in (1..).zip(smalls) {
        for j in 0..n {
            let xid = t * 1_000_000 + j;
            assert_eq!(all.get(&xid).map(|r| &r.1), Some(&commit(t, j)));
        }
    }
}

#[test]
fn a_failed_fsync_makes_every_later_flush_fail() {
    let (_dir, shared, wal) = setup(8192);
    let (_, a) = wal.insert(&commit(0, 3)).unwrap();
    wal.flush(a, Issuer::Client).unwrap();
    let (_, b) = wal.insert(&commit(0, 4)).unwrap();
    shared.fail_syncs.store(true, Ordering::SeqCst);
    let e = wal.flush(b, Issuer::Client).unwrap_err();
    assert!(e.is_fatal(), "{e}");
    shared.fail_syncs.store(false, Ordering::SeqCst);
    assert!(wal.flush(b, Issuer::Client).unwrap_err().is_fatal());
    // Even a flush already covered fails: the process must stop.
    assert!(wal.flush(a, Issuer::Client).unwrap_err().is_fatal());
    // The first flush's end, padded to its sector; nothing after it.
    assert_eq!(wal.flushed_lsn(), Lsn(a.0.next_multiple_of(512)));
    assert!(wal.flushed_lsn() < b);
}

#[test]
fn a_page_writes_flush_is_counted_apart_and_with_the_commits() {
    let (_dir, _shared, wal) = setup(8192);
    let (_, a) = wal.insert(&commit(0, 3)).unwrap();
    // A page write whose LSN is past the durable end leads a round.
    wal.flush_for_page_write(a, Issuer::BackgroundWriter)
        .unwrap();
    // Covered already: a request, no round.
    wal.flush_for_page_write(a, Issuer::Client).unwrap();
    let (_, b) = wal.insert(&commit(0, 4)).unwrap();
    wal.flush(b, Issuer::Client).unwrap();
    let s = wal.stats();
    assert_eq!(s.page_write_flush_requests, 2);
    assert_eq!(s.page_write_flush_rounds, 1);
    // Every request counts in the totals, which the commits' ratio uses.
    assert_eq!(s.flush_requests, 3);
    assert_eq!(s.flush_rounds, 2);
    assert_eq!(s.flushes_without_io, 1);
}
