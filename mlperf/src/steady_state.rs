//! The reference's steady-state detector (mlcommons/endpoints
//! `inference_endpoint.metrics.steady_state_diagnostics`, the v1.0 rules' §4.4 window), ported
//! function for function, and what it says of an agentic run.
//!
//! ## What the reference does with an agentic run
//! Its workload profiles map the load pattern `agentic_inference` to the `agentic` profile,
//! marked *not supported*: it does not compute a steady-state window for an agentic run, prints
//! "AGENTIC STEADY-STATE DETECTION IS NOT YET SUPPORTED", and computes only an experimental
//! per-trajectory throughput (NATL) "not validated for official reporting". A point of an
//! agentic curve therefore has no `steady_state` block, and its official numbers are the
//! whole-run ones — the rules' fallback, which the checker reports as the `steady-state-basis`
//! warning. tokentap does the same (docs/rules.md): [`natl`] is the reference's experimental
//! figure, and [`detect`] — the window detector of the other profiles — runs over the agentic
//! turns as a diagnostic of tokentap's own, never as the official result.
//!
//! ## The window detector ([`detect`])
//! Samples (performance-tracked turns) are bucketed by issue order into super-passes of
//! `superpass_size` samples. Per super-pass and metric, the lower percentile
//! (`sorted[int(p·(n−1))]`). After an adaptive warmup (leading super-passes whose TPOT p50 is
//! more than 5 % from the back half's median, at least 1, at most half), the series is cut
//! into maximal admissible plateaus (grow from the left while TPOT p50 and p90 are trend-steady
//! — Mann–Kendall with the Hamed–Rao correction at α 0.05, a trend counting only when its OLS
//! end-to-end change is at least 5 % of the median — and within the loosest CoV bound, 0.08);
//! a plateau has at least 4 super-passes. The first plateau whose offered-load (issue) span
//! meets the minimum duration — max(k*·τ, 5 × latency p90, 600 s), k* =
//! max(⌈(1.96·CoV/0.05)²⌉, 4) — is the steady state; a later plateau whose TPOT mean differs by
//! more than 5 % with a significant Pettitt change point is an anomaly. Window metrics: TTFT,
//! TPOT, latency percentiles pooled over the window's samples; per-user TPS = 1e9 / mean TPOT;
//! system TPS = output tokens / issue span, with batch-means 95 % intervals.
//!
//! The tests port the reference's own cases (its `test_steady_state_diagnostics.py`: the trend
//! tests on lines and a sawtooth, Pettitt, batch means, admissibility and the effect floor,
//! plateau segmentation, level shifts, warmup, the three minimum-duration terms) with their
//! inputs and expectations.
//!
//! Where tokentap's inputs differ: TPOT's token count is the record's `tpot_tokens` (the
//! reference's own counting, through the chat template for reasoning and tool calls); the
//! diagnostic script tokenizes the plain text after the first chunk. CoV and the trend tests
//! are scale-invariant, so the verdicts do not depend on it (the reference says the same of its
//! own difference with the live aggregator).

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::HashMap;

/// Below this many super-passes a trend test is meaningless.
pub const MIN_TREND_N: usize = 4;
/// A trend breaks a window only when its OLS end-to-end change is at least this fraction.
pub const TREND_REL_DRIFT_MIN: f64 = 0.05;
/// z of a two-sided 95 % interval.
pub const CI_Z_95: f64 = 1.96;
/// A median below this counts as zero (no relative change of it).
pub const ZERO_MEDIAN_FLOOR: f64 = 1e-9;
/// The CoV bounds of the reference's default profile, tightest first.
pub const DEFAULT_COV_BOUNDS: [f64; 3] = [0.03, 0.05, 0.08];
/// The minimum duration's target relative error (`ε` of k*).
pub const MIN_DUR_EPS: f64 = 0.05;
/// The minimum duration's latency term: this many latency p90s.
pub const MIN_DUR_RELAX_MULT: f64 = 5.0;
/// The minimum duration's floor, s.
pub const MIN_DUR_FLOOR_S: f64 = 600.0;
/// The agentic profile's super-pass (trajectories) and CoV bounds.
pub const AGENTIC_SUPERPASS_TRAJECTORIES: usize = 32;
/// The agentic profile's CoV bounds.
pub const AGENTIC_COV_BOUNDS: [f64; 2] = [0.10, 0.15];

/// One performance-tracked sample (a turn).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Issue instant, ns (any epoch; only differences matter).
    pub issue_ns: u64,
    /// Issue → first token, ns.
    pub ttft_ns: Option<f64>,
    /// Issue → complete, ns (`None`: never completed).
    pub latency_ns: Option<f64>,
    /// First chunk → complete, ns, and the tokens after the first chunk.
    pub tpot: Option<(f64, u64)>,
    /// The trajectory (conversation and pass) and the turn's output tokens, for NATL.
    pub trajectory: String,
    /// Its output tokens.
    pub output_tokens: Option<u64>,
}

/// One super-pass's samples.
#[derive(Debug, Clone, Default)]
pub struct SuperPass {
    /// Samples issued.
    pub n_issued: usize,
    /// First issue instant, ns.
    pub first_issue_ns: i64,
    /// Last issue instant, ns.
    pub last_issue_ns: i64,
    /// TTFTs, ns.
    pub ttft_ns: Vec<f64>,
    /// TPOTs, ns.
    pub tpot_ns: Vec<f64>,
    /// Latencies, ns.
    pub latency_ns: Vec<f64>,
    /// Σ output tokens.
    pub out_tokens: u64,
}

/// Samples bucketed by issue order into super-passes of `size` samples.
pub fn series(samples: &[Sample], size: usize) -> Vec<SuperPass> {
    let size = size.max(1);
    let mut order: Vec<&Sample> = samples.iter().collect();
    order.sort_by_key(|s| s.issue_ns);
    let mut out: Vec<SuperPass> = Vec::with_capacity(order.len() / size + 1);
    for (k, s) in order.iter().enumerate() {
        let i = k / size;
        if out.len() <= i {
            out.push(SuperPass {
                first_issue_ns: -1,
                last_issue_ns: -1,
                ..SuperPass::default()
            });
        }
        let sp = &mut out[i];
        let t = s.issue_ns as i64;
        sp.n_issued += 1;
        if sp.first_issue_ns < 0 {
            sp.first_issue_ns = t;
        }
        sp.last_issue_ns = sp.last_issue_ns.max(t);
        if let Some(v) = s.ttft_ns {
            sp.ttft_ns.push(v);
        }
        if let Some(v) = s.latency_ns {
            sp.latency_ns.push(v);
        }
        if let Some((delta, tokens)) = s.tpot {
            if tokens > 0 {
                sp.tpot_ns.push(delta / tokens as f64);
                sp.out_tokens += tokens;
            }
        }
    }
    out
}

// ------------------------------------------------------------------ numeric helpers

