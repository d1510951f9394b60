//! The proxy's Prometheus metrics, on a registry of its own (never the global one), served by
//! the admin listener at `/metrics`. Names, buckets and label rules come from
//! [`tokentap_core::metrics`] (docs/benchmark.md#prometheus), shared with the replay client's
//! `--metrics`: every series here carries the constant label `source="wire"`, the replay's
//! `source="client"`.
//!
//! Cost decisions:
//! - Latency histograms, token counters and `requests_total` are observed once per request, at
//!   the end of the stream, from the finished timeline ([`Metrics::observe_turn`]); the label
//!   lookups (`with_label_values`) happen there, once per request.
//! - Per chunk only [`Metrics::chunk_processing`] is touched, on one chunk in
//!   [`CHUNK_SAMPLE_EVERY`], and a prometheus `Histogram::observe` is atomic adds, no lock.
//! - The model label is capped ([`tokentap_core::metrics::ModelCap`]) behind a mutex taken once
//!   per request, never per chunk.
//!
//! No session id, ever, as a label; `upstream` is bounded by the configured list, `route` by the
//! fixed set in [`crate::route::Route`], `model` by the cap.

use crate::route::Route;
use parking_lot::Mutex;
use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Registry,
    TextEncoder,
};
use std::collections::HashMap;
use tokentap_core::metrics::register::{counter, counter_vec, gauge};
use tokentap_core::metrics::{buckets, labels, names, ModelCap, TurnSeries};
use tokentap_core::record::TurnRecord;

pub use tokentap_core::metrics::status_class;

/// Per-chunk processing time is measured on one chunk in this many (a second clock read per
/// sampled chunk, ~20 ns on the vDSO clock).
pub const CHUNK_SAMPLE_EVERY: u32 = 8;

/// Proxy-only series (not part of the shared client/wire set).
pub const REQUESTS_SEEN_TOTAL: &str = "tokentap_proxy_requests_seen_total";
/// Records written.
pub const RECORDS_WRITTEN_TOTAL: &str = "tokentap_proxy_records_written_total";
/// Records dropped (the writer's queue was full).
pub const RECORDS_DROPPED_TOTAL: &str = "tokentap_proxy_records_dropped_total";
/// Records lost to a write error.
pub const RECORDS_FAILED_TOTAL: &str = "tokentap_proxy_records_failed_total";
/// Session ids that were not plain ASCII or were cut, by kind.
pub const SESSION_IDS_UNUSUAL_TOTAL: &str = "tokentap_proxy_session_ids_unusual_total";
/// Client connections closed before a request, by reason.
pub const CONNECTIONS_CLOSED_TOTAL: &str = "tokentap_proxy_connections_closed_total";
/// SSE events the proxy could not read.
pub const MALFORMED_EVENTS_TOTAL: &str = "tokentap_proxy_malformed_events_total";
/// Requests the proxy asked usage for (`--inject-usage`).
pub const USAGE_INJECTED_TOTAL: &str = "tokentap_proxy_usage_injected_total";

/// The kinds of unusual session id (`session_ids_unusual`'s `kind`).
const SESSION_ID_KINDS: [&str; 3] = ["non_ascii", "non_utf8", "too_long"];
/// Why a client connection was closed before a request (`connections_closed`'s `reason`).
const CLOSE_REASONS: [&str; 3] = ["header_timeout", "tls_timeout", "over_limit"];

