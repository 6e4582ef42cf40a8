//! Limits on one statement (`limits`): an expression nested deeper than
//! `max_expression_depth` is 54001 and the session goes on; one at the
//! limit runs; typing is linear. Each test runs its session on a thread
//! with exactly the stack `Limits::stack_bytes` gives, as `untorn serve`
//! runs a connection, so a recursion that outgrows it fails here.

use super::*;
use crate::db::Database;
use crate::options::Options;
use std::sync::Arc;

fn on_session_stack(limits: Limits, f: impl FnOnce(&mut Session) + Send + 'static) {
    let dir = tempfile::tempdir().unwrap();
    std::thread::Builder::new()
        .stack_size(limits.stack_bytes())
        .spawn(move || {
            let db = Database::create(dir.path(), Options::default()).unwrap();
            let engine = SqlEngine::open_with_limits(Arc::new(db), limits).unwrap();
            f(&mut engine.session());
        })
        .unwrap()
        .join()
        .unwrap();
}

/// `n` copies of `term` (its `#` replaced by 1, 2, ...) joined by `op`.
fn chain(term: &str, op: &str, n: usize) -> String {
    (1..=n)
        .map(|i| term.replace('#', &i.to_string()))
        .collect::<Vec<_>>()
        .join(op)
}

fn one(s: &mut Session, sql: &str) -> Result<Outcome, SqlError> {
    let mut r = s.simple_query(sql);
    assert_eq!(r.len(), 1);
    r.pop().unwrap()
}

fn value(s: &mut Session, sql: &str) -> Value {
    match one(s, sql) {
        Ok(Outcome::Rows { rows, .. }) => rows[0][0].clone(),
        other => panic!("{other:?}"),
    }
}

fn tag(s: &mut Session, sql: &str) -> String {
    match one(s, sql) {
        Ok(Outcome::Command { tag }) => tag,
        other => panic!("{sql}: {other:?}"),
    }
}

fn code(s: &mut Session, sql: &str) -> &'static str {
    one(s, sql).unwrap_err().code
}

#[test]
fn an_expression_at_the_depth_limit_runs_and_one_level_deeper_is_54001() {
    let limits = Limits {
        max_expression_depth: 5,
        ..Limits::default()
    };
    on_session_stack(limits, |s| {
        // `1+1+1+1+1` is four additions over a literal: five levels.
        assert_eq!(
            value(s, &format!("select {}", chain("1", "+", 5))),
            Value::Int(5)
        );
        assert_eq!(code(s, &format!("select {}", chain("1", "+", 6))), "54001");
        assert_eq!(code(s, "select ((((((1))))))"), "54001");
        assert_eq!(value(s, "select 1"), Value::Int(1));
    });
}

#[test]
fn the_default_limit_runs_its_deepest_expressions_on_its_stack() {
    let limits = Limits::default();
    let depth = limits.max_expression_depth;
    on_session_stack(limits, move |s| {
        let sum = format!("select {}", chain("1", "+", depth));
        assert_eq!(value(s, &sum), Value::Int(depth as i64));
        let nested = format!(
            "select {}1{}",
            "(".repeat(depth - 10),
            ")".repeat(depth - 10)
        );
        assert_eq!(value(s, &nested), Value::Int(1));
        one(s, "create table t (aid int primary key, v int)").unwrap();
        one(
            s,
            "insert into t values (1, 1), (2, 1), (5000, 1), (6000, 1)",
        )
        .unwrap();
        // The 69 KB filter: 5,000 terms, evaluated on every row.
        let or = chain("aid = #", " or ", 5000);
        let count = format!("select count(*) from t where {or}");
        assert_eq!(value(s, &count), Value::Int(3));
        let and = chain("v > 0", " and ", depth / 2 - 1);
        let update = format!(
            "update t set v = {} where {and}",
            chain("v", "+", depth - 2)
        );
        assert!(matches!(one(s, &update), Ok(Outcome::Command { tag }) if tag == "UPDATE 4"));
        assert_eq!(
            value(s, "select sum(v) from t"),
            Value::Int(4 * (depth as i64 - 2))
        );
    });
}

