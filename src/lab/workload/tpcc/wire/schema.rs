//! The schema the wire driver creates (PostgreSQL dialect, the text of
//! `tpcc-wire-schema.sql`), and the COPY text encoding of the rows that
//! [`crate::lab::workload::tpcc::load`] generates.
//!
//! Column values are the embedded rows' fields: money in cents (int8;
//! `ol_amount` and `i_price` int4), tax and discount in 1/10,000 (int4),
//! the fixed-width address fields cut into their columns, text without
//! its padding, a zero date or carrier as NULL.

use crate::lab::workload::tpcc::load::DistrictOrders;
use crate::lab::workload::tpcc::schema::{
    trim, Customer, District, History, Item, Stock, Warehouse,
};
use std::fmt::Write as _;

/// The CREATE statements, in order.
pub const SCHEMA: [&str; 11] = [
    "CREATE TABLE warehouse (w_id int4 NOT NULL, w_name varchar(10), w_street_1 varchar(20), w_street_2 varchar(20), w_city varchar(20), w_state char(2), w_zip char(9), w_tax int4, w_ytd int8, PRIMARY KEY (w_id))",
    "CREATE TABLE district (d_id int4 NOT NULL, d_w_id int4 NOT NULL, d_name varchar(10), d_street_1 varchar(20), d_street_2 varchar(20), d_city varchar(20), d_state char(2), d_zip char(9), d_tax int4, d_ytd int8, d_next_o_id int4, PRIMARY KEY (d_w_id, d_id))",
    "CREATE TABLE customer (c_id int4 NOT NULL, c_d_id int4 NOT NULL, c_w_id int4 NOT NULL, c_first varchar(16), c_middle char(2), c_last varchar(16), c_street_1 varchar(20), c_street_2 varchar(20), c_city varchar(20), c_state char(2), c_zip char(9), c_phone char(16), c_since timestamp, c_credit char(2), c_credit_lim int8, c_discount int4, c_balance int8, c_ytd_payment int8, c_payment_cnt int4, c_delivery_cnt int4, c_data varchar(500), PRIMARY KEY (c_w_id, c_d_id, c_id))",
    "CREATE INDEX customer_by_name ON customer (c_w_id, c_d_id, c_last, c_first)",
    "CREATE TABLE history (h_c_id int4, h_c_d_id int4, h_c_w_id int4, h_d_id int4, h_w_id int4, h_date timestamp, h_amount int8, h_data varchar(24))",
    "CREATE TABLE new_order (no_o_id int4 NOT NULL, no_d_id int4 NOT NULL, no_w_id int4 NOT NULL, PRIMARY KEY (no_w_id, no_d_id, no_o_id))",
    "CREATE TABLE orders (o_id int4 NOT NULL, o_d_id int4 NOT NULL, o_w_id int4 NOT NULL, o_c_id int4, o_entry_d timestamp, o_carrier_id int4, o_ol_cnt int4, o_all_local int4, PRIMARY KEY (o_w_id, o_d_id, o_id))",
    "CREATE INDEX orders_by_customer ON orders (o_w_id, o_d_id, o_c_id, o_id)",
    "CREATE TABLE order_line (ol_o_id int4 NOT NULL, ol_d_id int4 NOT NULL, ol_w_id int4 NOT NULL, ol_number int4 NOT NULL, ol_i_id int4, ol_supply_w_id int4, ol_delivery_d timestamp, ol_quantity int4, ol_amount int4, ol_dist_info char(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))",
    "CREATE TABLE item (i_id int4 NOT NULL, i_im_id int4, i_name varchar(24), i_price int4, i_data varchar(50), PRIMARY KEY (i_id))",
    "CREATE TABLE stock (s_i_id int4 NOT NULL, s_w_id int4 NOT NULL, s_quantity int4, s_dist_01 char(24), s_dist_02 char(24), s_dist_03 char(24), s_dist_04 char(24), s_dist_05 char(24), s_dist_06 char(24), s_dist_07 char(24), s_dist_08 char(24), s_dist_09 char(24), s_dist_10 char(24), s_ytd int4, s_order_cnt int4, s_remote_cnt int4, s_data varchar(50), PRIMARY KEY (s_w_id, s_i_id))",
];

/// The nine tables (what `--drop` drops).
pub const TABLES: [&str; 9] = [
    "warehouse",
    "district",
    "customer",
    "history",
    "new_order",
    "orders",
    "order_line",
    "item",
    "stock",
];

/// Rows in COPY's text format: tab-separated columns, `\N` for NULL,
/// backslash, tab, newline and carriage return escaped.
pub struct CopyText {
    pub buf: Vec<u8>,
    pub rows: u64,
    at_start: bool,
}

impl Default for CopyText {
    fn default() -> Self {
        CopyText::new()
    }
}

impl CopyText {
    pub fn new() -> CopyText {
        CopyText {
            buf: Vec::new(),
            rows: 0,
            at_start: true,
        }
    }

