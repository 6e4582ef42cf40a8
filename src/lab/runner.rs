//! Runs a workload: N client threads, a warm-up that is not measured, then
//! the measured part with a figure for every second.
//!
//! Rules:
//! - A transaction counts when it started after the warm-up and committed
//!   before the end; its latency runs from its first attempt to its commit
//!   (retries after a deadlock included, as a client sees it).
//! - Each client records into its own HdrHistogram (merged at the end) and
//!   into an accumulator behind its own mutex, which only the sampler (the
//!   calling thread) ever contends for, every 100 ms.
//! - The sampler drains the clients every 100 ms into a 100 ms sample
//!   (`fine_series`, for the checkpoint phases) and into the current
//!   second, so a short checkpoint still marks the second it started and
//!   ended in.
//! - The noise monitor (`noise.rs`) probes before the clients start and
//!   looks at the machine as the measured part starts, each second, and at
//!   the end.
//! - A non-retryable error from any client stops every client and is the
//!   run's result.

use crate::db::{Database, Options};
use crate::error::{Error, Result};
use crate::file::{FileKind, FileSystem, Issuer};
use crate::file::{IoOp, IoStats};
use crate::lab::noise::{self, process_cpu_us};
use crate::lab::page_io::PageIo;
use crate::lab::result::{FineSample, KindFigures, LatencyMs, Run, Sample};
use crate::lab::workload::{Outcome, Rng, Tables, Workload};
use crate::stats::Statistics;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long and with how many clients a run goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpec {
    pub clients: usize,
    /// Run before measuring (not counted).
    pub warmup: Duration,
    /// Measured time.
    pub duration: Duration,
    /// A terminal user's keying and think times around each transaction
    /// ([`Workload::pauses`], TPC-C's `--think`); refused for workloads
    /// without them.
    pub think: bool,
}

/// Latencies in microseconds, 1 us to 60 s.
const LATENCY_MAX_US: u64 = 60_000_000;
const TICK: Duration = Duration::from_millis(100);

fn histogram(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, sigfig)
        .expect("constant histogram bounds are valid")
}

/// What one client did since the sampler last drained it (every 100 ms).
struct Second {
    count: u64,
    sum_us: u64,
    /// Two significant digits: per-second p99 needs no more, and a reset
    /// every second stays cheap.
    hist: Histogram<u64>,
}

/// What one client did in the whole measured part.
struct ClientTotals {
    hist: Histogram<u64>,
    transactions: u64,
    retries: u64,
    /// Per transaction type ([`Workload::kinds`]): latencies and rollbacks.
    kinds: Vec<(Histogram<u64>, u64)>,
}

/// Counters read at the start and end of the measured part.
#[derive(Clone, Copy)]
struct Counters {
    wal: crate::wal::WalStats,
    data_pages: u64,
    /// Data pages read (buffer pool misses).
    data_reads: u64,
    data_fsyncs: u64,
    /// Data pages written by clients, the bgwriter, the checkpointer.
    writer_pages: [u64; 3],
    checkpoints: u64,
    cpu_us: u64,
}

impl Counters {
    fn read(db: &Database) -> Counters {
        let io: &IoStats = db.io_stats();
        // Pages, not calls: a run of consecutive blocks is one pwritev.
        let page = u64::from(db.settings().page_size).max(1);
        Counters {
            wal: db.wal_stats(),
            data_pages: io.bytes(FileKind::Data, IoOp::Write) / page,
            data_reads: io.bytes(FileKind::Data, IoOp::Read) / page,
            data_fsyncs: io.calls(FileKind::Data, IoOp::Fsync),
            writer_pages: [
                Issuer::Client,
                Issuer::BackgroundWriter,
                Issuer::Checkpointer,
            ]
            .map(|who| io.bytes_by(who, FileKind::Data, IoOp::Write) / page),
            checkpoints: db.checkpoints(),
            cpu_us: process_cpu_us(),
        }
    }
}

