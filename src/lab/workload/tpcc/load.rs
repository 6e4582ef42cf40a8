//! The bulk load (clause 4.3.3): per warehouse 100,000 stock rows, 10
//! districts of 3,000 customers (a history row each) and 3,000 orders
//! (the last 900 new, 5..=15 lines each); 100,000 items shared. A
//! scale-down ([`Tpcc`]'s `items` and `customers`) shrinks the counts in
//! proportion: not the specification, for tests and quick runs.
//!
//! Deterministic: every table draws from its own fixed-seed stream, so
//! every configuration of a comparison loads the same rows. The rows come
//! from the generators here ([`items`], [`warehouses_and_districts`],
//! [`stock`], [`customers`], [`history`], [`orders`]), shared with the wire
//! driver's loader, so both load the same values. Three threads load
//! (items and stock; customers and history; orders), each table in key
//! order.

use super::random::{
    data_with_original, field, last_name, letters, nstring, nurand, padded, uniform, C_LAST_LOAD,
};
use super::schema::*;
use super::Tpcc;
use crate::db::{key_u64, Database};
use crate::error::Result;
use crate::lab::workload::Rng;

const SEED: u64 = 0x7bcc_10ad_0000_0000;

/// The load's fixed entry date (2026-01-01, microseconds).
pub const LOAD_DATE: i64 = 1_767_225_600_000_000;

fn rng(stream: u64) -> Rng {
    Rng::new(SEED, stream)
}

/// Street 1, street 2, city, state and zip as clause 4.3.3.1 draws
/// them, each padded to its column's width (20, 20, 20, 2, 9): a-strings
/// of 10..=20, two letters, four digits and "11111". The embedded rows
/// keep them in one field; the wire load cuts it into the columns, which
/// a single a-string of the field's length left blank from the city on.
fn street_city_state_zip(r: &mut Rng, out: &mut Vec<u8>) {
    for _ in 0..3 {
        out.extend_from_slice(&field::<20>(r, 10, 20));
    }
    out.extend_from_slice(&letters(r, 2));
    out.extend_from_slice(&nstring(r, 4));
    out.extend_from_slice(b"11111");
}

/// A warehouse's or district's name (an a-string of 6..=10, in 10) and
/// address: 81 bytes.
fn named_address(r: &mut Rng) -> [u8; 81] {
    let mut out = field::<10>(r, 6, 10).to_vec();
    street_city_state_zip(r, &mut out);
    out.try_into().expect("10 + 71 bytes")
}

/// A customer's address and phone (an n-string of 16): 87 bytes.
fn customer_address(r: &mut Rng) -> [u8; 87] {
    let mut out = Vec::with_capacity(87);
    street_city_state_zip(r, &mut out);
    out.extend_from_slice(&nstring(r, 16));
    out.try_into().expect("71 + 16 bytes")
}

/// One district's orders: (customer, line count) for o_id 1.., drawn
/// once for the orders, their lines and the index.
fn district_orders(t: &Tpcc, w: u32, d: u8) -> Vec<(u32, u8)> {
    let mut r = rng(0x100_0000 + u64::from(w) * 16 + u64::from(d));
    // A random permutation of the customers (Fisher-Yates).
    let mut c: Vec<u32> = (1..=t.customers).collect();
    for i in (1..c.len()).rev() {
        let j = r.below(i as u64 + 1) as usize;
        c.swap(i, j);
    }
    c.into_iter()
        .map(|c| (c, uniform(&mut r, 5, 15) as u8))
        .collect()
}

/// The items, in id order.
pub fn items(t: &Tpcc) -> impl Iterator<Item = (u32, Item)> {
    let mut r = rng(1);
    (1..=t.items).map(move |i| {
        let item = Item {
            im_id: uniform(&mut r, 1, 10_000) as u32,
            price: uniform(&mut r, 100, 10_000) as i64,
            name: field(&mut r, 14, 24),
            data: data_with_original(&mut r),
        };
        (i, item)
    })
}

/// The warehouses, by id.
pub type WarehouseRows = Vec<(u32, Warehouse)>;
/// The districts, by (warehouse, district).
pub type DistrictRows = Vec<(u32, u8, District)>;

/// The warehouses and their districts.
pub fn warehouses_and_districts(t: &Tpcc) -> (WarehouseRows, DistrictRows) {
    let mut r = rng(2);
    let warehouses = (1..=t.warehouses)
        .map(|w| {
            let row = Warehouse {
                ytd: 30_000_000,
                tax: uniform(&mut r, 0, 2000) as i32,
                rest: named_address(&mut r),
            };
            (w, row)
        })
        .collect();
    let next_o_id = t.customers + 1;
    let districts = (1..=t.warehouses)
        .flat_map(|w| (1..=DISTRICTS).map(move |d| (w, d)))
        .map(|(w, d)| {
            let row = District {
                ytd: 3_000_000,
                tax: uniform(&mut r, 0, 2000) as i32,
                next_o_id,
                rest: named_address(&mut r),
            };
            (w, d, row)
        })
        .collect();
    (warehouses, districts)
}

