//! From SQL text to plans: a small shim for the two statements sqlparser
//! 0.63 does not parse, then the AST mapped onto the supported shapes.
//! Everything else is 0A000, never a guess. DDL is mapped in `parse_ddl`,
//! SELECT in `parse_select`; INSERT, UPDATE and DELETE here.

use super::catalog::{column_of, scope_columns, ColumnDef, TableMeta, Tables};
use super::expr::{ident, object_name, table_factor, Scope};
use super::limits::Limits;
use super::or_chain::or_chains_as_in;
use super::parse_ddl::{alter_table, create_index, create_table};
use super::parse_select::select;
use super::plan::{table_access, InsertSource, Plan};
use super::types::{codes, Column, SqlError, SqlType};
use sqlparser::ast::{self, Statement};

/// Removes `with (freeze on)` (COPY FREEZE is decided by the table's
/// state here) and turns `vacuum analyze` into `vacuum` (same tag).
pub fn shim(sql: &str) -> String {
    let lower = sql.to_ascii_lowercase();
    let mut out = sql.to_string();
    for pat in ["with (freeze on)", "with (freeze)", "(freeze on)"] {
        if let Some(at) = lower.find(pat) {
            out.replace_range(at..at + pat.len(), "");
            break;
        }
    }
    let trimmed = out.trim_start();
    let lt = trimmed.to_ascii_lowercase();
    if lt.starts_with("vacuum analyze") {
        let skip = out.len() - trimmed.len();
        out.replace_range(skip..skip + "vacuum analyze".len(), "vacuum");
    }
    out
}

/// `CHECKPOINT`, which sqlparser does not parse: runs a checkpoint, as
/// PostgreSQL's does (scripts/peers sends it after loading).
pub fn is_checkpoint(sql: &str) -> bool {
    sql.trim()
        .trim_end_matches(';')
        .trim_end()
        .eq_ignore_ascii_case("checkpoint")
}

/// A planned statement with its parameter types and result columns.
pub struct Planned {
    pub plan: Plan,
    pub params: Vec<SqlType>,
    pub columns: Vec<Column>,
}

