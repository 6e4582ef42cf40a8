//! A comparison in one run: every combination of settings asked for runs
//! on its own freshly loaded copy of the same data, and the repeats are
//! interleaved (A, B, C, A, B, C) so that noise on a shared machine hits
//! every configuration alike.

use super::device::{DeviceFileSystem, DeviceProfile};
use super::result::{ConfigResult, Run};
use super::runner::{fresh_database_with, run_once, RunSpec};
use super::workload::{by_name, Scale};
use crate::error::Result;
use crate::file::posix::PosixFileSystem;
use crate::file::FileSystem;
use crate::file::IoStats;
use crate::settings::{
    ChecksumAlgorithm, RequestedCreationSettings, TornPageProtection, WalCompression,
};
use crate::{Database, Options};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
        }
    }
}

impl BenchConfig {
    /// The engine options for a workload of `data_bytes`.
    pub fn options(&self, data_bytes: u64) -> Options {
        let pool = self
            .buffer_pool
            .unwrap_or(data_bytes / 4)
            .max(256 * self.page_size as u64);
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
            ..Options::default()
        }
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
            if self.synchronous_commit { "on" } else { "off" }.into(),
        );
        m.insert("device".into(), self.device.clone());
        m.insert("wal_compression".into(), self.wal_compression.to_string());
        m.insert(
            "checkpoint_sort".into(),
            if self.checkpoint_sort { "on" } else { "off" }.into(),
        );
        m.insert(
            "checkpoint_completion_target".into(),
            self.checkpoint_completion_target.to_string(),
        );
        m.insert(
            "bgwriter_lru_maxpages".into(),
            o.bgwriter_lru_maxpages.to_string(),
        );
        m
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchPlan {
    pub workloads: Vec<String>,
    pub configs: Vec<BenchConfig>,
    pub scale: Scale,
    pub spec: RunSpec,
    pub repeats: usize,
    /// Where the databases go (one subdirectory per workload and
    /// configuration, [`BenchPlan::db_dir`]).
    pub dir: PathBuf,
    pub seed: u64,
    /// Leave the databases in `dir` after the runs (closed cleanly), for
    /// `untorn check`; otherwise each is removed once checked.
    pub keep: bool,
}

impl BenchPlan {
    /// The database of `workload` on configuration `config`: named by
    /// the settings that tell the configurations apart
    /// (`tpcb-full_pages-crc32c-page8KB-wal8KB`), plus the configuration's
    /// number when two share them.
    pub fn db_dir(&self, workload: &str, config: usize) -> PathBuf {
        let label = |c: &BenchConfig| {
            format!(
                "{workload}-{}-{}-page{}KB-wal{}KB",
                c.protection,
                c.data_checksums,
                c.page_size / 1024,
                c.wal_block_size / 1024
            )
        };
        let name = label(&self.configs[config]);
        let shared = self.configs.iter().filter(|c| label(c) == name).count() > 1;
        self.dir.join(if shared {
            format!("{name}-{config}")
        } else {
            name
        })
    }
}

/// What the progress callback is told.
pub enum Progress<'a> {
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
}

fn open_fresh(
    dir: &Path,
    config: &BenchConfig,
    workload: &dyn super::workload::Workload,
) -> Result<Database> {
    let io_stats = Arc::new(IoStats::default());
    let real: Arc<dyn FileSystem> = Arc::new(PosixFileSystem::new(io_stats.clone()));
    let fs: Arc<dyn FileSystem> = match DeviceProfile::by_name(&config.device)? {
        Some(profile) => Arc::new(DeviceFileSystem::new(real, profile)),
        None => real,
    };
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| crate::Error::io(dir, "remove", e))?;
    }
    fresh_database_with(
        fs,
        io_stats,
        dir,
        config.options(workload.data_bytes()),
        workload,
    )
}

/// Runs the plan: per workload, loads each configuration's database, then
/// runs the repeats interleaved across configurations; checks each
/// workload's invariant at the end. One result per (workload, config).
pub fn run_plan(
    plan: &BenchPlan,
    mut progress: impl FnMut(Progress<'_>),
) -> Result<Vec<ConfigResult>> {
    let mut out = Vec::new();
    for name in &plan.workloads {
        let workload = by_name(name, &plan.scale)?;
        let mut dbs = Vec::with_capacity(plan.configs.len());
        for (i, config) in plan.configs.iter().enumerate() {
            progress(Progress::Loading {
                workload: name,
                config: i,
            });
            let dir = plan.db_dir(name, i);
            dbs.push((dir.clone(), open_fresh(&dir, config, workload.as_ref())?));
        }
        let mut results: Vec<ConfigResult> = plan
            .configs
            .iter()
            .map(|c| ConfigResult {
                workload: name.clone(),
                protection: c.protection.to_string(),
                device: c.device.clone(),
                settings: c.settings(workload.data_bytes()),
                ..Default::default()
            })
            .collect();
        for repeat in 0..plan.repeats {
            for (i, (_, db)) in dbs.iter().enumerate() {
                progress(Progress::Running {
                    workload: name,
                    config: i,
                    repeat,
                });
                let seed = plan.seed ^ ((repeat as u64) << 32);
                let run = run_once(db, workload.as_ref(), &plan.spec, repeat, seed)?;
                progress(Progress::Ran { run: &run });
                results[i].runs.push(run);
            }
        }
        for (dir, db) in dbs {
            workload.check(&db)?;
            db.close()?;
            if !plan.keep {
                std::fs::remove_dir_all(&dir).map_err(|e| crate::Error::io(&dir, "remove", e))?;
            }
        }
        for r in &mut results {
            r.summarize();
        }
        out.extend(results);
    }
    crate::lab::result::compare_workloads(&mut out);
    Ok(out)
}
