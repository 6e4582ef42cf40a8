//! The checkpoint record: its payload, the one place it is logged (by
//! every checkpoint and by database creation), and what the control file
//! takes from it.

use crate::control::{ControlFile, DbState};
use crate::error::{Error, Result};
use crate::file::Issuer;
use crate::lsn::Lsn;
use crate::wal::{RecordData, RecordKind, Wal};

/// What a checkpoint record says (its main data, 32 bytes, little-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CheckpointInfo {
    /// Where redo starts for this checkpoint.
    pub redo: Lsn,
    /// The next transaction id at the checkpoint.
    pub next_xid: u64,
    /// The next data file id at the checkpoint.
    pub next_file_id: u32,
    /// True for a shutdown checkpoint (nothing to redo after it).
    pub shutdown: bool,
    /// Unix time in seconds.
    pub time: u64,
}

/// Encoded size of [`CheckpointInfo`].
pub const CHECKPOINT_INFO_SIZE: usize = 32;

impl CheckpointInfo {
    /// The time field's value for a checkpoint made now.
    pub fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }

    /// Makes `control` name this checkpoint, logged at `lsn`.
    pub fn note_in(&self, control: &mut ControlFile, lsn: Lsn) {
        control.checkpoint_lsn = lsn;
        control.redo_lsn = self.redo;
        control.next_xid = self.next_xid;
        control.next_file_id = self.next_file_id;
        control.checkpoint_time = self.time;
        control.state = if self.shutdown {
            DbState::ShutDown
        } else {
            DbState::InProduction
        };
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(CHECKPOINT_INFO_SIZE);
        b.extend_from_slice(&self.redo.0.to_le_bytes());
        b.extend_from_slice(&self.next_xid.to_le_bytes());
        b.extend_from_slice(&self.next_file_id.to_le_bytes());
        b.extend_from_slice(&(self.shutdown as u32).to_le_bytes());
        b.extend_from_slice(&self.time.to_le_bytes());
        debug_assert_eq!(b.len(), CHECKPOINT_INFO_SIZE);
        b
    }

    /// Decodes a checkpoint record's main data; `at` names the record for errors.
    pub fn decode(b: &[u8], at: Lsn) -> Result<CheckpointInfo> {
        if b.len() != CHECKPOINT_INFO_SIZE {
            return Err(Error::corruption(
                "WAL",
                format!("LSN {at}"),
                format!(
                    "checkpoint record of {} bytes, expected {CHECKPOINT_INFO_SIZE}",
                    b.len()
                ),
            ));
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        Ok(CheckpointInfo {
            redo: Lsn(u64_at(0)),
            next_xid: u64_at(8),
            next_file_id: u32_at(16),
            shutdown: u32_at(20) != 0,
            time: u64_at(24),
        })
    }
}

/// Logs a checkpoint record and flushes the WAL past it; returns the
/// record's LSN (what the control file names).
pub fn log_checkpoint(wal: &Wal, info: &CheckpointInfo, who: Issuer) -> Result<Lsn> {
    let (lsn, end) = wal.insert(&RecordData {
        kind: RecordKind::Checkpoint,
        xid: 0,
        blocks: Vec::new(),
        main: info.encode(),
    })?;
    wal.flush(end, who)?;
    Ok(lsn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_length() {
        let c = CheckpointInfo {
            redo: Lsn(77),
            next_xid: 9,
            next_file_id: 3,
            shutdown: true,
            time: 1_700_000_000,
        };
        assert_eq!(CheckpointInfo::decode(&c.encode(), Lsn(80)).unwrap(), c);
        assert!(CheckpointInfo::decode(&[0; 5], Lsn(80)).is_err());
    }
}
