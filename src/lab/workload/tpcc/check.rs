//! The specification's consistency conditions 1 to 4 (clause 3.3.2), on
//! whatever rows the tables hold (no scale needed):
//! 1. W_YTD = sum(D_YTD) of the warehouse's districts;
//! 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) per district (the
//!    new_order part only while the district has new orders);
//! 3. max(NO_O_ID) - min(NO_O_ID) + 1 = the district's new_order rows;
//! 4. sum(O_OL_CNT) = the district's order_line rows.

use super::schema::*;
use crate::db::Database;
use crate::error::{Error, Result};
use crate::lab::workload::check::{CheckReport, Malformed};
use crate::lab::workload::scan_all;
use std::collections::BTreeMap;

#[derive(Default)]
struct PerDistrict {
    ytd: i64,
    next_o_id: Option<u32>,
    max_o: Option<u32>,
    ol_cnt_sum: u64,
    no_min: Option<u32>,
    no_max: Option<u32>,
    no_rows: u64,
    lines: u64,
}

/// Adds one row (key, row) to its district's figures; None if malformed.
type Fold<'a> = dyn FnMut(&mut PerDistrict, &[u8], &[u8]) -> Option<()> + 'a;

fn wd(key: &[u8]) -> Option<(u32, u8)> {
    Some((
        u32::from_be_bytes(key.get(..4)?.try_into().ok()?),
        *key.get(4)?,
    ))
}

/// Checks conditions 1-4; each broken one is a line naming it.
pub fn check(db: &Database) -> Result<CheckReport> {
    let mut report = CheckReport::new("tpcc");
    let mut tables = Vec::new();
    for name in [WAREHOUSE, DISTRICT, ORDERS, NEW_ORDER, ORDER_LINE] {
        match db.table(name) {
            Ok(t) => tables.push(t),
            Err(Error::NoSuchTable(_)) => report
                .broken
                .push(format!("tpcc consistency broken: table {name} is missing")),
            Err(e) => return Err(e),
        }
    }
    if tables.len() < 5 {
        return Ok(report);
    }
    let mut warehouses: BTreeMap<u32, i64> = BTreeMap::new();
    let mut districts: BTreeMap<(u32, u8), PerDistrict> = BTreeMap::new();
    let mut bad = Malformed::default();
    let n = scan_all(db, &tables[0], |k, v| {
        match (<[u8; 4]>::try_from(k), Warehouse::decode(v)) {
            (Ok(k), Ok(row)) => {
                warehouses.insert(u32::from_be_bytes(k), row.ytd);
            }
            _ => bad.add(|| format!("warehouse key {k:02x?}, {} bytes", v.len())),
        }
        Ok(())
    })?;
    report.checked.push(format!("{WAREHOUSE}: {n} rows"));
    let mut add = |table: usize, name: &str, f: &mut Fold<'_>| -> Result<()> {
        let n = scan_all(db, &tables[table], |k, v| {
            let ok = wd(k).and_then(|at| f(districts.entry(at).or_default(), k, v));
            if ok.is_none() {
                bad.add(|| format!("{name} key {k:02x?}, {} bytes", v.len()));
            }
            Ok(())
        })?;
        report.checked.push(format!("{name}: {n} rows"));
        Ok(())
    };
    add(1, DISTRICT, &mut |p, _, v| {
        let row = District::decode(v).ok()?;
        p.ytd = row.ytd;
        p.next_o_id = Some(row.next_o_id);
        Some(())
    })?;
    add(2, ORDERS, &mut |p, k, v| {
        let (_, _, o) = parse_wdi(k)?;
        let row = Order::decode(v).ok()?;
        p.max_o = p.max_o.max(Some(o));
        p.ol_cnt_sum += u64::from(row.ol_cnt);
        Some(())
    })?;
    add(3, NEW_ORDER, &mut |p, k, _| {
        let (_, _, o) = parse_wdi(k)?;
        p.no_min = Some(p.no_min.map_or(o, |m| m.min(o)));
        p.no_max = p.no_max.max(Some(o));
        p.no_rows += 1;
        Some(())
    })?;
    add(4, ORDER_LINE, &mut |p, _, _| {
        p.lines += 1;
        Some(())
    })?;
    bad.report(&mut report, "the tpcc tables");
    let broken = &mut report.broken;
    for (&w, &w_ytd) in &warehouses {
        let sum: i64 = districts
            .range((w, 0)..=(w, u8::MAX))
            .map(|(_, p)| p.ytd)
            .sum();
        if sum != w_ytd {
            broken.push(format!(
                "tpcc consistency condition 1 broken: warehouse {w}: W_YTD {w_ytd} != sum(D_YTD) {sum}"
            ));
        }
    }
    for (&(w, d), p) in &districts {
        let at = format!("warehouse {w} district {d}");
        let Some(next) = p.next_o_id else {
            broken.push(format!(
                "tpcc consistency broken: {at} has orders but no district row"
            ));
            continue;
        };
        let max_o = p.max_o.unwrap_or(0);
        if next - 1 != max_o || p.no_max.is_some_and(|m| m != max_o) {
            broken.push(format!(
                "tpcc consistency condition 2 broken: {at}: D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o}, max(NO_O_ID) = {:?}",
                next - 1,
                p.no_max
            ));
        }
        if let (Some(lo), Some(hi)) = (p.no_min, p.no_max) {
            if u64::from(hi - lo) + 1 != p.no_rows {
                broken.push(format!(
                    "tpcc consistency condition 3 broken: {at}: max(NO_O_ID) - min(NO_O_ID) + 1 = {} but {} new_order rows",
                    u64::from(hi - lo) + 1,
                    p.no_rows
                ));
            }
        }
        if p.ol_cnt_sum != p.lines {
            broken.push(format!(
                "tpcc consistency condition 4 broken: {at}: sum(O_OL_CNT) = {} but {} order_line rows",
                p.ol_cnt_sum, p.lines
            ));
        }
    }
    report.checked.push(format!(
        "consistency conditions 1-4 on {} warehouses, {} districts",
        warehouses.len(),
        districts.len()
    ));
    Ok(report)
}
