//! Process-level crash test: a child process runs transfers and reports
//! each acknowledged commit on stdout while the parent kills it with
//! SIGKILL at a random moment; after reopening, every acknowledged commit
//! is there, nothing else is, and the sum of balances holds. In half the
//! rounds the power then fails during the restart (after a random number
//! of its calls): every write since its file's last fsync, the dead
//! child's included, is undone ([`undo_fs`]) before the check. Repeated,
//! with the seed printed so a failure can be replayed
//! (`UNTORN_CRASH_SEED=<seed> cargo test --release --test crash_kill`).

mod undo_fs;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use undo_fs::UndoFs;
use untorn::file::IoStats;
use untorn::rng::SplitMix64;
use untorn::{key_u64, Database, Options, Table};

const ACCOUNTS: u64 = 100;
const INITIAL: i64 = 10_000;
const CHILD_ENV: &str = "UNTORN_CRASH_CHILD_DIR";
const JOURNAL_ENV: &str = "UNTORN_CRASH_UNDO_JOURNAL";
const THREADS: u64 = 4;

fn options() -> Options {
    // A small pool so pages are evicted (written) while commits run.
    Options {
        buffer_pool_size: 256 * 8192,
        ..Options::default()
    }
}

fn num(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().expect("8 bytes"))
}

/// The child: transfers forever, printing "ack THREAD SEQ" after each
/// commit returns (durable). Each commit also inserts a ledger row
/// (THREAD, SEQ) -> (from, to, amount) so the parent can check it whole.
#[test]
fn crash_child_entry() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let journal = std::env::var(JOURNAL_ENV).unwrap();
    let db = open_journaled(Path::new(&dir), Path::new(&journal), None).unwrap();
    let acc = db.table("accounts").unwrap();
    let ledger = db.table("ledger").unwrap();
    let start_seq: u64 = std::env::var("UNTORN_CRASH_START_SEQ")
        .unwrap()
        .parse()
        .unwrap();
    let out = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (db, acc, ledger, out) = (&db, &acc, &ledger, &out);
            s.spawn(move || {
                let mut rng = SplitMix64::new(start_seq * 31 + t + 1);
                let mut seq = start_seq;
                loop {
                    let from = rng.below(ACCOUNTS);
                    let to = (from + 1 + rng.below(ACCOUNTS - 1)) % ACCOUNTS;
                    let amount = rng.below(500) as i64;
                    let pad = rng.below(64) as usize;
                    let mut tx = db.begin();
                    let r = (|| -> untorn::Result<()> {
                        let a = num(&tx.get_for_update(acc, &key_u64(from))?.unwrap());
                        let b = num(&tx.get_for_update(acc, &key_u64(to))?.unwrap());
                        tx.update(acc, &key_u64(from), &(a - amount).to_le_bytes())?;
                        tx.update(acc, &key_u64(to), &(b + amount).to_le_bytes())?;
                        let mut row = Vec::with_capacity(24 + 64);
                        row.extend_from_slice(&from.to_le_bytes());
                        row.extend_from_slice(&to.to_le_bytes());
                        row.extend_from_slice(&amount.to_le_bytes());
                        row.resize(24 + pad, b'p');
                        tx.insert(ledger, &ledger_key(t, seq), &row)?;
                        Ok(())
                    })();
                    match r {
                        Ok(()) => {
                            tx.commit().unwrap();
                            let mut o = out.lock().unwrap();
                            writeln!(o, "ack {t} {seq}").unwrap();
                            o.flush().unwrap();
                            seq += 1;
                        }
                        Err(e) if e.is_retryable() => {}
                        Err(e) => panic!("child: {e}"),
                    }
                }
            });
        }
    });
}

/// Opens on the real files, journaling what a power loss would undo.
fn open_journaled(dir: &Path, journal: &Path, cut_after: Option<u64>) -> untorn::Result<Database> {
    let fs = Arc::new(UndoFs::new(journal, cut_after));
    Database::open_with(fs, Arc::new(IoStats::default()), dir, options())
}

