//! The values the driver sends and reads, in one small type for both
//! protocols: [`Val`] is what a parameter becomes ([`Param`]) and what a
//! column is read as ([`FromVal`]). PostgreSQL gets each parameter in the
//! type its statement was prepared with; MySQL gets integers, text and
//! timestamps as text, which the server converts.

use super::schema::timestamp;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use std::time::{SystemTime, UNIX_EPOCH};

/// A parameter or column value.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Null,
    Int(i64),
    Text(String),
    /// Microseconds since 1970 (UTC).
    Time(i64),
}

/// Something a statement takes as a parameter.
pub trait Param: std::fmt::Debug + Sync {
    fn val(&self) -> Val;
}

impl Param for i32 {
    fn val(&self) -> Val {
        Val::Int(i64::from(*self))
    }
}

impl Param for i64 {
    fn val(&self) -> Val {
        Val::Int(*self)
    }
}

impl Param for String {
    fn val(&self) -> Val {
        Val::Text(self.clone())
    }
}

impl Param for SystemTime {
    fn val(&self) -> Val {
        let us = match self.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_micros() as i64,
            Err(e) => -(e.duration().as_micros() as i64),
        };
        Val::Time(us)
    }
}

impl<T: Param> Param for Option<T> {
    fn val(&self) -> Val {
        self.as_ref().map_or(Val::Null, Param::val)
    }
}

/// What a column is read as.
pub trait FromVal: Sized {
    /// The value back when it is not of this type.
    fn from_val(v: Val) -> Result<Self, Val>;
}

impl FromVal for Val {
    fn from_val(v: Val) -> Result<Self, Val> {
        Ok(v)
    }
}

impl FromVal for i64 {
    fn from_val(v: Val) -> Result<Self, Val> {
        match v {
            Val::Int(i) => Ok(i),
            // MySQL's sum() of integers is a DECIMAL, sent as its text.
            Val::Text(t) => t.parse().map_err(|_| Val::Text(t)),
            v => Err(v),
        }
    }
}

impl FromVal for i32 {
    fn from_val(v: Val) -> Result<Self, Val> {
        let i = i64::from_val(v)?;
        i32::try_from(i).map_err(|_| Val::Int(i))
    }
}

impl FromVal for String {
    fn from_val(v: Val) -> Result<Self, Val> {
        match v {
            Val::Text(t) => Ok(t),
            v => Err(v),
        }
    }
}

impl<T: FromVal> FromVal for Option<T> {
    fn from_val(v: Val) -> Result<Self, Val> {
        match v {
            Val::Null => Ok(None),
            v => T::from_val(v).map(Some),
        }
    }
}

/// PostgreSQL: the value in the parameter's prepared type (an integer as
/// int2, int4 or int8), so one [`Val`] serves every statement.
impl ToSql for Val {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Val::Null => Ok(IsNull::Yes),
            Val::Int(i) => match *ty {
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                _ => i.to_sql(ty, out),
            },
            Val::Text(t) => t.as_str().to_sql(ty, out),
            Val::Time(us) => system_time(*us).to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn system_time(us: i64) -> SystemTime {
    let d = std::time::Duration::from_micros(us.unsigned_abs());
    if us >= 0 {
        UNIX_EPOCH + d
    } else {
        UNIX_EPOCH - d
    }
}

/// Column `i` of a PostgreSQL row, by its type.
pub fn from_pg(row: &postgres::Row, i: usize) -> Result<Val, postgres::Error> {
    let ty = row
        .columns()
        .get(i)
        .map_or(Type::INT8, |c| c.type_().clone());
    let v = match ty {
        Type::INT2 => row
            .try_get::<_, Option<i16>>(i)?
            .map(|v| Val::Int(v.into())),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)?
            .map(|v| Val::Int(v.into())),
        Type::TIMESTAMP => row.try_get::<_, Option<SystemTime>>(i)?.map(|t| t.val()),
        Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(Val::Int),
        // Text of any kind; another type is refused by try_get.
        _ => row.try_get::<_, Option<String>>(i)?.map(Val::Text),
    };
    Ok(v.unwrap_or(Val::Null))
}

/// A MySQL value as a [`Val`]: text as sent, DATETIME to microseconds.
pub fn from_mysql(v: &mysql::Value) -> Val {
    use mysql::Value as V;
    match v {
        V::NULL => Val::Null,
        V::Int(i) => Val::Int(*i),
        V::UInt(u) => i64::try_from(*u).map_or_else(|_| Val::Text(u.to_string()), Val::Int),
        V::Bytes(b) => Val::Text(String::from_utf8_lossy(b).into_owned()),
        V::Float(f) => Val::Text(f.to_string()),
        V::Double(f) => Val::Text(f.to_string()),
        &V::Date(y, mo, d, h, mi, s, us) => {
            let text = format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}");
            crate::sql::timestamp::parse(&text)
                .map_or(Val::Text(text), |t| Val::Time(t + US_1970_TO_2000))
        }
        V::Time(..) => Val::Text(v.as_sql(true)),
    }
}

const US_1970_TO_2000: i64 = 946_684_800_000_000;

/// A MySQL parameter: integers as integers, the rest as text (a
/// timestamp as `YYYY-MM-DD HH:MM:SS[.ffffff]`, which DATETIME parses).
pub fn to_mysql(v: &Val) -> mysql::Value {
    match v {
        Val::Null => mysql::Value::NULL,
        Val::Int(i) => mysql::Value::Int(*i),
        Val::Text(t) => mysql::Value::Bytes(t.as_bytes().to_vec()),
        Val::Time(us) => mysql::Value::Bytes(timestamp(*us).into_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_convert_both_ways() {
        assert_eq!(5i32.val(), Val::Int(5));
        assert_eq!(None::<i32>.val(), Val::Null);
        assert_eq!(Some("x".to_string()).val(), Val::Text("x".into()));
        assert_eq!(
            (UNIX_EPOCH + std::time::Duration::from_micros(7)).val(),
            Val::Time(7)
        );
        assert_eq!(i32::from_val(Val::Int(-3)), Ok(-3));
        assert_eq!(i32::from_val(Val::Int(1 << 40)), Err(Val::Int(1 << 40)));
        // MySQL's sum() of integers: a DECIMAL's text.
        assert_eq!(i64::from_val(Val::Text("12345".into())), Ok(12345));
        assert_eq!(Option::<i64>::from_val(Val::Null), Ok(None));
        assert_eq!(String::from_val(Val::Int(1)), Err(Val::Int(1)));
        let load = crate::lab::workload::tpcc::load::LOAD_DATE;
        assert_eq!(
            to_mysql(&Val::Time(load)),
            mysql::Value::Bytes(b"2026-01-01 00:00:00".to_vec())
        );
        assert_eq!(
            from_mysql(&mysql::Value::Date(2026, 1, 1, 0, 0, 0, 0)),
            Val::Time(load)
        );
        assert_eq!(
            from_mysql(&mysql::Value::Bytes(b"BC".to_vec())),
            Val::Text("BC".into())
        );
        assert_eq!(from_mysql(&mysql::Value::UInt(9)), Val::Int(9));
    }
}
