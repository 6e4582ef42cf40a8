//! TPC-C over the wire: the embedded workload's load, inputs and mix,
//! driven through the `postgres` client against any server that speaks
//! PostgreSQL's protocol (PostgreSQL, `untorn serve`), or through the
//! `mysql` client against MariaDB, by the same code and statements.
//!
//! - [`conn`]: a connection over either protocol, chosen by the URL;
//! - [`dialect`]: MariaDB's text of the statements, derived;
//! - [`value`]: parameters and columns as one small value type;
//! - [`schema`]: the CREATE statements and the COPY text of the rows;
//! - [`load`]: COPY ... FROM STDIN (MariaDB: multi-row INSERTs) of the
//!   rows [`super::load`] generates, over several connections;
//! - [`txn`]: the five transactions as prepared statements;
//! - [`check`]: consistency conditions 1-4 through SQL;
//! - [`run`]: clients, the measured run and its summary.
//!
//! The statements keep to the forms at the end of
//! `tpcc-wire-schema.sql`: every row reached through its primary key or an
//! index prefix, no joins, subqueries or sums over int8. Parameters are
//! typed by the client (`prepare_typed`), so every server types them
//! alike. A deadlock or serialization failure (SQLSTATE 40P01, 40001;
//! MySQL errors 1213 and 1205, a lock wait timeout) rolls back and
//! retries the transaction with the same inputs.

pub mod check;
pub mod conn;
pub mod dialect;
pub mod load;
pub mod run;
pub mod schema;
pub mod txn;
pub mod value;

use super::Tpcc;
pub use conn::{Conn, Target, Ty};
use std::fmt;

/// What went wrong talking to the server.
#[derive(Debug)]
pub enum WireError {
    /// The server refused a statement.
    Sql {
        /// The SQLSTATE.
        code: String,
        /// MySQL's error number (none from PostgreSQL).
        number: Option<u16>,
        message: String,
        statement: String,
    },
    /// The connection failed or dropped, or a value did not convert.
    Client { message: String, statement: String },
    /// Anything else (a bad URL, data not as expected).
    Invalid(String),
}

pub type Result<T, E = WireError> = std::result::Result<T, E>;

