//! Coding agents' own accounts of a session, judged against the wire: Claude Code's
//! `-p --output-format json` result (one object) or `stream-json` events (JSONL), and the Codex
//! CLI's `exec --json` events (JSONL). Read from the files the agents themselves wrote
//! (`compare/tests/fixtures/agents/`, Claude Code 2.1.332 and Codex 0.169.1 through the proxy to
//! the sim), not from their documentation.
//!
//! | agent | session (= the proxy's `conversation_id`) | per request | totals judged |
//! |---|---|---|---|
//! | Claude Code json | `session_id` | — | `usage`: `input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens` = prompt tokens, `cache_read_input_tokens` = cached, `output_tokens`; `duration_api_ms` against the wire's model time |
//! | Claude Code stream-json | `session_id` | each `assistant` event's `message.id` = the record's `response_id` | the final `result` event's, as above |
//! | Codex `--json` | `thread.started` `thread_id` | — | each `turn.completed` `usage`: `input_tokens` (cached included) = prompt, `cached_input_tokens`, `output_tokens` |
//!
//! What is not judged, and why (each said in a note): Claude Code's `ttft_ms`, `ttft_stream_ms`,
//! `time_to_request_ms`, `first_content_frame_ms` and `duration_ms` count from an instant its
//! output does not give; an `assistant` event's `message.usage.output_tokens` is the stream's
//! opening placeholder (0), not the request's count; Codex prints no timing at all.
//! `duration_api_ms` is Claude Code's time in API calls, which holds its own client's work
//! besides the server's: judged against the wire's model time (at least one of the session's
//! requests in flight), the difference is the agent's own overhead.

use super::json::{lines_of, Source};
use crate::client::{ClientRun, ClientTurn, Clock, TotalClaim, WireTotal};
use crate::error::CompareError;
use serde_json::Value;
use std::path::Path;

/// Claude Code's result or stream-json events.
pub fn load_claude_code(path: &Path) -> Result<ClientRun, CompareError> {
    claude_code(path, Source::File(path))
}

/// The Codex CLI's `exec --json` events.
pub fn load_codex(path: &Path) -> Result<ClientRun, CompareError> {
    codex(path, Source::File(path))
}

fn empty_run() -> ClientRun {
    ClientRun {
        clock: Clock::Wall,
        turns: Vec::new(),
        published: None,
        levels: Vec::new(),
        relative_starts: false,
        notes: Vec::new(),
        checks: Vec::new(),
        totals: Vec::new(),
    }
}

fn object(path: &Path, line: usize, text: &str) -> Result<Value, CompareError> {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(CompareError::parse(
            path,
            line,
            "not a JSON object: the agent writes one object a line",
        )),
        Err(e) => Err(CompareError::parse(path, line, format!("not JSON: {e}"))),
    }
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64)
}

fn claude_code(path: &Path, src: Source<'_>) -> Result<ClientRun, CompareError> {
    let mut run = empty_run();
    let mut result: Option<(usize, Value)> = None;
    let mut session: Option<String> = None;
    lines_of(path, src, "cannot read the client file", |line, text| {
        let v = object(path, line, text)?;
        if let Some(s) = v.get("session_id").and_then(Value::as_str) {
            session.get_or_insert_with(|| s.to_string());
        }
        match v.get("type").and_then(Value::as_str) {
            Some("assistant") => {
                // One event per content block: a request's blocks share its message id.
                let id = v.pointer("/message/id").and_then(Value::as_str);
                if let Some(id) = id.filter(|id| {
                    run.turns
                        .last()
                        .is_none_or(|t| t.response_id.as_deref() != Some(id))
                }) {
                    let mut t = ClientTurn::new(line);
                    t.response_id = Some(id.to_string());
                    t.session = session.clone();
                    t.turn = Some(run.turns.len() as u32);
                    run.turns.push(t);
                }
            }
            Some("result") => result = Some((line, v)),
            _ => {}
        }
        Ok(())
    })?;
    let Some((line, r)) = result else {
        return Err(CompareError::parse(
            path,
            1,
            "no `result` object: expected Claude Code's `-p --output-format json` output or its `stream-json` events ending in one",
        ));
    };
    if r.get("is_error").and_then(Value::as_bool) == Some(true) {
        run.notes.push(format!(
            "line {line}: Claude Code ended with an error ({}): its totals are judged all the same",
            r.get("subtype").and_then(Value::as_str).unwrap_or("?")
        ));
    }
    let usage = r.get("usage").cloned().unwrap_or(Value::Null);
    let n = |k: &str| num(&usage, k);
    let prompt = match (n("input_tokens"), n("cache_read_input_tokens")) {
        (Some(i), Some(c)) => Some(i + c + n("cache_creation_input_tokens").unwrap_or(0.0)),
        _ => None,
    };
    let mut total = |name: &str, of, client: Option<f64>| {
        if let Some(client) = client {
            run.totals.push(TotalClaim {
                name: name.into(),
                session: session.clone(),
                of,
                client,
            });
        }
    };
    total(
        "usage: input + cache read + cache creation tokens",
        WireTotal::PromptTokens,
        prompt,
    );
    total(
        "usage: cache_read_input_tokens",
        WireTotal::CachedTokens,
        n("cache_read_input_tokens"),
    );
    total(
        "usage: output_tokens",
        WireTotal::OutputTokens,
        n("output_tokens"),
    );
    total(
        "duration_api_ms",
        WireTotal::ModelTimeMs,
        num(&r, "duration_api_ms"),
    );
    run.notes.push(
        "Claude Code's ttft_ms, ttft_stream_ms, time_to_request_ms, first_content_frame_ms and duration_ms count from an instant its output does not give: not judged".into(),
    );
    if !run.turns.is_empty() {
        run.notes.push("per request: each assistant message id is joined to the wire's response id; its usage.output_tokens is the stream's opening placeholder, not judged".into());
    }
    Ok(run)
}