fn ledger_key(thread: u64, seq: u64) -> Vec<u8> {
    let mut k = thread.to_be_bytes().to_vec();
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

fn check(db: &Database, acked: &BTreeSet<(u64, u64)>, seed: u64, round: u32) -> u64 {
    let acc = db.table("accounts").unwrap();
    let ledger = db.table("ledger").unwrap();
    let tx = db.begin();
    let balances: BTreeMap<u64, i64> = tx
        .scan(&acc, b"", None, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (u64::from_be_bytes(k.try_into().unwrap()), num(&v)))
        .collect();
    assert_eq!(
        balances.len() as u64,
        ACCOUNTS,
        "seed {seed} round {round}: accounts"
    );
    let total: i64 = balances.values().sum();
    assert_eq!(
        total,
        ACCOUNTS as i64 * INITIAL,
        "seed {seed} round {round}: sum of balances"
    );
    // Replay the ledger: it must explain every balance exactly (each commit
    // is there whole or not at all).
    let mut expect: BTreeMap<u64, i64> = (0..ACCOUNTS).map(|k| (k, INITIAL)).collect();
    let rows = tx.scan(&ledger, b"", None, usize::MAX).unwrap();
    let mut present = BTreeSet::new();
    for (k, v) in &rows {
        let t = u64::from_be_bytes(k[..8].try_into().unwrap());
        let s = u64::from_be_bytes(k[8..16].try_into().unwrap());
        present.insert((t, s));
        let (from, to, amount) = (num(&v[..8]) as u64, num(&v[8..16]) as u64, num(&v[16..24]));
        *expect.get_mut(&from).unwrap() -= amount;
        *expect.get_mut(&to).unwrap() += amount;
    }
    assert_eq!(
        expect, balances,
        "seed {seed} round {round}: balances disagree with the ledger"
    );
    let lost: Vec<_> = acked.difference(&present).collect();
    assert!(
        lost.is_empty(),
        "seed {seed} round {round}: acknowledged commits lost: {lost:?}"
    );
    rows.len() as u64
}

#[test]
fn sigkill_never_loses_an_acknowledged_commit() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let seed: u64 = std::env::var("UNTORN_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let rounds: u32 = std::env::var("UNTORN_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    eprintln!("crash test seed {seed} ({rounds} rounds); replay with UNTORN_CRASH_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let journal = dir.path().join("undo-journal");
    {
        let db = Database::create(&path, options()).unwrap();
        let acc: Table = db.create_table("accounts").unwrap();
        db.create_table("ledger").unwrap();
        db.bulk_load(
            &acc,
            (0..ACCOUNTS).map(|k| (key_u64(k), INITIAL.to_le_bytes())),
        )
        .unwrap();
        db.close().unwrap();
    }
    let mut acked = BTreeSet::new();
    let mut rng = SplitMix64::new(seed);
    let mut next_seq = 0u64;
    for round in 0..rounds {
        let kill_after = Duration::from_millis(30 + rng.below(400));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "crash_child_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .env(JOURNAL_ENV, &journal)
            .env("UNTORN_CRASH_START_SEQ", next_seq.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let mut parts = line.split_whitespace();
                if parts.next() == Some("ack") {
                    let t: u64 = parts.next().unwrap().parse().unwrap();
                    let s: u64 = parts.next().unwrap().parse().unwrap();
                    got.push((t, s));
                }
            }
            got
        });
        std::thread::sleep(kill_after);
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(
            !err.contains("panicked"),
            "seed {seed} round {round}: child failed: {err}"
        );
        let got = reader.join().unwrap();
        next_seq = got
            .iter()
            .map(|(_, s)| s + 1)
            .max()
            .unwrap_or(next_seq)
            .max(next_seq)
            + 1_000_000;
        acked.extend(got);
        let mut power = String::new();
        if rng.chance(0.5) {
            // The restart works on what the dead child left in the page
            // cache; the power fails after `cut` of its calls.
            // Often early, while it makes the dead child's writes durable.
            let reach = [30, 400][rng.below(2) as usize];
            let cut = rng.below(reach);
            let restart = open_journaled(&path, &journal, Some(cut));
            drop(restart);
            let undone = undo_fs::power_loss(&journal);
            power = format!(
                "; power cut after {cut} calls of the restart, {undone} unsynced writes undone"
            );
        }
        let db = Database::open(&path, options())
            .unwrap_or_else(|e| panic!("seed {seed} round {round}: recovery failed: {e}"));
        let present = check(&db, &acked, seed, round);
        eprintln!(
            "round {round}: killed after {kill_after:?} ({status}){power}; {} acknowledged so far, {present} present; recovery replayed {} records",
            acked.len(),
            db.recovery.records_replayed
        );
        db.close().unwrap();
        // Closed cleanly: everything is durable, nothing left to undo.
        std::fs::write(&journal, b"").unwrap();
    }
    let report =
        untorn::verify::verify_database(&untorn::file::posix::PosixFileSystem::default(), &path)
            .unwrap();
    assert!(report.ok(), "seed {seed}: verify: {:?}", report.failures);
}