/// Waits before retry number `n` (1-based) of one transaction. Lock
/// waits queue now and only a real deadlock is retried, but a retry at
/// once could meet the same cycle: yield twice, then sleep 20 us doubling
/// to 1 ms.
fn backoff(n: u64) {
    if n <= 2 {
        std::thread::yield_now();
    } else {
        let us = (20u64 << (n - 3).min(6)).min(1000);
        std::thread::sleep(Duration::from_micros(us));
    }
}

/// The shared state of one run.
struct Shared<'a> {
    db: &'a Database,
    workload: &'a dyn Workload,
    tables: Tables,
    end: Instant,
    think: bool,
    /// Set by the sampler once it has read the counters the run is
    /// measured from: a transaction counts only if it began after that, so
    /// that its WAL, I/O and CPU fall in the same window (the sampler may
    /// wake late on a busy machine).
    measuring: AtomicBool,
    stop: AtomicBool,
    failed: Mutex<Option<Error>>,
    seconds: Vec<Mutex<Second>>,
}

impl Shared<'_> {
    fn client(&self, client: usize, seed: u64) -> ClientTotals {
        let mut rng = Rng::new(seed, client as u64);
        let mut totals = ClientTotals {
            hist: histogram(3),
            transactions: 0,
            retries: 0,
            kinds: (0..self.workload.kinds().len())
                .map(|_| (histogram(3), 0))
                .collect(),
        };
        let same_inputs = self.workload.retries_same_inputs();
        let mut thinking = Rng::for_pauses(seed, client as u64);
        let mut think = Duration::ZERO;
        while !self.stop.load(Relaxed) {
            if self.think {
                // The last transaction's think time, then this one's keying.
                if let Some((keying, after)) = self.workload.pauses(&rng, &mut thinking) {
                    if !self.pause(think + keying) {
                        break;
                    }
                    think = after;
                }
            }
            let counted = self.measuring.load(Acquire);
            let t0 = Instant::now();
            if t0 >= self.end {
                break;
            }
            let mut retries = 0;
            let before = same_inputs.then(|| rng.clone());
            let mut done = None;
            let committed = loop {
                match self
                    .workload
                    .transaction(self.db, &self.tables, &mut rng, client)
                {
                    Ok(Outcome::Committed) => break true,
                    Ok(Outcome::Done { kind, rolled_back }) => {
                        done = Some((kind, rolled_back));
                        break true;
                    }
                    Ok(Outcome::Retry) => {
                        retries += 1;
                        if let Some(b) = &before {
                            rng = b.clone();
                        }
                        if self.stop.load(Relaxed) || Instant::now() >= self.end {
                            break false;
                        }
                        backoff(retries);
                    }
                    Err(e) => {
                        self.failed.lock().get_or_insert(e);
                        self.stop.store(true, Relaxed);
                        return totals;
                    }
                }
            };
            let t1 = Instant::now();
            if !counted {
                continue;
            }
            totals.retries += retries;
            if committed && t1 <= self.end {
                let us = (t1 - t0).as_micros().clamp(1, u128::from(LATENCY_MAX_US)) as u64;
                totals.hist.saturating_record(us);
                totals.transactions += 1;
                if let Some((h, rollbacks)) = done.and_then(|(k, rb)| {
                    let slot = totals.kinds.get_mut(k)?;
                    Some((slot, rb))
                }) {
                    h.0.saturating_record(us);
                    h.1 += u64::from(rollbacks);
                }
                let mut s = self.seconds[client].lock();
                s.count += 1;
                s.sum_us += us;
                s.hist.saturating_record(us);
            }
        }
        totals
    }

    /// A client's pause (keying or think time), cut at the run's end;
    /// false if the run ended or stopped first.
    fn pause(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        self.sleep_until(until.min(self.end)) && until < self.end
    }

    /// Sleeps until `until` unless a client failed first; false if one did.
    fn sleep_until(&self, until: Instant) -> bool {
        loop {
            if self.stop.load(Relaxed) {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep((until - now).min(TICK));
        }
    }

    /// Takes every client's current second.
    fn drain(&self) -> (u64, u64, Histogram<u64>) {
        let mut merged = histogram(2);
        let (mut count, mut sum_us) = (0, 0);
        for s in &self.seconds {
            let mut s = s.lock();
            count += s.count;
            sum_us += s.sum_us;
            // Same bounds, so adding cannot fail.
            let _ = merged.add(&s.hist);
            s.count = 0;
            s.sum_us = 0;
            s.hist.reset();
        }
        (count, sum_us, merged)
    }
}