#[test]
fn text_far_deeper_than_the_limit_is_refused_and_the_session_goes_on() {
    on_session_stack(Limits::default(), |s| {
        // 200,000 terms: the parser builds them without recursion, the
        // conversion refuses them, the tree is dropped on this stack.
        assert_eq!(
            code(s, &format!("select {}", chain("1", "+", 200_000))),
            "54001"
        );
        let parens = format!("select {}1{}", "(".repeat(50_000), ")".repeat(50_000));
        assert_eq!(code(s, &parens), "54001");
        let minuses = format!("select {}1", "- ".repeat(50_000));
        assert_eq!(code(s, &minuses), "54001");
        assert_eq!(value(s, "select 2"), Value::Int(2));
    });
}

/// Typing visited each operand twice, so planning doubled with each term
/// (30 terms took 16 s, 40 hours); typing is now linear and this plans at once.
#[test]
fn typing_a_long_sum_with_a_parameter_is_linear() {
    on_session_stack(Limits::default(), |s| {
        let sql = format!("select $1 + {}", chain("1", "+", 80));
        let p = s.prepare(&sql, &[]).unwrap();
        assert_eq!(p.params(), &[SqlType::Int4]);
        let out = s.execute(&p, &[Value::Text("1".into())]).unwrap();
        assert!(matches!(out, Outcome::Rows { rows, .. } if rows[0][0] == Value::Int(81)));
    });
}

#[test]
fn text_and_statements_over_their_limits_are_54000_before_parsing() {
    let limits = Limits {
        max_statements_per_query: 3,
        ..Limits::default()
    };
    let longest = limits.max_query_length;
    on_session_stack(limits, move |s| {
        let three = s.simple_query("select 1; select 2;;  ; select 3;");
        assert_eq!(three.len(), 3);
        assert!(three.iter().all(|r| r.is_ok()), "{three:?}");
        let four = s.simple_query("select 1; select 2; select 3; select 4");
        assert_eq!(four.len(), 1);
        assert_eq!(four[0].as_ref().unwrap_err().code, "54000");
        // The longest text is parsed (its tree dropped on this stack) and
        // refused for its depth; one byte more is refused unparsed.
        let deepest = format!("select {}1", "1+".repeat((longest - 8) / 2));
        assert!(deepest.len() <= longest);
        assert_eq!(code(s, &deepest), "54001");
        let e = one(s, &format!("{deepest} ")).unwrap_err();
        assert_eq!(e.code, "54000");
        // A syntax error in the third statement runs none of them.
        let r = s.simple_query("create table u (id int); select 1; selec 2");
        assert_eq!(r[0].as_ref().unwrap_err().code, "42601");
        assert_eq!(code(s, "select * from u"), "42P01");
        assert_eq!(value(s, "select 7"), Value::Int(7));
    });
}

const ENDLESS_LOAD: &str = "insert into big select x from generate_series(1, 2000000000) as x";

#[test]
fn a_statement_past_its_timeout_is_57014_and_undone() {
    let limits = Limits {
        statement_timeout: Some(std::time::Duration::from_millis(200)),
        ..Limits::default()
    };
    on_session_stack(limits, |s| {
        one(s, "create table big (id int primary key)").unwrap();
        let e = one(s, ENDLESS_LOAD).unwrap_err();
        assert_eq!(e.code, "57014");
        assert!(e.message.contains("statement timeout"), "{e}");
        assert_eq!(value(s, "select count(*) from big"), Value::Int(0));
    });
}

