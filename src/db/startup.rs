//! Opening a database, in this order (each step relies on the ones before):
//!
//! 0. (The caller) take the directory's exclusive lock (`untorn.lock`,
//!    [`DirLock`]), refused while another opening holds it; the engine
//!    keeps it until it is dropped.
//! 1. Read the control file; refuse settings that contradict it or that
//!    this build cannot honour (`directory::open_control`). Load the
//!    statistics saved at the last clean shutdown (none after a crash).
//! 2. After an unclean shutdown, fsync what the dead process left in the
//!    page cache (WAL from the redo segment on, data files, the
//!    double-write area, directories)
//!    before trusting any of it ([`sync_after_unclean_shutdown`]).
//! 3. Scan the WAL from the redo point to its end; refuse a WAL that ends
//!    before the checkpoint record the control file names.
//! 4. Remove half-made WAL segments (`NAME.tmp`, left by a creation a
//!    crash or a full disk cut short: they hold the space this step's
//!    write may need). Bump the WAL epoch in the control file, durably,
//!    before any new WAL is written, so stale pages of the previous run
//!    are never read as new.
//! 5. Open the WAL for writing at the scan's end.
//! 6. If the directory has a double-write area (`dw/`), restore from it
//!    every page its newest copy in [redo point, end of the WAL] must
//!    replace (torn, or not newer than the copy), and fsync those data
//!    files (`protect::double_writes::recover`). Only then build the buffer
//!    pool with the mode's torn-page protection (with double writes, the
//!    area is opened or created and its slots reused). Then redo every
//!    record from the redo point (images first, then changes to pages
//!    whose LSN is older), repairing damaged pages from images.
//! 7. Derive the next transaction and file ids (the control file's, raised
//!    past anything redo saw or the data directory holds).
//! 8. Create the catalog if the database is new; load it; remove data
//!    files no table owns. Then finish every transaction whose write set
//!    spilled and that reached its commit point (`spill/<xid>.committed`,
//!    txn/spilled.rs), and remove the spill files of those that did not.
//! 9. Checkpoint (end of recovery), so the control file says "in
//!    production" with a redo point past everything replayed. Steps 5 to 9
//!    run under the control file's torn-page protection; only then is a
//!    different requested mode recorded and used (`protect::switch`), and
//!    an area the mode in force does not use removed.
//! 10. Start the background threads (checkpointer, background writer, WAL writer).

