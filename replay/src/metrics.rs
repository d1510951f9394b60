//! `tokentap replay --metrics ADDR`: the client's view, live, in Prometheus text at
//! `http://ADDR/metrics`. Same names, buckets and label rules as the proxy
//! ([`tokentap_core::metrics`], docs/benchmark.md#prometheus) with the constant label
//! `source="client"`, so a dashboard can put client and wire side by side.
//!
//! Cost: nothing here runs inside the timed part of a turn. A turn's histograms are observed in
//! [`ClientMetrics::turn_recorded`], called after the record is complete (every timestamp
//! already stamped), from the slot that just finished the turn: atomic histogram adds, plus a
//! label lookup per turn. Issue / delay / window state are gauge and counter bumps.
//!
//! Series: the shared latency histograms (`tokentap_ttft_seconds` …), token counters,
//! `tokentap_requests_total`, `tokentap_in_flight`, `tokentap_active_sessions` (conversations with
//! a trajectory in progress), `tokentap_turns_per_session` (mean turns issued per started
//! trajectory, a gauge), and the replay-only `tokentap_turns_total{event}` (issued, completed,
//! failed, aborted, cancelled), `tokentap_delay_queue` (conversations sleeping in an inter-turn
//! delay) and `tokentap_in_window` (1 while the performance window is open).

