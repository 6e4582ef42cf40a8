//! The noise monitor: was the machine quiet while a run was measured?
//!
//! On a shared machine a run can lose CPU to other processes, or to the
//! hypervisor (steal), or meet a disk busy with someone else's writes. The
//! monitor reads, before and during each run:
//! - `/proc/stat`'s first line: every CPU's busy and steal time; busy time
//!   minus this process's own CPU time (`getrusage`) is what other
//!   processes used;
//! - `/proc/loadavg`: the 1-minute load average, for the report;
//! - a calibration probe before each run, the same fixed work every time:
//!   a memory copy and a few small write + fsync pairs on a file in the
//!   run's directory. Its time over the median of the whole bench's probes
//!   says whether the CPU or the disk was slower than usual.
//!
//! A run is *disturbed* by the rule of [`NoiseRule`] (thresholds measured on
//! this project's machine, docs/BENCHMARKS.md). Not on Linux, or with
//! `/proc` unreadable, there is no monitor and no run is disturbed.

use crate::file::posix::PosixFileSystem;
use crate::file::{FileKind, FileSystem, Issuer, OpenOptions};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Cumulative CPU times of all CPUs together, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    pub steal: u64,
    /// Every field: busy, idle, iowait and steal.
    pub total: u64,
}

/// The aggregate `cpu` line of `/proc/stat`; `None` if it is missing or
/// malformed.
pub fn parse_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    if f.len() < 8 {
        return None;
    }
    let busy = f[0] + f[1] + f[2] + f[5] + f[6];
    Some(CpuTimes {
        busy,
        steal: f[7],
        total: busy + f[3] + f[4] + f[7],
    })
}

/// The 1-minute load average of `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// One look at the machine.
#[derive(Clone, Copy, Debug)]
struct Reading {
    at: Instant,
    cpu: CpuTimes,
    own_cpu_us: u64,
}

impl Reading {
    /// `None` where `/proc/stat` cannot be read (not Linux).
    fn take() -> Option<Reading> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        Some(Reading {
            at: Instant::now(),
            cpu: parse_stat(&text)?,
            own_cpu_us: process_cpu_us(),
        })
    }
}

/// What the machine did between two readings.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Window {
    /// Steal time, percent of all CPUs' time.
    pub steal_pct: f64,
    /// CPU used by other processes, in cores (1.0: one CPU all along).
    pub other_cores: f64,
}

