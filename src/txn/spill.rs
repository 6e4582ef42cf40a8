//! A transaction's write set past its memory budget, on disk: sorted runs
//! in one file of the database's `spill/` directory (docs/FORMAT.md,
//! "Spill files"), as PostgreSQL's sorts spill to `pgsql_tmp`.
//!
//! Why: a transaction's writes stay private until commit (txn/mod.rs), and
//! a load of millions of rows cannot stay in memory. When the in-memory
//! write set reaches `max_write_set_rows` or `max_write_set_bytes`, it is
//! written out as one run, sorted by (file id, key), and memory starts
//! again. A later run, and memory, shadow an earlier run's change of the
//! same key. Each run keeps in memory a Bloom filter of its keys and every
//! 32nd key with its offset, so reading the transaction's own write (a
//! duplicate-key check per inserted row) costs no disk read for most runs
//! and one short read for the run that has it.
//!
//! The file is also the commit point of such a transaction (spilled.rs):
//! sealed with a footer, fsynced, renamed from `<xid>.pending` to
//! `<xid>.committed` and the directory fsynced. Until the rename nothing
//! of it reached a page or the WAL; after it, an opening that finds the
//! file finishes applying it. A `.pending` file found at opening belonged
//! to a transaction that never committed: removed.

use crate::btree::ops::RowChange;
use crate::error::{Error, Result};
use crate::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The spill directory's name, in the database directory.
pub const SPILL_DIR: &str = "spill";
const MAGIC: &[u8; 8] = b"UNTSPILL";
const END_MAGIC: &[u8; 8] = b"UNTSPEND";
/// The format's version (docs/FORMAT.md).
const VERSION: u32 = 1;
/// magic, version, reserved, xid.
const HEADER_LEN: u64 = 24;
/// start, length, entries (u64 each), CRC-32C (u32).
const RUN_DESCRIPTOR_LEN: usize = 28;
/// runs (u32), the footer's CRC-32C (u32), xid (u64), magic.
const TRAILER_LEN: usize = 24;
/// Every this many entries a run's key and offset are kept in memory.
const SPARSE_EVERY: u64 = 32;
/// What a run reader reads at once.
const READ_CHUNK: usize = 256 * 1024;
/// What a run writer gathers before one write.
const WRITE_CHUNK: usize = 1 << 20;
/// The longest key or row an entry may hold (pages are at most 32 KB).
const MAX_FIELD_LEN: usize = 64 * 1024;

/// A write set's key: the table's file id and the row's key.
pub(crate) type WriteKey = (u32, Vec<u8>);

/// The file a transaction's runs go to, while it runs.
pub(crate) fn pending_path(dir: &Path, xid: u64) -> PathBuf {
    dir.join(SPILL_DIR).join(format!("{xid}.pending"))
}

/// The file of a transaction that committed, until it is applied.
pub(crate) fn committed_path(dir: &Path, xid: u64) -> PathBuf {
    dir.join(SPILL_DIR).join(format!("{xid}.committed"))
}

