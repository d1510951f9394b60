//! The per-turn token timeline of docs/benchmark.md#metrics.
//!
//! A [`Timeline`] is fed, in order, the instants at which a response's bytes and SSE events
//! were seen, on the [`crate::clock`] monotonic clock. [`Timeline::finish`] turns that into a
//! [`Measured`]: TTFB, TTFT, E2E, TPOT, the instant and token count of every chunk, and token
//! counts with the source they came from. ITL and inter-chunk samples are derived from the chunk
//! list ([`Measured::itl_samples`], [`Measured::inter_chunk_samples`]) so a record carries one
//! source of truth.
//!
//! Definitions (all offsets from the turn's start: the client's send instant, or the proxy's
//! first request byte):
//! - TTFB: first response body byte.
//! - TTFT: first chunk carrying content, reasoning or tool-call text. A role-only prelude is not
//!   a token.
//! - E2E: last byte of the response.
//! - Tokens per chunk: from continuous usage (cumulative `completion_tokens` on every chunk) when
//!   present — exact; else, when a final usage total is known and differs from the number of text
//!   chunks, the total is spread evenly over the text chunks (an estimate, labelled so); else one
//!   token per text chunk.
//! - ITL per token: a chunk with k tokens after a gap g since the previous token-carrying chunk
//!   gives k samples of g/k. Tokens in the same chunk as the first token give no sample.
//! - Inter-chunk latency: one sample per token-carrying chunk after the first.
//! - TPOT: (E2E − TTFT) / (output tokens − 1), when there are at least two tokens.

use crate::chunk::{ChunkInfo, EngineMetrics, FinishReason, Usage};
use crate::clock::MonoNs;
use crate::events::Dialect;
use serde::{Deserialize, Serialize};

crate::vocabulary! {
    /// Where a token count came from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
    #[serde(rename_all = "snake_case")]
    pub enum TokenSource {
        /// Cumulative usage on every chunk (vLLM `continuous_usage_stats`): exact per chunk.
        ContinuousUsage = "continuous_usage",
        /// The server's final usage chunk (or the usage of a non-streaming body).
        Usage = "usage",
        /// Final usage total spread evenly over the text chunks (per-chunk counts only).
        SpreadUsage = "spread_usage",
        /// A client-side tokenizer.
        Tokenizer = "tokenizer",
        /// One token per text chunk: nothing better was available.
        #[default]
        Chunks = "chunks",
    }
}

/// One chunk on the timeline. Serialized as `[offset_ns, tokens, text]` to keep records small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkStamp {
    /// Offset from the turn's start, ns.
    pub at_ns: u64,
    /// Tokens this chunk carried.
    pub tokens: u32,
    /// The chunk carried content, reasoning or tool-call text.
    pub text: bool,
}

impl Serialize for ChunkStamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.at_ns, self.tokens, self.text as u8).serialize(s)
    }
}

impl<'de> Deserialize<'de> for ChunkStamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (at_ns, tokens, text) = <(u64, u32, u8)>::deserialize(d)?;
        Ok(ChunkStamp {
            at_ns,
            tokens,
            text: text != 0,
        })
    }
}