/// The window between two readings, with `hz` clock ticks a second.
/// User + system CPU time of this process, in microseconds.
pub(crate) fn process_cpu_us() -> u64 {
    // SAFETY: getrusage only writes the struct it is given, which we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

fn window(a: &Reading, b: &Reading, hz: f64) -> Window {
    let secs = (b.at - a.at).as_secs_f64();
    let total = b.cpu.total.saturating_sub(a.cpu.total);
    if secs <= 0.0 || total == 0 {
        return Window::default();
    }
    let busy_s = b.cpu.busy.saturating_sub(a.cpu.busy) as f64 / hz;
    let own_s = b.own_cpu_us.saturating_sub(a.own_cpu_us) as f64 / 1e6;
    Window {
        steal_pct: 100.0 * b.cpu.steal.saturating_sub(a.cpu.steal) as f64 / total as f64,
        // Ticks are sampled, own time is exact: a little below 0 is noise.
        other_cores: ((busy_s - own_s) / secs).max(0.0),
    }
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// What the monitor saw of one run (`Run::noise` in the JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NoiseReport {
    /// Steal (percent of all CPUs) and other processes' CPU (cores), from
    /// the probe to the end of the warm-up...
    pub before_steal_pct: f64,
    pub before_other_cores: f64,
    /// ...and over the measured part.
    pub steal_pct: f64,
    pub other_cores: f64,
    /// The busiest second of other processes in the measured part.
    pub other_cores_max_1s: f64,
    /// 1-minute load average at the end of the run.
    pub loadavg: f64,
    /// Calibration probe times, milliseconds (`None`: that part failed).
    pub probe_copy_ms: Option<f64>,
    pub probe_fsync_ms: Option<f64>,
    /// Those times over the median of every probe of the bench (set by
    /// [`judge`] once every run is in).
    #[serde(default)]
    pub probe_copy_ratio: Option<f64>,
    #[serde(default)]
    pub probe_fsync_ratio: Option<f64>,
    /// Why the run counts as disturbed; empty when it does not.
    #[serde(default)]
    pub reasons: Vec<String>,
}

/// Bytes copied by the probe: 16 passes over 4 MiB, a few milliseconds,
/// larger than most L2 caches so that memory bandwidth is in it.
const COPY_BYTES: usize = 4 << 20;
const COPY_PASSES: usize = 16;
/// Small writes each followed by an fsync (a commit's pattern).
const FSYNCS: usize = 8;
const PROBE_FILE: &str = "noise-probe.tmp";

/// Times the memory copy, in milliseconds.
fn probe_copy() -> f64 {
    let src = vec![0x5au8; COPY_BYTES];
    let mut dst = vec![0u8; COPY_BYTES];
    let t = Instant::now();
    for pass in 0..COPY_PASSES {
        dst.copy_from_slice(std::hint::black_box(&src));
        dst[pass] ^= 1;
        std::hint::black_box(&mut dst);
    }
    t.elapsed().as_secs_f64() * 1e3
}

/// Times `FSYNCS` 4 KiB writes each made durable, in a fresh file in
/// `dir`, in milliseconds. Through its own file layer, so the run's I/O
/// counters do not see it.
fn probe_fsync(dir: &Path) -> crate::error::Result<f64> {
    let fs = PosixFileSystem::new(Arc::new(crate::file::IoStats::default()));
    let path = dir.join(PROBE_FILE);
    let file = fs.open(&path, FileKind::Data, OpenOptions::create())?;
    let page = [0xa5u8; 4096];
    let t = Instant::now();
    let result = (0..FSYNCS).try_for_each(|i| {
        file.write_at(&page, (i * page.len()) as u64, Issuer::Tool)?;
        file.sync_data(Issuer::Tool)
    });
    let ms = t.elapsed().as_secs_f64() * 1e3;
    drop(file);
    fs.remove(&path, FileKind::Data, Issuer::Tool)?;
    result.map(|()| ms)
}

/// Watches one run: made before it starts (which probes), told when the
/// measured part starts and as each second ends, finished after it.
pub struct Monitor {
    hz: f64,
    first: Reading,
    measuring: Option<Reading>,
    last: Option<Reading>,
    max_1s: f64,
    copy_ms: f64,
    fsync_ms: Option<f64>,
}

impl Monitor {
    /// Probes the machine before a run whose files are in `dir`; `None`
    /// where there is no `/proc` to watch.
    pub fn before_run(dir: &Path) -> Option<Monitor> {
        let first = Reading::take()?;
        let copy_ms = probe_copy();
        let fsync_ms = probe_fsync(dir)
            .map_err(|e| tracing::debug!(error = %e, "noise probe: no fsync timing"))
            .ok();
        Some(Monitor {
            hz: clock_ticks(),
            first,
            measuring: None,
            last: None,
            max_1s: 0.0,
            copy_ms,
            fsync_ms,
        })
    }

    /// The measured part starts.
    pub fn measuring(&mut self) {
        self.measuring = Reading::take();
        self.last = self.measuring;
    }

    /// A second of the measured part ended.
    pub fn second(&mut self) {
        let now = Reading::take();
        if let (Some(a), Some(b)) = (&self.last, &now) {
            self.max_1s = self.max_1s.max(window(a, b, self.hz).other_cores);
        }
        self.last = now;
    }

    /// The report, after the run's end.
    pub fn finish(self) -> NoiseReport {
        let end = Reading::take();
        let before = self
            .measuring
            .map(|m| window(&self.first, &m, self.hz))
            .unwrap_or_default();
        let during = match (&self.measuring, &end) {
            (Some(a), Some(b)) => window(a, b, self.hz),
            _ => Window::default(),
        };
        NoiseReport {
            before_steal_pct: before.steal_pct,
            before_other_cores: before.other_cores,
            steal_pct: during.steal_pct,
            other_cores: during.other_cores,
            other_cores_max_1s: self.max_1s.max(during.other_cores),
            loadavg: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|t| parse_loadavg(&t))
                .unwrap_or(0.0),
            probe_copy_ms: Some(self.copy_ms),
            probe_fsync_ms: self.fsync_ms,
            ..NoiseReport::default()
        }
    }
}

