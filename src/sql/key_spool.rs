//! The keys of the rows an UPDATE changes, set aside before any is
//! changed when changing one could move it ahead of the statement's own
//! scan, to be read and changed again (the Halloween problem): an UPDATE
//! of a primary-key column, or of an index's column while it scans that
//! index. PostgreSQL's scans do not see the rows their own command wrote;
//! untorn's read the transaction as it is, so such an UPDATE first reads
//! all it will change, then changes it.
//!
//! Rules:
//! - Keys are held in memory, charged to the connection, up to
//!   `work_mem`; past it they go to a temporary file (file/temp.rs) and
//!   the charge is given back, so an UPDATE of any size holds at most
//!   `work_mem` of them (temp_file_limit bounds the file).
//! - They come back in the order they were pushed.
//! - A record is a `u32` length (little-endian), then the key; a
//!   malformed one is XX000, never a panic.

use super::engine_err;
use super::memory::Charge;
use super::types::{codes, SqlError};
use crate::db::Database;
use crate::file::temp::TempFile;

/// Bytes written to the file at a time, and read back at a time.
const CHUNK: usize = 256 << 10;

/// Memory a held key is charged: its bytes and its vector.
fn key_bytes(key: &[u8]) -> usize {
    key.len() + std::mem::size_of::<Vec<u8>>()
}

pub struct KeySpool<'a> {
    db: &'a Database,
    work_mem: usize,
    held: Vec<Vec<u8>>,
    bytes: usize,
    charge: Charge,
    file: Option<TempFile>,
}

impl<'a> KeySpool<'a> {
    pub fn new(db: &'a Database, work_mem: usize, charge: Charge) -> KeySpool<'a> {
        KeySpool {
            db,
            work_mem: work_mem.max(1),
            held: Vec::new(),
            bytes: 0,
            charge,
            file: None,
        }
    }

    pub fn push(&mut self, key: Vec<u8>) -> Result<(), SqlError> {
        self.bytes += key_bytes(&key);
        self.held.push(key);
        if self.bytes > self.charge.bytes() {
            let more = (64 << 10).max(self.bytes - self.charge.bytes());
            self.charge.grow(more, "an UPDATE's keys")?;
        }
        if self.bytes > self.work_mem {
            self.spill()?;
        }
        Ok(())
    }

    /// Writes the held keys to the end of the file.
    fn spill(&mut self) -> Result<(), SqlError> {
        if self.file.is_none() {
            self.file = Some(self.db.temp_file().map_err(engine_err)?);
        }
        let file = self.file.as_mut().expect("just made");
        let mut buf = Vec::with_capacity(CHUNK);
        for k in self.held.drain(..) {
            buf.extend_from_slice(&(k.len() as u32).to_le_bytes());
            buf.extend_from_slice(&k);
            if buf.len() >= CHUNK {
                file.append(&buf).map_err(engine_err)?;
                buf.clear();
            }
        }
        file.append(&buf).map_err(engine_err)?;
        self.bytes = 0;
        self.charge.clear();
        Ok(())
    }

    /// The keys, in the order pushed.
    pub fn finish(self) -> SpooledKeys {
        SpooledKeys {
            file: self.file,
            next: 0,
            buf: Vec::new(),
            at: 0,
            held: self.held.into_iter(),
            _charge: self.charge,
        }
    }
}

pub struct SpooledKeys {
    file: Option<TempFile>,
    /// Where the file's next unread chunk starts.
    next: u64,
    buf: Vec<u8>,
    /// Where in `buf` the next record starts.
    at: usize,
    held: std::vec::IntoIter<Vec<u8>>,
    _charge: Charge,
}

impl SpooledKeys {
    pub fn next_key(&mut self) -> Result<Option<Vec<u8>>, SqlError> {
        if let Some(file) = &self.file {
            if let Some(key) = self.next_in_file(file.len())? {
                return Ok(Some(key));
            }
        }
        Ok(self.held.next())
    }

    fn next_in_file(&mut self, end: u64) -> Result<Option<Vec<u8>>, SqlError> {
        let Some(len) = self.take(4, end)? else {
            return Ok(None);
        };
        let len = u32::from_le_bytes(len.try_into().expect("four bytes")) as usize;
        match self.take(len, end)? {
            Some(key) => Ok(Some(key)),
            None => Err(malformed()),
        }
    }

    /// The next `n` bytes of the file; `None` at its end, an error if it
    /// ends inside them.
    fn take(&mut self, n: usize, end: u64) -> Result<Option<Vec<u8>>, SqlError> {
        while self.buf.len() - self.at < n {
            let left = end - self.next;
            if left == 0 {
                return match self.buf.len() == self.at {
                    true => Ok(None),
                    false => Err(malformed()),
                };
            }
            self.buf.drain(..self.at);
            self.at = 0;
            let have = self.buf.len();
            let want = (left as usize).min(CHUNK.max(n - have));
            self.buf.resize(have + want, 0);
            let file = self.file.as_ref().expect("reading the file");
            let got = file
                .read_at(&mut self.buf[have..], self.next)
                .map_err(engine_err)?;
            if got == 0 {
                return Err(malformed());
            }
            self.buf.truncate(have + got);
            self.next += got as u64;
        }
        let out = self.buf[self.at..self.at + n].to_vec();
        self.at += n;
        Ok(Some(out))
    }
}

fn malformed() -> SqlError {
    SqlError::new(
        codes::INTERNAL_ERROR,
        "an UPDATE's temporary file of keys is malformed",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::memory::{ConnectionMemory, ServerMemory};

    fn spool_round_trip(work_mem: usize, keys: &[Vec<u8>]) -> (Vec<Vec<u8>>, bool) {
        let dir = tempfile::tempdir().unwrap();
        let db =
            Database::create(&dir.path().join("db"), crate::options::Options::default()).unwrap();
        let conn = ConnectionMemory::new(&ServerMemory::new(1 << 30), 1 << 30);
        let mut spool = KeySpool::new(&db, work_mem, conn.charge());
        for k in keys {
            spool.push(k.clone()).unwrap();
        }
        let spilled = spool.file.is_some();
        let mut back = spool.finish();
        let mut out = Vec::new();
        while let Some(k) = back.next_key().unwrap() {
            out.push(k);
        }
        (out, spilled)
    }

    /// Keys past work_mem go to the file and come back in push order,
    /// followed by those still held; an empty key is a key too.
    #[test]
    fn keys_come_back_in_push_order_whether_held_or_spilled() {
        let keys: Vec<Vec<u8>> = (0..20_000u32)
            .map(|i| {
                let len = (i % 37) as usize;
                (0..len).map(|j| (i as usize * 7 + j) as u8).collect()
            })
            .collect();
        let (back, spilled) = spool_round_trip(4096, &keys);
        assert!(spilled);
        assert_eq!(back, keys);
        let (back, spilled) = spool_round_trip(64 << 20, &keys);
        assert!(!spilled);
        assert_eq!(back, keys);
    }

    /// A file cut inside a record is an error, not a panic or a short
    /// list read as whole.
    #[test]
    fn a_cut_record_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            Database::create(&dir.path().join("db"), crate::options::Options::default()).unwrap();
        let conn = ConnectionMemory::new(&ServerMemory::new(1 << 30), 1 << 30);
        let mut file = db.temp_file().unwrap();
        file.append(&10u32.to_le_bytes()).unwrap();
        file.append(b"short").unwrap();
        let mut keys = KeySpool::new(&db, 1, conn.charge()).finish();
        keys.file = Some(file);
        assert_eq!(keys.next_key().unwrap_err().code, codes::INTERNAL_ERROR);
    }
}
