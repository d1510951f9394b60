//! # tokentap-sim — the simulated OpenAI-compatible server
//!
//! The embedded default server of `tokentap sim` and the backbone of every tokentap test: an
//! OpenAI-compatible endpoint whose timing, token counts and cache behaviour follow a small,
//! documented model, that is deterministic for a seed, and that records when it wrote every
//! chunk so a measurement can be compared with the truth.
//!
//! ## Routes
//! `POST /v1/chat/completions` (streaming SSE and not), `POST /v1/completions` (prompt string,
//! `text_completion` chunks), `POST /v1/responses` (the OpenAI Responses API) and
//! `POST /v1/messages` (the Anthropic Messages API), streaming and not — their requests planned in
//! chat form (`tokentap_core::convert`), their events as the APIs define them and their SDKs'
//! accumulating helpers read them (`event:` lines, no `[DONE]`, usage in the end event; the
//! Responses API's `response.created`, `response.in_progress`, each item's `added` … `done` events
//! with the same ids as the final response, `response.completed` or `response.incomplete` at the
//! length cap; the Messages API's thinking only when `thinking` asks for it, each thinking block
//! signed by a `signature_delta`, its text not sent under `display: omitted`;
//! `previous_response_id` is accepted and not looked up: the sim stores no responses), `GET /v1/models`, `GET /health`, `GET /metrics` (engine metrics,
//! below; not recorded in the request log). Unknown path → 404, wrong
//! method → 405, bad JSON → 400, all with an OpenAI error body. HTTP/1.1 with keep-alive and
//! h2c, `TCP_NODELAY` on every accepted socket. Completion responses carry an `x-sim-seq`
//! header: the request's `seq` in [`RequestLog`], to join a client's view with the sim's.
//!
//! Per-request controls besides the config: `max_completion_tokens`/`max_tokens`,
//! `stream_options.include_usage` and `continuous_usage_stats` (either one alone turns on
//! per-chunk usage; vLLM needs both), `tools` and `tool_choice` (`none` / `required` / a named
//! function: a tool call goes only to an offered tool, with arguments its schema takes — `tools`),
//! and `chat_template_kwargs.enable_thinking: false` (no reasoning).
//!
//! ## Layout
//! - [`config`]: [`SimConfig`], every knob; a JSON profile is a `SimConfig`.
//! - [`render`]: the canonical prompt rendering the stand-in tokenizer counts.
//! - [`cache`]: the prefix KV cache (hash-chained blocks, LRU by tokens).
//! - `plan`: per request, all decisions — output length, text, mode, fault, cache result.
//! - `tools`: which offered tool a call goes to, and arguments its JSON schema accepts.
//! - `frame`: SSE event and JSON body formatting (pre-formatted heads, no serde per chunk).
//! - `stream`: the response body, an `http_body::Body` that walks the plan on an absolute
//!   schedule and stamps every frame as it hands it to hyper.
//! - `server`: [`SimServer`], accept loop, routing, shutdown.
//! - `shared`: the state every connection shares (config, the engine requests contend for: prefix
//!   cache and prefill lanes, the log, the metrics).
//! - `rng`: each request's seeded draws (SplitMix64 and the `libm` crate: the same everywhere).
//! - `log`: the in-memory [`RequestLog`] list and the JSONL chunk log.
//! - [`metrics`]: the engine's Prometheus series (vLLM names) served on `/metrics`.
//! - `cli`: [`Opts`] and [`run`] for `tokentap sim`.
//!
//! ## Data flow
//! ```text
//!  request ─► parse (wire::ChatRequest) ─► plan::build ──► render ─► tokenize::count
//!                                            │             output length/text/mode/fault (seeded)
//!                                            ▼
//!                      Engine lock (once): cache lookup+insert, prefill lane ─► first token instant
//!                                            ▼
//!                     SimBody::poll_frame: wait until due ─► format chunk ─► stamp clock::now()
//!                                            ▼ (end or drop)
//!                      RequestLog ─► SimServer::log() / --chunk-log JSONL; output blocks cached
//! ```
//!
//! ## Tokens
//! [`tokentap_core::tokenize`]: 4 bytes per token over the rendering of [`render::chat_prompt`]
//! (documented there). Generated text is exactly 4 bytes per token, so `usage` and the
//! stand-in tokenizer agree on every chunk.
//!
//! ## Timing model
//! - TTFT = queueing for a prefill lane (only with `prefill_lanes > 0`) plus
//!   `prefill_base_ms` + `prefill_per_token_ms` × uncached prompt tokens, counted from the
//!   moment the request head arrived.
//! - A chunk with k tokens after the first is due k × `decode_ms` × (1 + `decode_slowdown` ×
//!   other requests decoding) after the previous chunk's due time. The first chunk carries k
//!   tokens at TTFT (the k − 1 extra tokens give no ITL sample, docs/benchmark.md#metrics).
//! - Due times are absolute (`tokio::time::sleep_until`), so lateness never accumulates.
//!   tokio's timer has 1 ms granularity: chunks are never early, and usually < 1.5 ms late.
//!
//! ## Prefix cache
//! See [`cache`]. When the last token of a response has been generated (before the usage chunk
//! and `[DONE]` go out, so the client's next turn cannot race it), the blocks of prompt + output
//! rendered as the next request will render the assistant message (`<think>reasoning</think>content…`) are
//! cached too, so a next turn whose recorded assistant text starts like the generated text hits
//! them. Generated reasoning starts with [`tokentap_core::text::REASONING_PREAMBLE`], which is
//! what makes generated-token cache clearing (docs/benchmark.md#cache-clearing) visible in
//! `cached_tokens`.
//!
//! ## Engine metrics: the sim plays vLLM
//! A real vLLM serves `vllm:*` Prometheus series on its API port; the sim does the same on its
//! own listener (`GET /metrics`, text format, a non-global registry per server), with vLLM's
//! label `model_name` = `SimConfig::model`: TTFT, per-token ITL and E2E histograms
//! (docs/benchmark.md#prometheus buckets), prefix-cache queries/hits and prompt/generation token
//! counters (tokens), and the running-requests gauge. The sim is our simulated vLLM, so its engine
//! view is legitimate test data for the "Proxy vs engine" dashboard (`tests/observability.rs`
//! scrapes it). With `engine_metrics: sglang` (`--engine-metrics sglang`) it plays SGLang instead
//! and serves the `sglang:*` equivalents (same label), so the SGLang panels are tested the same
//! way. Latencies are taken from the same chunk stamps as [`RequestLog`], once per request when its
//! body ends (definitions in [`metrics`]); nothing is done per chunk. Unlike vLLM, whose TTFT
//! starts at tokenization, the sim's starts when the request head arrived (it has no separate
//! tokenizer step), and non-streaming responses give no TTFT/ITL sample.
//!
//! ## Measured
//! Zero-delay mode, one raw HTTP/1.1 client over loopback, sim on one current-thread runtime:
//! ≈ 480–560 k one-token chunks/s (≈ 2 µs per chunk including hyper, formatting, the stamp and
//! the in-memory log), 0.035 allocations per chunk for the whole process;
//! `cargo bench -p tokentap-sim --bench zero_delay`, details in docs/benchmarks.md.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod answers;
pub mod cache;
mod cli;
pub mod config;
mod frame;
mod log;
pub mod metrics;
mod plan;
pub mod render;
mod rng;
mod server;
mod shared;
mod stream;
mod tools;

