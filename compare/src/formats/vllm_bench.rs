//! `vllm bench serve --save-result --save-detailed`: one JSON document per run (checked against
//! vLLM 0.34.0's real output, its Python client and the Rust `vllm-rs` one,
//! `compare/tests/fixtures/vllm-bench/`; `vllm bench sweep` writes one such file per run).
//!
//! Per request `i`, arrays in request order, failures included: `ttfts[i]` and `latencies[i]`
//! (seconds; a latency ends at the last content chunk), `itls[i]` (seconds, per chunk),
//! `output_lens[i]` (the server's usage; 0 on failure), `errors[i]` (`""` when it succeeded),
//! `start_times[i]` — `time.perf_counter()` seconds in the Python client (`CLOCK_MONOTONIC` on
//! Linux: the proxy's clock on the same host), seconds since the benchmark began in the Rust one.
//! Published: `median_`/`p50_`/`p90_`/`p99_` of `ttft`, `tpot` and `e2el` (ms), over the
//! successful requests (numpy's linear percentiles).
//!
//! Decisions:
//! - The join key is the request id both clients send, `x-request-id: bench-<hex>-<i>` with `i`
//!   the array index (the file does not hold the `<hex>` run prefix: [`bind_request_ids`] finds
//!   it among the proxy's recorded `x-request-id` headers). Record it with
//!   `tokentap proxy --record-header x-request-id`.
//! - ITL per request = vLLM's own TPOT, (latency − TTFT) / (output tokens − 1): the per-turn mean
//!   compared here; its published ITL percentiles pool every chunk gap of every request, so the
//!   published ITL claims are its `tpot` ones.
//! - The Rust client's start times count from its own start: they are aligned to the proxy's
//!   clock from the request-id pairs ([`align_starts`]: the smallest send → proxy gap is taken
//!   as 0), else dropped.
//! - `vllm-rs --multi-turn` writes a summary without per-request arrays: refused, with why.

use super::json::{read_map, streamed};
use crate::client::{ClientRun, ClientTurn, Clock, Metric, Published};
use crate::error::CompareError;
use crate::wire::WireTurn;
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// What is read of the result: the per-request arrays, the markers of the Rust client, and the
/// top-level numbers (the published percentiles); everything else (`itls`, `generated_texts`,
/// `input_lens`, …) is skipped unbuilt, so memory is the per-request values, not the file.
#[derive(Default)]
struct File {
    ttfts: Option<Vec<f64>>,
    latencies: Option<Vec<f64>>,
    output_lens: Option<Vec<f64>>,
    errors: Option<Vec<String>>,
    start_times: Option<Vec<f64>>,
    /// `steady_state` or `max_model_len`: only the Rust client writes them.
    rust: bool,
    /// `per_turn_metrics`: a vllm-rs multi-turn summary.
    per_turn: bool,
    numbers: BTreeMap<String, f64>,
}

impl<'de> Deserialize<'de> for File {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = File;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a vllm bench serve result object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<File, A::Error> {
                let mut f = File::default();
                f.numbers = read_map(map, |k, m| {
                    match k {
                        "ttfts" => f.ttfts = m.next_value()?,
                        "latencies" => f.latencies = m.next_value()?,
                        "output_lens" => f.output_lens = m.next_value()?,
                        "errors" => f.errors = m.next_value()?,
                        "start_times" => f.start_times = m.next_value()?,
                        "steady_state" | "max_model_len" | "per_turn_metrics" => {
                            m.next_value::<IgnoredAny>()?;
                            f.rust |= k != "per_turn_metrics";
                            f.per_turn |= k == "per_turn_metrics";
                        }
                        _ => return Ok(false),
                    }
                    Ok(true)
                })?;
                Ok(f)
            }
        }
        d.deserialize_map(V)
    }
}

/// Reads a `vllm bench serve` result file as it streams.
pub fn load(path: &Path) -> Result<ClientRun, CompareError> {
    let f: File = streamed(path, "a vllm bench serve result")?;
    build(path, f)
}

/// Parses the bytes of a `vllm bench serve` result file.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<ClientRun, CompareError> {
    let f: File = serde_json::from_slice(bytes).map_err(|e| CompareError::File {
        path: path.to_path_buf(),
        msg: format!("not a vllm bench serve result: {e}"),
    })?;
    build(path, f)
}

