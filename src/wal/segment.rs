//! WAL segment files: names, creation, and recycling.
//!
//! Rules:
//! - Segment `n` covers LSNs `[n * segment_size, (n + 1) * segment_size)` and
//!   is named by 16 uppercase hex digits of `n` in the WAL directory.
//! - A file under a segment's name always has the full segment size and its
//!   contents are durable: a new segment is zero-filled under a temporary
//!   name (`NAME.tmp`), fsynced, renamed into place, and the directory is
//!   fsynced, before anything is written into it (PostgreSQL's
//!   XLogFileInit does the same).
//! - A recycled segment is an old one renamed to a future name; its stale
//!   pages carry their old page addresses, which the reader refuses.

use crate::error::Result;
use crate::file::{File, FileKind, FileSystem, Issuer, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Suffix of a segment being created.
pub const TEMP_SUFFIX: &str = ".tmp";
/// Zero-fill is written in chunks of this many bytes.
const ZERO_CHUNK: usize = 1024 * 1024;

/// The file name of segment `segno`.
pub fn segment_file_name(segno: u64) -> String {
    format!("{segno:016X}")
}

/// The path of segment `segno` in `dir`.
pub fn segment_path(dir: &Path, segno: u64) -> PathBuf {
    dir.join(segment_file_name(segno))
}

/// The segment number a file name stands for: exactly 16 uppercase hex
/// digits.
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let ok = name.len() == 16 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'A'..=b'F'));
    if ok {
        u64::from_str_radix(name, 16).ok()
    } else {
        None
    }
}

