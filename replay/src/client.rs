//! One HTTP/1.1 keep-alive connection per slot, and one exchange (request → streamed response)
//! per turn, measured on the monotonic clock.
//!
//! Why a connection per slot and not a pool: a closed-loop slot has at most one request in
//! flight, so a pool only adds a lock and a lookup per request. The slot connects lazily
//! (`TCP_NODELAY` on), reuses the connection while the server keeps it alive, and drops it after
//! any turn that did not end cleanly (error, timeout, cancel: an HTTP/1.1 connection with a
//! half-read response cannot be reused) — the next turn reconnects. Connecting happens before
//! the send instant is stamped, so TTFT does not include TCP connect time.
//!
//! Stamping: the send instant is read right before the request is handed to the connection;
//! every body frame is stamped with [`clock::now`] the moment hyper returns it, before any
//! parsing. Then the bytes go through the SSE framer into the [`Timeline`]; generated text for
//! accuracy is read last. Per chunk nothing is allocated by this module (the framer and the text
//! buffers are reused; the timeline's chunk vector grows amortized).
//!
//! https: [`Conn::connect`] is the seam — a TLS connector would wrap the `TcpStream` there.

use crate::accuracy::{Capture, Generated};
use crate::body::RequestBody;
use crate::config::Endpoint;
use http::header::{
    HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST,
};
use http::{Method, Request};
use http_body_util::BodyExt;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use tokentap_core::clock::{self, MonoNs};
use tokentap_core::record::{ErrorSource, TurnError};
use tokentap_core::sse::{Event, Framer};
use tokentap_core::timeline::Timeline;

/// Headers that are the same for every request of a run.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub host: HeaderValue,
    pub path: http::Uri,
    pub routing: Vec<HeaderName>,
    /// `Bearer KEY`, marked sensitive so hyper and `Debug` never show it.
    pub authorization: Option<HeaderValue>,
}

impl Target {
    pub async fn resolve(
        ep: &Endpoint,
        routing: &[String],
        api_key: Option<&str>,
    ) -> Result<Target, crate::error::ReplayError> {
        use crate::error::ReplayError;
        let addr = tokio::net::lookup_host((ep.host.as_str(), ep.port))
            .await
            .map_err(|source| ReplayError::Resolve {
                host: ep.host.clone(),
                source,
            })?
            .next()
            .ok_or_else(|| ReplayError::Resolve {
                host: ep.host.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
            })?;
        let cfg = |m: String| ReplayError::Config(m);
        let host = HeaderValue::from_str(&ep.authority).map_err(|e| cfg(format!("host: {e}")))?;
        let path = ep
            .path
            .parse()
            .map_err(|e| cfg(format!("path {:?}: {e}", ep.path)))?;
        let routing = routing
            .iter()
            .map(|h| HeaderName::from_bytes(h.as_bytes()).map_err(|e| cfg(format!("{h}: {e}"))))
            .collect::<Result<_, _>>()?;
        let authorization = match api_key {
            Some(k) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {k}"))
                    .map_err(|_| cfg("--api-key: not a valid header value".into()))?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        Ok(Target {
            addr,
            host,
            path,
            routing,
            authorization,
        })
    }

    /// The request for one turn. `session` is the logical conversation id as a header value.
    pub fn request(&self, session: &HeaderValue, body: RequestBody) -> Request<RequestBody> {
        let mut req = Request::new(body);
        *req.method_mut() = Method::POST;
        *req.uri_mut() = self.path.clone();
        let len = req.body().len();
        let h = req.headers_mut();
        h.insert(HOST, self.host.clone());
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        h.insert(CONTENT_LENGTH, HeaderValue::from(len));
        for name in &self.routing {
            h.append(name.clone(), session.clone());
        }
        if let Some(a) = &self.authorization {
            h.insert(AUTHORIZATION, a.clone());
        }
        req
    }
}

/// A slot's connection.
#[derive(Default)]
pub struct Conn {
    sender: Option<http1::SendRequest<RequestBody>>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Connections opened so far (1 = never reconnected).
    pub connects: u64,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reset();
    }
}

