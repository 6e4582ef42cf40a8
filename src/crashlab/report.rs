//! What a crash test found, per mode: the JSON shape (`--json`) and the
//! table `untorn crashtest` prints.

use super::batches::BatchCrashes;
use super::CrashTestOptions;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use std::path::PathBuf;

/// A failing iteration: enough to replay it alone.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Failure {
    pub iteration: u64,
    /// The iteration's own seed (derived from the run's seed).
    pub iteration_seed: u64,
    /// What went wrong, in words.
    pub what: String,
    /// What the iteration did up to there, step by step.
    pub events: Vec<String>,
    /// The command that runs this iteration alone.
    pub replay: String,
    /// The saved trace of the simulated calls, if it could be written.
    pub trace: Option<PathBuf>,
}

/// How each fault switch fared in one mode.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FaultCounts {
    /// fsyncs made to fail; after how many of them the engine stopped (no
    /// later commit acknowledged).
    pub fsync_failures: u64,
    pub engine_stopped: u64,
    /// The same per kind of file whose fsync failed (wal, data, control).
    pub fsync_failures_by_file: std::collections::BTreeMap<String, u64>,
    pub engine_stopped_by_file: std::collections::BTreeMap<String, u64>,
    /// Disk-full errors raised; how many reached the caller as a clear
    /// error; after how many work went on once space returned, and after
    /// how many only after reopening.
    pub disk_full: u64,
    pub disk_full_clear_errors: u64,
    pub disk_full_continued: u64,
    pub disk_full_reopened: u64,
    /// Bits flipped in pages at rest; how many `verify` caught, naming the
    /// file and block; how many reads then refused.
    pub bit_flips: u64,
    pub bit_flips_detected: u64,
    pub bit_flips_read_errors: u64,
    /// Misdirected page writes; how many left a page at the wrong block that
    /// `verify` caught; how many were overwritten by the right page before
    /// anyone could see them (then only the intended block is stale: a lost
    /// write, which no checksum can see).
    pub misdirected_writes: u64,
    pub misdirected_detected: u64,
    pub misdirected_overwritten: u64,
    /// Acknowledged commits whose rows a stale (lost-write) block lost,
    /// and rows read wrong after it: what a lost write costs.
    pub commits_lost_to_lost_writes: u64,
    pub rows_wrong_after_lost_write: u64,
    /// Sectors (tearing units) that read back as zeros or failed reads
    /// after a crash; of those in the WAL, how many had held the same
    /// bytes as the write (a rewrite of bytes written before). Any commit
    /// they cost is a lost commit: the WAL writer never rewrites a sector
    /// holding durable WAL.
    pub sectors_zeroed: u64,
    pub sectors_unreadable: u64,
    pub wal_sectors_with_durable_data_lost: u64,
    /// Processes killed with the page cache kept (each followed, after a
    /// restart that recovered and worked, by a power loss).
    pub process_crashes: u64,
    /// Openings after a crash that asked for the other torn-page
    /// protection; power cuts during them; and switches that completed
    /// (the opening ran with the new mode recorded).
    pub protection_switches: u64,
    pub crashes_in_switch: u64,
    pub switches_recorded: u64,
    /// Switches recorded, by direction ("off -> double_writes").
    pub switches_by_direction: std::collections::BTreeMap<String, u64>,
    /// Panics injected inside the engine (`panic`), by point; after how
    /// many of them the engine refused the next commit (required after
    /// those in the WAL).
    pub panics: u64,
    pub panics_by_point: std::collections::BTreeMap<String, u64>,
    pub engine_stopped_after_panic: u64,
    /// RWF_ATOMIC refused at run time (`atomic_refused`), and after how
    /// many the engine refused the next commit (all must).
    pub atomic_refusals: u64,
    pub atomic_refusals_stopped: u64,
}

