//! # untorn
//!
//! A page-oriented transactional storage engine whose I/O path (torn-page
//! protection, checksums, checkpoints, WAL block size) is a setting, plus the
//! laboratories that prove it keeps committed data and measure what it costs.
//!
//! The modules, bottom-up (see docs/ARCHITECTURE.md):
//! - [`error`]: errors that name the file, page or LSN that failed;
//! - [`lsn`]: log sequence numbers, byte positions in the WAL stream;
//! - [`rng`]: the seeded generator of the laboratories and tests;
//! - [`clock`]: the clock the engine paces work by (manual in tests);
//! - [`settings`]: every knob fixed at creation, default and range;
//! - [`options`]: the settings of one opening (pool, checkpoints, commits);
//! - [`file`](mod@file): the file-layer traits every I/O call passes through, the POSIX
//!   implementation, segmented data files and the I/O counters;
//! - [`checksum`]: page checksums (`fnv`, PostgreSQL-compatible; `crc32c`);
//! - [`page`]: the page header, its layout and the checks made on every read;
//! - [`wal`]: the write-ahead log: record and page formats, group commit,
//!   image compression, the reader that finds the end of valid WAL;
//! - [`control`]: the control file (sizes fixed at creation, last checkpoint);
//! - [`buffer`]: the buffer pool, its frames and the one write path;
//! - [`protect`]: torn-page protection: the image decision, full-page
//!   images, double writes;
//! - [`btree`]: the B+tree: nodes, descents, structure changes;
//! - [`table`]: tables by name and file, the key encoding;
//! - `engine`: the state an open database shares with its transactions
//!   and background threads;
//! - [`txn`]: transactions: write sets, row locks, two-phase commit;
//! - [`checkpoint`]: the checkpointer: redo point, spread and sorted
//!   writes, its record, its background thread;
//! - [`recovery`]: redo from the last checkpoint's redo point;
//! - [`db`]: the embedded database's API: open (the startup sequence),
//!   the catalog, checkpoints, statistics, close;
//! - [`stats`]: every counter in one snapshot, grouped like PostgreSQL's
//!   pg_stat views, kept across clean shutdowns in `untorn.stats`;
//! - [`sql`]: SQL tables, types and statements over the engine, for the
//!   PostgreSQL-protocol server (`untorn serve`);
//! - [`verify`]: checking every page of every data file (like pg_checksums);
//! - [`lab`]: the benchmark laboratory (`untorn bench`);
//! - [`crashlab`]: the crash laboratory (`untorn crashtest`) and its
//!   simulated file system.

pub mod btree;
pub mod buffer;
pub mod checkpoint;
pub mod checksum;
pub mod clock;
pub mod control;
pub mod crashlab;
pub mod db;
mod engine;
pub mod error;
pub mod file;
pub mod injected_panic;
pub mod lab;
pub mod latch_count;
pub mod lock_table;
pub mod lsn;
pub mod options;
pub mod page;
pub mod protect;
pub mod recovery;
pub mod rng;
pub mod server;
pub mod settings;
pub mod sql;
pub mod stats;
pub mod striped;
pub mod table;
pub mod txn;
pub mod verify;
pub mod wal;

pub use db::{key_u64, Database, Options, Table};
pub use error::{Error, Result};
pub use lsn::Lsn;
pub use settings::{ChecksumAlgorithm, CreationSettings, TornPageProtection, WalCompression};
pub use txn::Transaction;
