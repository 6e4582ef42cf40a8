//! `untorn bench` (the benchmark laboratory) and `untorn bench-checksums`.

use clap::Args;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table as Grid};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use untorn::lab::adaptive::{self, Repeats};
use untorn::lab::compare::{run_plan, BenchConfig, BenchPlan, Progress};
use untorn::lab::runner::{has_pauses, RunSpec};
use untorn::lab::workload::{by_name, Scale};
use untorn::lab::{regime, report};
use untorn::protect::double_writes::AreaSettings;
use untorn::settings::{parse_size, ChecksumAlgorithm, TornPageProtection, WalCompression};
use untorn::Error;

use crate::on_off;

/// The default job's workloads (seed 003's three).
const DEFAULT_WORKLOADS: &str = "oltp_write_only,oltp_update_non_index,oltp_read_write";

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Workloads: tpcb, tpcc, oltp_write_only, oltp_update_non_index, oltp_update_index,
    /// oltp_read_write, oltp_read_only, oltp_point_select.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_WORKLOADS)]
    pub(crate) workload: Vec<String>,
    /// Torn-page protection modes to compare: full_pages, double_writes,
    /// off, atomic (on a file system or --device that writes pages whole)
    /// [default: full_pages, double_writes, off].
    #[arg(long, value_delimiter = ',')]
    protection: Vec<String>,
    /// Page checksums to compare: off, fnv, crc32c.
    #[arg(long, value_delimiter = ',', default_value = "crc32c")]
    data_checksums: Vec<String>,
    /// WAL block sizes to compare.
    #[arg(long, value_delimiter = ',', default_value = "8KB", value_parser = parse_size)]
    wal_block_size: Vec<u64>,
    /// Page sizes to compare.
    #[arg(long, value_delimiter = ',', default_value = "8KB", value_parser = parse_size)]
    page_size: Vec<u64>,
    /// Buffer pool size, at least 256 pages [default: a quarter of the
    /// workload's data, at least 256 pages].
    #[arg(long, value_parser = parse_size)]
    buffer_pool: Option<u64>,
    /// max_wal_size.
    #[arg(long, default_value = "64MB", value_parser = parse_size)]
    max_wal_size: u64,
    /// checkpoint_timeout in seconds: with --max-wal-size, whichever comes
    /// first starts a checkpoint (the default job's cycle: a few seconds,
    /// three or more per run).
    #[arg(long, default_value_t = 2.0, value_parser = crate::seconds)]
    checkpoint_timeout: f64,
    /// synchronous_commit: on or off.
    #[arg(long, default_value = "on")]
    synchronous_commit: String,
    /// WAL compression of full-page images to compare: off, lz4, zstd; an
    /// axis of full_pages only (the other modes write no images)
    /// [default: off; off,lz4 in the default job, when --protection is not
    /// given either].
    #[arg(long, value_delimiter = ',')]
    wal_compression: Vec<String>,
    /// checkpoint_sort settings to compare: on (writes in file and block
    /// order), off (buffer order, one page per write).
    #[arg(long, value_delimiter = ',', default_value = "on")]
    checkpoint_sort: Vec<String>,
    /// checkpoint_completion_target (0 to 1).
    #[arg(long, default_value_t = 0.9)]
    checkpoint_completion_target: f64,
    /// double_write_buffer_size: each double-write shard's area; several
    /// values compare double_writes at each (the other modes run once).
    #[arg(long, value_delimiter = ',', default_value = "64MB", value_parser = parse_size)]
    double_write_buffer_size: Vec<u64>,
    /// double_write_eviction_pages: pages a client writing a dirty victim writes at once (double_writes only).
    #[arg(long, default_value_t = 32)]
    double_write_eviction_pages: u32,
    /// double_write_defer_in_place settings to compare (on, off): in-place
    /// writes wait for the slots' reuse (double_writes only).
    #[arg(long, value_delimiter = ',', default_value = "on")]
    double_write_defer_in_place: Vec<String>,
    /// double_write_keep_deferred settings to compare (on, off): deferred
    /// pages stay across checkpoints (double_writes only).
    #[arg(long, value_delimiter = ',', default_value = "on")]
    double_write_keep_deferred: Vec<String>,
    /// double_write_deferred_size settings to compare: the most
    /// dw/deferred holds (auto: 16 times double_write_buffer_size), e.g.
    /// auto,512MB (double_writes only).
    #[arg(long, value_delimiter = ',', default_value = "auto", value_parser = parse_deferred_size)]
    double_write_deferred_size: Vec<u64>,
    /// double_write_flush_after settings to compare: pages of dw/deferred
    /// written out per piece, each waited for, before a checkpoint's fsync
    /// of it (0: the fsync alone), e.g. 0,128 (double_writes only).
    #[arg(long, value_delimiter = ',', default_value = "128")]
    double_write_flush_after: Vec<u32>,
    /// Background writer settings to compare: on (bgwriter_lru_maxpages
    /// 100, the default), off (0), or a bgwriter_lru_maxpages (1 to 1000).
    #[arg(long, value_delimiter = ',', default_value = "on")]
    bgwriter: Vec<String>,
    /// Device model: real, hdd, hdd-bbwc, sata-ssd, nvme, nvme-atomic (an
    /// NVMe writing 16 KB whole, so `--protection atomic` runs on it).
    #[arg(long, default_value = "real")]
    device: String,
    /// Client threads; several (`1,4,16,64`) compare each configuration
    /// at each count (an axis like the settings), so one run shows TPS and
    /// CPU per transaction against clients.
    #[arg(long, value_delimiter = ',', default_value = "4")]
    clients: Vec<usize>,
    /// Measured seconds per run (the default spans three checkpoint
    /// cycles).
    #[arg(long, default_value_t = 6.0, value_parser = crate::seconds)]
    duration: f64,
    /// Warm-up seconds before each run (not measured), after the buffer
    /// pool is prewarmed.
    #[arg(long, default_value_t = 1.0, value_parser = crate::seconds_or_zero)]
    warmup: f64,
    /// pgbench scale factor (tpcb).
    #[arg(long, default_value_t = 1)]
    scale: u64,
    /// sysbench --tables.
    #[arg(long, default_value_t = 4)]
    tables: usize,
    /// sysbench --table-size.
    #[arg(long, default_value_t = 25_000)]
    table_size: u64,
    /// TPC-C warehouses (tpcc).
    #[arg(long, default_value_t = 1)]
    warehouses: u64,
    /// TPC-C items and stock rows per warehouse: the specification's
    /// 100,000 unless scaled down (a smaller count is NOT the specification).
    #[arg(long, default_value_t = 100_000)]
    tpcc_items: u64,
    /// TPC-C customers and loaded orders per district: the specification's
    /// 3,000 unless scaled down (NOT the specification).
    #[arg(long, default_value_t = 3_000)]
    tpcc_customers: u64,
    /// TPC-C's keying and think times around each transaction (clause
    /// 5.2.5: 18/3/2/2/2 s keying, 12/12/10/5/5 s mean think): about 12.9
    /// New-Orders a minute per ten clients, a load set by the clients.
    /// Off by default, as DBT-2 is run for I/O studies. tpcc only.
    #[arg(long)]
    think: bool,
    /// Rounds (each configuration once per round, in a balanced order):
    /// a number, or auto (whole order cycles until every ratio reaches
    /// --precision, the --budget would run out, or --max-rounds).
    #[arg(long, default_value = "auto")]
    repeat: String,
    /// With --repeat auto: the 95 % interval half width every ratio must
    /// reach, in percent.
    #[arg(long, default_value_t = 3.0)]
    precision: f64,
    /// With --repeat auto: seconds the whole job may take, shared among
    /// the workloads (what one leaves passes to the next).
    #[arg(long, default_value_t = 300.0, value_parser = crate::seconds)]
    budget: f64,
    /// With --repeat auto: the most rounds per workload.
    #[arg(long, default_value_t = 60)]
    max_rounds: usize,
    /// A/A check: run only the first configuration, under two names
    /// (copy a and copy b); the ratio between them should be 1 within its
    /// interval.
    #[arg(long)]
    aa: bool,
    /// Where the databases go, one subdirectory per workload and
    /// configuration [default: a temporary directory].
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// Leave the databases in --dir after the runs (closed cleanly), for
    /// `untorn check`; without it each is removed once checked.
    #[arg(long, requires = "dir")]
    keep: bool,
    /// Write the results as JSON.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Write CSV files into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write the HTML report (plots, tables, settings) into this directory
    /// [default: untorn-report in the current directory].
    #[arg(long)]
    report: Option<PathBuf>,
    /// Leave the runs the noise monitor found disturbed out of every
    /// figure (they stay in the JSON, marked `excluded`).
    #[arg(long)]
    drop_disturbed: bool,
    /// Seed of the clients' random choices.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// What to measure: time (throughput, latency and I/O over --duration
    /// with --clients) or instructions (instructions per transaction under
    /// Valgrind's Callgrind: one client, --transactions of each workload
    /// twice over, the client thread counted apart from the engine's; for
    /// CPU claims, repeating to 0.1 %).
    #[arg(long, default_value = "time", value_parser = ["time", "instructions"])]
    pub(crate) instrument: String,
    /// With --instrument instructions: transactions of the shorter of the
    /// two counted runs (the longer runs twice as many).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub(crate) transactions: u64,
}

