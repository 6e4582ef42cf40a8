//! Power loss on [`SimFileSystem`]: the images a test restarts from, and
//! the crash itself, which builds a new durable state from the pending
//! operations and one seed and makes the live state equal to it. (The other
//! fault switches and the trace are in faults.rs.)
//!
//! Crash rules (brief: correctness.md, "The fault model of the crash laboratory"):
//! - Each pending write, independently, is kept whole, dropped or torn.
//!   Because the choices are independent a later write may be lost while an
//!   earlier one survives (reordering, across files too); the writes kept
//!   are applied in issue order, so a later one wins over an earlier one on
//!   the same bytes.
//! - A torn write is cut at the boundaries of *units* of
//!   max(`sector_size`, `atomic_page_writes`) bytes, aligned to absolute file
//!   offsets. Each unit holds only new or only old bytes, with at least one
//!   of each kind; a write within one unit cannot tear, so it is kept or
//!   dropped instead. Old bytes are those of the image being rebuilt (the
//!   durable bytes and the earlier writes kept), zeros past its end. A torn
//!   write that extends the file leaves it, in half the cases, ending at a
//!   unit boundary inside the write (beyond the old end): ext4 with 4 KB
//!   blocks may journal a size that covers only the blocks written back, so
//!   a file can end mid-page. Otherwise the file reaches the write's end:
//!   the size reached the journal, the data only in part. A unit left old
//!   reads back as zeros with
//!   `zero_sector_probability` and, independently, fails reads with EIO
//!   until rewritten with `eio_sector_probability`.
//! - A pending size change (`set_len`, `allocate`) is kept or dropped, with
//!   the odds of keeping against dropping a write.
//! - Directory operations: in each directory a random prefix (of 0 to all
//!   operations, each length equally likely) of its queue survives, in
//!   order, as a journaled file system commits metadata in order. A file
//!   that no surviving name reaches is lost with its data, even if the file
//!   itself was fsynced.
//! - One [`SplitMix64`] drives everything in a fixed order (directories by
//!   name, then files by inode number, each file's operations in issue
//!   order), so (state, seed) always gives the same image, whatever version
//!   of the rand crate is built.

use super::faults::{trace_op, TraceKind, TraceOp};
use super::{apply_pending, write_into, Inode, Pending, SimFileSystem, State};
use crate::file::IoStats;
use crate::rng::SplitMix64;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The durable state of a simulated file system: every durable name with
/// its durable bytes, and the directories.
#[derive(Clone, PartialEq, Eq)]
pub struct SimImage {
    pub files: BTreeMap<PathBuf, Vec<u8>>,
    pub dirs: BTreeSet<PathBuf>,
}

impl std::fmt::Debug for SimImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sizes: BTreeMap<_, _> = self.files.iter().map(|(p, b)| (p, b.len())).collect();
        f.debug_struct("SimImage")
            .field("file_sizes", &sizes)
            .field("dirs", &self.dirs)
            .finish()
    }
}

/// What the device guarantees and what a crash does, as odds.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CrashConfig {
    /// The device's atomic write unit: 512 or 4096 bytes.
    pub sector_size: usize,
    /// `Some(n)`: writes are atomic in aligned units of `n` bytes (a
    /// multiple of the sector size), e.g. 8192 for a device with atomic
    /// 8 KB page writes.
    pub atomic_page_writes: Option<usize>,
    /// Relative odds that a pending write is kept whole, dropped or torn.
    pub keep_probability: f64,
    pub drop_probability: f64,
    pub tear_probability: f64,
    /// Odds that a unit a torn write left old reads back as zeros.
    pub zero_sector_probability: f64,
    /// Odds that a unit a torn write left old fails reads with EIO.
    pub eio_sector_probability: f64,
}

