//! The SQL catalog: each SQL table's schema, kept as JSON in the reserved
//! engine table `sql.catalog` (in pieces a row each: `catalog_rows.rs`,
//! docs/FORMAT.md), and an in-memory copy. Engine tables holding a SQL table's rows and indexes
//! have reserved names with a generation, so a rebuild writes new ones and
//! switches the catalog row as its commit point.

use super::catalog_rows;
use super::engine_err;
use super::row::{decode_row, encode_key};
use super::types::{codes, SqlError, SqlType, Value};
use crate::db::{Database, Table};
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::*};
use std::sync::Arc;

/// The engine table holding the catalog rows.
pub const CATALOG_TABLE: &str = "sql.catalog";
/// Every engine table the SQL layer owns starts with this.
pub const RESERVED_PREFIX: &str = "sql.";

/// A column. Fields at their defaults are left out of the catalog row
/// (short definitions stay one row: TPC-C's 21-column customer took more
/// than one with every field written).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    pub ty: SqlType,
    #[serde(default, skip_serializing_if = "is_false")]
    pub not_null: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// SERIAL / BIGSERIAL: an omitted value takes the table's next id.
    #[serde(default, skip_serializing_if = "is_false")]
    pub serial: bool,
    /// SMALLINT: an int4 column that holds only int2's range (22003
    /// past it, "smallint out of range"). Before, its values were
    /// checked against int4's.
    #[serde(default, skip_serializing_if = "is_false")]
    pub smallint: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The columns of a key (the primary key's or an index's), in key order.
/// Stored as a number when there is one, the format from before
/// composite keys, and as an array when more (docs/FORMAT.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyColumns(pub Vec<usize>);

