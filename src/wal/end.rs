//! Why valid WAL ends where it does.

use super::format::{MAX_RECORD_LEN, RECORD_HEADER_LEN};
use super::segment;
use crate::lsn::Lsn;
use std::fmt;

/// Why valid WAL ends where it does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndOfWal {
    /// A record's length is zero (never-written, zero-filled space).
    ZeroLength,
    /// A record's length is shorter than a record header.
    RecordTooShort { len: u32 },
    /// A record's length is longer than any record can be.
    RecordTooLong { len: u32 },
    /// A record's CRC does not match its bytes.
    BadCrc { stored: u32, calculated: u32 },
    /// A page does not start with the WAL page magic.
    BadPageMagic { page: Lsn, found: u32 },
    /// A page header's version, flags or continuation fields are invalid.
    BadPageHeader { page: Lsn, detail: String },
    /// A page carries another address than where it lies (a stale page of a
    /// recycled segment, or a page written to the wrong place).
    WrongPageAddress { expected: Lsn, found: Lsn },
    /// A page or record carries an older epoch than what precedes it.
    StaleEpoch { at: Lsn, previous: u32, found: u32 },
    /// A page's continuation does not match the record continued onto it.
    BadContinuation {
        page: Lsn,
        expected: u32,
        found: u32,
    },
    /// A record's previous-record LSN is not the record before it.
    BadPrevLsn { expected: Lsn, found: Lsn },
    /// The next segment file does not exist.
    MissingSegment { segment: u64 },
    /// The segment file ends before the page.
    ShortSegment { segment: u64, len: u64 },
    /// A page could not be read (EIO).
    Unreadable { page: Lsn, error: String },
    /// The segment's long header names another database or other sizes.
    ForeignSegment { segment: u64, detail: String },
}

impl fmt::Display for EndOfWal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndOfWal::ZeroLength => write!(f, "record length is zero"),
            EndOfWal::RecordTooShort { len } => write!(
                f,
                "invalid record length: expected at least {RECORD_HEADER_LEN}, got {len}"
            ),
            EndOfWal::RecordTooLong { len } => write!(
                f,
                "record length {len} is longer than the maximum {MAX_RECORD_LEN}"
            ),
            EndOfWal::BadCrc { stored, calculated } => write!(
                f,
                "incorrect record CRC: stored {stored:#010x}, calculated {calculated:#010x}"
            ),
            EndOfWal::BadPageMagic { page, found } => {
                write!(f, "invalid magic number {found:#010x} in WAL page {page}")
            }
            EndOfWal::BadPageHeader { page, detail } => {
                write!(f, "invalid header in WAL page {page}: {detail}")
            }
            EndOfWal::WrongPageAddress { expected, found } => {
                write!(f, "unexpected page address {found} in WAL page {expected}")
            }
            EndOfWal::StaleEpoch {
                at,
                previous,
                found,
            } => write!(
                f,
                "stale epoch {found} at {at} after epoch {previous} (left over from before an earlier crash)"
            ),
            EndOfWal::BadContinuation {
                page,
                expected,
                found,
            } => write!(
                f,
                "WAL page {page} continues a record with {found} bytes, expected {expected}"
            ),
            EndOfWal::BadPrevLsn { expected, found } => write!(
                f,
                "record with incorrect previous-record LSN {found}, expected {expected}"
            ),
            EndOfWal::MissingSegment { segment } => write!(
                f,
                "WAL segment {} does not exist",
                segment::segment_file_name(*segment)
            ),
            EndOfWal::ShortSegment { segment, len } => write!(
                f,
                "WAL segment {} is only {len} bytes long",
                segment::segment_file_name(*segment)
            ),
            EndOfWal::Unreadable { page, error } => {
                write!(f, "WAL page {page} cannot be read: {error}")
            }
            EndOfWal::ForeignSegment { segment, detail } => write!(
                f,
                "WAL segment {} belongs elsewhere: {detail}",
                segment::segment_file_name(*segment)
            ),
        }
    }
}
