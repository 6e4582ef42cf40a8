//! The writer's configuration and its counters.

use crate::error::{Error, Result};
use crate::settings::{GB, MB, WAL_BLOCK_SIZES};
use crate::striped::StripedCounter;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The sizes the WAL was created with, the database's identity, and the
/// epoch of this opening.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalConfig {
    /// `wal_block_size`: 1 KB to 64 KB, a power of two, fixed at creation.
    pub block_size: u32,
    /// `wal_segment_size`: a power of two, 1 MB to 1 GB, fixed at creation.
    pub segment_size: u64,
    /// Written in each segment's long header; the reader refuses others.
    pub system_id: u64,
    /// Incremented (durably, in the control file) at every opening of the
    /// database, before the writer is created. Written in every page header
    /// and record header this writer starts. The reader ignores it.
    pub epoch: u32,
    /// The device sector (the control file's `sector_size`): every flush
    /// starts and ends on one, so none rewrites a sector of durable WAL.
    pub sector_size: u32,
}

impl WalConfig {
    /// Checks the sizes (see [`validate_sizes`]).
    pub fn validate(&self) -> Result<()> {
        validate_sizes(self.block_size, self.segment_size)?;
        let sector = self.sector_size;
        if !sector.is_power_of_two() || sector < crate::settings::MIN_SECTOR_SIZE {
            return Err(Error::Invalid(format!(
                "WAL sector size {sector} is not a power of two of at least 512"
            )));
        }
        Ok(())
    }
}

/// Checks the sizes a WAL is created with: the block size one of
/// [`WAL_BLOCK_SIZES`], the segment size a power of two from 1 MB to 1 GB
/// holding at least two blocks.
pub fn validate_sizes(block_size: u32, segment_size: u64) -> Result<()> {
    if !WAL_BLOCK_SIZES.contains(&block_size) {
        return Err(Error::InvalidSetting {
            name: "wal_block_size",
            detail: format!("{block_size} is not a power of two from 1024 to 65536"),
        });
    }
    if !segment_size.is_power_of_two()
        || !(MB..=GB).contains(&segment_size)
        || segment_size / block_size as u64 <= 1
    {
        return Err(Error::InvalidSetting {
            name: "wal_segment_size",
            detail: format!(
                "{segment_size} must be a power of two from 1 MB to 1 GB holding at least two blocks of {block_size}"
            ),
        });
    }
    Ok(())
}

/// WAL activity since the writer was created (pg_stat_wal's figures and
/// the group-commit ones).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct WalStats {
    /// Records inserted (wal_records).
    pub records: u64,
    /// Bytes of records inserted, headers included, padding and page
    /// headers not (wal_bytes).
    pub bytes: u64,
    /// Full-page images inserted (wal_fpi) and their bytes as logged,
    /// compressed or not (wal_fpi_bytes).
    pub fpi: u64,
    pub fpi_bytes: u64,
    /// The same images' bytes before compression (their holes left out):
    /// `fpi_bytes` over this is what `wal_compression` saved.
    pub fpi_bytes_uncompressed: u64,
    /// Calls of [`Wal::flush`](super::Wal::flush).
    pub flush_requests: u64,
    /// Of those, the ones that did no I/O themselves: already covered when
    /// called, or covered by another thread's flush while waiting.
    pub flushes_without_io: u64,
    /// Flushes that wrote (one leader's write + fdatasync round).
    pub flush_rounds: u64,
    /// Of `flush_requests`, those a page write made before writing (the
    /// write-ahead rule), and the rounds they led.
    pub page_write_flush_requests: u64,
    pub page_write_flush_rounds: u64,
    /// fdatasync calls on WAL segment files by flushes.
    pub fsyncs: u64,
    /// Bytes written by flushes (the sectors from the flushed position to
    /// the padded insert position).
    pub bytes_written: u64,
    /// Bytes of padding records that ended flushes on sector boundaries.
    pub padding_bytes: u64,
    pub segments_created: u64,
    pub segments_recycled: u64,
    pub segments_removed: u64,
}

impl WalStats {
    /// Flush requests (commits) per WAL fsync; 0 when nothing was synced.
    pub fn commits_per_fsync(&self) -> f64 {
        if self.fsyncs == 0 {
            0.0
        } else {
            self.flush_requests as f64 / self.fsyncs as f64
        }
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    // Bumped by every insert or flush request, from every client: striped.
    pub(crate) records: StripedCounter,
    pub(crate) bytes: StripedCounter,
    pub(crate) fpi: StripedCounter,
    pub(crate) fpi_bytes: StripedCounter,
    pub(crate) fpi_bytes_uncompressed: StripedCounter,
    pub(crate) flush_requests: StripedCounter,
    pub(crate) flushes_without_io: StripedCounter,
    pub(crate) page_write_flush_requests: StripedCounter,
    // Bumped once per flush round or rarer.
    pub(crate) flush_rounds: AtomicU64,
    pub(crate) page_write_flush_rounds: AtomicU64,
    pub(crate) fsyncs: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) padding_bytes: AtomicU64,
    pub(crate) segments_created: AtomicU64,
    pub(crate) segments_recycled: AtomicU64,
    pub(crate) segments_removed: AtomicU64,
}

pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Relaxed);
}

impl Counters {
    pub(crate) fn snapshot(&self) -> WalStats {
        let c = self;
        let l = |a: &AtomicU64| a.load(Relaxed);
        WalStats {
            records: c.records.load(),
            bytes: c.bytes.load(),
            fpi: c.fpi.load(),
            fpi_bytes: c.fpi_bytes.load(),
            fpi_bytes_uncompressed: c.fpi_bytes_uncompressed.load(),
            flush_requests: c.flush_requests.load(),
            flushes_without_io: c.flushes_without_io.load(),
            flush_rounds: l(&c.flush_rounds),
            page_write_flush_requests: c.page_write_flush_requests.load(),
            page_write_flush_rounds: l(&c.page_write_flush_rounds),
            fsyncs: l(&c.fsyncs),
            bytes_written: l(&c.bytes_written),
            padding_bytes: l(&c.padding_bytes),
            segments_created: l(&c.segments_created),
            segments_recycled: l(&c.segments_recycled),
            segments_removed: l(&c.segments_removed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert!(validate_sizes(1024, MB).is_ok());
        assert!(validate_sizes(65536, MB).is_ok());
        assert!(validate_sizes(3000, MB).is_err());
        assert!(validate_sizes(8192, 3 * MB).is_err());
    }
}
