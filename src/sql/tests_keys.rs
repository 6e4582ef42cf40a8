//! Composite primary keys and indexes, IN lists, FOR UPDATE and a LIMIT
//! that stops a key range early: the statement shapes of the TPC-C wire
//! driver (issue 39), against a model where the answer is not obvious.

use super::tests_concurrent::{ok, rows, run};
use super::*;
use crate::db::Database;
use crate::options::Options;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

fn create(dir: &std::path::Path) -> Arc<SqlEngine> {
    SqlEngine::open(Arc::new(Database::create(dir, Options::default()).unwrap())).unwrap()
}

fn ints(s: &mut Session, sql: &str) -> Vec<i64> {
    rows(s, sql)
        .into_iter()
        .map(|r| match r[0] {
            Value::Int(v) => v,
            ref v => panic!("{sql}: {v:?}"),
        })
        .collect()
}

const ORDERS: &str = "create table orders (o_id int4 not null, o_d_id int4 not null, \
     o_w_id int4 not null, o_c_id int4, o_note varchar(10), \
     primary key (o_w_id, o_d_id, o_id))";

#[test]
fn a_composite_key_reads_points_prefixes_and_ranges_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let engine = create(dir.path());
    let mut s = engine.session();
    ok(&mut s, ORDERS);
    // Inserted out of order: key order is (w, d, o), not insertion order.
    for (w, d, o) in [
        (2, 1, 5),
        (1, 2, 1),
        (1, 1, 3),
        (1, 1, 1),
        (1, 1, 2),
        (1, 10, 1),
    ] {
        ok(
            &mut s,
            &format!("insert into orders values ({o}, {d}, {w}, {}, 'x')", o * 10),
        );
    }
    let q = "select o_c_id from orders where o_w_id = 1 and o_d_id = 1 and o_id = 2";
    assert_eq!(ints(&mut s, q), [20]);
    let q = "select o_id from orders where o_w_id = 1 and o_d_id = 1";
    assert_eq!(ints(&mut s, q), [1, 2, 3]);
    let q = "select o_id from orders where o_d_id = 1 and o_w_id = 1 and o_id >= 2";
    assert_eq!(ints(&mut s, q), [2, 3]);
    let q = "select o_id from orders where o_w_id = 1 and o_d_id = 1 and o_id > 1 and o_id < 3";
    assert_eq!(ints(&mut s, q), [2]);
    let q = "select o_d_id from orders where o_w_id = 1 order by o_d_id desc limit 2";
    assert_eq!(ints(&mut s, q), [10, 2]);
    // The lowest new order of a district, as Delivery asks for it.
    let q = "select o_id from orders where o_w_id = 1 and o_d_id = 1 order by o_id limit 1";
    assert_eq!(ints(&mut s, q), [1]);
    let q = "select o_id from orders where o_w_id = 1 and o_d_id = 1 and o_c_id > 10 \
             order by o_id limit 1";
    assert_eq!(
        ints(&mut s, q),
        [2],
        "the filter drops what the cap counted"
    );
    let q = "select o_id from orders where o_w_id = 1 and o_d_id = 1 order by o_id desc limit 1";
    assert_eq!(ints(&mut s, q), [3]);
    // A value outside int4's range matches nothing rather than failing.
    let q = "select o_id from orders where o_w_id = 1 and o_d_id = 1 and o_id = 99999999999";
    assert!(ints(&mut s, q).is_empty());

    let e = run(&mut s, "insert into orders values (2, 1, 1, 0, 'y')").unwrap_err();
    assert_eq!(e.code, codes::UNIQUE_VIOLATION);
    assert!(
        e.message
            .contains("Key (o_w_id, o_d_id, o_id)=(1, 1, 2) already exists"),
        "{e}"
    );
    let e = run(&mut s, "insert into orders values (null, 1, 1, 0, 'y')").unwrap_err();
    assert_eq!(e.code, codes::NOT_NULL_VIOLATION);

    // Changing a key column moves the row to its new key.
    ok(
        &mut s,
        "update orders set o_d_id = 3 where o_w_id = 1 and o_d_id = 1 and o_id = 3",
    );
    let q = "select o_id from orders where o_w_id = 1 and o_d_id = 3";
    assert_eq!(ints(&mut s, q), [3]);
    ok(
        &mut s,
        "delete from orders where o_w_id = 1 and o_d_id = 1 and o_id = 1",
    );
    let q = "select o_id from orders where o_w_id = 1 and o_d_id = 1";
    assert_eq!(ints(&mut s, q), [2]);
    let q = "select count(*) from orders";
    assert_eq!(ints(&mut s, q), [5]);
}

