//! ORDER BY and DISTINCT within `work_mem`: rows are sorted in memory
//! while they fit, else in sorted runs written to a temporary file
//! (file/temp.rs) and merged, as PostgreSQL's tuplesort spills to
//! pgsql_tmp.
//!
//! Rules:
//! - The rows held in memory are charged to the connection
//!   (`memory`), at most `work_mem` of them: past it they are sorted and
//!   written out as a run, and the charge given back.
//! - The sort is stable: rows equal under the ORDER BY keep the order in
//!   which they were read (runs are merged in the order they were
//!   written).
//! - DISTINCT sorts by the ORDER BY keys, then by every output column in
//!   a total order of values, so equal rows end up adjacent and the
//!   reader drops repeats (`Cursor`).
//! - With a LIMIT only its first rows can be returned: memory never
//!   keeps more than the limit's rows once sorted (a top-N sort), so a
//!   small LIMIT never spills.
//! - A run's records are `u32` length, `u16` key count, `u16` column
//!   count, then each value (tag, then its bytes); a malformed record is
//!   XX000, never a panic.

use super::engine_err;
use super::expr::compare;
use super::memory::Charge;
use super::types::{codes, SqlError, Value};
use crate::db::Database;
use crate::file::temp::TempFile;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// One row to sort: its ORDER BY values and its output columns.
#[derive(Debug, Clone, PartialEq)]
pub struct SortRow {
    pub keys: Vec<Value>,
    pub row: Vec<Value>,
}

/// How rows compare: each key ascending or descending, then, for
/// DISTINCT, the output columns.
#[derive(Debug)]
pub struct SortOrder {
    pub desc: Vec<bool>,
    pub distinct: bool,
}

/// NULLs sort last ascending, first descending, as in PostgreSQL. A
/// total order whatever the values (a sort panics on one that is not):
/// values of one type compare as `compare` does, of different types by
/// type (a column's values all have its type).
pub fn order_cmp(a: &Value, b: &Value, desc: bool) -> Ordering {
    let same_type = std::mem::discriminant(a) == std::mem::discriminant(b);
    let o = match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Greater,
        (_, Value::Null) => Ordering::Less,
        _ if same_type => compare(a, b).unwrap_or(Ordering::Equal),
        _ => rank(a).cmp(&rank(b)),
    };
    if desc {
        o.reverse()
    } else {
        o
    }
}

/// The order of types where values of different types meet.
fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Int(_) => 2,
        Value::Text(_) => 3,
        Value::Timestamp(_) => 4,
    }
}

