//! The engine's own Prometheus view: the sim plays vLLM here and exports vLLM's series (or
//! SGLang's, with `SimConfig::engine_metrics = sglang`, or TensorRT-LLM's, `trtllm`: served at
//! `/prometheus/metrics` as `trtllm-serve` does, and at `/metrics`).
//!
//! Why: a real vLLM serves `vllm:*` metrics on its API port; the "Proxy vs engine" dashboard
//! compares the proxy's (`source="wire"`) view with them. The sim is our simulated vLLM, so its
//! engine view is legitimate test data for those panels (`tests/observability.rs`).
//!
//! Layout: [`EngineMetrics`] owns a non-global `prometheus::Registry` (one per server, so
//! several sims in one process never share series), with the constant label
//! `model_name` = `SimConfig::model` (vLLM's label name). Names are in
//! [`tokentap_core::metrics::ENGINE_NAMES`]; TTFT/ITL/E2E use the bucket lists of
//! docs/benchmark.md#prometheus ([`tokentap_core::metrics::buckets`]), which contain vLLM's own.
//! [`VLLM_NAMES`] and
//! [`SGLANG_NAMES`] list what each flavor exports; SGLang has no prefix-cache *queries* counter
//! (its hits are `sglang:cached_tokens_total`) and calls the running gauge
//! `sglang:num_running_reqs`.
//!
//! Data flow: `num_requests_running` goes up when a completion is admitted (its body is built)
//! and down when the body ends. Everything else is observed once per request, when its body
//! finalizes, from the chunk stamps the body already keeps in its [`RequestLog`] — no lock or
//! atomic per chunk. Definitions (all on `CLOCK_MONOTONIC`):
//! - TTFT: request head arrival (`RequestLog::received`) → first chunk carrying text tokens
//!   (reasoning, content or tool call) handed to hyper. Streaming responses only: a
//!   non-streaming body has no first-token stamp.
//! - ITL: per token; a token chunk of k tokens written g after the previous token chunk gives k
//!   observations of g/k (the first chunk's extra tokens give none, docs/benchmark.md#metrics).
//! - E2E: arrival → last frame written; only for responses that ended normally.
//! - prompt/generation tokens, prefix-cache queries (prompt tokens looked up) and hits (cached
//!   tokens): every admitted completion, counted when it ends (generation = tokens written).

use crate::config::EngineFlavor;
use crate::{ChunkKind, RequestLog};
use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntGauge, Opts, Registry, TextEncoder,
};
use std::collections::HashMap;
use tokentap_core::metrics::buckets;

use tokentap_core::metrics::{
    ENGINE_SGLANG as SGLANG, ENGINE_TRTLLM as TRTLLM, ENGINE_VLLM as VLLM,
};

/// Every name the sim exports as vLLM, as SGLang and as TensorRT-LLM: the engine names of
/// docs/benchmark.md#prometheus as core lists them.
pub use tokentap_core::metrics::{
    ENGINE_SGLANG_NAMES as SGLANG_NAMES, ENGINE_TRTLLM_NAMES as TRTLLM_NAMES,
    ENGINE_VLLM_NAMES as VLLM_NAMES,
};

/// The names exported for `flavor`.
pub fn names(flavor: EngineFlavor) -> &'static [&'static str] {
    match flavor {
        EngineFlavor::Vllm => VLLM_NAMES,
        EngineFlavor::Sglang => SGLANG_NAMES,
        EngineFlavor::Trtllm => TRTLLM_NAMES,
    }
}

pub(crate) struct EngineMetrics {
    registry: Registry,
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    cache_queries: Option<IntCounter>,
    cache_hits: IntCounter,
    pub running: IntGauge,
    prompt_tokens: IntCounter,
    generation_tokens: IntCounter,
}

impl EngineMetrics {
    pub fn new(flavor: EngineFlavor, model: &str) -> EngineMetrics {
        let n = match flavor {
            EngineFlavor::Vllm => &VLLM,
            EngineFlavor::Sglang => &SGLANG,
            EngineFlavor::Trtllm => &TRTLLM,
        };
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
            n.ttft,
            "Time to first token (sim: arrival to first text chunk written)",
            buckets::TTFT,
        );
        let itl = hist(n.itl, "Inter-token latency, per token", buckets::ITL);
        let e2e = hist(
            n.e2e,
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
        let cache_queries = n
            .cache_queries
            .map(|q| counter(q, "Prompt tokens looked up in the prefix cache"));
        let cache_hits = counter(n.cache_hits, "Prompt tokens found in the prefix cache");
        let prompt_tokens = counter(n.prompt_tokens, "Prompt tokens of admitted requests");
        let generation_tokens = counter(n.generation_tokens, "Output tokens written");
        let running =
            IntGauge::with_opts(Opts::new(n.running, "Requests admitted and not finished"))
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
            if let Some(q) = &self.cache_queries {
                q.inc_by(log.prompt_tokens);
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flavor_exports_exactly_its_listed_names() {
        for (flavor, other) in [
            (EngineFlavor::Vllm, EngineFlavor::Sglang),
            (EngineFlavor::Sglang, EngineFlavor::Vllm),
        ] {
            let text = String::from_utf8(EngineMetrics::new(flavor, "m").render()).unwrap();
            let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
            assert_eq!(types, names(flavor).len(), "{text}");
            for n in names(flavor) {
                assert!(text.contains(&format!("# TYPE {n} ")), "{n} in {text}");
                assert!(
                    tokentap_core::metrics::ENGINE_NAMES.contains(n),
                    "{n} in core"
                );
            }
            for n in names(other) {
                assert!(!text.contains(n), "{n} not exported as {flavor:?}");
            }
        }
    }
}