impl Default for CrashConfig {
    fn default() -> Self {
        CrashConfig {
            sector_size: 512,
            atomic_page_writes: None,
            keep_probability: 0.4,
            drop_probability: 0.3,
            tear_probability: 0.3,
            zero_sector_probability: 0.0,
            eio_sector_probability: 0.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Keep,
    Drop,
    Tear,
}

impl CrashConfig {
    /// Writes are kept or dropped, never torn (reordering stays).
    pub fn no_tearing() -> Self {
        CrashConfig {
            keep_probability: 0.5,
            drop_probability: 0.5,
            tear_probability: 0.0,
            ..CrashConfig::default()
        }
    }

    /// Panics on a configuration no device has: a mistake in the caller.
    fn validate(&self) {
        let s = self.sector_size;
        assert!(s.is_power_of_two() && s >= 512, "sector_size {s}");
        if let Some(a) = self.atomic_page_writes {
            assert!(a.is_power_of_two() && a >= s, "atomic_page_writes {a}");
        }
        let odds = [
            self.keep_probability,
            self.drop_probability,
            self.tear_probability,
        ];
        assert!(odds.iter().all(|p| p.is_finite() && *p >= 0.0), "{odds:?}");
        assert!(odds.iter().sum::<f64>() > 0.0, "all odds are zero");
        for p in [self.zero_sector_probability, self.eio_sector_probability] {
            assert!((0.0..=1.0).contains(&p), "probability {p}");
        }
    }

    /// The tearing unit: nothing tears inside it.
    fn unit(&self) -> u64 {
        self.sector_size.max(self.atomic_page_writes.unwrap_or(0)) as u64
    }

    /// The odds of keeping, where the choice is only keep or drop.
    fn keep_share(&self) -> f64 {
        let both = self.keep_probability + self.drop_probability;
        if both > 0.0 {
            self.keep_probability / both
        } else {
            0.5
        }
    }

    fn fate(&self, rng: &mut SplitMix64) -> Fate {
        let total = self.keep_probability + self.drop_probability + self.tear_probability;
        let x = rng.next_f64() * total;
        if x < self.keep_probability {
            Fate::Keep
        } else if x < self.keep_probability + self.drop_probability {
            Fate::Drop
        } else {
            Fate::Tear
        }
    }
}

/// A write a crash tore, under the file's name after the crash.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TornWrite {
    pub path: PathBuf,
    pub offset: u64,
    pub len: u64,
    /// `Some(end)`: the write extended the file, and the file now ends at
    /// `end`, inside the write (a short extension).
    pub file_cut_at: Option<u64>,
}

/// What a crash did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CrashReport {
    pub seed: u64,
    pub writes_kept: u64,
    pub writes_dropped: u64,
    pub writes_torn: u64,
    /// Torn writes that left the file ending inside them.
    pub writes_cut_short: u64,
    /// Units (sectors, or atomic pages where larger) torn writes left old
    /// or zeroed.
    pub sectors_torn: u64,
    pub sectors_zeroed: u64,
    /// Units marked to fail reads with EIO.
    pub sectors_eio: u64,
    pub size_changes_kept: u64,
    pub size_changes_dropped: u64,
    pub dir_ops_applied: u64,
    pub dir_ops_lost: u64,
    /// Files whose live name did not survive (their creation, or the
    /// rename that gave them that name, was lost).
    pub files_lost: u64,
    pub lost_files: Vec<PathBuf>,
    /// Pending writes of files that did not survive.
    pub writes_of_lost_files: u64,
    pub torn_writes: Vec<TornWrite>,
    /// Units zeroed or made unreadable, with what they held before.
    pub damaged_units: Vec<DamagedUnit>,
}

/// A unit a torn write left old that then read back as zeros or failed
/// reads: what a sector being written at the power loss may do.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DamagedUnit {
    pub path: PathBuf,
    pub offset: u64,
    pub len: u64,
    pub zeroed: bool,
    pub unreadable: bool,
    /// The unit held data durable before the write that its damage took:
    /// bytes the torn write was rewriting unchanged (its old bytes, up to
    /// the last nonzero one, equal the new bytes there, as when the WAL's
    /// partial last block is rewritten with more records), or bytes before
    /// the write in a unit it began inside (a 512-byte-aligned flush on a
    /// 4 KB-sector device).
    pub durable_data_lost: bool,
}

/// The crash in progress.
struct Crasher<'a> {
    cfg: &'a CrashConfig,
    rng: SplitMix64,
    report: CrashReport,
    eio: &'a mut HashSet<(PathBuf, u64)>,
}

