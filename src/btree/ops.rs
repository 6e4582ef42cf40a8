//! Row changes to one leaf, as logged in a commit record's block reference
//! and replayed by recovery from that page alone.
//!
//! Encoding (docs/FORMAT.md, "Leaf changes"): a sequence of
//! `u8 op (1 put, 2 delete), u16 key_len, u32 value_len (put only), key, value`.
//! A put inserts the key or replaces its value; a delete removes the key if
//! present. Applied in order to a page at the same state as when they were
//! first applied (the page LSN guarantees it), they give the same bytes.

use super::node;

const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

/// A decoded change: the key, and the new value or `None` for a delete.
pub type DecodedOp<'a> = (&'a [u8], Option<&'a [u8]>);

/// One change to a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowChange {
    Put(Vec<u8>),
    Delete,
}

/// Appends one change to an encoded list.
pub fn encode_op(out: &mut Vec<u8>, key: &[u8], change: &RowChange) {
    match change {
        RowChange::Put(v) => {
            out.push(OP_PUT);
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(key);
            out.extend_from_slice(v);
        }
        RowChange::Delete => {
            out.push(OP_DELETE);
            out.extend_from_slice(&(key.len() as u16).to_le_bytes());
            out.extend_from_slice(key);
        }
    }
}

/// Decodes an encoded list; `Err` describes what is malformed.
pub fn decode_ops(b: &[u8]) -> Result<Vec<DecodedOp<'_>>, String> {
    fn take<'b>(cur: &mut &'b [u8], n: usize) -> Result<&'b [u8], String> {
        if cur.len() < n {
            return Err(format!(
                "leaf change list cut short: {n} bytes wanted, {} left",
                cur.len()
            ));
        }
        let (h, t) = cur.split_at(n);
        *cur = t;
        Ok(h)
    }
    let mut out = Vec::new();
    let mut cur = b;
    while !cur.is_empty() {
        let op = take(&mut cur, 1)?[0];
        let klen = u16::from_le_bytes(take(&mut cur, 2)?.try_into().expect("2")) as usize;
        match op {
            OP_PUT => {
                let vlen = u32::from_le_bytes(take(&mut cur, 4)?.try_into().expect("4")) as usize;
                let key = take(&mut cur, klen)?;
                let val = take(&mut cur, vlen)?;
                out.push((key, Some(val)));
            }
            OP_DELETE => out.push((take(&mut cur, klen)?, None)),
            other => return Err(format!("unknown leaf change code {other}")),
        }
    }
    Ok(out)
}

/// Applies one change to a leaf. `Err(NoRoom)` only if the caller did not
/// make room first (a bug in prepare, or a corrupt log on replay).
pub fn apply_op(leaf: &mut [u8], key: &[u8], value: Option<&[u8]>) -> Result<(), node::NoRoom> {
    match value {
        Some(v) => {
            if node::leaf_get(leaf, key).is_some() {
                node::leaf_update(leaf, key, v)
            } else {
                node::leaf_insert(leaf, key, v)
            }
        }
        None => {
            node::leaf_delete(leaf, key);
            Ok(())
        }
    }
}

/// Page bytes a change may need at most (new cell and slot; the old cell's
/// space is not counted, so the estimate is safe).
pub fn space_needed(key: &[u8], change: &RowChange) -> usize {
    match change {
        RowChange::Put(v) => node::leaf_cell_size(key.len(), v.len()),
        RowChange::Delete => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip_and_cut_lists_refused() {
        let mut b = Vec::new();
        encode_op(&mut b, b"k1", &RowChange::Put(b"v1".to_vec()));
        encode_op(&mut b, b"k2", &RowChange::Delete);
        let ops = decode_ops(&b).unwrap();
        assert_eq!(
            ops,
            vec![(&b"k1"[..], Some(&b"v1"[..])), (&b"k2"[..], None)]
        );
        let first_len = 1 + 2 + 4 + 2 + 2;
        for cut in (1..b.len()).filter(|c| *c != first_len) {
            assert!(decode_ops(&b[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(decode_ops(&b[..first_len]).unwrap().len(), 1);
        assert!(decode_ops(&[9, 0, 0]).is_err());
    }
}
