//! Seed 004 (shared/seeds/004_40a8c145fd2bd15a.txt, Mark Wong, Greg Stark,
//! Tom Lane, Simon Riggs on pgsql-hackers, 2009-05): WAL block sizes from
//! 1 to 64 KB, the dip at 8 KB, and the thread's hypotheses about it.

use super::{
    group, pct_cell, stand_in_label, stand_in_of, tps_ratio, BenchConfig, Claim, Direction, Figure,
    Setup, Study, StudyPlan, Table, STAND_IN,
};
use crate::error::Result;
use crate::lab::cycles::{fold_config, median_by_bin};
use crate::lab::report::fmt_tps;
use crate::lab::result::ConfigResult;
use crate::settings::TornPageProtection as P;

pub struct WalBlockSize;

/// Plan 0: the WAL block sizes in KB; the default is at `DEFAULT`.
const BLOCKS_KB: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];
const DEFAULT: usize = 3;
/// Plan 1: page size x protection x WAL block size.
const GRID_PAGES_KB: [u32; 2] = [4, 8];
const GRID_PROTECTION: [P; 2] = [P::FullPages, P::Off];
const GRID_BLOCKS_KB: [u32; 4] = [4, 8, 16, 32];

fn grid_at(page: usize, protection: usize, block: usize) -> usize {
    (page * GRID_PROTECTION.len() + protection) * GRID_BLOCKS_KB.len() + block
}

/// Phases of the checkpoint cycle, as fractions of it from a
/// checkpoint's start: Simon Riggs' four, with fixed bounds.
const PHASES: [(&str, f64, f64); 4] = [
    ("checkpoint spike (0-10 %)", 0.0, 0.1),
    ("post-checkpoint trough (10-30 %)", 0.1, 0.3),
    ("normal running (30-80 %)", 0.3, 0.8),
    ("ramp-up (80-100 %)", 0.8, 1.0),
];

/// Median TPS of a configuration's folded checkpoint cycles in each phase
/// (`None` where no sample fell in it, or no cycle completed).
pub fn phase_medians(r: &ConfigResult) -> [Option<f64>; 4] {
    let folded = fold_config(r);
    PHASES.map(|(_, lo, hi)| {
        let pts: Vec<(f64, f64)> = folded
            .iter()
            .filter(|(x, _)| *x >= lo && *x < hi)
            .map(|(_, s)| (0.5, f64::from(s.tps)))
            .collect();
        median_by_bin(&pts, 1).first().map(|p| p.1)
    })
}

/// The seed's rerun, as Mark Wong posted it (BS, notpm, change).
const SEED: [(&str, &str, &str); 7] = [
    ("1", "14673", "-5.1%"),
    ("2", "15864", "2.7%"),
    ("4", "15774", "2.1%"),
    ("8", "15454", "(default)"),
    ("16", "16118", "4.3%"),
    ("32", "16051", "3.9%"),
    ("64", "14874", "-3.8%"),
];