/// `sorted[int(p·(n−1))]`.
pub fn percentile_lower(sorted: &[f64], p: f64) -> f64 {
    sorted[(p * (sorted.len() - 1) as f64) as usize]
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Python's `statistics.median`.
pub fn median(v: &[f64]) -> f64 {
    let s = sorted(v);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Python's `statistics.pstdev`.
fn pstdev(v: &[f64]) -> f64 {
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt()
}

/// Population standard deviation over |mean|; 0 below two points or at mean 0.
pub fn cov(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    if m == 0.0 {
        return 0.0;
    }
    pstdev(v) / m.abs()
}

fn phi(z: f64) -> f64 {
    0.5 * (1.0 + libm::erf(z / std::f64::consts::SQRT_2))
}

fn two_sided_p(stat: f64) -> f64 {
    2.0 * (1.0 - phi(stat.abs()))
}

fn median_or_floor(v: &[f64]) -> f64 {
    let m = median(v);
    if m != 0.0 {
        m
    } else {
        ZERO_MEDIAN_FLOOR
    }
}

/// Which per-super-pass series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// TTFT.
    Ttft,
    /// TPOT.
    Tpot,
    /// Latency.
    Latency,
}

fn values(sp: &SuperPass, s: Source) -> &[f64] {
    match s {
        Source::Ttft => &sp.ttft_ns,
        Source::Tpot => &sp.tpot_ns,
        Source::Latency => &sp.latency_ns,
    }
}

/// Per-super-pass percentile; super-passes without samples skipped.
pub fn percentile_series(series: &[SuperPass], s: Source, p: f64) -> Vec<f64> {
    series
        .iter()
        .map(|sp| values(sp, s))
        .filter(|v| !v.is_empty())
        .map(|v| percentile_lower(&sorted(v), p))
        .collect()
}

/// Per-super-pass percentile over every super-pass; `None` if one is empty.
fn window_series(series: &[SuperPass], s: Source, p: f64) -> Option<Vec<f64>> {
    series
        .iter()
        .map(|sp| {
            let v = values(sp, s);
            (!v.is_empty()).then(|| percentile_lower(&sorted(v), p))
        })
        .collect()
}

fn pooled(series: &[SuperPass], s: Source) -> Vec<f64> {
    series
        .iter()
        .flat_map(|sp| values(sp, s).iter().copied())
        .collect()
}

fn issue_span_ns(series: &[SuperPass]) -> i64 {
    let first = series
        .iter()
        .filter(|s| s.first_issue_ns >= 0)
        .map(|s| s.first_issue_ns)
        .min();
    let last = series
        .iter()
        .filter(|s| s.last_issue_ns >= 0)
        .map(|s| s.last_issue_ns)
        .max();
    match (first, last) {
        (Some(f), Some(l)) => l - f,
        _ => 0,
    }
}

// ------------------------------------------------------------------ trend tests

/// A trend verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trend {
    /// Rising.
    Up,
    /// Falling.
    Down,
    /// No trend.
    Steady,
    /// Too few points to tell.
    Insufficient,
}

fn mk_s(v: &[f64]) -> i64 {
    let mut s = 0i64;
    for i in 0..v.len() {
        for j in i + 1..v.len() {
            let d = v[j] - v[i];
            s += (d > 0.0) as i64 - (d < 0.0) as i64;
        }
    }
    s
}

fn mk_variance(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let mut counts: HashMap<u64, u64> = HashMap::new();
    for x in v {
        *counts.entry(x.to_bits()).or_default() += 1;
    }
    let tie: f64 = counts
        .values()
        .map(|&t| (t * (t.saturating_sub(1)) * (2 * t + 5)) as f64)
        .sum();
    (n * (n - 1.0) * (2.0 * n + 5.0) - tie) / 18.0
}

fn mk_verdict(s: i64, variance: f64, alpha: f64) -> Trend {
    let dir = |x: i64| match x.signum() {
        1 => Trend::Up,
        -1 => Trend::Down,
        _ => Trend::Steady,
    };
    if variance <= 0.0 {
        return dir(s);
    }
    let z = match s.signum() {
        1 => (s - 1) as f64 / variance.sqrt(),
        -1 => (s + 1) as f64 / variance.sqrt(),
        _ => 0.0,
    };
    if two_sided_p(z) < alpha {
        dir(s)
    } else {
        Trend::Steady
    }
}

/// Ranks 1..n in sorted order (ties broken by position, as Python's stable sort).
fn ranks_of(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    for (rank, &i) in order.iter().enumerate() {
        r[i] = (rank + 1) as f64;
    }
    r
}

/// Plain Mann–Kendall (α 0.05).
pub fn mann_kendall(v: &[f64]) -> Trend {
    if v.len() < MIN_TREND_N {
        return Trend::Insufficient;
    }
    mk_verdict(mk_s(v), mk_variance(v), 0.05)
}

/// Mann–Kendall with the Hamed–Rao autocorrelation correction (α 0.05).
pub fn mk_hamed_rao(v: &[f64]) -> Trend {
    let n = v.len();
    if n < MIN_TREND_N {
        return Trend::Insufficient;
    }
    let s = mk_s(v);
    let var0 = mk_variance(v);
    let ranks = ranks_of(v);
    let m = mean(&ranks);
    let dev: Vec<f64> = ranks.iter().map(|r| r - m).collect();
    let denom: f64 = dev.iter().map(|d| d * d).sum();
    let acf: Vec<f64> = if denom == 0.0 {
        vec![0.0; n - 1]
    } else {
        (1..n)
            .map(|k| (k..n).map(|t| dev[t] * dev[t - k]).sum::<f64>() / denom)
            .collect()
    };
    let nf = n as f64;
    let ci = CI_Z_95 / nf.sqrt();
    let mut sum = 0.0;
    for k in 1..n {
        let r = acf[k - 1];
        if r.abs() <= ci {
            continue;
        }
        let kf = k as f64;
        sum += (nf - kf) * (nf - kf - 1.0) * (nf - kf - 2.0) * r;
    }
    let mut correction = 1.0 + (2.0 / (nf * (nf - 1.0) * (nf - 2.0))) * sum;
    if correction <= 0.0 {
        correction = 1.0;
    }
    mk_verdict(s, var0 * correction, 0.05)
}

/// OLS slope's end-to-end change over the median.
fn rel_drift(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let n = v.len() as f64;
    let xbar = (n - 1.0) / 2.0;
    let ybar = mean(v);
    let sxx: f64 = (0..v.len()).map(|x| (x as f64 - xbar).powi(2)).sum();
    let sxy: f64 = v
        .iter()
        .enumerate()
        .map(|(x, y)| (x as f64 - xbar) * (y - ybar))
        .sum();
    let slope = if sxx != 0.0 { sxy / sxx } else { 0.0 };
    slope * (n - 1.0) / median_or_floor(v)
}

