//! `untorn`: the command-line front of the engine and its laboratories.

mod bench;
mod check;
mod crashtest;
mod inspect;
mod instructions;
mod probe;
mod progress;
mod recording;
mod serve;
mod stats;
mod study;
mod tpcc;
mod verify;
mod waldump;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use untorn::file::posix::PosixFileSystem;
use untorn::file::FileSystem;
use untorn::settings::{
    parse_size, ChecksumAlgorithm, RequestedCreationSettings, TornPageProtection,
};

#[derive(Parser)]
#[command(
    name = "untorn",
    version,
    about = "A storage engine whose I/O path is a setting, and its laboratories"
)]
struct Cli {
    /// The engine's events shown on stderr: off, error, warn, info
    /// (checkpoints, recovery progress), debug, trace; or a tracing filter
    /// such as `untorn=info` [default: warn; off for crashtest, whose
    /// injected faults make the engine report errors by design].
    #[arg(long, global = true)]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create a new database (like initdb).
    Init {
        /// The database directory (must not exist or be empty).
        dir: PathBuf,
        #[command(flatten)]
        settings: CreationArgs,
    },
    /// Print the control file (like pg_controldata).
    Inspect {
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What the file system and device under DIR say about torn writes:
    /// the sector, statx's atomic-write units, and whether a page is
    /// written untorn by the device, by a software fallback, or not.
    Probe {
        dir: PathBuf,
        /// The page size to judge [default: 8KB].
        #[arg(long, default_value = "8KB", value_parser = parse_size)]
        page_size: u64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print WAL records (like pg_waldump).
    Waldump {
        dir: PathBuf,
        /// First LSN to read (X/X); default: the oldest WAL on disk.
        #[arg(long)]
        start: Option<String>,
        /// Print totals per record kind instead of each record.
        #[arg(long)]
        stats: bool,
        /// Stop after this many records (at least 1).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        limit: Option<u64>,
    },
    /// Print the statistics saved at the last clean shutdown, in tables
    /// like PostgreSQL's pg_stat_wal, pg_stat_io and pg_stat_checkpointer.
    /// Reads the files only; says so when the figures are not current.
    Stats {
        dir: PathBuf,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Check every page of every data file (like pg_checksums --check).
    /// Exit status 1 if any page fails.
    Verify {
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Open the database in memory (recovering it as any opening does,
    /// with its checkpoints, and reading its SQL catalog, as `serve` does,
    /// but writing no byte to its directory), verify every page, and check the
    /// invariants of the workload whose tables it holds (tpcb: the four sums
    /// agree; sysbench: rows well formed, the k index matches the table).
    /// It opens with the database's own settings and changes nothing: a
    /// database found crashed stays crashed. Exit status 0 if all hold, 1 if a check fails, 3 if
    /// the database cannot be opened (or is open elsewhere). Tables made
    /// through `untorn serve` are read through its SQL catalog. Where no
    /// invariant could be checked, the last line says so instead of
    /// `check: ok` (exit status 0: nothing failed).
    Check(check::CheckArgs),
    /// Page checksum throughput per core: fnv, crc32c and a plain copy.
    BenchChecksums {
        /// Page size in bytes.
        #[arg(long, default_value = "8192", value_parser = parse_size)]
        page_size: u64,
        /// Seconds per case, split across its interleaved rounds (above 0,
        /// at most 3600).
        #[arg(long, default_value_t = 0.3)]
        seconds: f64,
    },
    /// The main job: compares torn-page protection modes (and any other
    /// setting given several values) on sysbench and pgbench workloads run
    /// by the embedded engine in a temporary directory: throughput and its
    /// ratios with 95 % intervals from interleaved rounds, latency, WAL and
    /// page I/O per transaction; tables, and an HTML report with plots.
    Bench(Box<bench::BenchArgs>),
    /// Rerun a seed's experiment: the seed's table beside ours, a verdict
    /// per claim, and an HTML report (`untorn study --list`).
    Study(study::StudyArgs),
    /// Serve a database over the PostgreSQL wire protocol, so pgbench,
    /// sysbench and psql drive it (SIGINT or SIGTERM shuts it down
    /// cleanly).
    Serve(Box<serve::ServeArgs>),
    /// The crash laboratory: simulated power loss with torn, dropped and
    /// reordered writes, checked by an oracle, per protection mode.
    Crashtest(crashtest::CrashTestArgs),
    /// The crash laboratory for real databases: the LD_PRELOAD recorder,
    /// and crash images from its log (driven by scripts/crash-external).
    #[command(subcommand)]
    Recording(recording::RecordingCommand),
    /// TPC-C over the PostgreSQL wire protocol, against PostgreSQL or
    /// `untorn serve`, or over MySQL's against MariaDB (a mysql:// URL):
    /// `load` the tables (COPY; MariaDB: INSERTs), `run` the mix (notpm,
    /// latencies, then conditions 1-4), `check` conditions 1-4.
    Tpcc(tpcc::TpccArgs),
    /// The process `bench --instrument instructions` counts under
    /// Callgrind: runs the job a JSON file describes (internal).
    #[command(hide = true)]
    InstructionsChild { job: std::path::PathBuf },
}

/// Settings fixed when a database is created.
#[derive(Args, Clone, Debug, Default)]
pub struct CreationArgs {
    /// Data page size: 4KB, 8KB, 16KB or 32KB [default: 8KB].
    #[arg(long, value_parser = parse_size)]
    page_size: Option<u64>,
    /// WAL block size: 1KB to 64KB, a power of two [default: 8KB].
    #[arg(long, value_parser = parse_size)]
    wal_block_size: Option<u64>,
    /// WAL segment size: a power of two, 1MB to 1GB [default: 16MB].
    #[arg(long, value_parser = parse_size)]
    wal_segment_size: Option<u64>,
    /// Data segment file size [default: 1GB].
    #[arg(long, value_parser = parse_size)]
    data_segment_size: Option<u64>,
    /// Page checksums: off, fnv or crc32c [default: crc32c].
    #[arg(long)]
    data_checksums: Option<String>,
    /// Torn-page protection: full_pages, double_writes, off, atomic (the
    /// device and kernel write each page whole: O_DIRECT + RWF_ATOMIC,
    /// refused where statx says they cannot) or auto (atomic where the
    /// hardware does it, else double_writes) [default: full_pages].
    #[arg(long)]
    torn_page_protection: Option<String>,
    /// The device sector to protect against: 512B to the page size, a power
    /// of two [default: the device's (the larger of its logical and
    /// physical block sizes), 4KB where it does not say].
    #[arg(long, value_parser = parse_size)]
    sector_size: Option<u64>,
}

impl CreationArgs {
    pub fn to_requested(&self) -> untorn::Result<RequestedCreationSettings> {
        let narrow = |name: &'static str, v: Option<u64>| -> untorn::Result<Option<u32>> {
            v.map(|v| {
                u32::try_from(v).map_err(|_| untorn::Error::InvalidSetting {
                    name,
                    detail: format!("{v} is out of range"),
                })
            })
            .transpose()
        };
        Ok(RequestedCreationSettings {
            page_size: narrow("page_size", self.page_size)?,
            wal_block_size: narrow("wal_block_size", self.wal_block_size)?,
            wal_segment_size: self.wal_segment_size,
            data_segment_size: self.data_segment_size,
            data_checksums: self
                .data_checksums
                .as_deref()
                .map(str::parse::<ChecksumAlgorithm>)
                .transpose()?,
            torn_page_protection: self
                .torn_page_protection
                .as_deref()
                .map(str::parse::<TornPageProtection>)
                .transpose()?,
            sector_size: narrow("sector_size", self.sector_size)?,
        })
    }
}

/// Where a bench or study keeps its databases: `dir`, or a temporary
/// directory removed when the returned guard drops.
fn work_dir(dir: Option<&PathBuf>) -> untorn::Result<(Option<tempfile::TempDir>, PathBuf)> {
    if let Some(d) = dir {
        return Ok((None, d.clone()));
    }
    let tmp =
        tempfile::tempdir().map_err(|e| untorn::Error::io("temporary directory", "mkdtemp", e))?;
    let path = tmp.path().to_path_buf();
    Ok((Some(tmp), path))
}

fn posix() -> Arc<dyn FileSystem> {
    Arc::new(PosixFileSystem::default())
}

fn run(cli: Cli) -> untorn::Result<ExitCode> {
    match cli.command {
        Command::Init { dir, settings } => {
            let settings = settings.to_requested()?.or_defaults();
            let (control, _lock) = untorn::db::directory::create(&posix(), &dir, settings)?;
            println!(
                "created database {} (page size {}, WAL block size {}, checksums {}, protection {})",
                dir.display(),
                control.settings.page_size,
                control.settings.wal_block_size,
                control.settings.data_checksums,
                control.settings.torn_page_protection
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect { dir, json } => inspect::run(posix().as_ref(), &dir, json),
        Command::Probe {
            dir,
            page_size,
            json,
        } => probe::run(&dir, u32::try_from(page_size).unwrap_or(u32::MAX), json),
        Command::Waldump {
            dir,
            start,
            stats,
            limit,
        } => waldump::run(posix(), &dir, start.as_deref(), stats, limit),
        Command::Verify { dir, json } => verify::run(posix().as_ref(), &dir, json),
        Command::Stats { dir, json } => stats::run(posix().as_ref(), &dir, json),
        Command::Check(args) => check::run(posix(), &args),
        Command::BenchChecksums { page_size, seconds } => {
            bench::checksums(page_size as usize, seconds)
        }
        Command::Bench(args) => bench::run(&args),
        Command::InstructionsChild { job } => instructions::child(&job),
        Command::Crashtest(args) => crashtest::run(&args),
        Command::Study(args) => study::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Recording(cmd) => recording::run(&cmd),
        Command::Tpcc(args) => tpcc::run(&args),
    }
}

/// Routes the engine's `tracing` events to stderr at `level`.
fn init_logging(level: &str) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .map_err(|e| format!("--log-level {level:?}: {e}"))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        end_quietly_when_stdout_closes();
    }
    let default_level = match cli.command {
        Command::Crashtest(_) => "off",
        _ => "warn",
    };
    if let Err(e) = init_logging(cli.log_level.as_deref().unwrap_or(default_level)) {
        eprintln!("untorn: error: {e}");
        return ExitCode::from(2);
    }
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("untorn: error: {e}");
            ExitCode::from(2)
        }
    }
}

/// A reader that stops reading (`untorn waldump DIR | head`) ends the
/// command as it ends cat or grep, by SIGPIPE: Rust ignores the signal,
/// so the next print panicked ("failed printing to stdout"). Not for the
/// server, which must outlive its clients and whose output is not stdout.
/// Sockets write with MSG_NOSIGNAL (std and mio on Linux), so a client
/// connection a command holds still fails as an error, not a signal.
fn end_quietly_when_stdout_closes() {
    // SAFETY: called first in main, before any thread: sets the default
    // disposition of one signal.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// A time in seconds on the command line (clap's value parser): finite
/// and above zero. NaN, a negative or an infinite time panicked in
/// `Duration::from_secs_f64`, or was silently clamped.
fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 1e7 => Ok(s),
        _ => Err(format!("{text:?} is not a number of seconds above 0")),
    }
}

/// [`seconds`], where zero is allowed too (a warm-up).
fn seconds_or_zero(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(0.0) => Ok(0.0),
        _ => seconds(text).map_err(|_| format!("{text:?} is not a number of seconds, 0 or above")),
    }
}

/// An on/off setting's value, refused naming the setting.
fn on_off(name: &'static str, value: &str) -> untorn::Result<bool> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(untorn::Error::InvalidSetting {
            name,
            detail: format!("{other:?}: use on or off"),
        }),
    }
}
