//! The request path: one call of [`handle`] per client request.
//!
//! ```text
//!  request ─► Tap::new (record start, seen += 1) ─► limits (431/413) ─► session + turn index
//!          ─► hop-by-hop headers out ─► body: RequestTap (streamed) or rewritten (--inject-usage)
//!          ─► replicas in ranking order: connect refused → next; timeout → 504; reset → 502
//!             (http:// → direct::exchange, https:// and h2c:// → hyper-util's client)
//!          ─► response head: hop-by-hop out ─► MeteredBody(upstream body, Tap) ─► client
//! ```
//!
//! The record's start is the moment hyper hands the parsed request head to this function: the
//! first request byte arrived a parse earlier (a few µs for a normal head), and on a keep-alive
//! connection hyper reads the next head as soon as it arrives, so that is the proxy's closest
//! observable instant to "first byte in".

use crate::config::UpstreamClient;
use crate::direct;
use crate::error::{chain, ProxyError};
use crate::headers::{head_size, is_secret, strip_hop_by_hop};
use crate::inject::{self, Stripper};
use crate::meter::{MeteredBody, ProxyBody, Tap, UpstreamBody};
use crate::sniff::{ReqCell, ReqInfo, RequestTap};
use crate::upstream::{UpBody, Upstream};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, Uri, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokentap_core::clock::{self, Anchor};
use tokio::sync::oneshot;

pub use crate::route::Route;
pub use crate::shared::Shared;

/// The first configured session header present on the request, as the session id. Header
/// values are bytes: visible ASCII is taken as it is, other valid UTF-8 too (byte-exact), and
/// bytes that are not UTF-8 are percent-encoded (`%XX`, so the id stays byte-exact and
/// printable). Never silent: the returned [`SessionIdNote`] says which, for a counter.
pub fn session_of(
    names: &[header::HeaderName],
    h: &HeaderMap,
) -> Option<(String, Option<SessionIdNote>)> {
    let v = names.iter().find_map(|n| h.get(n))?.as_bytes();
    if v.is_empty() {
        return None;
    }
    if let Ok(s) = std::str::from_utf8(v) {
        let note = (!s.is_ascii()).then_some(SessionIdNote::NonAscii);
        return Some((s.to_string(), note));
    }
    let mut out = String::with_capacity(v.len() * 2);
    for chunk in v.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Some((out, Some(SessionIdNote::NonUtf8)))
}

/// How a session id was taken from its header, when not as plain ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionIdNote {
    /// UTF-8 beyond ASCII: kept byte-exact.
    NonAscii,
    /// Not UTF-8: the invalid bytes percent-encoded.
    NonUtf8,
}

impl SessionIdNote {
    pub fn label(self) -> &'static str {
        match self {
            SessionIdNote::NonAscii => "non_ascii",
            SessionIdNote::NonUtf8 => "non_utf8",
        }
    }
}

/// The request body as it stands between attempts.
enum Src {
    /// The client's body, not read yet.
    Stream(Incoming),
    /// A body already in memory (read for --inject-usage), re-sendable.
    Buffered(Bytes),
    /// The body was consumed by a failed attempt (cannot retry).
    Gone,
}

/// How sending to one replica failed (before a response head).
enum Sent {
    /// No connection: the next replica may take the request.
    Connect(String),
    /// No response head within `--upstream-timeout`.
    Timeout,
    /// Anything else: the request is answered with an error.
    Failed(String),
}

