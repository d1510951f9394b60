//! The admin listener: `GET /health`, `GET /metrics` (Prometheus text), `GET /sessions` and
//! `GET /sessions/{id}` (JSON). Separate from the proxied port so that scraping and inspection
//! never mix with measured traffic, and loopback-only unless `--admin` says otherwise: session
//! ids and per-turn timings are not for the world.

use crate::service::Shared;
use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub async fn handle(
    shared: Arc<Shared>,
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
        "/health" => json(StatusCode::OK, &health(&shared)),
        "/metrics" => {
            sync_counters(&shared);
            let mut r = Response::new(Full::new(Bytes::from(shared.metrics.render())));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            r
        }
        "/sessions" => json(StatusCode::OK, &shared.sessions.list()),
        p if p.starts_with("/sessions/") => {
            let id = percent_decode(&p["/sessions/".len()..]);
            match shared.sessions.detail(&id) {
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

/// `{"status": "ok"}`, or `"degraded"` once a record was lost (dropped or not written), with
/// the counts and the last write error. Still 200: the proxy serves traffic; what it lost is
/// said, and an orchestrator's probe does not restart it into losing more.
fn health(s: &Shared) -> serde_json::Value {
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
fn sync_counters(s: &Shared) {
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
    // O(sessions) per scrape (one brief per session); the table is bounded by --max-sessions.
    let list = s.sessions.list();
    m.sessions_active.set(list.len() as i64);
    let turns: u64 = list.iter().map(|b| u64::from(b.turns)).sum();
    m.turns_per_session.set(if list.is_empty() {
        0.0
    } else {
        turns as f64 / list.len() as f64
    });
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
/// spaces).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
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