#[test]
fn set_statement_timeout_changes_the_session_s_limit() {
    on_session_stack(Limits::default(), |s| {
        one(s, "create table big (id int primary key)").unwrap();
        assert!(
            matches!(one(s, "set statement_timeout = 200"), Ok(Outcome::Command { tag }) if tag == "SET")
        );
        let e = one(s, ENDLESS_LOAD).unwrap_err();
        assert_eq!(
            (e.code, e.message.contains("statement timeout")),
            ("57014", true)
        );
        one(s, "set statement_timeout to '0'").unwrap();
        one(s, "set session statement_timeout = '2min'").unwrap();
        assert_eq!(value(s, "select 3"), Value::Int(3));
        assert_eq!(code(s, "set statement_timeout = '5 parsecs'"), "22023");
        assert_eq!(code(s, "set search_path = app"), "0A000");
        assert!(
            one(s, "set work_mem = 64").is_ok(),
            "64 kB, as PostgreSQL reads it"
        );
    });
}

#[test]
fn a_cancel_from_another_thread_stops_the_running_statement() {
    on_session_stack(Limits::default(), |s| {
        one(s, "create table big (id int primary key)").unwrap();
        let interrupt = s.interrupt();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = done.clone();
        // A cancel between statements is dropped, so it is sent until
        // the statement has ended.
        let canceler = std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                interrupt.cancel();
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        let e = one(s, ENDLESS_LOAD).unwrap_err();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        canceler.join().unwrap();
        assert_eq!(e.code, "57014");
        assert!(e.message.contains("user request"), "{e}");
        assert_eq!(value(s, "select count(*) from big"), Value::Int(0));
    });
}

#[test]
fn an_error_quotes_at_most_a_kilobyte_of_the_statement() {
    on_session_stack(Limits::default(), |s| {
        let huge = format!(
            "select 1 from t natural join t as u where '{}' = ''",
            "x".repeat(100_000)
        );
        let e = one(s, &huge).unwrap_err();
        assert_eq!(e.code, "0A000");
        assert!(e.message.len() < 1100, "{} bytes", e.message.len());
        assert!(e.message.ends_with("bytes more)"), "{}", &e.message[..100]);
    });
}

/// SET stayed in force after its block rolled back; PostgreSQL restores
/// the setting at abort, and SET LOCAL's ends with its block.
#[test]
fn set_in_a_block_that_rolls_back_is_undone_and_set_local_ends_with_it() {
    on_session_stack(Limits::default(), |s| {
        one(s, "create table big (id int primary key)").unwrap();
        one(s, "set statement_timeout = 200").unwrap();
        let timed_out = |s: &mut Session| {
            let e = one(s, ENDLESS_LOAD).unwrap_err();
            (e.code, e.message.contains("statement timeout"))
        };
        for undo in ["rollback", "select 1/0"] {
            one(s, "begin").unwrap();
            one(s, "set statement_timeout = 0").unwrap();
            let _ = one(s, undo);
            if s.status() != TxStatus::Idle {
                one(s, "rollback").unwrap();
            }
            assert_eq!(timed_out(s), ("57014", true), "after {undo}");
        }
        // An implicit transaction (a Query of several) that fails too.
        let r = s.simple_query("set statement_timeout = 0; select 1/0");
        assert_eq!(r[1].as_ref().unwrap_err().code, "22012");
        assert_eq!(timed_out(s), ("57014", true));
        // SET LOCAL lasts until its block commits; outside one it does nothing.
        one(s, "begin").unwrap();
        one(s, "set local statement_timeout = 0").unwrap();
        one(s, "commit").unwrap();
        one(s, "set local statement_timeout = 0").unwrap();
        assert_eq!(timed_out(s), ("57014", true));
        // A SET that commits stays.
        one(s, "set statement_timeout = 0").unwrap();
        one(s, "begin").unwrap();
        one(s, "set local statement_timeout = 100").unwrap();
        // The load is the block's, however large: it spills to disk.
        one(s, "truncate big").unwrap();
        assert_eq!(timed_out(s), ("57014", true));
        one(s, "rollback").unwrap();
        one(s, "begin").unwrap();
        one(s, "set statement_timeout = 150").unwrap();
        one(s, "commit").unwrap();
        assert_eq!(timed_out(s), ("57014", true));
    });
}

