//! Panics the crash laboratory arms inside the engine's critical
//! sections, to prove that an unwind there stops the engine and loses
//! nothing acknowledged (issue 57). PostgreSQL turns any error inside a
//! critical section into a PANIC; untorn's unwinds must be as safe.
//!
//! A point costs one relaxed load while disarmed. Its panics carry
//! [`INJECTED`] in their message, so that [`quiet_hook`] keeps them off
//! stderr while every other panic is reported as before.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Once;

/// Every injected panic's message starts with this.
pub const INJECTED: &str = "crashlab: injected panic";

const DISARMED: u64 = u64::MAX;

/// One place a panic may be injected.
#[derive(Debug)]
pub struct PanicPoint {
    /// Passes left before the panic; [`DISARMED`] when none is armed.
    left: AtomicU64,
    struck: AtomicBool,
}

impl Default for PanicPoint {
    fn default() -> Self {
        PanicPoint {
            left: AtomicU64::new(DISARMED),
            struck: AtomicBool::new(false),
        }
    }
}

impl PanicPoint {
    /// The pass after `after` more passes panics (then it disarms).
    pub fn arm(&self, after: u64) {
        self.struck.store(false, SeqCst);
        self.left.store(after.min(DISARMED - 1), SeqCst);
    }

    pub fn disarm(&self) {
        self.left.store(DISARMED, SeqCst);
    }

    /// Whether a panic was injected since the last [`PanicPoint::arm`].
    pub fn struck(&self) -> bool {
        self.struck.load(SeqCst)
    }

    /// A pass through the point, named `what` in the panic.
    #[inline]
    pub fn pass(&self, what: &str) {
        if self.left.load(Relaxed) != DISARMED {
            self.count_down(what);
        }
    }

    #[cold]
    fn count_down(&self, what: &str) {
        let step = |n: u64| match n {
            DISARMED => None,
            0 => Some(DISARMED),
            n => Some(n - 1),
        };
        if self.left.fetch_update(SeqCst, SeqCst, step) == Ok(0) {
            self.struck.store(true, SeqCst);
            quiet_hook();
            panic!("{INJECTED}: {what}");
        }
    }
}

/// Installs, once, a panic hook that stays silent for injected panics
/// and hands every other panic to the hook before it. With
/// `UNTORN_SHOW_INJECTED_PANICS` set, injected ones are shown too (with
/// `RUST_BACKTRACE=1`, where they struck).
pub fn quiet_hook() {
    static ONCE: Once = Once::new();
    if std::env::var_os("UNTORN_SHOW_INJECTED_PANICS").is_some() {
        return;
    }
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied());
            if !message.is_some_and(|m| m.starts_with(INJECTED)) {
                before(info);
            }
        }));
    });
}

/// Whether a caught panic's payload is an injected one.
pub fn is_injected(payload: &(dyn std::any::Any + Send)) -> bool {
    payload
        .downcast_ref::<String>()
        .is_some_and(|m| m.starts_with(INJECTED))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_panics_at_its_pass_once_and_only_when_armed() {
        let p = PanicPoint::default();
        p.pass("never");
        p.arm(2);
        p.pass("one");
        p.pass("two");
        assert!(!p.struck());
        let caught = std::panic::catch_unwind(|| p.pass("three")).unwrap_err();
        assert!(is_injected(caught.as_ref()));
        assert!(p.struck());
        p.pass("disarmed again");
        p.arm(0);
        p.disarm();
        p.pass("disarmed");
        assert!(!p.struck(), "arm clears it");
    }
}
