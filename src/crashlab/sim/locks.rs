//! File locks of [`SimFileSystem`](super::SimFileSystem): an in-process
//! table with the semantics of an OFD lock (or flock), so that the
//! simulation refuses a second opening of a database as the kernel does.
//!
//! - A lock belongs to one handle (one `open`), whole-file, shared or
//!   exclusive; the same handle asking again converts it.
//! - Dropping the handle releases it. A crash, or the death of the
//!   process ([`SimFileSystem::process_crash`](super::SimFileSystem::process_crash)),
//!   releases every lock, as process exit does: the handles of the old
//!   generation are stale, so nothing would release them otherwise, and
//!   the laboratory's restarts would be refused.
//! - Locks are not data: a power cut does not refuse them, and they are
//!   neither traced as changes nor kept in an image or a fork.

use super::{os_error, SimFile, State};
use crate::error::Result;
use crate::file::LockMode;
use std::collections::BTreeSet;

/// The holders of one inode's lock.
#[derive(Clone, Debug, Default)]
pub(super) struct SimLock {
    exclusive: bool,
    /// Handle numbers: exactly one if `exclusive`.
    holders: BTreeSet<u64>,
}

impl State {
    /// Takes or converts `f`'s lock; false if another handle's is in the way.
    pub(super) fn try_lock(&mut self, f: &SimFile, mode: LockMode) -> Result<bool> {
        self.inode_of(f, false)?;
        if mode == LockMode::Exclusive && f.read_only {
            // As fcntl F_WRLCK: a write lock needs a handle open for writing.
            return Err(os_error(&f.path, "fcntl(F_OFD_SETLK)", libc::EBADF));
        }
        let lock = self.locks.entry(f.ino).or_default();
        let others = lock.holders.iter().any(|h| *h != f.handle);
        let free = match mode {
            LockMode::Exclusive => !others,
            LockMode::Shared => !(lock.exclusive && others),
        };
        if free {
            if mode == LockMode::Exclusive {
                lock.holders.clear();
            }
            lock.exclusive = mode == LockMode::Exclusive;
            lock.holders.insert(f.handle);
        }
        Ok(free)
    }

    /// Releases whatever lock handle `handle` holds on `ino`.
    pub(super) fn unlock(&mut self, ino: u64, handle: u64) {
        if let Some(lock) = self.locks.get_mut(&ino) {
            lock.holders.remove(&handle);
            if lock.holders.is_empty() {
                self.locks.remove(&ino);
            }
        }
    }

    /// Makes every handle stale (a crash, a process death) and releases
    /// every lock with them.
    pub(super) fn next_generation(&mut self) {
        self.generation += 1;
        self.locks.clear();
    }
}
