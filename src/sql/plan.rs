//! Plans: what a statement does, resolved against the catalog, with its
//! parameter types and result columns; and the choice of access path.

use super::catalog::{ColumnDef, TableDef};
use super::expr::{Cmp, Expr};
use super::types::SqlType;

#[derive(Debug)]
pub enum Plan {
    Begin,
    Commit,
    Rollback,
    /// VACUUM / ANALYZE: no-ops with their tags.
    Noop(&'static str),
    /// CHECKPOINT: a checkpoint now, durable when it returns.
    Checkpoint,
    /// SET statement_timeout: the session's from its next statement
    /// (`None`: no limit); `local`: SET LOCAL, until the block ends.
    SetStatementTimeout {
        timeout: Option<std::time::Duration>,
        local: bool,
    },
    CreateTable {
        name: String,
        columns: Vec<ColumnDef>,
        primary_key: Option<usize>,
        if_not_exists: bool,
    },
    DropTables {
        names: Vec<String>,
        if_exists: bool,
    },
    Truncate(Vec<String>),
    CreateIndex {
        name: String,
        table: String,
        column: usize,
    },
    AddPrimaryKey {
        table: String,
        column: usize,
    },
    Insert {
        table: String,
        /// The target column of each source value.
        targets: Vec<usize>,
        source: InsertSource,
    },
    Update {
        table: String,
        sets: Vec<(usize, Expr)>,
        filter: Option<Expr>,
        access: Access,
    },
    Delete {
        table: String,
        filter: Option<Expr>,
        access: Access,
    },
    Select(Select),
    Copy {
        table: String,
        targets: Vec<usize>,
    },
}

#[derive(Debug)]
pub enum InsertSource {
    Values(Vec<Vec<Expr>>),
    /// `SELECT exprs FROM generate_series(from, to) AS x`: the expressions
    /// see one column, x.
    Series {
        from: Expr,
        to: Expr,
        exprs: Vec<Expr>,
    },
}

/// How the rows a statement reads are found. The full predicate is
/// checked on every row found, whichever path found it.
#[derive(Debug)]
pub enum Access {
    Full,
    /// `pk = x`: one point read.
    Key(Expr),
    /// `pk BETWEEN lo AND hi`, `pk >= lo`, ...: a key range, inclusive.
    Range(Option<Expr>, Option<Expr>),
    /// `col = x` on an indexed column: the index's position in the table.
    Index(usize, Expr),
}

#[derive(Debug)]
pub enum Item {
    Expr(Expr),
    Count(Option<Expr>),
    Sum(Expr),
    Min(Expr),
    Max(Expr),
}

#[derive(Debug)]
pub struct Select {
    /// `None`: SELECT without FROM.
    pub table: Option<String>,
    pub items: Vec<Item>,
    pub filter: Option<Expr>,
    pub access: Access,
    pub distinct: bool,
    /// Expressions over the table's row, descending or not.
    pub order: Vec<(Expr, bool)>,
    pub limit: Option<Expr>,
    pub aggregate: bool,
}

fn conjuncts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    if let Expr::And(a, b) = e {
        conjuncts(a, out);
        conjuncts(b, out);
    } else {
        out.push(e);
    }
}

/// Picks the access path for a predicate over a table with primary key
/// `pk` and indexes on `indexed` columns.
/// The access path for `filter` on a table: its primary key, else an
/// indexed column, else a full scan.
pub fn table_access(filter: Option<&Expr>, def: &TableDef) -> Access {
    let indexed: Vec<usize> = def.indexes.iter().map(|i| i.column).collect();
    choose_access(filter, def.primary_key, &indexed)
}

pub fn choose_access(filter: Option<&Expr>, pk: Option<usize>, indexed: &[usize]) -> Access {
    let Some(f) = filter else {
        return Access::Full;
    };
    let mut parts = Vec::new();
    conjuncts(f, &mut parts);
    let is_col = |e: &Expr, c: usize| matches!(e, Expr::Column(x) if *x == c);
    if let Some(pk) = pk {
        let (mut lo, mut hi) = (None, None);
        for p in &parts {
            match p {
                Expr::Cmp(op, a, b) => {
                    let (op, v) = if is_col(a, pk) && b.is_constant() {
                        (*op, b)
                    } else if is_col(b, pk) && a.is_constant() {
                        let flipped = match op {
                            Cmp::Lt => Cmp::Gt,
                            Cmp::Le => Cmp::Ge,
                            Cmp::Gt => Cmp::Lt,
                            Cmp::Ge => Cmp::Le,
                            o => *o,
                        };
                        (flipped, a)
                    } else {
                        continue;
                    };
                    match op {
                        Cmp::Eq => return Access::Key((**v).clone()),
                        // Strict bounds read one key more; the filter drops it.
                        Cmp::Ge | Cmp::Gt => lo = Some((**v).clone()),
                        Cmp::Le | Cmp::Lt => hi = Some((**v).clone()),
                        Cmp::Ne => {}
                    }
                }
                Expr::Between(x, l, h, false)
                    if is_col(x, pk) && l.is_constant() && h.is_constant() =>
                {
                    lo = Some((**l).clone());
                    hi = Some((**h).clone());
                }
                _ => {}
            }
        }
        if lo.is_some() || hi.is_some() {
            return Access::Range(lo, hi);
        }
    }
    for p in &parts {
        if let Expr::Cmp(Cmp::Eq, a, b) = p {
            for (i, c) in indexed.iter().enumerate() {
                if is_col(a, *c) && b.is_constant() {
                    return Access::Index(i, (**b).clone());
                }
                if is_col(b, *c) && a.is_constant() {
                    return Access::Index(i, (**a).clone());
                }
            }
        }
    }
    Access::Full
}

/// The name PostgreSQL gives an unaliased result column.
pub fn default_name(item: &Item, columns: &[(String, SqlType)]) -> String {
    match item {
        Item::Expr(Expr::Column(c)) => columns[*c].0.clone(),
        Item::Expr(Expr::Now) => "now".into(),
        Item::Expr(_) => "?column?".into(),
        Item::Count(_) => "count".into(),
        Item::Sum(_) => "sum".into(),
        Item::Min(_) => "min".into(),
        Item::Max(_) => "max".into(),
    }
}
