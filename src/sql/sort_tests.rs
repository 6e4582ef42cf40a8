//! The sorter against `Vec::sort_by` (stable), in memory and spilled to
//! runs on disk, with DISTINCT and LIMIT.

use super::*;
use crate::db::Database;
use crate::options::Options;
use crate::sql::memory::{ConnectionMemory, ServerMemory};
use proptest::prelude::*;

fn db() -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(&dir.path().join("db"), Options::default()).unwrap();
    (dir, db)
}

fn value(tag: u8, x: i64) -> Value {
    match tag % 4 {
        0 => Value::Null,
        1 | 2 => Value::Int(x),
        _ => Value::Text(format!("t{}", x.rem_euclid(7)).repeat((x.rem_euclid(3)) as usize)),
    }
}

/// What the sorter must return: a stable sort, DISTINCT's repeats
/// dropped (the first kept), the LIMIT's first rows.
fn model(rows: &[SortRow], order: &SortOrder, limit: Option<usize>) -> Vec<SortRow> {
    let mut v = rows.to_vec();
    v.sort_by(|a, b| order.cmp(a, b));
    if order.distinct {
        v.dedup_by(|a, b| a.row == b.row);
    }
    v.truncate(limit.unwrap_or(usize::MAX));
    v
}

fn sorted(
    db: &Database,
    rows: &[SortRow],
    order: SortOrder,
    limit: Option<usize>,
    work_mem: usize,
) -> (Vec<SortRow>, usize) {
    let server = ServerMemory::new(usize::MAX);
    let conn = ConnectionMemory::new(&server, usize::MAX);
    let distinct = order.distinct;
    let mut s = Sorter::new(order, limit, work_mem, conn.charge());
    for r in rows {
        s.push(db, r.clone()).unwrap();
    }
    let runs = s.spilled_runs();
    let mut out = s.finish(db).unwrap();
    let mut got: Vec<SortRow> = Vec::new();
    while let Some(r) = out.next().unwrap() {
        // The reader drops repeats across runs (`Cursor` does the same).
        if distinct && got.last().is_some_and(|l| l.row == r.row) {
            continue;
        }
        if limit.is_some_and(|l| got.len() >= l) {
            break;
        }
        got.push(r);
    }
    drop(out);
    assert_eq!(server.used(), 0, "every charge is given back");
    (got, runs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn the_sorter_is_a_stable_sort_in_memory_and_on_disk(
        raw in prop::collection::vec((any::<u8>(), -20i64..20, any::<u8>(), -5i64..5, 0i64..1000), 0..600),
        desc in any::<bool>(),
        distinct in any::<bool>(),
        limit in prop::option::of(0usize..50),
        work_mem in prop::sample::select(vec![1usize, 2_000, 20_000, 1 << 30]),
    ) {
        let (_dir, db) = db();
        let rows: Vec<SortRow> = raw
            .iter()
            .map(|&(t1, a, t2, b, id)| {
                let k = value(t1, a);
                // DISTINCT's ORDER BY keys are output columns.
                let row = if distinct { vec![k.clone(), value(t2, b)] } else { vec![value(t2, b), Value::Int(id)] };
                SortRow { keys: vec![k], row }
            })
            .collect();
        let order = || SortOrder { desc: vec![desc], distinct };
        let want = model(&rows, &order(), limit);
        let (got, _runs) = sorted(&db, &rows, order(), limit, work_mem);
        prop_assert_eq!(got, want);
    }
}

#[test]
fn past_work_mem_rows_spill_to_runs_that_are_removed_after() {
    let (_dir, db) = db();
    let rows: Vec<SortRow> = (0..5_000i64)
        .map(|i| SortRow {
            keys: vec![Value::Int((i * 7919) % 5_000)],
            row: vec![Value::Text(format!("row {i}"))],
        })
        .collect();
    let order = SortOrder {
        desc: vec![true],
        distinct: false,
    };
    let (got, runs) = sorted(&db, &rows, order, None, 50_000);
    assert!(runs > 5, "5,000 rows in 50 KB spill ({runs} runs)");
    let keys: Vec<i64> = got
        .iter()
        .map(|r| match r.keys[0] {
            Value::Int(x) => x,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(keys, (0..5_000).rev().collect::<Vec<_>>());
    let spill = db.directory().join("spill");
    let left: Vec<_> = std::fs::read_dir(&spill).unwrap().collect();
    assert!(left.is_empty(), "the runs' file is removed: {left:?}");
    // A small LIMIT keeps its rows in memory and never spills.
    let order = SortOrder {
        desc: vec![false],
        distinct: false,
    };
    let (got, runs) = sorted(&db, &rows, order, Some(10), 50_000);
    assert_eq!((got.len(), runs), (10, 0));
}

#[test]
fn a_malformed_run_record_is_an_error_not_a_panic() {
    let r = SortRow {
        keys: vec![Value::Int(1)],
        row: vec![Value::Text("abc".into()), Value::Null, Value::Bool(true)],
    };
    let mut buf = Vec::new();
    encode(&r, &mut buf);
    assert_eq!(decode(&buf[4..]).unwrap(), r);
    for cut in 0..buf.len() - 4 {
        assert!(decode(&buf[4..4 + cut]).is_err(), "cut at {cut}");
    }
    let mut bad = buf[4..].to_vec();
    bad[4] = 9;
    assert_eq!(decode(&bad).unwrap_err().code, "XX000");
}

/// `SET work_mem` is the session's sort budget: a sort that fits the
/// server's 4 MB stays in memory, and after `SET work_mem = '64kB'` the
/// same sort writes its runs to spill/ (seen while its portal is open,
/// gone after). It was 0A000: only `--work-mem` set it, for everyone.
#[test]
fn set_work_mem_is_the_session_s_sort_budget() {
    let (_dir, db) = db();
    let db = std::sync::Arc::new(db);
    let sql = crate::sql::SqlEngine::open(db.clone()).unwrap();
    let mut s = sql.session();
    let ok = |s: &mut crate::sql::Session, q: &str| {
        s.simple_query(q)
            .pop()
            .unwrap()
            .unwrap_or_else(|e| panic!("{q}: {e}"))
    };
    ok(&mut s, "create table t (id int primary key, v text)");
    ok(
        &mut s,
        "insert into t select x, 'some row text' from generate_series(1, 5000) as x",
    );
    let spill = db.directory().join("spill");
    let sort_files = || {
        std::fs::read_dir(&spill)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("sort"))
                    .count()
            })
            .unwrap_or(0)
    };
    let sorting = |s: &mut crate::sql::Session| {
        let p = s
            .prepare("select id, v from t order by id desc", &[])
            .unwrap();
        let crate::sql::Outcome::Cursor { id, .. } = s.start(&p, &[]).unwrap() else {
            panic!("a SELECT opens a cursor")
        };
        s.fetch(id, 1).unwrap();
        let files = sort_files();
        s.close_cursor(id);
        files
    };
    assert_eq!(sorting(&mut s), 0, "5,000 rows fit 4 MB");
    ok(&mut s, "set work_mem = '64kB'");
    assert_eq!(sorting(&mut s), 1, "and spill past 64 kB");
    assert_eq!(sort_files(), 0);
    let e = s
        .simple_query("set work_mem = '1kB'")
        .pop()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.code, "22023", "{e}");
    // Another session keeps the server's.
    assert_eq!(sorting(&mut sql.session()), 0);
}
