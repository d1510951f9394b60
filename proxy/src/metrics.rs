//! The proxy's Prometheus metrics, on a registry of its own (never the global one), served by
//! the admin listener at `/metrics`.
//!
//! Nothing here is touched per chunk: counters are resolved and bumped once per request, when
//! its record is finished; latency histograms are observed at the same moment from the
//! finished timeline. No session id, ever, as a label; `upstream` is bounded by the configured
//! list, `route` by the fixed set in [`crate::service::Route`]. Buckets follow SPEC §8.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const ITL_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.004, 0.006, 0.008, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];

fn e2e_buckets() -> Vec<f64> {
    let mut v: Vec<f64> = (0..14).map(|i| 0.01 * f64::powi(2.0, i)).collect(); // 0.01 … 81.92
    v.extend([160.0, 320.0, 640.0, 1280.0, 2560.0, 7680.0]);
    v
}

/// Every metric the proxy exports.
#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    /// `tokentap_proxy_requests_total{route,status_class,error_source}`.
    pub requests: IntCounterVec,
    /// Requests accepted by the service (the "seen" side of records written == requests seen).
    pub requests_seen: IntCounter,
    pub in_flight: IntGauge,
    pub records_written: IntCounter,
    pub records_dropped: IntCounter,
    pub session_evictions: IntCounter,
    pub sessions_active: IntGauge,
    /// `tokentap_proxy_upstream_errors_total{upstream,kind}`: refused, reset, timed out.
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
        let registry = Registry::new_custom(Some("tokentap_proxy".into()), None)
            .unwrap_or_else(|_| Registry::new());
        // Invariant for every `expect` below: names and label sets are static and distinct, so
        // creation and registration cannot fail.
        let requests = IntCounterVec::new(
            Opts::new(
                "requests_total",
                "Requests finished, by route, status class and error source",
            ),
            &["route", "status_class", "error_source"],
        )
        .expect("static metric");
        let requests_seen =
            IntCounter::new("requests_seen_total", "Requests accepted by the proxy")
                .expect("static metric");
        let in_flight =
            IntGauge::new("in_flight_requests", "Requests in flight").expect("static metric");
        let records_written =
            IntCounter::new("records_written_total", "Records written").expect("static metric");
        let records_dropped = IntCounter::new(
            "records_dropped_total",
            "Records lost because the writer channel was full",
        )
        .expect("static metric");
        let session_evictions = IntCounter::new(
            "session_evictions_total",
            "Sessions evicted from the table (TTL or size)",
        )
        .expect("static metric");
        let sessions_active =
            IntGauge::new("sessions_active", "Sessions in the table").expect("static metric");
        let upstream_errors = IntCounterVec::new(
            Opts::new(
                "upstream_errors_total",
                "Upstream failures by upstream and kind",
            ),
            &["upstream", "kind"],
        )
        .expect("static metric");
        let malformed_events = IntCounter::new(
            "malformed_events_total",
            "SSE events whose data was not valid JSON (passed through untouched)",
        )
        .expect("static metric");
        let usage_injected = IntCounter::new(
            "usage_injected_total",
            "Requests whose stream_options the proxy extended (--inject-usage)",
        )
        .expect("static metric");
        let ttft = HistogramVec::new(
            HistogramOpts::new("time_to_first_token_seconds", "TTFT seen at the proxy")
                .buckets(TTFT_BUCKETS.to_vec()),
            &["route"],
        )
        .expect("static metric");
        let e2e = HistogramVec::new(
            HistogramOpts::new(
                "e2e_request_latency_seconds",
                "First request byte to last response byte",
            )
            .buckets(e2e_buckets()),
            &["route"],
        )
        .expect("static metric");
        let itl = Histogram::with_opts(
            HistogramOpts::new("inter_token_latency_seconds", "ITL per token (SPEC §7)")
                .buckets(ITL_BUCKETS.to_vec()),
        )
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
