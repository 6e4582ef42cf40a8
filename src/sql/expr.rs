//! Expressions: converted from the parser's AST against a table's
//! columns, typed (which also infers parameter types), and evaluated.

use super::functions::{Function, SessionView};
use super::in_set::InSet;
use super::interrupt::Watch;
use super::limits::Limits;
pub use super::types::as_int;
use super::types::{codes, SqlError, SqlType, Value};
use sqlparser::ast::{self, BinaryOperator as B, UnaryOperator as U};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

/// The integer type arithmetic is done in (found when the expression
/// is typed; int8 until then).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    Int4,
    Int8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Debug)]
pub enum Expr {
    Const(Value, SqlType),
    Param(usize),
    Column(usize),
    /// `a op b`; with `Int4` set by typing when neither operand is int8,
    /// the result must fit int4 (22003), as PostgreSQL's int4 operators.
    Arith(Arith, Box<Expr>, Box<Expr>, Width),
    Neg(Box<Expr>),
    Cmp(Cmp, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    IsNull(Box<Expr>, bool),
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    /// `x [NOT] IN (a, b, ...)`.
    InList(Box<Expr>, Vec<Expr>, bool),
    /// `x [NOT] IN (...)` over many constants, as a set (`in_set`).
    InSet(Box<Expr>, Vec<Expr>, Arc<InSet>, bool),
    Now,
    /// One of the server's functions (`functions`).
    Call(Function, Vec<Expr>),
}

/// What an expression can see while it is converted: the columns in
/// scope and the parameter types found so far.
pub struct Scope<'a> {
    pub columns: &'a [(String, SqlType)],
    pub params: &'a mut Vec<SqlType>,
    /// Parameters the client declared (their types are fixed).
    pub declared: &'a [Option<SqlType>],
    pub sql: &'a str,
    /// Bounds the depth of what `convert` builds.
    pub limits: &'a Limits,
}

/// The longest name, in bytes: PostgreSQL's NAMEDATALEN - 1.
pub const MAX_IDENTIFIER_BYTES: usize = 63;

/// A name as PostgreSQL reads it: folded to lower case unless quoted,
/// and cut to 63 bytes at a character boundary (PostgreSQL says so in a
/// NOTICE; a longer table name was an internal error here).
pub fn ident(i: &ast::Ident) -> String {
    let mut name = if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    };
    if name.len() > MAX_IDENTIFIER_BYTES {
        let mut end = MAX_IDENTIFIER_BYTES;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    name
}

pub fn object_name(n: &ast::ObjectName, sql: &str) -> Result<String, SqlError> {
    match n.0.as_slice() {
        [ast::ObjectNamePart::Identifier(i)] => Ok(ident(i)),
        [ast::ObjectNamePart::Identifier(s), ast::ObjectNamePart::Identifier(i)]
            if ident(s) == "public" =>
        {
            Ok(ident(i))
        }
        _ => Err(SqlError::not_supported(sql)),
    }
}

