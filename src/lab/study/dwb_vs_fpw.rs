//! Seed 003 (shared/seeds/003_fe54bfc892ea6bcf.txt, 陈宗志 on
//! pgsql-hackers, 2026-02-27): the double-write buffer against full-page
//! writes and no protection, sysbench, with wal_compression lz4 and off.

use super::{
    group, pct_cell, tps_ratio, Claim, Direction, Figure, Setup, Size, Study, StudyPlan, Table,
};
use crate::error::Result;
use crate::lab::report::{fmt_tps, thousands};
use crate::lab::result::ConfigResult;
use crate::settings::{TornPageProtection as P, WalCompression as C};

pub struct DwbVsFpw;

const WORKLOADS: [&str; 3] = [
    "oltp_write_only",
    "oltp_update_non_index",
    "oltp_read_write",
];

/// The configurations, in plan order: the three modes with lz4, then FPW
/// and DWB without compression (off writes no images to compress).
const FPW_LZ4: usize = 0;
const DWB_LZ4: usize = 1;
const OFF_LZ4: usize = 2;
const FPW: usize = 3;
const DWB: usize = 4;

/// The seed's TPS: (workload, FPW, DWB, OFF) with lz4, and FPW, DWB without.
const SEED_LZ4: [(&str, &str, &str, &str); 3] = [
    ("oltp_write_only", "13,772", "20,660", "38,588"),
    ("oltp_update_non_index", "59,427", "104,328", "139,870"),
    ("oltp_read_write", "6,232", "4,408", "6,845"),
];
const SEED_PLAIN: [(&str, &str, &str, &str); 3] = [
    ("oltp_write_only", "9,651", "22,111", "+129.1%"),
    ("oltp_update_non_index", "48,624", "98,356", "+102.3%"),
    ("oltp_read_write", "5,414", "5,275", "-2.6%"),
];
/// The seed's "vs FPW" and "vs OFF" cells of each lz4 table, by mode.
const SEED_LZ4_VS: [[(&str, &str); 3]; 3] = [
    [("-", "-64.3%"), ("+50.0%", "-46.5%"), ("+180.2%", "-")],
    [("-", "-57.5%"), ("+75.6%", "-25.4%"), ("+135.4%", "-")],
    [("-", "-9.0%"), ("-29.3%", "-35.6%"), ("+9.8%", "-")],
];

const HARDWARE: &str = "PostgreSQL 19devel with the DWB patch, Linux 5.10 x86_64, \
    shared_buffers 1GB, max_wal_size 32MB, double_write_buffer_size 128MB, \
    sysbench 1.1.0, 10 tables x 1,000,000 rows (~2.3GB), 16 threads, 60 s per run, \
    one run per mode; 2026-02-27";

fn seed_tps(text: &str) -> f64 {
    text.replace(',', "").parse().unwrap_or(f64::NAN)
}

