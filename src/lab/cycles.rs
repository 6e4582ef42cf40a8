//! Checkpoint cycles folded onto one: each 100 ms sample of a run placed
//! at its time since the checkpoint before it started, as a fraction of
//! that cycle (from one checkpoint's start to the next one's). Over many
//! cycles and runs the ramp-up, spike and trough Simon Riggs described
//! (seed 004) show as the shape of the median, where per-run averages
//! hide them.

use crate::lab::result::{ConfigResult, FineSample};

/// The samples of `series` inside a complete checkpoint cycle, each with
/// its fraction of the cycle (0 at the checkpoint's start, below 1).
/// Samples before the first start, and after the last one (whose cycle's
/// length is unknown), are dropped.
pub fn fold_cycles(series: &[FineSample]) -> Vec<(f64, FineSample)> {
    let starts: Vec<usize> = series
        .iter()
        .enumerate()
        .filter(|(_, s)| s.ckpt_start)
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    for w in starts.windows(2) {
        let (t0, t1) = (series[w[0]].ms, series[w[1]].ms);
        if t1 <= t0 {
            continue;
        }
        let len = f64::from(t1 - t0);
        for s in &series[w[0]..w[1]] {
            out.push((f64::from(s.ms - t0) / len, s.clone()));
        }
    }
    out
}

/// Every run's cycles of one configuration, excluded runs left out.
pub fn fold_config(r: &ConfigResult) -> Vec<(f64, FineSample)> {
    r.runs
        .iter()
        .filter(|run| !run.excluded)
        .flat_map(|run| fold_cycles(&run.fine_series))
        .collect()
}

/// The median of the y values of `points` (x in 0..1) in each of `bins`
/// equal bins, as (bin centre, median); empty bins are left out.
pub fn median_by_bin(points: &[(f64, f64)], bins: usize) -> Vec<(f64, f64)> {
    let bins = bins.max(1);
    let mut by_bin = vec![Vec::new(); bins];
    for &(x, y) in points {
        if x.is_finite() && y.is_finite() {
            let b = ((x * bins as f64) as usize).min(bins - 1);
            by_bin[b].push(y);
        }
    }
    by_bin
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(b, mut v)| {
            v.sort_by(|a, b| a.total_cmp(b));
            let n = v.len();
            let m = if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            };
            ((b as f64 + 0.5) / bins as f64, m)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(i: u32, start: bool) -> FineSample {
        FineSample {
            ms: i * 100,
            tps: i as f32,
            ckpt_start: start,
            ..Default::default()
        }
    }

    #[test]
    fn two_cycles_fold_to_their_fractions_and_the_rest_is_dropped() {
        // Checkpoints start at ticks 5, 15 and 27: a cycle of 1 s, one of
        // 1.2 s; ticks 0-4 come before any start, 27-29 after the last.
        let series: Vec<FineSample> = (0..30).map(|i| tick(i, [5, 15, 27].contains(&i))).collect();
        let folded = fold_cycles(&series);
        assert_eq!(folded.len(), 10 + 12);
        for (k, (x, s)) in folded[..10].iter().enumerate() {
            assert_eq!(s.ms, (5 + k as u32) * 100);
            assert!((x - k as f64 / 10.0).abs() < 1e-12, "{x} at {k}");
        }
        for (k, (x, s)) in folded[10..].iter().enumerate() {
            assert_eq!(s.ms, (15 + k as u32) * 100);
            assert!((x - k as f64 / 12.0).abs() < 1e-12, "{x} at {k}");
        }
        assert!(folded.iter().all(|(x, _)| (0.0..1.0).contains(x)));
        // One start only: no complete cycle.
        assert!(fold_cycles(&series[..20]).len() == 10);
        assert!(fold_cycles(&series[..10]).is_empty());
    }

    /// A configuration of two runs with cycles of 1 s in which TPS dips
    /// for the first 300 ms.
    fn config(label: &str) -> ConfigResult {
        let run = |repeat| crate::lab::result::Run {
            repeat,
            fine_series: (0..40)
                .map(|i| FineSample {
                    ms: i * 100,
                    tps: if i % 10 < 3 { 500.0 } else { 1000.0 },
                    p99: if i % 10 < 3 { 20.0 } else { 4.0 },
                    ckpt_start: i % 10 == 0,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        ConfigResult {
            workload: "w".into(),
            protection: label.into(),
            runs: vec![run(0), run(1)],
            ..Default::default()
        }
    }

    #[test]
    fn the_fold_shows_the_dip_and_is_drawn_into_the_report() {
        let r = config("off");
        let pts: Vec<(f64, f64)> = fold_config(&r)
            .iter()
            .map(|(x, s)| (*x, f64::from(s.tps)))
            .collect();
        assert_eq!(pts.len(), 2 * 30);
        let m = median_by_bin(&pts, 10);
        let dip: Vec<f64> = m.iter().map(|p| p.1).collect();
        assert_eq!(
            dip,
            [500.0, 500.0, 500.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0, 1000.0]
        );

        let dir = tempfile::tempdir().unwrap();
        let f = crate::lab::plot::plot_fold(dir.path(), "s", "w", ("off", 1), &r)
            .unwrap()
            .unwrap();
        let svg = std::fs::read_to_string(&f.svg).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("6 checkpoint cycles"),
            "{svg}"
        );
        assert!(std::fs::metadata(&f.png).unwrap().len() > 0);
        // Without a complete cycle there is nothing to draw.
        let mut none = config("x");
        none.runs
            .iter_mut()
            .for_each(|run| run.fine_series.truncate(10));
        assert!(
            crate::lab::plot::plot_fold(dir.path(), "n", "w", ("x", 0), &none)
                .unwrap()
                .is_none()
        );

        let out = dir.path().join("report");
        let index =
            crate::lab::report::write_report(&out, &[r, config("full_pages")], "t", "c", "m")
                .unwrap();
        let html = std::fs::read_to_string(index).unwrap();
        assert!(html.contains("Checkpoint cycles folded"));
        for label in ["off", "full_pages"] {
            let name = format!("01_w_{label}_cycle.svg");
            assert!(html.contains(&name), "no {name}");
            assert!(out.join(&name).exists());
        }
    }

    #[test]
    fn medians_per_bin_skip_empty_bins() {
        let pts = [
            (0.05, 1.0),
            (0.01, 3.0),
            (0.09, 2.0),
            (0.55, 7.0),
            (1.0, 9.0),
        ];
        let m = median_by_bin(&pts, 10);
        assert_eq!(m, vec![(0.05, 2.0), (0.55, 7.0), (0.95, 9.0)]);
        assert_eq!(
            median_by_bin(&[(0.2, 1.0), (0.3, 4.0)], 1),
            vec![(0.5, 2.5)]
        );
    }
}