fn codex(path: &Path, src: Source<'_>) -> Result<ClientRun, CompareError> {
    let mut run = empty_run();
    let mut session: Option<String> = None;
    let mut sums = [0.0f64; 3];
    let mut turns = 0;
    lines_of(path, src, "cannot read the client file", |line, text| {
        let v = object(path, line, text)?;
        match v.get("type").and_then(Value::as_str) {
            Some("thread.started") => {
                session = v.get("thread_id").and_then(Value::as_str).map(String::from);
            }
            Some("turn.completed") => {
                let u = v.get("usage").cloned().unwrap_or(Value::Null);
                for (i, k) in ["input_tokens", "cached_input_tokens", "output_tokens"]
                    .iter()
                    .enumerate()
                {
                    sums[i] += num(&u, k).unwrap_or(0.0);
                }
                turns += 1;
            }
            _ => {}
        }
        Ok(())
    })?;
    if turns == 0 {
        return Err(CompareError::parse(
            path,
            1,
            "no `turn.completed` event: expected the events of `codex exec --json`",
        ));
    }
    for (name, of, v) in [
        (
            "turn.completed usage: input_tokens",
            WireTotal::PromptTokens,
            sums[0],
        ),
        (
            "turn.completed usage: cached_input_tokens",
            WireTotal::CachedTokens,
            sums[1],
        ),
        (
            "turn.completed usage: output_tokens",
            WireTotal::OutputTokens,
            sums[2],
        ),
    ] {
        run.totals.push(TotalClaim {
            name: name.into(),
            session: session.clone(),
            of,
            client: v,
        });
    }
    run.notes
        .push("Codex prints no timing and no response ids: its usage totals are judged".into());
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_stream_json_joins_by_message_id_and_claims_its_totals() {
        let text = r#"{"type":"system","subtype":"init","session_id":"s1"}
{"type":"assistant","message":{"id":"msg_1","usage":{"output_tokens":0}},"session_id":"s1"}
{"type":"assistant","message":{"id":"msg_1"},"session_id":"s1"}
{"type":"user","message":{},"session_id":"s1"}
{"type":"assistant","message":{"id":"msg_2"},"session_id":"s1"}
{"type":"result","subtype":"success","is_error":false,"duration_api_ms":271,"session_id":"s1","usage":{"input_tokens":37,"cache_read_input_tokens":100,"cache_creation_input_tokens":3,"output_tokens":23}}
"#;
        let run = claude_code(Path::new("c.jsonl"), Source::Text(text)).unwrap();
        let ids: Vec<_> = run
            .turns
            .iter()
            .map(|t| t.response_id.clone().unwrap())
            .collect();
        assert_eq!(ids, ["msg_1", "msg_2"]);
        let t: Vec<(WireTotal, f64)> = run.totals.iter().map(|t| (t.of, t.client)).collect();
        assert_eq!(
            t,
            [
                (WireTotal::PromptTokens, 140.0),
                (WireTotal::CachedTokens, 100.0),
                (WireTotal::OutputTokens, 23.0),
                (WireTotal::ModelTimeMs, 271.0)
            ]
        );
        assert!(run
            .totals
            .iter()
            .all(|t| t.session.as_deref() == Some("s1")));
        let err = claude_code(
            Path::new("c.jsonl"),
            Source::Text("{\"type\":\"system\"}\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("no `result` object"), "{err}");
    }
}
