//! The control file: what a database is (sizes and algorithms fixed at
//! creation) and where recovery starts (the last checkpoint and its redo
//! point). Like PostgreSQL's pg_control.
//!
//! Rules:
//! - One 512-byte sector (docs/FORMAT.md, "Control file") with its own
//!   CRC-32C in the last four bytes; a flipped byte anywhere is refused.
//! - Replaced atomically: write `untorn.control.tmp`, fsync it, rename it
//!   over `untorn.control`, fsync the directory. A crash at any point
//!   leaves either the old or the new file whole.
//! - The WAL epoch is incremented and made durable at every open, before any
//!   new WAL is written (see the WAL module for why).

use crate::error::{Error, Result};
use crate::file::{FileKind, FileSystem, Issuer, OpenOptions};
use crate::lsn::Lsn;
use crate::settings::{ChecksumAlgorithm, CreationSettings, TornPageProtection};
use std::path::{Path, PathBuf};

/// The control file's name in the database directory.
pub const CONTROL_FILE_NAME: &str = "untorn.control";
const CONTROL_TMP_NAME: &str = "untorn.control.tmp";
/// Size of the control file: one 512-byte sector.
pub const CONTROL_FILE_SIZE: usize = 512;
/// The magic bytes at offset 0.
pub const CONTROL_MAGIC: [u8; 8] = *b"UNTORNCF";
/// The control file format version this build writes and reads.
pub const CONTROL_FORMAT_VERSION: u32 = 1;

// Field offsets (docs/FORMAT.md).
const OFF_MAGIC: usize = 0;
const OFF_VERSION: usize = 8;
const OFF_SYSTEM_ID: usize = 16;
const OFF_PAGE_SIZE: usize = 24;
const OFF_WAL_BLOCK_SIZE: usize = 28;
const OFF_WAL_SEGMENT_SIZE: usize = 32;
const OFF_DATA_SEGMENT_SIZE: usize = 40;
const OFF_CHECKSUMS: usize = 48;
const OFF_PROTECTION: usize = 49;
const OFF_STATE: usize = 50;
const OFF_WAL_EPOCH: usize = 52;
const OFF_CHECKPOINT_LSN: usize = 56;
const OFF_REDO_LSN: usize = 64;
const OFF_NEXT_XID: usize = 72;
const OFF_NEXT_FILE_ID: usize = 80;
const OFF_CHECKPOINT_TIME: usize = 88;
const OFF_UPDATE_TIME: usize = 96;
const OFF_DEFERRED_MANIFEST: usize = 104;
const OFF_SECTOR_SIZE: usize = 112;
const OFF_CRC: usize = CONTROL_FILE_SIZE - 4;
const _: () = assert!(OFF_SECTOR_SIZE + 4 <= OFF_CRC);
/// What a control file written before `sector_size` was recorded (those
/// bytes reserved and zero) protected against: 512-byte sectors.
const SECTOR_SIZE_BEFORE_RECORDED: u32 = 512;

/// The database's state, as pg_control's "Database cluster state".
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DbState {
    /// Closed cleanly: the last checkpoint covers everything.
    ShutDown = 1,
    /// Open (or crashed while open): recovery replays from the redo point.
    InProduction = 2,
    /// Crash recovery was running.
    InRecovery = 3,
}

impl DbState {
    fn from_u8(v: u8) -> Option<DbState> {
        match v {
            1 => Some(DbState::ShutDown),
            2 => Some(DbState::InProduction),
            3 => Some(DbState::InRecovery),
            _ => None,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            DbState::ShutDown => "shut down",
            DbState::InProduction => "in production",
            DbState::InRecovery => "in crash recovery",
        }
    }
}

