//! The OpenAI Responses API (`/v1/responses`) and the Anthropic Messages API (`/v1/messages`):
//! their streamed events and whole bodies read into the same [`ChunkInfo`] a chat chunk gives,
//! so one [`crate::timeline::Timeline`] measures all three (docs/benchmark.md#other-apis).
//!
//! Like [`crate::chunk`], the JSON is read into borrowed views: text is only checked for
//! emptiness, unknown fields are skipped, nothing is allocated per event.
//!
//! What counts as a token-carrying event (the TTFT event):
//! - Responses: `response.output_text.delta`, `response.reasoning_text.delta`,
//!   `response.reasoning_summary_text.delta`, `response.function_call_arguments.delta` with a
//!   non-empty `delta`, and `response.output_item.added` of a `function_call` item (its name was
//!   generated: the chat stream's tool-call header partial counts the same way);
//! - Messages: `content_block_delta` with non-empty `text_delta` (content), `thinking_delta`
//!   (reasoning) or `input_json_delta` (tool input), and `content_block_start` of a `tool_use`
//!   block (the generated tool name) or of a text/thinking block that already carries text.
//!
//! The stream's end: `response.completed`, `response.incomplete`, `response.failed`;
//! `message_stop`. Errors: Responses `error` and `response.failed`, Messages `error`.

use crate::chunk::{ChunkInfo, FinishReason, Usage};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::fmt;

pub use crate::api::Api;

/// How to read a response body: its API, and what the Messages API's `usage.input_tokens`
/// counts there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dialect {
    /// The API.
    pub api: Api,
    /// Messages: the server's `input_tokens` is the whole prompt (SGLang; vLLM before it
    /// followed Anthropic), not Anthropic's count of the prompt tokens neither read from nor
    /// written to the cache (the proxy's `--messages-input-tokens total`).
    pub messages_input_total: bool,
}

impl From<Api> for Dialect {
    fn from(api: Api) -> Dialect {
        Dialect {
            api,
            messages_input_total: false,
        }
    }
}

/// One event (or whole body) read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Event<'a> {
    /// What the event carried.
    pub info: ChunkInfo,
    /// The response's id (`chatcmpl-…`, `resp_…`, `msg_…`) as raw JSON text, when this event
    /// has it.
    pub id: Option<&'a str>,
    /// An error's message (or its whole object) as raw JSON, on an error event.
    pub detail: Option<&'a RawValue>,
}

impl Dialect {
    /// Reads one SSE `data` payload, or a whole non-streaming body, of this API.
    pub fn parse(self, data: &[u8]) -> Result<Event<'_>, serde_json::Error> {
        match self.api {
            Api::Chat | Api::Completions => {
                let (info, id) = ChunkInfo::parse_with_id(data)?;
                Ok(Event {
                    info,
                    id,
                    detail: None,
                })
            }
            Api::Responses => responses(data),
            Api::Messages => messages(data, self.messages_input_total),
        }
    }
}

fn is(v: Option<&RawValue>, s: &str) -> bool {
    v.is_some_and(|v| v.get().len() == s.len() + 2 && &v.get()[1..v.get().len() - 1] == s)
}

fn non_empty(v: Option<&RawValue>) -> bool {
    v.is_some_and(|v| !matches!(v.get(), "null" | "\"\"" | "[]" | "{}"))
}

// ---------------------------------------------------------------- Responses

#[derive(Deserialize)]
struct RespEvent<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(default, borrow)]
    delta: Option<&'a RawValue>,
    #[serde(default, borrow)]
    item: Option<RespItem<'a>>,
    #[serde(default, borrow)]
    response: Option<RespBody<'a>>,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RespItem<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<&'a RawValue>,
}

/// A response object: an event's `response`, or a whole non-streaming body (read again as this
/// when the data has no `type`: once per response, not per event).
#[derive(Deserialize)]
struct RespBody<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    object: Option<&'a RawValue>,
    #[serde(default, borrow)]
    status: Option<&'a RawValue>,
    #[serde(default)]
    usage: Option<RespUsage>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
    #[serde(default, borrow)]
    incomplete_details: Option<Incomplete<'a>>,
    #[serde(default)]
    output: Option<OutputKinds>,
}

