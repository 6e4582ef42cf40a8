//! O_DIRECT reads and all-or-nothing writes for [`super::posix`]: the data
//! files of `torn_page_protection = atomic` (issue 40).
//!
//! Rules:
//! - O_DIRECT wants memory, offsets and lengths aligned (STATX_DIOALIGN,
//!   at most a page): anything else goes through an aligned copy
//!   ([`AlignedBuf`], [`AlignedBuf::ALIGN`]).
//! - An atomic write is one pwritev2(RWF_ATOMIC) of exactly one unit at a
//!   multiple of the unit, the only shape the kernel makes all or nothing
//!   (Linux 6.11+; one iovec, since XFS's fallback allows one segment). A
//!   write of several pages is several such writes: each page is whole
//!   after a crash, as a torn write tears only between pages.
//! - The kernel never writes an atomic write in part: a short count is an
//!   error, not a retry.

use super::aligned::AlignedBuf;
use std::cell::RefCell;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;

thread_local! {
    /// The aligned copy of this thread's latest write or read, kept so that
    /// a page write does not allocate.
    static ALIGNED: RefCell<AlignedBuf> = RefCell::new(AlignedBuf::new(0));
}

const ALIGN: u64 = AlignedBuf::ALIGN as u64;

fn is_aligned(ptr: *const u8) -> bool {
    (ptr as usize).is_multiple_of(AlignedBuf::ALIGN)
}

/// Writes `bufs`, back to back from `offset`, as writes of exactly `unit`
/// bytes, each all or nothing.
pub fn write_whole_units(
    file: &std::fs::File,
    bufs: &[&[u8]],
    offset: u64,
    unit: u32,
) -> io::Result<()> {
    let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
    let u = u64::from(unit);
    if u == 0 || !total.is_multiple_of(u) || !offset.is_multiple_of(u) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "an atomic write of {total} bytes at offset {offset}: \
                 only whole {unit}-byte units at multiples of {unit}"
            ),
        ));
    }
    // Pages the caller already holds in aligned memory go as they are.
    if bufs
        .iter()
        .all(|b| b.len() as u64 == u && is_aligned(b.as_ptr()))
    {
        for (i, b) in bufs.iter().enumerate() {
            write_one_unit(file, b, offset + i as u64 * u)?;
        }
        return Ok(());
    }
    ALIGNED.with(|a| {
        let mut a = a.borrow_mut();
        a.concat(bufs);
        for (i, chunk) in a.as_slice().chunks(unit as usize).enumerate() {
            write_one_unit(file, chunk, offset + i as u64 * u)?;
        }
        Ok(())
    })
}

/// One pwritev2(RWF_ATOMIC) of `unit` (aligned) at `offset`.
fn write_one_unit(file: &std::fs::File, unit: &[u8], offset: u64) -> io::Result<()> {
    let iov = libc::iovec {
        iov_base: unit.as_ptr() as *mut libc::c_void,
        iov_len: unit.len(),
    };
    loop {
        // SAFETY: the iovec points into `unit`, alive for the call, which
        // only reads from it; the fd is ours.
        let n = unsafe {
            libc::pwritev2(
                file.as_raw_fd(),
                &iov,
                1,
                offset as libc::off_t,
                libc::RWF_ATOMIC,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n as usize != unit.len() {
            return Err(io::Error::other(format!(
                "an atomic write wrote {n} of {} bytes",
                unit.len()
            )));
        }
        return Ok(());
    }
}

/// Reads up to `buf.len()` bytes at `offset` from an O_DIRECT file;
/// returns how many (fewer only at the end of the file).
pub fn read_direct(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let end = offset + buf.len() as u64;
    let (start, aligned_end) = (offset / ALIGN * ALIGN, end.div_ceil(ALIGN) * ALIGN);
    if start == offset && aligned_end == end && is_aligned(buf.as_ptr()) {
        return read_full(file, buf, offset);
    }
    ALIGNED.with(|a| {
        let mut a = a.borrow_mut();
        a.resize((aligned_end - start) as usize);
        let got = read_full(file, a.as_mut_slice(), start)?;
        let skip = (offset - start) as usize;
        let n = got.saturating_sub(skip).min(buf.len());
        buf[..n].copy_from_slice(&a.as_slice()[skip..skip + n]);
        Ok(n)
    })
}

/// preads until `buf` (aligned) is full or the file ends.
fn read_full(file: &std::fs::File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                // A short count off the alignment is the end of the file
                // (and an unaligned next read would be refused).
                if !(done as u64).is_multiple_of(ALIGN) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    /// Reads at any offset and length through O_DIRECT return the bytes a
    /// buffered read returns, the end of the file included (where the
    /// temporary directory's file system takes O_DIRECT; tmpfs does not).
    #[test]
    fn direct_reads_at_any_offset_match_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) => {
                eprintln!("CANNOT RUN: O_DIRECT refused here ({e})");
                return;
            }
        };
        for (offset, len) in [
            (0, 4096),
            (1, 10),
            (4095, 2),
            (8192, 8192),
            (19_990, 100),
            (25_000, 8),
        ] {
            let mut buf = vec![0u8; len];
            let n = read_direct(&file, &mut buf, offset).unwrap();
            let want = &bytes[(offset as usize).min(bytes.len())..];
            let want = &want[..want.len().min(len)];
            assert_eq!(n, want.len(), "offset {offset} len {len}");
            assert_eq!(&buf[..n], want, "offset {offset} len {len}");
        }
    }

    /// A write off the unit is refused before any call reaches the kernel.
    #[test]
    fn an_atomic_write_must_be_whole_units() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("f")).unwrap();
        for (len, offset) in [(4096, 0), (8192, 4096), (12_288, 0)] {
            let buf = vec![0u8; len];
            let e = write_whole_units(&file, &[&buf], offset, 8192).unwrap_err();
            assert_eq!(
                e.kind(),
                io::ErrorKind::InvalidInput,
                "{len} at {offset}: {e}"
            );
            assert!(e.to_string().contains("8192-byte units"), "{e}");
        }
        assert_eq!(std::fs::metadata(dir.path().join("f")).unwrap().len(), 0);
    }
}