/// Pettitt's single change point: (split, K, p, significant at 0.05).
pub fn pettitt(v: &[f64]) -> Pettitt {
    let n = v.len();
    if n < MIN_TREND_N {
        return Pettitt {
            change_point: 0,
            k_stat: 0.0,
            pvalue: 1.0,
            significant: false,
        };
    }
    // Average ranks for ties.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut ranks = vec![0.0; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let avg = (i + 1 + j + 1) as f64 / 2.0;
        for &o in &order[i..=j] {
            ranks[o] = avg;
        }
        i = j + 1;
    }
    let (mut cum, mut k_stat, mut cp) = (0.0, 0.0f64, 0);
    let nf = n as f64;
    for t in 1..n {
        cum += ranks[t - 1];
        let u = 2.0 * cum - t as f64 * (nf + 1.0);
        if u.abs() > k_stat {
            k_stat = u.abs();
            cp = t;
        }
    }
    let pvalue = (2.0 * (-6.0 * k_stat * k_stat / (nf.powi(3) + nf.powi(2))).exp()).min(1.0);
    Pettitt {
        change_point: cp,
        k_stat,
        pvalue,
        significant: pvalue < 0.05,
    }
}

/// Pettitt's change-point test of a series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pettitt {
    /// Where the series changes (index).
    pub change_point: usize,
    /// Pettitt's K.
    pub k_stat: f64,
    /// Its p-value.
    pub pvalue: f64,
    /// Below 0.05.
    pub significant: bool,
}

/// Student-t 95 % two-sided critical values by degrees of freedom (1.96 above 30).
fn t_crit_95(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if (1..=30).contains(&df) {
        T[df - 1]
    } else {
        1.96
    }
}

/// 95 % interval of the grand mean from batch means.
pub fn batch_means_ci(b: &[f64]) -> (f64, f64) {
    let k = b.len();
    if k == 0 {
        return (0.0, 0.0);
    }
    let m = mean(b);
    if k < 2 {
        return (m, m);
    }
    let var = b.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (k - 1) as f64;
    let se = var.sqrt() / (k as f64).sqrt();
    let c = t_crit_95(k - 1);
    (m - c * se, m + c * se)
}

// ------------------------------------------------------------------ the detector

const GATED: [(Source, f64); 2] = [(Source::Tpot, 0.50), (Source::Tpot, 0.90)];
/// Drifting-Up watch: TPOT p50/p90 and TTFT p50/p90.
const WATCH: [(&str, Source, f64); 4] = [
    ("tpot_p50", Source::Tpot, 0.50),
    ("tpot_p90", Source::Tpot, 0.90),
    ("ttft_p50", Source::Ttft, 0.50),
    ("ttft_p90", Source::Ttft, 0.90),
];

#[derive(Debug, PartialEq, Eq)]
enum Gate {
    Ok,
    Short,
    Trend,
    Cov,
}

fn window_gate(w: &[SuperPass], cov_bounds: &[f64]) -> Gate {
    let loosest = cov_bounds.iter().copied().fold(f64::MIN, f64::max);
    let mut worst = Gate::Ok;
    for (s, p) in GATED {
        let Some(traj) = window_series(w, s, p) else {
            return Gate::Short;
        };
        if traj.len() < MIN_TREND_N {
            return Gate::Short;
        }
        if mk_hamed_rao(&traj) != Trend::Steady && rel_drift(&traj).abs() >= TREND_REL_DRIFT_MIN {
            return Gate::Trend;
        }
        if cov(&traj) > loosest {
            worst = Gate::Cov;
        }
    }
    worst
}

/// Maximal admissible plateaus `[lo, hi)`, at least [`MIN_TREND_N`] super-passes each.
pub fn segment_plateaus(series: &[SuperPass], cov_bounds: &[f64]) -> Vec<(usize, usize)> {
    let n = series.len();
    let mut out = Vec::new();
    let mut start = 0;
    while n >= MIN_TREND_N && start <= n - MIN_TREND_N {
        let mut hi = None;
        for end in start + MIN_TREND_N..=n {
            if window_gate(&series[start..end], cov_bounds) == Gate::Ok {
                hi = Some(end);
            } else {
                break;
            }
        }
        match hi {
            Some(h) => {
                out.push((start, h));
                start = h;
            }
            None => start += 1,
        }
    }
    out
}

/// Leading super-passes dropped: TPOT p50 more than `band` from the back half's median.
pub fn adaptive_warmup(series: &[SuperPass], band: f64) -> usize {
    let vals = percentile_series(series, Source::Tpot, 0.50);
    let n = vals.len();
    if n < MIN_TREND_N {
        return 1;
    }
    let steady = match median(&vals[n / 2..]) {
        m if m != 0.0 => m,
        _ => ZERO_MEDIAN_FLOOR,
    };
    let cap = 1.max((n as f64 * 0.5) as usize);
    let mut w = 0;
    while w < cap && (vals[w] - steady).abs() / steady > band {
        w += 1;
    }
    w.max(1)
}

/// The minimum steady-window wall time of a window and whether it falls short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShortWindow {
    /// The window is shorter than its minimum.
    pub is_short: bool,
    /// The window's span, s.
    pub window_duration_s: f64,
    /// Its minimum, s.
    pub min_duration_s: f64,
    /// Which term set the minimum (`kstar`, `latency`, `floor`).
    pub dominant: Cow<'static, str>,
    /// k*: super-passes the CoV asks for.
    pub kstar: u64,
    /// The CoV the k* term used.
    pub cov_b: f64,
    /// Mean super-pass span, s.
    pub tau_sp_s: f64,
    /// Latency p90, s.
    pub l_p90_s: f64,
}

/// The minimum duration of window `w` and whether it falls short.
pub fn min_steady_duration(w: &[SuperPass]) -> ShortWindow {
    let tpot_p50: Vec<f64> = w
        .iter()
        .filter(|s| !s.tpot_ns.is_empty())
        .map(|s| percentile_lower(&sorted(&s.tpot_ns), 0.5))
        .collect();
    let cov_b = if tpot_p50.len() >= 2 {
        cov(&tpot_p50)
    } else {
        0.0
    };
    let spans: Vec<f64> = w
        .iter()
        .filter(|s| s.last_issue_ns > s.first_issue_ns && s.first_issue_ns >= 0)
        .map(|s| (s.last_issue_ns - s.first_issue_ns) as f64 / 1e9)
        .collect();
    let tau = if spans.is_empty() {
        0.0
    } else {
        median(&spans)
    };
    let lat = pooled(w, Source::Latency);
    let l_p90 = if lat.is_empty() {
        0.0
    } else {
        percentile_lower(&sorted(&lat), 0.9) / 1e9
    };
    let kstar = ((CI_Z_95 * cov_b / MIN_DUR_EPS).powi(2).ceil() as u64).max(MIN_TREND_N as u64);
    let t_prec = if kstar > MIN_TREND_N as u64 {
        kstar as f64 * tau
    } else {
        0.0
    };
    let t_relax = MIN_DUR_RELAX_MULT * l_p90;
    let min_s = t_prec.max(t_relax).max(MIN_DUR_FLOOR_S);
    let dominant = if min_s == t_prec {
        "precision"
    } else if min_s == t_relax {
        "relaxation"
    } else {
        "floor"
    };
    let dur = issue_span_ns(w) as f64 / 1e9;
    ShortWindow {
        is_short: dur < min_s,
        window_duration_s: dur,
        min_duration_s: min_s,
        dominant: Cow::Borrowed(dominant),
        kstar,
        cov_b,
        tau_sp_s: tau,
        l_p90_s: l_p90,
    }
}