/// A statement's rows were held in memory without a limit; past
/// max_result_rows a result the library returns whole is 54000 and the
/// session goes on. An aggregate folds its rows as they are read, and
/// UPDATE and DELETE change rows as they read them (before, they held
/// every row first and were 54000 past it too), so none is limited.
#[test]
fn a_scan_past_max_result_rows_is_54000() {
    let limits = Limits {
        max_result_rows: 5,
        ..Limits::default()
    };
    on_session_stack(limits, |s| {
        one(s, "create table t (id int primary key, v int)").unwrap();
        one(
            s,
            "insert into t select x, 1 from generate_series(1, 10) as x",
        )
        .unwrap();
        // A lookup by key holds one row.
        assert_eq!(value(s, "select v from t where id = 9"), Value::Int(1));
        assert_eq!(value(s, "select sum(v) from t"), Value::Int(10));
        let e = one(s, "select * from t").unwrap_err();
        assert_eq!(e.code, "54000");
        assert!(e.message.contains("max_result_rows (5)"), "{e}");
        assert_eq!(tag(s, "update t set v = 2"), "UPDATE 10");
        // A primary-key change reads its keys first, within work_mem.
        assert_eq!(tag(s, "update t set id = id + 100"), "UPDATE 10");
        assert_eq!(tag(s, "delete from t where id > 105"), "DELETE 5");
        assert_eq!(value(s, "select count(*) from t"), Value::Int(5));
        assert_eq!(value(s, "select sum(v) from t"), Value::Int(10));
    });
}

/// IN lists (issue 39): a member nested past the depth limit is 54001,
/// a list naming more keys than max_result_rows reads them a batch at a
/// time (its keys are no more than its text), and a long list of keys
/// runs on the session's stack.
#[test]
fn in_lists_keep_the_depth_and_row_limits() {
    let limits = Limits {
        max_expression_depth: 5,
        max_result_rows: 5,
        ..Limits::default()
    };
    on_session_stack(limits, |s| {
        one(s, "create table t (id int primary key, v int)").unwrap();
        one(s, "insert into t values (1, 1), (2, 2)").unwrap();
        let deep = format!("select v from t where id in (1, {})", chain("1", "+", 6));
        assert_eq!(code(s, &deep), "54001");
        match one(s, "select v from t where id in (1, 2, 3, 4, 5, 6)") {
            Ok(Outcome::Rows { rows, .. }) => assert_eq!(rows.len(), 2),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            value(s, "select count(*) from t where id in (1, 2, 3, 4, 5)"),
            Value::Int(2)
        );
    });
    on_session_stack(Limits::default(), |s| {
        one(s, "create table t (id int primary key, v int)").unwrap();
        one(s, "insert into t values (7, 1)").unwrap();
        let list = chain("#", ", ", 100_000);
        let sql = format!("select count(*) from t where id in ({list})");
        assert_eq!(value(s, &sql), Value::Int(1));
    });
}

