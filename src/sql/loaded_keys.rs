//! The keys an autocommit bulk load inserted, batch by batch, kept so that
//! a failure undoes exactly its committed batches (bulk_undo.rs says why).
//! Here apart from the undo: the batched sink (exec.rs) keeps them, and
//! the undo deletes through a sink.
//!
//! The keys are bounded (`Limits::max_load_undo_bytes`): a client may
//! not make the server hold unbounded memory. A load past the bound fails
//! (54000) and is undone. Consecutive keys are kept as runs, so a load in
//! key order (generated ids, hidden row ids) of any size stays far below
//! it: at 64 MB, a key per row stopped loads at about 5 million rows.

use super::types::{codes, SqlError};

/// The bytes kept per run besides its first key: the key's length and
/// the run's length, u32 each.
const RUN_OVERHEAD: usize = 8;

pub struct LoadedKeys {
    /// The most bytes kept (keys with their run overhead).
    max_bytes: usize,
    /// Runs of consecutive keys, each as its first key's length (u32,
    /// little-endian), that key's bytes, and how many keys the run holds
    /// (u32): a load in key order (generated ids, hidden row ids) keeps a
    /// few runs, not a key per row.
    bytes: Vec<u8>,
    /// Whether a key may still extend the last run (not after a batch
    /// commits: a run never spans two batches).
    open_run: bool,
    /// The last key pushed: the next extends its run if it is this key
    /// plus one, read as a big-endian number of the same length.
    last: Vec<u8>,
    /// The bytes of the runs whose batches committed. Those after are
    /// the open batch's: aborted with it, their keys may be another
    /// session's rows by the time the undo runs.
    committed: usize,
}

impl LoadedKeys {
    pub fn new(max_bytes: usize) -> LoadedKeys {
        LoadedKeys {
            max_bytes,
            bytes: Vec::new(),
            open_run: false,
            last: Vec::new(),
            committed: 0,
        }
    }

    /// Keeps the key of a row the load inserts (before its batch commits).
    pub fn push(&mut self, table: &str, key: &[u8]) -> Result<(), SqlError> {
        if self.open_run && is_successor(&self.last, key) {
            // The open run is the last thing in `bytes`: its count ends it.
            let count_at = self.bytes.len() - 4;
            let count = u32::from_le_bytes(self.bytes[count_at..].try_into().unwrap());
            if let Some(count) = count.checked_add(1) {
                self.bytes[count_at..].copy_from_slice(&count.to_le_bytes());
                self.last.copy_from_slice(key);
                return Ok(());
            }
        }
        if self.bytes.len() + RUN_OVERHEAD + key.len() > self.max_bytes {
            return Err(SqlError::new(
                codes::PROGRAM_LIMIT_EXCEEDED,
                format!(
                    "a load into empty table \"{table}\" outside a transaction block keeps its rows' keys \
                     to undo them on failure, and they passed {} bytes (max_load_undo_bytes): load it in a \
                     block that creates or truncates the table first, in key order, or in several statements",
                    self.max_bytes
                ),
            ));
        }
        self.open_run = true;
        self.bytes
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(&1u32.to_le_bytes());
        self.last.clear();
        self.last.extend_from_slice(key);
        Ok(())
    }

    /// The batch holding every key pushed so far committed.
    pub fn batch_committed(&mut self) {
        self.committed = self.bytes.len();
        self.open_run = false;
    }

    /// The keys of the committed batches, in the order pushed.
    pub(super) fn keys(&self) -> impl Iterator<Item = Vec<u8>> + '_ {
        let bytes = &self.bytes[..self.committed];
        let mut at = 0;
        let mut run: Option<(Vec<u8>, u32)> = None;
        std::iter::from_fn(move || {
            if let Some((key, left)) = run.as_mut().filter(|r| r.1 > 0) {
                *left -= 1;
                increment(key);
                return Some(key.clone());
            }
            let u32_at = |i: usize| Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?));
            let len = u32_at(at)? as usize;
            let key = bytes[at + 4..at + 4 + len].to_vec();
            let count = u32_at(at + 4 + len)?;
            at += RUN_OVERHEAD + len;
            run = Some((key.clone(), count.saturating_sub(1)));
            Some(key)
        })
    }
}

/// Whether `next` is `prev` plus one, both read as big-endian numbers of
/// the same length (no carry out of the first byte).
fn is_successor(prev: &[u8], next: &[u8]) -> bool {
    if prev.len() != next.len() {
        return false;
    }
    // Adding one turns the trailing 0xff bytes to 0x00 and bumps the byte
    // before them: compared in place, no copy per row loaded.
    let Some(i) = prev.iter().rposition(|&b| b != 0xff) else {
        return false;
    };
    prev[..i] == next[..i] && next[i] == prev[i] + 1 && next[i + 1..].iter().all(|&b| b == 0)
}

/// Adds one to `key` read as a big-endian number; false if it wrapped.
fn increment(key: &mut [u8]) -> bool {
    for b in key.iter_mut().rev() {
        let (v, carry) = b.overflowing_add(1);
        *b = v;
        if !carry {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_back_in_order_and_the_bound_refuses() {
        let mut k = LoadedKeys::new(64);
        k.push("t", b"a").unwrap();
        k.push("t", b"").unwrap();
        k.batch_committed();
        k.push("t", b"ccc").unwrap();
        // The open batch's key is not undone: aborted, it may be anyone's.
        let got: Vec<Vec<u8>> = k.keys().collect();
        assert_eq!(got, [b"a".to_vec(), b"".to_vec()]);
        k.batch_committed();
        assert_eq!(k.keys().count(), 3);
        // Past the bound: refused before its row's batch can commit.
        let big = [0u8; 64];
        assert_eq!(
            k.push("t", &big).unwrap_err().code,
            codes::PROGRAM_LIMIT_EXCEEDED
        );
        k.batch_committed();
        assert_eq!(k.keys().count(), 3);
    }

    #[test]
    fn consecutive_keys_are_kept_as_runs_with_their_carries() {
        let mut k = LoadedKeys::new(1 << 20);
        for n in 250u16..262 {
            k.push("t", &n.to_be_bytes()).unwrap();
        }
        k.batch_committed();
        // One run of 2-byte keys across the carry from 0x00ff to 0x0100.
        assert_eq!(k.bytes.len(), RUN_OVERHEAD + 2);
        let got: Vec<u16> = k
            .keys()
            .map(|b| u16::from_be_bytes(b[..].try_into().unwrap()))
            .collect();
        assert_eq!(got, (250..262).collect::<Vec<_>>());
    }

    proptest::proptest! {
        /// The committed keys come back as pushed, whatever the runs, and
        /// the open batch's do not.
        #[test]
        fn keys_come_back_as_pushed_up_to_the_last_commit(
            steps in proptest::collection::vec((0u8..4, proptest::bool::weighted(0.1)), 1..200)
        ) {
            let mut k = LoadedKeys::new(1 << 20);
            let (mut next, mut pushed, mut committed) = (65_530u32, Vec::new(), 0);
            for (gap, commit) in steps {
                // Gaps of 0 repeat a key; a wrap at u16's end is no run.
                next = (next + u32::from(gap)) % 65_536;
                let key = (next as u16).to_be_bytes();
                k.push("t", &key).unwrap();
                pushed.push(key.to_vec());
                if commit {
                    k.batch_committed();
                    committed = pushed.len();
                }
            }
            let got: Vec<Vec<u8>> = k.keys().collect();
            proptest::prop_assert_eq!(&got[..], &pushed[..committed]);
        }
    }
}