/// A total order in which only equal values compare equal (`compare`
/// takes `'a'` and `'a '` as equal; DISTINCT does not).
fn identity_cmp(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Int(x), Value::Int(y)) | (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        (Value::Text(x), Value::Text(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

impl SortOrder {
    pub fn cmp(&self, a: &SortRow, b: &SortRow) -> Ordering {
        for (i, desc) in self.desc.iter().enumerate() {
            let o = order_cmp(&a.keys[i], &b.keys[i], *desc);
            if o != Ordering::Equal {
                return o;
            }
        }
        if self.distinct {
            for (x, y) in a.row.iter().zip(&b.row) {
                let o = identity_cmp(x, y);
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
        Ordering::Equal
    }
}

/// Memory a row takes, as charged.
pub fn row_bytes(r: &SortRow) -> usize {
    let value = |v: &Value| {
        std::mem::size_of::<Value>()
            + match v {
                Value::Text(s) => s.capacity(),
                _ => 0,
            }
    };
    2 * std::mem::size_of::<Vec<Value>>() + r.keys.iter().chain(&r.row).map(value).sum::<usize>()
}

/// The charge grows in steps of at least this much.
const CHARGE_STEP: usize = 64 << 10;

pub struct Sorter {
    order: Arc<SortOrder>,
    limit: Option<usize>,
    work_mem: usize,
    rows: Vec<SortRow>,
    bytes: usize,
    charge: Charge,
    file: Option<TempFile>,
    /// Each run's start and end in `file`.
    runs: Vec<(u64, u64)>,
}

impl Sorter {
    pub fn new(order: SortOrder, limit: Option<usize>, work_mem: usize, charge: Charge) -> Sorter {
        Sorter {
            order: Arc::new(order),
            limit,
            work_mem: work_mem.max(1),
            rows: Vec::new(),
            bytes: 0,
            charge,
            file: None,
            runs: Vec::new(),
        }
    }

    /// How many runs went to disk.
    #[cfg(test)]
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    pub fn push(&mut self, db: &Database, r: SortRow) -> Result<(), SqlError> {
        self.bytes += row_bytes(&r);
        self.rows.push(r);
        // The charge runs ahead of the rows in steps, not per row.
        if self.bytes > self.charge.bytes() {
            let more = CHARGE_STEP.max(self.bytes - self.charge.bytes());
            self.charge.grow(more, "a sort")?;
        }
        // A LIMIT's rows are all a sort keeps: past twice their number,
        // or past work_mem, only the first are kept (a top-N sort).
        if let Some(limit) = self.limit {
            let full = self.bytes > self.work_mem;
            if self.rows.len() > limit && (full || self.rows.len() >= 2 * limit.max(1024)) {
                self.sort_in_memory();
                self.rows.truncate(limit);
                self.recount();
            }
        }
        if self.bytes > self.work_mem {
            self.spill(db)?;
        }
        Ok(())
    }

    fn recount(&mut self) {
        self.bytes = self.rows.iter().map(row_bytes).sum();
    }

    /// Sorts the rows in memory, stably; DISTINCT drops adjacent repeats.
    fn sort_in_memory(&mut self) {
        let order = self.order.clone();
        self.rows.sort_by(|a, b| order.cmp(a, b));
        if order.distinct {
            self.rows.dedup_by(|a, b| a.row == b.row);
        }
    }

    /// Writes the rows in memory out as one sorted run.
    fn spill(&mut self, db: &Database) -> Result<(), SqlError> {
        self.sort_in_memory();
        if let Some(limit) = self.limit {
            self.rows.truncate(limit);
        }
        if self.file.is_none() {
            self.file = Some(db.temp_file().map_err(engine_err)?);
        }
        let file = self.file.as_mut().expect("just made");
        let start = file.len();
        let mut buf = Vec::with_capacity(256 << 10);
        for r in self.rows.drain(..) {
            encode(&r, &mut buf);
            if buf.len() >= 256 << 10 {
                file.append(&buf).map_err(engine_err)?;
                buf.clear();
            }
        }
        file.append(&buf).map_err(engine_err)?;
        self.runs.push((start, file.len()));
        self.bytes = 0;
        self.charge.clear();
        Ok(())
    }

    /// The rows in order.
    pub fn finish(mut self, db: &Database) -> Result<Sorted, SqlError> {
        if self.runs.is_empty() {
            self.sort_in_memory();
            return Ok(Sorted::Memory {
                rows: std::mem::take(&mut self.rows).into_iter(),
                _charge: self.charge,
            });
        }
        if !self.rows.is_empty() {
            self.spill(db)?;
        }
        let file = Arc::new(self.file.take().expect("runs are in a file"));
        // Read buffers share work_mem, but never below 8 KB.
        let chunk = (self.work_mem / self.runs.len()).max(8 << 10);
        let mut heap = BinaryHeap::new();
        let mut readers = Vec::with_capacity(self.runs.len());
        for (i, &(start, end)) in self.runs.iter().enumerate() {
            let mut reader = RunReader {
                file: file.clone(),
                next: start,
                end,
                buf: Vec::new(),
                at: 0,
                chunk,
            };
            if let Some(row) = reader.next()? {
                heap.push(Head {
                    row,
                    run: i,
                    order: self.order.clone(),
                });
            }
            readers.push(reader);
        }
        Ok(Sorted::Merge(Merge { heap, readers }))
    }
}

/// Sorted rows: from memory, or merged from runs on disk.
pub enum Sorted {
    Memory {
        rows: std::vec::IntoIter<SortRow>,
        _charge: Charge,
    },
    Merge(Merge),
}

impl Sorted {
    pub fn next(&mut self) -> Result<Option<SortRow>, SqlError> {
        match self {
            Sorted::Memory { rows, .. } => Ok(rows.next()),
            Sorted::Merge(m) => m.next(),
        }
    }
}

pub struct Merge {
    heap: BinaryHeap<Head>,
    readers: Vec<RunReader>,
}

impl Merge {
    fn next(&mut self) -> Result<Option<SortRow>, SqlError> {
        let Some(Head { row, run, order }) = self.heap.pop() else {
            return Ok(None);
        };
        if let Some(next) = self.readers[run].next()? {
            self.heap.push(Head {
                row: next,
                run,
                order,
            });
        }
        Ok(Some(row))
    }
}

/// A run's next row in the merge.
struct Head {
    row: SortRow,
    run: usize,
    order: Arc<SortOrder>,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    /// Reversed: the heap's top is the smallest row, the earlier run's
    /// first among equals (a stable merge).
    fn cmp(&self, other: &Self) -> Ordering {
        self.order
            .cmp(&self.row, &other.row)
            .then(self.run.cmp(&other.run))
            .reverse()
    }
}

/// Reads one run's records back, `chunk` bytes at a time.
struct RunReader {
    file: Arc<TempFile>,
    next: u64,
    end: u64,
    buf: Vec<u8>,
    at: usize,
    chunk: usize,
}

fn malformed() -> SqlError {
    SqlError::new(
        codes::INTERNAL_ERROR,
        "a sort's temporary file holds a malformed record",
    )
}

impl RunReader {
    /// Makes at least `n` unread bytes available, or fails at the run's end.
    fn fill(&mut self, n: usize) -> Result<(), SqlError> {
        if self.buf.len() - self.at >= n {
            return Ok(());
        }
        self.buf.drain(..self.at);
        self.at = 0;
        while self.buf.len() < n {
            let left = self.end - self.next;
            if left == 0 {
                return Err(malformed());
            }
            let want = (self.chunk.max(n - self.buf.len()) as u64).min(left) as usize;
            let old = self.buf.len();
            self.buf.resize(old + want, 0);
            let got = self
                .file
                .read_at(&mut self.buf[old..], self.next)
                .map_err(engine_err)?;
            if got == 0 {
                return Err(malformed());
            }
            self.buf.truncate(old + got);
            self.next += got as u64;
        }
        Ok(())
    }

    fn next(&mut self) -> Result<Option<SortRow>, SqlError> {
        if self.at == self.buf.len() && self.next == self.end {
            return Ok(None);
        }
        self.fill(4)?;
        let len =
            u32::from_le_bytes(self.buf[self.at..self.at + 4].try_into().expect("4")) as usize;
        self.at += 4;
        self.fill(len)?;
        let row = decode(&self.buf[self.at..self.at + len])?;
        self.at += len;
        Ok(Some(row))
    }
}

fn encode(r: &SortRow, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(r.keys.len() as u16).to_le_bytes());
    out.extend_from_slice(&(r.row.len() as u16).to_le_bytes());
    for v in r.keys.iter().chain(&r.row) {
        match v {
            Value::Null => out.push(0),
            Value::Bool(b) => out.extend_from_slice(&[1, *b as u8]),
            Value::Int(x) => {
                out.push(2);
                out.extend_from_slice(&x.to_le_bytes());
            }
            Value::Timestamp(x) => {
                out.push(3);
                out.extend_from_slice(&x.to_le_bytes());
            }
            Value::Text(s) => {
                out.push(4);
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

fn decode(mut b: &[u8]) -> Result<SortRow, SqlError> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], SqlError> {
        if b.len() < n {
            return Err(malformed());
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head)
    }
    let counts = take(&mut b, 4)?;
    let keys = u16::from_le_bytes([counts[0], counts[1]]) as usize;
    let cols = u16::from_le_bytes([counts[2], counts[3]]) as usize;
    let mut values = Vec::with_capacity(keys + cols);
    for _ in 0..keys + cols {
        let int = |b: &mut &[u8]| -> Result<i64, SqlError> {
            Ok(i64::from_le_bytes(take(b, 8)?.try_into().expect("8")))
        };
        values.push(match take(&mut b, 1)?[0] {
            0 => Value::Null,
            1 => Value::Bool(take(&mut b, 1)?[0] != 0),
            2 => Value::Int(int(&mut b)?),
            3 => Value::Timestamp(int(&mut b)?),
            4 => {
                let n = u32::from_le_bytes(take(&mut b, 4)?.try_into().expect("4")) as usize;
                let s = std::str::from_utf8(take(&mut b, n)?).map_err(|_| malformed())?;
                Value::Text(s.to_string())
            }
            _ => return Err(malformed()),
        });
    }
    if !b.is_empty() {
        return Err(malformed());
    }
    let row = values.split_off(keys);
    Ok(SortRow { keys: values, row })
}

#[cfg(test)]
#[path = "sort_tests.rs"]
mod tests;
