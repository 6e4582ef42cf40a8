//! Memory aligned for O_DIRECT: the double-write area's batches and the
//! data files of `torn_page_protection = atomic` go to the device from it.

/// `len` bytes aligned for O_DIRECT (at 4096), zeroed.
pub struct AlignedBuf {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// Enough for every device's O_DIRECT (STATX_DIOALIGN is at most a page).
    pub const ALIGN: usize = 4096;

    pub fn new(len: usize) -> AlignedBuf {
        let bytes = vec![0u8; len + Self::ALIGN];
        let start = bytes.as_ptr().align_offset(Self::ALIGN);
        AlignedBuf { bytes, start, len }
    }

    /// Makes the buffer `len` bytes long, keeping its memory where it is
    /// large enough (the bytes are then whatever they were).
    pub fn resize(&mut self, len: usize) {
        if self.bytes.len() - self.start >= len {
            self.len = len;
        } else {
            *self = AlignedBuf::new(len);
        }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }

    /// A copy of `bufs`, back to back, in aligned memory.
    pub fn concat(&mut self, bufs: &[&[u8]]) {
        self.resize(bufs.iter().map(|b| b.len()).sum());
        let mut at = 0;
        let dst = self.as_mut_slice();
        for b in bufs {
            dst[at..at + b.len()].copy_from_slice(b);
            at += b.len();
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_start_on_a_4096_byte_boundary() {
        for len in [4096, 8192 * 3, 12288] {
            let mut b = AlignedBuf::new(len);
            assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
            assert_eq!(b.as_mut_slice().len(), len);
            assert!(b.as_slice().iter().all(|&x| x == 0));
        }
    }
}
