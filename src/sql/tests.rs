//! The statement shapes pgbench 15 and sysbench 1.0.20 send
//! (/work/shared/brief/wire.md §2), run against a temporary database.

use super::*;
use crate::db::Database;
use crate::options::Options;
use std::sync::Arc;

fn open(dir: &std::path::Path, create: bool) -> Arc<SqlEngine> {
    let db = if create {
        Database::create(dir, Options::default()).unwrap()
    } else {
        Database::open(dir, Options::default()).unwrap()
    };
    SqlEngine::open(Arc::new(db)).unwrap()
}

fn ok(s: &mut Session, sql: &str) -> Outcome {
    let mut r = s.simple_query(sql);
    assert_eq!(r.len(), 1, "{sql}");
    r.pop().unwrap().unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn tag(s: &mut Session, sql: &str) -> String {
    match ok(s, sql) {
        Outcome::Command { tag } | Outcome::Rows { tag, .. } => tag,
        o => panic!("{o:?}"),
    }
}

fn err(s: &mut Session, sql: &str) -> SqlError {
    s.simple_query(sql).pop().unwrap().unwrap_err()
}

fn int(s: &mut Session, sql: &str) -> Value {
    match ok(s, sql) {
        Outcome::Rows { rows, .. } => rows[0][0].clone(),
        o => panic!("{o:?}"),
    }
}

const DROP: &str =
    "drop table if exists pgbench_accounts, pgbench_branches, pgbench_history, pgbench_tellers";
const CREATE: [&str; 4] = [
    "create table pgbench_history(tid int,bid int,aid    int,delta int,mtime timestamp,filler char(22))",
    "create table pgbench_tellers(tid int not null,bid int,tbalance int,filler char(84)) with (fillfactor=100)",
    "create table pgbench_accounts(aid    int not null,bid int,abalance int,filler char(84)) with (fillfactor=100)",
    "create table pgbench_branches(bid int not null,bbalance int,filler char(88)) with (fillfactor=100)",
];
const TRUNC: &str =
    "truncate table pgbench_accounts, pgbench_branches, pgbench_history, pgbench_tellers";
const ACCOUNTS: i64 = 1000;

fn init(s: &mut Session, server_side: bool) {
    assert_eq!(tag(s, DROP), "DROP TABLE");
    for c in CREATE {
        assert_eq!(tag(s, c), "CREATE TABLE");
    }
    assert_eq!(tag(s, "begin"), "BEGIN");
    assert_eq!(tag(s, TRUNC), "TRUNCATE TABLE");
    if server_side {
        tag(s, "insert into pgbench_branches(bid,bbalance) select bid, 0 from generate_series(1, 1) as bid");
        tag(s, "insert into pgbench_tellers(tid,bid,tbalance) select tid, (tid - 1) / 10 + 1, 0 from generate_series(1, 10) as tid");
        let t = tag(s, &format!("insert into pgbench_accounts(aid,bid,abalance,filler) select aid, (aid - 1) / 100000 + 1, 0, '' from generate_series(1, {ACCOUNTS}) as aid"));
        assert_eq!(t, format!("INSERT 0 {ACCOUNTS}"));
    } else {
        assert_eq!(
            tag(s, "insert into pgbench_branches(bid,bbalance) values(1,0)"),
            "INSERT 0 1"
        );
        for t in 1..=10 {
            tag(
                s,
                &format!("insert into pgbench_tellers(tid,bid,tbalance) values ({t},1,0)"),
            );
        }
        copy_accounts(s, ACCOUNTS);
    }
    assert_eq!(tag(s, "commit"), "COMMIT");
    for t in [
        "pgbench_branches",
        "pgbench_tellers",
        "pgbench_accounts",
        "pgbench_history",
    ] {
        assert_eq!(tag(s, &format!("vacuum analyze {t}")), "VACUUM");
    }
    for (t, c) in [
        ("pgbench_branches", "bid"),
        ("pgbench_tellers", "tid"),
        ("pgbench_accounts", "aid"),
    ] {
        assert_eq!(
            tag(s, &format!("alter table {t} add primary key ({c})")),
            "ALTER TABLE"
        );
    }
}

fn copy_accounts(s: &mut Session, n: i64) {
    assert_eq!(
        ok(s, "copy pgbench_accounts from stdin with (freeze on)"),
        Outcome::CopyIn { columns: 4 }
    );
    for aid in 1..=n {
        s.copy_data(format!("{aid}\t1\t0\t\n").as_bytes()).unwrap();
    }
    s.copy_data(b"\\.\n").unwrap();
    assert_eq!(
        s.copy_done().unwrap(),
        Outcome::Command {
            tag: format!("COPY {n}")
        }
    );
}

const TPCB: [&str; 5] = [
    "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;",
    "SELECT abalance FROM pgbench_accounts WHERE aid = $1;",
    "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2;",
    "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2;",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP);",
];

