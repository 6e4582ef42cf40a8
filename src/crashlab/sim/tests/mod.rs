//! Tests of the simulated file system: each rule of the fault model, then
//! the engine itself crashed on it. The helpers here build the files and
//! crashes the modules share.

use super::*;
use crate::rng::SplitMix64;
use std::ops::Range;

/// POSIX calls on a file system that does not crash.
mod calls;
/// The contracts of `close` and `drop_table` at their edges.
mod close_and_drop;
/// What a crash keeps of what was not fsynced.
mod crash;
/// Names: new files, renames and removals, durable only after `sync_dir`.
mod directory;
/// Deferred in-place writes: the holes a review found, as scenarios.
mod double_write_deferred;
/// Deferred in-place writes on a full disk: evictions go to the area.
mod double_write_full_disk;
/// The crash laboratory on double writes: a slot reused too early caught;
/// iterations that failed once.
mod double_write_lab;
/// Recovery's restore from a hand-made double-write area.
mod double_write_restore;
/// The engine's commits across crashes of the simulation.
mod engine;
/// The laboratory's faults inside the engine: panics, RWF_ATOMIC refused.
mod engine_panics;
/// Injected faults: fsync EIO, ENOSPC, bad sectors, misdirected and lost
/// writes, bit flips, power cuts.
mod faults;
/// File locks: per handle, released by a drop, a crash or a process death.
mod locks;
/// Seeds, images and traces: a crash replays exactly.
mod replay;
/// 4 KB-sector devices: the WAL pads to the device's sector.
mod sector_4k;
/// A data file ending inside its last page after a crash.
mod short_page;
/// Transactions whose write set spilled, across power cuts and full disks.
mod spilled_commits;

const WHO: Issuer = Issuer::Client;
const SEEDS: u64 = 400;

fn new_fs() -> SimFileSystem {
    SimFileSystem::new(Arc::new(IoStats::default()))
}

fn dir() -> &'static Path {
    Path::new("/sim/d")
}

/// A file whose name and `content` are durable.
fn durable_file(fs: &SimFileSystem, name: &str, content: &[u8]) -> (PathBuf, Arc<dyn File>) {
    fs.create_dir_all(dir()).unwrap();
    let path = dir().join(name);
    let f = fs
        .open(&path, FileKind::Data, OpenOptions::create())
        .unwrap();
    f.write_at(content, 0, WHO).unwrap();
    f.sync_all(WHO).unwrap();
    fs.sync_dir(dir(), WHO).unwrap();
    (path, f)
}

/// A durable file of `len` bytes 0xAA, then unsynced writes of 0xBB, one
/// per `(offset, len)` of `writes`: what a crash may keep, drop or tear.
fn pending_overwrites(fs: &SimFileSystem, len: usize, writes: &[(u64, usize)]) -> PathBuf {
    let (path, f) = durable_file(fs, "a", &vec![0xAA; len]);
    for &(offset, len) in writes {
        f.write_at(&vec![0xBB; len], offset, WHO).unwrap();
    }
    path
}

/// Opens an existing file of `fs`.
fn open(fs: &SimFileSystem, path: &Path, opts: OpenOptions) -> Arc<dyn File> {
    fs.open(path, FileKind::Data, opts).unwrap()
}

fn os_code(e: &Error) -> Option<i32> {
    match e {
        Error::Io { source, .. } | Error::FsyncFailed { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

fn tear_only() -> CrashConfig {
    CrashConfig {
        keep_probability: 0.0,
        drop_probability: 0.0,
        tear_probability: 1.0,
        ..CrashConfig::default()
    }
}

fn keep_all() -> CrashConfig {
    CrashConfig {
        keep_probability: 1.0,
        drop_probability: 0.0,
        tear_probability: 0.0,
        ..CrashConfig::default()
    }
}

/// Crashes a copy of `fs` with `seed`; returns the copy and the report.
fn crashed(fs: &SimFileSystem, seed: u64, cfg: &CrashConfig) -> (SimFileSystem, CrashReport) {
    let copy = fs.fork();
    let report = copy.crash(seed, cfg);
    (copy, report)
}

/// One crashed copy of `fs` per seed: (seed, the copy, the report).
fn crashes<'a>(
    fs: &'a SimFileSystem,
    seeds: Range<u64>,
    cfg: &'a CrashConfig,
) -> impl Iterator<Item = (u64, SimFileSystem, CrashReport)> + 'a {
    seeds.map(move |seed| {
        let (copy, report) = crashed(fs, seed, cfg);
        (seed, copy, report)
    })
}

/// Each `unit`-byte chunk of `bytes[from..to]` is all `a` or all `b`:
/// returns per chunk whether it is `b`.
fn chunks_uniform(bytes: &[u8], from: usize, to: usize, unit: usize, a: u8, b: u8) -> Vec<bool> {
    let mut out = Vec::new();
    let mut start = from;
    while start < to {
        let stop = ((start / unit + 1) * unit).min(to);
        let chunk = &bytes[start..stop];
        let is_b = chunk[0] == b;
        assert!(chunk[0] == a || is_b, "byte {} is {:#x}", start, chunk[0]);
        let want = if is_b { b } else { a };
        assert!(
            chunk.iter().all(|x| *x == want),
            "mixed bytes in [{start}, {stop})"
        );
        out.push(is_b);
        start = stop;
    }
    out
}

/// True if some chunks are new and some old: a torn write.
fn mixed(new: &[bool]) -> bool {
    new.iter().any(|n| *n) && new.iter().any(|n| !*n)
}
