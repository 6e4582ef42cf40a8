//! TPC-C on the embedded engine: the load's row counts, each
//! transaction's effects against a model on one thread, consistency
//! conditions 1-4 after a concurrent run, and `untorn bench` / `untorn
//! check` end to end. Scaled down (`tpcc_items`, `tpcc_customers`) to
//! stay fast.

mod common;

use common::{bench_into, untorn_on};
use std::time::Duration;
use untorn::lab::runner::{run_once, RunSpec};
use untorn::lab::workload::tpcc::schema::*;
use untorn::lab::workload::tpcc::txn::{find_customer, NewOrderInput, PaymentInput, Who};
use untorn::lab::workload::tpcc::{check, random, Tpcc};
use untorn::lab::workload::{Scale, Tables, Workload};
use untorn::{key_u64, Database, Options};

fn tiny(warehouses: u64) -> Tpcc {
    Tpcc::new(&Scale {
        warehouses,
        tpcc_items: 200,
        tpcc_customers: 30,
        ..Scale::default()
    })
    .unwrap()
}

/// Four clients, no warm-up, `ms` measured.
fn four_clients(ms: u64, think: bool) -> RunSpec {
    RunSpec {
        clients: 4,
        warmup: Duration::ZERO,
        duration: Duration::from_millis(ms),
        think,
    }
}

fn loaded(dir: &std::path::Path, w: &Tpcc) -> (Database, Tables) {
    let db = Database::create(dir, Options::default()).unwrap();
    w.load(&db).unwrap();
    let tables = w.tables(&db).unwrap();
    (db, tables)
}

fn count(db: &Database, name: &str) -> usize {
    let t = db.table(name).unwrap();
    db.begin().scan(&t, &[], None, usize::MAX).unwrap().len()
}

fn get(db: &Database, tables: &Tables, table: usize, key: &[u8]) -> Option<Vec<u8>> {
    db.begin().get(&tables.tables[table], key).unwrap()
}

fn assert_consistent(db: &Database) {
    let report = check::check(db).unwrap();
    assert!(report.ok(), "{report:?}");
}

#[test]
fn load_has_the_row_counts_and_conditions_hold() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny(2);
    let (db, _) = loaded(dir.path(), &w);
    for (table, n) in [
        (WAREHOUSE, 2),
        (DISTRICT, 20),
        (ITEM, 200),
        (STOCK, 400),
        (CUSTOMER, 600),
        (CUSTOMER_BY_NAME, 600),
        (HISTORY, 600),
        (ORDERS, 600),
        (ORDERS_BY_CUSTOMER, 600),
        (NEW_ORDER, 2 * 10 * 9),
    ] {
        assert_eq!(count(&db, table), n, "{table}");
    }
    let lines = count(&db, ORDER_LINE);
    assert!((600 * 5..=600 * 15).contains(&lines), "{lines} order lines");
    let report = check::check(&db).unwrap();
    assert!(report.ok(), "{report:?}");
    assert!(report
        .checked
        .iter()
        .any(|l| l.contains("2 warehouses, 20 districts")));
}

#[test]
fn spec_counts_are_the_default() {
    let w = Tpcc::new(&Scale::default()).unwrap();
    assert_eq!((w.warehouses, w.items, w.customers), (1, 100_000, 3_000));
    assert_eq!((w.new_orders(), w.delivered_orders()), (900, 2100));
    assert!(Tpcc::new(&Scale {
        warehouses: 0,
        ..Scale::default()
    })
    .is_err());
}