/// Appends one entry: file id (u32), key length (u32), key, kind (0
/// delete, 1 put), and for a put the row's length (u32) and bytes.
fn encode_entry(out: &mut Vec<u8>, file_id: u32, key: &[u8], change: &RowChange) {
    out.extend_from_slice(&file_id.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    match change {
        RowChange::Put(v) => {
            out.push(1);
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        RowChange::Delete => out.push(0),
    }
}

type Entry = (WriteKey, RowChange);

/// Decodes the entry at the start of `b`: `Ok(None)` if `b` ends before it
/// does, else the entry and its length. Never panics on bad bytes.
fn decode_entry(b: &[u8]) -> std::result::Result<Option<(Entry, usize)>, String> {
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let (Some(file_id), Some(key_len)) = (u32_at(0), u32_at(4)) else {
        return Ok(None);
    };
    let key_len = key_len as usize;
    if key_len > MAX_FIELD_LEN {
        return Err(format!("a key of {key_len} bytes"));
    }
    let Some(&kind) = b.get(8 + key_len) else {
        return Ok(None);
    };
    let key = b[8..8 + key_len].to_vec();
    match kind {
        0 => Ok(Some((((file_id, key), RowChange::Delete), 9 + key_len))),
        1 => {
            let Some(len) = u32_at(9 + key_len) else {
                return Ok(None);
            };
            let len = len as usize;
            if len > MAX_FIELD_LEN {
                return Err(format!("a row of {len} bytes"));
            }
            let at = 13 + key_len;
            let Some(v) = b.get(at..at + len) else {
                return Ok(None);
            };
            Ok(Some((
                ((file_id, key), RowChange::Put(v.to_vec())),
                at + len,
            )))
        }
        k => Err(format!("an entry of kind {k}")),
    }
}

/// A Bloom filter of a run's keys: ten bits a key, seven probes (about
/// 1 % false positives).
struct Bloom {
    bits: Vec<u64>,
}

const BLOOM_PROBES: u64 = 7;

impl Bloom {
    fn new(keys: usize) -> Bloom {
        Bloom {
            bits: vec![0; (keys * 10).div_ceil(64).max(1)],
        }
    }

    /// A key's hash, computed once for every run's filter.
    fn hash(file_id: u32, key: &[u8]) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (file_id, key).hash(&mut h);
        h.finish()
    }

    /// Probe `i` of `hash` by double hashing (Kirsch and Mitzenmacher):
    /// h1 + i * h2, modulo the filter's bits.
    fn probe(&self, hash: u64, i: u64) -> usize {
        let h2 = hash.rotate_left(32) | 1;
        let nbits = self.bits.len() as u64 * 64;
        (hash.wrapping_add(i.wrapping_mul(h2)) % nbits) as usize
    }

    fn insert(&mut self, hash: u64) {
        for i in 0..BLOOM_PROBES {
            let bit = self.probe(hash, i);
            self.bits[bit / 64] |= 1 << (bit % 64);
        }
    }

    fn may_contain(&self, hash: u64) -> bool {
        (0..BLOOM_PROBES).all(|i| {
            let bit = self.probe(hash, i);
            self.bits[bit / 64] & (1 << (bit % 64)) != 0
        })
    }
}

/// Where a run lies in the file, as the footer records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RunExtent {
    start: u64,
    len: u64,
    entries: u64,
    crc: u32,
}

/// A run written by this transaction, with its in-memory lookup aids.
struct Run {
    extent: RunExtent,
    /// Every SPARSE_EVERY-th key and its offset, the first included.
    sparse: Vec<(WriteKey, u64)>,
    bloom: Bloom,
}

/// The runs of a transaction that is still running.
pub(crate) struct Spill {
    fs: Arc<dyn FileSystem>,
    /// The database's directory.
    dir: PathBuf,
    path: PathBuf,
    file: Arc<dyn File>,
    xid: u64,
    end: u64,
    /// `temp_file_limit`: the most bytes the file may reach.
    limit: u64,
    runs: Vec<Run>,
    /// Renamed to committed, or removed: nothing left for Drop to remove.
    done: bool,
}

impl Spill {
    /// Creates the transaction's spill file (and the directory).
    pub fn create(fs: &Arc<dyn FileSystem>, dir: &Path, xid: u64, limit: u64) -> Result<Spill> {
        fs.create_dir_all(&dir.join(SPILL_DIR))?;
        let path = pending_path(dir, xid);
        let file = fs.open(&path, FileKind::Spill, OpenOptions::create_new())?;
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        header.extend_from_slice(&xid.to_le_bytes());
        let spill = Spill {
            fs: fs.clone(),
            dir: dir.to_path_buf(),
            path,
            file,
            xid,
            end: HEADER_LEN,
            limit,
            runs: Vec::new(),
            done: false,
        };
        spill.file.write_at(&header, 0, Issuer::Client)?;
        Ok(spill)
    }

