//! One HTTP/1.1 keep-alive connection per slot, and one exchange (request → streamed response)
//! per turn, measured on the monotonic clock.
//!
//! Why a connection per slot and not a pool: a closed-loop slot has at most one request in
//! flight, so a pool only adds a lock and a lookup per request. The slot connects lazily
//! (`TCP_NODELAY` on), reuses the connection while the server keeps it alive, and drops it after
//! any turn that did not end cleanly (error, timeout, cancel: a connection with a half-read
//! response cannot be reused) — the next turn reconnects. Connecting happens before the send
//! instant is stamped, so TTFT does not include TCP connect time.
//!
//! The exchange runs in the slot's own task and reads the socket itself ([`crate::rx`],
//! [`tokentap_core::http1`]): no connection task, no channel hop per chunk, and every read carries the
//! kernel's receive timestamp. Stamping: the send instant is read right before the request's
//! first `writev`; the response head and every body byte are stamped with the arrival instant
//! of the read that brought them. Then the bytes go through the SSE framer into the
//! [`Timeline`]; the generated text (for the reference's token counts and its scorer) is read
//! last. Per chunk nothing is allocated (the
//! read buffer, the framer and the text buffers are reused; the timeline's chunk vector grows
//! amortized).
//!
//! A kept-alive connection the server closed while the slot was idle (a long inter-turn delay,
//! or a server's keep-alive timeout racing the next request) is detected before writing with a
//! peek, and if the close shows only after the request was written — no response byte, EOF or
//! reset — the request is sent once more on a fresh connection, with a fresh send instant. The
//! server did not answer the first copy; the record says `retries: 1`. The rule is
//! [`tokentap_core::http1::Broke`], shared with the proxy's direct client.
//!
//! https: the slot's connection is TLS (rustls) over the same stamping socket; the handshake
//! happens at connect, before the send instant. A read is stamped with the kernel's arrival
//! time of the newest TCP segment the TLS layer consumed for it (see [`crate::rx`]), so TLS
//! decryption shows in the read lag, not in TTFT.

use crate::config::Endpoint;
pub use crate::config::Protocols;
use crate::request::RequestBody;
use crate::response::{broke, conclude, date_secs, internal, upstream, Ctx, Sink, Stale};
pub use crate::response::{Capture, Exchange, RxReport, Scratch, TurnOpts};
use crate::rx::{Read, RxStream};
use http::header::{
    HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST,
};
use http::{Method, Request};
use std::net::SocketAddr;
use tokentap_core::clock;
use tokentap_core::http1::{self, Broke, Decoder};
use tokentap_core::record::{ErrorKind, RxClock, TurnError};
use tokentap_core::timeline::Timeline;
use tokio::io::AsyncWriteExt;
use tokio_rustls::rustls::pki_types::ServerName;

/// Where the requests of a run go, and the headers that are the same for every request.
#[derive(Debug, Clone)]
pub struct Target {
    /// One or more endpoints; a conversation stays on the one [`Target::pick`] gives it.
    pub endpoints: Vec<EndpointTarget>,
    /// The headers carrying the conversation's id (`--routing-header`).
    pub routing: Vec<HeaderName>,
    /// `Bearer KEY`, marked sensitive so hyper and `Debug` never show it.
    pub authorization: Option<HeaderValue>,
}

/// One resolved endpoint.
#[derive(Clone)]
pub struct EndpointTarget {
    /// The full request URL (for records and errors).
    pub url: String,
    /// The address connected to.
    pub addr: SocketAddr,
    /// The `Host` header.
    pub host: HeaderValue,
    /// The request target (origin form).
    pub path: http::Uri,
    /// `scheme://authority/path`: an HTTP/2 request's `:scheme`, `:authority` and `:path`.
    pub absolute: http::Uri,
    /// `https://`: the handshake's settings and the name the certificate must carry.
    pub tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    /// `--http2`: HTTP/2 only (prior knowledge on http://; ALPN `h2` alone on https://).
    pub http2: bool,
    /// Rendezvous seed: the hash of the base URL (as the proxy seeds its replicas).
    seed: u64,
}

