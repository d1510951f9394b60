//! Exact statistics from raw samples.
//!
//! Published numbers come from every raw sample, never from histogram buckets
//! (docs/benchmark.md#percentiles). Percentiles use linear interpolation between closest ranks —
//! numpy's default (`method="linear"`) — so they can be checked against the reference tooling with
//! numpy.

use serde::{Deserialize, Serialize};

/// The published set of order statistics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Samples.
    pub count: u64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// Their mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

/// The order statistics a report shows of one quantity (from [`Percentiles`]): compare's
/// differences and timings, the dataset's sizes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Dist {
    /// The smallest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// The largest.
    pub max: f64,
    /// Their mean.
    pub mean: f64,
}

impl From<Percentiles> for Dist {
    fn from(p: Percentiles) -> Dist {
        Dist {
            min: p.min,
            p50: p.p50,
            p90: p.p90,
            p99: p.p99,
            max: p.max,
            mean: p.mean,
        }
    }
}

/// Raw samples of one quantity.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    v: Vec<f64>,
    sorted: bool,
}

impl Samples {
    /// No samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a sample.
    pub fn push(&mut self, x: f64) {
        self.v.push(x);
        self.sorted = false;
    }

    /// Samples.
    pub fn len(&self) -> usize {
        self.v.len()
    }

    /// No sample.
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    fn sort(&mut self) {
        if !self.sorted {
            self.v.sort_unstable_by(f64::total_cmp);
            self.sorted = true;
        }
    }

    /// The q-quantile (0 ≤ q ≤ 1), numpy `linear`.
    pub fn quantile(&mut self, q: f64) -> Option<f64> {
        if self.v.is_empty() {
            return None;
        }
        self.sort();
        Some(quantile_sorted(&self.v, q))
    }

    /// The q-quantile with numpy's `lower` method (the MLPerf reference's): the sample at
    /// floor((n − 1)·q).
    pub fn quantile_lower(&mut self, q: f64) -> Option<f64> {
        if self.v.is_empty() {
            return None;
        }
        self.sort();
        let i = ((self.v.len() - 1) as f64 * q).floor() as usize;
        Some(self.v[i.min(self.v.len() - 1)])
    }

    /// The q-quantile by nearest rank (numpy's `inverted_cdf`, guidellm's): the sample at rank
    /// ceil(n·q), 1-based.
    pub fn quantile_nearest_rank(&mut self, q: f64) -> Option<f64> {
        if self.v.is_empty() {
            return None;
        }
        self.sort();
        let rank = (self.v.len() as f64 * q).ceil() as usize;
        Some(self.v[rank.clamp(1, self.v.len()) - 1])
    }

    /// All published statistics, or `None` with no samples.
    /// The report's order statistics, or `None` without samples.
    pub fn dist(&mut self) -> Option<Dist> {
        self.percentiles().map(Dist::from)
    }

    /// The order statistics, or `None` without samples.
    pub fn percentiles(&mut self) -> Option<Percentiles> {
        if self.v.is_empty() {
            return None;
        }
        self.sort();
        let v = &self.v;
        let sum: f64 = v.iter().sum();
        Some(Percentiles {
            count: v.len() as u64,
            min: v[0],
            max: v[v.len() - 1],
            mean: sum / v.len() as f64,
            p50: quantile_sorted(v, 0.50),
            p90: quantile_sorted(v, 0.90),
            p95: quantile_sorted(v, 0.95),
            p99: quantile_sorted(v, 0.99),
            p999: quantile_sorted(v, 0.999),
        })
    }
}

impl Extend<f64> for Samples {
    fn extend<I: IntoIterator<Item = f64>>(&mut self, iter: I) {
        self.v.extend(iter);
        self.sorted = false;
    }
}

impl FromIterator<f64> for Samples {
    fn from_iter<I: IntoIterator<Item = f64>>(iter: I) -> Self {
        Samples {
            v: iter.into_iter().collect(),
            sorted: false,
        }
    }
}

fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let q = q.clamp(0.0, 1.0);
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    let frac = pos - lo as f64;
    v[lo] + (v[hi] - v[lo]) * frac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numpy_linear() {
        // numpy.percentile([1,2,3,4,5,6,7,8,9,10], [50, 90, 99]) == [5.5, 9.1, 9.91]
        let mut s: Samples = (1..=10).map(f64::from).collect();
        let p = s.percentiles().unwrap();
        assert_eq!(p.p50, 5.5);
        assert!((p.p90 - 9.1).abs() < 1e-12);
        assert!((p.p99 - 9.91).abs() < 1e-12);
        assert_eq!((p.min, p.max, p.mean, p.count), (1.0, 10.0, 5.5, 10));
    }

    #[test]
    fn single_and_empty() {
        let mut s = Samples::new();
        assert!(s.percentiles().is_none());
        s.push(3.0);
        assert_eq!(s.percentiles().unwrap().p999, 3.0);
    }
}

/// Time spans `(start, end)` merged where they overlap or touch, in start order: the time at
/// least one was open (a session's time on the model, its gaps the time between its turns).
pub fn merge_spans(mut spans: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match merged.last_mut() {
            Some((_, end)) if s <= *end => *end = (*end).max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

#[cfg(test)]
mod merge_spans_tests {
    #[test]
    fn overlapping_spans_merge_and_gaps_stay() {
        let m = super::merge_spans(vec![(8, 10), (0, 4), (1, 5)]);
        assert_eq!(m, [(0, 5), (8, 10)]);
    }
}
