//! The values, column types, results and errors the SQL layer and the
//! PostgreSQL-protocol server share.
//!
//! Types carry the PostgreSQL type OIDs they travel as, so the server
//! can describe a column without knowing the planner.

use std::fmt;

/// A column or parameter type, as PostgreSQL names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SqlType {
    Bool,
    Int4,
    Int8,
    /// `char(n)`: blank-padded to `n` characters on output.
    Bpchar(u32),
    /// `varchar` or `varchar(n)`.
    Varchar(Option<u32>),
    Text,
    /// `timestamp` without time zone, in microseconds since 2000-01-01.
    Timestamp,
    /// PostgreSQL's one-byte `"char"`.
    Char,
    /// A parameter whose type neither the client nor the statement fixed:
    /// it travels as text and is coerced when the statement runs.
    Unknown,
}

impl SqlType {
    /// The type OID on the wire (pg_type.oid).
    pub fn oid(self) -> u32 {
        match self {
            SqlType::Bool => 16,
            SqlType::Char => 18,
            SqlType::Int8 => 20,
            SqlType::Int4 => 23,
            SqlType::Text => 25,
            SqlType::Unknown => 705,
            SqlType::Bpchar(_) => 1042,
            SqlType::Varchar(_) => 1043,
            SqlType::Timestamp => 1114,
        }
    }

    /// The type from a client-declared OID; `None` for 0 (not declared)
    /// and for types this server does not know.
    pub fn from_oid(oid: u32) -> Option<SqlType> {
        Some(match oid {
            16 => SqlType::Bool,
            18 => SqlType::Char,
            20 => SqlType::Int8,
            21 | 23 => SqlType::Int4,
            25 => SqlType::Text,
            1042 => SqlType::Bpchar(1),
            1043 => SqlType::Varchar(None),
            1114 => SqlType::Timestamp,
            _ => return None,
        })
    }

    /// The type modifier RowDescription carries (-1 when none): for
    /// `char(n)` and `varchar(n)` it is n + 4, as in PostgreSQL.
    pub fn typmod(self) -> i32 {
        match self {
            SqlType::Bpchar(n) | SqlType::Varchar(Some(n)) => n as i32 + 4,
            _ => -1,
        }
    }

    /// The fixed size RowDescription carries (-1 for variable length).
    pub fn typlen(self) -> i16 {
        match self {
            SqlType::Bool | SqlType::Char => 1,
            SqlType::Int4 => 4,
            SqlType::Int8 | SqlType::Timestamp => 8,
            _ => -1,
        }
    }
}

impl fmt::Display for SqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlType::Bool => write!(f, "boolean"),
            SqlType::Int4 => write!(f, "integer"),
            SqlType::Int8 => write!(f, "bigint"),
            SqlType::Bpchar(n) => write!(f, "character({n})"),
            SqlType::Varchar(Some(n)) => write!(f, "character varying({n})"),
            SqlType::Varchar(None) => write!(f, "character varying"),
            SqlType::Text => write!(f, "text"),
            SqlType::Timestamp => write!(f, "timestamp without time zone"),
            SqlType::Char => write!(f, "\"char\""),
            SqlType::Unknown => write!(f, "unknown"),
        }
    }
}

/// One value of a row, a parameter or a result.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Value {
    Null,
    Bool(bool),
    /// Every integer type: range checks happen where a value is stored.
    Int(i64),
    Text(String),
    /// Microseconds since 2000-01-01 00:00:00 (PostgreSQL's epoch).
    Timestamp(i64),
}

/// A result column: its name and type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub ty: SqlType,
}

/// What a statement returned.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Rows, then the tag (`SELECT n`).
    Rows {
        columns: Vec<Column>,
        rows: Vec<Vec<Value>>,
        tag: String,
    },
    /// A statement without rows and its exact PostgreSQL command tag:
    /// `INSERT 0 1`, `UPDATE 1`, `DELETE 0`, `CREATE TABLE`, `BEGIN`,
    /// `COMMIT`, `ROLLBACK` (also for COMMIT of a failed block), ...
    Command { tag: String },
    /// A SELECT's rows, to be fetched (`Session::fetch`) with cursor `id`:
    /// what `Session::start` returns where `execute` returns `Rows`.
    Cursor { columns: Vec<Column>, id: u64 },
    /// `COPY ... FROM STDIN` began: the client now sends CopyData rows
    /// (text format) for `columns` columns.
    CopyIn { columns: usize },
}

/// The transaction status ReadyForQuery reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxStatus {
    /// `I`: no transaction block.
    Idle,
    /// `T`: inside BEGIN ... COMMIT.
    InBlock,
    /// `E`: inside a block that failed; only ROLLBACK (or COMMIT, which
    /// rolls back) is accepted.
    Failed,
}