impl Crasher<'_> {
    /// Builds the file's new durable image from its pending operations.
    fn file(&mut self, inode: &mut Inode, path: &Path) {
        let changed = !inode.pending.is_empty() || inode.diverged;
        let mut image = std::mem::take(&mut inode.durable);
        for op in std::mem::take(&mut inode.pending) {
            match op {
                Pending::Write {
                    offset,
                    data,
                    untorn,
                } => self.write(&mut image, path, offset, &data, untorn),
                size => {
                    if self.rng.chance(self.cfg.keep_share()) {
                        apply_pending(&mut image, &size);
                        self.report.size_changes_kept += 1;
                    } else {
                        self.report.size_changes_dropped += 1;
                    }
                }
            }
        }
        if changed {
            inode.live = image.clone();
        }
        inode.durable = image;
        inode.diverged = false;
        inode.handles = 0;
        assert_eq!(inode.live.len(), inode.durable.len());
    }

    fn write(&mut self, image: &mut Vec<u8>, path: &Path, offset: u64, data: &[u8], untorn: bool) {
        assert!(!data.is_empty(), "empty writes are not queued");
        let unit = self.cfg.unit();
        let first = offset / unit;
        let units = (offset + data.len() as u64 - 1) / unit - first + 1;
        let mut fate = self.cfg.fate(&mut self.rng);
        // RWF_ATOMIC: all or nothing, whatever the sector.
        if fate == Fate::Tear && (units < 2 || untorn) {
            fate = if self.rng.chance(self.cfg.keep_share()) {
                Fate::Keep
            } else {
                Fate::Drop
            };
        }
        match fate {
            Fate::Keep => {
                write_into(image, offset, data);
                self.report.writes_kept += 1;
            }
            Fate::Drop => self.report.writes_dropped += 1,
            Fate::Tear => self.tear(image, path, offset, data, first, units),
        }
    }

    fn tear(
        &mut self,
        image: &mut Vec<u8>,
        path: &Path,
        offset: u64,
        data: &[u8],
        first: u64,
        units: u64,
    ) {
        let mut new: Vec<bool> = (0..units).map(|_| self.rng.chance(0.5)).collect();
        if new.iter().all(|n| *n) || new.iter().all(|n| !*n) {
            let i = self.rng.below(units) as usize;
            new[i] = !new[i];
        }
        let unit = self.cfg.unit();
        let sector = self.cfg.sector_size as u64;
        let end = offset + data.len() as u64;
        let file_cut_at = self.cut_extension(image.len() as u64, offset, end);
        let kept_end = file_cut_at.unwrap_or(end);
        if (image.len() as u64) < kept_end {
            image.resize(kept_end as usize, 0);
        }
        for (i, is_new) in new.into_iter().enumerate() {
            let start = ((first + i as u64) * unit).max(offset);
            let stop = ((first + i as u64 + 1) * unit).min(kept_end);
            if start >= stop {
                break; // past the file's new end: nothing of it survives
            }
            let bytes = &mut image[start as usize..stop as usize];
            if is_new {
                bytes.copy_from_slice(&data[(start - offset) as usize..(stop - offset) as usize]);
                continue;
            }
            self.report.sectors_torn += 1;
            let new_bytes = &data[(start - offset) as usize..(stop - offset) as usize];
            let rewritten_data_lost = bytes
                .iter()
                .rposition(|b| *b != 0)
                .is_some_and(|last| bytes[..=last] == new_bytes[..=last]);
            // A damaged sector is damaged whole: its bytes before the write
            // (a write starting mid-sector) go with it.
            let unit_start = (first + i as u64) * unit;
            let durable_before_lost = image[unit_start as usize..start as usize]
                .iter()
                .any(|b| *b != 0);
            let zeroed = self.rng.chance(self.cfg.zero_sector_probability);
            if zeroed {
                image[unit_start as usize..stop as usize].fill(0);
                self.report.sectors_zeroed += 1;
            }
            let unreadable = self.rng.chance(self.cfg.eio_sector_probability);
            if unreadable {
                for s in unit_start / sector..=(stop - 1) / sector {
                    self.eio.insert((path.to_path_buf(), s));
                }
                self.report.sectors_eio += 1;
            }
            if zeroed || unreadable {
                self.report.damaged_units.push(DamagedUnit {
                    path: path.to_path_buf(),
                    offset: start,
                    len: stop - start,
                    zeroed,
                    unreadable,
                    durable_data_lost: rewritten_data_lost || durable_before_lost,
                });
            }
        }
        self.report.writes_torn += 1;
        self.report.writes_cut_short += file_cut_at.is_some() as u64;
        self.report.torn_writes.push(TornWrite {
            path: path.to_path_buf(),
            offset,
            len: data.len() as u64,
            file_cut_at,
        });
    }

    /// Where a torn write that extends the file (old length `len`) leaves
    /// its end: in half the cases a unit boundary inside the write and past
    /// `len`, each equally likely (the file never shrinks); `None`: the
    /// write's end. A write that extends the file by less than a unit
    /// cannot end short.
    fn cut_extension(&mut self, len: u64, offset: u64, end: u64) -> Option<u64> {
        if end <= len {
            return None;
        }
        let unit = self.cfg.unit();
        let lowest = offset.max(len) / unit + 1;
        let highest = end.div_ceil(unit) - 1;
        if lowest > highest || !self.rng.chance(0.5) {
            return None;
        }
        Some((lowest + self.rng.below(highest - lowest + 1)) * unit)
    }
}

/// Applies a random prefix of each directory's queue to the durable names.
fn crash_names(st: &mut State, rng: &mut SplitMix64, report: &mut CrashReport) {
    for (_dir, ops) in std::mem::take(&mut st.dir_pending) {
        let kept = rng.below(ops.len() as u64 + 1) as usize;
        for op in &ops[..kept] {
            op.apply(&mut st.durable_ns);
        }
        report.dir_ops_applied += kept as u64;
        report.dir_ops_lost += (ops.len() - kept) as u64;
    }
}

