//! Formatting of SSE events and non-streaming bodies.
//!
//! Streaming is the hot path: the constant head of every chunk
//! (`data: {"id":…,"object":…,"created":…,"model":…,"choices":[`) is formatted once per request,
//! and each chunk is written into one `BytesMut` arena and split off as a `Bytes` — no serde and,
//! once the arena has grown, about one allocation per 16 KiB of events rather than one per event
//! (freed arena space is reclaimed when hyper has dropped the frames written from it).
//!
//! Chunk shape (vLLM's):
//! `{"id":"chatcmpl-…","object":"chat.completion.chunk","created":N,"model":"M","choices":[{"index":0,"delta":{…},"finish_reason":null}]}`,
//! usage-only final chunk `{…,"choices":[],"usage":{…}}`; `/v1/completions` chunks are
//! `text_completion` objects with `choices[].text`.

use crate::plan::{Api, Output, Plan, SegKind};
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;

/// The end-of-stream sentinel.
pub(crate) const DONE: &[u8] = b"data: [DONE]\n\n";
/// The injected malformed event: a chunk cut off mid-JSON.
pub(crate) const MALFORMED: &[u8] = b"data: {\"choices\":[{\"delta\":\n\n";

const ARENA: usize = 16 * 1024;

/// Per-request chunk formatter.
pub(crate) struct ChunkWriter {
    head: Vec<u8>,
    api: Api,
    reasoning_field: &'static str,
    prompt_tokens: u64,
    cached_tokens: u64,
    buf: BytesMut,
}

impl ChunkWriter {
    pub fn new(plan: &Plan, reasoning_field: &'static str) -> Self {
        let object = match plan.api {
            Api::Chat => "chat.completion.chunk",
            Api::Completions => "text_completion",
        };
        let mut head = Vec::with_capacity(128 + plan.model.len());
        head.extend_from_slice(b"data: {\"id\":");
        push_json_str(&mut head, &plan.id);
        head.extend_from_slice(b",\"object\":\"");
        head.extend_from_slice(object.as_bytes());
        head.extend_from_slice(b"\",\"created\":");
        head.extend_from_slice(plan.created.to_string().as_bytes());
        head.extend_from_slice(b",\"model\":");
        push_json_str(&mut head, &plan.model);
        head.extend_from_slice(b",\"choices\":[");
        ChunkWriter {
            head,
            api: plan.api,
            reasoning_field,
            prompt_tokens: plan.prompt_tokens,
            cached_tokens: plan.cached_tokens,
            buf: BytesMut::new(),
        }
    }

    /// The role-only prelude (chat only).
    pub fn prelude(&mut self, usage: Option<u64>) -> Bytes {
        self.begin(64);
        self.buf
            .put_slice(b"{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}");
        self.end_choice(None, usage)
    }