    /// The rows cut into texts of at most `max_rows` rows each, in order.
    /// Rows end with a newline; one inside a value is escaped (backslash, n).
    pub fn split(self, max_rows: u64) -> Vec<CopyText> {
        if self.rows <= max_rows {
            return vec![self];
        }
        let mut out = Vec::new();
        let mut part = CopyText::new();
        for line in self.buf.split_inclusive(|&b| b == b'\n') {
            part.buf.extend_from_slice(line);
            part.rows += 1;
            if part.rows == max_rows {
                out.push(std::mem::take(&mut part));
            }
        }
        if part.rows > 0 {
            out.push(part);
        }
        out
    }

    fn sep(&mut self) {
        if !self.at_start {
            self.buf.push(b'\t');
        }
        self.at_start = false;
    }

    pub fn int(&mut self, v: impl Into<i64>) -> &mut Self {
        self.sep();
        let _ = write!(Text(&mut self.buf), "{}", v.into());
        self
    }

    /// Text, its trailing padding (spaces, zero bytes) removed.
    pub fn text(&mut self, s: &[u8]) -> &mut Self {
        self.sep();
        for &b in trim(s) {
            match b {
                b'\\' => self.buf.extend_from_slice(b"\\\\"),
                b'\t' => self.buf.extend_from_slice(b"\\t"),
                b'\n' => self.buf.extend_from_slice(b"\\n"),
                b'\r' => self.buf.extend_from_slice(b"\\r"),
                _ => self.buf.push(b),
            }
        }
        self
    }

    pub fn null(&mut self) -> &mut Self {
        self.sep();
        self.buf.extend_from_slice(b"\\N");
        self
    }

    /// A timestamp from microseconds since 1970; 0 is NULL.
    pub fn time(&mut self, us: i64) -> &mut Self {
        if us == 0 {
            return self.null();
        }
        self.sep();
        self.buf.extend_from_slice(timestamp(us).as_bytes());
        self
    }

    pub fn end(&mut self) {
        self.buf.push(b'\n');
        self.rows += 1;
        self.at_start = true;
    }
}

