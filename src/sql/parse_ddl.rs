//! DDL statements mapped onto plans: CREATE TABLE with its column types
//! and a primary key of one or more columns, CREATE INDEX on one or more
//! columns, ALTER TABLE ... ADD PRIMARY KEY.

use super::catalog::column_of;
use super::catalog::{ColumnDef, Tables};
use super::expr::{ident, object_name, Expr, Scope};
use super::limits::Limits;
use super::plan::Plan;
use super::types::{codes, SqlError, SqlType};
use sqlparser::ast;

/// A column type: its SqlType, whether SERIAL, whether SMALLINT.
fn sql_type(dt: &ast::DataType, sql: &str) -> Result<(SqlType, bool, bool), SqlError> {
    use ast::DataType as D;
    let len = |l: &Option<ast::CharacterLength>| match l {
        Some(ast::CharacterLength::IntegerLength { length, unit: None }) => {
            Ok(Some(*length as u32))
        }
        None => Ok(None),
        _ => Err(SqlError::not_supported(sql)),
    };
    Ok(match dt {
        D::Int(None) | D::Integer(None) | D::Int4(None) => (SqlType::Int4, false, false),
        D::SmallInt(None) | D::Int2(None) => (SqlType::Int4, false, true),
        D::BigInt(None) | D::Int8(None) => (SqlType::Int8, false, false),
        D::Char(l) | D::Character(l) => (SqlType::Bpchar(len(l)?.unwrap_or(1)), false, false),
        D::Varchar(l) | D::CharacterVarying(l) => (SqlType::Varchar(len(l)?), false, false),
        D::Text => (SqlType::Text, false, false),
        D::Timestamp(None, ast::TimezoneInfo::None) => (SqlType::Timestamp, false, false),
        D::Boolean | D::Bool => (SqlType::Bool, false, false),
        D::Custom(name, mods) if mods.is_empty() => match object_name(name, sql)?.as_str() {
            "serial" | "serial4" => (SqlType::Int4, true, false),
            "bigserial" | "serial8" => (SqlType::Int8, true, false),
            "smallserial" | "serial2" => (SqlType::Int4, true, true),
            _ => return Err(SqlError::not_supported(sql)),
        },
        _ => return Err(SqlError::not_supported(sql)),
    })
}

/// The most columns a table may have, as in PostgreSQL.
const MAX_COLUMNS: usize = 1600;

pub(super) fn create_table(
    ct: &ast::CreateTable,
    sql: &str,
    limits: &Limits,
) -> Result<Plan, SqlError> {
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
    // PostgreSQL's MaxHeapAttributeNumber.
    if ct.columns.len() > MAX_COLUMNS {
        return Err(SqlError::new(
            codes::TOO_MANY_COLUMNS,
            format!("tables can have at most {MAX_COLUMNS} columns"),
        ));
    }
    let mut columns = Vec::new();
    let mut primary_key = None;
    for (i, c) in ct.columns.iter().enumerate() {
        let (ty, serial, smallint) = sql_type(&c.data_type, sql)?;
        let mut def = ColumnDef {
            name: ident(&c.name),
            ty,
            not_null: serial,
            default: None,
            serial,
            smallint,
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
                        limits,
                    }
                    .convert(e)?;
                    let Expr::Const(v, _) = e else {
                        return Err(ns());
                    };
                    def.default = Some(super::coerce::store_value(v, &def)?);
                }
                ast::ColumnOption::PrimaryKey(_) if primary_key.is_none() => {
                    primary_key = Some(vec![i])
                }
                _ => return Err(ns()),
            }
        }
        columns.push(def);
    }
    for con in &ct.constraints {
        match con {
            ast::TableConstraint::PrimaryKey(pk) if primary_key.is_none() => {
                primary_key = Some(key_columns(&pk.columns, &columns, sql)?);
            }
            _ => return Err(ns()),
        }
    }
    for &c in primary_key.iter().flatten() {
        columns[c].not_null = true;
    }
    Ok(Plan::CreateTable {
        name: object_name(&ct.name, sql)?,
        columns,
        primary_key,
        if_not_exists: ct.if_not_exists,
    })
}

/// The positions of a key's columns: plain column names, ascending,
/// each once (anything else is 0A000; an unknown name 42703).
fn key_columns(
    list: &[ast::IndexColumn],
    columns: &[ColumnDef],
    sql: &str,
) -> Result<Vec<usize>, SqlError> {
    let mut out = Vec::with_capacity(list.len());
    for c in list {
        let ast::Expr::Identifier(name) = &c.column.expr else {
            return Err(SqlError::not_supported(sql));
        };
        if !matches!(c.column.options.sort, None | Some(ast::OrderBySort::Asc))
            || c.column.options.nulls_first.is_some()
            || c.operator_class.is_some()
        {
            return Err(SqlError::not_supported(sql));
        }
        let i = column_of(columns, &ident(name))?;
        if out.contains(&i) {
            return Err(SqlError::new(
                "42701",
                format!("column \"{}\" appears twice in a key", ident(name)),
            ));
        }
        out.push(i);
    }
    if out.is_empty() {
        return Err(SqlError::not_supported(sql));
    }
    Ok(out)
}

pub(super) fn create_index(
    cat: &dyn Tables,
    ci: &ast::CreateIndex,
    sql: &str,
) -> Result<Plan, SqlError> {
    let table = object_name(&ci.table_name, sql)?;
    let meta = cat.get(&table)?;
    let columns = key_columns(&ci.columns, &meta.def.columns, sql)?;
    let name = match &ci.name {
        Some(n) => object_name(n, sql)?,
        // PostgreSQL's default name: the table, the columns, "idx".
        None => {
            let mut n = table.clone();
            for &c in &columns {
                n.push('_');
                n.push_str(&meta.def.columns[c].name);
            }
            n + "_idx"
        }
    };
    Ok(Plan::CreateIndex {
        name,
        table,
        columns,
    })
}

pub(super) fn alter_table(
    cat: &dyn Tables,
    at: &ast::AlterTable,
    sql: &str,
) -> Result<Plan, SqlError> {
    let ns = || SqlError::not_supported(sql);
    let table = object_name(&at.name, sql)?;
    Ok(match &at.operations[0] {
        ast::AlterTableOperation::AddConstraint {
            constraint: ast::TableConstraint::PrimaryKey(pk),
            ..
        } => {
            let meta = cat.get(&table)?;
            let columns = key_columns(&pk.columns, &meta.def.columns, sql)?;
            Plan::AddPrimaryKey { table, columns }
        }
        _ => return Err(ns()),
    })
}
