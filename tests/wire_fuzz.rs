//! A grammar-aware fuzzer of `untorn serve` (issue 35): random SQL (deep
//! nesting, huge literals, many statements per message, garbage; DDL in
//! blocks, COPY of up to 20,000 rows, text that is not UTF-8, the signal
//! functions, SET, long OR chains and IN lists, sorted results) and
//! random extended-protocol message sequences (Parse, Bind, Describe,
//! Execute, Close, Flush, Sync in any order, with wrong counts and
//! formats), against the real server. It holds that no connection is
//! ever left without an answer, nothing panics, no slot is leaked, the
//! balances of a table only transfers touch still agree, and the server
//! stops cleanly.
//!
//! CI runs a short bounded run; longer on demand (docs/RELIABILITY.md):
//! `UNTORN_FUZZ_STATEMENTS=1000000 UNTORN_FUZZ_SEQUENCES=100000
//! UNTORN_FUZZ_SEED=7 UNTORN_FUZZ_CLIENTS=6 cargo test --release --test
//! wire_fuzz -- --nocapture`

mod common;

use common::serve::{psql, Raw, Serve};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const OPS: [&str; 13] = [
    "+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "and", "or",
];

/// A random expression over column `v` (of a table `f`) nested up to `depth`.
fn expr(rng: &mut StdRng, depth: u32) -> String {
    if depth == 0 || rng.gen_ratio(1, 3) {
        return match rng.gen_range(0..7) {
            0 => rng.gen_range(-5i64..5).to_string(),
            1 => i64::MAX.to_string(),
            2 => "v".into(),
            3 => "null".into(),
            4 => "true".into(),
            5 if rng.gen_ratio(1, 100) => format!("'{}'", "x".repeat(100_000)),
            5 => "'7'".into(),
            _ => "$1".into(),
        };
    }
    let d = depth - 1;
    match rng.gen_range(0..6) {
        0 => format!("({})", expr(rng, d)),
        1 => format!("- {}", expr(rng, d)),
        2 => format!("not {}", expr(rng, d)),
        3 => format!("{} is null", expr(rng, d)),
        4 => format!(
            "{} between {} and {}",
            expr(rng, d),
            expr(rng, d),
            expr(rng, d)
        ),
        _ => {
            let op = OPS[rng.gen_range(0..OPS.len())];
            format!("{} {op} {}", expr(rng, d), expr(rng, d))
        }
    }
}

/// A random statement: the shapes the server runs, deep chains, garbage.
/// `f` is the client's own table (clients share only `acc`), so one
/// client's open block does not hold up another's.
fn statement(rng: &mut StdRng, f: &str) -> String {
    let depth = rng.gen_range(0..6);
    let e = expr(rng, depth);
    match rng.gen_range(0..17) {
        12 => block_ddl(rng, f, &e),
        13 => {
            let shapes = [
                "select pg_backend_pid()".to_string(),
                "select pg_cancel_backend(-1)".into(),
                "select pg_terminate_backend(-1)".into(),
                "set work_mem = '64kB'".into(),
                "set work_mem = '4MB'".into(),
                "set idle_session_timeout = 30000".into(),
                "set statement_timeout = 1500".into(),
                format!("select v from {f} order by v desc"),
                format!("select distinct v from {f} order by v limit 5"),
            ];
            shapes[rng.gen_range(0..shapes.len())].clone()
        }
        // The client's table goes now and then; statements on it fail
        // (42P01) until it is made again.
        14 if rng.gen_ratio(1, 10) => format!("drop table {f}"),
        14 => format!("create table if not exists {f} (id int primary key, v int)"),
        15 => {
            let n = rng.gen_range(8..3000);
            let terms: Vec<String> = (0..n).map(|i| format!("v = {i}")).collect();
            format!("select count(*) from {f} where {}", terms.join(" or "))
        }
        16 => {
            let n = rng.gen_range(8..3000);
            let list: Vec<String> = (0..n).map(|i| (i * 3).to_string()).collect();
            format!("delete from {f} where v in ({})", list.join(", "))
        }
        0 => format!("select {e}"),
        1 => format!("select v from {f} where {e}"),
        2 => format!("select count(*) from {f} where {e}"),
        3 => format!("update {f} set v = {e} where {e}"),
        4 => format!("insert into {f} values ({}, {e})", rng.gen_range(0..50)),
        5 => format!("delete from {f} where {e}"),
        6 => ["begin", "commit", "rollback"][rng.gen_range(0..3)].into(),
        7 => {
            let n = rng.gen_range(1..30_000);
            format!(
                "select {}",
                vec!["1"; n].join(["+", " or ", "*"][rng.gen_range(0..3)])
            )
        }
        8 => format!("select {}1{}", "(".repeat(rng.gen_range(1..20_000)), ")"),
        9 => {
            let junk = [
                "select", "(", ")", ",", "from", "'", "$", "::", "where", ";",
            ];
            (0..rng.gen_range(1..20))
                .map(|_| junk[rng.gen_range(0..junk.len())])
                .collect::<Vec<_>>()
                .join(" ")
        }
        // A transfer between accounts, in a block: their sum never changes.
        10 => "begin; update acc set bal = bal + 1 where aid = 1; \
               update acc set bal = bal - 1 where aid = 2; commit"
            .into(),
        _ => "select sum(bal) from acc".into(),
    }
}

