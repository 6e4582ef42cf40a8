//! Which runs were disturbed: the noise monitor's reports ([`noise`])
//! judged over a whole bench (each probe against the median of all), the
//! disturbed runs kept or left out of the figures, and one line per
//! workload saying so. Apart from the monitor so that the monitor needs
//! nothing of the results it describes.

use crate::lab::noise::{NoiseReport, NoiseRule};
use crate::lab::result::ConfigResult;

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Sets every run's probe ratios (over the median of all the bench's
/// probes), its reasons and `disturbed` by `rule`. Idempotent, so an
/// adaptive loop may call it after each round.
pub fn judge(results: &mut [ConfigResult], rule: &NoiseRule) {
    let reports = || {
        results
            .iter()
            .flat_map(|r| &r.runs)
            .filter_map(|r| r.noise.as_ref())
    };
    let copy = median(reports().filter_map(|n| n.probe_copy_ms).collect());
    let fsync = median(reports().filter_map(|n| n.probe_fsync_ms).collect());
    let ratio = |x: Option<f64>, m: Option<f64>| match (x, m) {
        (Some(x), Some(m)) if m > 0.0 => Some(x / m),
        _ => None,
    };
    for run in results.iter_mut().flat_map(|r| r.runs.iter_mut()) {
        let Some(n) = run.noise.as_mut() else {
            run.disturbed = false;
            continue;
        };
        n.probe_copy_ratio = ratio(n.probe_copy_ms, copy);
        n.probe_fsync_ratio = ratio(n.probe_fsync_ms, fsync);
        n.reasons = rule.reasons(n);
        run.disturbed = !n.reasons.is_empty();
    }
}

/// Judges every run ([`judge`] with the default rule) and, with `drop`,
/// leaves the disturbed ones out of every figure (`excluded`); the
/// summaries are computed again.
pub fn mark_excluded(results: &mut [ConfigResult], drop: bool) {
    judge(results, &NoiseRule::DEFAULT);
    for r in results.iter_mut() {
        for run in &mut r.runs {
            run.excluded = drop && run.disturbed;
        }
        r.summarize();
    }
}

