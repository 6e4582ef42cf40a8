//! `untorn recording`: the external crash laboratory's tools
//! (src/crashlab/external/, docs/RELIABILITY.md "External systems"). The
//! recorder library to preload, and crash images from a recording;
//! `scripts/crash-external` drives them against a real server.

use clap::Subcommand;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use untorn::crashlab::external::images::{self, Cuts, Plan};
use untorn::crashlab::external::{log::Log, recorder};
use untorn::Error;

#[derive(Subcommand, Debug)]
pub enum RecordingCommand {
    /// Build the recorder (LD_PRELOAD library) into DIR with the system's
    /// C compiler, once per source, and print its path.
    Recorder { dir: PathBuf },
    /// Replay LOG onto SNAPSHOT: check the whole replay against LIVE (the
    /// directory after the recorded processes were killed), then write
    /// crash images under OUT and OUT/images.json. The summary, with every
    /// unrecorded change, is printed as JSON.
    Images {
        /// A copy of the directory taken before the recorded run (durable).
        snapshot: PathBuf,
        /// The recorder's log.
        log: PathBuf,
        /// The directory the recorded processes left.
        live: PathBuf,
        /// Where the images go (created; must be empty or absent).
        out: PathBuf,
        /// How many images.
        #[arg(long, default_value_t = 50)]
        images: usize,
        /// The first image's number (each image's choices come from the
        /// seed and its number: `--first K --images 1` rebuilds image K).
        #[arg(long, default_value_t = 0)]
        first: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Sector writes tear at: 512 or 4096; 0 builds untorn control
        /// images (each pending write kept or dropped whole).
        #[arg(long, default_value_t = 512)]
        sector: u64,
        /// Where cuts fall: random, before-sync (a sync about to start with
        /// writes pending) or mixed.
        #[arg(long, default_value = "mixed")]
        cuts: Cuts,
        /// Leave out the whole replay's comparison with LIVE (done once
        /// per recording; later batches of images skip it).
        #[arg(long)]
        skip_replay_check: bool,
    },
}

/// An I/O error's context: the path and what was being done.
fn at<'a>(path: &'a Path, op: &'static str) -> impl Fn(std::io::Error) -> Error + 'a {
    move |e| Error::io(path, op, e)
}

pub fn run(cmd: &RecordingCommand) -> untorn::Result<ExitCode> {
    match cmd {
        RecordingCommand::Recorder { dir } => {
            let lib = recorder::build(dir).map_err(|e| Error::io(dir, "build the recorder", e))?;
            println!("{}", lib.display());
        }
        RecordingCommand::Images {
            snapshot,
            log,
            live,
            out,
            images,
            first,
            seed,
            sector,
            cuts,
            skip_replay_check,
        } => {
            if out.exists()
                && std::fs::read_dir(out)
                    .map_err(at(out, "read the directory"))?
                    .next()
                    .is_some()
            {
                return Err(Error::InvalidSetting {
                    name: "OUT",
                    detail: format!("{} is not empty", out.display()),
                });
            }
            std::fs::create_dir_all(out).map_err(at(out, "create the directory"))?;
            let log = Log::read(log).map_err(at(log, "read the recorder's log"))?;
            let check = if *skip_replay_check {
                None
            } else {
                Some(
                    images::check_replay(snapshot, &log, live)
                        .map_err(at(live, "replay the log against the live directory"))?,
                )
            };
            let plan = Plan {
                first: *first,
                images: *images,
                seed: *seed,
                tear_sector: (*sector != 0).then_some(*sector),
                cuts: *cuts,
            };
            let listing = images::build_images(snapshot, &log, out, plan)
                .map_err(at(out, "write the images"))?;
            let summary = serde_json::json!({
                "replay": check, "plan": plan, "images": listing.len(),
                "listing": out.join("images.json"),
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&summary).expect("JSON of plain values")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
