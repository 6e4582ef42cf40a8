//! Statistics: every counter of the engine in one snapshot, grouped like
//! PostgreSQL's cumulative statistics views, and kept across clean
//! shutdowns in `untorn.stats`.
//!
//! - `wal` (pg_stat_wal): from the WAL writer's counters (`crate::wal::WalStats`)
//!   and the file layer's WAL write calls.
//! - `io` (pg_stat_io): a row per (issuer, file kind) with reads, writes,
//!   writebacks and fsyncs, from `crate::file::IoStats`. Rows with no I/O
//!   are left out; [`Statistics::io`] reads any row, zero if absent.
//! - `checkpointer` (pg_stat_checkpointer): from `CheckpointStats`;
//!   `checkpoint_log` holds the lines of the latest opening only.
//! - `buffer`: the buffer pool's hits, reads, evictions, checksum failures.
//! - `recovery`: what the redo passes at opening did (the `RecoveryReport`s).
//! - `double_write`: a row per writer (checkpointer, background writer,
//!   client) of what went through its shard of the double-write area,
//!   from `crate::protect::double_writes::DoubleWriteStats`.
//!
//! Persistence, as PostgreSQL keeps pg_stat/ at shutdown: `Database::close`
//! saves the totals (this opening's plus those loaded at open) through
//! the file layer (temporary name, fsync, rename, directory fsync). An
//! opening after a clean shutdown loads them; after a crash they start
//! from zero (PostgreSQL resets its statistics after crash recovery). The
//! file is not durability-critical: failing to read or write it is logged
//! with `tracing::warn!`, never an error. docs/FORMAT.md describes it.

use crate::buffer::BufferStats;
use crate::checkpoint::{CheckpointLog, CheckpointStats};
use crate::control::{ControlFile, DbState};
use crate::error::{Error, Result};
use crate::file::{FileKind, FileSystem, IoOp, IoStats, Issuer, OpenOptions};
use crate::lsn::Lsn;
use crate::protect::double_writes::DoubleWriteStats;
use crate::recovery::RecoveryReport;
use crate::wal::WalStats;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The statistics file's name, in the database directory.
pub const STATS_FILE_NAME: &str = "untorn.stats";
const STATS_TMP_NAME: &str = "untorn.stats.tmp";
/// The version of the statistics file's layout.
pub const STATS_FORMAT_VERSION: u32 = 1;

/// A number a view adds up across openings and subtracts for a delta
/// (named apart from the views' own `plus` and `minus`, which take
/// references).
trait Figure: Copy {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
}

impl Figure for u64 {
    fn add(self, o: u64) -> u64 {
        self.saturating_add(o)
    }
    fn sub(self, o: u64) -> u64 {
        self.saturating_sub(o)
    }
}

impl Figure for f64 {
    fn add(self, o: f64) -> f64 {
        self + o
    }
    fn sub(self, o: f64) -> f64 {
        (self - o).max(0.0)
    }
}

/// Adding up (totals across openings) or subtracting (a delta).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Plus,
    Minus,
}

impl Op {
    fn apply<T: Figure>(self, a: T, b: T) -> T {
        match self {
            Op::Plus => a.add(b),
            Op::Minus => a.sub(b),
        }
    }
}

/// A view of numeric figures, with field-wise `plus` and `minus` (so a
/// figure added to a view can never be forgotten in either). Fields missing
/// from a file written by an older build read as zero.
macro_rules! view {
    ($(#[$meta:meta])* $name:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $name {
            /// Field-wise sum.
            pub fn plus(&self, o: &Self) -> Self {
                self.apply(o, Op::Plus)
            }
            /// Field-wise difference, never below zero.
            pub fn minus(&self, o: &Self) -> Self {
                self.apply(o, Op::Minus)
            }
            pub(in crate::stats) fn apply(&self, o: &Self, op: Op) -> Self {
                $name { $($field: op.apply(self.$field, o.$field),)* }
            }
        }

        // So that a view can be a field of another (a row per writer).
        impl Figure for $name {
            fn add(self, o: Self) -> Self {
                self.apply(&o, Op::Plus)
            }
            fn sub(self, o: Self) -> Self {
                self.apply(&o, Op::Minus)
            }
        }
    };
}