/// DDL in a block on the client's own table, committed or rolled back.
fn block_ddl(rng: &mut StdRng, f: &str, e: &str) -> String {
    let ddl = match rng.gen_range(0..4) {
        0 => format!("create index {f}_v{} on {f} (v)", rng.gen_range(0..3)),
        1 => format!("truncate {f}"),
        2 => format!("alter table {f} add primary key (id)"),
        _ => format!("create table {f}_n{} (a int)", rng.gen_range(0..3)),
    };
    let end = ["commit", "rollback", "select 1 / 0"][rng.gen_range(0..3)];
    let id = rng.gen_range(0..50);
    format!("begin; {ddl}; insert into {f} values ({id}, {e}); {end}; rollback")
}

/// A COPY into the client's own table: up to 20,000 rows, now and then a
/// malformed row or bytes that are not UTF-8, ended by CopyDone or
/// CopyFail, in a block or not; its answer must come.
fn copy(rng: &mut StdRng, raw: &mut Raw, f: &str) {
    let in_block = rng.gen_bool(0.5);
    if in_block {
        raw.query("begin");
    }
    let start = [b"copy ", f.as_bytes(), b" from stdin\0"].concat();
    raw.send(b'Q', &start);
    // CopyInResponse, or an error and ReadyForQuery (no such table).
    loop {
        match raw.message() {
            Some((b'G', _)) => break,
            Some((b'Z', _)) => return,
            Some(_) => continue,
            None => panic!("the connection closed during COPY"),
        }
    }
    let rows = rng.gen_range(1..20_000u32);
    let first: u32 = rng.gen_range(1_000..1_000_000_000);
    let mut data = Vec::new();
    for i in 0..rows {
        match rng.gen_range(0..5000) {
            0 => data.extend_from_slice(b"7\tnot a number\n"),
            1 => data.extend_from_slice(b"8\t\xff\xfe\n"),
            _ => data.extend_from_slice(format!("{}\t{}\n", first + i, i % 97).as_bytes()),
        }
        if data.len() > 60_000 {
            raw.send(b'd', &data);
            data.clear();
        }
    }
    raw.send(b'd', &data);
    match rng.gen_range(0..4) {
        0 => raw.send(b'f', b"the fuzzer gave up\0"),
        _ => raw.send(b'c', &[]),
    }
    raw.until_ready();
    if in_block {
        raw.query(["commit", "rollback"][rng.gen_range(0..2)]);
    }
    if rng.gen_bool(0.5) {
        raw.query(&format!("truncate {f}"));
    }
}

/// One Query message of one or many statements; its answer must come.
fn query(rng: &mut StdRng, raw: &mut Raw, f: &str) -> usize {
    if rng.gen_ratio(1, 200) {
        copy(rng, raw, f);
        return 1;
    }
    if rng.gen_ratio(1, 100) {
        // Not UTF-8: 22021, and the connection goes on.
        raw.send(b'Q', b"select '\xc3\x28'\0");
        raw.until_ready();
        return 1;
    }
    if rng.gen_ratio(1, 500) {
        // Its own end: FATAL 57P01, then a new connection.
        raw.query("select pg_terminate_backend(pg_backend_pid())");
    }
    let n = if rng.gen_ratio(1, 10) {
        rng.gen_range(2..200)
    } else {
        1
    };
    let text: Vec<String> = (0..n).map(|_| statement(rng, f)).collect();
    raw.query(&text.join("; "));
    n
}

