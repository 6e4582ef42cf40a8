//! Creating and opening a database directory.
//!
//! Layout of a database directory (docs/FORMAT.md):
//! - `untorn.control`: the control file;
//! - `wal/`: WAL segment files;
//! - `data/`: data files, one per table, in segments (`N`, `N.1`, ...).

use crate::checkpoint::CheckpointInfo;
use crate::control::{ControlFile, DbState};
use crate::error::{Error, Result};
use crate::file::{FileKind, FileSystem, Issuer, OpenOptions};
use crate::settings::{CreationSettings, RequestedCreationSettings};
use crate::wal::{RecordData, RecordKind, Wal, WalConfig};
use std::path::Path;
use std::sync::Arc;

/// The WAL directory's name.
pub const WAL_DIR: &str = "wal";
/// The data directory's name.
pub const DATA_DIR: &str = "data";

/// The WAL configuration of a database described by its control file.
pub fn wal_config(control: &ControlFile) -> WalConfig {
    WalConfig {
        block_size: control.settings.wal_block_size,
        segment_size: control.settings.wal_segment_size,
        system_id: control.system_id,
        epoch: control.wal_epoch,
    }
}

fn new_system_id() -> u64 {
    // As PostgreSQL: creation time in the high bits, randomness below.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    (secs << 32) | (rand::random::<u32>() as u64)
}

/// Creates a new database in `dir` (which must not exist or be empty) and
/// returns its control file. The WAL starts with a shutdown checkpoint.
pub fn create(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    settings: CreationSettings,
) -> Result<ControlFile> {
    settings.validate()?;
    refuse_unbuilt(&settings, "use full_pages or off")?;
    if fs.exists(&ControlFile::path(dir)) {
        return Err(Error::AlreadyExists {
            path: dir.to_path_buf(),
        });
    }
    if fs.exists(dir) && !fs.list_dir(dir)?.is_empty() {
        return Err(Error::Invalid(format!(
            "{} exists and is not empty; choose a new or empty directory",
            dir.display()
        )));
    }
    fs.create_dir_all(&dir.join(WAL_DIR))?;
    fs.create_dir_all(&dir.join(DATA_DIR))?;
    let mut control = ControlFile::new(settings, new_system_id());
    control.wal_epoch = 1;
    let wal = Wal::create(fs.clone(), &dir.join(WAL_DIR), wal_config(&control))?;
    let redo = wal.insert_lsn();
    let info = CheckpointInfo {
        redo,
        next_xid: control.next_xid,
        next_file_id: control.next_file_id,
        shutdown: true,
        time: control.update_time,
    };
    let (checkpoint_lsn, end) = wal.insert(&RecordData {
        kind: RecordKind::Checkpoint,
        xid: 0,
        blocks: Vec::new(),
        main: info.encode(),
    })?;
    wal.flush(end, Issuer::Tool)?;
    control.checkpoint_lsn = checkpoint_lsn;
    control.redo_lsn = redo;
    control.checkpoint_time = info.time;
    control.state = DbState::ShutDown;
    fs.sync_dir(&dir.join(DATA_DIR), Issuer::Tool)?;
    control.write(fs.as_ref(), dir, Issuer::Tool)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs.sync_dir(parent, Issuer::Tool)?;
    }
    Ok(control)
}

/// Reads the control file of an existing database and checks the requested
/// creation settings against it; a contradiction names both values.
pub fn open_control(
    fs: &dyn FileSystem,
    dir: &Path,
    requested: &RequestedCreationSettings,
) -> Result<ControlFile> {
    let control = ControlFile::read(fs, dir, Issuer::Tool)?;
    // Before anything is written: opening would run the database with no
    // torn-page protection while its control file promises some.
    refuse_unbuilt(
        &control.settings,
        &format!(
            "the control file of {} asks for it; open it with a build that has it",
            dir.display()
        ),
    )?;
    control.settings.check_requested(requested)?;
    Ok(control)
}

/// Refuses settings this build cannot honour; `advice` says what to do.
fn refuse_unbuilt(settings: &CreationSettings, advice: &str) -> Result<()> {
    if settings.torn_page_protection == crate::settings::TornPageProtection::DoubleWrites {
        return Err(Error::InvalidSetting {
            name: "torn_page_protection",
            detail: format!("double_writes is not implemented in this build yet; {advice}"),
        });
    }
    Ok(())
}

/// What [`sync_after_unclean_shutdown`] made durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartupSync {
    pub wal_segments: u64,
    pub data_files: u64,
    pub directories: u64,
}

/// After an unclean shutdown, makes durable whatever the dead process left
/// in the OS page cache, before anything trusts it (PostgreSQL's
/// SyncDataDirectory at the start of crash recovery): the WAL segments from
/// the one holding the redo point on, every data file, and the three
/// directories.
///
/// Why: a process killed with its page cache intact (kill -9, a panic, an
/// OOM kill) leaves WAL that was written but never fsynced. The reader finds
/// it, the WAL writer takes it as flushed, and the restart's redo and
/// checkpoint then write and fsync data pages that depend on it. A power
/// loss before that WAL reaches the disk would leave half a transaction on
/// the data pages and nothing in the WAL to tell. A failed fsync here is
/// fatal, as everywhere: the open fails.
pub fn sync_after_unclean_shutdown(
    fs: &dyn FileSystem,
    dir: &Path,
    control: &ControlFile,
) -> Result<StartupSync> {
    let mut done = StartupSync::default();
    let wal_dir = dir.join(WAL_DIR);
    let redo_segment = control.redo_lsn.0 / control.settings.wal_segment_size;
    for segno in crate::wal::segment::list_segments(fs, &wal_dir)? {
        if segno >= redo_segment {
            let path = crate::wal::segment::segment_path(&wal_dir, segno);
            fs.open(&path, FileKind::Wal, OpenOptions::read_only())?
                .sync_all(Issuer::Recovery)?;
            done.wal_segments += 1;
        }
    }
    let data_dir = dir.join(DATA_DIR);
    if fs.exists(&data_dir) {
        for path in fs.list_dir(&data_dir)? {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if crate::file::segmented::parse_segment_name(name).is_some() {
                fs.open(&path, FileKind::Data, OpenOptions::read_only())?
                    .sync_all(Issuer::Recovery)?;
                done.data_files += 1;
            }
        }
        fs.sync_dir(&data_dir, Issuer::Recovery)?;
        done.directories += 1;
    }
    fs.sync_dir(&wal_dir, Issuer::Recovery)?;
    fs.sync_dir(dir, Issuer::Recovery)?;
    done.directories += 2;
    Ok(done)
}
