//! COPY ... FROM STDIN in text format: tab-separated fields, `\N` for
//! NULL, backslash escapes, and a line `\.` that ends the data; and the
//! state of a session's COPY in progress (the session's side:
//! session_copy.rs).

use super::catalog::TableMeta;
use super::exec::Tx;
use super::types::{codes, SqlError, Value};
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
        // PostgreSQL's text cannot hold NUL: its COPY refuses it as it
        // refuses any byte the encoding lacks.
        if s.contains(&0) {
            return Err(SqlError::new(
                codes::CHARACTER_NOT_IN_REPERTOIRE,
                "invalid byte sequence for encoding \"UTF8\": 0x00",
            ));
        }
        out.push(Value::Text(String::from_utf8(s).map_err(|e| {
            let b = e.as_bytes()[e.utf8_error().valid_up_to()];
            SqlError::new(
                codes::CHARACTER_NOT_IN_REPERTOIRE,
                format!("invalid byte sequence for encoding \"UTF8\": 0x{b:02x}"),
            )
        })?));
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
    /// The autocommit COPY's own transaction (in a block, the block's
    /// holds the rows): one transaction whatever the size.
    pub(super) tx: Option<Tx>,
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

    /// A NUL byte in a field was stored (PostgreSQL's text cannot hold
    /// one); now it is 22021, as bytes outside UTF-8 are.
    #[test]
    fn a_nul_byte_or_bytes_outside_utf8_are_22021() {
        for line in [&b"1\ta\0b"[..], b"1\t\xff"] {
            let e = fields(line, 2).unwrap_err();
            assert_eq!(e.code, codes::CHARACTER_NOT_IN_REPERTOIRE, "{e}");
        }
        assert!(fields(b"1\ta\\0b", 2).is_ok(), "an escaped 0 is the digit");
    }
}
