//! The clocks every tokentap timestamp is taken on.
//!
//! Intervals come from the raw `CLOCK_MONOTONIC` value in nanoseconds (docs/benchmark.md#clocks).
//! It is the clock that `std::time::Instant`, Python's `time.monotonic_ns()` and
//! `perf_counter_ns()` read on Linux, so a value recorded by the proxy can be compared with one
//! recorded by another process on the same host. Reading it goes through the vDSO (~20 ns), cheap
//! enough for every chunk.
//!
//! Scheduling (sleeps, timeouts) uses tokio's timer; measurement never does, because tokio's
//! clock can be paused in tests and a measured interval must be real time.
//!
//! Every record also carries a [`Anchor`]: the wall clock (ns since the Unix epoch) and the
//! monotonic clock read back to back, so a record can be placed on either shared clock.

use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub type MonoNs = u64;

/// Reads `CLOCK_MONOTONIC` in nanoseconds.
#[inline]
pub fn now() -> MonoNs {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // Invariant: CLOCK_MONOTONIC is never negative on Linux.
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds since the Unix epoch on the wall clock.
pub fn wall_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// One instant expressed on both shared clocks (`default()`: both zero, for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Anchor {
    /// Wall clock, ns since the Unix epoch.
    pub wall_ns: u64,
    /// Raw `CLOCK_MONOTONIC`, ns.
    pub mono_ns: MonoNs,
}

impl Anchor {
    /// Reads both clocks back to back (monotonic first, the value intervals are taken against).
    pub fn now() -> Self {
        let mono_ns = now();
        let wall_ns = wall_now();
        Anchor { wall_ns, mono_ns }
    }

    /// The wall-clock time of another monotonic instant, using this anchor's offset.
    pub fn wall_of(&self, mono: MonoNs) -> u64 {
        (self.wall_ns as i128 + mono as i128 - self.mono_ns as i128).max(0) as u64
    }
}

/// Seconds (f64) from nanoseconds; for display and Prometheus only.
#[inline]
pub fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(
        clippy::disallowed_types,
        reason = "the test compares our clock with std's own monotonic clock"
    )]
    fn monotonic_matches_std_instant_rate() {
        let a = now();
        let i = std::time::Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = now();
        let d = i.elapsed().as_nanos() as i64;
        let ours = (b - a) as i64;
        assert!(
            ours >= 5_000_000,
            "monotonic clock went {ours} ns over a 5 ms sleep"
        );
        assert!((ours - d).abs() < 2_000_000, "ours {ours} std {d}");
    }

    #[test]
    fn anchor_maps_monotonic_to_wall() {
        let a = Anchor {
            wall_ns: 1_000_000,
            mono_ns: 500,
        };
        assert_eq!(a.wall_of(1_500), 1_001_000);
        assert_eq!(a.wall_of(0), 999_500);
    }
}
