//! One message's SQL text as statements: its length is checked, it is
//! tokenized once and split at semicolons, the statements counted, and
//! each is parsed only when its turn comes, so one message holds at most
//! one statement's syntax tree (a message of a million `select 1;` held
//! them all, 16 GB).
//!
//! Rules: text over `max_query_length` bytes, or with more statements
//! than `max_statements_per_query`, is refused (54000) before anything is
//! parsed; the parser's recursion is bounded by `max_expression_depth`
//! (54001).

use super::limits::Limits;
use super::parse::shim;
use super::types::{codes, SqlError};
use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};

/// One statement of a message, not yet parsed.
pub struct Piece {
    tokens: Vec<TokenWithSpan>,
    /// Its text, without the semicolon that ends it.
    pub text: String,
}

fn syntax(e: impl std::fmt::Display) -> SqlError {
    SqlError::new(codes::SYNTAX_ERROR, format!("syntax error: {e}"))
}

/// The statements of `sql`, in order (none for empty text).
pub fn split(sql: &str, limits: &Limits) -> Result<Vec<Piece>, SqlError> {
    if sql.len() > limits.max_query_length {
        return Err(SqlError::new(
            codes::PROGRAM_LIMIT_EXCEEDED,
            format!(
                "statement text of {} bytes is longer than max_query_length ({} bytes)",
                sql.len(),
                limits.max_query_length
            ),
        ));
    }
    let text = shim(sql);
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, &text)
        .tokenize_with_location()
        .map_err(syntax)?;
    let mut cursor = Cursor::new(&text);
    let mut pieces = Vec::new();
    let mut current = Vec::new();
    for t in tokens {
        let end = t.token == Token::SemiColon;
        if !end {
            current.push(t);
            continue;
        }
        let start = t.span.start;
        if let Some(p) = piece(std::mem::take(&mut current), &mut cursor, Some(start)) {
            pieces.push(p);
            if pieces.len() > limits.max_statements_per_query {
                return Err(too_many(pieces.len(), limits));
            }
        }
    }
    if let Some(p) = piece(current, &mut cursor, None) {
        pieces.push(p);
    }
    if pieces.len() > limits.max_statements_per_query {
        return Err(too_many(pieces.len(), limits));
    }
    Ok(pieces)
}

fn too_many(n: usize, limits: &Limits) -> SqlError {
    SqlError::new(
        codes::PROGRAM_LIMIT_EXCEEDED,
        format!(
            "{n} or more statements in one message, more than max_statements_per_query ({})",
            limits.max_statements_per_query
        ),
    )
}

/// The statement of `tokens` (up to the semicolon at `end`, or the end of
/// the text), unless they are only blanks and comments.
fn piece(
    tokens: Vec<TokenWithSpan>,
    cursor: &mut Cursor<'_>,
    end: Option<Location>,
) -> Option<Piece> {
    let first = tokens
        .iter()
        .find(|t| !matches!(t.token, Token::Whitespace(_)))?;
    let from = cursor.offset(first.span.start);
    let to = end.map_or(cursor.text.len(), |e| cursor.offset(e));
    Some(Piece {
        text: cursor.text[from..to].trim_end().to_string(),
        tokens,
    })
}

impl Piece {
    pub fn parse(self, limits: &Limits) -> Result<Statement, SqlError> {
        let mut stmts = Parser::new(&PostgreSqlDialect {})
            .with_recursion_limit(limits.max_expression_depth)
            .with_tokens_with_locations(self.tokens)
            .parse_statements()
            .map_err(|e| match e {
                ParserError::RecursionLimitExceeded => limits.too_deep(),
                e => syntax(e),
            })?;
        match stmts.len() {
            1 => Ok(stmts.pop().expect("one statement")),
            n => Err(syntax(format!("{n} statements where one was expected"))),
        }
    }
}

/// Byte offsets of the tokenizer's locations (1-based lines and columns
/// in characters), found moving forward only: linear in the text.
struct Cursor<'a> {
    text: &'a str,
    byte: usize,
    at: Location,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Cursor {
            text,
            byte: 0,
            at: Location { line: 1, column: 1 },
        }
    }

    fn offset(&mut self, to: Location) -> usize {
        while (self.at.line, self.at.column) < (to.line, to.column) {
            let Some(c) = self.text[self.byte..].chars().next() else {
                break;
            };
            self.byte += c.len_utf8();
            if c == '\n' {
                self.at = Location {
                    line: self.at.line + 1,
                    column: 1,
                };
            } else {
                self.at.column += 1;
            }
        }
        self.byte
    }
}
