//! The TPC-C wire driver (`untorn tpcc`, issue 39) against MariaDB, over
//! the MySQL protocol (a `mysql://` URL, here on a unix socket): the same
//! load, run and check as tests/tpcc_wire.rs on `untorn serve`. MariaDB
//! is started privately (mariadb-install-db and mariadbd on a socket in a
//! temporary directory, as scripts/peers does). CI installs no MariaDB:
//! without mariadbd the test says CANNOT RUN and passes.

mod common;

use common::untorn;
use mysql::prelude::Queryable;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use untorn::lab::workload::tpcc::txn::KINDS;

/// A program on PATH or in the sbin directories (mariadbd is in
/// /usr/sbin, which a user's PATH may lack).
fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A private mariadbd on a unix socket only, killed when dropped.
struct MariaDb {
    child: Child,
    dir: PathBuf,
}

impl MariaDb {
    fn start(dir: &Path, mariadbd: &Path, install_db: &Path) -> MariaDb {
        let data = dir.join("data");
        // As root, both refuse to run unless told to stay root.
        let user: &[&str] = if unsafe { libc::geteuid() } == 0 {
            &["--user=root"]
        } else {
            &[]
        };
        let out = Command::new(install_db)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .args(user)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mariadb-install-db: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let child = Command::new(mariadbd)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
            .arg(format!("--log-error={}", dir.join("server.log").display()))
            .args([
                "--skip-networking",
                "--skip-log-bin",
                "--innodb-buffer-pool-size=128M",
                // A test of the driver, not of durability: no fsync per commit.
                "--innodb-flush-log-at-trx-commit=2",
            ])
            .args(user)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut db = MariaDb {
            child,
            dir: dir.to_path_buf(),
        };
        db.wait_ready();
        db
    }

    fn socket_url(&self, db: &str) -> String {
        format!(
            "mysql://root@localhost/{db}?socket={}",
            self.dir.join("mysqld.sock").display()
        )
    }

    fn wait_ready(&mut self) {
        let start = Instant::now();
        loop {
            if self.conn("").is_ok() {
                return;
            }
            let log = || std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("mariadbd exited ({status}):\n{}", log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "mariadbd not ready after 120 s:\n{}",
                log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn conn(&self, db: &str) -> mysql::Result<mysql::Conn> {
        mysql::Conn::new(mysql::Opts::from_url(&self.socket_url(db))?)
    }

    fn count(&self, table: &str) -> u64 {
        let mut c = self.conn("tpcc").unwrap();
        c.query_first(format!("SELECT count(*) FROM {table}"))
            .unwrap()
            .unwrap()
    }

    /// Orders with a carrier.
    fn delivered(&self) -> u64 {
        let mut c = self.conn("tpcc").unwrap();
        c.query_first("SELECT count(*) FROM orders WHERE o_carrier_id IS NOT NULL")
            .unwrap()
            .unwrap()
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_wire_driver_loads_runs_and_checks_tpcc_on_mariadb() {
    let (Some(mariadbd), Some(install_db)) = (program("mariadbd"), program("mariadb-install-db"))
    else {
        eprintln!("CANNOT RUN: mariadbd not installed (apt-get install mariadb-server)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = MariaDb::start(dir.path(), &mariadbd, &install_db);
    db.conn("")
        .unwrap()
        .query_drop("CREATE DATABASE tpcc")
        .unwrap();
    let url = db.socket_url("tpcc");
    let json = dir.path().join("run.json");

    common::tpcc_wire_load(&url, 1);
    // InnoDB tables, with the counts the specification gives, scaled down.
    let engines: Vec<String> = db
        .conn("tpcc")
        .unwrap()
        .query("SELECT DISTINCT engine FROM information_schema.tables WHERE table_schema = 'tpcc'")
        .unwrap();
    assert_eq!(engines, ["InnoDB"]);
    assert_eq!(db.count("district"), 10);
    assert_eq!(db.count("stock"), 1000);
    assert_eq!(db.count("customer"), 300);
    assert_eq!(db.count("history"), 300);
    assert_eq!(db.count("new_order"), 90);
    let delivered_before = db.delivered();

    let (r, kinds) = common::tpcc_wire_run(&url, &json);
    assert_eq!(
        kinds.iter().map(|k| k.0.as_str()).collect::<Vec<_>>(),
        KINDS
    );
    assert!(kinds.iter().all(|k| k.1 > 0), "{r}");
    // What the run did is in the tables: New-Orders added orders, and
    // Deliveries set carriers.
    assert!(db.count("orders") > 300);
    assert!(db.delivered() > delivered_before, "no order delivered\n{r}");

    untorn(["tpcc", "--url", &url, "check"])
        .expect_code(0)
        .expect_stdout("consistency conditions 1-4 hold (1 warehouses, 10 districts)");
    // Condition 1 (W_YTD = sum of D_YTD) broken on purpose is found.
    db.conn("tpcc")
        .unwrap()
        .query_drop("UPDATE warehouse SET w_ytd = w_ytd + 1 WHERE w_id = 1")
        .unwrap();
    untorn(["tpcc", "--url", &url, "check"])
        .expect_code(1)
        .expect_stdout("FAILED: tpcc consistency condition 1 broken");
}
