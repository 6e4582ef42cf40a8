//! A seed's claims as directions on ratios, and the verdict rule: a claim
//! is judged by where its 95 % interval lies against 1 ([`judge`]).

use crate::lab::confidence::RatioInterval;
use crate::lab::result::Run;

/// A figure a claim compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    Tps,
    LatencyAvg,
    LatencyP90,
    LatencyMax,
    WalBytesPerTxn,
    /// Instructions per transaction under Callgrind (`lab::instructions`),
    /// not a figure of the rounds: the study counts it apart.
    InstructionsPerTxn,
}

impl Figure {
    pub(super) fn per_run(self) -> fn(&Run) -> f64 {
        match self {
            Figure::Tps => |r| r.tps,
            Figure::LatencyAvg => |r| r.latency_ms.avg,
            Figure::LatencyP90 => |r| r.latency_ms.p90,
            Figure::LatencyMax => |r| r.latency_ms.max,
            Figure::WalBytesPerTxn => |r| r.wal_bytes as f64 / r.transactions as f64,
            Figure::InstructionsPerTxn => |_| f64::NAN,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Figure::Tps => "TPS",
            Figure::LatencyAvg => "avg response time",
            Figure::LatencyP90 => "90% response time",
            Figure::LatencyMax => "max response time",
            Figure::WalBytesPerTxn => "WAL bytes/txn",
            Figure::InstructionsPerTxn => "instructions/txn",
        }
    }

    /// The instrument a verdict on this figure comes from.
    pub fn instrument(self) -> &'static str {
        match self {
            Figure::InstructionsPerTxn => {
                "instructions per transaction, Callgrind, one client; a rerun repeats within ±0.5 %"
            }
            Figure::WalBytesPerTxn => "exact counts per transaction, paired by round",
            _ => "wall clock, paired by round",
        }
    }
}

/// Which way the seed says a ratio A/B goes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Direction {
    /// A/B above 1.
    Higher,
    /// A/B below 1.
    Lower,
    /// A/B within `1 ± band` (0.05: within 5 %).
    About(f64),
}

/// A claim of the seed: the ratio of `figure` between configurations `a`
/// and `b` of `workload` in plan `plan` goes `direction`.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// The ratio's name, `DWB/FPW TPS`.
    pub ratio: String,
    /// Where: `oltp_write_only, wal_compression lz4`.
    pub context: String,
    pub direction: Direction,
    /// The seed's ratio as its figures give it; `None` for a hypothesis
    /// the thread put forward without a figure.
    pub seed: Option<f64>,
    pub plan: usize,
    pub workload: String,
    pub a: usize,
    pub b: usize,
    pub figure: Figure,
}

/// What the interval says of a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Reproduced,
    NotReproduced,
    NotResolved,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::NotResolved => "not resolved",
        }
    }
}

/// The verdict on a claim going `direction`, given the ratio's 95 %
/// interval (`None`: fewer than two rounds paired). A direction is
/// reproduced when the interval lies wholly on its side of 1, not when
/// wholly on the other side, and unresolved while it contains 1. "About
/// equal" is reproduced when the interval lies within the band, not when
/// it lies wholly outside it, and unresolved otherwise (too wide to say).
pub fn judge(direction: Direction, interval: Option<&RatioInterval>) -> Verdict {
    let Some(i) = interval else {
        return Verdict::NotResolved;
    };
    match direction {
        Direction::Higher if i.low > 1.0 => Verdict::Reproduced,
        Direction::Higher if i.high < 1.0 => Verdict::NotReproduced,
        Direction::Lower if i.high < 1.0 => Verdict::Reproduced,
        Direction::Lower if i.low > 1.0 => Verdict::NotReproduced,
        Direction::Higher | Direction::Lower => Verdict::NotResolved,
        Direction::About(band) => {
            let (lo, hi) = (1.0 - band, 1.0 + band);
            if i.low >= lo && i.high <= hi {
                Verdict::Reproduced
            } else if i.high < lo || i.low > hi {
                Verdict::NotReproduced
            } else {
                Verdict::NotResolved
            }
        }
    }
}

/// The verdict line of a claim: `reproduced: DWB/FPW TPS = 1.60x [1.50,
/// 1.70] here, 1.50x in the seed (oltp_write_only, lz4)`.
pub fn verdict_line(claim: &Claim, interval: Option<&RatioInterval>) -> (Verdict, String) {
    let v = judge(claim.direction, interval);
    let seed = match claim.seed {
        Some(s) => format!("{s:.2}x in the seed"),
        None => "a hypothesis of the thread".to_string(),
    };
    let expected = match claim.direction {
        Direction::Higher => "above 1".to_string(),
        Direction::Lower => "below 1".to_string(),
        Direction::About(b) => format!("within {:.0} % of 1", b * 100.0),
    };
    let counted = claim.figure == Figure::InstructionsPerTxn;
    let line = match interval {
        None if counted => format!(
            "{}: {} was not counted here (instruction counts need valgrind and the untorn \
             binary); {seed} ({})",
            v.word(),
            claim.ratio,
            claim.context
        ),
        None => format!(
            "{}: {} has no interval here (fewer than two rounds paired); {seed} ({})",
            v.word(),
            claim.ratio,
            claim.context
        ),
        Some(i) => {
            let why = match (v, claim.direction) {
                (Verdict::NotResolved, Direction::About(_)) => {
                    format!(
                        "; the interval is not wholly {expected}{}",
                        i.detectable(None)
                    )
                }
                (Verdict::NotResolved, _) => {
                    format!("; the interval contains 1{}", i.detectable(claim.seed))
                }
                (Verdict::NotReproduced, _) => format!("; the seed's claim is {expected}"),
                (Verdict::Reproduced, _) => String::new(),
            };
            let (figure, by) = match counted {
                true => (
                    format!("{:.4}x [{:.4}, {:.4}]", i.ratio, i.low, i.high),
                    format!(" [{}]", claim.figure.instrument()),
                ),
                false => (i.text(), String::new()),
            };
            format!(
                "{}: {} = {figure} here, {seed} ({}){why}{by}",
                v.word(),
                claim.ratio,
                claim.context
            )
        }
    };
    (v, line)
}
