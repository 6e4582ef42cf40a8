//! Issue 56, item 8: sessions that end. A session's statement could be
//! stopped only by its own client's CancelRequest; nothing could end
//! another session. pg_cancel_backend and pg_terminate_backend now do, as
//! in PostgreSQL, whether the session is busy or idle in a block; and a
//! statement whose client vanished stops.

mod common;

use common::serve::{error_field, psql, Raw, Serve};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const ENDLESS_LOAD: &str = "insert into big select x from generate_series(1, 2000000000) as x";

/// The SQLSTATEs and severities of the errors among `messages`.
fn errors(messages: &[(u8, Vec<u8>)]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|(kind, _)| *kind == b'E')
        .map(|(_, body)| {
            (
                error_field(body, b'S').unwrap(),
                error_field(body, b'C').unwrap(),
            )
        })
        .collect()
}

/// Calls `sql` (naming `pid`) from another connection every 50 ms until
/// told to stop, for a statement that has to be running when it lands.
fn keep_calling(port: u16, sql: String) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let t = std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
            psql(port, &sql);
        }
    });
    (done, t)
}

#[test]
fn pg_terminate_backend_ends_an_idle_session_and_a_busy_one() {
    let serve = Serve::start(&[]);
    let port = serve.port;
    psql(port, "create table big (id int primary key)");
    psql(port, "create table acc (aid int primary key, bal int)");
    psql(port, "insert into acc values (1, 10)");

    // Idle in a block that holds a row lock.
    let (mut idle, (pid, _)) = Raw::connect_keyed(port);
    assert!(idle.query("begin").codes.is_empty());
    assert!(idle
        .query("update acc set bal = 99 where aid = 1")
        .codes
        .is_empty());
    assert_eq!(
        psql(port, &format!("select pg_terminate_backend({pid})")),
        "t"
    );
    let rest = idle.until_closed();
    assert_eq!(
        errors(&rest),
        [("FATAL".into(), "57P01".into())],
        "{rest:?}"
    );
    // Its block rolled back and its row lock is free.
    // (A lock still held would time the update out: 57014, and psql fails.)
    psql(
        port,
        "set statement_timeout = 10000; update acc set bal = bal + 1 where aid = 1",
    );
    assert_eq!(psql(port, "select bal from acc"), "11");

    // Busy with a statement that would run for hours.
    let (mut busy, (pid, _)) = Raw::connect_keyed(port);
    assert!(busy.query("select 1").codes.is_empty());
    let (done, caller) = keep_calling(port, format!("select pg_terminate_backend({pid})"));
    let mut load = ENDLESS_LOAD.as_bytes().to_vec();
    load.push(0);
    busy.send(b'Q', &load);
    let rest = busy.until_closed();
    done.store(true, Ordering::SeqCst);
    caller.join().unwrap();
    // FATAL 57P01 only, as PostgreSQL sends a terminated backend's
    // running statement (ERROR 57P01, ReadyForQuery, then FATAL before).
    assert_eq!(
        errors(&rest),
        [("FATAL".into(), "57P01".into())],
        "{rest:?}"
    );
    assert!(rest.iter().all(|(k, _)| *k != b'Z'), "{rest:?}");
    assert_eq!(psql(port, "select count(*) from big"), "0");
    // A pid no session has: false.
    assert_eq!(psql(port, "select pg_terminate_backend(-7)"), "f");
    assert!(serve.stop().success());
}

/// A client that vanished mid-statement: its statement went on with its
/// row locks until it ended by itself (here: never, as it waits for a
/// lock an open block holds). Now the statement asks whether its client
/// is still there at its next probe (a lock wait's look, every 1,024
/// rows of work) and stops, its session rolled back.
#[test]
fn a_vanished_client_s_statement_stops_and_its_locks_go() {
    let serve = Serve::start(&[]);
    let port = serve.port;
    psql(port, "create table acc (aid int primary key, bal int)");
    psql(
        port,
        "insert into acc select x, 1 from generate_series(1, 10) as x",
    );
    let mut holder = Raw::connect(port);
    assert!(holder.query("begin").codes.is_empty());
    assert!(holder
        .query("update acc set bal = 0 where aid = 10")
        .codes
        .is_empty());
    // Locks rows 1..9, then waits for row 10; its client goes at once
    // (whether the statement started yet or not, the server reads it).
    let mut vanisher = Raw::connect(port);
    vanisher.send(b'Q', b"update acc set bal = bal + 1\0");
    std::thread::sleep(Duration::from_millis(200));
    drop(vanisher);
    // Row 1 is free again: before, this waited out its timeout (57014).
    psql(
        port,
        "set statement_timeout = 20000; update acc set bal = bal + 100 where aid = 1",
    );
    assert!(holder.query("rollback").codes.is_empty());
    assert_eq!(psql(port, "select bal from acc where aid = 1"), "101");
    assert_eq!(psql(port, "select sum(bal) from acc where aid > 1"), "9");
    assert!(serve.stop().success());
}

