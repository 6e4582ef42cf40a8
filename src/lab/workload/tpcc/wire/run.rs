//! The measured run: `clients` connections, each drawing transactions
//! from its own stream of the seed (`Rng::new(seed, client)`) with the
//! embedded workload's mix and inputs, for a warm-up and then the
//! measured time. A deadlock or serialization failure is retried with
//! the same inputs and counted; any other error, a dropped connection
//! included, ends the run with that error.
//!
//! With `think`, each transaction is preceded by the specification's
//! keying time and followed by a think time ([`pacing`]).

use super::txn::{execute, Statements};
use super::{Result, Target, WireError};
use crate::lab::workload::tpcc::input::{Kind, KINDS};
use crate::lab::workload::tpcc::pacing;
use crate::lab::workload::tpcc::Tpcc;
use crate::lab::workload::Rng;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub clients: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub seed: u64,
    pub think: bool,
}

/// Latency in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    pub avg_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// From a histogram of microseconds (zeros when empty).
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let ms = |us: f64| (us / 1000.0 * 1000.0).round() / 1000.0;
        Latency {
            avg_ms: ms(h.mean()),
            p90_ms: ms(h.value_at_quantile(0.90) as f64),
            p99_ms: ms(h.value_at_quantile(0.99) as f64),
            max_ms: ms(h.max() as f64),
        }
    }
}

/// One transaction type's figures.
#[derive(Clone, Debug, Serialize)]
pub struct KindSummary {
    pub name: &'static str,
    pub count: u64,
    pub latency: Latency,
}

/// What `untorn tpcc run` prints and writes as JSON.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub warehouses: u32,
    pub items: u32,
    pub customers: u32,
    pub clients: usize,
    pub seed: u64,
    pub think: bool,
    pub warmup_s: f64,
    pub duration_s: f64,
    /// New-Orders per minute, rolled-back ones included.
    pub notpm: f64,
    /// All five types per minute.
    pub tpm: f64,
    pub transactions: u64,
    /// Every transaction the clients ended, the warm-up's included: what a
    /// count over the whole run (a server's fsyncs) is per transaction of.
    pub all_transactions: u64,
    pub rollbacks: u64,
    pub retries: u64,
    pub latency: Latency,
    pub kinds: Vec<KindSummary>,
}

impl Summary {
    pub fn text(&self) -> String {
        let mut s = format!(
            "tpcc: {} warehouses ({} items, {} customers per district), {} clients, {} s after {} s warm-up{}\n\
             notpm {:.1}  tpm {:.1}  transactions {}  rollbacks {}  retries {}\n\
             latency ms: avg {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}\n",
            self.warehouses, self.items, self.customers, self.clients, self.duration_s,
            self.warmup_s, if self.think { ", keying and think times" } else { "" },
            self.notpm, self.tpm, self.transactions, self.rollbacks, self.retries,
            self.latency.avg_ms, self.latency.p90_ms, self.latency.p99_ms, self.latency.max_ms,
        );
        for k in &self.kinds {
            let l = &k.latency;
            s.push_str(&format!(
                "  {:<13} {:>9}  avg {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}\n",
                k.name, k.count, l.avg_ms, l.p90_ms, l.p99_ms, l.max_ms
            ));
        }
        s
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant bounds are valid")
}

/// One client's figures.
struct Totals {
    kinds: Vec<Histogram<u64>>,
    rollbacks: u64,
    retries: u64,
    /// Transactions ended outside the measured window (the warm-up's).
    unmeasured: u64,
}

impl Totals {
    fn new() -> Totals {
        Totals {
            kinds: (0..KINDS.len()).map(|_| histogram()).collect(),
            rollbacks: 0,
            retries: 0,
            unmeasured: 0,
        }
    }
}

/// Sleeps `d`, but not past `end` nor once the run stops.
fn pause(d: Duration, end: Instant, stop: &AtomicBool) {
    let until = (Instant::now() + d).min(end);
    while !stop.load(Relaxed) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(100)));
    }
}