fn tpcb(s: &mut Session, aid: i64, tid: i64, delta: i64) {
    let p: Vec<_> = TPCB.iter().map(|q| s.prepare(q, &[]).unwrap()).collect();
    assert_eq!(p[0].params(), &[SqlType::Int4, SqlType::Int4]);
    assert_eq!(
        p[1].columns(),
        &[Column {
            name: "abalance".into(),
            ty: SqlType::Int4
        }]
    );
    assert_eq!(p[4].params(), &[SqlType::Int4; 4]);
    let t = |v: i64| Value::Text(v.to_string());
    let b = s.prepare("BEGIN;", &[]).unwrap();
    assert_eq!(
        s.execute(&b, &[]).unwrap(),
        Outcome::Command {
            tag: "BEGIN".into()
        }
    );
    assert_eq!(s.status(), TxStatus::InBlock);
    assert_eq!(
        s.execute(&p[0], &[t(delta), t(aid)]).unwrap(),
        Outcome::Command {
            tag: "UPDATE 1".into()
        }
    );
    match s.execute(&p[1], &[t(aid)]).unwrap() {
        Outcome::Rows { rows, tag, .. } => assert_eq!((rows.len(), tag.as_str()), (1, "SELECT 1")),
        o => panic!("{o:?}"),
    }
    s.execute(&p[2], &[t(delta), t(tid)]).unwrap();
    s.execute(&p[3], &[t(delta), t(1)]).unwrap();
    assert_eq!(
        s.execute(&p[4], &[t(tid), t(1), t(aid), t(delta)]).unwrap(),
        Outcome::Command {
            tag: "INSERT 0 1".into()
        }
    );
    assert_eq!(tag(s, "END;"), "COMMIT");
    assert_eq!(s.status(), TxStatus::Idle);
}

fn invariant(s: &mut Session) -> Value {
    let a = int(s, "select sum(abalance) from pgbench_accounts");
    assert_eq!(a, int(s, "select sum(tbalance) from pgbench_tellers"));
    assert_eq!(a, int(s, "select sum(bbalance) from pgbench_branches"));
    assert_eq!(a, int(s, "select sum(delta) from pgbench_history"));
    a
}