impl Serialize for KeyColumns {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => one.serialize(s),
            many => many.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for KeyColumns {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            One(usize),
            Many(Vec<usize>),
        }
        match Stored::deserialize(d)? {
            Stored::One(c) => Ok(KeyColumns(vec![c])),
            Stored::Many(cs) if !cs.is_empty() => Ok(KeyColumns(cs)),
            Stored::Many(_) => Err(serde::de::Error::custom("a key without columns")),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IndexDef {
    pub name: String,
    #[serde(rename = "column")]
    pub columns: KeyColumns,
    /// The engine table of its entries.
    pub engine_table: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TableDef {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// The primary key's columns; `None`: rows are keyed by a hidden row id.
    pub primary_key: Option<KeyColumns>,
    pub indexes: Vec<IndexDef>,
    /// The engine table of its rows.
    pub engine_table: String,
}

impl TableDef {
    pub fn types(&self) -> Vec<SqlType> {
        self.columns.iter().map(|c| c.ty).collect()
    }
}

/// A table as statements use it: its definition, its engine tables and
/// its id counter.
pub struct TableMeta {
    pub def: TableDef,
    pub types: Vec<SqlType>,
    pub rows: Table,
    pub indexes: Vec<Table>,
    /// The next SERIAL value or hidden row id. Like a sequence: taken
    /// values are never given again in this process, nor after a restart
    /// for committed rows (it starts past the largest committed key), and
    /// a rolled-back insert does not give its value back.
    pub next_id: Arc<AtomicI64>,
}

impl TableMeta {
    pub fn take_id(&self) -> i64 {
        self.next_id.fetch_add(1, Relaxed)
    }
}

/// Where planning finds a table: the catalog, or a session's view of it
/// (a block's own DDL first: `session_ddl`).
pub trait Tables {
    fn get(&self, name: &str) -> Result<Arc<TableMeta>, SqlError>;
}

impl Tables for Catalog {
    fn get(&self, name: &str) -> Result<Arc<TableMeta>, SqlError> {
        Catalog::get(self, name)
    }
}

pub struct Catalog {
    tables: RwLock<HashMap<String, Arc<TableMeta>>>,
    /// Bumped by every DDL: a prepared plan of an older version re-plans.
    pub version: AtomicU64,
    generation: AtomicU64,
    /// Definitions DDL replaced, whose engine tables wait for their
    /// readers (`retired`).
    pub retired: super::retired::Retired<TableMeta>,
}

impl Catalog {
    /// Loads the catalog (creating its engine table on first use), then
    /// drops reserved engine tables no catalog row names.
    pub fn open(db: &Database) -> Result<Catalog, SqlError> {
        if db.table(CATALOG_TABLE).is_err() {
            db.create_table(CATALOG_TABLE).map_err(engine_err)?;
        }
        let (catalog, owned) = Self::read(db)?.expect("the catalog table exists");
        for t in db.tables() {
            if t.name.starts_with(RESERVED_PREFIX) && !owned.contains(&t.name) {
                tracing::info!("dropping engine table {} no SQL table owns", t.name);
                db.drop_table(&t.name).map_err(engine_err)?;
            }
        }
        Ok(catalog)
    }

    /// Reads what [`Catalog::open`] reads, changing nothing: `None` if
    /// the database has no SQL catalog. `untorn check` reads a database's
    /// SQL tables through it, and so fails one `untorn serve` could not
    /// open.
    pub fn open_existing(db: &Database) -> Result<Option<Catalog>, SqlError> {
        Ok(Self::read(db)?.map(|(catalog, _)| catalog))
    }

    /// The catalog and the engine tables its rows own; `None` without a
    /// catalog table.
    fn read(db: &Database) -> Result<Option<(Catalog, HashSet<String>)>, SqlError> {
        let Ok(cat) = db.table(CATALOG_TABLE) else {
            return Ok(None);
        };
        let (tables, owned) = Self::load(db, &cat)?;
        // New engine tables get a generation above every one on disk.
        let generation = db
            .tables()
            .iter()
            .filter_map(|t| t.name.strip_prefix(RESERVED_PREFIX))
            .filter_map(|rest| rest.rsplit('.').next()?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        let catalog = Catalog {
            tables: RwLock::new(tables),
            version: AtomicU64::new(1),
            generation: AtomicU64::new(generation + 1),
            retired: Default::default(),
        };
        Ok(Some((catalog, owned)))
    }

    /// Every catalog row's table, with its largest id read; and the engine
    /// tables they own, the catalog's included.
    #[allow(clippy::type_complexity)]
    fn load(
        db: &Database,
        cat: &Table,
    ) -> Result<(HashMap<String, Arc<TableMeta>>, HashSet<String>), SqlError> {
        let tx = db.begin();
        let rows = tx.scan(cat, &[0], None, usize::MAX).map_err(engine_err)?;
        drop(tx);
        let mut tables = HashMap::new();
        let mut owned: HashSet<String> = HashSet::new();
        owned.insert(CATALOG_TABLE.to_string());
        for (_, v) in catalog_rows::definitions(rows)? {
            let def: TableDef = serde_json::from_slice(&v).map_err(|e| {
                SqlError::new(
                    codes::DATA_CORRUPTED,
                    format!("malformed SQL catalog row: {e}"),
                )
            })?;
            let n = def.columns.len();
            let keys = def
                .primary_key
                .iter()
                .chain(def.indexes.iter().map(|i| &i.columns));
            if keys.flat_map(|k| &k.0).any(|&c| c >= n) {
                return Err(SqlError::new(
                    codes::DATA_CORRUPTED,
                    format!(
                        "malformed SQL catalog row of table \"{}\": a key names a column it lacks",
                        def.name
                    ),
                ));
            }
            owned.insert(def.engine_table.clone());
            owned.extend(def.indexes.iter().map(|i| i.engine_table.clone()));
            let meta = Self::meta(db, def, None)?;
            tables.insert(meta.def.name.clone(), Arc::new(meta));
        }
        Ok((tables, owned))
    }

    /// Builds a table's in-memory entry; `next_id` carries a counter over
    /// a rebuild, else it starts past the largest committed id.
    pub fn meta(
        db: &Database,
        def: TableDef,
        next_id: Option<Arc<AtomicI64>>,
    ) -> Result<TableMeta, SqlError> {
        let rows = db.table(&def.engine_table).map_err(engine_err)?;
        let indexes = def
            .indexes
            .iter()
            .map(|i| db.table(&i.engine_table).map_err(engine_err))
            .collect::<Result<Vec<_>, _>>()?;
        let types = def.types();
        let next_id = match next_id {
            Some(n) => n,
            None => Arc::new(AtomicI64::new(largest_id(db, &def, &rows, &types)? + 1)),
        };
        Ok(TableMeta {
            def,
            types,
            rows,
            indexes,
            next_id,
        })
    }

    pub fn get(&self, name: &str) -> Result<Arc<TableMeta>, SqlError> {
        self.tables.read().get(name).cloned().ok_or_else(|| {
            SqlError::new(
                codes::UNDEFINED_TABLE,
                format!("relation \"{name}\" does not exist"),
            )
        })
    }

    /// The SQL tables' names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tables.read().keys().cloned().collect();
        names.sort();
        names
    }

    pub fn exists(&self, name: &str) -> bool {
        self.tables.read().contains_key(name)
    }

    /// A fresh engine table name for `what` (`t.<table>` or `i.<index>`).
    pub fn engine_name(&self, what: &str) -> String {
        let g = self.generation.fetch_add(1, Relaxed);
        format!("{RESERVED_PREFIX}{what}.{g}")
    }

    /// Writes (or with `None` deletes) a table's catalog rows: the commit
    /// point of a DDL statement. Then updates the in-memory copy.
    pub fn store(
        &self,
        db: &Database,
        name: &str,
        meta: Option<TableMeta>,
    ) -> Result<(), SqlError> {
        let mut tx = db.begin();
        if meta.is_none() {
            // A DROP: its table's files go once its readers are done.
            tx.frees_space();
        }
        self.write_rows(db, &mut tx, name, meta.as_ref().map(|m| &m.def))?;
        tx.commit().map_err(engine_err)?;
        self.install(name, meta.map(Arc::new));
        Ok(())
    }

    /// Takes the name `name` for a new table in `tx`: locks its catalog
    /// row (waiting for a block that made a table of that name to end),
    /// then 42P07 if a table has it, as `tx` sees the catalog.
    pub fn claim(
        &self,
        db: &Database,
        tx: &mut crate::txn::Transaction<'_>,
        name: &str,
    ) -> Result<(), SqlError> {
        let cat = db.table(CATALOG_TABLE).map_err(engine_err)?;
        match tx.get_for_update(&cat, name.as_bytes()) {
            Ok(None) => Ok(()),
            Ok(Some(_)) => Err(SqlError::new(
                codes::DUPLICATE_TABLE,
                format!("relation \"{name}\" already exists"),
            )),
            Err(e) => Err(engine_err(e)),
        }
    }

    /// Plans made before now plan again (a block's own DDL changed what
    /// its session sees, or ended).
    pub fn invalidate_plans(&self) {
        self.version.fetch_add(1, SeqCst);
    }

    /// Writes `name`'s catalog rows for `def` (`None`: deletes them) in
    /// `tx`: its commit is the change's commit point.
    pub fn write_rows(
        &self,
        db: &Database,
        tx: &mut crate::txn::Transaction<'_>,
        name: &str,
        def: Option<&TableDef>,
    ) -> Result<(), SqlError> {
        let cat = db.table(CATALOG_TABLE).map_err(engine_err)?;
        // Every piece of the old definition goes; the new one's are written.
        let (from, to) = catalog_rows::later_pieces(name);
        let later = tx
            .scan(&cat, &from, Some(&to), usize::MAX)
            .map_err(engine_err)?;
        for (key, _) in later {
            tx.delete(&cat, &key).map_err(engine_err)?;
        }
        match def {
            Some(def) => {
                let json = serde_json::to_vec(def)
                    .map_err(|e| SqlError::new(codes::INTERNAL_ERROR, e.to_string()))?;
                for (key, piece) in catalog_rows::rows_of(name, &json, db.max_row_len())? {
                    tx.upsert(&cat, &key, &piece).map_err(engine_err)?;
                }
            }
            None => {
                tx.delete(&cat, name.as_bytes()).map_err(engine_err)?;
            }
        }
        Ok(())
    }

    /// The in-memory copy after a commit that wrote `name`'s rows.
    pub fn install(&self, name: &str, meta: Option<Arc<TableMeta>>) {
        let mut tables = self.tables.write();
        match meta {
            Some(m) => tables.insert(name.to_string(), m),
            None => tables.remove(name),
        };
        self.version.fetch_add(1, SeqCst);
    }
}

/// The largest SERIAL value or hidden row id committed, 0 when none.
fn largest_id(
    db: &Database,
    def: &TableDef,
    rows: &Table,
    types: &[SqlType],
) -> Result<i64, SqlError> {
    let serial = def.columns.iter().position(|c| c.serial);
    let keyed_by_id = match (&def.primary_key, serial) {
        (None, _) => true,
        (Some(pk), Some(s)) => pk.0 == [s],
        (Some(_), None) => return Ok(0),
    };
    let tx = db.begin();
    if keyed_by_id {
        // Keys are order-preserving: binary search for the last one.
        let (mut lo, mut hi) = (0i64, i64::MAX);
        if tx
            .scan(rows, &encode_key(&Value::Int(1)), None, 1)
            .map_err(engine_err)?
            .is_empty()
        {
            return Ok(0);
        }
        lo = lo.max(1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2 + 1;
            let found = !tx
                .scan(rows, &encode_key(&Value::Int(mid)), None, 1)
                .map_err(engine_err)?
                .is_empty();
            if found {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        return Ok(lo);
    }
    let s = serial.expect("checked above");
    let mut max = 0;
    for (_, v) in tx.scan(rows, &[0], None, usize::MAX).map_err(engine_err)? {
        if let Value::Int(x) = decode_row(types, &v)?[s] {
            max = max.max(x);
        }
    }
    Ok(max)
}

/// The position of column `name` in `cols` (42703 if none).
pub(super) fn column_of(cols: &[ColumnDef], name: &str) -> Result<usize, SqlError> {
    cols.iter().position(|c| c.name == name).ok_or_else(|| {
        SqlError::new(
            codes::UNDEFINED_COLUMN,
            format!("column \"{name}\" does not exist"),
        )
    })
}

/// The columns as an expression scope sees them.
pub(super) fn scope_columns(cols: &[ColumnDef]) -> Vec<(String, SqlType)> {
    cols.iter().map(|c| (c.name.clone(), c.ty)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;

    /// Catalog rows written before composite keys (a number) still load;
    /// one column is still written as a number, several as an array.
    #[test]
    fn key_columns_read_the_old_form_and_write_one_column_as_before() {
        let old = r#"{"name":"t","columns":[],"primary_key":0,
            "indexes":[{"name":"i","column":1,"engine_table":"sql.i.i.2"}],
            "engine_table":"sql.t.t.1"}"#;
        let def: TableDef = serde_json::from_str(old).unwrap();
        assert_eq!(def.primary_key, Some(KeyColumns(vec![0])));
        assert_eq!(def.indexes[0].columns, KeyColumns(vec![1]));
        let json = serde_json::to_string(&def).unwrap();
        assert!(json.contains(r#""primary_key":0"#), "{json}");
        assert!(json.contains(r#""column":1"#), "{json}");
        let composite = TableDef {
            primary_key: Some(KeyColumns(vec![2, 0])),
            ..def
        };
        let json = serde_json::to_string(&composite).unwrap();
        assert!(json.contains(r#""primary_key":[2,0]"#), "{json}");
        let back: TableDef = serde_json::from_str(&json).unwrap();
        assert_eq!(back, composite);
        let empty = json.replace("[2,0]", "[]");
        assert!(serde_json::from_str::<TableDef>(&empty).is_err());
        // Columns: every field written (the old form) or defaults left out.
        let full = r#"{"name":"a","ty":"Int4","not_null":false,"default":null,"serial":false}"#;
        let col: ColumnDef = serde_json::from_str(full).unwrap();
        assert_eq!(
            serde_json::to_string(&col).unwrap(),
            r#"{"name":"a","ty":"Int4"}"#
        );
        let set = ColumnDef {
            not_null: true,
            default: Some(Value::Int(3)),
            serial: true,
            ..col
        };
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(serde_json::from_str::<ColumnDef>(&json).unwrap(), set);
    }

    /// A catalog row whose key names a column the table lacks is refused
    /// as corrupt when the catalog opens, not indexed out of bounds later.
    #[test]
    fn a_key_naming_a_missing_column_is_refused_as_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path(), Options::default()).unwrap();
        db.create_table(CATALOG_TABLE).unwrap();
        let cat = db.table(CATALOG_TABLE).unwrap();
        let row = r#"{"name":"t","columns":[{"name":"a","ty":"Int4","not_null":true,
            "default":null,"serial":false}],"primary_key":[0,3],"indexes":[],
            "engine_table":"sql.catalog"}"#;
        let mut tx = db.begin();
        tx.upsert(&cat, b"t", row.as_bytes()).unwrap();
        tx.commit().unwrap();
        let e = Catalog::open(&db).err().expect("refused");
        assert_eq!(e.code, codes::DATA_CORRUPTED);
        assert!(e.message.contains("names a column it lacks"), "{e}");
    }
}
