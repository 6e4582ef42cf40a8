//! # untorn
//!
//! A page-oriented transactional storage engine whose I/O path (torn-page
//! protection, checksums, checkpoints, WAL block size) is a setting, plus the
//! laboratories that prove it keeps committed data and measure what it costs.
//!
//! The modules, bottom-up (see docs/ARCHITECTURE.md):
//! - [`file`](mod@file): the file-layer traits every I/O call passes through, the POSIX
//!   implementation and segmented data files;
//! - [`checksum`]: page checksums (`fnv`, PostgreSQL-compatible; `crc32c`);
//! - [`page`]: the page header, its layout and the checks made on every read;
//! - [`wal`]: the write-ahead log: record and page formats, group commit,
//!   the reader that finds the end of valid WAL;
//! - [`control`]: the control file (sizes fixed at creation, last checkpoint);
//! - [`database`]: creating and opening a database directory;
//! - [`verify`]: checking every page of every data file (like pg_checksums);
//! - [`stats`]: I/O counters per issuer and file kind;
//! - [`settings`]: every knob, default and range.

pub mod btree;
pub mod buffer;
pub mod checkpoint;
pub mod checksum;
pub mod control;
pub mod crashlab;
pub mod database;
pub mod db;
pub mod error;
pub mod file;
pub mod fpi;
pub mod lab;
pub mod lsn;
pub mod page;
pub mod recovery;
pub mod settings;
pub mod stats;
pub mod txn;
pub mod verify;
pub mod wal;

pub use db::{key_u64, Database, Options, Table};
pub use error::{Error, Result};
pub use lsn::Lsn;
pub use settings::{ChecksumAlgorithm, CreationSettings, TornPageProtection, WalCompression};
pub use txn::Transaction;
