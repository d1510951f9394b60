//! The request path: one call of [`handle`] per client request.
//!
//! ```text
//!  request ─► Tap::new (record start, seen += 1)
//!          ─► identify: route, session + turn index, recorded headers
//!          ─► check_limits: Host, CONNECT, sizes (400/405/431/413)
//!          ─► forward_headers: hop-by-hop out, Host, Via
//!          ─► prepare_body: RequestTap (streamed) or rewritten (--inject-usage)
//!          ─► failover: replicas in ranking order, a Claim on each tried (claim_slot waits for
//!             a connection slot); connect refused → next; timeout → 504; reset → 502
//!             (upstream::Sender: http:// → direct, https:// and h2c:// → hyper-util's client)
//!          ─► respond: hop-by-hop out ─► MeteredBody(upstream body, Tap) ─► client
//!             or reject: the proxy's own JSON error, the record finished at once
//! ```
//!
//! The record's start is the moment hyper hands the parsed request head to this function: the
//! first request byte arrived a parse earlier (a few µs for a normal head), and on a keep-alive
//! connection hyper reads the next head as soon as it arrives, so that is the proxy's closest
//! observable instant to "first byte in".

use crate::config::Config;
use crate::error::{chain, ProxyError};
use crate::headers::{head_size, is_secret, strip_hop_by_hop};
use crate::inject::{self, Stripper};
use crate::meter::{MeteredBody, ProxyBody, Tap};
use crate::sniff::{ReqCell, ReqInfo, RequestTap};
use crate::upstream::{Claim, SendError, Upstream, UpstreamBody};
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, Uri, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokentap_core::clock::{self, Anchor};
use tokentap_core::either::Either;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::route::Route;
use crate::shared::Shared;

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

tokentap_core::vocabulary! {
    /// How a session id was taken from its header, when not as plain ASCII.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SessionIdNote {
        /// UTF-8 beyond ASCII: kept byte-exact.
        NonAscii = "non_ascii",
        /// Not UTF-8: the invalid bytes percent-encoded.
        NonUtf8 = "non_utf8",
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

/// The request as it goes to the replicas, built once, sent to each in turn.
struct Outbound {
    method: Method,
    uri: Uri,
    /// Hop-by-hop headers removed, `Host` and `Via` as configured.
    headers: HeaderMap,
    body: Src,
    /// What the request body's sniffer learnt (model, stream, sizes, stop reasons).
    cell: Arc<ReqCell>,
    /// `--inject-usage` rewrote the request: its response is stripped back.
    plan: Option<inject::Plan>,
}

/// Serves one client request, in its steps: open the record, check the limits, forward the
/// headers, prepare the body, then walk the replicas.
pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let anchor = Anchor::now();
    shared.seen.fetch_add(1, Ordering::Relaxed);
    shared.ledger.metrics.requests_seen.inc();
    let route = Route::of(req.uri().path());
    let mut tap = Tap::new(shared.ledger.enter(), anchor, route);
    tap.set_dialect(route.dialect(shared.cfg.messages_input_total()));
    let mut session = identify(&shared, &mut tap, route, &req);
    if let Err(e) = check_limits(&shared.cfg, &req) {
        return Ok(reject(&mut tap, e));
    }
    let (mut parts, body) = req.into_parts();
    let headers = forward_headers(&shared.cfg, std::mem::take(&mut parts.headers), &parts.uri);
    let body_session = session.is_none()
        && (route.has_body_session()
            || (route == Route::Api(tokentap_core::api::Api::Chat)
                && shared.cfg.groups_chat_by_prefix()))
        && shared.cfg.reads_session_from_body();
    let out = match prepare_body(&shared, &mut tap, route, parts, headers, body, body_session).await
    {
        Ok(out) => out,
        Err(e) => return Ok(reject(&mut tap, e)),
    };
    if body_session {
        session = session_of_body(&shared, &mut tap, route, &out.cell);
    }
    Ok(failover(&shared, tap, out, session.as_deref()).await)
}