impl std::fmt::Debug for EndpointTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointTarget")
            .field("url", &self.url)
            .field("addr", &self.addr)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Target {
    /// Resolves every endpoint (DNS once, at the start) and builds the TLS settings of the
    /// https ones.
    pub async fn resolve(
        eps: &[Endpoint],
        routing: &[String],
        api_key: Option<&str>,
        trust: &tokentap_core::tls::Trust,
        protocols: Protocols,
    ) -> Result<Target, crate::error::ReplayError> {
        let http2 = protocols == Protocols::Http2;
        use crate::error::ReplayError;
        let cfg = |m: String| ReplayError::Config(m);
        let mut tls_config = None;
        let mut endpoints = Vec::with_capacity(eps.len());
        for ep in eps {
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
            let host =
                HeaderValue::from_str(&ep.authority).map_err(|e| cfg(format!("host: {e}")))?;
            let path = ep
                .path
                .parse()
                .map_err(|e| cfg(format!("path {:?}: {e}", ep.path)))?;
            let tls = if ep.https {
                let c = match &tls_config {
                    Some(c) => std::sync::Arc::clone(c),
                    None => {
                        let c = std::sync::Arc::new(
                            tokentap_core::tls::client_config(
                                trust,
                                match protocols {
                                    Protocols::Http2 => &[b"h2"],
                                    Protocols::Auto => &[b"h2", b"http/1.1"],
                                    Protocols::Http1 => &[b"http/1.1"],
                                },
                            )
                            .map_err(|e| cfg(format!("--ca {e}")))?,
                        );
                        tls_config = Some(std::sync::Arc::clone(&c));
                        c
                    }
                };
                let name = ServerName::try_from(ep.host.clone()).map_err(|e| {
                    cfg(format!(
                        "--endpoint {}: {:?} is not a TLS server name: {e}",
                        ep.base, ep.host
                    ))
                })?;
                Some((tokio_rustls::TlsConnector::from(c), name))
            } else {
                None
            };
            let absolute = http::Uri::builder()
                .scheme(if ep.https { "https" } else { "http" })
                .authority(ep.authority.as_str())
                .path_and_query(ep.path.as_str())
                .build()
                .map_err(|e| cfg(format!("--endpoint {}: {e}", ep.base)))?;
            endpoints.push(EndpointTarget {
                absolute,
                url: ep.url.clone(),
                addr,
                host,
                path,
                tls,
                http2,
                seed: tokentap_core::route::seed(&ep.base),
            });
        }
        if endpoints.is_empty() {
            return Err(cfg("no --endpoint given".into()));
        }
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
            endpoints,
            routing,
            authorization,
        })
    }

    /// The endpoint a conversation goes to, by its logical id: rendezvous hashing, the same
    /// ranking the proxy gives its replicas, so a conversation never moves and adding an
    /// endpoint moves only the conversations that rank it first.
    pub fn pick(&self, logical: &str) -> usize {
        if self.endpoints.len() == 1 {
            return 0;
        }
        tokentap_core::route::rendezvous_first(
            logical.as_bytes(),
            self.endpoints.iter().map(|e| e.seed),
        )
    }

    /// The request for one turn to `endpoint`. `session` is the logical conversation id as a
    /// header value.
    pub fn request(
        &self,
        endpoint: usize,
        session: &HeaderValue,
        body: RequestBody,
    ) -> Request<RequestBody> {
        let ep = &self.endpoints[endpoint];
        let mut req = Request::new(body);
        *req.method_mut() = Method::POST;
        *req.uri_mut() = ep.path.clone();
        let len = req.body().len();
        let h = req.headers_mut();
        h.insert(HOST, ep.host.clone());
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

/// Read buffer size: large enough that a backlog of chunks is drained in one read.
const READ_BUF: usize = http1::MAX_HEAD;

/// Largest read until the first token is seen (and the size of a head read). A TCP read is
/// stamped with its newest packet, so when a backlog waits in the socket (the client fell
/// behind the server) one big read would date the first token by the last packet read with it.
/// Until the first token, reads stop at the end of the current HTTP chunk (servers write an
/// SSE event per chunk, and a chunk per write): its size line, then exactly its data, so the
/// first token is stamped with its own packet, for ~4 extra syscalls per turn. After it,
/// reads take whatever is there.
const TTFT_READ: usize = 256;

/// A slot's connection.
pub struct Conn {
    io: Option<Io>,
    /// The endpoint `io` is connected to.
    endpoint: usize,
    /// An exchange started on `io` and has not finished cleanly: it cannot be reused.
    dirty: bool,
    /// Ask the kernel for receive timestamps.
    kernel_rx: bool,
    buf: Vec<u8>,
    head: Vec<u8>,
    /// Connections opened so far (1 = never reconnected).
    pub connects: u64,
}

impl Default for Conn {
    fn default() -> Self {
        Conn::new(true)
    }
}

impl Conn {
    /// A slot's connection; `kernel_rx` false stamps reads in user space only.
    pub fn new(kernel_rx: bool) -> Self {
        Conn {
            io: None,
            endpoint: 0,
            dirty: false,
            kernel_rx,
            buf: Vec::new(),
            head: Vec::new(),
            connects: 0,
        }
    }

    /// Closes the connection (if any); the next turn reconnects.
    pub fn reset(&mut self) {
        self.io = None;
        self.dirty = false;
    }

    /// Opens a connection to `ep` (TCP, then the TLS handshake for https). Before the send
    /// instant: neither is in any latency.
    async fn connect(&mut self, ep: &EndpointTarget) -> Result<(), TurnError> {
        let addr = ep.addr;
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| upstream(ErrorKind::Connect, format!("connect {addr}: {e}")))?;
        let mut rx = RxStream::new(stream, self.kernel_rx)
            .map_err(|e| internal(ErrorKind::Connect, format!("TCP_NODELAY: {e}")))?;
        let h2_failed = |e: h2::Error| {
            upstream(
                ErrorKind::Connect,
                format!("HTTP/2 handshake with {} ({addr}) failed: {e}", ep.url),
            )
        };
        let io = match &ep.tls {
            None if ep.http2 => {
                let cell = std::sync::Arc::new(crate::rx::StampCell::default());
                rx.share(cell.clone());
                Io::H2(
                    crate::http2::H2Conn::handshake(rx, cell)
                        .await
                        .map_err(h2_failed)?,
                )
            }
            None => Io::Plain(rx),
            Some((connector, name)) => {
                let cell = std::sync::Arc::new(crate::rx::StampCell::default());
                rx.share(cell.clone());
                let tls = connector.connect(name.clone(), rx).await.map_err(|e| {
                    upstream(
                        ErrorKind::Tls,
                        format!(
                            "TLS handshake with {} ({addr}) failed: {e}{}",
                            ep.url,
                            tokentap_core::tls::handshake_hint(&e.to_string())
                        ),
                    )
                })?;
                if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                    Io::H2(
                        crate::http2::H2Conn::handshake(tls, cell)
                            .await
                            .map_err(h2_failed)?,
                    )
                } else if ep.http2 {
                    return Err(upstream(
                        ErrorKind::Connect,
                        format!(
                            "{} did not agree to HTTP/2 (ALPN); drop --http2 to use HTTP/1.1",
                            ep.url
                        ),
                    ));
                } else {
                    Io::Tls(Box::new(tls))
                }
            }
        };
        self.io = Some(io);
        self.connects += 1;
        Ok(())
    }

    /// A connection to `endpoint` ready for a request; `true` when it is a kept-alive one.
    async fn ready(&mut self, target: &Target, endpoint: usize) -> Result<bool, TurnError> {
        if self.dirty
            || self.endpoint != endpoint
            || self.io.as_ref().is_some_and(|io| !io.idle_ok())
        {
            self.reset();
        }
        if self.io.is_some() {
            return Ok(true);
        }
        self.connect(&target.endpoints[endpoint]).await?;
        self.endpoint = endpoint;
        Ok(false)
    }
}

