//! The oracle: what the database must hold after a crash.
//!
//! Rules:
//! - Every row's bytes check themselves: magic, key, version (the tag of the
//!   transaction that wrote it), balance, a filler drawn from (key,
//!   version), and a hash of all that. So a row read back is either one
//!   the workload wrote (and the oracle knows which transaction) or garbage.
//! - The keys are split into *parts*, one per workload thread: a thread
//!   touches only its part, so each part has at most one commit in flight
//!   at a crash, and transfers keep each part's total.
//! - A part's acknowledged commits are folded into `acked`; a commit whose
//!   outcome is unknown (it returned an error) waits in `pending`. Once a
//!   later commit of the part is acknowledged, the pending ones are folded
//!   in first: the WAL is flushed in order, so they are durable too.
//! - A commit that returned an error that is not fatal was told it failed:
//!   it waits in `refused`, and none of its rows may ever be read back (a
//!   caller would retry it and apply it twice). Only a fatal error (the
//!   engine stopped) leaves the outcome unknown.
//! - After a crash the part must equal `acked` plus a prefix of `pending`
//!   (each pending commit entirely or not at all), and hold nothing else.
//!   A difference is a *lost commit* (an acknowledged row missing, or older
//!   than acknowledged) or a *silent corruption* (a row read without error
//!   that no commit wrote: garbage, an unknown key, a version newer than any
//!   commit, part of a commit in flight).

use crate::rng::SplitMix64;
use std::collections::{BTreeMap, BTreeSet};

/// The two tables of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tab {
    /// Bank accounts: balances move, their sum stays.
    Accounts,
    /// Rows of many sizes, inserted, rewritten and deleted.
    Items,
}

impl Tab {
    pub const ALL: [Tab; 2] = [Tab::Accounts, Tab::Items];
    pub fn name(self) -> &'static str {
        match self {
            Tab::Accounts => "accounts",
            Tab::Items => "items",
        }
    }
    fn magic(self) -> u8 {
        match self {
            Tab::Accounts => b'A',
            Tab::Items => b'I',
        }
    }
}

/// A row's identity.
pub type RowKey = (Tab, u64);

/// The first item key of part `p` (parts own disjoint key ranges).
pub fn item_key_base(part: usize) -> u64 {
    (part as u64 + 1) << 40
}

/// Which part owns `key`, if any.
pub fn part_of(key: RowKey, parts: usize) -> Option<usize> {
    match key.0 {
        Tab::Accounts => Some((key.1 % parts as u64) as usize),
        Tab::Items => {
            let p = (key.1 >> 40).checked_sub(1)? as usize;
            (p < parts).then_some(p)
        }
    }
}

const HEADER: usize = 1 + 8 + 8 + 8 + 2;

/// A non-linear 32-bit hash. Not a CRC on purpose: rows that end with
/// their own CRC-32C all leave the same CRC residue, so a page whose torn
/// sector swapped whole old rows for new ones of the same length would keep
/// its page CRC-32C, and the laboratory would blame the engine for a tear
/// its own rows hid.
fn row_hash(bytes: &[u8]) -> u32 {
    let mut h = 0x243F_6A88_85A3_08D3u64;
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = SplitMix64::new(h ^ u64::from_le_bytes(w)).next_u64();
    }
    (h >> 32) as u32 ^ h as u32
}

/// The bytes of a row: magic, key, version, balance, filler length, filler
/// (drawn from key and version), a hash of the rest.
pub fn encode_row(tab: Tab, key: u64, version: u64, balance: i64, filler: usize) -> Vec<u8> {
    let filler = filler.min(u16::MAX as usize);
    let mut v = Vec::with_capacity(HEADER + filler + 4);
    v.push(tab.magic());
    v.extend_from_slice(&key.to_le_bytes());
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&balance.to_le_bytes());
    v.extend_from_slice(&(filler as u16).to_le_bytes());
    let mut rng =
        SplitMix64::new(key.rotate_left(17) ^ version.wrapping_mul(0x2545_F491_4F6C_DD1D));
    while v.len() < HEADER + filler {
        let word = rng.next_u64().to_le_bytes();
        let n = (HEADER + filler - v.len()).min(8);
        v.extend_from_slice(&word[..n]);
    }
    let check = row_hash(&v);
    v.extend_from_slice(&check.to_le_bytes());
    v
}

/// What a well-formed row says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    pub version: u64,
    pub balance: i64,
}