#[test]
fn pgbench_init_both_ways_then_tpcb_keeps_the_invariant() {
    for server_side in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let e = open(&dir.path().join("db"), true);
        let mut s = e.session();
        init(&mut s, server_side);
        match ok(&mut s, "select count(*) from pgbench_branches") {
            Outcome::Rows { columns, rows, .. } => {
                assert_eq!(
                    columns,
                    vec![Column {
                        name: "count".into(),
                        ty: SqlType::Int8
                    }]
                );
                assert_eq!(rows, vec![vec![Value::Int(1)]]);
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(
            int(&mut s, "select count(*) from pgbench_accounts"),
            Value::Int(ACCOUNTS)
        );
        tpcb(&mut s, 7, 3, -2448);
        tpcb(&mut s, 7, 4, 100);
        tpcb(&mut s, ACCOUNTS, 10, 5000);
        // -M simple's literal form.
        tag(&mut s, "BEGIN;");
        assert_eq!(
            tag(
                &mut s,
                "UPDATE pgbench_accounts SET abalance = abalance + -17 WHERE aid = 65;"
            ),
            "UPDATE 1"
        );
        tag(
            &mut s,
            "UPDATE pgbench_tellers SET tbalance = tbalance + -17 WHERE tid = 1;",
        );
        tag(
            &mut s,
            "UPDATE pgbench_branches SET bbalance = bbalance + -17 WHERE bid = 1;",
        );
        tag(&mut s, "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 1, 65, -17, CURRENT_TIMESTAMP);");
        tag(&mut s, "END;");
        assert_eq!(invariant(&mut s), Value::Int(-2448 + 100 + 5000 - 17));
        // The partition probe is refused, which pgbench accepts.
        assert_eq!(err(&mut s, "select o.n, p.partstrat, pg_catalog.count(i.inhparent) from pg_catalog.pg_class as c join pg_catalog.pg_namespace as n on (n.oid = c.relnamespace) where c.relname = 'pgbench_accounts'").code, codes::FEATURE_NOT_SUPPORTED);
    }
}

const SB_CREATE: &str = "CREATE TABLE sbtest1(\n  id SERIAL,\n  k INTEGER DEFAULT '0' NOT NULL,\n  c CHAR(120) DEFAULT '' NOT NULL,\n  pad CHAR(60) DEFAULT '' NOT NULL,\n  PRIMARY KEY (id)\n)  ";

fn sysbench_prepare(s: &mut Session, rows: i64) {
    assert_eq!(tag(s, SB_CREATE), "CREATE TABLE");
    let vals: Vec<String> = (0..rows)
        .map(|i| format!("({}, '{}', '{}')", i % 7, "c".repeat(119), "p".repeat(59)))
        .collect();
    assert_eq!(
        tag(
            s,
            &format!("INSERT INTO sbtest1(k, c, pad) VALUES{}", vals.join(","))
        ),
        format!("INSERT 0 {rows}")
    );
    assert_eq!(tag(s, "CREATE INDEX k_1 ON sbtest1(k)"), "CREATE INDEX");
}

fn rows_of(o: Outcome) -> (Vec<Column>, Vec<Vec<Value>>, String) {
    match o {
        Outcome::Rows { columns, rows, tag } => (columns, rows, tag),
        o => panic!("{o:?}"),
    }
}

#[test]
fn sysbench_statements_with_declared_types() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir.path().join("db"), true);
    let mut s = e.session();
    sysbench_prepare(&mut s, 300);
    let i8 = Some(SqlType::Int8);
    let vc = Some(SqlType::Varchar(None));
    let point = s
        .prepare("SELECT c FROM sbtest1 WHERE id=$1", &[i8])
        .unwrap();
    assert_eq!(
        point.columns(),
        &[Column {
            name: "c".into(),
            ty: SqlType::Bpchar(120)
        }]
    );
    let (_, rows, t) = rows_of(s.execute(&point, &[Value::Int(5)]).unwrap());
    assert_eq!((rows.len(), t.as_str()), (1, "SELECT 1"));
    assert_eq!(rows[0][0], Value::Text("c".repeat(119) + " "));
    let range = s
        .prepare(
            "SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2",
            &[i8, i8],
        )
        .unwrap();
    assert_eq!(
        rows_of(
            s.execute(&range, &[Value::Int(10), Value::Int(109)])
                .unwrap()
        )
        .1
        .len(),
        100
    );
    let sum = s
        .prepare(
            "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN $1 AND $2",
            &[i8, i8],
        )
        .unwrap();
    assert_eq!(
        sum.columns(),
        &[Column {
            name: "sum".into(),
            ty: SqlType::Int8
        }]
    );
    let expect: i64 = (9..=18).map(|i| i % 7).sum();
    assert_eq!(
        rows_of(s.execute(&sum, &[Value::Int(10), Value::Int(19)]).unwrap()).1,
        vec![vec![Value::Int(expect)]]
    );
    let ordered = s
        .prepare(
            "SELECT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c",
            &[i8, i8],
        )
        .unwrap();
    assert_eq!(
        rows_of(
            s.execute(&ordered, &[Value::Int(1), Value::Int(100)])
                .unwrap()
        )
        .1
        .len(),
        100
    );
    let distinct = s
        .prepare(
            "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN $1 AND $2 ORDER BY c",
            &[i8, i8],
        )
        .unwrap();
    assert_eq!(
        rows_of(
            s.execute(&distinct, &[Value::Int(1), Value::Int(100)])
                .unwrap()
        )
        .1
        .len(),
        1
    );
    let begin = s.prepare("BEGIN", &[]).unwrap();
    let commit = s.prepare("COMMIT", &[]).unwrap();
    let inc = s
        .prepare("UPDATE sbtest1 SET k=k+1 WHERE id=$1", &[i8])
        .unwrap();
    let setc = s
        .prepare("UPDATE sbtest1 SET c=$1 WHERE id=$2", &[vc, i8])
        .unwrap();
    let del = s.prepare("DELETE FROM sbtest1 WHERE id=$1", &[i8]).unwrap();
    let ins = s
        .prepare(
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES ($1, $2, $3, $4)",
            &[i8, i8, vc, vc],
        )
        .unwrap();
    let cmd = |t: &str| Outcome::Command { tag: t.into() };
    s.execute(&begin, &[]).unwrap();
    assert_eq!(s.execute(&inc, &[Value::Int(3)]).unwrap(), cmd("UPDATE 1"));
    assert_eq!(
        s.execute(&setc, &[Value::Text("new".into()), Value::Int(3)])
            .unwrap(),
        cmd("UPDATE 1")
    );
    assert_eq!(s.execute(&del, &[Value::Int(4)]).unwrap(), cmd("DELETE 1"));
    let row = [
        Value::Int(4),
        Value::Int(1),
        Value::Text("x".into()),
        Value::Text("y".into()),
    ];
    assert_eq!(s.execute(&ins, &row).unwrap(), cmd("INSERT 0 1"));
    assert_eq!(s.execute(&commit, &[]).unwrap(), cmd("COMMIT"));
    // The secondary index follows the changes.
    // k = (id - 1) % 7; id 3 went from k 2 to 3, id 4 from k 3 to 1.
    assert_eq!(
        int(&mut s, "select count(*) from sbtest1 where k = 1"),
        Value::Int(43 + 1)
    );
    assert_eq!(
        int(&mut s, "select k from sbtest1 where id = 3"),
        Value::Int(3)
    );
    assert_eq!(
        int(&mut s, "select count(*) from sbtest1 where k = 3"),
        Value::Int(43)
    );
    assert_eq!(
        int(&mut s, "select count(*) from sbtest1 where k = 2"),
        Value::Int(42)
    );
    // A second insert of a live id: 23505, which sysbench retries.
    let mut other = e.session();
    assert_eq!(
        other.execute(&ins, &row).unwrap_err().code,
        codes::UNIQUE_VIOLATION
    );
    assert_eq!(other.status(), TxStatus::Idle);
    assert_eq!(tag(&mut s, "DROP TABLE IF EXISTS sbtest1"), "DROP TABLE");
}

