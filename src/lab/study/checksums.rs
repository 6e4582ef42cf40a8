//! Seed 002 (shared/seeds/002_673f3104d24d0a0f.txt, Greg Smith on
//! pgsql-hackers, 2013-03-07): what page checksums cost under pgbench at
//! several sizes and client counts, and the worst case of pages moving
//! between the OS cache and a small buffer pool.

use super::{
    data_bytes, group, pct_cell, BenchConfig, Claim, Direction, Figure, Setup, Study, StudyPlan,
    Table,
};
use crate::error::Result;
use crate::lab::report::{fmt_num, fmt_tps};
use crate::lab::result::ConfigResult;
use crate::settings::ChecksumAlgorithm as K;

pub struct Checksums;

const ALGORITHMS: [K; 3] = [K::Off, K::Fnv, K::Crc32c];
/// The buffer pool against the data: it fits, the data is twice it, ten
/// times it.
const POOLS: [(&str, f64); 3] = [
    ("fits", 3.0),
    ("data = 2x pool", 0.5),
    ("data = 10x pool", 0.1),
];
/// Client counts, one plan each.
const CLIENTS: [usize; 2] = [1, 8];
/// The worst case's workload and its pool (a twentieth of the data).
const WORST: &str = "oltp_read_only";

/// Index of (pool, algorithm) in a tpcb plan.
fn at(pool: usize, algorithm: usize) -> usize {
    pool * ALGORITHMS.len() + algorithm
}

const HARDWARE: &str = "single drive behind a battery-backed write cache, PostgreSQL 9.3 \
    development code, shared_buffers 2GB, checkpoint_segments 64; Greg Smith, 2013-03-07. \
    The seed gives no table (its spreadsheet is not in the thread): these are the figures \
    its text states";

