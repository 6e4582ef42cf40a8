//! A power loss on real files, for tests that SIGKILL a real process.
//!
//! A killed process leaves its unsynced writes in the OS page cache; a
//! power loss would then take them away. `UndoFs` wraps the real file
//! layer and, before every write or length change, appends the bytes it
//! replaces to an undo journal; after every fsync it appends a marker for
//! the file. [`power_loss`] later puts back, newest first, every change not
//! followed by its file's fsync marker: the files as a power loss that
//! kept nothing unsynced would leave them.
//!
//! A kill between a journal entry and its write leaves an entry whose old
//! bytes are still there (putting them back changes nothing); a kill
//! between an fsync and its marker undoes writes that were durable, but
//! nothing relied on them yet (the marker precedes the fsync's return).
//! A kill during an entry's append (a write of many pages stops at a fatal
//! signal) cuts it short; the next `UndoFs` on the journal drops it before
//! appending its own.
//! Directory operations are not undone: the engine fsyncs a new file and
//! its directory before it relies on the name.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use untorn::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use untorn::Result;

const WRITE: u8 = 0;
const SYNC: u8 = 1;

struct Journal {
    out: Mutex<std::fs::File>,
    /// The power is cut after this many calls, if set.
    cut_after: Option<u64>,
    calls: AtomicU64,
}

impl Journal {
    fn append(&self, kind: u8, path: &Path, offset: u64, old_len: u64, old: &[u8]) {
        let p = path.to_str().expect("utf-8 path").as_bytes();
        let mut e = vec![kind];
        e.extend_from_slice(&(p.len() as u32).to_le_bytes());
        e.extend_from_slice(p);
        e.extend_from_slice(&offset.to_le_bytes());
        e.extend_from_slice(&old_len.to_le_bytes());
        e.extend_from_slice(&(old.len() as u32).to_le_bytes());
        e.extend_from_slice(old);
        self.out
            .lock()
            .unwrap()
            .write_all(&e)
            .expect("undo journal");
    }

    /// Fails every call once the power is cut.
    fn power(&self, path: &Path) -> Result<()> {
        let n = self.calls.fetch_add(1, SeqCst);
        match self.cut_after {
            Some(cut) if n >= cut => Err(untorn::Error::io(
                path,
                "power cut",
                std::io::Error::from_raw_os_error(libc::EIO),
            )),
            _ => Ok(()),
        }
    }
}

/// The real file layer, journaling what a power loss would undo.
pub struct UndoFs {
    inner: Arc<dyn FileSystem>,
    journal: Arc<Journal>,
}

impl UndoFs {
    /// Journals into `journal` (appended to). With `cut_after`, every call
    /// after that many fails, as if the power were cut.
    pub fn new(journal: &Path, cut_after: Option<u64>) -> UndoFs {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(journal)
            .expect("undo journal");
        // A process killed while appending an entry (a write of many pages
        // stops at a fatal signal) leaves it cut short. Appended after, our
        // entries would be read as its missing bytes, and a power loss
        // would put those bytes into its file: drop it first. Its write
        // never happened (the entry precedes the write).
        let (_, complete) = read_entries(journal);
        if out.metadata().expect("undo journal").len() > complete {
            out.set_len(complete).expect("undo journal");
        }
        UndoFs {
            inner: Arc::new(untorn::file::posix::PosixFileSystem::default()),
            journal: Arc::new(Journal {
                out: Mutex::new(out),
                cut_after,
                calls: AtomicU64::new(0),
            }),
        }
    }
}

struct UndoFile {
    inner: Arc<dyn File>,
    journal: Arc<Journal>,
}

impl UndoFile {
    /// Journals the bytes `[offset, offset + len)` hold now, and the length.
    fn save(&self, offset: u64, len: u64) -> Result<()> {
        self.journal.power(self.path())?;
        let old_len = self.inner.len()?;
        let end = (offset + len).min(old_len);
        let mut old = vec![0u8; end.saturating_sub(offset) as usize];
        if !old.is_empty() {
            self.inner.read_exact_at(&mut old, offset, Issuer::Tool)?;
        }
        self.journal
            .append(WRITE, self.path(), offset, old_len, &old);
        Ok(())
    }

    fn synced(&self, res: Result<()>) -> Result<()> {
        if res.is_ok() {
            self.journal.append(SYNC, self.path(), 0, 0, &[]);
        }
        res
    }
}

impl File for UndoFile {
    untorn::forward_file_methods!(inner: path, kind, read_at, writeback_hint, len, try_lock);

