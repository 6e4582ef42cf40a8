//! A comparison in one run: every combination of settings asked for runs
//! once per round, in a balanced order that changes from round to round
//! (A B, B A, ...), each run on a fresh copy of the same loaded data with
//! no other database open, so that noise on a shared machine hits every
//! configuration alike and no position in a round is favoured.

use super::adaptive::{self, Repeats};
use super::confidence::round_order;
pub use super::config::{BenchConfig, MIN_BUFFER_POOL_PAGES};
use super::prepare::{make_template, open_copy, remove_database, template_key};
use super::result::{ConfigResult, Run};
use super::runner::{run_once, RunSpec};
use super::workload::{by_name, Scale, Workload};
use crate::error::Result;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchPlan {
    pub workloads: Vec<String>,
    pub configs: Vec<BenchConfig>,
    pub scale: Scale,
    pub spec: RunSpec,
    /// Rounds per workload: fixed, or adaptive (`--repeat auto`).
    pub repeats: Repeats,
    /// Where the databases go (one subdirectory per workload and
    /// configuration, [`BenchPlan::db_dir`], and the templates they are
    /// copied from, [`BenchPlan::template_dir`]).
    pub dir: PathBuf,
    pub seed: u64,
    /// Leave the last round's databases in `dir` (closed cleanly), for
    /// `untorn check`; otherwise each run's is removed once checked.
    pub keep: bool,
    /// Leave runs the noise monitor found disturbed out of every figure,
    /// the adaptive stop rule's included (`--drop-disturbed`).
    pub drop_disturbed: bool,
}

impl BenchPlan {
    /// The database of `workload` on configuration `config`: named by
    /// the settings that tell the configurations apart
    /// (`tpcb-full_pages-crc32c-page8KB-wal8KB`), plus the configuration's
    /// number when two share them.
    pub fn db_dir(&self, workload: &str, config: usize) -> PathBuf {
        let label = |c: &BenchConfig| format!("{workload}-{}", template_key(c));
        let name = label(&self.configs[config]);
        let shared = self.configs.iter().filter(|c| label(c) == name).count() > 1;
        self.dir.join(if shared {
            format!("{name}-{config}")
        } else {
            name
        })
    }

    /// The template `config`'s runs of `workload` are copied from, shared
    /// by every configuration with the same creation settings.
    pub fn template_dir(&self, workload: &str, config: usize) -> PathBuf {
        let key = template_key(&self.configs[config]);
        self.dir.join(format!("{workload}-template-{key}"))
    }
}

/// What the progress callback is told.
pub enum Progress<'a> {
    /// Loading the template `config` (and every configuration sharing its
    /// creation settings) starts from.
    Loading {
        workload: &'a str,
        config: usize,
    },
    Running {
        workload: &'a str,
        config: usize,
        repeat: usize,
    },
    Ran {
        run: &'a Run,
    },
    /// A round ended: `rounds` done, and the widest interval of the
    /// ratios shown ([`adaptive::widest_pct`]).
    Round {
        workload: &'a str,
        rounds: usize,
        widest_pct: Option<f64>,
    },
}

/// One workload of a plan while it runs.
struct WorkloadRun {
    name: String,
    workload: Box<dyn Workload>,
    templates: Vec<PathBuf>,
    results: Vec<ConfigResult>,
    rounds: usize,
    /// Time spent on its rounds (loading excluded).
    spent: Duration,
    stop: Option<super::confidence::StopReason>,
}

