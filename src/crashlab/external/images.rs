//! A campaign's crash images from one recording: the replay checked
//! against the live directory, then N images at seeded cuts, each written
//! out with what its crash did, for the system's own oracle to judge.

use super::image::{self, CrashCounts, Faults};
use super::log::{Log, Op};
use super::replay::Model;
use crate::rng::SplitMix64;
use std::io::{Error, Result};
use std::path::{Path, PathBuf};

/// Where the cuts fall.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cuts {
    /// Anywhere in the log, uniformly.
    Random,
    /// Just before a sync starts while writes to its file are pending:
    /// between a WAL write and its fsync, inside a checkpoint's writes,
    /// where a power loss has the most to tear.
    BeforeSync,
    /// Every other image each way.
    Mixed,
}

impl std::str::FromStr for Cuts {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Cuts, String> {
        match s {
            "random" => Ok(Cuts::Random),
            "before-sync" => Ok(Cuts::BeforeSync),
            "mixed" => Ok(Cuts::Mixed),
            _ => Err(format!("{s:?}: cuts are random, before-sync or mixed")),
        }
    }
}

/// What to build.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Plan {
    /// The first image's number: images `first..first + images` are
    /// built, each from its own seeded choices, so any one can be rebuilt
    /// alone (`--first K --images 1`).
    pub first: usize,
    pub images: usize,
    pub seed: u64,
    /// The sector writes tear at (512 or 4096); `None`: untorn images,
    /// each pending write kept or dropped whole (the control).
    pub tear_sector: Option<u64>,
    pub cuts: Cuts,
}

/// The whole log replayed with nothing dropped, against the live
/// directory: every difference is a change the recorder did not see.
#[derive(Debug, serde::Serialize)]
pub struct ReplayCheck {
    pub records: usize,
    pub log_bytes: usize,
    pub cut_short: bool,
    pub unplaced: Vec<String>,
    pub unrecorded: Vec<String>,
}

/// One image as written.
#[derive(Debug, serde::Serialize)]
pub struct ImageEntry {
    pub image: PathBuf,
    /// Records replayed before the power loss.
    pub cut: usize,
    pub records: usize,
    /// The time (ns, the recorder's clock) of the first record not
    /// replayed: a commit acknowledged before it must survive.
    pub cut_time_ns: u64,
    /// Whether the cut was placed before a sync ([`Cuts::BeforeSync`]).
    pub before_sync: bool,
    pub faults: Faults,
    pub crash: CrashCounts,
}

pub fn check_replay(snapshot: &Path, log: &Log, live: &Path) -> Result<ReplayCheck> {
    let mut model = Model::from_snapshot(snapshot, log)?;
    model.replay_to(log.records.len());
    let unrecorded = image::live_view(&model).diff(live)?;
    Ok(ReplayCheck {
        records: log.records.len(),
        log_bytes: log.bytes.len(),
        cut_short: log.cut_short,
        unplaced: model.unplaced,
        unrecorded,
    })
}

/// The records a [`Cuts::BeforeSync`] cut may fall at: each sync record
/// (it is logged before the sync starts, so a cut there loses the sync)
/// that follows a write not yet synced by an earlier one.
pub fn sync_cut_points(log: &Log) -> Vec<usize> {
    let mut out = Vec::new();
    let mut writes_since_sync = false;
    for (i, r) in log.records.iter().enumerate() {
        match r.op {
            Op::Write | Op::Truncate | Op::Fallocate => writes_since_sync = true,
            Op::Fsync | Op::Fdatasync | Op::Syncfs | Op::Sync if writes_since_sync => {
                out.push(i);
                writes_since_sync = false;
            }
            _ => {}
        }
    }
    out
}

/// Writes `plan.images` images under `out` (image000, image001, ...,
/// numbered from `plan.first`) and `out/images.json` listing them; each
/// image is deterministic in the seed and its number.
pub fn build_images(snapshot: &Path, log: &Log, out: &Path, plan: Plan) -> Result<Vec<ImageEntry>> {
    if let Some(s) = plan.tear_sector {
        if s != 512 && s != 4096 {
            return Err(Error::other(format!(
                "a sector is 512 or 4096 bytes, not {s}"
            )));
        }
    }
    let total = log.records.len();
    let syncs = sync_cut_points(log);
    // Each image's choices (its cut, then its crash) come from its own
    // rng; the images are then built in cut order, so the snapshot is read
    // once and the log replayed once for them all.
    let mut planned: Vec<(usize, usize, bool, SplitMix64)> = (plan.first..plan.first + plan.images)
        .map(|i| {
            let mut rng =
                SplitMix64::new(plan.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let at_sync = match plan.cuts {
                Cuts::Random => false,
                Cuts::BeforeSync => true,
                Cuts::Mixed => i % 2 == 1,
            } && !syncs.is_empty();
            let cut = if at_sync {
                syncs[rng.below(syncs.len() as u64) as usize]
            } else {
                rng.below(total as u64 + 1) as usize
            };
            (i, cut, at_sync, rng)
        })
        .collect();
    planned.sort_by_key(|p| (p.1, p.0));
    let faults = Faults {
        tear: plan.tear_sector.is_some(),
        sector: plan.tear_sector.unwrap_or(512),
    };
    let mut model = Model::from_snapshot(snapshot, log)?;
    let mut listing = Vec::new();
    for (i, cut, at_sync, mut rng) in planned {
        model.replay_to(cut);
        let (img, crash) = image::crash(&model, faults, &mut rng);
        let dir = out.join(format!("image{i:03}"));
        img.write_to(&dir)?;
        listing.push(ImageEntry {
            image: dir,
            cut,
            records: total,
            cut_time_ns: log.records.get(cut).map_or(u64::MAX, |r| r.time_ns),
            before_sync: at_sync,
            faults,
            crash,
        });
    }
    listing.sort_by(|a, b| a.image.cmp(&b.image));
    let json = serde_json::to_string_pretty(&listing).map_err(Error::other)?;
    std::fs::write(out.join("images.json"), json)?;
    Ok(listing)
}

#[cfg(test)]
mod tests {
    use super::{sync_cut_points, Cuts};
    use crate::crashlab::external::log::{Log, Op, Record};

    fn log_of(ops: &[Op]) -> Log {
        let rec = |op| Record {
            op,
            flags: 0,
            pid: 1,
            tid: 1,
            fd: 3,
            time_ns: 0,
            ino: (0, 0),
            offset: 0,
            length: 0,
            aux: 0,
            path: String::new(),
            path2: String::new(),
            data: 0..0,
        };
        Log {
            bytes: Vec::new(),
            records: ops.iter().map(|&op| rec(op)).collect(),
            cut_short: false,
        }
    }

    #[test]
    fn sync_cuts_fall_on_syncs_that_have_writes_to_lose() {
        use Op::*;
        let log = log_of(&[
            Open, Fsync, Write, Fsync, Fsync, Write, Write, Fdatasync, Truncate, Syncfs, Close,
        ]);
        assert_eq!(sync_cut_points(&log), vec![3, 7, 9]);
        assert!(sync_cut_points(&log_of(&[Open, Fsync, Close])).is_empty());
    }

    #[test]
    fn cuts_parse_from_their_names() {
        assert_eq!("mixed".parse::<Cuts>(), Ok(Cuts::Mixed));
        assert_eq!("before-sync".parse::<Cuts>(), Ok(Cuts::BeforeSync));
        assert!("sometimes".parse::<Cuts>().is_err());
    }
}