/// What the timeline measured for one turn. Flattened into [`crate::record::TurnRecord`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Response headers received (client) / forwarded (proxy), ns after start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers_ns: Option<u64>,
    /// First response body byte, ns after start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfb_ns: Option<u64>,
    /// First text-carrying chunk, ns after start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ns: Option<u64>,
    /// Last response byte, ns after start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ns: Option<u64>,
    /// (E2E − TTFT) / (output tokens − 1), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ns: Option<u64>,
    /// Every chunk that carried text or tokens, in arrival order.
    #[serde(default)]
    pub chunks: Vec<ChunkStamp>,
    /// Source of the per-chunk token counts.
    #[serde(default)]
    pub chunk_tokens_source: TokenSource,
    /// The server's prompt tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens`; absent means unknown, not zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Where `output_tokens` came from.
    #[serde(default)]
    pub output_tokens_source: TokenSource,
    /// Reasoning tokens, when the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Why the output ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// SSE events seen (including the role prelude, usage chunk and `[DONE]`).
    #[serde(default)]
    pub events: u32,
    /// Events whose data was not valid JSON (passed through untouched by the proxy).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub malformed_events: u32,
    /// Error objects received inside the stream.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub error_events: u32,
    /// The stream's end marker was seen: `data: [DONE]` (chat), `response.completed` /
    /// `response.incomplete` / `response.failed` (Responses API), `message_stop` (Messages API).
    #[serde(default)]
    pub done: bool,
    /// The first error event's message (the Responses and Messages APIs' `error` events,
    /// `response.failed`), for the record's error; not part of the record's numbers.
    #[serde(skip)]
    pub stream_error: Option<String>,
    /// The Responses and Messages APIs: the id of a second response whose events came on the
    /// same stream after the first's (a stream carries one response); not part of the numbers.
    #[serde(skip)]
    pub second_response: Option<String>,
    /// The server's response id: the `id` of the first chunk (or of the JSON body) that has
    /// one, e.g. `chatcmpl-…`. Both sides of the wire see the same, so it joins a client's
    /// record to the proxy's exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// The engine's own per-request timing (vLLM's `metrics`), when the response carried it
    /// (the proxy's `--inject-metrics` asks for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_metrics: Option<EngineMetrics>,
    /// Why the engine's `metrics` were not taken: not what vLLM documents (not an object, a
    /// field not a finite number), or impossible for this turn (negative, or queue + time to
    /// first token beyond the turn's own TTFT). No split is made from them then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_metrics_refused: Option<String>,
    /// TTFT as measured here, split by the engine's own timing: its queue, its prefill and first
    /// token, and the rest — outside the engine (network, proxy, the server's front end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_split: Option<TtftSplit>,
}

/// How far the engine's queue + time to first token may pass the turn's own TTFT before they
/// are taken as impossible: its figures are rounded milliseconds of another clock.
pub const CLOCK_SLACK_MS: f64 = 1.0;

/// [`Measured::ttft_split`]: TTFT = `queue_ms` + `engine_ms` + `outside_ms`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TtftSplit {
    /// The engine's queue (`queue_time_ms`).
    pub queue_ms: f64,
    /// Scheduling to the first token inside the engine (`time_to_first_token_ms`).
    pub engine_ms: f64,
    /// TTFT here less both: what the engine did not see. At most [`CLOCK_SLACK_MS`] below zero
    /// (the engine's milliseconds rounded, its clock not ours); metrics that would make it less
    /// are refused (`engine_metrics_refused`).
    pub outside_ms: f64,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl Measured {
    /// TTFT split by the engine's own timing, when both are known and possible.
    pub fn split_ttft(&self) -> Option<TtftSplit> {
        let e = self.engine_metrics?;
        let (queue_ms, engine_ms) = (e.queue_time_ms?, e.time_to_first_token_ms?);
        let ttft_ms = self.ttft_ns? as f64 / 1e6;
        let outside_ms = ttft_ms - queue_ms - engine_ms;
        (queue_ms >= 0.0 && engine_ms >= 0.0 && outside_ms >= -CLOCK_SLACK_MS).then_some(
            TtftSplit {
                queue_ms,
                engine_ms,
                outside_ms,
            },
        )
    }

    /// Why the engine's metrics are impossible for this turn, if they are: a negative time, or
    /// more time in the engine before the first token than the turn's whole TTFT.
    fn impossible_engine_metrics(&self) -> Option<String> {
        let e = self.engine_metrics?;
        let fields = [
            ("time_to_first_token_ms", e.time_to_first_token_ms),
            ("queue_time_ms", e.queue_time_ms),
            ("generation_time_ms", e.generation_time_ms),
            ("mean_itl_ms", e.mean_itl_ms),
            ("tokens_per_second", e.tokens_per_second),
        ];
        if let Some((name, v)) = fields.iter().find(|(_, v)| v.is_some_and(|x| x < 0.0)) {
            return Some(format!("{name} is negative ({})", v.unwrap_or_default()));
        }
        let (q, t) = (e.queue_time_ms?, e.time_to_first_token_ms?);
        let ttft_ms = self.ttft_ns? as f64 / 1e6;
        (q + t > ttft_ms + CLOCK_SLACK_MS).then(|| {
            format!("queue_time_ms + time_to_first_token_ms = {:.3} ms, beyond the turn's own TTFT of {ttft_ms:.3} ms", q + t)
        })
    }

    /// ITL samples in ns, per token (docs/benchmark.md#metrics, SGLang's method).
    pub fn itl_samples(&self) -> impl Iterator<Item = f64> + '_ {
        let first = self.chunks.iter().position(|c| c.text);
        let mut prev = first.map(|i| self.chunks[i].at_ns).unwrap_or(0);
        let rest = match first {
            Some(i) => &self.chunks[i + 1..],
            None => &[][..],
        };
        rest.iter().filter(|c| c.tokens > 0).flat_map(move |c| {
            let gap = c.at_ns.saturating_sub(prev) as f64;
            prev = c.at_ns;
            let k = c.tokens as usize;
            std::iter::repeat_n(gap / k as f64, k)
        })
    }

    /// Inter-chunk latency samples in ns: one per token-carrying chunk after the first text one.
    pub fn inter_chunk_samples(&self) -> impl Iterator<Item = f64> + '_ {
        let first = self.chunks.iter().position(|c| c.text);
        let mut prev = first.map(|i| self.chunks[i].at_ns).unwrap_or(0);
        let rest = match first {
            Some(i) => &self.chunks[i + 1..],
            None => &[][..],
        };
        rest.iter()
            .filter(|c| c.tokens > 0 || c.text)
            .map(move |c| {
                let gap = c.at_ns.saturating_sub(prev) as f64;
                prev = c.at_ns;
                gap
            })
    }
}