/// The stock rows (warehouse, item, row), warehouse by warehouse.
pub fn stock(t: &Tpcc) -> impl Iterator<Item = (u32, u32, Stock)> {
    let mut r = rng(3);
    let items = t.items;
    (1..=t.warehouses)
        .flat_map(move |w| (1..=items).map(move |i| (w, i)))
        .map(move |(w, i)| {
            let row = Stock {
                quantity: uniform(&mut r, 10, 100) as i32,
                ytd: 0,
                order_cnt: 0,
                remote_cnt: 0,
                dist: field(&mut r, 240, 240),
                data: data_with_original(&mut r),
            };
            (w, i, row)
        })
}

/// Customer `c`'s last name at load: 1..=1000 in turn, then NURand(255).
fn load_last_name(last_names: u64, r: &mut Rng, c: u32) -> Vec<u8> {
    if c <= 1000 {
        last_name(u64::from(c - 1))
    } else {
        last_name(nurand(r, 255, C_LAST_LOAD, 0, last_names - 1))
    }
}

/// The customers (warehouse, district, id, row), in key order.
pub fn customers(t: &Tpcc) -> impl Iterator<Item = (u32, u8, u32, Customer)> {
    let mut r = rng(4);
    let (customers, last_names) = (t.customers, t.last_names());
    let districts = (1..=t.warehouses).flat_map(|w| (1..=DISTRICTS).map(move |d| (w, d)));
    let rows = districts.flat_map(move |(w, d)| (1..=customers).map(move |c| (w, d, c)));
    rows.map(move |(w, d, c)| {
        let last = load_last_name(last_names, &mut r, c);
        let first: [u8; 16] = field(&mut r, 8, 16);
        let row = Customer {
            balance: -1000,
            ytd_payment: 1000,
            payment_cnt: 1,
            delivery_cnt: 0,
            discount: uniform(&mut r, 0, 5000) as i32,
            credit_lim: 5_000_000,
            credit: if r.below(10) == 0 { *b"BC" } else { *b"GC" },
            first,
            middle: *b"OE",
            last: padded(&last),
            since: LOAD_DATE,
            rest: customer_address(&mut r),
            data: field(&mut r, 300, 500),
        };
        (w, d, c, row)
    })
}

/// The history rows (sequence number from 1, row), one per customer.
pub fn history(t: &Tpcc) -> impl Iterator<Item = (u64, History)> {
    let mut r = rng(5);
    let customers = t.customers;
    let districts = (1..=t.warehouses).flat_map(|w| (1..=DISTRICTS).map(move |d| (w, d)));
    districts
        .flat_map(move |(w, d)| (1..=customers).map(move |c| (w, d, c)))
        .zip(1..)
        .map(move |((w, d, c), seq)| {
            let row = History {
                c_id: c,
                c_d: d,
                c_w: w,
                d,
                w,
                date: LOAD_DATE,
                amount: 1000,
                data: field(&mut r, 12, 24),
            };
            (seq, row)
        })
}

/// One district's loaded orders, their lines and new orders.
pub struct DistrictOrders {
    pub w: u32,
    pub d: u8,
    /// (o_id, row) from 1.
    pub orders: Vec<(u32, Order)>,
    /// (o_id, number from 1, row), in key order.
    pub lines: Vec<(u32, u8, OrderLine)>,
    /// The o_ids still new: the last 30 %.
    pub new_orders: std::ops::RangeInclusive<u32>,
}

/// Every district's orders, warehouse by warehouse.
pub fn orders(t: &Tpcc) -> impl Iterator<Item = DistrictOrders> + '_ {
    let delivered = t.delivered_orders();
    let mut r = rng(6);
    let districts = (1..=t.warehouses).flat_map(|w| (1..=DISTRICTS).map(move |d| (w, d)));
    districts.map(move |(w, d)| {
        let drawn = district_orders(t, w, d);
        let numbered = || drawn.iter().enumerate().map(|(i, &x)| (i as u32 + 1, x));
        let orders = numbered()
            .map(|(o, (c, ol_cnt))| {
                let row = Order {
                    c_id: c,
                    entry_d: LOAD_DATE,
                    carrier_id: if o <= delivered {
                        uniform(&mut r, 1, 10) as u8
                    } else {
                        0
                    },
                    ol_cnt,
                    all_local: 1,
                };
                (o, row)
            })
            .collect();
        let lines = numbered()
            .flat_map(|(o, (_, n))| (1..=n).map(move |l| (o, l)))
            .map(|(o, l)| {
                let done = o <= delivered;
                let row = OrderLine {
                    i_id: uniform(&mut r, 1, u64::from(t.items)) as u32,
                    supply_w: w,
                    delivery_d: if done { LOAD_DATE } else { 0 },
                    quantity: 5,
                    amount: if done {
                        0
                    } else {
                        uniform(&mut r, 1, 999_999) as i64
                    },
                    dist_info: field(&mut r, 24, 24),
                };
                (o, l, row)
            })
            .collect();
        DistrictOrders {
            w,
            d,
            orders,
            lines,
            new_orders: delivered + 1..=t.customers,
        }
    })
}