/// A long IN list over a column that is not the key (issue 56, item 10)
/// is a set: the same answers as comparing one member at a time, NULLs
/// and NOT IN included (each row read compared all 100,000 members
/// before).
#[test]
fn a_long_in_list_of_constants_answers_as_a_short_one() {
    on_session_stack(Limits::default(), |s| {
        one(s, "create table t (id int primary key, v int, w text)").unwrap();
        one(
            s,
            "insert into t select x, x % 50, 'w' from generate_series(1, 2000) as x",
        )
        .unwrap();
        let evens = (1..=100_000)
            .map(|n| (2 * n).to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("select count(*) from t where v in ({evens})");
        // v is 0..49: the evens 2..48 of it, 24 values, 40 rows each.
        assert_eq!(value(s, &sql), Value::Int(24 * 40));
        let sql = format!("select count(*) from t where v not in ({evens})");
        assert_eq!(value(s, &sql), Value::Int(26 * 40));
        // A NULL member: no match is NULL, so NOT IN keeps no row.
        let sql = format!("select count(*) from t where v not in ({evens}, null)");
        assert_eq!(value(s, &sql), Value::Int(0));
        let sql = format!("select count(*) from t where v in ({evens}, null)");
        assert_eq!(value(s, &sql), Value::Int(24 * 40));
        // Strings, trailing spaces ignored as comparisons do.
        let words = chain("'x#'", ", ", 20);
        let sql = format!("select count(*) from t where w in ({words}, 'w  ')");
        assert_eq!(value(s, &sql), Value::Int(2000));
        // On the key it is still a list of point reads.
        let sql = format!("select count(*) from t where id in ({evens})");
        assert_eq!(value(s, &sql), Value::Int(1000));
    });
}

/// `v = 2 OR v = 4 OR ...` is `v IN (2, 4, ...)`: the same answers,
/// NULLs included, on a plain column and on the key; chains that mix
/// columns are answered term by term as before. (A chain of 5,000 terms
/// compared every row with every term.)
#[test]
fn an_or_chain_of_equalities_answers_as_its_in_list() {
    on_session_stack(Limits::default(), |s| {
        one(s, "create table t (id int primary key, v int)").unwrap();
        one(
            s,
            "insert into t select x, x % 50 from generate_series(1, 2000) as x",
        )
        .unwrap();
        let evens = |col: &str, n: usize| {
            (1..=n)
                .map(|k| format!("{col} = {}", 2 * k))
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let sql = format!("select count(*) from t where {}", evens("v", 5000));
        assert_eq!(value(s, &sql), Value::Int(24 * 40));
        let sql = format!(
            "select count(*) from t where ({}) and id > 1000",
            evens("v", 5000)
        );
        assert_eq!(value(s, &sql), Value::Int(24 * 20));
        let sql = format!(
            "select count(*) from t where {} or v = null",
            evens("v", 20)
        );
        assert_eq!(value(s, &sql), Value::Int(20 * 40));
        let sql = format!("select count(*) from t where {}", evens("id", 5000));
        assert_eq!(value(s, &sql), Value::Int(1000));
        let sql = format!("select count(*) from t where {} or id = 1", evens("v", 20));
        assert_eq!(value(s, &sql), Value::Int(20 * 40 + 1));
    });
}

/// Names longer than 63 bytes are cut to 63 at a character boundary, as
/// PostgreSQL cuts them: the long and the cut name name the same table
/// and column. A 100-character table name was XX000 before.
#[test]
fn names_past_63_bytes_are_cut_as_postgresql_cuts_them() {
    on_session_stack(Limits::default(), |s| {
        let long = "t".repeat(100);
        let col = format!("{}é", "c".repeat(62));
        one(
            s,
            &format!("create table {long} (id int primary key, \"{col}x\" int)"),
        )
        .unwrap();
        one(s, &format!("insert into {long} values (1, 7)")).unwrap();
        let cut = &long[..63];
        let col_cut = "c".repeat(62);
        let sql = format!("select \"{col_cut}\" from {cut}");
        assert_eq!(value(s, &sql), Value::Int(7));
        let sql = format!("select count(*) from {}", "t".repeat(70));
        assert_eq!(value(s, &sql), Value::Int(1));
    });
}

/// A table of many wide columns: its definition takes several catalog
/// rows, survives a reopening and later DDL, and goes whole with DROP;
/// past PostgreSQL's 1,600 columns CREATE TABLE is 54011. One catalog
/// row held about 35 such columns (a definition over 1,264 bytes was
/// refused as "a row too large").
#[test]
fn a_table_of_hundreds_of_columns_fits_the_catalog_and_1601_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let cols = |n: usize| chain("column_number_# varchar(100)", ", ", n);
    {
        let db = Database::create(dir.path(), Options::default()).unwrap();
        let e = SqlEngine::open(Arc::new(db)).unwrap();
        let mut s = e.session();
        one(
            &mut s,
            &format!("create table wide (id int primary key, {})", cols(300)),
        )
        .unwrap();
        one(&mut s, "create table wide0 (id int)").unwrap();
        one(
            &mut s,
            "insert into wide (id, column_number_300) values (1, 'last')",
        )
        .unwrap();
        one(&mut s, "create index on wide (column_number_299)").unwrap();
        let e1601 = one(&mut s, &format!("create table w2 ({})", cols(1601))).unwrap_err();
        assert_eq!(e1601.code, codes::TOO_MANY_COLUMNS, "{e1601}");
        one(&mut s, &format!("create table w3 ({})", cols(1600))).unwrap();
        one(&mut s, "drop table w3").unwrap();
    }
    let db = Arc::new(Database::open(dir.path(), Options::default()).unwrap());
    let cat = db.table(catalog::CATALOG_TABLE).unwrap();
    let keys: Vec<Vec<u8>> = db
        .begin()
        .scan(&cat, &[0], None, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert!(keys.iter().filter(|k| k.starts_with(b"wide\0")).count() > 5);
    assert!(!keys.iter().any(|k| k.starts_with(b"w3")), "dropped whole");
    let e = SqlEngine::open(db).unwrap();
    let mut s = e.session();
    assert_eq!(
        value(&mut s, "select column_number_300 from wide where id = 1"),
        Value::Text("last".into())
    );
    assert_eq!(
        value(
            &mut s,
            "select count(*) from wide where column_number_299 is null"
        ),
        Value::Int(1)
    );
    one(&mut s, "insert into wide0 values (7)").unwrap();
}

/// Issue 56, item 10: a SELECT list of 500,000 entries was accepted (its
/// result took about 490 MB); past PostgreSQL's 1,664 it is 54011, a `*`
/// counting its columns, and 1,664 still run.
#[test]
fn a_select_list_past_1664_entries_is_54011() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(dir.path(), Options::default()).unwrap();
    let e = SqlEngine::open(Arc::new(db)).unwrap();
    let mut s = e.session();
    let list = |n: usize| chain("#", ", ", n);
    let r = one(&mut s, &format!("select {}", list(1664))).unwrap();
    assert!(matches!(r, Outcome::Rows { columns, .. } if columns.len() == 1664));
    let e1665 = one(&mut s, &format!("select {}", list(1665))).unwrap_err();
    assert_eq!(e1665.code, codes::TOO_MANY_COLUMNS, "{e1665}");
    assert!(e1665.message.contains("at most 1664 entries"), "{e1665}");
    let cols = chain("c# int", ", ", 1000);
    one(&mut s, &format!("create table w ({cols})")).unwrap();
    let e = one(&mut s, &format!("select *, {} from w", list(700))).unwrap_err();
    assert_eq!(e.code, codes::TOO_MANY_COLUMNS, "{e}");
    one(&mut s, "select *, 1 from w").unwrap();
}

/// `LIMIT -1` returned no row; as in PostgreSQL it is 2201W, and LIMIT
/// NULL is no limit.
#[test]
fn a_negative_limit_is_2201w() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(dir.path(), Options::default()).unwrap();
    let e = SqlEngine::open(Arc::new(db)).unwrap();
    let mut s = e.session();
    one(&mut s, "create table l (id int primary key)").unwrap();
    one(&mut s, "insert into l values (1), (2)").unwrap();
    let err = one(&mut s, "select id from l limit -1").unwrap_err();
    assert_eq!(err.code, codes::INVALID_ROW_COUNT_IN_LIMIT_CLAUSE, "{err}");
    assert_eq!(err.message, "LIMIT must not be negative");
    let r = one(&mut s, "select id from l limit null").unwrap();
    assert!(matches!(r, Outcome::Rows { rows, .. } if rows.len() == 2));
}

