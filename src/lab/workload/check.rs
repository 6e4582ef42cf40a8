//! Checking a database a workload left (after a benchmark, or a crash and
//! recovery): which workload's tables it holds, and what the workload's
//! `check` found. `untorn check` prints this; tests assert on it.

use super::{sysbench, tpcb, tpcc};
use crate::db::Database;
use crate::error::{Error, Result};

/// The workloads whose invariants can be checked: every sysbench script
/// shares one data set, so one check covers them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckedWorkload {
    Tpcb,
    Sysbench,
    Tpcc,
}

impl CheckedWorkload {
    pub fn name(self) -> &'static str {
        match self {
            CheckedWorkload::Tpcb => "tpcb",
            CheckedWorkload::Sysbench => "sysbench",
            CheckedWorkload::Tpcc => "tpcc",
        }
    }

    /// `tpcb`, `sysbench`, or a sysbench script name (`oltp_read_write`).
    pub fn by_name(name: &str) -> Result<CheckedWorkload> {
        match name {
            "tpcb" => Ok(CheckedWorkload::Tpcb),
            "sysbench" => Ok(CheckedWorkload::Sysbench),
            "tpcc" => Ok(CheckedWorkload::Tpcc),
            n if sysbench::Kind::by_name(n).is_some() => Ok(CheckedWorkload::Sysbench),
            _ => Err(Error::Invalid(format!(
                "unknown workload {name:?} to check; the workloads are tpcb, sysbench and tpcc"
            ))),
        }
    }

    /// The workloads whose tables `db` holds (none: a database of other tables).
    pub fn detect(db: &Database) -> Vec<CheckedWorkload> {
        let names: Vec<String> = db.tables().into_iter().map(|t| t.name).collect();
        Self::named_by(&names)
    }

    /// The workloads some of whose tables are among `names`.
    pub fn named_by(names: &[String]) -> Vec<CheckedWorkload> {
        let mut found = Vec::new();
        if names.iter().any(|n| tpcb::TABLES.contains(&n.as_str())) {
            found.push(CheckedWorkload::Tpcb);
        }
        if names.iter().any(|n| sysbench::table_number(n).is_some()) {
            found.push(CheckedWorkload::Sysbench);
        }
        // TPC-C's tables have plain names (item, stock...): two of its
        // own, together, say it is TPC-C's.
        let has = |t: &str| names.iter().any(|n| n == t);
        if has(tpcc::schema::WAREHOUSE) && has(tpcc::schema::NEW_ORDER) {
            found.push(CheckedWorkload::Tpcc);
        }
        found
    }

    /// Runs this workload's check on `db`.
    pub fn check(self, db: &Database) -> Result<CheckReport> {
        match self {
            CheckedWorkload::Tpcb => tpcb::check(db),
            CheckedWorkload::Sysbench => sysbench::check(db),
            CheckedWorkload::Tpcc => tpcc::check::check(db),
        }
    }
}

/// What a workload's check looked at, and which invariants do not hold.
/// An `Err` from a check is a read that failed; a broken invariant is here.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    pub workload: &'static str,
    /// One line per thing checked, with its figures (rows, sums).
    pub checked: Vec<String>,
    /// One line per broken invariant, naming it.
    pub broken: Vec<String>,
}

impl CheckReport {
    pub fn new(workload: &'static str) -> CheckReport {
        CheckReport {
            workload,
            ..CheckReport::default()
        }
    }

    pub fn ok(&self) -> bool {
        self.broken.is_empty()
    }

    /// `Ok` when every invariant holds, else an error listing the broken ones.
    pub fn into_result(self) -> Result<()> {
        if self.ok() {
            Ok(())
        } else {
            Err(Error::Invalid(self.broken.join("; ")))
        }
    }
}

/// Counts rows that fail a shape check and keeps the first, so a report
/// names an example without growing with the damage.
#[derive(Debug, Default)]
pub(crate) struct Malformed {
    pub count: u64,
    pub first: Option<String>,
}

impl Malformed {
    pub fn add(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(what());
        }
    }

    /// Adds a broken-invariant line to `report` if any row was malformed.
    pub fn report(self, report: &mut CheckReport, table: &str) {
        if let Some(first) = self.first {
            report.broken.push(format!(
                "{} invariant broken: {} malformed rows in {table} (first: {first})",
                report.workload, self.count
            ));
        }
    }
}