/// A slot's transport: plain TCP, or TLS over the same stamping socket (HTTP/1.1), or an
/// HTTP/2 connection over either.
enum Io {
    Plain(RxStream),
    Tls(Box<tokio_rustls::client::TlsStream<RxStream>>),
    H2(crate::http2::H2Conn),
}

impl Io {
    /// Reads what is there, stamped. Under TLS the stamps are those of the newest TCP read the
    /// TLS layer made (the ciphertext that completed the plaintext returned); `user` is taken
    /// after decryption, so the decryption time is in the read lag, not in any latency.
    async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<Read> {
        match self {
            Io::H2(_) => Err(std::io::Error::other(
                "an HTTP/2 connection is read by its streams",
            )),
            Io::Plain(rx) => rx.read(buf).await,
            Io::Tls(tls) => {
                use tokio::io::AsyncReadExt;
                let n = tls.read(buf).await?;
                let user = clock::now();
                Ok(match tls.get_ref().0.last_read() {
                    Some(last) => Read {
                        n,
                        at: last.at,
                        user,
                        clock: last.clock,
                    },
                    None => Read {
                        n,
                        at: user,
                        user,
                        clock: RxClock::User,
                    },
                })
            }
        }
    }

    fn idle_ok(&self) -> bool {
        match self {
            Io::H2(h) => h.alive(),
            Io::Plain(rx) => rx.idle_ok(),
            // A TLS server's close starts with a close_notify alert: readable bytes on an idle
            // connection mean it is going away (as for plain TCP).
            Io::Tls(tls) => tls.get_ref().0.idle_ok(),
        }
    }
}