/// Decodes a row read under `key`: `None` unless it is exactly a row
/// [`encode_row`] made for this table and key.
pub fn decode_row(tab: Tab, key: u64, bytes: &[u8]) -> Option<Decoded> {
    if bytes.len() < HEADER + 4 || bytes[0] != tab.magic() {
        return None;
    }
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8"));
    let filler = u16::from_le_bytes([bytes[25], bytes[26]]) as usize;
    if u64_at(1) != key || bytes.len() != HEADER + filler + 4 {
        return None;
    }
    let (version, balance) = (u64_at(9), u64_at(17) as i64);
    (encode_row(tab, key, version, balance, filler) == bytes)
        .then_some(Decoded { version, balance })
}

/// A transaction as the oracle records it: the tag its rows carry as
/// version, and its changes (`None`: a delete).
#[derive(Clone, Debug, Default)]
pub struct Txn {
    pub tag: u64,
    pub changes: Vec<(RowKey, Option<Vec<u8>>)>,
}

/// The last change to a row: its bytes (`None`: deleted) and its tag.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub value: Option<Vec<u8>>,
    pub tag: u64,
}

type Model = BTreeMap<RowKey, Entry>;

fn apply(model: &mut Model, txn: &Txn) {
    for (k, v) in &txn.changes {
        model.insert(
            *k,
            Entry {
                value: v.clone(),
                tag: txn.tag,
            },
        );
    }
}

/// The rows one workload thread owns.
#[derive(Clone, Debug, Default)]
pub struct Part {
    pub index: usize,
    /// Every row the part ever had, as the acknowledged commits left it.
    pub acked: Model,
    /// Commits whose outcome is not known yet, in commit order.
    pub pending: Vec<Txn>,
    /// Commits the caller was told failed: none of them may be there.
    pub refused: Vec<Txn>,
    /// The sum of the part's balances.
    pub total: i64,
    /// The next item key to insert.
    pub next_item: u64,
    /// Acknowledged commits so far.
    pub acked_commits: u64,
}

impl Part {
    /// Records an acknowledged commit (folding in the pending ones first).
    pub fn ack(&mut self, txn: Txn) {
        for p in std::mem::take(&mut self.pending) {
            apply(&mut self.acked, &p);
        }
        apply(&mut self.acked, &txn);
        self.acked_commits += 1;
    }

    /// Records a commit that returned an error: it may or may not be there.
    pub fn in_flight(&mut self, txn: Txn) {
        if !txn.changes.is_empty() {
            self.pending.push(txn);
        }
    }

    /// Records a commit that returned an error that is not fatal: the
    /// engine says it did not happen.
    pub fn refuse(&mut self, txn: Txn) {
        if !txn.changes.is_empty() {
            self.refused.push(txn);
        }
    }

    /// The current value of a row, as far as acknowledged commits say.
    pub fn value(&self, key: RowKey) -> Option<&Vec<u8>> {
        self.acked.get(&key).and_then(|e| e.value.as_ref())
    }

    /// The keys of the part's live items.
    pub fn live_items(&self) -> Vec<u64> {
        let lo = (Tab::Items, 0);
        self.acked
            .range(lo..)
            .filter(|(_, e)| e.value.is_some())
            .map(|((_, k), _)| *k)
            .collect()
    }

    fn expected(&self, prefix: usize) -> Model {
        let mut m = self.acked.clone();
        for p in &self.pending[..prefix] {
            apply(&mut m, p);
        }
        m
    }
}

/// What reading the database back gave.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    pub rows: BTreeMap<RowKey, Vec<u8>>,
    /// Rows the oracle expected to read that failed with an error.
    pub unreadable: BTreeSet<RowKey>,
    /// The first read errors (they name file and block).
    pub errors: Vec<String>,
    /// Keys read that are not 8 bytes long.
    pub malformed_keys: u64,
}

impl Observed {
    /// True if every row could be read (a full scan of each table worked).
    pub fn complete(&self) -> bool {
        self.unreadable.is_empty() && self.errors.is_empty()
    }
}

/// The outcome of a check.
#[derive(Clone, Debug, Default)]
pub struct Verdict {
    /// Tags of acknowledged commits whose rows are missing or older.
    pub lost_commits: BTreeSet<u64>,
    /// Rows read without error that no commit wrote (one line each).
    pub silent: Vec<String>,
    /// Tags of commits the caller was told failed whose rows are there.
    pub refused_present: BTreeSet<u64>,
    /// Commits in flight that survived, and that did not.
    pub in_flight_kept: u64,
    pub in_flight_lost: u64,
    /// Rows that failed to read (detected damage).
    pub unreadable: u64,
    /// Descriptions of the first differences.
    pub details: Vec<String>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.lost_commits.is_empty() && self.silent.is_empty() && self.refused_present.is_empty()
    }
}

/// Every part of the database.
#[derive(Clone, Debug, Default)]
pub struct Oracle {
    pub parts: Vec<Part>,
}