/// The control file's contents.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ControlFile {
    pub format_version: u32,
    /// Random at creation; WAL segments carry it so a foreign segment is refused.
    pub system_id: u64,
    pub settings: CreationSettings,
    pub state: DbState,
    /// Incremented at every open; stamped on every WAL page written.
    pub wal_epoch: u32,
    /// LSN of the last checkpoint record.
    pub checkpoint_lsn: Lsn,
    /// Where redo starts: the last checkpoint's redo point.
    pub redo_lsn: Lsn,
    /// The next transaction id to hand out (at least).
    pub next_xid: u64,
    /// The next data file id; file ids are never reused.
    pub next_file_id: u32,
    /// Unix time of the last checkpoint (seconds).
    pub checkpoint_time: u64,
    /// Unix time of this control file's writing (seconds).
    pub update_time: u64,
    /// The sequence of the manifest in `dw/deferred` the last checkpoint
    /// relied on, durable before this file (0: none). Recovery refuses to
    /// go on without a manifest at least this new.
    pub deferred_manifest: u64,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl ControlFile {
    /// The control file of a new database.
    pub fn new(settings: CreationSettings, system_id: u64) -> ControlFile {
        ControlFile {
            format_version: CONTROL_FORMAT_VERSION,
            system_id,
            settings,
            state: DbState::ShutDown,
            wal_epoch: 0,
            checkpoint_lsn: Lsn::INVALID,
            redo_lsn: Lsn::INVALID,
            next_xid: 1,
            next_file_id: 1,
            checkpoint_time: 0,
            update_time: unix_now(),
            deferred_manifest: 0,
        }
    }

    /// The path of the control file in `dir`.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(CONTROL_FILE_NAME)
    }

    /// Encodes into one sector, CRC last.
    pub fn encode(&self) -> [u8; CONTROL_FILE_SIZE] {
        let mut b = [0u8; CONTROL_FILE_SIZE];
        let s = &self.settings;
        b[OFF_MAGIC..OFF_MAGIC + 8].copy_from_slice(&CONTROL_MAGIC);
        put(&mut b, OFF_VERSION, &self.format_version.to_le_bytes());
        put(&mut b, OFF_SYSTEM_ID, &self.system_id.to_le_bytes());
        put(&mut b, OFF_PAGE_SIZE, &s.page_size.to_le_bytes());
        put(&mut b, OFF_WAL_BLOCK_SIZE, &s.wal_block_size.to_le_bytes());
        put(
            &mut b,
            OFF_WAL_SEGMENT_SIZE,
            &s.wal_segment_size.to_le_bytes(),
        );
        put(
            &mut b,
            OFF_DATA_SEGMENT_SIZE,
            &s.data_segment_size.to_le_bytes(),
        );
        b[OFF_CHECKSUMS] = s.data_checksums.code();
        assert_ne!(
            s.torn_page_protection,
            TornPageProtection::Auto,
            "`auto` is resolved at an opening, never stored"
        );
        b[OFF_PROTECTION] = s.torn_page_protection.code();
        b[OFF_STATE] = self.state as u8;
        put(&mut b, OFF_WAL_EPOCH, &self.wal_epoch.to_le_bytes());
        put(
            &mut b,
            OFF_CHECKPOINT_LSN,
            &self.checkpoint_lsn.0.to_le_bytes(),
        );
        put(&mut b, OFF_REDO_LSN, &self.redo_lsn.0.to_le_bytes());
        put(&mut b, OFF_NEXT_XID, &self.next_xid.to_le_bytes());
        put(&mut b, OFF_NEXT_FILE_ID, &self.next_file_id.to_le_bytes());
        put(
            &mut b,
            OFF_CHECKPOINT_TIME,
            &self.checkpoint_time.to_le_bytes(),
        );
        put(&mut b, OFF_UPDATE_TIME, &self.update_time.to_le_bytes());
        put(
            &mut b,
            OFF_DEFERRED_MANIFEST,
            &self.deferred_manifest.to_le_bytes(),
        );
        put(&mut b, OFF_SECTOR_SIZE, &s.sector_size.to_le_bytes());
        let crc = crc32c::crc32c(&b[..OFF_CRC]);
        put(&mut b, OFF_CRC, &crc.to_le_bytes());
        b
    }

    /// Decodes and checks a control file read from `path`. Every failure is
    /// a corruption error naming the file and what is wrong.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<ControlFile> {
        let bad = |location: String, detail: String| Error::corruption(path, location, detail);
        if bytes.len() != CONTROL_FILE_SIZE {
            return Err(bad(
                "file size".into(),
                format!("{} bytes, expected {CONTROL_FILE_SIZE}", bytes.len()),
            ));
        }
        if bytes[OFF_MAGIC..OFF_MAGIC + 8] != CONTROL_MAGIC {
            return Err(bad(
                "offset 0".into(),
                "bad magic: not an untorn control file".into(),
            ));
        }
        let stored = u32_at(bytes, OFF_CRC);
        let calculated = crc32c::crc32c(&bytes[..OFF_CRC]);
        if stored != calculated {
            return Err(bad(
                format!("offset {OFF_CRC}"),
                format!("CRC mismatch: calculated {calculated:#010x}, stored {stored:#010x}; the control file is corrupt"),
            ));
        }
        let format_version = u32_at(bytes, OFF_VERSION);
        if format_version != CONTROL_FORMAT_VERSION {
            return Err(bad(
                format!("offset {OFF_VERSION}"),
                format!("format version {format_version}; this build reads version {CONTROL_FORMAT_VERSION}"),
            ));
        }
        let data_checksums =
            ChecksumAlgorithm::from_code(bytes[OFF_CHECKSUMS]).ok_or_else(|| {
                bad(
                    format!("offset {OFF_CHECKSUMS}"),
                    format!("unknown checksum code {}", bytes[OFF_CHECKSUMS]),
                )
            })?;
        // `auto` is a request resolved at an opening, never a stored mode.
        let torn_page_protection = TornPageProtection::from_code(bytes[OFF_PROTECTION])
            .filter(|m| *m != TornPageProtection::Auto)
            .ok_or_else(|| {
                bad(
                    format!("offset {OFF_PROTECTION}"),
                    format!("unknown protection code {}", bytes[OFF_PROTECTION]),
                )
            })?;
        let state = DbState::from_u8(bytes[OFF_STATE]).ok_or_else(|| {
            bad(
                format!("offset {OFF_STATE}"),
                format!("unknown state {}", bytes[OFF_STATE]),
            )
        })?;
        let settings = CreationSettings {
            page_size: u32_at(bytes, OFF_PAGE_SIZE),
            wal_block_size: u32_at(bytes, OFF_WAL_BLOCK_SIZE),
            wal_segment_size: u64_at(bytes, OFF_WAL_SEGMENT_SIZE),
            data_segment_size: u64_at(bytes, OFF_DATA_SEGMENT_SIZE),
            data_checksums,
            torn_page_protection,
            sector_size: match u32_at(bytes, OFF_SECTOR_SIZE) {
                0 => SECTOR_SIZE_BEFORE_RECORDED,
                n => n,
            },
        };
        settings
            .validate()
            .map_err(|e| bad("settings".into(), e.to_string()))?;
        Ok(ControlFile {
            format_version,
            system_id: u64_at(bytes, OFF_SYSTEM_ID),
            settings,
            state,
            wal_epoch: u32_at(bytes, OFF_WAL_EPOCH),
            checkpoint_lsn: Lsn(u64_at(bytes, OFF_CHECKPOINT_LSN)),
            redo_lsn: Lsn(u64_at(bytes, OFF_REDO_LSN)),
            next_xid: u64_at(bytes, OFF_NEXT_XID),
            next_file_id: u32_at(bytes, OFF_NEXT_FILE_ID),
            checkpoint_time: u64_at(bytes, OFF_CHECKPOINT_TIME),
            update_time: u64_at(bytes, OFF_UPDATE_TIME),
            deferred_manifest: u64_at(bytes, OFF_DEFERRED_MANIFEST),
        })
    }

    /// Refuses a directory that does not exist or has no control file,
    /// as [`ControlFile::read`] does, without reading anything.
    pub fn check_present(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        if !fs.exists(dir) {
            return Err(Error::NotADatabase {
                path: dir.to_path_buf(),
                detail: "the directory does not exist".into(),
            });
        }
        if !fs.exists(&Self::path(dir)) {
            return Err(Error::NotADatabase {
                path: dir.to_path_buf(),
                detail: format!("it has no {CONTROL_FILE_NAME}"),
            });
        }
        Ok(())
    }

    /// Reads the control file of the database in `dir`.
    pub fn read(fs: &dyn FileSystem, dir: &Path, who: Issuer) -> Result<ControlFile> {
        Self::check_present(fs, dir)?;
        let path = Self::path(dir);
        let file = fs.open(&path, FileKind::Control, OpenOptions::read_only())?;
        let len = file.len()? as usize;
        let mut buf = vec![0u8; len.min(CONTROL_FILE_SIZE + 1)];
        let n = file.read_at(&mut buf, 0, who)?;
        buf.truncate(n);
        Self::decode(&buf, &path)
    }

    /// Replaces the control file atomically and durably (temporary file,
    /// fsync, rename, directory fsync). Stamps the update time.
    pub fn write(&mut self, fs: &dyn FileSystem, dir: &Path, who: Issuer) -> Result<()> {
        self.update_time = unix_now();
        let bytes = self.encode();
        let tmp = dir.join(CONTROL_TMP_NAME);
        let file = fs.open(&tmp, FileKind::Control, OpenOptions::create())?;
        file.set_len(0, who)?;
        file.write_at(&bytes, 0, who)?;
        file.sync_all(who)?;
        drop(file);
        fs.rename(&tmp, &Self::path(dir), FileKind::Control, who)?;
        fs.sync_dir(dir, who)
    }
}

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::posix::PosixFileSystem;

    fn sample() -> ControlFile {
        let mut c = ControlFile::new(CreationSettings::default(), 0xDEAD_BEEF);
        c.checkpoint_lsn = Lsn(0x1_0000_0028);
        c.redo_lsn = Lsn(0x1_0000_0010);
        c.wal_epoch = 3;
        c.state = DbState::InProduction;
        c.deferred_manifest = 0x0102_0304_0506;
        c
    }

    #[test]
    fn round_trip_through_disk() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::default();
        let mut c = sample();
        c.write(&fs, dir.path(), Issuer::Tool).unwrap();
        let back = ControlFile::read(&fs, dir.path(), Issuer::Tool).unwrap();
        assert_eq!(back, c);
        assert!(!dir.path().join(CONTROL_TMP_NAME).exists());
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let bytes = sample().encode();
        for i in 0..CONTROL_FILE_SIZE {
            let mut b = bytes;
            b[i] ^= 0x01;
            let e = ControlFile::decode(&b, Path::new("x/untorn.control")).unwrap_err();
            let msg = e.to_string();
            assert!(msg.contains("untorn.control"), "byte {i}: {msg}");
        }
    }

    #[test]
    fn truncated_file_is_refused() {
        let bytes = sample().encode();
        let e = ControlFile::decode(&bytes[..100], Path::new("c")).unwrap_err();
        assert!(e.to_string().contains("100 bytes"), "{e}");
    }

    #[test]
    fn missing_directory_and_non_database_are_clear_errors() {
        let fs = PosixFileSystem::default();
        let e =
            ControlFile::read(&fs, Path::new("/nonexistent/untorn-db"), Issuer::Tool).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = ControlFile::read(&fs, dir.path(), Issuer::Tool).unwrap_err();
        assert!(e.to_string().contains("not an untorn database"), "{e}");
    }
}
