//! End to end, with real processes: one opening of a database directory
//! at a time (`untorn.lock`). While `untorn serve` holds a directory, a
//! second server, `untorn check` and the read-only tools are refused,
//! naming its PID; once it is killed (SIGKILL, so that its lock file
//! stays behind, naming it) the directory opens again.

mod common;

use common::serve::Serve;
use common::{serve_expecting_refusal, untorn_on};

#[test]
fn a_directory_a_server_holds_opens_nowhere_else_until_the_server_dies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let first = Serve::start_in(&dir, &[]);
    let pid = first.child.id();
    let lock = dir.join("untorn.lock");
    let holder = format!("is in use by process {pid} (");
    let lock_named = lock.display().to_string();
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(text.starts_with(&format!("pid {pid}\n")), "{text}");
    assert!(text.contains("\ncommand "), "{text}");

    serve_expecting_refusal(&dir).expect_refused(&[&holder, &lock_named]);
    // check opens the database: refused as an opening, status 3.
    let run = untorn_on("check", &dir, &[]);
    run.expect_code(3)
        .expect_stderr("could not open")
        .expect_stderr(&holder)
        .expect_stderr(&lock_named);
    assert!(!run.stdout.contains("check: ok"), "{}", run.context());
    // The read-only tools would read files the server is writing.
    for tool in ["inspect", "verify", "waldump", "stats"] {
        untorn_on(tool, &dir, &[]).expect_refused(&[&holder]);
    }

    // Killed, the server leaves its lock file, naming it: that blocks
    // nothing, as the kernel dropped the lock with the process.
    first.kill();
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(text.starts_with(&format!("pid {pid}\n")), "{text}");
    untorn_on("inspect", &dir, &[]).expect_code(0);
    untorn_on("check", &dir, &[])
        .expect_code(0)
        .expect_stdout("open: recovered from")
        .expect_stdout("open: SQL catalog read (0 tables)")
        .expect_stdout(
            "check: pages ok; invariants not checked (no tpcb, sysbench or tpcc tables)",
        );
    let second = Serve::start_in(&dir, &[]);
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(
        text.starts_with(&format!("pid {}\n", second.child.id())),
        "{text}"
    );
}
