//! Every knob of the engine, its default and its range.
//!
//! Settings marked "fixed at creation" are stored in the control file; opening
//! a database with a contradicting value is an error naming both values.
//! `torn_page_protection` is stored there too but may change at an opening
//! (the switch: [`crate::protect::switch`]).
//! docs/SETTINGS.md lists them all and must stay in step with this file.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Page checksum algorithm (`data_checksums`), fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChecksumAlgorithm {
    /// No checksum: the field is zero and never checked.
    Off,
    /// PostgreSQL's 32-lane FNV-1a checksum, 16 bits, bit-compatible with
    /// `pg_checksum_page`.
    Fnv,
    /// CRC-32C (Castagnoli), 32 bits, hardware instructions where present.
    Crc32c,
}

/// Torn-page protection mode (`torn_page_protection`), recorded in the
/// control file; an opening asking for another one switches to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TornPageProtection {
    /// A full image of a page goes into the WAL at its first change after each
    /// checkpoint's redo point.
    FullPages,
    /// Every page goes first to a double-write area, fsynced before the data
    /// file is written.
    DoubleWrites,
    /// No protection: a torn page is detected by its checksum, not repaired.
    Off,
    /// The kernel and the device write each page whole: data files are
    /// opened O_DIRECT and every page goes out as one pwritev2(RWF_ATOMIC)
    /// (Linux 6.11+). Accepted only where statx says every data file's
    /// atomic unit covers the page ([`crate::protect::atomic`]).
    Atomic,
    /// A request, never stored: resolved at an opening to `atomic` where
    /// the hardware writes a page atomically (statx's `unit_max_opt`
    /// covers it), else `double_writes` (`full_pages` without page
    /// checksums). See [`crate::protect::atomic::resolve_auto`].
    Auto,
}

/// Compression of full-page images in the WAL (`wal_compression`), a
/// run-time setting: recovery reads images of every kind whatever it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WalCompression {
    /// Images are logged as they are (their hole left out). The default, as
    /// in PostgreSQL.
    #[default]
    Off,
    /// lz4 (the lz4_flex crate's block format): fast, about 3x on pages.
    Lz4,
    /// zstd at level 3: slower, smaller.
    Zstd,
}

macro_rules! settings_enum_text {
    ($ty:ty, $name:literal, $( $variant:path => $text:literal ),+ $(,)?) => {
        impl $ty {
            /// Every accepted spelling, in documentation order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The setting's spelling.
            pub fn name(self) -> &'static str {
                match self { $($variant => $text),+ }
            }

            /// The on-disk code (the index in [`Self::NAMES`]).
            pub fn code(self) -> u8 {
                Self::NAMES.iter().position(|n| *n == self.name()).unwrap_or(0) as u8
            }

            /// Decodes an on-disk code.
            pub fn from_code(code: u8) -> Option<Self> {
                Self::NAMES.get(code as usize).and_then(|n| n.parse().ok())
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s {
                    $($text => Ok($variant),)+
                    _ => Err(Error::InvalidSetting {
                        name: $name,
                        detail: format!("{s:?} is not one of {}", Self::NAMES.join(", ")),
                    }),
                }
            }
        }
    };
}

settings_enum_text!(ChecksumAlgorithm, "data_checksums",
    ChecksumAlgorithm::Off => "off",
    ChecksumAlgorithm::Fnv => "fnv",
    ChecksumAlgorithm::Crc32c => "crc32c",
);

settings_enum_text!(TornPageProtection, "torn_page_protection",
    TornPageProtection::FullPages => "full_pages",
    TornPageProtection::DoubleWrites => "double_writes",
    TornPageProtection::Off => "off",
    TornPageProtection::Atomic => "atomic",
    TornPageProtection::Auto => "auto",
);

impl TornPageProtection {
    /// The modes a database can be in (every mode but the `auto` request).
    pub const STORED: [TornPageProtection; 4] = [
        TornPageProtection::FullPages,
        TornPageProtection::DoubleWrites,
        TornPageProtection::Off,
        TornPageProtection::Atomic,
    ];

