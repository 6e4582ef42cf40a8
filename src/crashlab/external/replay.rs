//! Replaying a recorder log onto a snapshot: a model of the directory in
//! memory, with per file the bytes made durable by its last sync and the
//! operations pending since, and per directory tree the names made durable
//! by the last directory sync and the name operations pending since.
//!
//! The durability rules (docs/RELIABILITY.md "External systems"):
//! - a file's writes, truncations and allocations are durable after an
//!   fsync or fdatasync of that file (any descriptor), a syncfs or a sync;
//!   a write through an O_DSYNC/O_SYNC descriptor syncs its file when it
//!   returns; sync_file_range makes nothing durable;
//! - name operations (create, rename, link, unlink, mkdir, rmdir) persist
//!   in log order, as a journaling file system commits them: an fsync of
//!   any directory of the tree makes every earlier one durable (stricter
//!   rules, per directory, would only widen the states explored), and at
//!   a cut a random prefix of the rest persists. A file's own fsync does
//!   not make its name durable.
//!
//! Files are known by the inode the recorder saw at open, so a write through
//! a descriptor whose file was renamed since lands where it should.

use super::log::{Log, Op, Record, F_CREATED, F_DIR, F_DSYNC, F_SOURCE_OUTSIDE, F_TARGET_OUTSIDE};
use std::collections::{BTreeMap, HashMap};
use std::io::Result;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub type Id = usize;

/// A change to a file's bytes or size, pending until its file's next sync.
#[derive(Clone, Debug)]
pub enum FileOp {
    /// Record `rec` of the log wrote its data at `off`.
    Write {
        off: u64,
        rec: usize,
    },
    SetLen(u64),
    Fallocate {
        mode: u32,
        off: u64,
        len: u64,
    },
}

#[derive(Clone, Debug)]
pub struct Inode {
    pub dir: bool,
    pub mode: u32,
    pub durable: Vec<u8>,
    pub pending: Vec<FileOp>,
}

/// A change to the names, pending until a directory sync.
#[derive(Clone, Debug)]
pub enum NameOp {
    Create {
        path: String,
        id: Id,
    },
    Rename {
        from: String,
        to: String,
        exchange: bool,
    },
    Link {
        from: String,
        to: String,
    },
    Remove {
        path: String,
    },
}

pub struct Model<'a> {
    pub log: &'a Log,
    pub inodes: Vec<Inode>,
    /// Every name as the live processes saw it.
    pub names: BTreeMap<String, Id>,
    pub durable_names: BTreeMap<String, Id>,
    pub pending_names: Vec<NameOp>,
    by_ino: HashMap<(u64, u64), Id>,
    /// Records the model could not place (a write to a file opened before
    /// the recorder loaded, a rename in from outside): each is an
    /// unrecorded change.
    pub unplaced: Vec<String>,
    /// Writes announced and not answered, by (pid, tid): (file, offset,
    /// length). After a kill, each may or may not have reached the file.
    pub in_flight: HashMap<(u32, u32), (Id, u64, u64)>,
    /// Records replayed so far: [`Model::replay_to`] goes on from here.
    replayed: usize,
}

const ROOT: Id = 0;
const FALLOC_FL_KEEP_SIZE: u32 = 1;
const FALLOC_FL_PUNCH_HOLE: u32 = 2;
const FALLOC_FL_ZERO_RANGE: u32 = 0x10;

