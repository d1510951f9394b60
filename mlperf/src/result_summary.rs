//! `result_summary.json`: the per-point summary a submission publishes, in the reference's
//! schema, units (ns, tokens) and arithmetic (mlcommons/endpoints `metrics/report.py`,
//! `metrics_aggregator/registry.py`, `metrics_table.py`).
//!
//! Which samples count (docs/benchmark.md#result-summary, docs/records.md): every sample *issued*
//! while performance tracking was on — completed, failed and aborted-after-a-failure alike (the
//! reference issues aborted turns and completes them at once with an error). Per series:
//! - `ttft`: first chunk with content, reasoning or a tool-call delta − issue (ns);
//! - `latency`: complete − issue, for every completed sample (failed ones too);
//! - `tpot`: (complete − first chunk) / the TPOT-denominator tokens, for samples with output and
//!   a denominator > 0 (float ns);
//! - `output_sequence_lengths`, `input_sequence_lengths`: reference-tokenizer counts.
//!
//! Each series gives total, min, max, the median (= p50), avg, sample std-dev, percentiles
//! (numpy `method="lower"`), the early-stopping estimates (TTFT, TPOT, latency) and a 30-bucket
//! log-spaced histogram — with the reference's float arithmetic: integer totals divided
//! exactly, `sum_sq` carried as a float, glibc's `log`/`exp` for the bucket edges. `qps` =
//! completed / tracked duration, `tps` = Σ OSL / tracked duration.
//!
//! The rules' primary metrics of the point ([`Primary`]) are derived here from the same inputs.

use crate::early_stopping;
use crate::pyjson;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The reference's percentile grid, in its order.
pub const PERCENTILES: [f64; 12] = [
    99.9, 99.0, 97.0, 95.0, 90.0, 80.0, 75.0, 50.0, 25.0, 10.0, 5.0, 1.0,
];

/// `str(p)` of a grid entry, as the reference keys it.
pub fn key(p: f64) -> String {
    pyjson::py_float_repr(p)
}

const BUCKETS: usize = 30;

/// One series' raw values, in recording order.
#[derive(Debug, Clone)]
pub enum Series {
    /// Integer samples.
    Int(Vec<i64>),
    /// Float samples.
    Float(Vec<f64>),
}

/// The exact rollup of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollup {
    /// Samples.
    pub count: usize,
    /// Their sum.
    pub total: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// The median (numpy `lower`).
    pub median: f64,
    /// The mean.
    pub avg: f64,
    /// The standard deviation (population).
    pub std_dev: f64,
    /// In [`PERCENTILES`] order.
    pub percentiles: Vec<(f64, f64)>,
}

impl Rollup {
    /// A grid percentile (e.g. 90.0).
    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, v)| *v)
    }
}

/// `a / b` for integers, correctly rounded (Python's `int / int`).
pub fn div_round(a: i128, b: u128) -> f64 {
    if b == 0 {
        return f64::NAN;
    }
    let neg = a < 0;
    let a = a.unsigned_abs();
    if a == 0 {
        return 0.0;
    }
    let la = 128 - a.leading_zeros() as i32;
    let lb = 128 - b.leading_zeros() as i32;
    // Scale so the quotient has ~64 significant bits: num / den ≈ 2^64.
    let s = 64 + lb - la;
    let (num, den) = if s >= 0 {
        if la + s > 127 {
            // Cannot shift the numerator that far; shift the denominator down instead, exactly
            // only when its low bits are zero — otherwise fall back to float division.
            return sign(neg, a as f64 / b as f64);
        }
        (a << s, b)
    } else {
        if lb - s > 127 {
            return sign(neg, a as f64 / b as f64);
        }
        (a, b << (-s))
    };
    let q = num / den;
    let sticky = num % den != 0;
    let bits = 128 - q.leading_zeros() as i32;
    let drop = (bits - 53).max(0);
    let mut mant = q >> drop;
    if drop > 0 {
        let rem = q & ((1u128 << drop) - 1);
        let half = 1u128 << (drop - 1);
        let up = rem > half || (rem == half && (sticky || mant & 1 == 1));
        if up {
            mant += 1;
        }
    }
    let v = (mant as f64) * 2f64.powi(drop - s);
    sign(neg, v)
}

