//! The one seeded generator of the crate (Steele, Lea and Flood's
//! SplitMix64), shared by the crash laboratory's simulator and workload and
//! by the benchmark laboratory.
//!
//! Hand-written rather than the rand crate's so that a seed gives the same
//! sequence whatever version of rand is built: the crash laboratory's
//! seeds, images and saved traces must replay after a dependency upgrade.
//! Not for anything an attacker may see.

/// A small seeded generator: 64 bits of state, one add and two multiplies
/// per value.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// Uniform in [0, n); `n` > 0. A modulo: its small bias does not matter
    /// to the simulator, and changing it would change every recorded seed.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next_u64() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_never_changes() {
        // SplitMix64's published stream from seed 0: crash images replay from
        // their seeds whatever the rand crate does.
        let mut rng = SplitMix64::new(0);
        let first: Vec<u64> = (0..3).map(|_| rng.next_u64()).collect();
        assert_eq!(
            first,
            [
                0xE220_A839_7B1D_CDAF,
                0x6E78_9E6A_A1B9_65F4,
                0x06C4_5D18_8009_454F
            ]
        );
        let mut rng = SplitMix64::new(42);
        assert!((0..1000)
            .map(|_| rng.next_f64())
            .all(|x| (0.0..1.0).contains(&x)));
    }

    #[test]
    fn below_and_chance_keep_their_ranges_and_odds() {
        let mut r = SplitMix64::new(7);
        let mut hits = 0;
        for _ in 0..10_000 {
            assert!(r.below(7) < 7);
            hits += u32::from(r.chance(0.25));
        }
        // 2,500 expected; the bound is over 20 standard deviations wide.
        assert!((1_500..3_500).contains(&hits), "{hits}");
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }
}
