//! The direct HTTP/1.1 upstream client (`--upstream-client direct`, the default for `http://`
//! upstreams), against a scripted raw-TCP upstream that does what real servers do and the sim
//! does not: close a kept-alive connection just as a request arrives, answer with a 1xx first,
//! delimit a body by closing, answer HEAD with a length and no body, send garbage.

use bytes::Bytes;
use futures_util::stream;
use http::{Method, Request};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use parking_lot::Mutex;
use serde_json::json;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokentap_core::http1::{Decoder, Framing};
use tokentap_core::record::{ErrorSource, Status};
use tokentap_proxy::config::UpstreamClient;
use tokentap_testkit::proxy::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as the upstream received it.
#[derive(Debug, Clone)]
struct Seen {
    /// Connection number (0 = first accepted).
    conn: usize,
    method: String,
    path: String,
    /// Header lines, names lower-cased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the upstream does with a request.
enum Act {
    /// Write these bytes, keep the connection.
    Answer(Vec<u8>),
    /// Write these bytes, then close.
    AnswerThenClose(Vec<u8>),
    /// Close without a byte.
    Close,
}

/// A raw HTTP/1.1 upstream run by a script: `(connection number, request number on it, the
/// request) → what to do`.
struct Scripted {
    url: String,
    conns: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    async fn start<F>(script: F) -> Scripted
    where
        F: Fn(usize, usize, &Seen) -> Act + Send + Sync + 'static,
    {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let conns = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(script);
        let (c, s) = (conns.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((sock, _)) = l.accept().await {
                let n = c.fetch_add(1, Ordering::SeqCst);
                let (s, script) = (s.clone(), script.clone());
                tokio::spawn(serve(sock, n, s, script));
            }
        });
        Scripted { url, conns, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }

