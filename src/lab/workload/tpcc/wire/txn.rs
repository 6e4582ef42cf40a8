//! The five transactions as prepared statements (clause 2.4 to 2.8), on
//! the inputs [`crate::lab::workload::tpcc::input`] draws. Rows to change
//! are read FOR UPDATE; New-Order locks its stock rows in item order, so
//! two New-Orders deadlock less often (a deadlock is retried).

use super::conn::{column, Conn, Prepared, Ty};
use super::{Result, WireError};
use crate::lab::workload::tpcc::input::*;
use std::time::SystemTime;

/// Every statement of the five transactions, prepared on one connection.
pub struct Statements {
    w_tax: Prepared,
    d_for_update: Prepared,
    d_next: Prepared,
    c_new_order: Prepared,
    insert_order: Prepared,
    insert_new_order: Prepared,
    item: Prepared,
    /// One per district: its S_DIST_xx.
    stock: Vec<Prepared>,
    stock_update: Prepared,
    insert_line: Prepared,
    w_pay: Prepared,
    w_ytd: Prepared,
    d_pay: Prepared,
    d_ytd: Prepared,
    c_by_name: Prepared,
    c_pay: Prepared,
    c_data: Prepared,
    c_paid: Prepared,
    c_paid_bc: Prepared,
    insert_history: Prepared,
    c_status: Prepared,
    last_order: Prepared,
    lines: Prepared,
    oldest_new_order: Prepared,
    delete_new_order: Prepared,
    o_for_update: Prepared,
    o_carrier: Prepared,
    line_delivered: Prepared,
    order_total: Prepared,
    c_delivered: Prepared,
    d_next_o_id: Prepared,
    recent_items: Prepared,
}

const I4: Ty = Ty::I4;
const I8: Ty = Ty::I8;
const TS: Ty = Ty::Timestamp;
const VC: Ty = Ty::Varchar;
const CH: Ty = Ty::Char;