/// A range bound past the key column's type (an int8 constant on an int4
/// key, a string longer than the varchar) compares as PostgreSQL does, in
/// the wider type: before, any such bound matched nothing.
#[test]
fn a_range_bound_past_the_columns_type_compares_in_the_wider_type() {
    let dir = tempfile::tempdir().unwrap();
    let engine = create(dir.path());
    let mut s = engine.session();
    ok(&mut s, ORDERS);
    ok(
        &mut s,
        "create table names (n varchar(3) primary key, k int4)",
    );
    for o in [-5, 1, 2, 3] {
        ok(
            &mut s,
            &format!("insert into orders values ({o}, 1, 1, {o}, 'x')"),
        );
    }
    for (n, k) in [("a", 1), ("abc", 2), ("abd", 3), ("b", 4)] {
        ok(&mut s, &format!("insert into names values ('{n}', {k})"));
    }
    let key = "select o_id from orders where o_w_id = 1 and o_d_id = 1 and o_id";
    let cases: [(&str, &[i64]); 10] = [
        (">= -3000000000", &[-5, 1, 2, 3]),
        ("> -3000000000 and o_id < 2", &[-5, 1]),
        ("< 3000000000", &[-5, 1, 2, 3]),
        ("between -3000000000 and 3000000000", &[-5, 1, 2, 3]),
        ("between 2 and 3000000000", &[2, 3]),
        ("> 3000000000", &[]),
        ("< -3000000000", &[]),
        ("between 3000000000 and 4000000000", &[]),
        ("> null", &[]),
        ("< 2", &[-5, 1]),
    ];
    for (bound, want) in cases {
        let q = format!("{key} {bound} order by o_id");
        assert_eq!(ints(&mut s, &q), want, "{q}");
    }
    let names = |s: &mut Session, bound: &str| {
        ints(
            s,
            &format!("select k from names where n {bound} order by n"),
        )
    };
    assert_eq!(names(&mut s, "> 'abcd'"), [3, 4]);
    assert_eq!(names(&mut s, ">= 'abcd'"), [3, 4]);
    assert_eq!(names(&mut s, "< 'abcd'"), [1, 2]);
    assert_eq!(names(&mut s, "<= 'abzz'"), [1, 2, 3]);
}

#[test]
fn a_composite_index_finds_rows_by_its_leading_columns_and_follows_updates() {
    let dir = tempfile::tempdir().unwrap();
    {
        let engine = create(dir.path());
        let mut s = engine.session();
        ok(
            &mut s,
            "create table customer (c_id int4, c_d_id int4, c_w_id int4, \
             c_first varchar(16), c_last varchar(16), c_balance int8, \
             primary key (c_w_id, c_d_id, c_id))",
        );
        let people = [
            (1, 1, "ANNE", "BARBAR"),
            (2, 1, "ZOE", "BARBAR"),
            (3, 1, "BOB", "BARBAR"),
            (4, 1, "CAL", "OUGHT"),
            (5, 2, "DAN", "BARBAR"),
        ];
        for (c, d, first, last) in people {
            ok(
                &mut s,
                &format!("insert into customer values ({c}, {d}, 1, '{first}', '{last}', 0)"),
            );
        }
        // Created after the rows: built from them.
        ok(
            &mut s,
            "create index customer_by_name on customer (c_w_id, c_d_id, c_last, c_first)",
        );
    }
    // The catalog keeps the index's columns over a reopen.
    let engine = SqlEngine::open(Arc::new(
        Database::open(dir.path(), Options::default()).unwrap(),
    ))
    .unwrap();
    let mut s = engine.session();
    let by_name = "select c_id from customer where c_w_id = 1 and c_d_id = 1 \
                   and c_last = 'BARBAR' order by c_first";
    assert_eq!(ints(&mut s, by_name), [1, 3, 2]);
    ok(
        &mut s,
        "update customer set c_first = 'AARON' where c_w_id = 1 and c_d_id = 1 and c_id = 2",
    );
    ok(
        &mut s,
        "update customer set c_last = 'BARBAR' where c_w_id = 1 and c_d_id = 1 and c_id = 4",
    );
    ok(
        &mut s,
        "update customer set c_balance = 5 where c_w_id = 1 and c_d_id = 1 and c_id = 1",
    );
    assert_eq!(ints(&mut s, by_name), [2, 1, 3, 4]);
    ok(
        &mut s,
        "delete from customer where c_w_id = 1 and c_d_id = 1 and c_id = 3",
    );
    assert_eq!(ints(&mut s, by_name), [2, 1, 4]);
    let e = run(&mut s, "create index bad on customer (c_last, c_last)").unwrap_err();
    assert_eq!(e.code, "42701");
    let e = run(&mut s, "create index bad on customer (c_last desc)").unwrap_err();
    assert_eq!(e.code, codes::FEATURE_NOT_SUPPORTED);
}

