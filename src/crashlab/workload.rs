//! The oracle's workload: bank transfers (the sum of the balances stays),
//! inserts, rewrites and deletes of items of many sizes (so leaves split
//! and empty), now and then a checkpoint. Each thread works on its own
//! [`Part`] of the keys and records every commit in it.
//!
//! [`observe`] reads everything back after a crash for the oracle.
//!
//! Every read is checked against the oracle too: a transfer that reads a
//! balance the oracle did not expect stops with [`TxnEnd::Wrong`].

use super::oracle::{
    decode_row, encode_row, item_key_base, Observed, Oracle, Part, RowKey, Tab, Txn,
};
use crate::db::{key_u64, Database, Table};
use crate::error::{Error, Result};
use crate::rng::SplitMix64;
use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

/// Accounts per part, and what each starts with.
pub const ACCOUNTS_PER_PART: u64 = 24;
pub const INITIAL_BALANCE: i64 = 1000;
/// Items loaded in all (split between the parts).
pub const ITEMS_LOADED: u64 = 240;
/// Filler bytes of an account row.
const ACCOUNT_FILLER: usize = 60;

/// The workload's tables in an open database.
#[derive(Clone, Debug)]
pub struct Tables {
    pub accounts: Table,
    pub items: Table,
}

impl Tables {
    pub fn of(db: &Database) -> Result<Tables> {
        Ok(Tables {
            accounts: db.table(Tab::Accounts.name())?,
            items: db.table(Tab::Items.name())?,
        })
    }

    fn get(&self, tab: Tab) -> &Table {
        match tab {
            Tab::Accounts => &self.accounts,
            Tab::Items => &self.items,
        }
    }
}

/// How large an item may be: a spread of sizes up to a sixth of a page.
fn item_filler(rng: &mut SplitMix64, page_size: u32) -> usize {
    let max =
        (page_size as usize / 6).min(crate::btree::node::max_value_len(page_size as usize) - 64);
    match rng.below(10) {
        0..=4 => 8 + rng.below(120) as usize,
        5..=8 => 100 + rng.below(600) as usize,
        _ => 600 + rng.below(2000) as usize,
    }
    .min(max)
}

/// Creates the tables in a new database and loads them; returns the oracle.
pub fn load(db: &Database, parts: usize, rng: &mut SplitMix64, tags: &AtomicU64) -> Result<Oracle> {
    let accounts = db.create_table(Tab::Accounts.name())?;
    let items = db.create_table(Tab::Items.name())?;
    let t = Tables { accounts, items };
    let page_size = db.settings().page_size;
    let mut oracle = Oracle::default();
    for p in 0..parts {
        let mut part = Part {
            index: p,
            total: INITIAL_BALANCE * ACCOUNTS_PER_PART as i64,
            next_item: item_key_base(p),
            ..Part::default()
        };
        let tag = tags.fetch_add(1, SeqCst);
        let mut txn = Txn {
            tag,
            changes: Vec::new(),
        };
        for i in 0..ACCOUNTS_PER_PART {
            let k = i * parts as u64 + p as u64;
            let row = encode_row(Tab::Accounts, k, tag, INITIAL_BALANCE, ACCOUNT_FILLER);
            txn.changes.push(((Tab::Accounts, k), Some(row)));
        }
        for _ in 0..ITEMS_LOADED / parts as u64 {
            let k = part.next_item;
            part.next_item += 1 + rng.below(3);
            let row = encode_row(Tab::Items, k, tag, 0, item_filler(rng, page_size));
            txn.changes.push(((Tab::Items, k), Some(row)));
        }
        for chunk in txn.changes.chunks(8) {
            let mut tx = db.begin();
            for ((tab, k), v) in chunk {
                tx.insert(
                    t.get(*tab),
                    &key_u64(*k),
                    v.as_deref().expect("a load inserts"),
                )?;
            }
            tx.commit()?;
        }
        part.ack(txn);
        oracle.parts.push(part);
    }
    Ok(oracle)
}

/// How one transaction ended.
#[derive(Debug)]
pub enum TxnEnd {
    Committed,
    /// Failed before its commit: nothing of it can be there.
    Aborted(Error),
    /// The commit returned a fatal error: it may or may not be there.
    InFlight(Error),
    /// The commit returned an error that is not fatal: it must not be
    /// there.
    Refused(Error),
    /// A read returned what the oracle did not expect.
    Wrong(String),
}

/// The part's rows as its acknowledged and pending commits leave them.
fn current(part: &Part, key: RowKey) -> Option<&Vec<u8>> {
    for t in part.pending.iter().rev() {
        if let Some((_, v)) = t.changes.iter().rev().find(|(k, _)| *k == key) {
            return v.as_ref();
        }
    }
    part.value(key)
}

fn current_items(part: &Part) -> Vec<u64> {
    let mut live: BTreeSet<u64> = part.live_items().into_iter().collect();
    for t in &part.pending {
        for ((tab, k), v) in &t.changes {
            if *tab == Tab::Items {
                match v {
                    Some(_) => live.insert(*k),
                    None => live.remove(k),
                };
            }
        }
    }
    live.into_iter().collect()
}