fn sign(neg: bool, v: f64) -> f64 {
    if neg {
        -v
    } else {
        v
    }
}

/// TPOT of one sample: (complete − first chunk) / tokens, in float ns (Python `int / int`).
pub fn tpot_ns(after_first_ns: i64, tokens: u64) -> Option<f64> {
    (tokens > 0).then(|| div_round(i128::from(after_first_ns), u128::from(tokens)))
}

/// `np.percentile(sorted, p, method="lower")`.
fn lower<T: Copy>(sorted: &[T], p: f64) -> T {
    let idx = ((sorted.len() - 1) as f64 * (p / 100.0)).floor() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// `_log_spaced_edges(low, high, 30)`.
fn edges(low: f64, high: f64) -> Vec<f64> {
    let safe_low = low.max(1.0);
    let safe_high = high.max(safe_low * 10.0);
    let (lo, hi) = (safe_low.ln(), safe_high.ln());
    let step = (hi - lo) / BUCKETS as f64;
    (0..=BUCKETS)
        .map(|i| (lo + i as f64 * step).exp())
        .collect()
}

/// `np.histogram(np.clip(values, e[0], e[-1]), bins=e)`: `[e_i, e_i+1)`, the last bin closed.
fn histogram(values: &[f64], e: &[f64]) -> Vec<u64> {
    let mut counts = vec![0u64; e.len() - 1];
    let (first, last) = (e[0], e[e.len() - 1]);
    for &v in values {
        let v = v.clamp(first, last);
        // Index of the last edge <= v (bins are half-open), the top edge in the last bin.
        let i = e.partition_point(|x| *x <= v).saturating_sub(1);
        let last_bin = counts.len() - 1;
        counts[i.min(last_bin)] += 1;
    }
    counts
}

fn num(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

impl Series {
    /// Values.
    pub fn len(&self) -> usize {
        match self {
            Series::Int(v) => v.len(),
            Series::Float(v) => v.len(),
        }
    }

    /// No value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The exact rollup; `None` when empty.
    pub fn rollup(&self) -> Option<Rollup> {
        if self.is_empty() {
            return None;
        }
        Some(match self {
            Series::Int(v) => {
                let n = v.len();
                let total: i128 = v.iter().map(|x| i128::from(*x)).sum();
                let sum_sq: u128 = v
                    .iter()
                    .map(|x| (i128::from(*x) * i128::from(*x)) as u128)
                    .sum();
                let mut s = v.clone();
                s.sort_unstable();
                let std_dev = if n > 1 {
                    // `float(sum_sq) - total * total / n`, the second an exact big-int division.
                    let tt = total.unsigned_abs() * total.unsigned_abs();
                    let var_num = sum_sq as f64 - div_round(tt as i128, n as u128);
                    (var_num / (n - 1) as f64).max(0.0).sqrt()
                } else {
                    0.0
                };
                let percentiles: Vec<(f64, f64)> = PERCENTILES
                    .iter()
                    .map(|p| (*p, lower(&s, *p) as f64))
                    .collect();
                Rollup {
                    count: n,
                    total: total as f64,
                    min: s[0] as f64,
                    max: s[n - 1] as f64,
                    median: lower(&s, 50.0) as f64,
                    avg: div_round(total, n as u128),
                    std_dev,
                    percentiles,
                }
            }
            Series::Float(v) => {
                let n = v.len();
                let mut total = 0.0f64;
                let mut sum_sq = 0.0f64;
                let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
                for &x in v {
                    total += x;
                    sum_sq += x * x;
                    min = min.min(x);
                    max = max.max(x);
                }
                let mut s = v.clone();
                s.sort_unstable_by(f64::total_cmp);
                let std_dev = if n > 1 {
                    let var_num = sum_sq - total * total / n as f64;
                    (var_num / (n - 1) as f64).max(0.0).sqrt()
                } else {
                    0.0
                };
                Rollup {
                    count: n,
                    total,
                    min,
                    max,
                    median: lower(&s, 50.0),
                    avg: total / n as f64,
                    std_dev,
                    percentiles: PERCENTILES.iter().map(|p| (*p, lower(&s, *p))).collect(),
                }
            }
        })
    }

    /// The series' object in `result_summary.json`; `early_stopping` adds the estimates (the
    /// reference computes them for TTFT, TPOT and latency).
    pub fn to_json(&self, early_stopping: bool) -> Value {
        let es_targets: Vec<f64> = PERCENTILES.iter().copied().filter(|p| *p >= 50.0).collect();
        let mut o = Map::new();
        let Some(r) = self.rollup() else {
            if early_stopping {
                let mut es = Map::new();
                for p in &es_targets {
                    es.insert(key(*p), Value::Null);
                }
                o.insert("early_stopping_percentiles".into(), Value::Object(es));
            }
            return Value::Object(o);
        };
        let (total, min, max, sorted_f, es_vals): (Value, Value, Value, Vec<f64>, Vec<Value>) =
            match self {
                Series::Int(v) => {
                    let mut s = v.clone();
                    s.sort_unstable();
                    let es = es_targets
                        .iter()
                        .map(|p| {
                            early_stopping::estimate(&s, *p).map_or(Value::Null, |x| num(x as f64))
                        })
                        .collect();
                    let total: i128 = v.iter().map(|x| i128::from(*x)).sum();
                    (
                        Value::from(total as i64),
                        Value::from(s[0]),
                        Value::from(s[s.len() - 1]),
                        s.iter().map(|x| *x as f64).collect(),
                        es,
                    )
                }
                Series::Float(v) => {
                    let mut s = v.clone();
                    s.sort_unstable_by(f64::total_cmp);
                    let es = es_targets
                        .iter()
                        .map(|p| early_stopping::estimate(&s, *p).map_or(Value::Null, num))
                        .collect();
                    (num(r.total), num(r.min), num(r.max), s, es)
                }
            };
        o.insert("total".into(), total);
        o.insert("min".into(), min);
        o.insert("max".into(), max);
        o.insert("median".into(), num(r.median));
        o.insert("avg".into(), num(r.avg));
        o.insert("std_dev".into(), num(r.std_dev));
        let mut pct = Map::new();
        for (p, v) in &r.percentiles {
            pct.insert(key(*p), num(*v));
        }
        o.insert("percentiles".into(), Value::Object(pct));
        if early_stopping {
            let mut es = Map::new();
            for (p, v) in es_targets.iter().zip(es_vals) {
                es.insert(key(*p), v);
            }
            o.insert("early_stopping_percentiles".into(), Value::Object(es));
        }
        let e = edges(r.min, r.max);
        let counts = histogram(&sorted_f, &e);
        let mut h = Map::new();
        h.insert(
            "buckets".into(),
            Value::Array(
                e.windows(2)
                    .map(|w| Value::Array(vec![num(w[0]), num(w[1])]))
                    .collect(),
            ),
        );
        h.insert(
            "counts".into(),
            Value::Array(counts.into_iter().map(Value::from).collect()),
        );
        o.insert("histogram".into(), Value::Object(h));
        Value::Object(o)
    }
}

/// The samples of one performance window and what the summary says about the run.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The reference client's version string written in the file.
    pub version: String,
    /// Tracked samples issued (the sent ones and the aborted ones).
    pub issued: u64,
    /// Tracked samples that completed (successfully or not).
    pub completed: u64,
    /// Tracked samples with an error (failed, timed out, aborted).
    pub failed: u64,
    /// Start of tracking → last completion of a tracked sample; `None` when nothing completed.
    pub duration_ns: Option<u64>,
    /// The run finished (not interrupted) and every token count is in.
    pub complete: bool,
    /// The run was interrupted.
    pub interrupted: bool,
    /// TTFT of each tracked ok sample, ns.
    pub ttft_ns: Vec<i64>,
    /// Latency of each tracked sample, ns.
    pub latency_ns: Vec<i64>,
    /// TPOT of each tracked sample with tokens after the first chunk, ns.
    pub tpot_ns: Vec<f64>,
    /// OSL of each tracked sample.
    pub osl: Vec<i64>,
    /// The OSL of every completed turn of the run, tracked or not (the OSL gate's series).
    pub osl_full_run: Vec<i64>,
    /// ISL of each tracked sample.
    pub isl: Vec<i64>,
    /// `stop`, `length`, `tool_calls`, `content_filter`, `function_call`, `other`.
    pub finish_reasons: [u64; 6],
    /// The run's configuration as the file records it.
    pub run_config: Value,
    /// Σ OSL and Σ latency of the tracked turns that completed with output (the v1.0
    /// `output_tokens_per_turn_total`, `e2e_turn_time_seconds_total`).
    pub interactivity: Interactivity,
}

/// The keys the v1.0 rules added to `result_summary.json`, after the reference's at ea33275
/// (which stay as they were, in their order).
pub const V1_KEYS: [&str; 6] = [
    "output_sequence_lengths_full_run",
    "system_tps",
    "tps_per_user",
    "e2e_avg_interactivity",
    "output_tokens_per_turn_total",
    "e2e_turn_time_seconds_total",
];

/// Index of a finish reason in [`Inputs::finish_reasons`].
pub fn finish_reason_index(reason: &str) -> usize {
    match reason {
        "stop" => 0,
        "length" => 1,
        "tool_calls" => 2,
        "content_filter" => 3,
        "function_call" => 4,
        _ => 5,
    }
}

/// The primary metrics of a point, derived as the reference derives them.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Throughput {
    /// Completed samples per second of tracked duration.
    pub qps: Option<f64>,
    /// Output tokens per second of tracked duration.
    pub tps: Option<f64>,
}

