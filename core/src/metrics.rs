//! Prometheus metric names, bucket lists and label rules shared by the proxy (`source="wire"`),
//! the replay client (`source="client"`) and the dashboard tests: the single source of truth of
//! docs/benchmark.md#prometheus, so a dashboard query on one name works for both sides.
//!
//! Layout: name constants ([`names`]), bucket lists ([`buckets`]), label helpers
//! ([`ModelCap`], [`status_class`]) and [`ALL_NAMES`], the list a dashboard test compares the
//! metric names of its queries with. Units are base units (`_seconds`); counters end `_total`.
//! No session id or other unbounded value is ever a label.

/// Declares each name once: a constant in [`names`] and its place in [`ALL_NAMES`].
macro_rules! metric_names {
    ($($(#[$doc:meta])* $name:ident = $text:literal,)+) => {
        /// Metric names (without histogram suffixes `_bucket`/`_sum`/`_count`).
        pub mod names {
            $($(#[$doc])* pub const $name: &str = $text;)+
        }

        /// Every name exported by tokentap itself, in declaration order.
        pub const ALL_NAMES: &[&str] = &[$(names::$name),+];
    };
}

metric_names! {
        /// Requests by route, status class, error source, model (and upstream, the proxy).
        REQUESTS_TOTAL = "tokentap_requests_total",
        /// Requests in flight.
        IN_FLIGHT = "tokentap_in_flight",
        /// Time to first byte.
        TTFB_SECONDS = "tokentap_ttfb_seconds",
        /// Time to first token.
        TTFT_SECONDS = "tokentap_ttft_seconds",
        /// End to end.
        E2E_SECONDS = "tokentap_e2e_seconds",
        /// Time per output token after the first.
        TPOT_SECONDS = "tokentap_tpot_seconds",
        /// Inter-token latency (one sample per token).
        ITL_SECONDS = "tokentap_itl_seconds",
        /// Gap between chunks (one sample per chunk).
        INTER_CHUNK_SECONDS = "tokentap_inter_chunk_seconds",
        /// Tokens per chunk.
        TOKENS_PER_CHUNK = "tokentap_tokens_per_chunk",
        /// Prompt tokens per turn (the context's growth).
        PROMPT_TOKENS_PER_TURN = "tokentap_prompt_tokens_per_turn",
        /// Prompt tokens.
        PROMPT_TOKENS_TOTAL = "tokentap_prompt_tokens_total",
        /// Cached prompt tokens.
        CACHED_TOKENS_TOTAL = "tokentap_cached_tokens_total",
        /// Output tokens.
        OUTPUT_TOKENS_TOTAL = "tokentap_output_tokens_total",
        /// Reasoning tokens.
        REASONING_TOKENS_TOTAL = "tokentap_reasoning_tokens_total",
        /// Streams that ended without a usage chunk.
        STREAMS_WITHOUT_USAGE_TOTAL = "tokentap_streams_without_usage_total",
        /// Proxy only: sessions in the table.
        ACTIVE_SESSIONS = "tokentap_active_sessions",
        /// Proxy only: mean turns started per session.
        TURNS_PER_SESSION = "tokentap_turns_per_session",
        /// Proxy only: sessions evicted from the table.
        SESSION_EVICTIONS_TOTAL = "tokentap_session_evictions_total",
        /// Proxy only: requests sent to each replica.
        UPSTREAM_REQUESTS_TOTAL = "tokentap_upstream_requests_total",
        /// Proxy only: upstream errors by replica and kind.
        UPSTREAM_ERRORS_TOTAL = "tokentap_upstream_errors_total",
        /// Proxy only: its own time per sampled chunk.
        PROXY_CHUNK_PROCESSING_SECONDS = "tokentap_proxy_chunk_processing_seconds",
        /// Replay only: turns by outcome `event` = issued | completed | failed | aborted.
        TURNS_TOTAL = "tokentap_turns_total",
        /// Replay only: conversations sleeping in an inter-turn delay.
        DELAY_QUEUE = "tokentap_delay_queue",
        /// Replay only: 1 while the performance window is open.
        IN_WINDOW = "tokentap_in_window",
}

/// The labels of every per-turn series ([`TurnSeries`]), besides the constant `source`.
pub const TURN_LABELS: &[&str] = &["model", "route"];

/// The series of one engine that tokentap reads, dashboards may reference and the sim exports
/// (docs/benchmark.md#prometheus; label `model_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineNames {
    /// The TTFT histogram.
    pub ttft: &'static str,
    /// The inter-token latency histogram.
    pub itl: &'static str,
    /// The end-to-end histogram.
    pub e2e: &'static str,
    /// Prompt tokens looked up in the prefix cache (vLLM only).
    pub cache_queries: Option<&'static str>,
    /// Prompt tokens found in the prefix cache.
    pub cache_hits: &'static str,
    /// Requests running.
    pub running: &'static str,
    /// Prompt tokens processed.
    pub prompt_tokens: &'static str,
    /// Tokens generated.
    pub generation_tokens: &'static str,
}

/// Declares each engine's names once: its [`EngineNames`], its list, and its place in
/// [`ENGINE_NAMES`].
macro_rules! engine_names {
    (@opt) => { None };
    (@opt $x:literal) => { Some($x) };
    ($(
        $(#[$doc:meta])*
        $engine:ident, $list:ident {
            ttft: $ttft:literal, itl: $itl:literal, e2e: $e2e:literal,
            $(cache_queries: $cq:literal,)?
            cache_hits: $ch:literal, running: $run:literal,
            prompt_tokens: $pt:literal, generation_tokens: $gt:literal $(,)?
        }
    )+) => {
        $(
            $(#[$doc])*
            pub const $engine: EngineNames = EngineNames {
                ttft: $ttft,
                itl: $itl,
                e2e: $e2e,
                cache_queries: engine_names!(@opt $($cq)?),
                cache_hits: $ch,
                running: $run,
                prompt_tokens: $pt,
                generation_tokens: $gt,
            };
            $(#[$doc])*
            pub const $list: &[&str] = &[$ttft, $itl, $e2e, $($cq,)? $ch, $run, $pt, $gt];
        )+
        /// Every engine series dashboards may reference, engine by engine.
        pub const ENGINE_NAMES: &[&str] = &[$($ttft, $itl, $e2e, $($cq,)? $ch, $run, $pt, $gt),+];
    };
}

engine_names! {
    /// vLLM's.
    ENGINE_VLLM, ENGINE_VLLM_NAMES {
        ttft: "vllm:time_to_first_token_seconds",
        itl: "vllm:inter_token_latency_seconds",
        e2e: "vllm:e2e_request_latency_seconds",
        cache_queries: "vllm:prefix_cache_queries_total",
        cache_hits: "vllm:prefix_cache_hits_total",
        running: "vllm:num_requests_running",
        prompt_tokens: "vllm:prompt_tokens_total",
        generation_tokens: "vllm:generation_tokens_total",
    }
    /// SGLang's (no prefix-cache queries counter: `cached_tokens_total` counts the hits).
    ENGINE_SGLANG, ENGINE_SGLANG_NAMES {
        ttft: "sglang:time_to_first_token_seconds",
        itl: "sglang:inter_token_latency_seconds",
        e2e: "sglang:e2e_request_latency_seconds",
        cache_hits: "sglang:cached_tokens_total",
        running: "sglang:num_running_reqs",
        prompt_tokens: "sglang:prompt_tokens_total",
        generation_tokens: "sglang:generation_tokens_total",
    }
    /// TensorRT-LLM's (`trtllm-serve`'s `MetricsCollector` names, served at
    /// `/prometheus/metrics`).
    ENGINE_TRTLLM, ENGINE_TRTLLM_NAMES {
        ttft: "trtllm_time_to_first_token_seconds",
        itl: "trtllm_time_per_output_token_seconds",
        e2e: "trtllm_e2e_request_latency_seconds",
        cache_hits: "trtllm_prompt_cached_tokens_total",
        running: "trtllm_num_requests_running",
        prompt_tokens: "trtllm_prompt_tokens_total",
        generation_tokens: "trtllm_generation_tokens_total",
    }
}

/// Label values.
pub mod labels {
    /// `source` label: the proxy's view.
    pub const SOURCE_WIRE: &str = "wire";
    /// `source` label: the replay client's view.
    pub const SOURCE_CLIENT: &str = "client";
    /// Model label value once the cap is reached.
    pub const MODEL_OTHER: &str = "other";
    /// Default number of distinct model label values before overflow to `other`.
    pub const MODEL_CAP: usize = 8;
}

/// Bucket boundaries of docs/benchmark.md#prometheus (containing OpenTelemetry GenAI's and
/// vLLM's lists).
pub mod buckets {
    /// Time to first token and first byte, and end to end, s.
    pub const TTFT: &[f64] = &[
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
    ];
    /// ITL, TPOT and inter-chunk latency.
    pub const ITL: &[f64] = &[
        0.001, 0.002, 0.004, 0.006, 0.008, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
        0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    ];
    /// E2E: 0.01 … 81.92 doubling, then 160 … 7680.
    pub const E2E: &[f64] = &[
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
        160.0, 320.0, 640.0, 1280.0, 2560.0, 7680.0,
    ];
    /// Token counts: powers of 4 from 1 to 4,194,304.
    pub const TOKENS: &[f64] = &[
        1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
        4194304.0,
    ];
    /// Tokens per chunk.
    pub const TOKENS_PER_CHUNK: &[f64] = &[1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0];
    /// Turns per session (a token-count-like power series is too coarse at the low end).
    pub const TURNS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
    /// The proxy's own time per chunk: 1 µs … ~1 ms.
    pub const CHUNK_PROCESSING: &[f64] = &[
        1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 1e-2,
    ];
}

/// `2xx`, `4xx`, ... or `none` when no status was sent.
pub fn status_class(status: Option<u16>) -> &'static str {
    match status {
        Some(100..=199) => "1xx",
        Some(200..=299) => "2xx",
        Some(300..=399) => "3xx",
        Some(400..=499) => "4xx",
        Some(500..=599) => "5xx",
        _ => "none",
    }
}

/// Caps the `model` label: the first `cap` distinct names pass, later ones become `other`.
/// Called once per request (not per chunk); the caller owns it behind whatever sharing it needs.
#[derive(Debug, Clone)]
pub struct ModelCap {
    cap: usize,
    seen: Vec<String>,
}

impl ModelCap {
    /// A cap of `cap` model names.
    pub fn new(cap: usize) -> Self {
        ModelCap {
            cap,
            seen: Vec::new(),
        }
    }

    /// The label value for `model`.
    pub fn label<'a>(&mut self, model: &'a str) -> &'a str {
        if self.seen.iter().any(|m| m == model) {
            return model;
        }
        if self.seen.len() < self.cap {
            self.seen.push(model.to_owned());
            return model;
        }
        labels::MODEL_OTHER
    }
}

/// Metric names used in a PromQL expression: identifiers followed by `{`, `[`, `)` or
/// whitespace that are not functions, keywords or label names. Histogram suffixes are stripped.
/// Good enough for dashboard checks; not a PromQL parser.
pub fn names_in_expr(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    let mut depth_brace = 0usize;
    while i < b.len() {
        let c = b[i];
        if c == b'{' {
            depth_brace += 1;
        } else if c == b'}' {
            depth_brace = depth_brace.saturating_sub(1);
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
        } else if depth_brace == 0 && (c.is_ascii_alphabetic() || c == b'_') {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            let word = &expr[s..i];
            let mut j = i;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            let next = b.get(j).copied();
            let is_call = next == Some(b'(');
            let is_metric = word.starts_with("tokentap_")
                || word.starts_with("vllm:")
                || word.starts_with("sglang:")
                || word.starts_with("trtllm_");
            if is_metric && !is_call {
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| word.strip_suffix(s))
                    .unwrap_or(word);
                out.push(base.to_owned());
            }
            continue;
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_cap_overflows_to_other() {
        let mut m = ModelCap::new(2);
        assert_eq!(m.label("a"), "a");
        assert_eq!(m.label("b"), "b");
        assert_eq!(m.label("c"), "other");
        assert_eq!(m.label("a"), "a");
    }

    #[test]
    fn names_are_prefixed_and_unique() {
        let mut v = ALL_NAMES.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), ALL_NAMES.len());
        assert!(ALL_NAMES.iter().all(|n| n.starts_with("tokentap_")));
    }

    #[test]
    fn buckets_contain_vllm_lists_and_are_sorted() {
        for b in [buckets::TTFT, buckets::ITL, buckets::E2E, buckets::TOKENS] {
            assert!(b.windows(2).all(|w| w[0] < w[1]));
        }
        // vLLM's TTFT buckets.
        for x in [
            0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
        ] {
            assert!(buckets::TTFT.contains(&x));
        }
        assert_eq!(buckets::TOKENS.last(), Some(&4194304.0));
    }

    #[test]
    fn names_parsed_from_promql() {
        let e = r#"histogram_quantile(0.95, sum by (le, source) (rate(tokentap_ttft_seconds_bucket{source="wire"}[$__rate_interval]))) - on() vllm:time_to_first_token_seconds_sum"#;
        assert_eq!(
            names_in_expr(e),
            vec!["tokentap_ttft_seconds", "vllm:time_to_first_token_seconds"]
        );
    }
}

/// Registration helpers for a non-global registry. Invariant for every `expect` here: callers
/// pass static, distinct names and label sets, so creation and registration cannot fail.
pub mod register {
    use prometheus::{
        HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    };

    /// A histogram vector, registered.
    pub fn histogram_vec(
        r: &Registry,
        name: &str,
        help: &str,
        b: &[f64],
        l: &[&str],
    ) -> HistogramVec {
        let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(b.to_vec()), l)
            .expect("static metric");
        r.register(Box::new(h.clone())).expect("distinct metric");
        h
    }

    /// A counter vector, registered.
    pub fn counter_vec(r: &Registry, name: &str, help: &str, l: &[&str]) -> IntCounterVec {
        let c = IntCounterVec::new(Opts::new(name, help), l).expect("static metric");
        r.register(Box::new(c.clone())).expect("distinct metric");
        c
    }

    /// A counter, registered.
    pub fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
        let c = IntCounter::new(name, help).expect("static metric");
        r.register(Box::new(c.clone())).expect("distinct metric");
        c
    }

    /// A gauge, registered.
    pub fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
        let g = IntGauge::new(name, help).expect("static metric");
        r.register(Box::new(g.clone())).expect("distinct metric");
        g
    }
}

