//! The benchmark laboratory: the seeds' workloads run by many client
//! threads against the embedded engine, configurations compared in one
//! run with repeats interleaved, figures per run and per second.
//!
//! - [`result`]: what a run measures (the JSON, CSV and report shape);
//! - [`workload`]: pgbench's TPC-B-like transaction and sysbench's OLTP set;
//! - [`runner`]: clients, warm-up, per-second sampling, interleaved repeats;
//! - [`report`]: tables in the seeds' shape, CSV, plots and the HTML report.

pub mod compare;
pub mod plot;
pub mod report;
pub mod result;
pub mod runner;
pub mod workload;
