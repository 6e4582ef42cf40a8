//! Tables as the API names them, and the key encoding the tools use.

/// A table: its name and the data file holding its tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    pub file_id: u32,
}

/// The catalog's file id: a tree of table name -> file id.
pub const CATALOG_FILE_ID: u32 = 1;

impl Table {
    /// The catalog, as a table its own rows can be written through.
    pub(crate) fn catalog() -> Table {
        Table {
            name: "catalog".into(),
            file_id: CATALOG_FILE_ID,
        }
    }
}

/// A u64 key in big-endian bytes, so byte order is numeric order.
pub fn key_u64(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}