/// One random sequence of extended-protocol messages, ended by Sync.
fn sequence(rng: &mut StdRng, raw: &mut Raw, f: &str) {
    let names = ["", "a", "b"];
    for _ in 0..rng.gen_range(1..8) {
        let name = names[rng.gen_range(0..names.len())];
        match rng.gen_range(0..7) {
            0 | 1 => raw.parse(name, &statement(rng, f)),
            2 | 3 => {
                let params: Vec<String> = (0..rng.gen_range(0..3))
                    .map(|_| rng.gen_range(-3i32..3).to_string())
                    .collect();
                let params: Vec<&str> = params.iter().map(|s| s.as_str()).collect();
                raw.bind("", name, &params);
            }
            4 => raw.execute("", [0, 1, -5, i32::MAX][rng.gen_range(0..4)]),
            5 => raw.send(b'D', b"P\0"),
            _ => {
                let kind = [b'H', b'C'][rng.gen_range(0..2)];
                let body = if kind == b'C' {
                    [&b"S"[..], name.as_bytes(), &b"\0"[..]].concat()
                } else {
                    Vec::new()
                };
                raw.send(kind, &body);
            }
        }
    }
    raw.sync();
}

/// A connection, retried while the slot of one that just ended is still
/// being given back.
fn connect(port: u16) -> Raw {
    for _ in 0..50 {
        if let Ok(raw) = std::panic::catch_unwind(|| Raw::connect(port)) {
            return raw;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Raw::connect(port)
}

/// One client's share of the run: `statements` statements and
/// `sequences` sequences on its own connection (a new one after each that
/// ends), from its own seed. Returns what it sent.
fn client(port: u16, seed: u64, f: &str, statements: u64, sequences: u64) -> (u64, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut raw = connect(port);
    let (mut sent, mut done) = (0u64, 0u64);
    while sent < statements || done < sequences {
        let started = std::time::Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if sent < statements && (done >= sequences || rng.gen_bool(0.5)) {
                query(&mut rng, &mut raw, f) as u64
            } else {
                sequence(&mut rng, &mut raw, f);
                0
            }
        }));
        match outcome {
            Ok(0) => done += 1,
            Ok(n) => sent += n,
            // The connection ended (a FATAL error, as for a Bind that does
            // not decode); it must still have answered, and a new one is
            // served.
            Err(_) => {
                // Raw waits 60 s for an answer: a connection left without
                // one is a failure, not an ending.
                let waited = started.elapsed();
                assert!(
                    waited.as_secs() < 50,
                    "seed {seed}: no answer in {waited:?}"
                );
                done += 1;
                raw = connect(port);
            }
        }
    }
    (sent, done)
}

#[test]
fn random_sql_and_message_sequences_leave_the_server_serving() {
    let statements = setting("UNTORN_FUZZ_STATEMENTS", 400);
    let sequences = setting("UNTORN_FUZZ_SEQUENCES", 200);
    let seed = setting("UNTORN_FUZZ_SEED", 35);
    // Clients in parallel, each with its share and a seed of its own
    // (seed * 1000 + its number): a long run in less time.
    let clients = setting("UNTORN_FUZZ_CLIENTS", 2).max(1);
    println!(
        "wire_fuzz: seed {seed}, {statements} statements, {sequences} sequences, \
         {clients} clients"
    );
    let started = std::time::Instant::now();
    // Three slots more than the clients: psql, and a client's connection
    // that ended while its slot is being given back.
    let slots = clients + 3;
    let serve = Serve::start(&[
        "--max-connections",
        &slots.to_string(),
        "--statement-timeout",
        "2000",
    ]);
    let port = serve.port;
    psql(port, "create table acc (aid int primary key, bal int)");
    psql(port, "insert into acc values (1, 100), (2, 100)");
    let share = |total: u64, i: u64| total / clients + u64::from(i < total % clients);
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (st, sq) = (share(statements, i), share(sequences, i));
            let f = format!("f{i}");
            psql(
                port,
                &format!("create table {f} (id int primary key, v int)"),
            );
            std::thread::spawn(move || client(port, seed * 1000 + i, &f, st, sq))
        })
        .collect();
    let (mut sent, mut done) = (0u64, 0u64);
    for t in threads {
        let (s, d) = t.join().expect("a client failed");
        sent += s;
        done += d;
    }
    // No slot was leaked: all are free again (once the ended
    // connections' threads are gone), and the transfers kept the sum.
    let all: Vec<Raw> = (0..slots).map(|_| connect(port)).collect();
    drop(all);
    assert_eq!(psql(port, "select sum(bal) from acc"), "200", "seed {seed}");
    assert!(serve.stop().success(), "seed {seed}");
    println!(
        "wire_fuzz: seed {seed}: {sent} statements, {done} sequences, {clients} clients, \
         {:.0} s, no failure",
        started.elapsed().as_secs_f64()
    );
}
