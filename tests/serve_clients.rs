//! End to end: the real pgbench 15, sysbench 1.0 and psql against
//! `untorn serve`, and bad input that must leave the server serving.
//!
//! The clients are installed by `scripts/install-clients` (run by
//! `scripts/test`); a missing client fails the test, it never skips.

mod common;

use common::serve::{client, psql, psql_as, run, Raw, Serve};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

fn pgbench(port: u16, args: &[&str]) -> String {
    let mut c = client("pgbench");
    c.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "bench"])
        .args(args)
        .arg("bench");
    let out = run(c);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A figure from pgbench's summary, e.g. "number of failed transactions".
fn pgbench_figure(output: &str, label: &str) -> u64 {
    output
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|rest| rest.trim_start_matches(':').split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {label:?} in pgbench's output:\n{output}"))
}

/// pgbench's invariant: every delta went to one account, one teller and
/// one branch, and into the history.
fn assert_tpcb_balances_agree(port: u16) {
    let sums = psql(
        port,
        "select sum(abalance) from pgbench_accounts; \
         select sum(tbalance) from pgbench_tellers; \
         select sum(bbalance) from pgbench_branches; \
         select sum(delta) from pgbench_history",
    );
    let sums: Vec<&str> = sums.lines().collect();
    assert_eq!(sums.len(), 4, "{sums:?}");
    assert!(
        sums.iter().all(|s| *s == sums[0]),
        "balances disagree (accounts, tellers, branches, history): {sums:?}"
    );
}

#[test]
fn pgbench_initializes_and_runs_in_every_protocol_mode() {
    let serve = Serve::start(&["--torn-page-protection", "double_writes"]);
    let port = serve.port;
    // dtgvp: COPY of the accounts (one CopyData per row and the final
    // "\." line), inside BEGIN ... COMMIT.
    pgbench(port, &["-i", "-s", "1"]);
    assert_eq!(
        psql(port, "select count(*) from pgbench_accounts"),
        "100000"
    );
    for (i, mode) in ["simple", "extended", "prepared"].into_iter().enumerate() {
        // The first run vacuums and truncates the history as pgbench does
        // by default; later ones keep it (-n), so the invariant spans all.
        let vacuum = if i == 0 { "-T" } else { "-nT" };
        let out = pgbench(port, &["-c", "4", vacuum, "4", "-M", mode]);
        let done = pgbench_figure(&out, "number of transactions actually processed");
        assert!(done > 0, "{mode}: no transaction processed:\n{out}");
        assert_eq!(
            pgbench_figure(&out, "number of failed transactions"),
            0,
            "{mode}:\n{out}"
        );
    }
    assert_tpcb_balances_agree(port);
    for script in ["select-only", "simple-update"] {
        let out = pgbench(
            port,
            &["-c", "2", "-nT", "2", "-M", "prepared", "-b", script],
        );
        assert_eq!(pgbench_figure(&out, "number of failed transactions"), 0);
    }
    // simple-update changes accounts and history only.
    assert_eq!(
        psql(port, "select sum(abalance) from pgbench_accounts"),
        psql(port, "select sum(delta) from pgbench_history")
    );
    // dtGvp: the same data from INSERT ... SELECT generate_series.
    pgbench(port, &["-i", "-s", "1", "-I", "dtGvp"]);
    assert_eq!(
        psql(port, "select count(*) from pgbench_accounts"),
        "100000"
    );
    assert_eq!(psql(port, "select count(*) from pgbench_history"), "0");
    assert!(
        serve.stop().success(),
        "untorn serve did not shut down cleanly"
    );
}

fn sysbench(port: u16, script: &str, action: &str, extra: &[&str]) -> String {
    let mut c = client("sysbench");
    c.args([
        "--db-driver=pgsql",
        "--pgsql-host=127.0.0.1",
        &format!("--pgsql-port={port}"),
        "--pgsql-user=sbtest",
        "--pgsql-password=sbtest",
        "--pgsql-db=sbtest",
        "--tables=2",
        "--table-size=2000",
    ])
    .args(extra)
    .args([script, action]);
    String::from_utf8_lossy(&run(c).stdout).into_owned()
}

