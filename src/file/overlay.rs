//! A view of a directory tree in which every change stays in memory.
//!
//! `untorn check` opens a database through it: recovery, the end-of-recovery
//! checkpoint and the shutdown checkpoint write as usual, but into memory,
//! so a check finds what an opening would find and leaves every byte on
//! disk as it was (a crashed database stays crashed, its control file
//! unchanged). Reads see the changes made through the view over the files
//! underneath, which are only ever opened read-only.
//!
//! Changes are kept per 4 KB block of a file, so the memory used is what
//! the opening wrote, not the size of the files. The directory's lock file
//! is the one exception: it is opened on the file system underneath, so a
//! check still holds the directory against a concurrent opening.

use super::{File, FileKind, FileSystem, Issuer, LockMode, OpenOptions};
use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The unit in which changed bytes are kept.
const BLOCK: u64 = 4096;

/// A file system that reads through to `base` and keeps every change in
/// memory.
pub struct OverlayFileSystem {
    base: Arc<dyn FileSystem>,
    state: Mutex<Overlay>,
}

/// What the view changed: files written, created or renamed (by path),
/// paths removed from underneath, directories created.
#[derive(Default)]
struct Overlay {
    files: HashMap<PathBuf, Arc<Node>>,
    /// Paths whose file underneath is hidden (removed, or renamed away).
    hidden: BTreeSet<PathBuf>,
    dirs: BTreeSet<PathBuf>,
}

/// One file as the view sees it: the file underneath it was opened from
/// (none for a file the view created) and the blocks written over it.
struct Node {
    base: Option<Arc<dyn File>>,
    kind: FileKind,
    contents: Mutex<Contents>,
}

struct Contents {
    len: u64,
    /// Bytes of the file underneath still visible: a shortening hides the
    /// rest for good, so a later extension reads zeros there.
    base_visible: u64,
    blocks: BTreeMap<u64, Box<[u8]>>,
}