view! {
    /// pg_stat_wal.
    WalView {
        /// Records inserted (wal_records).
        records: u64,
        /// Full-page images (wal_fpi), their bytes as logged and before
        /// `wal_compression` (holes left out in both).
        fpi: u64,
        fpi_bytes: u64,
        fpi_bytes_uncompressed: u64,
        /// Bytes of records inserted, headers included (wal_bytes).
        bytes: u64,
        /// Write calls on WAL segment files, zero-filling of new segments
        /// included (wal_write).
        writes: u64,
        /// Bytes written by flushes: records, page headers and the padding
        /// that ends each flush on a sector boundary.
        bytes_written: u64,
        padding_bytes: u64,
        /// fdatasync calls by flushes (wal_sync).
        fsyncs: u64,
        /// Flush requests (commits, and page writes that needed the WAL
        /// first), and those that found their LSN already durable.
        flush_requests: u64,
        flushes_without_io: u64,
        /// Of the flush requests, those page writes made, and the flush
        /// rounds (fsyncs no commit asked for) they led.
        page_write_flush_requests: u64,
        page_write_flush_rounds: u64,
        /// `flush_requests / fsyncs`: how many commits one fsync served
        /// (group commit). Recomputed, never summed.
        commits_per_fsync: f64,
        segments_created: u64,
        segments_recycled: u64,
        segments_removed: u64,
    }
}

view! {
    /// One row's figures of pg_stat_io: calls and bytes per operation.
    IoFigures {
        reads: u64,
        read_bytes: u64,
        writes: u64,
        write_bytes: u64,
        /// Requests to start writeback (sync_file_range) and their bytes.
        writebacks: u64,
        writeback_bytes: u64,
        fsyncs: u64,
    }
}

view! {
    /// pg_stat_checkpointer.
    CheckpointerView {
        /// Started by `checkpoint_timeout` (num_timed).
        timed: u64,
        /// Every other reason: WAL growth, asked for, end of recovery,
        /// shutdown (num_requested).
        requested: u64,
        /// Pages the checkpointer wrote (buffers_written).
        pages_written: u64,
        /// Seconds writing (naps of a spread checkpoint included) and
        /// fsyncing (write_time, sync_time).
        write_s: f64,
        sync_s: f64,
    }
}

view! {
    /// The buffer pool.
    BufferView {
        /// Pins that found the page in a frame, and pages read from disk.
        hits: u64,
        reads: u64,
        /// Frames taken from another page, and of those the ones whose page
        /// was dirty (written by the client that needed the frame).
        evictions: u64,
        dirty_evictions: u64,
        /// Pages written by any issuer, and the batches they went in.
        pages_written: u64,
        write_batches: u64,
        /// Pages read from disk whose stored checksum differed from the
        /// computed one (pg_stat_database.checksum_failures), whether
        /// recovery then repaired them or the read failed.
        checksum_failures: u64,
    }
}

view! {
    /// What redo did at the openings these figures cover.
    RecoveryView {
        records_replayed: u64,
        /// Pages written whole from a full-page image, and of those the
        /// compressed images.
        pages_restored_from_images: u64,
        compressed_images_restored: u64,
        changes_skipped_by_lsn: u64,
        /// Pages that failed their checks and that an image repaired.
        damaged_pages_repaired: u64,
        /// Torn pages restored from the double-write area.
        pages_repaired_from_double_writes: u64,
        /// Pages that failed their checks and that nothing repaired.
        damaged_pages_left: u64,
    }
}

/// `num / den`, 0 when `den` is.
fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// One row of the io view.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoRow {
    pub issuer: Issuer,
    pub kind: FileKind,
    #[serde(flatten)]
    pub figures: IoFigures,
}

