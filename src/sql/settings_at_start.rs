//! What a client may set for its session: `client_encoding`, and the
//! start-up packet's `options` (`-c name=value` or `--name=value`, as
//! libpq's PGOPTIONS sends them), each checked as SET checks it.
//!
//! The server stores and sends UTF-8 only (text that is not is 22021):
//! `client_encoding` may be UTF8 (any spelling PostgreSQL takes: utf-8,
//! unicode) or SQL_ASCII (no conversion, as psql sends in the C locale);
//! another encoding PostgreSQL knows is 0A000, as a conversion it lacks
//! would be; a name it does not know is 22023. Options name settings SET
//! can change (work_mem, statement_timeout, the idle timeouts and
//! client_encoding);
//! a few others are taken as their fixed values; anything else is 0A000
//! at start-up, never ignored.

use super::types::{codes, SqlError};

/// The encodings PostgreSQL names (pg_enc2name_tbl), lowercased without
/// punctuation, but UTF8 and SQL_ASCII: known, not served.
const OTHER_ENCODINGS: &[&str] = &[
    "eucjp",
    "euccn",
    "euckr",
    "euctw",
    "eucjis2004",
    "mulecinternal",
    "latin1",
    "latin2",
    "latin3",
    "latin4",
    "latin5",
    "latin6",
    "latin7",
    "latin8",
    "latin9",
    "latin10",
    "win1256",
    "win1258",
    "win866",
    "win874",
    "koi8r",
    "win1251",
    "win1252",
    "iso88595",
    "iso88596",
    "iso88597",
    "iso88598",
    "win1250",
    "win1253",
    "win1254",
    "win1255",
    "win1257",
    "koi8u",
    "sjis",
    "big5",
    "gbk",
    "uhc",
    "gb18030",
    "johab",
    "shiftjis2004",
];

/// The canonical name of `client_encoding = name`, if it is served.
pub fn client_encoding(name: &str) -> Result<&'static str, SqlError> {
    let key: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    match key.as_str() {
        "utf8" | "unicode" => Ok("UTF8"),
        "sqlascii" => Ok("SQL_ASCII"),
        k if OTHER_ENCODINGS.contains(&k) => Err(SqlError::new(
            codes::FEATURE_NOT_SUPPORTED,
            format!(
                "conversion between {} and UTF8 is not supported: this server speaks UTF8 only",
                name.to_uppercase()
            ),
        )),
        _ => Err(SqlError::new(
            codes::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"client_encoding\": \"{name}\""),
        )),
    }
}

/// A timeout setting's text (`name`) as PostgreSQL reads it: milliseconds, or a
/// number with a unit (`us`, `ms`, `s`, `min`, `h`, `d`); 0 is no limit.
pub fn timeout(text: &str, name: &str) -> Result<Option<std::time::Duration>, SqlError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    let per_unit_us: u64 = match unit {
        "us" => 1,
        "" | "ms" => 1_000,
        "s" => 1_000_000,
        "min" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        _ => 0,
    };
    let us = number
        .parse::<u64>()
        .ok()
        .filter(|_| per_unit_us > 0)
        .and_then(|n| n.checked_mul(per_unit_us))
        .ok_or_else(|| {
            SqlError::new(
                codes::INVALID_PARAMETER_VALUE,
                format!("invalid value for parameter \"{name}\": \"{text}\""),
            )
        })?;
    Ok((us > 0).then_some(std::time::Duration::from_micros(us)))
}

/// `work_mem` as PostgreSQL reads it: kilobytes, or a number with a unit
/// (`kB`, `MB`, `GB`, `TB`; `B`), from 64 kB to 2 GB; in bytes.
pub fn work_mem(text: &str) -> Result<usize, SqlError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    let per_unit: u64 = match unit {
        "B" => 1,
        "" | "kB" => 1 << 10,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        _ => 0,
    };
    let invalid = || {
        SqlError::new(
            codes::INVALID_PARAMETER_VALUE,
            format!("invalid value for parameter \"work_mem\": \"{text}\""),
        )
    };
    let bytes = number
        .parse::<u64>()
        .ok()
        .filter(|_| per_unit > 0)
        .and_then(|n| n.checked_mul(per_unit))
        .ok_or_else(invalid)?;
    if !(64 << 10..=2 << 30).contains(&bytes) {
        return Err(SqlError::new(
            codes::INVALID_PARAMETER_VALUE,
            format!("{text} is outside the valid range for parameter \"work_mem\" (64kB .. 2GB)"),
        ));
    }
    Ok(bytes as usize)
}

/// Settings an `options` string may name that SET changes.
const SETTABLE: &[&str] = &[
    "work_mem",
    "statement_timeout",
    "idle_in_transaction_session_timeout",
    "idle_session_timeout",
    "client_encoding",
];

