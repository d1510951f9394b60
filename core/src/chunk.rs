//! What one streamed `chat.completion.chunk` (or `text_completion` chunk, or a whole
//! non-streaming response) says, in the terms measurement needs.
//!
//! The JSON is read with serde into borrowed views: text fields are captured as raw slices and
//! only checked for emptiness, unknown fields are skipped without building values, so parsing a
//! chunk allocates nothing (docs/benchmark.md#streaming: role prelude, `reasoning_content` vs
//! `reasoning`, tool-call partials, usage-only final chunk, continuous usage).

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::fmt;

crate::vocabulary! {
    /// Why a response ended, as the server said.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum FinishReason {
        /// A natural end, or a stop sequence.
        Stop = "stop",
        /// The token budget ran out.
        Length = "length",
        /// The model called tools.
        ToolCalls = "tool_calls",
        /// The server's content filter cut it.
        ContentFilter = "content_filter",
        /// The legacy `function_call` (the reference counts it separately).
        FunctionCall = "function_call",
        /// Anything else a server sends (`abort`, ...).
        Other = "other",
    }
}

impl FinishReason {
    fn from_raw(raw: &[u8]) -> Option<Self> {
        Some(match raw {
            b"null" => return None,
            b"\"stop\"" => FinishReason::Stop,
            b"\"length\"" => FinishReason::Length,
            b"\"tool_calls\"" => FinishReason::ToolCalls,
            b"\"content_filter\"" => FinishReason::ContentFilter,
            b"\"function_call\"" => FinishReason::FunctionCall,
            _ => FinishReason::Other,
        })
    }
}

/// Token usage as reported by the server. A missing count is unknown, not zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// `prompt_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// `completion_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// The engine's own timing of one request, as vLLM returns it with `--enable-per-request-metrics`
/// and the request's `include_metrics` (the `metrics` member of the final usage chunk, or of a
/// non-streaming body). Each field as the server sent it; a missing or `null` one is unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineMetrics {
    /// From the request's scheduling to its first output token: prefill and the first decode
    /// step, inside the engine (not the queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_token_ms: Option<f64>,
    /// Waiting in the scheduler's queue before processing began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_time_ms: Option<f64>,
    /// From the first output token to the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_time_ms: Option<f64>,
    /// Mean time between output tokens while decoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_itl_ms: Option<f64>,
    /// Output tokens over scheduling → last token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_second: Option<f64>,
}

/// The measurement-relevant content of one chunk.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChunkInfo {
    /// Some choice has non-empty `delta.content` (or `text` for `/v1/completions`).
    pub content: bool,
    /// Some choice has non-empty `delta.reasoning_content` or `delta.reasoning`.
    pub reasoning: bool,
    /// Some choice has a non-empty `delta.tool_calls`.
    pub tool_call: bool,
    /// Some choice carries `delta.role` (the prelude of most servers).
    pub role: bool,
    /// Number of entries in `choices` (0 for the usage-only final chunk).
    pub choices: u32,
    /// The first non-null `finish_reason`.
    pub finish_reason: Option<FinishReason>,
    /// `usage`, when present (final chunk, or every chunk with continuous usage).
    pub usage: Option<Usage>,
    /// The chunk is an error object (`{"error": ...}` or `"object": "error"`).
    pub error: bool,
    /// The engine's per-request `metrics`, when the chunk carries them as vLLM documents them.
    pub engine: Option<EngineMetrics>,
    /// A `metrics` member that is not what vLLM documents (not an object, a field that is not
    /// a finite number): ignored, and why — the rest of the chunk (its usage) is read as usual.
    pub engine_ignored: Option<&'static str>,
    /// The API's end-of-response event (the Responses API's `response.completed`,
    /// `response.incomplete` or `response.failed`; the Messages API's `message_stop`): what
    /// `data: [DONE]` is to a chat stream (crate::events).
    pub end: bool,
}

impl ChunkInfo {
    /// True if the chunk carries generated text of any kind: the TTFT event
    /// (docs/benchmark.md#metrics).
    pub fn carries_text(&self) -> bool {
        self.content || self.reasoning || self.tool_call
    }

    /// Reads one SSE `data` payload or a whole JSON response body.
    pub fn parse(data: &[u8]) -> Result<ChunkInfo, serde_json::Error> {
        Self::parse_with_id(data).map(|(info, _)| info)
    }

