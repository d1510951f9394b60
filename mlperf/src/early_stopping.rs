//! The reference's early-stopping percentile estimate (mlcommons/endpoints
//! `metrics/early_stopping.py`, a port of MLPerf LoadGen's binomial test): for `n` sorted
//! samples and a percentile `p`, the `t`-th highest sample, where `t` is the largest
//! over-latency count the run can absorb at 99 % confidence. `None` below the minimum sample
//! count. Same arithmetic, same iteration caps, same order statistic convention.

/// LoadGen's confidence.
pub const CONFIDENCE: f64 = 0.99;

/// Lentz's guard against a near-zero denominator.
fn guard(v: f64) -> f64 {
    const FPMIN: f64 = 1e-300;
    if v.abs() < FPMIN {
        FPMIN
    } else {
        v
    }
}

fn betacf(a: f64, b: f64, x: f64) -> f64 {
    let eps = 3e-16;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / guard(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..400 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        // One even and one odd term per iteration, as the reference does.
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / guard(1.0 + aa * d);
        c = guard(1.0 + aa / c);
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / guard(1.0 + aa * d);
        c = guard(1.0 + aa / c);
        let de = d * c;
        h *= de;
        if (de - 1.0).abs() < eps {
            break;
        }
    }
    h
}

fn betai(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_bt =
        libm::lgamma(a + b) - libm::lgamma(a) - libm::lgamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let bt = ln_bt.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        bt * betacf(a, b, x) / a
    } else {
        1.0 - bt * betacf(b, a, 1.0 - x) / b
    }
}

fn odds(h: u64, t: u64, p: f64) -> f64 {
    betai(h as f64, 1.0 + t as f64, p)
}

/// Minimum `h` with `odds(h, t, p) < 1 − c`.
pub fn find_min_passing(t: u64, p: f64) -> u64 {
    let target = 1.0 - CONFIDENCE;
    let (mut lo, mut hi) = (1u64, 2u64);
    while odds(hi, t, p) >= target {
        hi *= 2;
    }
    while lo < hi {
        let mid = (lo + hi) / 2;
        if odds(mid, t, p) < target {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

fn discard_count(n: u64, p: f64) -> u64 {
    if find_min_passing(1, p) + 1 > n {
        return 0;
    }
    let (mut lo, mut hi) = (1u64, 2u64);
    while find_min_passing(hi, p) + hi <= n {
        hi *= 2;
    }
    while lo < hi - 1 {
        let mid = (lo + hi) / 2;
        if find_min_passing(mid, p) + mid <= n {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The estimate for `percentile` (0–100 grid convention, in [1, 100)) over ascending
/// `sorted`; `None` with too few samples.
pub fn estimate<T: Copy>(sorted: &[T], percentile: f64) -> Option<T> {
    let fraction = percentile / 100.0;
    let n = sorted.len() as u64;
    let min_queries = find_min_passing(1, fraction) + 1;
    if n < min_queries {
        return None;
    }
    let t = discard_count(n, fraction);
    Some(sorted[(n - t) as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference() {
        // Printed by the reference's own early_stopping.py (Python 3.12).
        assert_eq!(find_min_passing(1, 0.99), 661);
        assert_eq!(find_min_passing(1, 0.90), 63);
        assert_eq!(find_min_passing(5, 0.999), 13100);
        assert_eq!(find_min_passing(1, 0.5), 10);
        let v: Vec<u64> = (0..100).collect();
        assert_eq!(estimate(&v, 99.0), None);
        assert_eq!(estimate(&v, 90.0), Some(97));
        assert_eq!(estimate(&v, 50.0), Some(63));
        let v: Vec<u64> = (0..1000).collect();
        let got: Vec<Option<u64>> = [99.9, 99.0, 97.0, 95.0, 90.0, 80.0, 75.0, 50.0]
            .iter()
            .map(|p| estimate(&v, *p))
            .collect();
        assert_eq!(
            got,
            [
                None,
                Some(998),
                Some(983),
                Some(966),
                Some(922),
                Some(830),
                Some(782),
                Some(538)
            ]
        );
    }
}
