//! How sure a comparison is: ratios between configurations with a 95 %
//! confidence interval, the order configurations run in within a round,
//! and when an adaptive run has repeated enough.
//!
//! Rules:
//! - A ratio is computed from rounds as pairs: in every round where both
//!   configurations ran, the log of A's figure over B's. The interval is
//!   Student's t over those logs, mapped back with `exp`. Pairing removes
//!   what a round shares (the machine's load at that moment); logs make
//!   the interval symmetric for ratios (0.5x and 2x are as far from 1x).
//! - A ratio whose interval contains 1 is "not resolved": the data cannot
//!   tell the configurations apart.
//! - Within a round the configurations run in the order of a balanced
//!   Latin square (Williams' design): over a whole cycle of rounds each
//!   configuration runs in each position equally often and follows each
//!   other configuration equally often, so a first-position advantage or a
//!   carry-over from the previous run cancels out instead of becoming a
//!   finding.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence level of every interval the laboratory prints.
pub const LEVEL: f64 = 0.95;

/// The power a minimum detectable effect is stated at: a true effect that
/// large is resolved by four runs of five.
pub const POWER: f64 = 0.8;

/// The most pairs [`RatioInterval::pairs_to_resolve`] looks for.
pub const MAX_PAIRS: usize = 100_000;

/// A ratio A/B with its confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatioInterval {
    /// The geometric mean of the rounds' ratios.
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    /// Rounds that gave a pair.
    pub pairs: usize,
}

impl RatioInterval {
    /// False when the interval contains 1: no difference is shown.
    pub fn resolved(&self) -> bool {
        !(self.low <= 1.0 && 1.0 <= self.high)
    }

    /// The interval's half width relative to the ratio, in percent: the
    /// larger of the two sides (they differ slightly, being symmetric in
    /// logs). `--precision 3` asks for this to be at most 3.
    pub fn half_width_pct(&self) -> f64 {
        100.0 * (self.high / self.ratio - 1.0).max(1.0 - self.low / self.ratio)
    }

    /// `0.93x [0.89, 0.97]`.
    pub fn text(&self) -> String {
        format!("{:.2}x [{:.2}, {:.2}]", self.ratio, self.low, self.high)
    }

    /// The standard deviation of the pairs' logs the interval was made
    /// from (its half width in logs is t times it over the root of the
    /// pairs).
    fn log_sd(&self) -> Option<f64> {
        if self.pairs < 2 || !(self.ratio > 0.0 && self.high >= self.ratio) {
            return None;
        }
        let half = (self.high / self.ratio).ln();
        Some(half / t_quantile(self.pairs - 1) * (self.pairs as f64).sqrt())
    }

    /// The minimum detectable effect of this run, in percent: the
    /// smallest true change of the ratio that a run of this noise and
    /// this many pairs resolves (its interval excluding 1) with [`POWER`],
    /// `(t(97.5 %) + t(80 %)) * sd / sqrt(pairs)` in logs. A "not
    /// resolved" says no more than this: an effect below it may be there.
    pub fn mde_pct(&self) -> Option<f64> {
        let sd = self.log_sd()?;
        let se = sd / (self.pairs as f64).sqrt();
        Some(100.0 * ((detect_factor(self.pairs - 1) * se).exp() - 1.0))
    }

    /// What a run that did not resolve could have seen: `; this run detects
    /// ±4.1 % (95 %, power 80 %); the seed's 1.05x needs about 23 rounds at
    /// this noise`.
    pub fn detectable(&self, seed: Option<f64>) -> String {
        let Some(mde) = self.mde_pct() else {
            return String::new();
        };
        let mut out = format!("; this run detects ±{mde:.1} % (95 %, power 80 %)");
        if let Some(s) = seed.filter(|s| (s - 1.0).abs() > 1e-9) {
            match self.pairs_to_resolve(s) {
                Some(n) => {
                    out += &format!("; the seed's {s:.2}x needs about {n} rounds at this noise")
                }
                None => {
                    out += &format!(
                        "; the seed's {s:.2}x needs more than {MAX_PAIRS} rounds at this noise"
                    )
                }
            }
        }
        out
    }