impl Conn {
    /// Closes the connection (if any); the next turn reconnects.
    pub fn reset(&mut self) {
        self.sender = None;
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }

    /// Opens a connection. The https seam: a TLS handshake would wrap `stream` here.
    async fn connect(&mut self, addr: SocketAddr) -> Result<(), TurnError> {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| upstream("connect", format!("connect {addr}: {e}")))?;
        stream
            .set_nodelay(true)
            .map_err(|e| internal("connect", format!("TCP_NODELAY: {e}")))?;
        let (sender, conn) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| upstream("connect", format!("HTTP handshake: {e}")))?;
        self.task = Some(tokio::spawn(async move {
            // The connection ends when the server closes it or we drop the sender; an error here
            // also shows on the in-flight request, which is where it is recorded.
            let _ = conn.await;
        }));
        self.sender = Some(sender);
        self.connects += 1;
        Ok(())
    }

    /// A sender that is ready for a request, connecting (once more) if needed.
    async fn ready(
        &mut self,
        addr: SocketAddr,
    ) -> Result<&mut http1::SendRequest<RequestBody>, TurnError> {
        if let Some(s) = &mut self.sender {
            if s.ready().await.is_err() {
                self.reset();
            }
        }
        if self.sender.is_none() {
            self.connect(addr).await?;
            if let Some(s) = &mut self.sender {
                s.ready()
                    .await
                    .map_err(|e| upstream("connect", format!("connection not ready: {e}")))?;
            }
        }
        // Invariant: `connect` succeeded above or an earlier sender passed `ready`.
        self.sender
            .as_mut()
            .ok_or_else(|| internal("connect", "no connection".into()))
    }
}

/// Largest non-streaming JSON response kept for parsing.
const MAX_JSON_BODY: usize = 64 << 20;

/// Per-slot scratch reused across turns.
#[derive(Default)]
pub struct Scratch {
    pub generated: Generated,
}

/// How an exchange ended (before timeouts and cancels, which the caller applies).
#[derive(Debug)]
pub enum Exchange {
    /// A complete 2xx response.
    Ok { http_status: u16 },
    /// Something went wrong; `http_status` when a response head arrived.
    Failed {
        http_status: Option<u16>,
        error: TurnError,
    },
}

