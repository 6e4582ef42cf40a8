//! The crash laboratory: the real engine on a simulated file system
//! ([`sim`], behind the engine's file traits), crashed thousands of times,
//! each time checked by an oracle that knows every commit it was told about.
//!
//! One *iteration* (deterministic from the seed, the mode and its number):
//! 1. a copy of a loaded database (created once per mode, kept as a
//!    [`SimImage`](sim::SimImage)) is opened on a fresh
//!    simulated file system;
//! 2. a workload ([`workload`]: bank transfers with a constant total,
//!    inserts, updates and deletes of rows whose bytes check themselves)
//!    runs until the power is cut: after a random number of calls, inside a
//!    checkpoint, or around the replacement of the control file
//!    ([`tripwire`]); sometimes an extra fault strikes instead ([`faults`]:
//!    fsync EIO, ENOSPC, a bit flip at rest, a misdirected write);
//! 3. the crash keeps, drops or tears each pending write (the fault list
//!    decides which), recovery runs (sometimes crashed again itself), and the
//!    [`oracle`] checks: every acknowledged commit there with its values,
//!    the one in flight entirely or not at all, nothing else, the sum of the
//!    balances, and every page verifies.
//!
//! A failing iteration gives its seed, the command that replays it alone
//! and the saved trace of the simulated calls. With one workload thread (the
//! default) an iteration replays exactly; with more, the interleaving of the
//! threads differs from run to run.
//!
//! The laboratory knows nothing of particular protection modes: it asks the
//! engine to create a database in each mode it is given, reports "not
//! built" where the engine refuses, and holds every mode other than `off`
//! to "every torn page repaired". With the `switch` fault a database
//! changes mode: a crash is then judged by the mode its control file
//! records, the one the next recovery runs under.

pub mod batches;
mod crash;
pub mod external;
pub mod faults;
pub mod iteration;
pub mod oracle;
pub mod panics;
pub mod report;
pub mod run;
pub mod sim;
pub mod step_clock;
pub mod tripwire;
pub mod workload;

pub use report::{table, CrashTestReport, Failure, ModeReport, Progress};
pub use run::run;

use crate::error::{Error, Result};
use crate::file::FileKind;
use crate::settings::{ChecksumAlgorithm, TornPageProtection, WalCompression};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A fault the laboratory may inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// A pending write may be lost at the crash.
    Drop,
    /// Pending writes persist independently of their order (a later one
    /// kept, an earlier one lost).
    Reorder,
    /// A pending write may persist in part: each sector old or new.
    Tear,
    /// An fsync fails with EIO: the engine must stop, and lose nothing
    /// acknowledged.
    Eio,
    /// A data file or the WAL runs out of space: a clear error, no
    /// corruption, and work goes on once space returns.
    Enospc,
    /// A bit of a data page flips at rest: the checksum must catch it.
    Bitflip,
    /// A data page write lands on another block: the address in the page
    /// header (and the checksum) must catch it.
    Misdirect,
    /// With `tear`: a sector a torn write left old reads back as zeros
    /// (odds 1 in 20), whatever it held before, acknowledged WAL included.
    Zero,
    /// With `tear`: a sector a torn write left old fails reads with EIO
    /// (odds 1 in 20) until it is written again.
    Unreadable,
    /// The process dies (kill -9) but the OS page cache survives: its
    /// unsynced writes stay readable and may still vanish or tear. The next
    /// run recovers and works, then the power fails.
    ProcessCrash,
    /// A restart asks for another torn-page protection (any of `off`,
    /// `full_pages` and `double_writes` other than the control file's;
    /// `double_writes` only with page checksums), the power is cut at any
    /// call of that opening
    /// now and then, the next opening switches again or back, and the
    /// database then works under the new mode and loses power again.
    Switch,
    /// A panic inside the engine's critical sections: between a WAL
    /// reservation and its copy, at a WAL write or fsync (a flush
    /// leader's), at a data, double-write or control file write. The
    /// caller's call fails; after one in the WAL the engine must refuse
    /// every commit; then the power fails and nothing acknowledged may be
    /// missing.
    Panic,
    /// Under `atomic` (with `--atomic-page-writes`): the device stops
    /// taking RWF_ATOMIC writes mid-workload (EOPNOTSUPP). The engine must
    /// stop with a fatal error naming the unit and the file; after the
    /// power cut, the opening asking for `double_writes` must recover
    /// every acknowledged commit.
    AtomicRefused,
}

