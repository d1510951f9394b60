//! A small real HTTP client for the sim's tests: hyper's connection-level client over a
//! loopback `TcpStream`, one connection per request, each response frame stamped on arrival
//! with the same monotonic clock the sim stamps with.
#![allow(dead_code)]

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::Value;
use std::net::SocketAddr;
use tokentap_core::clock;
use tokentap_core::sse::Framer;

/// One SSE event as the client saw it.
#[derive(Debug, Clone)]
pub struct Ev {
    /// `clock::now()` when the frame that completed the event arrived.
    pub at: u64,
    pub data: String,
}

impl Ev {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {}", self.data))
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
    pub events: Vec<Ev>,
    /// `clock::now()` when the request was handed to hyper.
    pub sent: u64,
    /// The body ended with an error (a broken stream) rather than cleanly.
    pub error: Option<String>,
}

impl Resp {
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

pub fn chat_request(body: &Value) -> Request<Full<Bytes>> {
    post("/v1/chat/completions", body)
}

pub fn post(path: &str, body: &Value) -> Request<Full<Bytes>> {
    Request::post(path)
        .header("content-type", "application/json")
        .header("host", "sim")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

pub fn get(path: &str) -> Request<Full<Bytes>> {
    Request::get(path)
        .header("host", "sim")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// Opens a connection and sends one request; returns the response head and the connection
/// task (abort it to drop the TCP connection).
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

/// Reads a whole response, stamping frames as they arrive.
pub async fn read(res: Response<Incoming>, sent: u64) -> Resp {
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let mut body = res.into_body();
    let mut framer = Framer::new();
    let mut raw = Vec::new();
    let mut events = Vec::new();
    let mut error = None;
    loop {
        match body.frame().await {
            Some(Ok(f)) => {
                let at = clock::now();
                if let Ok(d) = f.into_data() {
                    raw.extend_from_slice(&d);
                    framer.feed(&d, |e| {
                        events.push(Ev {
                            at,
                            data: String::from_utf8_lossy(e.data).into_owned(),
                        })
                    });
                }
            }
            Some(Err(e)) => {
                error = Some(e.to_string());
                break;
            }
            None => break,
        }
    }
    let is_sse = headers
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !is_sse {
        events.clear();
    }
    Resp {
        status,
        headers,
        body: raw,
        events,
        sent,
        error,
    }
}

/// Sends one request on a fresh connection and reads the whole response.
pub async fn send(addr: SocketAddr, req: Request<Full<Bytes>>) -> Resp {
    let (res, task, sent) = open(addr, req).await;
    let r = read(res, sent).await;
    task.abort();
    r
}

pub async fn chat(addr: SocketAddr, body: Value) -> Resp {
    send(addr, chat_request(&body)).await
}

/// A user message of exactly `bytes` bytes of text.
pub fn text(bytes: usize, seed: u64) -> String {
    let mut s = tokentap_core::text::filler(seed, bytes);
    s.truncate(bytes);
    s
}
