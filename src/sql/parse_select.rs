//! SELECT mapped onto a plan: one table or none, filters, aggregates,
//! DISTINCT, ORDER BY and LIMIT.

use super::catalog::scope_columns;
use super::catalog::Tables;
use super::expr::table_factor;
use super::expr::{ident, object_name, Expr, Scope};
use super::limits::Limits;
use super::or_chain::or_chains_as_in;
use super::plan::{default_name, in_access_order, table_access, Access, Item, Select};
use super::types::{codes, Column, SqlError, SqlType};
use sqlparser::ast;

/// PostgreSQL's MaxTupleAttributeNumber: a SELECT list of more entries
/// (a `*` counts its columns) is 54011. 500,000 were accepted, and the
/// result of one such statement took about 490 MB.
const MAX_TARGET_ENTRIES: usize = 1664;

pub(super) fn select(
    cat: &dyn Tables,
    q: &ast::Query,
    declared: &[Option<SqlType>],
    params: &mut Vec<SqlType>,
    sql: &str,
    limits: &Limits,
) -> Result<(Select, Vec<Column>), SqlError> {
    let ns = || SqlError::not_supported(sql);
    // FOR UPDATE, plain: no OF, NOWAIT or SKIP LOCKED.
    let lock = match q.locks.as_slice() {
        [] => false,
        [l] if l.lock_type == ast::LockType::Update && l.of.is_none() && l.nonblock.is_none() => {
            true
        }
        _ => return Err(ns()),
    };
    if q.with.is_some()
        || q.fetch.is_some()
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
        limits,
    };
    let mut items = Vec::new();
    let mut columns = Vec::new();
    let too_many = || {
        SqlError::new(
            codes::TOO_MANY_COLUMNS,
            format!("target lists can have at most {MAX_TARGET_ENTRIES} entries"),
        )
    };
    if s.projection.len() > MAX_TARGET_ENTRIES {
        return Err(too_many());
    }
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
        let mut item = aggregate(&mut sc, e)?;
        let ty = match &mut item {
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
    if items.len() > MAX_TARGET_ENTRIES {
        return Err(too_many());
    }
    let aggregate = items.iter().any(|i| !matches!(i, Item::Expr(_)));
    if aggregate
        && items
            .iter()
            .any(|i| matches!(i, Item::Expr(e) if !e.is_constant()))
    {
        return Err(ns());
    }
    let filter = sc.condition(s.selection.as_ref())?.map(or_chains_as_in);
    let mut order = Vec::new();
    if let Some(ob) = &q.order_by {
        let ast::OrderByKind::Expressions(exprs) = &ob.kind else {
            return Err(ns());
        };
        for o in exprs {
            if o.with_fill.is_some() || o.options.nulls_first.is_some() || aggregate {
                return Err(ns());
            }
            let mut e = match &o.expr {
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
            sc.type_of(&mut e, SqlType::Unknown);
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
            let mut e = sc.convert(l)?;
            if !e.is_constant() {
                return Err(ns());
            }
            sc.type_of(&mut e, SqlType::Int8);
            Some(e)
        }
        _ => return Err(ns()),
    };
    let access = match &meta {
        Some(m) => table_access(filter.as_ref(), &m.def),
        None => Access::Full,
    };
    if table.is_none() && (filter.is_some() || !order.is_empty() || lock) {
        return Err(ns());
    }
    let pk = meta
        .as_ref()
        .and_then(|m| m.def.primary_key.as_ref())
        .map_or(&[][..], |k| &k.0[..]);
    let in_access_order =
        !aggregate && !distinct && limit.is_some() && in_access_order(&access, pk, &order);
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
            lock,
            in_access_order,
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
    let mut arg = match &l.args[0] {
        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) if name == "count" => {
            return Ok(Item::Count(None))
        }
        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(x)) => sc.convert(x)?,
        _ => return Err(ns()),
    };
    let t = sc.type_of(&mut arg, SqlType::Unknown);
    // PostgreSQL's sum(int8) is numeric, a type this server lacks: an int8
    // result would be a different answer, so only sum(int4) is served.
    if name == "sum" && t != SqlType::Int4 {
        return Err(ns());
    }
    Ok(match name.as_str() {
        "count" => Item::Count(Some(arg)),
        "sum" => Item::Sum(arg),
        "min" => Item::Min(arg),
        _ => Item::Max(arg),
    })
}
