//! The admin listener: `GET /health`, `GET /metrics` (Prometheus text), `GET /sessions` and
//! `GET /sessions/{id}` (JSON). Separate from the proxied port so that scraping and inspection
//! never mix with measured traffic, and loopback-only unless `--admin` says otherwise: session
//! ids and per-turn timings are not for the world.

use crate::ledger::Ledger;
use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Answers one admin request: `/health`, `/metrics`, `/sessions`, `/sessions/{id}`.
pub async fn handle(
    ledger: Arc<Ledger>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::GET {
        return Ok(json(
            StatusCode::METHOD_NOT_ALLOWED,
            &serde_json::json!({"error": "GET only"}),
        ));
    }
    let path = req.uri().path();
    Ok(match path {
        "/health" => json(StatusCode::OK, &health(&ledger)),
        "/metrics" => {
            sync_counters(&ledger);
            let mut r = Response::new(Full::new(Bytes::from(ledger.metrics.render())));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            r
        }
        "/sessions" => sessions_page(&ledger, req.uri().query().unwrap_or("")),
        p if p.starts_with("/sessions/") => {
            let id = percent_decode(&p["/sessions/".len()..]);
            match ledger.sessions.detail(&id) {
                Some(d) => json(StatusCode::OK, &d),
                None => json(
                    StatusCode::NOT_FOUND,
                    &serde_json::json!({"error": "no such session"}),
                ),
            }
        }
        _ => json(
            StatusCode::NOT_FOUND,
            &serde_json::json!({"error": "not found"}),
        ),
    })
}

/// `GET /sessions?limit=N&after=ID`: at most `limit` sessions (default 1000, at most
/// 10,000) in id order after `ID`; `x-next-after` names the id to continue after when more
/// remain (absent on the last page).
fn sessions_page(ledger: &Ledger, query: &str) -> Response<Full<Bytes>> {
    let mut limit = 1000;
    let mut after = None;
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "limit" => match v.parse() {
                Ok(n) => limit = n,
                Err(_) => {
                    return json(
                        StatusCode::BAD_REQUEST,
                        &serde_json::json!({"error": format!("limit={v:?}: expected a count")}),
                    )
                }
            },
            "after" => after = Some(percent_decode(v)),
            _ => {}
        }
    }
    let (page, next) = ledger.sessions.page(after.as_deref(), limit);
    let mut r = json(StatusCode::OK, &page);
    if let Some(n) = next.and_then(|n| header::HeaderValue::from_str(&percent_encode(&n)).ok()) {
        r.headers_mut().insert("x-next-after", n);
    }
    r
}

/// Everything but RFC 3986's unreserved characters is encoded (for a header or a query value).
const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes everything but unreserved characters (for a header or a query value).
fn percent_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, NOT_UNRESERVED).to_string()
}

/// `{"status": "ok"}`, or `"degraded"` once a record was lost (dropped or not written), with
/// the counts and the last write error. Still 200: the proxy serves traffic; what it lost is
/// said, and an orchestrator's probe does not restart it into losing more.
fn health(s: &Ledger) -> serde_json::Value {
    let c = &s.writer.counts;
    if c.lost() == 0 {
        return serde_json::json!({"status": "ok"});
    }
    serde_json::json!({
        "status": "degraded",
        "records_dropped": c.dropped.load(Ordering::Relaxed),
        "records_failed": c.failed.load(Ordering::Relaxed),
        "last_error": c.last_error(),
    })
}

/// Brings counters kept outside the registry (atomics owned by the writer and the session table)
/// up to date before a scrape.
fn sync_counters(s: &Ledger) {
    let m = &s.metrics;
    let bump = |c: &prometheus::IntCounter, v: u64| {
        let have = c.get();
        if v > have {
            c.inc_by(v - have);
        }
    };
    bump(
        &m.records_written,
        s.writer.counts.written.load(Ordering::Relaxed),
    );
    bump(
        &m.records_dropped,
        s.writer.counts.dropped.load(Ordering::Relaxed),
    );
    bump(
        &m.records_failed,
        s.writer.counts.failed.load(Ordering::Relaxed),
    );
    bump(
        &m.session_evictions,
        s.sessions.evictions.load(Ordering::Relaxed),
    );
    // O(sessions) per scrape, no id copied; the table is bounded by count and bytes.
    let (n, turns) = s.sessions.stats();
    m.sessions_active.set(n as i64);
    m.turns_per_session
        .set(if n == 0 { 0.0 } else { turns as f64 / n as f64 });
}

fn json<T: serde::Serialize + ?Sized>(status: StatusCode, v: &T) -> Response<Full<Bytes>> {
    let body = serde_json::to_vec(v).unwrap_or_else(|_| b"{}".to_vec());
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// `%XX` decoding for session ids in the path (ids are printable ASCII, but may hold `/` or
/// spaces); a `%` not followed by two hex digits stays as it is.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn percent_decoding() {
        assert_eq!(super::percent_decode("a%2Fb%20c"), "a/b c");
        assert_eq!(super::percent_decode("100%"), "100%");
        assert_eq!(super::percent_decode("x%4"), "x%4");
    }
}
