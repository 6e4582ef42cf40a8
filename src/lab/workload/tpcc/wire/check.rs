//! Consistency conditions 1 to 4 (clause 3.3.2) through SQL, as
//! [`crate::lab::workload::tpcc::check`] on the embedded tables, with
//! point reads and primary-key prefixes only; sums over int8 are taken
//! in the client, from the rows. Also the tables no transaction adds to
//! or deletes from (item, stock, customer) hold the rows the load made:
//! a load that lost rows is found at once, not by a run failing later.

use super::{loaded_scale, Conn, Result, Ty};
use crate::lab::workload::tpcc::Tpcc;

/// What the check read, and each broken condition as a line.
pub struct Checked {
    pub warehouses: u32,
    pub districts: u32,
    pub broken: Vec<String>,
}

pub fn check(c: &mut Conn) -> Result<Checked> {
    let scale = loaded_scale(c)?;
    let mut checked = check_conditions(c, &scale)?;
    checked.broken.extend(row_counts(c, &scale)?);
    Ok(checked)
}

/// The fixed tables' rows against `scale` (what the load made, or what
/// [`loaded_scale`] found): customers per district, stock per warehouse,
/// items; a broken count as a line.
pub fn row_counts(c: &mut Conn, scale: &Tpcc) -> Result<Vec<String>> {
    let i4 = |n| vec![Ty::I4; n];
    let count = |c: &mut Conn, sql: &str, params: &[i32]| -> Result<i64> {
        let st = c.prepare(sql, &i4(params.len()))?;
        let p: Vec<&dyn super::value::Param> = params
            .iter()
            .map(|v| v as &dyn super::value::Param)
            .collect();
        st.get(&st.one(c, &p)?, 0)
    };
    let mut broken = Vec::new();
    let mut expect = |at: String, table: &str, found: i64, loaded: u32| {
        if found != i64::from(loaded) {
            broken.push(format!(
                "tpcc row count broken: {at}: {found} {table} rows, the load made {loaded}"
            ));
        }
    };
    let items = count(c, "SELECT count(*) FROM item", &[])?;
    expect("item".into(), "item", items, scale.items);
    for w in 1..=scale.warehouses as i32 {
        let stock = count(c, "SELECT count(*) FROM stock WHERE s_w_id = $1", &[w])?;
        expect(format!("warehouse {w}"), "stock", stock, scale.items);
        for d in 1..=10i32 {
            let sql = "SELECT count(*) FROM customer WHERE c_w_id = $1 AND c_d_id = $2";
            let n = count(c, sql, &[w, d])?;
            expect(
                format!("warehouse {w} district {d}"),
                "customer",
                n,
                scale.customers,
            );
        }
    }
    Ok(broken)
}

fn check_conditions(c: &mut Conn, scale: &Tpcc) -> Result<Checked> {
    let i4 = |n| vec![Ty::I4; n];
    let w_ytd = c.prepare("SELECT w_ytd FROM warehouse WHERE w_id = $1", &i4(1))?;
    let district = c.prepare(
        "SELECT d_ytd, d_next_o_id FROM district WHERE d_w_id = $1 AND d_id = $2",
        &i4(2),
    )?;
    let orders = c.prepare(
        "SELECT o_id, o_ol_cnt FROM orders WHERE o_w_id = $1 AND o_d_id = $2",
        &i4(2),
    )?;
    let new_orders = c.prepare(
        "SELECT no_o_id FROM new_order WHERE no_w_id = $1 AND no_d_id = $2",
        &i4(2),
    )?;
    let lines = c.prepare(
        "SELECT ol_number FROM order_line WHERE ol_w_id = $1 AND ol_d_id = $2",
        &i4(2),
    )?;
    c.simple("BEGIN")?;
    let mut broken = Vec::new();
    let mut districts = 0;
    for w in 1..=scale.warehouses as i32 {
        let ytd: i64 = w_ytd.get(&w_ytd.one(c, &[&w])?, 0)?;
        let mut sum = 0i64;
        for d in 1..=10i32 {
            districts += 1;
            let at = format!("warehouse {w} district {d}");
            let row = district.one(c, &[&w, &d])?;
            let (d_ytd, next): (i64, i32) = (district.get(&row, 0)?, district.get(&row, 1)?);
            sum += d_ytd;
            let (mut max_o, mut ol_cnt) = (0i32, 0i64);
            for row in orders.query(c, &[&w, &d])? {
                max_o = max_o.max(orders.get(&row, 0)?);
                ol_cnt += i64::from(orders.get::<i32>(&row, 1)?);
            }
            let (mut no_min, mut no_max, mut no_rows) = (None::<i32>, None::<i32>, 0i64);
            for row in new_orders.query(c, &[&w, &d])? {
                let o: i32 = new_orders.get(&row, 0)?;
                no_min = Some(no_min.map_or(o, |m| m.min(o)));
                no_max = Some(no_max.map_or(o, |m| m.max(o)));
                no_rows += 1;
            }
            if next - 1 != max_o || no_max.is_some_and(|m| m != max_o) {
                broken.push(format!(
                    "tpcc consistency condition 2 broken: {at}: D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o}, max(NO_O_ID) = {no_max:?}",
                    next - 1
                ));
            }
            if let (Some(lo), Some(hi)) = (no_min, no_max) {
                if i64::from(hi - lo) + 1 != no_rows {
                    broken.push(format!(
                        "tpcc consistency condition 3 broken: {at}: max(NO_O_ID) - min(NO_O_ID) + 1 = {} but {no_rows} new_order rows",
                        i64::from(hi - lo) + 1
                    ));
                }
            }
            let line_rows = lines.query(c, &[&w, &d])?.len() as i64;
            if ol_cnt != line_rows {
                broken.push(format!(
                    "tpcc consistency condition 4 broken: {at}: sum(O_OL_CNT) = {ol_cnt} but {line_rows} order_line rows"
                ));
            }
        }
        if sum != ytd {
            broken.push(format!(
                "tpcc consistency condition 1 broken: warehouse {w}: W_YTD {ytd} != sum(D_YTD) {sum}"
            ));
        }
    }
    c.simple("COMMIT")?;
    Ok(Checked {
        warehouses: scale.warehouses,
        districts,
        broken,
    })
}