use super::{catalog, directory, Database};
use crate::btree::{self, smo, Tree};
use crate::buffer::{BufferPool, DataFiles, PageId, WalFlush};
use crate::checkpoint::{self, Reason};
use crate::control::{ControlFile, DbState};
use crate::engine::Engine;
use crate::error::Result;
use crate::file::IoStats;
use crate::file::{DirLock, FileKind, FileSystem, Issuer, OpenOptions};
use crate::options::Options;
use crate::protect::double_writes::DoubleWriteStats;
use crate::recovery;
use crate::settings::TornPageProtection;
use crate::table::CATALOG_FILE_ID;
use crate::wal::Wal;
use directory::{wal_config, DATA_DIR, WAL_DIR};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Opens (and recovers) the database in `dir` on `fs`, under `lock`; see
/// the module doc for the order.
pub(super) fn open(
    fs: Arc<dyn FileSystem>,
    io_stats: Arc<IoStats>,
    dir: &Path,
    options: Options,
    lock: DirLock,
) -> Result<Database> {
    // 1.
    options.validate()?;
    let mut control = directory::open_control(fs.as_ref(), dir, &options.creation)?;
    let settings = control.settings.clone();
    let (options, atomic_files) = settle_protection(fs.as_ref(), dir, &control, options)?;
    let earlier_stats = crate::stats::load_at_open(fs.as_ref(), dir, &control);
    let wal_dir = dir.join(WAL_DIR);
    // 2. Trust nothing the dead process left unsynced: a restart that
    // checkpointed pages over volatile WAL could lose half a commit.
    let sync_start = Instant::now();
    let synced = if control.state == DbState::ShutDown {
        None
    } else {
        tracing::info!(dir = %dir.display(), state = ?control.state, "not shut down cleanly: syncing what the last run left before recovery");
        Some(sync_after_unclean_shutdown(fs.as_ref(), dir, &control)?)
    };
    let sync_ms = sync_start.elapsed().as_secs_f64() * 1e3;
    // 3.
    let scan = recovery::scan(&fs, &wal_dir, &wal_config(&control), control.redo_lsn)?;
    recovery::check_reached_checkpoint(&scan, &wal_dir, &control)?;
    // 4. (Half-made segments go first: on a full disk their space is
    // what the control file's write needs.)
    let removed = crate::wal::segment::remove_half_made(fs.as_ref(), &wal_dir)?;
    if removed > 0 {
        tracing::info!(
            removed,
            "removed half-made WAL segments a failed creation left"
        );
    }
    control.wal_epoch += 1;
    control.state = DbState::InRecovery;
    control.write(fs.as_ref(), dir, Issuer::Recovery)?;
    // 5.
    let wal = Wal::open(
        fs.clone(),
        &wal_dir,
        wal_config(&control),
        scan.end,
        scan.prev_record,
    )?;
    let wal = Arc::new(wal.with_image_compression(options.wal_compression.into()));
    let open_files = crate::file::open_files::data_file_budget(
        options.max_files_per_process,
        options.reserved_file_descriptors,
    )?;
    let files = DataFiles::new(fs.clone(), &dir.join(DATA_DIR), &settings);
    let files = Arc::new(files.with_open_file_limit(open_files));
    files.set_atomic_page_writes(atomic_files, Issuer::Recovery)?;
    // 6. The area's copies go in before redo reads any page; the WAL's end
    // is already known from step 3's scan. Only then may the write path
    // reuse the area's slots.
    let from_area = crate::protect::double_writes::recover::restore_before_redo(
        fs.as_ref(),
        dir,
        &control,
        &files,
        &scan,
    )?;
    let area_start = from_area.start();
    let nframes = (options.buffer_pool_size / settings.page_size as u64) as usize;
    // The write path of recovery and its checkpoint: the control file's
    // mode, but where `atomic` is left on files that no longer take it,
    // the mode it switches to (after a crash, double writes: step 1). In
    // place, those page writes could tear, and no image in the WAL
    // written under `atomic` would repair them (the crash laboratory's
    // `atomic_refused` found it).
    let recovery_mode = match settings.torn_page_protection {
        TornPageProtection::Atomic if !atomic_files => options
            .creation
            .torn_page_protection
            .unwrap_or(TornPageProtection::DoubleWrites),
        mode => mode,
    };
    // The engine's, created before the write path that counts into them.
    let double_write_stats = Arc::new(DoubleWriteStats::default());
    let write_path = crate::protect::WritePathContext {
        fs: fs.as_ref(),
        dir,
        system_id: control.system_id,
        files: &files,
        options: &options,
        checksums: settings.data_checksums,
        start: &area_start,
        double_write_stats: &double_write_stats,
    };
    let pool = BufferPool::new(
        nframes,
        settings.page_size as usize,
        settings.data_checksums,
        files.clone(),
        wal.clone() as Arc<dyn WalFlush>,
        crate::protect::page_write_protection(recovery_mode, &write_path)?,
        Some(btree::validate_page),
    )?;
    pool.set_recovery(true);
    let mut report = recovery::redo(
        &pool,
        &fs,
        &wal_dir,
        &wal_config(&control),
        control.redo_lsn,
        &scan,
    )?;
    report.pages_repaired_from_double_writes = from_area.counts.restored;
    report.pages_repaired_below_redo = from_area.counts.restored_below_redo;
    report.damaged_pages_repaired_from_double_writes = from_area.counts.restored_damaged;
    report.double_write_manifests_passed_over = from_area.manifests_passed_over;
    if let Some(s) = synced {
        report.startup_sync_files = s.wal_segments + s.data_files + s.double_write_files;
        report.startup_sync_ms = sync_ms;
    }
    pool.set_recovery(false);
    // 7.
    let on_disk = files.ids_on_disk()?;
    let on_disk_max = on_disk.iter().copied().max().unwrap_or(0);
    let next_file_id = control
        .next_file_id
        .max(scan.max_file_id + 1)
        .max(on_disk_max + 1)
        .max(CATALOG_FILE_ID + 1);
    let next_xid = control.next_xid.max(scan.max_xid + 1);
    // 8.
    let catalog_meta = PageId::new(CATALOG_FILE_ID, btree::meta::META_BLOCK);
    let needs_catalog =
        pool.pin_cached(catalog_meta).is_none() && !on_disk.contains(&CATALOG_FILE_ID);
    let engine = Arc::new(Engine::new(
        dir.to_path_buf(),
        fs,
        io_stats,
        control,
        options,
        wal,
        pool,
        double_write_stats,
        next_xid,
        next_file_id,
        lock,
    ));
    if needs_catalog {
        let tree = Tree::new(&engine.pool, CATALOG_FILE_ID);
        smo::create_tree(&tree, &engine.wal, Issuer::Client)?;
    }
    catalog::load(&engine)?;
    catalog::remove_orphan_files(&engine)?;
    // 8b. Transactions whose write set spilled: the committed finished,
    // the rest removed.
    crate::txn::spilled::finish_committed(&engine)?;
    // 9.
    checkpoint::procedure::run(&engine, Reason::EndOfRecovery)?;
    crate::protect::switch::after_end_of_recovery(&engine, recovery_mode, &area_start)?;
    // 10.
    let background = checkpoint::background::spawn(engine.clone());
    Ok(Database {
        engine,
        background,
        recovery: report,
        earlier_stats,
    })
}