impl Inputs {
    /// `qps`, `tps` over the tracked duration.
    pub fn throughput(&self) -> Throughput {
        match self.duration_ns {
            Some(d) if d > 0 => {
                let secs = d as f64 / 1e9;
                Throughput {
                    qps: Some(self.completed as f64 / secs),
                    tps: (!self.osl.is_empty()).then(|| self.osl.iter().sum::<i64>() as f64 / secs),
                }
            }
            _ => Throughput::default(),
        }
    }

    /// The `result_summary.json` object, in the reference's key order.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("version".into(), Value::String(self.version.clone()));
        o.insert("git_sha".into(), Value::Null);
        o.insert("test_started_at".into(), Value::from(0));
        o.insert("n_samples_issued".into(), Value::from(self.issued));
        o.insert("n_samples_completed".into(), Value::from(self.completed));
        o.insert("n_samples_failed".into(), Value::from(self.failed));
        o.insert(
            "duration_ns".into(),
            self.duration_ns
                .filter(|d| *d > 0)
                .map_or(Value::Null, Value::from),
        );
        o.insert(
            "state".into(),
            Value::String(
                if self.interrupted {
                    "interrupted"
                } else {
                    "complete"
                }
                .into(),
            ),
        );
        o.insert(
            "complete".into(),
            Value::Bool(self.complete && !self.interrupted),
        );
        o.insert(
            "ttft".into(),
            Series::Int(self.ttft_ns.clone()).to_json(true),
        );
        o.insert(
            "tpot".into(),
            Series::Float(self.tpot_ns.clone()).to_json(true),
        );
        o.insert(
            "latency".into(),
            Series::Int(self.latency_ns.clone()).to_json(true),
        );
        o.insert(
            "output_sequence_lengths".into(),
            Series::Int(self.osl.clone()).to_json(false),
        );
        o.insert(
            "input_sequence_lengths".into(),
            Series::Int(self.isl.clone()).to_json(false),
        );
        o.insert("legacy_loadgen_window_duration_ns".into(), Value::Null);
        let t = self.throughput();
        o.insert("qps".into(), t.qps.map_or(Value::Null, num));
        o.insert("tps".into(), t.tps.map_or(Value::Null, num));
        let mut fr = Map::new();
        for (i, name) in [
            "stop",
            "length",
            "tool_calls",
            "content_filter",
            "function_call",
            "other",
        ]
        .iter()
        .enumerate()
        {
            fr.insert((*name).into(), Value::from(self.finish_reasons[i]));
        }
        o.insert("finish_reason_counts".into(), Value::Object(fr));
        o.insert("run_config".into(), self.run_config.clone());
        self.insert_v1(&mut o);
        Value::Object(o)
    }

    /// The v1.0 fields ([`V1_KEYS`]): the full-run OSL block the OSL gate reads (every
    /// completed turn of the run, tracked or not, in the series shape), and the primary
    /// metrics with the sums `e2e_avg_interactivity` is derived from. Undefined values are
    /// `null`.
    fn insert_v1(&self, o: &mut Map<String, Value>) {
        let p = Primary::compute(self);
        let mut full = Map::new();
        full.insert(
            "output_sequence_lengths".into(),
            Series::Int(self.osl_full_run.clone()).to_json(false),
        );
        o.insert(V1_KEYS[0].into(), Value::Object(full));
        let opt = |v: Option<f64>| v.map_or(Value::Null, num);
        o.insert(V1_KEYS[1].into(), opt(p.system_tps));
        o.insert(V1_KEYS[2].into(), opt(p.tps_per_user));
        o.insert(V1_KEYS[3].into(), opt(p.e2e_interactivity));
        let i = self.interactivity;
        let any = i.latency_ns > 0;
        o.insert(
            V1_KEYS[4].into(),
            if any {
                Value::from(i.tokens)
            } else {
                Value::Null
            },
        );
        o.insert(
            V1_KEYS[5].into(),
            if any {
                num(i.latency_ns as f64 / 1e9)
            } else {
                Value::Null
            },
        );
    }

    /// The file as the reference writes it: `msgspec.json.format(..., indent=2)`, no trailing
    /// newline.
    pub fn to_file_text(&self) -> String {
        pyjson::msgspec_pretty(&self.to_json())
    }
}