#[test]
fn error_codes_and_failed_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir.path().join("db"), true);
    let mut s = e.session();
    assert_eq!(
        err(&mut s, "select * from nope").code,
        codes::UNDEFINED_TABLE
    );
    assert_eq!(err(&mut s, "drop table nope").code, codes::UNDEFINED_TABLE);
    tag(
        &mut s,
        "create table t(id int primary key, v varchar(3), n int not null default 0)",
    );
    let e0 = err(&mut s, "select * from t a join t b on a.id = b.id");
    assert_eq!(e0.code, codes::FEATURE_NOT_SUPPORTED);
    assert!(e0.message.contains("join t b"), "{}", e0.message);
    assert_eq!(
        err(&mut s, "select abs(id) from t").code,
        codes::FEATURE_NOT_SUPPORTED
    );
    tag(&mut s, "create table big(id int8 primary key)");
    let sum8 = err(&mut s, "select sum(id) from big");
    assert_eq!(
        sum8.code,
        codes::FEATURE_NOT_SUPPORTED,
        "sum(int8) is numeric"
    );
    assert!(sum8.message.contains("sum(id)"), "{}", sum8.message);
    assert_eq!(
        err(
            &mut s,
            "alter table t add constraint f foreign key (n) references t"
        )
        .code,
        codes::FEATURE_NOT_SUPPORTED
    );
    assert_eq!(
        err(&mut s, "insert into t values (1, 'abcd')").code,
        codes::STRING_DATA_RIGHT_TRUNCATION
    );
    assert_eq!(
        err(&mut s, "insert into t values (1, 'a', null)").code,
        codes::NOT_NULL_VIOLATION
    );
    assert_eq!(
        err(&mut s, "insert into t values (3000000000)").code,
        codes::NUMERIC_VALUE_OUT_OF_RANGE
    );
    assert_eq!(err(&mut s, "selec 1").code, codes::SYNTAX_ERROR);
    tag(&mut s, "insert into t values (1)");
    tag(&mut s, "begin");
    tag(&mut s, "insert into t values (2)");
    assert_eq!(
        err(&mut s, "insert into t values (1)").code,
        codes::UNIQUE_VIOLATION
    );
    assert_eq!(s.status(), TxStatus::Failed);
    assert_eq!(
        err(&mut s, "select 1").code,
        codes::IN_FAILED_SQL_TRANSACTION
    );
    assert_eq!(tag(&mut s, "commit"), "ROLLBACK");
    assert_eq!(s.status(), TxStatus::Idle);
    assert_eq!(int(&mut s, "select count(*) from t"), Value::Int(1));
    tag(&mut s, "begin");
    err(&mut s, "select nope from t");
    assert_eq!(tag(&mut s, "rollback"), "ROLLBACK");
    assert_eq!(tag(&mut s, "rollback"), "ROLLBACK");
    assert_eq!(s.status(), TxStatus::Idle);
    assert_eq!(rows_of(ok(&mut s, "select 1")).1, vec![vec![Value::Int(1)]]);
    assert!(s.simple_query("").is_empty());
    let r = s.simple_query("select 1; select nope from t; select 2");
    assert_eq!(r.len(), 2);
    // A statement that does not parse, or does not prepare, fails a block
    // too, in the simple and the extended protocol.
    tag(&mut s, "begin");
    assert_eq!(err(&mut s, "selec 1").code, codes::SYNTAX_ERROR);
    assert_eq!(s.status(), TxStatus::Failed);
    tag(&mut s, "rollback");
    tag(&mut s, "begin");
    let e1 = s.prepare("select * from nope", &[]).err().unwrap();
    assert_eq!(e1.code, codes::UNDEFINED_TABLE);
    assert_eq!(s.status(), TxStatus::Failed);
    tag(&mut s, "rollback");
}

