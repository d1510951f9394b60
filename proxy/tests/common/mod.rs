//! Shared helpers of the proxy's end-to-end tests: topologies on 127.0.0.1:0 (sim ← proxy ←
//! client), a small streaming client that stamps every frame it receives, and a few raw-TCP
//! upstreams for faults the sim cannot produce (refuse, reset before the head, never answer,
//! split events).
#![allow(dead_code)]

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;
use tokentap_core::clock;
use tokentap_proxy::{Config, Proxy};
use tokentap_sim::{SimConfig, SimServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

pub type TestClient = Client<HttpConnector, Full<Bytes>>;

pub fn client() -> TestClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .build(c)
}

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
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub version: http::Version,
    pub body: Vec<u8>,
    /// Monotonic instant each frame arrived at the client, with its length.
    pub frames: Vec<(u64, usize)>,
    /// The body broke (the stream was cut).
    pub error: Option<String>,
}

impl Got {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
}

pub fn chat(stream: bool, max_tokens: u64, extra: serde_json::Value) -> Bytes {
    let mut v = serde_json::json!({
        "model": "tokentap-sim",
        "messages": [
            {"role": "system", "content": "You are a test."},
            {"role": "user", "content": "Say something, please, at length."}
        ],
        "max_completion_tokens": max_tokens,
        "stream": stream,
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            o.insert(k.clone(), x.clone());
        }
    }
    Bytes::from(serde_json::to_vec(&v).unwrap())
}

pub fn post(url: &str, body: Bytes, session: Option<&str>) -> Request<Full<Bytes>> {
    let mut b = Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .header("authorization", "Bearer secret-key");
    if let Some(s) = session {
        b = b.header("x-session-id", s);
    }
    b.body(Full::new(body)).unwrap()
}

/// [`post`] to `/v1/chat/completions` under a base URL.
pub fn post_chat(base: &str, body: Bytes, session: Option<&str>) -> Request<Full<Bytes>> {
    post(&format!("{base}/v1/chat/completions"), body, session)
}

/// Sends and reads the whole body, stamping each frame on arrival.
pub async fn send<C>(c: &Client<C, Full<Bytes>>, req: Request<Full<Bytes>>) -> Got
where
    C: hyper_util::client::legacy::connect::Connect + Clone + Send + Sync + 'static,
{
    let resp = c.request(req).await.expect("response head");
    let (parts, mut body) = resp.into_parts();
    let mut out = Got {
        status: parts.status,
        headers: parts.headers,
        version: parts.version,
        body: Vec::new(),
        frames: Vec::new(),
        error: None,
    };
    loop {
        match body.frame().await {
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    out.frames.push((clock::now(), d.len()));
                    out.body.extend_from_slice(&d);
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

pub fn sim_cfg() -> SimConfig {
    let mut c = SimConfig::zero_delay();
    c.output.always_max = true;
    c
}

pub async fn sim(cfg: SimConfig) -> SimServer {
    SimServer::start(cfg).await.expect("sim starts")
}

pub fn proxy_cfg(upstreams: &[String]) -> Config {
    let mut c = Config::new(upstreams.iter().cloned());
    c.keep_records = true;
    c
}

pub async fn proxy(cfg: Config) -> Proxy {
    Proxy::start(cfg).await.expect("proxy starts")
}

/// An address nothing listens on (bound, then closed): connections are refused.
pub async fn dead_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    format!("http://{a}")
}

/// Accepts, reads the request head, then closes without answering (the connection breaks
/// before a response head).
pub async fn closing_upstream() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                drop(s);
            });
        }
    });
    format!("http://{a}")
}

/// Accepts and never answers.
pub async fn silent_upstream() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    format!("http://{a}")
}

/// Answers every request with `pieces` written one by one (each flushed, TCP_NODELAY, a short
/// pause between them so they travel as separate segments) as a chunked SSE body.
pub async fn split_upstream(pieces: Vec<&'static [u8]>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let pieces = pieces.clone();
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = vec![0u8; 65536];
                let mut got = Vec::new();
                // Read the head and the content-length body.
                loop {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    if let Some(p) = find(&got, b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&got[..p]).to_ascii_lowercase();
                        let cl = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if got.len() >= p + 4 + cl {
                            break;
                        }
                    }
                }
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await;
                for p in pieces {
                    let _ = s.write_all(format!("{:x}\r\n", p.len()).as_bytes()).await;
                    let _ = s.write_all(p).await;
                    let _ = s.write_all(b"\r\n").await;
                    let _ = s.flush().await;
                    // Pacing, not synchronisation: the test passes whether or not the pieces
                    // coalesce; the pause only makes the split case the likely one.
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                let _ = s.write_all(b"0\r\n\r\n").await;
                let _ = s.flush().await;
            });
        }
    });
    format!("http://{a}")
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Replaces the value of every `"created":N` so two sims' bodies can be compared byte for byte
/// (`created` is the wall-clock second, the one field a second sim cannot reproduce).
pub fn mask_created(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let mut out = String::with_capacity(s.len());
    let mut rest = &s[..];
    while let Some(i) = rest.find("\"created\":") {
        let (a, b) = rest.split_at(i + 10);
        out.push_str(a);
        let end = b.find(|c: char| !c.is_ascii_digit()).unwrap_or(b.len());
        out.push('N');
        rest = &b[end..];
    }
    out.push_str(rest);
    out
}

/// GET on the admin listener, as JSON or text.
pub async fn admin_get(p: &Proxy, path: &str) -> (StatusCode, String) {
    let c = client();
    let req = Request::get(format!("http://{}{}", p.admin_addr(), path))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let g = send(&c, req).await;
    (g.status, g.text())
}

/// Fails the test instead of hanging when an awaited event never comes.
pub async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the awaited event never happened")
}