impl Study for Checksums {
    fn name(&self) -> &'static str {
        "checksums"
    }

    fn seed_file(&self) -> &'static str {
        "002_673f3104d24d0a0f.txt (Greg Smith, pgsql-hackers, 2013-03-07)"
    }

    fn summary(&self) -> &'static str {
        "Checksums cost about 2 % of pgbench TPS and add about 2 % WAL; more on larger \
         data (7 %), 16-25 % at large size and few clients, and 18-32 % when pages move \
         between the OS cache and a small shared_buffers. Here: tpcb with the pool holding \
         the data, half of it, a tenth of it, at 1 and 8 clients, checksums off/fnv/crc32c; \
         and oltp_read_only with a small pool."
    }

    fn seed_tables(&self) -> Vec<Table> {
        vec![
            Table::new(
                format!(
                    "Seed 1. pgbench in its standard write mode, checksums on vs off ({HARDWARE})"
                ),
                &["case", "TPS", "WAL"],
            )
            .row(&[
                "averaging across everything",
                "a solid 2% drop",
                "on average, a 2% increase",
            ])
            .row(&[
                "most of your data fits in shared_buffers",
                "perhaps only 2%",
                "-",
            ])
            .row(&["database is bigger", "more like 10%", "-"])
            .row(&["the highest size tested", "the drop was more like 7%", "-"])
            .row(&[
                "two larger size / low client count results",
                "25% and 16% drops",
                "-",
            ])
            .row(&["many cases", "-", "3 to 5%"])
            .row(&["one ugly case", "-", "hit 30%"]),
            Table::new(
                format!("Seed 2. Worst case: checksum calculated while reading data ({HARDWARE})"),
                &["who", "slowdown"],
            )
            .row(&["Jeff Davis", "18%"])
            .row(&["Greg Smith", "24 to 32%"]),
            Table::new(
                format!("Seed 3. Average bytes of WAL per transaction ({HARDWARE})"),
                &["database", "WAL bytes/txn"],
            )
            .row(&["smaller database", "around 6K"])
            .row(&["larger databases", "topped out at around 22K"]),
        ]
    }

    fn plans(&self, setup: &Setup) -> Result<Vec<StudyPlan>> {
        let device = setup.device("hdd-bbwc");
        let scale = setup.size.tpcb(4);
        let data = data_bytes("tpcb", &scale)?;
        let mut out = Vec::new();
        for (n, clients) in CLIENTS.into_iter().enumerate() {
            let mut configs = Vec::new();
            for (_, fraction) in POOLS {
                for data_checksums in ALGORITHMS {
                    configs.push(BenchConfig {
                        data_checksums,
                        buffer_pool: Some((data as f64 * fraction) as u64),
                        ..setup.base(&device)
                    });
                }
            }
            out.push(StudyPlan {
                title: format!(
                    "tpcb, {} clients, three pool sizes x checksums, device {device}",
                    setup.size.clients(clients)
                ),
                plan: setup.plan(n, &["tpcb"], configs, scale.clone(), clients),
            });
        }
        let scale = setup.size.sysbench();
        let data = data_bytes(WORST, &scale)?;
        let configs = ALGORITHMS
            .into_iter()
            .map(|data_checksums| BenchConfig {
                data_checksums,
                buffer_pool: Some(data / 20),
                ..setup.base(&device)
            })
            .collect();
        out.push(StudyPlan {
            title: format!("{WORST}, buffer pool a twentieth of the data, device {device}"),
            plan: setup.plan(CLIENTS.len(), &[WORST], configs, scale, 4),
        });
        Ok(out)
    }

    fn our_tables(&self, results: &[Vec<ConfigResult>]) -> Vec<Table> {
        let mut tps = Table::new(
            "Here 1. tpcb (pgbench's transaction), median TPS, and crc32c against off \
             (change with its 95 % interval)",
            &[
                "case",
                "clients",
                "off",
                "fnv",
                "crc32c",
                "crc32c vs off",
                "fnv vs off",
            ],
        );
        let mut wal = Table::new(
            "Here 3. WAL bytes per transaction",
            &["case", "clients", "off", "fnv", "crc32c", "crc32c vs off"],
        );
        for (n, clients) in CLIENTS.iter().enumerate() {
            let Some(r) = results.get(n) else { continue };
            let g = group(r, "tpcb");
            let clients = clients.to_string();
            for (p, (case, _)) in POOLS.iter().enumerate() {
                let cell = |f: fn(&ConfigResult) -> String, k: usize| {
                    g.get(at(p, k)).map_or("-".to_string(), |r| f(r))
                };
                let ratio = |k: usize, figure: Figure| {
                    let (a, b) = (g.get(at(p, k)), g.get(at(p, 0)));
                    pct_cell(a.zip(b).and_then(|(a, b)| a.ratio_to(b, figure.per_run())))
                };
                tps.rows.push(vec![
                    case.to_string(),
                    clients.clone(),
                    cell(|r| fmt_tps(r.tps), 0),
                    cell(|r| fmt_tps(r.tps), 1),
                    cell(|r| fmt_tps(r.tps), 2),
                    ratio(2, Figure::Tps),
                    ratio(1, Figure::Tps),
                ]);
                wal.rows.push(vec![
                    case.to_string(),
                    clients.clone(),
                    cell(|r| fmt_num(r.wal_bytes_per_txn), 0),
                    cell(|r| fmt_num(r.wal_bytes_per_txn), 1),
                    cell(|r| fmt_num(r.wal_bytes_per_txn), 2),
                    ratio(2, Figure::WalBytesPerTxn),
                ]);
            }
        }
        let mut worst = Table::new(
            format!("Here 2. Worst case: {WORST} with a buffer pool a twentieth of the data"),
            &["checksums", "TPS", "vs off", "page reads/txn"],
        );
        if let Some(r) = results.get(CLIENTS.len()) {
            let g = group(r, WORST);
            for (k, name) in ["off", "fnv", "crc32c"].iter().enumerate() {
                if let Some(c) = g.get(k) {
                    let vs = if k == 0 {
                        "-".to_string()
                    } else {
                        pct_cell(c.ratio_to(g[0], |r| r.tps))
                    };
                    worst.rows.push(vec![
                        name.to_string(),
                        fmt_tps(c.tps),
                        vs,
                        fmt_num(c.page_reads_per_txn),
                    ]);
                }
            }
        }
        vec![tps, worst, wal]
    }

    fn claims(&self) -> Vec<Claim> {
        let tpcb = |ratio: &str, context: &str, direction, seed, plan, pool, figure| Claim {
            ratio: ratio.into(),
            context: context.into(),
            direction,
            seed: Some(seed),
            plan,
            workload: "tpcb".into(),
            a: at(pool, 2),
            b: at(pool, 0),
            figure,
        };
        vec![
            tpcb(
                "crc32c/off TPS",
                "data fits, 8 clients: about 2 %",
                Direction::About(0.05),
                0.98,
                1,
                0,
                Figure::Tps,
            ),
            tpcb(
                "crc32c/off TPS",
                "data = 10x pool, 8 clients: more like 7 %",
                Direction::Lower,
                0.93,
                1,
                2,
                Figure::Tps,
            ),
            tpcb(
                "crc32c/off TPS",
                "data = 10x pool, 1 client: 25 % and 16 % drops",
                Direction::Lower,
                0.75,
                0,
                2,
                Figure::Tps,
            ),
            tpcb(
                "crc32c/off WAL bytes/txn",
                "data fits, 8 clients: about 2 % more WAL",
                Direction::Higher,
                1.02,
                1,
                0,
                Figure::WalBytesPerTxn,
            ),
            // The CPU behind the TPS claims, counted: a checksum is CPU,
            // which wall time on a shared machine resolves worst. The
            // seed's TPS drop d, if all CPU, is 1 / (1 - d) times the
            // instructions.
            tpcb(
                "crc32c/off instructions/txn",
                "data fits, 1 client: a solid 2 % drop, as CPU",
                Direction::Higher,
                1.0 / 0.98,
                0,
                0,
                Figure::InstructionsPerTxn,
            ),
            tpcb(
                "crc32c/off instructions/txn",
                "data = 10x pool, 1 client: 25 % and 16 % drops, as CPU",
                Direction::Higher,
                1.0 / 0.80,
                0,
                2,
                Figure::InstructionsPerTxn,
            ),
            Claim {
                ratio: "crc32c/off instructions/txn".into(),
                context: format!("{WORST}, small pool: the worst case, 24 to 32 %, as CPU"),
                direction: Direction::Higher,
                seed: Some(1.0 / 0.72),
                plan: CLIENTS.len(),
                workload: WORST.into(),
                a: 2,
                b: 0,
                figure: Figure::InstructionsPerTxn,
            },
            Claim {
                ratio: "crc32c/off TPS".into(),
                context: format!("{WORST}, small pool: the worst case, 24 to 32 %"),
                direction: Direction::Lower,
                seed: Some(0.76),
                plan: CLIENTS.len(),
                workload: WORST.into(),
                a: 2,
                b: 0,
                figure: Figure::Tps,
            },
        ]
    }

    fn notes(&self) -> Vec<&'static str> {
        vec![
            "The seed gives ranges in words, not a table: its claims' figures here are \
             read from them (a 2 % drop is 0.98x, 7 % is 0.93x, the 25 % drop 0.75x, \
             Greg's 24 % worst case 0.76x, 2 % more WAL 1.02x).",
            "The sizes vary the buffer pool against fixed data (the seed varied the data \
             against a fixed shared_buffers); the pool is at least 256 pages, so the tiny \
             run's pools are all the same.",
            "The worst case runs oltp_read_only: reads only, so every miss is a page read \
             from the OS cache and checked. The device models do not slow reads.",
            "This engine logs no hint bits, so the seed's hint-bit WAL (Jeff's test 3) has \
             no counterpart here.",
        ]
    }
}
