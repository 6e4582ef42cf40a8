//! The names of [`SimFileSystem`](super::SimFileSystem): the live and
//! durable namespaces, the per-directory queues of operations between them
//! that `sync_dir` applies (and a crash applies in part, crash.rs), and
//! the inode lifetime that names decide.

use super::{os_error, Inode, State};
use crate::error::{Error, Result};
use crate::file::OpenOptions;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A directory operation not yet made durable by `sync_dir`.
#[derive(Clone, Debug)]
pub(super) enum DirOp {
    Create {
        path: PathBuf,
        ino: u64,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
        ino: u64,
    },
    Remove {
        path: PathBuf,
    },
}

impl DirOp {
    pub(super) fn apply(&self, ns: &mut BTreeMap<PathBuf, u64>) {
        match self {
            DirOp::Create { path, ino } => {
                ns.insert(path.clone(), *ino);
            }
            DirOp::Rename { from, to, ino } => {
                if ns.get(from) == Some(ino) {
                    ns.remove(from);
                }
                ns.insert(to.clone(), *ino);
            }
            DirOp::Remove { path } => {
                ns.remove(path);
            }
        }
    }

    fn ino(&self) -> Option<u64> {
        match self {
            DirOp::Create { ino, .. } | DirOp::Rename { ino, .. } => Some(*ino),
            DirOp::Remove { .. } => None,
        }
    }
}

fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

impl State {
    pub(super) fn dir_exists(&self, dir: &Path) -> bool {
        dir.as_os_str().is_empty() || dir == Path::new("/") || self.dirs.contains(dir)
    }

    /// Frees an inode that no name, queued operation or handle reaches.
    pub(super) fn maybe_free(&mut self, ino: u64) {
        let Some(inode) = self.inodes.get(&ino) else {
            return;
        };
        let reached = inode.handles > 0
            || self.live_ns.values().any(|i| *i == ino)
            || self.durable_ns.values().any(|i| *i == ino)
            || self
                .dir_pending
                .values()
                .flatten()
                .any(|op| op.ino() == Some(ino));
        if !reached {
            self.inodes.remove(&ino);
        }
    }

    pub(super) fn open(&mut self, path: &Path, opts: OpenOptions) -> Result<u64> {
        if let Some(ino) = self.live_ns.get(path).copied() {
            if opts.create_new {
                return Err(os_error(path, "open", libc::EEXIST));
            }
            return Ok(ino);
        }
        if self.dir_exists(path) {
            return Err(os_error(path, "open", libc::EISDIR));
        }
        let parent = parent_of(path);
        if !opts.create || !self.dir_exists(&parent) {
            return Err(os_error(path, "open", libc::ENOENT));
        }
        self.power(path)?;
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(ino, Inode::default());
        self.live_ns.insert(path.to_path_buf(), ino);
        let op = DirOp::Create {
            path: path.to_path_buf(),
            ino,
        };
        self.dir_pending.entry(parent).or_default().push(op);
        Ok(ino)
    }

    pub(super) fn rename(&mut self, from: &Path, to: &Path) -> Result<()> {
        let ino = *self
            .live_ns
            .get(from)
            .ok_or_else(|| os_error(from, "rename", libc::ENOENT))?;
        self.power(from)?;
        let parent = parent_of(to);
        if !self.dir_exists(&parent) {
            return Err(os_error(to, "rename", libc::ENOENT));
        }
        if self.dir_exists(to) {
            return Err(os_error(to, "rename", libc::EISDIR));
        }
        if from == to {
            return Ok(());
        }
        self.live_ns.remove(from);
        let replaced = self.live_ns.insert(to.to_path_buf(), ino);
        let op = DirOp::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            ino,
        };
        self.dir_pending.entry(parent).or_default().push(op);
        if let Some(old) = replaced {
            self.maybe_free(old);
        }
        Ok(())
    }

    pub(super) fn remove(&mut self, path: &Path) -> Result<()> {
        self.power(path)?;
        let ino = self
            .live_ns
            .remove(path)
            .ok_or_else(|| os_error(path, "unlink", libc::ENOENT))?;
        let op = DirOp::Remove {
            path: path.to_path_buf(),
        };
        self.dir_pending
            .entry(parent_of(path))
            .or_default()
            .push(op);
        self.maybe_free(ino);
        Ok(())
    }

    pub(super) fn sync_dir(&mut self, dir: &Path) -> Result<()> {
        if !self.dir_exists(dir) {
            return Err(os_error(dir, "open directory", libc::ENOENT));
        }
        self.power(dir)?;
        let fail = match &mut self.faults.fail_sync_dir_after {
            Some(0) => self.faults.fail_sync_dir_after.take().is_some(),
            Some(n) => {
                *n -= 1;
                false
            }
            None => false,
        };
        if fail {
            return Err(Error::FsyncFailed {
                path: dir.to_path_buf(),
                source: std::io::Error::from_raw_os_error(libc::EIO),
            });
        }
        let ops = self.dir_pending.remove(dir).unwrap_or_default();
        for op in &ops {
            op.apply(&mut self.durable_ns);
        }
        for ino in ops.iter().filter_map(DirOp::ino) {
            self.maybe_free(ino);
        }
        Ok(())
    }

    pub(super) fn create_dir_all(&mut self, dir: &Path) -> Result<()> {
        for d in dir.ancestors() {
            if self.live_ns.contains_key(d) {
                return Err(os_error(dir, "mkdir", libc::ENOTDIR));
            }
        }
        for d in dir.ancestors().filter(|d| !d.as_os_str().is_empty()) {
            self.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }

    pub(super) fn list_dir(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        if !self.dir_exists(dir) {
            return Err(os_error(dir, "readdir", libc::ENOENT));
        }
        let in_dir = |p: &&PathBuf| p.parent() == Some(dir) && p.as_path() != dir;
        let files = self.live_ns.keys().filter(in_dir);
        let mut out: Vec<PathBuf> = files
            .chain(self.dirs.iter().filter(in_dir))
            .cloned()
            .collect();
        out.sort();
        Ok(out)
    }
}
