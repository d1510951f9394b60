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

use crate::jsonscan::Scan;

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

    /// [`ChunkInfo::parse`], and the response's `id` as the server wrote it (raw JSON text: a
    /// string's quotes included), when the chunk carries one: the server's response id
    /// (`chatcmpl-…`), the same on every chunk of a stream.
    ///
    /// The common shapes are read by a plain scan (the private `jsonscan`); anything it does not
    /// read with certainty goes through serde_json, whose answer stands.
    pub fn parse_with_id(data: &[u8]) -> Result<(ChunkInfo, Option<&str>), serde_json::Error> {
        match Self::scan_with_id(data) {
            Some(read) => Ok(read),
            None => Self::deserialize_with_id(data),
        }
    }

    /// [`ChunkInfo::parse_with_id`] by serde_json alone: the reading the scan is held equal to
    /// (public for the fuzz harness's differential property).
    #[doc(hidden)]
    pub fn deserialize_with_id(
        data: &[u8],
    ) -> Result<(ChunkInfo, Option<&str>), serde_json::Error> {
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
        Ok((info, raw.id.map(RawValue::get)))
    }

    /// [`ChunkInfo::parse_with_id`] by the scan alone: `None` where it leaves the chunk to
    /// serde_json (a `metrics` member, a key with an escape, malformed JSON, ...).
    #[doc(hidden)]
    pub fn scan_with_id(data: &[u8]) -> Option<(ChunkInfo, Option<&str>)> {
        let mut s = Scan::new(data);
        let mut info = ChunkInfo::default();
        let mut id = None;
        let mut seen = Seen::default();
        s.object(|s, key| {
            match key {
                b"choices" => {
                    seen.once(0)?;
                    if !s.null()? {
                        s.eat(b'[')?;
                        scan_choices(s, &mut info)?;
                    }
                }
                b"usage" => {
                    seen.once(1)?;
                    info.usage = scan_usage(s)?;
                }
                b"error" => {
                    seen.once(2)?;
                    if !s.null()? {
                        s.skip(0)?;
                        info.error = true;
                    }
                }
                b"object" => {
                    seen.once(3)?;
                    info.error |= s.raw()? == "\"error\"";
                }
                b"id" => {
                    seen.once(4)?;
                    id = Some(s.raw()?).filter(|r| *r != "null");
                }
                // vLLM's engine metrics: once per response, read by serde_json.
                b"metrics" => {
                    if !s.null()? {
                        return None;
                    }
                    seen.once(5)?;
                }
                _ => s.skip(0)?,
            }
            Some(())
        })?;
        s.at_end().then_some((info, id))
    }

    /// Folds one choice into the chunk's reading.
    fn add_choice(&mut self, c: &ChoiceText<'_>) {
        self.choices += 1;
        for d in c.deltas.iter().flatten() {
            self.content |= non_empty(d.content);
            self.reasoning |= non_empty(d.reasoning_content) || non_empty(d.reasoning);
            self.tool_call |= non_empty(d.tool_calls);
            self.role |= d.role.is_some();
        }
        self.content |= non_empty(c.text);
        if self.finish_reason.is_none() {
            self.finish_reason = c
                .finish_reason
                .and_then(|r| FinishReason::from_raw(r.as_bytes()));
        }
    }
}

/// A response id's text from its raw JSON value: a non-empty string, else none. Borrowed
/// from the event unless the id has escapes (every event of a stream carries the id: the
/// common case allocates nothing).
pub fn response_id(raw: &str) -> Option<std::borrow::Cow<'_, str>> {
    let s = raw;
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

/// The members of one object already read: serde_json refuses a struct's field given twice,
/// so the scan leaves such an object to it.
#[derive(Default)]
struct Seen(u8);

impl Seen {
    fn once(&mut self, bit: u8) -> Option<()> {
        let m = 1 << bit;
        (self.0 & m == 0).then(|| self.0 |= m)
    }
}

/// One choice's members as raw JSON text (`null` read as absent, as serde_json reads an
/// `Option`): what both readings fold.
#[derive(Default)]
struct ChoiceText<'a> {
    /// `delta` (a stream's chunk) and `message` (a whole response).
    deltas: [Option<DeltaText<'a>>; 2],
    text: Option<&'a str>,
    finish_reason: Option<&'a str>,
}