/// Percentiles of a window's pooled samples (the lower method).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Samples.
    pub count: usize,
    /// Their mean.
    pub mean: f64,
    /// Median (lower).
    pub p50: f64,
    /// 90th percentile (lower).
    pub p90: f64,
    /// 99th percentile (lower).
    pub p99: f64,
}

fn summarize(v: &[f64]) -> Option<Summary> {
    if v.is_empty() {
        return None;
    }
    let s = sorted(v);
    Some(Summary {
        count: s.len(),
        mean: mean(&s),
        p50: percentile_lower(&s, 0.5),
        p90: percentile_lower(&s, 0.9),
        p99: percentile_lower(&s, 0.99),
    })
}

/// A detected window, in post-warmup super-pass indices `[sp_lo, sp_hi)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyWindow {
    /// First super-pass (inclusive).
    pub sp_lo: usize,
    /// Last super-pass (exclusive).
    pub sp_hi: usize,
    /// Samples in it.
    pub n_samples: usize,
    /// First issue instant of the window (the samples' clock).
    pub start_ns: i64,
    /// Last issue instant of the window.
    pub end_ns: i64,
    /// Which plateau it is.
    pub plateau_index: usize,
    /// Plateaus found.
    pub n_plateaus: usize,
    /// Plateaus skipped as too short.
    pub skipped_short: usize,
}

/// A later plateau's TPOT level shift.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anomaly {
    /// A later plateau shifted.
    pub detected: bool,
    /// Where (super-pass), when it did.
    pub change_point_sp: Option<usize>,
    /// TPOT mean change, %.
    pub delta_pct: f64,
    /// The Pettitt test behind it.
    pub pettitt: Option<Pettitt>,
    /// The plateaus, `[lo, hi)`.
    pub plateaus: Vec<(usize, usize)>,
}

/// The detector's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Steady {
    /// A window was found.
    pub found: bool,
    /// Why not, when none was.
    pub reason: Option<String>,
    /// Samples per super-pass.
    pub superpass_size: usize,
    /// Super-passes.
    pub n_super_passes: usize,
    /// Warmup super-passes skipped.
    pub warmup: usize,
    /// The window.
    pub window: Option<SteadyWindow>,
    /// TTFT over the window, ns.
    pub ttft_ns: Option<Summary>,
    /// TPOT over the window, ns.
    pub tpot_ns: Option<Summary>,
    /// Latency over the window, ns.
    pub latency_ns: Option<Summary>,
    /// Per-user TPS (1e9 / mean TPOT) and system TPS (tokens / issue span), with 95 % intervals.
    pub tps_per_user: Option<(f64, [f64; 2])>,
    /// System TPS and its 95 % interval.
    pub tps_system: Option<(f64, [f64; 2])>,
    /// A later level shift.
    pub anomaly: Anomaly,
    /// The minimum-duration check.
    pub short_window: Option<ShortWindow>,
    /// TPOT and TTFT p50/p90 from the window's start to the run's end.
    pub global_trend: Vec<(Cow<'static, str>, Trend)>,
    /// Series trending up over the same span.
    pub drifting_up: Vec<Cow<'static, str>>,
}

fn level_shift(series: &[SuperPass], plateaus: &[(usize, usize)], base: usize) -> Anomaly {
    let none = |pet| Anomaly {
        detected: false,
        change_point_sp: None,
        delta_pct: 0.0,
        pettitt: pet,
        plateaus: plateaus.to_vec(),
    };
    if plateaus.len() <= base + 1 {
        return none(None);
    }
    let tpot_mean = |(lo, hi): (usize, usize)| {
        let v = pooled(&series[lo..hi], Source::Tpot);
        if v.is_empty() {
            0.0
        } else {
            mean(&v)
        }
    };
    let first = tpot_mean(plateaus[base]);
    if first <= 0.0 {
        return none(None);
    }
    let sp_means: Vec<f64> = series
        .iter()
        .map(|s| {
            if s.tpot_ns.is_empty() {
                0.0
            } else {
                mean(&s.tpot_ns)
            }
        })
        .collect();
    let pet = pettitt(&sp_means);
    for &p in &plateaus[base + 1..] {
        let rel = (tpot_mean(p) - first) / first;
        if rel.abs() > 0.05 && pet.significant {
            return Anomaly {
                detected: true,
                change_point_sp: Some(pet.change_point),
                delta_pct: rel * 100.0,
                pettitt: Some(pet),
                plateaus: plateaus.to_vec(),
            };
        }
    }
    none(Some(pet))
}

fn global_trend(series: &[SuperPass]) -> Vec<(Cow<'static, str>, Trend)> {
    WATCH
        .iter()
        .map(|&(k, s, p)| {
            let t = percentile_series(series, s, p);
            (
                Cow::Borrowed(k),
                if t.len() >= MIN_TREND_N {
                    mk_hamed_rao(&t)
                } else {
                    Trend::Insufficient
                },
            )
        })
        .collect()
}

/// The first steady plateau after the adaptive warmup (the reference's
/// `compute_steady_state_metrics` with its defaults: auto warmup on TPOT p50 with a 5 % band,
/// the Hamed–Rao gate, CoV bounds `cov_bounds`, the minimum duration enforced).
pub fn detect(full: &[SuperPass], superpass_size: usize, cov_bounds: &[f64]) -> Steady {
    analyse(full, superpass_size, cov_bounds, None, true)
}