    fn write(&mut self, buf: &[u8]) -> Result<()> {
        if self.end + buf.len() as u64 > self.limit {
            return Err(Error::TempFileLimit { limit: self.limit });
        }
        self.file.write_at(buf, self.end, Issuer::Client)?;
        self.end += buf.len() as u64;
        Ok(())
    }

    /// The bytes of the runs written so far.
    pub fn runs_len(&self) -> u64 {
        self.end - HEADER_LEN
    }

    /// Writes `writes` (in key order) as a new run, newer than every
    /// run before it.
    pub fn write_run(&mut self, writes: &BTreeMap<WriteKey, RowChange>) -> Result<()> {
        let start = self.end;
        let mut sparse = Vec::with_capacity(writes.len() / SPARSE_EVERY as usize + 1);
        let mut bloom = Bloom::new(writes.len());
        let mut crc = 0u32;
        let mut buf = Vec::with_capacity(WRITE_CHUNK + 2 * MAX_FIELD_LEN);
        let mut written = 0u64;
        for (n, ((file_id, key), change)) in writes.iter().enumerate() {
            if (n as u64).is_multiple_of(SPARSE_EVERY) {
                sparse.push(((*file_id, key.clone()), start + written + buf.len() as u64));
            }
            bloom.insert(Bloom::hash(*file_id, key));
            encode_entry(&mut buf, *file_id, key, change);
            if buf.len() >= WRITE_CHUNK {
                crc = ::crc32c::crc32c_append(crc, &buf);
                self.write(&buf)?;
                written += buf.len() as u64;
                buf.clear();
            }
        }
        crc = ::crc32c::crc32c_append(crc, &buf);
        self.write(&buf)?;
        written += buf.len() as u64;
        self.runs.push(Run {
            extent: RunExtent {
                start,
                len: written,
                entries: writes.len() as u64,
                crc,
            },
            sparse,
            bloom,
        });
        Ok(())
    }

    /// The newest change of `(file_id, key)` the runs hold, if any.
    pub fn get(&self, file_id: u32, key: &[u8]) -> Result<Option<RowChange>> {
        let hash = Bloom::hash(file_id, key);
        for run in self.runs.iter().rev() {
            if !run.bloom.may_contain(hash) {
                continue;
            }
            let want = (file_id, key);
            // The last sampled key not after ours starts the only block
            // that can hold it.
            let i = run
                .sparse
                .partition_point(|((f, k), _)| (*f, k.as_slice()) <= want);
            if i == 0 {
                continue;
            }
            let from = run.sparse[i - 1].1;
            let to = run
                .sparse
                .get(i)
                .map_or(run.extent.start + run.extent.len, |s| s.1);
            let mut reader = RunReader::new(&*self.file, &self.path, from, to);
            while let Some(((f, k), change)) = reader.next_entry()? {
                match (f, k.as_slice()).cmp(&want) {
                    std::cmp::Ordering::Less => continue,
                    std::cmp::Ordering::Equal => return Ok(Some(change)),
                    std::cmp::Ordering::Greater => break,
                }
            }
        }
        Ok(None)
    }

