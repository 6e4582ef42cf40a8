//! A comparison in one run: every combination of settings asked for runs
//! once per round, in a balanced order that changes from round to round
//! (A B, B A, ...), each run on a fresh copy of the same loaded data with
//! no other database open, so that noise on a shared machine hits every
//! configuration alike and no position in a round is favoured.

use super::adaptive::{self, Repeats};
use super::confidence::round_order;
use super::prepare::{make_template, open_copy, remove_database, template_key};
use super::result::{ConfigResult, Run};
use super::runner::{run_once, RunSpec};
use super::workload::{by_name, Scale, Workload};
use crate::error::Result;
use crate::settings::{
    ChecksumAlgorithm, RequestedCreationSettings, TornPageProtection, WalCompression,
};
use crate::Options;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The least buffer pool a bench runs with, in pages: a smaller
/// `--buffer-pool` is refused, the default raised to it.
pub const MIN_BUFFER_POOL_PAGES: u64 = 256;

/// One configuration: every engine setting a comparison may vary.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    pub protection: TornPageProtection,
    pub data_checksums: ChecksumAlgorithm,
    pub page_size: u32,
    pub wal_block_size: u32,
    /// Bytes; `None`: a quarter of the workload's data.
    pub buffer_pool: Option<u64>,
    pub max_wal_size: u64,
    pub checkpoint_timeout: Duration,
    pub synchronous_commit: bool,
    /// A device profile name (`real`: none).
    pub device: String,
    pub wal_compression: WalCompression,
    pub checkpoint_sort: bool,
    pub checkpoint_completion_target: f64,
    /// `bgwriter_lru_maxpages` (0: no background writer).
    pub bgwriter_lru_maxpages: u32,
    /// `double_write_buffer_size` (used under double_writes only).
    pub double_write_buffer_size: u64,
    /// `double_write_eviction_pages` (used under double_writes only).
    pub double_write_eviction_pages: u32,
    /// `double_write_defer_in_place` (used under double_writes only).
    pub double_write_defer_in_place: bool,
    /// `double_write_keep_deferred` (used under double_writes only).
    pub double_write_keep_deferred: bool,
    /// `double_write_deferred_size` (0: 16 times the area; used under
    /// double_writes only).
    pub double_write_deferred_size: u64,
    /// `double_write_flush_after` (used under double_writes only).
    pub double_write_flush_after: u32,
    /// A name that tells apart copies of one configuration (`untorn bench
    /// --aa`: `a` and `b`); shown as the `copy` setting. Changes nothing in
    /// the engine.
    pub copy: Option<String>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            protection: TornPageProtection::FullPages,
            data_checksums: ChecksumAlgorithm::Crc32c,
            page_size: 8192,
            wal_block_size: 8192,
            buffer_pool: None,
            max_wal_size: 64 << 20,
            checkpoint_timeout: Duration::from_secs(300),
            synchronous_commit: true,
            device: "real".into(),
            wal_compression: WalCompression::Off,
            checkpoint_sort: true,
            checkpoint_completion_target: 0.9,
            bgwriter_lru_maxpages: Options::default().bgwriter_lru_maxpages,
            double_write_buffer_size: Options::default().double_write_buffer_size,
            double_write_eviction_pages: Options::default().double_write_eviction_pages,
            double_write_defer_in_place: Options::default().double_write_defer_in_place,
            double_write_keep_deferred: Options::default().double_write_keep_deferred,
            double_write_deferred_size: Options::default().double_write_deferred_size,
            double_write_flush_after: Options::default().double_write_flush_after,
            copy: None,
        }
    }
}

