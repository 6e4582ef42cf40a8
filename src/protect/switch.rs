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
//! `double_writes` is refused as a target (not built), before anything is
//! written. When it is built, the switch must also change the buffer
//! pool's write path and, away from it, restore from the double-write area
//! before the switch.

use crate::control::DbState;
use crate::engine::Engine;
use crate::error::Result;
use crate::file::Issuer;
use crate::settings::TornPageProtection;

/// Refuses a switch from `from` to `to` that cannot be made safely, naming
/// both modes. Called before anything is written.
pub fn check(from: TornPageProtection, to: TornPageProtection) -> Result<()> {
    match to {
        TornPageProtection::DoubleWrites if from != to => {
            Err(super::double_writes::not_built(&format!(
                "the database uses {from} and cannot be switched from {from} to {to}; \
                 open it with torn_page_protection {from}, or switch to full_pages or off"
            )))
        }
        _ => Ok(()),
    }
}

/// After the end-of-recovery checkpoint: if the options ask for another
/// mode than the one in force, records it in the control file (durably)
/// and only then puts it in force.
pub(crate) fn after_end_of_recovery(engine: &Engine) -> Result<()> {
    let from = engine.protection();
    let to = match engine.options.creation.torn_page_protection {
        Some(to) if to != from => to,
        _ => return Ok(()),
    };
    check(from, to)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use TornPageProtection::*;

    #[test]
    fn switches_between_built_modes_are_allowed() {
        for (from, to) in [(Off, FullPages), (FullPages, Off), (Off, Off)] {
            check(from, to).unwrap();
        }
    }

    #[test]
    fn a_switch_to_double_writes_is_refused_naming_both_modes() {
        for from in [Off, FullPages] {
            let e = check(from, DoubleWrites).unwrap_err().to_string();
            assert!(
                e.contains(&format!("from {from} to double_writes"))
                    && e.contains("not implemented"),
                "{e}"
            );
        }
    }
}