#[test]
fn in_lists_read_each_key_once_and_keep_sql_null_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let engine = create(dir.path());
    let mut s = engine.session();
    ok(
        &mut s,
        "create table stock (s_i_id int4, s_w_id int4, s_quantity int4, \
         primary key (s_w_id, s_i_id))",
    );
    for i in 1..=20 {
        ok(
            &mut s,
            &format!("insert into stock values ({i}, 1, {i}), ({i}, 2, 100)"),
        );
    }
    // Stock-Level's second statement: item 3 named twice counts once.
    let q = "select count(*) from stock where s_w_id = 1 and s_quantity < 10 \
             and s_i_id in (3, 3, 9, 10, 15, 99, null)";
    assert_eq!(ints(&mut s, q), [2]);
    let q = "select s_i_id from stock where s_w_id = 1 and s_i_id not in (1, 2) \
             and s_quantity < 5";
    assert_eq!(ints(&mut s, q), [3, 4]);
    let truth = |s: &mut Session, q: &str| rows(s, q)[0][0].clone();
    assert_eq!(truth(&mut s, "select 1 in (2, 1)"), Value::Bool(true));
    assert_eq!(truth(&mut s, "select 1 in (2, null)"), Value::Null);
    assert_eq!(truth(&mut s, "select 1 in (1, null)"), Value::Bool(true));
    assert_eq!(truth(&mut s, "select 1 not in (2, 3)"), Value::Bool(true));
    assert_eq!(truth(&mut s, "select null in (1)"), Value::Null);
}

#[test]
fn for_update_locks_the_rows_it_returns_until_the_block_ends() {
    let dir = tempfile::tempdir().unwrap();
    let engine = create(dir.path());
    let (mut holder, mut other) = (engine.session(), engine.session());
    ok(
        &mut holder,
        "create table district (d_id int4, d_w_id int4, d_next_o_id int4, \
         primary key (d_w_id, d_id))",
    );
    ok(
        &mut holder,
        "insert into district values (1, 1, 3001), (2, 1, 3001)",
    );
    ok(&mut holder, "begin");
    let q = "select d_next_o_id from district where d_w_id = 1 and d_id = 1 for update";
    assert_eq!(ints(&mut holder, q), [3001]);
    ok(&mut other, "set statement_timeout = 100");
    let e = run(
        &mut other,
        "update district set d_next_o_id = 0 where d_w_id = 1 and d_id = 1",
    )
    .unwrap_err();
    assert_eq!(e.code, codes::QUERY_CANCELED, "the row is locked: {e}");
    // The row beside it is not.
    ok(
        &mut other,
        "update district set d_next_o_id = 7 where d_w_id = 1 and d_id = 2",
    );
    ok(
        &mut holder,
        "update district set d_next_o_id = d_next_o_id + 1 where d_w_id = 1 and d_id = 1",
    );
    ok(&mut holder, "commit");
    let q = "select d_next_o_id from district where d_w_id = 1 order by d_id";
    assert_eq!(ints(&mut other, q), [3002, 7]);
    for refused in [
        "select d_id from district for update nowait",
        "select d_id from district for share",
    ] {
        let e = run(&mut other, refused).unwrap_err();
        assert_eq!(e.code, codes::FEATURE_NOT_SUPPORTED, "{refused}: {e}");
    }
}