/// [`detect`] with the reference's two knobs: a fixed `warmup` (`None`: the adaptive crop)
/// and whether a plateau shorter than its minimum duration is refused (`enforce_min_duration`)
/// or reported with `short_window` saying so.
pub fn analyse(
    full: &[SuperPass],
    superpass_size: usize,
    cov_bounds: &[f64],
    warmup: Option<usize>,
    enforce_min_duration: bool,
) -> Steady {
    let warmup = warmup.unwrap_or_else(|| adaptive_warmup(full, 0.05));
    let series = if warmup < full.len() {
        &full[warmup..]
    } else {
        &[][..]
    };
    let plateaus = segment_plateaus(series, cov_bounds);
    if plateaus.is_empty() {
        return no_plateau(full.len(), series, superpass_size, warmup, cov_bounds);
    }
    let shorts: Vec<ShortWindow> = plateaus
        .iter()
        .map(|&(lo, hi)| min_steady_duration(&series[lo..hi]))
        .collect();
    let (sel, report) = pick_plateau(&shorts, enforce_min_duration);
    let short = shorts[report].clone();
    let (lo, hi) = plateaus[report];
    let w = &series[lo..hi];
    let ttft = pooled(w, Source::Ttft);
    let tpot = pooled(w, Source::Tpot);
    let gt = global_trend(&series[lo..]);
    Steady {
        found: sel.is_some(),
        reason: sel
            .is_none()
            .then(|| too_short_reason(plateaus.len(), &short)),
        superpass_size,
        n_super_passes: full.len(),
        warmup,
        window: Some(SteadyWindow {
            sp_lo: lo,
            sp_hi: hi,
            n_samples: ttft.len(),
            start_ns: series[lo].first_issue_ns,
            end_ns: series[hi - 1].last_issue_ns,
            plateau_index: report,
            n_plateaus: plateaus.len(),
            skipped_short: shorts[..report].iter().filter(|s| s.is_short).count(),
        }),
        ttft_ns: summarize(&ttft),
        tpot_ns: summarize(&tpot),
        latency_ns: summarize(&pooled(w, Source::Latency)),
        tps_per_user: Some(tps_per_user(w, &tpot)),
        tps_system: Some(tps_system(w)),
        anomaly: level_shift(series, &plateaus, report),
        short_window: Some(short),
        drifting_up: up(&gt),
        global_trend: gt,
    }
}

/// The result when no plateau is admissible, with the reason naming what trends, if anything.
fn no_plateau(
    n_super_passes: usize,
    series: &[SuperPass],
    superpass_size: usize,
    warmup: usize,
    cov_bounds: &[f64],
) -> Steady {
    let global_trend = global_trend(series);
    Steady {
        found: false,
        reason: Some(no_plateau_reason(series, cov_bounds)),
        superpass_size,
        n_super_passes,
        warmup,
        window: None,
        ttft_ns: None,
        tpot_ns: None,
        latency_ns: None,
        tps_per_user: None,
        tps_system: None,
        anomaly: level_shift(series, &[], 0),
        short_window: None,
        drifting_up: up(&global_trend),
        global_trend,
    }
}

/// Why no plateau is admissible: the gated TPOT series that drift, or a CoV above every bound.
fn no_plateau_reason(series: &[SuperPass], cov_bounds: &[f64]) -> String {
    let drifters: Option<Vec<&str>> = GATED
        .iter()
        .zip(["tpot_p50", "tpot_p90"])
        .map(|(&(src, p), k)| {
            let t = window_series(series, src, p)?;
            (t.len() >= MIN_TREND_N).then_some(
                (mk_hamed_rao(&t) != Trend::Steady && rel_drift(&t).abs() >= TREND_REL_DRIFT_MIN)
                    .then_some(k),
            )
        })
        .collect::<Option<Vec<Option<&str>>>>()
        .map(|v| v.into_iter().flatten().collect());
    let loosest = cov_bounds.iter().copied().fold(f64::MIN, f64::max);
    match drifters {
        Some(d) if d.is_empty() => format!(
            "no admissible steady plateau: the run is trend-steady across all {} super-passes, but its CoV exceeds {loosest}",
            series.len()
        ),
        Some(d) => format!("no admissible steady plateau: {} trends across the run", d.join(", ")),
        None => "no admissible steady plateau".into(),
    }
}

/// The plateau selected (the first long enough, or the first when the minimum duration is not
/// enforced; `None` when none is) and the one reported (the selected, else the longest).
fn pick_plateau(shorts: &[ShortWindow], enforce_min_duration: bool) -> (Option<usize>, usize) {
    let sel = if enforce_min_duration {
        shorts.iter().position(|s| !s.is_short)
    } else {
        Some(0)
    };
    let report = sel.unwrap_or_else(|| {
        (0..shorts.len())
            .max_by(|&a, &b| {
                shorts[a]
                    .window_duration_s
                    .total_cmp(&shorts[b].window_duration_s)
            })
            .unwrap_or(0)
    });
    (sel, report)
}

/// Why no plateau was selected: even the longest of them is shorter than its minimum duration.
fn too_short_reason(n_plateaus: usize, short: &ShortWindow) -> String {
    format!(
        "all {} admissible plateau(s) too short: longest {:.0}s < {:.0}s required ({}-dominated)",
        n_plateaus, short.window_duration_s, short.min_duration_s, short.dominant
    )
}

/// Tokens per second per user over window `w` (`tpot`: its pooled TPOTs), with the interval
/// from the batch means of its super-passes' mean TPOTs.
fn tps_per_user(w: &[SuperPass], tpot: &[f64]) -> (f64, [f64; 2]) {
    let mean_tpot = if tpot.is_empty() { 0.0 } else { mean(tpot) };
    let sp_means: Vec<f64> = w
        .iter()
        .filter(|s| !s.tpot_ns.is_empty())
        .map(|s| mean(&s.tpot_ns))
        .collect();
    let ci = if sp_means.len() >= 2 {
        batch_means_ci(&sp_means)
    } else {
        (mean_tpot, mean_tpot)
    };
    let per_user = |t: f64| if t > 0.0 { 1e9 / t } else { 0.0 };
    (per_user(mean_tpot), [per_user(ci.1), per_user(ci.0)])
}

/// System tokens per second over window `w` (its output tokens over its issue span), with the
/// half-width of the batch means of its super-passes' rates around it.
fn tps_system(w: &[SuperPass]) -> (f64, [f64; 2]) {
    let sys = |tokens: u64, span: i64| {
        if span > 0 {
            tokens as f64 / (span as f64 / 1e9)
        } else {
            0.0
        }
    };
    let system = sys(w.iter().map(|s| s.out_tokens).sum(), issue_span_ns(w));
    let sp_sys: Vec<f64> = w
        .iter()
        .filter(|s| s.last_issue_ns > s.first_issue_ns && s.first_issue_ns >= 0)
        .map(|s| sys(s.out_tokens, s.last_issue_ns - s.first_issue_ns))
        .collect();
    let system_ci = if sp_sys.len() >= 2 {
        let (a, b) = batch_means_ci(&sp_sys);
        let half = (b - a) / 2.0;
        [system - half, system + half]
    } else {
        [system, system]
    };
    (system, system_ci)
}