/// Runs one turn on `conn`: waits for the connection, stamps the send instant, creates the
/// turn's [`Timeline`] in `tl` (offsets from that instant), sends, and streams the response into
/// it. The caller may drop this future at any time (timeout, cancel): what arrived until then is
/// in `tl`; `tl` stays `None` if the request was never sent; the connection is not reused.
pub async fn exchange(
    conn: &mut Conn,
    target: &Target,
    endpoint: usize,
    req: Request<RequestBody>,
    tl: &mut Option<Timeline>,
    scratch: &mut Scratch,
    opts: TurnOpts,
) -> Exchange {
    scratch.rx = RxReport::default();
    scratch.retries = 0;
    scratch.http_status = None;
    scratch.server_date = None;
    let mut head = std::mem::take(&mut conn.head);
    head.clear();
    let (parts, body) = req.into_parts();
    let req_head = Request::from_parts(parts, ());
    http1::write_head(&req_head, &mut head);
    scratch.http2 = false;
    let out = loop {
        let reused = match conn.ready(target, endpoint).await {
            Ok(r) => r,
            Err(error) => {
                break Exchange::Failed {
                    http_status: None,
                    error,
                }
            }
        };
        conn.dirty = true;
        let res = match conn.io.as_mut() {
            Some(Io::H2(h)) => {
                scratch.http2 = true;
                let r = crate::http2::attempt(
                    h,
                    &target.endpoints[endpoint].absolute,
                    &req_head,
                    body.segments(),
                    tl,
                    scratch,
                    opts,
                )
                .await;
                // A stream ends cleanly without taking the connection down.
                if matches!(r, Ok(Exchange::Ok { .. })) {
                    conn.dirty = false;
                }
                r
            }
            _ => attempt(conn, &head, &body, tl, scratch, opts).await,
        };
        match res {
            Ok(x) => break x,
            Err(Stale(error)) if Broke::BeforeResponse.resend(reused, scratch.retries) => {
                tracing::debug!(error = %error.message, "kept-alive connection closed under the request; sending it again");
                conn.reset();
                scratch.retries += 1;
            }
            Err(Stale(error)) => {
                conn.reset();
                break Exchange::Failed {
                    http_status: None,
                    error,
                };
            }
        }
    };
    conn.head = head;
    out
}

