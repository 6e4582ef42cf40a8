//! Running the laboratory: a loaded database per mode, then the
//! iterations, each from a copy of it (see the module documentation of
//! [`super`] for what an iteration does).

use super::faults::{self, Extra};
use super::iteration::{Base, Iteration, Outcome};
use super::report::{CrashTestReport, Failure, ModeReport, Progress};
use super::workload::Tables;
use super::{iteration_seed, CrashTestOptions};
use crate::error::{Error, Result};
use crate::settings::{ChecksumAlgorithm, TornPageProtection};
use std::time::Instant;

/// Runs every mode of `opts`; `progress` hears after each iteration.
pub fn run(
    opts: &CrashTestOptions,
    mut progress: impl FnMut(&Progress),
) -> Result<CrashTestReport> {
    opts.validate()?;
    let mut modes = Vec::new();
    for &mode in &opts.protections {
        modes.push(run_mode(opts, mode, &mut progress)?);
    }
    let expected_checksum_miss_rate = match opts.data_checksums {
        ChecksumAlgorithm::Fnv => 1.0 / 65535.0,
        ChecksumAlgorithm::Crc32c => 1.0 / 4_294_967_296.0,
        ChecksumAlgorithm::Off => 1.0,
    };
    Ok(CrashTestReport {
        options: opts.clone(),
        expected_checksum_miss_rate,
        modes,
    })
}

/// True if the engine refused the mode itself (not built in this build, or
/// `atomic` on a device without atomic writes).
fn refused_mode(e: &Error) -> bool {
    matches!(
        e,
        Error::InvalidSetting {
            name: "torn_page_protection",
            ..
        }
    )
}

fn run_mode(
    opts: &CrashTestOptions,
    mode: TornPageProtection,
    progress: &mut impl FnMut(&Progress),
) -> Result<ModeReport> {
    let start = Instant::now();
    let mut report = ModeReport {
        mode: mode.to_string(),
        ..ModeReport::default()
    };
    let base = match Base::create(opts, mode) {
        Ok(b) => b,
        Err(e) if refused_mode(&e) => {
            report.note = Some(format!("refused: {e}"));
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    for i in opts.first_iteration..opts.first_iteration.saturating_add(opts.iterations) {
        let seed = iteration_seed(opts.seed, mode, i);
        let mut it = Iteration::new(opts, mode, &base, seed);
        // An engine panic fails the iteration, not the whole run.
        let run = std::panic::AssertUnwindSafe(|| it.run());
        let outcome = std::panic::catch_unwind(run).unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            Err(format!("panicked: {}", msg.unwrap_or_default()))
        });
        report.iterations += 1;
        super::report::merge(&mut report, &it.c);
        if let Err(what) = outcome {
            report.failed_iterations += 1;
            if report.failures.len() < opts.max_failures_kept {
                let trace = it.save_trace(opts, mode, i);
                report.failures.push(Failure {
                    iteration: i,
                    iteration_seed: seed,
                    what,
                    events: std::mem::take(&mut it.events),
                    replay: opts.replay_command(mode, i),
                    trace,
                });
            }
        }
        progress(&Progress {
            mode: &report.mode,
            done: report.iterations,
            total: opts.iterations,
            failed: report.failed_iterations,
        });
    }
    report.elapsed_s = start.elapsed().as_secs_f64();
    Ok(report)
}

impl Iteration<'_> {
    fn run(&mut self) -> Outcome {
        let outcome = self.steps();
        if self.deferred.is_empty() {
            return outcome;
        }
        let mut all = std::mem::take(&mut self.deferred);
        all.extend(outcome.err());
        Err(all.join("; then "))
    }

    fn steps(&mut self) -> Outcome {
        let db = self
            .open()
            .map_err(|e| format!("opening the clean copy: {e}"))?;
        let tables = Tables::of(&db).map_err(|e| e.to_string())?;
        let extra = faults::choose(self);
        match extra {
            Some(Extra::Eio) => faults::fsync_eio(self, db, &tables)?,
            Some(Extra::Enospc) => faults::disk_full(self, db, &tables)?,
            Some(Extra::Panic) => super::panics::injected_panic(self, db, &tables)?,
            Some(Extra::AtomicRefused) => super::panics::atomic_refused(self, db, &tables)?,
            Some(Extra::ProcessCrash) => {
                if !faults::process_crash(self, db, &tables)? {
                    return Ok(());
                }
            }
            _ => self.power_cut(db, &tables)?,
        }
        let Some(mut db) = self.recover()? else {
            return Ok(());
        };
        if !self.check(&db)? {
            return Ok(());
        }
        if std::mem::take(&mut self.switched) {
            // Work under the mode switched to and lose power again: the
            // first changes after the switch must be protected its way.
            let t = Tables::of(&db).map_err(|e| e.to_string())?;
            self.power_cut(db, &t)?;
            db = match self.recover()? {
                Some(db) => db,
                None => return Ok(()),
            };
            if !self.check(&db)? {
                return Ok(());
            }
        }
        match extra {
            Some(Extra::Bitflip) => faults::bit_flip(self, db),
            Some(Extra::Misdirect) => faults::misdirect(self, db, &tables),
            _ => self.close_and_verify(db),
        }
    }
}
