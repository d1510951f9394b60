//! The direct HTTP/1.1 upstream client: the task that serves the client reads the upstream
//! socket itself.
//!
//! ```text
//!  hyper-util client:  upstream socket ─► client conn task ─► channel ─► server conn task ─► client
//!                                          (wake-up 1)                     (wake-up 2)
//!  direct:             upstream socket ─────────────────────────────────► server conn task ─► client
//!                                                                          (one wake-up)
//! ```
//!
//! With hyper-util's client every chunk costs two task wake-ups, often on two threads, and hands
//! frames over one at a time, so each chunk becomes its own `writev` to the client. Here the
//! response body ([`H1Body`]) is polled by hyper's server connection directly: one read takes
//! everything the upstream has sent, the data of every HTTP chunk in it is moved together in
//! place and comes out as one slice of the read buffer (no allocation), and hyper's server
//! sends it as one chunk in one write — what one read brought, as nginx sends it.
//!
//! Scope: plain `http://` upstreams, one request per connection at a time (no pipelining), no
//! upgrades. `https://` and `h2c://` upstreams keep hyper-util's client
//! ([`super::hyper_client::Clients`]), and `--upstream-client hyper` puts plain ones back on it.
//!
//! ## Connections
//! Each replica has a [`Pool`] of idle connections, newest first. Before reuse a connection is
//! checked (a non-blocking `MSG_PEEK`: a close or stray bytes drop it) and must be younger than
//! `--upstream-keepalive`. A server may still close a kept-alive connection just as the request
//! goes out; if no response byte came back, the request is sent again, once, on a new connection
//! (the rule of [`tokentap_core::http1::Broke`], which the replay's client applies too) — the body frames sent so far are kept (refcounted `Bytes`, no copy) until the response head
//! arrives, so this works for a streamed POST too. A connection goes back to the pool only after
//! a complete response that allows keep-alive with nothing after it.

use super::body::{UpBody, UpstreamBodyError};
use super::pool::Pool;
use super::replica::Upstream;
use crate::sniff::TapError;
use bytes::{Buf, Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, Method, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokentap_core::http1::{self, Broke, Decoder, Framing};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Idle connections kept per replica at most.
/// Read buffer: first size, and the least free space before a read.
const READ_BUF: usize = 16 << 10;
const MIN_READ: usize = 4 << 10;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// No connection could be made: the next replica may take the request.
    #[error("connect: {0}")]
    Connect(io::Error),
    /// The client's request body failed (too large, or the client broke).
    #[error(transparent)]
    Body(TapError),
    /// The upstream broke the exchange or answered something that is not HTTP/1.1.
    #[error("{0}")]
    Upstream(String),
}

/// The request as it goes upstream.
pub struct Outgoing<'a> {
    /// The method.
    pub method: &'a Method,
    /// Path and query, with the replica's prefix.
    pub path: &'a str,
    /// Hop-by-hop headers already removed.
    pub headers: &'a HeaderMap,
    /// The body.
    pub body: UpBody,
    /// `--connect-timeout`.
    pub connect_timeout: Duration,
    /// How long an idle kept-alive connection is trusted (`--upstream-keepalive`).
    pub keepalive: Duration,
}

/// A response head from upstream, and its body to poll.
pub struct Incoming {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: H1Body,
    /// The kept-alive connection first tried was closed under the request; it was sent again.
    pub resent: bool,
}