    fn write_at(&self, buf: &[u8], offset: u64, who: Issuer) -> Result<()> {
        self.save(offset, buf.len() as u64)?;
        self.inner.write_at(buf, offset, who)
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        self.save(offset, len as u64)?;
        self.inner.write_vectored_at(bufs, offset, who)
    }

    fn allocate(&self, offset: u64, len: u64, who: Issuer) -> Result<()> {
        self.save(offset, 0)?;
        self.inner.allocate(offset, len, who)
    }

    fn set_len(&self, len: u64, who: Issuer) -> Result<()> {
        let old_len = self.inner.len()?;
        self.save(len.min(old_len), old_len.saturating_sub(len))?;
        self.inner.set_len(len, who)
    }

    fn sync_all(&self, who: Issuer) -> Result<()> {
        self.journal.power(self.path())?;
        self.synced(self.inner.sync_all(who))
    }

    fn sync_data(&self, who: Issuer) -> Result<()> {
        self.journal.power(self.path())?;
        self.synced(self.inner.sync_data(who))
    }
}

impl FileSystem for UndoFs {
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>> {
        self.journal.power(path)?;
        Ok(Arc::new(UndoFile {
            inner: self.inner.open(path, kind, opts)?,
            journal: self.journal.clone(),
        }))
    }
    fn rename(&self, from: &Path, to: &Path, kind: FileKind, who: Issuer) -> Result<()> {
        self.journal.power(from)?;
        self.inner.rename(from, to, kind, who)
    }
    fn remove(&self, path: &Path, kind: FileKind, who: Issuer) -> Result<()> {
        self.journal.power(path)?;
        self.inner.remove(path, kind, who)
    }
    fn sync_dir(&self, dir: &Path, who: Issuer) -> Result<()> {
        self.journal.power(dir)?;
        self.inner.sync_dir(dir, who)
    }
    untorn::forward_file_system_methods!(inner: create_dir_all, exists, list_dir, sector_size, atomic_writes);
}

struct Entry {
    kind: u8,
    path: PathBuf,
    offset: u64,
    old_len: u64,
    old: Vec<u8>,
}

/// The journal's complete entries, and the bytes they take.
fn read_entries(journal: &Path) -> (Vec<Entry>, u64) {
    let mut bytes = Vec::new();
    if let Ok(mut f) = std::fs::File::open(journal) {
        f.read_to_end(&mut bytes).expect("undo journal");
    }
    let mut out = Vec::new();
    let mut at = 0usize;
    let take = |n: usize, at: &mut usize| -> Option<Vec<u8>> {
        let v = bytes.get(*at..*at + n)?.to_vec();
        *at += n;
        Some(v)
    };
    let u32_of = |v: Vec<u8>| u32::from_le_bytes(v.try_into().unwrap()) as usize;
    let u64_of = |v: Vec<u8>| u64::from_le_bytes(v.try_into().unwrap());
    let mut complete = 0;
    // A kill can cut the last entry short: it ends the journal.
    while let Some(kind) = take(1, &mut at) {
        let Some(plen) = take(4, &mut at).map(u32_of) else {
            break;
        };
        let Some(path) = take(plen, &mut at) else {
            break;
        };
        let Some(offset) = take(8, &mut at).map(u64_of) else {
            break;
        };
        let Some(old_len) = take(8, &mut at).map(u64_of) else {
            break;
        };
        let Some(n) = take(4, &mut at).map(u32_of) else {
            break;
        };
        let Some(old) = take(n, &mut at) else { break };
        out.push(Entry {
            kind: kind[0],
            path: PathBuf::from(String::from_utf8(path).unwrap()),
            offset,
            old_len,
            old,
        });
        complete = at as u64;
    }
    (out, complete)
}

/// Cuts the power: undoes, newest first, every journaled change that its
/// file's fsync did not follow, then empties the journal. Returns how
/// many changes were undone.
pub fn power_loss(journal: &Path) -> usize {
    let (entries, _) = read_entries(journal);
    let mut synced_after: std::collections::HashSet<PathBuf> = Default::default();
    let mut undone = 0;
    for e in entries.iter().rev() {
        if e.kind == SYNC {
            synced_after.insert(e.path.clone());
            continue;
        }
        if synced_after.contains(&e.path) {
            continue;
        }
        // A file removed since is gone whatever its bytes were.
        let Ok(f) = std::fs::OpenOptions::new().write(true).open(&e.path) else {
            continue;
        };
        use std::os::unix::fs::FileExt;
        f.write_all_at(&e.old, e.offset).expect("undo");
        if f.metadata().unwrap().len() > e.old_len {
            f.set_len(e.old_len).expect("undo");
        }
        undone += 1;
    }
    std::fs::write(journal, b"").expect("undo journal");
    undone
}