/// The session a Responses or Messages request names in its body (`--session-from-body`), now
/// that the body was read: the record's session and turn index. With none, a Responses request
/// is named by its own response id when that comes (the first turn of a chain).
fn session_of_body(shared: &Shared, tap: &mut Tap, route: Route, cell: &ReqCell) -> Option<String> {
    let info = cell.info.get()?;
    let sessions = &shared.ledger.sessions;
    let found = shared
        .cfg
        .session_from_body
        .iter()
        .find_map(|b| b.session(info, sessions));
    let Some(id) = found else {
        if route == Route::Api(tokentap_core::api::Api::Responses) {
            tap.session_from_response();
        }
        return None;
    };
    let (id, cut) = crate::sessions::cap_id(id, shared.cfg.max_session_id_bytes);
    if cut {
        shared
            .ledger
            .metrics
            .session_ids_unusual
            .with_label_values(&["too_long"])
            .inc();
    }
    let rec = tap.record_mut();
    rec.turn_index = sessions.start_turn(&id);
    rec.conversation_id = Some(id.clone());
    Some(id)
}

/// The record's identity: route, HTTP version, recorded headers, session and turn index.
/// Returns the session id (capped to `--max-session-id-bytes`, unusual ids counted).
fn identify(
    shared: &Shared,
    tap: &mut Tap,
    route: Route,
    req: &Request<Incoming>,
) -> Option<String> {
    let cfg = &shared.cfg;
    let metrics = &shared.ledger.metrics;
    let session = session_of(&cfg.session_headers, req.headers()).map(|(id, note)| {
        let unusual = |kind: &str| metrics.session_ids_unusual.with_label_values(&[kind]).inc();
        if let Some(n) = note {
            unusual(n.as_str());
        }
        let (id, cut) = crate::sessions::cap_id(id, cfg.max_session_id_bytes);
        if cut {
            unusual("too_long");
        }
        id
    });
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
            rec.turn_index = shared.ledger.sessions.start_turn(s);
        }
        rec.conversation_id = Some(s.clone());
    }
    session
}

/// A request whose head the HTTP layer refused unread (`hyper` answered its own 431 and closed
/// the connection): it still counts as seen and gets its record — no route, no session, the
/// cause. `at` is when the refusal surfaced.
pub fn refused_unread(shared: &Shared, at: Anchor, cap: usize, lines: usize) {
    shared.seen.fetch_add(1, Ordering::Relaxed);
    shared.ledger.metrics.requests_seen.inc();
    let mut tap = Tap::new(shared.ledger.enter(), at, Route::Other);
    let e = ProxyError::HeadUnread {
        cap,
        lines,
        limit: shared.cfg.max_header_bytes,
    };
    tap.answered(e.status().as_u16(), e.turn_error(), e.record_status());
}

/// What the proxy refuses before anything goes upstream: a bad `Host`, `CONNECT`, a head over
/// `--max-header-bytes`, a declared body over `--max-body-bytes`.
fn check_limits(cfg: &Config, req: &Request<Incoming>) -> Result<(), ProxyError> {
    // RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host (h2 carries `:authority`).
    if req.version() == Version::HTTP_11 {
        let hosts = req.headers().get_all(header::HOST).iter().count();
        if hosts != 1 {
            return Err(ProxyError::BadHost(if hosts == 0 {
                "an HTTP/1.1 request needs a Host header (RFC 9112 §3.2)".into()
            } else {
                format!("{hosts} Host headers; an HTTP/1.1 request has exactly one (RFC 9112 §3.2)")
            }));
        }
    }
    if req.method() == Method::CONNECT {
        return Err(ProxyError::MethodNotAllowed(req.method().to_string()));
    }
    let head = head_size(req.method(), req.uri(), req.headers());
    if head > cfg.max_header_bytes {
        return Err(ProxyError::HeadersTooLarge {
            got: head,
            limit: cfg.max_header_bytes,
        });
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cfg.max_body_bytes) {
        return Err(ProxyError::BodyTooLarge {
            limit: cfg.max_body_bytes,
        });
    }
    Ok(())
}

/// The headers that go upstream: hop-by-hop ones out, `Host` kept or dropped
/// (`--preserve-host`), `Via` added (`--via`).
fn forward_headers(cfg: &Config, mut headers: HeaderMap, uri: &Uri) -> HeaderMap {
    strip_hop_by_hop(&mut headers);
    if !cfg.preserve_host {
        headers.remove(header::HOST);
    } else if !headers.contains_key(header::HOST) {
        // An h2 client sends `:authority`, not `Host`: carry it over for an h1 upstream.
        if let Some(a) = uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        {
            headers.insert(header::HOST, a);
        }
    }
    if cfg.via {
        headers.append(header::VIA, HeaderValue::from_static("1.1 tokentap"));
    }
    headers
}