impl Oracle {
    /// Checks what was read against every part. Where it matches, the
    /// surviving commits in flight become acknowledged ones.
    pub fn check(&mut self, obs: &Observed) -> Verdict {
        let mut v = Verdict::default();
        let nparts = self.parts.len();
        let mut by_part: Vec<BTreeMap<RowKey, &Vec<u8>>> = vec![BTreeMap::new(); nparts];
        for (k, bytes) in &obs.rows {
            match part_of(*k, nparts) {
                Some(p) => {
                    by_part[p].insert(*k, bytes);
                }
                None => v.silent.push(format!(
                    "{} key {} is no key the workload uses",
                    k.0.name(),
                    k.1
                )),
            }
        }
        if obs.malformed_keys > 0 {
            v.silent.push(format!(
                "{} keys read back are not 8 bytes",
                obs.malformed_keys
            ));
        }
        v.unreadable = obs.unreadable.len() as u64;
        for (part, rows) in self.parts.iter_mut().zip(&by_part) {
            check_part(part, rows, obs, &mut v);
        }
        v
    }
}

/// One difference between a candidate model and what was read.
fn differences(exp: &Model, rows: &BTreeMap<RowKey, &Vec<u8>>, obs: &Observed) -> Vec<RowKey> {
    let keys: BTreeSet<RowKey> = exp.keys().chain(rows.keys()).copied().collect();
    keys.into_iter()
        .filter(|k| !obs.unreadable.contains(k))
        .filter(|k| exp.get(k).and_then(|e| e.value.as_ref()) != rows.get(k).copied())
        .collect()
}