impl Scope<'_> {
    /// A WHERE clause as a boolean expression (its parameters typed so).
    pub fn condition(&mut self, clause: Option<&ast::Expr>) -> Result<Option<Expr>, SqlError> {
        let mut filter = clause.map(|w| self.convert(w)).transpose()?;
        if let Some(f) = &mut filter {
            self.type_of(f, SqlType::Bool);
        }
        Ok(filter)
    }

    fn param(&mut self, text: &str) -> Result<usize, SqlError> {
        let n: usize = text
            .strip_prefix('$')
            .and_then(|d| d.parse().ok())
            .filter(|n| *n >= 1 && *n <= 65535)
            .ok_or_else(|| SqlError::not_supported(self.sql))?;
        if self.params.len() < n {
            self.params.resize(n, SqlType::Unknown);
        }
        if let Some(Some(t)) = self.declared.get(n - 1) {
            self.params[n - 1] = *t;
        }
        Ok(n - 1)
    }

    /// `x IN (list)`'s: a parameter takes the first member's type known.
    fn type_of_in(&mut self, x: &mut Expr, list: &mut [Expr]) -> SqlType {
        let mut t = self.type_of(x, SqlType::Unknown);
        for e in list.iter_mut() {
            let te = self.type_of(e, t);
            if t == SqlType::Unknown {
                t = te;
            }
        }
        self.type_of(x, t);
        SqlType::Bool
    }

    /// The type of `e`; a parameter still unknown takes `hint`.
    pub fn type_of(&mut self, e: &mut Expr, hint: SqlType) -> SqlType {
        match e {
            Expr::Const(_, t) => *t,
            Expr::Param(i) => {
                if self.params[*i] == SqlType::Unknown && hint != SqlType::Unknown {
                    self.params[*i] = hint;
                }
                self.params[*i]
            }
            Expr::Column(c) => self.columns[*c].1,
            Expr::Arith(_, a, b, width) => {
                let (ta, tb) = self.type_pair(a, b);
                if ta == SqlType::Int8 || tb == SqlType::Int8 {
                    *width = Width::Int8;
                    SqlType::Int8
                } else {
                    *width = Width::Int4;
                    SqlType::Int4
                }
            }
            Expr::Neg(a) => self.type_of(a, SqlType::Int4),
            Expr::Cmp(_, a, b) => {
                self.type_pair(a, b);
                SqlType::Bool
            }
            Expr::Between(x, lo, hi, _) => {
                let t = self.type_of(x, SqlType::Unknown);
                self.type_of(lo, t);
                self.type_of(hi, t);
                SqlType::Bool
            }
            Expr::InList(x, list, _) => self.type_of_in(x, list),
            Expr::InSet(x, list, ..) => self.type_of_in(x, list),
            Expr::And(a, b) | Expr::Or(a, b) => {
                self.type_of(a, SqlType::Bool);
                self.type_of(b, SqlType::Bool);
                SqlType::Bool
            }
            Expr::Not(a) => {
                self.type_of(a, SqlType::Bool);
                SqlType::Bool
            }
            Expr::IsNull(a, _) => {
                self.type_of(a, SqlType::Unknown);
                SqlType::Bool
            }
            Expr::Now => SqlType::Timestamp,
            Expr::Call(f, args) => {
                for (i, a) in args.iter_mut().enumerate() {
                    self.type_of(a, f.argument_type(i));
                }
                f.result_type()
            }
        }
    }

    /// The types of two operands typed against each other: `b` takes
    /// `a`'s type as its hint, then `a`, if still unknown, takes `b`'s.
    /// Only an operand of unknown type (a parameter or a literal, never a
    /// compound expression) is visited twice, so typing is linear in the
    /// expression's size.
    fn type_pair(&mut self, a: &mut Expr, b: &mut Expr) -> (SqlType, SqlType) {
        let ta = self.type_of(a, SqlType::Unknown);
        let tb = self.type_of(b, ta);
        if ta == SqlType::Unknown {
            (self.type_of(a, tb), tb)
        } else {
            (ta, tb)
        }
    }

    /// Converts an AST expression; anything outside the supported shapes
    /// is 0A000, anything nested deeper than `max_expression_depth` 54001.
    pub fn convert(&mut self, e: &ast::Expr) -> Result<Expr, SqlError> {
        self.convert_at(e, 1)
    }

    fn convert_at(&mut self, e: &ast::Expr, depth: usize) -> Result<Expr, SqlError> {
        if depth > self.limits.max_expression_depth {
            return Err(self.limits.too_deep());
        }
        let unsupported = || SqlError::not_supported(self.sql);
        let inner = |sc: &mut Self, x: &ast::Expr| sc.convert_at(x, depth + 1);
        Ok(match e {
            ast::Expr::Identifier(i) => self.column(&ident(i))?,
            ast::Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [_, col] => self.column(&ident(col))?,
                _ => return Err(unsupported()),
            },
            ast::Expr::Nested(x) => inner(self, x)?,
            ast::Expr::Value(v) => match &v.value {
                ast::Value::Number(n, false) => {
                    let x: i64 = n.parse().map_err(|_| unsupported())?;
                    let t = if i32::try_from(x).is_ok() {
                        SqlType::Int4
                    } else {
                        SqlType::Int8
                    };
                    Expr::Const(Value::Int(x), t)
                }
                ast::Value::SingleQuotedString(s) => {
                    Expr::Const(Value::Text(s.clone()), SqlType::Unknown)
                }
                ast::Value::Boolean(b) => Expr::Const(Value::Bool(*b), SqlType::Bool),
                ast::Value::Null => Expr::Const(Value::Null, SqlType::Unknown),
                ast::Value::Placeholder(p) => Expr::Param(self.param(p)?),
                _ => return Err(unsupported()),
            },
            ast::Expr::UnaryOp { op, expr } => {
                let operand = inner(self, expr)?;
                match op {
                    U::Minus => match operand {
                        Expr::Const(Value::Int(x), _) => {
                            let t = if i32::try_from(-x).is_ok() {
                                SqlType::Int4
                            } else {
                                SqlType::Int8
                            };
                            Expr::Const(Value::Int(-x), t)
                        }
                        other => Expr::Neg(Box::new(other)),
                    },
                    U::Plus => operand,
                    U::Not => Expr::Not(Box::new(operand)),
                    _ => return Err(unsupported()),
                }
            }
            ast::Expr::BinaryOp { left, op, right } => {
                let (a, b) = (Box::new(inner(self, left)?), Box::new(inner(self, right)?));
                match op {
                    B::Plus => Expr::Arith(Arith::Add, a, b, Width::Int8),
                    B::Minus => Expr::Arith(Arith::Sub, a, b, Width::Int8),
                    B::Multiply => Expr::Arith(Arith::Mul, a, b, Width::Int8),
                    B::Divide => Expr::Arith(Arith::Div, a, b, Width::Int8),
                    B::Modulo => Expr::Arith(Arith::Mod, a, b, Width::Int8),
                    B::Eq => Expr::Cmp(Cmp::Eq, a, b),
                    B::NotEq => Expr::Cmp(Cmp::Ne, a, b),
                    B::Lt => Expr::Cmp(Cmp::Lt, a, b),
                    B::LtEq => Expr::Cmp(Cmp::Le, a, b),
                    B::Gt => Expr::Cmp(Cmp::Gt, a, b),
                    B::GtEq => Expr::Cmp(Cmp::Ge, a, b),
                    B::And => Expr::And(a, b),
                    B::Or => Expr::Or(a, b),
                    _ => return Err(unsupported()),
                }
            }
            ast::Expr::Between {
                expr,
                negated,
                low,
                high,
            } => Expr::Between(
                Box::new(inner(self, expr)?),
                Box::new(inner(self, low)?),
                Box::new(inner(self, high)?),
                *negated,
            ),
            ast::Expr::InList {
                expr,
                list,
                negated,
            } if !list.is_empty() => {
                let x = Box::new(inner(self, expr)?);
                let list: Vec<Expr> = list
                    .iter()
                    .map(|e| inner(self, e))
                    .collect::<Result<_, _>>()?;
                let literals = list.iter().map(|e| match e {
                    Expr::Const(v, _) => Some(v),
                    _ => None,
                });
                match InSet::build(literals) {
                    Some(set) => Expr::InSet(x, list, Arc::new(set), *negated),
                    None => Expr::InList(x, list, *negated),
                }
            }
            ast::Expr::IsNull(a) => Expr::IsNull(Box::new(inner(self, a)?), false),
            ast::Expr::IsNotNull(a) => Expr::IsNull(Box::new(inner(self, a)?), true),
            ast::Expr::Function(f) => {
                let name = object_name(&f.name, self.sql)?;
                let no_args = match &f.args {
                    ast::FunctionArguments::None => true,
                    ast::FunctionArguments::List(l) => l.args.is_empty() && name == "now",
                    _ => false,
                };
                let plain = f.over.is_none() && f.filter.is_none();
                let args = match &f.args {
                    ast::FunctionArguments::List(l)
                        if l.duplicate_treatment.is_none() && l.clauses.is_empty() =>
                    {
                        Some(&l.args)
                    }
                    _ => None,
                };
                let called = args.and_then(|a| Function::named(&name, a.len()));
                if (name == "now" || name == "current_timestamp") && no_args && plain {
                    Expr::Now
                } else if let (Some(function), Some(args), true) = (called, args, plain) {
                    let args = args
                        .iter()
                        .map(|a| match a {
                            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => {
                                inner(self, e)
                            }
                            _ => Err(unsupported()),
                        })
                        .collect::<Result<_, _>>()?;
                    Expr::Call(function, args)
                } else {
                    return Err(unsupported());
                }
            }
            _ => return Err(unsupported()),
        })
    }

    fn column(&self, name: &str) -> Result<Expr, SqlError> {
        self.columns
            .iter()
            .position(|(n, _)| n == name)
            .map(Expr::Column)
            .ok_or_else(|| {
                SqlError::new(
                    codes::UNDEFINED_COLUMN,
                    format!("column \"{name}\" does not exist"),
                )
            })
    }
}

