//! COPY ... FROM STDIN in text format: tab-separated fields, `\N` for
//! NULL, backslash escapes, and a line `\.` that ends the data; and a
//! session's COPY in progress, fed by `copy_data` and ended by
//! `copy_done` or `copy_fail`.

use super::catalog::TableMeta;
use super::engine_err;
use super::exec::{self, Sink, Tx};
use super::session::{Session, State};
use super::types::{codes, Outcome, SqlError, Value};
use std::sync::Arc;

/// Splits `data` into complete lines, keeping a partial last line in `buf`.
pub fn lines(buf: &mut Vec<u8>, data: &[u8]) -> Vec<Vec<u8>> {
    buf.extend_from_slice(data);
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..buf.len() {
        if buf[i] == b'\n' {
            let mut line = buf[start..i].to_vec();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            out.push(line);
            start = i + 1;
        }
    }
    buf.drain(..start);
    out
}

fn bad(msg: String) -> SqlError {
    SqlError::new(codes::BAD_COPY_FILE_FORMAT, msg)
}

/// The fields of one line (not the end marker).
pub fn fields(line: &[u8], want: usize) -> Result<Vec<Value>, SqlError> {
    let mut out = Vec::with_capacity(want);
    for raw in line.split(|&b| b == b'\t') {
        if raw == b"\\N" {
            out.push(Value::Null);
            continue;
        }
        let mut s = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            if raw[i] == b'\\' && i + 1 < raw.len() {
                i += 1;
                s.push(match raw[i] {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'b' => 8,
                    b'f' => 12,
                    b'v' => 11,
                    c => c,
                });
            } else {
                s.push(raw[i]);
            }
            i += 1;
        }
        out.push(Value::Text(
            String::from_utf8(s).map_err(|_| bad("invalid UTF-8 in COPY data".into()))?,
        ));
    }
    if out.len() != want {
        return Err(bad(format!(
            "COPY row has {} columns, expected {want}",
            out.len()
        )));
    }
    Ok(out)
}

pub(super) struct CopyState {
    pub(super) meta: Arc<TableMeta>,
    pub(super) targets: Vec<usize>,
    pub(super) buf: Vec<u8>,
    pub(super) count: u64,
    pub(super) ended: bool,
    pub(super) batched: bool,
    /// The autocommit COPY's own transaction, or a batch's.
    pub(super) tx: Option<Tx>,
    pub(super) in_batch: usize,
}

impl Session {
    pub fn copy_data(&mut self, data: &[u8]) -> Result<(), SqlError> {
        let Some(mut c) = self.copy.take() else {
            return Ok(());
        };
        match self.copy_lines(&mut c, data) {
            Ok(()) => {
                self.copy = Some(c);
                Ok(())
            }
            Err(e) => Err(self.abandon_copy(c, e)),
        }
    }

    fn copy_lines(&mut self, c: &mut CopyState, data: &[u8]) -> Result<(), SqlError> {
        let eng = self.engine.clone();
        for line in lines(&mut c.buf, data) {
            if c.ended {
                continue;
            }
            if line == b"\\." {
                c.ended = true;
                continue;
            }
            let row = exec::build_row(&c.meta, &c.targets, fields(&line, c.targets.len())?)?;
            if c.batched {
                let mut sink = Sink::batched(&eng.db, &c.meta);
                if let Sink::Batched { tx, in_tx, .. } = &mut sink {
                    std::mem::swap(tx, &mut c.tx);
                    *in_tx = c.in_batch;
                }
                exec::insert_row(&mut sink, &c.meta, &row)?;
                if let Sink::Batched { tx, in_tx, .. } = sink {
                    c.tx = tx;
                    c.in_batch = in_tx;
                }
            } else {
                match &mut self.state {
                    State::Block(tx) => {
                        let tx = tx.get_or_insert_with(|| eng.db.begin_shared());
                        exec::insert_row(&mut Sink::Tx(tx), &c.meta, &row)?;
                    }
                    _ => {
                        let tx = c.tx.get_or_insert_with(|| eng.db.begin_shared());
                        exec::insert_row(&mut Sink::Tx(tx), &c.meta, &row)?;
                    }
                }
            }
            c.count += 1;
        }
        Ok(())
    }

    fn abandon_copy(&mut self, c: CopyState, e: SqlError) -> SqlError {
        if let Some(t) = c.tx {
            t.abort();
        }
        if c.batched {
            self.batched.insert(c.meta.def.name.clone());
        }
        if matches!(self.state, State::Block(_)) {
            self.fail(&e);
        } else {
            self.undo_bulk();
        }
        e
    }

    pub fn copy_done(&mut self) -> Result<Outcome, SqlError> {
        let Some(mut c) = self.copy.take() else {
            return Err(SqlError::new(
                codes::PROTOCOL_VIOLATION,
                "no COPY in progress",
            ));
        };
        let r = (|| {
            if !c.buf.is_empty() && !c.ended {
                let rest = std::mem::take(&mut c.buf);
                let mut with_nl = rest;
                with_nl.push(b'\n');
                self.copy_lines(&mut c, &with_nl)?;
            }
            if let Some(t) = c.tx.take() {
                t.commit().map_err(engine_err)?;
            }
            Ok(())
        })();
        match r {
            Ok(()) => {
                if c.batched && matches!(self.state, State::Block(_)) {
                    self.batched.insert(c.meta.def.name.clone());
                }
                Ok(Outcome::Command {
                    tag: format!("COPY {}", c.count),
                })
            }
            Err(e) => Err(self.abandon_copy(c, e)),
        }
    }

    pub fn copy_fail(&mut self, message: &str) -> SqlError {
        let e = SqlError::new("57014", format!("COPY from stdin failed: {message}"));
        match self.copy.take() {
            Some(c) => self.abandon_copy(c, e),
            None => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_across_chunks_and_fields_unescape() {
        let mut buf = Vec::new();
        assert!(lines(&mut buf, b"1\ta").is_empty());
        let l = lines(&mut buf, b"\\tb\n2\t\\N\n\\.\n");
        assert_eq!(
            l,
            vec![b"1\ta\\tb".to_vec(), b"2\t\\N".to_vec(), b"\\.".to_vec()]
        );
        assert_eq!(
            fields(&l[0], 2).unwrap(),
            vec![Value::Text("1".into()), Value::Text("a\tb".into())]
        );
        assert_eq!(fields(&l[1], 2).unwrap()[1], Value::Null);
        assert_eq!(
            fields(&l[1], 3).unwrap_err().code,
            codes::BAD_COPY_FILE_FORMAT
        );
    }
}
