//! A SELECT's result, produced as it is fetched: the server sends each
//! batch before the next is read, so a result of any size takes the
//! memory of one batch (PostgreSQL's portals, run `max_rows` at a time).
//!
//! Rules:
//! - Without ORDER BY (or with one the access path's key order gives),
//!   DISTINCT or an aggregate, rows are read from the access path
//!   (`source`) only as fetches ask for them, and reading stops at the
//!   LIMIT.
//! - An aggregate folds its rows as they are read and keeps one value
//!   per item.
//! - ORDER BY and DISTINCT read every row on the first fetch into a sort
//!   bounded by `work_mem` (`sort`: past it, runs on disk), then return
//!   them in order; DISTINCT drops adjacent repeats.
//! - A cursor outside a block has its own engine transaction, committed
//!   when the last row is fetched and aborted if the cursor is dropped
//!   before; in a block it reads with the block's, and the block's end
//!   closes it (a portal does not outlive its transaction).
//! - A fetch after rows were changed in the same block sees them: the
//!   cursor reads the transaction as it is then, not as it was when the
//!   cursor opened (unlike PostgreSQL's portal snapshots).

use super::catalog::TableMeta;
use super::expr::{as_int, compare, Ctx};
use super::interrupt::Watch;
use super::memory::ConnectionMemory;
use super::parse::Prepared;
use super::plan::{Item, Plan, Select};
use super::sort::{SortOrder, SortRow, Sorted, Sorter};
use super::source::{Source, Tx, SCAN_CHUNK};
use super::types::{codes, SqlError, Value};
use crate::db::Database;
use std::cmp::Ordering;
use std::sync::Arc;

enum Stage {
    /// Nothing read yet.
    Start,
    /// Rows straight from the access path.
    Stream(Source),
    /// Sorted rows.
    Sorted(Sorted),
    /// An aggregate's one row, not yet returned.
    One(Vec<Value>),
    Done,
}

pub struct Cursor {
    stmt: Arc<Prepared>,
    params: Vec<Value>,
    /// The statement's CURRENT_TIMESTAMP, for every fetch.
    now: i64,
    meta: Option<Arc<TableMeta>>,
    limit: Option<usize>,
    stage: Stage,
    /// Rows returned so far.
    produced: usize,
    /// DISTINCT: the last row returned.
    last: Option<Vec<Value>>,
    /// The cursor's own transaction, outside a block.
    pub(super) own: Option<Tx>,
}

/// What a fetch needs besides the cursor.
pub struct FetchEnv<'a> {
    pub db: &'a Database,
    pub memory: &'a Arc<ConnectionMemory>,
    pub work_mem: usize,
    /// For the server's functions in the select list.
    pub session: super::functions::SessionView<'a>,
}

impl Cursor {
    /// A cursor over `stmt` (a SELECT), its LIMIT evaluated now.
    pub fn open(
        stmt: Arc<Prepared>,
        params: Vec<Value>,
        meta: Option<Arc<TableMeta>>,
        cx: &Ctx<'_>,
    ) -> Result<Cursor, SqlError> {
        let s = select_of(&stmt);
        // LIMIT NULL is no limit; a negative one is an error, as in
        // PostgreSQL.
        let limit = match &s.limit {
            Some(e) => match as_int(&e.eval(&[], cx)?)? {
                Some(n) if n < 0 => {
                    return Err(SqlError::new(
                        codes::INVALID_ROW_COUNT_IN_LIMIT_CLAUSE,
                        "LIMIT must not be negative",
                    ))
                }
                n => n.map(|n| n as usize),
            },
            None => None,
        };
        Ok(Cursor {
            now: cx.now,
            stmt,
            params,
            meta,
            limit,
            stage: Stage::Start,
            produced: 0,
            last: None,
            own: None,
        })
    }

    /// Rows returned so far (the `SELECT n` tag once done).
    pub fn produced(&self) -> usize {
        self.produced
    }