#[derive(Deserialize)]
struct Incomplete<'a> {
    #[serde(default, borrow)]
    reason: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RespUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutDetails>,
}

#[derive(Deserialize)]
struct InDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl RespUsage {
    fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.input_tokens,
            completion_tokens: self.output_tokens,
            cached_tokens: self
                .input_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens),
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens),
        }
    }
}

/// What an `output` array holds, folded without collecting: which item kinds carry text.
#[derive(Default)]
struct OutputKinds {
    content: bool,
    reasoning: bool,
    function_call: bool,
}

impl<'de> Deserialize<'de> for OutputKinds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Item<'a> {
            #[serde(default, borrow, rename = "type")]
            kind: Option<&'a RawValue>,
            #[serde(default, borrow)]
            content: Option<&'a RawValue>,
            #[serde(default, borrow)]
            summary: Option<&'a RawValue>,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OutputKinds;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of output items")
            }
            fn visit_unit<E: de::Error>(self) -> Result<OutputKinds, E> {
                Ok(OutputKinds::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OutputKinds, A::Error> {
                let mut k = OutputKinds::default();
                while let Some(item) = seq.next_element::<Item<'de>>()? {
                    if is(item.kind, "message") {
                        k.content |= non_empty(item.content);
                    } else if is(item.kind, "reasoning") {
                        k.reasoning |= non_empty(item.content) || non_empty(item.summary);
                    } else if is(item.kind, "function_call") {
                        k.function_call = true;
                    }
                }
                Ok(k)
            }
        }
        d.deserialize_any(V)
    }
}

/// The finish reason of a response that ended with `status`.
fn responses_finish(
    status: Option<&RawValue>,
    incomplete: Option<&Incomplete<'_>>,
    tool_calls: bool,
) -> Option<FinishReason> {
    let status = status?;
    Some(if is(Some(status), "completed") {
        if tool_calls {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        }
    } else if is(Some(status), "incomplete") {
        match incomplete.and_then(|i| i.reason) {
            r if is(r, "max_output_tokens") => FinishReason::Length,
            r if is(r, "content_filter") => FinishReason::ContentFilter,
            _ => FinishReason::Other,
        }
    } else if is(Some(status), "in_progress") || is(Some(status), "queued") {
        return None;
    } else {
        FinishReason::Other
    })
}

fn responses(data: &[u8]) -> Result<Event<'_>, serde_json::Error> {
    let e: RespEvent<'_> = serde_json::from_slice(data)?;
    let mut ev = Event::default();
    let info = &mut ev.info;
    let Some(kind) = e.kind.map(RawValue::get) else {
        // No `type`: a whole response object (`"object": "response"`) or an error body.
        let b: RespBody<'_> = serde_json::from_slice(data)?;
        if let Some(err) = b.error.filter(|v| v.get() != "null") {
            info.error = true;
            ev.detail = Some(err);
        }
        if is(b.object, "response") || b.output.is_some() {
            let out = b.output.unwrap_or_default();
            info.content = out.content;
            info.reasoning = out.reasoning;
            info.tool_call = out.function_call;
            info.finish_reason =
                responses_finish(b.status, b.incomplete_details.as_ref(), out.function_call);
            info.usage = b.usage.as_ref().map(RespUsage::usage);
            info.end = true;
            ev.id = b.id.map(RawValue::get);
        }
        return Ok(ev);
    };
    match kind {
        "\"response.output_text.delta\"" | "\"response.refusal.delta\"" => {
            info.content = non_empty(e.delta)
        }
        "\"response.reasoning_text.delta\""
        | "\"response.reasoning_summary_text.delta\""
        | "\"response.reasoning.delta\"" => info.reasoning = non_empty(e.delta),
        "\"response.function_call_arguments.delta\"" => info.tool_call = non_empty(e.delta),
        "\"response.output_item.added\"" => {
            info.tool_call = e.item.is_some_and(|i| is(i.kind, "function_call"))
        }
        "\"response.completed\"" | "\"response.incomplete\"" | "\"response.failed\"" => {
            info.end = true;
            if let Some(r) = e.response.as_ref() {
                let tools = r.output.as_ref().is_some_and(|o| o.function_call);
                info.finish_reason =
                    responses_finish(r.status, r.incomplete_details.as_ref(), tools);
                info.usage = r.usage.as_ref().map(RespUsage::usage);
                ev.id = r.id.map(RawValue::get);
                if kind == "\"response.failed\"" {
                    info.error = true;
                    ev.detail = r.error.filter(|v| v.get() != "null");
                }
            }
        }
        "\"error\"" => {
            info.error = true;
            ev.detail = e.message.or(e.error);
        }
        _ => {
            // response.created / in_progress carry the id; the rest say nothing measured.
            ev.id = e.response.as_ref().and_then(|r| r.id).map(RawValue::get);
        }
    }
    Ok(ev)
}