/// Runs one random transaction of the part, tagged `tag`, and records it.
pub fn run_txn(
    db: &Database,
    t: &Tables,
    part: &mut Part,
    rng: &mut SplitMix64,
    tag: u64,
    parts: usize,
) -> TxnEnd {
    let page_size = db.settings().page_size;
    let mut tx = db.begin();
    let mut txn = Txn {
        tag,
        changes: Vec::new(),
    };
    let mut items = current_items(part);
    let mut touched = BTreeSet::new();
    // A panic (one the laboratory injects inside the engine) is caught
    // where the client would see its call fail: before the commit, the
    // transaction cannot be there; in the commit, it may be.
    let body = catch_unwind(AssertUnwindSafe(
        || -> Result<std::result::Result<(), String>> {
            for _ in 0..1 + rng.below(4) {
                let roll = rng.below(100);
                if roll < 40 {
                    let a = rng.below(ACCOUNTS_PER_PART);
                    let b = (a + 1 + rng.below(ACCOUNTS_PER_PART - 1)) % ACCOUNTS_PER_PART;
                    let mut rows = Vec::new();
                    for i in [a, b] {
                        let key = (Tab::Accounts, i * parts as u64 + part.index as u64);
                        let got = tx.get_for_update(&t.accounts, &key_u64(key.1))?;
                        let want = txn
                            .changes
                            .iter()
                            .rev()
                            .find(|c| c.0 == key)
                            .map(|c| c.1.as_ref());
                        let want = want.unwrap_or_else(|| current(part, key));
                        if got.as_ref() != want {
                            return Ok(Err(format!(
                                "account {} read back other bytes than its last commit wrote",
                                key.1
                            )));
                        }
                        let Some(d) = got
                            .as_deref()
                            .and_then(|g| decode_row(Tab::Accounts, key.1, g))
                        else {
                            return Ok(Err(format!("account {} is missing", key.1)));
                        };
                        rows.push((key, d.balance));
                    }
                    let amount = rng.below(200) as i64;
                    for ((key, balance), delta) in rows.into_iter().zip([-amount, amount]) {
                        let row =
                            encode_row(Tab::Accounts, key.1, tag, balance + delta, ACCOUNT_FILLER);
                        if !tx.update(&t.accounts, &key_u64(key.1), &row)? {
                            return Ok(Err(format!("account {} vanished", key.1)));
                        }
                        txn.changes.retain(|c| c.0 != key);
                        txn.changes.push((key, Some(row)));
                    }
                } else if roll < 65 && items.len() < 600 || items.len() < 20 {
                    let k = part.next_item;
                    part.next_item += 1 + rng.below(3);
                    let row = encode_row(Tab::Items, k, tag, 0, item_filler(rng, page_size));
                    tx.insert(&t.items, &key_u64(k), &row)?;
                    txn.changes.push(((Tab::Items, k), Some(row)));
                    touched.insert(k);
                } else {
                    let k = items[rng.below(items.len() as u64) as usize];
                    if !touched.insert(k) {
                        continue;
                    }
                    let found = if roll < 85 {
                        let row = encode_row(Tab::Items, k, tag, 0, item_filler(rng, page_size));
                        let found = tx.update(&t.items, &key_u64(k), &row)?;
                        txn.changes.push(((Tab::Items, k), Some(row)));
                        found
                    } else {
                        items.retain(|i| *i != k);
                        txn.changes.push(((Tab::Items, k), None));
                        tx.delete(&t.items, &key_u64(k))?
                    };
                    if !found {
                        return Ok(Err(format!(
                            "item {k} vanished before its last commit deleted it"
                        )));
                    }
                }
            }
            Ok(Ok(()))
        },
    ))
    .unwrap_or_else(|panic| Err(panicked(panic)));
    match body {
        Err(e) => TxnEnd::Aborted(e),
        Ok(Err(wrong)) => TxnEnd::Wrong(wrong),
        Ok(Ok(())) => match catch_unwind(AssertUnwindSafe(|| tx.commit())) {
            Err(panic) => {
                part.in_flight(txn);
                TxnEnd::InFlight(panicked(panic))
            }
            Ok(Ok(_)) => {
                part.ack(txn);
                TxnEnd::Committed
            }
            Ok(Err(e)) if e.is_fatal() => {
                part.in_flight(txn);
                TxnEnd::InFlight(e)
            }
            Ok(Err(e)) => {
                part.refuse(txn);
                TxnEnd::Refused(e)
            }
        },
    }
}

/// A caught panic as the fatal error its caller is told of.
pub fn panicked(panic: Box<dyn std::any::Any + Send>) -> Error {
    let what = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into());
    Error::Stopped(format!("panicked: {what}"))
}

/// Why a thread of the workload stopped early.
#[derive(Debug)]
pub enum Stop {
    /// An error: from a commit (`in_flight`), before one, or from a
    /// checkpoint.
    Error {
        error: Error,
        in_flight: bool,
        checkpoint: bool,
    },
    /// A read the oracle did not expect.
    Wrong(String),
}

