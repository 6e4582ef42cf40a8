//! One connection, over either protocol: the URL's scheme chooses
//! PostgreSQL's (`postgres://`, the `postgres` crate) or MySQL's
//! (`mysql://`, the `mysql` crate, for MariaDB). load, txn, check and run
//! see only [`Conn`], [`Prepared`] and [`Row`].
//!
//! A MySQL session is set to READ COMMITTED, PostgreSQL's default (which
//! the PostgreSQL connections keep), so both run the mix at the same
//! isolation level; an UPDATE counts the rows it matched (as PostgreSQL
//! does), not only those it changed; and a loopback URL stays on TCP (the
//! crate would move to the server's unix socket), as PostgreSQL's do.

use super::dialect::{self, Dialect};
use super::schema::CopyText;
use super::value::{from_mysql, from_pg, to_mysql, FromVal, Param, Val};
use super::{At, Result, WireError};
use mysql::prelude::Queryable;
use postgres::types::{ToSql, Type};
use postgres::NoTls;
use std::io::Write;

/// Where to connect, parsed from `--url`.
#[derive(Clone, Debug)]
pub enum Target {
    // Boxed as mysql's are: the two are of very different sizes.
    Postgres(Box<postgres::Config>),
    MySql(mysql::Opts),
}

/// A parameter's type, which PostgreSQL statements are prepared with (so
/// every server types them alike); MySQL needs none.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    I4,
    I8,
    Timestamp,
    Varchar,
    Char,
}

impl Ty {
    fn pg(self) -> Type {
        match self {
            Ty::I4 => Type::INT4,
            Ty::I8 => Type::INT8,
            Ty::Timestamp => Type::TIMESTAMP,
            Ty::Varchar => Type::VARCHAR,
            Ty::Char => Type::BPCHAR,
        }
    }
}

const READ_COMMITTED: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

/// MariaDB's rows per INSERT of the load (21,000 parameters at most, of
/// the 65,535 one statement may have).
const INSERT_ROWS: usize = 1_000;

impl Target {
    /// `mysql://user:password@host:port/db[?socket=PATH]`, or
    /// `postgres://user@host:port/db` (or any other form the `postgres`
    /// crate parses).
    pub fn parse(url: &str) -> Result<Target> {
        let bad = |e: &dyn std::fmt::Display| WireError::Invalid(format!("--url {url:?}: {e}"));
        if url.starts_with("mysql://") {
            let opts = mysql::Opts::from_url(url).map_err(|e| bad(&e))?;
            let mut b = mysql::OptsBuilder::from_opts(opts)
                .stmt_cache_size(0) // statements are kept by their owners
                .additional_capabilities(mysql::consts::CapabilityFlags::CLIENT_FOUND_ROWS)
                .init(vec![READ_COMMITTED]);
            if !url.contains("prefer_socket=") {
                b = b.prefer_socket(false);
            }
            return Ok(Target::MySql(b.into()));
        }
        url.parse::<postgres::Config>()
            .map(|c| Target::Postgres(Box::new(c)))
            .map_err(|e| bad(&e))
    }

    pub fn connect(&self) -> Result<Conn> {
        match self {
            Target::Postgres(c) => c
                .connect(NoTls)
                .at("(connecting)")
                .map(|c| Conn::Postgres(Box::new(c))),
            Target::MySql(o) => mysql::Conn::new(o.clone())
                .at("(connecting)")
                .map(Conn::MySql),
        }
    }
}

/// A connection to the server.
pub enum Conn {
    Postgres(Box<postgres::Client>),
    MySql(mysql::Conn),
}

/// A statement prepared on one connection.
pub struct Prepared {
    st: Statement,
    sql: String,
}

enum Statement {
    Postgres(postgres::Statement),
    /// The statement and, for each `?`, the parameter it takes.
    MySql(mysql::Statement, Vec<usize>),
}

/// A result row.
pub enum Row {
    Postgres(postgres::Row),
    MySql(mysql::Row),
}