/// Everything one protection mode went through.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ModeReport {
    pub mode: String,
    /// Why the mode was not run ("refused: ..."), if it was not.
    pub note: Option<String>,
    pub iterations: u64,
    pub elapsed_s: f64,
    /// Power losses: one per iteration, plus those during recovery.
    pub crashes: u64,
    pub crashes_in_recovery: u64,
    pub crashes_in_checkpoint: u64,
    pub crashes_in_control_file: u64,
    /// Crashes that struck a double-write batch, by phase.
    pub crashes_in_double_write_batch: BatchCrashes,
    pub commits_acknowledged: u64,
    /// Commits in flight at a crash, and how many of those survived.
    pub commits_in_flight: u64,
    pub in_flight_survived: u64,
    /// Torn writes to data files, and the pages they left torn (neither
    /// the old nor the new bytes).
    pub torn_data_writes: u64,
    pub torn_pages_injected: u64,
    /// Of the pages torn, how many failed the checks a read makes right
    /// after the crash (before recovery): checksum and header, and an
    /// all-zero page inside the file (a sector zeroed can leave one).
    pub torn_pages_caught_by_checksum: u64,
    /// Pages recovery restored from full images in the WAL, and the damaged
    /// pages among them.
    pub pages_restored_from_images: u64,
    /// Of the images restored, those stored compressed (`wal_compression`).
    pub compressed_images_restored: u64,
    pub pages_repaired_from_wal: u64,
    /// Pages recovery restored from the double-write area: damaged ones,
    /// and good ones no newer than their copy (an in-place write lost).
    pub pages_repaired_from_double_writes: u64,
    /// Of those, the damaged ones: the table's column.
    pub damaged_pages_repaired_from_double_writes: u64,
    /// Of those, from `dw/deferred` slots a manifest named below the redo
    /// point (pages kept deferred across a checkpoint).
    pub pages_repaired_below_redo: u64,
    /// Manifests of `dw/deferred` recoveries passed over (their fsync not
    /// known to have returned): how often crashes hit that window.
    pub manifests_passed_over: u64,
    /// Pages checkpoints wrote back from `dw/deferred` in openings that
    /// then lost power (a shutdown's write-back not included): how much
    /// of the write-back path the crashes reached.
    pub deferred_pages_written_back: u64,
    /// Damaged pages the engine reported and could not repair (recovery
    /// stopped naming the page, or reads refused it): data lost, detected.
    pub torn_pages_detected: u64,
    /// Rows the engine refused to read back after such a report.
    pub rows_lost_detected: u64,
    /// What the engine said about the first few of those losses.
    pub examples_of_detected_loss: Vec<String>,
    /// Acknowledged commits missing without any error: must be 0.
    pub lost_commits: u64,
    /// Rows read without error that no commit wrote: must be 0.
    pub silent_corruptions: u64,
    pub faults: FaultCounts,
    /// Failing iterations (all counted, the first few kept).
    pub failed_iterations: u64,
    pub failures: Vec<Failure>,
}

impl ModeReport {
    /// True if the mode ran and no iteration failed.
    pub fn passed(&self) -> bool {
        self.note.is_none() && self.failed_iterations == 0
    }