#[derive(Default, Clone, Copy)]
struct DeltaText<'a> {
    role: Option<&'a str>,
    content: Option<&'a str>,
    reasoning_content: Option<&'a str>,
    reasoning: Option<&'a str>,
    tool_calls: Option<&'a str>,
}

/// `choices` after its `[`.
fn scan_choices(s: &mut Scan<'_>, info: &mut ChunkInfo) -> Option<()> {
    if s.empty(b']')? {
        return Some(());
    }
    loop {
        let mut c = ChoiceText::default();
        let mut seen = Seen::default();
        s.object(|s, key| {
            match key {
                b"delta" => {
                    seen.once(0)?;
                    c.deltas[0] = scan_delta(s)?;
                }
                b"message" => {
                    seen.once(1)?;
                    c.deltas[1] = scan_delta(s)?;
                }
                b"text" => {
                    seen.once(2)?;
                    c.text = s.opt_raw()?;
                }
                b"finish_reason" => {
                    seen.once(3)?;
                    c.finish_reason = s.opt_raw()?;
                }
                _ => s.skip(0)?,
            }
            Some(())
        })?;
        info.add_choice(&c);
        if !s.more(b']')? {
            return Some(());
        }
    }
}

fn scan_delta<'a>(s: &mut Scan<'a>) -> Option<Option<DeltaText<'a>>> {
    if s.null()? {
        return Some(None);
    }
    let mut d = DeltaText::default();
    let mut seen = Seen::default();
    s.object(|s, key| {
        let (bit, slot) = match key {
            b"role" => (0, &mut d.role),
            b"content" => (1, &mut d.content),
            b"reasoning_content" => (2, &mut d.reasoning_content),
            b"reasoning" => (3, &mut d.reasoning),
            b"tool_calls" => (4, &mut d.tool_calls),
            _ => return s.skip(0),
        };
        seen.once(bit)?;
        *slot = s.opt_raw()?;
        Some(())
    })?;
    Some(Some(d))
}

fn scan_usage(s: &mut Scan<'_>) -> Option<Option<Usage>> {
    if s.null()? {
        return Some(None);
    }
    let mut u = Usage::default();
    let mut seen = Seen::default();
    s.object(|s, key| {
        match key {
            b"prompt_tokens" => {
                seen.once(0)?;
                u.prompt_tokens = s.opt_u64()?;
            }
            b"completion_tokens" => {
                seen.once(1)?;
                u.completion_tokens = s.opt_u64()?;
            }
            b"prompt_tokens_details" => {
                seen.once(2)?;
                u.cached_tokens = scan_detail(s, b"cached_tokens")?;
            }
            b"completion_tokens_details" => {
                seen.once(3)?;
                u.reasoning_tokens = scan_detail(s, b"reasoning_tokens")?;
            }
            _ => s.skip(0)?,
        }
        Some(())
    })?;
    Some(Some(u))
}