/// Step 1's check of atomic page writes, before anything is written:
/// `auto` resolved and `atomic` checked for the mode asked for, and
/// whether the data files are opened atomic until a switch (under
/// `atomic` in force). A database left under `atomic` on files that no
/// longer take it (copied elsewhere, or refused at run time:
/// `Error::AtomicWriteRefused`) opens when it switches to
/// `double_writes` (its recovery's page writes go through the
/// double-write area, and the pages on disk were written whole), or to
/// any mode after a clean shutdown (its recovery writes no page); else it
/// is refused: under `off` or `full_pages` a crash during its recovery
/// could tear a page no image repairs.
fn settle_protection(
    fs: &dyn FileSystem,
    dir: &Path,
    control: &ControlFile,
    mut options: Options,
) -> Result<(Options, bool)> {
    use crate::protect::atomic;
    use TornPageProtection::Atomic;
    let (data_dir, s) = (dir.join(DATA_DIR), &control.settings);
    // `atomic` asked of a database under it is checked once, below.
    let asked = options.creation.torn_page_protection;
    if let Some(asked) = asked.filter(|m| *m != Atomic || s.torn_page_protection != Atomic) {
        let mode = atomic::settle(fs, dir, &data_dir, asked, s.page_size, s.data_checksums)?;
        options.creation.torn_page_protection = Some(mode);
    }
    if s.torn_page_protection != Atomic {
        return Ok((options, false));
    }
    match atomic::check_files(fs, dir, &data_dir, s.page_size) {
        Ok(()) => Ok((options, true)),
        Err(why) => {
            let to = options.creation.torn_page_protection;
            let leaving = to.is_some_and(|m| m != Atomic);
            if leaving && control.state == DbState::ShutDown {
                tracing::warn!(%why, "a database under atomic opened on files without atomic writes: shut down cleanly, so switching away is safe");
                return Ok((options, false));
            }
            if to == Some(TornPageProtection::DoubleWrites) {
                tracing::warn!(%why, "a database under atomic opened on files without atomic writes: recovering under double_writes, whose page writes go through the double-write area");
                return Ok((options, false));
            }
            Err(crate::error::Error::Invalid(format!(
                "{} is under torn_page_protection = atomic, but its files here cannot be \
                 written a page at a time all or nothing, so its recovery could tear a page \
                 no image repairs: open it where it was made{}. {why}",
                dir.display(),
                if control.state == DbState::ShutDown {
                    ", or switch it to another mode (it was shut down cleanly)"
                } else {
                    ", or recover it with torn_page_protection = double_writes"
                }
            )))
        }
    }
}

/// What [`sync_after_unclean_shutdown`] made durable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartupSync {
    pub wal_segments: u64,
    pub data_files: u64,
    /// Shard files of the double-write area (`dw/`).
    pub double_write_files: u64,
    pub directories: u64,
}

/// After an unclean shutdown, makes durable whatever the dead process left
/// in the OS page cache, before anything trusts it (PostgreSQL's
/// SyncDataDirectory at the start of crash recovery): the WAL segments from
/// the one holding the redo point on, every data file, the double-write
/// area's shard files, and the directories.
///
/// Why: a process killed with its page cache intact (kill -9, a panic, an
/// OOM kill) leaves WAL that was written but never fsynced. The reader finds
/// it, the WAL writer takes it as flushed, and the restart's redo and
/// checkpoint then write and fsync data pages that depend on it. A power
/// loss before that WAL reaches the disk would leave half a transaction on
/// the data pages and nothing in the WAL to tell. The same holds for the
/// double-write area: recovery restores pages from the copies it reads
/// there, so a batch the dead process wrote but never fsynced must be
/// durable before a restored page overwrites the only other version. A
/// failed fsync here is fatal, as everywhere: the open fails.
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
    let area_dir = dir.join(crate::protect::double_writes::area::AREA_DIR);
    if fs.exists(&area_dir) {
        for path in fs.list_dir(&area_dir)? {
            fs.open(&path, FileKind::DoubleWrite, OpenOptions::read_only())?
                .sync_all(Issuer::Recovery)?;
            done.double_write_files += 1;
        }
        fs.sync_dir(&area_dir, Issuer::Recovery)?;
        done.directories += 1;
    }
    fs.sync_dir(&wal_dir, Issuer::Recovery)?;
    fs.sync_dir(dir, Issuer::Recovery)?;
    done.directories += 2;
    Ok(done)
}