impl Statements {
    pub fn prepare(c: &mut Conn) -> Result<Statements> {
        let mut p = |sql: &str, types: &[Ty]| c.prepare(sql, types);
        let stock = (1..=10)
            .map(|d| {
                p(
                    &format!(
                        "SELECT s_quantity, s_dist_{d:02}, s_data FROM stock \
                         WHERE s_w_id = $1 AND s_i_id = $2 FOR UPDATE"
                    ),
                    &[I4, I4],
                )
            })
            .collect::<Result<_>>()?;
        Ok(Statements {
            w_tax: p("SELECT w_tax FROM warehouse WHERE w_id = $1", &[I4])?,
            d_for_update: p("SELECT d_tax, d_next_o_id FROM district WHERE d_w_id = $1 AND d_id = $2 FOR UPDATE", &[I4, I4])?,
            d_next: p("UPDATE district SET d_next_o_id = $1 WHERE d_w_id = $2 AND d_id = $3", &[I4, I4, I4])?,
            c_new_order: p("SELECT c_discount, c_last, c_credit FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3", &[I4, I4, I4])?,
            insert_order: p("INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", &[I4, I4, I4, I4, TS, I4, I4, I4])?,
            insert_new_order: p("INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES ($1, $2, $3)", &[I4, I4, I4])?,
            item: p("SELECT i_price, i_name, i_data FROM item WHERE i_id = $1", &[I4])?,
            stock,
            stock_update: p("UPDATE stock SET s_quantity = $1, s_ytd = s_ytd + $2, s_order_cnt = s_order_cnt + $3, s_remote_cnt = s_remote_cnt + $4 WHERE s_w_id = $5 AND s_i_id = $6", &[I4, I4, I4, I4, I4, I4])?,
            insert_line: p("INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)", &[I4, I4, I4, I4, I4, I4, TS, I4, I4, CH])?,
            w_pay: p("SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse WHERE w_id = $1 FOR UPDATE", &[I4])?,
            w_ytd: p("UPDATE warehouse SET w_ytd = w_ytd + $1 WHERE w_id = $2", &[I8, I4])?,
            d_pay: p("SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district WHERE d_w_id = $1 AND d_id = $2 FOR UPDATE", &[I4, I4])?,
            d_ytd: p("UPDATE district SET d_ytd = d_ytd + $1 WHERE d_w_id = $2 AND d_id = $3", &[I8, I4, I4])?,
            c_by_name: p("SELECT c_id FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_last = $3 ORDER BY c_first", &[I4, I4, VC])?,
            c_pay: p("SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3 FOR UPDATE", &[I4, I4, I4])?,
            c_data: p("SELECT c_data FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3", &[I4, I4, I4])?,
            c_paid: p("UPDATE customer SET c_balance = c_balance + $1, c_ytd_payment = c_ytd_payment + $2, c_payment_cnt = c_payment_cnt + $3 WHERE c_w_id = $4 AND c_d_id = $5 AND c_id = $6", &[I8, I8, I4, I4, I4, I4])?,
            c_paid_bc: p("UPDATE customer SET c_balance = c_balance + $1, c_ytd_payment = c_ytd_payment + $2, c_payment_cnt = c_payment_cnt + $3, c_data = $4 WHERE c_w_id = $5 AND c_d_id = $6 AND c_id = $7", &[I8, I8, I4, VC, I4, I4, I4])?,
            insert_history: p("INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", &[I4, I4, I4, I4, I4, TS, I8, VC])?,
            c_status: p("SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3", &[I4, I4, I4])?,
            last_order: p("SELECT o_id, o_carrier_id, o_entry_d FROM orders WHERE o_w_id = $1 AND o_d_id = $2 AND o_c_id = $3 ORDER BY o_id DESC LIMIT 1", &[I4, I4, I4])?,
            lines: p("SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line WHERE ol_w_id = $1 AND ol_d_id = $2 AND ol_o_id = $3", &[I4, I4, I4])?,
            oldest_new_order: p("SELECT no_o_id FROM new_order WHERE no_w_id = $1 AND no_d_id = $2 ORDER BY no_o_id LIMIT 1 FOR UPDATE", &[I4, I4])?,
            delete_new_order: p("DELETE FROM new_order WHERE no_w_id = $1 AND no_d_id = $2 AND no_o_id = $3", &[I4, I4, I4])?,
            o_for_update: p("SELECT o_c_id, o_ol_cnt FROM orders WHERE o_w_id = $1 AND o_d_id = $2 AND o_id = $3 FOR UPDATE", &[I4, I4, I4])?,
            o_carrier: p("UPDATE orders SET o_carrier_id = $1 WHERE o_w_id = $2 AND o_d_id = $3 AND o_id = $4", &[I4, I4, I4, I4])?,
            line_delivered: p("UPDATE order_line SET ol_delivery_d = $1 WHERE ol_w_id = $2 AND ol_d_id = $3 AND ol_o_id = $4 AND ol_number = $5", &[TS, I4, I4, I4, I4])?,
            order_total: p("SELECT sum(ol_amount) FROM order_line WHERE ol_w_id = $1 AND ol_d_id = $2 AND ol_o_id = $3", &[I4, I4, I4])?,
            c_delivered: p("UPDATE customer SET c_balance = c_balance + $1, c_delivery_cnt = c_delivery_cnt + $2 WHERE c_w_id = $3 AND c_d_id = $4 AND c_id = $5", &[I8, I4, I4, I4, I4])?,
            d_next_o_id: p("SELECT d_next_o_id FROM district WHERE d_w_id = $1 AND d_id = $2", &[I4, I4])?,
            recent_items: p("SELECT DISTINCT ol_i_id FROM order_line WHERE ol_w_id = $1 AND ol_d_id = $2 AND ol_o_id >= $3 AND ol_o_id < $4", &[I4, I4, I4, I4])?,
        })
    }
}

/// Runs one transaction: Ok(false) when it rolled back (New-Order's
/// unused item). On an error it is rolled back, if the connection lives.
pub fn execute(c: &mut Conn, s: &Statements, input: &Input) -> Result<bool> {
    c.simple("BEGIN")?;
    let result = match input {
        Input::NewOrder(i) => new_order(c, s, i),
        Input::Payment(i) => payment(c, s, i).map(|()| true),
        Input::OrderStatus(i) => order_status(c, s, i).map(|()| true),
        Input::Delivery(i) => delivery(c, s, i).map(|()| true),
        Input::StockLevel(i) => stock_level(c, s, i).map(|_| true),
    };
    match result {
        Ok(true) => c.simple("COMMIT").map(|()| true),
        Ok(false) => c.simple("ROLLBACK").map(|()| false),
        Err(e) => {
            if !c.is_closed() {
                let _ = c.simple("ROLLBACK");
            }
            Err(e)
        }
    }
}

fn i4(v: impl Into<i64>) -> i32 {
    v.into() as i32
}

