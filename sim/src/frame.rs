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
    /// Responses and Messages APIs: the response id, the model, the next `sequence_number`,
    /// and the output item / content block open now (its kind and index).
    id: String,
    model: String,
    created: u64,
    seq: u64,
    open: Option<(SegKind, u64)>,
    blocks: u64,
    /// The open item's or block's text so far (its `.done` events and final item carry it
    /// whole), and the open tool call's (id, name).
    acc: String,
    call: (String, String),
    /// Messages API, `thinking.display: "omitted"`: thinking blocks carry no text, only their
    /// signature.
    hide_reasoning: bool,
}

impl ChunkWriter {
    pub fn new(plan: &Plan, reasoning_field: &'static str) -> Self {
        let object = match plan.api {
            Api::Completions => "text_completion",
            _ => "chat.completion.chunk",
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
            id: plan.id.clone(),
            model: plan.model.clone(),
            created: plan.created,
            seq: 0,
            open: None,
            blocks: 0,
            acc: String::new(),
            call: (String::new(), String::new()),
            hide_reasoning: plan.hide_reasoning,
        }
    }

    /// One event of the Responses or Messages API: an `event:` line with its type, then its
    /// data (`sequence_number` added for the Responses API), as vLLM writes them.
    fn event(&mut self, mut data: Value) {
        let kind = data["type"].as_str().unwrap_or("").to_string();
        if self.api == Api::Responses {
            data["sequence_number"] = self.seq.into();
            self.seq += 1;
        }
        self.buf.reserve(kind.len() + 64);
        self.buf.put_slice(b"event: ");
        self.buf.put_slice(kind.as_bytes());
        self.buf.put_slice(b"\ndata: ");
        // Invariant: a serde_json::Value always serializes.
        self.buf
            .put_slice(&serde_json::to_vec(&data).unwrap_or_default());
        self.buf.put_slice(b"\n\n");
    }