/// The per-turn series the proxy (`source="wire"`) and the replay (`source="client"`) both
/// export under the same names, labelled by the capped `model` and the `route` (the API:
/// `/v1/chat/completions`, `/v1/completions`, `/v1/responses`, `/v1/messages`; the replay's is
/// always the first): latency histograms, tokens per chunk, context growth and token counters. Observed once per turn from its finished
/// [`Measured`](crate::timeline::Measured); label lookups happen there, never per chunk.
pub struct TurnSeries {
    /// Time to first byte, s.
    pub ttfb: prometheus::HistogramVec,
    /// Time to first token, s.
    pub ttft: prometheus::HistogramVec,
    /// End to end, s.
    pub e2e: prometheus::HistogramVec,
    /// Time per output token after the first, s.
    pub tpot: prometheus::HistogramVec,
    /// One sample per token (a chunk of k tokens after a gap g gives k samples of g/k).
    pub itl: prometheus::HistogramVec,
    /// The gap between chunks, s (one sample per chunk).
    pub inter_chunk: prometheus::HistogramVec,
    /// Tokens per chunk.
    pub tokens_per_chunk: prometheus::HistogramVec,
    /// Prompt tokens per turn.
    pub prompt_tokens_per_turn: prometheus::HistogramVec,
    /// Prompt tokens.
    pub prompt_tokens: prometheus::IntCounterVec,
    /// Cached prompt tokens.
    pub cached_tokens: prometheus::IntCounterVec,
    /// Output tokens.
    pub output_tokens: prometheus::IntCounterVec,
    /// Reasoning tokens.
    pub reasoning_tokens: prometheus::IntCounterVec,
    /// Streams that ended without a usage chunk.
    pub streams_without_usage: prometheus::IntCounterVec,
}