#[test]
fn checkpoint_runs_one() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir.path().join("db"), true);
    let mut s = e.session();
    let before = e.database().checkpoints();
    assert_eq!(tag(&mut s, "CHECKPOINT;"), "CHECKPOINT");
    let p = s.prepare("checkpoint", &[]).unwrap();
    assert_eq!(
        s.execute(&p, &[]).unwrap(),
        Outcome::Command {
            tag: "CHECKPOINT".into()
        }
    );
    assert_eq!(e.database().checkpoints(), before + 2);
}

/// pgbench's initialisation in a block (TRUNCATE, then COPY): a
/// ROLLBACK takes back both, as in PostgreSQL (before, the TRUNCATE stayed
/// and the table was left empty).
#[test]
fn rolled_back_truncate_and_copy_leave_the_table_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let e = open(&dir.path().join("db"), true);
    let mut s = e.session();
    for c in CREATE {
        tag(&mut s, c);
    }
    tag(&mut s, "insert into pgbench_accounts values (1, 1, 5, '')");
    tag(&mut s, "begin");
    tag(&mut s, TRUNC);
    copy_accounts(&mut s, 50);
    assert_eq!(tag(&mut s, "rollback"), "ROLLBACK");
    assert_eq!(
        int(&mut s, "select count(*) from pgbench_accounts"),
        Value::Int(1)
    );
    // A COPY with a bad line fails the block, which takes back its
    // TRUNCATE too.
    tag(&mut s, "begin");
    tag(&mut s, TRUNC);
    ok(&mut s, "copy pgbench_accounts from stdin with (freeze on)");
    s.copy_data(b"1\t1\t0\t\n").unwrap();
    assert_eq!(
        s.copy_data(b"x\t1\t0\t\n").unwrap_err().code,
        codes::INVALID_TEXT_REPRESENTATION
    );
    assert_eq!(s.status(), TxStatus::Failed);
    tag(&mut s, "rollback");
    assert_eq!(
        int(&mut s, "select count(*) from pgbench_accounts"),
        Value::Int(1)
    );
}