    /// Refuses this mode with page checksums `checksums`: double writes
    /// find a torn page by its checksum, and without one a torn page would
    /// be taken as intact and its copy never used.
    pub fn check_checksums(self, checksums: ChecksumAlgorithm) -> Result<()> {
        if self == TornPageProtection::DoubleWrites && checksums == ChecksumAlgorithm::Off {
            return Err(Error::InvalidSetting {
                name: "torn_page_protection",
                detail: "double_writes needs page checksums (data_checksums = crc32c or fnv): \
                         recovery finds a torn page by its checksum; with data_checksums = off \
                         use full_pages"
                    .into(),
            });
        }
        Ok(())
    }

    /// Refuses a switch from this mode to `to` that cannot be made safely,
    /// naming both modes. Called before anything is written (the switch
    /// itself: `protect::switch`).
    pub fn check_switch(self, to: TornPageProtection, checksums: ChecksumAlgorithm) -> Result<()> {
        to.check_checksums(checksums).map_err(|e| match e {
            Error::InvalidSetting { name, detail } => Error::InvalidSetting {
                name,
                detail: format!("cannot switch from {self} to {to}: {detail}"),
            },
            other => other,
        })
    }
}

settings_enum_text!(WalCompression, "wal_compression",
    WalCompression::Off => "off",
    WalCompression::Lz4 => "lz4",
    WalCompression::Zstd => "zstd",
);

pub const KB: u64 = 1024;
pub const MB: u64 = 1024 * KB;
pub const GB: u64 = 1024 * MB;

/// Page sizes a database may be created with.
pub const PAGE_SIZES: &[u32] = &[4096, 8192, 16384, 32768];
/// WAL block sizes a database may be created with.
pub const WAL_BLOCK_SIZES: &[u32] = &[1024, 2048, 4096, 8192, 16384, 32768, 65536];
/// The smallest sector a device has.
pub const MIN_SECTOR_SIZE: u32 = 512;
/// The sector assumed where the device does not say: 4 KB-sector (4Kn and
/// 512e) drives are common, and a larger sector than the device's costs
/// only padding, a smaller one loses commits.
pub const SAFE_SECTOR_SIZE: u32 = 4096;

/// The settings stored in a database's control file: fixed when it is
/// created, except `torn_page_protection`, which an opening may switch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreationSettings {
    /// Data page size in bytes: 4, 8, 16 or 32 KB. Default 8 KB.
    pub page_size: u32,
    /// WAL block size in bytes: 1 to 64 KB, a power of two. Default 8 KB.
    pub wal_block_size: u32,
    /// WAL segment file size in bytes: a power of two, 1 MB to 1 GB, and a
    /// multiple of the WAL block size. Default 16 MB.
    pub wal_segment_size: u64,
    /// Data segment file size in bytes: a multiple of the page size, 1 MB to
    /// 1 GB... and at most 2^32 pages per file in all. Default 1 GB.
    pub data_segment_size: u64,
    /// Page checksum algorithm. Default crc32c.
    pub data_checksums: ChecksumAlgorithm,
    /// Torn-page protection. Default full_pages. Not fixed: an opening that
    /// asks for another mode switches (see [`crate::protect::switch`]).
    pub torn_page_protection: TornPageProtection,
    /// The device's sector in bytes: the unit a power cut may tear or
    /// destroy whole. A power of two from 512 to `page_size`. Probed from
    /// the device at creation (4096 where unknown); every rewrite in place
    /// (a WAL flush) starts and ends on it.
    pub sector_size: u32,
}

impl Default for CreationSettings {
    fn default() -> Self {
        CreationSettings {
            page_size: 8192,
            wal_block_size: 8192,
            wal_segment_size: 16 * MB,
            data_segment_size: GB,
            data_checksums: ChecksumAlgorithm::Crc32c,
            torn_page_protection: TornPageProtection::FullPages,
            sector_size: SAFE_SECTOR_SIZE,
        }
    }
}

