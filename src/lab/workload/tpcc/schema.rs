//! The nine TPC-C tables and two secondary indexes: names, order-preserving
//! byte keys, and the rows' fixed-width binary encoding.
//!
//! Keys are the primary key's columns as big-endian integers, in the
//! specification's column order, so byte order is key order:
//! warehouse `w u32`; district `w u32, d u8`; customer, orders and
//! new_order `w u32, d u8, id u32`; order_line `w, d, o u32, number u8`;
//! item `i u32`; stock `w u32, i u32`; history (no key in the
//! specification) an ascending `u64` sequence number. The indexes are
//! tables of keys with empty rows: `customer_by_name` is
//! `w, d, C_LAST [16], C_FIRST [16], c u32` (names padded with zero bytes,
//! so shorter sorts first, as SQL's text order) and `orders_by_customer`
//! `w, d, c u32, o u32`.
//!
//! Rows are fixed-width fields, integers little-endian, text padded with
//! spaces to its column's width (CHAR/VARCHAR(n) as n bytes). Money is an
//! `i64` in cents; tax and discount an `i32` in units of 1/10,000; dates
//! are microseconds since 1970 (`i64`, 0 for NULL); a NULL carrier is 0.
//!
//! ```text
//! warehouse  ytd i64 | tax i32 | name 10, street 20+20, city 20, state 2, zip 9      = 93
//! district   ytd i64 | tax i32 | next_o_id u32 | name 10, address 71                = 97
//! customer   balance i64 | ytd_payment i64 | payment_cnt u32 | delivery_cnt u32 |
//!            discount i32 | credit_lim i64 | credit 2 | first 16 | middle 2 | last 16 |
//!            since i64 | address 71, phone 16 | data 500                            = 667
//! history    c_id u32 | c_d u8 | c_w u32 | d u8 | w u32 | date i64 | amount i64 | data 24 = 54
//! new_order  (empty)
//! orders     c_id u32 | entry_d i64 | carrier_id u8 | ol_cnt u8 | all_local u8    = 15
//! order_line i_id u32 | supply_w u32 | delivery_d i64 | quantity u8 | amount i64 |
//!            dist_info 24                                                         = 49
//! item       im_id u32 | price i64 | name 24 | data 50                             = 86
//! stock      quantity i32 | ytd i64 | order_cnt u32 | remote_cnt u32 |
//!            dist_01..10 10 x 24 | data 50                                          = 310
//! ```

use crate::error::{Error, Result};

pub const WAREHOUSE: &str = "warehouse";
pub const DISTRICT: &str = "district";
pub const CUSTOMER: &str = "customer";
pub const HISTORY: &str = "history";
pub const NEW_ORDER: &str = "new_order";
pub const ORDERS: &str = "orders";
pub const ORDER_LINE: &str = "order_line";
pub const ITEM: &str = "item";
pub const STOCK: &str = "stock";
pub const CUSTOMER_BY_NAME: &str = "customer_by_name";
pub const ORDERS_BY_CUSTOMER: &str = "orders_by_customer";

/// Every table, in the order `Tables::tables` holds them (see [`T`]).
pub const TABLES: [&str; 11] = [
    WAREHOUSE,
    DISTRICT,
    CUSTOMER,
    HISTORY,
    NEW_ORDER,
    ORDERS,
    ORDER_LINE,
    ITEM,
    STOCK,
    CUSTOMER_BY_NAME,
    ORDERS_BY_CUSTOMER,
];

/// Positions in [`TABLES`].
pub mod t {
    pub const WAREHOUSE: usize = 0;
    pub const DISTRICT: usize = 1;
    pub const CUSTOMER: usize = 2;
    pub const HISTORY: usize = 3;
    pub const NEW_ORDER: usize = 4;
    pub const ORDERS: usize = 5;
    pub const ORDER_LINE: usize = 6;
    pub const ITEM: usize = 7;
    pub const STOCK: usize = 8;
    pub const CUSTOMER_BY_NAME: usize = 9;
    pub const ORDERS_BY_CUSTOMER: usize = 10;
}

pub const NAME_LEN: usize = 16;
pub const DISTRICTS: u8 = 10;

pub fn k_w(w: u32) -> [u8; 4] {
    w.to_be_bytes()
}

pub fn k_wd(w: u32, d: u8) -> [u8; 5] {
    let mut k = [0u8; 5];
    k[..4].copy_from_slice(&w.to_be_bytes());
    k[4] = d;
    k
}