/// Every counter, grouped like PostgreSQL's views.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Statistics {
    /// How many openings these figures cover (counting stops at a crash).
    pub openings: u64,
    pub wal: WalView,
    /// A row per (issuer, file kind) that did any I/O, in issuer then kind
    /// order.
    pub io: Vec<IoRow>,
    pub checkpointer: CheckpointerView,
    pub buffer: BufferView,
    pub recovery: RecoveryView,
    /// Double writes by writer (zero under other modes).
    pub double_write: DoubleWriteView,
    /// The checkpoints of the latest opening, oldest first (each
    /// `started_s` counts from that opening).
    pub checkpoint_log: Vec<CheckpointLog>,
}

/// Where the counters of one opening live.
pub(crate) struct Sources<'a> {
    pub wal: WalStats,
    pub io: &'a IoStats,
    pub buffer: &'a BufferStats,
    pub checkpoints: CheckpointStats,
    pub recovery: &'a RecoveryReport,
    pub double_writes: &'a DoubleWriteStats,
}

impl Statistics {
    /// The figures of one opening.
    pub(crate) fn collect(s: Sources<'_>) -> Statistics {
        let w = &s.wal;
        let wal = WalView {
            records: w.records,
            fpi: w.fpi,
            fpi_bytes: w.fpi_bytes,
            fpi_bytes_uncompressed: w.fpi_bytes_uncompressed,
            bytes: w.bytes,
            writes: s.io.calls(FileKind::Wal, IoOp::Write),
            bytes_written: w.bytes_written,
            padding_bytes: w.padding_bytes,
            fsyncs: w.fsyncs,
            flush_requests: w.flush_requests,
            flushes_without_io: w.flushes_without_io,
            page_write_flush_requests: w.page_write_flush_requests,
            page_write_flush_rounds: w.page_write_flush_rounds,
            commits_per_fsync: 0.0,
            segments_created: w.segments_created,
            segments_recycled: w.segments_recycled,
            segments_removed: w.segments_removed,
        };
        let io = io_rows(|issuer, kind| {
            let c = |op| s.io.calls_by(issuer, kind, op);
            let b = |op| s.io.bytes_by(issuer, kind, op);
            IoFigures {
                reads: c(IoOp::Read),
                read_bytes: b(IoOp::Read),
                writes: c(IoOp::Write),
                write_bytes: b(IoOp::Write),
                writebacks: c(IoOp::Writeback),
                writeback_bytes: b(IoOp::Writeback),
                fsyncs: c(IoOp::Fsync),
            }
        });
        let l = |a: &AtomicU64| a.load(Relaxed);
        let b = s.buffer;
        let buffer = BufferView {
            hits: b.hits.load(),
            reads: b.reads.load(),
            evictions: b.evictions.load(),
            dirty_evictions: l(&b.dirty_evictions),
            pages_written: l(&b.pages_written),
            write_batches: l(&b.write_batches),
            checksum_failures: l(&b.checksum_failures),
        };
        let c = &s.checkpoints;
        let checkpointer = CheckpointerView {
            timed: c.timed,
            requested: c.requested,
            pages_written: c.pages_written,
            write_s: c.write_s,
            sync_s: c.sync_s,
        };
        let r = s.recovery;
        let recovery = RecoveryView {
            records_replayed: r.records_replayed,
            pages_restored_from_images: r.pages_restored_from_images,
            compressed_images_restored: r.compressed_images_restored,
            changes_skipped_by_lsn: r.changes_skipped_by_lsn,
            damaged_pages_repaired: r.damaged_pages_repaired.len() as u64,
            pages_repaired_from_double_writes: r.pages_repaired_from_double_writes,
            damaged_pages_left: r.damaged_pages_left.len() as u64,
        };
        Statistics {
            openings: 1,
            wal,
            io,
            checkpointer,
            buffer,
            recovery,
            double_write: DoubleWriteView::collect(s.double_writes),
            checkpoint_log: c.log.clone(),
        }
        .derive()
    }