/// A connection that has sent no statement yet is listed from the end of
/// its start-up: pg_terminate_backend ends it (it answered false before,
/// the session being listed at its first statement).
#[test]
fn pg_terminate_backend_reaches_a_connection_before_its_first_statement() {
    let serve = Serve::start(&[]);
    let port = serve.port;
    let (mut fresh, (pid, _)) = Raw::connect_keyed(port);
    assert_eq!(
        psql(port, &format!("select pg_terminate_backend({pid})")),
        "t"
    );
    let rest = fresh.until_closed();
    assert_eq!(
        errors(&rest),
        [("FATAL".into(), "57P01".into())],
        "{rest:?}"
    );
    assert!(serve.stop().success());
}

#[test]
fn pg_cancel_backend_stops_the_running_statement_and_the_session_goes_on() {
    let serve = Serve::start(&[]);
    let port = serve.port;
    psql(port, "create table big (id int primary key)");
    let (mut busy, (pid, _)) = Raw::connect_keyed(port);
    assert!(busy.query("select 1").codes.is_empty());
    let (done, caller) = keep_calling(port, format!("select pg_cancel_backend({pid})"));
    let r = busy.query(ENDLESS_LOAD);
    done.store(true, Ordering::SeqCst);
    caller.join().unwrap();
    assert_eq!(r.codes, ["57014"], "{r:?}");
    assert!(r.messages[0].contains("user request"), "{r:?}");
    assert!(busy.query("select 1").codes.is_empty());
    assert_eq!(psql(port, "select count(*) from big"), "0");
    assert_eq!(psql(port, "select pg_backend_pid() > 0"), "t");
    assert_eq!(psql(port, "select pg_cancel_backend(-7)"), "f");
    assert!(serve.stop().success());
}

/// The messages a start-up with `pairs` gets, up to ReadyForQuery or the
/// connection's end.
fn start_up(port: u16, pairs: &[&str]) -> (Raw, Vec<(u8, Vec<u8>)>) {
    let mut raw = Raw::open(port);
    let mut all = vec!["user", "raw", "database", "raw"];
    all.extend_from_slice(pairs);
    raw.startup(&all);
    let mut got = Vec::new();
    while let Some((kind, body)) = raw.message() {
        got.push((kind, body));
        if kind == b'Z' {
            break;
        }
    }
    (raw, got)
}

/// Issue 56, item 11 and the minor list: `client_encoding` other than
/// UTF8 was ignored (LATIN1 text stored as if UTF-8), and so was the
/// start-up packet's `options` (`-c statement_timeout=...`). Now options
/// set the session as SET would, and what the server cannot honour is
/// refused at start-up, naming it.
#[test]
fn start_up_settings_are_honoured_or_refused_by_name() {
    let serve = Serve::start(&[]);
    let port = serve.port;
    psql(port, "create table big (id int primary key)");
    let (mut raw, got) = start_up(port, &["options", "-c statement_timeout=300"]);
    assert_eq!(got.last().map(|m| m.0), Some(b'Z'), "{got:?}");
    let r = raw.query(ENDLESS_LOAD);
    assert_eq!(r.codes, ["57014"], "{r:?}");
    assert!(r.messages[0].contains("statement timeout"), "{r:?}");

    for (pairs, code, names) in [
        (["client_encoding", "LATIN1"], "0A000", "LATIN1"),
        (["client_encoding", "klingon"], "22023", "klingon"),
        (["options", "-c search_path=app"], "0A000", "search_path"),
        (["options", "-c statement_timeout=soon"], "22023", "soon"),
    ] {
        let (_, got) = start_up(port, &pairs);
        let errors = errors(&got);
        assert_eq!(
            errors,
            [("FATAL".to_string(), code.to_string())],
            "{pairs:?}: {got:?}"
        );
        let message = got
            .iter()
            .find(|m| m.0 == b'E')
            .map(|m| error_field(&m.1, b'M').unwrap());
        assert!(
            message.as_ref().is_some_and(|m| m.contains(names)),
            "{pairs:?}: {message:?}"
        );
    }
    // SQL_ASCII (psql's in the C locale) is served, and said back.
    let (mut raw, got) = start_up(port, &["client_encoding", "sql_ascii"]);
    let status = got
        .iter()
        .any(|(k, b)| *k == b'S' && b.starts_with(b"client_encoding\0SQL_ASCII\0"));
    assert!(status, "{got:?}");
    assert!(raw.query("set client_encoding = 'UTF8'").codes.is_empty());
    assert_eq!(raw.query("set client_encoding = 'LATIN1'").codes, ["0A000"]);
    assert!(serve.stop().success());
}

/// SIGTERM closed every session without a word; PostgreSQL sends each a
/// FATAL 57P01 first. Now an idle session and one in a block get it.
#[test]
fn a_shutdown_tells_each_session_57p01() {
    let serve = Serve::start(&[]);
    let port = serve.port;
    psql(port, "create table acc (aid int primary key, bal int)");
    let (mut idle, _) = Raw::connect_keyed(port);
    let (mut in_block, _) = Raw::connect_keyed(port);
    assert!(in_block.query("begin").codes.is_empty());
    assert!(in_block
        .query("insert into acc values (1, 1)")
        .codes
        .is_empty());
    assert!(serve.stop().success());
    for raw in [&mut idle, &mut in_block] {
        let rest = raw.until_closed();
        assert_eq!(
            errors(&rest),
            [("FATAL".into(), "57P01".into())],
            "{rest:?}"
        );
    }
}