    /// The pairs a run of this noise would need to resolve a true ratio
    /// of `effect` with [`POWER`]; `None` for an effect of 1 (or none to
    /// measure by), or past [`MAX_PAIRS`].
    pub fn pairs_to_resolve(&self, effect: f64) -> Option<usize> {
        let sd = self.log_sd()?;
        let target = effect.ln().abs();
        if !(target > 0.0 && target.is_finite()) {
            return None;
        }
        if sd == 0.0 {
            return Some(2);
        }
        // The normal approximation first, then t's own quantiles.
        let z = 1.96 + 0.8416;
        let mut n = ((z * sd / target).powi(2).ceil() as usize).max(2);
        while n <= MAX_PAIRS {
            if detect_factor(n - 1) * sd / (n as f64).sqrt() <= target {
                return Some(n);
            }
            n += 1;
        }
        None
    }
}

/// `t(97.5 %) + t(80 %)` with `df` degrees of freedom: how many standard
/// errors a true effect must be for a run to resolve it with [`POWER`].
fn detect_factor(df: usize) -> f64 {
    let t = StudentsT::new(0.0, 1.0, df as f64).expect("df >= 1 is a valid t distribution");
    t_quantile(df) + t.inverse_cdf(POWER)
}

/// The two-sided Student's t quantile for `LEVEL` with `df` degrees of
/// freedom (12.71 for 1, 1.96 as `df` grows).
fn t_quantile(df: usize) -> f64 {
    let t = StudentsT::new(0.0, 1.0, df as f64).expect("df >= 1 is a valid t distribution");
    t.inverse_cdf(1.0 - (1.0 - LEVEL) / 2.0)
}

/// The mean of `logs` with its interval, mapped back by `exp`; `None`
/// with fewer than two values.
pub fn log_interval(logs: &[f64]) -> Option<RatioInterval> {
    let n = logs.len();
    if n < 2 {
        return None;
    }
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_quantile(n - 1) * (var / n as f64).sqrt();
    Some(RatioInterval {
        ratio: mean.exp(),
        low: (mean - half).exp(),
        high: (mean + half).exp(),
        pairs: n,
    })
}

/// The ratio of `a` over `b`, paired by round: `a[i]` and `b[i]` are the
/// same round's figures, `None` where that run is missing or excluded.
/// Pairs with a figure that is not positive and finite are skipped (a log
/// of them means nothing). `None` with fewer than two pairs.
pub fn paired_ratio(a: &[Option<f64>], b: &[Option<f64>]) -> Option<RatioInterval> {
    let usable = |v: &Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0);
    let logs: Vec<f64> = a
        .iter()
        .zip(b)
        .filter_map(|(x, y)| Some((usable(x)? / usable(y)?).ln()))
        .collect();
    log_interval(&logs)
}

/// The order the `n` configurations run in during round `round`: the rows
/// of a balanced Latin square (Williams' design), cycling. For an odd `n`
/// the square's rows are followed by their mirror images, since one square
/// alone cannot balance who follows whom.
pub fn round_order(n: usize, round: usize) -> Vec<usize> {
    if n == 0 {
        return Vec::new();
    }
    // The first row: 0, 1, n-1, 2, n-2, ...; row r adds r to each.
    let first: Vec<usize> = (0..n)
        .map(|j| {
            if j == 0 {
                0
            } else if j % 2 == 1 {
                j.div_ceil(2)
            } else {
                n - j / 2
            }
        })
        .collect();
    let r = round % order_cycle(n);
    let mut row: Vec<usize> = first.iter().map(|c| (c + r) % n).collect();
    if r >= n {
        row.reverse();
    }
    row
}

/// Rounds a balanced order needs to come full circle: an adaptive run
/// stops only at a multiple of this, so no configuration keeps an
/// unbalanced share of first places.
pub fn order_cycle(n: usize) -> usize {
    match n {
        0 | 1 => 1,
        n if n.is_multiple_of(2) => n,
        n => 2 * n,
    }
}