/// The per-second and the 100 ms series, built by the sampler: every tick
/// drains the clients into a 100 ms sample and into the current second.
struct Series {
    samples: Vec<Sample>,
    fine: Vec<FineSample>,
    measure_start: Instant,
    second_began: Instant,
    tick_began: Instant,
    /// Counters at the start of the current second, and at the last tick.
    second_base: Counters,
    tick_base: Counters,
    /// The current second's transactions, from the ticks drained so far.
    count: u64,
    sum_us: u64,
    hist: Histogram<u64>,
    checkpoints_started: u64,
    checkpoints_done: u64,
    /// A checkpoint started / ended in the current second; started in the
    /// current tick.
    started: bool,
    ended: bool,
    tick_started: bool,
}

impl Series {
    fn new(db: &Database, at: Instant, base: Counters) -> Series {
        Series {
            samples: Vec::new(),
            fine: Vec::new(),
            measure_start: at,
            second_began: at,
            tick_began: at,
            second_base: base,
            tick_base: base,
            count: 0,
            sum_us: 0,
            hist: histogram(2),
            checkpoints_started: db.checkpoints_started(),
            checkpoints_done: base.checkpoints,
            started: false,
            ended: false,
            tick_started: false,
        }
    }

    /// Ends the tick that began at `tick_began` at `now`: a 100 ms sample.
    fn tick(&mut self, shared: &Shared<'_>, now: Instant) {
        let db = shared.db;
        let started = db.checkpoints_started();
        let done = db.checkpoints();
        if started != self.checkpoints_started {
            self.started = true;
            self.tick_started = true;
        }
        self.ended |= done != self.checkpoints_done;
        self.checkpoints_started = started;
        self.checkpoints_done = done;
        let (count, sum_us, hist) = shared.drain();
        self.count += count;
        self.sum_us += sum_us;
        // Same bounds, so adding cannot fail.
        let _ = self.hist.add(&hist);
        let c = Counters::read(db);
        let secs = (now - self.tick_began).as_secs_f64().max(1e-6);
        let prev = &self.tick_base;
        self.fine.push(FineSample {
            ms: (self.tick_began - self.measure_start).as_millis() as u32,
            tps: (count as f64 / secs) as f32,
            p99: p99_ms(count, &hist) as f32,
            wal: c.wal.bytes - prev.wal.bytes,
            writes: [0, 1, 2].map(|i| c.writer_pages[i] - prev.writer_pages[i]),
            ckpt_start: self.tick_started,
            ckpt: db.checkpoint_progress().map(|p| p as f32),
        });
        self.tick_base = c;
        self.tick_began = now;
        self.tick_started = false;
    }

    /// Closes the second that began at `second_began`, ending at the last
    /// tick (`now`).
    fn close(&mut self, now: Instant) {
        let c = self.tick_base;
        let secs = (now - self.second_began).as_secs_f64().max(1e-6);
        let count = self.count;
        self.samples.push(Sample {
            second: self.samples.len() as u32,
            tps: count as f64 / secs,
            latency_ms_avg: if count > 0 {
                self.sum_us as f64 / count as f64 / 1000.0
            } else {
                0.0
            },
            latency_ms_p99: p99_ms(count, &self.hist),
            wal_bytes: c.wal.bytes - self.second_base.wal.bytes,
            data_writes: c.data_pages - self.second_base.data_pages,
            checkpoint_started: self.started,
            checkpoint_ended: self.ended,
        });
        self.second_base = c;
        self.second_began = now;
        self.count = 0;
        self.sum_us = 0;
        self.hist.reset();
        self.started = false;
        self.ended = false;
    }
}

