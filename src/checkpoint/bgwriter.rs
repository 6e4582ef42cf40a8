//! The background writer: keeps clean frames ahead of the clock hand, so
//! a client needing a frame rarely has to write a dirty victim itself
//! (PostgreSQL's BgBufferSync, bufmgr.c).
//!
//! Each round (every `bgwriter_delay`):
//! 1. reads how many frames were claimed since the last round and how far
//!    the hand moved; smooths both (16 samples, as PostgreSQL): the claims
//!    per round (`smoothed_alloc`, which follows a rise at once and a fall
//!    slowly) and the frames the hand passes per frame claimed
//!    (`smoothed_density`);
//! 2. expects `smoothed_alloc * bgwriter_lru_multiplier` claims before the
//!    next round, but at least enough to scan the whole pool every two
//!    minutes when idle, and counts the frames it already cleaned ahead of
//!    the hand (those it scanned in earlier rounds, at the density) toward
//!    them;
//! 3. scans on from where it stopped, never lapping the hand, until it
//!    has found that many reusable frames (clean, unpinned, usage count 0),
//!    writing the dirty ones among them (at most `bgwriter_lru_maxpages`,
//!    one batch through the pool's write path);
//! 4. measures the density again from its own scan.
//!
//! PostgreSQL's hibernation (a longer sleep when idle) is left out: an idle
//! round scans a handful of frames (the pool / (120 s / delay)).

use crate::buffer::CleanScan;
use crate::engine::Engine;
use crate::error::Result;
use crate::file::Issuer;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

/// How often the thread looks at the clock and the stop flag (real time).
const POLL: Duration = Duration::from_millis(10);
/// Samples in the moving averages (PostgreSQL's smoothing_samples).
const SMOOTHING_SAMPLES: f64 = 16.0;
/// An idle pool is still scanned whole this often (PostgreSQL's
/// scan_whole_pool_milliseconds).
const SCAN_WHOLE_POOL: Duration = Duration::from_secs(120);

/// One round (see the module comment). Returns what its scan did; does
/// nothing with `bgwriter_lru_maxpages = 0`.
pub(crate) fn round(engine: &Engine) -> Result<CleanScan> {
    let o = &engine.options;
    let max_pages = o.bgwriter_lru_maxpages as usize;
    if max_pages == 0 {
        return Ok(CleanScan::default());
    }
    let pool = &engine.pool;
    let bg = &engine.bgwriter;
    let mut est = bg.estimates.lock();
    let n = pool.nframes() as u64;
    let hand = pool.clock_position();
    let claims = pool.stats.claims.load();
    let (recent_alloc, hand_moved) = if est.primed {
        (claims - est.prev_claims, hand - est.prev_hand)
    } else {
        (0, 0)
    };
    // Lapped (or first round): start again at the hand.
    if !est.primed || est.next_to_clean < hand || est.next_to_clean - hand > n {
        est.next_to_clean = hand;
    }
    est.prev_hand = hand;
    est.prev_claims = claims;
    est.primed = true;
    let bufs_ahead = est.next_to_clean - hand;
    let bufs_to_lap = n - bufs_ahead;

    if hand_moved > 0 && recent_alloc > 0 {
        let scans_per_alloc = hand_moved as f64 / recent_alloc as f64;
        est.smoothed_density += (scans_per_alloc - est.smoothed_density) / SMOOTHING_SAMPLES;
    }
    let reusable_est = bufs_ahead as f64 / est.smoothed_density.max(1.0);
    let recent = recent_alloc as f64;
    if est.smoothed_alloc <= recent {
        est.smoothed_alloc = recent;
    } else {
        est.smoothed_alloc += (recent - est.smoothed_alloc) / SMOOTHING_SAMPLES;
    }
    let min_scan = n as f64 * o.bgwriter_delay.as_secs_f64() / SCAN_WHOLE_POOL.as_secs_f64();
    let upcoming = (est.smoothed_alloc * o.bgwriter_lru_multiplier).max(min_scan + reusable_est);

    let want = (upcoming - reusable_est).ceil().max(0.0) as usize;
    let scan = pool.clean_ahead(
        est.next_to_clean,
        bufs_to_lap as usize,
        want,
        max_pages,
        Issuer::BackgroundWriter,
    )?;
    est.next_to_clean += scan.scanned as u64;
    // The density of reusable frames in what was just scanned.
    if scan.scanned > 0 && scan.reusable > 0 {
        let scans_per_alloc = scan.scanned as f64 / scan.reusable as f64;
        est.smoothed_density += (scans_per_alloc - est.smoothed_density) / SMOOTHING_SAMPLES;
    }
    drop(est);
    bg.rounds.fetch_add(1, Relaxed);
    bg.pages_written.fetch_add(scan.written as u64, Relaxed);
    if scan.hit_max_write {
        bg.maxwritten_clean.fetch_add(1, Relaxed);
    }
    Ok(scan)
}

/// The thread: a round every `bgwriter_delay` of the engine's clock
/// (a manual clock in tests never moves on its own, so they run rounds
/// themselves), until the engine stops.
pub(crate) fn run(engine: &Engine) {
    let clock = &engine.options.clock;
    let mut last = clock.now();
    while !engine.stop.load(SeqCst) {
        std::thread::sleep(POLL);
        let now = clock.now();
        if now.saturating_sub(last) < engine.options.bgwriter_delay {
            continue;
        }
        last = now;
        if engine.check_usable().is_err() {
            continue;
        }
        if let Err(e) = round(engine) {
            if e.is_fatal() {
                engine.poison(&e);
                tracing::error!(error = %e, "background writer stopped");
                return;
            }
            // A failed write (a full disk, say): the page stays dirty and
            // a later round or the checkpointer tries again.
            tracing::warn!(error = %e, "background writer round failed");
        }
    }
}

#[cfg(test)]
#[path = "bgwriter_tests.rs"]
mod tests;