pub use answers::Answers;
pub use cli::{run, run_with, Opts, Preset};
pub use config::{
    CacheConfig, ConfigError, EngineFlavor, FaultConfig, ModesConfig, OutputConfig, ReasoningField,
    SimConfig, TimingConfig,
};
pub use server::SimServer;
pub use stream::SimBodyError;

use bytes::Bytes;
use tokentap_core::clock::Anchor;

/// What kind of SSE event a chunk was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkKind {
    /// Role-only prelude (`{"role":"assistant","content":""}`): not a token.
    Prelude,
    /// Reasoning tokens.
    Reasoning,
    /// Content tokens.
    Content,
    /// A tool call's tokens.
    ToolCall,
    /// Final usage-only chunk (empty `choices`).
    Usage,
    /// `data: [DONE]`.
    Done,
    /// A deliberately malformed event (fault injection).
    Malformed,
    /// The whole body of a non-streaming response (tokens = all output tokens).
    Body,
}

/// One chunk the sim wrote, stamped when its frame was handed to hyper for writing.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChunkLog {
    /// Raw `CLOCK_MONOTONIC` ns ([`tokentap_core::clock::now`]) when `poll_frame` returned
    /// this frame to hyper.
    pub mono_ns: u64,
    /// Wall clock ns since the epoch of the same instant (the request's `received` anchor
    /// applied to `mono_ns`, so a wall-clock step mid-request cannot reorder chunks).
    pub wall_ns: u64,
    /// Tokens this chunk carried (0 for prelude, usage, done).
    pub tokens: u32,
    /// What the chunk carried.
    pub kind: ChunkKind,
    /// With `flush_each_chunk`: `CLOCK_MONOTONIC` ns when hyper polled the body again after
    /// writing this chunk — the chunk's `writev` happened between `mono_ns` and this instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flushed_mono_ns: Option<u64>,
}

/// Everything the sim knows about one request, for tests to compare measurements with the truth.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RequestLog {
    /// Arrival order, from 0.
    pub seq: u64,
    /// The request's method.
    pub method: String,
    /// The request's path.
    pub path: String,
    /// Request headers, lower-case names, in arrival order; `authorization` is never kept.
    pub headers: Vec<(String, String)>,
    /// The exact request body bytes, when `SimConfig::capture_bodies` is on.
    #[serde(skip)]
    pub body: Option<Bytes>,
    /// Value of the `x-session-id` header.
    pub session: Option<String>,
    /// Both clocks when the request head arrived (the service was called).
    pub received: Anchor,
    /// Response status sent (0 while the request body is still being read).
    pub status: u16,
    /// Prompt tokens of the request.
    pub prompt_tokens: u64,
    /// Of them, served from the prefix cache.
    pub cached_tokens: u64,
    /// Output tokens actually written (fewer than planned when the stream was cut).
    pub output_tokens: u64,
    /// Every chunk written, in order: SSE events of a streaming response, one `Body` entry for
    /// a non-streaming completion, none for other routes and error statuses.
    pub chunks: Vec<ChunkLog>,
    /// Fault injected into this request, if any (`error_status`, `stall`, `disconnect`, `malformed`).
    pub fault: Option<String>,
    /// The response body ended normally (false if the client went away or a disconnect was injected).
    pub finished: bool,
    /// Planned `finish_reason` (`stop`, `length`, `tool_calls`) of a completion response.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn public_types_are_thread_safe() {
        fn check<T: Send + Sync + 'static>() {}
        check::<super::SimServer>();
        check::<super::RequestLog>();
        check::<super::SimConfig>();
    }
}