    /// Closes the open item or block, if any: the Responses API's `.done` events (the text, the
    /// part, the item, each whole) or the Messages API's signature (thinking) and block stop.
    fn close(&mut self, status: &str) {
        let Some((kind, i)) = self.open.take() else {
            return;
        };
        let text = std::mem::take(&mut self.acc);
        let id = self.id.clone();
        if self.api == Api::Messages {
            if kind == SegKind::Reasoning {
                self.event(json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "signature_delta", "signature": signature(&id, i)}}));
            }
            self.event(json!({"type": "content_block_stop", "index": i}));
            return;
        }
        let (call_id, name) = std::mem::take(&mut self.call);
        let item = responses_item(&id, i, kind, &text, (&call_id, &name), status);
        let item_id = item["id"].clone();
        match kind {
            SegKind::Reasoning => {
                self.event(
                    json!({"type": "response.reasoning_text.done", "item_id": item_id,
                    "output_index": i, "content_index": 0, "text": text}),
                );
                self.event(
                    json!({"type": "response.content_part.done", "item_id": item_id,
                    "output_index": i, "content_index": 0, "part": item["content"][0]}),
                );
            }
            SegKind::Content => {
                self.event(
                    json!({"type": "response.output_text.done", "item_id": item_id,
                    "output_index": i, "content_index": 0, "text": text, "logprobs": []}),
                );
                self.event(
                    json!({"type": "response.content_part.done", "item_id": item_id,
                    "output_index": i, "content_index": 0, "part": item["content"][0]}),
                );
            }
            SegKind::ToolHeader | SegKind::ToolArgs => {
                self.event(json!({"type": "response.function_call_arguments.done",
                    "item_id": item_id, "output_index": i, "name": name, "arguments": text}));
            }
        }
        self.event(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }

    /// Opens the item or block a segment of `kind` goes into (a tool call's header opens its
    /// own); `tool` is (index, id, name) of a tool call.
    fn open(&mut self, kind: SegKind, tool: (usize, &str, &str)) -> u64 {
        if let Some((k, i)) = self.open {
            if k == kind || (kind == SegKind::ToolArgs && k == SegKind::ToolHeader) {
                return i;
            }
        }
        self.close("completed");
        let i = self.blocks;
        self.blocks += 1;
        self.open = Some((kind, i));
        let id = self.id.clone();
        if self.api == Api::Responses {
            if matches!(kind, SegKind::ToolHeader | SegKind::ToolArgs) {
                self.call = (tool.1.to_string(), tool.2.to_string());
            }
            let (call_id, name) = self.call.clone();
            let mut item = responses_item(&id, i, kind, "", (&call_id, &name), "in_progress");
            // An item opens empty: its part (an empty text) is added by its own event.
            let part = item
                .get_mut("content")
                .map(|c| std::mem::replace(c, json!([]))[0].clone());
            let item_id = item["id"].clone();
            self.event(
                json!({"type": "response.output_item.added", "output_index": i, "item": item}),
            );
            if matches!(kind, SegKind::Reasoning | SegKind::Content) {
                self.event(
                    json!({"type": "response.content_part.added", "item_id": item_id,
                    "output_index": i, "content_index": 0, "part": part}),
                );
            }
            return i;
        }
        let block = match kind {
            SegKind::Reasoning => json!({"type": "thinking", "thinking": "", "signature": ""}),
            SegKind::Content => json!({"type": "text", "text": ""}),
            _ => json!({"type": "tool_use", "id": tool.1, "name": tool.2, "input": {}}),
        };
        self.event(json!({"type": "content_block_start", "index": i, "content_block": block}));
        i
    }

    /// A token chunk of the Responses or Messages API: the events opening its item or block
    /// when it starts one, then its delta (a tool call's header is its opening event alone; a
    /// hidden thinking block's text is not sent).
    fn api_piece(&mut self, kind: SegKind, text: &str, tool: (usize, &str, &str)) -> Bytes {
        let hidden = self.hide_reasoning && kind == SegKind::Reasoning;
        let i = self.open(kind, tool);
        if hidden {
            return self.buf.split().freeze();
        }
        self.acc.push_str(text);
        let id = self.id.clone();
        let delta = match (self.api, kind) {
            (_, SegKind::ToolHeader) => None,
            (Api::Responses, SegKind::Reasoning) => {
                Some(json!({"type": "response.reasoning_text.delta",
                "item_id": format!("rs_{id}_{i}"), "output_index": i, "content_index": 0, "delta": text}))
            }
            (Api::Responses, SegKind::Content) => {
                Some(json!({"type": "response.output_text.delta",
                "item_id": format!("msg_{id}_{i}"), "output_index": i, "content_index": 0, "delta": text, "logprobs": []}))
            }
            (Api::Responses, _) => Some(json!({"type": "response.function_call_arguments.delta",
                "item_id": format!("fc_{id}_{i}"), "output_index": i, "delta": text})),
            (_, SegKind::Reasoning) => Some(json!({"type": "content_block_delta", "index": i,
                "delta": {"type": "thinking_delta", "thinking": text}})),
            (_, SegKind::Content) => Some(json!({"type": "content_block_delta", "index": i,
                "delta": {"type": "text_delta", "text": text}})),
            (_, _) => Some(json!({"type": "content_block_delta", "index": i,
                "delta": {"type": "input_json_delta", "partial_json": text}})),
        };
        if let Some(d) = delta {
            self.event(d);
        }
        self.buf.split().freeze()
    }

    /// The Responses or Messages API's end: `response.completed` with the whole response, or the
    /// open block's stop, `message_delta` (stop reason, output tokens) and `message_stop`.
    pub fn api_end(&mut self, plan: &Plan, reasoning_field: &str, completion: u64) -> Bytes {
        let incomplete = plan.output.finish == "length";
        if self.api == Api::Responses {
            self.close(if incomplete {
                "incomplete"
            } else {
                "completed"
            });
            // The empty message the whole response has when nothing else was said.
            if self.blocks == 0 {
                self.open(SegKind::Content, (0, "", ""));
                self.close(if incomplete {
                    "incomplete"
                } else {
                    "completed"
                });
            }
            let body: Value =
                serde_json::from_slice(&full_body(plan, reasoning_field)).unwrap_or_default();
            let kind = if incomplete {
                "response.incomplete"
            } else {
                "response.completed"
            };
            self.event(json!({"type": kind, "response": body}));
        } else {
            self.close("completed");
            self.event(json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason(plan.output.finish), "stop_sequence": null},
                "usage": {"output_tokens": completion}}));
            self.event(json!({"type": "message_stop"}));
        }
        self.buf.split().freeze()
    }

    /// The role-only prelude (chat), `response.created` (Responses), `message_start` (Messages).
    pub fn prelude(&mut self, usage: Option<u64>) -> Bytes {
        match self.api {
            Api::Responses => {
                let response = json!({"id": self.id, "object": "response", "created_at": self.created,
                    "model": self.model, "status": "in_progress", "output": [], "usage": null});
                self.event(json!({"type": "response.created", "response": response}));
                self.event(json!({"type": "response.in_progress", "response": response}));
                return self.buf.split().freeze();
            }
            Api::Messages => {
                let ev = json!({"type": "message_start", "message": {"id": self.id, "type": "message", "role": "assistant",
                    "model": self.model, "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": {"input_tokens": self.prompt_tokens - self.cached_tokens, "cache_read_input_tokens": self.cached_tokens,
                        "cache_creation_input_tokens": 0, "output_tokens": 0}}});
                self.event(ev);
                return self.buf.split().freeze();
            }
            _ => {}
        }
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
        if matches!(self.api, Api::Responses | Api::Messages) {
            return self.api_piece(kind, text, tool);
        }
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
            (Api::Responses | Api::Messages, _) => {}
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

/// The Messages API's stop reason for a chat finish reason.
fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" => "tool_use",
        _ => "end_turn",
    }
}