/// One send and receive on the current connection.
async fn attempt(
    conn: &mut Conn,
    head: &[u8],
    body: &RequestBody,
    tl_slot: &mut Option<Timeline>,
    scratch: &mut Scratch,
    opts: TurnOpts,
) -> Result<Exchange, Stale> {
    let TurnOpts {
        expected_chunks,
        capture,
        max_event,
    } = opts;
    let Some(io) = conn.io.as_mut() else {
        return Err(Stale(internal(ErrorKind::Connect, "no connection".into())));
    };
    if conn.buf.len() < READ_BUF {
        conn.buf.resize(READ_BUF, 0);
    }
    let buf = &mut conn.buf[..];
    // The send instant: every offset of the turn counts from here.
    let tl = tl_slot.insert(Timeline::new(clock::now(), expected_chunks));
    if let Err(e) = write_request(io, head, body.segments()).await {
        return Err(Stale(upstream(
            ErrorKind::Reset,
            format!("request failed: {e}"),
        )));
    }

    let (head_len, head, first, filled) = match read_head(io, buf, scratch).await? {
        HeadRead::Got {
            len,
            head,
            first,
            filled,
        } => (len, head, first, filled),
        HeadRead::Ended(x) => return Ok(x),
    };
    tl.on_headers(first.at);
    let status = head.status;
    scratch.http_status = Some(status);
    let mut decoder = Decoder::new(head.framing);
    let mut sink = Sink::for_response(status, head.json);
    let mut ctx = Ctx {
        tl,
        output: &mut scratch.output,
        rx: &mut scratch.rx,
        capture,
    };

    // Body: the bytes after the head came with the head's read; then one read at a time.
    let mut r = first;
    let (mut from, mut to) = (head_len, filled);
    let clean_end = loop {
        if to > from {
            let input = &buf[from..to];
            match feed(
                &mut decoder,
                &mut sink,
                &mut ctx,
                input,
                &r,
                status,
                max_event,
            ) {
                Fed::Done(clean_end) => break clean_end,
                Fed::More => {}
                Fed::Ended(x) => return Ok(x),
            }
        } else if decoder.is_done() {
            break true;
        }
        let cap = read_cap(&decoder, &sink, &ctx, buf.len());
        r = match io.read(&mut buf[..cap]).await {
            Ok(r) => r,
            Err(e) => {
                sink.finish(&mut ctx, r.at);
                return Ok(broke(Some(status), format!("response stream broke: {e}")));
            }
        };
        if r.n == 0 {
            if decoder.until_close() {
                break false;
            }
            sink.finish(&mut ctx, r.at);
            return Ok(broke(
                Some(status),
                "response stream broke: connection closed before message completed".into(),
            ));
        }
        ctx.rx.on_read(&r);
        (from, to) = (0, r.n);
    };
    let cut_mid_event = sink.finish(&mut ctx, r.at);
    // A complete response leaves the connection reusable if the server keeps it alive.
    conn.dirty = !(clean_end && head.keep_alive);
    Ok(conclude(sink, &mut ctx, status, cut_mid_event, capture))
}

/// What feeding the bytes of one read to the decoder did.
enum Fed {
    /// The message is complete; `true` when it ended exactly at the end of the bytes fed.
    Done(bool),
    /// The message needs more bytes.
    More,
    /// The turn ended here (bad framing, or an event past `--max-event-bytes`).
    Ended(Exchange),
}

/// Feeds `input` (read by `r`) through the decoder into the sink; says whether the message is
/// complete or the turn ended.
#[inline]
fn feed(
    decoder: &mut Decoder,
    sink: &mut Sink,
    ctx: &mut Ctx<'_>,
    input: &[u8],
    r: &Read,
    status: u16,
    max_event: usize,
) -> Fed {
    let used = match decoder.feed(input, |d| sink.data(ctx, d, r)) {
        Ok(n) => n,
        Err(e) => return Fed::Ended(broke(Some(status), e.0)),
    };
    if let Some(err) = sink.overflow(max_event) {
        return Fed::Ended(Exchange::Failed {
            http_status: Some(status),
            error: err,
        });
    }
    if decoder.is_done() {
        Fed::Done(used == input.len())
    } else {
        Fed::More
    }
}

