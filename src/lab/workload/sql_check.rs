//! Checking workload tables made through SQL (`untorn serve` loaded by
//! `pgbench -i` or `sysbench prepare`): their rows live in engine tables
//! of reserved names in SQL's own encoding, so the checks of tpcb.rs and
//! sysbench.rs cannot read them; this one reads them through the SQL
//! catalog, as a PostgreSQL user would with psql.

use super::check::{CheckReport, CheckedWorkload};
use super::tpcb;
use crate::error::{Error, Result};
use crate::sql::{Outcome, SqlEngine, Value};
use std::sync::Arc;

/// The workloads whose tables the SQL catalog names.
pub fn detect(sql: &SqlEngine) -> Vec<CheckedWorkload> {
    CheckedWorkload::named_by(&sql.table_names())
}

/// `workload`'s check through SQL; `None` where its invariants cannot be
/// checked that way (sysbench's index agreement needs the engine's rows).
pub fn check(sql: &Arc<SqlEngine>, workload: CheckedWorkload) -> Result<Option<CheckReport>> {
    match workload {
        CheckedWorkload::Tpcb => tpcb_check(sql).map(Some),
        CheckedWorkload::Sysbench | CheckedWorkload::Tpcc => Ok(None),
    }
}

/// pgbench's invariant: every transaction adds its delta to one account,
/// one teller and one branch and records it in the history, so the four
/// sums agree.
fn tpcb_check(sql: &Arc<SqlEngine>) -> Result<CheckReport> {
    let mut report = CheckReport::new("tpcb");
    let names = sql.table_names();
    let mut sums = Vec::with_capacity(tpcb::TABLES.len());
    for (name, column, what) in [
        (tpcb::ACCOUNTS, "abalance", "account balances"),
        (tpcb::TELLERS, "tbalance", "teller balances"),
        (tpcb::BRANCHES, "bbalance", "branch balances"),
        (tpcb::HISTORY, "delta", "history deltas"),
    ] {
        if !names.iter().any(|n| n == name) {
            report
                .broken
                .push(format!("tpcb invariant broken: table {name} is missing"));
            continue;
        }
        let row = one_row(sql, &format!("select count(*), sum({column}) from {name}"))?;
        let (rows, sum) = match row.as_slice() {
            [Value::Int(rows), sum] => (*rows, sum),
            other => return Err(Error::Invalid(format!("{name}: unexpected row {other:?}"))),
        };
        // SQL's sum of no rows is NULL; pgbench's invariant counts it 0.
        let sum = match sum {
            Value::Int(s) => i128::from(*s),
            Value::Null => 0,
            other => return Err(Error::Invalid(format!("{name}: sum is {other:?}"))),
        };
        report
            .checked
            .push(format!("{name}: {rows} rows, sum of {what} {sum}"));
        sums.push((what, sum));
    }
    if sums.len() == tpcb::TABLES.len() && sums.iter().any(|&(_, s)| s != sums[0].1) {
        let list: Vec<String> = sums.iter().map(|(w, s)| format!("{w} {s}")).collect();
        report.broken.push(format!(
            "tpcb invariant broken: the four sums differ ({}); all must be equal",
            list.join(", ")
        ));
    }
    Ok(report)
}

/// The single row `query` returns.
fn one_row(sql: &Arc<SqlEngine>, query: &str) -> Result<Vec<Value>> {
    let mut session = sql.session();
    let outcome = session
        .simple_query(query)
        .pop()
        .ok_or_else(|| Error::Invalid(format!("{query}: no result")))?;
    match outcome {
        Ok(Outcome::Rows { mut rows, .. }) if rows.len() == 1 => Ok(rows.remove(0)),
        Ok(_) => Err(Error::Invalid(format!("{query}: not one row"))),
        Err(e) => Err(Error::Invalid(format!("{query}: {e}"))),
    }
}