    fn conns(&self) -> usize {
        self.conns.load(Ordering::SeqCst)
    }
}

async fn serve<F>(mut sock: TcpStream, conn: usize, seen: Arc<Mutex<Vec<Seen>>>, script: Arc<F>)
where
    F: Fn(usize, usize, &Seen) -> Act + Send + Sync + 'static,
{
    let mut buf: Vec<u8> = Vec::new();
    for nth in 0.. {
        let Some(req) = read_request(&mut sock, &mut buf, conn).await else {
            return;
        };
        seen.lock().push(req.clone());
        match script(conn, nth, &req) {
            Act::Answer(b) => {
                if sock.write_all(&b).await.is_err() {
                    return;
                }
            }
            Act::AnswerThenClose(b) => {
                let _ = sock.write_all(&b).await;
                return;
            }
            Act::Close => return,
        }
    }
}

/// Reads one request (head, then a `Content-Length` or chunked body). `None` at EOF.
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>, conn: usize) -> Option<Seen> {
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    buf.drain(..head_end);
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap().split(' ');
    let (method, path) = (
        first.next().unwrap().to_string(),
        first.next().unwrap().to_string(),
    );
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let mut req = Seen {
        conn,
        method,
        path,
        headers,
        body: Vec::new(),
    };
    let framing = if req.header("transfer-encoding") == Some("chunked") {
        Framing::Chunked
    } else {
        Framing::Length(
            req.header("content-length")
                .map_or(0, |v| v.parse().unwrap()),
        )
    };
    let mut d = Decoder::new(framing);
    while !d.is_done() {
        if buf.is_empty() {
            let n = sock.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let used = d.feed(buf, |s| req.body.extend_from_slice(s)).unwrap();
        buf.drain(..used);
    }
    Some(req)
}

fn json_ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn cfg(up: &Scripted, client: UpstreamClient) -> tokentap_proxy::Config {
    let mut c = proxy_cfg(std::slice::from_ref(&up.url));
    c.upstream_client = client;
    c
}

/// A server may close a kept-alive connection just as the next request reaches it (its idle
/// timer fired; uvicorn and llama.cpp do this at 5 s). No response byte came back, so the
/// request is sent again — same head, same body — on a new connection, and the client never
/// knows. hyper-util's client fails the request instead.
#[tokio::test]
async fn a_kept_alive_connection_closed_under_a_request_is_sent_again_on_a_new_one() {
    let script = |conn: usize, nth: usize, _: &Seen| match (conn, nth) {
        (0, 1) => Act::Close,
        _ => Act::Answer(json_ok(r#"{"ok":true}"#)),
    };
    let up = Scripted::start(script).await;
    let p = proxy(cfg(&up, UpstreamClient::Direct)).await;
    let c = client();
    let a = chat(false, 3, json!({"n": "first"}));
    let b = chat(false, 3, json!({"n": "second", "pad": "x".repeat(100_000)}));
    let got_a = send(&c, post_chat(&p.base_url(), a.clone(), Some("s"))).await;
    let got_b = send(&c, post_chat(&p.base_url(), b.clone(), Some("s"))).await;
    assert_eq!(
        (got_a.status.as_u16(), got_b.status.as_u16()),
        (200, 200),
        "{}",
        got_b.text()
    );
    assert_eq!(got_b.text(), r#"{"ok":true}"#);
    let seen = up.seen();
    let conns: Vec<usize> = seen.iter().map(|s| s.conn).collect();
    assert_eq!(
        conns,
        [0, 0, 1],
        "a on conn 0, b on the kept-alive conn 0, b again on conn 1"
    );
    assert_eq!(seen[0].body, a);
    assert_eq!(seen[1].body, b);
    assert_eq!(seen[2].body, b, "the retry carries the whole body again");
    let recs = within(p.wait_records(2)).await;
    assert!(recs.iter().all(|r| r.status == Status::Ok), "{recs:?}");
    assert!(
        p.metrics_text()
            .lines()
            .any(|l| l.starts_with("tokentap_upstream_errors_total{")
                && l.contains("kind=\"stale_connection\"")
                && l.ends_with(" 1")),
        "the race is counted"
    );

    // The same race through hyper-util's client: the request fails.
    let up = Scripted::start(script).await;
    let p = proxy(cfg(&up, UpstreamClient::Hyper)).await;
    assert_eq!(
        send(&c, post_chat(&p.base_url(), a, None)).await.status,
        200
    );
    assert_eq!(
        send(&c, post_chat(&p.base_url(), b, None)).await.status,
        502
    );
}

/// A body the client streams without a length (chunked over HTTP/1.1, plain DATA frames over
/// h2) goes upstream chunked, forwarded as it comes, and arrives whole.
#[tokio::test]
async fn a_streamed_body_without_a_length_goes_upstream_chunked() {
    let up =
        Scripted::start(|_, _, s: &Seen| Act::Answer(json_ok(&s.body.len().to_string()))).await;
    let p = proxy(cfg(&up, UpstreamClient::Direct)).await;
    let body = chat(false, 3, json!({}));
    let pieces: Vec<Bytes> = body.chunks(37).map(Bytes::copy_from_slice).collect();
    for h2 in [false, true] {
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        let c: Client<_, BoxBody<Bytes, Infallible>> = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .http2_only(h2)
            .build(conn);
        let frames = stream::iter(
            pieces
                .clone()
                .into_iter()
                .map(|b| Ok::<_, Infallible>(http_body::Frame::data(b))),
        );
        let req = Request::post(format!("{}/v1/chat/completions", p.base_url()))
            .header("content-type", "application/json")
            .body(BodyExt::boxed(StreamBody::new(frames)))
            .unwrap();
        let resp = c.request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let got = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(got, body.len().to_string(), "h2 {h2}");
    }
    let seen = up.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.header("transfer-encoding"), Some("chunked"));
        assert_eq!(s.header("content-length"), None);
        assert_eq!(s.body, body);
    }
    let recs = within(p.wait_records(2)).await;
    for r in recs {
        assert_eq!(r.request_bytes, Some(body.len() as u64));
        assert_eq!(r.messages, Some(2), "the streamed body was still sniffed");
    }
}

/// Sequential requests share one kept-alive connection; with a keep-alive of zero none is
/// reused.
#[tokio::test]
async fn idle_connections_are_reused_within_the_keepalive() {
    let up = Scripted::start(|_, _, _: &Seen| Act::Answer(json_ok("{}"))).await;
    let p = proxy(cfg(&up, UpstreamClient::Direct)).await;
    let one_after_another = |p: tokentap_proxy::Proxy, n: usize| async move {
        let c = client();
        for _ in 0..n {
            let got = send(
                &c,
                post_chat(&p.base_url(), chat(false, 1, json!({})), None),
            )
            .await;
            assert_eq!(got.status, 200);
        }
    };
    one_after_another(p, 4).await;
    assert_eq!(up.conns(), 1);

    let up = Scripted::start(|_, _, _: &Seen| Act::Answer(json_ok("{}"))).await;
    let mut cf = cfg(&up, UpstreamClient::Direct);
    cf.upstream_keepalive = std::time::Duration::ZERO;
    one_after_another(proxy(cf).await, 3).await;
    assert_eq!(up.conns(), 3);
}

/// Every way an HTTP/1.1 response can end: by closing, after a 1xx interim response, a HEAD
/// answer with a length and no body, a 204. Requests after each reuse the connection where the
/// protocol allows it, so a body mis-framed by the proxy would hang the next one.
#[tokio::test]
async fn response_framings_pass_through() {
    let up = Scripted::start(|_, _, s: &Seen| {
        match s.path.as_str() {
        "/close" => Act::AnswerThenClose(
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-type: text/plain\r\n\r\nuntil the end"
                .to_vec(),
        ),
        "/continue" => Act::Answer(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
        ),
        "/head" => Act::Answer(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n".to_vec()),
        "/nothing" => Act::Answer(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()),
        _ => Act::Answer(json_ok("{}")),
    }
    })
    .await;
    let p = proxy(cfg(&up, UpstreamClient::Direct)).await;
    let c = client();
    let req = |m: Method, path: &str| {
        Request::builder()
            .method(m)
            .uri(format!("{}{path}", p.base_url()))
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    let cases = [
        (Method::GET, "/close", 200, "until the end"),
        (Method::GET, "/continue", 200, "ok"),
        (Method::HEAD, "/head", 200, ""),
        (Method::GET, "/nothing", 204, ""),
        (Method::GET, "/after", 200, "{}"),
    ];
    let n = cases.len();
    for (m, path, status, body) in cases {
        let got = within(send(&c, req(m, path))).await;
        assert_eq!(
            (got.status.as_u16(), got.text().as_str()),
            (status, body),
            "{path}"
        );
        assert!(got.error.is_none(), "{path}: {:?}", got.error);
        if path == "/head" {
            assert_eq!(got.headers.get("content-length").unwrap(), "5");
        }
    }
    let recs = within(p.wait_records(n)).await;
    assert!(recs.iter().all(|r| r.status == Status::Ok), "{recs:?}");
    // /close ended its connection; /continue, /head, /nothing and /after shared the next one.
    assert_eq!(up.conns(), 2);
    let methods: Vec<String> = up.seen().into_iter().map(|s| s.method).collect();
    assert_eq!(methods, ["GET", "GET", "HEAD", "GET", "GET"]);
}

/// An upstream that answers garbage gets a 502; one that cuts a body short breaks the client's
/// stream after everything it did send. Both are recorded as the upstream's fault. With either
/// upstream client.
#[tokio::test]
async fn malformed_or_truncated_responses_are_the_upstreams_fault() {
    for which in [UpstreamClient::Direct, UpstreamClient::Hyper] {
        malformed_or_truncated(which).await;
    }
}

async fn malformed_or_truncated(which: UpstreamClient) {
    let up = Scripted::start(|_, _, s: &Seen| match s.path.as_str() {
        "/garbage" => Act::Answer(b"NOT HTTP AT ALL\r\n\r\n".to_vec()),
        _ => Act::AnswerThenClose(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"partial\":"
                .to_vec(),
        ),
    })
    .await;
    let p = proxy(cfg(&up, which)).await;
    let c = client();
    let got = send(
        &c,
        post(&format!("{}/garbage", p.base_url()), Bytes::new(), None),
    )
    .await;
    assert_eq!(got.status, 502);
    assert_eq!(got.json()["error"]["code"], "reset");
    let got = send(
        &c,
        post(&format!("{}/short", p.base_url()), Bytes::new(), None),
    )
    .await;
    assert_eq!(got.status, 200);
    assert!(got.error.is_some(), "the client sees a broken body");
    assert_eq!(
        got.text(),
        r#"{"partial":"#,
        "what upstream sent before breaking reaches the client"
    );
    let recs = within(p.wait_records(2)).await;
    for r in &recs {
        assert_eq!(r.status, Status::Failed, "{r:?}");
        let e = r.error.as_ref().unwrap();
        assert_eq!(
            (e.source, e.kind.as_str()),
            (ErrorSource::Upstream, "reset")
        );
    }
}

/// A chat stream's events as one chunked body, each event its own HTTP chunk.
fn chunked_events(events: &[String]) -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    for e in events {
        out.extend_from_slice(format!("{:x}\r\n{e}\r\n", e.len()).as_bytes());
    }
    out
}

fn token_event(i: usize) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"content": format!("t{i}")}, "finish_reason": null}]})
    )
}