/// How much the next read may take: until an SSE stream's first token, the rest of the current
/// HTTP chunk (at most [`TTFT_READ`], which says why); after it, the whole buffer (`buf_len`).
#[inline]
fn read_cap(decoder: &Decoder, sink: &Sink, ctx: &Ctx<'_>, buf_len: usize) -> usize {
    if ctx.tl.ttft_ns().is_none() && matches!(sink, Sink::Sse(_)) {
        decoder
            .piece_left()
            .map_or(TTFT_READ, |n| n.clamp(1, TTFT_READ as u64) as usize)
    } else {
        buf_len
    }
}

/// How reading a response head ended.
enum HeadRead {
    /// The final head: its length, the head, the read that completed it (its instant is the
    /// response head's), and how many bytes of the buffer are filled (the body's first bytes
    /// may follow the head).
    Got {
        len: usize,
        head: http1::Head,
        first: Read,
        filled: usize,
    },
    /// The turn ended here: the head broke off or is not HTTP/1.1.
    Ended(Exchange),
}

/// Reads the response head into `buf`, skipping 1xx interim responses; every read is stamped
/// (`scratch.rx`). `Err(Stale)`: nothing came back on the connection ([`Broke`]).
async fn read_head(io: &mut Io, buf: &mut [u8], scratch: &mut Scratch) -> Result<HeadRead, Stale> {
    let mut filled = 0;
    // Every response byte read, interim responses included: what `Broke` counts (`filled`
    // goes back down when a 1xx head is skipped).
    let mut got = 0usize;
    loop {
        let cap = (filled + TTFT_READ).min(buf.len());
        let r = match io.read(&mut buf[filled..cap]).await {
            Ok(r) => r,
            Err(e) if Broke::after(got) == Broke::BeforeResponse => {
                return Err(Stale(upstream(
                    ErrorKind::Reset,
                    format!("connection failed before any response byte: {e}"),
                )))
            }
            Err(e) => {
                let why = format!("reading the response head: {e}");
                return Ok(HeadRead::Ended(broke(None, why)));
            }
        };
        if r.n == 0 {
            if Broke::after(got) == Broke::BeforeResponse {
                return Err(Stale(upstream(
                    ErrorKind::Reset,
                    "connection closed before any response byte".into(),
                )));
            }
            return Ok(HeadRead::Ended(broke(
                None,
                "connection closed inside the response head".into(),
            )));
        }
        scratch.rx.on_read(&r);
        filled += r.n;
        got += r.n;
        let mut date = None;
        let parsed = http1::parse_head_with(&buf[..filled], |name, value| {
            if name.eq_ignore_ascii_case("date") {
                date = date_secs(value);
            }
        });
        match parsed {
            Ok(Some((len, h))) if (100..200).contains(&h.status) => {
                buf.copy_within(len..filled, 0);
                filled -= len;
            }
            Ok(Some((len, h))) => {
                scratch.server_date = date;
                return Ok(HeadRead::Got {
                    len,
                    head: h,
                    first: r,
                    filled,
                });
            }
            Ok(None) => {}
            Err(e) => {
                return Ok(HeadRead::Ended(Exchange::Failed {
                    http_status: None,
                    error: upstream(ErrorKind::HttpHead, e.0),
                }))
            }
        }
    }
}

/// The head and the body's segments as one list of parts.
fn parts<'a>(head: &'a [u8], segments: &'a [bytes::Bytes]) -> Vec<&'a [u8]> {
    std::iter::once(head)
        .chain(segments.iter().map(|b| &b[..]))
        .collect()
}

/// Writes the request head and body segments with as few `writev` calls as the kernel allows
/// (under TLS: as few TLS records; then flushed).
async fn write_request(io: &mut Io, head: &[u8], segments: &[bytes::Bytes]) -> std::io::Result<()> {
    match io {
        Io::H2(_) => Err(std::io::Error::other("HTTP/2 requests go as streams")),
        Io::Plain(rx) => http1::write_all_vectored(rx.stream(), &parts(head, segments)).await,
        Io::Tls(tls) => {
            http1::write_all_vectored(&mut **tls, &parts(head, segments)).await?;
            tls.flush().await
        }
    }
}
