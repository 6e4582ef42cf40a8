//! What the kernel and the device say about untorn writes: statx's
//! STATX_WRITE_ATOMIC figures for a file (Linux 6.11+; `unit_max_opt`
//! since 6.16) and the block device's queue/atomic_write_* in sysfs.
//!
//! Rules (issue 40):
//! - A page write is untorn only through O_DIRECT with RWF_ATOMIC, and only
//!   when the file's unit range covers the page size.
//! - `unit_max_opt` is the largest size the hardware writes atomically
//!   without the file system's software fallback (XFS's copy-on-write);
//!   0 means no hardware support, so every atomic write above `unit_min`
//!   takes the fallback, which costs an extent per write.
//! - Kernels without the field answer with the mask bit clear: no support.

use super::sector::block_queue_values;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A file's atomic-write figures, as statx gives them (bytes; 0: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AtomicWrites {
    /// Whether statx filled the STATX_WRITE_ATOMIC fields.
    pub reported: bool,
    pub unit_min: u32,
    pub unit_max: u32,
    pub segments_max: u32,
    /// The largest unit written without a software fallback (6.16+).
    pub unit_max_opt: u32,
    /// O_DIRECT's alignment of memory and of file offsets (STATX_DIOALIGN).
    pub dio_mem_align: u32,
    pub dio_offset_align: u32,
}

/// How a page of `page_size` bytes can be written untorn here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AtomicPageWrites {
    /// The device does it: the unit covers the page within `unit_max_opt`.
    Hardware,
    /// The file system does it in software (XFS's copy-on-write): correct,
    /// and measured at about half the write rate (issue 40).
    SoftwareFallback,
    /// No atomic write of a whole page.
    Unsupported,
}

impl AtomicWrites {
    /// statx of `path` (a file, or a directory whose file system answers
    /// for its files) with STATX_WRITE_ATOMIC and STATX_DIOALIGN.
    pub fn probe(path: &Path) -> std::io::Result<AtomicWrites> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::other("a path with a NUL byte"))?;
        // SAFETY: statx writes into the zeroed struct we own; c is a valid
        // NUL-terminated path.
        let mut st: libc::statx = unsafe { std::mem::zeroed() };
        let mask = libc::STATX_WRITE_ATOMIC | libc::STATX_DIOALIGN;
        let rc = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, mask, &mut st) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let reported = st.stx_mask & libc::STATX_WRITE_ATOMIC != 0;
        let dio = st.stx_mask & libc::STATX_DIOALIGN != 0;
        Ok(AtomicWrites {
            reported,
            unit_min: if reported {
                st.stx_atomic_write_unit_min
            } else {
                0
            },
            unit_max: if reported {
                st.stx_atomic_write_unit_max
            } else {
                0
            },
            segments_max: if reported {
                st.stx_atomic_write_segments_max
            } else {
                0
            },
            unit_max_opt: if reported {
                st.stx_atomic_write_unit_max_opt
            } else {
                0
            },
            dio_mem_align: if dio { st.stx_dio_mem_align } else { 0 },
            dio_offset_align: if dio { st.stx_dio_offset_align } else { 0 },
        })
    }

    /// Whether O_DIRECT I/O as the engine issues it (buffers aligned to
    /// `AlignedBuf::ALIGN`, offsets and lengths whole pages) meets the
    /// alignment STATX_DIOALIGN reports (0: not reported, the kernel's
    /// checks then decide). Issue 57: it was read and never checked.
    pub fn dio_alignment_fits(&self, page_size: u32) -> bool {
        let buffers = super::aligned::AlignedBuf::ALIGN as u32;
        let fits = |align: u32, within: u32| align == 0 || within.is_multiple_of(align);
        fits(self.dio_mem_align, buffers) && fits(self.dio_offset_align, page_size)
    }

    /// Whether, and how, a page of `page_size` bytes is written untorn.
    pub fn page_writes(&self, page_size: u32) -> AtomicPageWrites {
        if !self.reported || self.unit_min == 0 || self.unit_max == 0 {
            return AtomicPageWrites::Unsupported;
        }
        if !self.dio_alignment_fits(page_size) {
            return AtomicPageWrites::Unsupported;
        }
        if page_size < self.unit_min || page_size > self.unit_max {
            return AtomicPageWrites::Unsupported;
        }
        if page_size <= self.unit_max_opt {
            AtomicPageWrites::Hardware
        } else {
            AtomicPageWrites::SoftwareFallback
        }
    }
}

