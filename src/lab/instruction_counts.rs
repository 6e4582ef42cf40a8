//! What Callgrind counted, per thread group and per transaction, and how
//! two configurations' counts compare (`lab::instructions` runs them).

use super::confidence::RatioInterval;
use crate::error::{Error, Result};
use std::path::Path;

/// Instructions a whole run executed, by thread group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadCounts {
    /// Thread 1: the client.
    pub client: u64,
    /// Every other thread.
    pub background: u64,
    /// How many threads the run had.
    pub threads: usize,
}

/// Instructions per transaction, from a short and a long run.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PerTransaction {
    pub client: f64,
    pub background: f64,
    /// The transactions the long run had beyond the short one.
    pub transactions: u64,
    pub short: ThreadCounts,
    pub long: ThreadCounts,
}

impl PerTransaction {
    /// The difference of two runs over the transactions between them.
    pub fn from_runs(short: ThreadCounts, long: ThreadCounts, transactions: u64) -> PerTransaction {
        let per = |a: u64, b: u64| (b as f64 - a as f64) / transactions.max(1) as f64;
        PerTransaction {
            client: per(short.client, long.client),
            background: per(short.background, long.background),
            transactions,
            short,
            long,
        }
    }

    pub fn total(&self) -> f64 {
        self.client + self.background
    }
}

/// Reads the per-thread files Callgrind wrote for `out_file`
/// (`OUT-01`, `OUT-02`, ...: each with a `thread: N` and a `totals: N`
/// line).
pub fn read_callgrind(out_file: &Path) -> Result<ThreadCounts> {
    let dir = out_file.parent().unwrap_or(Path::new("."));
    let stem = out_file
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::Invalid(format!("{}: no file name", out_file.display())))?;
    let mut counts = ThreadCounts::default();
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, "read_dir", e))?;
    for entry in entries {
        let path = entry.map_err(|e| Error::io(dir, "read_dir", e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let is_part = name
            .strip_prefix(stem)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !is_part {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, "read", e))?;
        let (thread, totals) = parse_part(&text).ok_or_else(|| {
            Error::Invalid(format!("{}: no thread or totals line", path.display()))
        })?;
        counts.threads += 1;
        if thread == 1 {
            counts.client += totals;
        } else {
            counts.background += totals;
        }
    }
    if counts.threads == 0 {
        return Err(Error::Invalid(format!(
            "Callgrind wrote no {stem}-NN files in {}",
            dir.display()
        )));
    }
    Ok(counts)
}

/// The `thread:` and `totals:` (first event: instructions) of one file.
fn parse_part(text: &str) -> Option<(u64, u64)> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("thread:")?, field("totals:")?))
}

/// The band a rerun's count stays within, as a fraction: above the
/// largest spread measured between two reruns (0.42 %, full_pages on
/// oltp_write_only at the default data; most configurations within
/// 0.2 %: docs/BENCHMARKS.md). A ratio of two counts is judged with this
/// band on either side, as an interval.
pub const REPEAT_BAND: f64 = 0.005;

/// The ratio of two configurations' instructions per transaction (all
/// threads), with [`REPEAT_BAND`] on either side; `pairs` 0: it is not
/// from paired rounds.
pub fn ratio(a: &PerTransaction, b: &PerTransaction) -> Option<RatioInterval> {
    let r = a.total() / b.total();
    (r.is_finite() && r > 0.0).then_some(RatioInterval {
        ratio: r,
        low: r * (1.0 - REPEAT_BAND),
        high: r * (1.0 + REPEAT_BAND),
        pairs: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_thread_files_are_summed_by_group() {
        let dir = tempfile::tempdir().unwrap();
        let part = |n: u32, totals: u64| {
            format!("# callgrind format\nversion: 1\npart: 1\nthread: {n}\nevents: Ir\nsummary: {totals}\ntotals: {totals}\n")
        };
        std::fs::write(dir.path().join("cg-01"), part(1, 1000)).unwrap();
        std::fs::write(dir.path().join("cg-02"), part(2, 30)).unwrap();
        std::fs::write(dir.path().join("cg-03"), part(3, 12)).unwrap();
        std::fs::write(dir.path().join("cg-notes"), "not a part").unwrap();
        std::fs::write(dir.path().join("other-01"), part(1, 5)).unwrap();
        let c = read_callgrind(&dir.path().join("cg")).unwrap();
        assert_eq!(
            c,
            ThreadCounts {
                client: 1000,
                background: 42,
                threads: 3
            }
        );
        std::fs::write(dir.path().join("cg-04"), "thread: 4\n").unwrap();
        assert!(read_callgrind(&dir.path().join("cg")).is_err());
        assert!(read_callgrind(&dir.path().join("none")).is_err());
    }

    #[test]
    fn the_difference_of_two_runs_is_per_transaction() {
        let short = ThreadCounts {
            client: 10_000,
            background: 500,
            threads: 3,
        };
        let long = ThreadCounts {
            client: 30_000,
            background: 1_500,
            threads: 4,
        };
        let p = PerTransaction::from_runs(short, long, 100);
        assert_eq!((p.client, p.background, p.total()), (200.0, 10.0, 210.0));
    }
}
