//! TPC-C (the DBT-2 of seeds 000, 001 and 004) on the embedded engine.
//!
//! - [`schema`]: the nine tables and two indexes, their byte keys and the
//!   rows' fixed-width encoding (documented there);
//! - [`random`]: NURand, last names, random text;
//! - [`load`]: the bulk load of `--warehouses` warehouses;
//! - [`input`]: the mix and the five transactions' inputs, drawn first;
//! - [`txn`]: the five transactions;
//! - [`check`]: consistency conditions 1-4;
//! - [`pacing`]: keying and think times, when a run asks for them;
//! - [`wire`]: the same workload driven over the PostgreSQL wire protocol
//!   (`untorn tpcc`), for any server that speaks it.
//!
//! What is the specification and what is not:
//! - the row counts per warehouse are the specification's by default
//!   (100,000 items and stock, 10 districts, 3,000 customers and orders per
//!   district, 900 new orders, 5-15 lines per order); `--tpcc-items` and
//!   `--tpcc-customers` scale them down, which is NOT the specification
//!   (NURand's ranges shrink with them; last names are drawn from the
//!   first `min(1000, customers)`);
//! - the standard mix (45 / 43 / 4 / 4 / 4 %), 1 % of New-Orders rolled
//!   back on an unused item, 60 % of Payment and Order-Status customers
//!   chosen by last name through `customer_by_name` (the middle row),
//!   15 % of Payments to a remote warehouse and 1 % of order lines from
//!   one (with more than one warehouse);
//! - no keying or think time unless the run asks for them (`--think`:
//!   [`pacing`]), and each transaction's warehouse is drawn uniformly (not
//!   a terminal's fixed one), as DBT-2 is run for I/O studies; Delivery
//!   runs inline, not deferred through a queue;
//! - a rolled-back New-Order counts as a completed New-Order (in notpm)
//!   and is reported apart as a rollback.

pub mod check;
pub mod input;
pub mod load;
pub mod pacing;
pub mod random;
pub mod schema;
pub mod txn;
pub mod wire;

use super::{max_u64_key, Outcome, Rng, Scale, Tables, Workload};
use crate::db::Database;
use crate::error::{Error, Result};
use input::Input;
use schema::{Customer, District, Item, Order, OrderLine, Stock, DISTRICTS, TABLES};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// TPC-C at a number of warehouses (and a scale-down, for tests).
#[derive(Clone, Debug)]
pub struct Tpcc {
    pub warehouses: u32,
    /// Items, and stock rows per warehouse (100,000 in the specification).
    pub items: u32,
    /// Customers, and loaded orders, per district (3,000).
    pub customers: u32,
}

impl Tpcc {
    pub fn new(scale: &Scale) -> Result<Tpcc> {
        let bad = |what: &str| Err(Error::Invalid(format!("tpcc: {what}")));
        if scale.warehouses == 0 || scale.warehouses > 100_000 {
            return bad(&format!(
                "--warehouses must be 1 to 100000, not {}",
                scale.warehouses
            ));
        }
        if !(100..=10_000_000).contains(&scale.tpcc_items) {
            return bad(&format!(
                "--tpcc-items must be 100 to 10000000, not {}",
                scale.tpcc_items
            ));
        }
        if !(10..=1_000_000).contains(&scale.tpcc_customers) {
            return bad(&format!(
                "--tpcc-customers must be 10 to 1000000, not {}",
                scale.tpcc_customers
            ));
        }
        Ok(Tpcc {
            warehouses: scale.warehouses as u32,
            items: scale.tpcc_items as u32,
            customers: scale.tpcc_customers as u32,
        })
    }

    /// Loaded orders per district that are still new (900 of 3,000).
    pub fn new_orders(&self) -> u32 {
        self.customers * 3 / 10
    }

    /// Loaded orders per district already delivered (2,100 of 3,000).
    pub fn delivered_orders(&self) -> u32 {
        self.customers - self.new_orders()
    }

    /// How many of the 1,000 last names exist.
    pub fn last_names(&self) -> u64 {
        u64::from(self.customers.min(1000))
    }

    fn districts(&self) -> u64 {
        u64::from(self.warehouses) * u64::from(DISTRICTS)
    }

    /// Customer (and history and loaded order) rows in all.
    pub fn customer_rows(&self) -> u64 {
        self.districts() * u64::from(self.customers)
    }
}

impl Workload for Tpcc {
    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn writes(&self) -> bool {
        true
    }

    fn data_bytes(&self) -> u64 {
        let w = u64::from(self.warehouses);
        let items = u64::from(self.items);
        let c = self.customer_rows();
        items * (4 + Item::LEN as u64)
            + w * items * (8 + Stock::LEN as u64)
            + c * (9 + Customer::LEN as u64 + 41 + 8 + 54)
            + c * (9 + Order::LEN as u64 + 13)
            + c * 10 * (10 + OrderLine::LEN as u64)
            + self.districts() * (5 + District::LEN as u64)
    }

    fn load(&self, db: &Database) -> Result<()> {
        load::load(self, db)
    }

    fn tables(&self, db: &Database) -> Result<Tables> {
        let tables = TABLES
            .iter()
            .map(|n| db.table(n))
            .collect::<Result<Vec<_>>>()?;
        let next = max_u64_key(db, &tables[schema::t::HISTORY])? + 1;
        Ok(Tables {
            tables,
            next_id: AtomicU64::new(next),
        })
    }

    fn kinds(&self) -> &'static [&'static str] {
        &txn::KINDS
    }

    fn retries_same_inputs(&self) -> bool {
        true
    }

    fn pauses(&self, next: &Rng, thinking: &mut Rng) -> Option<(Duration, Duration)> {
        let kind = pacing::next_kind(next);
        Some((
            pacing::keying_time(kind),
            pacing::think_time(thinking, kind),
        ))
    }

    fn transaction(
        &self,
        db: &Database,
        tables: &Tables,
        rng: &mut Rng,
        _client: usize,
    ) -> Result<Outcome> {
        if tables.tables.len() != TABLES.len() {
            return Err(Error::Invalid("tpcc needs its eleven tables".into()));
        }
        let input = self.draw(rng);
        let kind = input.kind();
        let mut tx = db.begin();
        let result = match &input {
            Input::NewOrder(i) => self.new_order(&mut tx, tables, i),
            Input::Payment(i) => self.payment(&mut tx, tables, i).map(|()| true),
            Input::OrderStatus(i) => self
                .order_status(&mut tx, tables, i.w, i.d, &i.who)
                .map(|()| true),
            Input::Delivery(i) => self.delivery(&mut tx, tables, i.w, i.carrier).map(|_| true),
            Input::StockLevel(i) => self
                .stock_level(&mut tx, tables, i.w, i.d, i.threshold)
                .map(|_| true),
        };
        let result = result.and_then(|commit| {
            if commit {
                tx.commit().map(|_| true)
            } else {
                tx.abort();
                Ok(false)
            }
        });
        match result {
            Ok(committed) => Ok(Outcome::Done {
                kind: kind as usize,
                rolled_back: !committed,
            }),
            Err(e) if e.is_retryable() => Ok(Outcome::Retry),
            Err(e) => Err(e),
        }
    }

    fn check(&self, db: &Database) -> Result<()> {
        check::check(db)?.into_result()
    }
}