impl<'a> Model<'a> {
    /// The snapshot's files, all durable (it was synced before the run).
    pub fn from_snapshot(snapshot: &Path, log: &'a Log) -> Result<Model<'a>> {
        let mut m = Model {
            log,
            inodes: vec![Inode {
                dir: true,
                mode: 0o700,
                durable: Vec::new(),
                pending: Vec::new(),
            }],
            names: BTreeMap::new(),
            durable_names: BTreeMap::new(),
            pending_names: Vec::new(),
            by_ino: HashMap::new(),
            unplaced: Vec::new(),
            in_flight: HashMap::new(),
            replayed: 0,
        };
        m.names.insert(String::new(), ROOT);
        m.load(snapshot, "")?;
        m.durable_names = m.names.clone();
        Ok(m)
    }

    fn load(&mut self, dir: &Path, prefix: &str) -> Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let meta = std::fs::symlink_metadata(e.path())?;
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                let id = self.new_inode(true, mode);
                self.names.insert(name.clone(), id);
                self.load(&e.path(), &format!("{name}/"))?;
            } else if meta.is_file() {
                let id = self.new_inode(false, mode);
                self.inodes[id].durable = std::fs::read(e.path())?;
                self.names.insert(name, id);
            }
        }
        Ok(())
    }

    fn new_inode(&mut self, dir: bool, mode: u32) -> Id {
        self.inodes.push(Inode {
            dir,
            mode,
            durable: Vec::new(),
            pending: Vec::new(),
        });
        self.inodes.len() - 1
    }

    /// Replays records up to `cut` (exclusive), going on from those
    /// already replayed; a cut behind them is a caller's bug.
    pub fn replay_to(&mut self, cut: usize) {
        let cut = cut.min(self.log.records.len());
        assert!(
            cut >= self.replayed,
            "replay cannot go back: at {}, asked {cut}",
            self.replayed
        );
        for i in self.replayed..cut {
            self.apply(i);
        }
        self.replayed = cut;
    }

    fn file(&mut self, r: &Record, i: usize) -> Option<Id> {
        let id = self.by_ino.get(&r.ino).copied();
        if id.is_none() {
            self.unplaced.push(format!(
                "record {i}: {:?} on inode {:?} opened before the recorder saw it",
                r.op, r.ino
            ));
        }
        id
    }

    fn apply(&mut self, i: usize) {
        let r = &self.log.records[i];
        match r.op {
            Op::Open => {
                let id = match self.names.get(&r.path) {
                    Some(&id) if r.flags & F_CREATED == 0 => id,
                    _ => {
                        let id = self.new_inode(r.flags & F_DIR != 0, 0o600);
                        self.name_op(NameOp::Create {
                            path: r.path.clone(),
                            id,
                        });
                        id
                    }
                };
                self.by_ino.insert(r.ino, id);
                if r.aux & libc::O_TRUNC as u32 != 0 && !self.inodes[id].dir {
                    self.inodes[id].pending.push(FileOp::SetLen(0));
                }
            }
            Op::WriteBegin => {
                // A file opened before the recorder: its Write says so.
                if let Some(&id) = self.by_ino.get(&r.ino) {
                    self.in_flight
                        .insert((r.pid, r.tid), (id, r.offset, r.length));
                }
            }
            Op::Write => {
                self.in_flight.remove(&(r.pid, r.tid));
                if let Some(id) = self.file(r, i) {
                    self.inodes[id].pending.push(FileOp::Write {
                        off: r.offset,
                        rec: i,
                    });
                    if r.flags & F_DSYNC != 0 {
                        self.sync_file(id);
                    }
                }
            }
            Op::Truncate | Op::Fallocate => {
                if let Some(id) = self.file(r, i) {
                    let op = if r.op == Op::Truncate {
                        FileOp::SetLen(r.offset)
                    } else {
                        FileOp::Fallocate {
                            mode: r.aux,
                            off: r.offset,
                            len: r.length,
                        }
                    };
                    self.inodes[id].pending.push(op);
                }
            }
            Op::Fsync | Op::Fdatasync => {
                if let Some(id) = self.file(r, i) {
                    if self.inodes[id].dir {
                        self.sync_names();
                    } else {
                        self.sync_file(id);
                    }
                }
            }
            Op::Syncfs | Op::Sync => {
                for id in 0..self.inodes.len() {
                    self.sync_file(id);
                }
                self.sync_names();
            }
            Op::Rename | Op::Link => {
                let (from, to) = (r.path.clone(), r.path2.clone());
                if r.flags & F_SOURCE_OUTSIDE != 0 {
                    self.unplaced
                        .push(format!("record {i}: {to} came from outside the directory"));
                } else if r.flags & F_TARGET_OUTSIDE != 0 {
                    if r.op == Op::Rename {
                        self.name_op(NameOp::Remove { path: from });
                    }
                } else if r.op == Op::Rename {
                    let exchange = r.aux & libc::RENAME_EXCHANGE != 0;
                    self.name_op(NameOp::Rename { from, to, exchange });
                } else {
                    self.name_op(NameOp::Link { from, to });
                }
            }
            Op::Unlink | Op::Rmdir => self.name_op(NameOp::Remove {
                path: r.path.clone(),
            }),
            Op::Mkdir => {
                let id = self.new_inode(true, r.aux & 0o7777);
                self.name_op(NameOp::Create {
                    path: r.path.clone(),
                    id,
                });
            }
            Op::SyncFileRange | Op::Dup | Op::Close | Op::Mark => {}
        }
    }

    fn name_op(&mut self, op: NameOp) {
        apply_name(&mut self.names, &op);
        self.pending_names.push(op);
    }

    fn sync_names(&mut self) {
        for op in self.pending_names.drain(..) {
            apply_name(&mut self.durable_names, &op);
        }
    }

    fn sync_file(&mut self, id: Id) {
        let pending = std::mem::take(&mut self.inodes[id].pending);
        for op in &pending {
            apply_file(self.log, &mut self.inodes[id].durable, op);
        }
    }

    /// A file's bytes as the live processes saw them.
    pub fn current(&self, id: Id) -> Vec<u8> {
        let mut bytes = self.inodes[id].durable.clone();
        for op in &self.inodes[id].pending {
            apply_file(self.log, &mut bytes, op);
        }
        bytes
    }
}