fn refuse(name: &'static str, detail: String) -> Error {
    Error::InvalidSetting { name, detail }
}

fn configs(a: &BenchArgs) -> untorn::Result<Vec<BenchConfig>> {
    let sorts: Vec<bool> = a
        .checkpoint_sort
        .iter()
        .map(|s| on_off("checkpoint_sort", s))
        .collect::<untorn::Result<_>>()?;
    let synchronous_commit = match a.synchronous_commit.as_str() {
        "on" => true,
        "off" => false,
        other => {
            return Err(refuse(
                "synchronous_commit",
                format!("{other:?} is not on or off"),
            ))
        }
    };
    untorn::lab::device::DeviceProfile::by_name(&a.device)?;
    let protections: Vec<TornPageProtection> = if a.protection.is_empty() {
        // Seed 003's three, in its table's order (FPW, DWB, OFF).
        vec![
            TornPageProtection::FullPages,
            TornPageProtection::DoubleWrites,
            TornPageProtection::Off,
        ]
    } else {
        a.protection
            .iter()
            .map(|p| p.parse())
            .collect::<untorn::Result<_>>()?
    };
    let checksums: Vec<ChecksumAlgorithm> = a
        .data_checksums
        .iter()
        .map(|c| c.parse())
        .collect::<untorn::Result<_>>()?;
    let compressions: Vec<WalCompression> =
        match (a.wal_compression.is_empty(), a.protection.is_empty()) {
            // The default job: seed 003 also ran full_pages with lz4.
            (true, true) => vec![WalCompression::Off, WalCompression::Lz4],
            (true, false) => vec![WalCompression::Off],
            (false, _) => a
                .wal_compression
                .iter()
                .map(|c| c.parse())
                .collect::<untorn::Result<_>>()?,
        };
    let bgwriters: Vec<u32> = a
        .bgwriter
        .iter()
        .map(|b| match b.as_str() {
            "on" => Ok(untorn::Options::default().bgwriter_lru_maxpages),
            "off" => Ok(0),
            n => n.parse().map_err(|_| {
                refuse(
                    "bgwriter",
                    format!("{n:?} is not on, off or a number of pages"),
                )
            }),
        })
        .collect::<untorn::Result<_>>()?;
    // A time below the engine's least is refused by Options::validate.
    let timeout = Duration::from_secs_f64(a.checkpoint_timeout);
    let base = BenchConfig {
        buffer_pool: a.buffer_pool,
        max_wal_size: a.max_wal_size,
        checkpoint_timeout: timeout,
        checkpoint_completion_target: a.checkpoint_completion_target,
        double_write_eviction_pages: a.double_write_eviction_pages,
        synchronous_commit,
        device: a.device.clone(),
        ..BenchConfig::default()
    };
    // Every combination of the listed values, the first axis outermost.
    let mut out = vec![base];
    expand(&mut out, &protections, |c, v| c.protection = v);
    expand(&mut out, &checksums, |c, v| c.data_checksums = v);
    expand(&mut out, &a.page_size, |c, v| c.page_size = v as u32);
    expand(&mut out, &a.wal_block_size, |c, v| {
        c.wal_block_size = v as u32
    });
    expand_for(
        &mut out,
        TornPageProtection::FullPages,
        &compressions,
        |c, v| c.wal_compression = v,
    );
    expand(&mut out, &sorts, |c, v| c.checkpoint_sort = v);
    expand(&mut out, &bgwriters, |c, v| c.bgwriter_lru_maxpages = v);
    // The area's settings are axes of double_writes only.
    let defers = a
        .double_write_defer_in_place
        .iter()
        .map(|v| on_off("double_write_defer_in_place", v))
        .collect::<untorn::Result<Vec<bool>>>()?;
    expand_for(
        &mut out,
        TornPageProtection::DoubleWrites,
        &a.double_write_buffer_size,
        |c, v| c.double_write_buffer_size = v,
    );
    expand_for(
        &mut out,
        TornPageProtection::DoubleWrites,
        &defers,
        |c, v| c.double_write_defer_in_place = v,
    );
    let keeps = a
        .double_write_keep_deferred
        .iter()
        .map(|v| on_off("double_write_keep_deferred", v))
        .collect::<untorn::Result<Vec<bool>>>()?;
    expand_for(
        &mut out,
        TornPageProtection::DoubleWrites,
        &keeps,
        |c, v| c.double_write_keep_deferred = v,
    );
    expand_for(
        &mut out,
        TornPageProtection::DoubleWrites,
        &a.double_write_deferred_size,
        |c, v| c.double_write_deferred_size = v,
    );
    expand_for(
        &mut out,
        TornPageProtection::DoubleWrites,
        &a.double_write_flush_after,
        |c, v| c.double_write_flush_after = v,
    );
    // Client counts last, so a mode's counts sit side by side.
    if a.clients.len() > 1 {
        expand(&mut out, &a.clients, |c, n| c.clients = Some(n));
    }
    for c in &out {
        let least = untorn::lab::compare::MIN_BUFFER_POOL_PAGES * c.page_size as u64;
        if let Some(pool) = a.buffer_pool.filter(|&p| p < least) {
            // The lab raises a smaller pool to this; asked for, it is refused.
            return Err(refuse(
                "buffer_pool",
                format!(
                    "{pool} bytes is below {least} ({} pages of {} bytes)",
                    untorn::lab::compare::MIN_BUFFER_POOL_PAGES,
                    c.page_size
                ),
            ));
        }
        c.options(0).creation.or_defaults().validate()?;
        c.options(0).validate()?;
        if c.protection == TornPageProtection::DoubleWrites {
            // Refused before any run, not when its database opens.
            AreaSettings::from_options(&c.options(0), c.page_size as usize, c.data_checksums)?;
        }
    }
    if a.aa {
        out = out[0].aa_pair();
    }
    Ok(out)
}