impl Study for WalBlockSize {
    fn name(&self) -> &'static str {
        "wal-block-size"
    }

    fn seed_file(&self) -> &'static str {
        "004_40a8c145fd2bd15a.txt (Mark Wong et al., pgsql-hackers, 2009-05-27)"
    }

    fn summary(&self) -> &'static str {
        "DBT-2 throughput dipped at the default 8 KB WAL block with both smaller and \
         larger blocks faster. Here: TPC-C (or tpcb) at WAL blocks of 1 to 64 KB with each checkpoint \
         cycle's phases, and Greg Stark's and Simon Riggs' hypotheses tested on a page size \
         x WAL block size grid with full_pages on and off."
    }

    fn seed_tables(&self) -> Vec<Table> {
        let mut t = Table::new(
            "Seed. DBT-2, PostgreSQL 8.4beta2 on ext2, WAL block size 1 KB to 64 KB with \
             the table block size at 8 KB; Mark Wong's rerun of the 8 KB baseline, \
             2009-05-27",
            &["BS", "notpm", "% Change from default"],
        );
        for (bs, notpm, change) in SEED {
            t = t.row(&[bs, notpm, change]);
        }
        vec![t]
    }

    fn plans(&self, setup: &Setup) -> Result<Vec<StudyPlan>> {
        let device = setup.device("real");
        let w = setup.stand_in.as_str();
        let scale = setup.stand_in_scale(2)?;
        let blocks = BLOCKS_KB
            .iter()
            .map(|kb| BenchConfig {
                wal_block_size: kb << 10,
                ..setup.base(&device)
            })
            .collect();
        let mut grid = Vec::new();
        for page in GRID_PAGES_KB {
            for protection in GRID_PROTECTION {
                for block in GRID_BLOCKS_KB {
                    grid.push(BenchConfig {
                        page_size: page << 10,
                        protection,
                        wal_block_size: block << 10,
                        ..setup.base(&device)
                    });
                }
            }
        }
        Ok(vec![
            StudyPlan {
                title: format!("{w}, WAL block size 1 to 64 KB, device {device}"),
                plan: setup.plan(0, &[w], blocks, scale, 8),
            },
            StudyPlan {
                // tpcb always: a TPC-C customer row (667 bytes) is over
                // the value limit of the grid's 4 KB pages (624).
                title: format!(
                    "tpcb, page size x WAL block size x full_pages on/off, device {device}"
                ),
                plan: setup.plan(1, &["tpcb"], grid, setup.size.tpcb(2), 8),
            },
        ])
    }

    fn our_tables(&self, results: &[Vec<ConfigResult>]) -> Vec<Table> {
        let mut out = Vec::new();
        if let Some(r) = results.first() {
            let g = group(r, stand_in_of(r));
            let mut t = Table::new(
                format!(
                    "Here 1. {}, page size 8 KB, full_pages: median TPS and the change from \
                     8 KB with its 95 % interval",
                    stand_in_label(stand_in_of(r))
                ),
                &["BS", "TPS", "% Change from default"],
            );
            let mut phases = Table::new(
                "Here 2. The checkpoint cycle by phase: median TPS of the 100 ms samples of \
                 every completed cycle, folded (phases by fixed shares of the cycle)",
                &["BS"],
            );
            phases
                .headers
                .extend(PHASES.iter().map(|p| p.0.to_string()));
            for (i, kb) in BLOCKS_KB.iter().enumerate() {
                let Some(c) = g.get(i) else { continue };
                let change = if i == DEFAULT {
                    "(default)".to_string()
                } else {
                    pct_cell(tps_ratio(&g, i, DEFAULT))
                };
                t.rows.push(vec![kb.to_string(), fmt_tps(c.tps), change]);
                let mut row = vec![kb.to_string()];
                row.extend(
                    phase_medians(c)
                        .iter()
                        .map(|m| m.map_or("-".to_string(), fmt_tps)),
                );
                phases.rows.push(row);
            }
            out.push(t);
            out.push(phases);
        }
        if let Some(r) = results.get(1) {
            let g = group(r, "tpcb");
            let mut t = Table::new(
                "Here 3. Page size x WAL block size, full_pages on and off: median TPS, and \
                 each against a WAL block the size of the page",
                &["page", "protection"],
            );
            t.headers
                .extend(GRID_BLOCKS_KB.iter().map(|kb| format!("WAL {kb} KB")));
            for (p, page) in GRID_PAGES_KB.iter().enumerate() {
                for (q, protection) in GRID_PROTECTION.iter().enumerate() {
                    let same = GRID_BLOCKS_KB.iter().position(|b| b == page);
                    let mut row = vec![format!("{page} KB"), protection.to_string()];
                    for b in 0..GRID_BLOCKS_KB.len() {
                        let i = grid_at(p, q, b);
                        let cell = match (g.get(i), same) {
                            (Some(c), Some(s)) if s != b => format!(
                                "{} ({})",
                                fmt_tps(c.tps),
                                pct_cell(tps_ratio(&g, i, grid_at(p, q, s)))
                            ),
                            (Some(c), _) => fmt_tps(c.tps),
                            (None, _) => "-".into(),
                        };
                        row.push(cell);
                    }
                    t.rows.push(row);
                }
            }
            out.push(t);
        }
        out
    }

    fn claims(&self) -> Vec<Claim> {
        let notpm = |i: usize| SEED[i].1.parse::<f64>().unwrap_or(f64::NAN);
        let mut out: Vec<Claim> = (0..BLOCKS_KB.len())
            .filter(|&i| i != DEFAULT)
            .map(|i| {
                let seed = notpm(i) / notpm(DEFAULT);
                Claim {
                    ratio: format!("WAL {} KB/8 KB TPS", BLOCKS_KB[i]),
                    context: "page 8 KB, full_pages".into(),
                    direction: if seed > 1.0 {
                        Direction::Higher
                    } else {
                        Direction::Lower
                    },
                    seed: Some(seed),
                    plan: 0,
                    workload: STAND_IN.into(),
                    a: i,
                    b: DEFAULT,
                    figure: Figure::Tps,
                }
            })
            .collect();
        let hypothesis = |ratio: &str, context: &str, direction, a, b| Claim {
            ratio: ratio.into(),
            context: context.into(),
            direction,
            seed: None,
            plan: 1,
            workload: "tpcb".into(),
            a,
            b,
            figure: Figure::Tps,
        };
        // Grid indices: page (4, 8 KB), protection (full_pages, off),
        // block (4, 8, 16, 32 KB).
        out.extend([
            hypothesis(
                "WAL 16 KB/8 KB TPS",
                "Greg Stark: an 8 KB page's image spans two 8 KB blocks; page 8 KB, full_pages",
                Direction::Higher,
                grid_at(1, 0, 2),
                grid_at(1, 0, 1),
            ),
            hypothesis(
                "WAL 16 KB/8 KB TPS",
                "Greg Stark: without images the dip goes; page 8 KB, off",
                Direction::About(0.05),
                grid_at(1, 1, 2),
                grid_at(1, 1, 1),
            ),
            hypothesis(
                "WAL 8 KB/4 KB TPS",
                "Greg Stark: the same one size down; page 4 KB, full_pages",
                Direction::Higher,
                grid_at(0, 0, 1),
                grid_at(0, 0, 0),
            ),
            hypothesis(
                "WAL 4 KB/32 KB TPS",
                "Simon Riggs: small records favour ~4 KB blocks; page 8 KB, off",
                Direction::Higher,
                grid_at(1, 1, 0),
                grid_at(1, 1, 3),
            ),
            hypothesis(
                "WAL 32 KB/8 KB TPS",
                "Simon Riggs: images favour blocks 2-4x the page; page 8 KB, full_pages",
                Direction::Higher,
                grid_at(1, 0, 3),
                grid_at(1, 0, 1),
            ),
        ]);
        out
    }

    fn notes(&self) -> Vec<&'static str> {
        vec![
            "TPC-C (tpcc) stands in for DBT-2 by default, scaled down in the quick run; \
             --workload tpcb runs pgbench's transaction instead. The seed's figure is notpm \
             (new-order transactions per minute), ours TPS of the whole mix (New-Orders are \
             45 % of it, so the ratios are the same). The page x block grid runs tpcb \
             whatever --workload says: a TPC-C customer row (667 bytes) is over the value \
             limit of its 4 KB pages (624 bytes).",
            "The seed's table is Mark Wong's rerun (8 KB at 15454); his first run had 8 KB \
             at 15413.",
            "The phases are fixed shares of the folded cycle from a checkpoint's start, not \
             detected from the data; the checkpoint_timeout is a sixth of a run so that each \
             run holds several cycles. The tiny run is too short for complete cycles.",
            "The hypotheses carry no seed figure: the thread put them forward without \
             measuring them.",
        ]
    }
}