    /// Iterations per second.
    pub fn rate(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.iterations as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    /// Share of torn pages the checksum caught, if any were torn.
    pub fn detection_rate(&self) -> Option<f64> {
        (self.torn_pages_injected > 0)
            .then(|| self.torn_pages_caught_by_checksum as f64 / self.torn_pages_injected as f64)
    }
}

/// Adds one iteration's counts to the mode's.
pub(crate) fn merge(m: &mut ModeReport, it: &ModeReport) {
    let pairs: [(&mut u64, u64); 21] = [
        (&mut m.crashes, it.crashes),
        (&mut m.crashes_in_recovery, it.crashes_in_recovery),
        (&mut m.crashes_in_checkpoint, it.crashes_in_checkpoint),
        (&mut m.crashes_in_control_file, it.crashes_in_control_file),
        (&mut m.commits_acknowledged, it.commits_acknowledged),
        (&mut m.commits_in_flight, it.commits_in_flight),
        (&mut m.in_flight_survived, it.in_flight_survived),
        (&mut m.torn_data_writes, it.torn_data_writes),
        (&mut m.torn_pages_injected, it.torn_pages_injected),
        (
            &mut m.torn_pages_caught_by_checksum,
            it.torn_pages_caught_by_checksum,
        ),
        (
            &mut m.pages_restored_from_images,
            it.pages_restored_from_images,
        ),
        (
            &mut m.compressed_images_restored,
            it.compressed_images_restored,
        ),
        (&mut m.pages_repaired_from_wal, it.pages_repaired_from_wal),
        (
            &mut m.pages_repaired_from_double_writes,
            it.pages_repaired_from_double_writes,
        ),
        (
            &mut m.damaged_pages_repaired_from_double_writes,
            it.damaged_pages_repaired_from_double_writes,
        ),
        (
            &mut m.pages_repaired_below_redo,
            it.pages_repaired_below_redo,
        ),
        (&mut m.manifests_passed_over, it.manifests_passed_over),
        (
            &mut m.deferred_pages_written_back,
            it.deferred_pages_written_back,
        ),
        (&mut m.torn_pages_detected, it.torn_pages_detected),
        (&mut m.rows_lost_detected, it.rows_lost_detected),
        (&mut m.lost_commits, it.lost_commits),
    ];
    for (a, b) in pairs {
        *a += b;
    }
    m.silent_corruptions += it.silent_corruptions;
    m.crashes_in_double_write_batch
        .add(&it.crashes_in_double_write_batch);
    let (f, g) = (&mut m.faults, &it.faults);
    let pairs: [(&mut u64, u64); 25] = [
        (&mut f.process_crashes, g.process_crashes),
        (&mut f.protection_switches, g.protection_switches),
        (&mut f.crashes_in_switch, g.crashes_in_switch),
        (&mut f.switches_recorded, g.switches_recorded),
        (&mut f.fsync_failures, g.fsync_failures),
        (&mut f.engine_stopped, g.engine_stopped),
        (&mut f.disk_full, g.disk_full),
        (&mut f.disk_full_clear_errors, g.disk_full_clear_errors),
        (&mut f.disk_full_continued, g.disk_full_continued),
        (&mut f.disk_full_reopened, g.disk_full_reopened),
        (&mut f.bit_flips, g.bit_flips),
        (&mut f.bit_flips_detected, g.bit_flips_detected),
        (&mut f.bit_flips_read_errors, g.bit_flips_read_errors),
        (&mut f.misdirected_writes, g.misdirected_writes),
        (&mut f.misdirected_detected, g.misdirected_detected),
        (&mut f.misdirected_overwritten, g.misdirected_overwritten),
        (
            &mut f.commits_lost_to_lost_writes,
            g.commits_lost_to_lost_writes,
        ),
        (
            &mut f.rows_wrong_after_lost_write,
            g.rows_wrong_after_lost_write,
        ),
        (&mut f.sectors_zeroed, g.sectors_zeroed),
        (&mut f.panics, g.panics),
        (
            &mut f.engine_stopped_after_panic,
            g.engine_stopped_after_panic,
        ),
        (&mut f.atomic_refusals, g.atomic_refusals),
        (&mut f.atomic_refusals_stopped, g.atomic_refusals_stopped),
        (&mut f.sectors_unreadable, g.sectors_unreadable),
        (
            &mut f.wal_sectors_with_durable_data_lost,
            g.wal_sectors_with_durable_data_lost,
        ),
    ];
    for (a, b) in pairs {
        *a += b;
    }
    for (k, n) in &g.fsync_failures_by_file {
        *f.fsync_failures_by_file.entry(k.clone()).or_default() += n;
    }
    for (k, n) in &g.panics_by_point {
        *f.panics_by_point.entry(k.clone()).or_default() += n;
    }
    for (k, n) in &g.switches_by_direction {
        *f.switches_by_direction.entry(k.clone()).or_default() += n;
    }
    for (k, n) in &g.engine_stopped_by_file {
        *f.engine_stopped_by_file.entry(k.clone()).or_default() += n;
    }
    for e in &it.examples_of_detected_loss {
        if m.examples_of_detected_loss.len() < 5 {
            m.examples_of_detected_loss.push(e.clone());
        }
    }
}

/// The whole run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CrashTestReport {
    pub options: CrashTestOptions,
    /// The miss rate the page checksum is expected to have on a torn page
    /// (about 1 in 65,535 for 16-bit fnv, 1 in 2^32 for crc32c).
    pub expected_checksum_miss_rate: f64,
    pub modes: Vec<ModeReport>,
}

impl CrashTestReport {
    /// True if every mode that ran passed (modes not built do not fail).
    pub fn passed(&self) -> bool {
        self.modes
            .iter()
            .all(|m| m.note.is_some() || m.failed_iterations == 0)
    }
}

/// Called after each iteration.
#[derive(Clone, Copy, Debug)]
pub struct Progress<'a> {
    pub mode: &'a str,
    pub done: u64,
    pub total: u64,
    pub failed: u64,
}