impl SimFileSystem {
    /// A file system whose durable and live states are `image`.
    pub fn from_image(image: SimImage, stats: Arc<IoStats>) -> Self {
        let mut st = State::new();
        st.dirs = image.dirs;
        for (path, bytes) in image.files {
            let ino = st.next_ino;
            st.next_ino += 1;
            let live = bytes.clone();
            let inode = Inode {
                durable: bytes,
                live,
                ..Inode::default()
            };
            st.inodes.insert(ino, inode);
            st.live_ns.insert(path.clone(), ino);
            st.durable_ns.insert(path, ino);
        }
        Self::with_state(st, stats)
    }

    /// The process dies but the machine does not (kill -9): its handles
    /// close, releasing their locks, and nothing else changes. Unsynced writes and directory
    /// operations stay pending in the page cache, readable by the next
    /// process and still lost or torn by a later crash.
    pub fn process_crash(&self) {
        let mut guard = self.shared.state.lock();
        let st = &mut *guard;
        st.next_generation();
        st.faults.power_cut_after = None;
        let inos: Vec<u64> = st.inodes.keys().copied().collect();
        for ino in inos {
            if let Some(inode) = st.inodes.get_mut(&ino) {
                inode.handles = 0;
            }
            st.maybe_free(ino);
        }
        st.log(trace_op(TraceKind::ProcessCrash, Path::new("")), &Ok(()));
    }

    /// An independent copy of everything, pending operations, faults and
    /// trace included, sharing the statistics: crash the same state with
    /// many seeds. Handles of `self` do not reach the copy.
    pub fn fork(&self) -> Self {
        let mut st = self.shared.state.lock().clone();
        st.inodes.values_mut().for_each(|i| i.handles = 0);
        st.locks.clear();
        Self::with_state(st, self.shared.stats.clone())
    }

    /// The durable state: what a crash that loses every pending operation
    /// would leave.
    pub fn snapshot_durable(&self) -> SimImage {
        let st = self.shared.state.lock();
        let files = st.durable_ns.iter();
        let files = files.map(|(p, ino)| (p.clone(), st.inodes[ino].durable.clone()));
        SimImage {
            files: files.collect(),
            dirs: st.dirs.clone(),
        }
    }

    /// Loses power: builds a new durable state from the pending operations
    /// and `seed` (see the rules above), makes the live state equal to it,
    /// and makes every open handle stale, releasing every lock. The same state and seed give the
    /// same image.
    pub fn crash(&self, seed: u64, cfg: &CrashConfig) -> CrashReport {
        cfg.validate();
        let mut rng = SplitMix64::new(seed);
        let mut report = CrashReport {
            seed,
            ..CrashReport::default()
        };
        let mut guard = self.shared.state.lock();
        let st = &mut *guard;
        crash_names(st, &mut rng, &mut report);
        for (path, ino) in &st.live_ns {
            if st.durable_ns.get(path) != Some(ino) {
                report.lost_files.push(path.clone());
            }
        }
        report.files_lost = report.lost_files.len() as u64;
        // A file is reached by its first durable name (there is one: the
        // simulation makes no hard links).
        let mut names: BTreeMap<u64, PathBuf> = BTreeMap::new();
        for (path, ino) in &st.durable_ns {
            names.entry(*ino).or_insert_with(|| path.clone());
        }
        let lost: u64 = st
            .inodes
            .iter()
            .filter(|(ino, _)| !names.contains_key(ino))
            .map(|(_, i)| {
                i.pending
                    .iter()
                    .filter(|p| matches!(p, Pending::Write { .. }))
                    .count() as u64
            })
            .sum();
        report.writes_of_lost_files = lost;
        st.inodes.retain(|ino, _| names.contains_key(ino));
        let eio_before = st.faults.read_eio_on.len();
        let mut crasher = Crasher {
            cfg,
            rng,
            report,
            eio: &mut st.faults.read_eio_on,
        };
        for (ino, inode) in st.inodes.iter_mut() {
            crasher.file(inode, &names[ino]);
        }
        let report = crasher.report;
        if st.faults.read_eio_on.len() > eio_before {
            st.faults.eio_sector_size = cfg.sector_size as u64;
        }
        st.faults.power_cut_after = None;
        st.live_ns = st.durable_ns.clone();
        st.next_generation();
        assert_eq!(st.inodes.len(), names.len());
        let op = TraceOp {
            note: Some(format!("seed {seed}")),
            ..trace_op(TraceKind::Crash, Path::new(""))
        };
        st.log(op, &Ok(()));
        report
    }
}