/// Builds a [`Measured`] from instants fed in arrival order.
#[derive(Debug)]
pub struct Timeline {
    start: MonoNs,
    dialect: Dialect,
    m: Measured,
    /// Last cumulative `completion_tokens` seen on a chunk with choices.
    cumulative: u64,
    continuous: bool,
    last_usage: Option<Usage>,
    last_byte: Option<MonoNs>,
}

impl Timeline {
    /// A timeline whose offsets count from `start`. `expected_chunks` pre-sizes the chunk list
    /// (e.g. from `max_tokens`) so the steady path does not reallocate.
    pub fn new(start: MonoNs, expected_chunks: usize) -> Self {
        Timeline {
            start,
            dialect: Dialect::default(),
            m: Measured {
                chunks: Vec::with_capacity(expected_chunks.min(1 << 16)),
                ..Default::default()
            },
            cumulative: 0,
            continuous: false,
            last_usage: None,
            last_byte: None,
        }
    }

    /// Reads the events of `api` (chat completions by default).
    pub fn with_api(mut self, dialect: impl Into<Dialect>) -> Self {
        self.dialect = dialect.into();
        self
    }

    /// The instant offsets count from.
    pub fn start(&self) -> MonoNs {
        self.start
    }

    /// TTFT so far: `Some` once a text-carrying chunk was seen.
    pub fn ttft_ns(&self) -> Option<u64> {
        self.m.ttft_ns
    }

    fn off(&self, t: MonoNs) -> u64 {
        t.saturating_sub(self.start)
    }

    /// Response headers arrived (or were forwarded).
    pub fn on_headers(&mut self, t: MonoNs) {
        if self.m.headers_ns.is_none() {
            self.m.headers_ns = Some(self.off(t));
        }
    }

    /// Some body bytes arrived (or were forwarded) at `t`.
    #[inline]
    pub fn on_bytes(&mut self, t: MonoNs) {
        if self.m.ttfb_ns.is_none() {
            self.m.ttfb_ns = Some(self.off(t));
        }
        self.last_byte = Some(t);
    }

    /// `data: [DONE]` was seen.
    pub fn done(&self) -> bool {
        self.m.done
    }

    /// A `data: [DONE]` event.
    pub fn on_done(&mut self) {
        self.m.events += 1;
        self.m.done = true;
    }

    /// An event whose data is not valid JSON.
    pub fn on_malformed(&mut self) {
        self.m.events += 1;
        self.m.malformed_events += 1;
    }

    /// One SSE data payload (not `[DONE]`): parses it (as the timeline's API) and records it.
    /// Returns the parsed info, or `None` if it was malformed.
    #[inline]
    pub fn on_data(&mut self, t: MonoNs, data: &[u8]) -> Option<ChunkInfo> {
        match self.dialect.parse(data) {
            Ok(ev) => {
                self.on_event_ids(&ev);
                self.on_chunk(t, &ev.info);
                Some(ev.info)
            }
            Err(_) => {
                self.on_malformed();
                None
            }
        }
    }

