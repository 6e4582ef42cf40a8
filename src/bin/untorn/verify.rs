//! `untorn verify`: every page of every data file, like pg_checksums --check.

use std::path::Path;
use std::process::ExitCode;
use untorn::db::directory::lock_for_reading;
use untorn::file::FileSystem;

pub fn run(fs: &dyn FileSystem, dir: &Path, json: bool) -> untorn::Result<ExitCode> {
    // Held while it reads: an opening writing pages meanwhile would show
    // torn ones that are not.
    let _lock = lock_for_reading(fs, dir)?;
    let report = untorn::verify::verify_database(fs, dir)?;
    if json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| untorn::Error::Invalid(e.to_string()))?;
        println!("{text}");
    } else {
        for f in &report.failures {
            match (f.calculated, f.stored) {
                (Some(c), Some(s)) => println!(
                    "verify: checksum verification failed in file \"{}\", block {}: calculated checksum {c:X} but block contains {s:X}",
                    f.path.display(),
                    f.block
                ),
                _ => println!("verify: file \"{}\", block {}: {}", f.path.display(), f.block, f.detail),
            }
        }
        for p in &report.skipped_files {
            println!(
                "verify: skipped \"{}\": not a data segment file",
                p.display()
            );
        }
        println!("Files scanned:   {}", report.files_scanned);
        println!("Blocks scanned:  {}", report.pages_scanned);
        println!("New blocks:      {}", report.pages_new);
        println!(
            "Bad checksums:   {}",
            report
                .failures
                .iter()
                .filter(|f| f.calculated.is_some())
                .count()
        );
        println!("Bad blocks:      {}", report.failures.len());
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