    /// [`ChunkInfo::parse`], and the response's `id` as the server wrote it (a JSON string,
    /// quotes included), when the chunk carries one: the server's response id (`chatcmpl-…`),
    /// the same on every chunk of a stream.
    pub fn parse_with_id(data: &[u8]) -> Result<(ChunkInfo, Option<&RawValue>), serde_json::Error> {
        let raw: RawChunk<'_> = serde_json::from_slice(data)?;
        let mut info = raw.choices.0;
        info.usage = raw.usage.map(|u| Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_tokens: u.prompt_tokens_details.and_then(|d| d.cached_tokens),
            reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
        });
        info.error = raw.error.is_some() || raw.object.is_some_and(|o| o.get() == "\"error\"");
        match raw.metrics {
            Some(Metrics::Valid(m)) => info.engine = Some(m),
            Some(Metrics::Ignored(why)) => info.engine_ignored = Some(why),
            None => {}
        }
        Ok((info, raw.id))
    }
}

/// A response id's text from its raw JSON value: a non-empty string, else none. Borrowed
/// from the event unless the id has escapes (every event of a stream carries the id: the
/// common case allocates nothing).
pub fn response_id(raw: &RawValue) -> Option<std::borrow::Cow<'_, str>> {
    let s = raw.get();
    if !s.starts_with('"') {
        return None;
    }
    let id = if s.contains('\\') {
        std::borrow::Cow::Owned(serde_json::from_str::<String>(s).ok()?)
    } else {
        std::borrow::Cow::Borrowed(&s[1..s.len() - 1])
    };
    (!id.is_empty()).then_some(id)
}

#[derive(Deserialize)]
struct RawChunk<'a> {
    #[serde(default)]
    choices: Choices,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(default, borrow)]
    object: Option<&'a RawValue>,
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    metrics: Option<Metrics>,
}

/// A chunk's `metrics` member: vLLM's object, or why it is not one.
enum Metrics {
    Valid(EngineMetrics),
    Ignored(&'static str),
}

impl<'de> Deserialize<'de> for Metrics {
    /// Reads the member as raw JSON, then each known field's raw text: a value that is not a
    /// finite number (a string, an object, `1e999`) or a `metrics` that is not an object (an
    /// array read by position, a string) marks the whole member ignored, never fails the chunk.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: &RawValue = Deserialize::deserialize(d)?;
        type Fields<'a> = std::collections::BTreeMap<std::borrow::Cow<'a, str>, &'a RawValue>;
        let Ok(fields) = serde_json::from_str::<Fields<'_>>(raw.get()) else {
            return Ok(Metrics::Ignored("metrics is not an object"));
        };
        let mut m = EngineMetrics::default();
        for (key, value) in &fields {
            let slot = match key.as_ref() {
                "time_to_first_token_ms" => &mut m.time_to_first_token_ms,
                "queue_time_ms" => &mut m.queue_time_ms,
                "generation_time_ms" => &mut m.generation_time_ms,
                "mean_itl_ms" => &mut m.mean_itl_ms,
                "tokens_per_second" => &mut m.tokens_per_second,
                _ => continue,
            };
            match value.get() {
                "null" => {}
                t => match t.parse::<f64>() {
                    Ok(x) if x.is_finite() => *slot = Some(x),
                    _ => {
                        return Ok(Metrics::Ignored(
                            "a field of metrics is not a finite number",
                        ))
                    }
                },
            }
        }
        Ok(Metrics::Valid(m))
    }
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<CachedDetails>,
    #[serde(default)]
    completion_tokens_details: Option<ReasoningDetails>,
}

#[derive(Deserialize)]
struct CachedDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ReasoningDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    /// Non-streaming responses carry the whole message here.
    #[serde(default, borrow)]
    message: Option<Delta<'a>>,
    /// `/v1/completions` chunks.
    #[serde(default, borrow)]
    text: Option<&'a RawValue>,
    #[serde(default, borrow)]
    finish_reason: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    role: Option<&'a RawValue>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    reasoning_content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    reasoning: Option<&'a RawValue>,
    #[serde(default, borrow)]
    tool_calls: Option<&'a RawValue>,
}

/// `null`, `""` and `[]` say nothing; anything else is text.
fn non_empty(v: Option<&RawValue>) -> bool {
    v.is_some_and(|v| !matches!(v.get(), "null" | "\"\"" | "[]"))
}

/// Folds the `choices` array into one [`ChunkInfo`] without collecting it.
#[derive(Default)]
struct Choices(ChunkInfo);