#[test]
fn rows_catalog_indexes_and_serial_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let e = open(&path, true);
        let mut s = e.session();
        sysbench_prepare(&mut s, 20);
        tag(&mut s, "create table h(a int, b text)");
        tag(&mut s, "insert into h values (1, 'x'), (2, null)");
        drop(s);
        let db = Arc::try_unwrap(e).ok().unwrap().db;
        Arc::try_unwrap(db).ok().unwrap().close().unwrap();
    }
    let e = open(&path, false);
    let mut s = e.session();
    assert_eq!(
        int(&mut s, "select count(*) from sbtest1 where k = 3"),
        Value::Int(3)
    );
    assert_eq!(
        tag(&mut s, "INSERT INTO sbtest1(k, c, pad) VALUES(9, 'a', 'b')"),
        "INSERT 0 1"
    );
    assert_eq!(
        int(&mut s, "select id from sbtest1 where k = 9"),
        Value::Int(21)
    );
    assert_eq!(int(&mut s, "select count(*) from h"), Value::Int(2));
    tag(&mut s, "insert into h values (3, 'z')");
    assert_eq!(int(&mut s, "select max(a) from h"), Value::Int(3));
    assert_eq!(
        rows_of(ok(&mut s, "select b from h where b is null"))
            .1
            .len(),
        1
    );
}

mod model {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(i64, i64),
        Update(i64, i64),
        Delete(i64),
        Select(i64),
        Range(i64, i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let k = -20i64..20;
        prop_oneof![
            (k.clone(), -1000i64..1000).prop_map(|(a, b)| Op::Insert(a, b)),
            (k.clone(), -1000i64..1000).prop_map(|(a, b)| Op::Update(a, b)),
            k.clone().prop_map(Op::Delete),
            k.clone().prop_map(Op::Select),
            (k.clone(), k).prop_map(|(a, b)| Op::Range(a, b)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
        #[test]
        fn statements_by_key_match_a_btreemap(ops in proptest::collection::vec(op(), 1..60)) {
            let dir = tempfile::tempdir().unwrap();
            let e = open(&dir.path().join("db"), true);
            let mut s = e.session();
            tag(&mut s, "create table m(k int8 primary key, v int, w int)");
            tag(&mut s, "create index m_v on m(v)");
            let mut model = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let r = s.simple_query(&format!("insert into m values ({k}, {v}, {k})")).pop().unwrap();
                        if let std::collections::btree_map::Entry::Vacant(e) = model.entry(k) {
                            e.insert(v);
                            prop_assert_eq!(r.unwrap(), Outcome::Command { tag: "INSERT 0 1".into() });
                        } else {
                            prop_assert_eq!(r.unwrap_err().code, codes::UNIQUE_VIOLATION);
                        }
                    }
                    Op::Update(k, v) => {
                        let n = model.get_mut(&k).map(|x| *x = v).is_some() as u8;
                        prop_assert_eq!(tag(&mut s, &format!("update m set v = {v} where k = {k}")), format!("UPDATE {n}"));
                    }
                    Op::Delete(k) => {
                        let n = model.remove(&k).is_some() as u8;
                        prop_assert_eq!(tag(&mut s, &format!("delete from m where k = {k}")), format!("DELETE {n}"));
                    }
                    Op::Select(v) => {
                        let want: Vec<Vec<Value>> = model.iter().filter(|(_, x)| **x == v).map(|(k, _)| vec![Value::Int(*k)]).collect();
                        let got = rows_of(ok(&mut s, &format!("select k from m where v = {v} order by k"))).1;
                        prop_assert_eq!(got, want);
                    }
                    Op::Range(a, b) => {
                        let want: Vec<Vec<Value>> = model.range(a..=b.max(a)).map(|(k, v)| vec![Value::Int(*k), Value::Int(*v)]).collect();
                        let got = rows_of(ok(&mut s, &format!("select k, v from m where k between {a} and {} order by k", b.max(a)))).1;
                        prop_assert_eq!(got, want);
                    }
                }
            }
            let total: i64 = model.values().sum();
            let sum = int(&mut s, "select sum(v) from m");
            prop_assert_eq!(sum, if model.is_empty() { Value::Null } else { Value::Int(total) });
        }
    }
}