#[test]
fn new_order_follows_the_model_and_rolls_back_an_unused_item() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny(1);
    let (db, tables) = loaded(dir.path(), &w);
    let stock = |i| Stock::decode(&get(&db, &tables, t::STOCK, &k_stock(1, i)).unwrap()).unwrap();
    let next = || {
        District::decode(&get(&db, &tables, t::DISTRICT, &k_wd(1, 3)).unwrap())
            .unwrap()
            .next_o_id
    };
    assert_eq!(next(), 31);
    let before = [stock(1), stock(2)];
    let input = NewOrderInput {
        w: 1,
        d: 3,
        c: 5,
        lines: vec![(1, 1, 3), (2, 1, 10)],
    };
    let mut tx = db.begin();
    assert!(w.new_order(&mut tx, &tables, &input).unwrap());
    tx.commit().unwrap();
    assert_eq!(next(), 32);
    let order = Order::decode(&get(&db, &tables, t::ORDERS, &k_wdi(1, 3, 31)).unwrap()).unwrap();
    assert_eq!(
        (order.c_id, order.ol_cnt, order.carrier_id, order.all_local),
        (5, 2, 0, 1)
    );
    assert!(get(&db, &tables, t::NEW_ORDER, &k_wdi(1, 3, 31)).is_some());
    assert!(get(
        &db,
        &tables,
        t::ORDERS_BY_CUSTOMER,
        &k_customer_order(1, 3, 5, 31)
    )
    .is_some());
    for (n, (i, q)) in [(1u32, 3i32), (2, 10)].into_iter().enumerate() {
        let line = OrderLine::decode(
            &get(
                &db,
                &tables,
                t::ORDER_LINE,
                &k_order_line(1, 3, 31, n as u8 + 1),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            (line.i_id, i32::from(line.quantity), line.delivery_d),
            (i, q, 0)
        );
        let item = Item::decode(&get(&db, &tables, t::ITEM, &k_item(i)).unwrap()).unwrap();
        assert_eq!(line.amount, i64::from(q) * item.price);
        let (old, new) = (&before[n], stock(i));
        // The specification's rule: down by the quantity while 10 stay, else up by 91.
        let want = if old.quantity >= q + 10 {
            old.quantity - q
        } else {
            old.quantity - q + 91
        };
        assert_eq!(new.quantity, want);
        assert_eq!(
            (new.ytd, new.order_cnt),
            (old.ytd + i64::from(q), old.order_cnt + 1)
        );
        assert_eq!(&line.dist_info[..], &old.dist[48..72]);
    }
    assert_consistent(&db);

    // An unused item last: nothing of it stays.
    let input = NewOrderInput {
        w: 1,
        d: 3,
        c: 5,
        lines: vec![(7, 1, 1), (w.items + 1, 1, 1)],
    };
    let seven = stock(7);
    let mut tx = db.begin();
    assert!(!w.new_order(&mut tx, &tables, &input).unwrap());
    tx.abort();
    assert_eq!(next(), 32);
    assert_eq!(stock(7), seven);
    assert!(get(&db, &tables, t::ORDERS, &k_wdi(1, 3, 32)).is_none());
    assert_consistent(&db);
}

#[test]
fn payment_moves_the_amount_and_finds_the_middle_customer_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny(1);
    let (db, tables) = loaded(dir.path(), &w);
    let wh = || Warehouse::decode(&get(&db, &tables, t::WAREHOUSE, &k_w(1)).unwrap()).unwrap();
    let dist = || District::decode(&get(&db, &tables, t::DISTRICT, &k_wd(1, 2)).unwrap()).unwrap();
    let cust =
        |c| Customer::decode(&get(&db, &tables, t::CUSTOMER, &k_wdi(1, 2, c)).unwrap()).unwrap();
    let (w0, d0, c0, h0) = (wh(), dist(), cust(4), count(&db, HISTORY));
    let input = PaymentInput {
        w: 1,
        d: 2,
        c_w: 1,
        c_d: 2,
        who: Who::Id(4),
        amount: 12_345,
    };
    let mut tx = db.begin();
    w.payment(&mut tx, &tables, &input).unwrap();
    tx.commit().unwrap();
    assert_eq!(wh().ytd, w0.ytd + 12_345);
    assert_eq!(dist().ytd, d0.ytd + 12_345);
    let c1 = cust(4);
    assert_eq!(c1.balance, c0.balance - 12_345);
    assert_eq!(c1.ytd_payment, c0.ytd_payment + 12_345);
    assert_eq!(c1.payment_cnt, c0.payment_cnt + 1);
    if &c1.credit == b"BC" {
        assert!(c1.data.starts_with(b"4 2 1 2 1 123.45 | "));
    } else {
        assert_eq!(c1.data, c0.data);
    }
    assert_eq!(count(&db, HISTORY), h0 + 1);
    let h =
        History::decode(&get(&db, &tables, t::HISTORY, &key_u64(h0 as u64 + 1)).unwrap()).unwrap();
    assert_eq!((h.c_id, h.amount, h.w, h.d), (4, 12_345, 1, 2));
    assert_consistent(&db);

    // By last name: the middle (rounded up) of those with it, by first name.
    let last = c1.last;
    let mut same: Vec<(Vec<u8>, u32)> = (1..=30)
        .map(|c| (c, cust(c)))
        .filter(|(_, r)| r.last == last)
        .map(|(c, r)| (name_key(&r.first).to_vec(), c))
        .collect();
    same.sort();
    let who = Who::LastName(trim(&last).to_vec());
    let found = find_customer(&db.begin(), &tables, 1, 2, &who).unwrap();
    assert_eq!(found, Some(same[same.len().div_ceil(2) - 1].1));
    let nobody = Who::LastName(b"NOSUCHNAME".to_vec());
    assert_eq!(
        find_customer(&db.begin(), &tables, 1, 2, &nobody).unwrap(),
        None
    );
    assert_eq!(random::last_name(3), b"BARBARPRI");
}