fn new_order(c: &mut Conn, s: &Statements, i: &NewOrderInput) -> Result<bool> {
    let (w, d, cid) = (i4(i.w), i4(i.d), i4(i.c));
    let w_tax: i32 = s.w_tax.get(&s.w_tax.one(c, &[&w])?, 0)?;
    let row = s.d_for_update.one(c, &[&w, &d])?;
    let (d_tax, o): (i32, i32) = (s.d_for_update.get(&row, 0)?, s.d_for_update.get(&row, 1)?);
    s.d_next.execute(c, &[&(o + 1), &w, &d])?;
    let cust = s.c_new_order.one(c, &[&w, &d, &cid])?;
    let discount: i32 = s.c_new_order.get(&cust, 0)?;
    let all_local = i4(i.lines.iter().all(|l| l.1 == i.w));
    let now = SystemTime::now();
    let (n, none) = (i4(i.lines.len() as u32), None::<i32>);
    s.insert_order
        .execute(c, &[&o, &d, &w, &cid, &now, &none, &n, &all_local])?;
    s.insert_new_order.execute(c, &[&o, &d, &w])?;
    let mut lines = i.lines.clone();
    lines.sort_unstable();
    let mut total = 0i64;
    let stock = &s.stock[usize::from(i.d - 1)];
    for (number, &(item, supply, quantity)) in lines.iter().enumerate() {
        let Some(row) = s.item.query(c, &[&i4(item)])?.into_iter().next() else {
            return Ok(false); // the unused item: roll back
        };
        let price: i32 = s.item.get(&row, 0)?;
        let (sw, si) = (i4(supply), i4(item));
        let row = stock.one(c, &[&sw, &si])?;
        let (q, have): (i32, i32) = (i4(quantity), stock.get(&row, 0)?);
        let dist: String = stock.get(&row, 1)?;
        let left = if have >= q + 10 {
            have - q
        } else {
            have - q + 91
        };
        let remote = i4(supply != i.w);
        s.stock_update
            .execute(c, &[&left, &q, &1i32, &remote, &sw, &si])?;
        let amount = q * price;
        total += i64::from(amount);
        let (number, no_date) = (i4(number as u32 + 1), None::<SystemTime>);
        s.insert_line.execute(
            c,
            &[&o, &d, &w, &number, &si, &sw, &no_date, &q, &amount, &dist],
        )?;
    }
    let total = i128::from(total) * i128::from(10_000 - discount) / 10_000
        * i128::from(10_000 + w_tax + d_tax)
        / 10_000;
    std::hint::black_box(total);
    Ok(true)
}

/// The customer `who` names: by id, or the middle one (ceil(n / 2)) by
/// first name of those with the last name; the first when none has it
/// (possible only scaled down), as the embedded transactions.
fn find_customer(c: &mut Conn, s: &Statements, w: i32, d: i32, who: &Who) -> Result<i32> {
    match who {
        Who::Id(id) => Ok(i4(*id)),
        Who::LastName(name) => {
            let name = String::from_utf8_lossy(name).into_owned();
            let rows = s.c_by_name.query(c, &[&w, &d, &name])?;
            match rows.len() {
                0 => Ok(1),
                n => s.c_by_name.get(&rows[n.div_ceil(2) - 1], 0),
            }
        }
    }
}

fn payment(c: &mut Conn, s: &Statements, i: &PaymentInput) -> Result<()> {
    let (w, d, cw, cd) = (i4(i.w), i4(i.d), i4(i.c_w), i4(i.c_d));
    let wrow = s.w_pay.one(c, &[&w])?;
    s.w_ytd.execute(c, &[&i.amount, &w])?;
    let drow = s.d_pay.one(c, &[&w, &d])?;
    s.d_ytd.execute(c, &[&i.amount, &w, &d])?;
    let cid = find_customer(c, s, cw, cd, &i.who)?;
    let crow = s.c_pay.one(c, &[&cw, &cd, &cid])?;
    let credit: String = s.c_pay.get(&crow, 10)?;
    let paid = (-i.amount, i.amount, 1i32);
    if credit.trim_end() == "BC" {
        let data: Option<String> = s.c_data.get(&s.c_data.one(c, &[&cw, &cd, &cid])?, 0)?;
        let note = format!(
            "{cid} {cd} {cw} {d} {w} {}.{:02} | {}",
            i.amount / 100,
            i.amount % 100,
            data.unwrap_or_default()
        );
        let data: String = note.chars().take(500).collect();
        s.c_paid_bc
            .execute(c, &[&paid.0, &paid.1, &paid.2, &data, &cw, &cd, &cid])?;
    } else {
        s.c_paid
            .execute(c, &[&paid.0, &paid.1, &paid.2, &cw, &cd, &cid])?;
    }
    let w_name: Option<String> = s.w_pay.get(&wrow, 0)?;
    let d_name: Option<String> = s.d_pay.get(&drow, 0)?;
    let h_data = format!(
        "{:<10}    {}",
        w_name.unwrap_or_default(),
        d_name.unwrap_or_default()
    );
    let now = SystemTime::now();
    s.insert_history
        .execute(c, &[&cid, &cd, &cw, &d, &w, &now, &i.amount, &h_data])?;
    Ok(())
}