// ---------------------------------------------------------------- Messages

#[derive(Deserialize)]
struct MsgEvent<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(default, borrow)]
    message: Option<MsgBody<'a>>,
    #[serde(default, borrow)]
    delta: Option<MsgDelta<'a>>,
    #[serde(default, borrow)]
    content_block: Option<Block<'a>>,
    #[serde(default)]
    usage: Option<MsgUsage>,
    #[serde(default, borrow)]
    error: Option<MsgError<'a>>,
    // A whole non-streaming body is a message object at the top level.
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    stop_reason: Option<&'a RawValue>,
    #[serde(default)]
    content: Option<BlockKinds>,
}

#[derive(Deserialize)]
struct MsgBody<'a> {
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    usage: Option<MsgUsage>,
}

/// A `delta` of `content_block_delta` / `message_delta`, or a `content_block` (text, thinking,
/// tool_use): the same few members.
#[derive(Deserialize)]
struct MsgDelta<'a> {
    #[serde(default, borrow, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(default, borrow)]
    text: Option<&'a RawValue>,
    #[serde(default, borrow)]
    thinking: Option<&'a RawValue>,
    #[serde(default, borrow)]
    partial_json: Option<&'a RawValue>,
    #[serde(default, borrow)]
    stop_reason: Option<&'a RawValue>,
}

type Block<'a> = MsgDelta<'a>;

#[derive(Deserialize)]
struct MsgError<'a> {
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
}

/// Anthropic's usage: `input_tokens` counts the prompt tokens that were neither read from nor
/// written to the cache; the prompt is all three.
#[derive(Deserialize)]
struct MsgUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

impl MsgUsage {
    fn usage(&self, input_total: bool) -> Usage {
        let prompt = self.input_tokens.map(|i| {
            if input_total {
                i
            } else {
                i + self.cache_read_input_tokens.unwrap_or(0)
                    + self.cache_creation_input_tokens.unwrap_or(0)
            }
        });
        Usage {
            prompt_tokens: prompt,
            completion_tokens: self.output_tokens,
            cached_tokens: self.cache_read_input_tokens,
            reasoning_tokens: None,
        }
    }
}

/// What a `content` array of a whole message holds.
#[derive(Default)]
struct BlockKinds {
    content: bool,
    reasoning: bool,
    tool_use: bool,
}

impl<'de> Deserialize<'de> for BlockKinds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BlockKinds;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of content blocks")
            }
            fn visit_unit<E: de::Error>(self) -> Result<BlockKinds, E> {
                Ok(BlockKinds::default())
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<BlockKinds, E> {
                Ok(BlockKinds {
                    content: !s.is_empty(),
                    ..BlockKinds::default()
                })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<BlockKinds, A::Error> {
                let mut k = BlockKinds::default();
                while let Some(b) = seq.next_element::<Block<'de>>()? {
                    k.content |= is(b.kind, "text") && non_empty(b.text);
                    k.reasoning |= is(b.kind, "thinking") && non_empty(b.thinking);
                    k.tool_use |= is(b.kind, "tool_use");
                }
                Ok(k)
            }
        }
        d.deserialize_any(V)
    }
}

fn messages_finish(reason: Option<&RawValue>) -> Option<FinishReason> {
    let r = reason.filter(|r| r.get() != "null")?;
    Some(match r.get() {
        "\"end_turn\"" | "\"stop_sequence\"" => FinishReason::Stop,
        "\"max_tokens\"" => FinishReason::Length,
        "\"tool_use\"" => FinishReason::ToolCalls,
        "\"refusal\"" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    })
}

