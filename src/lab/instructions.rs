//! Instructions per transaction: the instrument for CPU claims.
//!
//! Wall time on a shared 2-core machine cannot resolve a 2-7 % CPU
//! difference; an instruction count from Valgrind repeats to 0.1 %
//! (SQLite measures its CPU changes this way, rustc's performance suite
//! too). Rules:
//! - One client, run inline on the process's main thread, with a fixed
//!   seed and transaction count, so the same command gives the same work.
//! - Callgrind counts each thread apart (`--separate-threads=yes`): thread
//!   1 is the client, every other thread (the WAL writer, the checkpointer,
//!   the checkpoints this runner starts) is "background".
//! - Timers must not decide the client's work: automatic checkpoints are
//!   off (`checkpoint_timeout` at its most, `max_wal_size` out of reach)
//!   and the runner checkpoints itself every `checkpoint_every`
//!   transactions, on a thread of its own that the client waits for; the
//!   background writer is off (its timer would decide which evictions the
//!   client makes).
//! - glibc's malloc thresholds are fixed ([`MALLOC_TUNABLES`]).
//! - A run's fixed costs (opening, prewarming, closing) are cancelled by
//!   running twice, with `n` and `2n` transactions: the difference over
//!   `n` is the cost of a transaction.
//!
//! What it cannot see: time in the kernel (writes, fsyncs), waiting, cache
//! misses and branch mispredictions; and Valgrind has no AVX-512, so the
//! checksum code takes its AVX2 or scalar path. For a TPS claim it bears
//! only on a CPU-bound run: there TPS moves as the inverse of CPU per
//! transaction.

use super::config::BenchConfig;
pub use super::instruction_counts::{
    ratio, read_callgrind, PerTransaction, ThreadCounts, REPEAT_BAND,
};
use super::prepare::{make_template, open_copy};
use super::workload::{by_name, Outcome, Rng, Scale, Workload};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Fixed malloc thresholds for the counted process ([`count_child`]).
pub const MALLOC_TUNABLES: &str =
    "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824";

/// Says, before anything runs, whether Valgrind can be run.
pub fn check_valgrind() -> Result<()> {
    let found = Command::new("valgrind").arg("--version").output();
    if found.is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    Err(Error::Invalid(
        "instruction counts need valgrind: run scripts/install-clients \
         (Debian: apt-get install valgrind)"
            .into(),
    ))
}

/// What one counted process runs, handed to it as a JSON file
/// (`untorn instructions-child FILE`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Job {
    pub workload: String,
    pub scale: Scale,
    pub config: BenchConfig,
    /// A loaded database, shut down cleanly, that each run copies.
    pub template: PathBuf,
    pub run_dir: PathBuf,
    pub transactions: u64,
    pub checkpoint_every: u64,
    pub seed: u64,
}

/// The counted process: [`run_inline`] for `job`.
pub fn run_job(job: &Job) -> Result<u64> {
    let workload = by_name(&job.workload, &job.scale)?;
    run_inline(
        &job.template,
        &job.run_dir,
        &job.config,
        workload.as_ref(),
        job.transactions,
        job.checkpoint_every,
        job.seed,
    )
}

/// A checkpoint every half of the shorter run: one in it, three in the
/// longer, so the transactions between them see one every `n / 2`.
pub fn checkpoint_every(n: u64) -> u64 {
    (n / 2).max(1)
}

/// Instructions per transaction of `config` on `workload`: loads a
/// template in `work` (natively), then counts `program instructions-child`
/// (this laboratory's binary) under Callgrind with `n` and `2n`
/// transactions. `tag` tells this configuration's files apart.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    program: &Path,
    work: &Path,
    tag: &str,
    workload: &str,
    scale: &Scale,
    config: &BenchConfig,
    n: u64,
    seed: u64,
) -> Result<PerTransaction> {
    let config = deterministic(config);
    std::fs::create_dir_all(work).map_err(|e| Error::io(work, "create_dir_all", e))?;
    let template = work.join(format!("template-{tag}"));
    make_template(&template, &config, by_name(workload, scale)?.as_ref())?;
    let count = |transactions: u64| {
        let job = Job {
            workload: workload.to_string(),
            scale: scale.clone(),
            config: config.clone(),
            template: template.clone(),
            run_dir: work.join(format!("run-{tag}")),
            transactions,
            checkpoint_every: checkpoint_every(n),
            seed,
        };
        let path = work.join(format!("job-{tag}-{transactions}.json"));
        let text = serde_json::to_string(&job).map_err(|e| Error::Invalid(format!("JSON: {e}")))?;
        std::fs::write(&path, text).map_err(|e| Error::io(&path, "write", e))?;
        let args = ["instructions-child".to_string(), path.display().to_string()];
        count_child(program, &args, work, &format!("{tag}-{transactions}"))
    };
    Ok(PerTransaction::from_runs(count(n)?, count(2 * n)?, n))
}

/// Runs `args` (this program, re-invoked as a child that calls
/// [`run_job`]) under Callgrind, writing into `work`, and returns its
/// counts.
fn count_child(program: &Path, args: &[String], work: &Path, tag: &str) -> Result<ThreadCounts> {
    let out_file = work.join(format!("callgrind.{tag}"));
    let status = Command::new("valgrind")
        // glibc moves its mmap and trim thresholds as memory is freed, in
        // an order the thread scheduler decides: fixed, malloc's own work
        // repeats (full_pages on oltp_write_only: a 0.65 % spread over
        // three runs became 0.06 %).
        .env("GLIBC_TUNABLES", MALLOC_TUNABLES)
        .arg("--tool=callgrind")
        .arg("--separate-threads=yes")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg("--quiet")
        .arg(program)
        .args(args)
        .status()
        .map_err(|e| {
            Error::Invalid(format!(
                "could not run valgrind ({e}): install it (Debian: apt-get install valgrind; \
                 scripts/install-clients does)"
            ))
        })?;
    if !status.success() {
        return Err(Error::Invalid(format!(
            "the counted run ({}) failed: {status}",
            args.join(" ")
        )));
    }
    read_callgrind(&out_file)
}

/// The settings that keep timers out of the client's work (module doc).
pub fn deterministic(config: &BenchConfig) -> BenchConfig {
    BenchConfig {
        checkpoint_timeout: Duration::from_secs(86_400),
        max_wal_size: 1 << 40,
        bgwriter_lru_maxpages: 0,
        clients: Some(1),
        ..config.clone()
    }
}

/// The measured process: opens a copy of `template` in `run_dir` with
/// `config`, runs `transactions` of `workload` on this thread with `seed`,
/// checkpointing every `checkpoint_every` on a thread of its own, and
/// closes the database. Returns the transactions done.
pub fn run_inline(
    template: &Path,
    run_dir: &Path,
    config: &BenchConfig,
    workload: &dyn Workload,
    transactions: u64,
    checkpoint_every: u64,
    seed: u64,
) -> Result<u64> {
    let db = open_copy(template, run_dir, config, workload)?;
    let tables = workload.tables(&db)?;
    let mut rng = Rng::new(seed, 0);
    let mut done = 0;
    while done < transactions {
        match workload.transaction(&db, &tables, &mut rng, 0)? {
            Outcome::Retry => continue,
            Outcome::Committed | Outcome::Done { .. } => done += 1,
        }
        if checkpoint_every > 0 && done % checkpoint_every == 0 && done < transactions {
            std::thread::scope(|s| s.spawn(|| db.checkpoint()).join())
                .map_err(|_| Error::Invalid("the checkpoint thread panicked".into()))??;
        }
    }
    db.close()?;
    Ok(done)
}
