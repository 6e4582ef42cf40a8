//! End to end, with real processes: one opening of a database directory
//! at a time (`untorn.lock`). While `untorn serve` holds a directory, a
//! second server, `untorn check` and the read-only tools are refused,
//! naming its PID; once it is killed (SIGKILL, so that its lock file
//! stays behind, naming it) the directory opens again.

mod common;

use common::{serve_command, serve_expecting_refusal, untorn_on};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

/// `untorn serve DIR` on a free loopback port, killed when dropped.
struct Serve {
    child: Child,
}

impl Serve {
    /// Starts it and waits for its first line, printed once it has opened
    /// the database and listens.
    fn start(dir: &Path) -> Serve {
        let mut child = serve_command(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start untorn serve");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        // Keep reading, so that its later lines have a reader.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        assert!(line.contains("listening on"), "untorn serve: {line:?}");
        Serve { child }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and waits: its lock is gone when the wait returns.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_directory_a_server_holds_opens_nowhere_else_until_the_server_dies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let first = Serve::start(&dir);
    let pid = first.pid();
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
        .expect_stdout("check: ok");
    let second = Serve::start(&dir);
    let text = std::fs::read_to_string(&lock).unwrap();
    assert!(
        text.starts_with(&format!("pid {}\n", second.pid())),
        "{text}"
    );
}