    /// Readers of every run from the first block that may hold keys at or
    /// after `from`, oldest run first (a merge takes later ones as newer).
    pub fn readers_from(&self, from: (u32, &[u8])) -> Vec<RunReader<'_>> {
        self.runs
            .iter()
            .map(|run| {
                let i = run
                    .sparse
                    .partition_point(|((f, k), _)| (*f, k.as_slice()) <= from);
                let start = if i == 0 {
                    run.extent.start
                } else {
                    run.sparse[i - 1].1
                };
                RunReader::new(
                    &*self.file,
                    &self.path,
                    start,
                    run.extent.start + run.extent.len,
                )
            })
            .collect()
    }

    /// The commit point: `last` (the write set still in memory) as the
    /// newest run, the footer, an fsync, the rename to `.committed` and
    /// the directory's fsync. An error before the rename leaves the
    /// transaction uncommitted (the file is removed); `Ok` means
    /// committed. A failure of the directory's fsync is fatal
    /// ([`Error::FsyncFailed`]): whether the rename is durable is unknown.
    pub fn seal(mut self, last: &BTreeMap<WriteKey, RowChange>) -> Result<Sealed> {
        if !last.is_empty() {
            self.write_run(last)?;
        }
        let extents: Vec<RunExtent> = self.runs.iter().map(|r| r.extent).collect();
        let mut footer = Vec::with_capacity(extents.len() * RUN_DESCRIPTOR_LEN + TRAILER_LEN);
        for e in &extents {
            footer.extend_from_slice(&e.start.to_le_bytes());
            footer.extend_from_slice(&e.len.to_le_bytes());
            footer.extend_from_slice(&e.entries.to_le_bytes());
            footer.extend_from_slice(&e.crc.to_le_bytes());
        }
        footer.extend_from_slice(&(extents.len() as u32).to_le_bytes());
        let crc = ::crc32c::crc32c(&footer);
        footer.extend_from_slice(&crc.to_le_bytes());
        footer.extend_from_slice(&self.xid.to_le_bytes());
        footer.extend_from_slice(END_MAGIC);
        // The footer may pass temp_file_limit: refusing a commit for it
        // would help no one.
        self.file.write_at(&footer, self.end, Issuer::Client)?;
        self.file.sync_all(Issuer::Client)?;
        let committed = committed_path(&self.dir, self.xid);
        self.fs
            .rename(&self.path, &committed, FileKind::Spill, Issuer::Client)?;
        self.done = true;
        self.fs
            .sync_dir(&self.dir.join(SPILL_DIR), Issuer::Client)?;
        Ok(Sealed {
            fs: self.fs.clone(),
            path: committed,
            file: self.file.clone(),
            xid: self.xid,
            runs: extents,
        })
    }
}

impl Drop for Spill {
    /// An aborted (or failed) transaction's file goes; a failure to remove
    /// it only leaves it for the next opening to remove.
    fn drop(&mut self) {
        if !self.done {
            if let Err(e) = self.fs.remove(&self.path, FileKind::Spill, Issuer::Client) {
                tracing::warn!(path = %self.path.display(), error = %e, "could not remove an aborted transaction's spill file; the next opening removes it");
            }
        }
    }
}

/// The runs of a committed transaction, to apply.
pub(crate) struct Sealed {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    file: Arc<dyn File>,
    xid: u64,
    runs: Vec<RunExtent>,
}