/// Arithmetic on int4 operands is int4, as PostgreSQL's int4 operators:
/// a result past its range is 22003 (it was computed in int8 and
/// returned, so `2147483647 + 1` answered 2147483648). An int8 operand
/// (a column, a literal past int4) makes it int8.
#[test]
fn int4_arithmetic_past_its_range_is_22003() {
    on_session_stack(Limits::default(), |s| {
        one(s, "create table n (id int primary key, v int, b bigint)").unwrap();
        one(s, "insert into n values (1, 2147483647, 2147483647)").unwrap();
        for sql in [
            "select 2147483647 + 1",
            "select -2147483647 - 2",
            "select 65536 * 65536",
            "select v + 1 from n",
            "select count(*) from n where v + 1 > 0",
            "update n set b = v + 1",
        ] {
            assert_eq!(code(s, sql), "22003", "{sql}");
        }
        assert_eq!(value(s, "select 2147483648 + 1"), Value::Int(2147483649));
        assert_eq!(value(s, "select b + 1 from n"), Value::Int(2147483648));
        assert_eq!(value(s, "select v + b from n"), Value::Int(4294967294));
        assert_eq!(value(s, "select v - 1 + 1 from n"), Value::Int(2147483647));
        assert_eq!(value(s, "select b from n"), Value::Int(2147483647));
    });
}

