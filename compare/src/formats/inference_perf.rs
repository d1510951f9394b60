//! kubernetes-sigs inference-perf `per_request_lifecycle_metrics.json`: a JSON array, one object
//! per request, times in seconds of `time.perf_counter()` (raw `CLOCK_MONOTONIC` on Linux:
//! comparable with the proxy only on the same host).
//!
//! Fields read: `start_time`, `end_time`, `error` (non-null: failed), `session_id` (multi-turn
//! workloads, when present), and either `computed_metrics` (`time_to_first_token`,
//! `inter_token_latencies` (list) / `inter_token_latency`, `request_latency`, seconds) or the raw
//! `info.response_metrics` (`chunk_times`, `reasoning_chunk_times`, `output_token_times`,
//! `output_tokens`, `server_usage.completion_tokens`). From the raw times: TTFT = first
//! reasoning/content chunk − `start_time`; ITL = the mean gap between consecutive
//! `output_token_times` (falls back to `chunk_times`: one token per chunk); E2E = `end_time` −
//! `start_time`; output tokens = `output_tokens`, else the server's `completion_tokens`.

use super::json::{Span, Text};
use crate::client::{ClientRun, ClientTurn, Clock, Metric};
use crate::error::CompareError;
use serde::de::{self, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::path::Path;

/// One request of the array: just the fields read; the rest (prompts, outputs, raw chunks) is
/// skipped unbuilt, and the lists of instants are reduced as they are read ([`Span`]).
#[derive(Deserialize)]
struct Request {
    start_time: Option<f64>,
    end_time: Option<f64>,
    /// Present and not null: the request failed.
    #[serde(default)]
    error: Option<IgnoredAny>,
    session_id: Option<Text>,
    computed_metrics: Option<Computed>,
    info: Option<Info>,
}

#[derive(Deserialize)]
struct Computed {
    time_to_first_token: Option<f64>,
    request_latency: Option<f64>,
    inter_token_latencies: Option<Span>,
    inter_token_latency: Option<f64>,
}

#[derive(Deserialize)]
struct Info {
    response_metrics: Option<ResponseMetrics>,
}

#[derive(Deserialize, Default)]
struct ResponseMetrics {
    chunk_times: Option<Span>,
    reasoning_chunk_times: Option<Span>,
    output_token_times: Option<Span>,
    output_tokens: Option<f64>,
    server_usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    completion_tokens: Option<f64>,
}

/// Reads the file as it streams: one request of the array at a time, so memory is the turns,
/// not the file.
pub fn load(path: &Path) -> Result<ClientRun, CompareError> {
    let f = std::fs::File::open(path).map_err(|source| CompareError::Io {
        what: "cannot read the client file",
        path: path.to_path_buf(),
        source,
    })?;
    let mut de =
        serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(256 << 10, f));
    read(path, &mut de)
}

/// Parses the text of the file (tests, small inputs).
pub fn parse(path: &Path, text: &str) -> Result<ClientRun, CompareError> {
    read(path, &mut serde_json::Deserializer::from_str(text))
}

fn read<'de, R: serde_json::de::Read<'de>>(
    path: &Path,
    de: &mut serde_json::Deserializer<R>,
) -> Result<ClientRun, CompareError> {
    let mut failed: Option<CompareError> = None;
    let result = de
        .deserialize_seq(Requests {
            path,
            failed: &mut failed,
        })
        .and_then(|turns| de.end().map(|()| turns));
    let turns = match (result, failed) {
        (_, Some(e)) => return Err(e),
        (Ok(t), None) => t,
        (Err(e), None) => {
            return Err(CompareError::File {
                path: path.to_path_buf(),
                msg: if e.is_syntax() || e.is_eof() {
                    format!("not JSON: {e}")
                } else {
                    format!("not an inference-perf per_request_lifecycle_metrics.json: {e}")
                },
            })
        }
    };
    let mut notes = Vec::new();
    if turns.iter().all(|t: &ClientTurn| t.session.is_none()) && !turns.is_empty() {
        notes.push("no session_id in the file: turns are joined by start time alone".into());
    }
    Ok(ClientRun {
        clock: Clock::Mono,
        turns,
        published: None,
        notes,
        checks: Vec::new(),
        levels: Vec::new(),
        relative_starts: false,
        totals: Vec::new(),
    })
}

/// The array, a request at a time; a request without what the format requires stops the read
/// with its position (in `failed`).
struct Requests<'p> {
    path: &'p Path,
    failed: &'p mut Option<CompareError>,
}

impl<'de> Visitor<'de> for Requests<'_> {
    type Value = Vec<ClientTurn>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON array of per-request objects")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Vec<ClientTurn>, A::Error> {
        let mut turns = Vec::new();
        while let Some(r) = a.next_element::<Request>()? {
            match turn(self.path, turns.len() + 1, r) {
                Ok(t) => turns.push(t),
                Err(e) => {
                    *self.failed = Some(e);
                    return Err(de::Error::custom("stopped"));
                }
            }
        }
        Ok(turns)
    }
}

fn turn(path: &Path, at: usize, r: Request) -> Result<ClientTurn, CompareError> {
    let start = r
        .start_time
        .filter(|s| s.is_finite())
        .ok_or_else(|| CompareError::parse(path, at, "no numeric `start_time` (seconds)"))?;
    let mut t = ClientTurn::new(at);
    t.start_ns = Some((start * 1e9).round().max(0.0) as u64);
    t.session = r.session_id.map(|s| s.0);
    t.ok = r.error.is_none();
    let rm = r.info.and_then(|i| i.response_metrics).unwrap_or_default();
    let s_to_ms = |s: f64| s * 1e3;
    if let Some(cm) = r.computed_metrics {
        t.values
            .set(Metric::Ttft, cm.time_to_first_token.map(s_to_ms));
        t.values.set(Metric::E2e, cm.request_latency.map(s_to_ms));
        let itl = cm
            .inter_token_latencies
            .and_then(|s| s.mean())
            .or(cm.inter_token_latency);
        t.values.set(Metric::Itl, itl.map(s_to_ms));
    } else {
        let chunks = rm.chunk_times.unwrap_or_default();
        let reasoning = rm.reasoning_chunk_times.unwrap_or_default();
        let tokens = rm.output_token_times.unwrap_or_default();
        let first = [chunks.first, reasoning.first, tokens.first]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        t.values
            .set(Metric::Ttft, first.map(|f| s_to_ms(f - start)));
        t.values
            .set(Metric::E2e, r.end_time.map(|e| s_to_ms(e - start)));
        let gaps = if tokens.count >= 2 { tokens } else { chunks };
        if let (Some(a), Some(b), true) = (gaps.first, gaps.last, gaps.count >= 2) {
            t.values.set(
                Metric::Itl,
                Some(s_to_ms((b - a) / (gaps.count - 1) as f64)),
            );
        }
    }
    let out = rm
        .output_tokens
        .filter(|n| *n > 0.0)
        .or_else(|| rm.server_usage.and_then(|u| u.completion_tokens));
    t.values.set(Metric::OutputTokens, out);
    Ok(t)
}
