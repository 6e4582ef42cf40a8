//! The crash laboratory's faults inside the engine itself (issue 57): a
//! panic in a critical section (`panic`) and RWF_ATOMIC refused at run
//! time (`atomic_refused`), each followed by a power cut, in every mode.

use crate::crashlab::{self, CrashTestOptions, Fault, ModeReport};
use crate::settings::TornPageProtection;

fn lab(
    modes: &[TornPageProtection],
    fault: Fault,
    iterations: u64,
    atomic: bool,
) -> Vec<ModeReport> {
    let opts = CrashTestOptions {
        protections: modes.to_vec(),
        faults: vec![Fault::Drop, Fault::Reorder, Fault::Tear, fault],
        iterations,
        seed: 57,
        sector_size: 512,
        atomic_page_writes: atomic,
        trace_dir: Some(std::env::temp_dir()),
        ..CrashTestOptions::default()
    };
    crashlab::run(&opts, |_| {})
        .expect("the laboratory runs")
        .modes
}

fn assert_clean(m: &ModeReport) {
    let failures: Vec<String> = m
        .failures
        .iter()
        .map(|f| format!("iteration {}: {}", f.iteration, f.what))
        .collect();
    assert!(m.passed(), "{}: {failures:?}", m.mode);
    assert_eq!((m.lost_commits, m.silent_corruptions), (0, 0), "{}", m.mode);
}

/// Panics between a WAL reservation and its copy, in a flush leader's
/// write and fsync, and at data, double-write and control file writes:
/// after each the engine refuses the next commit where the WAL is
/// concerned, and after the power cut nothing acknowledged is missing.
#[test]
fn panics_inside_the_engine_lose_nothing_acknowledged_in_any_mode() {
    let modes = [
        TornPageProtection::Off,
        TornPageProtection::FullPages,
        TornPageProtection::DoubleWrites,
    ];
    let reports = lab(&modes, Fault::Panic, 100, false);
    let mut points = std::collections::BTreeSet::new();
    for m in &reports {
        assert_clean(m);
        let f = &m.faults;
        assert!(f.panics >= 30, "{}: {f:?}", m.mode);
        let in_wal: u64 = ["wal_copy_window", "wal_write", "wal_fsync"]
            .iter()
            .map(|p| f.panics_by_point.get(*p).copied().unwrap_or(0))
            .sum();
        assert!(f.engine_stopped_after_panic >= in_wal, "{}: {f:?}", m.mode);
        points.extend(f.panics_by_point.keys().cloned());
    }
    for p in [
        "wal_copy_window",
        "wal_write",
        "wal_fsync",
        "data_write",
        "control_write",
        "double_write_write",
    ] {
        assert!(points.contains(p), "no panic struck at {p}: {points:?}");
    }
}

/// Under `atomic`, the device stops taking RWF_ATOMIC mid-workload: the
/// engine stops every time, and the opening after the power cut switches
/// to double writes with every acknowledged commit there.
#[test]
fn rwf_atomic_refused_at_run_time_stops_the_engine_and_double_writes_recover_it() {
    let reports = lab(
        &[TornPageProtection::Atomic],
        Fault::AtomicRefused,
        60,
        true,
    );
    let m = &reports[0];
    assert_clean(m);
    let f = &m.faults;
    assert!(f.atomic_refusals >= 15, "{f:?}");
    assert_eq!(f.atomic_refusals_stopped, f.atomic_refusals, "{f:?}");
    let switched = f.switches_by_direction.get("atomic -> double_writes");
    assert!(switched.is_some_and(|n| *n >= f.atomic_refusals), "{f:?}");
}

/// A panic at a data page's write during an eviction (a commit's split
/// claiming a frame) left the engine taking commits, and one acknowledged
/// after it was lost at the power cut (seed 574096, five of 20,000 `off`
/// iterations at 4 KB sectors, e.g. iteration 1159: "commit 28
/// acknowledged a newer version"). A panic in the pool's write path now
/// stops the pool, as a failed write of unknown effect does.
#[test]
fn a_panic_in_an_eviction_s_write_stops_the_engine_and_loses_nothing() {
    let opts = CrashTestOptions {
        protections: vec![TornPageProtection::Off],
        faults: Fault::ALL.to_vec(),
        seed: 574096,
        first_iteration: 1159,
        iterations: 1,
        sector_size: 4096,
        trace_dir: Some(std::env::temp_dir()),
        ..CrashTestOptions::default()
    };
    let m = &crashlab::run(&opts, |_| {})
        .expect("the laboratory runs")
        .modes[0];
    assert_clean(m);
    assert_eq!(
        m.faults.panics_by_point.get("data_write"),
        Some(&1),
        "{:?}",
        m.faults
    );
    assert_eq!(m.faults.engine_stopped_after_panic, 1, "{:?}", m.faults);
}
