//! `untorn serve`'s flags: each nonsense value is refused by name, with a
//! non-zero exit, before the database directory is created (the refused
//! `--listen` without a password: serve_clients.rs).

mod common;

use common::serve_expecting_refusal_with;

#[test]
fn serve_refuses_bad_settings_before_creating_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    for (flags, says) in [
        // Accepted before: no connection could ever be served.
        (&["--max-connections", "0"][..], "max-connections"),
        // Accepted before: every connection ended at its first message.
        (&["--max-message-size", "0"], "max-message-size"),
        // Clamped to 0.1 s before, NaN and negatives included.
        (&["--checkpoint-timeout", "nan"], "checkpoint-timeout"),
        (&["--checkpoint-timeout=-1"], "checkpoint-timeout"),
        (&["--checkpoint-timeout", "0.01"], "checkpoint_timeout"),
        // Accepted before: a checkpoint every few commits.
        (&["--max-wal-size", "0"], "max_wal_size"),
    ] {
        let run = serve_expecting_refusal_with(&dir, flags);
        assert_eq!(run.code, Some(2), "{flags:?}\n{}", run.context());
        run.expect_stderr(says);
        assert!(!dir.exists(), "{flags:?} created {}", dir.display());
    }
}
