//! The statements are written once, in PostgreSQL's dialect (`$n`
//! parameters, the types of `tpcc-wire-schema.sql`); MariaDB's text is
//! derived from them here, and the COPY text of the load is decoded into
//! the parameters of MariaDB's multi-row INSERTs.

use super::value::Val;
use std::borrow::Cow;

/// Which SQL a server speaks (chosen by the URL's scheme).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    MariaDb,
}

/// `$n` parameters as MySQL's `?`, in order of appearance, and for each
/// `?` the index (from 0) of the parameter it takes: `$2 ... $1` gives
/// `? ... ?` and `[1, 0]`. Quoted text is copied as it is.
pub fn placeholders(sql: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(sql.len());
    let mut order = Vec::new();
    let mut quote = None;
    let mut chars = sql.char_indices().peekable();
    while let Some((_, ch)) = chars.next() {
        match (quote, ch) {
            (Some(q), _) if ch == q => quote = None,
            (None, '\'' | '"') => quote = Some(ch),
            (None, '$') if chars.peek().is_some_and(|(_, c)| c.is_ascii_digit()) => {
                let mut n = 0usize;
                while let Some(&(_, d)) = chars.peek().filter(|(_, c)| c.is_ascii_digit()) {
                    n = n * 10 + (d as usize - '0' as usize);
                    chars.next();
                }
                out.push('?');
                order.push(n.saturating_sub(1));
                continue;
            }
            _ => {}
        }
        out.push(ch);
    }
    (out, order)
}

/// A CREATE statement of [`super::schema::SCHEMA`] in `dialect`.
///
/// MariaDB: `timestamp` becomes `datetime(6)`, since MariaDB's TIMESTAMP
/// keeps whole seconds, ends in 2038, and (before 10.10) gives a table's
/// first one a default and an update of the current time; tables are
/// InnoDB. int4 and int8 are MariaDB's synonyms of INT and BIGINT.
pub fn create(sql: &str, dialect: Dialect) -> Cow<'_, str> {
    match dialect {
        Dialect::Postgres => Cow::Borrowed(sql),
        Dialect::MariaDb => {
            let mut s = sql.replace(" timestamp", " datetime(6)");
            if s.starts_with("CREATE TABLE") {
                s.push_str(" ENGINE=InnoDB");
            }
            Cow::Owned(s)
        }
    }
}

/// The rows of COPY text ([`super::schema::CopyText`]) as values: `\N`
/// is NULL, every other field text with its escapes undone (MariaDB
/// converts text to a column's type).
pub fn copy_rows(text: &[u8]) -> Vec<Vec<Val>> {
    let field = |f: &[u8]| {
        if f == b"\\N" {
            return Val::Null;
        }
        let mut out = Vec::with_capacity(f.len());
        let mut bytes = f.iter();
        while let Some(&b) = bytes.next() {
            if b != b'\\' {
                out.push(b);
                continue;
            }
            match bytes.next() {
                Some(b't') => out.push(b'\t'),
                Some(b'n') => out.push(b'\n'),
                Some(b'r') => out.push(b'\r'),
                Some(&other) => out.push(other),
                None => out.push(b'\\'),
            }
        }
        Val::Text(String::from_utf8_lossy(&out).into_owned())
    };
    text.split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| line.split(|&b| b == b'\t').map(field).collect())
        .collect()
}

/// `INSERT INTO table VALUES (?, ...), ...` for `rows` rows of `columns`.
pub fn insert_rows(table: &str, columns: usize, rows: usize) -> String {
    let row = format!("({})", vec!["?"; columns].join(", "));
    format!("INSERT INTO {table} VALUES {}", vec![row; rows].join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::schema::{CopyText, SCHEMA};
    use super::*;

    #[test]
    fn placeholders_become_question_marks_in_order() {
        let (sql, order) = placeholders("UPDATE t SET a = $1 WHERE b = $2 AND c = $10");
        assert_eq!(sql, "UPDATE t SET a = ? WHERE b = ? AND c = ?");
        assert_eq!(order, [0, 1, 9]);
        let (sql, order) = placeholders("SELECT $2, '$1', \"$3\", $1, $ x, $");
        assert_eq!(sql, "SELECT ?, '$1', \"$3\", ?, $ x, $");
        assert_eq!(order, [1, 0]);
        assert_eq!(placeholders("BEGIN"), ("BEGIN".to_string(), vec![]));
    }

    #[test]
    fn the_schema_in_mariadbs_dialect() {
        for sql in SCHEMA {
            assert_eq!(create(sql, Dialect::Postgres), sql);
            let m = create(sql, Dialect::MariaDb);
            assert!(!m.contains("timestamp"), "{m}");
            assert_eq!(
                m.matches("datetime(6)").count(),
                sql.matches(" timestamp").count()
            );
            assert_eq!(
                m.ends_with(" ENGINE=InnoDB"),
                sql.starts_with("CREATE TABLE")
            );
        }
        let history = create(SCHEMA[4], Dialect::MariaDb);
        assert!(
            history.contains("h_date datetime(6), h_amount int8"),
            "{history}"
        );
    }

    #[test]
    fn copy_text_decodes_into_values() {
        let mut t = CopyText::new();
        t.int(-5).text(b"a\\b\tc\nd\re  ").null().text(b"").end();
        t.int(7u8).time(1).end();
        assert_eq!(
            copy_rows(&t.buf),
            vec![
                vec![
                    Val::Text("-5".into()),
                    Val::Text("a\\b\tc\nd\re".into()),
                    Val::Null,
                    Val::Text(String::new()),
                ],
                vec![
                    Val::Text("7".into()),
                    Val::Text("1970-01-01 00:00:00.000001".into())
                ],
            ]
        );
        assert_eq!(
            insert_rows("t", 2, 2),
            "INSERT INTO t VALUES (?, ?), (?, ?)"
        );
    }
}
