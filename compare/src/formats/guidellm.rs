//! guidellm's `benchmarks.json` (`--output kind=json`; checked against guidellm 0.8.1's real
//! output, `compare/tests/fixtures/guidellm/`).
//!
//! One document: `benchmarks[]`, one per load level (`config.strategy`: `concurrent` with
//! `streams`, `constant` with `rate`, …), each with its requests by outcome —
//! `requests.{successful,incomplete,errored}[]` — and its published aggregates,
//! `metrics.NAME.successful.percentiles.{p50,p90,p99}` (nearest rank, numpy `inverted_cdf`).
//!
//! Per request: `response_id` (the server's `chatcmpl-…`: the exact join key; guidellm sends no
//! request-id or session header), `request_start_time` (epoch seconds: the wall clock),
//! `time_to_first_token_ms`, `inter_token_latency_ms` ((last − first token) / (output tokens −
//! 1): the per-turn mean ITL), `request_latency` (seconds; successful requests only),
//! `output_tokens` (the server's usage), `info.conversation_id` / `info.turn_index` (multi-turn
//! data), `info.status` (`completed`, `errored`, `cancelled`).
//!
//! Decisions:
//! - Each benchmark is a level of its own ([`crate::client::Level`], named as guidellm's console
//!   names it: `concurrent@4`, `constant@10`): judged against the wire on its own turns with its
//!   own published percentiles; the file's claims are recomputed over every level's turns.
//! - Published claims: TTFT, E2E (`request_latency`, seconds → ms) and output tokens
//!   (`output_token_count`). Not ITL: guidellm's published ITL percentiles weight each request by
//!   its tokens (a per-token distribution), not the per-turn mean compared here, so ITL is judged
//!   from its per-request values.
//! - Errored and incomplete requests are turns that did not succeed (incomplete: cut by the
//!   benchmark's end, the wire's `cancelled`); they pair by response id when guidellm kept one.

use super::json::streamed;
use crate::client::{ClientRun, ClientTurn, Clock, Level, Metric, Published};
use crate::error::CompareError;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

#[derive(Deserialize)]
struct File {
    benchmarks: Vec<Benchmark>,
}

#[derive(Deserialize)]
struct Benchmark {
    #[serde(default)]
    config: Option<Config>,
    requests: Requests,
    #[serde(default)]
    metrics: Option<Value>,
}

#[derive(Deserialize)]
struct Config {
    #[serde(default)]
    strategy: Option<Value>,
}

#[derive(Deserialize)]
struct Requests {
    #[serde(default)]
    successful: Vec<Request>,
    #[serde(default)]
    incomplete: Vec<Request>,
    #[serde(default)]
    errored: Vec<Request>,
}

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    response_id: Option<String>,
    #[serde(default)]
    request_start_time: Option<f64>,
    #[serde(default)]
    time_to_first_token_ms: Option<f64>,
    #[serde(default)]
    inter_token_latency_ms: Option<f64>,
    #[serde(default)]
    request_latency: Option<f64>,
    #[serde(default)]
    output_tokens: Option<f64>,
    #[serde(default)]
    info: Option<Info>,
}

#[derive(Deserialize)]
struct Info {
    #[serde(default)]
    conversation_id: Option<String>,
    #[serde(default)]
    turn_index: Option<u32>,
}

/// Reads a guidellm `benchmarks.json` as it streams: memory is the per-request values read
/// (the typed fields above), not the file.
pub fn load(path: &Path) -> Result<ClientRun, CompareError> {
    build(path, streamed(path, "a guidellm benchmarks.json")?)
}

/// Parses the bytes of a `benchmarks.json`.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<ClientRun, CompareError> {
    let f: File = serde_json::from_slice(bytes).map_err(|e| CompareError::File {
        path: path.to_path_buf(),
        msg: format!("not a guidellm benchmarks.json: {e}"),
    })?;
    build(path, f)
}

