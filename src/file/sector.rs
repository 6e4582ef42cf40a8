//! The device's sector, read from sysfs: the unit a power cut may tear or
//! destroy whole, which the WAL pads its flushes to.
//!
//! Rules:
//! - The larger of the logical and the physical block size: a 512e drive
//!   (512-byte logical, 4 KB physical sectors) rewrites a whole 4 KB sector
//!   for a 512-byte write, and a power cut can destroy all of it.
//! - `None` where sysfs says nothing (tmpfs, overlay, NFS: device major 0):
//!   the caller then assumes the safe size.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The sector of the block device holding `path`, or of its nearest
/// existing ancestor (a database directory may not exist yet).
pub fn probe_sector_size(path: &Path) -> Option<u32> {
    block_queue_values(path, |read| {
        let logical = read("logical_block_size")?;
        let physical = read("physical_block_size").unwrap_or(logical);
        u32::try_from(logical.max(physical)).ok()
    })
    .filter(|s| s.is_power_of_two() && *s >= 512)
}

/// Figures from the sysfs `queue/` of the block device holding `path` (or
/// its nearest existing ancestor): `pick` reads numbers by file name and
/// answers from them, for the first queue directory where it can. A
/// partition has no queue/ of its own: its disk, the parent, has it.
pub fn block_queue_values<T>(
    path: &Path,
    pick: impl Fn(&dyn Fn(&str) -> Option<u64>) -> Option<T>,
) -> Option<T> {
    let dev = path
        .ancestors()
        .find_map(|p| std::fs::metadata(p).ok())?
        .dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let device = Path::new("/sys/dev/block").join(format!("{major}:{minor}"));
    [device.join("queue"), device.join("../queue")]
        .iter()
        .find_map(|queue| {
            let read = |name: &str| -> Option<u64> {
                std::fs::read_to_string(queue.join(name))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            };
            pick(&read)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the machine's device, the answer is a plausible sector or
    /// none; a path that does not exist yet is probed through its parent.
    #[test]
    fn the_probe_answers_a_power_of_two_or_none() {
        let dir = tempfile::tempdir().unwrap();
        let here = probe_sector_size(dir.path());
        assert_eq!(probe_sector_size(&dir.path().join("not/yet")), here);
        if let Some(s) = here {
            assert!(s.is_power_of_two() && (512..=65536).contains(&s), "{s}");
        }
    }
}
