//! Values to and from their wire forms: parameters arrive as text or
//! binary per Bind's format codes; results leave as text or binary per
//! the portal's result formats (sysbench asks for binary, pgbench for
//! text).

use crate::sql::{codes, timestamp, SqlError, SqlType, Value};
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::api::Type;
use pgwire::messages::data::DataRow;

/// One parameter's bytes as the value its type calls for; `None` is SQL
/// NULL.
pub fn decode_param(
    bytes: Option<&[u8]>,
    ty: SqlType,
    binary: bool,
    declared: Option<&Type>,
) -> Result<Value, SqlError> {
    let Some(bytes) = bytes else {
        return Ok(Value::Null);
    };
    if binary {
        return decode_binary(bytes, ty, declared);
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| SqlError::new("22021", "invalid byte sequence for encoding \"UTF8\""))?;
    Ok(match ty {
        SqlType::Int4 | SqlType::Int8 => Value::Int(parse_int(text, ty)?),
        SqlType::Bool => Value::Bool(parse_bool(text)?),
        SqlType::Timestamp => Value::Timestamp(timestamp::parse(text)?),
        // Text, char types and untyped parameters: the statement coerces.
        _ => Value::Text(text.to_string()),
    })
}

/// A binary integer is as wide as the type the client declared for it
/// (int2 2 bytes, int4 4, int8 8), or, undeclared, as the type the
/// statement gave it, as PostgreSQL's int4recv reads exactly 4 bytes:
/// fewer are 08P01 "insufficient data left in message", more 22P03
/// (before, any of 2, 4 or 8 bytes was taken for any integer).
fn decode_binary(bytes: &[u8], ty: SqlType, declared: Option<&Type>) -> Result<Value, SqlError> {
    let bad = || {
        SqlError::new(
            codes::PROTOCOL_VIOLATION,
            format!(
                "incorrect binary data format in a {ty} parameter ({} bytes)",
                bytes.len()
            ),
        )
    };
    Ok(match ty {
        SqlType::Int4 | SqlType::Int8 => {
            let width = match declared {
                Some(t) if *t == Type::INT2 => 2,
                Some(t) if *t == Type::INT4 => 4,
                Some(t) if *t == Type::INT8 => 8,
                _ if ty == SqlType::Int8 => 8,
                _ => 4,
            };
            if bytes.len() != width {
                return Err(SqlError::new(
                    match bytes.len() < width {
                        true => codes::PROTOCOL_VIOLATION,
                        false => codes::INVALID_BINARY_REPRESENTATION,
                    },
                    match bytes.len() < width {
                        true => "insufficient data left in message".to_string(),
                        false => "incorrect binary data format".to_string(),
                    },
                ));
            }
            Value::Int(match width {
                2 => i16::from_be_bytes(bytes.try_into().map_err(|_| bad())?) as i64,
                4 => i32::from_be_bytes(bytes.try_into().map_err(|_| bad())?) as i64,
                _ => i64::from_be_bytes(bytes.try_into().map_err(|_| bad())?),
            })
        }
        SqlType::Bool => match bytes {
            [b] => Value::Bool(*b != 0),
            _ => return Err(bad()),
        },
        SqlType::Timestamp => {
            Value::Timestamp(i64::from_be_bytes(bytes.try_into().map_err(|_| bad())?))
        }
        _ => {
            Value::Text(String::from_utf8(bytes.to_vec()).map_err(|_| {
                SqlError::new("22021", "invalid byte sequence for encoding \"UTF8\"")
            })?)
        }
    })
}

/// `e`, a parameter's, naming which (1-based), as PostgreSQL's "in bind
/// parameter N".
pub fn in_parameter(e: SqlError, i: usize) -> SqlError {
    let message = format!("{} in bind parameter {}", e.message, i + 1);
    SqlError::new(e.code, message)
}

fn parse_int(text: &str, ty: SqlType) -> Result<i64, SqlError> {
    let v: i64 = text.trim().parse().map_err(|_| {
        SqlError::new(
            codes::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type {ty}: \"{text}\""),
        )
    })?;
    if ty == SqlType::Int4 && i32::try_from(v).is_err() {
        return Err(SqlError::new(
            codes::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("value \"{text}\" is out of range for type integer"),
        ));
    }
    Ok(v)
}

fn parse_bool(text: &str) -> Result<bool, SqlError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "t" | "true" | "yes" | "on" | "1" | "y" => Ok(true),
        "f" | "false" | "no" | "off" | "0" | "n" => Ok(false),
        _ => Err(SqlError::new(
            codes::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type boolean: \"{text}\""),
        )),
    }
}

/// RowDescription's field for a result column in the given format.
pub fn field_info(name: &str, ty: SqlType, format: FieldFormat) -> FieldInfo {
    let pg_type = Type::from_oid(ty.oid()).unwrap_or(Type::UNKNOWN);
    FieldInfo::new(name.to_string(), None, None, pg_type, format)
        .with_type_modifier(ty.typmod())
        .with_type_size(ty.typlen())
}

/// One DataRow: each value in its column's type and format.
pub fn encode_row(values: &[Value], fields: &[FieldInfo], types: &[SqlType]) -> DataRow {
    let mut data = bytes::BytesMut::with_capacity(16 * values.len() + 64);
    for (i, value) in values.iter().enumerate() {
        let ty = types.get(i).copied().unwrap_or(SqlType::Text);
        let binary = fields
            .get(i)
            .is_some_and(|f| f.format() == FieldFormat::Binary);
        encode_value(&mut data, value, ty, binary);
    }
    DataRow::new(data, values.len() as i16)
}