/// What evaluation needs besides the row.
pub struct Ctx<'a> {
    pub params: &'a [Value],
    /// The statement's CURRENT_TIMESTAMP.
    pub now: i64,
    /// Whether the statement must stop; its loops check it per row.
    pub watch: &'a Watch<'a>,
    /// The session, for the server's functions; `None` where none may
    /// be called (DDL's own evaluation).
    pub session: Option<SessionView<'a>>,
}

fn out_of_range() -> SqlError {
    SqlError::new(codes::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
}

/// Compares two non-null values; text compares ignoring trailing blanks
/// (bpchar), text against an integer is read as an integer.
pub fn compare(a: &Value, b: &Value) -> Result<std::cmp::Ordering, SqlError> {
    Ok(match (a, b) {
        (Value::Text(x), Value::Text(y)) => x.trim_end_matches(' ').cmp(y.trim_end_matches(' ')),
        (Value::Int(_), Value::Text(_)) | (Value::Text(_), Value::Int(_)) => {
            as_int(a)?.cmp(&as_int(b)?)
        }
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Int(x), Value::Int(y)) | (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
        _ => {
            return Err(SqlError::new(
                codes::DATATYPE_MISMATCH,
                "cannot compare these types",
            ))
        }
    })
}

/// `x IN (list)` compared one member at a time, in order: SQL's three
/// values, true on a match, else NULL when x or any member is NULL, else
/// false.
fn in_list(
    x: &Value,
    list: &[Expr],
    row: &[Value],
    cx: &Ctx<'_>,
) -> Result<Option<bool>, SqlError> {
    let mut found = if *x == Value::Null { None } else { Some(false) };
    for e in list {
        let v = e.eval(row, cx)?;
        if v == Value::Null {
            found = None;
        } else if *x != Value::Null && compare(x, &v)?.is_eq() {
            return Ok(Some(true));
        }
    }
    Ok(found)
}

/// An IN's answer, negated for NOT IN.
fn not_if(found: Option<bool>, negated: bool) -> Value {
    match found {
        Some(b) => Value::Bool(b != negated),
        None => Value::Null,
    }
}

fn truth(v: &Value) -> Result<Option<bool>, SqlError> {
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(*b)),
        _ => Err(SqlError::new(
            codes::DATATYPE_MISMATCH,
            "argument must be type boolean",
        )),
    }
}

