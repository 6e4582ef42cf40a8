//! The regime a benchmark ran in, said in one line above its figures: how
//! large the data was against the buffer pool, how often checkpoints came
//! (set and measured), the device, and whether the machine disturbed the
//! runs. A storage engineer judges a table by these before any figure.

use crate::lab::result::ConfigResult;

/// `bytes` in megabytes of 2^20 bytes, as the settings' `MB` means, with
/// one decimal: `19.5 MB`.
fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / (1u64 << 20) as f64)
}

/// The value of setting `name` if every result has the same one.
fn common<'a>(results: &'a [ConfigResult], name: &str) -> Option<&'a str> {
    let first = results.first()?.settings.get(name)?;
    results
        .iter()
        .all(|r| r.settings.get(name) == Some(first))
        .then_some(first.as_str())
}

/// `data 19.5 MB, buffer pool 4.9 MB (the data is 4.0x the pool)`, or a
/// workload at a time where the pools differ.
fn data_and_pool(results: &[ConfigResult]) -> String {
    let pool_of = |r: &ConfigResult| {
        r.settings
            .get("buffer_pool_size")
            .and_then(|p| p.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mut each: Vec<(&str, u64, u64)> = results
        .iter()
        .map(|r| (r.workload.as_str(), r.data_bytes, pool_of(r)))
        .collect();
    each.dedup();
    let text = |data: u64, pool: u64| {
        if data > 0 && pool > 0 {
            format!(
                "data {}, buffer pool {} (the data is {:.1}x the pool)",
                mb(data),
                mb(pool),
                data as f64 / pool as f64
            )
        } else {
            format!("buffer pool {}", mb(pool))
        }
    };
    match &each[..] {
        [(_, data, pool), rest @ ..] if rest.iter().all(|e| (e.1, e.2) == (*data, *pool)) => {
            text(*data, *pool)
        }
        _ => each
            .iter()
            .map(|(w, data, pool)| format!("{w}: {}", text(*data, *pool)))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Seconds per checkpoint measured in `r`'s runs (`None`: no checkpoint).
fn measured_cycle(r: &ConfigResult) -> Option<f64> {
    let runs = r.runs.iter().filter(|run| !run.excluded);
    let seconds: f64 = runs.clone().map(|run| run.seconds).sum();
    let checkpoints: u64 = runs.map(|run| run.checkpoints).sum();
    (checkpoints > 0).then(|| seconds / checkpoints as f64)
}

/// `Regime: data 19.5 MB, buffer pool 4.9 MB (the data is 4.0x the
/// pool); a checkpoint every 2.5 s or 33.7 MB of WAL (max_wal_size 64.0
/// MB), whichever comes first, measured every 0.9 s (oltp_write_only
/// full_pages) to 2.5 s (oltp_update_non_index off); device real; runs of
/// 8 s.`
pub fn regime_line(results: &[ConfigResult]) -> Option<String> {
    let first = results.first()?;
    let mut parts = Vec::new();
    parts.push(data_and_pool(results));
    let timeout = common(results, "checkpoint_timeout_s");
    let wal = common(results, "max_wal_size").and_then(|w| w.parse::<u64>().ok());
    let target = common(results, "checkpoint_completion_target")
        .and_then(|t| t.parse::<f64>().ok())
        .unwrap_or(0.9);
    let mut cycle = match (timeout, wal) {
        (Some(t), Some(w)) => format!(
            "a checkpoint every {t} s or {} of WAL (max_wal_size {}), whichever comes first",
            mb((w as f64 / (1.0 + target)) as u64),
            mb(w)
        ),
        _ => "checkpoint settings vary".to_string(),
    };
    let label = |r: &ConfigResult| format!("{} {}", r.workload, r.protection);
    let cycles: Vec<(f64, String)> = results
        .iter()
        .filter_map(|r| measured_cycle(r).map(|c| (c, label(r))))
        .collect();
    let fastest = cycles.iter().min_by(|a, b| a.0.total_cmp(&b.0));
    let slowest = cycles.iter().max_by(|a, b| a.0.total_cmp(&b.0));
    match (fastest, slowest) {
        (Some(f), Some(s)) if (s.0 - f.0).abs() >= 0.05 => cycle.push_str(&format!(
            ", measured every {:.1} s ({}) to {:.1} s ({})",
            f.0, f.1, s.0, s.1
        )),
        (Some(f), Some(_)) => cycle.push_str(&format!(", measured every {:.1} s", f.0)),
        _ => cycle.push_str(", none completed in the runs"),
    }
    parts.push(cycle);
    parts.push(match common(results, "device") {
        Some(d) => format!("device {d}"),
        None => "devices vary".to_string(),
    });
    if let Some(run) = first.runs.first() {
        parts.push(format!("runs of {} s", run.seconds));
    }
    Some(format!("Regime: {}.", parts.join("; ")))
}

/// A warning when the noise monitor found runs disturbed: their figures
/// carry the machine's noise as well as the engine's.
pub fn disturbed_warning(results: &[ConfigResult]) -> Option<String> {
    let runs = results.iter().flat_map(|r| &r.runs);
    let total = runs.clone().count();
    let disturbed = runs.clone().filter(|r| r.disturbed).count();
    let excluded = runs.filter(|r| r.excluded).count();
    (disturbed > 0).then(|| {
        format!(
            "Warning: {disturbed} of {total} runs were disturbed by other work on this machine \
             ({excluded} left out of the figures); ratios near 1 deserve a rerun on a quiet machine."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::result::Run;

    fn result(workload: &str, mode: &str, checkpoints: u64, disturbed: bool) -> ConfigResult {
        let settings = [
            ("buffer_pool_size", "5242880"),
            ("max_wal_size", "67108864"),
            ("checkpoint_timeout_s", "3"),
            ("checkpoint_completion_target", "0.9"),
            ("device", "real"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into();
        let runs = (0..2)
            .map(|repeat| Run {
                repeat,
                seconds: 9.0,
                checkpoints,
                disturbed: disturbed && repeat == 0,
                ..Run::default()
            })
            .collect();
        ConfigResult {
            workload: workload.into(),
            protection: mode.into(),
            data_bytes: 20 << 20,
            settings,
            runs,
            ..ConfigResult::default()
        }
    }

    #[test]
    fn the_regime_says_pool_data_cycle_and_device() {
        let rs = [
            result("w", "full_pages", 9, false),
            result("w", "off", 3, false),
        ];
        let line = regime_line(&rs).unwrap();
        assert!(
            line.contains("Regime: data 20.0 MB, buffer pool 5.0 MB"),
            "{line}"
        );
        assert!(line.contains("4.0x the pool"), "{line}");
        assert!(
            line.contains("a checkpoint every 3 s or 33.7 MB of WAL (max_wal_size 64.0 MB)"),
            "{line}"
        );
        // Two 9-s runs, with 9 checkpoints each, and with 3.
        assert!(
            line.contains("measured every 1.0 s (w full_pages) to 3.0 s (w off)"),
            "{line}"
        );
        assert!(line.contains("device real; runs of 9 s."), "{line}");
        assert_eq!(disturbed_warning(&rs), None);
    }

    #[test]
    fn disturbed_runs_are_warned_of() {
        let rs = [result("w", "off", 3, true)];
        let w = disturbed_warning(&rs).unwrap();
        assert!(w.starts_with("Warning: 1 of 2 runs were disturbed"), "{w}");
    }
}
