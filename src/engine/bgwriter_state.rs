//! The background writer's state in the engine and its figures
//! (pg_stat_bgwriter), apart from its rounds (bgwriter.rs), so that the
//! engine holds them without importing what runs them.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::*};

/// Background writer figures since opening (pg_stat_bgwriter; the pages it
/// wrote are in `IoStats` under `Issuer::BackgroundWriter`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BgWriterStats {
    /// Rounds run.
    pub rounds: u64,
    /// Pages written (buffers_clean).
    pub pages_written: u64,
    /// Rounds that stopped at `bgwriter_lru_maxpages` (maxwritten_clean).
    pub maxwritten_clean: u64,
}

/// What a round carries over to the next.
pub(crate) struct Estimates {
    /// The hand's position and the pool's claims at the last round.
    pub(crate) prev_hand: u64,
    pub(crate) prev_claims: u64,
    /// The next position to look at: at or ahead of the hand while it
    /// has not lapped us.
    pub(crate) next_to_clean: u64,
    pub(crate) smoothed_alloc: f64,
    pub(crate) smoothed_density: f64,
    /// False until the first round has set the fields above.
    pub(crate) primed: bool,
}

/// The background writer's state in the engine.
pub(crate) struct BgWriter {
    pub(crate) estimates: Mutex<Estimates>,
    pub(crate) rounds: AtomicU64,
    pub(crate) pages_written: AtomicU64,
    pub(crate) maxwritten_clean: AtomicU64,
}

impl Default for BgWriter {
    fn default() -> Self {
        BgWriter {
            estimates: Mutex::new(Estimates {
                prev_hand: 0,
                prev_claims: 0,
                next_to_clean: 0,
                smoothed_alloc: 0.0,
                smoothed_density: 10.0,
                primed: false,
            }),
            rounds: AtomicU64::new(0),
            pages_written: AtomicU64::new(0),
            maxwritten_clean: AtomicU64::new(0),
        }
    }
}

impl BgWriter {
    pub(crate) fn stats(&self) -> BgWriterStats {
        BgWriterStats {
            rounds: self.rounds.load(Relaxed),
            pages_written: self.pages_written.load(Relaxed),
            maxwritten_clean: self.maxwritten_clean.load(Relaxed),
        }
    }
}