/// Sends a streamed chat request over a raw connection and reads the response until the
/// proxy closes the connection or ends the body; returns the HTTP chunks' data, in order, and
/// whether the body ended with its last chunk.
async fn raw_chunks(base: &str, model: &str) -> (Vec<String>, bool) {
    let body = format!(
        r#"{{"model":"{model}","stream":true,"messages":[{{"role":"user","content":"hi"}}]}}"#
    );
    let mut sock = TcpStream::connect(base.trim_start_matches("http://"))
        .await
        .unwrap();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let (mut chunks, mut ended) = (Vec::new(), false);
    loop {
        let n = sock.read(&mut buf).await.unwrap_or(0);
        got.extend_from_slice(&buf[..n]);
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let mut d = Decoder::new(Framing::Chunked);
            chunks.clear();
            d.feed(&got[i + 4..], |s| {
                chunks.push(String::from_utf8_lossy(s).into_owned())
            })
            .unwrap();
            ended = d.is_done();
        }
        if n == 0 || ended {
            return (chunks, ended);
        }
    }
}

/// What one read from upstream brought goes to the client as one HTTP chunk (as nginx sends
/// it), the events in it each measured; framing that breaks after some data still lets that
/// data through, then ends the stream as the upstream's fault.
#[tokio::test]
async fn chunks_read_together_go_out_as_one() {
    let up = Scripted::start(|_, _, s: &Seen| {
        let mut events: Vec<String> = (0..3).map(token_event).collect();
        if String::from_utf8_lossy(&s.body).contains("broken") {
            let mut out = chunked_events(&events[..2]);
            out.extend_from_slice(b"zz\r\nnot framing\r\n");
            return Act::AnswerThenClose(out);
        }
        events.push("data: [DONE]\n\n".into());
        let mut out = chunked_events(&events);
        out.extend_from_slice(b"0\r\n\r\n");
        Act::Answer(out)
    })
    .await;
    let p = proxy(cfg(&up, UpstreamClient::Direct)).await;
    let (chunks, ended) = within(raw_chunks(&p.base_url(), "m")).await;
    assert!(ended);
    let all: String = (0..3).map(token_event).collect::<String>() + "data: [DONE]\n\n";
    assert_eq!(chunks, vec![all], "one chunk, every event in it");
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::Ok);
    assert_eq!(rec.measured.chunks.len(), 3, "{:?}", rec.measured.chunks);
    assert!(rec.measured.chunks.iter().all(|c| c.text));

    let (chunks, ended) = within(raw_chunks(&p.base_url(), "broken")).await;
    assert!(!ended, "the client sees a broken body");
    let two: String = (0..2).map(token_event).collect();
    assert_eq!(chunks.concat(), two, "the data before the break");
    let rec = within(p.wait_records(2)).await.remove(1);
    assert_eq!(rec.status, Status::Failed, "{rec:?}");
    let e = rec.error.as_ref().unwrap();
    assert_eq!(
        (e.source, e.kind.as_str()),
        (ErrorSource::Upstream, "reset")
    );
    assert_eq!(rec.measured.chunks.len(), 2);
}
