//! Torn-page protection: how a page write that a crash tears is survived.
//!
//! A data page is bigger than what the device writes atomically (a 512-byte
//! or 4 KB sector), so a power loss during its write can leave it half old,
//! half new. The checksum detects that; the policy recorded in the control
//! file (`torn_page_protection`, chosen at creation, switched at an opening
//! by [`switch`]) decides whether it is repaired:
//! - `full_pages` ([`full_pages`]): the first change of a page after each
//!   checkpoint's redo point logs the whole page in the WAL; redo starts
//!   from that image, so whatever a torn write left is overwritten.
//! - `double_writes` ([`double_writes`]): every page is first written to a
//!   double-write area and fsynced there, then written in place; recovery
//!   repairs a torn page from its intact copy. Needs page checksums (a torn
//!   page is found by its checksum).
//! - `atomic` ([`atomic`]): the kernel and the device write each page
//!   whole (O_DIRECT, RWF_ATOMIC), so no write tears a page; accepted only
//!   where statx says so.
//! - `off`: nothing; a torn page is found by its checksum, not repaired.
//!
//! Invariants:
//! - Structure changes log images of every page they touch in every mode
//!   (their redo replays images only).
//! - The image decision is made in one place, [`full_pages::needs_image`],
//!   called by commits and structure changes, with the redo point held from
//!   the decision until the record is inserted.
//! - The buffer pool sees protection only through
//!   [`crate::buffer::PageWriteProtection`], called
//!   with every batch of page copies before they are written in place, as
//!   it sees the WAL only through `WalFlush`.

pub mod atomic;
#[cfg(test)]
mod atomic_tests;
pub mod double_writes;
pub mod full_pages;
pub mod switch;

use crate::buffer::{DataFiles, PageCopy, PageWriteProtection, WriteTicket};
use crate::error::Result;
use crate::file::{FileSystem, Issuer};
use crate::options::Options;
use crate::settings::{ChecksumAlgorithm, TornPageProtection};
use std::path::Path;
use std::sync::Arc;

/// The write-path side of a mode that protects pages in the WAL (or not at
/// all): data pages go straight to their place.
pub struct InPlaceWrites;

impl PageWriteProtection for InPlaceWrites {
    fn before_in_place_writes(&self, _pages: &[PageCopy], _who: Issuer) -> Result<WriteTicket> {
        Ok(WriteTicket::default())
    }
}

/// What an opening knows when it builds the write path.
pub struct WritePathContext<'a> {
    pub fs: &'a dyn FileSystem,
    pub dir: &'a Path,
    pub system_id: u64,
    pub files: &'a Arc<DataFiles>,
    pub options: &'a Options,
    /// The database's page checksums.
    pub checksums: ChecksumAlgorithm,
    /// Where the area's batch and manifest sequences go on from.
    pub start: &'a double_writes::recover::AreaStart,
    /// The engine's double-write counters: one set per opening, whichever
    /// write path counts into it.
    pub double_write_stats: &'a Arc<double_writes::DoubleWriteStats>,
}

/// What the buffer pool calls before writing pages in place, for `mode`.
/// For `double_writes`, opens (or creates) the area: call it only after
/// recovery restored what an existing area held.
pub fn page_write_protection(
    mode: TornPageProtection,
    cx: &WritePathContext<'_>,
) -> Result<Arc<dyn PageWriteProtection>> {
    match mode {
        TornPageProtection::FullPages | TornPageProtection::Off | TornPageProtection::Atomic => {
            Ok(Arc::new(InPlaceWrites))
        }
        TornPageProtection::Auto => Err(crate::error::Error::Invalid(
            "torn_page_protection = auto is resolved at an opening, before the write path".into(),
        )),
        TornPageProtection::DoubleWrites => {
            let settings = double_writes::AreaSettings::from_options(
                cx.options,
                cx.files.page_size(),
                cx.checksums,
            )?;
            Ok(Arc::new(double_writes::DoubleWrites::open(
                cx.fs,
                cx.dir,
                cx.system_id,
                cx.files.clone(),
                settings,
                cx.start,
                cx.double_write_stats,
            )?))
        }
    }
}
