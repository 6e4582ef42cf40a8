//! What the end-to-end tests of the `untorn` binary share (tests/cli_*.rs):
//! running the binary and reading what it printed, and filling a database
//! through the library.

// Each test file is its own crate and uses only part of this module.
#![allow(dead_code)]

pub mod serve;
pub mod xfs;

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use untorn::{key_u64, Database, Table};

/// The outcome of one run of the binary, printed in full on any failure.
pub struct Run {
    pub what: String,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn context(&self) -> String {
        format!(
            "command: {}\nexit status: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.what, self.code, self.stdout, self.stderr
        )
    }

    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, Some(code), "{}", self.context());
        self
    }

    pub fn expect_stdout(&self, needle: &str) -> &Self {
        assert!(
            self.stdout.contains(needle),
            "stdout should contain {needle:?}\n{}",
            self.context()
        );
        self
    }

    pub fn expect_stderr(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.contains(needle),
            "stderr should contain {needle:?}\n{}",
            self.context()
        );
        self
    }

    /// A refusal: exit status 2, a message on stderr, no panic.
    pub fn expect_refused(&self, needles: &[&str]) -> &Self {
        self.expect_code(2);
        assert!(
            !self.stderr.contains("panicked"),
            "the tool panicked instead of refusing\n{}",
            self.context()
        );
        assert!(
            self.stderr.contains("untorn: error:"),
            "no error message on stderr\n{}",
            self.context()
        );
        for n in needles {
            self.expect_stderr(n);
        }
        self
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON: {e}\n{}", self.context()))
    }

    /// The JSON on stdout holds `want` at `pointer` (`/settings/page_size`).
    pub fn expect_json(&self, pointer: &str, want: impl Into<serde_json::Value>) -> &Self {
        let want = want.into();
        assert_eq!(
            self.json().pointer(pointer),
            Some(&want),
            "{pointer}\n{}",
            self.context()
        );
        self
    }

    /// The first line of stdout that starts with `prefix`.
    pub fn line_starting(&self, prefix: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?}\n{}", self.context()))
    }

    /// How many lines of stdout start with `prefix`.
    pub fn lines_starting(&self, prefix: &str) -> usize {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .count()
    }

    /// The number after `label` on the line of the verify report that
    /// starts with it.
    pub fn number_after(&self, label: &str) -> u64 {
        let line = self.line_starting(label);
        line[label.len()..]
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{label:?} line {line:?}: {e}\n{}", self.context()))
    }
}

pub fn untorn<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().into()).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_untorn"))
        .args(&args)
        .output()
        .expect("run the untorn binary");
    Run {
        what: format!(
            "untorn {}",
            args.iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `untorn bench <flags>... --json DIR/out.json --report DIR/report
/// --dir DIR/dbs`: the run, and the JSON it wrote (empty when none).
pub fn bench_into(dir: &Path, flags: &[&str]) -> (Run, serde_json::Value) {
    let json = dir.join("out.json");
    let (report, dbs) = (dir.join("report"), dir.join("dbs"));
    let mut args = vec![OsStr::new("bench")];
    args.extend(flags.iter().map(OsStr::new));
    for (flag, path) in [("--json", &json), ("--report", &report), ("--dir", &dbs)] {
        args.extend([OsStr::new(flag), path.as_os_str()]);
    }
    let run = untorn(args);
    let v = std::fs::read(&json).map_or(serde_json::Value::Null, |b| {
        serde_json::from_slice(&b).expect("bench's JSON parses")
    });
    (run, v)
}

/// `untorn <command> <dir> <flags>...`: how every tool but bench is called.
pub fn untorn_on(command: &str, dir: &Path, flags: &[&str]) -> Run {
    let mut args = vec![OsStr::new(command), dir.as_os_str()];
    args.extend(flags.iter().map(OsStr::new));
    untorn(args)
}

/// `untorn serve DIR EXTRA...` on a free loopback port, not yet started;
/// a 32 MB buffer pool unless `extra` names one.
pub fn serve_command(dir: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_untorn"));
    c.arg("serve")
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(extra);
    if !extra.contains(&"--buffer-pool") {
        c.args(["--buffer-pool", "32MB"]);
    }
    c
}

/// `untorn serve DIR`, which must end by itself: refused. A server that
/// was let in would serve forever, so it is killed after a minute and the
/// test fails, showing what it printed.
pub fn serve_expecting_refusal(dir: &Path) -> Run {
    serve_expecting_refusal_with(dir, &[])
}

/// [`serve_expecting_refusal`] with `extra` flags.
pub fn serve_expecting_refusal_with(dir: &Path, extra: &[&str]) -> Run {
    let mut child = serve_command(dir, extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start untorn serve");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let still_running = child.try_wait().unwrap().is_none();
    if still_running {
        child.kill().unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let run = Run {
        what: format!("untorn serve {}", dir.display()),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!still_running, "not refused: it served\n{}", run.context());
    run
}

pub fn row(i: u64) -> Vec<u8> {
    let mut v = format!("row {i:>10}:").into_bytes();
    v.resize(100, b'v');
    v
}

pub fn insert_rows(db: &Database, table: &Table, rows: Range<u64>) {
    let keys: Vec<u64> = rows.collect();
    for chunk in keys.chunks(500) {
        let mut tx = db.begin();
        for &i in chunk {
            tx.insert(table, &key_u64(i), &row(i)).expect("insert");
        }
        tx.commit().expect("commit");
    }
}

pub fn flip_byte(path: &Path, offset: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open the file to damage");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= 0x5A;
    f.write_all_at(&b, offset).unwrap();
    f.sync_all().unwrap();
}

/// `untorn tpcc --url URL load` of `warehouses` scaled down to 1,000 items
/// and 30 customers a district (the tests' size).
pub fn tpcc_wire_load(url: &str, warehouses: u32) {
    let w = warehouses.to_string();
    let scaled = ["--tpcc-items", "1000", "--tpcc-customers", "30"];
    untorn(
        ["tpcc", "--url", url, "load", "--warehouses", w.as_str()]
            .into_iter()
            .chain(scaled),
    )
    .expect_code(0)
    .expect_stdout(&format!("loaded {w} warehouses"));
}

/// `untorn tpcc --url URL run` with 4 clients for 3 s (1 s warm-up): it
/// must end with conditions 1-4 holding. Returns its JSON and each
/// transaction type's count, in the report's order.
pub fn tpcc_wire_run(url: &str, json: &Path) -> (serde_json::Value, Vec<(String, u64)>) {
    let json_arg = json.to_str().unwrap();
    let flags = ["--clients", "4", "--duration", "3", "--warmup", "1"];
    untorn(
        ["tpcc", "--url", url, "run"]
            .into_iter()
            .chain(flags)
            .chain(["--json", json_arg]),
    )
    .expect_code(0)
    .expect_stdout("consistency conditions 1-4 hold");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    assert!(r["notpm"].as_f64().unwrap() > 0.0, "{r}");
    let kinds = r["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap().to_string(),
                k["count"].as_u64().unwrap(),
            )
        })
        .collect();
    (r, kinds)
}