/// `--repeat`: a number of rounds, or auto with the adaptive flags.
fn repeats(a: &BenchArgs) -> untorn::Result<Repeats> {
    if a.repeat == "auto" {
        if !(a.precision > 0.0 && a.budget > 0.0 && a.max_rounds >= 2) {
            return Err(Error::Invalid(
                "--precision and --budget must be above zero and --max-rounds at least 2".into(),
            ));
        }
        return Ok(Repeats::Auto {
            precision_pct: a.precision,
            budget: Duration::from_secs_f64(a.budget),
            max_rounds: a.max_rounds,
        });
    }
    match a.repeat.parse::<usize>() {
        Ok(n) if n > 0 => Ok(Repeats::Fixed(n)),
        _ => Err(Error::Invalid(format!(
            "--repeat {:?}: use auto or a number of rounds above zero",
            a.repeat
        ))),
    }
}

/// `--double-write-deferred-size`: a size, or auto (0: the engine's
/// default, 16 times the area).
fn parse_deferred_size(text: &str) -> Result<u64, String> {
    if text.trim() == "auto" {
        return Ok(0);
    }
    match parse_size(text)? {
        0 => Err(format!("{text:?}: use auto for the default size")),
        n => Ok(n),
    }
}

/// The data the workloads load.
fn scale_of(a: &BenchArgs) -> Scale {
    Scale {
        scale: a.scale,
        tables: a.tables,
        table_size: a.table_size,
        warehouses: a.warehouses,
        tpcc_items: a.tpcc_items,
        tpcc_customers: a.tpcc_customers,
        ..Scale::default()
    }
}