/// A `*_tokens_details` object's one count that matters (`null` or absent: unknown).
fn scan_detail(s: &mut Scan<'_>, field: &[u8]) -> Option<Option<u64>> {
    if s.null()? {
        return Some(None);
    }
    let mut v = None;
    let mut seen = Seen::default();
    s.object(|s, key| {
        if key != field {
            return s.skip(0);
        }
        seen.once(0)?;
        v = s.opt_u64()?;
        Some(())
    })?;
    Some(v)
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
fn non_empty(v: Option<&str>) -> bool {
    v.is_some_and(|v| !matches!(v, "null" | "\"\"" | "[]"))
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
                    let delta = |d: &Delta<'de>| DeltaText {
                        role: d.role.map(RawValue::get),
                        content: d.content.map(RawValue::get),
                        reasoning_content: d.reasoning_content.map(RawValue::get),
                        reasoning: d.reasoning.map(RawValue::get),
                        tool_calls: d.tool_calls.map(RawValue::get),
                    };
                    info.add_choice(&ChoiceText {
                        deltas: [c.delta.as_ref().map(delta), c.message.as_ref().map(delta)],
                        text: c.text.map(RawValue::get),
                        finish_reason: c.finish_reason.map(RawValue::get),
                    });
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

    /// Chunks as servers write them: the scan reads each, to serde_json's reading.
    #[test]
    fn the_scan_reads_what_servers_send() {
        for chunk in [
            // llama-server (llama.cpp), recorded.
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1796497828,"id":"chatcmpl-Q5oB","model":"tiny-random-llama","system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk"}"#,
            r#"{"choices":[],"created":1796497828,"id":"chatcmpl-Q5oB","model":"tiny-random-llama","system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk","usage":{"completion_tokens":6,"prompt_tokens":20,"total_tokens":26,"prompt_tokens_details":{"cached_tokens":0}},"timings":{"cache_n":0,"prompt_n":20,"prompt_ms":1.731,"predicted_per_second":1838.2352941176468}}"#,
            // vLLM: reasoning, a tool call's partial, the usage chunk with details.
            r#"{"id":"chatcmpl-9a","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3","choices":[{"index":0,"delta":{"reasoning_content":"so \u2014 \"q\"\n"},"logprobs":null,"finish_reason":null,"stop_reason":null}]}"#,
            r#"{"id":"chatcmpl-9a","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\": \"ls\"}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"id":"chatcmpl-9a","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":64,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":40}}}"#,
            // SGLang: nulls everywhere, text outside ASCII.
            r#"{"id":"5c8e","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":null,"content":"世界 😀","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#,
            // A whole body, completions, an error.
            r#"{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
            r#"{"choices":[{"text":"um","index":0,"logprobs":null,"finish_reason":null}],"object":"text_completion","id":"cmpl-1"}"#,
            r#"{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}"#,
            " {\n \"choices\" : [ { \"delta\" : { \"content\" : \"a\" } } ] }\n",
        ] {
            let scanned = ChunkInfo::scan_with_id(chunk.as_bytes());
            assert!(scanned.is_some(), "{chunk}");
            assert_eq!(
                scanned.unwrap(),
                ChunkInfo::deserialize_with_id(chunk.as_bytes()).unwrap()
            );
        }
        // Left to serde_json: vLLM's engine metrics, a key with an escape, a field given twice.
        for chunk in [
            r#"{"choices":[],"metrics":{"queue_time_ms":1.5}}"#,
            r#"{"\u0063hoices":[{"delta":{"content":"a"}}]}"#,
            r#"{"choices":[],"choices":[]}"#,
        ] {
            assert!(
                ChunkInfo::scan_with_id(chunk.as_bytes()).is_none(),
                "{chunk}"
            );
        }
    }

    /// Generated chunks — members in any order, given twice now and then, values of every JSON
    /// kind (some malformed) where the fields are, whitespace anywhere: wherever the scan reads
    /// one, serde_json reads it too and the same.
    #[test]
    fn the_scan_agrees_with_serde_json_on_generated_chunks() {
        struct G(crate::rng::SplitMix64);
        /// A member's key and how to write its value.
        type Member<'k> = (&'k str, fn(&mut G) -> String);
        impl G {
            fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
                xs[(self.0.next_u64() % xs.len() as u64) as usize]
            }
            fn chance(&mut self, p: f64) -> bool {
                self.0.unit() < p
            }
            fn ws(&mut self) -> &'static str {
                if self.chance(0.8) {
                    ""
                } else {
                    self.pick(&[" ", "\n", "\t ", "\r\n"])
                }
            }
            fn scalar(&mut self) -> String {
                if self.chance(0.03) {
                    // Malformed, or not what the field's type reads.
                    return self
                        .pick(&[
                            "01",
                            "-",
                            "\"\\x\"",
                            "[1,]",
                            "nul",
                            "\"\u{1}\"",
                            "18446744073709551616",
                            "-1",
                            "1e3",
                            "4.0",
                            "{\"a\"}",
                        ])
                        .to_string();
                }
                self.pick(&[
                    "null",
                    "true",
                    "false",
                    "0",
                    "12.5",
                    "\"\"",
                    "\"a\"",
                    "\"\\u00e9\\n\"",
                    "\"\\ud800\"",
                    "\"é\"",
                    "[]",
                    "{}",
                    "[ ]",
                    "[1,{\"a\":[null]}]",
                    "{\"k\":\"v\",\"n\":{}}",
                    "7",
                ])
                .to_string()
            }
            fn object(&mut self, members: &[Member]) -> String {
                let mut parts = Vec::new();
                for (k, v) in members {
                    let times = match self.0.next_u64() % 40 {
                        0 => 2,
                        1..=8 => 0,
                        _ => 1,
                    };
                    for _ in 0..times {
                        let key = if self.chance(0.02) {
                            k.replacen('c', "\\u0063", 1)
                        } else {
                            k.to_string()
                        };
                        let (a, b, c, d) = (self.ws(), self.ws(), self.ws(), self.ws());
                        parts.push(format!("{a}\"{key}\"{b}:{c}{}{d}", v(self)));
                    }
                }
                for i in (1..parts.len()).rev() {
                    let j = (self.0.next_u64() % (i as u64 + 1)) as usize;
                    parts.swap(i, j);
                }
                format!("{{{}}}", parts.join(","))
            }
        }
        fn text(g: &mut G) -> String {
            g.scalar()
        }
        fn count(g: &mut G) -> String {
            if g.chance(0.8) {
                (g.0.next_u64() % 5000).to_string()
            } else {
                g.scalar()
            }
        }
        fn delta(g: &mut G) -> String {
            if g.chance(0.1) {
                return g.scalar();
            }
            g.object(&[
                ("role", text),
                ("content", text),
                ("reasoning_content", text),
                ("reasoning", text),
                ("tool_calls", text),
                ("extra", text),
            ])
        }
        fn finish(g: &mut G) -> String {
            g.pick(&[
                "null",
                "\"stop\"",
                "\"length\"",
                "\"tool_calls\"",
                "\"abort\"",
                "7",
            ])
            .to_string()
        }
        fn choices(g: &mut G) -> String {
            if g.chance(0.05) {
                return g.scalar();
            }
            let n = g.0.next_u64() % 4;
            let items: Vec<String> = (0..n)
                .map(|_| {
                    g.object(&[
                        ("index", count),
                        ("delta", delta),
                        ("message", delta),
                        ("text", text),
                        ("finish_reason", finish),
                        ("logprobs", text),
                    ])
                })
                .collect();
            format!("[{}]", items.join(","))
        }
        fn details(g: &mut G) -> String {
            if g.chance(0.1) {
                return g.scalar();
            }
            g.object(&[
                ("cached_tokens", count),
                ("reasoning_tokens", count),
                ("x", text),
            ])
        }
        fn usage(g: &mut G) -> String {
            if g.chance(0.1) {
                return g.scalar();
            }
            g.object(&[
                ("prompt_tokens", count),
                ("completion_tokens", count),
                ("total_tokens", count),
                ("prompt_tokens_details", details),
                ("completion_tokens_details", details),
            ])
        }
        fn metrics(g: &mut G) -> String {
            if g.chance(0.9) {
                "null".into()
            } else {
                g.scalar()
            }
        }
        fn object(g: &mut G) -> String {
            g.pick(&[
                "\"chat.completion.chunk\"",
                "\"error\"",
                "null",
                "\"text_completion\"",
            ])
            .to_string()
        }
        let mut g = G(crate::rng::SplitMix64::new(7));
        let (mut scanned, mut read) = (0, 0);
        for _ in 0..20_000 {
            let chunk = g.object(&[
                ("id", text),
                ("object", object),
                ("choices", choices),
                ("usage", usage),
                ("error", text),
                ("metrics", metrics),
                ("model", text),
            ]);
            let by_serde = ChunkInfo::deserialize_with_id(chunk.as_bytes());
            read += by_serde.is_ok() as u32;
            if let Some(s) = ChunkInfo::scan_with_id(chunk.as_bytes()) {
                scanned += 1;
                assert_eq!(Ok(s), by_serde.map_err(|e| e.to_string()), "{chunk}");
            }
        }
        // Not vacuous: most of what serde_json reads, the scan reads.
        assert!(
            read > 2_000 && scanned * 10 > read * 6,
            "{scanned} of {read}"
        );
    }

    #[test]
    fn errors() {
        assert!(p(r#"{"error":{"message":"boom","code":500}}"#).error);
        assert!(p(r#"{"object":"error","message":"bad"}"#).error);
        assert!(ChunkInfo::parse(b"{\"choices\":[{\"delta\":").is_err());
    }
}