/// What a phase of the workload did.
#[derive(Debug, Default)]
pub struct PhaseEnd {
    pub commits: u64,
    pub checkpoints: u64,
    /// Each part's reason to stop, if it stopped early.
    pub stops: Vec<(usize, Stop)>,
}

/// The chance of a background writer round before each transaction.
const BGWRITER_ROUND_ODDS: f64 = 0.1;

/// Runs up to `txns` transactions per part, one thread per part, with a
/// checkpoint now and then and a background writer round more often (odds `checkpoint_odds` per transaction). A
/// thread stops at its first error; the others then stop too.
pub fn run_phase(
    db: &Database,
    t: &Tables,
    oracle: &mut Oracle,
    rng: &mut SplitMix64,
    tags: &AtomicU64,
    txns: u64,
    checkpoint_odds: f64,
) -> PhaseEnd {
    let parts = oracle.parts.len();
    let stop = AtomicBool::new(false);
    let seeds: Vec<u64> = (0..parts).map(|_| rng.next_u64()).collect();
    let work = |part: &mut Part, seed: u64| -> (u64, u64, Option<Stop>) {
        let mut rng = SplitMix64::new(seed);
        let (mut commits, mut checkpoints) = (0, 0);
        for _ in 0..txns {
            if stop.load(SeqCst) {
                break;
            }
            // A checkpoint now and then, and more often a background
            // writer's round: dirty pages written early, between a commit
            // and its checkpoint. Either failing stops the part.
            let mut background = Ok(());
            let guarded = |f: &mut dyn FnMut() -> Result<()>| {
                catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(panicked(p)))
            };
            if rng.chance(checkpoint_odds) {
                background = guarded(&mut || db.checkpoint().map(|_| checkpoints += 1));
            }
            if background.is_ok() && rng.chance(BGWRITER_ROUND_ODDS) {
                background =
                    guarded(&mut || crate::checkpoint::bgwriter::round(&db.engine).map(|_| ()));
            }
            if let Err(error) = background {
                stop.store(true, SeqCst);
                let s = Stop::Error {
                    error,
                    in_flight: false,
                    checkpoint: true,
                };
                return (commits, checkpoints, Some(s));
            }
            let end = run_txn(db, t, part, &mut rng, tags.fetch_add(1, SeqCst), parts);
            let s = match end {
                TxnEnd::Committed => {
                    commits += 1;
                    continue;
                }
                TxnEnd::Aborted(error) | TxnEnd::Refused(error) => Stop::Error {
                    error,
                    in_flight: false,
                    checkpoint: false,
                },
                TxnEnd::InFlight(error) => Stop::Error {
                    error,
                    in_flight: true,
                    checkpoint: false,
                },
                TxnEnd::Wrong(w) => Stop::Wrong(w),
            };
            stop.store(true, SeqCst);
            return (commits, checkpoints, Some(s));
        }
        (commits, checkpoints, None)
    };
    let results: Vec<(u64, u64, Option<Stop>)> = if parts == 1 {
        vec![work(&mut oracle.parts[0], seeds[0])]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = oracle
                .parts
                .iter_mut()
                .zip(&seeds)
                .map(|(part, seed)| s.spawn(|| work(part, *seed)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("workload thread"))
                .collect()
        })
    };
    let mut end = PhaseEnd::default();
    for (i, (c, k, s)) in results.into_iter().enumerate() {
        end.commits += c;
        end.checkpoints += k;
        if let Some(s) = s {
            end.stops.push((i, s));
        }
    }
    end
}

/// Reads every row back: a scan per table, or, where the scan fails, each
/// row the oracle knows one at a time (so the error names what is lost).
pub fn observe(db: &Database, oracle: &Oracle) -> crate::error::Result<Observed> {
    let mut obs = Observed::default();
    let tx = db.begin();
    for tab in Tab::ALL {
        let table = db.table(tab.name())?;
        match tx.scan(&table, &[], None, usize::MAX) {
            Ok(rows) => {
                for (k, v) in rows {
                    match <[u8; 8]>::try_from(k.as_slice()) {
                        Ok(k) => {
                            obs.rows.insert((tab, u64::from_be_bytes(k)), v);
                        }
                        Err(_) => obs.malformed_keys += 1,
                    }
                }
            }
            Err(e) => {
                obs.errors.push(format!("scan of {}: {e}", tab.name()));
                let keys: BTreeSet<u64> = oracle
                    .parts
                    .iter()
                    .flat_map(|p| {
                        let pending = p.pending.iter().flat_map(|t| t.changes.iter().map(|c| c.0));
                        p.acked.keys().copied().chain(pending)
                    })
                    .filter(|k| k.0 == tab)
                    .map(|k| k.1)
                    .collect();
                for k in keys {
                    match tx.get(&table, &key_u64(k)) {
                        Ok(Some(v)) => {
                            obs.rows.insert((tab, k), v);
                        }
                        Ok(None) => {}
                        Err(e) => {
                            if obs.errors.len() < 4 {
                                obs.errors.push(format!("{} key {k}: {e}", tab.name()));
                            }
                            obs.unreadable.insert((tab, k));
                        }
                    }
                }
            }
        }
    }
    Ok(obs)
}