    /// The io row of (`issuer`, `kind`); zero if it did no I/O.
    pub fn io(&self, issuer: Issuer, kind: FileKind) -> IoFigures {
        self.io
            .iter()
            .find(|r| r.issuer == issuer && r.kind == kind)
            .map(|r| r.figures)
            .unwrap_or_default()
    }

    /// The io figures of every issuer on files of `kind`.
    pub fn io_of_kind(&self, kind: FileKind) -> IoFigures {
        Issuer::ALL
            .iter()
            .fold(IoFigures::default(), |sum, w| sum.plus(&self.io(*w, kind)))
    }

    /// These figures on top of `earlier` ones (totals across openings);
    /// the checkpoint log stays this opening's.
    pub fn plus(&self, earlier: &Statistics) -> Statistics {
        self.combine(earlier, Op::Plus, self.checkpoint_log.clone())
    }

    /// What happened between `base` (taken earlier from the same database)
    /// and these figures; the checkpoint log keeps the checkpoints completed
    /// in between (a run's checkpoint series).
    pub fn since(&self, base: &Statistics) -> Statistics {
        let c = &self.checkpointer;
        let done = (c.timed + c.requested)
            .saturating_sub(base.checkpointer.timed + base.checkpointer.requested);
        let log = &self.checkpoint_log;
        let new = log[log.len().saturating_sub(done as usize)..].to_vec();
        self.combine(base, Op::Minus, new)
    }

    fn combine(&self, o: &Statistics, op: Op, checkpoint_log: Vec<CheckpointLog>) -> Statistics {
        let io = io_rows(|issuer, kind| self.io(issuer, kind).apply(&o.io(issuer, kind), op));
        Statistics {
            openings: op.apply(self.openings, o.openings),
            wal: self.wal.apply(&o.wal, op),
            io,
            checkpointer: self.checkpointer.apply(&o.checkpointer, op),
            buffer: self.buffer.apply(&o.buffer, op),
            recovery: self.recovery.apply(&o.recovery, op),
            double_write: self.double_write.apply(&o.double_write, op),
            checkpoint_log,
        }
        .derive()
    }

    /// Recomputes the ratios from the counts.
    fn derive(mut self) -> Statistics {
        let w = &mut self.wal;
        w.commits_per_fsync = ratio(w.flush_requests, w.fsyncs);
        self.double_write = self.double_write.with_ratios();
        self
    }
}

/// The io view's rows: every (issuer, kind) with any I/O, in issuer then
/// kind order.
fn io_rows(figures: impl Fn(Issuer, FileKind) -> IoFigures) -> Vec<IoRow> {
    let mut rows = Vec::new();
    for issuer in Issuer::ALL {
        for kind in FileKind::ALL {
            let figures = figures(issuer, kind);
            if figures != IoFigures::default() {
                rows.push(IoRow {
                    issuer,
                    kind,
                    figures,
                });
            }
        }
    }
    rows
}

/// The statistics file: the totals saved at a clean shutdown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedStatistics {
    pub format_version: u32,
    /// The shutdown checkpoint they were saved after. An opening uses them
    /// only if the control file still names it: otherwise they are stale
    /// (a later close failed to save its own).
    pub checkpoint_lsn: Lsn,
    /// When they were saved (unix seconds).
    pub saved_unix_s: u64,
    pub statistics: Statistics,
}

/// The statistics file's path in database directory `dir`.
pub fn stats_path(dir: &Path) -> PathBuf {
    dir.join(STATS_FILE_NAME)
}

