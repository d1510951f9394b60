//! The sim's own small deterministic random source.
//!
//! splitmix64 (the generator `tokentap_core::text::filler` uses too) rather than `rand`'s
//! `SmallRng`, whose algorithm is explicitly allowed to change between releases and platforms:
//! a sim run with a given seed must produce the same lengths and text forever, so that two runs
//! of a benchmark against the sim can be compared line by line.

/// splitmix64 state.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A generator for one request: mixes the run seed with a per-request key (arrival number
    /// or prompt hash) so neighbouring keys give unrelated streams.
    pub fn for_request(seed: u64, key: u64) -> Rng {
        let mut r = Rng(seed ^ key.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Lognormal with the given *mean* (not median) and sigma of the underlying normal.
    pub fn lognormal_mean(&mut self, mean: f64, sigma: f64) -> f64 {
        if sigma == 0.0 {
            return mean;
        }
        let mu = mean.max(f64::MIN_POSITIVE).ln() - sigma * sigma / 2.0;
        (mu + sigma * self.normal()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_key_sensitive() {
        let a: Vec<u64> = (0..4).map(|_| Rng::for_request(1, 2).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            Rng::for_request(1, 2).next_u64(),
            Rng::for_request(1, 3).next_u64()
        );
    }

    #[test]
    fn lognormal_mean_is_close() {
        let mut r = Rng::for_request(42, 0);
        let n = 20_000;
        let mean = (0..n).map(|_| r.lognormal_mean(400.0, 0.7)).sum::<f64>() / n as f64;
        assert!((mean - 400.0).abs() < 15.0, "mean {mean}");
        assert_eq!(r.lognormal_mean(400.0, 0.0), 400.0);
    }
}
