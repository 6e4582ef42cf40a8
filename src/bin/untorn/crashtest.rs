//! `untorn crashtest`: the crash laboratory (src/crashlab/).

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
    /// Device sector size: 512 or 4096.
    #[arg(long, default_value_t = 512)]
    sector_size: usize,
    /// Faults: drop, reorder, tear, eio, enospc, bitflip, misdirect.
    #[arg(long, default_value = "drop,reorder,tear")]
    faults: String,
    /// Page checksums: fnv or crc32c.
    #[arg(long, default_value = "crc32c")]
    data_checksums: String,
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
        ..CrashTestOptions::default()
    };
    if let Some(p) = &a.protection {
        opts.protections = crashlab::parse_protections(p)?;
    }
    let report = crashlab::run::run(&opts, |p| {
        eprint!(
            "\r{}: {}/{} iterations, {} failed   ",
            p.mode, p.done, p.total, p.failed
        );
    })?;
    eprintln!();
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
