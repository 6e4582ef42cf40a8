//! Checking sysbench's tables: every row well formed, the ids `1..=N`,
//! and the `k_1` index holding exactly one entry per row.

use super::{index_key, index_name, row_k, table_name, table_number, C_LEN, K_LEN, ROW_LEN};
use crate::db::Database;
use crate::error::{Error, Result};
use crate::lab::workload::check::{CheckReport, Malformed};
use crate::lab::workload::scan_all;
use crate::table::Table;

/// Checks the sysbench tables of `db`, however many there are:
/// [`check_tables`] over `sbtest1..N`, N the largest present, each to
/// have as many rows as the first.
pub fn check(db: &Database) -> Result<CheckReport> {
    let tables = db
        .tables()
        .iter()
        .filter_map(|t| table_number(&t.name))
        .max()
        .unwrap_or(0);
    check_tables(db, tables, None)
}

/// Checks tables `sbtest1..=tables`: each present with its index; its ids
/// exactly `1..=rows` (`rows`: the first table's count when `None`), as
/// sysbench's delete and insert of one id keep them; every row well formed
/// (184 bytes, `c` and `pad` of digit groups); and its `k_1` index holding
/// exactly one empty entry (k, id) per row, and nothing else.
pub fn check_tables(db: &Database, tables: usize, rows: Option<u64>) -> Result<CheckReport> {
    let mut report = CheckReport::new("sysbench");
    if tables == 0 {
        report
            .broken
            .push("sysbench invariant broken: no table sbtest1".into());
    }
    let mut rows = rows;
    for n in 1..=tables {
        let (Some(t), Some(index)) = (
            present(db, &table_name(n), &mut report)?,
            present(db, &index_name(n), &mut report)?,
        ) else {
            continue;
        };
        let (count, mut expected) = check_rows(db, &t, &mut report)?;
        let want = *rows.get_or_insert(count);
        if count != want {
            report.broken.push(format!(
                "sysbench invariant broken: {} has {count} rows, not {want} as the others",
                t.name
            ));
        }
        expected.sort_unstable();
        let entries = check_index(db, &t, &index, &expected, &mut report)?;
        report.checked.push(format!(
            "{}: {count} rows; index {}: {entries} entries",
            t.name, index.name
        ));
    }
    Ok(report)
}

