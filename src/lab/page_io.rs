//! Every physical page write and read of a run, by where it went, and the
//! bytes written to each kind of file: what a mode costs the device (and an
//! SSD's endurance), where "data-file writes" alone hid most of double
//! writes' I/O (pages stored in `dw/deferred` and the area).
//!
//! Derived from a run's [`Statistics`]: the data files' and every file's
//! bytes come from the file layer; the split of the double-write files
//! between the area and `dw/deferred` comes from the double-write
//! counters, and the two agree (the module's test).

use crate::file::FileKind;
use crate::stats::Statistics;
use serde::{Deserialize, Serialize};

/// Pages (of the database's page size) and bytes, over some span of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PageIo {
    /// Pages written to the data files (in place), by every writer.
    pub data_writes: u64,
    /// Pages written to the double-write area: page images and the header
    /// block of each batch.
    pub area_writes: u64,
    /// Pages written to `dw/deferred`: page images stored instead of an
    /// in-place write, and the manifests and write-back lists naming them.
    pub deferred_writes: u64,
    /// Pages read from the data files (buffer pool misses, write-backs).
    pub data_reads: u64,
    /// Pages read from the double-write files: deferred pages read instead
    /// of their data file, and slots read for a write-back.
    pub double_write_reads: u64,
    /// Bytes written, by kind of file.
    pub wal_bytes_written: u64,
    pub data_bytes_written: u64,
    pub double_write_bytes_written: u64,
    /// The control file and the lock file.
    pub other_bytes_written: u64,
}

impl PageIo {
    /// The I/O `s` counted, in pages of `page_size` bytes.
    pub fn from_statistics(s: &Statistics, page_size: u32) -> PageIo {
        let page = u64::from(page_size).max(1);
        let data = s.io_of_kind(FileKind::Data);
        let dw_files = s.io_of_kind(FileKind::DoubleWrite);
        let dw = s.double_write.total();
        let written = |kind| s.io_of_kind(kind).write_bytes;
        PageIo {
            data_writes: data.write_bytes / page,
            area_writes: dw.pages + dw.batches,
            deferred_writes: dw.deferred + dw.deferred_meta_pages,
            data_reads: data.read_bytes / page,
            double_write_reads: dw_files.read_bytes / page,
            wal_bytes_written: written(FileKind::Wal),
            data_bytes_written: data.write_bytes,
            double_write_bytes_written: dw_files.write_bytes,
            other_bytes_written: written(FileKind::Control) + written(FileKind::Lock),
        }
    }

    /// Every page written, wherever it went.
    pub fn page_writes(&self) -> u64 {
        self.data_writes + self.area_writes + self.deferred_writes
    }

    /// Every page read, wherever from.
    pub fn page_reads(&self) -> u64 {
        self.data_reads + self.double_write_reads
    }

    /// Every byte written, to every file.
    pub fn bytes_written(&self) -> u64 {
        self.wal_bytes_written
            + self.data_bytes_written
            + self.double_write_bytes_written
            + self.other_bytes_written
    }

    /// Field-wise sum.
    pub fn plus(&self, o: &PageIo) -> PageIo {
        PageIo {
            data_writes: self.data_writes + o.data_writes,
            area_writes: self.area_writes + o.area_writes,
            deferred_writes: self.deferred_writes + o.deferred_writes,
            data_reads: self.data_reads + o.data_reads,
            double_write_reads: self.double_write_reads + o.double_write_reads,
            wal_bytes_written: self.wal_bytes_written + o.wal_bytes_written,
            data_bytes_written: self.data_bytes_written + o.data_bytes_written,
            double_write_bytes_written: self.double_write_bytes_written
                + o.double_write_bytes_written,
            other_bytes_written: self.other_bytes_written + o.other_bytes_written,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crashlab::sim::SimFileSystem;
    use crate::db::Database;
    use crate::file::{FileSystem, IoStats};
    use crate::options::Options;
    use crate::settings::TornPageProtection;
    use crate::table::key_u64;
    use crate::table::Table;
    use std::path::Path;
    use std::sync::Arc;

    /// Rewrites rows `0..rows` of `t`, 100 to a transaction.
    fn rewrite(db: &Database, t: &Table, rows: u64, version: u8) {
        for start in (0..rows).step_by(100) {
            let mut tx = db.begin();
            for k in start..(start + 100).min(rows) {
                tx.upsert(t, &key_u64(k), &[version; 200]).unwrap();
            }
            tx.commit().unwrap();
        }
    }

    /// Issue 36's test: under double writes, with pages deferred by
    /// evictions, written back with their lists and named by manifests,
    /// the pages counted to each destination are exactly the bytes the
    /// file layer wrote to each kind of file.
    #[test]
    fn page_writes_by_destination_add_up_to_the_file_layers_bytes() {
        let stats = Arc::new(IoStats::default());
        let sim = SimFileSystem::new(stats.clone());
        let fs: Arc<dyn FileSystem> = Arc::new(sim.clone());
        let options = Options {
            creation: crate::settings::RequestedCreationSettings {
                torn_page_protection: Some(TornPageProtection::DoubleWrites),
                ..Default::default()
            },
            // Nothing writes pages on its own: no timed checkpoint, no
            // background writer round.
            clock: crate::clock::Clock::manual().0,
            double_write_defer_in_place: true,
            // Every checkpoint writes the deferred pages back, with a list.
            double_write_keep_deferred: false,
            // Dirty victims, deferred by the clients that evict them.
            buffer_pool_size: 1 << 20,
            ..Options::default()
        };
        let db = Database::create_with(fs, stats, Path::new("/sim/db"), options).unwrap();
        let t = db.create_table("t").unwrap();
        rewrite(&db, &t, 20_000, 1);
        db.checkpoint().unwrap();
        let base = db.statistics();
        for version in 2..4 {
            rewrite(&db, &t, 20_000, version);
            db.checkpoint().unwrap();
        }
        let d = db.statistics().since(&base);
        let page_size = db.settings().page_size;
        let page = u64::from(page_size);
        let io = PageIo::from_statistics(&d, page_size);
        let dw = d.double_write.total();
        assert!(dw.deferred > 0 && dw.written_back > 0, "{dw:?}");
        assert!(dw.deferred_meta_pages > 0, "{dw:?}");
        assert!(io.data_writes > 0 && io.wal_bytes_written > 0, "{io:?}");
        assert_eq!(io.data_writes * page, io.data_bytes_written);
        assert_eq!(
            (io.area_writes + io.deferred_writes) * page,
            io.double_write_bytes_written,
            "{io:?} {dw:?}"
        );
        assert_eq!(
            io.page_writes() * page,
            io.data_bytes_written + io.double_write_bytes_written
        );
    }
}
