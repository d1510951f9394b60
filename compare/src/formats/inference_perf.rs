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

use super::json::{num, string};
use crate::client::{ClientRun, ClientTurn, Clock, Metric};
use crate::error::CompareError;
use serde_json::Value;
use std::path::Path;

pub fn parse(path: &Path, text: &str) -> Result<ClientRun, CompareError> {
    let v: Value = serde_json::from_str(text).map_err(|e| CompareError::File {
        path: path.to_path_buf(),
        msg: format!("not JSON: {e}"),
    })?;
    let list = v.as_array().ok_or_else(|| CompareError::File {
        path: path.to_path_buf(),
        msg: "expected a JSON array of per-request objects".into(),
    })?;
    let mut turns = Vec::with_capacity(list.len());
    for (i, r) in list.iter().enumerate() {
        let at = i + 1;
        let start = num(r, "start_time")
            .ok_or_else(|| CompareError::parse(path, at, "no numeric `start_time` (seconds)"))?;
        let end = num(r, "end_time");
        let mut t = ClientTurn::new(at);
        t.start_ns = Some((start * 1e9).round().max(0.0) as u64);
        t.session = string(r, "session_id");
        t.ok = r.get("error").is_none_or(Value::is_null);
        let rm = r
            .get("info")
            .and_then(|i| i.get("response_metrics"))
            .unwrap_or(&Value::Null);
        let times = |key: &str| -> Vec<f64> {
            rm.get(key)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        let s_to_ms = |s: f64| s * 1e3;
        if let Some(cm) = r.get("computed_metrics").filter(|c| c.is_object()) {
            t.values
                .set(Metric::Ttft, num(cm, "time_to_first_token").map(s_to_ms));
            t.values
                .set(Metric::E2e, num(cm, "request_latency").map(s_to_ms));
            let itl = cm
                .get("inter_token_latencies")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_f64).collect::<Vec<_>>())
                .filter(|a| !a.is_empty())
                .map(|a| a.iter().sum::<f64>() / a.len() as f64)
                .or_else(|| num(cm, "inter_token_latency"));
            t.values.set(Metric::Itl, itl.map(s_to_ms));
        } else {
            let chunks = times("chunk_times");
            let reasoning = times("reasoning_chunk_times");
            let tokens = times("output_token_times");
            let first = chunks
                .first()
                .into_iter()
                .chain(reasoning.first())
                .chain(tokens.first())
                .copied()
                .reduce(f64::min);
            t.values
                .set(Metric::Ttft, first.map(|f| s_to_ms(f - start)));
            t.values.set(Metric::E2e, end.map(|e| s_to_ms(e - start)));
            let gaps = if tokens.len() >= 2 { &tokens } else { &chunks };
            if gaps.len() >= 2 {
                let span = gaps[gaps.len() - 1] - gaps[0];
                t.values
                    .set(Metric::Itl, Some(s_to_ms(span / (gaps.len() - 1) as f64)));
            }
        }
        let out = num(rm, "output_tokens").filter(|n| *n > 0.0).or_else(|| {
            rm.get("server_usage")
                .and_then(|u| num(u, "completion_tokens"))
        });
        t.values.set(Metric::OutputTokens, out);
        turns.push(t);
    }
    let mut notes = Vec::new();
    if turns.iter().all(|t| t.session.is_none()) && !turns.is_empty() {
        notes.push("no session_id in the file: turns are joined by start time alone".into());
    }
    Ok(ClientRun {
        clock: Clock::Mono,
        turns,
        published: None,
        notes,
        checks: Vec::new(),
    })
}