/// Replaces the statistics file: temporary name, fsync, rename, directory
/// fsync, so a crash leaves the old file or the new one, never half.
pub fn save(
    fs: &dyn FileSystem,
    dir: &Path,
    checkpoint_lsn: Lsn,
    statistics: &Statistics,
) -> Result<()> {
    let saved = SavedStatistics {
        format_version: STATS_FORMAT_VERSION,
        checkpoint_lsn,
        saved_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        statistics: statistics.clone(),
    };
    let bytes = serde_json::to_vec_pretty(&saved).map_err(|e| Error::Invalid(e.to_string()))?;
    let who = Issuer::Client;
    let tmp = dir.join(STATS_TMP_NAME);
    let file = fs.open(&tmp, FileKind::Control, OpenOptions::create())?;
    file.set_len(0, who)?;
    file.write_at(&bytes, 0, who)?;
    file.sync_all(who)?;
    drop(file);
    fs.rename(&tmp, &stats_path(dir), FileKind::Control, who)?;
    fs.sync_dir(dir, who)
}

/// Reads the statistics file of `dir`: `None` if there is none, an error
/// naming the file if it cannot be read or parsed.
pub fn read_saved(fs: &dyn FileSystem, dir: &Path) -> Result<Option<SavedStatistics>> {
    let path = stats_path(dir);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let file = fs.open(&path, FileKind::Control, OpenOptions::read_only())?;
    // The file is a few kilobytes; a huge one is not ours.
    let len = file.len()?.min(16 << 20) as usize;
    let mut buf = vec![0u8; len];
    let n = file.read_at(&mut buf, 0, Issuer::Tool)?;
    buf.truncate(n);
    let saved: SavedStatistics = serde_json::from_slice(&buf)
        .map_err(|e| Error::corruption(&path, "statistics", e.to_string()))?;
    if saved.format_version != STATS_FORMAT_VERSION {
        return Err(Error::corruption(
            &path,
            "statistics",
            format!(
                "format version {} (this build reads {STATS_FORMAT_VERSION})",
                saved.format_version
            ),
        ));
    }
    Ok(Some(saved))
}

/// Whether `saved` holds the totals as of the state `control` describes:
/// saved at the shutdown checkpoint the control file names, and that
/// shutdown the last thing that happened to the database.
pub fn up_to_date(saved: &SavedStatistics, control: &ControlFile) -> bool {
    control.state == DbState::ShutDown && saved.checkpoint_lsn == control.checkpoint_lsn
}

/// The totals an opening starts from: those saved at the clean shutdown
/// the control file describes, or zero (after a crash, or when the file is
/// missing, stale or unreadable). Read before the opening changes the
/// control file.
pub(crate) fn load_at_open(fs: &dyn FileSystem, dir: &Path, control: &ControlFile) -> Statistics {
    let path = stats_path(dir);
    match read_saved(fs, dir) {
        Ok(Some(_)) if control.state != DbState::ShutDown => {
            tracing::info!(path = %path.display(), "statistics reset after an unclean shutdown");
            Statistics::default()
        }
        Ok(Some(saved)) if up_to_date(&saved, control) => saved.statistics,
        Ok(Some(saved)) => {
            tracing::warn!(
                path = %path.display(),
                saved_at = %saved.checkpoint_lsn,
                checkpoint = %control.checkpoint_lsn,
                "statistics saved at an older shutdown; starting from zero"
            );
            Statistics::default()
        }
        // A new database, or a close that failed to save (it warned then).
        Ok(None) => {
            if control.state == DbState::ShutDown {
                tracing::info!(path = %path.display(), "no statistics saved; starting from zero");
            }
            Statistics::default()
        }
        Err(e) => {
            tracing::warn!(error = %e, "statistics unreadable; starting from zero");
            Statistics::default()
        }
    }
}

/// Saves the totals at a clean close; a failure is logged, never returned
/// (the statistics are not worth failing a shutdown over).
pub(crate) fn save_at_close(
    fs: &dyn FileSystem,
    dir: &Path,
    checkpoint_lsn: Lsn,
    statistics: &Statistics,
) {
    if let Err(e) = save(fs, dir, checkpoint_lsn, statistics) {
        tracing::warn!(error = %e, dir = %dir.display(), "could not save the statistics");
    }
}

// After the `view!` macro, which it uses.
mod double_write;
pub use double_write::{DoubleWriteFigures, DoubleWriteView};

#[cfg(test)]
mod tests;
