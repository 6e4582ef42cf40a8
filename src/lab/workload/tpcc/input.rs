//! The five transactions' inputs (clauses 2.4.1 to 2.8.1), drawn before a
//! transaction runs so that a deadlock retries it with the same inputs.
//! Shared by the embedded transactions ([`super::txn`]) and the wire
//! driver ([`super::wire`]): both draw the same inputs from the same seed.

use super::random::{last_name, nurand, uniform, C_ID, C_LAST_RUN, C_OL_I_ID};
use super::schema::DISTRICTS;
use super::Tpcc;
use crate::lab::workload::Rng;

/// The transaction types, in the order of [`KINDS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    NewOrder = 0,
    Payment = 1,
    OrderStatus = 2,
    Delivery = 3,
    StockLevel = 4,
}

/// Names of the transaction types as reported (`Workload::kinds`).
pub const KINDS: [&str; 5] = [
    "new_order",
    "payment",
    "order_status",
    "delivery",
    "stock_level",
];

impl Kind {
    /// The standard mix: 45 / 43 / 4 / 4 / 4 %.
    pub fn draw(rng: &mut Rng) -> Kind {
        match rng.below(100) {
            0..45 => Kind::NewOrder,
            45..88 => Kind::Payment,
            88..92 => Kind::OrderStatus,
            92..96 => Kind::Delivery,
            _ => Kind::StockLevel,
        }
    }
}

/// How a customer is chosen: by id, or by last name (the middle row of
/// those with the name, ordered by first name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Who {
    Id(u32),
    LastName(Vec<u8>),
}

/// New-Order's inputs (clause 2.4.1).
#[derive(Clone, Debug)]
pub struct NewOrderInput {
    pub w: u32,
    pub d: u8,
    pub c: u32,
    /// (item, supplying warehouse, quantity); an item id past the last
    /// is the unused one of a transaction to roll back.
    pub lines: Vec<(u32, u32, u8)>,
}

/// Payment's inputs (clause 2.5.1).
#[derive(Clone, Debug)]
pub struct PaymentInput {
    pub w: u32,
    pub d: u8,
    pub c_w: u32,
    pub c_d: u8,
    pub who: Who,
    /// Cents, 1.00 to 5,000.00.
    pub amount: i64,
}

/// Order-Status's inputs (clause 2.6.1).
#[derive(Clone, Debug)]
pub struct OrderStatusInput {
    pub w: u32,
    pub d: u8,
    pub who: Who,
}

/// Delivery's inputs (clause 2.7.1).
#[derive(Clone, Debug)]
pub struct DeliveryInput {
    pub w: u32,
    pub carrier: u8,
}

/// Stock-Level's inputs (clause 2.8.1).
#[derive(Clone, Debug)]
pub struct StockLevelInput {
    pub w: u32,
    pub d: u8,
    pub threshold: i32,
}

/// One transaction to run: its type and inputs.
#[derive(Clone, Debug)]
pub enum Input {
    NewOrder(NewOrderInput),
    Payment(PaymentInput),
    OrderStatus(OrderStatusInput),
    Delivery(DeliveryInput),
    StockLevel(StockLevelInput),
}

impl Input {
    pub fn kind(&self) -> Kind {
        match self {
            Input::NewOrder(_) => Kind::NewOrder,
            Input::Payment(_) => Kind::Payment,
            Input::OrderStatus(_) => Kind::OrderStatus,
            Input::Delivery(_) => Kind::Delivery,
            Input::StockLevel(_) => Kind::StockLevel,
        }
    }
}

impl Tpcc {
    /// The next transaction of the mix: its type, then its inputs.
    pub fn draw(&self, rng: &mut Rng) -> Input {
        match Kind::draw(rng) {
            Kind::NewOrder => Input::NewOrder(self.draw_new_order(rng)),
            Kind::Payment => Input::Payment(self.draw_payment(rng)),
            Kind::OrderStatus => Input::OrderStatus(self.draw_order_status(rng)),
            Kind::Delivery => Input::Delivery(self.draw_delivery(rng)),
            Kind::StockLevel => Input::StockLevel(self.draw_stock_level(rng)),
        }
    }

    fn draw_who(&self, rng: &mut Rng) -> Who {
        if rng.below(100) < 60 {
            let n = nurand(rng, 255, C_LAST_RUN, 0, self.last_names() - 1);
            Who::LastName(last_name(n))
        } else {
            Who::Id(self.draw_customer(rng))
        }
    }

    fn draw_customer(&self, rng: &mut Rng) -> u32 {
        nurand(rng, 1023, C_ID, 1, u64::from(self.customers)) as u32
    }

    fn draw_warehouse(&self, rng: &mut Rng) -> u32 {
        uniform(rng, 1, u64::from(self.warehouses)) as u32
    }

    fn draw_district(rng: &mut Rng) -> u8 {
        uniform(rng, 1, u64::from(DISTRICTS)) as u8
    }

    /// A warehouse other than `w` (`w` itself when there is only one).
    fn other_warehouse(&self, rng: &mut Rng, w: u32) -> u32 {
        if self.warehouses == 1 {
            return w;
        }
        let o = uniform(rng, 1, u64::from(self.warehouses) - 1) as u32;
        if o >= w {
            o + 1
        } else {
            o
        }
    }