impl TurnSeries {
    /// Registers the series in `r` (whose constant labels carry `source`).
    pub fn register(r: &prometheus::Registry) -> TurnSeries {
        use register::{counter_vec, histogram_vec as hist};
        let m = TURN_LABELS;
        TurnSeries {
            ttfb: hist(
                r,
                names::TTFB_SECONDS,
                "First response byte",
                buckets::TTFT,
                m,
            ),
            ttft: hist(
                r,
                names::TTFT_SECONDS,
                "First token-carrying chunk",
                buckets::TTFT,
                m,
            ),
            e2e: hist(
                r,
                names::E2E_SECONDS,
                "Request to last byte",
                buckets::E2E,
                m,
            ),
            tpot: hist(
                r,
                names::TPOT_SECONDS,
                "(E2E - TTFT) / (tokens - 1)",
                buckets::ITL,
                m,
            ),
            itl: hist(
                r,
                names::ITL_SECONDS,
                "Inter-token latency, one sample per token (docs/benchmark.md#metrics)",
                buckets::ITL,
                m,
            ),
            inter_chunk: hist(
                r,
                names::INTER_CHUNK_SECONDS,
                "Gap between token-carrying chunks",
                buckets::ITL,
                m,
            ),
            tokens_per_chunk: hist(
                r,
                names::TOKENS_PER_CHUNK,
                "Tokens carried by one chunk",
                buckets::TOKENS_PER_CHUNK,
                m,
            ),
            prompt_tokens_per_turn: hist(
                r,
                names::PROMPT_TOKENS_PER_TURN,
                "Prompt tokens of one turn (context growth)",
                buckets::TOKENS,
                m,
            ),
            prompt_tokens: counter_vec(r, names::PROMPT_TOKENS_TOTAL, "Prompt tokens", m),
            cached_tokens: counter_vec(
                r,
                names::CACHED_TOKENS_TOTAL,
                "Cached prompt tokens (prompt_tokens_details.cached_tokens)",
                m,
            ),
            output_tokens: counter_vec(r, names::OUTPUT_TOKENS_TOTAL, "Output tokens", m),
            reasoning_tokens: counter_vec(
                r,
                names::REASONING_TOKENS_TOTAL,
                "Reasoning tokens (completion_tokens_details)",
                m,
            ),
            streams_without_usage: counter_vec(
                r,
                names::STREAMS_WITHOUT_USAGE_TOTAL,
                "Streams that ended without a usage chunk",
                m,
            ),
        }
    }

