//! One iteration of the crash laboratory: its state and what it can do
//! (open, work, lose power, check), below the runner (run.rs), which
//! chooses its faults (faults.rs) and runs iterations by mode; and a
//! mode's loaded database ([`Base`]) that every iteration copies.

use super::oracle::Oracle;
use super::report::ModeReport;
use super::sim::{CrashConfig, SimFileSystem, SimImage};
use super::step_clock::StepClock;
use super::tripwire::TripwireFs;
use super::workload::{self, observe, Stop, Tables};
use super::{CrashTestOptions, Fault};
use crate::clock::Clock;
use crate::db::{Database, Options};
use crate::error::Result;
use crate::file::FileSystem;
use crate::file::IoStats;
use crate::rng::SplitMix64;
use crate::settings::TornPageProtection;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// Where the database lives in the simulation.
pub const DB_DIR: &str = "/crashlab/db";

pub(crate) fn db_dir() -> &'static Path {
    Path::new(DB_DIR)
}

pub(crate) fn data_dir() -> PathBuf {
    db_dir().join(crate::db::directory::DATA_DIR)
}

/// The engine's settings for a laboratory database: small buffer pool (so
/// pages are evicted, written without fsync, between checkpoints; see
/// [`CrashTestOptions::pool_pages`]), small
/// WAL segments, no automatic checkpoint (the workload calls them, so an
/// iteration replays exactly: an iteration's engine runs on a
/// [`StepClock`], whose time moves only in the naps of a spread checkpoint
/// the iteration runs itself, which end before `checkpoint_timeout`); for
/// the same reason the background writer's rounds are run by the workload.
pub fn db_options(opts: &CrashTestOptions, mode: TornPageProtection) -> Options {
    let mut o = Options::default();
    o.creation.torn_page_protection = Some(mode);
    o.creation.data_checksums = Some(opts.data_checksums);
    o.creation.page_size = Some(opts.page_size);
    o.creation.wal_segment_size = Some(1 << 20);
    o.buffer_pool_size = opts.pool_pages() * opts.page_size as u64;
    o.checkpoint_timeout = Duration::from_secs(10);
    o.clock = Clock::new(Arc::new(StepClock::default()));
    o.max_wal_size = 1 << 40;
    // The background writer's thread never runs a round: its delay (10 s
    // of the StepClock) is longer than the time a stepped checkpoint
    // moves. The workload runs rounds itself, at chosen points.
    o.bgwriter_delay = Duration::from_secs(10);
    o.wal_compression = opts.wal_compression;
    // A small double-write area (12 blocks per shard, 2 pages per batch
    // header): calls of up to 4 pages, two batches each, so that slots
    // are reused, and freed by data-file fsyncs, within an iteration.
    o.double_write_buffer_size = 12 * opts.page_size as u64;
    o.double_write_batch_pages = 2;
    // Writers fsync data files themselves before reusing a slot: a
    // syncer thread's timing would make an iteration replay differently.
    o.double_write_sync_ahead = false;
    o.double_write_defer_in_place = opts.double_write_defer_in_place;
    o.double_write_keep_deferred = opts.double_write_keep_deferred;
    // dw/deferred written out in pieces of 4 pages before its fsync, so
    // that crashes and faults land between pieces.
    o.double_write_flush_after = 4;
    o
}

/// A mode's loaded database, closed cleanly, and what it holds.
pub struct Base {
    pub image: SimImage,
    pub oracle: Oracle,
    pub next_tag: u64,
    pub options: Options,
}

impl Base {
    pub fn create(opts: &CrashTestOptions, mode: TornPageProtection) -> Result<Base> {
        let stats = Arc::new(IoStats::default());
        let sim = SimFileSystem::new(stats.clone());
        sim.set_trace_enabled(false);
        // The engine probes the sector at creation, as on a real device.
        sim.set_sector_size(opts.sector_size as u32);
        sim.set_atomic_unit(opts.atomic_unit());
        let options = db_options(opts, mode);
        let db = Database::create_with(Arc::new(sim.clone()), stats, db_dir(), options.clone())?;
        let mut rng = SplitMix64::new(opts.seed ^ 0xBA5E ^ mode.code() as u64);
        let tags = AtomicU64::new(1);
        let oracle = workload::load(&db, opts.threads, &mut rng, &tags)?;
        db.close()?;
        Ok(Base {
            image: sim.snapshot_durable(),
            oracle,
            next_tag: tags.load(SeqCst),
            options,
        })
    }
}

