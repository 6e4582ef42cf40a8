//! The run-time settings of `double_writes` (docs/SETTINGS.md), checked
//! and turned into sizes in pages.

use super::area::slots_per_batch;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::settings::ChecksumAlgorithm;

/// How a double-write area is laid out (run-time settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AreaSettings {
    /// Blocks per shard after its file header.
    pub area_blocks: u32,
    /// Pages per batch header.
    pub batch_pages: usize,
    /// Pages a client that must write a dirty victim writes at once.
    pub eviction_pages: usize,
    /// `double_write_defer_in_place`: evicted pages wait in `dw/deferred`
    /// for the next checkpoint.
    pub defer_in_place: bool,
    /// `double_write_keep_deferred`: deferred pages stay across
    /// checkpoints, named by a manifest.
    pub keep_deferred: bool,
    /// The most pages `dw/deferred` holds (`double_write_deferred_size`;
    /// by default `DEFERRED_PER_AREA` times the area's blocks).
    pub deferred_slots: u32,
    /// Pages of `dw/deferred` written out per piece before a manifest's
    /// fsync (`double_write_flush_after`; 0: the fsync alone).
    pub flush_after: usize,
    /// The database's page checksums (reads from the area check them).
    pub checksums: ChecksumAlgorithm,
}

/// By default `dw/deferred` holds up to this many times a shard's area:
/// it needs no preallocation (it is fsynced once per checkpoint), and it
/// must hold every page evicted between two checkpoints (at ten times the
/// default job's data, 64 MB was too small: evictions went through the
/// area again, at 0.69x of `off`).
pub const DEFERRED_PER_AREA: u32 = 16;

/// The most pages `double_write_deferred_size` may ask for: each deferred
/// page costs an entry in memory, and slots are numbered in 32 bits.
pub const MAX_DEFERRED_PAGES: u64 = 16 << 20;

impl AreaSettings {
    /// The area for `options` at `page_size`; refuses values out of range,
    /// naming the setting.
    pub fn from_options(
        options: &Options,
        page_size: usize,
        checksums: ChecksumAlgorithm,
    ) -> Result<AreaSettings> {
        let pages = pages_of(
            "double_write_buffer_size",
            options.double_write_buffer_size,
            page_size,
            65_536,
        )?;
        let batch = options.double_write_batch_pages as usize;
        let cap = slots_per_batch(page_size);
        if !(1..=cap).contains(&batch) {
            return Err(Error::InvalidSetting {
                name: "double_write_batch_pages",
                detail: format!(
                    "{batch} is outside 1 to {cap} (the pages one batch header describes at {page_size}-byte pages)"
                ),
            });
        }
        let eviction = options.double_write_eviction_pages as usize;
        if !(1..=1000).contains(&eviction) {
            return Err(Error::InvalidSetting {
                name: "double_write_eviction_pages",
                detail: format!("{eviction} is outside 1 to 1000"),
            });
        }
        let deferred_slots = pages_of(
            "double_write_deferred_size",
            deferred_bytes(options),
            page_size,
            MAX_DEFERRED_PAGES,
        )?;
        Ok(AreaSettings {
            area_blocks: pages,
            deferred_slots,
            batch_pages: batch,
            eviction_pages: eviction,
            defer_in_place: options.double_write_defer_in_place,
            keep_deferred: options.double_write_keep_deferred,
            flush_after: options.double_write_flush_after as usize,
            checksums,
        })
    }
}

/// The bytes `dw/deferred` may hold under `options`: its
/// `double_write_deferred_size`, or by default (0) `DEFERRED_PER_AREA`
/// times the area.
pub fn deferred_bytes(options: &Options) -> u64 {
    match options.double_write_deferred_size {
        0 => options
            .double_write_buffer_size
            .saturating_mul(DEFERRED_PER_AREA as u64),
        size => size,
    }
}

/// `size` bytes as pages of `page_size`: a multiple of it, 2 to `max`
/// pages, or an error naming setting `name`.
fn pages_of(name: &'static str, size: u64, page_size: usize, max: u64) -> Result<u32> {
    let pages = size / page_size as u64;
    if !size.is_multiple_of(page_size as u64) || !(2..=max).contains(&pages) {
        return Err(Error::InvalidSetting {
            name,
            detail: format!(
                "{size} bytes is not 2 to {max} pages of {page_size} bytes (a multiple of page_size)"
            ),
        });
    }
    Ok(pages as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PS: usize = 4096;

    fn from(o: &Options) -> Result<AreaSettings> {
        AreaSettings::from_options(o, PS, ChecksumAlgorithm::Crc32c)
    }

    fn refused(o: &Options) -> String {
        from(o).unwrap_err().to_string()
    }

    #[test]
    fn sizes_out_of_range_are_refused_by_name() {
        let mut o = Options {
            double_write_buffer_size: 4096,
            ..Options::default()
        };
        assert!(refused(&o).contains("double_write_buffer_size"));
        o.double_write_buffer_size = 16 << 20;
        o.double_write_batch_pages = 170;
        let e = refused(&o);
        assert!(
            e.contains("double_write_batch_pages") && e.contains("169"),
            "{e}"
        );
        o.double_write_batch_pages = 169;
        assert_eq!(
            from(&o).unwrap(),
            AreaSettings {
                area_blocks: 4096,
                batch_pages: 169,
                eviction_pages: 32,
                defer_in_place: true,
                keep_deferred: true,
                deferred_slots: 4096 * DEFERRED_PER_AREA,
                flush_after: 128,
                checksums: ChecksumAlgorithm::Crc32c,
            }
        );
        o.double_write_eviction_pages = 0;
        assert!(refused(&o).contains("double_write_eviction_pages"));
    }

    #[test]
    fn the_deferred_size_is_the_areas_sixteen_times_unless_set() {
        let mut o = Options {
            double_write_buffer_size: 8 << 20,
            ..Options::default()
        };
        assert_eq!(from(&o).unwrap().deferred_slots, 2048 * 16);
        // Set apart from the area, smaller or larger than the default.
        o.double_write_deferred_size = 1 << 20;
        assert_eq!(from(&o).unwrap().deferred_slots, 256);
        o.double_write_deferred_size = 1 << 30;
        assert_eq!(from(&o).unwrap().deferred_slots, 262_144);
        assert_eq!(from(&o).unwrap().area_blocks, 2048);
    }

    #[test]
    fn a_deferred_size_out_of_range_is_refused_by_name() {
        for bad in [4096, 4097 * 4, (MAX_DEFERRED_PAGES + 1) * PS as u64] {
            let o = Options {
                double_write_deferred_size: bad,
                ..Options::default()
            };
            let e = refused(&o);
            assert!(
                e.contains("double_write_deferred_size") && e.contains(&bad.to_string()),
                "{bad}: {e}"
            );
        }
    }
}