/// SET work_mem and the idle timeouts in a block are undone by its
/// rollback and kept by its commit, as statement_timeout was (they were
/// kept either way before).
#[test]
fn a_rollback_undoes_the_blocks_sets_and_a_commit_keeps_them() {
    on_session_stack(Limits::default(), |s| {
        one(s, "set work_mem = '1MB'").unwrap();
        let idle = |s: &Session| s.idle_timeout().map(|(d, ..)| d);
        assert_eq!(idle(s), None);
        for (end, kept) in [("rollback", false), ("commit", true)] {
            one(s, "begin").unwrap();
            one(s, "set work_mem = '64kB'").unwrap();
            one(s, "set idle_session_timeout = 5000").unwrap();
            one(s, "set statement_timeout = 7000").unwrap();
            assert_eq!(s.work_mem, 64 << 10);
            one(s, end).unwrap();
            let five = Some(std::time::Duration::from_millis(5000));
            assert_eq!(s.work_mem, if kept { 64 << 10 } else { 1 << 20 }, "{end}");
            assert_eq!(idle(s), if kept { five } else { None }, "{end}");
            let seven = Some(std::time::Duration::from_millis(7000));
            assert_eq!(s.timeout(), if kept { seven } else { None }, "{end}");
        }
    });
}

/// SMALLINT holds int2's range: past it is 22003 "smallint out of range"
/// (it was stored as int4 and took 40000).
#[test]
fn a_smallint_column_refuses_values_past_int2() {
    on_session_stack(Limits::default(), |s| {
        one(s, "create table sm (id int primary key, v smallint)").unwrap();
        one(s, "insert into sm values (1, 32767), (2, -32768)").unwrap();
        for sql in [
            "insert into sm values (3, 32768)",
            "insert into sm values (3, -32769)",
            "update sm set v = v + 1 where id = 1",
        ] {
            let e = one(s, sql).unwrap_err();
            assert_eq!(e.code, "22003", "{sql}");
            assert!(e.message.contains("smallint"), "{e}");
        }
        assert_eq!(value(s, "select sum(v) from sm"), Value::Int(-1));
        assert_eq!(
            value(s, "select count(*) from sm where v = 40000"),
            Value::Int(0)
        );
    });
}