/// The reference's `run_config` block for an agentic point.
pub fn run_config(concurrency: usize, warmup: Option<(u64, bool)>) -> Value {
    serde_json::json!({
        "load_pattern": {
            "type": "agentic_inference",
            "target_qps": null,
            "target_concurrency": concurrency,
        },
        "warmup": {
            "enabled": warmup.is_some(),
            "n_requests": warmup.map(|w| w.0),
            "salt": warmup.is_some_and(|w| w.1),
            "drain": warmup.is_some(),
            // tokentap draws no random numbers: no seed to report.
            "warmup_random_seed": null,
        },
        "scheduler_random_seed": null,
        "dataloader_random_seed": null,
    })
}

// The primary metrics of a measurement point (docs/benchmark.md#primary-metrics, the MLPerf
// Endpoints rules' Pareto axes), derived from the same samples as `result_summary.json`:
// - `ttft_p90_ms`: p90 (numpy `lower`) of the tracked TTFTs.
// - `tps_per_user` = 1000 / `tpot_p90_ms`, TPOT being the reference's (time after the first
//   chunk over the tokens after it, counted with the reference tokenizer).
// - `e2e_interactivity` = Σ OSL / Σ turn latency in seconds, over the tracked turns that
//   completed with output (a failed turn has no output tokens; counting its latency would make
//   failures look like slowness). tokentap's decision: the rules name the quantity, not the
//   population.
// - `system_tps` = Σ OSL / tracked duration (= `result_summary.json` `tps`);
//   `qps` = completed / tracked duration (`qps`).

