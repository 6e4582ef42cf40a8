//! Seed 000 (shared/seeds/000_71dc03739560fb17.txt, Dan Scales on
//! pgsql-hackers, 2012-01-17): double writes against full-page writes with
//! checksums, a large and a small buffer pool, disks with and without a
//! write cache. The seed ran DBT-2; TPC-C (or tpcb) stands in for it here.

use super::{
    data_bytes, group, pct_cell, stand_in_label, stand_in_of, tps_ratio, BenchConfig, Claim,
    Direction, Figure, Setup, Study, StudyPlan, Table, STAND_IN,
};
use crate::error::Result;
use crate::lab::report::fmt_tps;
use crate::lab::result::ConfigResult;
use crate::settings::{ChecksumAlgorithm as K, TornPageProtection as P};

pub struct DwEvictionCliff;

/// Plan order. Large pool on the main device (hdd-bbwc): FPW off CK off,
/// FPW off CK on, FPW on, DW; large pool on hdd: off, FPW, DW; small pool
/// on the main device: off, FPW, DW. Checksums on except the first.
const BBWC: [usize; 4] = [0, 1, 2, 3];
const HDD: [usize; 3] = [4, 5, 6];
const SMALL: [usize; 3] = [7, 8, 9];

const SEED_1: &str = "Seed 1. 50-warehouse 2-processor DBT-2, 60 minutes, checkpoints every \
    5 minutes, 9.2 with and without the DW patch; 8G RAM, 5G cache, database about 9G, \
    enterprise Fibre Channel disks with write caching at the array, virtual machines \
    (2012-01-17)";
const SEED_2: &str = "Seed 2. Hard disk with write cache turned off; 50-warehouse \
    8-processor DBT-2, 60 minutes, checkpoints every 5 minutes, 8G RAM, 6G cache (2012-01-17)";
const SEED_3: &str = "Seed 3. The first hardware with much smaller shared_buffers (1G); \
    50-warehouse 2-processor DBT-2, 60 minutes, checkpoints every 5 minutes (2012-01-17)";