/// The block device's own figures (queue/atomic_write_*; bytes), for the
/// device under `path`: what the hardware offers whatever the file system.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DeviceAtomicWrites {
    pub unit_min: u64,
    pub unit_max: u64,
    pub max_bytes: u64,
    pub boundary: u64,
}

impl DeviceAtomicWrites {
    /// None where sysfs has no block device for `path` (tmpfs, overlay) or
    /// the kernel has no atomic_write_* files.
    pub fn probe(path: &Path) -> Option<DeviceAtomicWrites> {
        block_queue_values(path, |read| {
            Some(DeviceAtomicWrites {
                unit_min: read("atomic_write_unit_min_bytes")?,
                unit_max: read("atomic_write_unit_max_bytes")?,
                max_bytes: read("atomic_write_max_bytes")?,
                boundary: read("atomic_write_boundary_bytes").unwrap_or(0),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(unit_min: u32, unit_max: u32, unit_max_opt: u32) -> AtomicWrites {
        AtomicWrites {
            reported: true,
            unit_min,
            unit_max,
            unit_max_opt,
            ..AtomicWrites::default()
        }
    }

    #[test]
    fn a_page_is_atomic_only_inside_the_unit_range() {
        // XFS with reflink on a device without support (measured in issue 40).
        let xfs = figures(4096, 1 << 20, 0);
        assert_eq!(xfs.page_writes(8192), AtomicPageWrites::SoftwareFallback);
        assert_eq!(xfs.page_writes(2048), AtomicPageWrites::Unsupported);
        assert_eq!(xfs.page_writes(2 << 20), AtomicPageWrites::Unsupported);
        // An NVMe with a 16 KB atomic unit.
        let nvme = figures(4096, 1 << 20, 16384);
        assert_eq!(nvme.page_writes(16384), AtomicPageWrites::Hardware);
        assert_eq!(nvme.page_writes(32768), AtomicPageWrites::SoftwareFallback);
        assert_eq!(
            AtomicWrites::default().page_writes(8192),
            AtomicPageWrites::Unsupported
        );
    }

    /// A device whose O_DIRECT alignment the engine's I/O does not meet
    /// (buffers aligned to 4096, offsets whole pages) offers no atomic
    /// page write: before, STATX_DIOALIGN was read and ignored.
    #[test]
    fn a_dio_alignment_the_engine_does_not_meet_refuses_atomic() {
        let nvme = |mem, offset| AtomicWrites {
            dio_mem_align: mem,
            dio_offset_align: offset,
            ..figures(4096, 1 << 20, 16384)
        };
        assert_eq!(
            nvme(512, 4096).page_writes(8192),
            AtomicPageWrites::Hardware
        );
        assert_eq!(nvme(0, 0).page_writes(8192), AtomicPageWrites::Hardware);
        assert_eq!(
            nvme(8192, 4096).page_writes(8192),
            AtomicPageWrites::Unsupported
        );
        assert_eq!(
            nvme(512, 16384).page_writes(8192),
            AtomicPageWrites::Unsupported
        );
        assert_eq!(
            nvme(512, 3000).page_writes(8192),
            AtomicPageWrites::Unsupported
        );
    }

    /// The probe answers for any directory; where the kernel reports no
    /// atomic writes every figure is 0 and no page is atomic.
    #[test]
    fn the_probe_answers_for_a_temporary_directory() {
        let dir = tempfile::tempdir().unwrap();
        let a = AtomicWrites::probe(dir.path()).unwrap();
        if !a.reported {
            assert_eq!((a.unit_min, a.unit_max, a.unit_max_opt), (0, 0, 0));
            assert_eq!(a.page_writes(8192), AtomicPageWrites::Unsupported);
        } else {
            assert!(a.unit_min <= a.unit_max, "{a:?}");
        }
        assert!(AtomicWrites::probe(&dir.path().join("absent")).is_err());
    }
}
