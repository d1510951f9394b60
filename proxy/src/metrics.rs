//! The proxy's Prometheus metrics, on a registry of its own (never the global one), served by
//! the admin listener at `/metrics`.
//!
//! Nothing here is touched per chunk: counters are resolved and bumped once per request, when
//! its record is finished; latency histograms are observed at the same moment from the
//! finished timeline. No session id, ever, as a label; `upstream` is bounded by the configured
//! list, `route` by the fixed set in [`crate::service::Route`]. Names, buckets (SPEC §8) and the
//! `source="wire"` label come from `tokentap_core::metrics`, shared with the replay client so one
//! dashboard query covers both views; proxy-only counters are named `tokentap_proxy_*`.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};
use tokentap_core::metrics::{buckets, labels, names};

/// Opts for a metric shared with the replay client: core's name, `source="wire"`.
fn wire(name: &str, help: &str) -> Opts {
    Opts::new(name, help).const_label("source", labels::SOURCE_WIRE)
}

fn wire_hist(name: &str, help: &str, b: &[f64]) -> HistogramOpts {
    HistogramOpts::new(name, help)
        .const_label("source", labels::SOURCE_WIRE)
        .buckets(b.to_vec())
}

/// Every metric the proxy exports.
#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    /// `tokentap_requests_total{source="wire",route,status_class,error_source}`.
    pub requests: IntCounterVec,
    /// Requests accepted by the service (the "seen" side of records written == requests seen).
    pub requests_seen: IntCounter,
    pub in_flight: IntGauge,
    pub records_written: IntCounter,
    pub records_dropped: IntCounter,
    pub session_evictions: IntCounter,
    pub sessions_active: IntGauge,
    /// `tokentap_upstream_errors_total{source="wire",upstream,kind}`: refused, reset, timed out.
    pub upstream_errors: IntCounterVec,
    pub malformed_events: IntCounter,
    pub usage_injected: IntCounter,
    pub ttft: HistogramVec,
    pub e2e: HistogramVec,
    pub itl: Histogram,
}

impl Metrics {
    /// Registers every metric in a fresh registry.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        // Invariant for every `expect` below: names and label sets are static and distinct, so
        // creation and registration cannot fail.
        let requests = IntCounterVec::new(
            wire(
                names::REQUESTS_TOTAL,
                "Requests finished, by route, status class and error source",
            ),
            &["route", "status_class", "error_source"],
        )
        .expect("static metric");
        let requests_seen = IntCounter::new(
            "tokentap_proxy_requests_seen_total",
            "Requests accepted by the proxy",
        )
        .expect("static metric");
        let in_flight = IntGauge::with_opts(wire(names::IN_FLIGHT, "Requests in flight"))
            .expect("static metric");
        let records_written =
            IntCounter::new("tokentap_proxy_records_written_total", "Records written")
                .expect("static metric");
        let records_dropped = IntCounter::new(
            "tokentap_proxy_records_dropped_total",
            "Records lost because the writer channel was full",
        )
        .expect("static metric");
        let session_evictions = IntCounter::with_opts(wire(
            names::SESSION_EVICTIONS_TOTAL,
            "Sessions evicted from the table (TTL or size)",
        ))
        .expect("static metric");
        let sessions_active =
            IntGauge::with_opts(wire(names::ACTIVE_SESSIONS, "Sessions in the table"))
                .expect("static metric");
        let upstream_errors = IntCounterVec::new(
            wire(
                names::UPSTREAM_ERRORS_TOTAL,
                "Upstream failures by upstream and kind",
            ),
            &["upstream", "kind"],
        )
        .expect("static metric");
        let malformed_events = IntCounter::new(
            "tokentap_proxy_malformed_events_total",
            "SSE events whose data was not valid JSON (passed through untouched)",
        )
        .expect("static metric");
        let usage_injected = IntCounter::new(
            "tokentap_proxy_usage_injected_total",
            "Requests whose stream_options the proxy extended (--inject-usage)",
        )
        .expect("static metric");
        let ttft = HistogramVec::new(
            wire_hist(names::TTFT_SECONDS, "TTFT seen at the proxy", buckets::TTFT),
            &["route"],
        )
        .expect("static metric");
        let e2e = HistogramVec::new(
            wire_hist(
                names::E2E_SECONDS,
                "First request byte to last response byte",
                buckets::E2E,
            ),
            &["route"],
        )
        .expect("static metric");
        let itl = Histogram::with_opts(wire_hist(
            names::ITL_SECONDS,
            "ITL per token (SPEC §7)",
            buckets::ITL,
        ))
        .expect("static metric");
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(requests_seen.clone()),
            Box::new(in_flight.clone()),
            Box::new(records_written.clone()),
            Box::new(records_dropped.clone()),
            Box::new(session_evictions.clone()),
            Box::new(sessions_active.clone()),
            Box::new(upstream_errors.clone()),
            Box::new(malformed_events.clone()),
            Box::new(usage_injected.clone()),
            Box::new(ttft.clone()),
            Box::new(e2e.clone()),
            Box::new(itl.clone()),
        ] {
            registry.register(c).expect("distinct static metrics");
        }
        Metrics {
            registry,
            requests,
            requests_seen,
            in_flight,
            records_written,
            records_dropped,
            session_evictions,
            sessions_active,
            upstream_errors,
            malformed_events,
            usage_injected,
            ttft,
            e2e,
            itl,
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8192);
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

pub use tokentap_core::metrics::status_class;
