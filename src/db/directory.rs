//! Creating and opening a database directory.
//!
//! Layout of a database directory (docs/FORMAT.md):
//! - `untorn.control`: the control file;
//! - `untorn.lock`: the lock file, which an opening holds locked
//!   ([`DirLock`]);
//! - `wal/`: WAL segment files;
//! - `data/`: data files, one per table, in segments (`N`, `N.1`, ...).

use crate::checkpoint::record::{log_checkpoint, CheckpointInfo};
use crate::control::ControlFile;
use crate::error::{Error, Result};
use crate::file::lock::LOCK_FILE_NAME;
use crate::file::{DirLock, FileSystem, Issuer};
use crate::settings::{CreationSettings, RequestedCreationSettings};
use crate::wal::{Wal, WalConfig};
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
        sector_size: control.settings.sector_size,
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

/// Refuses a directory that holds a database or anything else but a lock
/// file.
fn refuse_used(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    if fs.exists(&ControlFile::path(dir)) {
        return Err(Error::AlreadyExists {
            path: dir.to_path_buf(),
        });
    }
    let in_use = |p: &std::path::PathBuf| p.file_name() != Some(LOCK_FILE_NAME.as_ref());
    if fs.exists(dir) && fs.list_dir(dir)?.iter().any(in_use) {
        return Err(Error::Invalid(format!(
            "{} exists and is not empty; choose a new or empty directory",
            dir.display()
        )));
    }
    Ok(())
}

/// Creates a new database in `dir` (which must not exist or be empty) and
/// returns its control file, and the directory's lock, held throughout,
/// for the opening that follows to keep. The WAL starts with a shutdown
/// checkpoint.
pub fn create(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    mut settings: CreationSettings,
) -> Result<(ControlFile, DirLock)> {
    settings.validate()?;
    // First without the lock, so that a refused directory is left
    // without a lock file; then again under it: another creator may have
    // been first.
    refuse_used(fs.as_ref(), dir)?;
    fs.create_dir_all(dir)?;
    let lock = DirLock::exclusive(fs.as_ref(), dir)?;
    refuse_used(fs.as_ref(), dir)?;
    // `auto` becomes a mode, and `atomic` is refused where the file
    // system cannot write a page whole, before anything is made.
    settings.torn_page_protection = crate::protect::atomic::settle(
        fs.as_ref(),
        dir,
        &dir.join(DATA_DIR),
        settings.torn_page_protection,
        settings.page_size,
        settings.data_checksums,
    )?;
    fs.create_dir_all(&dir.join(WAL_DIR))?;
    fs.create_dir_all(&dir.join(DATA_DIR))?;
    let mut control = ControlFile::new(settings, new_system_id());
    control.wal_epoch = 1;
    let wal = Wal::create(fs.clone(), &dir.join(WAL_DIR), wal_config(&control))?;
    let info = CheckpointInfo {
        redo: wal.insert_lsn(),
        next_xid: control.next_xid,
        next_file_id: control.next_file_id,
        shutdown: true,
        time: control.update_time,
    };
    let checkpoint_lsn = log_checkpoint(&wal, &info, Issuer::Tool)?;
    info.note_in(&mut control, checkpoint_lsn);
    fs.sync_dir(&dir.join(DATA_DIR), Issuer::Tool)?;
    control.write(fs.as_ref(), dir, Issuer::Tool)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs.sync_dir(parent, Issuer::Tool)?;
    }
    Ok((control, lock))
}

/// The exclusive lock an opening of the database in `dir` holds for its
/// life. A directory without a database is refused as
/// [`ControlFile::read`] refuses it, and no lock file is left in it;
/// one that another opening or a tool holds, with [`Error::InUse`].
pub fn lock_for_opening(fs: &dyn FileSystem, dir: &Path) -> Result<DirLock> {
    ControlFile::check_present(fs, dir)?;
    DirLock::exclusive(fs, dir)
}

/// The shared lock a tool that only reads the database in `dir` holds
/// while it reads: refused with [`Error::InUse`] while an opening holds
/// the directory. `None` where there is no database (the tool's own read
/// of the control file names what is missing) or no lock file can be had
/// ([`DirLock::shared`]).
pub fn lock_for_reading(fs: &dyn FileSystem, dir: &Path) -> Result<Option<DirLock>> {
    if ControlFile::check_present(fs, dir).is_err() {
        return Ok(None);
    }
    DirLock::shared(fs, dir)
}

/// Reads the control file of an existing database and checks the requested
/// creation settings against it; a contradiction names both values. A
/// requested torn-page protection other than the database's is a switch,
/// refused here where unsafe and made after recovery
/// ([`crate::protect::switch`]).
pub fn open_control(
    fs: &dyn FileSystem,
    dir: &Path,
    requested: &RequestedCreationSettings,
) -> Result<ControlFile> {
    let control = ControlFile::read(fs, dir, Issuer::Tool)?;
    control.settings.check_requested(requested)?;
    check_device_sector(fs, dir, control.settings.sector_size)?;
    Ok(control)
}

/// Refuses a device whose sector is larger than the one the database was
/// made for: its WAL flushes would rewrite sectors holding durable WAL (a
/// copy moved onto a 4 KB-sector drive). A device that does not say is
/// trusted, as at creation it would have got the safe size.
fn check_device_sector(fs: &dyn FileSystem, dir: &Path, recorded: u32) -> Result<()> {
    match fs.sector_size(dir) {
        Some(device) if device > recorded => Err(Error::Invalid(format!(
            "{} was created for {recorded}-byte sectors, but its device has {device}-byte \
             sectors: a power cut could destroy acknowledged commits. Copy its tables into \
             a database created on this device (untorn init picks the sector from the device)",
            dir.display()
        ))),
        _ => Ok(()),
    }
}
