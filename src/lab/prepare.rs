//! How a run's database is prepared: a template loaded once per workload
//! and creation settings, then for each run a fresh copy of it, opened
//! cleanly and warmed the same way for every configuration.
//!
//! Rules:
//! - A template is loaded, checkpointed and closed cleanly, so a copy
//!   opens with no recovery; configurations that share every creation
//!   setting share one template, and so start from the same bytes.
//! - A copy is made durable (every file and directory fsynced) before it
//!   is opened: otherwise the kernel writes it back during the run, and
//!   the run measures the copy.
//! - Removing a database is made durable too (its parent directory
//!   fsynced), so the journal commit of a removal does not fall in the
//!   next run.
//! - Every run opens its copy, then [`Database::prewarm`]s the buffer
//!   pool: the order of pages cached at the start is the same for every
//!   configuration and every round, whatever ran before.

use super::config::BenchConfig;
use super::device::{DeviceFileSystem, DeviceProfile};
use super::runner::fresh_database_with;
use super::workload::Workload;
use crate::control::DbState;
use crate::db::directory::open_control;
use crate::db::Database;
use crate::error::{Error, Result};
use crate::file::posix::PosixFileSystem;
use crate::file::{FileSystem, IoStats};
use crate::settings::TornPageProtection;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The creation settings a template is made with: configurations equal
/// in these can start from one template.
pub fn template_key(config: &BenchConfig) -> String {
    format!(
        "{}-{}-page{}KB-wal{}KB",
        config.protection,
        config.data_checksums,
        config.page_size / 1024,
        config.wal_block_size / 1024
    )
}

/// Loads `workload` into a new database in `dir` with `config`'s
/// settings on the real file system (the load is not measured, so no
/// device model slows it), checkpoints it and closes it cleanly.
pub fn make_template(dir: &Path, config: &BenchConfig, workload: &dyn Workload) -> Result<()> {
    remove_database(dir)?;
    let io_stats = Arc::new(IoStats::default());
    let fs: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::new(io_stats.clone()));
    let mut options = config.options(workload.data_bytes());
    // `atomic` (and `auto`) must be judged on the device the runs see: a
    // device model may write pages whole where the disk cannot. The
    // template is made under full_pages; each copy switches at its opening.
    let mode = &mut options.creation.torn_page_protection;
    if matches!(
        *mode,
        Some(TornPageProtection::Atomic | TornPageProtection::Auto)
    ) {
        *mode = Some(TornPageProtection::FullPages);
    }
    fresh_database_with(fs, io_stats, dir, options, workload)?.close()?;
    sync_tree(dir)
}

/// Copies the template in `template` to `dir` (replacing what is there),
/// makes the copy durable, opens it with `config` (through its device
/// model) and prewarms the buffer pool. Fails if the copy was not shut
/// down cleanly: a run must not begin with a recovery.
pub fn open_copy(
    template: &Path,
    dir: &Path,
    config: &BenchConfig,
    workload: &dyn Workload,
) -> Result<Database> {
    let began = Instant::now();
    remove_database(dir)?;
    copy_tree(template, dir)?;
    sync_tree(dir)?;
    sync_dir(dir.parent().unwrap_or(Path::new(".")))?;
    let copied = began.elapsed();
    let io_stats = Arc::new(IoStats::default());
    let real: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::new(io_stats.clone()));
    let fs: Arc<dyn FileSystem> = match DeviceProfile::by_name(&config.device)? {
        Some(profile) => Arc::new(DeviceFileSystem::new(real, profile)),
        None => real,
    };
    let options = config.options(workload.data_bytes());
    let control = open_control(fs.as_ref(), dir, &options.creation)?;
    if control.state != DbState::ShutDown {
        return Err(Error::Invalid(format!(
            "the copy of the template in {} is in state {:?}, not shut down: \
             opening it would recover it",
            dir.display(),
            control.state
        )));
    }
    let db = Database::open_with(fs, io_stats, dir, options)?;
    let opened = began.elapsed();
    let pages = db.prewarm()?;
    tracing::debug!(
        dir = %dir.display(),
        copy_ms = copied.as_secs_f64() * 1e3,
        open_ms = (opened - copied).as_secs_f64() * 1e3,
        prewarm_ms = (began.elapsed() - opened).as_secs_f64() * 1e3,
        pages,
        "run database prepared"
    );
    Ok(db)
}

/// Removes a database directory if it exists, durably.
pub fn remove_database(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    std::fs::remove_dir_all(dir).map_err(|e| Error::io(dir, "remove", e))?;
    sync_dir(dir.parent().unwrap_or(Path::new(".")))
}

/// Copies a directory tree (files and subdirectories).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::io(to, "mkdir", e))?;
    let entries = std::fs::read_dir(from).map_err(|e| Error::io(from, "read_dir", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(from, "read_dir", e))?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let kind = entry.file_type().map_err(|e| Error::io(&src, "stat", e))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).map_err(|e| Error::io(&src, "copy", e))?;
        }
    }
    Ok(())
}

/// fsyncs every file and directory under `dir`, and `dir` itself.
fn sync_tree(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, "read_dir", e))?;
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, "read_dir", e))?.path();
        if path.is_dir() {
            sync_tree(&path)?;
        } else {
            std::fs::File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(&path, "fsync", e))?;
        }
    }
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(dir, "fsync", e))
}