impl CreationSettings {
    /// Checks every value against its range; the error names the setting.
    pub fn validate(&self) -> Result<()> {
        if !PAGE_SIZES.contains(&self.page_size) {
            return Err(invalid(
                "page_size",
                self.page_size as u64,
                "4096, 8192, 16384 or 32768",
            ));
        }
        if !WAL_BLOCK_SIZES.contains(&self.wal_block_size) {
            return Err(invalid(
                "wal_block_size",
                self.wal_block_size as u64,
                "a power of two from 1024 to 65536",
            ));
        }
        let seg = self.wal_segment_size;
        if !seg.is_power_of_two() || !(MB..=GB).contains(&seg) {
            return Err(invalid(
                "wal_segment_size",
                seg,
                "a power of two from 1 MB to 1 GB",
            ));
        }
        if !seg.is_multiple_of(self.wal_block_size as u64) || seg / (self.wal_block_size as u64) < 2
        {
            return Err(invalid(
                "wal_segment_size",
                seg,
                "a multiple of wal_block_size holding at least two blocks",
            ));
        }
        let dseg = self.data_segment_size;
        if !(MB..=GB).contains(&dseg) || !dseg.is_multiple_of(self.page_size as u64) {
            return Err(invalid(
                "data_segment_size",
                dseg,
                "1 MB to 1 GB and a multiple of page_size",
            ));
        }
        let sector = self.sector_size;
        if !sector.is_power_of_two() || !(MIN_SECTOR_SIZE..=self.page_size).contains(&sector) {
            return Err(invalid(
                "sector_size",
                sector as u64,
                "a power of two from 512 to page_size",
            ));
        }
        self.torn_page_protection
            .check_checksums(self.data_checksums)
    }

    /// Pages per data segment file.
    pub fn pages_per_data_segment(&self) -> u64 {
        self.data_segment_size / self.page_size as u64
    }

    /// Compares a request against what the database was created with. Each
    /// `Some` field of `requested` must equal the stored value, except
    /// `torn_page_protection`: another mode is a switch, checked by
    /// [`TornPageProtection::check_switch`].
    pub fn check_requested(&self, requested: &RequestedCreationSettings) -> Result<()> {
        fn cmp<T: PartialEq + fmt::Display>(
            name: &'static str,
            disk: T,
            req: Option<T>,
        ) -> Result<()> {
            match req {
                Some(r) if r != disk => Err(Error::SettingMismatch {
                    name,
                    on_disk: disk.to_string(),
                    requested: r.to_string(),
                }),
                _ => Ok(()),
            }
        }
        cmp("page_size", self.page_size, requested.page_size)?;
        cmp(
            "wal_block_size",
            self.wal_block_size,
            requested.wal_block_size,
        )?;
        cmp(
            "wal_segment_size",
            self.wal_segment_size,
            requested.wal_segment_size,
        )?;
        cmp(
            "data_segment_size",
            self.data_segment_size,
            requested.data_segment_size,
        )?;
        cmp(
            "data_checksums",
            self.data_checksums,
            requested.data_checksums,
        )?;
        cmp("sector_size", self.sector_size, requested.sector_size)?;
        let to = requested
            .torn_page_protection
            .unwrap_or(self.torn_page_protection);
        self.torn_page_protection
            .check_switch(to, self.data_checksums)
    }
}

/// Creation settings a caller asks for when opening an existing database:
/// `None` means "whatever the database has". `torn_page_protection` is the
/// mode of a new database, and at an opening the mode to run with: another
/// than the database's switches it after recovery.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestedCreationSettings {
    pub page_size: Option<u32>,
    pub wal_block_size: Option<u32>,
    pub wal_segment_size: Option<u64>,
    pub data_segment_size: Option<u64>,
    pub data_checksums: Option<ChecksumAlgorithm>,
    pub torn_page_protection: Option<TornPageProtection>,
    /// `None` at creation: probed from the device.
    pub sector_size: Option<u32>,
}

impl RequestedCreationSettings {
    /// The settings a new database gets: each requested value, or the default.
    pub fn or_defaults(&self) -> CreationSettings {
        let d = CreationSettings::default();
        CreationSettings {
            page_size: self.page_size.unwrap_or(d.page_size),
            wal_block_size: self.wal_block_size.unwrap_or(d.wal_block_size),
            wal_segment_size: self.wal_segment_size.unwrap_or(d.wal_segment_size),
            data_segment_size: self.data_segment_size.unwrap_or(d.data_segment_size),
            data_checksums: self.data_checksums.unwrap_or(d.data_checksums),
            torn_page_protection: self.torn_page_protection.unwrap_or(d.torn_page_protection),
            sector_size: self.sector_size.unwrap_or(d.sector_size),
        }
    }
}