/// One line per workload after the table: how many runs were disturbed,
/// the mean load of other processes and steal over all its runs, and
/// whether they were excluded. `None` for a workload without a monitor.
pub fn summary_lines(results: &[ConfigResult], dropped: bool) -> Vec<String> {
    let mut workloads: Vec<&str> = results.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    let mut out = Vec::new();
    for w in workloads {
        let runs: Vec<_> = results
            .iter()
            .filter(|r| r.workload == w)
            .flat_map(|r| &r.runs)
            .collect();
        let reports: Vec<&NoiseReport> = runs.iter().filter_map(|r| r.noise.as_ref()).collect();
        if reports.is_empty() {
            continue;
        }
        let mean = |f: fn(&NoiseReport) -> f64| {
            reports.iter().map(|n| f(n)).sum::<f64>() / reports.len() as f64
        };
        let disturbed = runs.iter().filter(|r| r.disturbed).count();
        let verdict = if disturbed == 0 {
            ""
        } else if dropped {
            ", excluded"
        } else {
            ", kept (use --drop-disturbed)"
        };
        out.push(format!(
            "{w}: {disturbed} of {} runs disturbed (other processes {:.2} cores, steal {:.1} %){verdict}",
            runs.len(),
            mean(|n| n.other_cores),
            mean(|n| n.steal_pct),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::result::Run;

    fn report(other: f64, steal: f64, copy: f64, fsync: f64) -> NoiseReport {
        NoiseReport {
            other_cores: other,
            steal_pct: steal,
            probe_copy_ms: Some(copy),
            probe_fsync_ms: Some(fsync),
            ..Default::default()
        }
    }

    /// One workload, two configurations of `n` runs with these reports.
    fn results(reports: Vec<Option<NoiseReport>>) -> Vec<ConfigResult> {
        let runs: Vec<Run> = reports
            .into_iter()
            .enumerate()
            .map(|(i, noise)| Run {
                repeat: i / 2,
                tps: 100.0 + i as f64,
                transactions: 100,
                noise,
                ..Default::default()
            })
            .collect();
        let (a, b): (Vec<_>, Vec<_>) = runs.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
        let config = |name: &str, runs: Vec<(usize, Run)>| ConfigResult {
            workload: "w".into(),
            protection: name.into(),
            runs: runs.into_iter().map(|(_, r)| r).collect(),
            ..Default::default()
        };
        vec![config("a", a), config("b", b)]
    }

    #[test]
    fn the_rule_flags_each_kind_of_disturbance_and_nothing_else() {
        let quiet = Some(report(0.05, 0.0, 10.0, 20.0));
        let mut r = results(vec![
            quiet.clone(),
            quiet.clone(),
            Some(report(0.6, 0.0, 10.0, 20.0)),
            Some(report(0.05, 8.0, 10.0, 20.0)),
            Some(report(0.05, 0.0, 16.0, 20.0)),
            Some(report(0.05, 0.0, 10.0, 61.0)),
            quiet.clone(),
            None,
        ]);
        judge(&mut r, &NoiseRule::DEFAULT);
        let flags: Vec<bool> = (0..8).map(|i| r[i % 2].runs[i / 2].disturbed).collect();
        assert_eq!(flags, [false, false, true, true, true, true, false, false]);
        let why = |i: usize| {
            r[i % 2].runs[i / 2]
                .noise
                .as_ref()
                .unwrap()
                .reasons
                .join("; ")
        };
        assert!(why(2).contains("other processes 0.60 cores"), "{}", why(2));
        assert!(why(3).contains("steal 8.0 %"), "{}", why(3));
        assert!(why(4).contains("memory probe 1.6x"), "{}", why(4));
        assert!(why(5).contains("fsync probe 3.0x"), "{}", why(5));
        // The median over the 7 probes is 10 ms and 20 ms.
        let n = r[0].runs[0].noise.as_ref().unwrap();
        assert_eq!(
            (n.probe_copy_ratio, n.probe_fsync_ratio),
            (Some(1.0), Some(1.0))
        );
        // Judging again gives the same.
        let again = r.clone();
        judge(&mut r, &NoiseRule::DEFAULT);
        assert_eq!(r, again);
    }

    #[test]
    fn dropping_disturbed_runs_excludes_them_and_says_so() {
        let quiet = Some(report(0.05, 0.0, 10.0, 20.0));
        let busy = Some(report(0.7, 0.0, 10.0, 20.0));
        let all = vec![
            quiet.clone(),
            quiet.clone(),
            busy,
            quiet.clone(),
            quiet.clone(),
            quiet,
        ];
        let mut kept = results(all.clone());
        mark_excluded(&mut kept, false);
        assert!(kept[0].runs[1].disturbed && !kept[0].runs[1].excluded);
        assert_eq!(kept[0].tps_runs.len(), 3);
        let line = summary_lines(&kept, false).join("\n");
        assert!(
            line.starts_with("w: 1 of 6 runs disturbed (other processes 0.16 cores, steal 0.0 %)"),
            "{line}"
        );
        assert!(line.ends_with("kept (use --drop-disturbed)"), "{line}");

        let mut dropped = results(all);
        mark_excluded(&mut dropped, true);
        let excluded: Vec<bool> = dropped
            .iter()
            .flat_map(|r| &r.runs)
            .map(|r| r.excluded)
            .collect();
        assert_eq!(excluded, [false, true, false, false, false, false]);
        assert!(summary_lines(&dropped, true)[0]
            .ends_with("disturbed (other processes 0.16 cores, steal 0.0 %), excluded"));
        // Without a monitor nothing is disturbed and nothing is said.
        let mut none = results(vec![None, None]);
        mark_excluded(&mut none, true);
        assert!(none
            .iter()
            .flat_map(|r| &r.runs)
            .all(|r| !r.disturbed && !r.excluded));
        assert!(summary_lines(&none, true).is_empty());
    }
}