    pub fn draw_new_order(&self, rng: &mut Rng) -> NewOrderInput {
        let w = self.draw_warehouse(rng);
        let d = Self::draw_district(rng);
        let c = self.draw_customer(rng);
        let n = uniform(rng, 5, 15) as usize;
        let rollback = rng.below(100) == 0;
        let lines = (0..n)
            .map(|i| {
                let item = if rollback && i == n - 1 {
                    self.items + 1
                } else {
                    nurand(rng, 8191, C_OL_I_ID, 1, u64::from(self.items)) as u32
                };
                let supply = if rng.below(100) == 0 {
                    self.other_warehouse(rng, w)
                } else {
                    w
                };
                (item, supply, uniform(rng, 1, 10) as u8)
            })
            .collect();
        NewOrderInput { w, d, c, lines }
    }

    pub fn draw_payment(&self, rng: &mut Rng) -> PaymentInput {
        let w = self.draw_warehouse(rng);
        let d = Self::draw_district(rng);
        let (c_w, c_d) = if rng.below(100) < 85 || self.warehouses == 1 {
            (w, d)
        } else {
            (self.other_warehouse(rng, w), Self::draw_district(rng))
        };
        let who = self.draw_who(rng);
        let amount = uniform(rng, 100, 500_000) as i64;
        PaymentInput {
            w,
            d,
            c_w,
            c_d,
            who,
            amount,
        }
    }

    pub fn draw_order_status(&self, rng: &mut Rng) -> OrderStatusInput {
        let w = self.draw_warehouse(rng);
        let d = Self::draw_district(rng);
        let who = self.draw_who(rng);
        OrderStatusInput { w, d, who }
    }

    pub fn draw_delivery(&self, rng: &mut Rng) -> DeliveryInput {
        let w = self.draw_warehouse(rng);
        let carrier = uniform(rng, 1, 10) as u8;
        DeliveryInput { w, carrier }
    }

    pub fn draw_stock_level(&self, rng: &mut Rng) -> StockLevelInput {
        let w = self.draw_warehouse(rng);
        let d = Self::draw_district(rng);
        let threshold = uniform(rng, 10, 20) as i32;
        StockLevelInput { w, d, threshold }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tpcc(warehouses: u32) -> Tpcc {
        Tpcc {
            warehouses,
            items: 1000,
            customers: 30,
        }
    }

    #[test]
    fn the_mix_and_the_inputs_are_the_specifications() {
        let t = tpcc(3);
        let mut rng = Rng::new(7, 1);
        let mut kinds = [0u32; 5];
        let (mut rollbacks, mut by_name, mut payments, mut remote) = (0, 0, 0, 0);
        let (mut lines, mut remote_lines) = (0, 0);
        for _ in 0..100_000 {
            let input = t.draw(&mut rng);
            kinds[input.kind() as usize] += 1;
            match input {
                Input::NewOrder(i) => {
                    assert!((5..=15).contains(&i.lines.len()));
                    assert!((1..=3).contains(&i.w) && (1..=10).contains(&i.d));
                    assert!((1..=30).contains(&i.c));
                    for (n, &(item, supply, q)) in i.lines.iter().enumerate() {
                        assert!((1..=10).contains(&q) && (1..=3).contains(&supply));
                        if item > t.items {
                            assert_eq!((item, n), (t.items + 1, i.lines.len() - 1));
                            rollbacks += 1;
                        }
                        lines += 1;
                        remote_lines += u32::from(supply != i.w);
                    }
                }
                Input::Payment(p) => {
                    payments += 1;
                    remote += u32::from(p.c_w != p.w);
                    by_name += u32::from(matches!(p.who, Who::LastName(_)));
                    assert!((100..=500_000).contains(&p.amount));
                }
                Input::Delivery(d) => assert!((1..=10).contains(&d.carrier)),
                Input::StockLevel(s) => assert!((10..=20).contains(&s.threshold)),
                Input::OrderStatus(o) => {
                    if let Who::LastName(n) = o.who {
                        assert!(n.len() >= 9);
                    }
                }
            }
        }
        let pct = |n: u32, of: u32| f64::from(n) * 100.0 / f64::from(of);
        let total: u32 = kinds.iter().sum();
        for (k, want) in kinds.iter().zip([45.0, 43.0, 4.0, 4.0, 4.0]) {
            assert!((pct(*k, total) - want).abs() < 1.0, "{kinds:?}");
        }
        assert!((pct(rollbacks, kinds[0]) - 1.0).abs() < 0.3);
        assert!((pct(remote, payments) - 15.0).abs() < 1.0);
        assert!((pct(by_name, payments) - 60.0).abs() < 1.5);
        assert!((pct(remote_lines, lines) - 1.0).abs() < 0.2);
    }

    #[test]
    fn one_warehouse_draws_nothing_remote_and_a_seed_repeats() {
        let t = tpcc(1);
        let draw = |seed| {
            let mut rng = Rng::new(seed, 0);
            (0..1000)
                .map(|_| format!("{:?}", t.draw(&mut rng)))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
        let mut rng = Rng::new(1, 2);
        for _ in 0..10_000 {
            match t.draw(&mut rng) {
                Input::NewOrder(i) => assert!(i.lines.iter().all(|l| l.1 == 1)),
                Input::Payment(p) => assert_eq!(p.c_w, 1),
                _ => {}
            }
        }
    }
}
