//! The five transactions (clause 2.4 to 2.8), their inputs drawn first so
//! that a deadlock retries the same transaction. Rows read to be changed
//! are read with `get_for_update`; lock order within a transaction is
//! warehouse, district, customer (Payment), then stock in the order's
//! item order (New-Order; two New-Orders may deadlock there, and are
//! retried and counted).

pub use super::input::{Kind, NewOrderInput, PaymentInput, Who, KINDS};
use super::random::now_us;
use super::schema::*;
use super::Tpcc;
use crate::db::{key_u64, Table};
use crate::error::{Error, Result};
use crate::lab::workload::Tables;
use crate::txn::Transaction;
use std::sync::atomic::Ordering::Relaxed;

fn missing(table: &Table, key: &[u8]) -> Error {
    Error::Invalid(format!(
        "tpcc: row {key:02x?} of table {:?} is missing",
        table.name
    ))
}

fn get(tx: &Transaction<'_>, table: &Table, key: &[u8]) -> Result<Vec<u8>> {
    tx.get(table, key)?.ok_or_else(|| missing(table, key))
}

fn get_for_update(tx: &mut Transaction<'_>, table: &Table, key: &[u8]) -> Result<Vec<u8>> {
    tx.get_for_update(table, key)?
        .ok_or_else(|| missing(table, key))
}

/// Every row whose key starts with `prefix`, in key order.
fn rows_with_prefix(
    tx: &Transaction<'_>,
    table: &Table,
    prefix: &[u8],
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    tx.scan(table, prefix, Some(&prefix_end(prefix)), usize::MAX)
}

/// The customer `who` names in district (w, d): (id, row key), or None
/// when no customer has that last name (possible only scaled down).
pub fn find_customer(
    tx: &Transaction<'_>,
    tables: &Tables,
    w: u32,
    d: u8,
    who: &Who,
) -> Result<Option<u32>> {
    match who {
        Who::Id(c) => Ok(Some(*c)),
        Who::LastName(last) => {
            let index = &tables.tables[t::CUSTOMER_BY_NAME];
            let rows = rows_with_prefix(tx, index, &k_name_prefix(w, d, last))?;
            if rows.is_empty() {
                return Ok(None);
            }
            // The row at position ceil(n / 2) (1-based) by first name.
            let (key, _) = &rows[rows.len().div_ceil(2) - 1];
            Ok(name_key_customer(key))
        }
    }
}

impl Tpcc {
    /// Runs New-Order; false when it rolled back (an unused item).
    pub fn new_order(
        &self,
        tx: &mut Transaction<'_>,
        tables: &Tables,
        i: &NewOrderInput,
    ) -> Result<bool> {
        let tb = &tables.tables;
        let (w, d) = (i.w, i.d);
        let wh = Warehouse::decode(&get(tx, &tb[t::WAREHOUSE], &k_w(w))?)?;
        let dkey = k_wd(w, d);
        let mut dist = District::decode(&get_for_update(tx, &tb[t::DISTRICT], &dkey)?)?;
        let o = dist.next_o_id;
        dist.next_o_id += 1;
        tx.update(&tb[t::DISTRICT], &dkey, &dist.encode())?;
        let cust = Customer::decode(&get(tx, &tb[t::CUSTOMER], &k_wdi(w, d, i.c))?)?;
        let all_local = i.lines.iter().all(|&(_, s, _)| s == w);
        let order = Order {
            c_id: i.c,
            entry_d: now_us(),
            carrier_id: 0,
            ol_cnt: i.lines.len() as u8,
            all_local: u8::from(all_local),
        };
        tx.insert(&tb[t::ORDERS], &k_wdi(w, d, o), &order.encode())?;
        tx.insert(&tb[t::NEW_ORDER], &k_wdi(w, d, o), &[])?;
        tx.insert(
            &tb[t::ORDERS_BY_CUSTOMER],
            &k_customer_order(w, d, i.c, o),
            &[],
        )?;
        let mut total = 0i64;
        for (n, &(item, supply, quantity)) in i.lines.iter().enumerate() {
            let Some(row) = tx.get(&tb[t::ITEM], &k_item(item))? else {
                // The unused item: the whole transaction rolls back.
                return Ok(false);
            };
            let item_row = Item::decode(&row)?;
            let skey = k_stock(supply, item);
            let mut stock = Stock::decode(&get_for_update(tx, &tb[t::STOCK], &skey)?)?;
            let q = i32::from(quantity);
            stock.quantity = if stock.quantity >= q + 10 {
                stock.quantity - q
            } else {
                stock.quantity - q + 91
            };
            stock.ytd += i64::from(quantity);
            stock.order_cnt += 1;
            if supply != w {
                stock.remote_cnt += 1;
            }
            tx.update(&tb[t::STOCK], &skey, &stock.encode())?;
            let amount = i64::from(quantity) * item_row.price;
            total += amount;
            let at = (usize::from(d) - 1) * 24;
            let line = OrderLine {
                i_id: item,
                supply_w: supply,
                delivery_d: 0,
                quantity,
                amount,
                dist_info: stock.dist[at..at + 24].try_into().expect("24 bytes"),
            };
            tx.insert(
                &tb[t::ORDER_LINE],
                &k_order_line(w, d, o, n as u8 + 1),
                &line.encode(),
            )?;
        }
        // total * (1 - discount) * (1 + w_tax + d_tax), as the terminal shows it.
        let total = total as i128 * i128::from(10_000 - cust.discount) / 10_000
            * i128::from(10_000 + wh.tax + dist.tax)
            / 10_000;
        std::hint::black_box(total);
        Ok(true)
    }
}