/// Sends the request to one replica and waits for the response head: plain `http://` through
/// the direct HTTP/1.1 client (unless `--upstream-client hyper`), the rest through hyper-util's.
async fn send(
    shared: &Shared,
    up: &Upstream,
    method: &Method,
    uri: Uri,
    headers: &HeaderMap,
    body: UpBody,
) -> Result<Response<UpstreamBody>, Sent> {
    let cfg = &shared.cfg;
    if up.plain_h1() && cfg.upstream_client == UpstreamClient::Direct {
        let out = direct::Outgoing {
            method,
            path: uri.path_and_query().map_or("/", |p| p.as_str()),
            headers,
            body,
            connect_timeout: cfg.connect_timeout,
            keepalive: cfg.upstream_keepalive,
        };
        let r = match tokio::time::timeout(cfg.upstream_timeout, direct::exchange(up, out)).await {
            Ok(Ok(r)) => r,
            Ok(Err(direct::ExchangeError::Connect(e))) => return Err(Sent::Connect(e.to_string())),
            Ok(Err(e)) => return Err(Sent::Failed(e.to_string())),
            Err(_elapsed) => return Err(Sent::Timeout),
        };
        if r.resent {
            shared
                .metrics
                .upstream_errors
                .with_label_values(&[&up.name, "stale_connection"])
                .inc();
        }
        let mut resp = Response::new(UpstreamBody::Direct(r.body));
        *resp.status_mut() = r.status;
        *resp.headers_mut() = r.headers;
        return Ok(resp);
    }
    let mut up_req = Request::new(body);
    *up_req.method_mut() = method.clone();
    *up_req.uri_mut() = uri;
    *up_req.version_mut() = Version::HTTP_11;
    *up_req.headers_mut() = headers.clone();
    let client = if up.h2_prior {
        &shared.clients.h2
    } else {
        &shared.clients.auto
    };
    match tokio::time::timeout(cfg.upstream_timeout, client.request(up_req)).await {
        Ok(Ok(resp)) => Ok(resp.map(UpstreamBody::Hyper)),
        Ok(Err(e)) if e.is_connect() => Err(Sent::Connect(chain(&e))),
        Ok(Err(e)) => Err(Sent::Failed(chain(&e))),
        Err(_elapsed) => Err(Sent::Timeout),
    }
}