fn client(
    target: &Target,
    t: &Tpcc,
    o: &RunOptions,
    n: usize,
    (measure, end): (Instant, Instant),
    stop: &AtomicBool,
) -> Result<Totals> {
    let mut c = target.connect()?;
    let statements = Statements::prepare(&mut c)?;
    let mut rng = Rng::new(o.seed, n as u64);
    let mut thinking = Rng::for_pauses(o.seed, n as u64);
    let mut totals = Totals::new();
    while !stop.load(Relaxed) && Instant::now() < end {
        let input = t.draw(&mut rng);
        let kind = input.kind() as usize;
        if o.think {
            pause(pacing::keying_time(input.kind()), end, stop);
            if Instant::now() >= end || stop.load(Relaxed) {
                break;
            }
        }
        let start = Instant::now();
        let mut retries = 0;
        let committed = loop {
            match execute(&mut c, &statements, &input) {
                Ok(committed) => break committed,
                Err(e) if e.is_retryable() => {
                    retries += 1;
                    std::thread::sleep(Duration::from_micros(100 << retries.min(6)));
                }
                Err(e) => return Err(e),
            }
        };
        let done = Instant::now();
        if start >= measure && done <= end {
            let us = (done - start).as_micros().max(1) as u64;
            totals.kinds[kind].saturating_record(us);
            totals.retries += retries;
            if kind == Kind::NewOrder as usize && !committed {
                totals.rollbacks += 1;
            }
        } else {
            totals.unmeasured += 1;
        }
        if o.think {
            pause(pacing::think_time(&mut thinking, input.kind()), end, stop);
        }
    }
    Ok(totals)
}

/// Runs the clients against the loaded database (its scale found by
/// point reads) and sums up the measured part.
pub fn run(target: &Target, o: &RunOptions) -> Result<Summary> {
    if o.clients == 0 {
        return Err(WireError::Invalid("--clients must be at least 1".into()));
    }
    let t = super::loaded_scale(&mut target.connect()?)?;
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let window = (start + o.warmup, start + o.warmup + o.duration);
    let results: Vec<Result<Totals>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..o.clients)
            .map(|n| {
                let (t, stop) = (&t, &stop);
                s.spawn(move || {
                    let r = client(target, t, o, n, window, stop);
                    if r.is_err() {
                        stop.store(true, Relaxed);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut all = Totals::new();
    for r in results {
        let t = r?;
        for (sum, h) in all.kinds.iter_mut().zip(&t.kinds) {
            sum.add(h).expect("same bounds");
        }
        all.rollbacks += t.rollbacks;
        all.retries += t.retries;
        all.unmeasured += t.unmeasured;
    }
    Ok(summarize(&t, o, &all))
}

fn summarize(t: &Tpcc, o: &RunOptions, all: &Totals) -> Summary {
    let mut total = histogram();
    for h in &all.kinds {
        total.add(h).expect("same bounds");
    }
    let minutes = o.duration.as_secs_f64() / 60.0;
    let count = |h: &Histogram<u64>| h.len();
    Summary {
        warehouses: t.warehouses,
        items: t.items,
        customers: t.customers,
        clients: o.clients,
        seed: o.seed,
        think: o.think,
        warmup_s: o.warmup.as_secs_f64(),
        duration_s: o.duration.as_secs_f64(),
        notpm: count(&all.kinds[Kind::NewOrder as usize]) as f64 / minutes,
        tpm: count(&total) as f64 / minutes,
        transactions: count(&total),
        all_transactions: count(&total) + all.unmeasured,
        rollbacks: all.rollbacks,
        retries: all.retries,
        latency: Latency::of(&total),
        kinds: KINDS
            .iter()
            .zip(&all.kinds)
            .map(|(name, h)| KindSummary {
                name,
                count: count(h),
                latency: Latency::of(h),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_summary_is_in_milliseconds() {
        let mut h = histogram();
        assert_eq!(Latency::of(&h), Latency::default());
        for us in 1..=1000u64 {
            h.record(us * 10).unwrap();
        }
        let l = Latency::of(&h);
        assert!((l.avg_ms - 5.005).abs() < 0.01, "{l:?}");
        assert!((l.p90_ms - 9.0).abs() < 0.02, "{l:?}");
        assert!((l.p99_ms - 9.9).abs() < 0.02, "{l:?}");
        assert!((l.max_ms - 10.0).abs() < 0.02, "{l:?}");
    }

    #[test]
    fn summary_counts_per_minute() {
        let t = Tpcc {
            warehouses: 1,
            items: 100,
            customers: 10,
        };
        let o = RunOptions {
            clients: 2,
            duration: Duration::from_secs(30),
            warmup: Duration::ZERO,
            seed: 1,
            think: false,
        };
        let mut all = Totals::new();
        for (kind, n) in [(0, 45u64), (1, 43), (2, 4), (3, 4), (4, 4)] {
            for _ in 0..n {
                all.kinds[kind].record(1500).unwrap();
            }
        }
        all.rollbacks = 1;
        let s = summarize(&t, &o, &all);
        assert_eq!((s.notpm, s.tpm, s.transactions), (90.0, 200.0, 100));
        assert_eq!(s.kinds[1].count, 43);
        assert!((s.latency.max_ms - 1.5).abs() < 0.01);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["kinds"][0]["name"], "new_order");
        assert!(s.text().contains("notpm 90.0"));
    }
}