impl WireError {
    /// A deadlock, a serialization failure or (MySQL) a lock wait timeout:
    /// retry the transaction. InnoDB's timeout undoes only the statement,
    /// so the retry's ROLLBACK is needed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, WireError::Sql { code, number, .. }
            if code == "40P01" || code == "40001" || matches!(number, Some(1213 | 1205)))
    }

    pub fn at(e: postgres::Error, statement: &str) -> WireError {
        let statement = statement.to_string();
        match e.as_db_error() {
            Some(db) => WireError::Sql {
                code: db.code().code().to_string(),
                number: None,
                message: db.message().to_string(),
                statement,
            },
            None => {
                // "error connecting to server" says why only in its source.
                let mut message = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    message = format!("{message}: {s}");
                    source = s.source();
                }
                WireError::Client { message, statement }
            }
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Sql {
                code,
                number: None,
                message,
                statement,
            } => write!(f, "SQLSTATE {code}: {message}; statement: {statement}"),
            WireError::Sql {
                code,
                number: Some(n),
                message,
                statement,
            } => write!(
                f,
                "SQLSTATE {code} (error {n}): {message}; statement: {statement}"
            ),
            WireError::Client { message, statement } => {
                write!(f, "{message}; statement: {statement}")
            }
            WireError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for WireError {}

impl From<WireError> for crate::error::Error {
    fn from(e: WireError) -> Self {
        crate::error::Error::Invalid(format!("tpcc: {e}"))
    }
}

/// Adds the statement to a client error.
pub trait At<T> {
    fn at(self, statement: &str) -> Result<T>;
}

impl<T> At<T> for std::result::Result<T, postgres::Error> {
    fn at(self, statement: &str) -> Result<T> {
        self.map_err(|e| WireError::at(e, statement))
    }
}

impl<T> At<T> for std::result::Result<T, mysql::Error> {
    fn at(self, statement: &str) -> Result<T> {
        self.map_err(|e| match e {
            mysql::Error::MySqlError(e) => WireError::Sql {
                code: e.state,
                number: Some(e.code),
                message: e.message,
                statement: statement.to_string(),
            },
            e => WireError::Client {
                message: e.to_string(),
                statement: statement.to_string(),
            },
        })
    }
}

/// Parses `postgres://user@host:port/dbname` or `mysql://...` (see
/// [`Target::parse`]).
pub fn config(url: &str) -> Result<Target> {
    Target::parse(url)
}

/// The largest n such that `exists(1..=n)` (0 if not even 1), for ids
/// loaded as 1..=n: doubling, then bisection.
fn largest(mut exists: impl FnMut(u32) -> Result<bool>) -> Result<u32> {
    if !exists(1)? {
        return Ok(0);
    }
    let (mut lo, mut hi) = (1u32, 2u32);
    while exists(hi)? {
        lo = hi;
        hi = hi
            .checked_mul(2)
            .ok_or_else(|| WireError::Invalid("too many rows".into()))?;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The scale of the loaded database (warehouses, items, customers per
/// district), found by point reads.
pub fn loaded_scale(c: &mut Conn) -> Result<Tpcc> {
    let mut probe = |sql: &str, fixed: &[i32]| -> Result<u32> {
        let st = c.prepare(sql, &vec![Ty::I4; fixed.len() + 1])?;
        largest(|n| {
            let n = n as i32;
            let mut params: Vec<&dyn value::Param> =
                fixed.iter().map(|v| v as &dyn value::Param).collect();
            params.push(&n);
            Ok(!st.query(c, &params)?.is_empty())
        })
    };
    let warehouses = probe("SELECT w_id FROM warehouse WHERE w_id = $1", &[])?;
    let items = probe("SELECT i_id FROM item WHERE i_id = $1", &[])?;
    let customers = probe(
        "SELECT c_id FROM customer WHERE c_w_id = $1 AND c_d_id = $2 AND c_id = $3",
        &[1, 1],
    )?;
    if warehouses == 0 || items == 0 || customers == 0 {
        return Err(WireError::Invalid(format!(
            "the database holds no TPC-C load ({warehouses} warehouses, {items} items, \
             {customers} customers in district 1); run `untorn tpcc load` first"
        )));
    }
    Ok(Tpcc {
        warehouses,
        items,
        customers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn largest_finds_the_last_id() {
        for n in [0u32, 1, 2, 3, 7, 8, 9, 100, 3000, 100_000] {
            let mut calls = 0;
            let got = largest(|i| {
                calls += 1;
                Ok(i <= n)
            })
            .unwrap();
            assert_eq!(got, n);
            assert!(calls <= 40, "{calls} probes for {n}");
        }
    }

    #[test]
    fn errors_name_the_statement() {
        let e = WireError::Client {
            message: "connection closed".into(),
            statement: "COMMIT".into(),
        };
        assert_eq!(e.to_string(), "connection closed; statement: COMMIT");
        assert!(!e.is_retryable());
        let sql = |code: &str, number| WireError::Sql {
            code: code.into(),
            number,
            message: "deadlock detected".into(),
            statement: "SELECT 1".into(),
        };
        let e = sql("40P01", None);
        assert!(e.is_retryable());
        assert!(e
            .to_string()
            .starts_with("SQLSTATE 40P01: deadlock detected"));
        // MySQL: a deadlock (40001) and a lock wait timeout (HY000, 1205)
        // are retried; a duplicate key (23000, 1062) is not.
        assert!(sql("40001", Some(1213)).is_retryable());
        assert!(sql("HY000", Some(1205)).is_retryable());
        assert!(!sql("23000", Some(1062)).is_retryable());
        assert!(sql("HY000", Some(1205))
            .to_string()
            .starts_with("SQLSTATE HY000 (error 1205): "));
        assert!(config("postgres://u@127.0.0.1:5/db").is_ok());
        assert!(config("http://x y").is_err());
    }
}