/// Damage the engine may only detect, not repair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// A torn page, with no torn-page protection.
    Torn,
    BitFlip,
    Misdirect,
}

/// One iteration in progress.
pub struct Iteration<'a> {
    pub opts: &'a CrashTestOptions,
    pub mode: TornPageProtection,
    pub base: &'a Base,
    pub rng: SplitMix64,
    pub stats: Arc<IoStats>,
    pub sim: SimFileSystem,
    pub fs: TripwireFs,
    pub oracle: Oracle,
    pub tags: AtomicU64,
    pub crash_cfg: CrashConfig,
    /// This iteration's counts (merged into the mode's).
    pub c: ModeReport,
    /// Damage was injected that the engine may only detect, not repair
    /// (torn pages without protection, a bit flip, a misdirected write):
    /// errors naming a page are then expected, not failures.
    pub damage: Option<Damage>,
    /// A write was lost (misdirected): stale rows count as its doing.
    pub lost_write: bool,
    /// The next recovery's power cut, after this many calls (chosen by a
    /// scenario instead of at random).
    pub recovery_power_cut: Option<u64>,
    /// The engine's clock: spread checkpoints take turns with the workload.
    pub clock: Arc<StepClock>,
    /// The options of the next opening: the base's, but for the torn-page
    /// protection a `switch` asks for.
    pub options: Options,
    /// A recovery asked for the other protection mode (`switch`): the
    /// iteration then works and crashes once more under it.
    pub switched: bool,
    /// The scenario chose the protection of the openings to come
    /// (`atomic_refused`): `switch` asks for no other.
    pub protection_fixed: bool,
    /// What happened, step by step (reported with a failure).
    pub events: Vec<String>,
    /// Failures found on the way that do not end the iteration at once
    /// (its check still runs, to show what they cost).
    pub deferred: Vec<String>,
}

/// Outcome of an iteration: `Err` describes the failure.
pub type Outcome = std::result::Result<(), String>;

impl<'a> Iteration<'a> {
    pub(super) fn new(
        opts: &'a CrashTestOptions,
        mode: TornPageProtection,
        base: &'a Base,
        seed: u64,
    ) -> Self {
        let mut rng = SplitMix64::new(seed);
        let stats = Arc::new(IoStats::default());
        let sim = SimFileSystem::from_image(base.image.clone(), stats.clone());
        sim.set_sector_size(opts.sector_size as u32);
        sim.set_atomic_unit(opts.atomic_unit());
        let fs = TripwireFs::new(sim.clone(), db_dir());
        let lossy = opts.has(Fault::Drop) || opts.has(Fault::Reorder);
        let keep = if lossy {
            0.3 + 0.5 * rng.next_f64()
        } else {
            1.0
        };
        let crash_cfg = CrashConfig {
            sector_size: opts.sector_size,
            // Under `atomic` only what the engine writes with RWF_ATOMIC is
            // whole: the rest tears at sectors, so the run proves it asks
            // for every page write it needs whole.
            atomic_page_writes: (opts.atomic_page_writes && mode != TornPageProtection::Atomic)
                .then_some((opts.page_size as usize).max(opts.sector_size)),
            keep_probability: keep,
            drop_probability: if lossy { 1.0 - keep } else { 0.0 },
            tear_probability: if opts.has(Fault::Tear) {
                0.2 + 0.4 * rng.next_f64()
            } else {
                0.0
            },
            zero_sector_probability: if opts.has(Fault::Zero) { 0.05 } else { 0.0 },
            eio_sector_probability: if opts.has(Fault::Unreadable) {
                0.05
            } else {
                0.0
            },
        };
        Iteration {
            opts,
            mode,
            base,
            rng,
            stats,
            sim,
            fs,
            oracle: base.oracle.clone(),
            tags: AtomicU64::new(base.next_tag),
            crash_cfg,
            c: ModeReport::default(),
            damage: None,
            lost_write: false,
            recovery_power_cut: None,
            clock: Arc::new(StepClock::default()),
            options: base.options.clone(),
            switched: false,
            protection_fixed: false,
            deferred: Vec::new(),
            events: Vec::new(),
        }
    }

