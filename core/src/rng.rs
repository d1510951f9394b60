//! SplitMix64: the one deterministic random source of tokentap (the sim's lengths and faults,
//! the dataset synthesizer, the filler text, the routing hash's finaliser).
//!
//! Fully specified (Steele, Lea & Flood 2014; the `java.util.SplittableRandom` constants), tiny
//! and well mixed — and ours: `rand`'s `SmallRng` may change algorithm between releases and
//! platforms, and a seeded sim or synthesized dataset must give the same bytes forever.

/// The golden-ratio increment of the state.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finaliser: a bijective mix of 64 bits.
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A SplitMix64 stream.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream whose state starts at `state` (the first value is `mix(state + GAMMA)`).
    pub fn new(state: u64) -> SplitMix64 {
        SplitMix64(state)
    }

    /// The next value.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix(self.0)
    }

    /// Uniform in [0, 1), 53 bits.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_stream() {
        // SplitMix64 seeded with 0: the reference values (Vigna's splitmix64.c).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
        let u = SplitMix64::new(0).unit();
        assert!((0.0..1.0).contains(&u));
    }
}
