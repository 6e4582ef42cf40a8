//! The write-ahead log: record and page formats, group commit, segment
//! files, and the reader that finds the end of valid WAL.
//! docs/FORMAT.md describes every byte.
//!
//! Rules:
//! - An LSN is a byte position in the WAL stream, page headers included.
//!   Segment `n` (file named by 16 uppercase hex digits) covers
//!   `[n * segment_size, (n + 1) * segment_size)`. Pages are
//!   `wal_block_size` long; each starts with a header (magic, flags,
//!   version, its own address, epoch, continued-record length), long on a
//!   segment's first page (system id, segment size, block size).
//! - Records (32-byte header: length, kind, flags, xid, previous-record LSN,
//!   epoch, CRC-32C) start 8-byte aligned; a header never straddles a page;
//!   a payload may cross pages and segments.
//! - Flushed sectors are never written again: a page header is written once
//!   when its block is started; a flush pads to a 512-byte sector boundary
//!   (a padding record), writes the sectors from the flushed position to
//!   there, then fdatasyncs, before anyone is told. The reader keeps only
//!   records up to such a boundary (an incomplete flush is dropped).
//! - A new segment is zero-filled, fsynced and renamed into place with a
//!   directory fsync before anything is written into it; a recycled one is
//!   renamed to a future name and the directory fsynced. Segments are
//!   recycled only when the caller says the control file naming a later
//!   redo point is durable.
//! - The reader checks each page's address (so stale pages of a recycled
//!   segment end the WAL), each record's CRC and previous-record LSN, and
//!   that epochs never decrease along the log (so records of a timeline cut
//!   off by an earlier recovery end it too). The epoch, kept in the control
//!   file, must be incremented durably at every opening, before the writer
//!   writes anything.

mod buffer;
pub mod config;
pub mod end;
pub mod format;
pub mod image_codec;
pub mod reader;
pub mod record;
pub mod segment;
pub mod writer;

pub use config::{WalConfig, WalStats};
pub use end::EndOfWal;
pub use format::MAX_RECORD_LEN;
pub use reader::{first_segment_start, ReadRecord, WalReader};
pub use record::{BlockRef, ImageCompression, PageImage, RecordData, RecordKind};
pub use segment::{segment_file_name, segment_path};
pub use writer::{Purpose, Reservation, Wal, MAX_RECYCLED_SEGMENTS, WAL_BUFFER_LIMIT_BYTES};