impl Tpcc {
    pub fn payment(
        &self,
        tx: &mut Transaction<'_>,
        tables: &Tables,
        i: &PaymentInput,
    ) -> Result<()> {
        let tb = &tables.tables;
        let mut wh = Warehouse::decode(&get_for_update(tx, &tb[t::WAREHOUSE], &k_w(i.w))?)?;
        wh.ytd += i.amount;
        tx.update(&tb[t::WAREHOUSE], &k_w(i.w), &wh.encode())?;
        let dkey = k_wd(i.w, i.d);
        let mut dist = District::decode(&get_for_update(tx, &tb[t::DISTRICT], &dkey)?)?;
        dist.ytd += i.amount;
        tx.update(&tb[t::DISTRICT], &dkey, &dist.encode())?;
        // A last name no customer has (scaled down): the first customer.
        let c = find_customer(tx, tables, i.c_w, i.c_d, &i.who)?.unwrap_or(1);
        let ckey = k_wdi(i.c_w, i.c_d, c);
        let mut cust = Customer::decode(&get_for_update(tx, &tb[t::CUSTOMER], &ckey)?)?;
        cust.balance -= i.amount;
        cust.ytd_payment += i.amount;
        cust.payment_cnt += 1;
        if &cust.credit == b"BC" {
            let note = format!(
                "{} {} {} {} {} {}.{:02} | ",
                c,
                i.c_d,
                i.c_w,
                i.d,
                i.w,
                i.amount / 100,
                i.amount % 100
            );
            let mut data = note.into_bytes();
            data.extend_from_slice(&cust.data);
            cust.data = data[..500].try_into().expect("at least 500 bytes");
        }
        tx.update(&tb[t::CUSTOMER], &ckey, &cust.encode())?;
        let mut h_data = [b' '; 24];
        h_data[..10].copy_from_slice(&wh.rest[..10]);
        h_data[14..].copy_from_slice(&dist.rest[..10]);
        let history = History {
            c_id: c,
            c_d: i.c_d,
            c_w: i.c_w,
            d: i.d,
            w: i.w,
            date: now_us(),
            amount: i.amount,
            data: h_data,
        };
        let id = tables.next_id.fetch_add(1, Relaxed);
        tx.insert(&tb[t::HISTORY], &key_u64(id), &history.encode())
    }

