//! Double writes (InnoDB's doublewrite buffer): the home of
//! `torn_page_protection = double_writes`.
//!
//! Not built yet. The design it will follow: each batch of page copies
//! the buffer pool is about to write in place is first written to a
//! double-write file and fsynced (through
//! [`PageWriteProtection`](crate::buffer::PageWriteProtection)); only then
//! are the pages written in place. Recovery reads the double-write file
//! first and repairs every page whose checksum fails from its copy there.
//! Until then a database asking for it is refused before anything is
//! written: running it unprotected would break the control file's promise.

use crate::error::Error;

/// The error for a database or setting asking for double writes; `advice`
/// says what to do instead.
pub fn not_built(advice: &str) -> Error {
    Error::InvalidSetting {
        name: "torn_page_protection",
        detail: format!("double_writes is not implemented in this build yet; {advice}"),
    }
}
