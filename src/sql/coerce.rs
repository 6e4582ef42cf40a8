//! A value as its column stores it: typed, range-checked, char(n)
//! padded, NULL refused for NOT NULL columns.

use super::catalog::ColumnDef;
use super::expr::as_int;
use super::types::{codes, SqlError, SqlType, Value};

/// A value as column `col` stores it: typed, range-checked, char(n)
/// padded, NULL refused for NOT NULL columns.
pub fn store_value(v: Value, col: &ColumnDef) -> Result<Value, SqlError> {
    if v == Value::Null {
        if col.not_null {
            return Err(SqlError::new(
                codes::NOT_NULL_VIOLATION,
                format!(
                    "null value in column \"{}\" violates not-null constraint",
                    col.name
                ),
            ));
        }
        return Ok(v);
    }
    let text = |v: Value| match v {
        Value::Text(s) => Ok(s),
        Value::Int(x) => Ok(x.to_string()),
        Value::Bool(b) => Ok(if b { "true" } else { "false" }.into()),
        Value::Timestamp(_) | Value::Null => Err(SqlError::new(
            codes::DATATYPE_MISMATCH,
            "a text value was expected",
        )),
    };
    let too_long = |n: u32| {
        SqlError::new(
            codes::STRING_DATA_RIGHT_TRUNCATION,
            format!("value too long for type character varying({n})"),
        )
    };
    Ok(match col.ty {
        SqlType::Int4 => {
            let x = as_int(&v)?.expect("not null");
            if col.smallint && i16::try_from(x).is_err() {
                return Err(SqlError::new(
                    codes::NUMERIC_VALUE_OUT_OF_RANGE,
                    "smallint out of range",
                ));
            }
            if i32::try_from(x).is_err() {
                return Err(SqlError::new(
                    codes::NUMERIC_VALUE_OUT_OF_RANGE,
                    "integer out of range",
                ));
            }
            Value::Int(x)
        }
        SqlType::Int8 => Value::Int(as_int(&v)?.expect("not null")),
        SqlType::Bpchar(n) => {
            let s = text(v)?;
            let t = s.trim_end_matches(' ');
            let len = t.chars().count();
            if len > n as usize {
                return Err(SqlError::new(
                    codes::STRING_DATA_RIGHT_TRUNCATION,
                    format!("value too long for type character({n})"),
                ));
            }
            let mut out = String::with_capacity(n as usize);
            out.push_str(t);
            out.extend(std::iter::repeat_n(' ', n as usize - len));
            Value::Text(out)
        }
        SqlType::Varchar(Some(n)) => {
            let s = text(v)?;
            if s.chars().count() > n as usize {
                if s.trim_end_matches(' ').chars().count() > n as usize {
                    return Err(too_long(n));
                }
                Value::Text(s.chars().take(n as usize).collect())
            } else {
                Value::Text(s)
            }
        }
        SqlType::Varchar(None) | SqlType::Text | SqlType::Char | SqlType::Unknown => {
            Value::Text(text(v)?)
        }
        SqlType::Bool => match v {
            Value::Bool(b) => Value::Bool(b),
            Value::Text(s) => match s.trim().to_ascii_lowercase().as_str() {
                "t" | "true" | "yes" | "on" | "1" => Value::Bool(true),
                "f" | "false" | "no" | "off" | "0" => Value::Bool(false),
                _ => {
                    return Err(SqlError::new(
                        codes::INVALID_TEXT_REPRESENTATION,
                        format!("invalid input syntax for type boolean: \"{s}\""),
                    ))
                }
            },
            _ => {
                return Err(SqlError::new(
                    codes::DATATYPE_MISMATCH,
                    "a boolean was expected",
                ))
            }
        },
        SqlType::Timestamp => match v {
            Value::Timestamp(t) => Value::Timestamp(t),
            Value::Text(s) => Value::Timestamp(super::timestamp::parse(&s)?),
            _ => {
                return Err(SqlError::new(
                    codes::DATATYPE_MISMATCH,
                    "a timestamp was expected",
                ))
            }
        },
    })
}