pub fn load(t: &Tpcc, db: &Database) -> Result<()> {
    for name in TABLES {
        db.create_table(name)?;
    }
    std::thread::scope(|s| {
        let a = s.spawn(|| load_stock(t, db));
        let b = s.spawn(|| load_customers(t, db));
        let c = s.spawn(|| load_orders(t, db));
        [a, b, c]
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })
}

fn load_stock(t: &Tpcc, db: &Database) -> Result<()> {
    db.bulk_load(
        &db.table(ITEM)?,
        items(t).map(|(i, row)| (k_item(i), row.encode())),
    )?;
    let (warehouses, districts) = warehouses_and_districts(t);
    db.bulk_load(
        &db.table(WAREHOUSE)?,
        warehouses.iter().map(|(w, row)| (k_w(*w), row.encode())),
    )?;
    db.bulk_load(
        &db.table(DISTRICT)?,
        districts
            .iter()
            .map(|(w, d, row)| (k_wd(*w, *d), row.encode())),
    )?;
    db.bulk_load(
        &db.table(STOCK)?,
        stock(t).map(|(w, i, row)| (k_stock(w, i), row.encode())),
    )?;
    Ok(())
}

fn load_customers(t: &Tpcc, db: &Database) -> Result<()> {
    let mut names = Vec::with_capacity(t.customer_rows() as usize);
    db.bulk_load(
        &db.table(CUSTOMER)?,
        customers(t).map(|(w, d, c, row)| {
            names.push(k_customer_name(w, d, &row.last, &row.first, c));
            (k_wdi(w, d, c), row.encode())
        }),
    )?;
    names.sort_unstable();
    db.bulk_load(&db.table(CUSTOMER_BY_NAME)?, names.iter().map(|k| (k, [])))?;
    db.bulk_load(
        &db.table(HISTORY)?,
        history(t).map(|(seq, row)| (key_u64(seq), row.encode())),
    )?;
    Ok(())
}

fn load_orders(t: &Tpcc, db: &Database) -> Result<()> {
    let (orders_t, lines_t) = (db.table(ORDERS)?, db.table(ORDER_LINE)?);
    let (new_order, index) = (db.table(NEW_ORDER)?, db.table(ORDERS_BY_CUSTOMER)?);
    for o in orders(t) {
        let (w, d) = (o.w, o.d);
        db.bulk_load(
            &orders_t,
            o.orders
                .iter()
                .map(|(id, row)| (k_wdi(w, d, *id), row.encode())),
        )?;
        db.bulk_load(
            &lines_t,
            o.lines
                .iter()
                .map(|(id, l, row)| (k_order_line(w, d, *id, *l), row.encode())),
        )?;
        db.bulk_load(
            &new_order,
            o.new_orders.clone().map(|id| (k_wdi(w, d, id), [])),
        )?;
        let mut keys: Vec<[u8; 13]> = o
            .orders
            .iter()
            .map(|(id, row)| k_customer_order(w, d, row.c_id, *id))
            .collect();
        keys.sort_unstable();
        db.bulk_load(&index, keys.iter().map(|k| (k, [])))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is(bytes: &[u8], class: fn(&u8) -> bool) -> bool {
        !bytes.is_empty() && bytes.iter().all(class)
    }

    /// Each address column holds what clause 4.3.3.1 draws: the wire load
    /// cuts `rest` into them, and state and zip came out blank.
    #[test]
    fn every_address_column_is_drawn_as_the_specification_says() {
        let t = Tpcc {
            warehouses: 2,
            items: 100,
            customers: 10,
        };
        let street = |s: &[u8]| {
            let text = s.trim_ascii_end();
            (10..=20).contains(&text.len()) && is(text, u8::is_ascii_alphanumeric)
        };
        let state_zip = |s: &[u8]| {
            is(&s[..2], u8::is_ascii_uppercase)
                && is(&s[2..6], u8::is_ascii_digit)
                && &s[6..] == b"11111"
        };
        // Streets and city (60 bytes), then state and zip (11).
        let address = |a: &[u8]| a[..60].chunks(20).all(street) && state_zip(&a[60..71]);
        let (warehouses, districts) = warehouses_and_districts(&t);
        let named = warehouses
            .iter()
            .map(|w| w.1.rest)
            .chain(districts.iter().map(|d| d.2.rest));
        for rest in named {
            let name = rest[..10].trim_ascii_end();
            let text = String::from_utf8_lossy(&rest);
            assert!((6..=10).contains(&name.len()), "{text:?}");
            assert!(address(&rest[10..81]), "{text:?}");
        }
        for (_, _, _, c) in customers(&t) {
            let rest = c.rest;
            assert!(address(&rest[..71]), "{:?}", String::from_utf8_lossy(&rest));
            assert!(is(&rest[71..87], u8::is_ascii_digit), "phone");
        }
    }
}