fn build(path: &Path, f: File) -> Result<ClientRun, CompareError> {
    let mut turns = Vec::new();
    let mut levels = Vec::new();
    for (bi, b) in f.benchmarks.iter().enumerate() {
        let first = turns.len();
        for (ok, list) in [
            (true, &b.requests.successful),
            (false, &b.requests.incomplete),
            (false, &b.requests.errored),
        ] {
            for r in list {
                turns.push(turn(turns.len() + 1, ok, r));
            }
        }
        levels.push(Level {
            name: level_name(bi, b),
            turns: first..turns.len(),
            published: b
                .metrics
                .as_ref()
                .map(|m| published(path, bi, m))
                .filter(|p| p.stats.iter().any(Option::is_some)),
        });
    }
    let mut notes = vec![
        "guidellm's published ITL percentiles weight each request by its tokens: ITL is judged from its per-request values (the per-turn mean)".to_string(),
    ];
    let no_id = turns.iter().filter(|t| t.response_id.is_none()).count();
    if no_id > 0 {
        notes.push(format!(
            "{no_id} guidellm requests have no response id (errored before a response, as guidellm records them): joined by time at best"
        ));
    }
    // One benchmark: its published claims are the file's, and it is no level of its own.
    let (published, levels) = if levels.len() == 1 {
        (levels.pop().and_then(|l| l.published), Vec::new())
    } else {
        (None, levels)
    };
    Ok(ClientRun {
        clock: Clock::Wall,
        turns,
        published,
        notes,
        checks: Vec::new(),
        levels,
        relative_starts: false,
        totals: Vec::new(),
    })
}

fn turn(at: usize, ok: bool, r: &Request) -> ClientTurn {
    let mut t = ClientTurn::new(at);
    t.response_id = r.response_id.clone().filter(|s| !s.is_empty());
    if let Some(i) = &r.info {
        t.session = i.conversation_id.clone();
        t.turn = i.turn_index;
    }
    t.start_ns = r
        .request_start_time
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| (s * 1e9) as u64);
    t.ok = ok;
    t.values.set(Metric::Ttft, r.time_to_first_token_ms);
    t.values.set(Metric::Itl, r.inter_token_latency_ms);
    t.values
        .set(Metric::E2e, r.request_latency.map(|s| s * 1e3));
    t.values.set(Metric::OutputTokens, r.output_tokens);
    t
}

/// `concurrent@4`, `constant@10`, `synchronous`…: the strategy's type and its level, as
/// guidellm's console names the benchmark.
fn level_name(i: usize, b: &Benchmark) -> String {
    let Some(s) = b.config.as_ref().and_then(|c| c.strategy.as_ref()) else {
        return format!("benchmark {}", i + 1);
    };
    let kind = s["type_"].as_str().unwrap_or("benchmark");
    let level = ["streams", "rate"]
        .iter()
        .find_map(|k| s[k].as_f64())
        .map(|v| {
            if v.fract() == 0.0 {
                format!("@{v:.0}")
            } else {
                format!("@{v}")
            }
        })
        .unwrap_or_default();
    format!("{kind}{level}")
}

/// A benchmark's published p50/p90/p99 (over its successful requests).
fn published(path: &Path, i: usize, m: &Value) -> Published {
    let mut p = Published {
        source: format!("{} benchmarks[{i}].metrics", path.display()),
        nearest_rank: true,
        ..Published::default()
    };
    for (name, metric, scale) in [
        ("time_to_first_token_ms", Metric::Ttft, 1.0),
        ("request_latency", Metric::E2e, 1e3),
        ("output_token_count", Metric::OutputTokens, 1.0),
    ] {
        let pct = &m[name]["successful"]["percentiles"];
        let get = |k: &str| pct[k].as_f64().map(|v| v * scale);
        if pct.is_object() {
            p.stats[metric.idx()] = Some([get("p50"), get("p90"), get("p99")]);
        }
    }
    p
}
