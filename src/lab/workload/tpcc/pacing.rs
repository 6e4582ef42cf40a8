//! A terminal user's keying and think times (clause 5.2.5), for runs that
//! ask for them (`untorn bench --think`, `untorn tpcc run --think`).
//!
//! Before each transaction the user keys its input for a fixed time (18 /
//! 3 / 2 / 2 / 2 s for New-Order, Payment, Order-Status, Delivery,
//! Stock-Level); after it they think for a time drawn from a negative
//! exponential (means 12 / 12 / 10 / 5 / 5 s, cut at 10 means). I/O
//! studies run without them, as DBT-2 is run; with them a warehouse's ten
//! terminals give about 12.9 New-Orders a minute (the specification's
//! ceiling), so the load is set by clients, not by the engine.

use super::input::Kind;
use crate::lab::workload::Rng;
use std::time::Duration;

/// Keying time per kind, seconds (the order of [`Kind`]).
const KEYING_S: [f64; 5] = [18.0, 3.0, 2.0, 2.0, 2.0];
/// Mean think time per kind, seconds.
const THINK_MEAN_S: [f64; 5] = [12.0, 12.0, 10.0, 5.0, 5.0];

/// The keying time before a transaction of `kind`.
pub fn keying_time(kind: Kind) -> Duration {
    Duration::from_secs_f64(KEYING_S[kind as usize])
}

/// A think time after a transaction of `kind`, drawn from `rng`.
pub fn think_time(rng: &mut Rng, kind: Kind) -> Duration {
    exponential(rng, THINK_MEAN_S[kind as usize])
}

/// Negative exponential of mean `mean` seconds, cut at 10 means.
fn exponential(rng: &mut Rng, mean: f64) -> Duration {
    // Uniform in (0, 1]: never ln(0).
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let u = 1.0 - u;
    Duration::from_secs_f64((-u.ln() * mean).min(10.0 * mean))
}

/// The kind of the transaction `rng` draws next, without drawing it.
pub fn next_kind(rng: &Rng) -> Kind {
    Kind::draw(&mut rng.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::workload::tpcc::input::KINDS;

    #[test]
    fn think_times_have_their_mean_and_cap() {
        let mut rng = Rng::new(3, 0);
        let n = 20_000;
        let times: Vec<f64> = (0..n)
            .map(|_| think_time(&mut rng, Kind::NewOrder).as_secs_f64())
            .collect();
        let mean = times.iter().sum::<f64>() / f64::from(n);
        assert!((mean - 12.0).abs() < 0.5, "{mean}");
        assert!(times.iter().all(|&t| (0.0..=120.0).contains(&t)));
    }

    #[test]
    fn next_kind_peeks_without_drawing() {
        let mut rng = Rng::new(7, 1);
        let mut seen = [0u32; 5];
        for _ in 0..2_000 {
            let peeked = next_kind(&rng);
            assert_eq!(Kind::draw(&mut rng), peeked);
            seen[peeked as usize] += 1;
        }
        // Every kind of the mix comes up, and the keying times follow it.
        assert!(seen.iter().all(|&n| n > 0), "{seen:?} of {KINDS:?}");
        assert_eq!(keying_time(Kind::NewOrder), Duration::from_secs(18));
        assert_eq!(keying_time(Kind::StockLevel), Duration::from_secs(2));
    }
}