/// Sends `req` to `up` and waits for the response head.
pub async fn exchange(up: &Upstream, mut req: Outgoing<'_>) -> Result<Incoming, ExchangeError> {
    let mut resent = 0u32;
    let (mut conn, mut reused) = match up.pool.take(req.keepalive) {
        Some(c) => (c, true),
        // Connect before the body is touched: on failure it goes back untouched to the service.
        None => (connect(up, req.connect_timeout).await?, false),
    };
    let (head, chunked) = request_head(up, &req);
    let mut sending = Sending {
        head,
        chunked,
        sent: Vec::new(),
        body_done: req.body.is_end_stream(),
        body: &mut req.body,
    };
    let head_request = req.method == Method::HEAD;
    let mut buf = BytesMut::with_capacity(READ_BUF);
    loop {
        let got = match sending.send(&mut conn).await {
            Ok(()) => read_head(&mut conn, &mut buf, head_request).await,
            Err(e) => Err(e),
        };
        match got {
            Ok((status, headers, decoder, keep_alive)) => {
                let mut body = H1Body {
                    conn: Some(conn),
                    buf,
                    decoder,
                    keep_alive,
                    pool: up.pool.clone(),
                    broken: None,
                    spare: BytesMut::new(),
                };
                body.release_if_done();
                return Ok(Incoming {
                    status,
                    headers,
                    body,
                    resent: resent > 0,
                });
            }
            Err(Failure::Upstream(broke, e)) if broke.resend(reused, resent) => {
                tracing::debug!(upstream = %up.name, error = %e, "kept-alive connection closed under the request; sending it again");
                reused = false;
                resent += 1;
                buf.clear();
                conn = connect(up, req.connect_timeout).await.map_err(|e| {
                    ExchangeError::Upstream(format!("reconnecting after a stale connection: {e}"))
                })?;
            }
            Err(Failure::Upstream(_, e)) => {
                return Err(ExchangeError::Upstream(e));
            }
            Err(Failure::Body(e)) => return Err(ExchangeError::Body(e)),
        }
    }
}

async fn connect(up: &Upstream, timeout: Duration) -> Result<TcpStream, ExchangeError> {
    let host = up
        .authority()
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = up.authority().port_u16().unwrap_or(80);
    let conn = match crate::timers::timeout(timeout, TcpStream::connect((host, port))).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(ExchangeError::Connect(e)),
        Err(_) => {
            return Err(ExchangeError::Connect(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no connection within {timeout:?}"),
            )))
        }
    };
    conn.set_nodelay(true).map_err(ExchangeError::Connect)?;
    Ok(conn)
}

/// The request head, and whether the body goes chunked.
fn request_head(up: &Upstream, req: &Outgoing<'_>) -> (Bytes, bool) {
    let mut out = Vec::with_capacity(512);
    http1::write_request_line(req.method.as_str(), req.path, &mut out);
    let mut line = |name: &[u8], value: &[u8]| http1::write_header(name, value, &mut out);
    if !req.headers.contains_key(HOST) {
        line(b"host", up.authority().as_str().as_bytes());
    }
    for (name, value) in req.headers {
        line(name.as_str().as_bytes(), value.as_bytes());
    }
    // Framing as hyper's client decides it: the client's Content-Length, else the body's exact
    // size, else chunked; no body, no framing header.
    let mut chunked = false;
    if !req.headers.contains_key(CONTENT_LENGTH) && !req.body.is_end_stream() {
        match req.body.size_hint().exact() {
            Some(n) => line(b"content-length", n.to_string().as_bytes()),
            None => {
                line(TRANSFER_ENCODING.as_str().as_bytes(), b"chunked");
                chunked = true;
            }
        }
    }
    out.extend_from_slice(b"\r\n");
    (Bytes::from(out), chunked)
}

/// How one attempt on one connection failed.
enum Failure {
    /// The upstream side broke; [`Broke::resend`] says whether a new connection may try again.
    Upstream(Broke, String),
    Body(TapError),
}

type Head = (StatusCode, HeaderMap, Decoder, bool);

/// The request on its way: what has been sent of its body, kept until the response head so a
/// stale connection can be replaced and the request sent again whole.
struct Sending<'a> {
    head: Bytes,
    chunked: bool,
    /// Body frames sent so far (refcounted, no copy).
    sent: Vec<Bytes>,
    body: &'a mut UpBody,
    body_done: bool,
}

impl Sending<'_> {
    /// Writes the head, the body frames sent so far (on a retry) and the rest of the body.
    async fn send(&mut self, conn: &mut TcpStream) -> Result<(), Failure> {
        let stale = |e: io::Error| {
            Failure::Upstream(Broke::BeforeResponse, format!("sending the request: {e}"))
        };
        // The head goes with the first body frame (or with everything sent before, on a retry).
        let mut pending = vec![self.head.clone()];
        for f in &self.sent {
            encode(&mut pending, f, self.chunked);
        }
        while !self.body_done {
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(d) = frame.into_data() {
                        if !d.is_empty() {
                            encode(&mut pending, &d, self.chunked);
                            self.sent.push(d);
                        }
                    }
                    self.body_done = self.body.is_end_stream();
                }
                Some(Err(e)) => return Err(Failure::Body(e)),
                None => self.body_done = true,
            }
            if !self.body_done {
                write_all(conn, &pending).await.map_err(stale)?;
                pending.clear();
            }
        }
        if self.chunked {
            pending.push(Bytes::from_static(b"0\r\n\r\n"));
        }
        write_all(conn, &pending).await.map_err(stale)
    }
}

