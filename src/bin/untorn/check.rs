//! `untorn check`: open a database (recovering it, and reading its SQL
//! catalog as `untorn serve` does), verify every page, and check the
//! invariants of the workload whose tables it holds.
//!
//! The opening runs on an in-memory view of the directory
//! ([`OverlayFileSystem`]): recovery and checkpoints write as usual, into
//! memory, so a check changes no byte on disk (a crashed database stays
//! crashed, and recovers again at its next opening).

use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use untorn::control::{ControlFile, DbState};
use untorn::file::overlay::OverlayFileSystem;
use untorn::file::{FileSystem, IoStats, Issuer};
use untorn::lab::workload::check::{CheckReport, CheckedWorkload};
use untorn::lab::workload::sql_check;
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
    /// The torn-page protection the database must have (full_pages,
    /// double_writes or off): one recorded with another is refused (exit
    /// 2), as a check never changes a setting; `untorn serve DIR
    /// --torn-page-protection MODE` switches a database [default: the
    /// database's].
    #[arg(long)]
    torn_page_protection: Option<String>,
}

pub fn run(disk: Arc<dyn FileSystem>, a: &CheckArgs) -> untorn::Result<ExitCode> {
    let workloads = match &a.workload {
        Some(name) => Some(CheckedWorkload::by_name(name)?),
        None => None,
    };
    let expected = a
        .torn_page_protection
        .as_deref()
        .map(str::parse::<TornPageProtection>)
        .transpose()?;
    let dir = &a.dir;
    // Read before the opening: what the database was found as.
    let (was_shut_down, mode) = match ControlFile::read(disk.as_ref(), dir, Issuer::Tool) {
        Ok(c) => (
            c.state == DbState::ShutDown,
            c.settings.torn_page_protection,
        ),
        Err(e) => return Ok(not_opened(dir, &e)),
    };
    if let Some(want) = expected.filter(|&w| w != mode) {
        return Err(untorn::Error::InvalidSetting {
            name: "torn_page_protection",
            detail: format!(
                "the database's is {mode}, not {want}; a check never changes a setting \
                 (`untorn serve {} --torn-page-protection {want}` switches it)",
                dir.display()
            ),
        });
    }
    // The database's own settings: an opening given another mode would
    // switch it. Every write of the opening stays in the view's memory.
    let view = Arc::new(OverlayFileSystem::new(disk));
    let fs: Arc<dyn FileSystem> = view.clone();
    let db = Database::open_with(
        fs.clone(),
        Arc::new(IoStats::default()),
        dir,
        Options::default(),
    );
    let db = match db {
        Ok(db) => Arc::new(db),
        Err(e) => return Ok(not_opened(dir, &e)),
    };
    let mut ok = recovered(&db, was_shut_down);
    // `untorn serve` opens the SQL layer too, reading its catalog and each
    // table's last rows: a database it would refuse must not pass. Tables
    // made through SQL are checked through it.
    let sql = match SqlEngine::open_existing(db.clone()) {
        Ok(sql) => sql,
        Err(e) => {
            close(db)?;
            return Ok(not_opened(dir, &format!("the SQL catalog: {e}")));
        }
    };
    if let Some(sql) = &sql {
        println!(
            "open: SQL catalog read ({} tables)",
            sql.table_names().len()
        );
    }
    ok &= verified(fs.as_ref(), dir)?;
    let found = Found::new(&db, sql.as_ref());
    let workloads = match workloads {
        Some(w) => vec![w],
        None => found.all(),
    };
    let mut not_checked = Vec::new();
    if workloads.is_empty() {
        println!("workload: no tpcb, sysbench or tpcc tables; invariants not checked");
        not_checked.push("no tpcb, sysbench or tpcc tables".to_string());
    }
    for w in workloads {
        let report = match (&sql, found.through_sql(w)) {
            (Some(sql), true) => sql_check::check(sql, w),
            _ => w.check(&db).map(Some),
        };
        match report {
            Ok(Some(report)) => ok &= printed(&report),
            Ok(None) => {
                let why = format!(
                    "{}: tables made through SQL; only the tpcb invariant is checked through it",
                    w.name()
                );
                println!("{why}: invariants not checked");
                not_checked.push(why);
            }
            Err(e) => {
                println!("FAILED: {}: reading the tables: {e}", w.name());
                ok = false;
            }
        }
    }
    drop(sql);
    close(db)?;
    println!(
        "directory unchanged: recovery and checkpoints ran in memory ({} KB)",
        view.bytes_held().div_ceil(1024)
    );
    if !ok {
        println!("check: FAILED");
        Ok(ExitCode::from(FAILED))
    } else if !not_checked.is_empty() {
        // Not "ok": pages and recovery passed, but no workload's invariant
        // was checked; the exit status is still 0, as nothing failed.
        println!(
            "check: pages ok; invariants not checked ({})",
            not_checked.join("; ")
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("check: ok");
        Ok(ExitCode::SUCCESS)
    }
}

/// Closes `db` with its shutdown checkpoint (into the view's memory):
/// a database a check passes also shuts down.
fn close(db: Arc<Database>) -> untorn::Result<()> {
    match Arc::try_unwrap(db) {
        Ok(db) => db.close(),
        Err(_) => Err(untorn::Error::Invalid(
            "the database is still in use".into(),
        )),
    }
}

/// The workloads whose tables the database holds, as engine tables (the
/// lab's) or through the SQL catalog (`untorn serve`'s).
struct Found {
    engine: Vec<CheckedWorkload>,
    sql: Vec<CheckedWorkload>,
}

impl Found {
    fn new(db: &Database, sql: Option<&Arc<SqlEngine>>) -> Found {
        Found {
            engine: CheckedWorkload::detect(db),
            sql: sql.map(|s| sql_check::detect(s)).unwrap_or_default(),
        }
    }

    fn all(&self) -> Vec<CheckedWorkload> {
        let mut all = self.engine.clone();
        all.extend(self.sql.iter().filter(|w| !self.engine.contains(w)));
        all
    }

    /// Whether `w`'s tables are SQL tables (and not the lab's).
    fn through_sql(&self, w: CheckedWorkload) -> bool {
        self.sql.contains(&w) && !self.engine.contains(&w)
    }
}

/// Prints a workload's report; false if an invariant is broken.
fn printed(report: &CheckReport) -> bool {
    for line in &report.checked {
        println!("{}: {line}", report.workload);
    }
    for line in &report.broken {
        println!("FAILED: {line}");
    }
    if report.ok() {
        println!("{}: invariants hold", report.workload);
    }
    report.ok()
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
