//! How many rounds a workload runs: a fixed number, or rounds added a
//! whole order cycle at a time until every ratio the report shows is as
//! precise as asked, the time budget would run out, or a most is reached.
//!
//! The decision ([`next_step`]) is a pure function of the results so far
//! and the time they took, so it is tested on synthetic results.

use super::confidence::{order_cycle, precise_enough, RatioInterval, StopReason};
use super::result::ConfigResult;
use std::time::Duration;

/// Fewest rounds an adaptive run stops at: an interval from fewer pairs
/// is too wide to mean much (t has 1 degree of freedom at 2).
pub const MIN_ROUNDS: usize = 3;

/// How many rounds to run.
#[derive(Clone, Debug, PartialEq)]
pub enum Repeats {
    /// Exactly this many rounds (`--repeat N`).
    Fixed(usize),
    /// `--repeat auto`: whole order cycles until every ratio's half width
    /// is at most `precision_pct`, the next cycle would overrun `budget`
    /// (for the whole job, shared among its workloads), or `max_rounds`.
    Auto {
        precision_pct: f64,
        budget: Duration,
        max_rounds: usize,
    },
}

/// The ratios the report shows for one workload's configurations (in plan
/// order): each one's TPS over the first's and over the last's, itself
/// excepted.
pub fn shown_ratios(group: &[ConfigResult]) -> Vec<Option<RatioInterval>> {
    let n = group.len();
    let mut out = Vec::new();
    for reference in [0, n.saturating_sub(1)] {
        for (i, c) in group.iter().enumerate() {
            if i != reference {
                out.push(c.ratio_to(&group[reference], |r| r.tps));
            }
        }
    }
    out
}

/// The widest half width (percent) among the ratios shown; infinite while
/// one has no interval yet, `None` with a single configuration.
pub fn widest_pct(group: &[ConfigResult]) -> Option<f64> {
    shown_ratios(group)
        .iter()
        .map(|r| r.map_or(f64::INFINITY, |r| r.half_width_pct()))
        .reduce(f64::max)
}

/// The rounds an adaptive run makes at least: [`MIN_ROUNDS`], rounded up
/// to whole order cycles of `configs` configurations.
pub fn min_rounds(configs: usize) -> usize {
    MIN_ROUNDS.div_ceil(order_cycle(configs)) * order_cycle(configs)
}

/// Whether to stop after `rounds` rounds of `group` (one workload's
/// results, in plan order) that took `elapsed`, given this workload's
/// share of the budget: `None` runs another round. An adaptive run stops
/// only at the end of an order cycle, so that every configuration has run
/// in every position equally often.
pub fn next_step(
    group: &[ConfigResult],
    rounds: usize,
    elapsed: Duration,
    budget: Duration,
    repeats: &Repeats,
) -> Option<StopReason> {
    match *repeats {
        Repeats::Fixed(n) => (rounds >= n).then_some(StopReason::Fixed),
        Repeats::Auto {
            precision_pct,
            max_rounds,
            ..
        } => {
            let cycle = order_cycle(group.len());
            if rounds == 0 || !rounds.is_multiple_of(cycle) {
                return None;
            }
            let enough = rounds >= min_rounds(group.len());
            if enough && precise_enough(&shown_ratios(group), precision_pct) {
                return Some(StopReason::Precision);
            }
            if rounds + cycle > max_rounds {
                return Some(StopReason::MaxRounds);
            }
            let next_cycle = elapsed.mul_f64(cycle as f64 / rounds as f64);
            if enough && elapsed + next_cycle > budget {
                return Some(StopReason::Budget);
            }
            None
        }
    }
}