use crate::progress::Counters;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use prometheus::{Encoder, Gauge, IntCounterVec, IntGauge, Registry, TextEncoder};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tokentap_core::metrics::register::{counter_vec as counter, gauge};
use tokentap_core::metrics::{labels, names, status_class, ModelCap, TurnSeries};
use tokentap_core::record::{Status, TurnRecord};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The route of every replay request (its series' `route` label).
const CHAT_ROUTE: &str = tokentap_core::api::Api::Chat.as_str();

/// The client-side registry.
pub struct ClientMetrics {
    registry: Registry,
    requests: IntCounterVec,
    turns: IntCounterVec,
    /// `turns{event="issued"}`, resolved once: bumped per turn without a label lookup.
    issued: prometheus::IntCounter,
    in_flight: IntGauge,
    active: IntGauge,
    turns_per_session: Gauge,
    delay_queue: IntGauge,
    in_window: IntGauge,
    /// The per-turn series shared with the proxy (latency histograms, token counters).
    turn: TurnSeries,
    models: Mutex<ModelCap>,
}

// Invariant for the `expect`s in this file: names are static and distinct, so creation and
// registration cannot fail.

impl Default for ClientMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientMetrics {
    /// Exports the per-turn series of the run's model (`--model`) at 0 before the first turn.
    pub fn preset_model(&self, model: &str) {
        let mut cap = self.models.lock();
        self.turn.preset(cap.label(model), CHAT_ROUTE);
    }

    /// The client's metrics, registered on their own registry.
    pub fn new() -> ClientMetrics {
        let consts = HashMap::from([("source".to_string(), labels::SOURCE_CLIENT.to_string())]);
        let r = Registry::new_custom(None, Some(consts)).unwrap_or_else(|_| Registry::new());
        let turns_per_session = Gauge::new(
            names::TURNS_PER_SESSION,
            "Mean turns issued per started trajectory",
        )
        .expect("static metric");
        r.register(Box::new(turns_per_session.clone()))
            .expect("distinct metric");
        let in_window = gauge(
            &r,
            names::IN_WINDOW,
            "1 while the performance window is open",
        );
        in_window.set(1);
        let turns = counter(
            &r,
            names::TURNS_TOTAL,
            "Client turns by event: issued, completed, failed, aborted, cancelled",
            &["event"],
        );
        let issued = turns.with_label_values(&["issued"]);
        ClientMetrics {
            turns,
            issued,
            requests: counter(
                &r,
                names::REQUESTS_TOTAL,
                "Turns finished, by route, status class, error source, model and upstream",
                &["route", "status_class", "error_source", "model", "upstream"],
            ),
            in_flight: gauge(&r, names::IN_FLIGHT, "Turns in flight"),
            active: gauge(
                &r,
                names::ACTIVE_SESSIONS,
                "Conversations with a trajectory in progress",
            ),
            turns_per_session,
            delay_queue: gauge(
                &r,
                names::DELAY_QUEUE,
                "Conversations sleeping in an inter-turn delay",
            ),
            in_window,
            turn: TurnSeries::register(&r),
            models: Mutex::new(ModelCap::new(labels::MODEL_CAP)),
            registry: r,
        }
    }

    /// A turn is about to be sent.
    pub fn issued(&self) {
        self.issued.inc();
        self.in_flight.inc();
    }

    /// A conversation starts / ends an inter-turn delay.
    pub fn delay(&self, sleeping: bool) {
        if sleeping {
            self.delay_queue.inc();
        } else {
            self.delay_queue.dec();
        }
    }

    /// The performance window closed.
    pub fn window_closed(&self) {
        self.in_window.set(0);
    }

    /// A finished record (every timestamp already stamped).
    pub fn turn_recorded(&self, rec: &TurnRecord) {
        let event = match rec.status {
            Status::Ok => "completed",
            Status::Failed | Status::TimedOut => "failed",
            Status::Aborted => "aborted",
            Status::Cancelled => "cancelled",
        };
        self.turns.with_label_values(&[event]).inc();
        if rec.status == Status::Aborted {
            return; // never sent: no latency, not in flight
        }
        self.in_flight.dec();
        // No allocation once the model is known: the label borrows the record's string.
        let model: &str = match rec.model.as_deref() {
            Some(m) => self.models.lock().label(m),
            None => "unknown",
        };
        let source = rec.error.as_ref().map_or("none", |e| e.source.as_str());
        self.requests
            .with_label_values(&[
                rec.route.as_deref().unwrap_or("other"),
                status_class(rec.http_status),
                source,
                model,
                "none",
            ])
            .inc();
        // Every replay request streams.
        let route = rec.route.as_deref().unwrap_or(CHAT_ROUTE);
        self.turn.observe(&rec.measured, model, route, true);
    }

    /// The text exposition; scrape-time gauges are refreshed from `counters` first.
    pub fn render(&self, counters: &Counters) -> Vec<u8> {
        self.active.set(counters.active() as i64);
        let started = counters.trajectories_started.load(Relaxed);
        let issued = self.issued.get();
        self.turns_per_session.set(if started == 0 {
            0.0
        } else {
            issued as f64 / started as f64
        });
        let mut out = Vec::with_capacity(16384);
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

pub use tokentap_run::config::parse_addr;

/// Serves `/metrics` on `listener` until `stop` fires. Every accepted socket gets TCP_NODELAY.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<ClientMetrics>,
    counters: Arc<Counters>,
    stop: CancellationToken,
) {
    loop {
        let (sock, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("--metrics accept: {e}");
                    continue;
                }
            },
            _ = stop.cancelled() => return,
        };
        let _ = sock.set_nodelay(true);
        let (m, c) = (metrics.clone(), counters.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let (m, c) = (m.clone(), c.clone());
                async move {
                    let resp = if req.uri().path() == "/metrics" {
                        let mut r = Response::new(Full::new(Bytes::from(m.render(&c))));
                        r.headers_mut().insert(
                            hyper::header::CONTENT_TYPE,
                            hyper::header::HeaderValue::from_static(
                                "text/plain; version=0.0.4; charset=utf-8",
                            ),
                        );
                        r
                    } else {
                        let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")));
                        *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                        r
                    };
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(sock), svc)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokentap_core::clock::Anchor;
    use tokentap_core::record::Origin;

    #[test]
    fn bare_port_is_loopback() {
        assert_eq!(parse_addr("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(parse_addr("0.0.0.0:1").unwrap().to_string(), "0.0.0.0:1");
        assert!(parse_addr("nope").is_err());
    }

    #[test]
    fn a_turn_shows_up_with_source_client() {
        let m = ClientMetrics::new();
        m.issued();
        let mut r = TurnRecord::new(Origin::Replay, Anchor::default());
        r.model = Some("m".into());
        r.http_status = Some(200);
        r.measured.ttft_ns = Some(5_000_000);
        m.turn_recorded(&r);
        let text = String::from_utf8(m.render(&Counters::default())).unwrap();
        assert!(
            text.contains("tokentap_ttft_seconds_count{model=\"m\",route=\"/v1/chat/completions\",source=\"client\"} 1"),
            "{text}"
        );
        assert!(text.contains("tokentap_turns_total{event=\"completed\",source=\"client\"} 1"));
        assert!(text.contains("tokentap_in_flight{source=\"client\"} 0"));
    }

    #[test]
    fn the_runs_model_is_exported_at_zero_before_its_first_turn() {
        let m = ClientMetrics::new();
        m.preset_model("m");
        let text = String::from_utf8(m.render(&Counters::default())).unwrap();
        for n in [
            "tokentap_streams_without_usage_total{model=\"m\",route=\"/v1/chat/completions\",source=\"client\"} 0",
            "tokentap_output_tokens_total{model=\"m\",route=\"/v1/chat/completions\",source=\"client\"} 0",
            "tokentap_ttft_seconds_count{model=\"m\",route=\"/v1/chat/completions\",source=\"client\"} 0",
        ] {
            assert!(text.contains(n), "{n} missing:\n{text}");
        }
    }
}