/// avg / p90 / p99 / max of the latencies in `hist` (zeros when empty).
fn latency_of(hist: &Histogram<u64>) -> LatencyMs {
    if hist.is_empty() {
        return LatencyMs::default();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    LatencyMs {
        avg: hist.mean() / 1000.0,
        p90: ms(hist.value_at_quantile(0.90)),
        p99: ms(hist.value_at_quantile(0.99)),
        max: ms(hist.max()),
    }
}

/// The 99th percentile of `count` latencies in `hist`, in milliseconds.
fn p99_ms(count: u64, hist: &Histogram<u64>) -> f64 {
    if count > 0 {
        hist.value_at_quantile(0.99) as f64 / 1000.0
    } else {
        0.0
    }
}

/// Refuses keying and think times (`--think`) for a workload without a
/// terminal model ([`Workload::pauses`] gives none).
pub fn has_pauses(workload: &dyn Workload) -> Result<()> {
    match workload.pauses(&Rng::new(0, 0), &mut Rng::new(0, 1)) {
        Some(_) => Ok(()),
        None => Err(Error::Invalid(format!(
            "--think: {} has no keying or think times (TPC-C's terminals have them)",
            workload.name()
        ))),
    }
}

/// Runs `workload` on `db` once: `spec.clients` clients, warm-up, then
/// `spec.duration` measured. `seed` makes the clients' random choices
/// (client i draws from stream i of it).
pub fn run_once(
    db: &Database,
    workload: &dyn Workload,
    spec: &RunSpec,
    repeat: usize,
    seed: u64,
) -> Result<Run> {
    if spec.clients == 0 || spec.duration.is_zero() {
        return Err(Error::Invalid(format!(
            "a run needs at least one client and a duration above zero (got {} clients, {:?})",
            spec.clients, spec.duration
        )));
    }
    if spec.think {
        has_pauses(workload)?;
    }
    let tables = workload.tables(db)?;
    // Before the clients start, so that the probe meets a quiet engine.
    let mut monitor = noise::Monitor::before_run(db.directory());
    let measure_start = Instant::now() + spec.warmup;
    let shared = Shared {
        db,
        workload,
        tables,
        end: measure_start + spec.duration,
        think: spec.think,
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        failed: Mutex::new(None),
        seconds: (0..spec.clients)
            .map(|_| {
                Mutex::new(Second {
                    count: 0,
                    sum_us: 0,
                    hist: histogram(2),
                })
            })
            .collect(),
    };
    let mut series: Option<(Counters, Statistics, Series)> = None;
    let totals: Vec<ClientTotals> = std::thread::scope(|s| {
        let shared = &shared;
        let clients: Vec<_> = (0..spec.clients)
            .map(|c| s.spawn(move || shared.client(c, seed)))
            .collect();
        // The calling thread is the sampler.
        if shared.sleep_until(measure_start) {
            let base = Counters::read(db);
            // Every view, for the run's deltas (the series needs none).
            let base_stats = db.statistics();
            shared.measuring.store(true, Release);
            if let Some(m) = &mut monitor {
                m.measuring();
            }
            let mut ser = Series::new(db, measure_start, base);
            let mut tick = 1u32;
            loop {
                let at = (measure_start + TICK * tick).min(shared.end);
                if !shared.sleep_until(at) || at >= shared.end {
                    break;
                }
                let now = Instant::now();
                if now >= shared.end {
                    // Woken late: the last second is closed after the
                    // clients stop.
                    break;
                }
                ser.tick(shared, now);
                if tick.is_multiple_of(10) {
                    ser.close(now);
                    if let Some(m) = &mut monitor {
                        m.second();
                    }
                }
                tick += 1;
            }
            series = Some((base, base_stats, ser));
        }
        shared.stop.store(true, Relaxed);
        clients
            .into_iter()
            .map(|c| c.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    if let Some(e) = shared.failed.lock().take() {
        return Err(e);
    }
    let Some((base, base_stats, mut ser)) = series else {
        return Err(Error::Invalid("the run stopped before measuring".into()));
    };
    // The last (possibly partial) tick and second: every client has
    // stopped, so nothing committed before the end is still unrecorded.
    ser.tick(&shared, shared.end);
    if shared.end > ser.second_began + Duration::from_millis(1) || ser.samples.is_empty() {
        ser.close(shared.end);
    }
    let noise = monitor.map(|m| m.finish());
    let end = Counters::read(db);
    let statistics = db.statistics().since(&base_stats);
    // Page images only: the file layer's bytes would count header blocks.
    let dw = statistics.double_write.total();
    let io = PageIo::from_statistics(&statistics, db.settings().page_size);
    let mut hist = histogram(3);
    let (mut transactions, mut retries) = (0, 0);
    let mut kinds: Vec<(Histogram<u64>, u64)> =
        workload.kinds().iter().map(|_| (histogram(3), 0)).collect();
    for t in &totals {
        let _ = hist.add(&t.hist);
        transactions += t.transactions;
        retries += t.retries;
        for (all, one) in kinds.iter_mut().zip(&t.kinds) {
            let _ = all.0.add(&one.0);
            all.1 += one.1;
        }
    }
    let seconds = spec.duration.as_secs_f64();
    let ms = |us: u64| us as f64 / 1000.0;
    let per_txn = |x: u64| {
        if transactions > 0 {
            x as f64 / transactions as f64
        } else {
            0.0
        }
    };
    Ok(Run {
        repeat,
        clients: totals.len(),
        think: spec.think,
        seconds,
        transactions,
        retries,
        tps: transactions as f64 / seconds,
        latency_ms: if transactions > 0 {
            LatencyMs {
                avg: hist.mean() / 1000.0,
                p90: ms(hist.value_at_quantile(0.90)),
                p99: ms(hist.value_at_quantile(0.99)),
                max: ms(hist.max()),
            }
        } else {
            LatencyMs::default()
        },
        by_kind: workload
            .kinds()
            .iter()
            .zip(&kinds)
            .map(|(name, (h, rollbacks))| KindFigures {
                name: name.to_string(),
                transactions: h.len(),
                rollbacks: *rollbacks,
                latency_ms: latency_of(h),
            })
            .collect(),
        cpu_us_per_txn: per_txn(end.cpu_us.saturating_sub(base.cpu_us)),
        wal_bytes: end.wal.bytes - base.wal.bytes,
        wal_records: end.wal.records - base.wal.records,
        wal_fpi: end.wal.fpi - base.wal.fpi,
        wal_fpi_bytes: end.wal.fpi_bytes - base.wal.fpi_bytes,
        wal_fpi_bytes_uncompressed: end.wal.fpi_bytes_uncompressed
            - base.wal.fpi_bytes_uncompressed,
        wal_fsyncs: end.wal.fsyncs - base.wal.fsyncs,
        data_reads: end.data_reads - base.data_reads,
        data_writes: end.data_pages - base.data_pages,
        data_fsyncs: end.data_fsyncs - base.data_fsyncs,
        client_page_writes: end.writer_pages[0] - base.writer_pages[0],
        bgwriter_page_writes: end.writer_pages[1] - base.writer_pages[1],
        checkpointer_page_writes: end.writer_pages[2] - base.writer_pages[2],
        dw_page_writes: dw.pages + dw.deferred,
        dw_fsyncs: dw.fsyncs + dw.deferred_fsyncs + 2 * dw.manifests,
        io,
        checkpoints: end.checkpoints - base.checkpoints,
        series: ser.samples,
        fine_series: ser.fine,
        statistics,
        disturbed: false,
        excluded: false,
        noise,
    })
}

/// Creates a database in `dir`, loads `workload` and checkpoints, so a
/// run starts from clean pages (as a benchmark after its load phase).
pub fn fresh_database(dir: &Path, options: Options, workload: &dyn Workload) -> Result<Database> {
    let db = Database::create(dir, options)?;
    workload.load(&db)?;
    db.checkpoint()?;
    Ok(db)
}

/// [`fresh_database`] on a given file layer (a device model), which
/// records into `io_stats`.
pub fn fresh_database_with(
    fs: Arc<dyn FileSystem>,
    io_stats: Arc<IoStats>,
    dir: &Path,
    options: Options,
    workload: &dyn Workload,
) -> Result<Database> {
    let db = Database::create_with(fs, io_stats, dir, options)?;
    workload.load(&db)?;
    db.checkpoint()?;
    Ok(db)
}
