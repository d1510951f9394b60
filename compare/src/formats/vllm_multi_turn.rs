//! vLLM's multi-turn serving benchmark (`benchmarks/multi_turn/benchmark_serving_multi_turn.py`,
//! `--stats-json-output F`; checked against vLLM 0.34.0's script's real output,
//! `compare/tests/fixtures/vllm-multi-turn/`).
//!
//! A JSON array, one object per successful request: `ttft_ms`, `tpot_ms`, `latency_ms` (to the
//! `[DONE]` line), `start_time_ms` (`perf_counter_ns()` / 1e6: `CLOCK_MONOTONIC`, the proxy's
//! clock on the same host), `conversation_id`, `input_num_turns` (messages sent: 1, 3, 5, …),
//! `output_num_tokens` (the client's re-tokenization of the text, no chat template). No
//! percentiles: the script prints those (and writes them to its Excel file) only.
//!
//! Decisions:
//! - Session = `conversation_id`, turn = (`input_num_turns` − 1) / 2: with `--send-conversation-id`
//!   the script sends it as `X-Session-ID`, so the proxy keys the same session and the join is by
//!   session and order; without it, by time.
//! - ITL = `tpot_ms`, the script's per-request mean after the first chunk. Its TTFT has
//!   (first-chunk tokens − 1) × TPOT taken off when its tokenizer finds several tokens in the
//!   first chunk: a definition of its own, shown as a difference.

use super::json::document;
use crate::client::{ClientRun, ClientTurn, Clock, Metric};
use crate::error::CompareError;
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
struct Row {
    ttft_ms: Option<f64>,
    #[serde(default)]
    tpot_ms: Option<f64>,
    #[serde(default)]
    latency_ms: Option<f64>,
    start_time_ms: Option<f64>,
    #[serde(default)]
    output_num_tokens: Option<f64>,
    #[serde(default)]
    input_num_turns: Option<u32>,
    #[serde(default)]
    conversation_id: Option<String>,
}

/// Reads a `--stats-json-output` file.
pub fn load(path: &Path) -> Result<ClientRun, CompareError> {
    let bytes = document(path, "cannot read the client file")?;
    let rows: Vec<Row> = serde_json::from_slice(&bytes).map_err(|e| CompareError::File {
        path: path.to_path_buf(),
        msg: format!("not a vLLM multi-turn --stats-json-output file: {e}"),
    })?;
    let turns = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut t = ClientTurn::new(i + 1);
            t.session = r.conversation_id.clone();
            t.turn = r.input_num_turns.map(|n| n.saturating_sub(1) / 2);
            t.start_ns = r
                .start_time_ms
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(|s| (s * 1e6) as u64);
            t.values.set(Metric::Ttft, r.ttft_ms);
            t.values.set(Metric::Itl, r.tpot_ms);
            t.values.set(Metric::E2e, r.latency_ms);
            t.values.set(Metric::OutputTokens, r.output_num_tokens);
            t
        })
        .collect();
    Ok(ClientRun {
        clock: Clock::Mono,
        turns,
        published: None,
        notes: vec![
            "vLLM's multi-turn benchmark counts output tokens by re-tokenizing the text (no chat template) and trims its TTFT by the extra tokens of the first chunk: differences there are its definitions".into(),
        ],
        checks: Vec::new(),
        levels: Vec::new(),
        relative_starts: false,
        totals: Vec::new(),
    })
}