struct Text<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Text<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]` (UTC) of microseconds since 1970, as
/// the SQL layer prints a timestamp (its epoch is 2000-01-01).
pub fn timestamp(us: i64) -> String {
    const US_1970_TO_2000: i64 = 946_684_800_000_000;
    crate::sql::timestamp::format(us.saturating_sub(US_1970_TO_2000))
}

/// name 10 | street_1 20 | street_2 20 | city 20 | state 2 | zip 9.
fn named_address(out: &mut CopyText, rest: &[u8; 81]) {
    for (a, b) in [(0, 10), (10, 30), (30, 50), (50, 70), (70, 72), (72, 81)] {
        out.text(&rest[a..b]);
    }
}

pub fn warehouse(out: &mut CopyText, w: u32, row: &Warehouse) {
    out.int(w);
    named_address(out, &row.rest);
    out.int(row.tax).int(row.ytd).end();
}

pub fn district(out: &mut CopyText, w: u32, d: u8, row: &District) {
    out.int(d).int(w);
    named_address(out, &row.rest);
    out.int(row.tax).int(row.ytd).int(row.next_o_id).end();
}

pub fn customer(out: &mut CopyText, w: u32, d: u8, c: u32, row: &Customer) {
    out.int(c).int(d).int(w);
    out.text(&row.first).text(&row.middle).text(&row.last);
    // street_1 20 | street_2 20 | city 20 | state 2 | zip 9 | phone 16.
    for (a, b) in [(0, 20), (20, 40), (40, 60), (60, 62), (62, 71), (71, 87)] {
        out.text(&row.rest[a..b]);
    }
    out.time(row.since).text(&row.credit).int(row.credit_lim);
    out.int(row.discount).int(row.balance).int(row.ytd_payment);
    out.int(row.payment_cnt)
        .int(row.delivery_cnt)
        .text(&row.data);
    out.end();
}

pub fn history(out: &mut CopyText, row: &History) {
    out.int(row.c_id)
        .int(row.c_d)
        .int(row.c_w)
        .int(row.d)
        .int(row.w);
    out.time(row.date).int(row.amount).text(&row.data).end();
}

/// A district's orders, order lines and new orders, as three COPYs.
pub fn orders(o: &DistrictOrders) -> [CopyText; 3] {
    let (w, d) = (o.w, o.d);
    let mut orders = CopyText::new();
    for (id, row) in &o.orders {
        orders
            .int(*id)
            .int(d)
            .int(w)
            .int(row.c_id)
            .time(row.entry_d);
        if row.carrier_id == 0 {
            orders.null();
        } else {
            orders.int(row.carrier_id);
        }
        orders.int(row.ol_cnt).int(row.all_local).end();
    }
    let mut lines = CopyText::new();
    for (id, n, row) in &o.lines {
        lines
            .int(*id)
            .int(d)
            .int(w)
            .int(*n)
            .int(row.i_id)
            .int(row.supply_w);
        lines.time(row.delivery_d).int(row.quantity).int(row.amount);
        lines.text(&row.dist_info).end();
    }
    let mut new_orders = CopyText::new();
    for id in o.new_orders.clone() {
        new_orders.int(id).int(d).int(w).end();
    }
    [orders, lines, new_orders]
}

pub fn item(out: &mut CopyText, i: u32, row: &Item) {
    out.int(i).int(row.im_id).text(&row.name).int(row.price);
    out.text(&row.data).end();
}

pub fn stock(out: &mut CopyText, w: u32, i: u32, row: &Stock) {
    out.int(i).int(w).int(row.quantity);
    for dist in row.dist.chunks(24) {
        out.text(dist);
    }
    out.int(row.ytd).int(row.order_cnt).int(row.remote_cnt);
    out.text(&row.data).end();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::workload::tpcc::{load, Tpcc};

    #[test]
    fn copy_text_escapes_and_trims() {
        let mut t = CopyText::new();
        t.int(-5).text(b"a\\b\tc\nd\re  ").null().text(b"   ").end();
        t.int(7u8).end();
        assert_eq!(t.buf, b"-5\ta\\\\b\\tc\\nd\\re\t\\N\t\n7\n");
        assert_eq!(t.rows, 2);
    }

    /// untorn serve's loads failed on a district's 30,000 order lines in
    /// one COPY (one transaction over the write-set bound): they split.
    #[test]
    fn copy_text_splits_into_whole_rows_in_order() {
        let mut t = CopyText::new();
        for i in 0..7 {
            t.int(i).text(b"x\ny").end();
        }
        let whole = t.buf.clone();
        let parts = t.split(3);
        assert_eq!(parts.iter().map(|p| p.rows).collect::<Vec<_>>(), [3, 3, 1]);
        assert_eq!(
            parts
                .iter()
                .flat_map(|p| p.buf.clone())
                .collect::<Vec<u8>>(),
            whole
        );
        assert!(parts.iter().all(|p| p.buf.ends_with(b"\n")));
    }

    #[test]
    fn timestamps_are_utc_calendar_times() {
        assert_eq!(timestamp(load::LOAD_DATE), "2026-01-01 00:00:00");
        assert_eq!(timestamp(1), "1970-01-01 00:00:00.000001");
        assert_eq!(timestamp(951_782_400_000_000), "2000-02-29 00:00:00");
        assert_eq!(timestamp(-1_000_000), "1969-12-31 23:59:59");
    }

    /// Every generated row has as many columns as its CREATE TABLE.
    #[test]
    fn rows_have_their_tables_columns() {
        let t = Tpcc {
            warehouses: 1,
            items: 100,
            customers: 10,
        };
        let columns = |table: &str| {
            let ddl = SCHEMA
                .iter()
                .find(|s| s.starts_with(&format!("CREATE TABLE {table} (")))
                .unwrap();
            ddl.matches(" int").count()
                + ddl.matches(" varchar").count()
                + ddl.matches(" char(").count()
                + ddl.matches(" timestamp").count()
        };
        let fields = |c: &CopyText| {
            let text = std::str::from_utf8(&c.buf).unwrap();
            let first = text.lines().next().unwrap();
            assert!(text
                .lines()
                .all(|l| l.split('\t').count() == first.split('\t').count()));
            first.split('\t').count()
        };
        let mut c = CopyText::new();
        let (ws, ds) = load::warehouses_and_districts(&t);
        warehouse(&mut c, ws[0].0, &ws[0].1);
        assert_eq!(fields(&c), columns("warehouse"));
        let mut c = CopyText::new();
        district(&mut c, ds[0].0, ds[0].1, &ds[0].2);
        assert_eq!(fields(&c), columns("district"));
        let mut c = CopyText::new();
        for (w, d, id, row) in load::customers(&t).take(3) {
            customer(&mut c, w, d, id, &row);
        }
        assert_eq!(fields(&c), columns("customer"));
        let mut c = CopyText::new();
        for (_, row) in load::history(&t).take(3) {
            history(&mut c, &row);
        }
        assert_eq!(fields(&c), columns("history"));
        let mut c = CopyText::new();
        for (i, row) in load::items(&t).take(3) {
            item(&mut c, i, &row);
        }
        assert_eq!(fields(&c), columns("item"));
        let mut c = CopyText::new();
        for (w, i, row) in load::stock(&t).take(3) {
            stock(&mut c, w, i, &row);
        }
        assert_eq!(fields(&c), columns("stock"));
        let [o, l, n] = orders(&load::orders(&t).next().unwrap());
        assert_eq!(fields(&o), columns("orders"));
        assert_eq!(fields(&l), columns("order_line"));
        assert_eq!(fields(&n), columns("new_order"));
        assert_eq!((o.rows, n.rows), (10, 3));
    }
}