fn encode_value(out: &mut bytes::BytesMut, value: &Value, ty: SqlType, binary: bool) {
    use bytes::BufMut;
    let start = out.len();
    out.put_i32(0);
    match value {
        Value::Null => {
            out[start..start + 4].copy_from_slice(&(-1i32).to_be_bytes());
            return;
        }
        Value::Int(v) if binary => match ty {
            SqlType::Int4 => out.put_i32(*v as i32),
            _ => out.put_i64(*v),
        },
        // Straight into the row's buffer: no String per value.
        Value::Int(v) => {
            let _ = std::fmt::Write::write_fmt(out, format_args!("{v}"));
        }
        Value::Bool(b) if binary => out.put_u8(*b as u8),
        Value::Bool(b) => out.put_slice(if *b { b"t" } else { b"f" }),
        Value::Text(s) => out.put_slice(s.as_bytes()),
        Value::Timestamp(us) if binary => out.put_i64(*us),
        Value::Timestamp(us) => out.put_slice(timestamp::format(*us).as_bytes()),
    }
    let len = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_decode_from_text_and_binary() {
        let int8 = 42i64.to_be_bytes();
        assert_eq!(
            decode_param(Some(&int8), SqlType::Int8, true, None).unwrap(),
            Value::Int(42)
        );
        assert_eq!(
            decode_param(Some(b"-2448"), SqlType::Int4, false, None).unwrap(),
            Value::Int(-2448)
        );
        assert_eq!(
            decode_param(None, SqlType::Int4, false, None).unwrap(),
            Value::Null
        );
        assert_eq!(
            decode_param(Some(b"abc"), SqlType::Unknown, false, None).unwrap(),
            Value::Text("abc".into())
        );
        let err = decode_param(Some(b"12x"), SqlType::Int4, false, None).unwrap_err();
        assert_eq!(err.code, codes::INVALID_TEXT_REPRESENTATION);
        let err = decode_param(Some(b"3000000000"), SqlType::Int4, false, None).unwrap_err();
        assert_eq!(err.code, codes::NUMERIC_VALUE_OUT_OF_RANGE);
        let err = decode_param(Some(&[1, 2, 3]), SqlType::Int8, true, None).unwrap_err();
        assert_eq!(err.code, codes::PROTOCOL_VIOLATION);
    }

    /// A binary integer is exactly as wide as its declared type, or, not
    /// declared, as the statement's: 2, 4 and 8 bytes were all taken for
    /// any integer before.
    #[test]
    fn binary_integers_are_as_wide_as_their_type() {
        let p = |bytes: &[u8], ty, declared: Option<Type>| {
            decode_param(Some(bytes), ty, true, declared.as_ref())
        };
        let two = 7i16.to_be_bytes();
        let four = 7i32.to_be_bytes();
        let eight = 7i64.to_be_bytes();
        assert_eq!(
            p(&two, SqlType::Int4, Some(Type::INT2)).unwrap(),
            Value::Int(7)
        );
        assert_eq!(p(&four, SqlType::Int4, None).unwrap(), Value::Int(7));
        assert_eq!(
            p(&eight, SqlType::Int4, Some(Type::INT8)).unwrap(),
            Value::Int(7)
        );
        assert_eq!(p(&eight, SqlType::Int8, None).unwrap(), Value::Int(7));
        assert_eq!(p(&two, SqlType::Int4, None).unwrap_err().code, "08P01");
        assert_eq!(p(&eight, SqlType::Int4, None).unwrap_err().code, "22P03");
        assert_eq!(
            p(&four, SqlType::Int4, Some(Type::INT2)).unwrap_err().code,
            "22P03"
        );
        assert_eq!(p(&four, SqlType::Int8, None).unwrap_err().code, "08P01");
        let e = in_parameter(p(&two, SqlType::Int4, None).unwrap_err(), 0);
        assert!(e.message.ends_with("in bind parameter 1"), "{e}");
    }

    #[test]
    fn rows_encode_each_column_in_its_format() {
        let fields = vec![
            field_info("c", SqlType::Bpchar(3), FieldFormat::Binary),
            field_info("sum", SqlType::Int8, FieldFormat::Binary),
            field_info("n", SqlType::Int4, FieldFormat::Text),
            field_info("x", SqlType::Int4, FieldFormat::Binary),
        ];
        let types = [
            SqlType::Bpchar(3),
            SqlType::Int8,
            SqlType::Int4,
            SqlType::Int4,
        ];
        let row = encode_row(
            &[
                Value::Text("ab ".into()),
                Value::Int(7),
                Value::Int(-12),
                Value::Null,
            ],
            &fields,
            &types,
        );
        assert_eq!(row.field_count, 4);
        let mut want = Vec::new();
        want.extend_from_slice(&3i32.to_be_bytes());
        want.extend_from_slice(b"ab ");
        want.extend_from_slice(&8i32.to_be_bytes());
        want.extend_from_slice(&7i64.to_be_bytes());
        want.extend_from_slice(&3i32.to_be_bytes());
        want.extend_from_slice(b"-12");
        want.extend_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(&row.data[..], &want[..]);
        assert_eq!(fields[0].type_modifier(), 7);
    }
}