/// The segment numbers present in `dir`, ascending.
pub fn list_segments(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<u64>> {
    let mut out: Vec<u64> = fs
        .list_dir(dir)?
        .iter()
        .filter_map(|p| p.file_name()?.to_str().and_then(parse_segment_name))
        .collect();
    out.sort_unstable();
    Ok(out)
}

/// Removes the half-made segments (`NAME.tmp`) a crash during a
/// creation left in `dir`; returns how many. They hold nothing, and on a
/// full disk they hold the space the opening's first write (the control
/// file's) needs. Not made durable: one that comes back after a crash is
/// removed again.
pub fn remove_half_made(fs: &dyn FileSystem, dir: &Path) -> Result<usize> {
    let mut removed = 0;
    for p in fs.list_dir(dir)? {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let half_made = name
            .strip_suffix(TEMP_SUFFIX)
            .is_some_and(|stem| parse_segment_name(stem).is_some());
        if half_made {
            fs.remove(&p, FileKind::Wal, Issuer::Recovery)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// Writes zeros over `[from, to)` of `file`.
fn zero_fill(file: &dyn File, from: u64, to: u64) -> Result<()> {
    let zeros = vec![0u8; ZERO_CHUNK];
    let mut off = from;
    while off < to {
        let n = (to - off).min(ZERO_CHUNK as u64) as usize;
        file.write_at(&zeros[..n], off, Issuer::WalWriter)?;
        off += n as u64;
    }
    Ok(())
}

/// Creates segment `segno` (zero-filled, fsynced, renamed into place, the
/// directory fsynced) and returns it opened for writing.
pub fn create_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    segno: u64,
    segment_size: u64,
) -> Result<Arc<dyn File>> {
    let path = segment_path(dir, segno);
    let tmp = dir.join(format!("{}{TEMP_SUFFIX}", segment_file_name(segno)));
    if fs.exists(&tmp) {
        // Left over from a crash during an earlier creation.
        fs.remove(&tmp, FileKind::Wal, Issuer::WalWriter)?;
    }
    let made = fs
        .open(&tmp, FileKind::Wal, OpenOptions::create_new())
        .and_then(|file| {
            zero_fill(file.as_ref(), 0, segment_size)?;
            file.sync_all(Issuer::WalWriter)
        });
    if let Err(e) = made {
        // A full disk (or any failure) leaves no half-made segment to
        // hold the space a reopening needs.
        let _ = fs.remove(&tmp, FileKind::Wal, Issuer::WalWriter);
        return Err(e);
    }
    fs.rename(&tmp, &path, FileKind::Wal, Issuer::WalWriter)?;
    fs.sync_dir(dir, Issuer::WalWriter)?;
    fs.open(&path, FileKind::Wal, OpenOptions::read_write())
}

/// Opens segment `segno` for writing, creating it if it does not exist.
/// Returns the file and whether it was created. An existing file shorter
/// than a segment (never made by this module) is completed with zeros and
/// made durable before it is returned.
pub fn open_or_create_segment(
    fs: &dyn FileSystem,
    dir: &Path,
    segno: u64,
    segment_size: u64,
) -> Result<(Arc<dyn File>, bool)> {
    let path = segment_path(dir, segno);
    if !fs.exists(&path) {
        return Ok((create_segment(fs, dir, segno, segment_size)?, true));
    }
    let file = fs.open(&path, FileKind::Wal, OpenOptions::read_write())?;
    let len = file.len()?;
    if len < segment_size {
        zero_fill(file.as_ref(), len, segment_size)?;
        file.sync_all(Issuer::WalWriter)?;
        fs.sync_dir(dir, Issuer::WalWriter)?;
    }
    Ok((file, false))
}

/// What [`recycle`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recycled {
    /// Segments renamed to future names.
    pub recycled: usize,
    /// Segments removed.
    pub removed: usize,
}

/// Renames each of `old` (ascending) to the next future name from
/// `first_future_name` on while fewer than `keep_future` future segments
/// exist (`future_now` exist already), removes the rest, then fsyncs the
/// directory once. The caller guarantees that nothing in `old` is needed.
pub fn recycle(
    fs: &dyn FileSystem,
    dir: &Path,
    old: &[u64],
    first_future_name: u64,
    future_now: usize,
    keep_future: usize,
    who: Issuer,
) -> Result<Recycled> {
    let mut done = Recycled::default();
    let mut next_name = first_future_name;
    let mut future = future_now;
    for &segno in old {
        let path = segment_path(dir, segno);
        if future < keep_future {
            fs.rename(&path, &segment_path(dir, next_name), FileKind::Wal, who)?;
            next_name += 1;
            future += 1;
            done.recycled += 1;
        } else {
            fs.remove(&path, FileKind::Wal, who)?;
            done.removed += 1;
        }
    }
    if done.recycled + done.removed > 0 {
        fs.sync_dir(dir, who)?;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::posix::PosixFileSystem;

    #[test]
    fn names() {
        assert_eq!(segment_file_name(0), "0000000000000000");
        assert_eq!(segment_file_name(0x1A), "000000000000001A");
        assert_eq!(parse_segment_name("000000000000001A"), Some(0x1A));
        assert_eq!(parse_segment_name("000000000000001a"), None);
        assert_eq!(parse_segment_name("000000000000001A.tmp"), None);
        assert_eq!(parse_segment_name("1A"), None);
    }

    /// A creation that fails (a full disk) leaves no `.tmp` behind, and
    /// one a crash left is removed by `remove_half_made`. Before, the
    /// 6 MB a failed creation had written stayed, and a reopening on the
    /// full disk failed at its first write (untorn.control.tmp, ENOSPC).
    #[test]
    fn a_failed_creation_leaves_no_half_made_segment() {
        use crate::crashlab::sim::SimFileSystem;
        let fs = SimFileSystem::new(Arc::new(crate::file::IoStats::default()));
        let dir = Path::new("/sim/wal");
        fs.create_dir_all(dir).unwrap();
        let mb = crate::settings::MB;
        create_segment(&fs, dir, 0, mb).unwrap();
        fs.update_faults(|f| f.enospc_after_bytes = Some((FileKind::Wal, mb / 2)));
        assert!(create_segment(&fs, dir, 1, mb)
            .err()
            .unwrap()
            .is_disk_full());
        fs.update_faults(|f| f.enospc_after_bytes = None);
        let names = |fs: &SimFileSystem| -> Vec<String> {
            let mut v: Vec<String> = fs
                .list_dir(dir)
                .unwrap()
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names(&fs), ["0000000000000000"]);
        // As a crash mid-creation leaves it.
        let left = fs
            .open(
                &dir.join("0000000000000003.tmp"),
                FileKind::Wal,
                OpenOptions::create_new(),
            )
            .unwrap();
        left.write_at(&[7; 4096], 0, Issuer::WalWriter).unwrap();
        fs.open(
            &dir.join("notes.tmp"),
            FileKind::Wal,
            OpenOptions::create_new(),
        )
        .unwrap();
        assert_eq!(remove_half_made(&fs, dir).unwrap(), 1);
        assert_eq!(names(&fs), ["0000000000000000", "notes.tmp"]);
    }

    #[test]
    fn create_recycle_remove() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFileSystem::default();
        let mb = crate::settings::MB;
        for n in 0..3 {
            let (f, created) = open_or_create_segment(&fs, dir.path(), n, mb).unwrap();
            assert!(created);
            assert_eq!(f.len().unwrap(), mb);
        }
        let (_, created) = open_or_create_segment(&fs, dir.path(), 1, mb).unwrap();
        assert!(!created);
        let r = recycle(&fs, dir.path(), &[0, 1], 3, 0, 1, Issuer::Checkpointer).unwrap();
        assert_eq!(
            r,
            Recycled {
                recycled: 1,
                removed: 1
            }
        );
        assert_eq!(list_segments(&fs, dir.path()).unwrap(), vec![2, 3]);
    }
}
