//! Log sequence numbers: byte positions in the WAL stream.

use std::fmt;

/// A byte position in the WAL stream, counting WAL page headers, as in
/// PostgreSQL. `Lsn(0)` is "invalid / none".
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Lsn(pub u64);

impl Lsn {
    /// No LSN: before the first record.
    pub const INVALID: Lsn = Lsn(0);

    pub fn is_valid(self) -> bool {
        self.0 != 0
    }
}

impl fmt::Display for Lsn {
    /// PostgreSQL's `X/X` notation: high and low 32 bits in hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

impl std::str::FromStr for Lsn {
    type Err = String;
    fn from_str(s: &str) -> Result<Lsn, String> {
        let (hi, lo) = s
            .split_once('/')
            .ok_or_else(|| format!("LSN {s:?} is not of the form X/X"))?;
        let hi = u64::from_str_radix(hi, 16).map_err(|e| format!("LSN {s:?}: {e}"))?;
        let lo = u64::from_str_radix(lo, 16).map_err(|e| format!("LSN {s:?}: {e}"))?;
        if hi > u32::MAX as u64 || lo > u32::MAX as u64 {
            return Err(format!("LSN {s:?} out of range"));
        }
        Ok(Lsn(hi << 32 | lo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        let lsn = Lsn(0x1_0000_2A38);
        assert_eq!(lsn.to_string(), "1/2A38");
        assert_eq!("1/2A38".parse::<Lsn>().unwrap(), lsn);
        assert!("12".parse::<Lsn>().is_err());
    }
}
