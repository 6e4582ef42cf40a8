//! A bound on the data segment files a database keeps open at once, as
//! PostgreSQL's fd.c keeps its virtual file descriptors under
//! `max_files_per_process`: past the bound the least recently used
//! segments are closed, and each opens again at its next use. Without it a
//! database of more tables than `ulimit -n` allows could not even start.
//!
//! A closed segment must lose nothing an fsync should cover: a data file's
//! fsync reaches only the segments open at the time, so a segment written
//! through since its last fsync is fsynced before it closes (PostgreSQL
//! instead remembers the file in its fsync request queue and reopens it at
//! the checkpoint). Clean segments are closed first, so under a workload
//! that fits the bound no fsync is added.

use super::Issuer;
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Weak};

/// The fewest data segments a database may be held to.
pub const MIN_OPEN_DATA_FILES: usize = crate::options::MIN_FILES_PER_PROCESS;

/// What a database may keep open, and the clock that says which segment
/// was used least recently.
pub struct OpenFileLimit {
    limit: usize,
    open: AtomicUsize,
    /// Moves at every opening; a segment notes it at every use. Uses
    /// between two openings look alike, which is all the choice needs.
    clock: AtomicU64,
    /// Segments closed to stay under the bound.
    closed: AtomicU64,
    files: Mutex<Vec<Weak<dyn SegmentOwner>>>,
}

/// A file whose segments count against the bound (a data file,
/// `segmented::SegmentedFile`).
pub(crate) trait SegmentOwner: Send + Sync {
    /// Its open segments' ages.
    fn segment_ages(&self) -> Vec<SegmentAge>;
    /// Closes `segment` if open and unused (after an fsync where written
    /// since its last): true if it closed.
    fn close_if_idle(&self, segment: u64, who: Issuer) -> Result<bool>;
}

/// One open segment, as [`OpenFileLimit::enforce`] sees it.
pub(crate) struct SegmentAge {
    pub segment: u64,
    pub last_use: u64,
    /// Written through since its last fsync: closing it costs an fsync.
    pub dirty: bool,
}

impl OpenFileLimit {
    /// At most `limit` segments open at once (at least
    /// [`MIN_OPEN_DATA_FILES`]; `usize::MAX` for no bound).
    pub fn new(limit: usize) -> Arc<OpenFileLimit> {
        Arc::new(OpenFileLimit {
            limit: limit.max(MIN_OPEN_DATA_FILES),
            open: AtomicUsize::new(0),
            clock: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            files: Mutex::new(Vec::new()),
        })
    }

    /// No bound (tools, tests).
    pub fn unlimited() -> Arc<OpenFileLimit> {
        OpenFileLimit::new(usize::MAX)
    }

    /// The bound: `max_files_per_process`, or fewer where the process's
    /// RLIMIT_NOFILE leaves fewer ([`data_file_budget`]).
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Segments open now.
    pub fn open_now(&self) -> usize {
        self.open.load(SeqCst)
    }

    /// Segments closed so far to stay under the bound.
    pub fn closed_for_limit(&self) -> u64 {
        self.closed.load(Relaxed)
    }

    pub(crate) fn now(&self) -> u64 {
        self.clock.load(Relaxed)
    }

    /// A data file whose segments count against the bound.
    pub(crate) fn register(&self, file: Weak<dyn SegmentOwner>) {
        let mut files = self.files.lock();
        files.retain(|f| f.strong_count() > 0);
        files.push(file);
    }

    /// A segment was opened; returns the clock it was opened at.
    pub(crate) fn opened(&self) -> u64 {
        self.open.fetch_add(1, SeqCst);
        self.clock.fetch_add(1, Relaxed) + 1
    }

    /// `n` segments were closed.
    pub(crate) fn released(&self, n: usize) {
        if n > 0 {
            let before = self.open.fetch_sub(n, SeqCst);
            debug_assert!(before >= n, "closed more segments than were open");
        }
    }

    /// Closes least recently used segments until the open ones are back
    /// under the bound, and a few more (a 32nd of it) so that the next
    /// openings find room without a search each. Segments in use (a read,
    /// a write or an fsync holds them) stay open: a bound exceeded for a
    /// moment by the calls in flight is the price of never waiting.
    pub(crate) fn enforce(&self, who: Issuer) -> Result<()> {
        let open = self.open_now();
        if open <= self.limit {
            return Ok(());
        }
        let files: Vec<Arc<dyn SegmentOwner>> = {
            let mut files = self.files.lock();
            files.retain(|f| f.strong_count() > 0);
            files.iter().filter_map(Weak::upgrade).collect()
        };
        let mut ages: Vec<(usize, SegmentAge)> = Vec::new();
        for (i, f) in files.iter().enumerate() {
            ages.extend(f.segment_ages().into_iter().map(|a| (i, a)));
        }
        ages.sort_by_key(|(_, a)| (a.dirty, a.last_use));
        let goal = open - self.limit + self.limit / 32;
        let mut done = 0;
        for (i, age) in ages {
            if done >= goal.max(1) {
                break;
            }
            if files[i].close_if_idle(age.segment, who)? {
                done += 1;
            }
        }
        self.closed.fetch_add(done as u64, Relaxed);
        Ok(())
    }
}

/// The descriptors of this process not in use now, under its soft
/// RLIMIT_NOFILE; `None` where they cannot be counted.
pub fn descriptors_free() -> Option<usize> {
    // SAFETY: a plain C struct filled by the call.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a valid resource and a struct that outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    let in_use = std::fs::read_dir("/proc/self/fd").ok()?.count();
    let soft = usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX);
    Some(soft.saturating_sub(in_use))
}

/// How many data segments a database may keep open: `max_files` (the
/// `max_files_per_process` setting), or what the descriptors free now
/// leave after `reserved` for everything else (WAL segments, double-write
/// and spill files, a server's sockets), as PostgreSQL's set_max_safe_fds
/// does. Refused, naming the limit, where that leaves fewer than
/// [`MIN_OPEN_DATA_FILES`].
pub fn data_file_budget(max_files: usize, reserved: usize) -> Result<usize> {
    let Some(free) = descriptors_free() else {
        return Ok(max_files.max(MIN_OPEN_DATA_FILES));
    };
    let usable = free.saturating_sub(reserved);
    if usable < MIN_OPEN_DATA_FILES {
        return Err(Error::InvalidSetting {
            name: "max_files_per_process",
            detail: format!(
                "RLIMIT_NOFILE leaves {free} file descriptors free, {reserved} of them kept for \
                 WAL, spill files and connections: fewer than the {MIN_OPEN_DATA_FILES} data files \
                 a database needs open (raise `ulimit -n`)"
            ),
        });
    }
    Ok(max_files.min(usable).max(MIN_OPEN_DATA_FILES))
}

#[cfg(test)]
#[path = "open_files_tests.rs"]
mod tests;
