//! Studies: each seed's experiment rerun on this engine, its table set
//! beside the seed's own, one verdict per claim the seed makes.
//!
//! A study is a list of bench plans ([`StudyPlan`], run by
//! [`run_plan`](crate::lab::compare::run_plan) like `untorn bench`), the
//! seed's tables copied from its text, a function that shapes our results
//! into the same tables, and the seed's claims as directions on ratios
//! ([`Claim`]), judged by [`judge`] on their 95 % intervals.
//!
//! - [`dwb_vs_fpw`]: seed 003, the double-write buffer against full-page
//!   writes under sysbench;
//! - [`dw_eviction_cliff`]: seed 000, double writes with a large and a small
//!   buffer pool, with and without a disk write cache;
//! - [`checksums`]: seed 002, what page checksums cost;
//! - [`sorted_checkpoint`]: seed 001, sorted checkpoint writes;
//! - [`wal_block_size`]: seed 004, WAL block sizes and the checkpoint cycle;
//! - [`claims`]: claims, verdicts and the rule that judges them;
//! - [`render`]: the text and the HTML report.

pub mod checksums;
pub mod claims;
pub mod dw_eviction_cliff;
pub mod dwb_vs_fpw;
pub mod render;
pub mod sorted_checkpoint;
pub mod wal_block_size;

use crate::error::{Error, Result};
use crate::lab::adaptive::Repeats;
use crate::lab::compare::{run_plan, BenchConfig, BenchPlan, Progress};
use crate::lab::confidence::RatioInterval;
use crate::lab::result::ConfigResult;
use crate::lab::runner::RunSpec;
use crate::lab::workload::Scale;
pub use claims::{judge, verdict_line, Claim, Direction, Figure, Verdict};
use std::path::PathBuf;
use std::time::Duration;

/// How long a study runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// A few seconds per study, for tests: the structure, not the figures.
    Tiny,
    /// `--quick`: about three minutes on 2 cores.
    Quick,
    /// The run docs/STUDIES.md records.
    Full,
}

impl Size {
    /// Measured seconds per run.
    pub fn duration(self) -> Duration {
        match self {
            Size::Tiny => Duration::from_millis(200),
            Size::Quick => Duration::from_secs(2),
            Size::Full => Duration::from_secs(20),
        }
    }

    pub fn warmup(self) -> Duration {
        match self {
            Size::Tiny => Duration::from_millis(30),
            Size::Quick => Duration::from_millis(300),
            Size::Full => Duration::from_secs(3),
        }
    }

    /// Rounds: fixed for the tiny and quick runs (the tiny run's one round
    /// gives no interval: it checks the structure); the full run adds whole
    /// order cycles until every ratio is within 3 %, or 20 minutes a plan.
    pub fn repeats(self) -> Repeats {
        match self {
            Size::Tiny => Repeats::Fixed(1),
            Size::Quick => Repeats::Fixed(3),
            Size::Full => Repeats::Auto {
                precision_pct: 3.0,
                budget: Duration::from_secs(1200),
                max_rounds: 20,
            },
        }
    }

    /// sysbench's tables and rows per table.
    pub fn sysbench(self) -> Scale {
        let (tables, table_size) = match self {
            Size::Tiny => (2, 400),
            Size::Quick => (4, 10_000),
            Size::Full => (8, 100_000),
        };
        Scale {
            tables,
            table_size,
            ..Scale::default()
        }
    }

    /// TPC-C's warehouses, `factor` times this size's count: the
    /// specification's counts per warehouse for the full run, scaled down
    /// (NOT the specification) for the tiny and quick ones.
    pub fn tpcc(self, factor: u64) -> Scale {
        let (warehouses, tpcc_items, tpcc_customers) = match self {
            Size::Tiny => (1, 1_000, 60),
            Size::Quick => (1, 20_000, 600),
            Size::Full => (2, 100_000, 3_000),
        };
        Scale {
            warehouses: warehouses * factor,
            tpcc_items,
            tpcc_customers,
            ..Scale::default()
        }
    }

