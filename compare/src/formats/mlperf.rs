//! MLPerf Endpoints `events.jsonl` (SPEC §9): one event per line with `event_type`,
//! `timestamp_ns` (raw monotonic ns of the client's main process), `sample_uuid`,
//! `conversation_id` (the logical id, also sent as `X-Session-ID`), `turn` and `data`.
//!
//! Per sample: TTFT = `sample.recv_first` − `sample.issued`; E2E = `sample.complete` −
//! `sample.issued` (MLPerf's own definitions); an `error.*` event with the sample's uuid marks it
//! failed. When `sample.complete`'s `data` is an object with a numeric `output_tokens` (or
//! `n_tokens`), output tokens are claimed and ITL = (E2E − TTFT) / (tokens − 1), MLPerf's TPOT;
//! otherwise neither is claimed (the event carries the text, and counting it needs the model's
//! tokenizer). Samples issued outside the performance window were still sent, so they are
//! compared too; a note says how many.

use super::{num, string, uint};
use crate::client::{ClientRun, ClientTurn, Clock, Metric};
use crate::error::CompareError;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

#[derive(Default)]
struct Sample {
    at: usize,
    conversation: Option<String>,
    turn: Option<u32>,
    issued: Option<u64>,
    first: Option<u64>,
    complete: Option<u64>,
    tokens: Option<f64>,
    error: bool,
    tracked: bool,
}

pub fn parse(path: &Path, text: &str) -> Result<ClientRun, CompareError> {
    let mut samples: Vec<Sample> = Vec::new();
    let mut by_uuid: HashMap<String, usize> = HashMap::new();
    let mut tracking = false;
    let mut saw_tracking = false;
    for item in super::jsonl(path, text) {
        let (line, v) = item?;
        let kind = v.get("event_type").and_then(Value::as_str).ok_or_else(|| {
            CompareError::parse(
                path,
                line,
                "no `event_type` string: not an MLPerf events.jsonl line",
            )
        })?;
        match kind {
            "session.start_performance_tracking" => {
                tracking = true;
                saw_tracking = true;
                continue;
            }
            "session.stop_performance_tracking" => {
                tracking = false;
                continue;
            }
            _ => {}
        }
        let Some(uuid) = string(&v, "sample_uuid") else {
            continue;
        };
        let is_sample = kind.starts_with("sample.");
        let is_error = kind.starts_with("error.");
        if !is_sample && !is_error {
            continue;
        }
        let ts = uint(&v, "timestamp_ns");
        let idx = *by_uuid.entry(uuid).or_insert_with(|| {
            samples.push(Sample {
                at: line,
                ..Sample::default()
            });
            samples.len() - 1
        });
        let s = &mut samples[idx];
        if s.conversation.is_none() {
            s.conversation = string(&v, "conversation_id");
        }
        if s.turn.is_none() {
            s.turn = uint(&v, "turn").map(|t| t as u32);
        }
        let need_ts = |ts: Option<u64>| {
            ts.ok_or_else(|| {
                CompareError::parse(
                    path,
                    line,
                    format!("{kind} without a `timestamp_ns` integer"),
                )
            })
        };
        match kind {
            "sample.issued" => {
                s.issued = Some(need_ts(ts)?);
                s.at = line;
                s.tracked = tracking;
            }
            "sample.recv_first" if s.first.is_none() => s.first = Some(need_ts(ts)?),
            "sample.complete" => {
                s.complete = Some(need_ts(ts)?);
                if let Some(d) = v.get("data").filter(|d| d.is_object()) {
                    s.tokens = num(d, "output_tokens").or_else(|| num(d, "n_tokens"));
                }
            }
            _ if is_error => s.error = true,
            _ => {}
        }
    }
    let mut turns = Vec::with_capacity(samples.len());
    let mut untracked = 0;
    let mut never_issued = 0;
    for s in &samples {
        let Some(issued) = s.issued else {
            never_issued += 1;
            continue;
        };
        if saw_tracking && !s.tracked {
            untracked += 1;
        }
        let mut t = ClientTurn::new(s.at);
        t.session = s.conversation.clone();
        t.turn = s.turn;
        t.start_ns = Some(issued);
        t.ok = !s.error && s.complete.is_some();
        let ms = |end: Option<u64>| end.map(|e| (e as f64 - issued as f64) / 1e6);
        let ttft = ms(s.first);
        let e2e = ms(s.complete);
        t.values.set(Metric::Ttft, ttft);
        t.values.set(Metric::E2e, e2e);
        t.values.set(Metric::OutputTokens, s.tokens);
        if let (Some(a), Some(b), Some(n)) = (ttft, e2e, s.tokens) {
            if n > 1.0 {
                t.values.set(Metric::Itl, Some((b - a) / (n - 1.0)));
            }
        }
        turns.push(t);
    }
    let mut notes = Vec::new();
    if untracked > 0 {
        notes.push(format!(
            "{untracked} samples were issued outside the performance window; they were sent, so they are compared too"
        ));
    }
    if never_issued > 0 {
        notes.push(format!(
            "{never_issued} sample uuids have events but no sample.issued: ignored"
        ));
    }
    if turns
        .iter()
        .all(|t| t.values.get(Metric::OutputTokens).is_none())
        && !turns.is_empty()
    {
        notes.push(
            "events carry no output token counts (sample.complete data.output_tokens): ITL and output tokens are not claimed"
                .into(),
        );
    }
    Ok(ClientRun {
        clock: Clock::Mono,
        turns,
        published: None,
        notes,
    })
}