impl Expr {
    pub fn eval(&self, row: &[Value], cx: &Ctx<'_>) -> Result<Value, SqlError> {
        Ok(match self {
            Expr::Const(v, _) => v.clone(),
            Expr::Param(i) => cx.params[*i].clone(),
            Expr::Column(c) => row[*c].clone(),
            Expr::Now => Value::Timestamp(cx.now),
            Expr::Call(f, args) => {
                let values: Vec<Value> = args
                    .iter()
                    .map(|a| a.eval(row, cx))
                    .collect::<Result<_, _>>()?;
                f.call(&values, cx.session)?
            }
            Expr::Neg(a) => match as_int(&a.eval(row, cx)?)? {
                None => Value::Null,
                Some(x) => Value::Int(x.checked_neg().ok_or_else(out_of_range)?),
            },
            Expr::Arith(op, a, b, width) => {
                let (Some(x), Some(y)) = (as_int(&a.eval(row, cx)?)?, as_int(&b.eval(row, cx)?)?)
                else {
                    return Ok(Value::Null);
                };
                if matches!(op, Arith::Div | Arith::Mod) && y == 0 {
                    return Err(SqlError::new(codes::DIVISION_BY_ZERO, "division by zero"));
                }
                let r = match op {
                    Arith::Add => x.checked_add(y),
                    Arith::Sub => x.checked_sub(y),
                    Arith::Mul => x.checked_mul(y),
                    Arith::Div => x.checked_div(y),
                    Arith::Mod => x.checked_rem(y),
                };
                let r = r.ok_or_else(out_of_range)?;
                if *width == Width::Int4 && i32::try_from(r).is_err() {
                    return Err(out_of_range());
                }
                Value::Int(r)
            }
            Expr::Cmp(op, a, b) => {
                let (x, y) = (a.eval(row, cx)?, b.eval(row, cx)?);
                if x == Value::Null || y == Value::Null {
                    return Ok(Value::Null);
                }
                let o = compare(&x, &y)?;
                Value::Bool(match op {
                    Cmp::Eq => o.is_eq(),
                    Cmp::Ne => o.is_ne(),
                    Cmp::Lt => o.is_lt(),
                    Cmp::Le => o.is_le(),
                    Cmp::Gt => o.is_gt(),
                    Cmp::Ge => o.is_ge(),
                })
            }
            Expr::Between(x, lo, hi, negated) => {
                let ge = Expr::Cmp(Cmp::Ge, x.clone(), lo.clone());
                let le = Expr::Cmp(Cmp::Le, x.clone(), hi.clone());
                let both = Expr::And(Box::new(ge), Box::new(le)).eval(row, cx)?;
                match (both, negated) {
                    (Value::Bool(b), true) => Value::Bool(!b),
                    (v, _) => v,
                }
            }
            Expr::InList(x, list, negated) => {
                let x = x.eval(row, cx)?;
                not_if(in_list(&x, list, row, cx)?, *negated)
            }
            Expr::InSet(x, list, set, negated) => {
                let x = x.eval(row, cx)?;
                let found = match set.lookup(&x) {
                    Some(found) => found,
                    None => in_list(&x, list, row, cx)?,
                };
                not_if(found, *negated)
            }
            Expr::And(a, b) => match (truth(&a.eval(row, cx)?)?, truth(&b.eval(row, cx)?)?) {
                (Some(false), _) | (_, Some(false)) => Value::Bool(false),
                (Some(true), Some(true)) => Value::Bool(true),
                _ => Value::Null,
            },
            Expr::Or(a, b) => match (truth(&a.eval(row, cx)?)?, truth(&b.eval(row, cx)?)?) {
                (Some(true), _) | (_, Some(true)) => Value::Bool(true),
                (Some(false), Some(false)) => Value::Bool(false),
                _ => Value::Null,
            },
            Expr::Not(a) => match truth(&a.eval(row, cx)?)? {
                Some(b) => Value::Bool(!b),
                None => Value::Null,
            },
            Expr::IsNull(a, negated) => Value::Bool((a.eval(row, cx)? == Value::Null) != *negated),
        })
    }