impl Sealed {
    /// Opens a committed file found at opening: its footer and every run's
    /// CRC are checked before anything of it is applied.
    pub fn open(fs: &Arc<dyn FileSystem>, path: &Path) -> Result<Sealed> {
        let bad = |detail: String| Error::corruption(path, "footer", detail);
        let file = fs.open(path, FileKind::Spill, OpenOptions::read_only())?;
        let len = file.len()?;
        let mut header = [0u8; HEADER_LEN as usize];
        if len < HEADER_LEN + TRAILER_LEN as u64 {
            return Err(bad(format!("a spill file of {len} bytes")));
        }
        file.read_exact_at(&mut header, 0, Issuer::Recovery)?;
        let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        if &header[..8] != MAGIC || version != VERSION {
            return Err(bad(format!(
                "not a spill file of version {VERSION} (magic {:?}, version {version})",
                &header[..8]
            )));
        }
        let xid = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
        let mut trailer = [0u8; TRAILER_LEN];
        file.read_exact_at(&mut trailer, len - TRAILER_LEN as u64, Issuer::Recovery)?;
        let nruns = u32::from_le_bytes(trailer[0..4].try_into().expect("4 bytes")) as u64;
        let crc = u32::from_le_bytes(trailer[4..8].try_into().expect("4 bytes"));
        let trailer_xid = u64::from_le_bytes(trailer[8..16].try_into().expect("8 bytes"));
        if &trailer[16..] != END_MAGIC || trailer_xid != xid {
            return Err(bad("no footer: the file was not sealed".into()));
        }
        let footer_len = nruns * RUN_DESCRIPTOR_LEN as u64;
        if footer_len > len - HEADER_LEN - TRAILER_LEN as u64 {
            return Err(bad(format!("{nruns} runs in a file of {len} bytes")));
        }
        let footer_at = len - TRAILER_LEN as u64 - footer_len;
        let mut footer = vec![0u8; footer_len as usize + 4];
        file.read_exact_at(&mut footer, footer_at, Issuer::Recovery)?;
        if ::crc32c::crc32c(&footer) != crc {
            return Err(bad("the footer's CRC does not match".into()));
        }
        let mut runs = Vec::with_capacity(nruns as usize);
        let mut at = HEADER_LEN;
        for d in footer[..footer_len as usize].chunks_exact(RUN_DESCRIPTOR_LEN) {
            let u64_at = |i: usize| u64::from_le_bytes(d[i..i + 8].try_into().expect("8 bytes"));
            let extent = RunExtent {
                start: u64_at(0),
                len: u64_at(8),
                entries: u64_at(16),
                crc: u32::from_le_bytes(d[24..28].try_into().expect("4 bytes")),
            };
            if extent.start != at || extent.start.saturating_add(extent.len) > footer_at {
                return Err(bad(format!("a run at {}+{}", extent.start, extent.len)));
            }
            at = extent.start + extent.len;
            runs.push(extent);
        }
        let sealed = Sealed {
            fs: fs.clone(),
            path: path.to_path_buf(),
            file,
            xid,
            runs,
        };
        for run in &sealed.runs {
            sealed.check_run(run)?;
        }
        Ok(sealed)
    }

    /// Reads a run whole: its CRC and its entry count must match.
    fn check_run(&self, run: &RunExtent) -> Result<()> {
        let mut crc = 0u32;
        let mut at = run.start;
        let mut buf = vec![0u8; READ_CHUNK];
        while at < run.start + run.len {
            let n = (run.start + run.len - at).min(READ_CHUNK as u64) as usize;
            self.file
                .read_exact_at(&mut buf[..n], at, Issuer::Recovery)?;
            crc = ::crc32c::crc32c_append(crc, &buf[..n]);
            at += n as u64;
        }
        let bad =
            |what: String| Error::corruption(&self.path, format!("offset {}", run.start), what);
        if crc != run.crc {
            return Err(bad("a run's CRC does not match its footer".into()));
        }
        let mut entries = 0;
        let mut reader = self.reader(run);
        while reader.next_entry()?.is_some() {
            entries += 1;
        }
        if entries != run.entries {
            return Err(bad(format!(
                "a run of {entries} entries where its footer says {}",
                run.entries
            )));
        }
        Ok(())
    }

    fn reader(&self, run: &RunExtent) -> RunReader<'_> {
        RunReader::new(&*self.file, &self.path, run.start, run.start + run.len)
    }

    /// The transaction's id.
    pub fn xid(&self) -> u64 {
        self.xid
    }

    /// Every change, in key order, the newest of each key.
    pub fn merged(&self) -> Merge<'_> {
        Merge::new(
            self.runs
                .iter()
                .map(|r| Source::Run(self.reader(r)))
                .collect(),
        )
    }

    /// Removes the file once everything in it is durable elsewhere (the
    /// WAL): durably, since a file that came back would be applied again
    /// over later transactions.
    pub fn remove(self) -> Result<()> {
        self.fs
            .remove(&self.path, FileKind::Spill, Issuer::Client)?;
        let dir = self.path.parent().expect("in spill/");
        self.fs.sync_dir(dir, Issuer::Client)
    }
}