/// The rules' primary metrics of one point.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Primary {
    /// Σ OSL / tracked duration, tokens/s.
    pub system_tps: Option<f64>,
    /// 1000 / TPOT p90 (ms), tokens/s per user.
    pub tps_per_user: Option<f64>,
    /// Σ OSL / Σ turn latency over the turns that completed with output, tokens/s.
    pub e2e_interactivity: Option<f64>,
    /// TTFT p90 (numpy `lower`), ms.
    pub ttft_p90_ms: Option<f64>,
    /// Completed samples / tracked duration.
    pub qps: Option<f64>,
    /// The TPOT p90 behind `tps_per_user`, ms.
    pub tpot_p90_ms: Option<f64>,
    /// The tracked duration the rates are over, s.
    pub tracked_duration_s: Option<f64>,
    /// Mean OSL per tracked turn (the OSL gate's value), tokens.
    pub osl_mean: Option<f64>,
}

/// Σ output tokens and Σ latency (ns) of the tracked turns that completed with output.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Interactivity {
    /// Σ output tokens.
    pub tokens: u64,
    /// Σ latency, ns.
    pub latency_ns: u128,
}

impl Interactivity {
    /// Adds one turn.
    pub fn add(&mut self, tokens: u64, latency_ns: u64) {
        self.tokens += tokens;
        self.latency_ns += u128::from(latency_ns);
    }