    pub(super) fn save_trace(
        &self,
        opts: &CrashTestOptions,
        mode: TornPageProtection,
        i: u64,
    ) -> Option<PathBuf> {
        let dir = opts.trace_dir.clone().unwrap_or_else(std::env::temp_dir);
        let path = dir.join(format!(
            "untorn-crashtest-{mode}-seed{}-iter{i}.json",
            opts.seed
        ));
        self.sim.save_trace(&path).ok().map(|()| path)
    }

    /// Opens the database on the simulation.
    pub fn open(&self) -> Result<Database> {
        let fs: Arc<dyn FileSystem> = Arc::new(self.fs.clone());
        let options = Options {
            clock: Clock::new(self.clock.clone()),
            ..self.options.clone()
        };
        Database::open_with(fs, self.stats.clone(), db_dir(), options)
    }

    /// The plain iteration: the workload, the power cut somewhere, the crash.
    pub(crate) fn power_cut(&mut self, db: Database, t: &Tables) -> Outcome {
        let txns = 10 + self.rng.below(50);
        let plan = self.rng.below(100);
        if plan < 50 {
            let cut = self.rng.below(3 * txns + 10);
            self.event(format!(
                "workload of {txns} transactions, power cut after {cut} calls"
            ));
            self.sim.update_faults(|f| f.power_cut_after = Some(cut));
            self.phase(&db, t, txns, 0.05)?;
        } else {
            self.event(format!("workload of {txns} transactions"));
            self.phase(&db, t, txns, 0.03)?;
            if plan < 70 {
                let cut = self.rng.below(40);
                self.event(format!("checkpoint, power cut after {cut} calls"));
                self.sim.update_faults(|f| f.power_cut_after = Some(cut));
                let res = db.checkpoint();
                self.event(format!("checkpoint: {res:?}"));
                self.c.crashes_in_checkpoint += self.power_is_cut() as u64;
            } else if plan < 85 {
                let (skip, then) = (self.rng.below(6), self.rng.below(2));
                self.event(format!("checkpoint, power cut at step {skip} (+{then}) of the control file's replacement"));
                self.fs.arm(skip, then);
                let res = db.checkpoint();
                self.event(format!("checkpoint: {res:?}"));
                let fired = self.fs.disarm();
                self.c.crashes_in_control_file += (fired && self.power_is_cut()) as u64;
            } else if plan < 95 {
                let cut = self.rng.below(60);
                self.event(format!(
                    "spread checkpoint with commits between its naps, power cut after {cut} calls"
                ));
                self.sim.update_faults(|f| f.power_cut_after = Some(cut));
                self.spread_checkpoint(&db, t)?;
                self.c.crashes_in_checkpoint += self.power_is_cut() as u64;
            }
        }
        self.crash(Some(db));
        Ok(())
    }

    /// A checkpoint spread over its target while the workload commits in
    /// its naps, one transaction in three naps (taking strict turns, so the
    /// iteration replays exactly).
    pub(super) fn spread_checkpoint(&mut self, db: &Database, t: &Tables) -> Outcome {
        let clock = self.clock.clone();
        clock.begin();
        let mut outcome = Ok(());
        let (mut naps, mut commits) = (0u64, 0u64);
        let result = std::thread::scope(|s| {
            let checkpoint = s.spawn(|| {
                let r = db.checkpoint_spread();
                clock.finish();
                r
            });
            while clock.wait_turn() {
                naps += 1;
                if outcome.is_ok() && !self.power_is_cut() && self.rng.below(3) == 0 {
                    commits += 1;
                    outcome = self.phase(db, t, 1, 0.0);
                }
                clock.resume();
            }
            checkpoint.join().expect("the checkpoint thread")
        });
        self.event(format!(
            "spread checkpoint: {naps} naps, {commits} transactions between them: {:?}",
            result.as_ref().map(|c| (c.pages_written, c.total_s))
        ));
        outcome
    }

    /// Notes a step of the iteration.
    pub fn event(&mut self, what: String) {
        if self.events.len() < 40 {
            self.events.push(what);
        }
    }