impl Study for DwbVsFpw {
    fn name(&self) -> &'static str {
        "dwb-vs-fpw"
    }

    fn seed_file(&self) -> &'static str {
        "003_fe54bfc892ea6bcf.txt (陈宗志, pgsql-hackers, 2026-02-27)"
    }

    fn summary(&self) -> &'static str {
        "Double writes beat full-page writes by +50 to +76 % on write-heavy sysbench with \
         lz4 (+102 to +129 % without) and lose 29 % on oltp_read_write; lz4 helps FPW. \
         Here: the three workloads under full_pages, double_writes and off, wal_compression \
         lz4 and off, a buffer pool smaller than the data and a small max_wal_size."
    }

    fn seed_tables(&self) -> Vec<Table> {
        let mut out = Vec::new();
        for (n, ((w, fpw, dwb, off), vs)) in SEED_LZ4.iter().zip(SEED_LZ4_VS).enumerate() {
            let mut t = Table::new(
                format!("Seed {}. {w}, wal_compression = lz4 ({HARDWARE})", n + 1),
                &["Mode", "TPS", "vs FPW", "vs OFF"],
            );
            for (mode, tps, (a, b)) in [
                ("FPW", fpw, vs[0]),
                ("DWB", dwb, vs[1]),
                ("OFF", off, vs[2]),
            ] {
                t = t.row(&[mode, tps, a, b]);
            }
            out.push(t);
        }
        let mut t = Table::new(
            format!("Seed 4. Without wal_compression ({HARDWARE})"),
            &["Workload", "FPW", "DWB", "DWB vs FPW"],
        );
        for (w, fpw, dwb, vs) in SEED_PLAIN {
            t = t.row(&[w, fpw, dwb, vs]);
        }
        out.push(t);
        out.push(
            Table::new(
                format!("Seed 5. Double-write fsyncs, oltp_write_only ({HARDWARE})"),
                &["Mode", "DWB page writes", "DWB fsyncs", "pages per fsync"],
            )
            .row(&["DWB", "1,157,729", "148", "7,822 (derived)"]),
        );
        out
    }

    fn plans(&self, setup: &Setup) -> Result<Vec<StudyPlan>> {
        let device = setup.device("real");
        let base = super::BenchConfig {
            max_wal_size: if setup.size == Size::Full {
                32 << 20
            } else {
                16 << 20
            },
            ..setup.base(&device)
        };
        let config = |protection, wal_compression| super::BenchConfig {
            protection,
            wal_compression,
            ..base.clone()
        };
        let configs = vec![
            config(P::FullPages, C::Lz4),
            config(P::DoubleWrites, C::Lz4),
            config(P::Off, C::Lz4),
            config(P::FullPages, C::Off),
            config(P::DoubleWrites, C::Off),
        ];
        Ok(vec![StudyPlan {
            title: format!("sysbench, three modes x wal_compression lz4/off, device {device}"),
            plan: setup.plan(0, &WORKLOADS, configs, setup.size.sysbench(), 8),
        }])
    }

    fn our_tables(&self, results: &[Vec<ConfigResult>]) -> Vec<Table> {
        let Some(results) = results.first() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (n, w) in WORKLOADS.iter().enumerate() {
            let g = group(results, w);
            let mut t = Table::new(
                format!(
                    "Here {}. {w}, wal_compression = lz4 (median TPS; vs: ratio of TPS \
                     paired by round as a change, with its 95 % interval)",
                    n + 1
                ),
                &["Mode", "TPS", "vs FPW", "vs OFF"],
            );
            for (mode, i) in [("FPW", FPW_LZ4), ("DWB", DWB_LZ4), ("OFF", OFF_LZ4)] {
                let tps = g.get(i).map_or("-".into(), |r| fmt_tps(r.tps));
                let vs = |j| {
                    if i == j {
                        "-".to_string()
                    } else {
                        pct_cell(tps_ratio(&g, i, j))
                    }
                };
                t.rows
                    .push(vec![mode.into(), tps, vs(FPW_LZ4), vs(OFF_LZ4)]);
            }
            out.push(t);
        }
        let mut t = Table::new(
            "Here 4. Without wal_compression",
            &["Workload", "FPW", "DWB", "DWB vs FPW"],
        );
        for w in WORKLOADS {
            let g = group(results, w);
            let tps = |i: usize| g.get(i).map_or("-".into(), |r| fmt_tps(r.tps));
            t.rows.push(vec![
                w.into(),
                tps(FPW),
                tps(DWB),
                pct_cell(tps_ratio(&g, DWB, FPW)),
            ]);
        }
        out.push(t);
        let mut t = Table::new(
            "Here 5. Double-write fsyncs (all rounds), by workload and wal_compression",
            &[
                "Workload",
                "DWB page writes",
                "DWB fsyncs",
                "checkpointer pages per fsync",
                "client pages per fsync",
            ],
        );
        for w in WORKLOADS {
            let g = group(results, w);
            for (i, c) in [(DWB_LZ4, "lz4"), (DWB, "off")] {
                if let Some(r) = g.get(i) {
                    t.rows.push(vec![
                        format!("{w}, {c}"),
                        thousands(r.dw_page_writes as f64),
                        thousands(r.dw_fsyncs as f64),
                        thousands(r.dw_checkpoint_pages_per_fsync),
                        format!("{:.1}", r.dw_client_pages_per_fsync),
                    ]);
                }
            }
        }
        out.push(t);
        out
    }

    fn claims(&self) -> Vec<Claim> {
        let mut out = Vec::new();
        for (n, w) in WORKLOADS.iter().enumerate() {
            let (fpw, dwb, off) = (
                seed_tps(SEED_LZ4[n].1),
                seed_tps(SEED_LZ4[n].2),
                seed_tps(SEED_LZ4[n].3),
            );
            let (fpw_plain, dwb_plain) = (seed_tps(SEED_PLAIN[n].1), seed_tps(SEED_PLAIN[n].2));
            let claim = |ratio: &str, context: &str, direction, seed: f64, a, b| Claim {
                ratio: ratio.into(),
                context: format!("{w}, {context}"),
                direction,
                seed: Some(seed),
                plan: 0,
                workload: w.to_string(),
                a,
                b,
                figure: Figure::Tps,
            };
            let dwb_dir = if dwb > fpw {
                Direction::Higher
            } else {
                Direction::Lower
            };
            out.push(claim(
                "DWB/FPW TPS",
                "lz4",
                dwb_dir,
                dwb / fpw,
                DWB_LZ4,
                FPW_LZ4,
            ));
            // The seed's read_write without lz4 (-2.6 %, one run) is a tie.
            let plain_dir = if n == 2 {
                Direction::About(0.05)
            } else {
                Direction::Higher
            };
            out.push(claim(
                "DWB/FPW TPS",
                "no compression",
                plain_dir,
                dwb_plain / fpw_plain,
                DWB,
                FPW,
            ));
            out.push(claim(
                "OFF/FPW TPS",
                "lz4",
                Direction::Higher,
                off / fpw,
                OFF_LZ4,
                FPW_LZ4,
            ));
            if n == 0 {
                out.push(claim(
                    "FPW lz4/FPW uncompressed TPS",
                    "lz4 helps FPW",
                    Direction::Higher,
                    fpw / fpw_plain,
                    FPW_LZ4,
                    FPW,
                ));
            }
        }
        out
    }

    fn extra_lines(&self, results: &[Vec<ConfigResult>]) -> Vec<String> {
        let Some(results) = results.first() else {
            return Vec::new();
        };
        group(results, "oltp_write_only")
            .get(DWB_LZ4)
            .map(|r| {
                format!(
                    "double-write pages per checkpointer fsync, oltp_write_only lz4: {} here \
                     ({} pages in {} fsyncs of the area by every writer, all rounds), 7,822 in \
                     the seed (1,157,729 in 148)",
                    thousands(r.dw_checkpoint_pages_per_fsync),
                    thousands(r.dw_page_writes as f64),
                    thousands(r.dw_fsyncs as f64)
                )
            })
            .into_iter()
            .collect()
    }

    fn notes(&self) -> Vec<&'static str> {
        vec![
            "Scaled to this machine: 8 clients (the seed's 16), the data a few MB (quick) or \
             ~160 MB (full) instead of 2.3 GB, the buffer pool a quarter of it (the seed's \
             1 GB of 2.3 GB), max_wal_size 16 MB (quick) or 32 MB (full), checkpoint_timeout \
             a sixth of a run.",
            "double_write_buffer_size is this engine's default area per shard, not the \
             seed's 128 MB.",
            "OFF runs with wal_compression lz4 as in the seed's lz4 tables; it logs no \
             full-page images, so lz4 has nothing to compress.",
            "The seed ran each mode once, one after the other; here the modes run in a \
             balanced order, round after round, and each ratio is paired by round.",
        ]
    }
}