fn not_found(path: &Path, op: &'static str) -> Error {
    Error::io(path, op, std::io::Error::from_raw_os_error(libc::ENOENT))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl OverlayFileSystem {
    pub fn new(base: Arc<dyn FileSystem>) -> OverlayFileSystem {
        OverlayFileSystem {
            base,
            state: Mutex::new(Overlay::default()),
        }
    }

    /// Bytes held in memory for changed blocks (what a check costs).
    pub fn bytes_held(&self) -> u64 {
        let state = lock(&self.state);
        state
            .files
            .values()
            .map(|n| lock(&n.contents).blocks.len() as u64 * BLOCK)
            .sum()
    }

    /// The node for `path`, opening the file underneath if the view has
    /// not touched it yet. None if neither has it.
    fn node(&self, state: &mut Overlay, path: &Path, kind: FileKind) -> Result<Option<Arc<Node>>> {
        if let Some(n) = state.files.get(path) {
            return Ok(Some(n.clone()));
        }
        if state.hidden.contains(path) || !self.base.exists(path) {
            return Ok(None);
        }
        let base = self.base.open(path, kind, OpenOptions::read_only())?;
        let len = base.len()?;
        let node = Arc::new(Node {
            base: Some(base),
            kind,
            contents: Mutex::new(Contents {
                len,
                base_visible: len,
                blocks: BTreeMap::new(),
            }),
        });
        state.files.insert(path.to_path_buf(), node.clone());
        Ok(Some(node))
    }
}

impl FileSystem for OverlayFileSystem {
    fn open(&self, path: &Path, kind: FileKind, opts: OpenOptions) -> Result<Arc<dyn File>> {
        if kind == FileKind::Lock {
            return self.base.open(path, kind, opts);
        }
        let mut state = lock(&self.state);
        let node = match self.node(&mut state, path, kind)? {
            Some(_) if opts.create_new => {
                return Err(Error::io(
                    path,
                    "open",
                    std::io::Error::from_raw_os_error(libc::EEXIST),
                ))
            }
            Some(n) => n,
            None if opts.create => {
                let n = Arc::new(Node {
                    base: None,
                    kind,
                    contents: Mutex::new(Contents {
                        len: 0,
                        base_visible: 0,
                        blocks: BTreeMap::new(),
                    }),
                });
                state.files.insert(path.to_path_buf(), n.clone());
                n
            }
            None => return Err(not_found(path, "open")),
        };
        Ok(Arc::new(OverlayFile {
            path: path.to_path_buf(),
            node,
        }))
    }

    fn rename(&self, from: &Path, to: &Path, kind: FileKind, _who: Issuer) -> Result<()> {
        let mut state = lock(&self.state);
        let node = self
            .node(&mut state, from, kind)?
            .ok_or_else(|| not_found(from, "rename"))?;
        state.files.remove(from);
        state.hidden.insert(from.to_path_buf());
        // The target's file underneath, if any, is replaced.
        state.hidden.insert(to.to_path_buf());
        state.files.insert(to.to_path_buf(), node);
        Ok(())
    }

    fn remove(&self, path: &Path, kind: FileKind, _who: Issuer) -> Result<()> {
        let mut state = lock(&self.state);
        if self.node(&mut state, path, kind)?.is_none() {
            return Err(not_found(path, "unlink"));
        }
        state.files.remove(path);
        state.hidden.insert(path.to_path_buf());
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path, _who: Issuer) -> Result<()> {
        Ok(())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut state = lock(&self.state);
        for d in dir.ancestors() {
            if d.as_os_str().is_empty() || self.base.exists(d) {
                break;
            }
            state.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let state = lock(&self.state);
        state.files.contains_key(path)
            || state.dirs.contains(path)
            || (!state.hidden.contains(path) && self.base.exists(path))
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let state = lock(&self.state);
        let mut out: BTreeSet<PathBuf> = if state.dirs.contains(dir) {
            BTreeSet::new()
        } else {
            self.base.list_dir(dir)?.into_iter().collect()
        };
        out.retain(|p| !state.hidden.contains(p));
        let children = state.files.keys().chain(state.dirs.iter());
        out.extend(children.filter(|p| p.parent() == Some(dir)).cloned());
        Ok(out.into_iter().collect())
    }

    fn sector_size(&self, path: &Path) -> Option<u32> {
        self.base.sector_size(path)
    }

    fn atomic_writes(&self, path: &Path) -> Result<crate::file::atomic::AtomicWrites> {
        // A file made through the view lives in memory, where every write
        // is whole (and `untorn check` never switches modes): say so, as
        // statx would for a device of that unit. Files underneath answer
        // for themselves.
        if lock(&self.state).files.contains_key(path) && !self.base.exists(path) {
            return Ok(crate::file::atomic::AtomicWrites {
                reported: true,
                unit_min: 512,
                unit_max: 1 << 20,
                segments_max: 1,
                unit_max_opt: 1 << 20,
                ..Default::default()
            });
        }
        self.base.atomic_writes(path)
    }
}

/// An open file of the view.
struct OverlayFile {
    path: PathBuf,
    node: Arc<Node>,
}

impl Contents {
    /// The bytes underneath for `[offset, offset + buf.len())`, zeros past
    /// what is still visible.
    fn read_base(&self, base: Option<&Arc<dyn File>>, buf: &mut [u8], offset: u64) -> Result<()> {
        buf.fill(0);
        let Some(base) = base else { return Ok(()) };
        if offset >= self.base_visible {
            return Ok(());
        }
        let n = (self.base_visible - offset).min(buf.len() as u64) as usize;
        let mut done = 0;
        while done < n {
            let got = base.read_at(&mut buf[done..n], offset + done as u64, Issuer::Tool)?;
            if got == 0 {
                break;
            }
            done += got;
        }
        Ok(())
    }

    /// The block at index `b`, copied from underneath on first write.
    fn block_mut(&mut self, base: Option<&Arc<dyn File>>, b: u64) -> Result<&mut [u8]> {
        if !self.blocks.contains_key(&b) {
            let mut data = vec![0u8; BLOCK as usize];
            // Only bytes inside the file count; the rest reads as zeros.
            let inside = self.len.saturating_sub(b * BLOCK).min(BLOCK) as usize;
            self.read_base(base, &mut data[..inside], b * BLOCK)?;
            self.blocks.insert(b, data.into_boxed_slice());
        }
        Ok(self.blocks.get_mut(&b).expect("inserted above"))
    }
}

impl File for OverlayFile {
    fn path(&self) -> &Path {
        &self.path
    }

    fn kind(&self) -> FileKind {
        self.node.kind
    }

    fn read_at(&self, buf: &mut [u8], offset: u64, _who: Issuer) -> Result<usize> {
        let c = lock(&self.node.contents);
        if offset >= c.len {
            return Ok(0);
        }
        let n = (c.len - offset).min(buf.len() as u64) as usize;
        let buf = &mut buf[..n];
        c.read_base(self.node.base.as_ref(), buf, offset)?;
        let end = offset + n as u64;
        for (&b, data) in c.blocks.range(offset / BLOCK..end.div_ceil(BLOCK)) {
            let (start, stop) = ((b * BLOCK).max(offset), ((b + 1) * BLOCK).min(end));
            let from = (start - b * BLOCK) as usize..(stop - b * BLOCK) as usize;
            buf[(start - offset) as usize..(stop - offset) as usize].copy_from_slice(&data[from]);
        }
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64, _who: Issuer) -> Result<()> {
        let mut c = lock(&self.node.contents);
        let end = offset + buf.len() as u64;
        c.len = c.len.max(end);
        let mut at = offset;
        while at < end {
            let b = at / BLOCK;
            let stop = ((b + 1) * BLOCK).min(end);
            let block = c.block_mut(self.node.base.as_ref(), b)?;
            block[(at - b * BLOCK) as usize..(stop - b * BLOCK) as usize]
                .copy_from_slice(&buf[(at - offset) as usize..(stop - offset) as usize]);
            at = stop;
        }
        Ok(())
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64, who: Issuer) -> Result<()> {
        let mut at = offset;
        for b in bufs {
            self.write_at(b, at, who)?;
            at += b.len() as u64;
        }
        Ok(())
    }

    fn sync_all(&self, _who: Issuer) -> Result<()> {
        Ok(())
    }

    fn sync_data(&self, _who: Issuer) -> Result<()> {
        Ok(())
    }

    fn writeback_hint(&self, _offset: u64, _len: u64, _who: Issuer) -> Result<()> {
        Ok(())
    }

    fn allocate(&self, offset: u64, len: u64, _who: Issuer) -> Result<()> {
        let mut c = lock(&self.node.contents);
        c.len = c.len.max(offset + len);
        Ok(())
    }

    fn set_len(&self, len: u64, _who: Issuer) -> Result<()> {
        let mut c = lock(&self.node.contents);
        if len < c.len {
            c.base_visible = c.base_visible.min(len);
            let first_gone = len.div_ceil(BLOCK);
            c.blocks.split_off(&first_gone);
            if let Some(last) = c.blocks.get_mut(&(len / BLOCK)) {
                last[(len % BLOCK) as usize..].fill(0);
            }
        }
        c.len = len;
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(lock(&self.node.contents).len)
    }

    fn try_lock(&self, _mode: LockMode) -> Result<bool> {
        // Nobody else sees the view's files.
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::posix::PosixFileSystem;
    use crate::file::IoStats;

    fn overlay(dir: &Path) -> OverlayFileSystem {
        let base: Arc<dyn FileSystem> =
            Arc::new(PosixFileSystem::new(Arc::new(IoStats::default())));
        base.create_dir_all(dir).unwrap();
        OverlayFileSystem::new(base)
    }

    fn read_all(f: &dyn File) -> Vec<u8> {
        let mut buf = vec![0u8; f.len().unwrap() as usize];
        let n = f.read_at(&mut buf, 0, Issuer::Tool).unwrap();
        assert_eq!(n, buf.len());
        buf
    }

    #[test]
    fn writes_are_seen_through_the_view_and_never_reach_the_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        let original: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &original).unwrap();
        let fs = overlay(tmp.path());
        let f = fs
            .open(&path, FileKind::Data, OpenOptions::read_write())
            .unwrap();
        // Across a block boundary and past the end.
        f.write_at(&[7u8; 5000], 4000, Issuer::Tool).unwrap();
        f.write_at(&[9u8; 100], 12_000, Issuer::Tool).unwrap();
        let mut want = original.clone();
        want[4000..9000].fill(7);
        want.resize(12_000, 0);
        want.extend_from_slice(&[9u8; 100]);
        assert_eq!(read_all(f.as_ref()), want);
        // A second opening sees the same file.
        let g = fs
            .open(&path, FileKind::Data, OpenOptions::read_only())
            .unwrap();
        assert_eq!(read_all(g.as_ref()), want);
        assert_eq!(std::fs::read(&path).unwrap(), original);
    }

    #[test]
    fn a_shortened_file_reads_zeros_where_it_grows_again() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        std::fs::write(&path, vec![5u8; 9000]).unwrap();
        let fs = overlay(tmp.path());
        let f = fs
            .open(&path, FileKind::Wal, OpenOptions::read_write())
            .unwrap();
        f.write_at(&[1u8; 10], 8190, Issuer::Tool).unwrap();
        f.set_len(6000, Issuer::Tool).unwrap();
        f.set_len(9000, Issuer::Tool).unwrap();
        let mut want = vec![5u8; 6000];
        want.resize(9000, 0);
        assert_eq!(read_all(f.as_ref()), want);
        assert_eq!(std::fs::read(&path).unwrap(), vec![5u8; 9000]);
    }

    #[test]
    fn creations_renames_and_removals_stay_in_the_view() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("a"), b"old a").unwrap();
        std::fs::write(d.join("b"), b"old b").unwrap();
        let fs = overlay(d);
        let c = fs
            .open(&d.join("c"), FileKind::Control, OpenOptions::create())
            .unwrap();
        c.write_at(b"new c", 0, Issuer::Tool).unwrap();
        fs.rename(&d.join("c"), &d.join("a"), FileKind::Control, Issuer::Tool)
            .unwrap();
        fs.remove(&d.join("b"), FileKind::Control, Issuer::Tool)
            .unwrap();
        fs.create_dir_all(&d.join("dw/sub")).unwrap();
        assert_eq!(fs.list_dir(d).unwrap(), vec![d.join("a"), d.join("dw")]);
        assert!(!fs.exists(&d.join("b")) && !fs.exists(&d.join("c")));
        assert!(fs.exists(&d.join("dw/sub")));
        let a = fs
            .open(&d.join("a"), FileKind::Control, OpenOptions::read_only())
            .unwrap();
        assert_eq!(read_all(a.as_ref()), b"new c");
        assert!(fs
            .open(&d.join("b"), FileKind::Control, OpenOptions::read_only())
            .is_err());
        // Underneath, nothing moved.
        let mut names: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, vec!["a", "b"]);
        assert_eq!(std::fs::read(d.join("a")).unwrap(), b"old a");
    }
}