pub fn plan(
    cat: &dyn Tables,
    stmt: &Statement,
    declared: &[Option<SqlType>],
    sql: &str,
    limits: &Limits,
) -> Result<Planned, SqlError> {
    let mut params: Vec<SqlType> = declared
        .iter()
        .map(|d| d.unwrap_or(SqlType::Unknown))
        .collect();
    let mut columns = Vec::new();
    let ns = || SqlError::not_supported(sql);
    let plan = match stmt {
        Statement::StartTransaction { .. } => Plan::Begin,
        Statement::Commit { chain: false, .. } => Plan::Commit,
        Statement::Rollback {
            chain: false,
            savepoint: None,
        } => Plan::Rollback,
        Statement::Vacuum(_) => Plan::Noop("VACUUM"),
        Statement::Analyze(_) => Plan::Noop("ANALYZE"),
        Statement::Set(ast::Set::SingleAssignment {
            scope:
                scope @ (None | Some(ast::ContextModifier::Session) | Some(ast::ContextModifier::Local)),
            hivevar: false,
            variable,
            values,
        }) if object_name(variable, sql)? == "statement_timeout" && values.len() == 1 => {
            Plan::SetStatementTimeout {
                timeout: timeout(&values[0], "statement_timeout", sql)?,
                local: *scope == Some(ast::ContextModifier::Local),
            }
        }
        Statement::Set(ast::Set::SingleAssignment {
            scope: None | Some(ast::ContextModifier::Session),
            hivevar: false,
            variable,
            values,
        }) if values.len() == 1
            && matches!(
                object_name(variable, sql)?.as_str(),
                "idle_in_transaction_session_timeout" | "idle_session_timeout"
            ) =>
        {
            let name = object_name(variable, sql)?;
            Plan::SetIdleTimeout {
                in_block: name == "idle_in_transaction_session_timeout",
                timeout: timeout(&values[0], &name, sql)?,
            }
        }
        Statement::Set(ast::Set::SingleAssignment {
            scope: None | Some(ast::ContextModifier::Session),
            hivevar: false,
            variable,
            values,
        }) if values.len() == 1
            && matches!(
                object_name(variable, sql)?.as_str(),
                "client_encoding" | "work_mem"
            ) =>
        {
            use super::settings_at_start::{client_encoding, work_mem};
            if object_name(variable, sql)? == "client_encoding" {
                let name = setting_text(&values[0], true).ok_or_else(ns)?;
                client_encoding(&name)?;
                Plan::Noop("SET")
            } else {
                let text = setting_text(&values[0], false).ok_or_else(ns)?;
                Plan::SetWorkMem(work_mem(&text)?)
            }
        }
        Statement::CreateTable(ct) => create_table(ct, sql, limits)?,
        Statement::Drop {
            object_type: ast::ObjectType::Table,
            if_exists,
            names,
            cascade: false,
            purge: false,
            temporary: false,
            ..
        } => Plan::DropTables {
            names: names
                .iter()
                .map(|n| object_name(n, sql))
                .collect::<Result<_, _>>()?,
            if_exists: *if_exists,
        },
        Statement::Truncate(t) if t.partitions.is_none() && t.identity.is_none() => Plan::Truncate(
            t.table_names
                .iter()
                .map(|n| object_name(&n.name, sql))
                .collect::<Result<_, _>>()?,
        ),
        Statement::CreateIndex(ci)
            if !ci.unique && ci.predicate.is_none() && ci.include.is_empty() =>
        {
            create_index(cat, ci, sql)?
        }
        Statement::AlterTable(at) if at.operations.len() == 1 => alter_table(cat, at, sql)?,
        Statement::Copy {
            source:
                ast::CopySource::Table {
                    table_name,
                    columns: cols,
                },
            to: false,
            target: ast::CopyTarget::Stdin,
            options,
            legacy_options,
            values,
        } if options.is_empty() && legacy_options.is_empty() && values.is_empty() => {
            let table = object_name(table_name, sql)?;
            let meta = cat.get(&table)?;
            let targets = targets(&meta.def.columns, cols.iter().map(ident))?;
            Plan::Copy { table, targets }
        }
        Statement::Insert(ins) => insert(cat, ins, declared, &mut params, sql, limits)?,
        Statement::Update(up) => update(cat, up, declared, &mut params, sql, limits)?,
        Statement::Delete(del) => delete(cat, del, declared, &mut params, sql, limits)?,
        Statement::Query(q) => {
            let (sel, cols) = select(cat, q, declared, &mut params, sql, limits)?;
            columns = cols;
            Plan::Select(sel)
        }
        _ => return Err(ns()),
    };
    Ok(Planned {
        plan,
        params,
        columns,
    })
}

/// A timeout setting (`name`) as PostgreSQL reads it: milliseconds, or a
/// number with a unit (`us`, `ms`, `s`, `min`, `h`, `d`); 0 is no limit.
fn timeout(
    value: &ast::Expr,
    name: &str,
    sql: &str,
) -> Result<Option<std::time::Duration>, SqlError> {
    let text = setting_text(value, false).ok_or_else(|| SqlError::not_supported(sql))?;
    super::settings_at_start::timeout(&text, name)
}

/// A SET's value as text: a number or a quoted string, and with
/// `identifiers` a bare word too (`SET client_encoding TO utf8`).
fn setting_text(value: &ast::Expr, identifiers: bool) -> Option<String> {
    match value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => Some(n.clone()),
            ast::Value::SingleQuotedString(s) => Some(s.clone()),
            _ => None,
        },
        ast::Expr::Identifier(i) if identifiers => Some(i.value.clone()),
        _ => None,
    }
}

fn targets(
    cols: &[ColumnDef],
    names: impl Iterator<Item = String>,
) -> Result<Vec<usize>, SqlError> {
    let t: Vec<usize> = names
        .map(|n| column_of(cols, &n))
        .collect::<Result<_, _>>()?;
    Ok(if t.is_empty() {
        (0..cols.len()).collect()
    } else {
        t
    })
}