#[test]
fn delivery_takes_the_oldest_new_order_of_every_district() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny(1);
    let (db, tables) = loaded(dir.path(), &w);
    // Loaded: orders 22..=30 are new in every district.
    let order =
        |d| Order::decode(&get(&db, &tables, t::ORDERS, &k_wdi(1, d, 22)).unwrap()).unwrap();
    let c = order(4).c_id;
    let cust =
        || Customer::decode(&get(&db, &tables, t::CUSTOMER, &k_wdi(1, 4, c)).unwrap()).unwrap();
    let c0 = cust();
    let lines = |d| {
        db.begin()
            .scan(
                &tables.tables[t::ORDER_LINE],
                &k_wdi(1, d, 22),
                Some(&k_wdi(1, d, 23)),
                100,
            )
            .unwrap()
            .into_iter()
            .map(|(_, v)| OrderLine::decode(&v).unwrap())
            .collect::<Vec<_>>()
    };
    let sum: i64 = lines(4).iter().map(|l| l.amount).sum();
    let mut tx = db.begin();
    assert_eq!(w.delivery(&mut tx, &tables, 1, 7).unwrap(), 10);
    tx.commit().unwrap();
    assert_eq!(count(&db, NEW_ORDER), 10 * 8);
    for d in 1..=10 {
        assert!(get(&db, &tables, t::NEW_ORDER, &k_wdi(1, d, 22)).is_none());
        assert!(get(&db, &tables, t::NEW_ORDER, &k_wdi(1, d, 23)).is_some());
        assert_eq!(order(d).carrier_id, 7);
        assert!(lines(d).iter().all(|l| l.delivery_d > 0));
    }
    let c1 = cust();
    assert_eq!(c1.balance, c0.balance + sum);
    assert_eq!(c1.delivery_cnt, c0.delivery_cnt + 1);
    assert_consistent(&db);
    // Order-Status and Stock-Level read without failing.
    let mut tx = db.begin();
    w.order_status(&mut tx, &tables, 1, 4, &Who::Id(c)).unwrap();
    let low = w.stock_level(&mut tx, &tables, 1, 4, 20).unwrap();
    assert!(low <= 200);
}

#[test]
fn four_clients_end_with_the_conditions_holding() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny(2);
    let (db, _) = loaded(dir.path(), &w);
    let spec = four_clients(1500, false);
    let run = run_once(&db, &w, &spec, 0, 42).unwrap();
    assert!(run.transactions > 0);
    let names: Vec<&str> = run.by_kind.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "new_order",
            "payment",
            "order_status",
            "delivery",
            "stock_level"
        ]
    );
    let total: u64 = run.by_kind.iter().map(|k| k.transactions).sum();
    assert_eq!(total, run.transactions);
    assert!(run.by_kind[0].transactions > 0 && run.per_minute("new_order").unwrap() > 0.0);
    assert!(run.kinds_line().unwrap().contains("notpm"));
    assert_consistent(&db);
    w.check(&db).unwrap();
}

/// With keying and think times every transaction waits its keying time
/// first: 2 s at least, a New-Order's 18 s. In 2.5 s each client commits
/// at most one, never a New-Order (upper bounds only: a slow machine
/// commits fewer, never more). Without the pauses it commits hundreds.
#[test]
fn keying_times_come_before_every_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let w = tiny(1);
    let (db, _) = loaded(dir.path(), &w);
    let spec = four_clients(2500, true);
    let run = run_once(&db, &w, &spec, 0, 42).unwrap();
    assert!(run.think);
    assert!(run.transactions <= 4, "{} transactions", run.transactions);
    assert_eq!(run.by_kind[0].name, "new_order");
    assert_eq!(run.by_kind[0].transactions, 0);
    w.check(&db).unwrap();
}

#[test]
fn bench_and_check_run_tpcc_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let dbs = dir.path().join("dbs");
    let (out, v) = bench_into(
        dir.path(),
        &[
            "--workload",
            "tpcc",
            "--protection",
            "full_pages",
            "--duration",
            "1",
            "--warmup",
            "0",
            "--repeat",
            "1",
            "--clients",
            "2",
            "--warehouses",
            "1",
            "--tpcc-items",
            "500",
            "--tpcc-customers",
            "60",
            "--keep",
        ],
    );
    out.expect_code(0)
        .expect_stdout("notpm")
        .expect_stdout("new_order");
    let run = &v[0]["runs"][0];
    assert_eq!(run["by_kind"][0]["name"], "new_order", "{run}");
    assert!(run["by_kind"][0]["latency_ms"]["p90"].as_f64().is_some());

    let db_dir = dbs.join("tpcc-full_pages-crc32c-page8KB-wal8KB");
    untorn_on("check", &db_dir, &[])
        .expect_code(0)
        .expect_stdout("tpcc: consistency conditions 1-4 on 1 warehouses, 10 districts")
        .expect_stdout("check: ok");
    // One D_YTD changed alone: condition 1 fails, loudly.
    let db = Database::open(&db_dir, Options::default()).unwrap();
    let t = db.table(DISTRICT).unwrap();
    let mut tx = db.begin();
    let mut row = District::decode(&tx.get(&t, &k_wd(1, 5)).unwrap().unwrap()).unwrap();
    row.ytd += 1;
    tx.update(&t, &k_wd(1, 5), &row.encode()).unwrap();
    tx.commit().unwrap();
    db.close().unwrap();
    untorn_on("check", &db_dir, &["--workload", "tpcc"])
        .expect_code(1)
        .expect_stdout("FAILED: tpcc consistency condition 1 broken: warehouse 1")
        .expect_stdout("check: FAILED");
}