fn messages(data: &[u8], input_total: bool) -> Result<Event<'_>, serde_json::Error> {
    let e: MsgEvent<'_> = serde_json::from_slice(data)?;
    let mut ev = Event::default();
    let info = &mut ev.info;
    let kind = e.kind.map(RawValue::get).unwrap_or("");
    match kind {
        "\"content_block_delta\"" => {
            if let Some(d) = e.delta.as_ref() {
                if is(d.kind, "text_delta") {
                    info.content = non_empty(d.text);
                } else if is(d.kind, "thinking_delta") {
                    info.reasoning = non_empty(d.thinking);
                } else if is(d.kind, "input_json_delta") {
                    info.tool_call = non_empty(d.partial_json);
                }
            }
        }
        "\"content_block_start\"" => {
            if let Some(b) = e.content_block.as_ref() {
                info.tool_call = is(b.kind, "tool_use") || is(b.kind, "server_tool_use");
                info.content = is(b.kind, "text") && non_empty(b.text);
                info.reasoning = is(b.kind, "thinking") && non_empty(b.thinking);
            }
        }
        "\"message_start\"" => {
            if let Some(m) = e.message.as_ref() {
                ev.id = m.id.map(RawValue::get);
                // Its `output_tokens` is a placeholder (0 or 1) before any output: the count is
                // `message_delta`'s; a stream cut before that one counts its chunks instead.
                info.usage = m.usage.as_ref().map(|u| Usage {
                    completion_tokens: None,
                    ..u.usage(input_total)
                });
            }
        }
        "\"message_delta\"" => {
            info.finish_reason = messages_finish(e.delta.as_ref().and_then(|d| d.stop_reason));
            info.usage = e.usage.as_ref().map(|u| u.usage(input_total));
        }
        "\"message_stop\"" => info.end = true,
        "\"error\"" => {
            info.error = true;
            ev.detail = e.error.as_ref().and_then(|x| x.message);
        }
        "\"message\"" => {
            // A whole non-streaming body.
            let c = e.content.unwrap_or_default();
            info.content = c.content;
            info.reasoning = c.reasoning;
            info.tool_call = c.tool_use;
            info.finish_reason = messages_finish(e.stop_reason);
            info.usage = e.usage.as_ref().map(|u| u.usage(input_total));
            info.end = true;
            ev.id = e.id.map(RawValue::get);
        }
        _ => {}
    }
    Ok(ev)
}