    /// Exports every series of `model` at 0 before its first turn (a known model: a panel then
    /// shows 0 instead of "No data").
    pub fn preset(&self, model: &str, route: &str) {
        let l = [model, route];
        for h in [
            &self.ttfb,
            &self.ttft,
            &self.e2e,
            &self.tpot,
            &self.itl,
            &self.inter_chunk,
            &self.tokens_per_chunk,
            &self.prompt_tokens_per_turn,
        ] {
            h.with_label_values(&l);
        }
        for c in [
            &self.prompt_tokens,
            &self.cached_tokens,
            &self.output_tokens,
            &self.reasoning_tokens,
            &self.streams_without_usage,
        ] {
            c.with_label_values(&l);
        }
    }

    /// Observes one finished turn. `streamed`: the response was a stream (only streams count
    /// toward `streams_without_usage`).
    pub fn observe(
        &self,
        ms: &crate::timeline::Measured,
        model: &str,
        route: &str,
        streamed: bool,
    ) {
        let l = [model, route];
        let secs = |ns: u64| ns as f64 / 1e9;
        for (h, v) in [
            (&self.ttfb, ms.ttfb_ns),
            (&self.ttft, ms.ttft_ns),
            (&self.e2e, ms.e2e_ns),
            (&self.tpot, ms.tpot_ns),
        ] {
            if let Some(t) = v {
                h.with_label_values(&l).observe(secs(t));
            }
        }
        // A sample per chunk: counted here first, then added to the shared histograms once
        // per bucket (`local`), not three shared atomic updates per chunk.
        let itl = self.itl.with_label_values(&l).local();
        for s in ms.itl_samples() {
            itl.observe(s / 1e9);
        }
        itl.flush();
        let ic = self.inter_chunk.with_label_values(&l).local();
        for s in ms.inter_chunk_samples() {
            ic.observe(s / 1e9);
        }
        ic.flush();
        let tpc = self.tokens_per_chunk.with_label_values(&l).local();
        for c in ms.chunks.iter().filter(|c| c.text) {
            tpc.observe(c.tokens as f64);
        }
        tpc.flush();
        if let Some(p) = ms.prompt_tokens {
            self.prompt_tokens_per_turn
                .with_label_values(&l)
                .observe(p as f64);
            self.prompt_tokens.with_label_values(&l).inc_by(p);
        }
        for (c, v) in [
            (&self.cached_tokens, ms.cached_tokens),
            (&self.output_tokens, ms.output_tokens),
            (&self.reasoning_tokens, ms.reasoning_tokens),
        ] {
            if let Some(n) = v {
                c.with_label_values(&l).inc_by(n);
            }
        }
        // Touched on every turn, so the series exists (at 0) from a model's first turn on.
        let without_usage = self.streams_without_usage.with_label_values(&l);
        if ms.prompt_tokens.is_none() && streamed {
            without_usage.inc();
        }
    }
}