/// Serves one client request.
pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let anchor = Anchor::now();
    shared.seen.fetch_add(1, Ordering::Relaxed);
    shared.metrics.requests_seen.inc();
    let route = Route::of(req.uri().path());
    let mut tap = Tap::new(shared.clone(), anchor, route);
    let cfg = &shared.cfg;
    let session = session_of(&cfg.session_headers, req.headers()).map(|(id, note)| {
        let unusual = |kind: &str| {
            shared
                .metrics
                .session_ids_unusual
                .with_label_values(&[kind])
                .inc()
        };
        if let Some(n) = note {
            unusual(n.label());
        }
        let (id, cut) = crate::sessions::cap_id(id, cfg.max_session_id_bytes);
        if cut {
            unusual("too_long");
        }
        id
    });
    {
        let rec = tap.record_mut();
        if route == Route::Other {
            rec.route = Some(req.uri().path().to_string());
        }
        if req.version() == Version::HTTP_2 {
            rec.http_version = Some("2".into());
        }
        for name in &cfg.record_headers {
            if is_secret(name.as_str()) {
                continue;
            }
            if let Some(v) = req.headers().get(name).and_then(|v| v.to_str().ok()) {
                rec.headers.insert(name.as_str().to_string(), v.to_string());
            }
        }
        if let Some(s) = &session {
            if route.is_llm() {
                rec.turn_index = shared.sessions.start_turn(s);
            }
            rec.conversation_id = Some(s.clone());
        }
    }

    // RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host (h2 carries `:authority`).
    if req.version() == Version::HTTP_11 {
        let hosts = req.headers().get_all(header::HOST).iter().count();
        if hosts != 1 {
            return Ok(reject(
                &mut tap,
                ProxyError::BadHost(if hosts == 0 {
                    "an HTTP/1.1 request needs a Host header (RFC 9112 §3.2)".into()
                } else {
                    format!(
                        "{hosts} Host headers; an HTTP/1.1 request has exactly one (RFC 9112 §3.2)"
                    )
                }),
            ));
        }
    }
    if req.method() == Method::CONNECT {
        return Ok(reject(
            &mut tap,
            ProxyError::MethodNotAllowed(req.method().to_string()),
        ));
    }
    let head = head_size(req.method(), req.uri(), req.headers());
    if head > cfg.max_header_bytes {
        return Ok(reject(
            &mut tap,
            ProxyError::HeadersTooLarge {
                got: head,
                limit: cfg.max_header_bytes,
            },
        ));
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cfg.max_body_bytes) {
        return Ok(reject(
            &mut tap,
            ProxyError::BodyTooLarge {
                limit: cfg.max_body_bytes,
            },
        ));
    }

    let (parts, body) = req.into_parts();
    let mut headers = parts.headers;
    strip_hop_by_hop(&mut headers);
    if !cfg.preserve_host {
        headers.remove(header::HOST);
    } else if !headers.contains_key(header::HOST) {
        // An h2 client sends `:authority`, not `Host`: carry it over for an h1 upstream.
        if let Some(a) = parts
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        {
            headers.insert(header::HOST, a);
        }
    }
    if cfg.via {
        headers.append(header::VIA, HeaderValue::from_static("1.1 tokentap"));
    }

    let cell = Arc::new(ReqCell::default());
    tap.set_cell(cell.clone());
    let mut plan = None;
    let mut src = if cfg.inject_usage && route.is_llm() {
        match read_limited(body, cfg.max_body_bytes).await {
            Ok(b) => {
                let mut info = ReqInfo::parse(&b).unwrap_or_default();
                info.bytes = b.len() as u64;
                let _ = cell.info.set(info);
                if shared.keep_bodies() {
                    let _ = cell.content.set(b.clone());
                }
                match inject::rewrite_request(&b, cfg.inject_continuous_usage) {
                    Some((nb, p)) => {
                        plan = Some(p);
                        tap.record_mut().usage_injected = Some(true);
                        shared.metrics.usage_injected.inc();
                        headers.remove(header::CONTENT_LENGTH);
                        Src::Buffered(nb)
                    }
                    None => Src::Buffered(b),
                }
            }
            Err(e) => return Ok(reject(&mut tap, e)),
        }
    } else {
        Src::Stream(body)
    };
    if plan.is_none() && cfg.inject_usage && route.is_llm() {
        tap.record_mut().usage_injected = Some(false);
    }

    let ranking = shared.upstreams.ranking(session.as_deref());
    let mut refused: Vec<String> = Vec::new();
    for idx in ranking {
        let up = &shared.upstreams.list[idx];
        let uri = match up.uri_for(parts.uri.path_and_query()) {
            Ok(u) => u,
            Err(e) => return Ok(reject(&mut tap, ProxyError::Internal(e.to_string()))),
        };
        let (giveback_tx, mut giveback_rx) = oneshot::channel();
        let body = match std::mem::replace(&mut src, Src::Gone) {
            Src::Stream(inc) => UpBody::Tap(RequestTap::new(
                inc,
                giveback_tx,
                cell.clone(),
                cfg.sniff_limit,
                cfg.max_body_bytes,
                shared.keep_bodies(),
                cfg.body_timeout,
            )),
            Src::Buffered(b) => {
                src = Src::Buffered(b.clone());
                UpBody::Full(Full::new(b))
            }
            Src::Gone => break,
        };
        // A connection slot of the replica, waiting in line when every one is in use.
        let slot = match up.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let waited = clock::now();
                match tokio::time::timeout(
                    cfg.upstream_queue_timeout,
                    up.slots.clone().acquire_owned(),
                )
                .await
                {
                    Ok(Ok(p)) => p,
                    _ => {
                        shared
                            .metrics
                            .upstream_errors
                            .with_label_values(&[&up.name, "busy"])
                            .inc();
                        let e = ProxyError::UpstreamBusy {
                            upstream: up.name.clone(),
                            limit: cfg.max_upstream_connections,
                            waited_ms: clock::now().saturating_sub(waited) / 1_000_000,
                        };
                        tap.set_upstream(None);
                        return Ok(reject(&mut tap, e));
                    }
                }
            }
        };
        tap.hold_slot(Some(slot));
        up.in_flight.fetch_add(1, Ordering::AcqRel);
        shared
            .metrics
            .upstream_requests
            .with_label_values(&[&up.name])
            .inc();
        tap.set_upstream(Some(idx));
        tap.forwarded(clock::now());
        let sent = send(&shared, up, &parts.method, uri, &headers, body).await;
        match sent {
            Ok(resp) => return Ok(respond(tap, resp, plan)),
            Err(Sent::Connect(why)) => {
                up.in_flight.fetch_sub(1, Ordering::AcqRel);
                tap.set_upstream(None);
                tap.hold_slot(None);
                shared
                    .metrics
                    .upstream_errors
                    .with_label_values(&[&up.name, "connect"])
                    .inc();
                refused.push(format!("{}: {why}", up.name));
                if let Ok(inc) = giveback_rx.try_recv() {
                    src = Src::Stream(inc);
                }
                continue;
            }
            Err(Sent::Failed(why)) => {
                let err = if cell.too_large.load(Ordering::Relaxed) {
                    ProxyError::BodyTooLarge {
                        limit: cfg.max_body_bytes,
                    }
                } else if cell.stalled.load(Ordering::Relaxed) {
                    ProxyError::BodyTimeout(cfg.body_timeout.as_millis() as u64)
                } else if cell.client_error.load(Ordering::Relaxed) {
                    ProxyError::RequestBody(why)
                } else {
                    shared
                        .metrics
                        .upstream_errors
                        .with_label_values(&[&up.name, "reset"])
                        .inc();
                    ProxyError::Reset(why)
                };
                return Ok(reject(&mut tap, err));
            }
            Err(Sent::Timeout) => {
                shared
                    .metrics
                    .upstream_errors
                    .with_label_values(&[&up.name, "timeout"])
                    .inc();
                let ms = cfg.upstream_timeout.as_millis() as u64;
                return Ok(reject(&mut tap, ProxyError::Timeout(ms)));
            }
        }
    }
    let why = if refused.is_empty() {
        "request body already consumed".to_string()
    } else {
        refused.join("; ")
    };
    Ok(reject(&mut tap, ProxyError::Connect(why)))
}