    /// Tokens per second of latency, when any latency.
    pub fn value(&self) -> Option<f64> {
        (self.latency_ns > 0).then(|| self.tokens as f64 / (self.latency_ns as f64 / 1e9))
    }
}

impl Primary {
    /// The primary metrics of `inputs`.
    pub fn compute(inputs: &Inputs) -> Primary {
        let t = inputs.throughput();
        let ttft = Series::Int(inputs.ttft_ns.clone()).rollup();
        let tpot = Series::Float(inputs.tpot_ns.clone()).rollup();
        let osl = Series::Int(inputs.osl.clone()).rollup();
        let tpot_p90_ms = tpot.and_then(|r| r.percentile(90.0)).map(|v| v / 1e6);
        Primary {
            system_tps: t.tps,
            tps_per_user: tpot_p90_ms.filter(|v| *v > 0.0).map(|v| 1000.0 / v),
            e2e_interactivity: inputs.interactivity.value(),
            ttft_p90_ms: ttft.and_then(|r| r.percentile(90.0)).map(|v| v / 1e6),
            qps: t.qps,
            tpot_p90_ms,
            tracked_duration_s: inputs
                .duration_ns
                .filter(|d| *d > 0)
                .map(|d| d as f64 / 1e9),
            osl_mean: osl.map(|r| r.avg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_integer_division() {
        assert_eq!(div_round(1, 3), 1.0 / 3.0);
        assert_eq!(div_round(1_724_606_560, 291), 5926483.024054983);
        assert_eq!(div_round(-7, 2), -3.5);
        // 2^60 + 1 over 3: float division of the rounded numerator would be off.
        let a: i128 = (1 << 60) + 1;
        assert_eq!(div_round(a, 3), 3.843071682022823e17);
        assert_eq!(div_round(10i128.pow(30), 7), 1.4285714285714285e29);
    }

    #[test]
    fn lower_percentiles_and_histogram() {
        let s = Series::Int((1..=10).collect());
        let r = s.rollup().unwrap();
        assert_eq!(r.percentile(90.0), Some(9.0));
        assert_eq!(r.percentile(99.9), Some(9.0));
        assert_eq!(r.percentile(1.0), Some(1.0));
        assert_eq!(r.median, 5.0);
        let j = s.to_json(false);
        let counts: u64 = j["histogram"]["counts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum();
        assert_eq!(counts, 10);
        assert_eq!(Series::Int(vec![]).to_json(false), serde_json::json!({}));
    }
}
