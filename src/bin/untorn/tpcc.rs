//! `untorn tpcc`: the TPC-C workload driven over the PostgreSQL wire
//! protocol, against PostgreSQL or `untorn serve`, or over MySQL's against
//! MariaDB (load, run, check).

use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use untorn::lab::workload::tpcc::wire::{self, check, load, run};
use untorn::lab::workload::tpcc::Tpcc;
use untorn::lab::workload::Scale;

#[derive(Args, Debug)]
pub struct TpccArgs {
    /// The server: postgres://user@host:port/dbname, or MariaDB as
    /// mysql://user:password@host:port/dbname (or
    /// mysql://user@localhost/dbname?socket=PATH); no TLS.
    #[arg(long)]
    url: String,
    #[command(subcommand)]
    command: TpccCommand,
}

#[derive(Subcommand, Debug)]
pub enum TpccCommand {
    /// Create the nine tables and load them with COPY (MariaDB: multi-row
    /// INSERTs), warehouses in parallel over several connections.
    Load {
        /// Warehouses to load (1 to 100000).
        #[arg(long)]
        warehouses: u64,
        /// Items, and stock rows per warehouse: 100,000 in the
        /// specification; fewer only for tests (100 at least).
        #[arg(long, default_value_t = 100_000)]
        tpcc_items: u64,
        /// Customers and loaded orders per district: 3,000 in the
        /// specification; fewer only for tests (10 at least).
        #[arg(long, default_value_t = 3_000)]
        tpcc_customers: u64,
        /// Connections loading at once.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=256))]
        connections: u64,
        /// Drop the nine tables first, if they exist.
        #[arg(long)]
        drop: bool,
    },
    /// Run the mix (45/43/4/4/4) for a warm-up and a measured time, print
    /// notpm, tpm, counts, retries and latencies, then check conditions
    /// 1-4 (exit status 1 if one is broken).
    Run {
        /// Clients, one connection each.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        clients: u64,
        /// Measured seconds.
        #[arg(long, value_parser = crate::seconds)]
        duration: f64,
        /// Seconds run before measuring.
        #[arg(long, default_value_t = 0.0, value_parser = crate::seconds_or_zero)]
        warmup: f64,
        /// The seed of the clients' input streams.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Also write the figures as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// The specification's keying and think times (off: none).
        #[arg(long)]
        think: bool,
    },
    /// Check consistency conditions 1-4 (exit status 1 if one is broken).
    Check,
}

const FAILED: u8 = 1;

pub fn run(args: &TpccArgs) -> untorn::Result<ExitCode> {
    let config = wire::config(&args.url)?;
    match &args.command {
        TpccCommand::Load {
            warehouses,
            tpcc_items,
            tpcc_customers,
            connections,
            drop,
        } => {
            let t = Tpcc::new(&Scale {
                warehouses: *warehouses,
                tpcc_items: *tpcc_items,
                tpcc_customers: *tpcc_customers,
                ..Scale::default()
            })?;
            let start = Instant::now();
            let loaded = load::load(&config, &t, *connections as usize, *drop)?;
            let rows: Vec<String> = loaded.iter().map(|(t, n)| format!("{t} {n}")).collect();
            println!(
                "tpcc: loaded {} warehouses in {:.1} s: {}",
                t.warehouses,
                start.elapsed().as_secs_f64(),
                rows.join(", ")
            );
            // Every COPY was acknowledged; what the server kept is counted.
            let broken = check::row_counts(&mut config.connect()?, &t)?;
            for line in &broken {
                println!("FAILED: {line}");
            }
            Ok(if broken.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(FAILED)
            })
        }
        TpccCommand::Run {
            clients,
            duration,
            warmup,
            seed,
            json,
            think,
        } => {
            let options = run::RunOptions {
                clients: *clients as usize,
                duration: Duration::from_secs_f64(*duration),
                warmup: Duration::from_secs_f64(*warmup),
                seed: *seed,
                think: *think,
            };
            let summary = run::run(&config, &options)?;
            print!("{}", summary.text());
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&summary)
                    .map_err(|e| untorn::Error::Invalid(e.to_string()))?;
                std::fs::write(path, text + "\n")
                    .map_err(|e| untorn::Error::io(path, "write", e))?;
            }
            check_conditions(&config)
        }
        TpccCommand::Check => check_conditions(&config),
    }
}

fn check_conditions(target: &wire::Target) -> untorn::Result<ExitCode> {
    let mut client = target.connect()?;
    let checked = check::check(&mut client)?;
    for line in &checked.broken {
        println!("FAILED: {line}");
    }
    if checked.broken.is_empty() {
        println!(
            "tpcc: consistency conditions 1-4 hold ({} warehouses, {} districts); \
             item, stock and customer hold the rows the load made",
            checked.warehouses, checked.districts
        );
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(FAILED))
    }
}
