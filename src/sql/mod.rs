//! SQL over the engine: a table catalog with column types, primary keys,
//! secondary indexes and sequences, and the statements pgbench and
//! sysbench send (docs/ARCHITECTURE.md, "SQL and the wire").

pub mod types;

pub use types::{codes, Column, Outcome, SqlError, SqlType, TxStatus, Value};