/// When a run counts as disturbed: any one threshold crossed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NoiseRule {
    /// Steal over the measured part, percent.
    pub steal_pct: f64,
    /// Other processes' CPU over the measured part, cores.
    pub other_cores: f64,
    /// A probe's time over the bench's median probe time.
    pub copy_ratio: f64,
    pub fsync_ratio: f64,
}

impl NoiseRule {
    /// See docs/BENCHMARKS.md for the measurements behind these.
    pub const DEFAULT: NoiseRule = NoiseRule {
        steal_pct: 5.0,
        other_cores: 0.25,
        copy_ratio: 1.5,
        fsync_ratio: 3.0,
    };

    /// Why `r` counts as disturbed (empty: it does not).
    pub fn reasons(&self, r: &NoiseReport) -> Vec<String> {
        let mut why = Vec::new();
        if r.steal_pct > self.steal_pct {
            why.push(format!("steal {:.1} %", r.steal_pct));
        }
        if r.other_cores > self.other_cores {
            why.push(format!("other processes {:.2} cores", r.other_cores));
        }
        if let Some(x) = r.probe_copy_ratio.filter(|&x| x > self.copy_ratio) {
            why.push(format!("memory probe {x:.1}x the median"));
        }
        if let Some(x) = r.probe_fsync_ratio.filter(|&x| x > self.fsync_ratio) {
            why.push(format!("fsync probe {x:.1}x the median"));
        }
        why
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  4705 150 1120 16250 520 30 25 80 0 0\n\
                        cpu0 2350 75 560 8125 260 15 12 40 0 0\n\
                        intr 12345 0 0\nctxt 99\n";

    #[test]
    fn proc_stat_gives_busy_steal_and_total_of_all_cpus() {
        let t = parse_stat(STAT).unwrap();
        assert_eq!(t.busy, 4705 + 150 + 1120 + 30 + 25);
        assert_eq!(t.steal, 80);
        assert_eq!(t.total, t.busy + 16250 + 520 + 80);
        // Old kernels' shorter line, garbage and a missing line.
        assert!(parse_stat("cpu  1 2 3 4 5 6 7\n").is_none());
        assert!(parse_stat("cpu  1 2 x 4 5 6 7 8\n").is_none());
        assert!(parse_stat("cpu0 1 2 3 4 5 6 7 8\n").is_none());
    }

    #[test]
    fn proc_loadavg_gives_the_one_minute_figure() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 2/512 12345\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("busy"), None);
    }

    #[test]
    fn a_window_subtracts_this_process_from_the_busy_time() {
        let at = Instant::now();
        let a = Reading {
            at,
            cpu: CpuTimes {
                busy: 1000,
                steal: 10,
                total: 2000,
            },
            own_cpu_us: 5_000_000,
        };
        // 2 s on 2 CPUs at 100 ticks a second: 400 ticks, 300 busy, 20
        // stolen; this process used 2.0 s of CPU, others 1.0 s: 0.5 core.
        let b = Reading {
            at: at + std::time::Duration::from_secs(2),
            cpu: CpuTimes {
                busy: 1300,
                steal: 30,
                total: 2400,
            },
            own_cpu_us: 7_000_000,
        };
        let w = window(&a, &b, 100.0);
        assert!((w.other_cores - 0.5).abs() < 1e-9, "{w:?}");
        assert!((w.steal_pct - 5.0).abs() < 1e-9, "{w:?}");
        // Own time above the ticks counted is accounting noise, not < 0.
        let c = Reading {
            own_cpu_us: 9_000_000,
            ..b
        };
        assert_eq!(window(&a, &c, 100.0).other_cores, 0.0);
    }

    #[test]
    fn the_probe_runs_in_the_given_directory_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let Some(m) = Monitor::before_run(dir.path()) else {
            return; // No /proc here: no monitor, by design.
        };
        assert!(m.fsync_ms.is_some());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let r = m.finish();
        assert!(r.probe_copy_ms.is_some_and(|ms| ms > 0.0));
        // A missing directory loses only the fsync part.
        let gone = dir.path().join("missing");
        let m = Monitor::before_run(&gone).unwrap();
        assert!(m.fsync_ms.is_none());
    }
}