fn num(n: u64) -> Cell {
    Cell::new(n).set_alignment(CellAlignment::Right)
}

/// The per-mode table, then a line per note and per failure kept.
pub fn table(report: &CrashTestReport) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec![
        "mode",
        "crashes",
        "torn pages injected",
        "damaged pages repaired from WAL images",
        "damaged pages repaired from double writes",
        "damaged pages detected, not repaired",
        "lost commits",
        "silent corruptions",
        "verdict",
    ]);
    for m in &report.modes {
        if let Some(note) = &m.note {
            t.add_row(vec![Cell::new(&m.mode), Cell::new(note)]);
            continue;
        }
        t.add_row(vec![
            Cell::new(&m.mode),
            num(m.crashes),
            num(m.torn_pages_injected),
            num(m.pages_repaired_from_wal),
            num(m.damaged_pages_repaired_from_double_writes),
            num(m.torn_pages_detected),
            num(m.lost_commits),
            num(m.silent_corruptions),
            Cell::new(verdict(m)),
        ]);
    }
    let mut out = t.to_string();
    out.push('\n');
    // A pass where data was lost means the loss was detected, not
    // prevented: said once under the table, not left to the reader.
    if report.modes.iter().any(|m| verdict(m) == LOST_DETECTED) {
        out.push_str(&format!(
            "{LOST_DETECTED}: no acknowledged commit lost silently and no wrong row read, but damaged pages \
             were lost and reported by name (detected, not prevented: the mode repairs nothing)\n"
        ));
    }
    for m in &report.modes {
        match &m.note {
            Some(note) => out.push_str(&format!("{}: {note}\n", m.mode)),
            None => out.push_str(&mode_lines(m, report.expected_checksum_miss_rate)),
        }
    }
    out
}

/// The verdict of a mode that passed having lost data.
const LOST_DETECTED: &str = "pass, loss detected";

fn verdict(m: &ModeReport) -> &'static str {
    if !m.passed() {
        "FAIL"
    } else if m.torn_pages_detected > 0 || m.rows_lost_detected > 0 {
        LOST_DETECTED
    } else {
        "pass"
    }
}