/// Applies a file operation whole.
pub fn apply_file(log: &Log, bytes: &mut Vec<u8>, op: &FileOp) {
    match *op {
        FileOp::Write { off, rec } => {
            let data = log.data(&log.records[rec]);
            let (off, end) = (off as usize, off as usize + data.len());
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[off..end].copy_from_slice(data);
        }
        FileOp::SetLen(len) => bytes.resize(len as usize, 0),
        FileOp::Fallocate { mode, off, len } => {
            let end = (off + len) as usize;
            if mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0 {
                let stop = end.min(bytes.len());
                if (off as usize) < stop {
                    bytes[off as usize..stop].fill(0);
                }
            }
            if mode & FALLOC_FL_KEEP_SIZE == 0 && bytes.len() < end {
                bytes.resize(end, 0);
            }
        }
    }
}

/// Applies a name operation to a map of names (a directory's entries move
/// with it).
pub fn apply_name(names: &mut BTreeMap<String, Id>, op: &NameOp) {
    let under = |names: &BTreeMap<String, Id>, p: &str| -> Vec<String> {
        let slash = format!("{p}/");
        names
            .keys()
            .filter(|k| *k == p || k.starts_with(&slash))
            .cloned()
            .collect()
    };
    match op {
        NameOp::Create { path, id } => {
            names.insert(path.clone(), *id);
        }
        NameOp::Remove { path } => {
            for k in under(names, path) {
                names.remove(&k);
            }
        }
        NameOp::Link { from, to } => {
            if let Some(&id) = names.get(from) {
                names.insert(to.clone(), id);
            }
        }
        NameOp::Rename { from, to, exchange } => {
            let take = |names: &mut BTreeMap<String, Id>, p: &str| -> Vec<(String, Id)> {
                under(names, p)
                    .into_iter()
                    .map(|k| {
                        let id = names.remove(&k).unwrap();
                        (k[p.len()..].to_string(), id)
                    })
                    .collect()
            };
            let moved = take(names, from);
            let replaced = take(names, to);
            for (rest, id) in moved {
                names.insert(format!("{to}{rest}"), id);
            }
            if *exchange {
                for (rest, id) in replaced {
                    names.insert(format!("{from}{rest}"), id);
                }
            }
        }
    }
}