impl<'de> Deserialize<'de> for Choices {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Choices;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Choices, E> {
                Ok(Choices::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Choices, A::Error> {
                let mut info = ChunkInfo::default();
                while let Some(c) = seq.next_element::<Choice<'de>>()? {
                    info.choices += 1;
                    for d in [c.delta.as_ref(), c.message.as_ref()].into_iter().flatten() {
                        info.content |= non_empty(d.content);
                        info.reasoning |= non_empty(d.reasoning_content) || non_empty(d.reasoning);
                        info.tool_call |= non_empty(d.tool_calls);
                        info.role |= d.role.is_some();
                    }
                    info.content |= non_empty(c.text);
                    if info.finish_reason.is_none() {
                        info.finish_reason = c
                            .finish_reason
                            .and_then(|r| FinishReason::from_raw(r.get().as_bytes()));
                    }
                }
                Ok(Choices(info))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ChunkInfo {
        ChunkInfo::parse(s.as_bytes()).unwrap()
    }

    #[test]
    fn role_prelude_is_not_text() {
        let c = p(
            r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        );
        assert!(c.role);
        assert!(!c.carries_text());
        assert_eq!(c.choices, 1);
    }

    #[test]
    fn content_with_escapes() {
        let c = p(r#"{"choices":[{"index":0,"delta":{"content":"a\n\"b\"\u00e9"}}]}"#);
        assert!(c.content && c.carries_text());
    }

    #[test]
    fn reasoning_both_spellings() {
        assert!(p(r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#).reasoning);
        assert!(p(r#"{"choices":[{"delta":{"reasoning":"hm"}}]}"#).reasoning);
        assert!(!p(r#"{"choices":[{"delta":{"reasoning":null,"content":null}}]}"#).carries_text());
    }

    #[test]
    fn tool_call_partial() {
        let c = p(
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\""}}]}}]}"#,
        );
        assert!(c.tool_call);
        assert!(!p(r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#).tool_call);
    }

    #[test]
    fn usage_only_final_chunk() {
        let c = p(
            r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":8}}}"#,
        );
        assert_eq!(c.choices, 0);
        let u = c.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
            (Some(10), Some(5), Some(8))
        );
    }

    #[test]
    fn missing_cached_is_unknown() {
        let c = p(
            r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":null}}"#,
        );
        assert_eq!(c.usage.unwrap().cached_tokens, None);
    }

    #[test]
    fn finish_reason_and_completions_text() {
        let c = p(r#"{"choices":[{"text":"hi","finish_reason":"length"}]}"#);
        assert!(c.content);
        assert_eq!(c.finish_reason, Some(FinishReason::Length));
        let c = p(r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#);
        assert_eq!(c.finish_reason, Some(FinishReason::ToolCalls));
    }

    #[test]
    fn non_streaming_body() {
        let c = p(
            r#"{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
        );
        assert!(c.content);
        assert_eq!(c.finish_reason, Some(FinishReason::Stop));
    }

    #[test]
    fn the_response_id() {
        let id = |s: &str| {
            let (_, raw) = ChunkInfo::parse_with_id(s.as_bytes()).unwrap();
            raw.and_then(response_id).map(|c| c.into_owned())
        };
        assert_eq!(
            id(r#"{"id":"chatcmpl-7f3","choices":[{"delta":{"content":"a"}}]}"#).as_deref(),
            Some("chatcmpl-7f3")
        );
        assert_eq!(id(r#"{"id":"a\"b","choices":[]}"#).as_deref(), Some("a\"b"));
        assert_eq!(id(r#"{"id":"","choices":[]}"#), None);
        assert_eq!(id(r#"{"id":17,"choices":[]}"#), None);
        assert_eq!(id(r#"{"choices":[]}"#), None);
    }

    #[test]
    fn engine_metrics_of_the_usage_chunk() {
        let c = p(
            r#"{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2},"metrics":{"time_to_first_token_ms":85.2,"generation_time_ms":1240.5,"queue_time_ms":12.3,"mean_itl_ms":null,"tokens_per_second":103.2}}"#,
        );
        let e = c.engine.unwrap();
        assert_eq!(e.time_to_first_token_ms, Some(85.2));
        assert_eq!(e.queue_time_ms, Some(12.3));
        assert_eq!(e.mean_itl_ms, None);
        assert!(p(r#"{"choices":[],"metrics":null}"#).engine.is_none());
        // Not what vLLM documents: ignored with the reason, the usage kept.
        for bad in [
            r#""abc""#,
            r#"[1,2,3]"#,
            r#"{"queue_time_ms":{"x":1}}"#,
            r#"{"queue_time_ms":"12"}"#,
            r#"{"time_to_first_token_ms":1e999}"#,
            r#"7"#,
        ] {
            let i = p(&format!(
                r#"{{"choices":[],"usage":{{"prompt_tokens":4,"completion_tokens":2}},"metrics":{bad}}}"#
            ));
            assert!(i.engine.is_none(), "{bad}");
            assert!(i.engine_ignored.is_some(), "{bad}");
            assert_eq!(i.usage.unwrap().prompt_tokens, Some(4), "{bad}");
        }
    }

    #[test]
    fn errors() {
        assert!(p(r#"{"error":{"message":"boom","code":500}}"#).error);
        assert!(p(r#"{"object":"error","message":"bad"}"#).error);
        assert!(ChunkInfo::parse(b"{\"choices\":[{\"delta\":").is_err());
    }
}