impl BenchConfig {
    /// The engine options for a workload of `data_bytes`.
    pub fn options(&self, data_bytes: u64) -> Options {
        let pool = self
            .buffer_pool
            .unwrap_or(data_bytes / 4)
            .max(MIN_BUFFER_POOL_PAGES * self.page_size as u64);
        Options {
            creation: RequestedCreationSettings {
                page_size: Some(self.page_size),
                wal_block_size: Some(self.wal_block_size),
                data_checksums: Some(self.data_checksums),
                torn_page_protection: Some(self.protection),
                ..Default::default()
            },
            buffer_pool_size: pool,
            synchronous_commit: self.synchronous_commit,
            max_wal_size: self.max_wal_size,
            checkpoint_timeout: self.checkpoint_timeout,
            wal_compression: self.wal_compression,
            checkpoint_sort: self.checkpoint_sort,
            checkpoint_completion_target: self.checkpoint_completion_target,
            bgwriter_lru_maxpages: self.bgwriter_lru_maxpages,
            double_write_buffer_size: self.double_write_buffer_size,
            double_write_eviction_pages: self.double_write_eviction_pages,
            double_write_defer_in_place: self.double_write_defer_in_place,
            double_write_keep_deferred: self.double_write_keep_deferred,
            double_write_deferred_size: self.double_write_deferred_size,
            double_write_flush_after: self.double_write_flush_after,
            ..Options::default()
        }
    }

    /// The A/A check (`untorn bench --aa`): this configuration twice, told
    /// apart only by the `copy` setting (`a`, `b`), so the report's ratio
    /// between them measures the instrument, not the engine.
    pub fn aa_pair(&self) -> Vec<BenchConfig> {
        ["a", "b"]
            .map(|copy| BenchConfig {
                copy: Some(copy.into()),
                ..self.clone()
            })
            .to_vec()
    }

    /// Every setting, by name, as the report and the JSON show them.
    pub fn settings(&self, data_bytes: u64) -> BTreeMap<String, String> {
        let o = self.options(data_bytes);
        let mut m = BTreeMap::new();
        m.insert("torn_page_protection".into(), self.protection.to_string());
        m.insert("data_checksums".into(), self.data_checksums.to_string());
        m.insert("page_size".into(), self.page_size.to_string());
        m.insert("wal_block_size".into(), self.wal_block_size.to_string());
        m.insert("buffer_pool_size".into(), o.buffer_pool_size.to_string());
        m.insert("max_wal_size".into(), self.max_wal_size.to_string());
        m.insert(
            "checkpoint_timeout_s".into(),
            format!("{}", self.checkpoint_timeout.as_secs_f64()),
        );
        m.insert(
            "synchronous_commit".into(),
            on_off(self.synchronous_commit).into(),
        );
        m.insert("device".into(), self.device.clone());
        m.insert("wal_compression".into(), self.wal_compression.to_string());
        m.insert(
            "checkpoint_sort".into(),
            on_off(self.checkpoint_sort).into(),
        );
        m.insert(
            "checkpoint_completion_target".into(),
            self.checkpoint_completion_target.to_string(),
        );
        m.insert(
            "bgwriter_lru_maxpages".into(),
            o.bgwriter_lru_maxpages.to_string(),
        );
        m.insert(
            "double_write_buffer_size".into(),
            o.double_write_buffer_size.to_string(),
        );
        m.insert(
            "double_write_eviction_pages".into(),
            o.double_write_eviction_pages.to_string(),
        );
        m.insert(
            "double_write_defer_in_place".into(),
            on_off(o.double_write_defer_in_place).into(),
        );
        m.insert(
            "double_write_keep_deferred".into(),
            on_off(o.double_write_keep_deferred).into(),
        );
        m.insert(
            "double_write_deferred_size".into(),
            crate::protect::double_writes::settings::deferred_bytes(&o).to_string(),
        );
        m.insert(
            "double_write_flush_after".into(),
            o.double_write_flush_after.to_string(),
        );
        if let Some(copy) = &self.copy {
            m.insert("copy".into(), copy.clone());
        }
        m
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

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
            crate::lab::noise::mark_excluded(&mut w.results, plan.drop_disturbed);
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
    crate::lab::noise::mark_excluded(&mut out, plan.drop_disturbed);
    crate::lab::result::compare_workloads(&mut out);
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
    let run = run_once(&db, w, &plan.spec, round, seed)?;
    w.check(&db)?;
    db.close()?;
    if !plan.keep {
        remove_database(&dir)?;
    }
    Ok(run)
}