#[test]
fn sysbench_prepares_runs_every_oltp_script_and_cleans_up() {
    let serve = Serve::start(&["--torn-page-protection", "double_writes"]);
    let port = serve.port;
    sysbench(port, "oltp_read_write", "prepare", &[]);
    assert_eq!(psql(port, "select count(*) from sbtest2"), "2000");
    for script in [
        "oltp_read_write",
        "oltp_write_only",
        "oltp_update_non_index",
        "oltp_point_select",
    ] {
        let out = sysbench(port, script, "run", &["--threads=2", "--time=3"]);
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with("transactions:"))
            .unwrap_or_else(|| panic!("{script}: no transactions line:\n{out}"));
        let n: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert!(n > 0, "{script}: {line}");
    }
    // The rows stay well formed: every id has its k in the index.
    assert_eq!(
        psql(port, "select count(*) from sbtest1 where k >= 0"),
        psql(port, "select count(*) from sbtest1")
    );
    sysbench(port, "oltp_read_write", "cleanup", &[]);
    let missing = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "x",
            "-d",
            "x",
        ])
        .args(["-X", "-c", "select count(*) from sbtest1"])
        .output()
        .unwrap();
    assert!(!missing.status.success(), "sbtest1 survived cleanup");
    assert!(serve.stop().success());
}

#[test]
fn bad_input_leaves_the_server_serving_and_no_half_transaction() {
    let serve = Serve::start(&[]);
    let port = serve.port;
    psql(port, "create table t (id int primary key, v int)");
    psql(port, "insert into t values (1, 10)");

    // An unknown statement: 0A000 with the statement quoted.
    let mut c = psql_as(port, "u", "u");
    c.args(["-c", "select * from t natural join t as u"]);
    let out = c.output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not supported") && err.contains("natural join"),
        "{err}"
    );

    // A malformed message: a Parse whose parameter count overruns it.
    let mut raw = Raw::connect(port);
    raw.send(b'P', b"s\0select 1\0\x7f\xff");
    raw.send(b'S', &[]);
    let mut rest = Vec::new();
    let _ = raw.0.read_to_end(&mut rest);
    assert!(rest.first() == Some(&b'E'), "no ErrorResponse: {rest:?}");

    // An oversized message: a Sync claiming 20,000 bytes.
    let mut raw = Raw::connect(port);
    raw.0.write_all(&[b'S', 0, 0, 0x4e, 0x20]).unwrap();
    let mut rest = Vec::new();
    let _ = raw.0.read_to_end(&mut rest);
    assert!(rest.first() == Some(&b'E'), "no ErrorResponse: {rest:?}");

    // A dropped connection inside a transaction: its update never lands.
    let mut raw = Raw::connect(port);
    assert_eq!(raw.query("begin").status, b'T');
    let r = raw.query("update t set v = 99 where id = 1");
    assert!(r.codes.is_empty() && r.status == b'T', "{r:?}");
    drop(raw);

    // An error inside a block: status E until ROLLBACK.
    let mut raw = Raw::connect(port);
    raw.query("begin");
    let r = raw.query("insert into t values (1, 5)");
    assert_eq!((r.codes, r.status), (vec!["23505".to_string()], b'E'));
    let r = raw.query("select 1");
    assert_eq!((r.codes, r.status), (vec!["25P02".to_string()], b'E'));
    assert_eq!(raw.query("rollback").status, b'I');

    // Other clients were served throughout, and see no half transaction.
    assert_eq!(psql(port, "select v from t where id = 1"), "10");
    assert!(serve.stop().success());
}

