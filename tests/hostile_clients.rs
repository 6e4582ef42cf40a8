//! Hostile and careless clients against `untorn serve` (issue 35). Each
//! probe gets an error, or what PostgreSQL does, and afterwards the
//! server still serves other clients and their data is intact.

mod common;

use common::serve::{psql, Raw, Serve};

/// `n` copies of `term` (its `#` replaced by 1, 2, ...) joined by `op`.
fn chain(term: &str, op: &str, n: usize) -> String {
    (1..=n)
        .map(|i| term.replace('#', &i.to_string()))
        .collect::<Vec<_>>()
        .join(op)
}

/// A table of four accounts whose balances sum to 40, and a check that
/// a new client is served and finds them so.
fn accounts(port: u16) {
    psql(port, "create table acc (aid int primary key, bal int)");
    psql(
        port,
        "insert into acc values (1, 10), (2, 10), (3, 10), (4, 10)",
    );
}

fn still_serving(port: u16) {
    assert_eq!(psql(port, "select sum(bal) from acc"), "40");
}

#[test]
fn deep_expressions_get_54001_and_the_server_goes_on() {
    let serve = Serve::start(&[]);
    let port = serve.port;
    accounts(port);
    let mut raw = Raw::connect(port);
    for deep in [
        format!("select {}", chain("1", "+", 100_000)),
        format!("select {}1{}", "(".repeat(20_000), ")".repeat(20_000)),
        format!(
            "select count(*) from acc where {}",
            chain("aid = #", " or ", 50_000)
        ),
    ] {
        let r = raw.query(&deep);
        assert_eq!(
            (r.codes.as_slice(), r.status),
            (&["54001".to_string()][..], b'I')
        );
        assert!(
            r.messages[0].contains("stack depth limit exceeded"),
            "{r:?}"
        );
    }
    // The 69 KB filter is served, and a 40-term sum plans at once
    // (typing doubled per term: 40 terms took hours).
    let or = chain("aid = #", " or ", 5000);
    assert_eq!(
        psql(port, &format!("select count(*) from acc where {or}")),
        "4"
    );
    assert_eq!(psql(port, &format!("select {}", chain("1", "+", 40))), "40");
    assert!(raw.query("select 1").codes.is_empty());
    still_serving(port);
    assert!(serve.stop().success());
}

/// Execute with a negative max_rows panicked pgwire (a capacity overflow)
/// and leaked the connection's slot: five such clients locked everyone
/// out of a server with five slots. Negative means all rows, as 0 does.
#[test]
fn a_negative_max_rows_returns_every_row_and_leaks_no_slot() {
    let serve = Serve::start(&["--max-connections", "2"]);
    let port = serve.port;
    accounts(port);
    for _ in 0..5 {
        let mut raw = Raw::connect(port);
        raw.parse("", "select aid from acc order by aid");
        raw.bind("", "", &[]);
        raw.execute("", -5);
        let r = raw.sync();
        let rows = r.kinds.iter().filter(|k| **k == b'D').count();
        assert_eq!((rows, r.codes.len(), r.status), (4, 0, b'I'), "{r:?}");
        raw.send(b'X', &[]);
        assert!(raw.until_closed().is_empty());
    }
    still_serving(port);
    assert!(serve.stop().success());
}