fn check_part(part: &mut Part, rows: &BTreeMap<RowKey, &Vec<u8>>, obs: &Observed, v: &mut Verdict) {
    let mut best: Option<(usize, Vec<RowKey>)> = None;
    for k in (0..=part.pending.len()).rev() {
        let diffs = differences(&part.expected(k), rows, obs);
        if best.as_ref().is_none_or(|(_, d)| diffs.len() < d.len()) {
            best = Some((k, diffs));
        }
    }
    let (k, diffs) = best.expect("at least the empty prefix");
    let expected = part.expected(k);
    let pending_tags: BTreeSet<u64> = part.pending.iter().map(|t| t.tag).collect();
    let refused_tags: BTreeSet<u64> = part.refused.iter().map(|t| t.tag).collect();
    for key in &diffs {
        let (tab, id) = *key;
        let what = format!("part {} {} key {id}", part.index, tab.name());
        let got = rows.get(key).copied();
        let entry = expected.get(key);
        let decoded = got.map(|b| decode_row(tab, id, b));
        let partial =
            |tag: u64| format!("{what}: commit {tag} in flight is only partly there (not atomic)");
        if let Some(Some(d)) =
            decoded.filter(|d| d.is_some_and(|d| refused_tags.contains(&d.version)))
        {
            v.refused_present.insert(d.version);
            if v.details.len() < 8 {
                v.details.push(format!(
                    "{what}: commit {} was told it failed, yet it is there",
                    d.version
                ));
            }
            continue;
        }
        let (lost, line) = match (entry, decoded) {
            (_, Some(None)) => (None, format!("{what}: garbage bytes read without error")),
            (None, Some(Some(d))) => (
                None,
                format!("{what}: version {} was never written", d.version),
            ),
            (Some(_), Some(Some(d))) if pending_tags.contains(&d.version) => {
                (None, partial(d.version))
            }
            (Some(e), _) if pending_tags.contains(&e.tag) => (None, partial(e.tag)),
            (Some(e), Some(Some(d))) if d.version < e.tag => {
                let gone = if e.value.is_some() {
                    "a newer version"
                } else {
                    "its delete"
                };
                let line = format!(
                    "{what}: version {} read, commit {} acknowledged {gone}",
                    d.version, e.tag
                );
                (Some(e.tag), line)
            }
            (Some(e), Some(Some(d))) => {
                let line = format!(
                    "{what}: version {} read, newer than commit {}",
                    d.version, e.tag
                );
                (None, line)
            }
            (Some(e), None) => (
                Some(e.tag),
                format!("{what}: missing, commit {} acknowledged it", e.tag),
            ),
            (None, None) => unreachable!("a difference has a side"),
        };
        match lost {
            Some(tag) => {
                v.lost_commits.insert(tag);
            }
            None => v.silent.push(line.clone()),
        }
        if v.details.len() < 8 {
            v.details.push(line);
        }
    }
    if obs.complete() {
        let sum: i64 = rows
            .iter()
            .filter(|(k, _)| k.0 == Tab::Accounts)
            .filter_map(|(k, b)| decode_row(k.0, k.1, b))
            .map(|d| d.balance)
            .sum();
        if sum != part.total && v.details.len() < 8 {
            v.details.push(format!(
                "part {}: balances sum to {sum}, not {}",
                part.index, part.total
            ));
        }
    }
    if diffs.is_empty() {
        v.in_flight_kept += k as u64;
        v.in_flight_lost += (part.pending.len() - k) as u64;
        for t in std::mem::take(&mut part.pending).into_iter().take(k) {
            apply(&mut part.acked, &t);
            part.acked_commits += 1;
        }
        part.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_check_themselves() {
        let row = encode_row(Tab::Items, 77, 5, -3, 300);
        assert_eq!(row.len(), HEADER + 300 + 4);
        let d = decode_row(Tab::Items, 77, &row).unwrap();
        assert_eq!((d.version, d.balance), (5, -3));
        assert!(decode_row(Tab::Items, 78, &row).is_none(), "another key");
        assert!(
            decode_row(Tab::Accounts, 77, &row).is_none(),
            "another table"
        );
        for i in [0, 10, 40, row.len() - 1] {
            let mut bad = row.clone();
            bad[i] ^= 4;
            assert!(decode_row(Tab::Items, 77, &bad).is_none(), "byte {i}");
        }
        assert!(decode_row(Tab::Items, 77, &row[..row.len() - 1]).is_none());
    }

    fn obs(rows: &[(RowKey, Vec<u8>)]) -> Observed {
        Observed {
            rows: rows.iter().cloned().collect(),
            ..Observed::default()
        }
    }

    fn oracle_with(txns: Vec<Txn>, pending: Vec<Txn>) -> Oracle {
        let mut p = Part::default();
        txns.into_iter().for_each(|t| p.ack(t));
        pending.into_iter().for_each(|t| p.in_flight(t));
        Oracle { parts: vec![p] }
    }

    #[test]
    fn in_flight_commits_count_entirely_or_not_at_all() {
        let k1 = (Tab::Items, item_key_base(0) + 1);
        let k2 = (Tab::Items, item_key_base(0) + 2);
        let r1 = encode_row(Tab::Items, k1.1, 1, 0, 10);
        let r2 = encode_row(Tab::Items, k2.1, 2, 0, 10);
        let r1b = encode_row(Tab::Items, k1.1, 2, 0, 12);
        let t1 = Txn {
            tag: 1,
            changes: vec![(k1, Some(r1.clone()))],
        };
        let t2 = Txn {
            tag: 2,
            changes: vec![(k1, Some(r1b.clone())), (k2, Some(r2.clone()))],
        };
        let mut o = oracle_with(vec![t1.clone()], vec![t2.clone()]);
        assert!(o.check(&obs(&[(k1, r1.clone())])).ok());
        let mut o = oracle_with(vec![t1.clone()], vec![t2.clone()]);
        let v = o.check(&obs(&[(k1, r1b.clone()), (k2, r2.clone())]));
        assert!(v.ok() && v.in_flight_kept == 1);
        assert_eq!(o.parts[0].value(k2), Some(&r2));
        let mut o = oracle_with(vec![t1.clone()], vec![t2.clone()]);
        let v = o.check(&obs(&[(k1, r1.clone()), (k2, r2.clone())]));
        assert!(!v.silent.is_empty() && v.lost_commits.is_empty(), "{v:?}");
        let mut o = oracle_with(vec![t1.clone(), t2], vec![]);
        let v = o.check(&obs(&[(k1, r1.clone()), (k2, r2.clone())]));
        assert_eq!(v.lost_commits, BTreeSet::from([2]));
        let mut o = oracle_with(vec![t1], vec![]);
        let mut garbage = r1.clone();
        garbage[30] ^= 1;
        let v = o.check(&obs(&[(k1, garbage), ((Tab::Items, 5), r2)]));
        assert_eq!(v.silent.len(), 2, "{v:?}");
    }

    #[test]
    fn a_commit_told_failed_must_not_be_there() {
        let k1 = (Tab::Items, item_key_base(0) + 1);
        let r1 = encode_row(Tab::Items, k1.1, 1, 0, 10);
        let r1b = encode_row(Tab::Items, k1.1, 2, 0, 12);
        let t1 = Txn {
            tag: 1,
            changes: vec![(k1, Some(r1.clone()))],
        };
        let t2 = Txn {
            tag: 2,
            changes: vec![(k1, Some(r1b.clone()))],
        };
        let refused = |t2: Txn| {
            let mut o = oracle_with(vec![t1.clone()], vec![]);
            o.parts[0].refuse(t2);
            o
        };
        assert!(refused(t2.clone()).check(&obs(&[(k1, r1)])).ok());
        let v = refused(t2).check(&obs(&[(k1, r1b)]));
        assert!(!v.ok(), "{v:?}");
        assert_eq!(v.refused_present, BTreeSet::from([2]));
        assert!(v.silent.is_empty() && v.lost_commits.is_empty(), "{v:?}");
    }
}
