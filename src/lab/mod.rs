//! The benchmark laboratory: the seeds' workloads run by many client
//! threads against the embedded engine, configurations compared in one
//! run with repeats interleaved, figures per run and per second.
//!
//! - [`result`]: what a run measures (the JSON, CSV and report shape);
//! - [`workload`]: pgbench's TPC-B-like transaction and sysbench's OLTP set;
//! - [`device`]: device models, a file layer that adds modelled latency to
//!   the real one (`--device`);
//! - [`noise`]: the noise monitor (other processes, steal, a calibration
//!   probe) and the disturbed-run rule;
//! - [`page_io`]: every page written and read, by destination, and the
//!   bytes written to each kind of file;
//! - [`runner`]: clients, warm-up, per-second sampling, interleaved repeats;
//! - [`compare`]: every combination of settings, run round by round in a
//!   balanced order, one database open at a time;
//! - [`prepare`]: a template loaded once, a fresh durable copy per run,
//!   opened cleanly and prewarmed alike;
//! - [`adaptive`]: how many rounds (`--repeat auto|N`) and why it stopped;
//! - [`confidence`]: paired ratios with 95 % intervals, the balanced order
//!   of a round, when an adaptive run has enough;
//! - [`cycles`]: checkpoint cycles folded onto one (the 100 ms series);
//! - [`regime`]: the regime in one line (data against the pool, the
//!   checkpoint cycle set and measured, the device), and disturbed runs;
//! - [`report`], [`plot`]: tables in the seeds' shape, CSV, plots and the
//!   HTML report;
//! - [`study`]: each seed's experiment rerun, its table beside ours with a
//!   verdict per claim (`untorn study`);
//! - [`checksum_bench`]: single-core throughput of the page checksums
//!   (`untorn bench-checksums`).

pub mod adaptive;
pub mod checksum_bench;
pub mod compare;
pub mod confidence;
pub mod config;
pub mod cycles;
pub mod device;
pub mod disturbed;
pub mod instruction_counts;
pub mod instructions;
pub mod noise;
pub mod page_io;
pub mod plot;
pub mod prepare;
pub mod regime;
pub mod report;
pub mod result;
pub mod runner;
pub mod study;
pub mod workload;