/// Reads the response head (skipping 1xx interim responses) into `buf`; what follows it stays
/// in `buf` for the body.
async fn read_head(
    conn: &mut TcpStream,
    buf: &mut BytesMut,
    head_request: bool,
) -> Result<Head, Failure> {
    let mut got = 0usize;
    loop {
        if !buf.is_empty() {
            if let Some((len, status, headers, h)) = parse_response_head(buf)? {
                buf.advance(len);
                if (100..200).contains(&h.status) && h.status != 101 {
                    continue; // 100 Continue, 103 Early Hints: the final response follows.
                }
                let framing = if head_request {
                    Framing::Empty
                } else {
                    h.framing
                };
                let keep_alive = h.keep_alive && h.status != 101;
                return Ok((status, headers, Decoder::new(framing), keep_alive));
            }
        }
        if buf.capacity() - buf.len() < MIN_READ {
            buf.reserve(READ_BUF);
        }
        match conn.read_buf(buf).await {
            Ok(0) => {
                let broke = Broke::after(got);
                let why = match broke {
                    Broke::BeforeResponse => "upstream closed the connection before responding",
                    Broke::InResponse => "upstream closed the connection inside the response head",
                };
                return Err(Failure::Upstream(broke, why.into()));
            }
            Ok(n) => got += n,
            Err(e) => {
                let why = format!("reading the response: {e}");
                return Err(Failure::Upstream(Broke::after(got), why));
            }
        }
    }
}

/// A complete response head at the start of `buf`, with its headers as a `HeaderMap`.
#[allow(clippy::type_complexity)]
fn parse_response_head(
    buf: &[u8],
) -> Result<Option<(usize, StatusCode, HeaderMap, http1::Head)>, Failure> {
    let mut headers = HeaderMap::new();
    let mut bad: Option<String> = None;
    let parsed = http1::parse_head_with(buf, |name, value| {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(value),
        ) {
            (Ok(n), Ok(v)) => {
                headers.append(n, v);
            }
            _ => bad = Some(format!("upstream sent an invalid header {name:?}")),
        }
    })
    .map_err(|e| Failure::Upstream(Broke::InResponse, format!("upstream response: {e}")))?;
    let Some((len, h)) = parsed else {
        return Ok(None);
    };
    if let Some(b) = bad {
        return Err(Failure::Upstream(Broke::InResponse, b));
    }
    let status = StatusCode::from_u16(h.status).map_err(|_| {
        let why = format!("upstream sent status {}", h.status);
        Failure::Upstream(Broke::InResponse, why)
    })?;
    Ok(Some((len, status, headers, h)))
}

/// Appends one body frame, chunk-encoded if `chunked`.
fn encode(out: &mut Vec<Bytes>, data: &Bytes, chunked: bool) {
    if chunked {
        out.push(Bytes::from(format!("{:x}\r\n", data.len())));
        out.push(data.clone());
        out.push(Bytes::from_static(b"\r\n"));
    } else {
        out.push(data.clone());
    }
}

async fn write_all(conn: &mut TcpStream, parts: &[Bytes]) -> io::Result<()> {
    let parts: Vec<&[u8]> = parts.iter().map(|b| &b[..]).collect();
    http1::write_all_vectored(conn, &parts).await
}

/// The upstream response body, read by whoever polls it.
pub struct H1Body {
    conn: Option<TcpStream>,
    buf: BytesMut,
    decoder: Decoder,
    keep_alive: bool,
    pool: Arc<Pool>,
    /// Malformed framing found after data that was still to be handed out.
    broken: Option<io::Error>,
    /// The previous read buffer, kept to read into again once the frames cut from it have been
    /// written to the client (see [`H1Body::make_room`]).
    spare: BytesMut,
}

