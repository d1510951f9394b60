//! One stamping client: every response body frame is stamped with [`clock::now`] as it
//! arrives — the clock the sim and the proxy stamp with — so a test can set a client's
//! arrival against a server's write.
//!
//! Two ways to send, one way to read ([`read_stamped`]):
//! - [`send`]: hyper-util's pooled client (keep-alive, h1 or h2), the view of a [`Got`];
//! - [`open`] / [`send_once`]: one hyper connection per request (abort the returned task to
//!   drop the TCP connection mid-response), the SSE view of a [`Resp`].

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde_json::Value;
use std::net::SocketAddr;
use tokentap_core::clock;
use tokentap_core::sse::Framer;

/// A response body as it arrived: the frames with their arrival instants.
#[derive(Debug, Default)]
pub struct Stamped {
    /// `clock::now()` when each data frame arrived, with the frame.
    pub frames: Vec<(u64, Bytes)>,
    /// The body broke (the stream was cut) instead of ending cleanly.
    pub error: Option<String>,
}

impl Stamped {
    /// Every frame's bytes, in order.
    pub fn bytes(&self) -> Vec<u8> {
        self.frames
            .iter()
            .flat_map(|(_, d)| d.iter().copied())
            .collect()
    }
}

/// Reads a whole body, stamping each data frame on arrival.
pub async fn read_stamped<B>(mut body: B) -> Stamped
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut out = Stamped::default();
    loop {
        match body.frame().await {
            Some(Ok(f)) => {
                let at = clock::now();
                if let Ok(d) = f.into_data() {
                    out.frames.push((at, d));
                }
            }
            Some(Err(e)) => {
                out.error = Some(e.to_string());
                break;
            }
            None => break,
        }
    }
    out
}

/// hyper-util's pooled client, as the tests use it.
pub type TestClient = Client<HttpConnector, Full<Bytes>>;

/// A pooled HTTP/1.1 client (`TCP_NODELAY`).
pub fn client() -> TestClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .build(c)
}

/// A pooled h2c (prior knowledge) client (`TCP_NODELAY`).
pub fn client_h2() -> TestClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .http2_only(true)
        .build(c)
}

/// What a client got.
#[derive(Debug)]
pub struct Got {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: http::HeaderMap,
    /// The HTTP version.
    pub version: http::Version,
    /// The body.
    pub body: Vec<u8>,
    /// Monotonic instant each frame arrived at the client, with its length.
    pub frames: Vec<(u64, usize)>,
    /// The body broke (the stream was cut).
    pub error: Option<String>,
}

impl Got {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
}

/// Sends on a pooled client and reads the whole body, stamping each frame on arrival.
pub async fn send<C>(c: &Client<C, Full<Bytes>>, req: Request<Full<Bytes>>) -> Got
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let resp = c.request(req).await.expect("response head");
    let (parts, body) = resp.into_parts();
    let s = read_stamped(body).await;
    Got {
        status: parts.status,
        headers: parts.headers,
        version: parts.version,
        body: s.bytes(),
        frames: s.frames.iter().map(|(t, d)| (*t, d.len())).collect(),
        error: s.error,
    }
}

/// One SSE event as the client saw it.
#[derive(Debug, Clone)]
pub struct Ev {
    /// `clock::now()` when the frame that completed the event arrived.
    pub at: u64,
    /// The event's data.
    pub data: String,
}

impl Ev {
    /// The data as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {}", self.data))
    }
}

/// A response read event by event.
#[derive(Debug)]
pub struct Resp {
    /// The status.
    pub status: u16,
    /// The headers.
    pub headers: http::HeaderMap,
    /// The body.
    pub body: Vec<u8>,
    /// The body's SSE events, stamped.
    pub events: Vec<Ev>,
    /// `clock::now()` when the request was handed to hyper.
    pub sent: u64,
    /// The body ended with an error (a broken stream) rather than cleanly.
    pub error: Option<String>,
}

impl Resp {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    /// Every event but `[DONE]` and invalid JSON (fault injection), parsed.
    pub fn chunks(&self) -> Vec<Value> {
        self.events
            .iter()
            .filter(|e| e.data != "[DONE]")
            .filter_map(|e| serde_json::from_str(&e.data).ok())
            .collect()
    }

    /// The stream ended with `[DONE]`.
    pub fn done(&self) -> bool {
        self.events.last().is_some_and(|e| e.data == "[DONE]")
    }

    /// Concatenated `delta.<field>` (or `text`) strings of every chunk.
    pub fn text_of(&self, field: &str) -> String {
        self.chunks()
            .iter()
            .filter_map(|c| {
                let ch = c["choices"].get(0)?;
                ch["delta"][field]
                    .as_str()
                    .or(ch[field].as_str())
                    .map(str::to_string)
            })
            .collect()
    }

    /// Instant of the first event carrying text, ns after the request was sent.
    pub fn ttft_ns(&self) -> u64 {
        let e = self
            .events
            .iter()
            .find(|e| {
                e.data != "[DONE]"
                    && tokentap_core::chunk::ChunkInfo::parse(e.data.as_bytes())
                        .map(|c| c.carries_text())
                        .unwrap_or(false)
            })
            .expect("a text chunk");
        e.at - self.sent
    }

    /// The final usage object.
    pub fn usage(&self) -> Value {
        self.chunks()
            .into_iter()
            .rev()
            .find(|c| c["usage"].is_object())
            .map(|c| c["usage"].clone())
            .expect("usage")
    }
}

/// Opens a connection and sends one request; returns the response head, the connection task
/// (abort it to drop the TCP connection) and the send instant.
pub async fn open(
    addr: SocketAddr,
    req: Request<Full<Bytes>>,
) -> (Response<Incoming>, tokio::task::JoinHandle<()>, u64) {
    try_open(addr, req).await.unwrap()
}

/// [`open`], with a failure before the response head as an error.
pub async fn try_open(
    addr: SocketAddr,
    req: Request<Full<Bytes>>,
) -> Result<(Response<Incoming>, tokio::task::JoinHandle<()>, u64), hyper::Error> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut tx, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    let sent = clock::now();
    let res = tx.send_request(req).await?;
    Ok((res, task, sent))
}

/// Reads a whole response event by event (events only for `text/event-stream`).
pub async fn read(res: Response<Incoming>, sent: u64) -> Resp {
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let s = read_stamped(res.into_body()).await;
    let is_sse = headers
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let mut events = Vec::new();
    if is_sse {
        let mut framer = Framer::new();
        for (at, d) in &s.frames {
            framer.feed(d, |e| {
                events.push(Ev {
                    at: *at,
                    data: String::from_utf8_lossy(e.data).into_owned(),
                })
            });
        }
    }
    Resp {
        status,
        headers,
        body: s.bytes(),
        events,
        sent,
        error: s.error,
    }
}

/// Sends one request on a fresh connection and reads the whole response.
pub async fn send_once(addr: SocketAddr, req: Request<Full<Bytes>>) -> Resp {
    let (res, task, sent) = open(addr, req).await;
    let r = read(res, sent).await;
    task.abort();
    r
}