/// Every metric the proxy exports.
pub struct Metrics {
    /// The registry `/metrics` serves.
    pub registry: Registry,
    /// `tokentap_requests_total{route,status_class,error_source,model,upstream}`.
    pub requests: IntCounterVec,
    /// Requests accepted by the service (the "seen" side of records written == requests seen).
    pub requests_seen: IntCounter,
    /// Requests in flight.
    pub in_flight: IntGauge,
    /// Records written.
    pub records_written: IntCounter,
    /// Records dropped (the writer's queue was full).
    pub records_dropped: IntCounter,
    /// Records not written because of a write error (full or read-only disk).
    pub records_failed: IntCounter,
    /// Sessions evicted from the table (TTL or bounds).
    pub session_evictions: IntCounter,
    /// `tokentap_proxy_session_ids_unusual_total{kind}`: session ids taken byte-exact from
    /// non-ASCII UTF-8 (`non_ascii`), percent-encoded from bytes that are not UTF-8 (`non_utf8`),
    /// or cut to `--max-session-id-bytes` (`too_long`).
    pub session_ids_unusual: IntCounterVec,
    /// `tokentap_proxy_connections_closed_total{reason}`: client connections the proxy closed
    /// before a request: `header_timeout` (no byte in time), `tls_timeout`, `over_limit`
    /// (`--max-connections` open already).
    pub connections_closed: IntCounterVec,
    /// Sessions in the table.
    pub sessions_active: IntGauge,
    /// Mean turns started per session in the table, set at scrape time.
    pub turns_per_session: Gauge,
    /// `tokentap_upstream_requests_total{upstream}`: requests sent to each replica.
    pub upstream_requests: IntCounterVec,
    /// `tokentap_upstream_errors_total{upstream,kind}`: `connect` (refused), `reset`, `timeout`,
    /// `stale_connection` (a kept-alive connection closed under a request, which was re-sent).
    pub upstream_errors: IntCounterVec,
    /// SSE events the proxy could not read.
    pub malformed_events: IntCounter,
    /// Requests the proxy asked usage for (`--inject-usage`).
    pub usage_injected: IntCounter,
    /// The per-turn series shared with the replay (latency histograms, token counters).
    pub turn: TurnSeries,
    /// The proxy's own time per (sampled) chunk: framer + chunk parse + timeline.
    pub chunk_processing: Histogram,
    models: Mutex<ModelCap>,
}

impl Metrics {
    /// Registers every metric in a fresh registry with `source="wire"`.
    pub fn new() -> Metrics {
        Self::with_model_cap(labels::MODEL_CAP)
    }

    /// [`Metrics::new`] with the `model` label capped at `cap` distinct values.
    pub fn with_model_cap(cap: usize) -> Metrics {
        let r = wire_registry();
        let req = counter_vec(
            &r,
            names::REQUESTS_TOTAL,
            "Requests finished, by route, status class, error source, model and upstream",
            &["route", "status_class", "error_source", "model", "upstream"],
        );
        let turns_per_session = turns_per_session_gauge(&r);
        let turn = TurnSeries::register(&r);
        // Exported from the first scrape: a model's own series appear with its first turn, and
        // a request that names no model is counted as `unknown`.
        turn.streams_without_usage
            .with_label_values(&["unknown", Route::Api(tokentap_core::api::Api::Chat).label()]);
        let chunk_processing = chunk_processing_histogram(&r);
        Metrics {
            requests: req,
            requests_seen: counter(&r, REQUESTS_SEEN_TOTAL, "Requests accepted by the proxy"),
            in_flight: gauge(&r, names::IN_FLIGHT, "Requests in flight"),
            records_written: counter(&r, RECORDS_WRITTEN_TOTAL, "Records written"),
            records_dropped: counter(
                &r,
                RECORDS_DROPPED_TOTAL,
                "Records lost because the writer channel was full",
            ),
            records_failed: counter(
                &r,
                RECORDS_FAILED_TOTAL,
                "Records lost to a write error (disk full, read-only, I/O error)",
            ),
            session_evictions: counter(
                &r,
                names::SESSION_EVICTIONS_TOTAL,
                "Sessions evicted from the table (TTL or size)",
            ),
            session_ids_unusual: counter_vec_from_zero(
                &r,
                SESSION_IDS_UNUSUAL_TOTAL,
                "Session ids taken from non-ASCII UTF-8, percent-encoded from non-UTF-8 bytes, or cut to --max-session-id-bytes",
                "kind",
                &SESSION_ID_KINDS,
            ),
            connections_closed: counter_vec_from_zero(
                &r,
                CONNECTIONS_CLOSED_TOTAL,
                "Client connections closed before a request: no byte (header_timeout) or no TLS handshake (tls_timeout) within --header-timeout, or over --max-connections (over_limit)",
                "reason",
                &CLOSE_REASONS,
            ),
            sessions_active: gauge(&r, names::ACTIVE_SESSIONS, "Sessions in the table"),
            turns_per_session,
            upstream_requests: counter_vec(
                &r,
                names::UPSTREAM_REQUESTS_TOTAL,
                "Requests sent to each upstream",
                &["upstream"],
            ),
            upstream_errors: counter_vec(
                &r,
                names::UPSTREAM_ERRORS_TOTAL,
                "Upstream failures by upstream and kind",
                &["upstream", "kind"],
            ),
            malformed_events: counter(
                &r,
                MALFORMED_EVENTS_TOTAL,
                "SSE events whose data was not valid JSON (passed through untouched)",
            ),
            usage_injected: counter(
                &r,
                USAGE_INJECTED_TOTAL,
                "Requests whose stream_options the proxy extended (--inject-usage)",
            ),
            turn,
            chunk_processing,
            models: Mutex::new(ModelCap::new(cap)),
            registry: r,
        }
    }