/// The whole non-streaming response (`chat.completion`, `text_completion`, a Responses API
/// `response`, a Messages API `message`).
pub(crate) fn full_body(plan: &Plan, reasoning_field: &str) -> Bytes {
    let o: &Output = &plan.output;
    match plan.api {
        Api::Responses => return responses_body(plan),
        Api::Messages => return messages_body(plan),
        _ => {}
    }
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
        _ => json!({"index": 0, "text": o.content(), "finish_reason": o.finish}),
    };
    let body = json!({
        "id": plan.id,
        "object": match plan.api { Api::Completions => "text_completion", _ => "chat.completion" },
        "created": plan.created,
        "model": plan.model,
        "choices": [choice],
        "usage": usage,
    });
    // Invariant: a serde_json::Value always serializes.
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// One output item of a Responses API response, as `response.output_item.done` and the whole
/// response carry it: a reasoning item, a message, or a function call (`call` its call id and
/// name), at output index `i`, with `text` its whole text (or arguments).
fn responses_item(
    id: &str,
    i: u64,
    kind: SegKind,
    text: &str,
    call: (&str, &str),
    status: &str,
) -> Value {
    match kind {
        SegKind::Reasoning => {
            json!({"type": "reasoning", "id": format!("rs_{id}_{i}"), "summary": [],
            "content": [{"type": "reasoning_text", "text": text}], "status": status})
        }
        SegKind::Content => {
            json!({"type": "message", "id": format!("msg_{id}_{i}"), "role": "assistant",
            "status": status, "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
        }
        SegKind::ToolHeader | SegKind::ToolArgs => {
            json!({"type": "function_call", "id": format!("fc_{id}_{i}"),
            "call_id": call.0, "name": call.1, "arguments": text, "status": status})
        }
    }
}

/// The whole Responses API response: its items in the order a stream of the same plan opens
/// them (reasoning, the message, each call; an empty message when nothing else), with the same
/// ids; the last item `incomplete` when the output was cut at its length.
fn responses_body(plan: &Plan) -> Bytes {
    let o = &plan.output;
    let id = &plan.id;
    let incomplete = o.finish == "length";
    let mut parts: Vec<(SegKind, String, (String, String))> = Vec::new();
    if o.reasoning_tokens > 0 {
        parts.push((
            SegKind::Reasoning,
            o.reasoning().to_string(),
            Default::default(),
        ));
    }
    if !o.content().is_empty() {
        parts.push((
            SegKind::Content,
            o.content().to_string(),
            Default::default(),
        ));
    }
    for call in o.tool_calls().unwrap_or_default() {
        let name = call.function.name.clone().unwrap_or_default();
        parts.push((
            SegKind::ToolArgs,
            call.function.arguments.clone(),
            (call.id.clone().unwrap_or_default(), name),
        ));
    }
    if parts.is_empty() {
        parts.push((SegKind::Content, String::new(), Default::default()));
    }
    let last = parts.len() - 1;
    let output: Vec<Value> = parts
        .iter()
        .enumerate()
        .map(|(i, (kind, text, call))| {
            let status = if incomplete && i == last {
                "incomplete"
            } else {
                "completed"
            };
            responses_item(id, i as u64, *kind, text, (&call.0, &call.1), status)
        })
        .collect();
    let body = json!({
        "id": id, "object": "response", "created_at": plan.created, "model": plan.model,
        "status": if incomplete { "incomplete" } else { "completed" },
        "incomplete_details": if incomplete { json!({"reason": "max_output_tokens"}) } else { Value::Null },
        "output": output,
        "usage": {
            "input_tokens": plan.prompt_tokens,
            "input_tokens_details": {"cached_tokens": plan.cached_tokens},
            "output_tokens": o.tokens,
            "output_tokens_details": {"reasoning_tokens": o.reasoning_tokens},
            "total_tokens": plan.prompt_tokens + o.tokens,
        },
    });
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

/// A thinking block's signature: opaque, non-empty, the same for the same response and block
/// (a client echoes it back; the sim does not check it).
fn signature(id: &str, i: u64) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(64);
    let mut h = tokentap_core::route::hash64(format!("{id}/{i}").as_bytes());
    for _ in 0..48 {
        h = tokentap_core::rng::mix(h);
        out.push(B64[(h & 63) as usize] as char);
    }
    out
}

fn messages_body(plan: &Plan) -> Bytes {
    let o = &plan.output;
    let mut content = Vec::new();
    if o.reasoning_tokens > 0 {
        let thinking = if plan.hide_reasoning {
            ""
        } else {
            o.reasoning()
        };
        content.push(
            json!({"type": "thinking", "thinking": thinking, "signature": signature(&plan.id, 0)}),
        );
    }
    if !o.content().is_empty() || o.tools.is_empty() {
        content.push(json!({"type": "text", "text": o.content()}));
    }
    for call in o.tool_calls().unwrap_or_default() {
        let input: Value =
            serde_json::from_str(&call.function.arguments).unwrap_or_else(|_| json!({}));
        content.push(
            json!({"type": "tool_use", "id": call.id, "name": call.function.name, "input": input}),
        );
    }
    let body = json!({
        "id": plan.id, "type": "message", "role": "assistant", "model": plan.model,
        "content": content, "stop_reason": stop_reason(o.finish), "stop_sequence": null,
        "usage": {
            "input_tokens": plan.prompt_tokens - plan.cached_tokens,
            "cache_read_input_tokens": plan.cached_tokens,
            "cache_creation_input_tokens": 0,
            "output_tokens": o.tokens,
        },
    });
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