fn mode_lines(m: &ModeReport, expected_miss: f64) -> String {
    let mut s = format!(
        "{}: {} iterations in {:.1} s ({:.0}/s); {} commits acknowledged; {} in flight at a crash, {} survived whole; \
         crashes in recovery {}, in a checkpoint {}, in the control file's replacement {}; \
         {} pages restored from WAL images ({} compressed)\n",
        m.mode,
        m.iterations,
        m.elapsed_s,
        m.rate(),
        m.commits_acknowledged,
        m.commits_in_flight,
        m.in_flight_survived,
        m.crashes_in_recovery,
        m.crashes_in_checkpoint,
        m.crashes_in_control_file,
        m.pages_restored_from_images,
        m.compressed_images_restored,
    );
    if let Some(rate) = m.detection_rate() {
        let missed = m.torn_pages_injected - m.torn_pages_caught_by_checksum;
        s.push_str(&format!(
            "  torn pages caught by the checks of a read (checksum, header, all-zero page): {}/{} ({:.4}%), {missed} missed; the checksum's expected miss rate about {:.2e}\n",
            m.torn_pages_caught_by_checksum,
            m.torn_pages_injected,
            rate * 100.0,
            expected_miss
        ));
    }
    let restored = m.pages_repaired_from_double_writes;
    if restored > 0 {
        s.push_str(&format!(
            "  pages restored from double writes: {restored}, {} of them damaged (torn or corrupt); the rest \
             were missing (all zeros, past the file's end) or older than their copy: an in-place write the \
             crash dropped or never made\n",
            m.damaged_pages_repaired_from_double_writes
        ));
    }
    let b = &m.crashes_in_double_write_batch;
    if b.any() {
        s.push_str(&format!(
            "  crashes in a double-write batch: {} after the area write (before its fsync), {} after its fsync \
             (before the in-place writes), {} during the in-place writes\n",
            b.after_area_write, b.after_area_fsync, b.during_in_place_writes
        ));
    }
    if m.pages_repaired_below_redo > 0 {
        s.push_str(&format!(
            "  repaired from double writes below the redo point (pages kept in dw/deferred across a checkpoint, \
             named by its manifest): {}\n",
            m.pages_repaired_below_redo
        ));
    }
    if m.manifests_passed_over > 0 {
        s.push_str(&format!(
            "  manifests of dw/deferred passed over by recovery (a slot not yet durable, written after the \
             control file's redo point): {}\n",
            m.manifests_passed_over
        ));
    }
    if m.deferred_pages_written_back > 0 {
        s.push_str(&format!(
            "  pages written back from dw/deferred by checkpoints of openings that then crashed: {}\n",
            m.deferred_pages_written_back
        ));
    }
    if m.torn_pages_detected > 0 || m.rows_lost_detected > 0 {
        s.push_str(&format!(
            "  data lost, detected: {} damaged pages reported by name, {} rows refused on read\n",
            m.torn_pages_detected, m.rows_lost_detected
        ));
        for e in &m.examples_of_detected_loss {
            s.push_str(&format!("    e.g. {e}\n"));
        }
    }
    let f = &m.faults;
    if f.process_crashes > 0 {
        s.push_str(&format!(
            "  processes killed with the page cache kept, then a restart and a power loss: {}\n",
            f.process_crashes
        ));
    }
    if f.protection_switches > 0 {
        let by: Vec<String> = f
            .switches_by_direction
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        s.push_str(&format!(
            "  protection switches: {} asked, {} crashes during them, {} recorded ({})\n",
            f.protection_switches,
            f.crashes_in_switch,
            f.switches_recorded,
            by.join(", ")
        ));
    }
    if f.panics > 0 {
        let by: Vec<String> = f
            .panics_by_point
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        s.push_str(&format!(
            "  panics: {} injected ({}), engine stopped after {}\n",
            f.panics,
            by.join(", "),
            f.engine_stopped_after_panic
        ));
    }
    if f.atomic_refusals > 0 {
        s.push_str(&format!(
            "  RWF_ATOMIC refused at run time: {}, engine stopped after {}\n",
            f.atomic_refusals, f.atomic_refusals_stopped
        ));
    }
    if f.fsync_failures > 0 {
        let by: Vec<String> = f
            .fsync_failures_by_file
            .iter()
            .map(|(k, n)| {
                format!(
                    "{k} {}/{n}",
                    f.engine_stopped_by_file.get(k).copied().unwrap_or(0)
                )
            })
            .collect();
        s.push_str(&format!(
            "  fsync EIO: {} injected, engine stopped after {} (stopped/failed per file: {})\n",
            f.fsync_failures,
            f.engine_stopped,
            by.join(", ")
        ));
    }
    if f.disk_full > 0 {
        s.push_str(&format!(
            "  ENOSPC: {} hit, {} clear errors, work went on after {} ({} after reopening)\n",
            f.disk_full, f.disk_full_clear_errors, f.disk_full_continued, f.disk_full_reopened
        ));
    }
    if f.bit_flips > 0 {
        s.push_str(&format!(
            "  bit flips: {} injected, {} caught by verify (file and block named), {} refused on read\n",
            f.bit_flips, f.bit_flips_detected, f.bit_flips_read_errors
        ));
    }
    if f.misdirected_writes > 0 {
        s.push_str(&format!(
            "  misdirected writes: {} injected, {} caught by verify at the wrong block, {} overwritten before seen; \
             {} commits lost to the stale intended block (a lost write)\n",
            f.misdirected_writes, f.misdirected_detected, f.misdirected_overwritten, f.commits_lost_to_lost_writes
        ));
    }
    if f.sectors_zeroed + f.sectors_unreadable > 0 {
        s.push_str(&format!(
            "  damaged sectors: {} read back as zeros, {} unreadable; {} in the WAL had held durable bytes\n",
            f.sectors_zeroed, f.sectors_unreadable, f.wal_sectors_with_durable_data_lost
        ));
    }
    for fail in &m.failures {
        s.push_str(&format!(
            "  FAILED iteration {} (seed {}): {}\n    replay: {}\n",
            fail.iteration, fail.iteration_seed, fail.what, fail.replay
        ));
        if let Some(p) = &fail.trace {
            s.push_str(&format!("    trace: {}\n", p.display()));
        }
    }
    if m.failed_iterations > m.failures.len() as u64 {
        s.push_str(&format!(
            "  ... and {} more failed iterations\n",
            m.failed_iterations - m.failures.len() as u64
        ));
    }
    s
}