/// The body as it will go upstream: streamed through a sniffer, or read whole — with
/// `--inject-usage` on a chat or completions route, rewritten to ask for usage; with `whole`
/// (a session to read from it), as it came.
async fn prepare_body(
    shared: &Shared,
    tap: &mut Tap,
    route: Route,
    parts: http::request::Parts,
    mut headers: HeaderMap,
    body: Incoming,
    whole: bool,
) -> Result<Outbound, ProxyError> {
    let cfg = &shared.cfg;
    let cell = Arc::new(ReqCell::default());
    tap.set_cell(cell.clone());
    let mut plan = None;
    // The Responses and Messages APIs always report usage: nothing to inject.
    let inject = cfg.injects_usage() && route.is_llm() && !route.has_body_session();
    let body = if inject || whole {
        let b = read_limited(body, cfg.max_body_bytes, cfg.body_timeout).await?;
        let mut info = ReqInfo::parse(&b).unwrap_or_default();
        info.bytes = b.len() as u64;
        if whole && route == Route::Api(tokentap_core::api::Api::Chat) {
            info.prefixes = crate::sniff::message_prefixes(&b);
        }
        let _ = cell.info.set(info);
        if shared.ledger.keep_bodies() {
            let _ = cell.content.set(b.clone());
        }
        let ask = inject::Ask {
            continuous: cfg.inject_continuous_usage,
            metrics: cfg.inject_metrics,
        };
        match inject.then(|| inject::rewrite_request(&b, ask)).flatten() {
            Some((nb, p)) => {
                plan = Some(p);
                shared.ledger.metrics.usage_injected.inc();
                headers.remove(header::CONTENT_LENGTH);
                Src::Buffered(nb)
            }
            None => Src::Buffered(b),
        }
    } else {
        Src::Stream(body)
    };
    if inject {
        tap.record_mut().usage_injected = Some(plan.is_some());
    }
    Ok(Outbound {
        method: parts.method,
        uri: parts.uri,
        headers,
        body,
        cell,
        plan,
    })
}

/// Walks the replicas in ranking order: a refused connection moves on to the next, anything
/// else is the answer (the response, or an error of the proxy's own).
async fn failover(
    shared: &Shared,
    mut tap: Tap,
    mut out: Outbound,
    session: Option<&str>,
) -> Response<ProxyBody> {
    let cfg = &shared.cfg;
    let metrics = &shared.ledger.metrics;
    let mut refused: Vec<String> = Vec::new();
    for idx in shared.upstreams.ranking(session) {
        let up = &shared.upstreams.list[idx];
        let uri = match up.uri_for(out.uri.path_and_query()) {
            Ok(u) => u,
            Err(e) => return reject(&mut tap, ProxyError::Internal(e.to_string())),
        };
        let (giveback_tx, mut giveback_rx) = oneshot::channel();
        let body = match std::mem::replace(&mut out.body, Src::Gone) {
            Src::Stream(inc) => Either::Left(RequestTap::new(
                inc,
                giveback_tx,
                out.cell.clone(),
                cfg.sniff_limit,
                cfg.max_body_bytes,
                shared.ledger.keep_bodies(),
                cfg.body_timeout,
            )),
            Src::Buffered(b) => {
                out.body = Src::Buffered(b.clone());
                Either::Right(Full::new(b))
            }
            Src::Gone => break,
        };
        let slot = match claim_slot(cfg, up).await {
            Ok(slot) => slot,
            Err(e) => {
                metrics
                    .upstream_errors
                    .with_label_values(&[&up.name, "busy"])
                    .inc();
                tap.claim(None);
                return reject(&mut tap, e);
            }
        };
        tap.claim(Some(Claim::new(up.clone(), slot)));
        metrics
            .upstream_requests
            .with_label_values(&[&up.name])
            .inc();
        tap.forwarded(clock::now());
        let error_kind = |kind: &str| {
            metrics
                .upstream_errors
                .with_label_values(&[&up.name, kind])
                .inc()
        };
        match shared
            .sender
            .send(up, &out.method, uri, &out.headers, body)
            .await
        {
            Ok(a) => {
                if a.resent {
                    error_kind("stale_connection");
                }
                return respond(cfg, tap, a.response, out.plan);
            }
            Err(SendError::Connect(why)) => {
                tap.claim(None);
                error_kind("connect");
                refused.push(format!("{}: {why}", up.name));
                if let Ok(inc) = giveback_rx.try_recv() {
                    out.body = Src::Stream(inc);
                }
            }
            Err(SendError::Failed(why)) => {
                let e = request_body_error(cfg, &out.cell, &why).unwrap_or_else(|| {
                    error_kind("reset");
                    ProxyError::Reset(why)
                });
                return reject(&mut tap, e);
            }
            Err(SendError::Timeout) => {
                error_kind("timeout");
                let ms = cfg.upstream_timeout.as_millis() as u64;
                return reject(&mut tap, ProxyError::Timeout(ms));
            }
        }
    }
    let why = if refused.is_empty() {
        "request body already consumed".to_string()
    } else {
        refused.join("; ")
    };
    reject(&mut tap, ProxyError::Connect(why))
}

