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
//!   repairs a torn page from its intact copy. Not built yet: only the
//!   area's format and the restore rule are, not wired in; the mode is
//!   refused.
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

pub mod double_writes;
pub mod full_pages;
pub mod switch;

use crate::buffer::{PageCopy, PageWriteProtection};
use crate::error::Result;
use crate::file::Issuer;
use crate::settings::TornPageProtection;
use std::sync::Arc;

/// The write-path side of a mode that protects pages in the WAL (or not at
/// all): data pages go straight to their place.
pub struct InPlaceWrites;

impl PageWriteProtection for InPlaceWrites {
    fn before_in_place_writes(&self, _pages: &[PageCopy], _who: Issuer) -> Result<()> {
        Ok(())
    }
}

/// What the buffer pool calls before writing pages in place, for `mode`.
pub fn page_write_protection(mode: TornPageProtection) -> Result<Arc<dyn PageWriteProtection>> {
    match mode {
        TornPageProtection::FullPages | TornPageProtection::Off => Ok(Arc::new(InPlaceWrites)),
        TornPageProtection::DoubleWrites => Err(double_writes::not_built("open the database")),
    }
}
