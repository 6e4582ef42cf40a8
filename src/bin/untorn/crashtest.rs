//! `untorn crashtest`: the crash laboratory (src/crashlab/).

use crate::on_off;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use untorn::crashlab::{self, CrashTestOptions};

#[derive(Args, Debug)]
pub struct CrashTestArgs {
    /// Protection modes to test [default: every mode].
    #[arg(long)]
    protection: Option<String>,
    /// Iterations per mode.
    #[arg(long, default_value_t = 200)]
    iterations: u64,
    /// First iteration (with --iterations 1: replay one iteration alone).
    #[arg(long, default_value_t = 0)]
    first_iteration: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Device sector size: 512 or 4096. 4096 by default: 4Kn and 512e
    /// drives destroy a damaged sector's 4 KB whole, the harder case.
    #[arg(long, default_value_t = 4096)]
    sector_size: usize,
    /// Faults: drop, reorder, tear, eio, enospc, bitflip, misdirect, zero,
    /// unreadable, process_crash, switch, panic, atomic_refused (or none).
    #[arg(long, default_value = "drop,reorder,tear,process_crash")]
    faults: String,
    /// Page checksums: fnv or crc32c.
    #[arg(long, default_value = "crc32c")]
    data_checksums: String,
    /// The device writes whole pages atomically: writes tear only between
    /// pages, and statx reports a page as its atomic unit, so
    /// `torn_page_protection = atomic` runs too (where only its RWF_ATOMIC
    /// writes are whole; everything else tears at sectors).
    #[arg(long)]
    atomic_page_writes: bool,
    /// Page size of the tested databases (4096, 8192, 16384 or 32768).
    #[arg(long, default_value_t = 8192)]
    page_size: u32,
    /// Workload threads (1 replays an iteration exactly; more do not).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Files whose fsync the `eio` fault fails: wal, data, control.
    #[arg(long, default_value = "wal,data,control")]
    eio_files: String,
    /// Buffer pool size in pages [default: 16 per workload thread].
    #[arg(long)]
    buffer_pool_pages: Option<u64>,
    /// WAL compression of full-page images: off, lz4 or zstd.
    #[arg(long, default_value = "off")]
    wal_compression: String,
    /// double_write_defer_in_place: on (evicted pages go in place at the
    /// next checkpoint or their slot's reuse) or off.
    #[arg(long, default_value = "on")]
    double_write_defer_in_place: String,
    /// double_write_keep_deferred: on (deferred pages stay across
    /// checkpoints, named by a manifest) or off.
    #[arg(long, default_value = "on")]
    double_write_keep_deferred: String,
    /// Where failing iterations save their traces [default: the system's
    /// temporary directory].
    #[arg(long)]
    trace_dir: Option<PathBuf>,
    /// Write the report as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub fn run(a: &CrashTestArgs) -> untorn::Result<ExitCode> {
    let mut opts = CrashTestOptions {
        iterations: a.iterations,
        first_iteration: a.first_iteration,
        seed: a.seed,
        sector_size: a.sector_size,
        faults: crashlab::parse_faults(&a.faults)?,
        data_checksums: a.data_checksums.parse()?,
        page_size: a.page_size,
        atomic_page_writes: a.atomic_page_writes,
        threads: a.threads,
        eio_targets: crashlab::parse_file_kinds(&a.eio_files)?,
        buffer_pool_pages: a.buffer_pool_pages,
        trace_dir: a.trace_dir.clone(),
        wal_compression: a.wal_compression.parse()?,
        double_write_defer_in_place: on_off(
            "double_write_defer_in_place",
            &a.double_write_defer_in_place,
        )?,
        double_write_keep_deferred: on_off(
            "double_write_keep_deferred",
            &a.double_write_keep_deferred,
        )?,
        ..CrashTestOptions::default()
    };
    match &a.protection {
        Some(p) => opts.protections = crashlab::parse_protections(p)?,
        // Every mode, `atomic` too where the device has atomic writes.
        None => opts = opts.for_device(),
    }
    let mut lines = crate::progress::Lines::new();
    let report = crashlab::run::run(&opts, |p| {
        let line = format!(
            "{}: {}/{} iterations, {} failed",
            p.mode, p.done, p.total, p.failed
        );
        lines.show(&line, p.done == p.total);
    })?;
    lines.end();
    println!("{}", crashlab::report::table(&report));
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| untorn::Error::Invalid(e.to_string()))?;
        std::fs::write(path, text).map_err(|e| untorn::Error::io(path, "write", e))?;
    }
    let failed = report.modes.iter().any(|m| m.failed_iterations > 0);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
