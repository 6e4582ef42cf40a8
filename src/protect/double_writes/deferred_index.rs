//! Where each deferred page's newest copy lies, split by page over
//! shards: what a buffer-pool miss asks ([`super::deferred::DeferredPages::lookup`])
//! without the slots' mutex, which every eviction takes several times.
//! On a 16-core machine every miss took that one mutex (issue 41).
//!
//! A mirror, not the truth: an entry is the page's `live` copy, else its
//! claimed one, in [`super::deferred`], and is set only under the slots'
//! mutex, in the same critical section that changes those (lock order:
//! the slots', then one shard's). So a slot leaves the index before it
//! can be handed out again, and a reader that finds the same copy before
//! and after reading the slot read that copy.

use crate::buffer::{PageId, PageMap};
use parking_lot::Mutex;

/// Shards: enough that a 16-core machine's misses seldom meet.
const SHARDS: usize = 16;

/// One shard alone on its cache lines.
#[repr(align(128))]
struct Shard<C>(Mutex<PageMap<C>>);

/// The newest copy `C` (a `DeferredCopy`; generic only so that this file
/// needs nothing of deferred.rs) of each deferred page, by page.
pub(super) struct CopyIndex<C> {
    shards: [Shard<C>; SHARDS],
}

impl<C> Default for CopyIndex<C> {
    fn default() -> Self {
        CopyIndex {
            shards: std::array::from_fn(|_| Shard(Mutex::new(PageMap::default()))),
        }
    }
}

impl<C: Copy> CopyIndex<C> {
    pub(super) fn get(&self, id: PageId) -> Option<C> {
        self.shard(id).lock().get(&id).copied()
    }

    /// Page `id`'s newest copy is now `copy` (None: none).
    pub(super) fn set(&self, id: PageId, copy: Option<C>) {
        let mut shard = self.shard(id).lock();
        match copy {
            Some(c) => shard.insert(id, c),
            None => shard.remove(&id),
        };
    }

    fn shard(&self, id: PageId) -> &Mutex<PageMap<C>> {
        &self.shards[id.shard_of(SHARDS)].0
    }
}