    /// The response id, engine metrics and error detail of an event.
    fn on_event_ids(&mut self, ev: &crate::events::Event<'_>) {
        match (
            &self.m.response_id,
            ev.id.and_then(crate::chunk::response_id),
        ) {
            (None, id) => self.m.response_id = id.map(|i| i.into_owned()),
            // One response per stream in these APIs: another id is a second response.
            (Some(first), Some(id))
                if *first != id
                    && self.dialect.api.has_own_events()
                    && self.m.second_response.is_none() =>
            {
                self.m.second_response = Some(id.into_owned())
            }
            _ => {}
        }
        if ev.info.engine.is_some() {
            self.m.engine_metrics = ev.info.engine;
        }
        if let Some(why) = ev.info.engine_ignored {
            self.m.engine_metrics_refused = Some(why.to_string());
        }
        if ev.info.error && self.m.stream_error.is_none() {
            self.m.stream_error = Some(
                ev.detail
                    .map(crate::events::detail_text)
                    .unwrap_or_else(|| "an error event without a message".into()),
            );
        }
    }

    /// One parsed chunk seen at `t`.
    pub fn on_chunk(&mut self, t: MonoNs, info: &ChunkInfo) {
        self.m.events += 1;
        if info.error {
            self.m.error_events += 1;
        }
        if self.m.finish_reason.is_none() {
            self.m.finish_reason = info.finish_reason;
        }
        if info.end {
            self.m.done = true;
        }
        let mut tokens = info.carries_text() as u32;
        if let Some(u) = info.usage {
            if info.choices > 0 {
                if let Some(c) = u.completion_tokens {
                    self.continuous = true;
                    tokens = c.saturating_sub(self.cumulative) as u32;
                    self.cumulative = self.cumulative.max(c);
                }
            }
            // The Messages API splits usage over two events (input in `message_start`, output
            // in `message_delta`): a count a later event leaves out is kept.
            let last = self.last_usage.unwrap_or_default();
            self.last_usage = Some(Usage {
                prompt_tokens: u.prompt_tokens.or(last.prompt_tokens),
                completion_tokens: u.completion_tokens.or(last.completion_tokens),
                cached_tokens: u.cached_tokens.or(last.cached_tokens),
                reasoning_tokens: u.reasoning_tokens.or(last.reasoning_tokens),
            });
        }
        if info.carries_text() || tokens > 0 {
            let at_ns = self.off(t);
            if info.carries_text() && self.m.ttft_ns.is_none() {
                self.m.ttft_ns = Some(at_ns);
            }
            self.m.chunks.push(ChunkStamp {
                at_ns,
                tokens,
                text: info.carries_text(),
            });
        }
    }

    /// A whole non-streaming JSON body (already fed to [`Timeline::on_bytes`]).
    pub fn on_json_body(&mut self, body: &[u8]) {
        match self.dialect.parse(body) {
            Ok(ev) => {
                self.on_event_ids(&ev);
                let info = ev.info;
                if info.error {
                    self.m.error_events += 1;
                }
                self.m.finish_reason = info.finish_reason;
                self.last_usage = info.usage;
            }
            Err(_) => self.m.malformed_events += 1,
        }
    }