    /// pgbench's scale; `factor` multiplies it (a larger data set).
    pub fn tpcb(self, factor: u64) -> Scale {
        let (scale, accounts_per_branch) = match self {
            Size::Tiny => (1, 1_000),
            Size::Quick => (1, 50_000),
            Size::Full => (10, 100_000),
        };
        Scale {
            scale: scale * factor,
            accounts_per_branch,
            ..Scale::default()
        }
    }

    /// Transactions of the shorter counted run of an instruction claim.
    pub fn instruction_transactions(self) -> u64 {
        match self {
            Size::Tiny => 20,
            Size::Quick => 300,
            Size::Full => 2000,
        }
    }

    /// A checkpoint timeout that gives a run about six cycles.
    pub fn checkpoint_timeout(self) -> Duration {
        (self.duration() / 6).max(Duration::from_millis(100))
    }

    /// Client threads: `n` except in the tiny run, which keeps two.
    pub fn clients(self, n: usize) -> usize {
        if self == Size::Tiny {
            n.min(2)
        } else {
            n
        }
    }
}

/// What a study is run with.
#[derive(Clone, Debug)]
pub struct Setup {
    pub size: Size,
    /// `--device`: replaces the study's own main device model.
    pub device: Option<String>,
    /// Where the databases go (one subdirectory per plan).
    pub dir: PathBuf,
    pub seed: u64,
    /// `--rounds`: this many rounds per plan instead of the size's own
    /// rule (a full run that must fit a session).
    pub rounds: Option<usize>,
    /// `--workload`: what stands in for DBT-2 in the studies whose seed
    /// ran it ([`STAND_INS`]; tpcc by default).
    pub stand_in: String,
    /// The untorn binary, to count instructions per transaction for the
    /// claims on them (`lab::instructions`); `None`: not counted.
    pub instructions: Option<PathBuf>,
}

/// The workloads that can stand in for DBT-2, the default first: TPC-C
/// (this laboratory's DBT-2), or pgbench's tpcb.
pub const STAND_INS: [&str; 2] = ["tpcc", "tpcb"];

/// A claim's workload in a study whose seed ran DBT-2: whichever
/// workload stood in for it ([`Setup::stand_in`]).
pub const STAND_IN: &str = "dbt2";

/// The workload a DBT-2 study's results ran (its first result's).
pub fn stand_in_of(results: &[ConfigResult]) -> &str {
    results
        .first()
        .map_or(STAND_INS[0], |r| r.workload.as_str())
}

/// How tables name the stand-in: what it is beside DBT-2.
pub fn stand_in_label(workload: &str) -> String {
    match workload {
        "tpcc" => "TPC-C (this lab's DBT-2)".into(),
        "tpcb" => "tpcb (pgbench's, not DBT-2)".into(),
        other => other.into(),
    }
}

impl Setup {
    /// The stand-in's data set: TPC-C's warehouses or pgbench's scale,
    /// `factor` times this size's.
    pub fn stand_in_scale(&self, factor: u64) -> Result<Scale> {
        match self.stand_in.as_str() {
            "tpcc" => Ok(self.size.tpcc(factor)),
            "tpcb" => Ok(self.size.tpcb(factor)),
            other => Err(Error::Invalid(format!(
                "--workload {other:?}: what stands in for DBT-2 is one of {}",
                STAND_INS.join(", ")
            ))),
        }
    }

    /// The device the study's main comparisons run on: `--device`, or the
    /// study's choice.
    pub fn device(&self, default: &str) -> String {
        self.device.clone().unwrap_or_else(|| default.to_string())
    }

    /// Rounds per plan: `--rounds`, or the size's rule.
    pub fn repeats(&self) -> Repeats {
        self.rounds
            .map(Repeats::Fixed)
            .unwrap_or_else(|| self.size.repeats())
    }