fn up(gt: &[(Cow<'static, str>, Trend)]) -> Vec<Cow<'static, str>> {
    gt.iter()
        .filter(|(_, t)| *t == Trend::Up)
        .map(|(k, _)| k.clone())
        .collect()
}

// ------------------------------------------------------------------ NATL (agentic)

/// The reference's experimental agentic figure: per-trajectory output tokens over the sum of its
/// turns' latencies, in completion order, and its steadiness over super-passes of 32
/// trajectories (`build_natl_result`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Natl {
    /// Trajectories completed.
    pub n_trajectories: usize,
    /// Trajectories per super-pass.
    pub superpass_trajectories: usize,
    /// Super-passes.
    pub n_super_passes: usize,
    /// 10th percentile, tokens/s.
    pub p10: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Mean.
    pub mean: f64,
    /// CoV of the whole NATL distribution.
    pub cov: f64,
    /// CoV of the per-super-pass medians.
    pub across_cov: f64,
    /// Its batch-means standard error, %.
    pub batch_means_se_pct: f64,
    /// At least two super-passes and `across_cov` within 0.15.
    pub found: bool,
}

/// NATL over completed samples (tokens and latency summed per trajectory).
pub fn natl(samples: &[Sample]) -> Natl {
    let mut per: HashMap<&str, (f64, u64, u64)> = HashMap::new(); // latency s, tokens, last end
    for s in samples {
        let Some(lat) = s.latency_ns else { continue };
        let e = per.entry(s.trajectory.as_str()).or_default();
        e.0 += lat / 1e9;
        e.1 += s.output_tokens.unwrap_or(0);
        e.2 = e.2.max(s.issue_ns + lat as u64);
    }
    let mut pairs: Vec<(u64, f64)> = per
        .values()
        .filter(|(l, t, _)| *l > 0.0 && *t > 0)
        .map(|(l, t, end)| (*end, *t as f64 / l))
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let v: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    let k = AGENTIC_SUPERPASS_TRAJECTORIES;
    let sp_median: Vec<f64> = v
        .chunks(k)
        .filter(|c| c.len() >= k / 2)
        .map(median)
        .collect();
    let n_sp = sp_median.len();
    let across = if n_sp >= 2 { cov(&sp_median) } else { 0.0 };
    let s = sorted(&v);
    let pct = |p| {
        if s.is_empty() {
            0.0
        } else {
            percentile_lower(&s, p)
        }
    };
    Natl {
        n_trajectories: v.len(),
        superpass_trajectories: k,
        n_super_passes: n_sp,
        p10: pct(0.10),
        p50: pct(0.50),
        p90: pct(0.90),
        p99: pct(0.99),
        mean: if v.is_empty() { 0.0 } else { mean(&v) },
        cov: cov(&v),
        across_cov: across,
        batch_means_se_pct: if n_sp > 0 {
            100.0 * across / (n_sp as f64).sqrt()
        } else {
            0.0
        },
        found: n_sp >= 2 && across <= AGENTIC_COV_BOUNDS[1],
    }
}

/// What the benchmark says of an agentic run's steady state, and tokentap's diagnostics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgenticSteadyState {
    /// Always `false` for an agentic run: the reference does not detect its steady state.
    pub official: bool,
    /// `whole_run`: the official numbers are the whole run's (the rules' fallback).
    pub basis: Cow<'static, str>,
    /// Why no window is official.
    pub note: Cow<'static, str>,
    /// The reference's experimental per-trajectory throughput (not for submissions).
    pub natl: Natl,
    /// tokentap's diagnostic: the reference's window detector over the agentic turns, in
    /// super-passes of `ceil(C / D) · D` trajectories' worth of turns.
    pub window: Steady,
}

impl AgenticSteadyState {
    /// [`AgenticSteadyState::note`]'s text.
    pub const NOTE: &'static str = "the reference's steady-state detector does not support agentic runs (its `agentic` profile): no window is official, the official numbers are the whole run's; NATL is the reference's experimental figure and the window tokentap's diagnostic";

    /// What the benchmark and tokentap's diagnostics say of `samples` at `concurrency` over a dataset of `dataset_size`.
    pub fn of(samples: &[Sample], concurrency: u64, dataset_size: u64) -> AgenticSteadyState {
        let d = dataset_size.max(1);
        let trajectories_per_sp = d * concurrency.max(1).div_ceil(d);
        let trajectories = samples
            .iter()
            .map(|s| s.trajectory.as_str())
            .collect::<std::collections::HashSet<_>>()
            .len()
            .max(1);
        let per_trajectory = samples.len() as f64 / trajectories as f64;
        let size = ((per_trajectory * trajectories_per_sp as f64).round() as usize).max(1);
        AgenticSteadyState {
            official: false,
            basis: Cow::Borrowed("whole_run"),
            note: Cow::Borrowed(Self::NOTE),
            natl: natl(samples),
            window: detect(&series(samples, size), size, &DEFAULT_COV_BOUNDS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series of `n` super-passes of `per` samples, issued 1 s apart, TPOT from `tpot(i)`.
    fn synth(n: usize, per: usize, tpot: impl Fn(usize, usize) -> f64) -> Vec<SuperPass> {
        let mut samples = Vec::new();
        for i in 0..n {
            for j in 0..per {
                let t = tpot(i, j);
                samples.push(Sample {
                    issue_ns: ((i * per + j) as u64) * 1_000_000_000,
                    ttft_ns: Some(50e6),
                    latency_ns: Some(2e9),
                    tpot: Some((t * 100.0, 100)),
                    trajectory: format!("t{}", (i * per + j) % 7),
                    output_tokens: Some(100),
                });
            }
        }
        series(&samples, per)
    }

    #[test]
    fn statistics_match_python() {
        assert_eq!(median(&[3.0, 1.0, 2.0, 4.0]), 2.5);
        assert_eq!(percentile_lower(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.9), 4.0);
        assert!((cov(&[1.0, 2.0, 3.0]) - 0.408248290463863).abs() < 1e-12);
        // mann_kendall_hamed_rao([1,2,3,4,5,6]) -> up; [1,1,1,1] -> steady (no variance sign).
        assert_eq!(mk_hamed_rao(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), Trend::Up);
        assert_eq!(mk_hamed_rao(&[5.0, 4.0, 3.0, 2.0, 1.0, 0.5]), Trend::Down);
        assert_eq!(mk_hamed_rao(&[1.0, 1.0, 1.0, 1.0]), Trend::Steady);
        assert_eq!(mk_hamed_rao(&[1.0, 2.0, 3.0]), Trend::Insufficient);
        // pettitt([1,1,1,1,5,5,5,5]): split after 4, K = 16, p = 2·exp(−6·256/576).
        let p = pettitt(&[1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0]);
        assert_eq!((p.change_point, p.k_stat), (4, 16.0));
        assert!((p.pvalue - 2.0 * (-6.0f64 * 256.0 / 576.0).exp()).abs() < 1e-12);
        assert_eq!(batch_means_ci(&[1.0, 3.0]), (2.0 - 12.706, 2.0 + 12.706));
    }

    #[test]
    fn a_flat_long_run_is_steady_after_its_warmup() {
        // 13 super-passes of 60 samples, 60 s each; the first two ramp (TPOT high), the rest
        // flat with small jitter.
        let s = synth(13, 60, |i, j| {
            if i < 2 {
                30e6
            } else {
                10e6 * (1.0 + 0.01 * ((j % 5) as f64 - 2.0))
            }
        });
        let r = detect(&s, 60, &DEFAULT_COV_BOUNDS);
        assert_eq!(r.warmup, 2);
        assert!(r.found, "{r:?}");
        let w = r.window.unwrap();
        assert_eq!((w.sp_lo, w.sp_hi), (0, 11));
        // 1e9 / mean TPOT ≈ 100 tok/s per user; system = tokens over the issue span (659 s).
        let (pu, _) = r.tps_per_user.unwrap();
        assert!((pu - 100.0).abs() < 0.5, "{pu}");
        assert!((r.tps_system.unwrap().0 - 66_000.0 / 659.0).abs() < 1e-6);
        assert!(!r.anomaly.detected);
    }

    #[test]
    fn a_short_run_is_not_found_and_says_why() {
        let s = synth(6, 10, |_, _| 10e6);
        let r = detect(&s, 10, &DEFAULT_COV_BOUNDS);
        assert!(!r.found);
        assert!(
            r.reason.unwrap().contains("too short"),
            "one plateau, 49 s < 600 s"
        );
    }

    #[test]
    fn a_drifting_run_has_no_plateau() {
        // +30 % a super-pass: every 4-wide window's CoV is far above 0.08.
        let s = synth(12, 60, |i, _| 10e6 * (1.0 + 0.3 * i as f64));
        let r = detect(&s, 60, &DEFAULT_COV_BOUNDS);
        assert!(!r.found);
        let reason = r.reason.unwrap();
        assert!(reason.contains("tpot_p50, tpot_p90 trends"), "{reason}");
        assert!(r.drifting_up.contains(&Cow::Borrowed("tpot_p50")));
    }

    #[test]
    fn a_late_level_shift_is_an_anomaly() {
        // A flat plateau of 24 super-passes (60 s each), then TPOT doubles for 6.
        let s = synth(30, 60, |i, j| {
            let base = if i < 24 { 10e6 } else { 20e6 };
            base * (1.0 + 0.01 * ((j % 3) as f64 - 1.0))
        });
        let r = detect(&s, 60, &DEFAULT_COV_BOUNDS);
        assert!(r.found, "{r:?}");
        assert!(r.anomaly.detected, "{:?}", r.anomaly);
        assert!((r.anomaly.delta_pct - 100.0).abs() < 1.0);
    }

    #[test]
    fn natl_per_trajectory() {
        let samples: Vec<Sample> = (0..70)
            .map(|i| Sample {
                issue_ns: i * 1_000,
                latency_ns: Some(1e9),
                trajectory: format!("c{i}"),
                output_tokens: Some(100),
                ..Sample::default()
            })
            .collect();
        let n = natl(&samples);
        assert_eq!((n.n_trajectories, n.n_super_passes), (70, 2));
        assert_eq!((n.p50, n.across_cov), (100.0, 0.0));
        assert!(n.found);
    }

    // ---- The reference's own cases (tests/unit/metrics/test_steady_state_diagnostics.py in
    // mlcommons/endpoints), ported with their inputs and expectations.

    const BOUNDS: [f64; 3] = [0.03, 0.05, 0.08];

    /// `_mk_series`: per super-pass (tpot, ttft), 40 samples each, issue span 100 ns.
    fn mk_series(levels: &[(f64, f64)]) -> Vec<SuperPass> {
        levels
            .iter()
            .enumerate()
            .map(|(i, &(tp, tt))| SuperPass {
                n_issued: 40,
                first_issue_ns: i as i64 * 1000,
                last_issue_ns: i as i64 * 1000 + 100,
                ttft_ns: vec![tt; 40],
                tpot_ns: vec![tp; 40],
                latency_ns: vec![tp + tt; 40],
                out_tokens: 400,
            })
            .collect()
    }

    /// `_spanned_series`: explicit wall time per super-pass.
    fn spanned(n: usize, per_sp_span_s: f64, latency_s: f64) -> Vec<SuperPass> {
        (0..n)
            .map(|i| {
                let t = i as f64 * per_sp_span_s;
                SuperPass {
                    n_issued: 40,
                    first_issue_ns: (t * 1e9) as i64,
                    last_issue_ns: ((t + per_sp_span_s) * 1e9) as i64,
                    ttft_ns: vec![50.0; 40],
                    tpot_ns: vec![100.0; 40],
                    latency_ns: vec![latency_s * 1e9; 40],
                    out_tokens: 400,
                }
            })
            .collect()
    }

    fn analyse0(s: &[SuperPass], enforce: bool) -> Steady {
        analyse(s, 40, &BOUNDS, Some(0), enforce)
    }

    fn admissible(s: &[SuperPass], lo: usize, hi: usize) -> bool {
        window_gate(&s[lo..hi], &BOUNDS) == Gate::Ok
    }

    #[test]
    fn reference_trend_cases() {
        let up: Vec<f64> = (0..12).map(f64::from).collect();
        let down: Vec<f64> = (0..12).map(|i| f64::from(11 - i)).collect();
        let flat = [5.0; 12];
        assert_eq!(mann_kendall(&up), Trend::Up);
        assert_eq!(mann_kendall(&down), Trend::Down);
        assert_eq!(mann_kendall(&flat), Trend::Steady);
        assert_eq!(mk_hamed_rao(&up), Trend::Up);
        // A sawtooth fools plain MK; the Hamed–Rao correction refuses it.
        let saw = [
            0.0, 20.0, 2.0, 22.0, 4.0, 24.0, 6.0, 26.0, 8.0, 28.0, 10.0, 30.0,
        ];
        assert_eq!(mann_kendall(&saw), Trend::Up);
        assert_eq!(mk_hamed_rao(&saw), Trend::Steady);
        assert_eq!(mann_kendall(&[1.0, 2.0, 3.0]), Trend::Insufficient);
        let mut shift = vec![0.0; 8];
        shift.extend([10.0; 8]);
        let p = pettitt(&shift);
        assert!(p.significant);
        assert_eq!(p.change_point, 8);
        assert!(!pettitt(&[5.0; 16]).significant);
        assert_eq!(batch_means_ci(&[10.0; 4]), (10.0, 10.0));
        let (lo, hi) = batch_means_ci(&[8.0, 10.0, 12.0, 10.0]);
        assert!(lo < 10.0 && 10.0 < hi);
        assert_eq!(percentile_lower(&[1.0, 2.0, 3.0, 4.0], 0.99), 3.0);
    }

    #[test]
    fn reference_admissibility_and_plateaus() {
        let mut levels = vec![(100.0, 50.0); 4];
        levels.extend([(200.0, 60.0); 4]);
        let s = mk_series(&levels);
        assert!(admissible(&s, 0, 4));
        assert!(!admissible(&s, 2, 6), "a window across the jump");
        let small = mk_series(&[100.0, 100.6, 101.2, 101.8, 102.4, 103.0].map(|t| (t, 50.0)));
        assert!(
            admissible(&small, 0, 6),
            "3 % drift is under the effect floor"
        );
        let big = mk_series(&[100.0, 103.0, 106.0, 109.0, 112.0, 115.0].map(|t| (t, 50.0)));
        assert!(!admissible(&big, 0, 6), "15 % drift breaks");
        let mut stairs = vec![(100.0, 50.0); 6];
        stairs.extend([(200.0, 60.0); 6]);
        let s = mk_series(&stairs);
        let plateaus = segment_plateaus(&s, &BOUNDS);
        assert_eq!(plateaus, vec![(0, 6), (6, 12)]);
        let shift = level_shift(&s, &plateaus, 0);
        assert!(shift.detected);
        assert_eq!(shift.change_point_sp, Some(6));
        assert!(shift.delta_pct > 0.0);
        let flat = mk_series(&[(100.0, 50.0); 8]);
        assert_eq!(segment_plateaus(&flat, &BOUNDS), vec![(0, 8)]);
        assert!(!level_shift(&flat, &segment_plateaus(&flat, &BOUNDS), 0).detected);
    }

    #[test]
    fn reference_steady_state_cases() {
        // TTFT ramps, TPOT flat: TTFT does not gate, but it is warned as drifting up.
        let s = mk_series(
            &(0..8)
                .map(|i| (100.0, 50.0 + 15.0 * i as f64))
                .collect::<Vec<_>>(),
        );
        assert!(admissible(&s, 0, 8));
        let ss = analyse0(&s, false);
        assert!(ss.found);
        assert!(ss.drifting_up.contains(&Cow::Borrowed("ttft_p50")));
        assert!(!ss.drifting_up.contains(&Cow::Borrowed("tpot_p50")));
        // The first plateau is the result; the step after it is the anomaly.
        let mut stairs = vec![(100.0, 50.0); 6];
        stairs.extend([(200.0, 60.0); 6]);
        let ss = analyse0(&mk_series(&stairs), false);
        let w = ss.window.clone().unwrap();
        assert!(ss.found);
        assert_eq!((w.sp_lo, w.sp_hi), (0, 6));
        assert!(ss.tps_per_user.unwrap().0 > 0.0 && ss.tps_system.unwrap().0 > 0.0);
        assert_eq!(ss.ttft_ns.unwrap().count, 240);
        assert!(ss.anomaly.detected);
        // Window bounds and pooled latency.
        let s = mk_series(&[(100.0, 50.0); 6]);
        let ss = analyse0(&s, false);
        let w = ss.window.unwrap();
        assert_eq!(
            (w.start_ns, w.end_ns),
            (s[0].first_issue_ns, s[5].last_issue_ns)
        );
        assert_eq!(ss.latency_ns.unwrap().p50, 150.0);
        // A drifting run names the drifter.
        let ss = analyse0(
            &mk_series(
                &(0..8)
                    .map(|i| (10.0 * (i + 1) as f64, 50.0))
                    .collect::<Vec<_>>(),
            ),
            true,
        );
        assert!(!ss.found);
        assert!(ss.reason.unwrap().contains("trends across the run"));
        // A flat but noisy run: no plateau, rejected on CoV.
        let ss = analyse0(
            &mk_series(
                &(0..8)
                    .map(|i| (if i % 2 == 1 { 50.0 } else { 60.0 }, 50.0))
                    .collect::<Vec<_>>(),
            ),
            true,
        );
        assert!(!ss.found);
        assert!(ss.reason.unwrap().contains("CoV"));
        // Never settles.
        let ss = analyse0(
            &mk_series(
                &(0..8)
                    .map(|i| (100.0 + 20.0 * i as f64, 50.0))
                    .collect::<Vec<_>>(),
            ),
            false,
        );
        assert!(!ss.found);
        // Local plateau, then a global TPOT ramp: found, no anomaly, drifting up.
        let mut lv = vec![(100.0, 50.0); 6];
        lv.extend((1..8).map(|i| (100.0 + 25.0 * i as f64, 50.0)));
        let ss = analyse0(&mk_series(&lv), false);
        let w = ss.window.clone().unwrap();
        assert!(ss.found);
        assert_eq!((w.sp_lo, w.sp_hi), (0, 6));
        assert!(!ss.anomaly.detected);
        assert!(ss.drifting_up.contains(&Cow::Borrowed("tpot_p50")));
        assert!(!ss.drifting_up.contains(&Cow::Borrowed("ttft_p50")));
        assert!(analyse0(&mk_series(&[(100.0, 50.0); 8]), false)
            .drifting_up
            .is_empty());
    }

    #[test]
    fn reference_warmup_and_duration_cases() {
        let mut lv = vec![(20.0, 50.0), (30.0, 50.0), (40.0, 50.0)];
        lv.extend([(50.0, 50.0); 7]);
        assert_eq!(adaptive_warmup(&mk_series(&lv), 0.05), 3);
        assert_eq!(adaptive_warmup(&mk_series(&[(50.0, 50.0); 8]), 0.05), 1);
        let ramp: Vec<(f64, f64)> = (0..10).map(|i| (10.0 * (i + 1) as f64, 50.0)).collect();
        assert_eq!(adaptive_warmup(&mk_series(&ramp), 0.05), 5);

        let sw = min_steady_duration(&spanned(6, 1.0, 0.1));
        assert_eq!(
            (
                sw.dominant.as_ref(),
                sw.min_duration_s,
                sw.kstar,
                sw.is_short
            ),
            ("floor", 600.0, 4, true)
        );
        let sw = min_steady_duration(&spanned(6, 1.0, 200.0));
        assert_eq!(sw.dominant, "relaxation");
        assert!((sw.min_duration_s - 1000.0).abs() < 1e-3);
        let mut noisy = spanned(8, 50.0, 0.1);
        for (i, sp) in noisy.iter_mut().enumerate() {
            sp.tpot_ns = vec![if i % 2 == 0 { 100.0 } else { 160.0 }; 40];
        }
        let sw = min_steady_duration(&noisy);
        assert!(sw.kstar > 4);
        assert_eq!(sw.dominant, "precision");
        let sw = min_steady_duration(&spanned(4, 200.0, 1.0));
        assert_eq!(
            (
                sw.kstar,
                sw.dominant.as_ref(),
                sw.min_duration_s,
                sw.is_short
            ),
            (4, "floor", 600.0, false)
        );
        assert!(!min_steady_duration(&spanned(6, 120.0, 1.0)).is_short);

        let flat = mk_series(&[(100.0, 50.0); 8]);
        let ss = analyse0(&flat, true);
        assert!(!ss.found);
        assert!(ss.reason.unwrap().contains("too short"));
        assert!(ss.short_window.unwrap().is_short);
        assert!(ss.window.is_some(), "kept for context");
        let ss = analyse0(&flat, false);
        assert!(ss.found && ss.short_window.unwrap().is_short);
        let ss = analyse0(&spanned(8, 120.0, 1.0), true);
        assert!(ss.found && !ss.short_window.unwrap().is_short);
    }
}
