//! The engine's own Prometheus view: the sim plays vLLM here and exports vLLM's series.
//!
//! Why: a real vLLM serves `vllm:*` metrics on its API port; the "Proxy vs engine" dashboard
//! compares the proxy's (`source="wire"`) view with them. The sim is our simulated vLLM, so its
//! engine view is legitimate test data for those panels (`tests/observability.rs`).
//!
//! Layout: [`EngineMetrics`] owns a non-global `prometheus::Registry` (one per server, so
//! several sims in one process never share series), with the constant label
//! `model_name` = `SimConfig::model` (vLLM's label name). Names are in
//! [`tokentap_core::metrics::ENGINE_NAMES`]; TTFT/ITL/E2E use the SPEC §8 bucket lists
//! ([`tokentap_core::metrics::buckets`]), which contain vLLM's own.
//!
//! Data flow: `num_requests_running` goes up when a completion is admitted (its body is built)
//! and down when the body ends. Everything else is observed once per request, when its body
//! finalizes, from the chunk stamps the body already keeps in its [`RequestLog`] — no lock or
//! atomic per chunk. Definitions (all on `CLOCK_MONOTONIC`):
//! - TTFT: request head arrival (`RequestLog::received`) → first chunk carrying text tokens
//!   (reasoning, content or tool call) handed to hyper. Streaming responses only: a
//!   non-streaming body has no first-token stamp.
//! - ITL: per token; a token chunk of k tokens written g after the previous token chunk gives k
//!   observations of g/k (the first chunk's extra tokens give none, SPEC §7).
//! - E2E: arrival → last frame written; only for responses that ended normally.
//! - prompt/generation tokens, prefix-cache queries (prompt tokens looked up) and hits (cached
//!   tokens): every admitted completion, counted when it ends (generation = tokens written).

use crate::{ChunkKind, RequestLog};
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntGauge, Opts, Registry, TextEncoder,
};
use std::collections::HashMap;
use tokentap_core::metrics::buckets;

pub const TTFT: &str = "vllm:time_to_first_token_seconds";
pub const ITL: &str = "vllm:inter_token_latency_seconds";
pub const E2E: &str = "vllm:e2e_request_latency_seconds";
pub const PREFIX_CACHE_QUERIES: &str = "vllm:prefix_cache_queries_total";
pub const PREFIX_CACHE_HITS: &str = "vllm:prefix_cache_hits_total";
pub const RUNNING: &str = "vllm:num_requests_running";
pub const PROMPT_TOKENS: &str = "vllm:prompt_tokens_total";
pub const GENERATION_TOKENS: &str = "vllm:generation_tokens_total";

/// Every name the sim exports (all listed in `tokentap_core::metrics::ENGINE_NAMES`).
pub const NAMES: &[&str] = &[
    TTFT,
    ITL,
    E2E,
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
    RUNNING,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
];

pub(crate) struct EngineMetrics {
    registry: Registry,
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    cache_queries: IntCounter,
    cache_hits: IntCounter,
    pub running: IntGauge,
    prompt_tokens: IntCounter,
    generation_tokens: IntCounter,
}

impl EngineMetrics {
    pub fn new(model: &str) -> EngineMetrics {
        let consts = HashMap::from([("model_name".to_string(), model.to_string())]);
        // `new_custom` only fails on an invalid prefix or label *name*; the name is static.
        let registry = Registry::new_custom(None, Some(consts)).unwrap_or_else(|_| Registry::new());
        let hist = |name: &str, help: &str, b: &[f64]| {
            // Invariant: static, distinct names and valid sorted buckets: cannot fail.
            let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(b.to_vec()))
                .expect("static metric");
            registry
                .register(Box::new(h.clone()))
                .expect("distinct metric");
            h
        };
        let ttft = hist(
            TTFT,
            "Time to first token (sim: arrival to first text chunk written)",
            buckets::TTFT,
        );
        let itl = hist(ITL, "Inter-token latency, per token", buckets::ITL);
        let e2e = hist(
            E2E,
            "End-to-end request latency (arrival to last frame written)",
            buckets::E2E,
        );
        let counter = |name: &str, help: &str| {
            let c = IntCounter::new(name, help).expect("static metric");
            registry
                .register(Box::new(c.clone()))
                .expect("distinct metric");
            c
        };
        let cache_queries = counter(
            PREFIX_CACHE_QUERIES,
            "Prompt tokens looked up in the prefix cache",
        );
        let cache_hits = counter(PREFIX_CACHE_HITS, "Prompt tokens found in the prefix cache");
        let prompt_tokens = counter(PROMPT_TOKENS, "Prompt tokens of admitted requests");
        let generation_tokens = counter(GENERATION_TOKENS, "Output tokens written");
        let running = IntGauge::with_opts(Opts::new(RUNNING, "Requests admitted and not finished"))
            .expect("static metric");
        registry
            .register(Box::new(running.clone()))
            .expect("distinct metric");
        EngineMetrics {
            registry,
            ttft,
            itl,
            e2e,
            cache_queries,
            cache_hits,
            running,
            prompt_tokens,
            generation_tokens,
        }
    }

    /// Observes one admitted completion that has ended (normally or not).
    pub fn observe(&self, log: &RequestLog, cache_enabled: bool) {
        self.prompt_tokens.inc_by(log.prompt_tokens);
        self.generation_tokens.inc_by(log.output_tokens);
        if cache_enabled {
            self.cache_queries.inc_by(log.prompt_tokens);
            self.cache_hits.inc_by(log.cached_tokens);
        }
        let start = log.received.mono_ns;
        let secs = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e9;
        let mut prev: Option<u64> = None;
        // Local histogram: plain adds, one flush (a handful of atomics) per request.
        let itl = self.itl.local();
        for c in &log.chunks {
            let text = matches!(
                c.kind,
                ChunkKind::Reasoning | ChunkKind::Content | ChunkKind::ToolCall
            );
            if !text {
                continue;
            }
            match prev {
                None => self.ttft.observe(secs(start, c.mono_ns)),
                Some(p) if c.tokens > 0 => {
                    let per_token = secs(p, c.mono_ns) / c.tokens as f64;
                    for _ in 0..c.tokens {
                        itl.observe(per_token);
                    }
                }
                Some(_) => {}
            }
            prev = Some(c.mono_ns);
        }
        itl.flush();
        if log.finished {
            if let Some(last) = log.chunks.last() {
                self.e2e.observe(secs(start, last.mono_ns));
            }
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8192);
        // Encoding into a Vec fails only on metric families prometheus itself rejects.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}