    pub fn power_is_cut(&self) -> bool {
        self.sim.faults().power_cut_after == Some(0)
    }

    /// Runs the workload; an error with the power on, or a wrong read, fails.
    pub fn phase(&mut self, db: &Database, t: &Tables, txns: u64, ckpt: f64) -> Outcome {
        let end = workload::run_phase(
            db,
            t,
            &mut self.oracle,
            &mut self.rng,
            &self.tags,
            txns,
            ckpt,
        );
        self.c.commits_acknowledged += end.commits;
        self.event(format!(
            "{} commits, {} checkpoints, stops: {:?}",
            end.commits, end.checkpoints, end.stops
        ));
        self.settle(end.stops, |it, error| {
            if it.power_is_cut() {
                Ok(())
            } else {
                Err(format!("error with the power on: {error}"))
            }
        })
    }

    /// Goes through how the workload's parts stopped: a wrong read fails;
    /// an error counts its commit in flight and is then judged by `expected`
    /// (which says what is wrong with it, if anything).
    pub fn settle(
        &mut self,
        stops: Vec<(usize, Stop)>,
        mut expected: impl FnMut(&mut Self, &crate::error::Error) -> Outcome,
    ) -> Outcome {
        for (part, stop) in stops {
            match stop {
                Stop::Wrong(w) => return Err(format!("part {part}: a live read was wrong: {w}")),
                Stop::Error {
                    error, in_flight, ..
                } => {
                    self.c.commits_in_flight += in_flight as u64;
                    expected(self, &error).map_err(|what| format!("part {part}: {what}"))?;
                }
            }
        }
        Ok(())
    }

    /// An error naming a page where damage was allowed: data lost,
    /// detected. Anything else fails.
    pub fn detected(&mut self, what: String) -> Outcome {
        if self.damage.is_some() && what.contains("block") {
            self.c.torn_pages_detected += (self.damage == Some(Damage::Torn)) as u64;
            self.example(what);
            Ok(())
        } else {
            Err(what)
        }
    }

    pub(crate) fn example(&mut self, what: String) {
        if self.c.examples_of_detected_loss.len() < 3 {
            self.c.examples_of_detected_loss.push(what);
        }
    }

    /// The oracle's check. `Ok(false)`: reads refused, naming damage that
    /// was allowed (the iteration ends there).
    pub fn check(&mut self, db: &Database) -> std::result::Result<bool, String> {
        let obs = match observe(db, &self.oracle) {
            Ok(obs) => obs,
            Err(e) => return self.detected(format!("reading back: {e}")).map(|()| false),
        };
        let v = self.oracle.check(&obs);
        self.c.in_flight_survived += v.in_flight_kept;
        self.c.rows_lost_detected += v.unreadable;
        let lost = v.lost_commits.len() as u64;
        if self.lost_write {
            self.c.faults.commits_lost_to_lost_writes += lost;
            self.c.faults.rows_wrong_after_lost_write += v.silent.len() as u64;
        } else {
            self.c.lost_commits += lost;
            self.c.silent_corruptions += v.silent.len() as u64;
            if !v.ok() {
                return Err(format!(
                    "the oracle found {lost} lost commits, {} silently wrong rows and {} commits \
                     there that the caller was told failed: {}",
                    v.silent.len(),
                    v.refused_present.len(),
                    v.details.join("; ")
                ));
            }
        }
        if !obs.complete() {
            let what = format!(
                "{} rows unreadable: {}",
                v.unreadable,
                obs.errors.join("; ")
            );
            if self.damage.is_none() {
                return Err(what);
            }
            self.example(what);
            return Ok(false);
        }
        Ok(true)
    }

    /// Closes cleanly and checks every page.
    pub fn close_and_verify(&mut self, db: Database) -> Outcome {
        db.close().map_err(|e| format!("closing: {e}"))?;
        let report = crate::verify::verify_database(&self.sim, db_dir())
            .map_err(|e| format!("verify: {e}"))?;
        if !report.ok() {
            if self.damage.is_some() {
                return Ok(());
            }
            let fails: Vec<String> = report
                .failures
                .iter()
                .take(4)
                .map(|f| f.to_string())
                .collect();
            return Err(format!("verify after recovery: {}", fails.join("; ")));
        }
        Ok(())
    }
}