    /// A bench plan of this setup's size.
    pub fn plan(
        &self,
        n: usize,
        workloads: &[&str],
        configs: Vec<BenchConfig>,
        scale: Scale,
        clients: usize,
    ) -> BenchPlan {
        BenchPlan {
            workloads: workloads.iter().map(|w| w.to_string()).collect(),
            configs,
            scale,
            spec: RunSpec {
                clients: self.size.clients(clients),
                warmup: self.size.warmup(),
                duration: self.size.duration(),
                think: false,
            },
            repeats: self.repeats(),
            dir: self.dir.join(format!("plan-{n}")),
            seed: self.seed,
            keep: false,
            drop_disturbed: false,
        }
    }

    /// The configuration every study starts from: checkpoints about six
    /// times a run, so that each run spans several cycles.
    pub fn base(&self, device: &str) -> BenchConfig {
        BenchConfig {
            checkpoint_timeout: self.size.checkpoint_timeout(),
            device: device.to_string(),
            ..BenchConfig::default()
        }
    }
}

/// One plan of a study, with what it is for.
#[derive(Clone, Debug)]
pub struct StudyPlan {
    pub title: String,
    pub plan: BenchPlan,
}

/// A table: the seed's, copied from its text, or ours in the same shape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// What it shows, with the hardware and date (the seed's) or the
    /// workload and settings (ours).
    pub caption: String,
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(caption: impl Into<String>, headers: &[&str]) -> Table {
        Table {
            caption: caption.into(),
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row of string slices (the seed's figures as printed).
    pub fn row(mut self, cells: &[&str]) -> Table {
        self.rows
            .push(cells.iter().map(|c| c.to_string()).collect());
        self
    }
}

/// A study: the seed it reruns, its plans, its tables and claims.
pub trait Study: Sync {
    /// The command's name (`dwb-vs-fpw`).
    fn name(&self) -> &'static str;
    /// The seed file in shared/seeds it reruns.
    fn seed_file(&self) -> &'static str;
    /// One line: what the seed found and what this study runs.
    fn summary(&self) -> &'static str;
    /// The seed's tables, figures as its text gives them.
    fn seed_tables(&self) -> Vec<Table>;
    /// The bench plans, in the order they run.
    fn plans(&self, setup: &Setup) -> Result<Vec<StudyPlan>>;
    /// Our tables in the seed's shape, from each plan's results.
    fn our_tables(&self, results: &[Vec<ConfigResult>]) -> Vec<Table>;
    /// The seed's claims, indexed into the plans.
    fn claims(&self) -> Vec<Claim>;
    /// Lines printed after the verdicts (figures that are not ratios).
    fn extra_lines(&self, _results: &[Vec<ConfigResult>]) -> Vec<String> {
        Vec::new()
    }
    /// What differs from the seed's setup, and what is left out.
    fn notes(&self) -> Vec<&'static str>;
}

/// Every study, in the order `untorn study --list` prints them.
pub fn all() -> Vec<&'static dyn Study> {
    vec![
        &dwb_vs_fpw::DwbVsFpw,
        &dw_eviction_cliff::DwEvictionCliff,
        &checksums::Checksums,
        &sorted_checkpoint::SortedCheckpoint,
        &wal_block_size::WalBlockSize,
    ]
}

/// The study named `name`.
pub fn by_name(name: &str) -> Result<&'static dyn Study> {
    all().into_iter().find(|s| s.name() == name).ok_or_else(|| {
        Error::Invalid(format!(
            "unknown study {name:?}; the studies are: {}",
            all()
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// The results of a claim's configurations, if the plan has them.
fn claim_pair<'a>(
    claim: &Claim,
    results: &'a [Vec<ConfigResult>],
) -> Option<(&'a ConfigResult, &'a ConfigResult)> {
    let group: Vec<&ConfigResult> = results
        .get(claim.plan)?
        .iter()
        .filter(|r| r.workload == claim.workload || claim.workload == STAND_IN)
        .collect();
    Some((*group.get(claim.a)?, *group.get(claim.b)?))
}

/// The interval of a claim's ratio in `results` (one vector per plan).
pub fn claim_interval(claim: &Claim, results: &[Vec<ConfigResult>]) -> Option<RatioInterval> {
    let (a, b) = claim_pair(claim, results)?;
    match claim.figure {
        Figure::InstructionsPerTxn => {
            crate::lab::instructions::ratio(a.instructions.as_ref()?, b.instructions.as_ref()?)
        }
        f => a.ratio_to(b, f.per_run()),
    }
}

/// Counts the instructions per transaction of every configuration an
/// instruction claim names (`setup.instructions`: the program to count;
/// none, nothing is counted and those claims say so).
fn count_instructions(
    study: &dyn Study,
    setup: &Setup,
    plans: &[StudyPlan],
    results: &mut [Vec<ConfigResult>],
) -> Result<()> {
    let Some(program) = &setup.instructions else {
        return Ok(());
    };
    let claims: Vec<Claim> = study
        .claims()
        .into_iter()
        .filter(|c| c.figure == Figure::InstructionsPerTxn)
        .collect();
    if claims.is_empty() {
        return Ok(());
    }
    crate::lab::instructions::check_valgrind()?;
    for c in &claims {
        let plan = &plans[c.plan].plan;
        for index in [c.a, c.b] {
            let Some(r) = results[c.plan]
                .iter_mut()
                .filter(|r| r.workload == c.workload || c.workload == STAND_IN)
                .nth(index)
            else {
                continue;
            };
            if r.instructions.is_some() {
                continue;
            }
            let work = plan.dir.join(format!("instructions-{}", r.workload));
            r.instructions = Some(crate::lab::instructions::measure(
                program,
                &work,
                &index.to_string(),
                &r.workload,
                &plan.scale,
                &plan.configs[index],
                setup.size.instruction_transactions(),
                setup.seed,
            )?);
        }
    }
    Ok(())
}

/// Every claim with its verdict and line.
pub fn verdicts(study: &dyn Study, results: &[Vec<ConfigResult>]) -> Vec<(Verdict, String)> {
    study
        .claims()
        .iter()
        .map(|c| verdict_line(c, claim_interval(c, results).as_ref()))
        .collect()
}

/// Runs every plan of `study`; one result vector per plan.
pub fn run(
    study: &dyn Study,
    setup: &Setup,
    mut progress: impl FnMut(&str, Progress<'_>),
) -> Result<Vec<Vec<ConfigResult>>> {
    let plans = study.plans(setup)?;
    for p in &plans {
        for c in &p.plan.configs {
            c.options(0).creation.or_defaults().validate()?;
            c.options(0).validate()?;
        }
    }
    let mut out = Vec::with_capacity(plans.len());
    for p in &plans {
        out.push(run_plan(&p.plan, |event| progress(&p.title, event))?);
    }
    count_instructions(study, setup, &plans, &mut out)?;
    Ok(out)
}

/// The bytes of loaded rows of `workload` at `scale` (to size a pool).
pub fn data_bytes(workload: &str, scale: &Scale) -> Result<u64> {
    Ok(crate::lab::workload::by_name(workload, scale)?.data_bytes())
}

/// A ratio as the seeds print a change: `+50.0% [+41.2, +58.9]`; `-`
/// without an interval.
pub fn pct_cell(i: Option<RatioInterval>) -> String {
    match i {
        Some(i) => format!(
            "{:+.1}% [{:+.1}, {:+.1}]",
            (i.ratio - 1.0) * 100.0,
            (i.low - 1.0) * 100.0,
            (i.high - 1.0) * 100.0
        ),
        None => "-".to_string(),
    }
}

/// TPS ratio of configuration `a` over `b` in one workload's results.
pub fn tps_ratio(group: &[&ConfigResult], a: usize, b: usize) -> Option<RatioInterval> {
    group.get(a)?.ratio_to(group.get(b)?, |r| r.tps)
}

/// One workload's results of a plan.
pub fn group<'a>(results: &'a [ConfigResult], workload: &str) -> Vec<&'a ConfigResult> {
    results.iter().filter(|r| r.workload == workload).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::result::Run;

    fn iv(low: f64, ratio: f64, high: f64) -> RatioInterval {
        RatioInterval {
            ratio,
            low,
            high,
            pairs: 5,
        }
    }

    #[test]
    fn a_direction_is_reproduced_only_when_the_interval_is_wholly_on_its_side() {
        let above = iv(1.5, 1.6, 1.7);
        let below = iv(0.6, 0.7, 0.8);
        let across = iv(0.9, 1.05, 1.2);
        assert_eq!(judge(Direction::Higher, Some(&above)), Verdict::Reproduced);
        assert_eq!(
            judge(Direction::Higher, Some(&below)),
            Verdict::NotReproduced
        );
        assert_eq!(
            judge(Direction::Higher, Some(&across)),
            Verdict::NotResolved
        );
        assert_eq!(judge(Direction::Lower, Some(&below)), Verdict::Reproduced);
        assert_eq!(
            judge(Direction::Lower, Some(&above)),
            Verdict::NotReproduced
        );
        assert_eq!(judge(Direction::Lower, Some(&across)), Verdict::NotResolved);
        // An interval touching 1 shows no difference.
        assert_eq!(
            judge(Direction::Higher, Some(&iv(1.0, 1.1, 1.2))),
            Verdict::NotResolved
        );
        assert_eq!(judge(Direction::Higher, None), Verdict::NotResolved);
    }

    #[test]
    fn about_equal_needs_the_interval_inside_the_band() {
        let band = Direction::About(0.05);
        assert_eq!(
            judge(band, Some(&iv(0.97, 0.99, 1.01))),
            Verdict::Reproduced
        );
        // A small difference that is resolved is still about equal.
        assert_eq!(
            judge(band, Some(&iv(0.96, 0.97, 0.98))),
            Verdict::Reproduced
        );
        assert_eq!(
            judge(band, Some(&iv(1.2, 1.3, 1.4))),
            Verdict::NotReproduced
        );
        assert_eq!(
            judge(band, Some(&iv(0.5, 0.6, 0.7))),
            Verdict::NotReproduced
        );
        // Contains 1 but reaches past the band: too wide to say.
        assert_eq!(judge(band, Some(&iv(0.8, 1.0, 1.2))), Verdict::NotResolved);
        // Straddles the band's edge.
        assert_eq!(
            judge(band, Some(&iv(1.03, 1.06, 1.09))),
            Verdict::NotResolved
        );
    }

    fn claim(direction: Direction, seed: Option<f64>) -> Claim {
        Claim {
            ratio: "DWB/FPW TPS".into(),
            context: "oltp_write_only, lz4".into(),
            direction,
            seed,
            plan: 0,
            workload: "w".into(),
            a: 1,
            b: 0,
            figure: Figure::Tps,
        }
    }

    #[test]
    fn verdict_lines_name_the_ratio_both_figures_and_the_reason() {
        let (v, line) = verdict_line(
            &claim(Direction::Higher, Some(1.5)),
            Some(&iv(1.5, 1.6, 1.7)),
        );
        assert_eq!(v, Verdict::Reproduced);
        assert_eq!(
            line,
            "reproduced: DWB/FPW TPS = 1.60x [1.50, 1.70] here, 1.50x in the seed \
             (oltp_write_only, lz4)"
        );
        let (_, line) = verdict_line(
            &claim(Direction::Higher, Some(1.5)),
            Some(&iv(0.9, 1.0, 1.1)),
        );
        assert!(line.starts_with("not resolved:"), "{line}");
        // What the run could detect, and what the seed's effect would need.
        assert!(
            line.ends_with(
                "the interval contains 1; this run detects ±13.6 % (95 %, power 80 %); \
                 the seed's 1.50x needs about 3 rounds at this noise"
            ),
            "{line}"
        );
        let (_, line) = verdict_line(
            &claim(Direction::Higher, Some(1.5)),
            Some(&iv(0.6, 0.7, 0.8)),
        );
        assert!(
            line.starts_with("not reproduced: DWB/FPW TPS = 0.70x"),
            "{line}"
        );
        let (v, line) = verdict_line(&claim(Direction::About(0.05), None), None);
        assert_eq!(v, Verdict::NotResolved);
        assert!(
            line.contains("no interval") && line.contains("hypothesis"),
            "{line}"
        );
    }

    /// Results with the given TPS per round for each configuration.
    fn results(tps: &[&[f64]]) -> Vec<ConfigResult> {
        tps.iter()
            .map(|runs| ConfigResult {
                workload: "w".into(),
                runs: runs
                    .iter()
                    .enumerate()
                    .map(|(repeat, &tps)| Run {
                        repeat,
                        tps,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn claims_find_their_configurations_by_plan_workload_and_index() {
        let plans = vec![
            results(&[&[100.0, 110.0, 90.0], &[150.0, 166.0, 134.0]]),
            results(&[&[1.0, 1.0], &[1.0, 1.0]]),
        ];
        let c = claim(Direction::Higher, Some(1.5));
        let i = claim_interval(&c, &plans).unwrap();
        assert!(i.resolved() && i.ratio > 1.45 && i.ratio < 1.55, "{i:?}");
        assert_eq!(judge(c.direction, Some(&i)), Verdict::Reproduced);
        // A missing plan, workload or configuration gives no interval.
        for bad in [
            Claim {
                plan: 5,
                ..c.clone()
            },
            Claim {
                workload: "x".into(),
                ..c.clone()
            },
            Claim { a: 7, ..c.clone() },
        ] {
            assert_eq!(claim_interval(&bad, &plans), None);
        }
    }

    #[test]
    fn every_study_is_listed_once_and_found_by_name() {
        let names: Vec<&str> = all().iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "dwb-vs-fpw",
                "dw-eviction-cliff",
                "checksums",
                "sorted-checkpoint",
                "wal-block-size"
            ]
        );
        for n in names {
            assert_eq!(by_name(n).unwrap().name(), n);
        }
        assert!(by_name("nope").is_err());
    }

    /// Every claim of every study points at configurations its plans
    /// have, and those configurations differ (a claim on one
    /// configuration against itself could never be resolved).
    #[test]
    fn every_claim_indexes_distinct_configurations_of_its_plans() {
        let dir = tempfile::tempdir().unwrap();
        for size in [Size::Tiny, Size::Full] {
            let setup = Setup {
                size,
                device: None,
                dir: dir.path().into(),
                seed: 1,
                rounds: None,
                stand_in: "tpcc".into(),
                instructions: None,
            };
            for s in all() {
                let plans = s.plans(&setup).unwrap();
                assert!(!s.claims().is_empty(), "{}", s.name());
                for c in s.claims() {
                    let p = &plans
                        .get(c.plan)
                        .unwrap_or_else(|| panic!("{}: {c:?}", s.name()))
                        .plan;
                    assert!(
                        p.workloads.contains(&c.workload) || c.workload == STAND_IN,
                        "{}: {c:?}",
                        s.name()
                    );
                    let (a, b) = (&p.configs[c.a], &p.configs[c.b]);
                    assert_ne!(a, b, "{}: {c:?}", s.name());
                }
                for t in s.seed_tables() {
                    assert!(t.rows.iter().all(|r| r.len() == t.headers.len()));
                }
            }
        }
    }

    #[test]
    fn rounds_given_replace_the_sizes_rule() {
        let setup = |rounds| Setup {
            size: Size::Full,
            device: None,
            dir: "/nowhere".into(),
            seed: 1,
            rounds,
            stand_in: "tpcc".into(),
            instructions: None,
        };
        assert!(matches!(setup(None).repeats(), Repeats::Auto { .. }));
        assert!(matches!(setup(Some(5)).repeats(), Repeats::Fixed(5)));
        let plans = all()[0].plans(&setup(Some(4))).unwrap();
        assert!(plans
            .iter()
            .all(|p| matches!(p.plan.repeats, Repeats::Fixed(4))));
    }
}
