//! `x IN (c1, c2, ...)` over many constants, kept as a set: compared one
//! member at a time, a 1 MB statement's list of 100,000 members cost
//! every row read 100,000 comparisons (issue 56, item 10).
//!
//! Rules:
//! - A list becomes a set only when it has at least `MIN_MEMBERS`
//!   members, all literal constants of one kind (integers, or strings),
//!   NULLs aside; parameters and expressions stay a list.
//! - The set answers only for a value of its own kind, where comparing
//!   one by one could not fail: any other value (a string against
//!   integers, a boolean) is compared one member at a time, in order, as
//!   before, with the same answer and the same error.
//! - The answer is SQL's: true on a match, else NULL when the value or
//!   any member is NULL, else false.

use super::types::Value;
use std::collections::HashSet;

/// Lists shorter than this are compared one by one.
pub const MIN_MEMBERS: usize = 8;

#[derive(Debug)]
enum Keys {
    Ints(HashSet<i64>),
    /// Trailing spaces dropped, as comparing strings ignores them.
    Texts(HashSet<String>),
}

#[derive(Debug)]
pub struct InSet {
    keys: Keys,
    has_null: bool,
}

impl InSet {
    /// The set of a list's members, if the rules make one: `None` for a
    /// member that is not a literal.
    pub fn build<'a>(members: impl ExactSizeIterator<Item = Option<&'a Value>>) -> Option<InSet> {
        if members.len() < MIN_MEMBERS {
            return None;
        }
        let (mut ints, mut texts, mut has_null) = (HashSet::new(), HashSet::new(), false);
        for m in members {
            match m? {
                Value::Null => has_null = true,
                Value::Int(x) => {
                    ints.insert(*x);
                }
                Value::Text(s) => {
                    texts.insert(s.trim_end_matches(' ').to_string());
                }
                _ => return None,
            }
        }
        let keys = match (ints.is_empty(), texts.is_empty()) {
            (false, true) => Keys::Ints(ints),
            (true, false) => Keys::Texts(texts),
            _ => return None,
        };
        Some(InSet { keys, has_null })
    }

    /// The answer for `x` (`Some(None)`: NULL), or `None` where `x` must
    /// be compared one member at a time.
    pub fn lookup(&self, x: &Value) -> Option<Option<bool>> {
        let found = match (x, &self.keys) {
            (Value::Null, _) => return Some(None),
            (Value::Int(v), Keys::Ints(s)) => s.contains(v),
            (Value::Text(v), Keys::Texts(s)) => s.contains(v.trim_end_matches(' ')),
            _ => return None,
        };
        Some(match (found, self.has_null) {
            (true, _) => Some(true),
            (false, true) => None,
            (false, false) => Some(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: Value) -> Option<Value> {
        Some(v)
    }

    fn set(members: &[Option<Value>]) -> Option<InSet> {
        InSet::build(members.iter().map(Option::as_ref))
    }

    #[test]
    fn a_set_answers_as_comparing_one_by_one_for_its_kind_only() {
        let ints: Vec<Option<Value>> = (0..10).map(|i| c(Value::Int(i * 3))).collect();
        assert!(set(&ints[..7]).is_none(), "short lists stay lists");
        let s = set(&ints).unwrap();
        assert_eq!(s.lookup(&Value::Int(27)), Some(Some(true)));
        assert_eq!(s.lookup(&Value::Int(28)), Some(Some(false)));
        assert_eq!(s.lookup(&Value::Null), Some(None));
        assert_eq!(s.lookup(&Value::Text("27".into())), None);
        let mut with_null = ints.clone();
        with_null.push(c(Value::Null));
        let s = set(&with_null).unwrap();
        assert_eq!(s.lookup(&Value::Int(28)), Some(None));
        assert_eq!(s.lookup(&Value::Int(3)), Some(Some(true)));
        let texts: Vec<Option<Value>> = (0..9).map(|i| c(Value::Text(format!("t{i}  ")))).collect();
        let s = set(&texts).unwrap();
        assert_eq!(s.lookup(&Value::Text("t4".into())), Some(Some(true)));
        assert_eq!(s.lookup(&Value::Int(4)), None);
        let mut mixed = texts.clone();
        mixed.push(c(Value::Int(1)));
        assert!(set(&mixed).is_none());
        let mut param = ints.clone();
        param.push(None);
        assert!(set(&param).is_none());
    }
}
