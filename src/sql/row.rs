//! The row and key codecs of SQL tables (docs/FORMAT.md, "SQL rows and
//! keys"). Rows are decoded from disk: a malformed one is an error, never
//! a panic.

use super::types::{codes, SqlError, SqlType, Value};

/// The row format's version byte.
const ROW_VERSION: u8 = 1;

fn corrupt(detail: &str) -> SqlError {
    SqlError::new(
        codes::DATA_CORRUPTED,
        format!("malformed SQL row: {detail}"),
    )
}

/// Encodes a row: version, column count (u16 LE), null bitmap, then each
/// non-null field in column order.
pub fn encode_row(types: &[SqlType], row: &[Value]) -> Vec<u8> {
    let n = types.len();
    let mut out = Vec::with_capacity(3 + n.div_ceil(8) + n * 8);
    out.push(ROW_VERSION);
    out.extend_from_slice(&(n as u16).to_le_bytes());
    let bitmap_at = out.len();
    out.resize(bitmap_at + n.div_ceil(8), 0);
    for (i, (ty, v)) in types.iter().zip(row).enumerate() {
        match v {
            Value::Null => out[bitmap_at + i / 8] |= 1 << (i % 8),
            Value::Bool(b) => out.push(*b as u8),
            Value::Int(x) if *ty == SqlType::Int4 => {
                out.extend_from_slice(&(*x as i32).to_le_bytes())
            }
            Value::Int(x) | Value::Timestamp(x) => out.extend_from_slice(&x.to_le_bytes()),
            Value::Text(s) => {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    out
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], SqlError> {
    if b.len() < n {
        return Err(corrupt("a field runs past the end"));
    }
    let (head, tail) = b.split_at(n);
    *b = tail;
    Ok(head)
}

/// Decodes a row written by [`encode_row`] for a table of `types`. A row
/// written before columns were added would have fewer: those read NULL.
pub fn decode_row(types: &[SqlType], bytes: &[u8]) -> Result<Vec<Value>, SqlError> {
    let mut b = bytes;
    let head = take(&mut b, 3)?;
    if head[0] != ROW_VERSION {
        return Err(corrupt(&format!("unknown version {}", head[0])));
    }
    let n = u16::from_le_bytes([head[1], head[2]]) as usize;
    if n > types.len() {
        return Err(corrupt(&format!(
            "{n} columns, the table has {}",
            types.len()
        )));
    }
    let bitmap = take(&mut b, n.div_ceil(8))?;
    let mut row = Vec::with_capacity(types.len());
    for (i, ty) in types.iter().enumerate() {
        if i >= n || bitmap[i / 8] & (1 << (i % 8)) != 0 {
            row.push(Value::Null);
            continue;
        }
        row.push(match ty {
            SqlType::Bool => Value::Bool(take(&mut b, 1)?[0] != 0),
            SqlType::Int4 => {
                Value::Int(i32::from_le_bytes(take(&mut b, 4)?.try_into().unwrap()) as i64)
            }
            SqlType::Int8 => Value::Int(i64::from_le_bytes(take(&mut b, 8)?.try_into().unwrap())),
            SqlType::Timestamp => {
                Value::Timestamp(i64::from_le_bytes(take(&mut b, 8)?.try_into().unwrap()))
            }
            _ => {
                let len = u32::from_le_bytes(take(&mut b, 4)?.try_into().unwrap()) as usize;
                let s = std::str::from_utf8(take(&mut b, len)?)
                    .map_err(|_| corrupt("a text field is not UTF-8"))?;
                Value::Text(s.to_string())
            }
        });
    }
    if !b.is_empty() {
        return Err(corrupt("bytes after the last field"));
    }
    Ok(row)
}

/// Appends the order-preserving encoding of one value: a tag byte (0x00
/// NULL, 0x01 a value), then integers and timestamps as 8 big-endian
/// bytes with the sign bit flipped, booleans as one byte, text with
/// trailing blanks removed (bpchar semantics), each 0x00 written as
/// 0x00 0xFF and ended by 0x00 0x01. Byte order is value order.
pub fn encode_key_into(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(0),
        Value::Bool(b) => out.extend_from_slice(&[1, *b as u8]),
        Value::Int(x) | Value::Timestamp(x) => {
            out.push(1);
            out.extend_from_slice(&((*x as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Text(s) => {
            out.push(1);
            for &c in s.trim_end_matches(' ').as_bytes() {
                out.push(c);
                if c == 0 {
                    out.push(0xFF);
                }
            }
            out.extend_from_slice(&[0, 1]);
        }
    }
}

/// The key of one value (a one-column primary key, or a hidden row id).
pub fn encode_key(v: &Value) -> Vec<u8> {
    encode_keys([v])
}

/// The key of several values, one encoding after another: each is
/// self-delimiting and order-preserving, so byte order is the values'
/// order, first value first (a composite primary key, or a prefix of one).
pub fn encode_keys<'a>(values: impl IntoIterator<Item = &'a Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(9);
    for v in values {
        encode_key_into(&mut out, v);
    }
    out
}

/// A secondary index entry's key: the indexed columns' values, then the
/// row's key.
pub fn index_key<'a>(values: impl IntoIterator<Item = &'a Value>, row_key: &[u8]) -> Vec<u8> {
    let mut out = encode_keys(values);
    out.extend_from_slice(row_key);
    out
}

/// What follows one value's encoding of type `ty` at the start of `bytes`.
fn skip_key_value(ty: SqlType, bytes: &[u8]) -> Result<&[u8], SqlError> {
    let malformed = || corrupt("a malformed index entry");
    match (bytes.first(), ty) {
        (Some(0), _) => Ok(&bytes[1..]),
        (Some(1), SqlType::Bool) if bytes.len() >= 2 => Ok(&bytes[2..]),
        (Some(1), SqlType::Int4 | SqlType::Int8 | SqlType::Timestamp) if bytes.len() >= 9 => {
            Ok(&bytes[9..])
        }
        (Some(1), SqlType::Bool | SqlType::Int4 | SqlType::Int8 | SqlType::Timestamp) => {
            Err(malformed())
        }
        (Some(1), _) => {
            let mut i = 1;
            while i + 1 < bytes.len() {
                if bytes[i] == 0 {
                    if bytes[i + 1] == 1 {
                        return Ok(&bytes[i + 2..]);
                    }
                    i += 2;
                } else {
                    i += 1;
                }
            }
            Err(corrupt("an index entry without a text terminator"))
        }
        _ => Err(malformed()),
    }
}

/// The row key in an index entry on columns of types `types`.
pub fn index_row_key(
    types: impl IntoIterator<Item = SqlType>,
    entry: &[u8],
) -> Result<&[u8], SqlError> {
    let mut rest = entry;
    for ty in types {
        rest = skip_key_value(ty, rest)?;
    }
    Ok(rest)
}

/// The smallest key greater than every key starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_bad_bytes_are_errors() {
        let types = [
            SqlType::Int4,
            SqlType::Int8,
            SqlType::Bpchar(3),
            SqlType::Bool,
            SqlType::Timestamp,
        ];
        let row = vec![
            Value::Int(-5),
            Value::Null,
            Value::Text("ab ".into()),
            Value::Bool(true),
            Value::Timestamp(7),
        ];
        let bytes = encode_row(&types, &row);
        assert_eq!(decode_row(&types, &bytes).unwrap(), row);
        for cut in 0..bytes.len() {
            assert!(decode_row(&types, &bytes[..cut]).is_err());
        }
        assert!(decode_row(&types[..2], &bytes).is_err());
    }

    #[test]
    fn key_order_is_value_order() {
        let ints = [i64::MIN, -300, -1, 0, 1, 255, 256, i64::MAX];
        for w in ints.windows(2) {
            assert!(encode_key(&Value::Int(w[0])) < encode_key(&Value::Int(w[1])));
        }
        let texts = ["", "a", "a\0", "ab", "b"];
        for w in texts.windows(2) {
            assert!(encode_key(&Value::Text(w[0].into())) < encode_key(&Value::Text(w[1].into())));
        }
        assert_eq!(
            encode_key(&Value::Text("x  ".into())),
            encode_key(&Value::Text("x".into()))
        );
        assert!(encode_key(&Value::Null) < encode_key(&Value::Int(i64::MIN)));
        let rk = encode_key(&Value::Int(9));
        let e = index_key([&Value::Text("a\0b".into())], &rk);
        assert_eq!(index_row_key([SqlType::Text], &e).unwrap(), &rk[..]);
        let e = index_key([&Value::Int(3)], &rk);
        assert_eq!(index_row_key([SqlType::Int4], &e).unwrap(), &rk[..]);
        let cols = [Value::Int(1), Value::Null, Value::Text("x\0".into())];
        let e = index_key(&cols, &rk);
        let types = [SqlType::Int4, SqlType::Int8, SqlType::Varchar(None)];
        assert_eq!(index_row_key(types, &e).unwrap(), &rk[..]);
        assert!(index_row_key(types, &e[..12]).is_err());
    }

    /// A composite key's byte order is its tuples' order, first column
    /// first, whatever the lengths of the texts before the last column.
    #[test]
    fn composite_key_order_is_tuple_order() {
        let mut tuples = Vec::new();
        for t in ["", "a", "a\0", "ab", "b"] {
            for i in [-5i64, 0, 7] {
                for u in ["", "z"] {
                    tuples.push((t, i, u));
                }
            }
        }
        let key = |&(t, i, u): &(&str, i64, &str)| {
            encode_keys(&[Value::Text(t.into()), Value::Int(i), Value::Text(u.into())])
        };
        for w in tuples.windows(2) {
            assert!(key(&w[0]) < key(&w[1]), "{:?} {:?}", w[0], w[1]);
        }
    }
}
