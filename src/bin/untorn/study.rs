//! `untorn study`: a seed's experiment rerun, its table beside ours.

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use untorn::lab::compare::Progress;
use untorn::lab::study::{self, render, Setup, Size};

#[derive(Args, Debug)]
pub struct StudyArgs {
    /// The study: dwb-vs-fpw, dw-eviction-cliff, checksums,
    /// sorted-checkpoint, wal-block-size.
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// List the studies and their seeds.
    #[arg(long)]
    list: bool,
    /// About three minutes on 2 cores: small data, 2 s runs, 3 rounds.
    #[arg(long)]
    quick: bool,
    /// For tests: a few seconds, to check the report's structure only.
    #[arg(long, hide = true, conflicts_with = "quick")]
    tiny: bool,
    /// Device model for the study's main comparisons (real, hdd, hdd-bbwc,
    /// sata-ssd, nvme, nvme-atomic) [default: the study's own choice].
    #[arg(long)]
    device: Option<String>,
    /// Write the HTML report into this directory [default: untorn-study-NAME].
    #[arg(long)]
    report: Option<PathBuf>,
    /// Where the databases go [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Seed of the clients' random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rounds per plan, instead of the size's own (quick: 3; full: whole
    /// order cycles until every ratio is within 3 %, at most 20 rounds or
    /// 20 minutes a plan). A full run with `--rounds 4` fits an hour.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=60))]
    rounds: Option<u64>,
    /// What stands in for DBT-2 in the studies whose seed ran it
    /// (dw-eviction-cliff, sorted-checkpoint, wal-block-size): tpcc
    /// (TPC-C, this laboratory's DBT-2) or tpcb (pgbench's transaction).
    #[arg(long, default_value = "tpcc", value_parser = ["tpcc", "tpcb"])]
    workload: String,
}

pub fn run(a: &StudyArgs) -> untorn::Result<ExitCode> {
    if a.list {
        for s in study::all() {
            println!(
                "{:<18} seed {}\n{:<18} {}\n",
                s.name(),
                s.seed_file(),
                "",
                s.summary()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = a.name.as_deref().unwrap_or_default();
    let s = study::by_name(name)?;
    if let Some(d) = &a.device {
        untorn::lab::device::DeviceProfile::by_name(d)?;
    }
    let (_tmp, dir) = crate::work_dir(a.dir.as_ref())?;
    let setup = Setup {
        size: if a.tiny {
            Size::Tiny
        } else if a.quick {
            Size::Quick
        } else {
            Size::Full
        },
        device: a.device.clone(),
        dir,
        seed: a.seed,
        rounds: a.rounds.map(|n| n as usize),
        stand_in: a.workload.clone(),
        // This binary counts the claims on instructions per transaction.
        instructions: std::env::current_exe().ok(),
    };
    let plans = s.plans(&setup)?;
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} {spinner} {msg}").expect("static template"),
    );
    let mut lines = crate::progress::Lines::new();
    let results = study::run(s, &setup, |title, p| {
        let ran = matches!(p, Progress::Ran { .. });
        match p {
            Progress::Loading { workload, .. } => {
                bar.set_message(format!("{title}: loading {workload}"))
            }
            Progress::Running {
                workload,
                config,
                repeat,
            } => bar.set_message(format!(
                "{title}: {workload}, configuration {} (round {})",
                config + 1,
                repeat + 1
            )),
            _ => bar.tick(),
        }
        lines.log_bar(&bar, None, ran);
    })?;
    bar.finish_and_clear();
    println!("{}", render::text(s, &results));
    let report_dir = a
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("untorn-study-{}", s.name())));
    let command_line = std::env::args().collect::<Vec<_>>().join(" ");
    let machine = format!(
        "{} ({} CPUs)",
        untorn::lab::checksum_bench::cpu_name(),
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let index = render::write_html(&report_dir, s, &plans, &results, &command_line, &machine)?;
    println!("Report: {}", index.display());
    Ok(ExitCode::SUCCESS)
}