/// Calls `build` with the table `relation` names, its catalog entry and a
/// scope over its columns: where UPDATE and DELETE start.
fn in_table<R>(
    cat: &dyn Tables,
    relation: &ast::TableFactor,
    declared: &[Option<SqlType>],
    params: &mut Vec<SqlType>,
    sql: &str,
    limits: &Limits,
    build: impl FnOnce(String, &TableMeta, &mut Scope<'_>) -> Result<R, SqlError>,
) -> Result<R, SqlError> {
    let table = table_factor(relation, sql)?;
    let meta = cat.get(&table)?;
    let cols = scope_columns(&meta.def.columns);
    let mut sc = Scope {
        columns: &cols,
        params,
        declared,
        sql,
        limits,
    };
    build(table, &meta, &mut sc)
}

fn update(
    cat: &dyn Tables,
    up: &ast::Update,
    declared: &[Option<SqlType>],
    params: &mut Vec<SqlType>,
    sql: &str,
    limits: &Limits,
) -> Result<Plan, SqlError> {
    let ns = || SqlError::not_supported(sql);
    if up.from.is_some()
        || up.returning.is_some()
        || !up.table.joins.is_empty()
        || up.limit.is_some()
        || !up.order_by.is_empty()
    {
        return Err(ns());
    }
    in_table(
        cat,
        &up.table.relation,
        declared,
        params,
        sql,
        limits,
        |table, meta, sc| {
            let mut sets = Vec::new();
            for a in &up.assignments {
                let ast::AssignmentTarget::ColumnName(n) = &a.target else {
                    return Err(ns());
                };
                let c = column_of(&meta.def.columns, &object_name(n, sql)?)?;
                let mut e = sc.convert(&a.value)?;
                sc.type_of(&mut e, meta.def.columns[c].ty);
                sets.push((c, e));
            }
            let filter = sc.condition(up.selection.as_ref())?.map(or_chains_as_in);
            let access = table_access(filter.as_ref(), &meta.def);
            Ok(Plan::Update {
                table,
                sets,
                filter,
                access,
            })
        },
    )
}

fn delete(
    cat: &dyn Tables,
    del: &ast::Delete,
    declared: &[Option<SqlType>],
    params: &mut Vec<SqlType>,
    sql: &str,
    limits: &Limits,
) -> Result<Plan, SqlError> {
    let ns = || SqlError::not_supported(sql);
    if del.using.is_some()
        || del.returning.is_some()
        || del.limit.is_some()
        || !del.order_by.is_empty()
        || !del.tables.is_empty()
    {
        return Err(ns());
    }
    let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) = &del.from;
    let [twj] = from.as_slice() else {
        return Err(ns());
    };
    if !twj.joins.is_empty() {
        return Err(ns());
    }
    in_table(
        cat,
        &twj.relation,
        declared,
        params,
        sql,
        limits,
        |table, meta, sc| {
            let filter = sc.condition(del.selection.as_ref())?.map(or_chains_as_in);
            let access = table_access(filter.as_ref(), &meta.def);
            Ok(Plan::Delete {
                table,
                filter,
                access,
            })
        },
    )
}