    /// Order-Status (clause 2.6): the customer's last order and its lines.
    pub fn order_status(
        &self,
        tx: &mut Transaction<'_>,
        tables: &Tables,
        w: u32,
        d: u8,
        who: &Who,
    ) -> Result<()> {
        let tb = &tables.tables;
        let c = find_customer(tx, tables, w, d, who)?.unwrap_or(1);
        let cust = Customer::decode(&get(tx, &tb[t::CUSTOMER], &k_wdi(w, d, c))?)?;
        std::hint::black_box(cust.balance);
        let orders = rows_with_prefix(tx, &tb[t::ORDERS_BY_CUSTOMER], &k_wdi(w, d, c))?;
        let Some((last, _)) = orders.last() else {
            return Ok(());
        };
        let o = u32::from_be_bytes(last[9..13].try_into().expect("13-byte key"));
        let order = Order::decode(&get(tx, &tb[t::ORDERS], &k_wdi(w, d, o))?)?;
        std::hint::black_box(order.carrier_id);
        for (_, row) in rows_with_prefix(tx, &tb[t::ORDER_LINE], &k_wdi(w, d, o))? {
            std::hint::black_box(OrderLine::decode(&row)?.delivery_d);
        }
        Ok(())
    }

    /// Delivery (clause 2.7), the ten districts in one transaction: the
    /// oldest new order of each is delivered by `carrier`.
    pub fn delivery(
        &self,
        tx: &mut Transaction<'_>,
        tables: &Tables,
        w: u32,
        carrier: u8,
    ) -> Result<u32> {
        let tb = &tables.tables;
        let now = now_us();
        let mut delivered = 0;
        for d in 1..=DISTRICTS {
            let o = loop {
                let first = tx.scan(
                    &tb[t::NEW_ORDER],
                    &k_wd(w, d),
                    Some(&prefix_end(&k_wd(w, d))),
                    1,
                )?;
                let Some((key, _)) = first.first() else {
                    break None; // none to deliver: skipped
                };
                // Locks it; false when another delivery took it meanwhile.
                if tx.delete(&tb[t::NEW_ORDER], key)? {
                    break parse_wdi(key).map(|(_, _, o)| o);
                }
            };
            let Some(o) = o else { continue };
            let okey = k_wdi(w, d, o);
            let mut order = Order::decode(&get_for_update(tx, &tb[t::ORDERS], &okey)?)?;
            order.carrier_id = carrier;
            tx.update(&tb[t::ORDERS], &okey, &order.encode())?;
            let mut sum = 0;
            for (key, row) in rows_with_prefix(tx, &tb[t::ORDER_LINE], &okey)? {
                let mut line = OrderLine::decode(&row)?;
                line.delivery_d = now;
                sum += line.amount;
                tx.update(&tb[t::ORDER_LINE], &key, &line.encode())?;
            }
            let ckey = k_wdi(w, d, order.c_id);
            let mut cust = Customer::decode(&get_for_update(tx, &tb[t::CUSTOMER], &ckey)?)?;
            cust.balance += sum;
            cust.delivery_cnt += 1;
            tx.update(&tb[t::CUSTOMER], &ckey, &cust.encode())?;
            delivered += 1;
        }
        Ok(delivered)
    }

    /// Stock-Level (clause 2.8): distinct items of the district's last 20
    /// orders whose stock is below `threshold`.
    pub fn stock_level(
        &self,
        tx: &mut Transaction<'_>,
        tables: &Tables,
        w: u32,
        d: u8,
        threshold: i32,
    ) -> Result<usize> {
        let tb = &tables.tables;
        let dist = District::decode(&get(tx, &tb[t::DISTRICT], &k_wd(w, d))?)?;
        let from = dist.next_o_id.saturating_sub(20);
        let lines = tx.scan(
            &tb[t::ORDER_LINE],
            &k_order_line(w, d, from, 0),
            Some(&k_order_line(w, d, dist.next_o_id, 0)),
            usize::MAX,
        )?;
        let mut items = std::collections::BTreeSet::new();
        for (_, row) in &lines {
            items.insert(OrderLine::decode(row)?.i_id);
        }
        let mut low = 0;
        for i in items {
            let stock = Stock::decode(&get(tx, &tb[t::STOCK], &k_stock(w, i))?)?;
            if stock.quantity < threshold {
                low += 1;
            }
        }
        Ok(low)
    }
}
