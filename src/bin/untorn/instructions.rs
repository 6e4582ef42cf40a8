//! `untorn bench --instrument instructions`: instructions per transaction
//! for each configuration, counted by Callgrind in a child process of this
//! program (untorn::lab::instructions says how and what it cannot see).

use crate::bench::BenchArgs;
use std::path::Path;
use std::process::ExitCode;
use untorn::lab::config::BenchConfig;
use untorn::lab::instructions::{
    check_valgrind, checkpoint_every, measure, run_job, Job, PerTransaction,
};
use untorn::lab::workload::{by_name, Scale};
use untorn::Error;

/// One configuration's figure, as the JSON holds it.
#[derive(serde::Serialize)]
struct Figure {
    workload: String,
    config: String,
    per_transaction: PerTransaction,
    /// Total instructions per transaction over the first configuration's.
    ratio_to_first: f64,
}

fn label(c: &BenchConfig) -> String {
    format!(
        "{} checksums {} page {} WAL block {} wal_compression {}",
        c.protection, c.data_checksums, c.page_size, c.wal_block_size, c.wal_compression
    )
}

pub fn run(a: &BenchArgs, configs: &[BenchConfig], scale: &Scale) -> untorn::Result<ExitCode> {
    check_valgrind()?;
    let exe = std::env::current_exe().map_err(|e| Error::io(Path::new("."), "current_exe", e))?;
    let (_tmp, work) = crate::work_dir(a.dir.as_ref())?;
    let n = a.transactions;
    println!(
        "instructions per transaction (Callgrind; one client inline, seed {}, runs of {n} and {} \
         transactions, a checkpoint every {}, the background writer off; kernel time, waits \
         and cache misses not counted)",
        a.seed,
        2 * n,
        checkpoint_every(n)
    );
    let mut figures = Vec::new();
    for w in &a.workload {
        by_name(w, scale)?;
        println!(
            "\n{w}\n  {:>12} {:>12} {:>12} {:>8}  configuration",
            "client", "background", "total", "ratio"
        );
        let mut first = None;
        for (i, c) in configs.iter().enumerate() {
            let per = measure(&exe, &work.join(w), &i.to_string(), w, scale, c, n, a.seed)?;
            let base = *first.get_or_insert(per.total());
            let ratio = per.total() / base;
            println!(
                "  {:>12.0} {:>12.0} {:>12.0} {:>7.4}x  {}",
                per.client,
                per.background,
                per.total(),
                ratio,
                label(c)
            );
            figures.push(Figure {
                workload: w.clone(),
                config: label(c),
                per_transaction: per,
                ratio_to_first: ratio,
            });
        }
    }
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&figures)
            .map_err(|e| Error::Invalid(format!("JSON: {e}")))?;
        std::fs::write(path, text).map_err(|e| Error::io(path, "write", e))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The counted process (`untorn instructions-child JOB`).
pub fn child(job: &Path) -> untorn::Result<ExitCode> {
    let text = std::fs::read_to_string(job).map_err(|e| Error::io(job, "read", e))?;
    let job: Job = serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("{}: {e}", job.display())))?;
    run_job(&job)?;
    Ok(ExitCode::SUCCESS)
}