/// One line on how a workload's rounds ended, for after the table:
/// `oltp_write_only: 12 rounds; every ratio reached ±3 %`.
pub fn stop_line(group: &[ConfigResult], precision_pct: Option<f64>) -> Option<String> {
    let first = group.first()?;
    let reason = first.stop_reason?;
    // A single configuration has no ratio, so no widest interval to tell.
    let widest = widest_pct(group).map(|w| {
        if w.is_finite() {
            format!("±{w:.1} %")
        } else {
            "no interval yet".to_string()
        }
    });
    let (what, at) = match reason {
        StopReason::Fixed => (
            "the rounds asked for were run".to_string(),
            widest.map(|w| format!("; widest interval {w}")),
        ),
        StopReason::Precision => (
            match precision_pct {
                Some(p) => format!("every ratio reached ±{p} %"),
                None => "every ratio reached the precision asked for".to_string(),
            },
            widest.map(|w| format!(" (widest {w})")),
        ),
        StopReason::Budget => (
            "the time budget ran out".to_string(),
            widest.map(|w| format!(" at {w}")),
        ),
        StopReason::MaxRounds => (
            "the most rounds allowed were run".to_string(),
            widest.map(|w| format!(", at {w}")),
        ),
    };
    let what = what + &at.unwrap_or_default();
    let s = if first.rounds == 1 { "" } else { "s" };
    Some(format!(
        "{}: {} round{s}; {what}",
        first.workload, first.rounds
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::result::Run;

    /// A configuration whose round `r` ran at `tps(r)`.
    fn config(rounds: usize, tps: impl Fn(usize) -> f64) -> ConfigResult {
        ConfigResult {
            workload: "w".into(),
            runs: (0..rounds)
                .map(|r| Run {
                    repeat: r,
                    tps: tps(r),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Two configurations whose paired ratio wobbles by `wobble` around 0.9.
    fn pair(rounds: usize, wobble: f64) -> Vec<ConfigResult> {
        let sign = |r: usize| if r.is_multiple_of(2) { 1.0 } else { -1.0 };
        vec![
            config(rounds, |r| 900.0 * (1.0 + wobble * sign(r))),
            config(rounds, |_| 1000.0),
        ]
    }

    const AUTO: Repeats = Repeats::Auto {
        precision_pct: 3.0,
        budget: Duration::from_secs(100),
        max_rounds: 20,
    };
    const BUDGET: Duration = Duration::from_secs(100);

    #[test]
    fn fixed_repeats_stop_at_their_count() {
        let g = pair(2, 0.5);
        let fixed = Repeats::Fixed(2);
        assert_eq!(next_step(&g, 1, Duration::ZERO, BUDGET, &fixed), None);
        assert_eq!(
            next_step(&g, 2, Duration::from_secs(1000), BUDGET, &fixed),
            Some(StopReason::Fixed)
        );
    }

    #[test]
    fn precise_ratios_stop_after_the_minimum_whole_cycles() {
        let tight = pair(4, 0.001);
        let secs = Duration::from_secs(4);
        // Two configurations: cycles of 2, at least 4 rounds.
        assert_eq!(min_rounds(2), 4);
        assert_eq!(min_rounds(3), 6);
        assert_eq!(next_step(&pair(2, 0.001), 2, secs, BUDGET, &AUTO), None);
        assert_eq!(next_step(&pair(3, 0.001), 3, secs, BUDGET, &AUTO), None);
        assert_eq!(
            next_step(&tight, 4, secs, BUDGET, &AUTO),
            Some(StopReason::Precision)
        );
        // A wide interval goes on while the budget allows.
        assert_eq!(next_step(&pair(4, 0.2), 4, secs, BUDGET, &AUTO), None);
    }

    #[test]
    fn the_budget_stops_before_a_cycle_that_would_overrun_it() {
        let wide = pair(4, 0.2);
        // 4 rounds in 60 s: the next cycle of 2 would end at 90 s.
        let at = |s| next_step(&wide, 4, Duration::from_secs(s), BUDGET, &AUTO);
        assert_eq!(at(60), None);
        // ... at 80 s it would end at 120 s.
        assert_eq!(at(80), Some(StopReason::Budget));
        // Below the minimum rounds the budget does not stop a run.
        let short = pair(2, 0.2);
        assert_eq!(
            next_step(&short, 2, Duration::from_secs(500), BUDGET, &AUTO),
            None
        );
    }

    #[test]
    fn the_most_rounds_stop_a_run_that_never_gets_precise() {
        let wide = pair(20, 0.2);
        assert_eq!(
            next_step(&wide, 20, Duration::ZERO, BUDGET, &AUTO),
            Some(StopReason::MaxRounds)
        );
        assert_eq!(
            next_step(&pair(18, 0.2), 18, Duration::ZERO, BUDGET, &AUTO),
            None
        );
    }

    #[test]
    fn shown_ratios_compare_with_the_first_and_the_last() {
        let three = vec![
            config(4, |_| 100.0),
            config(4, |_| 110.0),
            config(4, |_| 120.0),
        ];
        // Mid-cycle (cycle of 6 for three configurations) never stops.
        assert_eq!(next_step(&three, 4, Duration::ZERO, BUDGET, &AUTO), None);
        let ratios: Vec<f64> = shown_ratios(&three)
            .iter()
            .map(|r| r.unwrap().ratio)
            .collect();
        let want = [1.1, 1.2, 100.0 / 120.0, 110.0 / 120.0];
        for (got, want) in ratios.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{ratios:?}");
        }
        assert_eq!(shown_ratios(&three[..1]), vec![]);
        assert_eq!(widest_pct(&three[..1]), None);
        assert_eq!(widest_pct(&pair(1, 0.0)), Some(f64::INFINITY));
    }

    #[test]
    fn the_stop_line_names_the_widest_interval_only_when_there_is_a_ratio() {
        let stopped = |mut group: Vec<ConfigResult>, reason| {
            for c in &mut group {
                c.rounds = 4;
                c.stop_reason = Some(reason);
            }
            stop_line(&group, Some(3.0)).unwrap()
        };
        let budget = stopped(pair(4, 0.05), StopReason::Budget);
        assert!(
            budget.starts_with("w: 4 rounds; the time budget ran out at ±"),
            "{budget}"
        );
        let single = stopped(pair(4, 0.05)[..1].to_vec(), StopReason::Fixed);
        assert_eq!(single, "w: 4 rounds; the rounds asked for were run");
        let mut one_round = pair(1, 0.0);
        for c in &mut one_round {
            c.rounds = 1;
            c.stop_reason = Some(StopReason::Fixed);
        }
        assert_eq!(
            stop_line(&one_round, None).unwrap(),
            "w: 1 round; the rounds asked for were run; widest interval no interval yet"
        );
    }
}
