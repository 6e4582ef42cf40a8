//! One message's SQL text as statements: its length is checked, it is
//! tokenized once and split at semicolons, the statements counted, and
//! each is parsed only when its turn comes, so one message holds at most
//! one statement's syntax tree (a message of a million `select 1;` held
//! them all, 16 GB).
//!
//! Rules: text over `max_query_length` bytes, or with more statements
//! than `max_statements_per_query`, is refused (54000) before anything is
//! parsed; the parser's recursion is bounded by `max_expression_depth`
//! (54001), and so is a statement's lexical depth (`lexical_depth`)
//! before it is parsed. Text longer than `budget::FREE_BYTES` is
//! tokenized and parsed within the server's parse budget (`budget`).

use super::budget::{ParseBudget, Permit};
use super::interrupt::Watch;
use super::limits::Limits;
use super::parse::shim;
use super::types::{codes, SqlError};
use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer};
use std::sync::Arc;

/// One statement of a message, not yet parsed.
pub struct Piece {
    tokens: Vec<TokenWithSpan>,
    /// Its text, without the semicolon that ends it.
    pub text: String,
}

fn syntax(e: impl std::fmt::Display) -> SqlError {
    SqlError::new(codes::SYNTAX_ERROR, format!("syntax error: {e}"))
}

/// One message's statements, and what they hold of the parse budget
/// until their syntax trees are dropped.
pub struct Script {
    pub pieces: Vec<Piece>,
    pub permit: Permit,
}

/// The statements of `sql`, in order (none for empty text); a wait for
/// the parse budget checks `watch`.
pub fn split(
    sql: &str,
    limits: &Limits,
    budget: &Arc<ParseBudget>,
    watch: &Watch,
) -> Result<Script, SqlError> {
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
    let mut permit = budget.take(sql.len(), watch)?;
    let text = shim(sql);
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, &text)
        .tokenize_with_location()
        .map_err(syntax)?;
    permit.keep(tokens.len());
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
    Ok(Script { pieces, permit })
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
        // A tree far deeper than the limit is never built: its memory and
        // the recursion that drops it would be spent only to refuse it.
        if lexical_depth(&self.tokens) > limits.lexical_depth_bound() {
            return Err(limits.too_deep());
        }
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

/// At least the depth of any syntax tree `tokens` parse into: each
/// parenthesis or bracket nests one level, and within one it counts
/// every token that may add a level (operators, keywords, literals but
/// numbers), from its last comma on; a closed group adds its depth to
/// what encloses it. Identifiers, numbers and commas add nothing.
fn lexical_depth(tokens: &[TokenWithSpan]) -> usize {
    // Per open group: (tokens counted since its last comma, its deepest
    // comma-separated part so far); `outer`: the levels of the groups
    // enclosing the innermost one.
    let mut groups = vec![(0usize, 0usize)];
    let mut outer = 0;
    let mut deepest = 0;
    for t in tokens {
        match &t.token {
            Token::LParen | Token::LBracket | Token::LBrace => {
                outer += groups.last().expect("a group").0 + 1;
                groups.push((0, 0));
            }
            Token::RParen | Token::RBracket | Token::RBrace if groups.len() > 1 => {
                let (count, most) = groups.pop().expect("an open group");
                let g = groups.last_mut().expect("the outer group");
                outer -= g.0 + 1;
                g.0 += count.max(most) + 1;
            }
            Token::Comma => {
                let g = groups.last_mut().expect("a group");
                *g = (0, g.0.max(g.1));
            }
            Token::Whitespace(_) | Token::Number(..) | Token::Period | Token::SemiColon => {}
            Token::Word(w) if w.keyword == Keyword::NoKeyword => {}
            _ => groups.last_mut().expect("a group").0 += 1,
        }
        deepest = deepest.max(outer + groups.last().expect("a group").0 + 1);
    }
    deepest
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

/// A Query message's statements not run yet.
pub struct PendingScript {
    pub(super) stmts: std::collections::VecDeque<(String, Statement)>,
    /// CHECKPOINT, which the parser does not know.
    pub(super) checkpoint: Option<String>,
    /// The statements are one implicit transaction.
    pub(super) batch: bool,
    /// The message's parse error, reported first.
    pub(super) error: Option<SqlError>,
    pub(super) _permit: Option<Permit>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(sql: &str) -> usize {
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
            .tokenize_with_location()
            .unwrap();
        lexical_depth(&tokens)
    }

    /// The lexical depth bounds the tree's from above: a group counts
    /// what it holds, and what follows it counts on top.
    #[test]
    fn lexical_depth_counts_nesting_and_operators_not_lists() {
        assert_eq!(depth("1"), 1);
        assert_eq!(depth("1+1+1"), 3);
        assert_eq!(depth("((1))"), 3);
        // A list's items are side by side.
        assert_eq!(depth("f(1+1, 1+1+1, 2)"), 4);
        assert_eq!(depth("(1+1+1) + 1 + 1"), 6);
        assert_eq!(depth("aid = 1 or aid = 2"), 4);
        assert_eq!(depth("insert into t values (1, 'a'), (2, 'b')"), 6);
    }
}
