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
    /// SET idle_in_transaction_session_timeout (`in_block`) or
    /// idle_session_timeout: the session's from now on (`None`: never).
    SetIdleTimeout {
        in_block: bool,
        timeout: Option<std::time::Duration>,
    },
    /// `SET work_mem`: the session's sort budget, in bytes.
    SetWorkMem(usize),
    CreateTable {
        name: String,
        columns: Vec<ColumnDef>,
        primary_key: Option<Vec<usize>>,
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
        columns: Vec<usize>,
    },
    AddPrimaryKey {
        table: String,
        columns: Vec<usize>,
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
    /// Every primary-key column equal to a value: point reads, one per
    /// tuple (an `IN` list on one key column gives several).
    Keys(Vec<Vec<Expr>>),
    /// The leading primary-key columns equal to values (`prefix`), then
    /// the next column in a range, inclusive (`pk BETWEEN lo AND hi`,
    /// `pk >= lo`, ...), or unbounded: one key range, in key order.
    Range {
        prefix: Vec<Expr>,
        lo: Option<Expr>,
        hi: Option<Expr>,
    },
    /// The leading columns of index `i` (its position in the table)
    /// equal to values.
    Index(usize, Vec<Expr>),
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
    /// FOR UPDATE: each row read is locked, as UPDATE locks it.
    pub lock: bool,
    /// The access path gives rows in the order asked for, so reading
    /// stops once LIMIT rows passed the filter.
    pub in_access_order: bool,
}

fn conjuncts<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    if let Expr::And(a, b) = e {
        conjuncts(a, out);
        conjuncts(b, out);
    } else {
        out.push(e);
    }
}

/// The access path for `filter` on a table: its primary key, else the
/// index with the longest equality prefix, else a full scan.
pub fn table_access(filter: Option<&Expr>, def: &TableDef) -> Access {
    let indexes: Vec<&[usize]> = def.indexes.iter().map(|i| &i.columns.0[..]).collect();
    let pk = def.primary_key.as_ref().map_or(&[][..], |k| &k.0[..]);
    choose_access(filter, pk, &indexes)
}

/// A constant `col = x` among `parts`.
fn equal_to<'a>(parts: &[&'a Expr], col: usize) -> Option<&'a Expr> {
    parts.iter().find_map(|p| match p {
        Expr::Cmp(Cmp::Eq, a, b) if is_column(a, col) && b.is_constant() => Some(&**b),
        Expr::Cmp(Cmp::Eq, a, b) if is_column(b, col) && a.is_constant() => Some(&**a),
        _ => None,
    })
}

fn is_column(e: &Expr, c: usize) -> bool {
    matches!(e, Expr::Column(x) if *x == c)
}

/// The bounds a predicate puts on column `col`, inclusive; a strict bound
/// reads one key more, which the filter drops.
fn bounds(parts: &[&Expr], col: usize) -> (Option<Expr>, Option<Expr>) {
    let (mut lo, mut hi) = (None, None);
    for p in parts {
        match p {
            Expr::Cmp(op, a, b) => {
                let (op, v) = if is_column(a, col) && b.is_constant() {
                    (*op, b)
                } else if is_column(b, col) && a.is_constant() {
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
                    Cmp::Ge | Cmp::Gt => lo = Some((**v).clone()),
                    Cmp::Le | Cmp::Lt => hi = Some((**v).clone()),
                    Cmp::Eq | Cmp::Ne => {}
                }
            }
            Expr::Between(x, l, h, false)
                if is_column(x, col) && l.is_constant() && h.is_constant() =>
            {
                lo = Some((**l).clone());
                hi = Some((**h).clone());
            }
            _ => {}
        }
    }
    (lo, hi)
}

/// The access path for a predicate over a table whose primary key has
/// columns `pk` (none: rows keyed by a hidden id) and indexes on
/// `indexes`' columns.
pub fn choose_access(filter: Option<&Expr>, pk: &[usize], indexes: &[&[usize]]) -> Access {
    let Some(f) = filter else {
        return Access::Full;
    };
    let mut parts = Vec::new();
    conjuncts(f, &mut parts);
    let equal_prefix = |cols: &[usize]| -> Vec<Expr> {
        cols.iter()
            .map_while(|&c| equal_to(&parts, c))
            .cloned()
            .collect()
    };
    let prefix = equal_prefix(pk);
    if !pk.is_empty() && prefix.len() == pk.len() {
        return Access::Keys(vec![prefix]);
    }
    if !pk.is_empty() && prefix.len() + 1 == pk.len() {
        let last = pk[prefix.len()];
        let list = parts.iter().find_map(|p| match p {
            Expr::InList(x, list, false)
                if is_column(x, last) && list.iter().all(Expr::is_constant) =>
            {
                Some(list)
            }
            Expr::InSet(x, list, _, false) if is_column(x, last) => Some(list),
            _ => None,
        });
        if let Some(list) = list {
            let tuples = list
                .iter()
                .map(|v| prefix.iter().cloned().chain([v.clone()]).collect())
                .collect();
            return Access::Keys(tuples);
        }
    }
    let (lo, hi) = match pk.get(prefix.len()) {
        Some(&next) => bounds(&parts, next),
        None => (None, None),
    };
    // An index wins when it pins more leading columns than the key does.
    let best_index = indexes
        .iter()
        .enumerate()
        .map(|(i, cols)| (i, equal_prefix(cols)))
        .filter(|(_, values)| !values.is_empty())
        .max_by_key(|(i, values)| (values.len(), std::cmp::Reverse(*i)));
    match best_index {
        Some((i, values)) if values.len() > prefix.len() => Access::Index(i, values),
        _ if !prefix.is_empty() || lo.is_some() || hi.is_some() => Access::Range { prefix, lo, hi },
        _ => Access::Full,
    }
}

/// True when `access` gives a table's rows in the order `order` asks for:
/// ascending on the primary-key columns after those it pins.
pub fn in_access_order(access: &Access, pk: &[usize], order: &[(Expr, bool)]) -> bool {
    let pinned = match access {
        Access::Full => 0,
        Access::Range { prefix, .. } => prefix.len(),
        // Point reads and index scans read every row they find at once:
        // a cap would only make them read again.
        Access::Keys(_) | Access::Index(..) => return false,
    };
    if order.is_empty() {
        return true;
    }
    order.len() <= pk.len().saturating_sub(pinned)
        && order
            .iter()
            .zip(&pk[pinned..])
            .all(|((e, desc), &c)| !desc && is_column(e, c))
}

/// The name PostgreSQL gives an unaliased result column.
pub fn default_name(item: &Item, columns: &[(String, SqlType)]) -> String {
    match item {
        Item::Expr(Expr::Column(c)) => columns[*c].0.clone(),
        Item::Expr(Expr::Now) => "now".into(),
        Item::Expr(Expr::Call(f, _)) => f.name().into(),
        Item::Expr(_) => "?column?".into(),
        Item::Count(_) => "count".into(),
        Item::Sum(_) => "sum".into(),
        Item::Min(_) => "min".into(),
        Item::Max(_) => "max".into(),
    }
}