    /// The stream ended (cleanly or not) at `end`, or at the last byte if `end` is `None`.
    pub fn finish(mut self, end: Option<MonoNs>) -> Measured {
        let end = end.or(self.last_byte);
        self.m.e2e_ns = end.map(|t| self.off(t));
        let text_chunks = self.m.chunks.iter().filter(|c| c.text).count() as u64;
        let usage = self.last_usage.unwrap_or_default();
        self.m.prompt_tokens = usage.prompt_tokens;
        self.m.cached_tokens = usage.cached_tokens;
        self.m.reasoning_tokens = usage.reasoning_tokens;
        if self.continuous {
            self.m.chunk_tokens_source = TokenSource::ContinuousUsage;
            self.m.output_tokens = Some(usage.completion_tokens.unwrap_or(self.cumulative));
            self.m.output_tokens_source = TokenSource::ContinuousUsage;
        } else if let Some(total) = usage.completion_tokens {
            self.m.output_tokens = Some(total);
            self.m.output_tokens_source = TokenSource::Usage;
            if text_chunks > 0 && total != text_chunks {
                spread(&mut self.m.chunks, total, text_chunks);
                self.m.chunk_tokens_source = TokenSource::SpreadUsage;
            } else {
                self.m.chunk_tokens_source = TokenSource::Chunks;
            }
        } else if text_chunks > 0 || self.m.ttfb_ns.is_some() {
            self.m.output_tokens = Some(text_chunks);
            self.m.output_tokens_source = TokenSource::Chunks;
            self.m.chunk_tokens_source = TokenSource::Chunks;
        }
        if let (Some(e2e), Some(ttft), Some(n)) =
            (self.m.e2e_ns, self.m.ttft_ns, self.m.output_tokens)
        {
            if n > 1 {
                self.m.tpot_ns = Some(e2e.saturating_sub(ttft) / (n - 1));
            }
        }
        if let Some(why) = self.m.impossible_engine_metrics() {
            self.m.engine_metrics_refused = Some(why);
        }
        self.m.ttft_split = self.m.split_ttft();
        self.m
    }
}

impl Measured {
    /// Replaces the output token count with `total` from `source` (a tokenizer's count arriving
    /// after the stream, for a server that sent no usage): spread evenly over the text chunks,
    /// and TPOT recomputed. Counts that came from the server's usage are never replaced.
    pub fn set_output_tokens(&mut self, total: u64, source: TokenSource) {
        if matches!(
            self.output_tokens_source,
            TokenSource::ContinuousUsage | TokenSource::Usage
        ) && self.output_tokens.is_some()
        {
            return;
        }
        let text_chunks = self.chunks.iter().filter(|c| c.text).count() as u64;
        if text_chunks > 0 {
            spread(&mut self.chunks, total, text_chunks);
            self.chunk_tokens_source = source;
        }
        self.output_tokens = Some(total);
        self.output_tokens_source = source;
        self.tpot_ns = match (self.e2e_ns, self.ttft_ns) {
            (Some(e2e), Some(ttft)) if total > 1 => Some(e2e.saturating_sub(ttft) / (total - 1)),
            _ => None,
        };
    }
}