fn order_status(c: &mut Conn, s: &Statements, i: &OrderStatusInput) -> Result<()> {
    let (w, d) = (i4(i.w), i4(i.d));
    let cid = find_customer(c, s, w, d, &i.who)?;
    let cust = s.c_status.one(c, &[&w, &d, &cid])?;
    std::hint::black_box(s.c_status.get::<i64>(&cust, 0)?);
    let Some(order) = s.last_order.query(c, &[&w, &d, &cid])?.into_iter().next() else {
        return Ok(());
    };
    let o: i32 = s.last_order.get(&order, 0)?;
    for line in s.lines.query(c, &[&w, &d, &o])? {
        std::hint::black_box(s.lines.get::<super::value::Val>(&line, 4)?);
    }
    Ok(())
}

/// The ten districts in one transaction, each's oldest new order
/// delivered by the carrier (a district with none is skipped).
fn delivery(c: &mut Conn, s: &Statements, i: &DeliveryInput) -> Result<()> {
    let (w, carrier, now) = (i4(i.w), i4(i.carrier), SystemTime::now());
    for d in 1..=10i32 {
        // A new order another Delivery took meanwhile: take the next.
        let mut o = None;
        for _ in 0..10 {
            let Some(row) = s.oldest_new_order.query(c, &[&w, &d])?.into_iter().next() else {
                break;
            };
            let id: i32 = s.oldest_new_order.get(&row, 0)?;
            if s.delete_new_order.execute(c, &[&w, &d, &id])? == 1 {
                o = Some(id);
                break;
            }
        }
        let Some(o) = o else { continue };
        let row = s.o_for_update.one(c, &[&w, &d, &o])?;
        let (cid, ol_cnt): (i32, i32) =
            (s.o_for_update.get(&row, 0)?, s.o_for_update.get(&row, 1)?);
        s.o_carrier.execute(c, &[&carrier, &w, &d, &o])?;
        for n in 1..=ol_cnt {
            s.line_delivered.execute(c, &[&now, &w, &d, &o, &n])?;
        }
        let total = s.order_total.one(c, &[&w, &d, &o])?;
        let total: Option<i64> = s.order_total.get(&total, 0)?;
        s.c_delivered
            .execute(c, &[&total.unwrap_or(0), &1i32, &w, &d, &cid])?;
    }
    Ok(())
}

/// `IN (...)`'s list of item ids, as literal text.
pub fn in_list(items: &[i32]) -> String {
    let mut s = String::with_capacity(items.len() * 7);
    for (n, i) in items.iter().enumerate() {
        if n > 0 {
            s.push_str(", ");
        }
        s.push_str(&i.to_string());
    }
    s
}

/// The Stock-Level count's statement for `items` (not prepared: the list
/// changes every time).
pub fn low_stock_sql(items: &[i32]) -> String {
    format!(
        "SELECT count(*) FROM stock WHERE s_w_id = $1 AND s_quantity < $2 AND s_i_id IN ({})",
        in_list(items)
    )
}

/// The distinct items of the district's last 20 orders with less stock
/// than the threshold.
fn stock_level(c: &mut Conn, s: &Statements, i: &StockLevelInput) -> Result<i64> {
    let (w, d) = (i4(i.w), i4(i.d));
    let next: i32 = s.d_next_o_id.get(&s.d_next_o_id.one(c, &[&w, &d])?, 0)?;
    let from = (next - 20).max(0);
    let mut items = s
        .recent_items
        .query(c, &[&w, &d, &from, &next])?
        .iter()
        .map(|r| s.recent_items.get::<i32>(r, 0))
        .collect::<Result<Vec<_>>>()?;
    if items.is_empty() {
        return Ok(0);
    }
    items.sort_unstable();
    let sql = low_stock_sql(&items);
    let rows = c.query_once(&sql, &[I4, I4], &[&w, &i.threshold])?;
    let row = rows
        .first()
        .ok_or_else(|| WireError::Invalid(format!("no row from {sql}")))?;
    column(row, 0, &sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_list_is_literal_integers() {
        assert_eq!(in_list(&[]), "");
        assert_eq!(in_list(&[7]), "7");
        assert_eq!(in_list(&[1, 20, 300]), "1, 20, 300");
        assert_eq!(
            low_stock_sql(&[3, -4]),
            "SELECT count(*) FROM stock WHERE s_w_id = $1 AND s_quantity < $2 AND s_i_id IN (3, -4)"
        );
    }
}