/// Settings an `options` string may name at the one value the server
/// has (as its ParameterStatus says), or that change nothing it does.
fn fixed(name: &str, value: &str) -> bool {
    match name {
        "application_name" | "extra_float_digits" => true,
        "datestyle" => value.eq_ignore_ascii_case("ISO, MDY") || value.eq_ignore_ascii_case("ISO"),
        "timezone" => ["UTC", "Etc/UTC", "GMT"]
            .iter()
            .any(|z| value.eq_ignore_ascii_case(z)),
        _ => false,
    }
}

/// The `SET` statements a start-up packet's `options` asks for, in
/// order; an option the server cannot honour is an error naming it.
pub fn options(text: &str) -> Result<Vec<String>, SqlError> {
    let words = split_words(text);
    let mut sets = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let pair = match words[i].as_str() {
            "-c" => {
                i += 1;
                words.get(i).cloned().unwrap_or_default()
            }
            w if w.starts_with("-c") => w[2..].to_string(),
            w if w.starts_with("--") => w[2..].to_string(),
            w => {
                return Err(SqlError::new(
                    codes::FEATURE_NOT_SUPPORTED,
                    format!(
                    "option \"{w}\" in the start-up packet is not supported: only -c name=value"
                ),
                ))
            }
        };
        i += 1;
        let Some((name, value)) = pair.split_once('=') else {
            return Err(SqlError::new(
                codes::SYNTAX_ERROR,
                format!("-c {pair} requires a value"),
            ));
        };
        // As PostgreSQL's ParseLongOption: dashes in the name are underscores.
        let name = name.replace('-', "_").to_lowercase();
        if SETTABLE.contains(&name.as_str()) {
            match name.as_str() {
                "client_encoding" => drop(client_encoding(value)?),
                "work_mem" => drop(work_mem(value)?),
                _ => drop(timeout(value, &name)?),
            }
            sets.push(format!("SET {name} = '{}'", value.replace('\'', "''")));
        } else if !fixed(&name, value) {
            return Err(SqlError::new(
                codes::FEATURE_NOT_SUPPORTED,
                format!(
                    "parameter \"{name}\" in the start-up options cannot be set on this server"
                ),
            ));
        }
    }
    Ok(sets)
}

/// `options` split at unescaped whitespace, `\` escaping the next
/// character (libpq's and the postmaster's rule).
fn split_words(text: &str) -> Vec<String> {
    let (mut words, mut word, mut chars) = (Vec::new(), String::new(), text.chars());
    while let Some(c) = chars.next() {
        match c {
            '\\' => word.extend(chars.next()),
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_mem_reads_as_postgresql_reads_it() {
        assert_eq!(work_mem("4096").unwrap(), 4 << 20);
        assert_eq!(work_mem("64kB").unwrap(), 64 << 10);
        assert_eq!(work_mem(" 2GB ").unwrap(), 2 << 30);
        for bad in ["63kB", "3GB", "4 mb", "lots", "-1", ""] {
            assert_eq!(work_mem(bad).unwrap_err().code, "22023", "{bad}");
        }
    }

    #[test]
    fn encodings_are_utf8_sql_ascii_or_refused_by_kind() {
        for ok in ["UTF8", "utf-8", "Unicode", "UTF_8"] {
            assert_eq!(client_encoding(ok).unwrap(), "UTF8");
        }
        assert_eq!(client_encoding("SQL_ASCII").unwrap(), "SQL_ASCII");
        assert_eq!(client_encoding("LATIN1").unwrap_err().code, "0A000");
        assert_eq!(client_encoding("win-1252").unwrap_err().code, "0A000");
        assert_eq!(client_encoding("klingon").unwrap_err().code, "22023");
    }

    #[test]
    fn options_become_sets_or_errors_naming_them() {
        let sets =
            options("-c statement_timeout=5s --idle-session-timeout=1min -capplication_name=x\\ y")
                .unwrap();
        assert_eq!(
            sets,
            [
                "SET statement_timeout = '5s'",
                "SET idle_session_timeout = '1min'"
            ]
        );
        assert_eq!(options("-c client_encoding=UTF8").unwrap().len(), 1);
        assert_eq!(
            options("-c work_mem=64MB").unwrap(),
            ["SET work_mem = '64MB'"]
        );
        assert_eq!(options("-c work_mem=1kB").unwrap_err().code, "22023");
        assert_eq!(
            options("-c client_encoding=LATIN1").unwrap_err().code,
            "0A000"
        );
        assert!(options("  ").unwrap().is_empty());
        assert!(options("-c DateStyle=ISO,\\ MDY -c TimeZone=UTC")
            .unwrap()
            .is_empty());
        let e = options("-c search_path=app").unwrap_err();
        assert!(
            e.code == "0A000" && e.message.contains("search_path"),
            "{e}"
        );
        assert_eq!(options("-c statement_timeout").unwrap_err().code, "42601");
        assert_eq!(options("-X").unwrap_err().code, "0A000");
        // A value is checked here, as SET checks it.
        assert_eq!(
            options("-c statement_timeout=1'2").unwrap_err().code,
            "22023"
        );
    }
}