    /// The capped `model` label value of `model`. No allocation once the model is known.
    pub fn model_label<'a>(&self, model: Option<&'a str>) -> &'a str {
        let Some(model) = model else {
            return "unknown";
        };
        self.models.lock().label(model)
    }

    /// Everything observed from a finished record, once per request. `llm`: the route is a
    /// completion route (latency and tokens are observed only for those).
    pub fn observe_turn(&self, rec: &TurnRecord, route: &str, llm: bool) {
        let model = self.model_label(rec.model.as_deref());
        let source = rec.error.as_ref().map_or("none", |e| e.source.as_str());
        self.requests
            .with_label_values(&[
                route,
                status_class(rec.http_status),
                source,
                model,
                rec.upstream.as_deref().unwrap_or("none"),
            ])
            .inc();
        let ms = &rec.measured;
        if ms.malformed_events > 0 {
            self.malformed_events.inc_by(ms.malformed_events as u64);
        }
        if !llm {
            return;
        }
        self.turn
            .observe(ms, model, route, rec.stream == Some(true));
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16384);
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// A registry of the proxy's own, every series in it labelled `source="wire"`.
fn wire_registry() -> Registry {
    let consts = HashMap::from([("source".to_string(), labels::SOURCE_WIRE.to_string())]);
    Registry::new_custom(None, Some(consts)).unwrap_or_else(|_| Registry::new())
}

/// A counter vector with one label whose every value in `values` is exported from the start
/// (at 0).
fn counter_vec_from_zero(
    r: &Registry,
    name: &str,
    help: &str,
    label: &str,
    values: &[&str],
) -> IntCounterVec {
    let v = counter_vec(r, name, help, &[label]);
    for k in values {
        v.with_label_values(&[k]);
    }
    v
}

/// `turns_per_session`, registered in `r` (set at scrape time).
fn turns_per_session_gauge(r: &Registry) -> Gauge {
    let g = Gauge::new(
        names::TURNS_PER_SESSION,
        "Mean turns started per session in the session table",
    )
    .expect("static metric");
    r.register(Box::new(g.clone())).expect("distinct metric");
    g
}