impl Fault {
    /// Every fault, in documentation order.
    pub const ALL: [Fault; 13] = [
        Fault::Drop,
        Fault::Reorder,
        Fault::Tear,
        Fault::Eio,
        Fault::Enospc,
        Fault::Bitflip,
        Fault::Misdirect,
        Fault::Zero,
        Fault::Unreadable,
        Fault::ProcessCrash,
        Fault::Switch,
        Fault::Panic,
        Fault::AtomicRefused,
    ];
    /// Every fault of power loss and storage, the laboratory's list before
    /// the engine's own panics and refusals joined it: replays of seeds
    /// found then draw with it.
    pub const POWER_AND_STORAGE: [Fault; 11] = [
        Fault::Drop,
        Fault::Reorder,
        Fault::Tear,
        Fault::Eio,
        Fault::Enospc,
        Fault::Bitflip,
        Fault::Misdirect,
        Fault::Zero,
        Fault::Unreadable,
        Fault::ProcessCrash,
        Fault::Switch,
    ];
    /// The faults of a plain `untorn crashtest`.
    pub const DEFAULT: [Fault; 4] = [
        Fault::Drop,
        Fault::Reorder,
        Fault::Tear,
        Fault::ProcessCrash,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Drop => "drop",
            Fault::Reorder => "reorder",
            Fault::Tear => "tear",
            Fault::Eio => "eio",
            Fault::Enospc => "enospc",
            Fault::Bitflip => "bitflip",
            Fault::Misdirect => "misdirect",
            Fault::Zero => "zero",
            Fault::Unreadable => "unreadable",
            Fault::ProcessCrash => "process_crash",
            Fault::Switch => "switch",
            Fault::Panic => "panic",
            Fault::AtomicRefused => "atomic_refused",
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Fault {
    type Err = Error;
    fn from_str(s: &str) -> Result<Fault> {
        let s = s.trim();
        Fault::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
                Error::Invalid(format!(
                    "unknown fault {s:?}: the faults are {}",
                    names.join(", ")
                ))
            })
    }
}

/// Parses a comma-separated fault list (`drop,reorder,tear`); `none` or an
/// empty list means no fault (every write issued before the crash
/// survives). Duplicates are ignored; the result is sorted.
pub fn parse_faults(list: &str) -> Result<Vec<Fault>> {
    if list.trim().is_empty() {
        // It ran without faults, as `none` does, with nothing said.
        return Err(Error::Invalid(
            "no fault named: list faults, or none for crashes alone".into(),
        ));
    }
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item.eq_ignore_ascii_case("none") {
            continue;
        }
        out.push(item.parse::<Fault>()?);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Parses a comma-separated list of protection modes; `all` means every
/// mode the engine names.
pub fn parse_protections(list: &str) -> Result<Vec<TornPageProtection>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if item == "all" {
            out.extend(all_protections());
        } else {
            out.push(item.parse()?);
        }
    }
    out.dedup();
    Ok(out)
}

/// Parses the files `eio` fails (`wal,data,control`).
pub fn parse_file_kinds(list: &str) -> Result<Vec<FileKind>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let kind = [FileKind::Wal, FileKind::Data, FileKind::Control]
            .into_iter()
            .find(|k| k.name() == item)
            .ok_or_else(|| {
                Error::Invalid(format!("unknown file kind {item:?}: wal, data or control"))
            })?;
        if !out.contains(&kind) {
            out.push(kind);
        }
    }
    Ok(out)
}

/// Every protection mode a database can be in but `atomic`, which needs
/// an atomic device (`--atomic-page-writes`, [`CrashTestOptions::for_device`]).
pub fn all_protections() -> Vec<TornPageProtection> {
    TornPageProtection::STORED
        .into_iter()
        .filter(|m| *m != TornPageProtection::Atomic)
        .collect()
}