/// A query on a two-column key: `a = x` and optionally a range on `b`,
/// in ascending or descending order, with or without a LIMIT.
#[derive(Clone, Debug)]
struct Query {
    a: i64,
    lo: Option<i64>,
    hi: Option<i64>,
    strict: bool,
    desc: bool,
    limit: Option<usize>,
    min_v: Option<i64>,
}

fn query() -> impl Strategy<Value = Query> {
    (
        0..4i64,
        proptest::option::of(-2..30i64),
        proptest::option::of(-2..30i64),
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(0..6usize),
        proptest::option::of(0..100i64),
    )
        .prop_map(|(a, lo, hi, strict, desc, limit, min_v)| Query {
            a,
            lo,
            hi,
            strict,
            desc,
            limit,
            min_v,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Rows keyed (a, b) against a BTreeMap: every query returns what the
    /// model returns, in the same order, after inserts, key-moving
    /// updates and deletes.
    #[test]
    fn composite_key_queries_match_a_model(
        inserts in proptest::collection::vec((0..4i64, 0..25i64, 0..100i64), 1..60),
        moves in proptest::collection::vec((0..4i64, 0..25i64, 0..25i64), 0..10),
        deletes in proptest::collection::vec((0..4i64, 0..25i64), 0..10),
        queries in proptest::collection::vec(query(), 1..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let engine = create(dir.path());
        let mut s = engine.session();
        ok(&mut s, "create table t (b int8, a int4, v int4, primary key (a, b))");
        let mut model = BTreeMap::new();
        for (a, b, v) in inserts {
            let r = run(&mut s, &format!("insert into t values ({b}, {a}, {v})"));
            match model.entry((a, b)) {
                std::collections::btree_map::Entry::Occupied(_) => {
                    prop_assert_eq!(r.unwrap_err().code, codes::UNIQUE_VIOLATION);
                }
                std::collections::btree_map::Entry::Vacant(slot) => {
                    r.unwrap();
                    slot.insert(v);
                }
            }
        }
        for (a, from, to) in moves {
            let r = run(&mut s, &format!("update t set b = {to} where a = {a} and b = {from}"));
            match (model.contains_key(&(a, from)), model.contains_key(&(a, to))) {
                (true, false) => {
                    r.unwrap();
                    let v = model.remove(&(a, from)).unwrap();
                    model.insert((a, to), v);
                }
                (true, true) if from != to => prop_assert!(r.is_err()),
                _ => { r.unwrap(); }
            }
        }
        for (a, b) in deletes {
            ok(&mut s, &format!("delete from t where a = {a} and b = {b}"));
            model.remove(&(a, b));
        }
        for q in queries {
            let (ge, le) = if q.strict { (">", "<") } else { (">=", "<=") };
            let mut sql = format!("select b from t where a = {}", q.a);
            if let Some(lo) = q.lo { sql += &format!(" and b {ge} {lo}"); }
            if let Some(hi) = q.hi { sql += &format!(" and b {le} {hi}"); }
            if let Some(m) = q.min_v { sql += &format!(" and v >= {m}"); }
            sql += if q.desc { " order by b desc" } else { " order by b" };
            if let Some(l) = q.limit { sql += &format!(" limit {l}"); }
            let mut want: Vec<i64> = model
                .range((q.a, i64::MIN)..=(q.a, i64::MAX))
                .filter(|((_, b), v)| {
                    q.lo.is_none_or(|lo| if q.strict { *b > lo } else { *b >= lo })
                        && q.hi.is_none_or(|hi| if q.strict { *b < hi } else { *b <= hi })
                        && q.min_v.is_none_or(|m| **v >= m)
                })
                .map(|((_, b), _)| *b)
                .collect();
            if q.desc { want.reverse(); }
            if let Some(l) = q.limit { want.truncate(l); }
            prop_assert_eq!(ints(&mut s, &sql), want, "{}", sql);
        }
    }
}
