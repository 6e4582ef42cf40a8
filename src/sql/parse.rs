//! From SQL text to plans: a small shim for the two statements sqlparser
//! 0.63 does not parse, then the AST mapped onto the supported shapes.
//! Everything else is 0A000, never a guess.

use super::catalog::{Catalog, ColumnDef};
use super::expr::{ident, object_name, Expr, Scope};
use super::plan::{choose_access, default_name, Access, InsertSource, Item, Plan, Select};
use super::types::{codes, Column, SqlError, SqlType};
use sqlparser::ast::{self, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

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

pub fn parse(sql: &str) -> Result<Vec<Statement>, SqlError> {
    Parser::parse_sql(&PostgreSqlDialect {}, &shim(sql))
        .map_err(|e| SqlError::new(codes::SYNTAX_ERROR, format!("syntax error: {e}")))
}

/// A planned statement with its parameter types and result columns.
pub struct Planned {
    pub plan: Plan,
    pub params: Vec<SqlType>,
    pub columns: Vec<Column>,
}

pub fn plan(
    cat: &Catalog,
    stmt: &Statement,
    declared: &[Option<SqlType>],
    sql: &str,
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
        Statement::CreateTable(ct) => create_table(ct, sql)?,
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
            if !ci.unique
                && ci.predicate.is_none()
                && ci.include.is_empty()
                && ci.columns.len() == 1 =>
        {
            let table = object_name(&ci.table_name, sql)?;
            let meta = cat.get(&table)?;
            let ast::Expr::Identifier(col) = &ci.columns[0].column.expr else {
                return Err(ns());
            };
            let column = column_of(&meta.def.columns, &ident(col))?;
            let name = match &ci.name {
                Some(n) => object_name(n, sql)?,
                None => format!("{table}_{}_idx", ident(col)),
            };
            Plan::CreateIndex {
                name,
                table,
                column,
            }
        }
        Statement::AlterTable(at) if at.operations.len() == 1 => {
            let table = object_name(&at.name, sql)?;
            match &at.operations[0] {
                ast::AlterTableOperation::AddConstraint {
                    constraint: ast::TableConstraint::PrimaryKey(pk),
                    ..
                } if pk.columns.len() == 1 => {
                    let meta = cat.get(&table)?;
                    let ast::Expr::Identifier(col) = &pk.columns[0].column.expr else {
                        return Err(ns());
                    };
                    let column = column_of(&meta.def.columns, &ident(col))?;
                    Plan::AddPrimaryKey { table, column }
                }
                _ => return Err(ns()),
            }
        }
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
        Statement::Insert(ins) => insert(cat, ins, declared, &mut params, sql)?,
        Statement::Update(up) => {
            if up.from.is_some()
                || up.returning.is_some()
                || !up.table.joins.is_empty()
                || up.limit.is_some()
                || !up.order_by.is_empty()
            {
                return Err(ns());
            }
            let table = table_factor(&up.table.relation, sql)?;
            let meta = cat.get(&table)?;
            let cols = scope_columns(&meta.def.columns);
            let mut sc = Scope {
                columns: &cols,
                params: &mut params,
                declared,
                sql,
            };
            let mut sets = Vec::new();
            for a in &up.assignments {
                let ast::AssignmentTarget::ColumnName(n) = &a.target else {
                    return Err(ns());
                };
                let c = column_of(&meta.def.columns, &object_name(n, sql)?)?;
                let e = sc.convert(&a.value)?;
                sc.type_of(&e, meta.def.columns[c].ty);
                sets.push((c, e));
            }
            let filter = up.selection.as_ref().map(|w| sc.convert(w)).transpose()?;
            if let Some(f) = &filter {
                sc.type_of(f, SqlType::Bool);
            }
            let indexed: Vec<usize> = meta.def.indexes.iter().map(|i| i.column).collect();
            let access = choose_access(filter.as_ref(), meta.def.primary_key, &indexed);
            Plan::Update {
                table,
                sets,
                filter,
                access,
            }
        }
        Statement::Delete(del) => {
            if del.using.is_some()
                || del.returning.is_some()
                || del.limit.is_some()
                || !del.order_by.is_empty()
                || !del.tables.is_empty()
            {
                return Err(ns());
            }
            let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) =
                &del.from;
            let [twj] = from.as_slice() else {
                return Err(ns());
            };
            if !twj.joins.is_empty() {
                return Err(ns());
            }
            let table = table_factor(&twj.relation, sql)?;
            let meta = cat.get(&table)?;
            let cols = scope_columns(&meta.def.columns);
            let mut sc = Scope {
                columns: &cols,
                params: &mut params,
                declared,
                sql,
            };
            let filter = del.selection.as_ref().map(|w| sc.convert(w)).transpose()?;
            if let Some(f) = &filter {
                sc.type_of(f, SqlType::Bool);
            }
            let indexed: Vec<usize> = meta.def.indexes.iter().map(|i| i.column).collect();
            let access = choose_access(filter.as_ref(), meta.def.primary_key, &indexed);
            Plan::Delete {
                table,
                filter,
                access,
            }
        }
        Statement::Query(q) => {
            let (sel, cols) = select(cat, q, declared, &mut params, sql)?;
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

fn column_of(cols: &[ColumnDef], name: &str) -> Result<usize, SqlError> {
    cols.iter().position(|c| c.name == name).ok_or_else(|| {
        SqlError::new(
            codes::UNDEFINED_COLUMN,
            format!("column \"{name}\" does not exist"),
        )
    })
}

fn scope_columns(cols: &[ColumnDef]) -> Vec<(String, SqlType)> {
    cols.iter().map(|c| (c.name.clone(), c.ty)).collect()
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

fn table_factor(tf: &ast::TableFactor, sql: &str) -> Result<String, SqlError> {
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

fn sql_type(dt: &ast::DataType, sql: &str) -> Result<(SqlType, bool), SqlError> {
    use ast::DataType as D;
    let len = |l: &Option<ast::CharacterLength>| match l {
        Some(ast::CharacterLength::IntegerLength { length, unit: None }) => {
            Ok(Some(*length as u32))
        }
        None => Ok(None),
        _ => Err(SqlError::not_supported(sql)),
    };
    Ok(match dt {
        D::Int(None) | D::Integer(None) | D::Int4(None) | D::SmallInt(None) | D::Int2(None) => {
            (SqlType::Int4, false)
        }
        D::BigInt(None) | D::Int8(None) => (SqlType::Int8, false),
        D::Char(l) | D::Character(l) => (SqlType::Bpchar(len(l)?.unwrap_or(1)), false),
        D::Varchar(l) | D::CharacterVarying(l) => (SqlType::Varchar(len(l)?), false),
        D::Text => (SqlType::Text, false),
        D::Timestamp(None, ast::TimezoneInfo::None) => (SqlType::Timestamp, false),
        D::Boolean | D::Bool => (SqlType::Bool, false),
        D::Custom(name, mods) if mods.is_empty() => match object_name(name, sql)?.as_str() {
            "serial" | "serial4" => (SqlType::Int4, true),
            "bigserial" | "serial8" => (SqlType::Int8, true),
            _ => return Err(SqlError::not_supported(sql)),
        },
        _ => return Err(SqlError::not_supported(sql)),
    })
}

fn create_table(ct: &ast::CreateTable, sql: &str) -> Result<Plan, SqlError> {
    let ns = || SqlError::not_supported(sql);
    if ct.temporary
        || ct.external
        || ct.or_replace
        || ct.query.is_some()
        || ct.like.is_some()
        || ct.clone.is_some()
        || ct.partition_by.is_some()
        || ct.primary_key.is_some()
    {
        return Err(ns());
    }
    let mut wrong_storage = false;
    if let ast::CreateTableOptions::With(opts) = &ct.table_options {
        for o in opts {
            match o {
                ast::SqlOption::KeyValue { key, .. } if ident(key) == "fillfactor" => {}
                _ => wrong_storage = true,
            }
        }
    } else if !matches!(ct.table_options, ast::CreateTableOptions::None) {
        wrong_storage = true;
    }
    if wrong_storage {
        return Err(ns());
    }
    let mut columns = Vec::new();
    let mut primary_key = None;
    for (i, c) in ct.columns.iter().enumerate() {
        let (ty, serial) = sql_type(&c.data_type, sql)?;
        let mut def = ColumnDef {
            name: ident(&c.name),
            ty,
            not_null: serial,
            default: None,
            serial,
        };
        for o in &c.options {
            match &o.option {
                ast::ColumnOption::NotNull => def.not_null = true,
                ast::ColumnOption::Null => {}
                ast::ColumnOption::Default(e) => {
                    let cols = Vec::new();
                    let mut p = Vec::new();
                    let e = Scope {
                        columns: &cols,
                        params: &mut p,
                        declared: &[],
                        sql,
                    }
                    .convert(e)?;
                    let Expr::Const(v, _) = e else {
                        return Err(ns());
                    };
                    def.default = Some(super::exec::store_value(v, &def)?);
                }
                ast::ColumnOption::PrimaryKey(_) if primary_key.is_none() => primary_key = Some(i),
                _ => return Err(ns()),
            }
        }
        columns.push(def);
    }
    for con in &ct.constraints {
        match con {
            ast::TableConstraint::PrimaryKey(pk)
                if pk.columns.len() == 1 && primary_key.is_none() =>
            {
                let ast::Expr::Identifier(col) = &pk.columns[0].column.expr else {
                    return Err(ns());
                };
                primary_key = Some(column_of(&columns, &ident(col))?);
            }
            _ => return Err(ns()),
        }
    }
    if let Some(pk) = primary_key {
        columns[pk].not_null = true;
    }
    Ok(Plan::CreateTable {
        name: object_name(&ct.name, sql)?,
        columns,
        primary_key,
        if_not_exists: ct.if_not_exists,
    })
}

fn insert(
    cat: &Catalog,
    ins: &ast::Insert,
    declared: &[Option<SqlType>],
    params: &mut Vec<SqlType>,
    sql: &str,
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
            };
            let mut rows = Vec::with_capacity(v.rows.len());
            for r in &v.rows {
                arity(r.len())?;
                let mut row = Vec::with_capacity(r.len());
                for (e, t) in r.iter().zip(&targets) {
                    let e = sc.convert(e)?;
                    sc.type_of(&e, meta.def.columns[*t].ty);
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
            };
            let mut bound = |a: &ast::FunctionArg| match a {
                ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => sc.convert(e),
                _ => Err(ns()),
            };
            let (from, to) = (bound(&args.args[0])?, bound(&args.args[1])?);
            let x = vec![(ident(&alias.name), SqlType::Int4)];
            let mut sc = Scope {
                columns: &x,
                params,
                declared,
                sql,
            };
            sc.type_of(&from, SqlType::Int4);
            sc.type_of(&to, SqlType::Int4);
            arity(s.projection.len())?;
            let mut exprs = Vec::new();
            for (item, t) in s.projection.iter().zip(&targets) {
                let ast::SelectItem::UnnamedExpr(e) = item else {
                    return Err(ns());
                };
                let e = sc.convert(e)?;
                sc.type_of(&e, meta.def.columns[*t].ty);
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

fn select(
    cat: &Catalog,
    q: &ast::Query,
    declared: &[Option<SqlType>],
    params: &mut Vec<SqlType>,
    sql: &str,
) -> Result<(Select, Vec<Column>), SqlError> {
    let ns = || SqlError::not_supported(sql);
    if q.with.is_some()
        || q.fetch.is_some()
        || !q.locks.is_empty()
        || q.for_clause.is_some()
        || !q.pipe_operators.is_empty()
    {
        return Err(ns());
    }
    let ast::SetExpr::Select(s) = q.body.as_ref() else {
        return Err(ns());
    };
    let no_group =
        matches!(&s.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    if !no_group
        || s.having.is_some()
        || s.top.is_some()
        || s.into.is_some()
        || !s.lateral_views.is_empty()
        || s.prewhere.is_some()
        || !s.sort_by.is_empty()
        || s.qualify.is_some()
        || !s.named_window.is_empty()
        || !s.connect_by.is_empty()
    {
        return Err(ns());
    }
    let distinct = match &s.distinct {
        None => false,
        Some(ast::Distinct::Distinct) => true,
        _ => return Err(ns()),
    };
    let (table, meta) = match s.from.as_slice() {
        [] => (None, None),
        [twj] if twj.joins.is_empty() => {
            let t = table_factor(&twj.relation, sql)?;
            let m = cat.get(&t)?;
            (Some(t), Some(m))
        }
        _ => return Err(ns()),
    };
    let cols = meta
        .as_ref()
        .map(|m| scope_columns(&m.def.columns))
        .unwrap_or_default();
    let mut sc = Scope {
        columns: &cols,
        params,
        declared,
        sql,
    };
    let mut items = Vec::new();
    let mut columns = Vec::new();
    for it in &s.projection {
        let (e, alias) = match it {
            ast::SelectItem::UnnamedExpr(e) => (e, None),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(ident(alias))),
            ast::SelectItem::Wildcard(_) => {
                for (i, (n, t)) in cols.iter().enumerate() {
                    items.push(Item::Expr(Expr::Column(i)));
                    columns.push(Column {
                        name: n.clone(),
                        ty: *t,
                    });
                }
                continue;
            }
            _ => return Err(ns()),
        };
        let item = aggregate(&mut sc, e)?;
        let ty = match &item {
            Item::Expr(x) => sc.type_of(x, SqlType::Unknown),
            Item::Count(_) | Item::Sum(_) => SqlType::Int8,
            Item::Min(x) | Item::Max(x) => sc.type_of(x, SqlType::Unknown),
        };
        let ty = if ty == SqlType::Unknown {
            SqlType::Text
        } else {
            ty
        };
        columns.push(Column {
            name: alias.unwrap_or_else(|| default_name(&item, &cols)),
            ty,
        });
        items.push(item);
    }
    let aggregate = items.iter().any(|i| !matches!(i, Item::Expr(_)));
    if aggregate
        && items
            .iter()
            .any(|i| matches!(i, Item::Expr(e) if !e.is_constant()))
    {
        return Err(ns());
    }
    let filter = s.selection.as_ref().map(|w| sc.convert(w)).transpose()?;
    if let Some(f) = &filter {
        sc.type_of(f, SqlType::Bool);
    }
    let mut order = Vec::new();
    if let Some(ob) = &q.order_by {
        let ast::OrderByKind::Expressions(exprs) = &ob.kind else {
            return Err(ns());
        };
        for o in exprs {
            if o.with_fill.is_some() || o.options.nulls_first.is_some() || aggregate {
                return Err(ns());
            }
            let e = match &o.expr {
                ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
                    let ast::Value::Number(n, _) = &v.value else {
                        unreachable!()
                    };
                    match n
                        .parse::<usize>()
                        .ok()
                        .and_then(|n| items.get(n.wrapping_sub(1)))
                    {
                        Some(Item::Expr(e)) => e.clone(),
                        _ => return Err(ns()),
                    }
                }
                other => sc.convert(other)?,
            };
            sc.type_of(&e, SqlType::Unknown);
            if distinct
                && !items
                    .iter()
                    .any(|i| matches!(i, Item::Expr(x) if format!("{x:?}") == format!("{e:?}")))
            {
                return Err(ns());
            }
            let desc = match &o.options.sort {
                None | Some(ast::OrderBySort::Asc) => false,
                Some(ast::OrderBySort::Desc) => true,
                _ => return Err(ns()),
            };
            order.push((e, desc));
        }
    }
    let limit = match &q.limit_clause {
        None => None,
        Some(ast::LimitClause::LimitOffset {
            limit: Some(l),
            offset: None,
            limit_by,
        }) if limit_by.is_empty() => {
            let e = sc.convert(l)?;
            if !e.is_constant() {
                return Err(ns());
            }
            sc.type_of(&e, SqlType::Int8);
            Some(e)
        }
        _ => return Err(ns()),
    };
    let access = match &meta {
        Some(m) => {
            let indexed: Vec<usize> = m.def.indexes.iter().map(|i| i.column).collect();
            choose_access(filter.as_ref(), m.def.primary_key, &indexed)
        }
        None => Access::Full,
    };
    if table.is_none() && (filter.is_some() || !order.is_empty()) {
        return Err(ns());
    }
    Ok((
        Select {
            table,
            items,
            filter,
            access,
            distinct,
            order,
            limit,
            aggregate,
        },
        columns,
    ))
}

fn aggregate(sc: &mut Scope<'_>, e: &ast::Expr) -> Result<Item, SqlError> {
    let ast::Expr::Function(f) = e else {
        return Ok(Item::Expr(sc.convert(e)?));
    };
    let name = object_name(&f.name, sc.sql)?;
    if !["count", "sum", "min", "max"].contains(&name.as_str()) {
        return Ok(Item::Expr(sc.convert(e)?));
    }
    let ns = || SqlError::not_supported(sc.sql);
    let ast::FunctionArguments::List(l) = &f.args else {
        return Err(ns());
    };
    if f.over.is_some()
        || f.filter.is_some()
        || l.duplicate_treatment.is_some()
        || !l.clauses.is_empty()
        || l.args.len() != 1
    {
        return Err(ns());
    }
    let arg = match &l.args[0] {
        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) if name == "count" => {
            return Ok(Item::Count(None))
        }
        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => sc.convert(x)?,
        _ => return Err(ns()),
    };
    let t = sc.type_of(&arg, SqlType::Unknown);
    if name == "sum" && !t.is_integer() {
        return Err(ns());
    }
    Ok(match name.as_str() {
        "count" => Item::Count(Some(arg)),
        "sum" => Item::Sum(arg),
        "min" => Item::Min(arg),
        _ => Item::Max(arg),
    })
}
