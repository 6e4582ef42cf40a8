//! The SQL text being parsed at once, server-wide: a budget of tokens
//! that every session shares, so that many connections sending their
//! longest, densest text at once take bounded memory. A token and its
//! part of the syntax tree take up to about 420 bytes (1 MB of
//! `select 1,1,...`: 105 MB of tokens, 420 MB with its tree).
//!
//! Rules:
//! - Text of at most `FREE_BYTES` takes nothing from the budget: every
//!   statement pgbench and sysbench send but sysbench's bulk INSERTs.
//! - Longer text takes one unit per byte before it is tokenized (it has
//!   no more tokens than bytes), keeps one per token once tokenized, and
//!   gives them back when its syntax trees are dropped (`Permit`).
//! - Text needing more than the whole budget waits for all of it, so any
//!   text the length limit lets through is parsed in the end.
//! - A wait checks the statement's interrupt: a cancel, statement_timeout
//!   or a shutdown ends it with their error.

use super::interrupt::Watch;
use super::types::SqlError;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Duration;

/// Text up to this long is parsed without taking from the budget.
pub const FREE_BYTES: usize = 1024;

/// How often a waiting statement looks at its interrupt.
const WAIT_POLL: Duration = Duration::from_millis(10);

#[derive(Debug)]
pub struct ParseBudget {
    total: usize,
    used: Mutex<usize>,
    freed: Condvar,
}

/// Units taken from the budget, given back when dropped.
#[derive(Debug)]
pub struct Permit {
    budget: Arc<ParseBudget>,
    units: usize,
}

impl ParseBudget {
    pub fn new(total: usize) -> Arc<ParseBudget> {
        Arc::new(ParseBudget {
            total: total.max(1),
            used: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// Units for `bytes` of text about to be tokenized (none for short
    /// text), once they are free.
    pub fn take(self: &Arc<Self>, bytes: usize, watch: &Watch) -> Result<Permit, SqlError> {
        let units = if bytes <= FREE_BYTES {
            0
        } else {
            bytes.min(self.total)
        };
        let mut used = self.used.lock();
        while *used + units > self.total {
            watch.check()?;
            self.freed.wait_for(&mut used, WAIT_POLL);
        }
        *used += units;
        Ok(Permit {
            budget: self.clone(),
            units,
        })
    }

    /// Units taken now, by every permit.
    #[cfg(test)]
    pub fn used(&self) -> usize {
        *self.used.lock()
    }
}

impl Permit {
    /// Keeps only `tokens` units (the text's tokens, now counted).
    pub fn keep(&mut self, tokens: usize) {
        let keep = tokens.min(self.units);
        self.release(self.units - keep);
    }

    fn release(&mut self, n: usize) {
        if n > 0 {
            *self.budget.used.lock() -= n;
            self.units -= n;
            self.budget.freed.notify_all();
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.release(self.units);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::interrupt::{Interrupt, UNWATCHED};

    #[test]
    fn long_text_waits_for_units_and_short_text_never_does() {
        let b = ParseBudget::new(10_000);
        let mut big = b.take(8_000, &UNWATCHED).unwrap();
        assert_eq!(b.used(), 8_000);
        // Short text passes whatever is taken.
        let _short = b.take(FREE_BYTES, &UNWATCHED).unwrap();
        // More than the whole budget waits for all of it: a cancel ends
        // the wait with 57014.
        let i = Interrupt::default();
        let w = i.watch(None);
        i.cancel();
        assert_eq!(b.take(50_000, &w).unwrap_err().code, "57014");
        big.keep(1_500);
        assert_eq!(b.used(), 1_500);
        let w = i.watch(Some(Duration::from_millis(30)));
        assert_eq!(b.take(9_000, &w).unwrap_err().code, "57014");
        drop(big);
        assert_eq!(b.used(), 0);
        let all = b.take(50_000, &UNWATCHED).unwrap();
        assert_eq!(b.used(), 10_000);
        drop(all);
        assert_eq!(b.used(), 0);
    }
}