fn insert(
    cat: &dyn Tables,
    ins: &ast::Insert,
    declared: &[Option<SqlType>],
    params: &mut Vec<SqlType>,
    sql: &str,
    limits: &Limits,
) -> Result<Plan, SqlError> {
    let ns = || SqlError::not_supported(sql);
    if ins.or.is_some()
        || ins.on.is_some()
        || ins.returning.is_some()
        || !ins.assignments.is_empty()
        || ins.partitioned.is_some()
        || ins.table_alias.is_some()
    {
        return Err(ns());
    }
    let ast::TableObject::TableName(name) = &ins.table else {
        return Err(ns());
    };
    let table = object_name(name, sql)?;
    let meta = cat.get(&table)?;
    let names = ins
        .columns
        .iter()
        .map(|c| object_name(c, sql))
        .collect::<Result<Vec<_>, _>>()?;
    let explicit = !names.is_empty();
    let mut targets = targets(&meta.def.columns, names.into_iter())?;
    let Some(q) = &ins.source else {
        return Err(ns());
    };
    // Without a column list, the values fill the first columns.
    if !explicit {
        let width = match q.body.as_ref() {
            ast::SetExpr::Values(v) => v.rows.first().map_or(0, |r| r.len()),
            ast::SetExpr::Select(s) => s.projection.len(),
            _ => 0,
        };
        if width < targets.len() {
            targets.truncate(width);
        }
    }
    if q.with.is_some() || q.order_by.is_some() || q.limit_clause.is_some() {
        return Err(ns());
    }
    let arity = |n: usize| {
        if n == targets.len() {
            Ok(())
        } else {
            Err(SqlError::new(
                codes::SYNTAX_ERROR,
                "INSERT has a different number of expressions than target columns",
            ))
        }
    };
    let source = match q.body.as_ref() {
        ast::SetExpr::Values(v) => {
            let none = Vec::new();
            let mut sc = Scope {
                columns: &none,
                params,
                declared,
                sql,
                limits,
            };
            let mut rows = Vec::with_capacity(v.rows.len());
            for r in &v.rows {
                arity(r.len())?;
                let mut row = Vec::with_capacity(r.len());
                for (e, t) in r.iter().zip(&targets) {
                    let mut e = sc.convert(e)?;
                    sc.type_of(&mut e, meta.def.columns[*t].ty);
                    row.push(e);
                }
                rows.push(row);
            }
            InsertSource::Values(rows)
        }
        ast::SetExpr::Select(s) => {
            let [twj] = s.from.as_slice() else {
                return Err(ns());
            };
            let ast::TableFactor::Table {
                name,
                alias: Some(alias),
                args: Some(args),
                ..
            } = &twj.relation
            else {
                return Err(ns());
            };
            if object_name(name, sql)? != "generate_series"
                || args.args.len() != 2
                || !alias.columns.is_empty()
                || s.selection.is_some()
                || s.distinct.is_some()
                || s.having.is_some()
                || !twj.joins.is_empty()
            {
                return Err(ns());
            }
            let none = Vec::new();
            let mut sc = Scope {
                columns: &none,
                params,
                declared,
                sql,
                limits,
            };
            let mut bound = |a: &ast::FunctionArg| match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => sc.convert(e),
                _ => Err(ns()),
            };
            let (mut from, mut to) = (bound(&args.args[0])?, bound(&args.args[1])?);
            let x = vec![(ident(&alias.name), SqlType::Int4)];
            let mut sc = Scope {
                columns: &x,
                params,
                declared,
                sql,
                limits,
            };
            sc.type_of(&mut from, SqlType::Int4);
            sc.type_of(&mut to, SqlType::Int4);
            arity(s.projection.len())?;
            let mut exprs = Vec::new();
            for (item, t) in s.projection.iter().zip(&targets) {
                let ast::SelectItem::UnnamedExpr(e) = item else {
                    return Err(ns());
                };
                let mut e = sc.convert(e)?;
                sc.type_of(&mut e, meta.def.columns[*t].ty);
                exprs.push(e);
            }
            InsertSource::Series { from, to, exprs }
        }
        _ => return Err(ns()),
    };
    Ok(Plan::Insert {
        table,
        targets,
        source,
    })
}

/// A parsed and planned statement, reusable.
pub struct Prepared {
    pub(super) sql: String,
    pub(super) declared: Vec<Option<SqlType>>,
    pub(super) planned: Planned,
    pub(super) version: u64,
}

impl Prepared {
    pub fn params(&self) -> &[SqlType] {
        &self.planned.params
    }
    pub fn columns(&self) -> &[Column] {
        &self.planned.columns
    }
    pub fn sql(&self) -> &str {
        &self.sql
    }
    /// BEGIN, COMMIT or ROLLBACK.
    pub(super) fn is_transaction_control(&self) -> bool {
        matches!(
            self.planned.plan,
            Plan::Begin | Plan::Commit | Plan::Rollback
        )
    }
    pub(super) fn is_begin(&self) -> bool {
        matches!(self.planned.plan, Plan::Begin)
    }
}