#[test]
fn passwords_are_required_off_loopback_and_checked_with_scram() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_untorn"))
        .arg("serve")
        .arg(dir.path().join("db"))
        .args(["--listen", "0.0.0.0:0"])
        .env_remove("UNTORN_PASSWORD")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("set a password"), "{err}");
    // Refused before anything is created (it left an empty database).
    assert!(!dir.path().join("db").exists(), "{err}");

    let secret = dir.path().join("password");
    std::fs::write(&secret, "pencil\n").unwrap();
    let serve = Serve::start(&["--password-file", secret.to_str().unwrap()]);
    let attempt = |password: &str| {
        let mut c = psql_as(serve.port, "u", "u");
        c.env("PGPASSWORD", password)
            .args(["-w", "-A", "-t", "-c", "select 1"]);
        c.output().unwrap()
    };
    let good = attempt("pencil");
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let bad = attempt("crayon");
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr)
            .to_lowercase()
            .contains("password authentication failed"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn connections_over_the_limit_are_refused_with_53300() {
    let serve = Serve::start(&["--max-connections", "1"]);
    let mut first = Raw::connect(serve.port);
    // Refused at its start-up packet (a connection counts from it).
    let mut second = Raw::open(serve.port);
    second.startup(&["user", "raw", "database", "raw"]);
    let mut reply = Vec::new();
    let _ = second.0.read_to_end(&mut reply);
    assert_eq!(reply.first(), Some(&b'E'), "{reply:?}");
    assert!(
        reply.windows(6).any(|w| w == b"C53300"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    // The connection within the limit is still served.
    assert_eq!(first.query("select 1").status, b'I');
}

/// A burst of 300 connections over the limit, half of them asking for
/// SSL first as libpq does: every client reads its 53300 (before, past
/// eight at a time the rest were answered at once and closed with their
/// SSLRequest unread, and their clients saw resets).
#[test]
fn a_burst_over_the_limit_gets_53300_each() {
    let serve = Serve::start(&["--max-connections", "1"]);
    let port = serve.port;
    let mut first = Raw::connect(port);
    let clients: Vec<_> = (0..300)
        .map(|i| {
            std::thread::spawn(move || {
                let mut raw = Raw::open(port);
                // As libpq with sslmode=prefer: an SSLRequest first, `N`
                // back, then the start-up packet.
                if i % 2 == 0 {
                    raw.0.write_all(&[0, 0, 0, 8, 4, 210, 22, 47]).unwrap();
                    let mut answer = [0u8; 1];
                    if raw.0.read_exact(&mut answer).is_err() || answer[0] != b'N' {
                        return (None, answer.to_vec());
                    }
                }
                raw.startup(&["user", "burst", "database", "burst"]);
                let mut reply = Vec::new();
                let read = raw.0.read_to_end(&mut reply);
                (read.err().map(|e| e.kind()), reply)
            })
        })
        .collect();
    let mut refused = 0;
    for c in clients {
        let (err, reply) = c.join().unwrap();
        assert!(
            reply.windows(6).any(|w| w == b"C53300"),
            "{err:?} {}",
            String::from_utf8_lossy(&reply)
        );
        refused += 1;
    }
    assert_eq!(refused, 300);
    assert_eq!(first.query("select 1").status, b'I');
}

/// Connections that have not sent their start-up packet take no place
/// among max_connections, as in PostgreSQL (before, two silent sockets
/// kept every client out of a two-connection server for 60 s).
#[test]
fn connections_still_in_start_up_take_no_place() {
    let serve = Serve::start(&["--max-connections", "2"]);
    let port = serve.port;
    let silent: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let (mut a, mut b) = (Raw::connect(port), Raw::connect(port));
    assert_eq!(a.query("select 1").status, b'I');
    assert_eq!(b.query("select 1").status, b'I');
    // The two places are taken now: a third is refused.
    let mut third = Raw::open(port);
    third.startup(&["user", "raw", "database", "raw"]);
    let mut reply = Vec::new();
    let _ = third.0.read_to_end(&mut reply);
    assert!(reply.windows(6).any(|w| w == b"C53300"), "{reply:?}");
    drop(silent);
    drop(a);
    // A place given back is taken again (once its thread has ended).
    let mut c = (0..50)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(100));
            std::panic::catch_unwind(|| Raw::connect(port)).ok()
        })
        .expect("the place was not given back");
    assert_eq!(c.query("select 1").status, b'I');
    assert_eq!(b.query("select 1").status, b'I');
}

#[test]
fn a_deadlock_ends_one_transaction_with_40p01_and_the_other_commits() {
    let serve = Serve::start(&["--deadlock-timeout", "50"]);
    let port = serve.port;
    psql(port, "create table t (id int primary key, v int)");
    psql(port, "insert into t values (1, 0), (2, 0)");
    let (mut a, mut b) = (Raw::connect(port), Raw::connect(port));
    a.query("begin");
    b.query("begin");
    assert!(a.query("update t set v = 1 where id = 1").codes.is_empty());
    assert!(b.query("update t set v = 2 where id = 2").codes.is_empty());
    // a waits for b's row; b then waits for a's: a cycle.
    a.send(b'Q', b"update t set v = 1 where id = 2\0");
    let b_side = std::thread::spawn(move || {
        let reply = b.query("update t set v = 2 where id = 1");
        (b, reply)
    });
    let a_reply = a.until_ready();
    // The victim's locks go at its ROLLBACK, if not before.
    let a_lost = a_reply.codes == ["40P01"];
    if a_lost {
        assert_eq!(a.query("rollback").status, b'I');
    }
    let (mut b, b_reply) = b_side.join().unwrap();
    let b_lost = b_reply.codes == ["40P01"];
    assert!(a_lost != b_lost, "one victim: {a_reply:?} {b_reply:?}");
    let (winner, value) = if a_lost { (&mut b, "2") } else { (&mut a, "1") };
    assert!(winner.query("commit").codes.is_empty());
    if b_lost {
        assert_eq!(b.query("rollback").status, b'I');
    }
    assert_eq!(
        psql(port, "select v from t order by id"),
        format!("{value}\n{value}")
    );
    assert!(serve.stop().success());
}

#[test]
fn a_deadlock_timeout_out_of_range_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_untorn"))
        .arg("serve")
        .arg(dir.path().join("db"))
        .args(["--listen", "127.0.0.1:0", "--deadlock-timeout", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("deadlock-timeout"), "{err}");
}
