//! The recorder's log (docs/FORMAT.md "Recorder log"): records of a fixed
//! 80-byte little-endian header, then the path, the second path and the
//! bytes written. Read whole into memory; a record's data is a range of it.

use std::fs::OpenOptions;
use std::io::Write;
use std::io::{Error, Result};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub const MAGIC: u32 = 0x4c52_5455;
pub const HEADER: usize = 80;

/// Record flags, as record.c sets them.
pub const F_DIRECT: u16 = 1;
pub const F_DSYNC: u16 = 2;
pub const F_DIR: u16 = 4;
pub const F_CREATED: u16 = 8;
pub const F_SOURCE_OUTSIDE: u16 = 16;
pub const F_TARGET_OUTSIDE: u16 = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Open,
    Write,
    Fsync,
    Fdatasync,
    Syncfs,
    SyncFileRange,
    Truncate,
    Fallocate,
    Rename,
    Link,
    Unlink,
    Mkdir,
    Rmdir,
    Dup,
    Close,
    Mark,
    Sync,
    /// A write about to start (offset, length, no data): unanswered by a
    /// Write of the same thread, it was in flight when the process died.
    WriteBegin,
}

impl Op {
    fn from_code(c: u16) -> Option<Op> {
        use Op::*;
        const ALL: [Op; 18] = [
            Open,
            Write,
            Fsync,
            Fdatasync,
            Syncfs,
            SyncFileRange,
            Truncate,
            Fallocate,
            Rename,
            Link,
            Unlink,
            Mkdir,
            Rmdir,
            Dup,
            Close,
            Mark,
            Sync,
            WriteBegin,
        ];
        ALL.get(usize::from(c).checked_sub(1)?).copied()
    }

    fn code(self) -> u16 {
        self as u16 + 1
    }
}

/// One record; `data` is a range of the log's bytes.
#[derive(Clone, Debug)]
pub struct Record {
    pub op: Op,
    pub flags: u16,
    pub pid: u32,
    pub tid: u32,
    pub fd: i32,
    pub time_ns: u64,
    pub ino: (u64, u64),
    pub offset: u64,
    pub length: u64,
    pub aux: u32,
    pub path: String,
    pub path2: String,
    pub data: std::ops::Range<usize>,
}

/// A whole log: its bytes and its records in order.
pub struct Log {
    pub bytes: Vec<u8>,
    pub records: Vec<Record>,
    /// Whether the last record was cut short (left out of `records`): the
    /// recorded process was killed while it appended it.
    pub cut_short: bool,
}

impl Log {
    pub fn read(path: &Path) -> Result<Log> {
        Log::parse(std::fs::read(path)?)
    }

    pub fn parse(bytes: Vec<u8>) -> Result<Log> {
        let mut records = Vec::new();
        let mut at = 0;
        let mut cut_short = false;
        let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        while at < bytes.len() {
            let bad = |why: &str| Error::other(format!("recorder log at byte {at}: {why}"));
            if bytes.len() - at < HEADER {
                // The last record, cut short by a kill during its write
                // (its write was announced: it counts as in flight).
                if bytes.len() - at >= 4 && u32_at(&bytes, at) != MAGIC {
                    return Err(bad("no record magic"));
                }
                cut_short = true;
                break;
            }
            let h = &bytes[at..at + HEADER];
            if u32_at(h, 0) != MAGIC {
                return Err(bad("no record magic"));
            }
            let total = u32_at(h, 4) as usize;
            if bytes.len() - at < total && total >= HEADER {
                cut_short = true;
                break;
            }
            let code = u16::from_le_bytes([h[8], h[9]]);
            let op = Op::from_code(code).ok_or_else(|| bad(&format!("unknown op {code}")))?;
            let (path_len, path2_len) = (u32_at(h, 68) as usize, u32_at(h, 72) as usize);
            if total < HEADER + path_len + path2_len || bytes.len() - at < total {
                return Err(bad("lengths beyond the record or the log"));
            }
            let text = |from: usize, len: usize| {
                String::from_utf8_lossy(&bytes[from..from + len]).into_owned()
            };
            let p = at + HEADER;
            records.push(Record {
                op,
                flags: u16::from_le_bytes([h[10], h[11]]),
                pid: u32_at(h, 12),
                tid: u32_at(h, 16),
                fd: u32_at(h, 20) as i32,
                time_ns: u64_at(h, 28),
                ino: (u64_at(h, 36), u64_at(h, 44)),
                offset: u64_at(h, 52),
                length: u64_at(h, 60),
                aux: u32_at(h, 76),
                path: text(p, path_len),
                path2: text(p + path_len, path2_len),
                data: p + path_len + path2_len..at + total,
            });
            at += total;
        }
        Ok(Log {
            bytes,
            records,
            cut_short,
        })
    }

    pub fn data(&self, r: &Record) -> &[u8] {
        &self.bytes[r.data.clone()]
    }
}

/// Appends a mark (a client's note, such as "commit 17 acknowledged") to
/// the log, in one O_APPEND write as the recorder's records are: its place
/// among the recorded calls is a point in the run's completion order.
pub fn append_mark(log: &Path, text: &str) -> Result<()> {
    let mut rec = vec![0u8; HEADER];
    let total = (HEADER + text.len()) as u32;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    rec[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    rec[4..8].copy_from_slice(&total.to_le_bytes());
    rec[8..10].copy_from_slice(&Op::Mark.code().to_le_bytes());
    rec[12..16].copy_from_slice(&std::process::id().to_le_bytes());
    rec[20..24].copy_from_slice(&(-1i32).to_le_bytes());
    rec[28..36].copy_from_slice(&now.to_le_bytes());
    rec[68..72].copy_from_slice(&(text.len() as u32).to_le_bytes());
    rec.extend_from_slice(text.as_bytes());
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(log)?;
    f.write_all(&rec)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{append_mark, Log, Op};

    #[test]
    fn a_last_record_cut_short_is_left_out_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        append_mark(&path, "first").unwrap();
        append_mark(&path, "second").unwrap();
        let whole = std::fs::read(&path).unwrap();
        let log = Log::parse(whole.clone()).unwrap();
        assert_eq!((log.records.len(), log.cut_short), (2, false));
        assert_eq!(log.records[1].op, Op::Mark);
        // Cut in the second record's text, in its header, in its magic.
        let first = 80 + "first".len();
        for cut in [whole.len() - 2, first + 40, first + 2] {
            let log = Log::parse(whole[..cut].to_vec()).unwrap();
            assert_eq!(
                (log.records.len(), log.cut_short),
                (1, true),
                "cut at {cut}"
            );
            assert_eq!(log.records[0].path, "first");
        }
        // Bytes that are no record are still an error.
        let mut bad = whole.clone();
        bad.extend_from_slice(&[0u8; 8]);
        assert!(Log::parse(bad).is_err());
    }
}
