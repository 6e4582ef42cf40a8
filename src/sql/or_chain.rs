//! `x = a OR x = b OR ...` over one column, as `x IN (a, b, ...)`: SQL
//! defines the two alike, and the IN is planned (key lookups on a key
//! column, a hash set past a few constants: `in_set`), where the chain
//! compared every row with every term (issue 56, item 10).
//!
//! Rules: only a WHERE clause's chains, at its top or under its ANDs;
//! only chains of at least `in_set::MIN_MEMBERS` terms, each an equality
//! of the same column with a constant or a parameter (either side). Any
//! other chain is left as it was written.

use super::expr::{Cmp, Expr};
use super::in_set::{InSet, MIN_MEMBERS};
use std::sync::Arc;

/// `e` with its qualifying OR chains as IN lists.
pub fn or_chains_as_in(e: Expr) -> Expr {
    match e {
        Expr::And(a, b) => Expr::And(Box::new(or_chains_as_in(*a)), Box::new(or_chains_as_in(*b))),
        Expr::Or(..) => match as_in(&e) {
            Some(list) => list,
            None => e,
        },
        other => other,
    }
}

/// The chain's terms, left to right, found without recursion (a chain of
/// thousands of terms is as deep).
fn terms(e: &Expr) -> Vec<&Expr> {
    let (mut out, mut stack) = (Vec::new(), vec![e]);
    while let Some(x) = stack.pop() {
        match x {
            Expr::Or(a, b) => {
                stack.push(b);
                stack.push(a);
            }
            term => out.push(term),
        }
    }
    out
}

/// The column and the value of `column = value` (either side).
fn equality(term: &Expr) -> Option<(usize, &Expr)> {
    let Expr::Cmp(Cmp::Eq, a, b) = term else {
        return None;
    };
    let value = |e: &Expr| matches!(e, Expr::Const(..) | Expr::Param(_));
    match (&**a, &**b) {
        (Expr::Column(c), v) | (v, Expr::Column(c)) if value(v) => Some((*c, v)),
        _ => None,
    }
}

fn as_in(chain: &Expr) -> Option<Expr> {
    let terms = terms(chain);
    if terms.len() < MIN_MEMBERS {
        return None;
    }
    let (column, _) = equality(terms[0])?;
    let mut members = Vec::with_capacity(terms.len());
    for t in terms {
        match equality(t)? {
            (c, v) if c == column => members.push(v.clone()),
            _ => return None,
        }
    }
    let x = Box::new(Expr::Column(column));
    let literals = members.iter().map(|e| match e {
        Expr::Const(v, _) => Some(v),
        _ => None,
    });
    Some(match InSet::build(literals) {
        Some(set) => Expr::InSet(x, members, Arc::new(set), false),
        None => Expr::InList(x, members, false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::types::{SqlType, Value};

    fn eq(column: usize, v: i64) -> Expr {
        let k = Expr::Const(Value::Int(v), SqlType::Int4);
        Expr::Cmp(Cmp::Eq, Box::new(Expr::Column(column)), Box::new(k))
    }

    fn chain(terms: impl IntoIterator<Item = Expr>) -> Expr {
        let mut it = terms.into_iter();
        let first = it.next().unwrap();
        it.fold(first, |acc, t| Expr::Or(Box::new(acc), Box::new(t)))
    }

    #[test]
    fn a_chain_of_equalities_of_one_column_becomes_a_set_and_no_other_does() {
        let long = chain((0..MIN_MEMBERS as i64).map(|v| eq(1, v)));
        assert!(matches!(or_chains_as_in(long), Expr::InSet(x, m, _, false)
            if matches!(*x, Expr::Column(1)) && m.len() == MIN_MEMBERS));
        // Under an AND, with the constant on the left, a parameter among
        // them (a list, then: a set takes literals only).
        let flipped = |v: i64| {
            let k = Expr::Const(Value::Int(v), SqlType::Int4);
            Expr::Cmp(Cmp::Eq, Box::new(k), Box::new(Expr::Column(1)))
        };
        let mut terms: Vec<Expr> = (0..10).map(flipped).collect();
        terms.push(Expr::Cmp(
            Cmp::Eq,
            Box::new(Expr::Column(1)),
            Box::new(Expr::Param(0)),
        ));
        let both = Expr::And(Box::new(eq(0, 1)), Box::new(chain(terms)));
        let Expr::And(_, b) = or_chains_as_in(both) else {
            panic!()
        };
        assert!(
            matches!(*b, Expr::InList(_, ref m, false) if m.len() == 11),
            "{b:?}"
        );
        // Too short, another column, another operator: left as written.
        let short = chain((0..MIN_MEMBERS as i64 - 1).map(|v| eq(1, v)));
        assert!(matches!(or_chains_as_in(short), Expr::Or(..)));
        let mixed = chain((0..20).map(|v| eq(v as usize % 2, v)));
        assert!(matches!(or_chains_as_in(mixed), Expr::Or(..)));
        let lt = Expr::Cmp(Cmp::Lt, Box::new(Expr::Column(1)), Box::new(Expr::Param(0)));
        let other = chain((0..20).map(|v| eq(1, v)).chain([lt]));
        assert!(matches!(or_chains_as_in(other), Expr::Or(..)));
    }
}
