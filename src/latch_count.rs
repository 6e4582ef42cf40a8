//! The page latches this thread holds, counted below the buffer pool so
//! that a lower layer can check the rule "no latch is held across a WAL
//! flush" (correctness.md) without importing the pool: the pool's guards
//! count, the WAL asks. Counted in debug builds and the library's own
//! tests only.

#[cfg(any(test, debug_assertions))]
thread_local! {
    static LATCHES_HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Adds `delta` to this thread's count (a guard taken: +1, dropped: -1).
#[inline]
pub(crate) fn add(delta: isize) {
    #[cfg(any(test, debug_assertions))]
    LATCHES_HELD.with(|n| n.set(n.get().wrapping_add_signed(delta)));
    let _ = delta;
}

/// How many page latches this thread holds through guards (0 in release
/// builds, which do not count them).
pub fn latches_held() -> usize {
    #[cfg(any(test, debug_assertions))]
    return LATCHES_HELD.with(|n| n.get());
    #[cfg(not(any(test, debug_assertions)))]
    0
}
