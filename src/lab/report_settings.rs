//! The report's settings listing: every setting a configuration ran with,
//! sizes in human units (`buffer_pool_size 5100000` read as nothing), and
//! the double-write settings only where the mode writes through the area.

use std::collections::BTreeMap;

use super::html::{table_start, text_row, TABLE_END};
use super::{esc, ConfigResult};

/// Settings in bytes, shown in units.
const SIZES: [&str; 6] = [
    "page_size",
    "wal_block_size",
    "buffer_pool_size",
    "max_wal_size",
    "double_write_buffer_size",
    "double_write_deferred_size",
];

/// `bytes` in PostgreSQL's units (kB = 1024 B), one decimal where needed.
pub fn size_text(bytes: u64) -> String {
    let units = [("GB", 1u64 << 30), ("MB", 1 << 20), ("kB", 1 << 10)];
    for (unit, scale) in units {
        if bytes >= scale {
            let v = bytes as f64 / scale as f64;
            return if bytes.is_multiple_of(scale) {
                format!("{} {unit}", bytes / scale)
            } else {
                format!("{v:.1} {unit}")
            };
        }
    }
    format!("{bytes} B")
}

/// False for a setting `r`'s mode ignores: the area's under any mode but
/// double_writes, WAL compression (of full-page images) under any but
/// full_pages.
pub fn used_by(r: &ConfigResult, key: &str) -> bool {
    let mode = r.settings.get("torn_page_protection").map(String::as_str);
    let only = if key.starts_with("double_write_") {
        "double_writes"
    } else if key == "wal_compression" {
        "full_pages"
    } else {
        return true;
    };
    mode == Some(only)
}

/// How setting `key` of `r` reads in the listing; `None` where the
/// configuration does not use it.
pub fn shown(r: &ConfigResult, key: &str, value: &str) -> Option<String> {
    if !used_by(r, key) {
        return None;
    }
    let Some(bytes) = SIZES
        .contains(&key)
        .then(|| value.parse::<u64>().ok())
        .flatten()
    else {
        return Some(value.to_string());
    };
    let page = r
        .settings
        .get("page_size")
        .and_then(|p| p.parse::<u64>().ok());
    Some(match page {
        Some(page) if key == "buffer_pool_size" && page > 0 => {
            format!("{} ({} pages)", size_text(bytes), bytes / page)
        }
        _ => size_text(bytes),
    })
}

/// Every setting used: those all configurations share, then those that
/// differ, one column per configuration (`-`: not used there).
pub fn html(o: &mut String, results: &[ConfigResult], labels: &[String]) {
    let mut settings: BTreeMap<&str, Vec<Option<String>>> = BTreeMap::new();
    for (i, r) in results.iter().enumerate() {
        for (k, v) in &r.settings {
            if let Some(text) = shown(r, k, v) {
                settings
                    .entry(k)
                    .or_insert_with(|| vec![None; results.len()])[i] = Some(text);
            }
        }
    }
    o.push_str("<h2>Settings</h2>\n");
    let all_same = |vals: &Vec<Option<String>>| vals.iter().all(|v| v.is_some() && *v == vals[0]);
    o.push_str("<h3>Common to every configuration</h3>\n");
    table_start(o, ["setting", "value"].map(String::from));
    for (k, vals) in settings.iter().filter(|(_, v)| all_same(v)) {
        text_row(o, [*k, vals[0].as_deref().unwrap_or("-")]);
    }
    o.push_str(TABLE_END);
    let differing: Vec<_> = settings.iter().filter(|(_, v)| !all_same(v)).collect();
    if differing.is_empty() {
        return;
    }
    o.push_str("<h3>Differing between configurations</h3>\n");
    let headers = results
        .iter()
        .zip(labels)
        .map(|(r, label)| format!("{}<br>{}", esc(&r.workload), esc(label)));
    table_start(o, std::iter::once("setting".to_string()).chain(headers));
    for (k, vals) in differing {
        text_row(
            o,
            std::iter::once(*k).chain(vals.iter().map(|v| v.as_deref().unwrap_or("-"))),
        );
    }
    o.push_str(TABLE_END);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_units() {
        assert_eq!(size_text(5_100_000), "4.9 MB");
        assert_eq!(size_text(64 << 20), "64 MB");
        assert_eq!(size_text(8192), "8 kB");
        assert_eq!(size_text(1 << 30), "1 GB");
        assert_eq!(size_text(100), "100 B");
    }

    #[test]
    fn settings_only_where_the_mode_uses_them() {
        let mut r = ConfigResult::default();
        for (k, v) in [
            ("torn_page_protection", "full_pages"),
            ("page_size", "8192"),
        ] {
            r.settings.insert(k.into(), v.into());
        }
        assert_eq!(shown(&r, "double_write_buffer_size", "67108864"), None);
        assert_eq!(shown(&r, "wal_compression", "lz4").as_deref(), Some("lz4"));
        assert_eq!(
            shown(&r, "buffer_pool_size", "5100000").as_deref(),
            Some("4.9 MB (622 pages)")
        );
        r.settings
            .insert("torn_page_protection".into(), "double_writes".into());
        assert_eq!(
            shown(&r, "double_write_buffer_size", "67108864").as_deref(),
            Some("64 MB")
        );
        // WAL compression acts on full-page images, which it writes none of.
        assert_eq!(shown(&r, "wal_compression", "lz4"), None);
    }
}
