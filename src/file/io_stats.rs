//! I/O statistics, per issuer and file kind, like PostgreSQL's pg_stat_io.
//!
//! Counters are relaxed atomics: they are figures for reports, never used to
//! decide anything.

use crate::file::{FileKind, Issuer};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The operations counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoOp {
    Read,
    Write,
    Fsync,
    Writeback,
}

const OPS: usize = 4;
const CELLS: usize = Issuer::ALL.len() * FileKind::ALL.len() * OPS;

/// Operation and byte counters per (issuer, file kind, operation).
pub struct IoStats {
    calls: [AtomicU64; CELLS],
    bytes: [AtomicU64; CELLS],
}

impl Default for IoStats {
    fn default() -> Self {
        IoStats {
            calls: std::array::from_fn(|_| AtomicU64::new(0)),
            bytes: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

fn cell(who: Issuer, kind: FileKind, op: IoOp) -> usize {
    (who.index() * FileKind::ALL.len() + kind.index()) * OPS + op as usize
}

impl IoStats {
    /// Counts one call moving `bytes` bytes.
    pub fn record(&self, who: Issuer, kind: FileKind, op: IoOp, bytes: u64) {
        let c = cell(who, kind, op);
        self.calls[c].fetch_add(1, Relaxed);
        self.bytes[c].fetch_add(bytes, Relaxed);
    }

    /// Calls of `op` on files of `kind`, by any issuer.
    pub fn calls(&self, kind: FileKind, op: IoOp) -> u64 {
        Issuer::ALL
            .iter()
            .map(|w| self.calls[cell(*w, kind, op)].load(Relaxed))
            .sum()
    }

    /// Bytes moved by `op` on files of `kind`, by any issuer.
    pub fn bytes(&self, kind: FileKind, op: IoOp) -> u64 {
        Issuer::ALL
            .iter()
            .map(|w| self.bytes[cell(*w, kind, op)].load(Relaxed))
            .sum()
    }

    /// Bytes moved by `op` on files of `kind` by one issuer.
    pub fn bytes_by(&self, who: Issuer, kind: FileKind, op: IoOp) -> u64 {
        self.bytes[cell(who, kind, op)].load(Relaxed)
    }

    /// Calls of `op` on files of `kind` by one issuer.
    pub fn calls_by(&self, who: Issuer, kind: FileKind, op: IoOp) -> u64 {
        self.calls[cell(who, kind, op)].load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_issuer_and_kind() {
        let s = IoStats::default();
        s.record(Issuer::Client, FileKind::Data, IoOp::Write, 8192);
        s.record(Issuer::Checkpointer, FileKind::Data, IoOp::Write, 8192);
        s.record(Issuer::WalWriter, FileKind::Wal, IoOp::Fsync, 0);
        assert_eq!(s.calls(FileKind::Data, IoOp::Write), 2);
        assert_eq!(s.bytes(FileKind::Data, IoOp::Write), 16384);
        assert_eq!(s.calls_by(Issuer::Client, FileKind::Data, IoOp::Write), 1);
        assert_eq!(s.calls(FileKind::Wal, IoOp::Fsync), 1);
        assert_eq!(s.calls(FileKind::Wal, IoOp::Write), 0);
    }
}