impl H1Body {
    /// Room for the next read, without allocating on the steady path. Frames are slices of the
    /// read buffer, so when it fills up its frames may still sit in hyper's write queue and
    /// `reserve` would allocate a new buffer every ~16 KiB. Instead two buffers take turns: the
    /// full one becomes the spare, and by the time the other fills up, the spare's frames have
    /// long been written and dropped, so it is reclaimed in place.
    fn make_room(&mut self) {
        // Everything read so far has been handed out and written (hyper copies each frame into
        // its write buffer and drops it): the next read goes to the buffer's start again, into
        // memory the last chunk warmed, rather than walking the buffer on to cold lines. At
        // 1 paced stream beside nginx: 7 % less CPU per chunk (docs/benchmarks.md).
        if self.buf.is_empty() && self.buf.try_reclaim(READ_BUF) {
            return;
        }
        if self.buf.capacity() - self.buf.len() >= MIN_READ || self.buf.try_reclaim(READ_BUF) {
            return;
        }
        self.spare.clear();
        let mut next = if self.spare.try_reclaim(READ_BUF) {
            std::mem::take(&mut self.spare)
        } else {
            BytesMut::with_capacity(READ_BUF)
        };
        next.extend_from_slice(&self.buf); // what is left of a partly read piece
        let mut old = std::mem::replace(&mut self.buf, next);
        old.clear();
        self.spare = old;
    }

    /// Decodes every whole piece of body data in the buffer and moves them, in order, to the
    /// buffer's front, over the framing between them: all that one read brought becomes one
    /// frame, and the client gets it as one chunk, as nginx sends it (each frame costs hyper a
    /// chunk header and a pass through its dispatcher). Returns the bytes used and the bytes of
    /// data now at the front. Malformed framing after some data is kept in `broken` and ends the
    /// body once that data is out.
    fn gather(&mut self) -> (usize, usize) {
        let (mut used, mut data) = (0, 0);
        while used < self.buf.len() {
            let (n, piece) = match self.decoder.next_piece(&self.buf[used..]) {
                Ok(p) => p,
                Err(e) => {
                    self.broken = Some(io::Error::new(io::ErrorKind::InvalidData, e));
                    break;
                }
            };
            if let Some(r) = piece {
                let (from, len) = (used + r.start, r.len());
                if from != data {
                    self.buf.copy_within(from..from + len, data);
                }
                data += len;
            }
            if n == 0 {
                break;
            }
            used += n;
        }
        (used, data)
    }

    /// Ends the body with `e`; the connection is closed.
    fn fail(&mut self, e: io::Error) -> Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>> {
        self.conn = None;
        Poll::Ready(Some(Err(UpstreamBodyError::Io(e))))
    }

    /// Once the body is complete, the connection goes back to the pool (if it may).
    fn release_if_done(&mut self) {
        if self.decoder.is_done() {
            if let Some(c) = self.conn.take() {
                if self.keep_alive && self.buf.is_empty() {
                    self.pool.put(c);
                }
            }
        }
    }
}

impl Body for H1Body {
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>> {
        let this = &mut *self;
        loop {
            if this.decoder.is_done() {
                this.release_if_done();
                return Poll::Ready(None);
            }
            if let Some(e) = this.broken.take() {
                return this.fail(e);
            }
            if !this.buf.is_empty() {
                let (used, data) = this.gather();
                if data > 0 {
                    // The pieces were moved to the front of what was used.
                    let frame = this.buf.split_to(used).freeze().slice(..data);
                    this.release_if_done();
                    return Poll::Ready(Some(Ok(Frame::data(frame))));
                }
                this.buf.advance(used);
                if let Some(e) = this.broken.take() {
                    return this.fail(e);
                }
                if used > 0 {
                    continue;
                }
            }
            this.make_room();
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            match ready!(tokio_util::io::poll_read_buf(
                Pin::new(conn),
                cx,
                &mut this.buf
            )) {
                Ok(0) if this.decoder.until_close() => {
                    this.conn = None;
                    this.decoder = Decoder::new(Framing::Empty);
                    return Poll::Ready(None);
                }
                Ok(0) => {
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "upstream closed the connection before the end of the body",
                    );
                    return this.fail(e);
                }
                Ok(_) => {}
                Err(e) => return this.fail(e),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.decoder.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        match self.decoder.length_left() {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}
