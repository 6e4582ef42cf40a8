//! Where in a double-write batch a crash struck, read from the simulated
//! file system's trace (the laboratory sees only file calls, not the
//! engine's state).
//!
//! A batch, as the write path issues it: one write to a shard file of the
//! area, an fsync of that file, then its pages written in place by the
//! same issuer. A crash can land
//! - after the area write, before its fsync: the copies may be torn, the
//!   pages are untouched in place;
//! - after the fsync, before any in-place write;
//! - during the in-place writes: some pages written, maybe torn.
//!
//! Each is a crash recovery must handle from the area; the counts show the
//! laboratory reaches them.

use super::sim::{TraceKind, TraceOp};
use crate::file::{FileKind, Issuer};
use std::path::PathBuf;

/// Crashes that struck with a double-write batch in each phase (a crash
/// with batches in several phases counts in each).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BatchCrashes {
    pub after_area_write: u64,
    pub after_area_fsync: u64,
    pub during_in_place_writes: u64,
}

impl BatchCrashes {
    /// Crashes with some batch in flight.
    pub fn any(&self) -> bool {
        self.after_area_write + self.after_area_fsync + self.during_in_place_writes > 0
    }

    pub fn add(&mut self, other: &BatchCrashes) {
        self.after_area_write += other.after_area_write;
        self.after_area_fsync += other.after_area_fsync;
        self.during_in_place_writes += other.during_in_place_writes;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Written,
    Synced,
    InPlace,
}

struct Batch {
    shard: PathBuf,
    issuer: Option<Issuer>,
    pages: u64,
    in_place: u64,
    phase: Phase,
}

/// The phases the batches in flight were in when the power went, from the
/// calls since the last crash (`ops`, in order; failed calls changed
/// nothing and are skipped). `batch_pages` is `double_write_batch_pages`:
/// an area write of `b` blocks holds `b - ceil(b / (batch_pages + 1))`
/// pages (one header block per `batch_pages` images).
pub fn at_crash(ops: &[TraceOp], page_size: u64, batch_pages: u64) -> BatchCrashes {
    let mut batches: Vec<Batch> = Vec::new();
    for op in ops.iter().filter(|o| o.error.is_none()) {
        match (op.file_kind, op.op) {
            (Some(FileKind::DoubleWrite), TraceKind::Write) => {
                let blocks = op.len / page_size;
                batches.retain(|b| b.shard != op.path);
                batches.push(Batch {
                    shard: op.path.clone(),
                    issuer: op.issuer,
                    pages: blocks - blocks.div_ceil(batch_pages + 1),
                    in_place: 0,
                    phase: Phase::Written,
                });
            }
            (Some(FileKind::DoubleWrite), TraceKind::SyncAll | TraceKind::SyncData) => {
                for b in batches.iter_mut().filter(|b| b.shard == op.path) {
                    if b.phase == Phase::Written {
                        b.phase = Phase::Synced;
                    }
                }
            }
            (Some(FileKind::Data), TraceKind::Write) => {
                let mine = |b: &&mut Batch| b.issuer == op.issuer && b.phase != Phase::Written;
                if let Some(b) = batches.iter_mut().find(mine) {
                    b.in_place += op.len.div_ceil(page_size);
                    b.phase = Phase::InPlace;
                }
                batches.retain(|b| b.in_place < b.pages);
            }
            _ => {}
        }
    }
    let has = |p: Phase| batches.iter().any(|b| b.phase == p) as u64;
    BatchCrashes {
        after_area_write: has(Phase::Written),
        after_area_fsync: has(Phase::Synced),
        during_in_place_writes: has(Phase::InPlace),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PS: u64 = 8192;

    fn op(kind: FileKind, what: TraceKind, path: &str, len: u64, who: Issuer) -> TraceOp {
        TraceOp {
            seq: 0,
            op: what,
            path: path.into(),
            to: None,
            offset: 0,
            len,
            issuer: Some(who),
            file_kind: Some(kind),
            crc32c: None,
            note: None,
            error: None,
        }
    }

    fn area_write(blocks: u64) -> TraceOp {
        op(
            FileKind::DoubleWrite,
            TraceKind::Write,
            "dw/shard-0",
            blocks * PS,
            Issuer::Checkpointer,
        )
    }

    fn area_fsync() -> TraceOp {
        op(
            FileKind::DoubleWrite,
            TraceKind::SyncData,
            "dw/shard-0",
            0,
            Issuer::Checkpointer,
        )
    }

    fn in_place(pages: u64, who: Issuer) -> TraceOp {
        op(FileKind::Data, TraceKind::Write, "data/1", pages * PS, who)
    }

    fn phases(ops: &[TraceOp]) -> (u64, u64, u64) {
        let c = at_crash(ops, PS, 2);
        (
            c.after_area_write,
            c.after_area_fsync,
            c.during_in_place_writes,
        )
    }

    #[test]
    fn each_phase_of_a_batch_is_told_apart() {
        // 3 pages at 2 per header: 5 blocks.
        let mut ops = vec![area_write(5)];
        assert_eq!(phases(&ops), (1, 0, 0));
        ops.push(area_fsync());
        assert_eq!(phases(&ops), (0, 1, 0));
        // Another writer's page is not this batch's.
        ops.push(in_place(1, Issuer::Client));
        assert_eq!(phases(&ops), (0, 1, 0));
        ops.push(in_place(2, Issuer::Checkpointer));
        assert_eq!(phases(&ops), (0, 0, 1));
        ops.push(in_place(1, Issuer::Checkpointer));
        assert_eq!(phases(&ops), (0, 0, 0));
    }

    #[test]
    fn failed_calls_change_nothing() {
        let mut fsync = area_fsync();
        fsync.error = Some("power cut".into());
        assert_eq!(phases(&[area_write(3), fsync]), (1, 0, 0));
    }
}