    /// One token chunk of a segment. `tool` (the call's index in the output, its id and name) is
    /// needed for tool segments.
    pub fn piece(
        &mut self,
        kind: SegKind,
        text: &str,
        tool: (usize, &str, &str),
        finish: Option<&str>,
        usage: Option<u64>,
    ) -> Bytes {
        self.begin(text.len() * 2 + 160);
        let b = &mut self.buf;
        match (self.api, kind) {
            (Api::Completions, _) => {
                b.put_slice(b"{\"index\":0,\"text\":");
                push_json_str_buf(b, text);
            }
            (Api::Chat, SegKind::Reasoning) => {
                b.put_slice(b"{\"index\":0,\"delta\":{\"");
                b.put_slice(self.reasoning_field.as_bytes());
                b.put_slice(b"\":");
                push_json_str_buf(b, text);
                b.put_u8(b'}');
            }
            (Api::Chat, SegKind::Content) => {
                b.put_slice(b"{\"index\":0,\"delta\":{\"content\":");
                push_json_str_buf(b, text);
                b.put_u8(b'}');
            }
            (Api::Chat, SegKind::ToolHeader) => {
                b.put_slice(b"{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":");
                // Invariant: fmt::Write into a BytesMut cannot fail.
                let _ = write!(b, "{}", tool.0);
                b.put_slice(b",\"id\":");
                push_json_str_buf(b, tool.1);
                b.put_slice(b",\"type\":\"function\",\"function\":{\"name\":");
                push_json_str_buf(b, tool.2);
                b.put_slice(b",\"arguments\":\"\"}}]}");
            }
            (Api::Chat, SegKind::ToolArgs) => {
                b.put_slice(b"{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":");
                let _ = write!(b, "{}", tool.0);
                b.put_slice(b",\"function\":{\"arguments\":");
                push_json_str_buf(b, text);
                b.put_slice(b"}}]}");
            }
        }
        self.end_choice(finish, usage)
    }

    /// The usage-only final chunk, with the engine's `metrics` (a JSON object) when asked for.
    pub fn usage(&mut self, completion: u64, metrics: Option<&str>) -> Bytes {
        self.begin(160 + metrics.map_or(0, str::len));
        self.buf.put_u8(b']');
        self.push_usage(completion);
        if let Some(m) = metrics {
            self.buf.put_slice(b",\"metrics\":");
            self.buf.put_slice(m.as_bytes());
        }
        self.buf.put_slice(b"}\n\n");
        self.buf.split().freeze()
    }

    fn begin(&mut self, extra: usize) {
        let need = self.head.len() + extra + 160;
        if self.buf.capacity() < need {
            self.buf.reserve(need.max(ARENA));
        }
        self.buf.put_slice(&self.head);
    }

    fn end_choice(&mut self, finish: Option<&str>, usage: Option<u64>) -> Bytes {
        self.buf.put_slice(b",\"finish_reason\":");
        match finish {
            Some(f) => {
                self.buf.put_u8(b'"');
                self.buf.put_slice(f.as_bytes());
                self.buf.put_u8(b'"');
            }
            None => self.buf.put_slice(b"null"),
        }
        self.buf.put_slice(b"}]");
        if let Some(c) = usage {
            self.push_usage(c);
        }
        self.buf.put_slice(b"}\n\n");
        self.buf.split().freeze()
    }

    fn push_usage(&mut self, completion: u64) {
        // Invariant: fmt::Write into a BytesMut cannot fail.
        let _ = write!(
            self.buf,
            ",\"usage\":{{\"prompt_tokens\":{},\"completion_tokens\":{},\"total_tokens\":{},\"prompt_tokens_details\":{{\"cached_tokens\":{}}}}}",
            self.prompt_tokens,
            completion,
            self.prompt_tokens + completion,
            self.cached_tokens
        );
    }
}

/// The whole non-streaming response (`chat.completion` or `text_completion`).
pub(crate) fn full_body(plan: &Plan, reasoning_field: &str) -> Bytes {
    let o: &Output = &plan.output;
    let mut usage = json!({
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": o.tokens,
        "total_tokens": plan.prompt_tokens + o.tokens,
        "prompt_tokens_details": {"cached_tokens": plan.cached_tokens},
    });
    if o.reasoning_tokens > 0 {
        usage["completion_tokens_details"] = json!({"reasoning_tokens": o.reasoning_tokens});
    }
    let choice = match plan.api {
        Api::Chat => {
            let mut msg = Map::new();
            msg.insert("role".into(), "assistant".into());
            let content = o.content();
            msg.insert(
                "content".into(),
                if !o.tools.is_empty() && content.is_empty() {
                    Value::Null
                } else {
                    content.into()
                },
            );
            if o.reasoning_tokens > 0 {
                msg.insert(reasoning_field.into(), o.reasoning().into());
            }
            if let Some(calls) = o.tool_calls() {
                msg.insert("tool_calls".into(), json!(calls));
            }
            json!({"index": 0, "message": msg, "finish_reason": o.finish})
        }
        Api::Completions => json!({"index": 0, "text": o.content(), "finish_reason": o.finish}),
    };
    let body = json!({
        "id": plan.id,
        "object": match plan.api { Api::Chat => "chat.completion", Api::Completions => "text_completion" },
        "created": plan.created,
        "model": plan.model,
        "choices": [choice],
        "usage": usage,
    });
    // Invariant: a serde_json::Value always serializes.
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

fn push_json_str(out: &mut Vec<u8>, s: &str) {
    let mut b = BytesMut::with_capacity(s.len() + 2);
    push_json_str_buf(&mut b, s);
    out.extend_from_slice(&b);
}

/// Writes `s` as a JSON string literal. Generated text is plain ASCII words, so the fast path
/// (no byte needs escaping) is one copy.
fn push_json_str_buf(b: &mut BytesMut, s: &str) {
    b.put_u8(b'"');
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\') {
        b.put_slice(bytes);
    } else {
        let mut start = 0;
        for (i, &c) in bytes.iter().enumerate() {
            let esc: &[u8] = match c {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                c if c < 0x20 => {
                    b.put_slice(&bytes[start..i]);
                    let _ = write!(b, "\\u{c:04x}");
                    start = i + 1;
                    continue;
                }
                _ => continue,
            };
            b.put_slice(&bytes[start..i]);
            b.put_slice(esc);
            start = i + 1;
        }
        b.put_slice(&bytes[start..]);
    }
    b.put_u8(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_matches_serde() {
        for s in ["plain words", "q\"uo\\te\n\t\u{1}é", ""] {
            let mut b = BytesMut::new();
            push_json_str_buf(&mut b, s);
            assert_eq!(&b[..], serde_json::to_string(s).unwrap().as_bytes());
        }
    }
}
