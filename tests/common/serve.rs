//! `untorn serve` driven end to end (tests/serve_clients.rs,
//! tests/hostile_clients.rs): the server on a free loopback port, the
//! real clients, and a minimal protocol 3.0 client for what they never send.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// `untorn serve` on a free loopback port, stopped with SIGTERM (a clean
/// shutdown) by `stop`, killed when dropped.
pub struct Serve {
    pub child: Child,
    pub port: u16,
    /// The database's temporary directory, when `start` made it.
    _dir: Option<tempfile::TempDir>,
}

impl Serve {
    /// A server on a new database in a temporary directory.
    pub fn start(extra: &[&str]) -> Serve {
        let dir = tempfile::tempdir().unwrap();
        let mut serve = Serve::start_in(&dir.path().join("db"), extra);
        serve._dir = Some(dir);
        serve
    }

    /// A server on the database in `dir` (created if missing); returns
    /// once its first line says it has opened the database and listens.
    pub fn start_in(dir: &Path, extra: &[&str]) -> Serve {
        Serve::spawn(super::serve_command(dir, extra))
    }

    /// [`Serve::start_in`] under `ulimit -n files` (soft and hard).
    pub fn start_with_file_limit(dir: &Path, extra: &[&str], files: u64) -> Serve {
        use std::os::unix::process::CommandExt;
        let mut c = super::serve_command(dir, extra);
        // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
        unsafe {
            c.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: files,
                    rlim_max: files,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        Serve::spawn(c)
    }

    /// Starts `c` (an `untorn serve` command) and reads its port.
    pub fn spawn(mut c: Command) -> Serve {
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start untorn serve");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        // Keep reading, so its last line (at shutdown) has a reader.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let port = line
            .rsplit_once("listening on 127.0.0.1:")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in untorn serve's first line: {line:?}"));
        Serve {
            child,
            port,
            _dir: None,
        }
    }

    /// SIGKILL, and waits: its lock is gone when the wait returns.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub fn stop(mut self) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client program, which must be installed (scripts/install-clients).
pub fn client(name: &str) -> Command {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{name} is not installed: run scripts/install-clients (scripts/test does)"
    );
    let mut c = Command::new(name);
    c.env("PGSSLMODE", "prefer").env_remove("PGPASSWORD");
    c
}

/// Runs `c`, which must succeed.
pub fn run(mut c: Command) -> Output {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{c:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// psql's unaligned output of `sql`, which must succeed.
pub fn psql(port: u16, sql: &str) -> String {
    let mut c = psql_as(port, "bench", "bench");
    c.args(["-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql]);
    String::from_utf8(run(c).stdout).unwrap().trim().to_string()
}

/// psql to the server at `port` as `user`, on database `db`, without
/// a psqlrc (-X); the caller adds what to run.
pub fn psql_as(port: u16, user: &str, db: &str) -> Command {
    let mut c = client("psql");
    c.args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", user, "-d", db, "-X"]);
    c
}

/// What came back up to ReadyForQuery: the kinds of the messages, the
/// SQLSTATEs and messages of the errors, and the transaction status.
#[derive(Debug)]
pub struct Reply {
    pub kinds: Vec<u8>,
    pub codes: Vec<String>,
    pub messages: Vec<String>,
    pub status: u8,
    /// BackendKeyData's process id and secret key, if it came.
    pub key: Option<(i32, i32)>,
}

/// A field of an ErrorResponse body (`b'C'`: the SQLSTATE, `b'M'`: the message).
pub fn error_field(body: &[u8], field: u8) -> Option<String> {
    body.split(|b| *b == 0)
        .find_map(|f| f.strip_prefix(&[field]))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// A minimal protocol 3.0 client.
pub struct Raw(pub TcpStream);

impl Raw {
    /// Connects and starts up as user `raw`, up to the first ReadyForQuery.
    pub fn connect(port: u16) -> Raw {
        Raw::connect_keyed(port).0
    }

    /// `connect`, with the process id and secret key a CancelRequest needs.
    pub fn connect_keyed(port: u16) -> (Raw, (i32, i32)) {
        let mut r = Raw::open(port);
        r.startup(&["user", "raw", "database", "raw"]);
        let key = r.until_ready().key.expect("no BackendKeyData");
        (r, key)
    }

    /// Sends a CancelRequest for the connection `key` names, on a
    /// connection of its own, as libpq's PQcancel does.
    pub fn cancel(port: u16, key: (i32, i32)) {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let words = [16, 80877102, key.0, key.1];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        s.write_all(&bytes).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    }

    /// Connects without starting up.
    pub fn open(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        Raw(s)
    }

    /// Sends a protocol 3.0 StartupMessage with these key, value pairs.
    pub fn startup(&mut self, pairs: &[&str]) {
        let mut body = 196608i32.to_be_bytes().to_vec();
        for kv in pairs {
            body.extend_from_slice(kv.as_bytes());
            body.push(0);
        }
        body.push(0);
        let mut m = (body.len() as i32 + 4).to_be_bytes().to_vec();
        m.extend(body);
        self.0.write_all(&m).unwrap();
    }

    pub fn send(&mut self, kind: u8, body: &[u8]) {
        let mut m = vec![kind];
        m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        self.0.write_all(&m).unwrap();
    }

    /// The next message, or `None` once the server closed the connection.
    pub fn message(&mut self) -> Option<(u8, Vec<u8>)> {
        let mut head = [0u8; 5];
        self.0.read_exact(&mut head).ok()?;
        let len = i32::from_be_bytes(head[1..5].try_into().unwrap()) as usize - 4;
        let mut body = vec![0u8; len];
        self.0.read_exact(&mut body).ok()?;
        Some((head[0], body))
    }

    /// Messages up to ReadyForQuery, which must come.
    pub fn until_ready(&mut self) -> Reply {
        let mut r = Reply {
            kinds: Vec::new(),
            codes: Vec::new(),
            messages: Vec::new(),
            status: 0,
            key: None,
        };
        loop {
            let Some((kind, body)) = self.message() else {
                panic!("the connection closed before ReadyForQuery: {r:?}");
            };
            r.kinds.push(kind);
            if kind == b'E' {
                r.codes.extend(error_field(&body, b'C'));
                r.messages.extend(error_field(&body, b'M'));
            }
            if kind == b'K' && body.len() == 8 {
                let word = |i: usize| i32::from_be_bytes(body[i..i + 4].try_into().unwrap());
                r.key = Some((word(0), word(4)));
            }
            if kind == b'Z' {
                r.status = body[0];
                return r;
            }
        }
    }

    /// Messages until the server closes the connection.
    pub fn until_closed(&mut self) -> Vec<(u8, Vec<u8>)> {
        std::iter::from_fn(|| self.message()).collect()
    }

    /// Parse: statement `name` (empty: the unnamed one), no declared types.
    pub fn parse(&mut self, name: &str, sql: &str) {
        let body = [name.as_bytes(), b"\0", sql.as_bytes(), b"\0\0\0"].concat();
        self.send(b'P', &body);
    }

    /// Bind: portal from statement, text parameters, text results.
    pub fn bind(&mut self, portal: &str, stmt: &str, params: &[&str]) {
        let mut body = [portal.as_bytes(), b"\0", stmt.as_bytes(), b"\0"].concat();
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&(params.len() as i16).to_be_bytes());
        for p in params {
            body.extend_from_slice(&(p.len() as i32).to_be_bytes());
            body.extend_from_slice(p.as_bytes());
        }
        body.extend_from_slice(&0i16.to_be_bytes());
        self.send(b'B', &body);
    }

    /// Execute: up to `max_rows` rows of the portal (0: all).
    pub fn execute(&mut self, portal: &str, max_rows: i32) {
        let body = [portal.as_bytes(), b"\0", &max_rows.to_be_bytes()].concat();
        self.send(b'E', &body);
    }

    pub fn sync(&mut self) -> Reply {
        self.send(b'S', &[]);
        self.until_ready()
    }

    pub fn query(&mut self, sql: &str) -> Reply {
        let mut body = sql.as_bytes().to_vec();
        body.push(0);
        self.send(b'Q', &body);
        self.until_ready()
    }
}

/// A field of a process's /proc/PID/status in kB (`VmRSS`, `VmHWM`), in
/// bytes.
pub fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    kb << 10
}