    pub fn done(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    /// Up to `max` more rows (at least one unless done), under `watch`.
    pub fn fetch(
        &mut self,
        tx: &mut Tx,
        env: &FetchEnv<'_>,
        watch: &Watch<'_>,
        max: usize,
    ) -> Result<Vec<Vec<Value>>, SqlError> {
        let max = max.max(1);
        let cx = &Ctx {
            params: &self.params,
            now: self.now,
            watch,
            session: Some(env.session),
        };
        let stmt = self.stmt.clone();
        let s = select_of(&stmt);
        if matches!(self.stage, Stage::Start) {
            self.stage = self.start(s, tx, env, cx)?;
        }
        let mut out = Vec::new();
        while out.len() < max && !self.done() {
            if self.limit.is_some_and(|l| self.produced >= l) {
                self.stage = Stage::Done;
                break;
            }
            let left = (max - out.len()).min(self.limit.map_or(usize::MAX, |l| l - self.produced));
            match &mut self.stage {
                Stage::Start | Stage::Done => unreachable!("started, not done"),
                Stage::One(_) => {
                    let Stage::One(row) = std::mem::replace(&mut self.stage, Stage::Done) else {
                        unreachable!()
                    };
                    out.push(row);
                    self.produced += 1;
                }
                Stage::Stream(source) => {
                    if source.done() {
                        self.stage = Stage::Done;
                        continue;
                    }
                    // Never read more than the fetch can return: the rest
                    // would have to be held.
                    for (_, row) in source.next_batch(tx, cx, left.min(SCAN_CHUNK))? {
                        cx.watch.check()?;
                        if s.filter.as_ref().map_or(Ok(true), |f| f.holds(&row, cx))? {
                            out.push(project(s, &row, cx)?);
                            self.produced += 1;
                        }
                    }
                }
                Stage::Sorted(sorted) => match sorted.next()? {
                    None => self.stage = Stage::Done,
                    Some(SortRow { row, .. }) => {
                        if s.distinct && self.last.as_ref() == Some(&row) {
                            continue;
                        }
                        if s.distinct {
                            self.last = Some(row.clone());
                        }
                        out.push(row);
                        self.produced += 1;
                    }
                },
            }
        }
        Ok(out)
    }

    /// The first fetch: what to read rows from, an aggregate folded, a
    /// sort filled.
    fn start(
        &self,
        s: &Select,
        tx: &mut Tx,
        env: &FetchEnv<'_>,
        cx: &Ctx<'_>,
    ) -> Result<Stage, SqlError> {
        let mut source = match &self.meta {
            None => Source::one(),
            Some(m) => Source::open(m, &s.access, cx, s.lock)?,
        };
        // Every row the filter keeps, in batches, to `each`.
        let mut each_row = |each: &mut dyn FnMut(Vec<Value>) -> Result<(), SqlError>| {
            while !source.done() {
                for (_, row) in source.next_batch(tx, cx, SCAN_CHUNK)? {
                    cx.watch.check()?;
                    if s.filter.as_ref().map_or(Ok(true), |f| f.holds(&row, cx))? {
                        each(row)?;
                    }
                }
            }
            Ok::<(), SqlError>(())
        };
        if s.aggregate {
            let mut acc: Vec<Acc> = s.items.iter().map(Acc::new).collect();
            each_row(&mut |row| {
                for (a, item) in acc.iter_mut().zip(&s.items) {
                    a.add(item, &row, cx)?;
                }
                Ok(())
            })?;
            let row = acc
                .into_iter()
                .zip(&s.items)
                .map(|(a, item)| a.finish(item, cx))
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Stage::One(row));
        }
        // Rows the access path gives in the ORDER BY's order need no sort.
        if (s.order.is_empty() || s.in_access_order) && !s.distinct {
            return Ok(Stage::Stream(source));
        }
        let order = SortOrder {
            desc: s.order.iter().map(|(_, d)| *d).collect(),
            distinct: s.distinct,
        };
        let mut sorter = Sorter::new(order, self.limit, env.work_mem, env.memory.charge());
        each_row(&mut |row| {
            let keys = s
                .order
                .iter()
                .map(|(e, _)| e.eval(&row, cx))
                .collect::<Result<Vec<_>, _>>()?;
            let out = project(s, &row, cx)?;
            sorter.push(env.db, SortRow { keys, row: out })
        })?;
        Ok(Stage::Sorted(sorter.finish(env.db)?))
    }
}

fn select_of(stmt: &Prepared) -> &Select {
    match &stmt.planned.plan {
        Plan::Select(s) => s,
        _ => unreachable!("a cursor is opened on a SELECT"),
    }
}

/// The output columns of a row that is not aggregated.
fn project(s: &Select, row: &[Value], cx: &Ctx<'_>) -> Result<Vec<Value>, SqlError> {
    s.items
        .iter()
        .map(|i| match i {
            Item::Expr(e) => e.eval(row, cx),
            _ => unreachable!("aggregates are folded"),
        })
        .collect()
}

/// One aggregate item's running value.
enum Acc {
    /// A plain expression beside aggregates: evaluated once, at the end.
    Expr,
    Count(i64),
    Sum(Option<i64>),
    Best(Value),
}

impl Acc {
    fn new(item: &Item) -> Acc {
        match item {
            Item::Expr(_) => Acc::Expr,
            Item::Count(_) => Acc::Count(0),
            Item::Sum(_) => Acc::Sum(None),
            Item::Min(_) | Item::Max(_) => Acc::Best(Value::Null),
        }
    }

    fn add(&mut self, item: &Item, row: &[Value], cx: &Ctx<'_>) -> Result<(), SqlError> {
        match (self, item) {
            (Acc::Expr, _) => {}
            (Acc::Count(n), Item::Count(None)) => *n += 1,
            (Acc::Count(n), Item::Count(Some(e))) => *n += (e.eval(row, cx)? != Value::Null) as i64,
            (Acc::Sum(sum), Item::Sum(e)) => {
                if let Some(x) = as_int(&e.eval(row, cx)?)? {
                    *sum = Some(sum.unwrap_or(0).checked_add(x).ok_or_else(|| {
                        SqlError::new(codes::NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range")
                    })?);
                }
            }
            (Acc::Best(best), Item::Min(e) | Item::Max(e)) => {
                let want = if matches!(item, Item::Min(_)) {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
                let v = e.eval(row, cx)?;
                if v != Value::Null && (*best == Value::Null || compare(&v, best)? == want) {
                    *best = v;
                }
            }
            _ => unreachable!("an accumulator matches its item"),
        }
        Ok(())
    }

    fn finish(self, item: &Item, cx: &Ctx<'_>) -> Result<Value, SqlError> {
        Ok(match (self, item) {
            (Acc::Expr, Item::Expr(e)) => e.eval(&[], cx)?,
            (Acc::Count(n), _) => Value::Int(n),
            (Acc::Sum(s), _) => s.map_or(Value::Null, Value::Int),
            (Acc::Best(v), _) => v,
            (Acc::Expr, _) => unreachable!("an accumulator matches its item"),
        })
    }
}