/// An error with the SQLSTATE clients act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlError {
    /// Five-character SQLSTATE, e.g. `23505`.
    pub code: &'static str,
    pub message: String,
}

/// The longest message an error carries, in bytes: what it quotes (a
/// statement, a value) is cut there, so a 10 MB statement is not echoed
/// back whole.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 1024;

impl SqlError {
    pub fn new(code: &'static str, message: impl Into<String>) -> SqlError {
        let mut message = message.into();
        if message.len() > MAX_ERROR_MESSAGE_BYTES {
            let mut cut = MAX_ERROR_MESSAGE_BYTES;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            let more = message.len() - cut;
            message.truncate(cut);
            message.push_str(&format!("... ({more} bytes more)"));
        }
        SqlError { code, message }
    }

    /// 0A000: a statement this server does not run, quoted.
    pub fn not_supported(statement: &str) -> SqlError {
        SqlError::new(
            codes::FEATURE_NOT_SUPPORTED,
            format!("feature not supported: {statement}"),
        )
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for SqlError {}

/// The SQLSTATEs this server sends (PostgreSQL's errcodes.txt).
pub mod codes {
    pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
    pub const SYNTAX_ERROR: &str = "42601";
    pub const INVALID_NAME: &str = "42602";
    /// Text that is not valid in its encoding.
    pub const CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";
    /// A negative LIMIT.
    pub const INVALID_ROW_COUNT_IN_LIMIT_CLAUSE: &str = "2201W";
    pub const TOO_MANY_COLUMNS: &str = "54011";
    pub const UNDEFINED_TABLE: &str = "42P01";
    pub const UNDEFINED_COLUMN: &str = "42703";
    pub const DUPLICATE_TABLE: &str = "42P07";
    pub const DATATYPE_MISMATCH: &str = "42804";
    pub const UNDEFINED_PARAMETER: &str = "42P02";
    pub const UNIQUE_VIOLATION: &str = "23505";
    pub const NOT_NULL_VIOLATION: &str = "23502";
    pub const STRING_DATA_RIGHT_TRUNCATION: &str = "22001";
    pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
    pub const INVALID_TEXT_REPRESENTATION: &str = "22P02";
    pub const DIVISION_BY_ZERO: &str = "22012";
    pub const BAD_COPY_FILE_FORMAT: &str = "22P04";
    pub const INVALID_BINARY_REPRESENTATION: &str = "22P03";
    pub const PROTOCOL_VIOLATION: &str = "08P01";
    pub const INVALID_PARAMETER_VALUE: &str = "22023";
    pub const CONNECTION_FAILURE: &str = "08006";
    pub const IN_FAILED_SQL_TRANSACTION: &str = "25P02";
    pub const NO_ACTIVE_SQL_TRANSACTION: &str = "25P01";
    pub const INVALID_SQL_STATEMENT_NAME: &str = "26000";
    pub const INVALID_PASSWORD: &str = "28P01";
    pub const DEADLOCK_DETECTED: &str = "40P01";
    pub const SERIALIZATION_FAILURE: &str = "40001";
    pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
    /// A temporary file (a spilled write set) past temp_file_limit.
    pub const CONFIGURATION_LIMIT_EXCEEDED: &str = "53400";
    pub const OUT_OF_MEMORY: &str = "53200";
    pub const INVALID_CURSOR_NAME: &str = "34000";
    pub const QUERY_CANCELED: &str = "57014";
    pub const ADMIN_SHUTDOWN: &str = "57P01";
    pub const STATEMENT_TOO_COMPLEX: &str = "54001";
    pub const DISK_FULL: &str = "53100";
    pub const OBJECT_IN_USE: &str = "55006";
    pub const IO_ERROR: &str = "58030";
    pub const DATA_CORRUPTED: &str = "XX001";
    pub const INTERNAL_ERROR: &str = "XX000";
}

/// An integer operand: text (an unknown-typed literal or parameter) is
/// parsed as PostgreSQL would cast it.
pub fn as_int(v: &Value) -> Result<Option<i64>, SqlError> {
    match v {
        Value::Null => Ok(None),
        Value::Int(x) => Ok(Some(*x)),
        Value::Text(s) => s.trim().parse().map(Some).map_err(|_| {
            SqlError::new(
                codes::INVALID_TEXT_REPRESENTATION,
                format!("invalid input syntax for type integer: \"{s}\""),
            )
        }),
        _ => Err(SqlError::new(
            codes::DATATYPE_MISMATCH,
            "an integer was expected",
        )),
    }
}