/// customer, orders, new_order: `(w, d, id)`.
pub fn k_wdi(w: u32, d: u8, id: u32) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[..5].copy_from_slice(&k_wd(w, d));
    k[5..].copy_from_slice(&id.to_be_bytes());
    k
}

pub fn k_order_line(w: u32, d: u8, o: u32, number: u8) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[..9].copy_from_slice(&k_wdi(w, d, o));
    k[9] = number;
    k
}

pub fn k_item(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

pub fn k_stock(w: u32, i: u32) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&w.to_be_bytes());
    k[4..].copy_from_slice(&i.to_be_bytes());
    k
}

/// A name padded with zero bytes to [`NAME_LEN`] (an index key's column).
pub fn name_key(name: &[u8]) -> [u8; NAME_LEN] {
    let mut k = [0u8; NAME_LEN];
    let trimmed = trim(name);
    let n = trimmed.len().min(NAME_LEN);
    k[..n].copy_from_slice(&trimmed[..n]);
    k
}

/// `customer_by_name` key; [`k_name_prefix`] is its first three columns.
pub fn k_customer_name(w: u32, d: u8, last: &[u8], first: &[u8], c: u32) -> [u8; 41] {
    let mut k = [0u8; 41];
    k[..21].copy_from_slice(&k_name_prefix(w, d, last));
    k[21..37].copy_from_slice(&name_key(first));
    k[37..].copy_from_slice(&c.to_be_bytes());
    k
}

pub fn k_name_prefix(w: u32, d: u8, last: &[u8]) -> [u8; 21] {
    let mut k = [0u8; 21];
    k[..5].copy_from_slice(&k_wd(w, d));
    k[5..].copy_from_slice(&name_key(last));
    k
}

/// The customer id at the end of a `customer_by_name` key.
pub fn name_key_customer(key: &[u8]) -> Option<u32> {
    key.get(37..41)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_be_bytes)
}

pub fn k_customer_order(w: u32, d: u8, c: u32, o: u32) -> [u8; 13] {
    let mut k = [0u8; 13];
    k[..9].copy_from_slice(&k_wdi(w, d, c));
    k[9..].copy_from_slice(&o.to_be_bytes());
    k
}

/// The smallest key after every key starting with `prefix` (an exclusive
/// scan end); the prefixes here never end in 0xff..ff.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            break;
        }
    }
    end
}

/// `(w, d, id)` of a customer / orders / new_order key.
pub fn parse_wdi(key: &[u8]) -> Option<(u32, u8, u32)> {
    if key.len() < 9 {
        return None;
    }
    Some((
        u32::from_be_bytes(key[..4].try_into().ok()?),
        key[4],
        u32::from_be_bytes(key[5..9].try_into().ok()?),
    ))
}

/// Text without its padding (trailing spaces or zero bytes).
pub fn trim(s: &[u8]) -> &[u8] {
    let n = s
        .iter()
        .rposition(|&b| b != b' ' && b != 0)
        .map_or(0, |i| i + 1);
    &s[..n]
}

/// Writes a row's fields in order.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn with_capacity(n: usize) -> Writer {
        Writer(Vec::with_capacity(n))
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// `text` padded with spaces (or cut) to `width` bytes.
    pub fn text(&mut self, text: &[u8], width: usize) -> &mut Self {
        let n = text.len().min(width);
        self.0.extend_from_slice(&text[..n]);
        self.0.resize(self.0.len() + width - n, b' ');
        self
    }
}

/// Reads a row's fields in order; the row's length is checked once, up
/// front ([`Reader::new`]).
pub struct Reader<'a> {
    row: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(row: &'a [u8], len: usize, table: &str) -> Result<Reader<'a>> {
        if row.len() != len {
            return Err(Error::Invalid(format!(
                "row of {} bytes in table {table:?}, not {len}",
                row.len()
            )));
        }
        Ok(Reader { row, at: 0 })
    }
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let b: [u8; N] = self.row[self.at..self.at + N]
            .try_into()
            .expect("length checked in new");
        self.at += N;
        b
    }
    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    pub fn i32(&mut self) -> i32 {
        i32::from_le_bytes(self.take())
    }
    pub fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.take())
    }
    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        self.take()
    }
}