/// Why an adaptive run stopped adding rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A fixed number of rounds was asked for (`--repeat N`).
    Fixed,
    /// Every ratio's interval reached the precision asked for.
    Precision,
    /// The time budget ran out first.
    Budget,
    /// The most rounds allowed were run first.
    MaxRounds,
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Fixed => "the rounds asked for were run",
            StopReason::Precision => "every ratio reached the precision asked for",
            StopReason::Budget => "the time budget ran out",
            StopReason::MaxRounds => "the most rounds allowed were run",
        })
    }
}

/// True when every interval exists and its half width is at most
/// `precision_pct` percent.
pub fn precise_enough(intervals: &[Option<RatioInterval>], precision_pct: f64) -> bool {
    intervals
        .iter()
        .all(|i| i.is_some_and(|i| i.half_width_pct() <= precision_pct))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// A standard normal draw (Box-Muller).
    fn normal(rng: &mut SplitMix64) -> f64 {
        let u1 = rng.next_f64().max(f64::MIN_POSITIVE);
        let u2 = rng.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Rounds of two configurations whose true ratio is `ratio`, each round
    /// sharing a load factor (what pairing removes) and each run having its
    /// own noise of `sd` in logs.
    fn rounds(
        rng: &mut SplitMix64,
        n: usize,
        ratio: f64,
        sd: f64,
    ) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
        (0..n)
            .map(|_| {
                let load = 1000.0 * (0.5 * normal(rng)).exp();
                let a = load * ratio * (sd * normal(rng)).exp();
                let b = load * (sd * normal(rng)).exp();
                (Some(a), Some(b))
            })
            .unzip()
    }

    #[test]
    fn the_interval_covers_the_true_ratio_at_its_stated_rate() {
        let mut rng = SplitMix64::new(12);
        for (n, ratio, sd) in [(3, 0.9, 0.1), (5, 1.0, 0.11), (20, 1.05, 0.05)] {
            let trials = 4000;
            let covered = (0..trials)
                .filter(|_| {
                    let (a, b) = rounds(&mut rng, n, ratio, sd);
                    let i = paired_ratio(&a, &b).unwrap();
                    i.low <= ratio && ratio <= i.high
                })
                .count();
            let rate = covered as f64 / trials as f64;
            // 4000 trials: the rate's own standard error is 0.0034.
            assert!(
                (0.935..=0.965).contains(&rate),
                "{n} rounds, ratio {ratio}, sd {sd}: covered {rate}"
            );
        }
    }

    #[test]
    fn identical_configurations_give_an_interval_containing_one() {
        let mut rng = SplitMix64::new(5);
        let (a, _) = rounds(&mut rng, 8, 1.0, 0.1);
        let i = paired_ratio(&a, &a.clone()).unwrap();
        assert_eq!((i.ratio, i.low, i.high), (1.0, 1.0, 1.0));
        assert!(!i.resolved());
        // Two names for one configuration: the same distribution, drawn
        // apart. Over many trials 95 % contain 1.
        let contain = (0..2000)
            .filter(|_| {
                let (a, b) = rounds(&mut rng, 6, 1.0, 0.1);
                !paired_ratio(&a, &b).unwrap().resolved()
            })
            .count();
        assert!((1860..=1940).contains(&contain), "{contain} of 2000");
    }

    #[test]
    fn a_known_sample_gives_the_textbook_interval() {
        // Logs 0.1, 0.2, 0.3: mean 0.2, sd 0.1, t(2) = 4.3027.
        let i = log_interval(&[0.1, 0.2, 0.3]).unwrap();
        let half = 4.302_652_7 * 0.1 / 3f64.sqrt();
        assert!((i.ratio - 0.2f64.exp()).abs() < 1e-12);
        assert!((i.low - (0.2 - half).exp()).abs() < 1e-6);
        assert!((i.high - (0.2 + half).exp()).abs() < 1e-6);
        // Three rounds cannot show a 22 % gain with this much noise.
        assert!(!i.resolved());
        assert_eq!(i.text(), "1.22x [0.95, 1.57]");
        assert!(log_interval(&[0.18, 0.2, 0.22]).unwrap().resolved());
    }

    #[test]
    fn pairs_need_both_figures_and_two_rounds() {
        let a = [Some(100.0), None, Some(90.0), Some(0.0), Some(80.0)];
        let b = [Some(100.0), Some(50.0), None, Some(10.0), Some(100.0)];
        let i = paired_ratio(&a, &b).unwrap();
        assert_eq!(i.pairs, 2);
        assert!((i.ratio - 0.8f64.sqrt()).abs() < 1e-12);
        assert!(paired_ratio(&a[..2], &b[..2]).is_none());
    }

    #[test]
    fn the_order_is_balanced_over_a_cycle() {
        for n in 1..=6 {
            let cycle = order_cycle(n);
            let mut position = vec![vec![0; n]; n];
            let mut follows = vec![vec![0; n]; n];
            for round in 0..cycle {
                let row = round_order(n, round);
                let mut sorted = row.clone();
                sorted.sort();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n {n} round {round}");
                for (p, &c) in row.iter().enumerate() {
                    position[c][p] += 1;
                }
                for w in row.windows(2) {
                    follows[w[0]][w[1]] += 1;
                }
            }
            let per_position = cycle / n;
            assert!(
                position.iter().flatten().all(|&k| k == per_position),
                "n {n}: {position:?}"
            );
            for (a, row) in follows.iter().enumerate() {
                for (b, &k) in row.iter().enumerate() {
                    let want = if a == b { 0 } else { cycle / n };
                    assert_eq!(k, want, "n {n}: {a} before {b}");
                }
            }
        }
        assert_eq!(round_order(2, 0), vec![0, 1]);
        assert_eq!(round_order(2, 1), vec![1, 0]);
    }

    #[test]
    fn precision_needs_every_interval() {
        let tight = log_interval(&[0.0, 0.01, -0.01, 0.005]);
        let loose = log_interval(&[0.0, 0.2, -0.2]);
        assert!(tight.unwrap().half_width_pct() < 3.0);
        assert!(precise_enough(&[tight], 3.0));
        assert!(!precise_enough(&[tight, loose], 3.0));
        assert!(!precise_enough(&[tight, None], 3.0));
    }

    /// The minimum detectable effect follows from the run's own spread:
    /// logs of sd 0.1 over 10 pairs give (2.262 + 0.883) * 0.1 / sqrt(10)
    /// in logs; and a run of that noise needs about those 10 pairs to
    /// resolve an effect of that size, and 33 for half of it (not 40: t
    /// shrinks as the pairs grow).
    #[test]
    fn minimum_detectable_effect_and_the_pairs_an_effect_needs() {
        // Ten logs with mean 0 and sd exactly 0.1.
        let k = 0.1 * (9.0f64 / 10.0).sqrt();
        let logs: Vec<f64> = (0..10).map(|i| if i % 2 == 0 { k } else { -k }).collect();
        let i = log_interval(&logs).unwrap();
        let expected = 100.0 * ((detect_factor(9) * 0.1 / 10f64.sqrt()).exp() - 1.0);
        let mde = i.mde_pct().unwrap();
        assert!((mde - expected).abs() < 1e-9, "{mde} vs {expected}");
        assert!((mde - 10.46).abs() < 0.05, "{mde}");
        let at_mde = i.pairs_to_resolve(1.0 + mde / 100.0).unwrap();
        assert!((10..=11).contains(&at_mde), "{at_mde}");
        let half = i.pairs_to_resolve(1.0 + mde / 200.0).unwrap();
        assert!((31..=35).contains(&half), "{half}");
        // Direction does not matter; no effect cannot be resolved.
        let inverse = i.pairs_to_resolve(1.0 / (1.0 + mde / 100.0)).unwrap();
        assert!((10..=11).contains(&inverse), "{inverse}");
        assert_eq!(i.pairs_to_resolve(1.0), None);
        assert_eq!(i.pairs_to_resolve(1.0 + 1e-9), None);
        // One pair has no spread to say anything by.
        let one = RatioInterval {
            ratio: 1.0,
            low: 1.0,
            high: 1.0,
            pairs: 1,
        };
        assert_eq!((one.mde_pct(), one.pairs_to_resolve(2.0)), (None, None));
    }
}
