//! How a table's definition lies in `sql.catalog`'s rows (docs/FORMAT.md
//! "Catalog"): its JSON in pieces no longer than a row may be. The first
//! piece is keyed by the table's name, as when every definition was one
//! row; piece n (from 1) by the name, a 0x00 byte and n (u16,
//! big-endian), so a table's pieces sort together, right after its first.
//! One row capped a table at about 35 columns (1,264 bytes with 8 KB
//! pages); PostgreSQL allows 1,600, which now fit.

use super::types::{codes, SqlError};

/// A catalog row: its key and value.
pub type Row = (Vec<u8>, Vec<u8>);

/// The rows of table `name`'s definition `json`, pieces of at most
/// `piece` bytes, in key order.
pub fn rows_of(name: &str, json: &[u8], piece: usize) -> Result<Vec<Row>, SqlError> {
    if name.as_bytes().contains(&0) {
        // The byte that separates a name from a piece's number.
        return Err(SqlError::new(
            codes::INVALID_NAME,
            "a table name may not contain a zero byte",
        ));
    }
    let pieces: Vec<&[u8]> = json.chunks(piece.max(1)).collect();
    if pieces.len() > usize::from(u16::MAX) {
        return Err(SqlError::new(
            codes::PROGRAM_LIMIT_EXCEEDED,
            format!("the definition of table \"{name}\" is too large to store"),
        ));
    }
    Ok(pieces
        .iter()
        .enumerate()
        .map(|(n, bytes)| (piece_key(name, n as u16), bytes.to_vec()))
        .collect())
}

/// The key of piece `n` of table `name`'s definition.
fn piece_key(name: &str, n: u16) -> Vec<u8> {
    let mut key = name.as_bytes().to_vec();
    if n > 0 {
        key.push(0);
        key.extend_from_slice(&n.to_be_bytes());
    }
    key
}

/// Where the keys of table `name`'s pieces after the first lie: from
/// (inclusive) to (exclusive).
pub fn later_pieces(name: &str) -> (Vec<u8>, Vec<u8>) {
    let mut from = name.as_bytes().to_vec();
    let mut to = from.clone();
    from.push(0);
    to.push(1);
    (from, to)
}

/// The definitions the catalog's rows (in key order) hold: each table's
/// name and its JSON, its pieces joined. A piece out of place (no first
/// piece before it, a number skipped) is corruption.
pub fn definitions(rows: Vec<Row>) -> Result<Vec<(String, Vec<u8>)>, SqlError> {
    let corrupt = |key: &[u8], why: &str| {
        SqlError::new(
            codes::DATA_CORRUPTED,
            format!(
                "malformed SQL catalog row {:?}: {why}",
                String::from_utf8_lossy(key)
            ),
        )
    };
    let mut out: Vec<(String, Vec<u8>, u16)> = Vec::new();
    for (key, value) in rows {
        match key.iter().position(|&b| b == 0) {
            None => {
                let name = String::from_utf8(key.clone())
                    .map_err(|_| corrupt(&key, "the table name is not UTF-8"))?;
                out.push((name, value, 0));
            }
            Some(at) => {
                let n = <[u8; 2]>::try_from(&key[at + 1..])
                    .map(u16::from_be_bytes)
                    .map_err(|_| corrupt(&key, "a piece's number is not 2 bytes"))?;
                match out.last_mut() {
                    Some((name, json, last))
                        if name.as_bytes() == &key[..at] && Some(n) == last.checked_add(1) =>
                    {
                        json.extend_from_slice(&value);
                        *last = n;
                    }
                    _ => return Err(corrupt(&key, "a piece out of place")),
                }
            }
        }
    }
    Ok(out
        .into_iter()
        .map(|(name, json, _)| (name, json))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_sort_after_their_first_and_join_again() {
        let json: Vec<u8> = (0..2500u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut rows = rows_of("t", &json, 1000).unwrap();
        rows.extend(rows_of("t0", b"{}", 1000).unwrap());
        rows.extend(rows_of("s", b"{\"x\":1}", 1000).unwrap());
        assert_eq!(rows.iter().filter(|r| r.0.starts_with(b"t\0")).count(), 2);
        rows.sort();
        let (from, to) = later_pieces("t");
        assert!(rows
            .iter()
            .filter(|r| r.0 >= from && r.0 < to)
            .all(|r| r.0.starts_with(b"t\0")));
        let defs = definitions(rows).unwrap();
        let names: Vec<&str> = defs.iter().map(|d| d.0.as_str()).collect();
        assert_eq!(names, ["s", "t", "t0"]);
        assert_eq!(defs[1].1, json);
    }

    #[test]
    fn a_piece_out_of_place_or_a_zero_in_a_name_is_refused() {
        let json = vec![b'x'; 30];
        let rows = rows_of("t", &json, 10).unwrap();
        // The second piece lost: the third is out of place.
        let gap = vec![rows[0].clone(), rows[2].clone()];
        assert_eq!(definitions(gap).unwrap_err().code, codes::DATA_CORRUPTED);
        // A piece with no first before it.
        let orphan = vec![rows[1].clone()];
        assert_eq!(definitions(orphan).unwrap_err().code, codes::DATA_CORRUPTED);
        let bad = vec![(b"t\0\x01\x02".to_vec(), b"x".to_vec())];
        assert!(definitions(bad).is_err());
        assert_eq!(
            rows_of("a\0b", b"{}", 10).unwrap_err().code,
            codes::INVALID_NAME
        );
    }
}