/// An error event's detail as text for a record's message: a JSON string's value, else the raw
/// JSON; at most 300 bytes (cut on a character boundary).
pub fn detail_text(raw: &RawValue) -> String {
    let s = raw.get();
    let mut t = serde_json::from_str::<String>(s).unwrap_or_else(|_| s.to_string());
    if t.len() > 300 {
        let mut cut = 300;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        t.truncate(cut);
        t.push('…');
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Event<'_> {
        Dialect::from(Api::Responses).parse(s.as_bytes()).unwrap()
    }
    fn m(s: &str) -> Event<'_> {
        Dialect::from(Api::Messages).parse(s.as_bytes()).unwrap()
    }

    #[test]
    fn responses_stream() {
        let e = r(
            r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}"#,
        );
        assert_eq!(e.id, Some("\"resp_1\""));
        assert!(!e.info.carries_text() && !e.info.end);
        assert!(r(r#"{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hi"}"#).info.content);
        assert!(!r(r#"{"type":"response.output_text.delta","delta":""}"#)
            .info
            .carries_text());
        assert!(
            r(r#"{"type":"response.reasoning_text.delta","delta":"hm"}"#)
                .info
                .reasoning
        );
        assert!(
            r(r#"{"type":"response.reasoning_summary_text.delta","delta":"hm"}"#)
                .info
                .reasoning
        );
        assert!(
            r(r#"{"type":"response.function_call_arguments.delta","delta":"{\""}"#)
                .info
                .tool_call
        );
        assert!(r(r#"{"type":"response.output_item.added","item":{"type":"function_call","name":"bash","arguments":""}}"#).info.tool_call);
        assert!(!r(
            r#"{"type":"response.output_item.added","item":{"type":"message","content":[]}}"#
        )
        .info
        .carries_text());
        let done = r(
            r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[{"type":"function_call","arguments":"{}"}],"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":8},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":17}}}"#,
        );
        assert!(done.info.end && !done.info.error);
        assert_eq!(done.info.finish_reason, Some(FinishReason::ToolCalls));
        let u = done.info.usage.unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.completion_tokens,
                u.cached_tokens,
                u.reasoning_tokens
            ),
            (Some(12), Some(5), Some(8), Some(2))
        );
        let cut = r(
            r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":3,"output_tokens":9}}}"#,
        );
        assert_eq!(cut.info.finish_reason, Some(FinishReason::Length));
    }

    #[test]
    fn responses_errors_and_bodies() {
        let e = r(r#"{"type":"error","code":"server_error","message":"boom","param":null}"#);
        assert!(e.info.error);
        assert_eq!(detail_text(e.detail.unwrap()), "boom");
        let f = r(
            r#"{"type":"response.failed","response":{"id":"resp_2","status":"failed","error":{"code":"server_error","message":"engine died"}}}"#,
        );
        assert!(f.info.error && f.info.end);
        assert!(detail_text(f.detail.unwrap()).contains("engine died"));
        let body = r(
            r#"{"id":"resp_3","object":"response","status":"completed","output":[{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"x"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}],"usage":{"input_tokens":4,"output_tokens":2}}"#,
        );
        assert!(body.info.content && body.info.reasoning && body.info.end);
        assert_eq!(body.info.finish_reason, Some(FinishReason::Stop));
        assert_eq!(body.id, Some("\"resp_3\""));
        let err = r(r#"{"error":{"message":"bad model","type":"invalid_request_error"}}"#);
        assert!(err.info.error);
        assert!(Dialect::from(Api::Responses)
            .parse(b"{\"type\":\"response.output_text.delta\",")
            .is_err());
    }

    #[test]
    fn messages_stream() {
        let s = m(
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":5,"cache_read_input_tokens":20,"cache_creation_input_tokens":0,"output_tokens":1}}}"#,
        );
        assert_eq!(s.id, Some("\"msg_1\""));
        let u = s.info.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.cached_tokens), (Some(25), Some(20)));
        assert_eq!(
            u.completion_tokens, None,
            "message_start's output count is a placeholder"
        );
        let total = Dialect { api: Api::Messages, messages_input_total: true }
            .parse(br#"{"type":"message_start","message":{"usage":{"input_tokens":25,"cache_read_input_tokens":20}}}"#)
            .unwrap();
        let u = total.info.usage.unwrap();
        assert_eq!((u.prompt_tokens, u.cached_tokens), (Some(25), Some(20)));
        assert!(!m(
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#
        )
        .info
        .carries_text());
        assert!(m(r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}"#).info.tool_call);
        assert!(m(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#).info.content);
        assert!(m(r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#).info.reasoning);
        assert!(m(r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a"}}"#).info.tool_call);
        assert!(!m(r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}"#).info.carries_text());
        assert!(!m(r#"{"type":"ping"}"#).info.carries_text());
        let d = m(
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        );
        assert_eq!(d.info.finish_reason, Some(FinishReason::ToolCalls));
        assert_eq!(d.info.usage.unwrap().completion_tokens, Some(15));
        assert!(m(r#"{"type":"message_stop"}"#).info.end);
        let e = m(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#);
        assert!(e.info.error);
        assert_eq!(detail_text(e.detail.unwrap()), "Overloaded");
    }

    #[test]
    fn messages_body() {
        let b = m(
            r#"{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"thinking","thinking":"x","signature":""},{"type":"text","text":"ok"},{"type":"tool_use","id":"t","name":"bash","input":{"c":1}}],"stop_reason":"max_tokens","usage":{"input_tokens":7,"output_tokens":3}}"#,
        );
        assert!(b.info.content && b.info.reasoning && b.info.tool_call && b.info.end);
        assert_eq!(b.info.finish_reason, Some(FinishReason::Length));
        assert_eq!(b.info.usage.unwrap().prompt_tokens, Some(7));
        assert!(
            m(r#"{"type":"error","error":{"type":"invalid_request_error","message":"x"}}"#)
                .info
                .error
        );
    }

    #[test]
    fn detail_is_bounded() {
        let long = format!("\"{}\"", "é".repeat(400));
        let raw: &RawValue = serde_json::from_str(&long).unwrap();
        let t = detail_text(raw);
        assert!(t.len() <= 304 && t.ends_with('…'));
    }
}
