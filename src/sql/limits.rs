//! What one statement may ask of a session: limits that turn a hostile or
//! careless statement into an error instead of a crash of the server.
//!
//! Rules:
//! - Every recursion over an expression (conversion, typing, planning,
//!   evaluation, dropping) walks a tree that `Scope::convert` built, and
//!   `convert` refuses a tree deeper than `max_expression_depth` with
//!   54001, as PostgreSQL refuses one deeper than its `max_stack_depth`.
//!   The parser's own recursion (parentheses, subqueries) has the same
//!   limit.
//! - A thread that runs a session has `stack_bytes()` of stack: enough for
//!   the deepest expression the limit lets through, and for dropping the
//!   parser's tree of the longest text (`tests_limits` runs both on
//!   exactly that stack).
//! - Text over `max_query_length` bytes, or with more statements than
//!   `max_statements_per_query`, is 54000 before it is parsed
//!   (`script`); text lexically far deeper than `max_expression_depth`
//!   is 54001 before it is parsed.
//! - A SELECT's rows are sent as they are read (`cursor`); a sort holds
//!   at most `work_mem` of them in memory and spills the rest to disk
//!   (`sort`). What UPDATE and DELETE read before changing it, and a
//!   result the library returns whole (`Session::execute`), is at most
//!   `max_result_rows` rows (54000).
//! - What a connection keeps between messages (prepared statements,
//!   portals and their parameters, sorts in memory) is at most
//!   `max_connection_memory`, all connections' together at most
//!   `max_server_memory` (53200, `memory`).
//! - All sessions together parse at most `parse_budget` tokens at once
//!   (`budget`): what bounds the memory of parsing across connections.

use super::types::{codes, SqlError};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of operators and parentheses in one expression.
    pub max_expression_depth: usize,
    /// Longest SQL text of one message (Query or Parse), in bytes.
    pub max_query_length: usize,
    /// Most statements in one Query message.
    pub max_statements_per_query: usize,
    /// Tokens of SQL text being parsed at once, server-wide (`budget`):
    /// at worst about 420 bytes each with their syntax tree.
    pub parse_budget: usize,
    /// Most rows one statement's scan holds in memory (its result, or
    /// the rows an UPDATE, DELETE or aggregate reads): more is 54000.
    pub max_result_rows: usize,
    /// PostgreSQL's work_mem: the most memory one sort holds before it
    /// writes sorted runs to a temporary file.
    pub work_mem: usize,
    /// The most memory one connection keeps between messages: its
    /// prepared statements, portals with their parameters, and sorts in
    /// memory (53200 past it).
    pub max_connection_memory: usize,
    /// The most all connections keep together (53200 past it).
    pub max_server_memory: usize,
    /// How long one statement may run before it is canceled (57014), as
    /// PostgreSQL's statement_timeout; `None`: as long as it takes.
    pub statement_timeout: Option<std::time::Duration>,
    /// PostgreSQL's idle_in_transaction_session_timeout: a session idle
    /// this long in an open block is ended (25P03), its block rolled
    /// back, its row locks released; `None`: never.
    pub idle_in_transaction_session_timeout: Option<std::time::Duration>,
    /// PostgreSQL's idle_session_timeout: a session idle this long
    /// outside a block is ended (57P05); `None`: never.
    pub idle_session_timeout: Option<std::time::Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_expression_depth: 10_000,
            // sysbench's bulk INSERTs are 0.5 MB.
            max_query_length: 1 << 20,
            max_statements_per_query: 10_000,
            // The longest text at once: 420 MB at worst.
            parse_budget: 1 << 20,
            // pgbench_accounts whole at scale 100; far more than the
            // workloads themselves read (one row, or sysbench's 100).
            max_result_rows: 10_000_000,
            // PostgreSQL's default.
            work_mem: 4 << 20,
            // Four sorts in memory at once, or 16 MB of parameters: ten
            // connections at their limit, each with the longest text
            // parsing, take under 1 GB (RELIABILITY.md).
            max_connection_memory: 16 << 20,
            // With max_connections' 100 connections, a quarter of them at
            // their limit.
            max_server_memory: 1600 << 20,
            statement_timeout: None,
            idle_in_transaction_session_timeout: None,
            idle_session_timeout: None,
        }
    }
}

/// Stack a session needs besides its expressions' recursion.
const STACK_BASE_BYTES: usize = 4 << 20;
/// Stack one level of expression nesting may take, in the deepest of the
/// recursions over it (see the module's tests).
const STACK_BYTES_PER_LEVEL: usize = 2048;
/// Stack per byte of SQL text for dropping the parser's tree, which nests
/// as deep as the text's operators (`1+1+...`: one level per 2 bytes),
/// before the conversion refuses it.
const STACK_BYTES_PER_TEXT_BYTE: usize = 32;

impl Limits {
    /// The stack for a thread that runs a session under these limits.
    pub fn stack_bytes(&self) -> usize {
        STACK_BASE_BYTES
            + self.max_expression_depth * STACK_BYTES_PER_LEVEL
            + self.max_query_length * STACK_BYTES_PER_TEXT_BYTE
    }

    /// The lexical depth (`script`) past which a statement is 54001
    /// before it is parsed: four times the limit, as a statement's
    /// keywords and comparisons count though they may not nest (the
    /// 69 KB OR of 5,000 terms counts 10,000), and a margin for a small
    /// limit. A tree nests no deeper than this, whatever the text.
    pub(super) fn lexical_depth_bound(&self) -> usize {
        4 * self.max_expression_depth + 100
    }

    /// 54001 for an expression nested deeper than the limit.
    pub(super) fn too_deep(&self) -> SqlError {
        SqlError::new(
            codes::STATEMENT_TOO_COMPLEX,
            format!(
                "stack depth limit exceeded: expression nested deeper than \
                 max_expression_depth ({})",
                self.max_expression_depth
            ),
        )
    }
}