    /// True when the predicate holds (NULL counts as false).
    pub fn holds(&self, row: &[Value], cx: &Ctx<'_>) -> Result<bool, SqlError> {
        Ok(truth(&self.eval(row, cx)?)? == Some(true))
    }

    /// True when it reads no column (a constant or parameters only).
    pub fn is_constant(&self) -> bool {
        match self {
            Expr::Const(..) | Expr::Param(_) | Expr::Now => true,
            // A call may act (a signal): once per row, never folded.
            Expr::Column(_) | Expr::Call(..) => false,
            Expr::Neg(a) | Expr::Not(a) | Expr::IsNull(a, _) => a.is_constant(),
            Expr::Arith(_, a, b, _) | Expr::Cmp(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                a.is_constant() && b.is_constant()
            }
            Expr::Between(a, b, c, _) => a.is_constant() && b.is_constant() && c.is_constant(),
            Expr::InList(x, list, _) => x.is_constant() && list.iter().all(Expr::is_constant),
            // Its members are literals.
            Expr::InSet(x, ..) => x.is_constant(),
        }
    }
}

/// The table a FROM item names: a plain table, nothing else (0A000).
pub(super) fn table_factor(tf: &ast::TableFactor, sql: &str) -> Result<String, SqlError> {
    match tf {
        ast::TableFactor::Table {
            name,
            args: None,
            with_hints,
            partitions,
            ..
        } if with_hints.is_empty() && partitions.is_empty() => object_name(name, sql),
        _ => Err(SqlError::not_supported(sql)),
    }
}