impl Study for DwEvictionCliff {
    fn name(&self) -> &'static str {
        "dw-eviction-cliff"
    }

    fn seed_file(&self) -> &'static str {
        "000_71dc03739560fb17.txt (Dan Scales, pgsql-hackers, 2012-01-17)"
    }

    fn summary(&self) -> &'static str {
        "With a large cache and a write-caching array double writes tie with full-page \
         writes; on a disk without a write cache they win; with a small buffer pool they \
         fall off a cliff (3,296 against 10,394) because clients double-write single dirty \
         victims. Here: TPC-C (or tpcb) with a large and a small buffer pool, on hdd-bbwc and \
         hdd."
    }

    fn seed_tables(&self) -> Vec<Table> {
        vec![
            Table::new(
                SEED_1,
                &[
                    "",
                    "orig 9.2 FPW off CK off",
                    "9.2+DW FPW off CK off",
                    "FPW off CK on",
                    "FPW on CK on",
                    "DW on/FPW off CK on",
                ],
            )
            .row(&[
                "one disk [5G shared_buffer, 8G RAM]",
                "15574",
                "15308",
                "15135",
                "13337",
                "13052",
            ])
            .row(&["sep log disk", "18739", "18134", "18063", "15823", "16033"]),
            Table::new(
                SEED_2,
                &["", "FPW off CK on", "FPW on CK on", "DW on/FPW off CK on"],
            )
            .row(&[
                "one disk [6G shared_buffers, 8G RAM]",
                "12084",
                "7849",
                "9766",
            ]),
            Table::new(
                SEED_3,
                &["", "FPW off CK on", "FPW on CK on", "DW on/FPW off CK on"],
            )
            .row(&[
                "one disk [1G shared_buffers, 8G RAM]",
                "11078",
                "10394",
                "3296",
            ])
            .row(&["sep log disk", "13605", "12015", "3412"])
            .row(&[
                "one disk [1G shared_buffers, 2G RAM]",
                "7731",
                "6613",
                "2670",
            ])
            .row(&["sep log disk", "6752", "6129", "2722"]),
        ]
    }

    fn plans(&self, setup: &Setup) -> Result<Vec<StudyPlan>> {
        let main = setup.device("hdd-bbwc");
        let w = setup.stand_in.as_str();
        let scale = setup.stand_in_scale(2)?;
        let data = data_bytes(w, &scale)?;
        // Large: the data and its page overhead fit; small: a ninth of the
        // data, the seed's 1G of 9G.
        let (large, small) = (Some(data * 3), Some(data / 9));
        let c = |protection, data_checksums, buffer_pool, device: &str| BenchConfig {
            protection,
            data_checksums,
            buffer_pool,
            ..setup.base(device)
        };
        let configs = vec![
            c(P::Off, K::Off, large, &main),
            c(P::Off, K::Crc32c, large, &main),
            c(P::FullPages, K::Crc32c, large, &main),
            c(P::DoubleWrites, K::Crc32c, large, &main),
            c(P::Off, K::Crc32c, large, "hdd"),
            c(P::FullPages, K::Crc32c, large, "hdd"),
            c(P::DoubleWrites, K::Crc32c, large, "hdd"),
            c(P::Off, K::Crc32c, small, &main),
            c(P::FullPages, K::Crc32c, small, &main),
            c(P::DoubleWrites, K::Crc32c, small, &main),
        ];
        Ok(vec![StudyPlan {
            title: format!("{w}, large and small buffer pool, {main} and hdd"),
            plan: setup.plan(0, &[w], configs, scale, 8),
        }])
    }

    fn our_tables(&self, results: &[Vec<ConfigResult>]) -> Vec<Table> {
        let Some(results) = results.first() else {
            return Vec::new();
        };
        let w = stand_in_label(stand_in_of(results));
        let g = group(results, stand_in_of(results));
        let tps = |i: usize| g.get(i).map_or("-".to_string(), |r| fmt_tps(r.tps));
        let device = |i: usize| g.get(i).map_or("-".to_string(), |r| r.device.clone());
        let pool = |i: usize| {
            g.get(i)
                .and_then(|r| r.settings.get("buffer_pool_size"))
                .and_then(|s| s.parse::<u64>().ok())
                .map_or("-".to_string(), |b| {
                    format!("{:.1} MB pool", b as f64 / 1e6)
                })
        };
        let dw_vs_fpw = |dw: usize, fpw: usize| pct_cell(tps_ratio(&g, dw, fpw));
        let three = |idx: [usize; 3], caption: String| {
            Table::new(
                caption,
                &[
                    "",
                    "FPW off CK on",
                    "FPW on CK on",
                    "DW on/FPW off CK on",
                    "DW vs FPW",
                ],
            )
            .row(&[
                &format!("one disk [{}]", pool(idx[0])),
                &tps(idx[0]),
                &tps(idx[1]),
                &tps(idx[2]),
                &dw_vs_fpw(idx[2], idx[1]),
            ])
        };
        vec![
            Table::new(
                format!(
                    "Here 1. {w}, large buffer pool, device {} (median TPS)",
                    device(BBWC[0])
                ),
                &[
                    "",
                    "FPW off CK off",
                    "FPW off CK on",
                    "FPW on CK on",
                    "DW on/FPW off CK on",
                    "DW vs FPW",
                ],
            )
            .row(&[
                &format!("one disk [{}]", pool(BBWC[0])),
                &tps(BBWC[0]),
                &tps(BBWC[1]),
                &tps(BBWC[2]),
                &tps(BBWC[3]),
                &dw_vs_fpw(BBWC[3], BBWC[2]),
            ]),
            three(
                HDD,
                format!(
                    "Here 2. {w}, large buffer pool, device {} (no write cache)",
                    device(HDD[0])
                ),
            ),
            three(
                SMALL,
                format!(
                    "Here 3. {w}, small buffer pool (a ninth of the data), device {}",
                    device(SMALL[0])
                ),
            ),
        ]
    }

    fn claims(&self) -> Vec<Claim> {
        let claim = |ratio: &str, context: &str, direction, seed: f64, a, b| Claim {
            ratio: ratio.into(),
            context: context.into(),
            direction,
            seed: Some(seed),
            plan: 0,
            workload: STAND_IN.into(),
            a,
            b,
            figure: Figure::Tps,
        };
        vec![
            claim(
                "DW/FPW TPS",
                "large pool, write cache: about the same",
                Direction::About(0.05),
                13052.0 / 13337.0,
                BBWC[3],
                BBWC[2],
            ),
            claim(
                "CK on/CK off TPS",
                "FPW off, large pool: checksums cost little",
                Direction::About(0.05),
                15135.0 / 15308.0,
                BBWC[1],
                BBWC[0],
            ),
            claim(
                "DW/FPW TPS",
                "large pool, no write cache: DW wins",
                Direction::Higher,
                9766.0 / 7849.0,
                HDD[2],
                HDD[1],
            ),
            claim(
                "FPW off/FPW on TPS",
                "large pool, no write cache",
                Direction::Higher,
                12084.0 / 7849.0,
                HDD[0],
                HDD[1],
            ),
            claim(
                "DW/FPW TPS",
                "small pool: the eviction cliff",
                Direction::Lower,
                3296.0 / 10394.0,
                SMALL[2],
                SMALL[1],
            ),
            claim(
                "FPW off/FPW on TPS",
                "small pool",
                Direction::Higher,
                11078.0 / 10394.0,
                SMALL[0],
                SMALL[1],
            ),
            claim(
                "DW small pool/DW large pool TPS",
                "the cliff, one disk",
                Direction::Lower,
                3296.0 / 13052.0,
                SMALL[2],
                BBWC[3],
            ),
        ]
    }

    fn notes(&self) -> Vec<&'static str> {
        vec![
            "TPC-C (tpcc, src/lab/workload/tpcc; what differs from DBT-2 is in \
             docs/BENCHMARKS.md) stands in for DBT-2 by default, scaled down in the quick \
             run; --workload tpcb runs pgbench's transaction instead. The seed's figure is \
             notpm, ours TPS of the whole mix (New-Orders are 45 % of it).",
            "Left out: the seed's \"orig 9.2\" column (there is no build without double \
             writes to compare) and every \"sep log disk\" row (the device models put WAL \
             and data on one device).",
            "The seed's 2G-RAM rows are left out: the OS cache is the machine's, not a \
             setting.",
            "Large pool: three times the loaded rows (all pages fit); small pool: a ninth \
             of them (the seed's 1G of 9G), at least 256 pages.",
            "The seed's double writes fsynced per client victim; this engine's clients write \
             batches of double_write_eviction_pages, so the cliff may be smaller here by \
             design.",
        ]
    }
}