fn invalid(name: &'static str, value: u64, range: &str) -> Error {
    Error::InvalidSetting {
        name,
        detail: format!("{value} is out of range: must be {range}"),
    }
}

/// Parses a size such as `8192`, `8k`, `8KB`, `16MB`, `1G`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits_end);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a size (examples: 8192, 8KB, 16MB, 1GB)"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => KB,
        "m" | "mb" | "mib" => MB,
        "g" | "gb" | "gib" => GB,
        other => {
            return Err(format!(
                "{text:?}: unknown unit {other:?} (use B, KB, MB or GB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        CreationSettings::default().validate().unwrap();
    }

    #[test]
    fn out_of_range_values_are_refused_by_name() {
        let s = CreationSettings {
            page_size: 12288,
            ..Default::default()
        };
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("page_size") && e.contains("12288"), "{e}");
        let s = CreationSettings {
            wal_segment_size: 3 * MB,
            ..Default::default()
        };
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("wal_segment_size"));
    }

    #[test]
    fn mismatch_names_both_values() {
        let disk = CreationSettings::default();
        let req = RequestedCreationSettings {
            page_size: Some(16384),
            ..Default::default()
        };
        let e = disk.check_requested(&req).unwrap_err().to_string();
        assert!(
            e.contains("8192") && e.contains("16384") && e.contains("page_size"),
            "{e}"
        );
    }

    #[test]
    fn another_protection_is_a_switch_not_a_mismatch() {
        let disk = CreationSettings::default();
        let mut req = RequestedCreationSettings {
            torn_page_protection: Some(TornPageProtection::Off),
            ..Default::default()
        };
        disk.check_requested(&req).unwrap();
        req.torn_page_protection = Some(TornPageProtection::DoubleWrites);
        disk.check_requested(&req).unwrap();
        let no_checksums = CreationSettings {
            data_checksums: ChecksumAlgorithm::Off,
            ..disk
        };
        let e = no_checksums.check_requested(&req).unwrap_err().to_string();
        assert!(e.contains("from full_pages to double_writes"), "{e}");
        let created = CreationSettings {
            torn_page_protection: TornPageProtection::DoubleWrites,
            ..no_checksums
        };
        let e = created.validate().unwrap_err().to_string();
        assert!(e.contains("needs page checksums"), "{e}");
    }

    #[test]
    fn enum_codes_round_trip() {
        for name in ChecksumAlgorithm::NAMES {
            let a: ChecksumAlgorithm = name.parse().unwrap();
            assert_eq!(ChecksumAlgorithm::from_code(a.code()), Some(a));
        }
        for name in TornPageProtection::NAMES {
            let p: TornPageProtection = name.parse().unwrap();
            assert_eq!(TornPageProtection::from_code(p.code()), Some(p));
        }
        assert!("md5".parse::<ChecksumAlgorithm>().is_err());
        for name in WalCompression::NAMES {
            let c: WalCompression = name.parse().unwrap();
            assert_eq!(c.to_string(), *name);
        }
        let e = "pglz".parse::<WalCompression>().unwrap_err().to_string();
        assert!(
            e.contains("wal_compression") && e.contains("lz4, zstd"),
            "{e}"
        );
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("8KB").unwrap(), 8192);
        assert_eq!(parse_size("16mb").unwrap(), 16 * MB);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("8 parsecs").is_err());
    }

    mod switch {
        use super::*;
        use TornPageProtection::*;

        #[test]
        fn switches_between_modes_are_allowed_with_checksums() {
            for (from, to) in [
                (Off, FullPages),
                (FullPages, Off),
                (Off, Off),
                (FullPages, DoubleWrites),
                (DoubleWrites, Off),
            ] {
                from.check_switch(to, ChecksumAlgorithm::Crc32c).unwrap();
            }
            DoubleWrites
                .check_switch(FullPages, ChecksumAlgorithm::Off)
                .unwrap();
        }

        #[test]
        fn a_switch_to_double_writes_without_checksums_is_refused_naming_both_modes() {
            for from in [Off, FullPages] {
                let e = from
                    .check_switch(DoubleWrites, ChecksumAlgorithm::Off)
                    .unwrap_err()
                    .to_string();
                assert!(
                    e.contains(&format!("from {from} to double_writes"))
                        && e.contains("needs page checksums"),
                    "{e}"
                );
            }
        }
    }
}
