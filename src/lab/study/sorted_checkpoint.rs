//! Seed 001 (shared/seeds/001_f041816107ab1430.txt, ITAGAKI Takahiro on
//! pgsql-hackers, 2007-06-14): checkpoint writes sorted in block order
//! against buffer order, TPS and response times.

use super::{
    group, pct_cell, stand_in_label, stand_in_of, BenchConfig, Claim, Direction, Figure, Setup,
    Study, StudyPlan, Table, STAND_IN,
};
use crate::error::Result;
use crate::lab::report::fmt_tps;
use crate::lab::result::ConfigResult;

pub struct SortedCheckpoint;

/// Plan order: (sort off, sort on) on `real`, then on the second device.
const DEVICES: usize = 2;

fn at(device: usize, sorted: bool) -> usize {
    device * 2 + usize::from(sorted)
}

impl Study for SortedCheckpoint {
    fn name(&self) -> &'static str {
        "sorted-checkpoint"
    }

    fn seed_file(&self) -> &'static str {
        "001_f041816107ab1430.txt (ITAGAKI Takahiro, pgsql-hackers, 2007-06-14)"
    }

    fn summary(&self) -> &'static str {
        "Sorting a checkpoint's writes in block order raised pgbench from 187 to 224 tps \
         and cut DBT-2's response times (avg 0.83 to 0.36 s, 90 % 2.68 to 0.80 s). Here: \
         TPC-C (or tpcb) with checkpoint_sort off and on, on the machine's own disk and on the hdd \
         model."
    }

    fn seed_tables(&self) -> Vec<Table> {
        vec![Table::new(
            "Seed. 2GB-ram, SCSI*4 RAID-5; pgbench -s400 -t40000 -c10 (about 5GB of \
             database); DBT-2 60WH (about 6GB of database); 2007-06-14. (*) Don't write \
             buffers that were dirtied after starting the checkpoint.",
            &["tests", "pgbench", "DBT-2 response time (avg/90%/max)"],
        )
        .row(&["LDC only", "181 tps", "1.12 / 4.38 / 12.13 s"])
        .row(&[
            "+ BM_CHECKPOINT_NEEDED(*)",
            "187 tps",
            "0.83 / 2.68 /  9.26 s",
        ])
        .row(&["+ Sorted writes", "224 tps", "0.36 / 0.80 /  8.11 s"])]
    }

    fn plans(&self, setup: &Setup) -> Result<Vec<StudyPlan>> {
        let second = setup.device("hdd");
        let mut configs = Vec::new();
        for device in ["real", second.as_str()] {
            for checkpoint_sort in [false, true] {
                configs.push(BenchConfig {
                    checkpoint_sort,
                    ..setup.base(device)
                });
            }
        }
        Ok(vec![StudyPlan {
            title: format!(
                "{}, checkpoint_sort off/on, devices real and {second}",
                setup.stand_in
            ),
            plan: setup.plan(0, &[&setup.stand_in], configs, setup.stand_in_scale(2)?, 10),
        }])
    }

    fn our_tables(&self, results: &[Vec<ConfigResult>]) -> Vec<Table> {
        let Some(results) = results.first() else {
            return Vec::new();
        };
        let w = stand_in_of(results);
        let g = group(results, w);
        let mut t = Table::new(
            format!(
                "Here. {} for both columns: median TPS, the median run's response time; \
                 vs: sorted against unsorted with its 95 % interval",
                stand_in_label(w)
            ),
            &[
                "tests",
                w,
                &format!("{w} response time (avg/90%/max)"),
                "TPS vs unsorted",
            ],
        );
        for d in 0..DEVICES {
            for (sorted, name) in [(false, "+ BM_CHECKPOINT_NEEDED"), (true, "+ Sorted writes")] {
                let Some(r) = g.get(at(d, sorted)) else {
                    continue;
                };
                let vs = if sorted {
                    pct_cell(r.ratio_to(g[at(d, false)], |r| r.tps))
                } else {
                    "-".into()
                };
                let l = r.latency_ms;
                t.rows.push(vec![
                    format!("{name}, device {}", r.device),
                    format!("{} tps", fmt_tps(r.tps)),
                    format!("{:.2} / {:.2} / {:.2} ms", l.avg, l.p90, l.max),
                    vs,
                ]);
            }
        }
        vec![t]
    }

    fn claims(&self) -> Vec<Claim> {
        let mut out = Vec::new();
        for d in 0..DEVICES {
            let device = if d == 0 { "real" } else { "second device" };
            for (figure, direction, seed) in [
                (Figure::Tps, Direction::Higher, 224.0 / 187.0),
                (Figure::LatencyAvg, Direction::Lower, 0.36 / 0.83),
                (Figure::LatencyP90, Direction::Lower, 0.80 / 2.68),
                (Figure::LatencyMax, Direction::Lower, 8.11 / 9.26),
            ] {
                out.push(Claim {
                    ratio: format!("sorted/unsorted {}", figure.name()),
                    context: device.into(),
                    direction,
                    seed: Some(seed),
                    plan: 0,
                    workload: STAND_IN.into(),
                    a: at(d, true),
                    b: at(d, false),
                    figure,
                });
            }
        }
        out
    }

    fn notes(&self) -> Vec<&'static str> {
        vec![
            "The seed's \"LDC only\" row is left out: this engine's checkpointer always \
             writes only the pages dirty when it started (PostgreSQL's BM_CHECKPOINT_NEEDED, \
             src/buffer/pool_io.rs mark_for_checkpoint) and has no setting to write the \
             others too.",
            "TPC-C (tpcc) stands in for DBT-2 by default and tpcb (--workload tpcb) for \
             pgbench: the response times are of the whole mix (TPC-C's per type are in the \
             bench report), in milliseconds, from the run with the median TPS; their ratios \
             are paired by round.",
            "checkpoint_sort off writes in buffer order, one page per write; on writes in \
             (file, block) order, consecutive blocks as one write.",
            "The second device is hdd unless --device names another; the device models slow \
             writes and fsyncs, not reads.",
        ]
    }
}
