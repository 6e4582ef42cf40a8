//! `untorn check`: open a database (recovering it, and reading its SQL
//! catalog as `untorn serve` does), verify every page, and check the
//! invariants of the workload whose tables it holds.

use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use untorn::control::{ControlFile, DbState};
use untorn::file::{FileSystem, Issuer};
use untorn::lab::workload::check::CheckedWorkload;
use untorn::sql::SqlEngine;
use untorn::{Database, Options, TornPageProtection};

/// A check failed: a page, an invariant, or a read while checking.
const FAILED: u8 = 1;
/// The database could not be opened (nor recovered).
const NOT_OPENED: u8 = 3;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The database directory.
    dir: PathBuf,
    /// The workload whose invariants to check: tpcb or sysbench
    /// [default: every one whose tables the database holds].
    #[arg(long)]
    workload: Option<String>,
    /// Open with this torn-page protection (full_pages or off): a database
    /// in another mode is switched to it after recovery, and keeps it
    /// [default: the database's].
    #[arg(long)]
    torn_page_protection: Option<String>,
}

pub fn run(fs: &dyn FileSystem, a: &CheckArgs) -> untorn::Result<ExitCode> {
    let workloads = match &a.workload {
        Some(name) => Some(CheckedWorkload::by_name(name)?),
        None => None,
    };
    let mut options = Options::default();
    options.creation.torn_page_protection = a
        .torn_page_protection
        .as_deref()
        .map(str::parse::<TornPageProtection>)
        .transpose()?;
    let dir = &a.dir;
    // Read before the opening changes it: a database found shut down is
    // closed again, so the check leaves it shut down.
    let (was_shut_down, mode) = match ControlFile::read(fs, dir, Issuer::Tool) {
        Ok(c) => (
            c.state == DbState::ShutDown,
            c.settings.torn_page_protection,
        ),
        Err(e) => return Ok(not_opened(dir, &e)),
    };
    let db = match Database::open(dir, options) {
        Ok(db) => db,
        Err(e) => return Ok(not_opened(dir, &e)),
    };
    let mut ok = recovered(&db, was_shut_down);
    // `untorn serve` opens the SQL layer too, reading its catalog and each
    // table's last rows: a database it would refuse must not pass.
    match SqlEngine::check_catalog(&db) {
        Ok(None) => {}
        Ok(Some(n)) => println!("open: SQL catalog read ({n} tables)"),
        Err(e) => {
            if was_shut_down {
                db.close()?;
            }
            return Ok(not_opened(dir, &format!("the SQL catalog: {e}")));
        }
    }
    let now = db.settings().torn_page_protection;
    if now != mode {
        println!("open: torn_page_protection switched from {mode} to {now}");
    }
    ok &= verified(fs, dir)?;
    let workloads = match workloads {
        Some(w) => vec![w],
        None => CheckedWorkload::detect(&db),
    };
    if workloads.is_empty() {
        println!("workload: no tpcb or sysbench tables; invariants not checked");
    }
    for w in workloads {
        match w.check(&db) {
            Ok(report) => {
                for line in &report.checked {
                    println!("{}: {line}", report.workload);
                }
                for line in &report.broken {
                    println!("FAILED: {line}");
                }
                if report.ok() {
                    println!("{}: invariants hold", report.workload);
                }
                ok &= report.ok();
            }
            Err(e) => {
                println!("FAILED: {}: reading the tables: {e}", w.name());
                ok = false;
            }
        }
    }
    if was_shut_down {
        db.close()?;
    }
    // Else dropped without a shutdown checkpoint: it stays as a crash left
    // it (recovered up to the opening's checkpoint).
    if ok {
        println!("check: ok");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("check: FAILED");
        Ok(ExitCode::from(FAILED))
    }
}

fn not_opened(dir: &Path, e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("untorn: check: could not open {}: {e}", dir.display());
    ExitCode::from(NOT_OPENED)
}

/// Prints what the opening's recovery did; false if it left damaged pages.
fn recovered(db: &Database, was_shut_down: bool) -> bool {
    let r = &db.recovery;
    if was_shut_down {
        println!("open: the database was shut down cleanly");
    } else {
        println!(
            "open: recovered from {} to {} ({} records, {} commits replayed, {} pages restored from images)",
            r.redo_start, r.redo_end, r.records_replayed, r.commits_replayed,
            r.pages_restored_from_images
        );
    }
    for p in &r.damaged_pages_repaired {
        println!("open: repaired damaged page {p}");
    }
    for p in &r.damaged_pages_left {
        println!("FAILED: recovery left page {p} damaged");
    }
    r.damaged_pages_left.is_empty()
}

/// `untorn verify`'s check of every page; false if any fails.
fn verified(fs: &dyn FileSystem, dir: &Path) -> untorn::Result<bool> {
    let report = untorn::verify::verify_database(fs, dir)?;
    for f in &report.failures {
        println!("FAILED: verify: {f}");
    }
    println!(
        "verify: {} files, {} pages ({} new), {} bad",
        report.files_scanned,
        report.pages_scanned,
        report.pages_new,
        report.failures.len()
    );
    Ok(report.ok())
}
