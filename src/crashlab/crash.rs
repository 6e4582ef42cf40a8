//! The crash itself, the count of the pages it tore, and the recovery
//! after it (crashed again itself now and then).
//!
//! A page counts as torn when its bytes after the crash are none of the
//! versions it could have had whole: its durable bytes before the crash,
//! or what a write since its file's last fsync gave it (the
//! [`TripwireFs`](super::tripwire::TripwireFs) keeps those writes). Each
//! torn page is then checked as a read would check it (checksum, header, and
//! an all-zero page inside the file refused): the share caught is the
//! detection rate.

use super::batches;
use super::iteration::{data_dir, Damage, Iteration, DB_DIR};
use super::sim::TraceKind;
use super::Fault;
use crate::control::ControlFile;
use crate::db::Database;
use crate::file::segmented::parse_segment_name;
use crate::file::FileSystem;
use crate::page::{verify_page, PageState};
use crate::settings::{ChecksumAlgorithm, TornPageProtection};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl Iteration<'_> {
    /// Loses power now (the database, if given, is dropped after).
    pub fn crash(&mut self, db: Option<Database>) {
        let tearing = self.crash_cfg.tear_probability > 0.0;
        let durable = if tearing {
            self.durable_data()
        } else {
            BTreeMap::new()
        };
        let writes = self.fs.take_pending_writes();
        self.count_batches_in_flight();
        let report = self.sim.crash(self.rng.next_u64(), &self.crash_cfg);
        if let Some(db) = &db {
            let checkpointer = db.statistics().double_write.checkpointer;
            self.c.deferred_pages_written_back += checkpointer.written_back;
        }
        drop(db);
        self.c.crashes += 1;
        self.event(format!(
            "crash (seed {}): writes kept {}, dropped {}, torn {} ({:?}), sectors zeroed {}; directory operations lost {}",
            report.seed, report.writes_kept, report.writes_dropped, report.writes_torn, report.torn_writes, report.sectors_zeroed, report.dir_ops_lost
        ));
        let data = data_dir();
        self.c.faults.sectors_zeroed += report.sectors_zeroed;
        self.c.faults.sectors_unreadable += report.sectors_eio;
        let wal = Path::new(DB_DIR).join(crate::db::directory::WAL_DIR);
        let mut unreadable_pages = BTreeSet::new();
        let ps = self.opts.page_size as u64;
        for u in &report.damaged_units {
            if u.path.starts_with(&wal) && u.durable_data_lost {
                // Not an excuse: the oracle still counts every commit lost.
                self.c.faults.wal_sectors_with_durable_data_lost += 1;
                self.event(format!("WAL bytes durable before lost: {u:?}"));
            }
            if u.path.starts_with(&data) && u.unreadable {
                unreadable_pages.insert((u.path.clone(), u.offset / ps));
            }
        }
        let torn: Vec<_> = report
            .torn_writes
            .iter()
            .filter(|t| t.path.starts_with(&data))
            .collect();
        self.c.torn_data_writes += torn.len() as u64;
        let mut pages = BTreeSet::new();
        for t in torn {
            for p in t.offset / ps..=(t.offset + t.len - 1) / ps {
                pages.insert((t.path.clone(), p));
            }
        }
        // Judged by the mode the next recovery runs under: the control
        // file's, which a switch may have changed.
        let off = self.mode_on_disk() == TornPageProtection::Off;
        let settings = self.base.options.creation.or_defaults();
        let per_segment = settings.pages_per_data_segment();
        for (path, p) in pages {
            let Some(after) = self.sim.live_bytes(&path) else {
                continue;
            };
            let (lo, hi) = ((p * ps) as usize, ((p + 1) * ps) as usize);
            let page_of = |img: &[u8]| -> Vec<u8> {
                let mut v = img.get(lo..hi.min(img.len())).unwrap_or(&[]).to_vec();
                v.resize(ps as usize, 0);
                v
            };
            let now = page_of(&after);
            // Torn: bytes no version of the page ever held (the durable one,
            // or one a write since the last fsync gave it).
            let mut versions = vec![page_of(durable.get(&path).map_or(&[][..], |d| &d[..]))];
            for (offset, bytes) in writes.get(&path).into_iter().flatten() {
                let (start, end) = (*offset as usize, *offset as usize + bytes.len());
                if start <= lo && end >= hi {
                    versions.push(bytes[lo - start..hi - start].to_vec());
                }
            }
            // A page with an unreadable sector is damaged whatever its bytes.
            let unreadable = unreadable_pages.contains(&(path.clone(), p));
            if versions.contains(&now) && !unreadable {
                continue;
            }
            self.c.torn_pages_injected += 1;
            if off {
                self.damage.get_or_insert(Damage::Torn);
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if let Some((file_id, segment)) = parse_segment_name(name) {
                let block = (segment * per_segment + p) as u32;
                // As a read checks it: the checksum and header, and an
                // all-zero page inside the file is refused as a lost write.
                let caught = unreadable
                    || !matches!(
                        verify_page(&now, settings.data_checksums, file_id, block),
                        Ok(PageState::Valid)
                    );
                self.c.torn_pages_caught_by_checksum += caught as u64;
            }
        }
    }

    /// Counts the double-write batches the power cut strikes, by phase
    /// (from the calls since the last crash or process kill).
    fn count_batches_in_flight(&mut self) {
        let ps = self.opts.page_size as u64;
        let per_header = self.options.double_write_batch_pages as u64;
        let at = self.sim.with_trace(|trace| {
            let since = trace
                .iter()
                .rposition(|o| matches!(o.op, TraceKind::Crash | TraceKind::ProcessCrash))
                .map_or(0, |i| i + 1);
            batches::at_crash(&trace[since..], ps, per_header)
        });
        self.c.crashes_in_double_write_batch.add(&at);
    }

    /// Kills the process (kill -9): it makes no call after this, and the
    /// page cache keeps its unsynced writes for the next run to read and a
    /// later power loss to drop or tear.
    pub fn kill(&mut self, db: Database) {
        // The dying process's last calls (its drop's WAL flush) fail.
        self.sim.update_faults(|f| f.power_cut_after = Some(0));
        drop(db);
        self.sim.process_crash();
        self.c.faults.process_crashes += 1;
        let (writes, dir_ops) = self.sim.pending_ops();
        self.event(format!(
            "process killed: {writes} writes and {dir_ops} directory operations not yet durable stay in the page cache"
        ));
    }

    /// How many file-layer calls opening the database makes now, counted
    /// on a copy of the simulation (the iteration's own is not touched).
    pub fn calls_to_open(&self) -> u64 {
        let trial = self.sim.fork();
        let before = trial.op_count();
        let fs: Arc<dyn FileSystem> = Arc::new(trial.clone());
        let db = Database::open_with(
            fs,
            self.stats.clone(),
            Path::new(DB_DIR),
            self.options.clone(),
        );
        let calls = trial.op_count() - before;
        drop(db);
        calls
    }

    /// Every data file's durable bytes.
    fn durable_data(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let files = self.sim.list_dir(&data_dir()).unwrap_or_default();
        files
            .into_iter()
            .filter_map(|p| Some((p.clone(), self.sim.durable_bytes(&p)?)))
            .collect()
    }

    /// Reopens after a crash, crashing recovery itself now and then (also
    /// while it replaces the control file). `None`: the engine refused to
    /// open, naming damage it was allowed to only detect.
    pub fn recover(&mut self) -> std::result::Result<Option<Database>, String> {
        let switching = self.maybe_switch(true);
        for attempt in 0.. {
            if attempt > 0 && attempt < 3 && switching {
                // Again, or back from where the last crash left it.
                self.maybe_switch(false);
            }
            let from = self.mode_on_disk();
            if let Some(cut) = self.recovery_power_cut.take() {
                self.event(format!("recovery, power cut after {cut} calls"));
                self.sim.update_faults(|f| f.power_cut_after = Some(cut));
            } else if attempt < 3 && self.rng.chance(0.25) {
                if self.rng.chance(0.3) {
                    let (skip, then) = (self.rng.below(6), self.rng.below(2));
                    self.event(format!("recovery, power cut at step {skip} (+{then}) of the control file's replacement"));
                    self.fs.arm(skip, then);
                } else {
                    let cut = self.rng.below(40);
                    self.event(format!("recovery, power cut after {cut} calls"));
                    self.sim.update_faults(|f| f.power_cut_after = Some(cut));
                }
            }
            let res = self.open();
            self.fs.disarm();
            let cut = self.power_is_cut();
            match res {
                Ok(db) if !cut => {
                    self.sim.update_faults(|f| f.power_cut_after = None);
                    let now = db.settings().torn_page_protection;
                    if now != from {
                        self.c.faults.switches_recorded += 1;
                        *self
                            .c
                            .faults
                            .switches_by_direction
                            .entry(format!("{from} -> {now}"))
                            .or_default() += 1;
                        self.event(format!("switched from {from} to {now}"));
                    }
                    if now != self.mode_on_disk() {
                        return Err(format!(
                            "the database runs with {now} but its control file records {}",
                            self.mode_on_disk()
                        ));
                    }
                    return self.recovered(db).map(Some);
                }
                Ok(db) => self.crash(Some(db)),
                Err(_) if cut => self.crash(None),
                Err(e) => return self.detected(format!("reopening: {e}")).map(|()| None),
            }
            self.c.crashes_in_recovery += 1;
            if switching && self.options.creation.torn_page_protection != Some(from) {
                self.c.faults.crashes_in_switch += 1;
            }
        }
        unreachable!("the loop returns")
    }

    /// The protection mode the database's control file records now (the
    /// base's if it cannot be read).
    pub fn mode_on_disk(&self) -> TornPageProtection {
        let path = ControlFile::path(Path::new(DB_DIR));
        let bytes = self.sim.live_bytes(&path).unwrap_or_default();
        ControlFile::decode(&bytes, &path).map_or(self.mode, |c| c.settings.torn_page_protection)
    }

    /// With `switch`, now and then asks the next opening for the other
    /// protection mode than the control file's, and (`first`: at the first
    /// attempt; else half the time) cuts the power at any of that
    /// opening's calls. True if it asked.
    fn maybe_switch(&mut self, first: bool) -> bool {
        if self.protection_fixed || !self.opts.has(Fault::Switch) || !self.rng.chance(0.5) {
            return false;
        }
        // Any other mode: into and out of each, double writes included
        // (which needs page checksums).
        let from = self.mode_on_disk();
        let checksums = self.opts.data_checksums != ChecksumAlgorithm::Off;
        // `atomic` where the device has atomic writes.
        let to: Vec<TornPageProtection> = TornPageProtection::STORED
            .into_iter()
            .filter(|&m| m != from && (checksums || m != TornPageProtection::DoubleWrites))
            .filter(|&m| self.opts.atomic_page_writes || m != TornPageProtection::Atomic)
            .collect();
        let to = to[self.rng.below(to.len() as u64) as usize];
        self.options.creation.torn_page_protection = Some(to);
        self.switched = true;
        self.c.faults.protection_switches += 1;
        let cut = self.recovery_power_cut.is_none() && (first || self.rng.chance(0.5));
        if cut && self.rng.chance(0.7) {
            // Any call; half the time one of the last third, where the
            // end-of-recovery checkpoint and the switch itself write.
            let calls = self.calls_to_open().max(1);
            let from = if self.rng.chance(0.5) {
                calls * 2 / 3
            } else {
                0
            };
            self.recovery_power_cut = Some(from + self.rng.below(calls - from));
        }
        self.event(format!("reopening with torn_page_protection {to}"));
        true
    }

    fn recovered(&mut self, db: Database) -> std::result::Result<Database, String> {
        let r = &db.recovery;
        self.events.push(format!(
            "recovered: redo {}..{} ({}), {} records, {} commits, {} images restored, damaged pages repaired {:?}, left {:?}",
            r.redo_start, r.redo_end, r.end_reason, r.records_replayed, r.commits_replayed,
            r.pages_restored_from_images, r.damaged_pages_repaired, r.damaged_pages_left
        ));
        self.c.pages_restored_from_images += r.pages_restored_from_images;
        self.c.compressed_images_restored += r.compressed_images_restored;
        self.c.pages_repaired_from_wal += r.damaged_pages_repaired.len() as u64;
        self.c.pages_repaired_from_double_writes += r.pages_repaired_from_double_writes;
        self.c.pages_repaired_below_redo += r.pages_repaired_below_redo;
        self.c.damaged_pages_repaired_from_double_writes +=
            r.damaged_pages_repaired_from_double_writes;
        self.c.manifests_passed_over += r.double_write_manifests_passed_over;
        if !r.damaged_pages_left.is_empty() {
            let left = r.damaged_pages_left.join(", ");
            if self.damage != Some(Damage::Torn) {
                return Err(format!("recovery left damaged pages: {left}"));
            }
            self.c.torn_pages_detected += r.damaged_pages_left.len() as u64;
            self.example(format!(
                "recovery reported damaged pages it could not repair: {left}"
            ));
        }
        Ok(db)
    }
}
