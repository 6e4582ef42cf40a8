//! PostgreSQL's `timestamp` (without time zone): microseconds since
//! 2000-01-01 00:00:00, its text form as DateStyle ISO prints it.

use super::types::{codes, SqlError};

const US_PER_DAY: i64 = 86_400_000_000;
/// Days from 1970-01-01 to 2000-01-01.
const EPOCH_2000_DAYS: i64 = 10_957;

/// `YYYY-MM-DD HH:MM:SS[.ffffff]`, as DateStyle ISO prints it.
pub fn format(us: i64) -> String {
    let days = us.div_euclid(US_PER_DAY);
    let in_day = us.rem_euclid(US_PER_DAY);
    let (y, m, d) = civil_from_days(days + EPOCH_2000_DAYS);
    let secs = in_day / 1_000_000;
    let frac = in_day % 1_000_000;
    let mut s = format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if frac != 0 {
        let digits = format!("{frac:06}");
        s.push('.');
        s.push_str(digits.trim_end_matches('0'));
    }
    s
}

/// Parses `YYYY-MM-DD[ HH:MM:SS[.f...]]` (a `T` also separates).
pub fn parse(text: &str) -> Result<i64, SqlError> {
    let bad = || {
        SqlError::new(
            codes::INVALID_TEXT_REPRESENTATION,
            format!("invalid input syntax for type timestamp: \"{text}\""),
        )
    };
    let t = text.trim();
    let (date, time) = match t.split_once([' ', 'T']) {
        Some((d, rest)) => (d, rest.trim()),
        None => (t, "00:00:00"),
    };
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
    let mut parts = date.splitn(3, '-');
    let (y, m, d) = match (parts.next(), parts.next(), parts.next()) {
        (Some(y), Some(m), Some(d)) => (num(y)?, num(m)?, num(d)?),
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut hms = hms.splitn(3, ':');
    let (h, mi, s) = match (hms.next(), hms.next(), hms.next()) {
        (Some(h), Some(mi), Some(s)) => (num(h)?, num(mi)?, num(s)?),
        _ => return Err(bad()),
    };
    if h > 23 || mi > 59 || s > 60 || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let frac_us = format!("{frac:0<6}")[..6]
        .parse::<i64>()
        .map_err(|_| bad())?;
    let days = days_from_civil(y, m, d) - EPOCH_2000_DAYS;
    Ok(days * US_PER_DAY + ((h * 60 + mi) * 60 + s) * 1_000_000 + frac_us)
}

// Howard Hinnant's civil-calendar algorithms (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The current time, as CURRENT_TIMESTAMP gives it (UTC: TimeZone is
/// Etc/UTC).
pub fn now() -> i64 {
    let since_1970 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    since_1970.as_micros() as i64 - EPOCH_2000_DAYS * US_PER_DAY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_through_text() {
        for text in [
            "2000-01-01 00:00:00",
            "2026-11-24 08:15:30.25",
            "1999-12-31 23:59:59.999999",
            "2024-02-29 12:00:00",
        ] {
            let us = parse(text).unwrap();
            assert_eq!(format(us), text);
        }
        assert_eq!(parse("2000-01-02").unwrap(), 86_400_000_000);
        assert!(parse("2000-13-01").is_err());
        assert!(parse("yesterday").is_err());
        assert!(now() > parse("2026-01-01").unwrap());
    }
}
