//! `untorn bench` and `untorn bench-checksums`.
//!
//! `bench` is, for now, the engine's point workloads: single-row reads and
//! single-row update transactions (each a durable commit) on a table loaded
//! in bulk, for several client counts, repeats interleaved so that noise
//! hits every cell alike. The seeds' workloads (pgbench, sysbench) and the
//! protection-mode comparison arrive with the benchmark laboratory.

use clap::Args;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table as Grid};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};
use untorn::{key_u64, Database, Options, Table};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Client thread counts for the update workload, comma-separated.
    #[arg(long, default_value = "1,4,16", value_delimiter = ',')]
    clients: Vec<usize>,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// Rows in the table (100-byte rows, like pgbench_accounts).
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    /// Interleaved repeats of every measurement.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Database directory (default: a temporary directory, removed after).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Buffer pool size [default: 128MB].
    #[arg(long, value_parser = untorn::settings::parse_size)]
    buffer_pool: Option<u64>,
    #[command(flatten)]
    creation: crate::CreationArgs,
}

pub fn checksums(page_size: usize, seconds: f64) -> untorn::Result<ExitCode> {
    if !untorn::settings::PAGE_SIZES.contains(&(page_size as u32)) {
        return Err(untorn::Error::InvalidSetting {
            name: "page_size",
            detail: format!("{page_size} is not one of 4096, 8192, 16384, 32768"),
        });
    }
    println!("CPU: {}", untorn::checksum::bench::cpu_name());
    println!("page size {page_size} bytes, one core, median of interleaved rounds");
    let mut grid = Grid::new();
    grid.load_preset(UTF8_FULL_CONDENSED)
        .set_header(vec!["case", "GB/s per core", "ns per page"]);
    for row in untorn::checksum::bench::run(page_size, seconds) {
        grid.add_row(vec![
            row.name,
            format!("{:.1}", row.gb_per_s),
            format!("{:.0}", row.ns_per_page),
        ]);
    }
    println!("{grid}");
    Ok(ExitCode::SUCCESS)
}

fn row_value(i: u64, version: u64) -> Vec<u8> {
    let mut v = format!("{i:>12}:{version:>12}:").into_bytes();
    v.resize(100, b'x');
    v
}

/// Runs `work` on `clients` threads for `secs`; returns operations per second.
fn measure(
    clients: usize,
    secs: f64,
    work: impl Fn(u64, &mut u64) -> untorn::Result<()> + Sync,
) -> untorn::Result<f64> {
    let stop = AtomicBool::new(false);
    let ops = AtomicU64::new(0);
    let failed: parking_lot::Mutex<Option<untorn::Error>> = parking_lot::Mutex::new(None);
    let start = Instant::now();
    std::thread::scope(|s| {
        for c in 0..clients {
            let (stop, ops, failed, work) = (&stop, &ops, &failed, &work);
            s.spawn(move || {
                let mut rng_state = 0x9E37_79B9_7F4A_7C15u64 ^ (c as u64 + 1);
                while !stop.load(Relaxed) {
                    match work(c as u64, &mut rng_state) {
                        Ok(()) => {
                            ops.fetch_add(1, Relaxed);
                        }
                        Err(e) if e.is_retryable() => {}
                        Err(e) => {
                            *failed.lock() = Some(e);
                            stop.store(true, Relaxed);
                        }
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Relaxed);
    });
    if let Some(e) = failed.into_inner() {
        return Err(e);
    }
    Ok(ops.load(Relaxed) as f64 / start.elapsed().as_secs_f64())
}

fn next_rand(state: &mut u64) -> u64 {
    // xorshift64*: a different stream per client, no shared state.
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

pub fn run(args: &BenchArgs) -> untorn::Result<ExitCode> {
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()
                .map_err(|e| untorn::Error::io("temporary directory", "mkdtemp", e))?;
            tmp.path().join("db")
        }
    };
    let mut options = Options {
        creation: args.creation.to_requested()?,
        ..Options::default()
    };
    if let Some(b) = args.buffer_pool {
        options.buffer_pool_size = b;
    }
    let db = Database::create(&dir, options)?;
    let table = db.create_table("accounts")?;
    let t0 = Instant::now();
    db.bulk_load(
        &table,
        (0..args.rows).map(|i| (key_u64(i), row_value(i, 0))),
    )?;
    let s = db.settings();
    println!(
        "untorn bench: {} rows loaded in {:.1} s into {} (page {} B, WAL block {} B, checksums {}, protection {})",
        args.rows,
        t0.elapsed().as_secs_f64(),
        dir.display(),
        s.page_size,
        s.wal_block_size,
        s.data_checksums,
        s.torn_page_protection
    );
    db.checkpoint()?;
    let rows = args.rows.max(1);
    let get = |_c: u64, r: &mut u64| -> untorn::Result<()> {
        let k = next_rand(r) % rows;
        let tx = db.begin();
        std::hint::black_box(tx.get(&table, &key_u64(k))?);
        Ok(())
    };
    let update = |c: u64, r: &mut u64| update_one(&db, &table, rows, c, r);
    let mut cells: Vec<(String, usize, Vec<f64>, u64, u64, u64)> = Vec::new();
    cells.push(("point get".into(), 1, Vec::new(), 0, 0, 0));
    for &c in &args.clients {
        cells.push(("point update".into(), c, Vec::new(), 0, 0, 0));
    }
    for round in 0..args.repeat {
        for cell in cells.iter_mut() {
            let before = db.wal_stats();
            let tps = if cell.0 == "point get" {
                measure(1, args.duration, get)?
            } else {
                measure(cell.1, args.duration, update)?
            };
            let after = db.wal_stats();
            cell.2.push(tps);
            cell.3 += after.flush_requests - before.flush_requests;
            cell.4 += after.fsyncs - before.fsyncs;
            cell.5 += after.bytes - before.bytes;
            eprintln!(
                "round {}/{}: {} x{}: {:.0}/s",
                round + 1,
                args.repeat,
                cell.0,
                cell.1,
                tps
            );
        }
    }
    let mut grid = Grid::new();
    grid.load_preset(UTF8_FULL_CONDENSED).set_header(vec![
        "workload",
        "clients",
        "ops/s (median)",
        "runs",
        "commits per WAL fsync",
        "WAL bytes per commit",
    ]);
    for (name, clients, runs, requests, fsyncs, bytes) in cells.iter_mut() {
        let runs_text = runs
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(" ");
        let per_fsync = if *fsyncs > 0 {
            format!("{:.1}", *requests as f64 / *fsyncs as f64)
        } else {
            "-".into()
        };
        let per_commit = if *requests > 0 {
            format!("{:.0}", *bytes as f64 / *requests as f64)
        } else {
            "-".into()
        };
        grid.add_row(vec![
            name.clone(),
            clients.to_string(),
            format!("{:.0}", median(runs)),
            runs_text,
            per_fsync,
            per_commit,
        ]);
    }
    println!("{grid}");
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

/// One transaction: read a random row under its lock and write it back
/// with a new version number.
fn update_one(
    db: &Database,
    table: &Table,
    rows: u64,
    _client: u64,
    r: &mut u64,
) -> untorn::Result<()> {
    let k = next_rand(r) % rows;
    let mut tx = db.begin();
    let cur = tx.get_for_update(table, &key_u64(k))?.unwrap_or_default();
    let version = std::str::from_utf8(cur.get(13..25).unwrap_or_default())
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    tx.update(table, &key_u64(k), &row_value(k, version + 1))?;
    tx.commit()?;
    Ok(())
}