pub type Params<'a> = &'a [&'a dyn Param];

impl Conn {
    pub fn dialect(&self) -> Dialect {
        match self {
            Conn::Postgres(_) => Dialect::Postgres,
            Conn::MySql(_) => Dialect::MariaDb,
        }
    }

    /// A statement without parameters or rows (BEGIN, COMMIT, DDL).
    pub fn simple(&mut self, sql: &str) -> Result<()> {
        match self {
            Conn::Postgres(c) => c.batch_execute(sql).at(sql),
            Conn::MySql(c) => c.query_drop(sql).at(sql),
        }
    }

    /// Whether the connection is known to be gone (no ROLLBACK then).
    pub fn is_closed(&self) -> bool {
        match self {
            Conn::Postgres(c) => c.is_closed(),
            Conn::MySql(_) => false,
        }
    }

    /// Prepares `sql`, written with `$n` parameters of types `types`.
    pub fn prepare(&mut self, sql: &str, types: &[Ty]) -> Result<Prepared> {
        let st = match self {
            Conn::Postgres(c) => {
                let types: Vec<Type> = types.iter().map(|t| t.pg()).collect();
                Statement::Postgres(c.prepare_typed(sql, &types).at(sql)?)
            }
            Conn::MySql(c) => {
                let (text, order) = dialect::placeholders(sql);
                Statement::MySql(c.prep(&text).at(sql)?, order)
            }
        };
        Ok(Prepared {
            st,
            sql: sql.to_string(),
        })
    }

    /// Runs `sql` once (prepared and dropped after).
    pub fn query_once(&mut self, sql: &str, types: &[Ty], p: Params<'_>) -> Result<Vec<Row>> {
        let st = self.prepare(sql, types)?;
        let rows = st.query(self, p);
        if let (Conn::MySql(c), Statement::MySql(s, _)) = (&mut *self, st.st) {
            c.close(s).at(sql)?;
        }
        rows
    }

    /// Loads COPY text's rows into `table`, as one transaction: COPY on
    /// PostgreSQL, INSERTs of [`INSERT_ROWS`] rows on MariaDB (no COPY).
    ///
    /// The COPY runs in an explicit block whose COMMIT reports how the
    /// commit went. Alone, it would commit at the Sync after CopyDone, and
    /// rust-postgres's `finish` returns at CommandComplete, never reading
    /// that Sync's answer: a commit that failed there looked loaded (a
    /// peers load lost 5,000 customers so).
    pub fn copy_in(&mut self, table: &str, text: &CopyText) -> Result<()> {
        let c = match self {
            Conn::Postgres(c) => {
                let sql = format!("COPY {table} FROM STDIN");
                c.batch_execute("BEGIN").at("BEGIN")?;
                let mut w = c.copy_in(&sql).at(&sql)?;
                w.write_all(&text.buf).map_err(|e| WireError::Client {
                    message: e.to_string(),
                    statement: sql.clone(),
                })?;
                let stored = w.finish().at(&sql)?;
                // A server that acknowledges fewer rows than were sent lost some.
                if stored != text.rows {
                    return Err(WireError::Invalid(format!(
                        "{sql}: the server stored {stored} of {} rows",
                        text.rows
                    )));
                }
                return c.batch_execute("COMMIT").at("COMMIT");
            }
            Conn::MySql(c) => c,
        };
        let rows = dialect::copy_rows(&text.buf);
        c.query_drop("BEGIN").at("BEGIN")?;
        for batch in rows.chunks(INSERT_ROWS) {
            let columns = batch[0].len();
            let sql = dialect::insert_rows(table, columns, batch.len());
            let params: Vec<mysql::Value> = batch.iter().flatten().map(to_mysql).collect();
            let st = c.prep(&sql).at(&sql)?;
            c.exec_drop(&st, params).at(&sql)?;
            c.close(st).at(&sql)?;
        }
        c.query_drop("COMMIT").at("COMMIT")
    }
}

impl Prepared {
    pub fn query(&self, c: &mut Conn, p: Params<'_>) -> Result<Vec<Row>> {
        match (c, &self.st) {
            (Conn::Postgres(c), Statement::Postgres(st)) => {
                let rows = with_pg_params(p, |p| c.query(st, p)).at(&self.sql)?;
                Ok(rows.into_iter().map(Row::Postgres).collect())
            }
            (Conn::MySql(c), Statement::MySql(st, order)) => {
                let rows: Vec<mysql::Row> = c.exec(st, mysql_params(p, order)).at(&self.sql)?;
                Ok(rows.into_iter().map(Row::MySql).collect())
            }
            _ => Err(self.other_connection()),
        }
    }

    pub fn one(&self, c: &mut Conn, p: Params<'_>) -> Result<Row> {
        self.query(c, p)?
            .into_iter()
            .next()
            .ok_or_else(|| WireError::Invalid(format!("no row from {} with {p:?}", self.sql)))
    }

    /// Rows the statement matched.
    pub fn execute(&self, c: &mut Conn, p: Params<'_>) -> Result<u64> {
        match (c, &self.st) {
            (Conn::Postgres(c), Statement::Postgres(st)) => {
                with_pg_params(p, |p| c.execute(st, p)).at(&self.sql)
            }
            (Conn::MySql(c), Statement::MySql(st, order)) => {
                c.exec_drop(st, mysql_params(p, order)).at(&self.sql)?;
                Ok(c.affected_rows())
            }
            _ => Err(self.other_connection()),
        }
    }

    /// Column `i` of `row` as `T`.
    pub fn get<T: FromVal>(&self, row: &Row, i: usize) -> Result<T> {
        column(row, i, &self.sql)
    }

    fn other_connection(&self) -> WireError {
        WireError::Invalid(format!("{} was prepared over the other protocol", self.sql))
    }
}

/// Column `i` of `row` (from `sql`, for errors) as `T`.
pub fn column<T: FromVal>(row: &Row, i: usize, sql: &str) -> Result<T> {
    let v = match row {
        Row::Postgres(r) => from_pg(r, i).at(sql)?,
        Row::MySql(r) => r
            .as_ref(i)
            .map(from_mysql)
            .ok_or_else(|| WireError::Client {
                message: format!("no column {i}"),
                statement: sql.to_string(),
            })?,
    };
    T::from_val(v).map_err(|v| WireError::Client {
        message: format!("column {i} ({v:?}) is not a {}", std::any::type_name::<T>()),
        statement: sql.to_string(),
    })
}

/// `f` of the parameters as PostgreSQL's.
fn with_pg_params<R>(p: Params<'_>, f: impl FnOnce(&[&(dyn ToSql + Sync)]) -> R) -> R {
    let vals: Vec<Val> = p.iter().map(|v| v.val()).collect();
    let refs: Vec<&(dyn ToSql + Sync)> = vals.iter().map(|v| v as _).collect();
    f(&refs)
}

/// The parameters in the order of the `?`s.
fn mysql_params(p: Params<'_>, order: &[usize]) -> Vec<mysql::Value> {
    order
        .iter()
        .map(|&i| p.get(i).map_or(mysql::Value::NULL, |v| to_mysql(&v.val())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_chooses_the_protocol() {
        let pg = Target::parse("postgres://u@127.0.0.1:5/db").unwrap();
        assert!(matches!(pg, Target::Postgres(_)));
        let Target::MySql(o) = Target::parse("mysql://root:pw@127.0.0.1:3307/tpcc").unwrap() else {
            panic!("not mysql");
        };
        assert_eq!(
            (
                o.get_tcp_port(),
                o.get_user(),
                o.get_pass(),
                o.get_db_name()
            ),
            (3307, Some("root"), Some("pw"), Some("tpcc"))
        );
        assert!(!o.get_prefer_socket());
        assert_eq!(o.get_init(), [READ_COMMITTED]);
        let Target::MySql(o) =
            Target::parse("mysql://root@localhost/tpcc?socket=/tmp/d/mysqld.sock").unwrap()
        else {
            panic!("not mysql");
        };
        assert_eq!(o.get_socket(), Some("/tmp/d/mysqld.sock"));
        assert!(Target::parse("mysql://x y").is_err());
        assert!(Target::parse("http://x y").is_err());
        assert_eq!(
            mysql_params(&[&1i32, &"a".to_string()], &[1, 0, 1]),
            [
                mysql::Value::Bytes(b"a".to_vec()),
                mysql::Value::Int(1),
                mysql::Value::Bytes(b"a".to_vec())
            ]
        );
    }
}