/// Reads a whole body, failing above `limit` bytes.
async fn read_limited(body: Incoming, limit: u64) -> Result<Bytes, ProxyError> {
    match http_body_util::Limited::new(body, limit as usize)
        .collect()
        .await
    {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(ProxyError::BodyTooLarge { limit })
        }
        Err(e) => Err(ProxyError::RequestBody(chain(&*e))),
    }
}

/// The proxy answers itself: JSON error body, and the record is finished now.
fn reject(tap: &mut Tap, e: ProxyError) -> Response<ProxyBody> {
    tap.answered(e.status().as_u16(), e.turn_error(), e.record_status());
    let mut r = Response::new(ProxyBody::Full(Full::new(e.json_body())));
    *r.status_mut() = e.status();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if matches!(e, ProxyError::MethodNotAllowed(_)) {
        r.headers_mut().insert(
            header::ALLOW,
            HeaderValue::from_static("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
        );
    }
    // A request that breaks the protocol's rules ends its connection, as front-end servers do:
    // what follows on it cannot be trusted to be framed as the client meant.
    if matches!(e, ProxyError::MethodNotAllowed(_) | ProxyError::BadHost(_)) {
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// Wraps the upstream response for the client.
fn respond(
    mut tap: Tap,
    resp: Response<UpstreamBody>,
    plan: Option<inject::Plan>,
) -> Response<ProxyBody> {
    let t = clock::now();
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let ct = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let sse = ct.starts_with("text/event-stream");
    let json = ct.starts_with("application/json");
    tap.on_headers(t, parts.status.as_u16(), sse, json);
    let strip = match plan {
        Some(p) if sse && parts.status.is_success() => {
            parts.headers.remove(header::CONTENT_LENGTH);
            Some(Stripper::new(p))
        }
        _ => None,
    };
    if tap.via() {
        parts
            .headers
            .append(header::VIA, HeaderValue::from_static("1.1 tokentap"));
    }
    parts.version = Version::HTTP_11;
    let idle = tap.idle_timeout();
    Response::from_parts(
        parts,
        ProxyBody::Metered(MeteredBody::new(body, tap, strip).with_idle_timeout(idle)),
    )
}