/// Replaces each config by one per value of an axis.
fn expand<T: Copy>(
    configs: &mut Vec<BenchConfig>,
    values: &[T],
    set: impl Fn(&mut BenchConfig, T),
) {
    *configs = configs
        .iter()
        .flat_map(|c| {
            values.iter().map(|&v| {
                let mut c = c.clone();
                set(&mut c, v);
                c
            })
        })
        .collect();
}

/// [`expand`] for an axis only `mode` uses: its configurations take every
/// value, the others keep the first (a setting they ignore).
fn expand_for<T: Copy>(
    configs: &mut Vec<BenchConfig>,
    mode: TornPageProtection,
    values: &[T],
    set: impl Fn(&mut BenchConfig, T),
) {
    *configs = configs
        .iter()
        .flat_map(|c| {
            let values = if c.protection == mode {
                values
            } else {
                &values[..1]
            };
            values.iter().map(|&v| {
                let mut c = c.clone();
                set(&mut c, v);
                c
            })
        })
        .collect();
}

pub fn run(a: &BenchArgs) -> untorn::Result<ExitCode> {
    if a.instrument == "instructions" {
        return crate::instructions::run(a, &configs(a)?, &scale_of(a));
    }
    let configs = configs(a)?;
    for w in &a.workload {
        if !untorn::lab::workload::NAMES.contains(&w.as_str()) {
            return Err(Error::Invalid(format!(
                "unknown workload {w:?}; the workloads are: {}",
                untorn::lab::workload::NAMES.join(", ")
            )));
        }
    }
    let scale = scale_of(a);
    // Before any load, by the same rule the runner applies.
    if a.think {
        for w in &a.workload {
            has_pauses(by_name(w, &scale)?.as_ref())?;
        }
    }
    let repeats = repeats(a)?;
    if a.clients.contains(&0) || a.duration <= 0.0 {
        return Err(Error::Invalid(
            "--clients and --duration must be above zero".into(),
        ));
    }
    let (_tmp, dir) = crate::work_dir(a.dir.as_ref())?;
    let plan = BenchPlan {
        workloads: a.workload.clone(),
        configs: configs.clone(),
        scale,
        spec: RunSpec {
            clients: a.clients[0],
            warmup: Duration::from_secs_f64(a.warmup.max(0.0)),
            duration: Duration::from_secs_f64(a.duration),
            think: a.think,
        },
        repeats: repeats.clone(),
        dir,
        seed: a.seed,
        keep: a.keep,
        drop_disturbed: a.drop_disturbed,
    };
    // Fixed rounds: the bar counts runs. Auto: it counts the budget's
    // seconds, and the message says the rounds and the widest interval.
    let bar = match &repeats {
        Repeats::Fixed(n) => {
            let bar = ProgressBar::new((plan.workloads.len() * configs.len() * n) as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} runs  {msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            bar
        }
        Repeats::Auto { budget, .. } => {
            let bar = ProgressBar::new(budget.as_secs());
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:40}] {pos}/{len} s budget  {msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            bar
        }
    };
    let auto = matches!(repeats, Repeats::Auto { .. });
    let started = std::time::Instant::now();
    let label = |i: usize| {
        let c = &configs[i];
        format!(
            "{} {} page {} WAL block {} wal_compression {} checkpoint_sort {} bgwriter_lru_maxpages {}{}",
            c.protection,
            c.data_checksums,
            c.page_size,
            c.wal_block_size,
            c.wal_compression,
            if c.checkpoint_sort { "on" } else { "off" },
            c.bgwriter_lru_maxpages,
            c.copy.as_ref().map(|c| format!(" copy {c}")).unwrap_or_default()
        )
    };
    let mut status = String::new();
    let mut status_label = String::new();
    let mut lines = crate::progress::Lines::new();
    let unit = if auto { "s budget" } else { "runs" };
    let results = run_plan(&plan, |p| {
        if auto {
            bar.set_position(started.elapsed().as_secs().min(bar.length().unwrap_or(0)));
        }
        let ran = matches!(p, Progress::Ran { .. });
        match p {
            Progress::Loading { workload, config } => {
                status.clear();
                bar.set_message(format!("loading {workload} for {}", label(config)))
            }
            Progress::Running {
                workload,
                config,
                repeat,
            } => {
                status_label = format!(
                    "{workload} {} round {}: ",
                    configs[config].protection,
                    repeat + 1
                );
                bar.set_message(format!(
                    "{workload}: {} (round {}){status}",
                    label(config),
                    repeat + 1
                ))
            }
            Progress::Ran { run } => {
                // TPC-C's notpm and per-type latencies, a line per run.
                if let Some(line) = run.kinds_line() {
                    let line = format!("{status_label}{line}");
                    if bar.is_hidden() {
                        println!("{line}");
                    } else {
                        bar.println(line);
                    }
                }
                if !auto {
                    bar.inc(1);
                }
            }
            Progress::Round {
                rounds, widest_pct, ..
            } => {
                status = match widest_pct {
                    Some(w) if w.is_finite() => format!("; {rounds} rounds, widest ±{w:.1} %"),
                    _ => format!("; {rounds} rounds"),
                }
            }
        }
        lines.log_bar(&bar, Some(unit), ran);
    })?;
    bar.finish_and_clear();
    // The headline first, the regime and how sure the figures are, then
    // the details.
    println!("{}", report::headline_table(&results));
    if let Some(line) = regime::regime_line(&results) {
        let clients: Vec<String> = a.clients.iter().map(|n| n.to_string()).collect();
        println!("{line} {} clients.", clients.join(", "));
    }
    let precision = auto.then_some(a.precision);
    for group in results.chunks(configs.len()) {
        if let Some(line) = adaptive::stop_line(group, precision) {
            println!("{line}");
        }
    }
    for line in untorn::lab::disturbed::summary_lines(&results, a.drop_disturbed) {
        println!("{line}");
    }
    if let Some(w) = regime::disturbed_warning(&results) {
        println!("{w}");
    }
    println!("\nDetails\n\n{}", report::detail_table(&results));
    if let Some(path) = &a.json {
        report::write_json(path, &results)?;
        println!("JSON: {}", path.display());
    }
    if let Some(dir) = &a.csv {
        report::write_csv(dir, &results)?;
        println!("CSV: {}", dir.display());
    }
    let report_dir = a
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from("untorn-report"));
    let command_line = std::env::args().collect::<Vec<_>>().join(" ");
    let machine = format!(
        "{} ({} CPUs)",
        untorn::lab::checksum_bench::cpu_name(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let index = report::write_report(
        &report_dir,
        &results,
        "untorn bench",
        &command_line,
        &machine,
    )?;
    println!("Report: {}", index.display());
    if plan.keep {
        println!("Last round's databases kept (check one with `untorn check DIR`):");
        for w in &plan.workloads {
            for i in 0..configs.len() {
                println!("  {}", plan.db_dir(w, i).display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn checksums(page_size: usize, seconds: f64) -> untorn::Result<ExitCode> {
    if !untorn::settings::PAGE_SIZES.contains(&(page_size as u32)) {
        return Err(Error::InvalidSetting {
            name: "page_size",
            detail: format!("{page_size} is not one of 4096, 8192, 16384, 32768"),
        });
    }
    // A case's time is split across its interleaved rounds: zero, a
    // negative, NaN or an infinite time measures nothing (it panicked).
    if !(seconds.is_finite() && seconds > 0.0 && seconds <= 3600.0) {
        return Err(Error::InvalidSetting {
            name: "seconds",
            detail: format!("{seconds} is not a time in seconds above 0 and at most 3600"),
        });
    }
    println!("CPU: {}", untorn::lab::checksum_bench::cpu_name());
    println!("page size {page_size} bytes, one core, median of interleaved rounds");
    let mut grid = Grid::new();
    grid.load_preset(UTF8_FULL_CONDENSED)
        .set_header(vec!["case", "GB/s per core", "ns per page"]);
    for row in untorn::lab::checksum_bench::run(page_size, seconds) {
        grid.add_row(vec![
            row.name,
            format!("{:.1}", row.gb_per_s),
            format!("{:.0}", row.ns_per_page),
        ]);
    }
    println!("{grid}");
    Ok(ExitCode::SUCCESS)
}