/// Runs one turn on `conn`: waits for the connection, stamps the send instant, creates the
/// turn's [`Timeline`] in `tl` (offsets from that instant), sends, and streams the response into
/// it. The caller may drop this future at any time (timeout, cancel): what arrived until then is
/// in `tl`; `tl` stays `None` if the request was never sent.
pub async fn exchange(
    conn: &mut Conn,
    target: &Target,
    req: Request<RequestBody>,
    tl: &mut Option<Timeline>,
    expected_chunks: usize,
    scratch: &mut Scratch,
    capture_text: Capture,
) -> Exchange {
    let mut req = Some(req);
    let mut attempt = 0;
    let resp = loop {
        let sender = match conn.ready(target.addr).await {
            Ok(s) => s,
            Err(error) => {
                return Exchange::Failed {
                    http_status: None,
                    error,
                }
            }
        };
        let Some(r) = req.take() else {
            return Exchange::Failed {
                http_status: None,
                error: internal("send", "request lost before sending".into()),
            };
        };
        // The send instant: every offset of the turn counts from here.
        *tl = Some(Timeline::new(clock::now(), expected_chunks));
        match sender.try_send_request(r).await {
            Ok(resp) => break resp,
            Err(mut e) => {
                conn.reset();
                // hyper hands the request back when it was never written (a keep-alive
                // connection the server closed while the slot was idle, e.g. during a long
                // delay): reconnect and send it once more, stamping the send instant again.
                match e.take_message() {
                    Some(back) if attempt == 0 => {
                        req = Some(back);
                        attempt += 1;
                    }
                    _ => {
                        return Exchange::Failed {
                            http_status: None,
                            error: upstream("send", format!("request failed: {}", e.into_error())),
                        }
                    }
                }
            }
        }
    };
    let Some(tl) = tl.as_mut() else {
        return Exchange::Failed {
            http_status: None,
            error: internal("send", "no timeline".into()),
        };
    };
    tl.on_headers(clock::now());
    let status = resp.status();
    let resp_is_json = resp
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let mut body = resp.into_body();
    if !status.is_success() {
        // Keep a short, bounded excerpt of the error body: servers put the reason there.
        let mut excerpt = Vec::new();
        while let Some(frame) = body.frame().await {
            let t = clock::now();
            match frame {
                Ok(f) => {
                    if let Some(d) = f.data_ref() {
                        tl.on_bytes(t);
                        let room = 512usize.saturating_sub(excerpt.len());
                        excerpt.extend_from_slice(&d[..d.len().min(room)]);
                    }
                }
                Err(_) => break,
            }
        }
        conn.reset();
        return Exchange::Failed {
            http_status: Some(status.as_u16()),
            error: upstream(
                "http_status",
                format!(
                    "HTTP {}: {}",
                    status.as_u16(),
                    String::from_utf8_lossy(&excerpt).trim()
                ),
            ),
        };
    }
    let generated = &mut scratch.generated;
    if resp_is_json {
        // A server that ignored `stream: true` and sent one JSON body: no per-chunk timeline,
        // but usage, finish reason and the text for scoring are read from it.
        let mut whole = Vec::new();
        while let Some(frame) = body.frame().await {
            let t = clock::now();
            match frame {
                Ok(f) => {
                    if let Some(d) = f.data_ref() {
                        tl.on_bytes(t);
                        if whole.len() + d.len() > MAX_JSON_BODY {
                            conn.reset();
                            return Exchange::Failed {
                                http_status: Some(status.as_u16()),
                                error: upstream(
                                    "body_too_large",
                                    format!("JSON response over {MAX_JSON_BODY} bytes"),
                                ),
                            };
                        }
                        whole.extend_from_slice(d);
                    }
                }
                Err(e) => {
                    conn.reset();
                    return Exchange::Failed {
                        http_status: Some(status.as_u16()),
                        error: upstream("stream", format!("response body broke: {e}")),
                    };
                }
            }
        }
        tl.on_json_body(&whole);
        if capture_text != Capture::default() {
            generated.feed(&whole);
        }
        return Exchange::Ok {
            http_status: status.as_u16(),
        };
    }
    let mut framer = Framer::new();
    while let Some(frame) = body.frame().await {
        // Stamped before anything else looks at the bytes.
        let t = clock::now();
        match frame {
            Ok(f) => {
                if let Some(d) = f.data_ref() {
                    tl.on_bytes(t);
                    framer.feed(d, |ev| on_event(tl, generated, capture_text, t, ev));
                }
            }
            Err(e) => {
                framer.finish(|ev| on_event(tl, generated, capture_text, t, ev));
                conn.reset();
                return Exchange::Failed {
                    http_status: Some(status.as_u16()),
                    error: upstream("stream", format!("response stream broke: {e}")),
                };
            }
        }
    }
    let end = clock::now();
    framer.finish(|ev| on_event(tl, generated, capture_text, end, ev));
    Exchange::Ok {
        http_status: status.as_u16(),
    }
}

#[inline]
fn on_event(
    tl: &mut Timeline,
    generated: &mut Generated,
    capture: Capture,
    t: MonoNs,
    ev: Event<'_>,
) {
    if ev.is_done() {
        tl.on_done();
    } else if let Some(info) = tl.on_data(t, ev.data) {
        // After the stamp and the timeline: scoring never delays a timestamp.
        if capture.wants(info.content, info.tool_call) {
            generated.feed(ev.data);
        }
    }
}

pub(crate) fn upstream(kind: &str, message: String) -> TurnError {
    TurnError {
        source: ErrorSource::Upstream,
        kind: kind.to_string(),
        message,
    }
}

pub(crate) fn internal(kind: &str, message: String) -> TurnError {
    TurnError {
        source: ErrorSource::Internal,
        kind: kind.to_string(),
        message,
    }
}