/// Defines a row struct with its encoding: the fields, in order, with
/// their codec (`u8`, `u32`, `i32`, `i64` or `bytes` of a fixed width).
macro_rules! row {
    ($(#[$m:meta])* $name:ident, $table:expr, $len:expr,
     { $($field:ident : $kind:ident $(<$n:literal>)?),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name { $(pub $field: row!(@ty $kind $($n)?)),* }
        impl $name {
            pub const LEN: usize = $len;
            pub fn encode(&self) -> Vec<u8> {
                let mut w = Writer::with_capacity(Self::LEN);
                $( row!(@put w, self.$field, $kind $($n)?); )*
                debug_assert_eq!(w.0.len(), Self::LEN);
                w.0
            }
            pub fn decode(row: &[u8]) -> Result<Self> {
                let mut r = Reader::new(row, Self::LEN, $table)?;
                Ok($name { $($field: row!(@get r, $kind $($n)?)),* })
            }
        }
    };
    (@ty u8) => { u8 };
    (@ty u32) => { u32 };
    (@ty i32) => { i32 };
    (@ty i64) => { i64 };
    (@ty bytes $n:literal) => { [u8; $n] };
    (@put $w:ident, $v:expr, bytes $n:literal) => { $w.0.extend_from_slice(&$v) };
    (@put $w:ident, $v:expr, $kind:ident) => { $w.$kind($v) };
    (@get $r:ident, bytes $n:literal) => { $r.bytes::<$n>() };
    (@get $r:ident, $kind:ident) => { $r.$kind() };
}

row!(Warehouse, WAREHOUSE, 93, { ytd: i64, tax: i32, rest: bytes<81> });
row!(District, DISTRICT, 97, { ytd: i64, tax: i32, next_o_id: u32, rest: bytes<81> });
row!(
    /// `data` is C_DATA (500 bytes); `rest` the address and phone.
    Customer, CUSTOMER, 667, {
    balance: i64, ytd_payment: i64, payment_cnt: u32, delivery_cnt: u32,
    discount: i32, credit_lim: i64, credit: bytes<2>, first: bytes<16>,
    middle: bytes<2>, last: bytes<16>, since: i64, rest: bytes<87>, data: bytes<500>,
});
row!(History, HISTORY, 54, {
    c_id: u32, c_d: u8, c_w: u32, d: u8, w: u32, date: i64, amount: i64, data: bytes<24>,
});
row!(Order, ORDERS, 15, { c_id: u32, entry_d: i64, carrier_id: u8, ol_cnt: u8, all_local: u8 });
row!(OrderLine, ORDER_LINE, 49, {
    i_id: u32, supply_w: u32, delivery_d: i64, quantity: u8, amount: i64, dist_info: bytes<24>,
});
row!(Item, ITEM, 86, { im_id: u32, price: i64, name: bytes<24>, data: bytes<50> });
row!(Stock, STOCK, 310, {
    quantity: i32, ytd: i64, order_cnt: u32, remote_cnt: u32, dist: bytes<240>, data: bytes<50>,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_as_their_columns() {
        assert!(k_wdi(1, 2, 300) < k_wdi(1, 3, 1));
        assert!(k_wdi(1, 10, 5) < k_wdi(2, 1, 1));
        assert!(k_order_line(1, 1, 7, 15) < k_order_line(1, 1, 8, 1));
        assert!(
            k_customer_name(1, 1, b"ABLE", b"Z", 9) < k_customer_name(1, 1, b"ABLEBAR", b"A", 1)
        );
        let p = k_name_prefix(1, 1, b"ABLE");
        assert!(k_customer_name(1, 1, b"ABLE  ", b"x", 3).starts_with(&p));
        assert!(prefix_end(&p).as_slice() > &k_customer_name(1, 1, b"ABLE", b"zzz", u32::MAX)[..]);
        assert_eq!(
            name_key_customer(&k_customer_name(3, 4, b"A", b"B", 77)),
            Some(77)
        );
        assert_eq!(parse_wdi(&k_wdi(5, 6, 7)), Some((5, 6, 7)));
    }

    #[test]
    fn rows_round_trip_at_their_documented_lengths() {
        let s = Stock {
            quantity: -3,
            ytd: 5,
            order_cnt: 6,
            remote_cnt: 7,
            dist: [b'd'; 240],
            data: [b'x'; 50],
        };
        let b = s.encode();
        assert_eq!(b.len(), 310);
        assert_eq!(Stock::decode(&b).unwrap(), s);
        assert!(Stock::decode(&b[1..])
            .unwrap_err()
            .to_string()
            .contains("stock"));
        let o = Order {
            c_id: 1,
            entry_d: 2,
            carrier_id: 0,
            ol_cnt: 15,
            all_local: 1,
        };
        assert_eq!(Order::decode(&o.encode()).unwrap(), o);
    }
}