/// What `untorn crashtest` runs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CrashTestOptions {
    /// The modes tested, each on its own database (default: every mode).
    pub protections: Vec<TornPageProtection>,
    /// Iterations (each one crash, sometimes two or three) per mode.
    pub iterations: u64,
    /// The first iteration's number: `--first-iteration I --iterations 1`
    /// replays iteration `I` alone.
    pub first_iteration: u64,
    pub seed: u64,
    /// The device's sector size: 512 (pages tear) or 4096.
    pub sector_size: usize,
    /// The device writes whole pages atomically (as ZFS, or SSDs with
    /// atomic-write support, do): a torn write tears only between pages.
    /// statx then reports an atomic unit of a page, so `atomic` runs; under
    /// `atomic` only the writes made with RWF_ATOMIC are whole, the rest
    /// tear at sectors.
    pub atomic_page_writes: bool,
    pub faults: Vec<Fault>,
    pub data_checksums: ChecksumAlgorithm,
    /// 4096 or 8192 tear on 512-byte sectors.
    pub page_size: u32,
    /// Workload threads (default 1, which replays exactly).
    pub threads: usize,
    /// Where failing iterations save their traces (default: the system's
    /// temporary directory).
    pub trace_dir: Option<PathBuf>,
    /// At most this many failures are kept per mode (all are counted).
    pub max_failures_kept: usize,
    /// The files whose fsync `eio` makes fail (default: WAL, data and
    /// control files).
    pub eio_targets: Vec<FileKind>,
    /// Buffer pool frames; `None`: [`CrashTestOptions::pool_pages`]'s choice.
    pub buffer_pool_pages: Option<u64>,
    /// `wal_compression` of every opening (default off): recovery then
    /// restores compressed page images.
    pub wal_compression: WalCompression,
    /// `double_write_defer_in_place` of every opening (default on, as the
    /// engine's): pages
    /// written through the area go in place only when their slots are
    /// reused, and recovery restores those a crash left only in the area.
    pub double_write_defer_in_place: bool,
    /// `double_write_keep_deferred` of every opening (default on, as the
    /// engine's): deferred pages stay across checkpoints, and recovery
    /// restores them from their manifest below the redo point.
    pub double_write_keep_deferred: bool,
}

impl Default for CrashTestOptions {
    fn default() -> Self {
        CrashTestOptions {
            protections: all_protections(),
            iterations: 1000,
            first_iteration: 0,
            seed: 1,
            sector_size: 512,
            atomic_page_writes: false,
            faults: Fault::DEFAULT.to_vec(),
            data_checksums: ChecksumAlgorithm::Crc32c,
            page_size: 8192,
            threads: 1,
            trace_dir: None,
            max_failures_kept: 20,
            eio_targets: vec![FileKind::Wal, FileKind::Data, FileKind::Control],
            buffer_pool_pages: None,
            wal_compression: WalCompression::Off,
            double_write_defer_in_place: true,
            double_write_keep_deferred: true,
        }
    }
}

impl CrashTestOptions {
    /// The atomic write unit the simulated device reports: a page with
    /// `atomic_page_writes`, else none.
    pub fn atomic_unit(&self) -> Option<u32> {
        self.atomic_page_writes.then_some(self.page_size)
    }

    /// Every mode this device can run: `atomic` too on an atomic device.
    pub fn for_device(mut self) -> Self {
        if self.atomic_page_writes && !self.protections.contains(&TornPageProtection::Atomic) {
            self.protections.push(TornPageProtection::Atomic);
        }
        self
    }

    /// True if `fault` is switched on.
    pub fn has(&self, fault: Fault) -> bool {
        self.faults.contains(&fault)
    }

    /// Buffer pool frames: the engine's minimum of 16 per workload
    /// thread, so that pages are evicted (written without an fsync)
    /// between checkpoints.
    pub fn pool_pages(&self) -> u64 {
        self.buffer_pool_pages.unwrap_or(16 * self.threads as u64)
    }