/// A failed send that was the client's body's doing, not the upstream's: too large, stalled
/// past `--body-timeout`, or broken by the client.
fn request_body_error(cfg: &Config, cell: &ReqCell, why: &str) -> Option<ProxyError> {
    if cell.too_large.load(Ordering::Relaxed) {
        Some(ProxyError::BodyTooLarge {
            limit: cfg.max_body_bytes,
        })
    } else if cell.stalled.load(Ordering::Relaxed) {
        Some(ProxyError::BodyTimeout(cfg.body_timeout.as_millis() as u64))
    } else if cell.client_error.load(Ordering::Relaxed) {
        Some(ProxyError::RequestBody(why.to_string()))
    } else {
        None
    }
}

/// A connection slot of the replica (`--max-upstream-connections`), waiting in line for up to
/// `--upstream-queue-timeout` when every one is in use.
async fn claim_slot(cfg: &Config, up: &Upstream) -> Result<OwnedSemaphorePermit, ProxyError> {
    if let Ok(p) = up.slots.clone().try_acquire_owned() {
        return Ok(p);
    }
    let waited = clock::now();
    match crate::timers::timeout(cfg.upstream_queue_timeout, up.slots.clone().acquire_owned()).await
    {
        Ok(Ok(p)) => Ok(p),
        _ => Err(ProxyError::UpstreamBusy {
            upstream: up.name.clone(),
            limit: cfg.max_upstream_connections,
            waited_ms: clock::now().saturating_sub(waited) / 1_000_000,
        }),
    }
}

/// Reads a whole body, failing above `limit` bytes or when the client stalls past `stall` (no
/// byte while the proxy waits for one: `--body-timeout`, as for a streamed body).
async fn read_limited(
    mut body: Incoming,
    limit: u64,
    stall: std::time::Duration,
) -> Result<Bytes, ProxyError> {
    let mut buf = bytes::BytesMut::new();
    loop {
        let frame = match crate::timers::timeout(stall, body.frame()).await {
            Err(_) => return Err(ProxyError::BodyTimeout(stall.as_millis() as u64)),
            Ok(None) => return Ok(buf.freeze()),
            Ok(Some(Err(e))) => return Err(ProxyError::RequestBody(chain(&e))),
            Ok(Some(Ok(f))) => f,
        };
        if let Ok(d) = frame.into_data() {
            if (buf.len() + d.len()) as u64 > limit {
                return Err(ProxyError::BodyTooLarge { limit });
            }
            buf.extend_from_slice(&d);
        }
    }
}

/// The proxy answers itself: JSON error body, and the record is finished now.
fn reject(tap: &mut Tap, e: ProxyError) -> Response<ProxyBody> {
    tap.answered(e.status().as_u16(), e.turn_error(), e.record_status());
    let mut r = Response::new(Either::Right(Full::new(e.json_body())));
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
    cfg: &Config,
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
            Some(Stripper::with_limit(p, cfg.max_event_bytes))
        }
        _ => None,
    };
    if cfg.via {
        parts
            .headers
            .append(header::VIA, HeaderValue::from_static("1.1 tokentap"));
    }
    parts.version = Version::HTTP_11;
    let idle = cfg.upstream_idle_timeout;
    Response::from_parts(
        parts,
        Either::Left(MeteredBody::new(body, tap, strip).with_idle_timeout(idle)),
    )
}