/// Reads a run's entries in order, from `at` to `end`.
pub(crate) struct RunReader<'f> {
    file: &'f dyn File,
    path: &'f Path,
    /// The file offset of `buf[0]`.
    buf_at: u64,
    end: u64,
    buf: Vec<u8>,
    pos: usize,
}

impl<'f> RunReader<'f> {
    fn new(file: &'f dyn File, path: &'f Path, at: u64, end: u64) -> RunReader<'f> {
        RunReader {
            file,
            path,
            buf_at: at,
            end,
            buf: Vec::new(),
            pos: 0,
        }
    }

    /// The next entry, `None` at the run's end.
    pub fn next_entry(&mut self) -> Result<Option<Entry>> {
        loop {
            let offset = self.buf_at + self.pos as u64;
            if offset >= self.end {
                return Ok(None);
            }
            match decode_entry(&self.buf[self.pos..]) {
                Ok(Some((entry, n))) if offset + n as u64 <= self.end => {
                    self.pos += n;
                    return Ok(Some(entry));
                }
                Ok(Some(_)) => return Err(self.bad(offset, "an entry past its run's end".into())),
                Err(why) => return Err(self.bad(offset, why)),
                Ok(None) => {
                    // Keep the partial entry, read more after it.
                    let have = self.buf.len() - self.pos;
                    let want = ((self.end - offset) as usize).min(READ_CHUNK.max(have * 2));
                    if want <= have {
                        return Err(self.bad(offset, "an entry cut by its run's end".into()));
                    }
                    self.buf.drain(..self.pos);
                    self.buf_at = offset;
                    self.pos = 0;
                    let old = self.buf.len();
                    self.buf.resize(want, 0);
                    self.file.read_exact_at(
                        &mut self.buf[old..],
                        offset + old as u64,
                        Issuer::Client,
                    )?;
                }
            }
        }
    }

    fn bad(&self, offset: u64, why: String) -> Error {
        Error::corruption(self.path, format!("offset {offset}"), why)
    }
}

/// One input of a [`Merge`].
pub(crate) enum Source<'a> {
    Run(RunReader<'a>),
    /// The write set still in memory (newest of all).
    Memory(std::collections::btree_map::Range<'a, WriteKey, RowChange>),
}

impl Source<'_> {
    fn next_entry(&mut self) -> Result<Option<Entry>> {
        match self {
            Source::Run(r) => r.next_entry(),
            Source::Memory(m) => Ok(m.next().map(|(k, c)| (k.clone(), c.clone()))),
        }
    }
}

/// Merges sources in key order; of one key's changes, the one from the
/// latest source (the newest) wins.
pub(crate) struct Merge<'a> {
    sources: Vec<Source<'a>>,
    heads: Vec<Option<Entry>>,
    started: bool,
}

impl<'a> Merge<'a> {
    pub fn new(sources: Vec<Source<'a>>) -> Merge<'a> {
        let heads = sources.iter().map(|_| None).collect();
        Merge {
            sources,
            heads,
            started: false,
        }
    }

    /// The next key's newest change.
    pub fn next_entry(&mut self) -> Result<Option<Entry>> {
        if !self.started {
            self.started = true;
            for (s, h) in self.sources.iter_mut().zip(&mut self.heads) {
                *h = s.next_entry()?;
            }
        }
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            if let Some((k, _)) = h {
                // `<=`: a later source with the same key is newer.
                if best.is_none_or(|b| *k <= self.heads[b].as_ref().expect("set").0) {
                    best = Some(i);
                }
            }
        }
        let Some(best) = best else {
            return Ok(None);
        };
        let won = self.heads[best].take().expect("chosen");
        for i in 0..self.sources.len() {
            let same_key = self.heads[i].as_ref().is_some_and(|(k, _)| *k == won.0);
            if i == best || same_key {
                self.heads[i] = self.sources[i].next_entry()?;
            }
        }
        Ok(Some(won))
    }
}

#[cfg(test)]
#[path = "spill_file_tests.rs"]
mod tests;
