//! Switching `torn_page_protection` at an opening.
//!
//! The mode is recorded in the control file and may change from one
//! opening to the next. The order is what makes a switch safe:
//! 1. Recovery and the end-of-recovery checkpoint run under the control
//!    file's (old) mode: the WAL since the redo point was written under it.
//!    Redo replays every image it finds whatever the mode, so images logged
//!    under `full_pages` still repair pages when switching to `off`.
//! 2. Only once that checkpoint is complete (data files fsynced, control
//!    file naming its redo point durable) does `after_end_of_recovery`
//!    record the new mode in the control file, durably, and put it in
//!    force. Nothing changes a page between the two: the background
//!    threads have not started and no caller has the database yet.
//!
//! Why this order holds in both directions:
//! - `off` to `full_pages`: every page's LSN is at or below the new redo
//!   point, so the first change to each page after the switch logs its
//!   image. A control file saying `full_pages` therefore always names a
//!   redo point after which every change was logged under `full_pages`.
//!   Recorded any earlier (before the checkpoint completes), a crash would
//!   leave a control file promising `full_pages` over WAL written under
//!   `off`, and a page the checkpoint tore could not be repaired.
//! - `full_pages` to `off`: the user accepts detection without repair from
//!   the switch on. A crash before the switch is recorded recovers under
//!   `full_pages` with the images; after it, redo starts at a redo point
//!   past every change made under `full_pages`.
//! - A crash during the control file's replacement leaves the old file or
//!   the new one whole (see [`crate::control`]); both name the same redo
//!   point and are correct.
//!
//! Into `double_writes`, the write path (its area created) is put in place
//! before the control file names the mode; away from it, recovery has
//! already restored what the area held, and the area is removed once the
//! mode in force does not use it.
//!
//! One exception to step 1: `atomic` left on files that no longer take
//! RWF_ATOMIC. Its recovery's page writes in place could tear with no
//! image to repair them, so recovery and its checkpoint already write
//! through the mode switched to (double writes after a crash), and the
//! switch then only records it.

use super::double_writes;
use super::double_writes::recover::AreaStart;
use crate::control::DbState;
use crate::engine::Engine;
use crate::error::Result;
use crate::file::Issuer;
use crate::settings::TornPageProtection;

/// After the end-of-recovery checkpoint: if the options ask for another
/// mode than the one in force, records it in the control file (durably)
/// and only then puts it in force. A double-write area left by an earlier
/// mode is removed once the mode in force does not use it (recovery has
/// already restored what it held).
/// `in_force` is the mode of the write path recovery ran with.
pub(crate) fn after_end_of_recovery(
    engine: &Engine,
    in_force: TornPageProtection,
    start: &AreaStart,
) -> Result<()> {
    let from = engine.protection();
    if let Some(to) = engine
        .options
        .creation
        .torn_page_protection
        .filter(|&to| to != from)
    {
        switch(engine, from, to, in_force, start)?;
    }
    if engine.protection() != TornPageProtection::DoubleWrites {
        let removed = engine.stop_if_fatal(double_writes::shard_file::remove_area(
            engine.fs.as_ref(),
            &engine.dir,
            Issuer::Recovery,
        ))?;
        if removed > 0 {
            tracing::info!(
                files = removed,
                "double-write area removed: not used by this mode"
            );
        }
    }
    Ok(())
}

fn switch(
    engine: &Engine,
    from: TornPageProtection,
    to: TornPageProtection,
    in_force: TornPageProtection,
    start: &AreaStart,
) -> Result<()> {
    let checksums = engine.control.lock().settings.data_checksums;
    from.check_switch(to, checksums)?;
    if in_force != to {
        put_in_force(engine, to, start, checksums)?;
    }
    record(engine, from, to)
}

/// Replaces the pool's write path with `to`'s.
fn put_in_force(
    engine: &Engine,
    to: TornPageProtection,
    start: &AreaStart,
    checksums: crate::settings::ChecksumAlgorithm,
) -> Result<()> {
    // The write path first: with double writes the area exists before the
    // control file promises it. Nothing writes a page in between (no
    // background thread or caller runs yet).
    let cx = super::WritePathContext {
        fs: engine.fs.as_ref(),
        dir: &engine.dir,
        system_id: engine.control.lock().system_id,
        files: engine.pool.files(),
        options: &engine.options,
        checksums,
        start,
        double_write_stats: &engine.double_write_stats,
    };
    let new = super::page_write_protection(to, &cx)?;
    // Pages the old write path deferred go in place first, durably: the new
    // one neither knows nor serves them, and its area may be removed.
    let old = engine.pool.page_write_protection();
    if engine.stop_if_fatal(old.write_back_all(Issuer::Recovery))? > 0 {
        engine.stop_if_fatal(engine.pool.files().sync_all(Issuer::Recovery))?;
    }
    // And no manifest names a slot any longer (the area may stay).
    let redo = engine.control.lock().redo_lsn;
    engine.stop_if_fatal(old.persist_deferred(redo, Issuer::Recovery))?;
    // Data files are opened atomic exactly under `atomic` (step 1 of the
    // opening checked the files take it). Reopening makes everything
    // written so far durable first.
    engine.stop_if_fatal(
        engine
            .pool
            .files()
            .set_atomic_page_writes(to == TornPageProtection::Atomic, Issuer::Recovery),
    )?;
    engine.pool.set_page_write_protection(new);
    Ok(())
}

/// Records `to` in the control file, durably, then puts it in force.
fn record(engine: &Engine, from: TornPageProtection, to: TornPageProtection) -> Result<()> {
    let mut control = engine.control.lock();
    // The checkpoint completed: the control file names its redo point and
    // says "in production". Anything else would switch over WAL written
    // under the old mode.
    assert_eq!(
        control.state,
        DbState::InProduction,
        "a protection switch before the end-of-recovery checkpoint completed"
    );
    assert_eq!(control.redo_lsn, *engine.checkpoint.redo_point.hold());
    let mut next = control.clone();
    next.settings.torn_page_protection = to;
    // The new write path's manifest (none away from double writes: the
    // area may go, and nothing relies on it, the old one naming no slot).
    next.deferred_manifest = engine.pool.page_write_protection().durable_manifest();
    engine.stop_if_fatal(next.write(engine.fs.as_ref(), &engine.dir, Issuer::Recovery))?;
    *control = next;
    engine.set_protection(to);
    tracing::info!(
        from = %from,
        to = %to,
        redo = %control.redo_lsn,
        "torn_page_protection switched after the end-of-recovery checkpoint"
    );
    Ok(())
}