fn build(path: &Path, f: File) -> Result<ClientRun, CompareError> {
    let bad = |msg: String| CompareError::File {
        path: path.to_path_buf(),
        msg,
    };
    let (Some(ttfts), Some(latencies)) = (&f.ttfts, &f.latencies) else {
        return Err(bad(if f.per_turn {
            "a vllm-rs multi-turn summary: it holds no per-request values to compare (run the single-turn benchmark with --save-detailed)".into()
        } else {
            "no per-request `ttfts` / `latencies`: save the result with --save-detailed".into()
        }));
    };
    let n = ttfts.len();
    let rust = f.rust;
    let get = |v: &Option<Vec<f64>>, i: usize| v.as_ref().and_then(|v| v.get(i).copied());
    let mut turns = Vec::with_capacity(n);
    for (i, &ttft_s) in ttfts.iter().enumerate() {
        let mut t = ClientTurn::new(i + 1);
        t.ok = f
            .errors
            .as_ref()
            .and_then(|e| e.get(i))
            .is_none_or(|e| e.is_empty());
        // Python: perf_counter (monotonic). Rust: seconds since its start, aligned later.
        t.start_ns = get(&f.start_times, i)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| (s * 1e9) as u64);
        if t.ok {
            let (ttft, lat) = (ttft_s * 1e3, latencies.get(i).map(|l| l * 1e3));
            let out = get(&f.output_lens, i);
            t.values.set(Metric::Ttft, Some(ttft));
            t.values.set(Metric::E2e, lat);
            t.values.set(Metric::OutputTokens, out);
            let itl = match (lat, out) {
                (Some(l), Some(o)) if o > 1.0 => Some((l - ttft) / (o - 1.0)),
                _ => None,
            };
            t.values.set(Metric::Itl, itl);
        }
        turns.push(t);
    }
    let notes = vec![
        "vLLM's latency ends at the last content chunk, the wire's E2E at the last byte ([DONE] included): E2E differs by the tail".to_string(),
    ];

    Ok(ClientRun {
        clock: Clock::Mono,
        turns,
        published: Some(published(path, &f.numbers))
            .filter(|p| p.stats.iter().any(Option::is_some)),
        notes,
        checks: Vec::new(),
        levels: Vec::new(),
        relative_starts: rust,
        totals: Vec::new(),
    })
}

/// The published p50 (`median_`, or `p50_`), p90 and p99 of TTFT, TPOT (as ITL) and E2E.
fn published(path: &Path, v: &BTreeMap<String, f64>) -> Published {
    let mut p = Published {
        source: path.display().to_string(),
        ..Published::default()
    };
    for (key, metric) in [
        ("ttft", Metric::Ttft),
        ("tpot", Metric::Itl),
        ("e2el", Metric::E2e),
    ] {
        let get = |k: String| v.get(&k).copied();
        let row = [
            get(format!("p50_{key}_ms")).or_else(|| get(format!("median_{key}_ms"))),
            get(format!("p90_{key}_ms")),
            get(format!("p99_{key}_ms")),
        ];
        if row.iter().any(Option::is_some) {
            p.stats[metric.idx()] = Some(row);
        }
    }
    p
}

/// Gives each request the `x-request-id` its client sent, `bench-<hex>-<i>`: the `<hex>` is the
/// run's, found among the wire's recorded headers — the prefix whose indices cover the client's
/// requests. Returns a note when the wire recorded none (or several runs fit).
pub fn bind_request_ids(run: &mut ClientRun, wire: &[WireTurn]) -> Option<String> {
    let mut runs: BTreeMap<&str, usize> = BTreeMap::new();
    for w in wire {
        let Some(id) = w.header("x-request-id") else {
            continue;
        };
        if let Some((prefix, i)) = id.rsplit_once('-') {
            if prefix.starts_with("bench-") && i.parse::<usize>().is_ok() {
                *runs.entry(prefix).or_default() += 1;
            }
        }
    }
    let n = run.turns.len();
    let fits: Vec<&str> = runs
        .iter()
        .filter(|(_, &c)| c <= n && c * 2 >= n)
        .map(|(p, _)| *p)
        .collect();
    match fits[..] {
        [prefix] => {
            for (i, t) in run.turns.iter_mut().enumerate() {
                t.request_id = Some(format!("{prefix}-{i}"));
            }
            None
        }
        [] => Some("vLLM's client sends x-request-id: bench-<run>-<i> with every request, but no proxy record has it: run the proxy with --record-header x-request-id for exact joins".into()),
        _ => Some(format!(
            "the proxy's records hold {} vllm bench runs ({}): give the records of this run only for exact joins",
            fits.len(),
            fits.join(", ")
        )),
    }
}

/// Aligns start instants that count from the client's own zero (`relative_starts`) to the wire's
/// clock (`clock`) from the pairs the request ids give: every start moves by the smallest
/// (wire start − client start) over those pairs, so the quickest request reached the proxy at the
/// instant the client sent it and every other offset is measured against that. Without such a
/// pair the starts are dropped. Returns the note that says which.
pub fn align_starts(run: &mut ClientRun, wire: &[WireTurn]) -> Option<String> {
    if !run.relative_starts {
        return None;
    }
    run.relative_starts = false;
    let by_id: std::collections::HashMap<&str, &WireTurn> = wire
        .iter()
        .filter_map(|w| Some((w.header("x-request-id")?, w)))
        .collect();
    let clock = run.clock;
    let offset = run
        .turns
        .iter()
        .filter_map(|t| {
            let w = by_id.get(t.request_id.as_deref()?)?;
            Some(w.start_on(clock) as i128 - i128::from(t.start_ns?))
        })
        .min();
    match offset {
        Some(d) => {
            let n = run.turns.iter().filter(|t| t.request_id.is_some()).count();
            for t in &mut run.turns {
                t.start_ns = t
                    .start_ns
                    .and_then(|s| u64::try_from(i128::from(s) + d).ok());
            }
            Some(format!(
                "the Rust client's start times count from its own start: aligned to the proxy's clock from {n} request-id pairs (the quickest send → proxy taken as 0)"
            ))
        }
        None => {
            for t in &mut run.turns {
                t.start_ns = None;
            }
            Some("the Rust client's start times count from its own start and no request-id pair aligns them: dropped".into())
        }
    }
}