    /// Refuses values the laboratory cannot run.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Invalid(what));
        if !(self.sector_size.is_power_of_two() && (512..=65536).contains(&self.sector_size)) {
            return bad(format!(
                "sector size {} must be a power of two from 512 to 65536",
                self.sector_size
            ));
        }
        if !crate::settings::PAGE_SIZES.contains(&self.page_size) {
            return bad(format!(
                "page size {} must be one of {:?}",
                self.page_size,
                crate::settings::PAGE_SIZES
            ));
        }
        if self.threads == 0 || self.threads > 16 {
            return bad(format!("threads {} must be 1 to 16", self.threads));
        }
        if self.pool_pages() < 16 {
            return bad(format!(
                "a buffer pool of {} pages: the engine needs 16",
                self.pool_pages()
            ));
        }
        if self.eio_targets.is_empty() {
            return bad("eio needs at least one kind of file to fail".into());
        }
        if self.protections.is_empty() {
            return bad("no protection mode to test".into());
        }
        if self.iterations == 0 {
            // Zero iterations printed "pass": a verdict on nothing.
            return bad("iterations 0: at least one iteration must run".into());
        }
        if self.first_iteration.checked_add(self.iterations).is_none() {
            // The range saturated: fewer iterations ran than reported.
            return bad(format!(
                "first iteration {} + {} iterations is past the last iteration number",
                self.first_iteration, self.iterations
            ));
        }
        if self.data_checksums == ChecksumAlgorithm::Off
            && self.protections.contains(&TornPageProtection::DoubleWrites)
        {
            // The mode refused itself and the run still passed (exit 0).
            return bad(
                "data_checksums off: double_writes needs page checksums to tell a \
                 torn copy (fnv or crc32c; or --protection off,full_pages)"
                    .into(),
            );
        }
        Ok(())
    }

    /// The command that runs iteration `iteration` of `mode` alone.
    pub fn replay_command(&self, mode: TornPageProtection, iteration: u64) -> String {
        let faults: Vec<&str> = self.faults.iter().map(|f| f.name()).collect();
        let faults = if faults.is_empty() {
            "none".to_string()
        } else {
            faults.join(",")
        };
        let mut cmd = format!(
            "untorn crashtest --protection {mode} --iterations 1 --seed {} --first-iteration {iteration} \
             --sector-size {} --faults {faults} --data-checksums {}",
            self.seed, self.sector_size, self.data_checksums
        );
        // Options left at their defaults are left out.
        let d = CrashTestOptions::default();
        if self.page_size != d.page_size {
            cmd.push_str(&format!(" --page-size {}", self.page_size));
        }
        if self.threads != 1 {
            cmd.push_str(&format!(" --threads {}", self.threads));
        }
        if self.atomic_page_writes {
            cmd.push_str(" --atomic-page-writes");
        }
        if self.eio_targets != d.eio_targets && self.has(Fault::Eio) {
            let kinds: Vec<&str> = self.eio_targets.iter().map(|k| k.name()).collect();
            cmd.push_str(&format!(" --eio-files {}", kinds.join(",")));
        }
        if let Some(pages) = self.buffer_pool_pages {
            cmd.push_str(&format!(" --buffer-pool-pages {pages}"));
        }
        if self.wal_compression != d.wal_compression {
            cmd.push_str(&format!(" --wal-compression {}", self.wal_compression));
        }
        cmd
    }
}

/// The seed of one iteration: a function of the run's seed, the mode (by
/// its on-disk code, so a mode keeps its seeds whatever list it is run in)
/// and the iteration's number.
pub fn iteration_seed(seed: u64, mode: TornPageProtection, iteration: u64) -> u64 {
    let mut x = seed ^ 0x5DEE_CE66_D1CE_4E5B;
    for v in [mode.code() as u64 + 1, iteration] {
        x = crate::rng::SplitMix64::new(x ^ v.wrapping_mul(0x9E37_79B9_7F4A_7C15)).next_u64();
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_lists_parse_and_unknown_names_are_named() {
        let all =
            "drop,reorder,tear,eio,enospc,bitflip,misdirect,zero,unreadable,process_crash,switch,\
             panic,atomic_refused";
        assert_eq!(parse_faults(all).unwrap(), Fault::ALL.to_vec());
        assert_eq!(
            parse_faults(" tear , drop,tear").unwrap(),
            vec![Fault::Drop, Fault::Tear]
        );
        assert!(parse_faults("none").unwrap().is_empty());
        let e = parse_faults("drop,shred").unwrap_err().to_string();
        assert!(e.contains("\"shred\"") && e.contains("misdirect"), "{e}");
    }

    #[test]
    fn eio_files_parse() {
        let kinds = parse_file_kinds("wal, data,wal").unwrap();
        assert_eq!(kinds, vec![FileKind::Wal, FileKind::Data]);
        assert!(parse_file_kinds("swap")
            .unwrap_err()
            .to_string()
            .contains("swap"));
        let opts = CrashTestOptions {
            faults: vec![Fault::Eio],
            eio_targets: kinds,
            ..CrashTestOptions::default()
        };
        let cmd = opts.replay_command(TornPageProtection::Off, 3);
        assert!(cmd.ends_with("--eio-files wal,data"), "{cmd}");
        let opts = CrashTestOptions {
            wal_compression: WalCompression::Zstd,
            ..opts
        };
        let cmd = opts.replay_command(TornPageProtection::Off, 3);
        assert!(cmd.ends_with("--wal-compression zstd"), "{cmd}");
    }

    #[test]
    fn protections_parse_with_all() {
        assert_eq!(parse_protections("all").unwrap(), all_protections());
        assert!(parse_protections("full_pages,sideways").is_err());
    }

    #[test]
    fn seeds_depend_on_mode_and_iteration_only() {
        let a = iteration_seed(7, TornPageProtection::Off, 3);
        assert_eq!(a, iteration_seed(7, TornPageProtection::Off, 3));
        assert_ne!(a, iteration_seed(7, TornPageProtection::FullPages, 3));
        assert_ne!(a, iteration_seed(7, TornPageProtection::Off, 4));
        assert_ne!(a, iteration_seed(8, TornPageProtection::Off, 3));
    }
}
