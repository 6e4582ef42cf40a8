//! `torn_page_protection = atomic`: the kernel and the device write each
//! page whole, so nothing needs repairing after a crash (issue 40).
//!
//! The write path is the plain one ([`super::InPlaceWrites`]): no page
//! images beyond structure changes, no double writes. What makes it safe
//! is the file layer: data files are opened with an atomic unit of one
//! page ([`crate::file::OpenOptions::atomic_unit`]: O_DIRECT, and every
//! page one pwritev2(RWF_ATOMIC)), set by
//! [`crate::buffer::DataFiles::set_atomic_page_writes`].
//!
//! Rules:
//! - The mode is accepted only where statx says the page fits the atomic
//!   unit of every data file (and of a new file in the database's
//!   directory); a refusal names what the file system offers and the
//!   alternatives ([`check_files`]). An opening checks before it writes
//!   anything, for the mode in force and for the one it switches to.
//! - `auto` ([`resolve_auto`]) picks `atomic` only where the hardware does
//!   it (`unit_max_opt` covers the page). The software fallback (XFS's
//!   copy-on-write) is correct but measured at about half the write rate
//!   and an extent per write, so `auto` leaves it to an explicit choice.

use crate::error::{Error, Result};
use crate::file::atomic::{AtomicPageWrites, AtomicWrites};
use crate::file::{FileKind, FileSystem, Issuer, OpenOptions};
use crate::settings::{ChecksumAlgorithm, TornPageProtection};
use std::path::{Path, PathBuf};

/// The file a probe creates (and removes) in the database's directory: a
/// file system answers statx's atomic-write question for files only.
const PROBE_FILE: &str = "atomic-probe.tmp";

/// What the file system offers a new file in `dir` (which must exist).
fn probe_new_file(fs: &dyn FileSystem, dir: &Path) -> Result<AtomicWrites> {
    let path = dir.join(PROBE_FILE);
    drop(fs.open(&path, FileKind::Data, OpenOptions::create())?);
    let figures = fs.atomic_writes(&path);
    fs.remove(&path, FileKind::Data, Issuer::Tool)?;
    figures
}

/// The files `atomic` must cover: a new file in `dir`, and every data
/// segment already in `data_dir` (absent before the first is made).
fn files_to_check(
    fs: &dyn FileSystem,
    dir: &Path,
    data_dir: &Path,
) -> Result<Vec<(PathBuf, AtomicWrites)>> {
    let mut out = vec![(dir.join(PROBE_FILE), probe_new_file(fs, dir)?)];
    if fs.exists(data_dir) {
        for path in fs.list_dir(data_dir)? {
            let figures = fs.atomic_writes(&path)?;
            out.push((path, figures));
        }
    }
    Ok(out)
}

/// Refuses `atomic` unless a page of `page_size` bytes is written whole
/// to a new file in `dir` and to every data file in `data_dir`.
pub fn check_files(fs: &dyn FileSystem, dir: &Path, data_dir: &Path, page_size: u32) -> Result<()> {
    for (path, figures) in files_to_check(fs, dir, data_dir)? {
        if figures.page_writes(page_size) == AtomicPageWrites::Unsupported {
            return Err(refusal(&path, &figures, page_size));
        }
    }
    Ok(())
}

/// The refusal of `atomic` for `path`, naming what its file system offers.
pub fn refusal(path: &Path, figures: &AtomicWrites, page_size: u32) -> Error {
    let offered = if figures.reported {
        format!(
            "statx offers atomic writes of {} to {} bytes (unit_max_opt {}: {})",
            figures.unit_min,
            figures.unit_max,
            figures.unit_max_opt,
            if figures.unit_max_opt == 0 {
                "no hardware support".to_string()
            } else {
                format!(
                    "the device writes up to {} bytes itself",
                    figures.unit_max_opt
                )
            }
        )
    } else {
        "statx reports no atomic writes (a kernel before 6.11, or a file system without \
         them: ext4, btrfs, XFS without reflink, tmpfs)"
            .to_string()
    };
    let offered = if figures.reported && !figures.dio_alignment_fits(page_size) {
        format!(
            "{offered}, but O_DIRECT there wants memory aligned to {} and offsets to {} bytes \
             (STATX_DIOALIGN), which {page_size}-byte pages in 4096-aligned buffers do not meet",
            figures.dio_mem_align, figures.dio_offset_align
        )
    } else {
        offered
    };
    Error::InvalidSetting {
        name: "torn_page_protection",
        detail: format!(
            "atomic needs each {page_size}-byte page written all or nothing, but for {}, \
             {offered}. Use double_writes or full_pages here, or put the database on a file \
             system that writes pages atomically (XFS with reflink on a recent kernel, 6.18 \
             here, or a device with atomic writes); `untorn probe DIR` shows the figures",
            path.display()
        ),
    }
}

/// The mode `auto` stands for in `dir`: `atomic` where the hardware writes
/// a page whole (statx's `unit_max_opt` covers it) for a new file and every
/// data file, else `double_writes`, or `full_pages` without page checksums
/// (double writes find a torn page by its checksum).
pub fn resolve_auto(
    fs: &dyn FileSystem,
    dir: &Path,
    data_dir: &Path,
    page_size: u32,
    checksums: ChecksumAlgorithm,
) -> Result<TornPageProtection> {
    let files = files_to_check(fs, dir, data_dir)?;
    let hardware = files
        .iter()
        .all(|(_, f)| f.page_writes(page_size) == AtomicPageWrites::Hardware);
    let mode = if hardware {
        TornPageProtection::Atomic
    } else if checksums == ChecksumAlgorithm::Off {
        TornPageProtection::FullPages
    } else {
        TornPageProtection::DoubleWrites
    };
    tracing::info!(
        dir = %dir.display(),
        chosen = %mode,
        "torn_page_protection = auto"
    );
    Ok(mode)
}

/// The mode an opening runs with when `requested`: `auto` resolved,
/// `atomic` checked (refused where the files do not take it), any other
/// as it is.
pub fn settle(
    fs: &dyn FileSystem,
    dir: &Path,
    data_dir: &Path,
    requested: TornPageProtection,
    page_size: u32,
    checksums: ChecksumAlgorithm,
) -> Result<TornPageProtection> {
    match requested {
        TornPageProtection::Auto => resolve_auto(fs, dir, data_dir, page_size, checksums),
        TornPageProtection::Atomic => {
            check_files(fs, dir, data_dir, page_size)?;
            Ok(TornPageProtection::Atomic)
        }
        other => Ok(other),
    }
}