/// Runs the plan: loads one template per workload and set of creation
/// settings, then gives the workloads still running one round each in
/// turn until [`adaptive::next_step`] stops each. Taking turns means a
/// workload that reaches its precision early leaves its time to the
/// others, whatever their order in the plan. In round `r` a workload's
/// configurations run in [`round_order`]`(n, r)`, each on a fresh copy of
/// its template with no other database open; each run's database is
/// checked against the workload's invariant, closed, and removed unless
/// `keep` (then the last round's stay). One result per (workload, config),
/// in plan order.
pub fn run_plan(
    plan: &BenchPlan,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Vec<ConfigResult>> {
    let job = Instant::now();
    let mut runs = Vec::with_capacity(plan.workloads.len());
    for name in &plan.workloads {
        let workload = by_name(name, &plan.scale)?;
        let templates = make_templates(plan, name, workload.as_ref(), &mut progress)?;
        let results = plan
            .configs
            .iter()
            .map(|c| ConfigResult {
                workload: name.clone(),
                protection: c.protection.to_string(),
                device: c.device.clone(),
                settings: c.settings(workload.data_bytes()),
                data_bytes: workload.data_bytes(),
                ..Default::default()
            })
            .collect();
        runs.push(WorkloadRun {
            name: name.clone(),
            workload,
            templates,
            results,
            rounds: 0,
            spent: Duration::ZERO,
            stop: None,
        });
    }
    let budget = match &plan.repeats {
        Repeats::Auto { budget, .. } => *budget,
        Repeats::Fixed(_) => Duration::MAX,
    };
    while runs.iter().any(|w| w.stop.is_none()) {
        let running = runs.iter().filter(|w| w.stop.is_none()).count() as u32;
        for w in runs.iter_mut().filter(|w| w.stop.is_none()) {
            let began = Instant::now();
            for i in round_order(plan.configs.len(), w.rounds) {
                progress(Progress::Running {
                    workload: &w.name,
                    config: i,
                    repeat: w.rounds,
                });
                let run = run_copy(
                    plan,
                    &w.name,
                    i,
                    &w.templates[i],
                    w.workload.as_ref(),
                    w.rounds,
                )?;
                progress(Progress::Ran { run: &run });
                w.results[i].runs.push(run);
            }
            w.rounds += 1;
            w.spent += began.elapsed();
            // Judged again each round: a probe is compared with the
            // median of all probes so far.
            crate::lab::disturbed::mark_excluded(&mut w.results, plan.drop_disturbed);
            progress(Progress::Round {
                workload: &w.name,
                rounds: w.rounds,
                widest_pct: adaptive::widest_pct(&w.results),
            });
            // What is left of the budget, shared by the workloads running.
            let share = budget.saturating_sub(job.elapsed()) / running;
            w.stop = adaptive::next_step(
                &w.results,
                w.rounds,
                w.spent,
                w.spent.saturating_add(share),
                &plan.repeats,
            );
        }
    }
    let mut out = Vec::new();
    for w in runs {
        // A shared template is already gone the second time: a no-op.
        for t in &w.templates {
            remove_database(t)?;
        }
        for mut r in w.results {
            r.rounds = w.rounds;
            r.stop_reason = w.stop;
            r.summarize();
            out.push(r);
        }
    }
    // The final verdict on each run: its probes against the whole bench's.
    crate::lab::disturbed::mark_excluded(&mut out, plan.drop_disturbed);
    crate::lab::report::compare_workloads(&mut out);
    Ok(out)
}

/// Makes the templates of `workload`: one per set of creation settings
/// ([`template_key`]); returns each configuration's.
fn make_templates(
    plan: &BenchPlan,
    workload: &str,
    w: &dyn Workload,
    progress: &mut impl FnMut(Progress<'_>),
) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::with_capacity(plan.configs.len());
    for (i, config) in plan.configs.iter().enumerate() {
        let dir = plan.template_dir(workload, i);
        if !out.contains(&dir) {
            progress(Progress::Loading {
                workload,
                config: i,
            });
            make_template(&dir, config, w)?;
        }
        out.push(dir);
    }
    Ok(out)
}

/// One run of configuration `config` in round `round`, on a fresh copy of
/// `template`; the database is checked, closed, and removed unless kept.
fn run_copy(
    plan: &BenchPlan,
    workload: &str,
    config: usize,
    template: &Path,
    w: &dyn Workload,
    round: usize,
) -> Result<Run> {
    let dir = plan.db_dir(workload, config);
    let db = open_copy(template, &dir, &plan.configs[config], w)?;
    // Every configuration of a round makes the same random choices.
    let seed = plan.seed ^ ((round as u64) << 32);
    let spec = RunSpec {
        clients: plan.configs[config].clients.unwrap_or(plan.spec.clients),
        ..plan.spec.clone()
    };
    let run = run_once(&db, w, &spec, round, seed)?;
    w.check(&db)?;
    db.close()?;
    if !plan.keep {
        remove_database(&dir)?;
    }
    Ok(run)
}
