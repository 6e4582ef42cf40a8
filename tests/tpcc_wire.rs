//! The TPC-C wire driver (`untorn tpcc`, issue 39) against `untorn serve`:
//! it loads the nine tables with composite keys over COPY, runs the mix
//! with several clients for a few seconds, and the consistency conditions
//! hold; a broken condition is found by `untorn tpcc check`.

mod common;

use common::serve::{psql, Serve};
use common::untorn;
use untorn::lab::workload::tpcc::txn::KINDS;

#[test]
fn the_wire_driver_loads_runs_and_checks_tpcc_on_untorn_serve() {
    let serve = Serve::start(&[]);
    let url = format!("postgres://bench@127.0.0.1:{}/bench", serve.port);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");

    common::tpcc_wire_load(&url, 2);
    // The counts the specification gives per warehouse, scaled down.
    assert_eq!(psql(serve.port, "select count(*) from district"), "20");
    assert_eq!(psql(serve.port, "select count(*) from stock"), "2000");
    assert_eq!(psql(serve.port, "select count(*) from customer"), "600");
    // 30 % of the loaded orders are still new.
    assert_eq!(psql(serve.port, "select count(*) from new_order"), "180");

    let (r, kinds) = common::tpcc_wire_run(&url, &json);
    let names: Vec<&str> = kinds.iter().map(|k| k.0.as_str()).collect();
    assert_eq!(names, KINDS);
    let total: u64 = kinds.iter().map(|k| k.1).sum();
    assert_eq!(total, r["transactions"].as_u64().unwrap(), "{r}");
    // What the run did is in the tables: New-Orders added orders.
    let orders: u64 = psql(serve.port, "select count(*) from orders")
        .parse()
        .unwrap();
    assert!(orders > 600, "{orders} orders after a run");

    // Condition 1 (W_YTD = sum of D_YTD) broken on purpose is found.
    psql(
        serve.port,
        "update warehouse set w_ytd = w_ytd + 1 where w_id = 2",
    );
    untorn(["tpcc", "--url", &url, "check"])
        .expect_code(1)
        .expect_stdout("FAILED: tpcc consistency condition 1 broken");

    // A customer gone (no transaction deletes one) is found too: a load or
    // an engine that loses rows fails the check, not a later run.
    psql(
        serve.port,
        "update warehouse set w_ytd = w_ytd - 1 where w_id = 2",
    );
    untorn(["tpcc", "--url", &url, "check"]).expect_code(0);
    psql(
        serve.port,
        "delete from customer where c_w_id = 2 and c_d_id = 3 and c_id = 7",
    );
    untorn(["tpcc", "--url", &url, "check"])
        .expect_code(1)
        .expect_stdout(
        "FAILED: tpcc row count broken: warehouse 2 district 3: 29 customer rows, the load made 30",
    );
}

/// A COPY whose commit fails is a failed load. rust-postgres's COPY
/// returns at CommandComplete and never reads the Sync after it, where an
/// implicit transaction commits: a load over a buffer pool too small for
/// a COPY's commit (half its 32 frames: 16 leaves) exited 0 having stored
/// no stock at all. The driver's COPY commits in its own block now.
#[test]
fn a_copy_whose_commit_fails_fails_the_load() {
    let serve = Serve::start(&["--buffer-pool", "256kB"]);
    let url = format!("postgres://bench@127.0.0.1:{}/bench", serve.port);
    untorn([
        "tpcc",
        "--url",
        &url,
        "load",
        "--warehouses",
        "1",
        "--tpcc-items",
        "1000",
        "--tpcc-customers",
        "30",
    ])
    .expect_code(2)
    .expect_stderr("SQLSTATE 54000: transaction")
    .expect_stderr("touches more than 16 leaf pages")
    .expect_stderr("statement: COMMIT");
}
