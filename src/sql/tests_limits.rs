//! Limits on one statement (`limits`): an expression nested deeper than
//! `max_expression_depth` is 54001 and the session goes on; one at the
//! limit runs; typing is linear. Each test runs its session on a thread
//! with exactly the stack `Limits::stack_bytes` gives, as `untorn serve`
//! runs a connection, so a recursion that outgrows it fails here.

use super::*;
use crate::{Database, Options};
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
