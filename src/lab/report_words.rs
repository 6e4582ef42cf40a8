//! A comparison in words: which differences the data resolve, and by how
//! much, so that a reader need not read an interval to know whether a
//! difference is inside the noise.

use std::fmt::Write as _;

use super::{group_by_workload, mode_labels};
use crate::lab::confidence::RatioInterval;
use crate::lab::result::{Comparison, ConfigResult, PER_TXN};

/// A percentage as words print it: whole numbers from 1 up, one decimal
/// below (a 0.4 % change is not "0 %").
fn pct(x: f64) -> String {
    if x >= 1.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// A resolved ratio as a change: `slower by 3-11 %` for [0.89, 0.97]
/// with `up` "faster" and `down` "slower".
pub fn change_words(i: &RatioInterval, up: &str, down: &str) -> String {
    let (word, from, to) = if i.high < 1.0 {
        (down, 100.0 * (1.0 - i.high), 100.0 * (1.0 - i.low))
    } else {
        (up, 100.0 * (i.low - 1.0), 100.0 * (i.high - 1.0))
    };
    let (from, to) = (pct(from), pct(to));
    if from == to {
        format!("{word} by {from} %")
    } else {
        format!("{word} by {from}-{to} %")
    }
}

/// `label vs against on workload: 0.93x [0.89, 0.97], resolved: slower by
/// 3-11 %`, or `..., not resolved: the interval contains 1`, or without
/// an interval the plain ratio of the medians and why there is none.
pub fn tps_words(
    workload: &str,
    label: &str,
    c: &Comparison,
    value: f64,
    reference: f64,
) -> String {
    let head = format!("{label} vs {} on {workload}: ", c.against);
    match c.tps {
        Some(i) if i.resolved() => format!(
            "{head}{}, resolved: {}",
            i.text(),
            change_words(&i, "faster", "slower")
        ),
        Some(i) => format!(
            "{head}{}, not resolved: the interval contains 1{}",
            i.text(),
            i.detectable(None)
        ),
        None => {
            let s = if c.rounds == 1 { "" } else { "s" };
            format!(
                "{head}{:.2}x from {} round{s}, no interval: a ratio needs two rounds or more",
                value / reference,
                c.rounds
            )
        }
    }
}

/// The per-transaction figures of a comparison: the resolved ones with
/// their change, then those not resolved. Empty when no figure has an
/// interval.
pub fn per_txn_words(c: &Comparison) -> String {
    let mut resolved = Vec::new();
    let mut not = Vec::new();
    for (f, i) in PER_TXN.iter().zip(c.per_txn()) {
        match i {
            Some(i) if i.resolved() => resolved.push(format!(
                "{} {} ({})",
                f.heading,
                i.text(),
                change_words(&i, "more", "less")
            )),
            Some(_) => not.push(f.heading),
            None => {}
        }
    }
    let mut out = String::new();
    if !resolved.is_empty() {
        let _ = write!(out, "per transaction: {}", resolved.join("; "));
    }
    if !not.is_empty() {
        if !out.is_empty() {
            out.push_str("; ");
        }
        let _ = write!(out, "not resolved: {}", not.join(", "));
    }
    out
}

/// One verdict per pair of configurations of a workload (each against
/// every one before it): its TPS in words, then its per-transaction
/// figures.
pub struct Verdict {
    pub workload: String,
    /// Positions of the two configurations in the workload's group: `a`
    /// against `b`, `b` < `a`.
    pub a: usize,
    pub b: usize,
    pub tps: String,
    pub per_txn: String,
    pub comparison: Comparison,
}

/// The verdicts of every workload, in the order of the results.
pub fn verdicts(results: &[ConfigResult]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (w, group) in group_by_workload(results) {
        let labels = mode_labels(&group);
        for a in 1..group.len() {
            for b in 0..a {
                let c = Comparison::between(group[a], group[b], labels[b].clone(), b);
                out.push(Verdict {
                    workload: w.to_string(),
                    a,
                    b,
                    tps: tps_words(w, &labels[a], &c, group[a].tps, group[b].tps),
                    per_txn: per_txn_words(&c),
                    comparison: c,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(ratio: f64, low: f64, high: f64) -> RatioInterval {
        RatioInterval {
            ratio,
            low,
            high,
            pairs: 5,
        }
    }

    fn comparison(tps: Option<RatioInterval>, rounds: usize) -> Comparison {
        Comparison {
            against: "off".into(),
            rounds,
            tps,
            ..Default::default()
        }
    }

    #[test]
    fn a_resolved_ratio_reads_as_a_change() {
        let c = comparison(Some(interval(0.93, 0.89, 0.97)), 5);
        assert_eq!(
            tps_words("oltp_write_only", "double_writes", &c, 93.0, 100.0),
            "double_writes vs off on oltp_write_only: 0.93x [0.89, 0.97], \
             resolved: slower by 3-11 %"
        );
        let up = interval(1.05, 1.004, 1.1);
        assert_eq!(change_words(&up, "faster", "slower"), "faster by 0.4-10 %");
    }

    #[test]
    fn an_unresolved_ratio_says_the_interval_contains_one() {
        let c = comparison(Some(interval(1.02, 0.97, 1.07)), 5);
        assert_eq!(
            tps_words("tpcb", "full_pages", &c, 102.0, 100.0),
            "full_pages vs off on tpcb: 1.02x [0.97, 1.07], not resolved: \
             the interval contains 1; this run detects ±6.6 % (95 %, power 80 %)"
        );
        let one = comparison(None, 1);
        assert_eq!(
            tps_words("tpcb", "full_pages", &one, 150.0, 100.0),
            "full_pages vs off on tpcb: 1.50x from 1 round, no interval: \
             a ratio needs two rounds or more"
        );
    }

    #[test]
    fn per_transaction_figures_list_the_resolved_first() {
        let c = Comparison {
            wal_bytes_per_txn: Some(interval(2.1, 2.0, 2.2)),
            cpu_us_per_txn: Some(interval(1.01, 0.98, 1.04)),
            ..comparison(None, 5)
        };
        assert_eq!(
            per_txn_words(&c),
            "per transaction: WAL B/txn 2.10x [2.00, 2.20] (more by 100-120 %); \
             not resolved: CPU µs/txn"
        );
        assert_eq!(per_txn_words(&comparison(None, 5)), "");
    }
}