/// `chunk_processing`, registered in `r`: the proxy's own time per sampled chunk.
fn chunk_processing_histogram(r: &Registry) -> Histogram {
    let h = Histogram::with_opts(
        HistogramOpts::new(
            names::PROXY_CHUNK_PROCESSING_SECONDS,
            "The proxy's own work per response chunk (sampled, 1 in 8)",
        )
        .buckets(buckets::CHUNK_PROCESSING.to_vec()),
    )
    .expect("static metric");
    r.register(Box::new(h.clone())).expect("distinct metric");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokentap_core::clock::Anchor;
    use tokentap_core::record::Origin;
    use tokentap_core::timeline::ChunkStamp;

    fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
    }

    /// Every counter a dashboard queries is in the first scrape, before any request.
    #[test]
    fn the_first_scrape_has_streams_without_usage() {
        let text = String::from_utf8(Metrics::new().render()).unwrap();
        assert!(
            text.contains(
                "tokentap_streams_without_usage_total{model=\"unknown\",route=\"/v1/chat/completions\",source=\"wire\"} 0"
            ),
            "{text}"
        );
    }

    /// The README's list of per-turn series and their labels is what the proxy exports: every
    /// name, each series labelled by model and route (so each API's turns are timed apart).
    #[test]
    fn the_documented_turn_labels_are_the_exported_ones() {
        let readme = include_str!("../README.md");
        let labels = format!("`{{{}}}`", tokentap_core::metrics::TURN_LABELS.join(","));
        assert!(readme.contains(&labels), "README lacks {labels}");
        let m = Metrics::new();
        let mut r = TurnRecord::new(Origin::Proxy, Anchor::default());
        r.model = Some("m".into());
        r.stream = Some(true);
        r.measured.ttfb_ns = Some(1_000_000);
        r.measured.ttft_ns = Some(2_000_000);
        r.measured.e2e_ns = Some(9_000_000);
        r.measured.tpot_ns = Some(1_000_000);
        r.measured.prompt_tokens = Some(10);
        r.measured.cached_tokens = Some(4);
        r.measured.output_tokens = Some(3);
        r.measured.reasoning_tokens = Some(1);
        m.observe_turn(
            &r,
            Route::Api(tokentap_core::api::Api::Responses).label(),
            true,
        );
        let text = String::from_utf8(m.render()).unwrap();
        // The names as TurnSeries registers them.
        let r = prometheus::Registry::new();
        TurnSeries::register(&r)
            .preset("m", Route::Api(tokentap_core::api::Api::Responses).label());
        let names: Vec<String> = r.gather().iter().map(|f| f.name().to_string()).collect();
        assert_eq!(names.len(), 13, "{names:?}");
        for name in &names {
            assert!(readme.contains(&format!("`{name}`")), "README lacks {name}");
            let series: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with(name) && l.contains("model=\"m\""))
                .collect();
            assert!(!series.is_empty(), "{name} not exported:\n{text}");
            for l in series {
                assert!(l.contains("route=\"/v1/responses\""), "{l}");
            }
        }
    }

    #[test]
    fn itl_is_weighted_by_tokens_and_models_are_capped() {
        let m = Metrics::with_model_cap(1);
        let mut r = TurnRecord::new(Origin::Proxy, Anchor::default());
        r.model = Some("a".into());
        r.stream = Some(true);
        r.http_status = Some(200);
        r.upstream = Some("u0".into());
        r.measured.ttft_ns = Some(10_000_000);
        // First text chunk (1 token, no ITL), then 3 tokens after 30 ms: 3 samples of 10 ms.
        r.measured.chunks = vec![
            ChunkStamp {
                at_ns: 10_000_000,
                tokens: 1,
                text: true,
            },
            ChunkStamp {
                at_ns: 40_000_000,
                tokens: 3,
                text: true,
            },
        ];
        r.measured.prompt_tokens = Some(100);
        r.measured.cached_tokens = Some(64);
        m.observe_turn(&r, "/v1/chat/completions", true);
        r.model = Some("b".into());
        m.observe_turn(&r, "/v1/responses", true);
        let text = String::from_utf8(m.render()).unwrap();
        assert_eq!(
            line(
                &text,
                "tokentap_itl_seconds_count{model=\"a\",route=\"/v1/chat/completions\",source=\"wire\"}"
            ),
            "tokentap_itl_seconds_count{model=\"a\",route=\"/v1/chat/completions\",source=\"wire\"} 3"
        );
        assert!(
            text.contains("tokentap_itl_seconds_bucket{model=\"a\",route=\"/v1/chat/completions\",source=\"wire\",le=\"0.01\"} 3")
        );
        assert!(text.contains("tokentap_inter_chunk_seconds_count{model=\"a\",route=\"/v1/chat/completions\",source=\"wire\"} 1"));
        assert!(text.contains("tokentap_cached_tokens_total{model=\"a\",route=\"/v1/chat/completions\",source=\"wire\"} 64"));
        // The second model is over the cap of 1.
        assert!(text.contains("tokentap_ttft_seconds_count{model=\"other\",route=\"/v1/responses\",source=\"wire\"} 1"));
        assert!(line(&text, "tokentap_requests_total{").contains("upstream=\"u0\""));
        assert!(!text.contains("model=\"b\""));
    }
}