/// The table named `name`, or `None` with the missing table reported.
fn present(db: &Database, name: &str, report: &mut CheckReport) -> Result<Option<Table>> {
    match db.table(name) {
        Ok(t) => Ok(Some(t)),
        Err(Error::NoSuchTable(_)) => {
            report.broken.push(format!(
                "sysbench invariant broken: table {name} is missing"
            ));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Reads every row of `t`: its count, and the index entries its
/// well-formed rows need.
fn check_rows(db: &Database, t: &Table, report: &mut CheckReport) -> Result<(u64, Vec<[u8; 12]>)> {
    let mut expected = Vec::new();
    let mut bad = Malformed::default();
    let mut gap: Option<String> = None;
    let mut next_id = 1u64;
    let count = scan_all(db, t, |k, v| {
        let Some(id) = <[u8; 8]>::try_from(k).ok().map(u64::from_be_bytes) else {
            bad.add(|| format!("key {k:02x?} is not an 8-byte id"));
            return Ok(());
        };
        if id != next_id && gap.is_none() {
            gap = Some(format!("id {id} follows id {}", next_id - 1));
        }
        next_id = id.saturating_add(1);
        if v.len() != ROW_LEN {
            bad.add(|| format!("id {id}: {} bytes, not {ROW_LEN}", v.len()));
        } else if !digit_groups(&v[K_LEN..K_LEN + C_LEN], 10, 11)
            || !digit_groups(&v[K_LEN + C_LEN..], 5, 11)
        {
            bad.add(|| format!("id {id}: c or pad is not groups of digits"));
        } else {
            expected.push(index_key(row_k(v, t)?, id));
        }
        Ok(())
    })?;
    bad.report(report, &t.name);
    if let Some(gap) = gap {
        report.broken.push(format!(
            "sysbench invariant broken: the ids of {} are not 1..{count} ({gap})",
            t.name
        ));
    }
    Ok((count, expected))
}

/// Walks `index` and the sorted entries the rows need side by side, and
/// reports rows without their entry and entries without their row.
/// Returns the number of entries.
fn check_index(
    db: &Database,
    t: &Table,
    index: &Table,
    expected: &[[u8; 12]],
    report: &mut CheckReport,
) -> Result<u64> {
    let mut missing = Malformed::default();
    let mut stray = Malformed::default();
    let mut not_empty = Malformed::default();
    let describe = |e: &[u8]| match <[u8; 12]>::try_from(e) {
        Ok(e) => format!(
            "k {}, id {}",
            u32::from_be_bytes([e[0], e[1], e[2], e[3]]),
            u64::from_be_bytes([e[4], e[5], e[6], e[7], e[8], e[9], e[10], e[11]])
        ),
        Err(_) => format!("{e:02x?}"),
    };
    let mut at = 0usize;
    let entries = scan_all(db, index, |k, v| {
        while at < expected.len() && expected[at][..] < *k {
            missing.add(|| describe(&expected[at]));
            at += 1;
        }
        if at < expected.len() && expected[at][..] == *k {
            at += 1;
            if !v.is_empty() {
                not_empty.add(|| format!("{}: {} bytes of row", describe(k), v.len()));
            }
        } else {
            stray.add(|| describe(k));
        }
        Ok(())
    })?;
    for e in &expected[at..] {
        missing.add(|| describe(e));
    }
    not_empty.report(report, &index.name);
    if missing.count + stray.count > 0 {
        report.broken.push(format!(
            "sysbench invariant broken: index {} does not match table {}: \
             {} rows without their entry (first: {}), {} entries without their row (first: {})",
            index.name,
            t.name,
            missing.count,
            missing.first.as_deref().unwrap_or("none"),
            stray.count,
            stray.first.as_deref().unwrap_or("none"),
        ));
    }
    Ok(entries)
}

/// Whether `field` is `groups` groups of `digits` digits joined by dashes,
/// then blanks: the shape [`Rng::digit_groups`] writes.
fn digit_groups(field: &[u8], groups: usize, digits: usize) -> bool {
    let used = groups * digits + groups.saturating_sub(1);
    if field.len() < used {
        return false;
    }
    let (text, blanks) = field.split_at(used);
    blanks.iter().all(|&b| b == b' ')
        && text.iter().enumerate().all(|(i, &b)| {
            if i % (digits + 1) == digits {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
}

#[cfg(test)]
mod tests {
    use super::super::{move_index_entry, set_k, Kind, Sysbench};
    use super::*;
    use crate::lab::workload::{Outcome, Rng, Scale, Workload};
    use crate::options::Options;
    use crate::table::key_u64;

    fn loaded(dir: &std::path::Path) -> (Sysbench, Database) {
        let scale = Scale {
            tables: 2,
            table_size: 300,
            ..Scale::default()
        };
        let w = Sysbench::new(Kind::ReadWrite, &scale).unwrap();
        let db = Database::create(dir, Options::default()).unwrap();
        w.load(&db).unwrap();
        (w, db)
    }

    fn broken(db: &Database) -> String {
        let report = check(db).unwrap();
        assert!(!report.ok(), "the check should fail: {report:?}");
        report.broken.join("\n")
    }

    #[test]
    fn check_finds_every_table_and_a_mismatched_index() {
        let dir = tempfile::tempdir().unwrap();
        let (w, db) = loaded(dir.path());
        let tables = w.tables(&db).unwrap();
        let mut rng = Rng::new(7, 0);
        for _ in 0..50 {
            assert_eq!(
                w.transaction(&db, &tables, &mut rng, 0).unwrap(),
                Outcome::Committed
            );
        }
        let report = check(&db).unwrap();
        assert!(report.ok(), "{report:?}");
        assert_eq!(
            report.checked,
            [
                "sbtest1: 300 rows; index sbtest1_k_1: 300 entries",
                "sbtest2: 300 rows; index sbtest2_k_1: 300 entries"
            ]
        );

        // Row 5 of sbtest2 gets another k, its index entry left behind.
        let (t, index) = (&tables.tables[2], &tables.tables[3]);
        let mut tx = db.begin();
        let mut row = tx.get(t, &key_u64(5)).unwrap().unwrap();
        let k = row_k(&row, t).unwrap();
        set_k(&mut row, k + 1_000_000);
        tx.update(t, &key_u64(5), &row).unwrap();
        tx.commit().unwrap();
        let all = broken(&db);
        assert!(all.contains("index sbtest2_k_1 does not match table sbtest2"));
        assert!(all.contains(&format!("(first: k {}, id 5)", k + 1_000_000)));
        assert!(all.contains(&format!("entries without their row (first: k {k}, id 5)")));
        assert!(w.check(&db).is_err());

        // Put the index right: the check passes again.
        let mut tx = db.begin();
        move_index_entry(&mut tx, index, 5, Some(k), Some(k + 1_000_000)).unwrap();
        tx.commit().unwrap();
        assert!(check(&db).unwrap().ok());

        // A malformed c, a gap in the ids and a missing index are named.
        let mut tx = db.begin();
        let mut row = tx.get(t, &key_u64(9)).unwrap().unwrap();
        row[K_LEN + 3] = b'x';
        tx.update(t, &key_u64(9), &row).unwrap();
        let row1 = tx.get(&tables.tables[0], &key_u64(7)).unwrap().unwrap();
        tx.delete(&tables.tables[0], &key_u64(7)).unwrap();
        let k1 = row_k(&row1, &tables.tables[0]).unwrap();
        tx.delete(&tables.tables[1], &index_key(k1, 7)).unwrap();
        tx.commit().unwrap();
        let all = broken(&db);
        assert!(
            all.contains("1 malformed rows in sbtest2 (first: id 9"),
            "{all}"
        );
        assert!(
            all.contains("ids of sbtest1 are not 1..299 (id 8 follows id 6)"),
            "{all}"
        );
        assert!(all.contains("sbtest2 has 300 rows, not 299"), "{all}");
        db.drop_table(&index_name(2)).unwrap();
        assert!(broken(&db).contains("table sbtest2_k_1 is missing"));
    }

    #[test]
    fn table_numbers_are_the_tables_not_their_indexes() {
        assert_eq!(table_number("sbtest12"), Some(12));
        assert_eq!(table_number("sbtest1_k_1"), None);
        assert_eq!(table_number("sbtest"), None);
        assert_eq!(table_number("sbtest0"), None);
        assert!(digit_groups(b"12-34  ", 2, 2));
        assert!(!digit_groups(b"12-3x  ", 2, 2));
        assert!(!digit_groups(b"12-34 x", 2, 2));
    }
}