/// Spreads `total` tokens over the text chunks: floor(total / n) each, the remainder one by one
/// to the earliest chunks.
fn spread(chunks: &mut [ChunkStamp], total: u64, n: u64) {
    let base = total / n;
    let mut rem = total % n;
    for c in chunks.iter_mut().filter(|c| c.text) {
        let extra = if rem > 0 {
            rem -= 1;
            1
        } else {
            0
        };
        c.tokens = (base + extra) as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRELUDE: &str = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
    fn content(s: &str) -> String {
        format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{s}"}}}}]}}"#)
    }
    fn content_usage(s: &str, c: u64) -> String {
        format!(
            r#"{{"choices":[{{"index":0,"delta":{{"content":"{s}"}}}}],"usage":{{"prompt_tokens":7,"completion_tokens":{c}}}}}"#
        )
    }
    const USAGE: &str = r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}"#;

    /// The response id is the first chunk's that has one (a usage chunk without it changes
    /// nothing), or the JSON body's.
    #[test]
    fn the_response_id_is_kept() {
        let mut t = Timeline::new(0, 4);
        t.on_data(1, br#"{"choices":[{"delta":{"content":"a"}}]}"#);
        t.on_data(
            2,
            br#"{"id":"chatcmpl-1","choices":[{"delta":{"content":"b"}}]}"#,
        );
        t.on_data(3, br#"{"id":"chatcmpl-2","choices":[]}"#);
        assert_eq!(t.finish(None).response_id.as_deref(), Some("chatcmpl-1"));
        let mut t = Timeline::new(0, 1);
        t.on_json_body(br#"{"id":"chatcmpl-9","object":"chat.completion","choices":[]}"#);
        let m = t.finish(None);
        assert_eq!(m.response_id.as_deref(), Some("chatcmpl-9"));
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["response_id"], "chatcmpl-9");
    }

    #[test]
    fn prelude_is_not_ttft_and_itl_is_per_chunk() {
        let mut t = Timeline::new(1000, 8);
        t.on_headers(1100);
        t.on_bytes(1200);
        t.on_data(1200, PRELUDE.as_bytes());
        t.on_bytes(1500);
        t.on_data(1500, content("a").as_bytes());
        t.on_bytes(1700);
        t.on_data(1700, content("b").as_bytes());
        t.on_bytes(2000);
        t.on_data(2000, content("c").as_bytes());
        t.on_data(2000, USAGE.as_bytes());
        t.on_done();
        let m = t.finish(None);
        assert_eq!(m.headers_ns, Some(100));
        assert_eq!(m.ttfb_ns, Some(200));
        assert_eq!(m.ttft_ns, Some(500));
        assert_eq!(m.e2e_ns, Some(1000));
        assert_eq!(m.output_tokens, Some(3));
        assert_eq!(m.output_tokens_source, TokenSource::Usage);
        assert_eq!(m.chunk_tokens_source, TokenSource::Chunks);
        assert_eq!(m.cached_tokens, Some(4));
        assert_eq!(m.tpot_ns, Some(250));
        assert_eq!(m.itl_samples().collect::<Vec<_>>(), [200.0, 300.0]);
        assert_eq!(m.inter_chunk_samples().collect::<Vec<_>>(), [200.0, 300.0]);
        assert_eq!(m.events, 6);
        assert!(m.done);
    }

    #[test]
    fn continuous_usage_gives_multi_token_itl() {
        let mut t = Timeline::new(0, 8);
        t.on_bytes(10);
        t.on_data(10, content_usage("", 0).as_bytes()); // prelude-like, no text, 0 tokens
        t.on_data(100, content_usage("ab", 2).as_bytes());
        t.on_data(400, content_usage("cde", 5).as_bytes());
        t.on_bytes(400);
        let m = t.finish(None);
        assert_eq!(m.ttft_ns, Some(100));
        assert_eq!(m.output_tokens, Some(5));
        assert_eq!(m.chunk_tokens_source, TokenSource::ContinuousUsage);
        // the second token in the first chunk gives no sample; 3 tokens after a 300 ns gap.
        assert_eq!(m.itl_samples().collect::<Vec<_>>(), [100.0, 100.0, 100.0]);
        assert_eq!(m.inter_chunk_samples().collect::<Vec<_>>(), [300.0]);
        assert_eq!(m.tpot_ns, Some(75));
    }

    #[test]
    fn final_usage_is_spread_over_multi_token_chunks() {
        let mut t = Timeline::new(0, 8);
        t.on_bytes(100);
        t.on_data(100, content("ab").as_bytes());
        t.on_data(300, content("cd").as_bytes());
        t.on_data(
            300,
            r#"{"choices":[],"usage":{"completion_tokens":4}}"#.as_bytes(),
        );
        let m = t.finish(Some(300));
        assert_eq!(m.chunk_tokens_source, TokenSource::SpreadUsage);
        assert_eq!(
            m.chunks.iter().map(|c| c.tokens).collect::<Vec<_>>(),
            [2, 2]
        );
        assert_eq!(m.itl_samples().collect::<Vec<_>>(), [100.0, 100.0]);
    }

    #[test]
    fn no_usage_counts_chunks_and_cached_is_unknown() {
        let mut t = Timeline::new(0, 0);
        t.on_bytes(5);
        t.on_data(
            5,
            r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#.as_bytes(),
        );
        t.on_data(
            9,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"bash"}}]}}]}"#
                .as_bytes(),
        );
        t.on_data(12, b"{not json");
        let m = t.finish(Some(12));
        assert_eq!(m.ttft_ns, Some(5));
        assert_eq!(m.output_tokens, Some(2));
        assert_eq!(m.output_tokens_source, TokenSource::Chunks);
        assert_eq!(m.cached_tokens, None);
        assert_eq!(m.malformed_events, 1);
    }

    #[test]
    fn chunk_stamp_roundtrip() {
        let c = ChunkStamp {
            at_ns: 12,
            tokens: 3,
            text: true,
        };
        let s = serde_json::to_string(&c).unwrap();
        assert_eq!(s, "[12,3,1]");
        assert_eq!(serde_json::from_str::<ChunkStamp>(&s).unwrap(), c);
    }
}
