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
use crate::protect::double_writes::deferred::DeferredCopy;
use parking_lot::Mutex;

/// Shards: enough that a 16-core machine's misses seldom meet.
const SHARDS: usize = 16;

/// One shard alone on its cache lines.
#[repr(align(128))]
#[derive(Default)]
struct Shard(Mutex<PageMap<DeferredCopy>>);

/// The newest copy of each deferred page, by page.
#[derive(Default)]
pub(super) struct CopyIndex {
    shards: [Shard; SHARDS],
}

impl CopyIndex {
    pub(super) fn get(&self, id: PageId) -> Option<DeferredCopy> {
        self.shard(id).lock().get(&id).copied()
    }

    /// Page `id`'s newest copy is now `copy` (None: none).
    pub(super) fn set(&self, id: PageId, copy: Option<DeferredCopy>) {
        let mut shard = self.shard(id).lock();
        match copy {
            Some(c) => shard.insert(id, c),
            None => shard.remove(&id),
        };
    }

    fn shard(&self, id: PageId) -> &Mutex<PageMap<DeferredCopy>> {
        &self.shards[id.shard_of(SHARDS)].0
    }
}
