//! Server behaviours the sim does not produce, served by a few lines of raw HTTP on a real
//! socket: a server that closes every keep-alive connection after one response, one that
//! answers a streaming request with a plain JSON body, one whose keep-alive close races the
//! next request, interim 1xx responses, chunk framing split anywhere, close-delimited bodies.
//! Plus `--shard` against the sim.

use tokentap_testkit::replay::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TWO_TURNS: &str = r#"{"conversation_id":"e","turn":1,"role":"user","content":"a"}
{"conversation_id":"e","turn":2,"role":"assistant","content":"b"}
{"conversation_id":"e","turn":3,"role":"user","content":"c"}
"#;

/// Reads one request (head + Content-Length body); returns its head, or `None` on EOF.
async fn read_request(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut chunk).await.unwrap();
                assert!(n > 0);
                buf.extend_from_slice(&chunk[..n]);
            }
            return Some(String::from_utf8_lossy(&buf[..end]).into_owned());
        }
        let n = s.read(&mut chunk).await.unwrap();
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Serves one fixed 200 response to every request; closes the connection after each response
/// when `close`. Reports each request head on the channel.
async fn serve(
    close: bool,
    content_type: &str,
    body: &str,
) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let response: std::sync::Arc<str> = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            let response = response.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                while let Some(head) = read_request(&mut s).await {
                    let _ = tx.send(head);
                    s.write_all(response.as_bytes()).await.unwrap();
                    if close {
                        // No `Connection: close`: the client only learns by the socket closing.
                        return;
                    }
                }
            });
        }
    });
    (url, rx)
}

const SSE: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

fn cfg(url: &str, name: &str) -> tokentap_replay::RunOpts {
    let mut c = tokentap_replay::RunOpts::new(url).unwrap();
    c.model = Some("m".into());
    c.out = Some(temp_dir(name));
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_keep_alive_connection_is_replaced() {
    let (url, mut heads) = serve(true, "text/event-stream", SSE).await;
    let (_, recs) = run(cfg(&url, "reconnect"), dataset(TWO_TURNS)).await;
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|r| status(r) == "ok"), "{recs:?}");
    heads.recv().await.unwrap();
    heads.recv().await.unwrap();
}

/// What a scripted server does with request `r` (0-based, over all connections) that arrived
/// on connection `c`.
#[derive(Clone, Debug)]
enum Act {
    /// Write these byte pieces, one write each; keep the connection.
    Answer(Vec<String>),
    /// Write the pieces, then close.
    AnswerClose(Vec<String>),
    /// Read the request, answer nothing, close (a keep-alive timeout racing the request).
    Drop,
}

/// A server following `script(c, r)`; reports (connection, request head) per request.
async fn scripted(
    script: fn(usize, usize) -> Act,
) -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<(usize, String)>,
) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    tokio::spawn(async move {
        for c in 0.. {
            let (mut s, _) = l.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            let (tx, requests) = (tx.clone(), requests.clone());
            tokio::spawn(async move {
                while let Some(head) = read_request(&mut s).await {
                    let r = requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _ = tx.send((c, head));
                    match script(c, r) {
                        Act::Answer(parts) => {
                            for p in parts {
                                s.write_all(p.as_bytes()).await.unwrap();
                            }
                        }
                        Act::AnswerClose(parts) => {
                            for p in parts {
                                s.write_all(p.as_bytes()).await.unwrap();
                            }
                            return;
                        }
                        Act::Drop => return,
                    }
                }
            });
        }
    });
    (url, rx)
}

fn sse_chunked() -> Vec<String> {
    let ev = |d: &str| format!("data: {d}\n\n");
    let body = [
        ev(r#"{"choices":[{"index":0,"delta":{"content":"hel"}}]}"#),
        ev(r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#),
        ev("[DONE]"),
    ];
    let mut wire = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    for b in &body {
        wire += &format!("{:x};ext=1\r\n{b}\r\n", b.len());
    }
    wire += "0\r\nx-trailer: 1\r\n\r\n";
    wire.into_bytes()
        .chunks(7)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keep_alive_close_racing_the_next_request_is_retried_once_on_a_fresh_connection() {
    // Connection 0 answers turn 1, then drops turn 2 unanswered; connection 1 answers it.
    let (url, mut heads) = scripted(|_, r| match r {
        1 => Act::Drop,
        _ => Act::Answer(sse_chunked()),
    })
    .await;
    let (_, recs) = run(cfg(&url, "race"), dataset(TWO_TURNS)).await;
    let recs = sorted(recs);
    assert!(recs.iter().all(|r| status(r) == "ok"), "{recs:?}");
    assert_eq!(recs[0].get("retries"), None);
    assert_eq!(recs[1]["retries"], 1);
    let conns: Vec<usize> = (0..3).map(|_| heads.try_recv().unwrap().0).collect();
    assert_eq!(conns, [0, 0, 1]);
    assert!(heads.try_recv().is_err(), "exactly three requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_connection_closed_after_an_interim_response_is_not_resent() {
    // Connection 0 answers turn 1, then answers turn 2 with `100 Continue` and closes: a response
    // byte came back, so by the one stale-connection rule (core::http1::Broke, the proxy's too)
    // the request is not sent again.
    let (url, mut heads) = scripted(|_, r| match r {
        1 => Act::AnswerClose(vec!["HTTP/1.1 100 Continue\r\n\r\n".into()]),
        _ => Act::Answer(sse_chunked()),
    })
    .await;
    let (_, recs) = run(cfg(&url, "interim-close"), dataset(TWO_TURNS)).await;
    let recs = sorted(recs);
    assert_eq!(status(&recs[0]), "ok");
    assert_eq!(status(&recs[1]), "failed", "{recs:?}");
    assert_eq!(recs[1].get("retries"), None);
    assert_eq!(recs[1]["error"]["kind"], "reset");
    let conns: Vec<usize> = (0..2).map(|_| heads.try_recv().unwrap().0).collect();
    assert_eq!(conns, [0, 0]);
    assert!(heads.try_recv().is_err(), "turn 2 was sent once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_connection_closed_without_an_answer_is_not_retried() {
    let (url, mut heads) = scripted(|_, _| Act::Drop).await;
    let (_, recs) = run(cfg(&url, "fresh-drop"), dataset(TWO_TURNS)).await;
    let recs = sorted(recs);
    assert_eq!(status(&recs[0]), "failed");
    assert_eq!(recs[0].get("retries"), None);
    assert!(
        recs[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("closed before any response byte"),
        "{}",
        recs[0]
    );
    assert_eq!(status(&recs[1]), "aborted");
    heads.recv().await.unwrap();
    assert!(heads.try_recv().is_err(), "one request only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interim_responses_split_chunk_framing_and_close_delimited_bodies_are_read() {
    // Turn 1: 103 Early Hints, then a chunked stream written 7 bytes at a time (with chunk
    // extensions and a trailer). Turn 2: no length, no chunking: the body ends at close.
    let (url, mut heads) = scripted(|_, r| match r {
        0 => {
            let mut parts = vec!["HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n".to_string()];
            parts.extend(sse_chunked());
            Act::Answer(parts)
        }
        _ => Act::AnswerClose(vec![
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".into(),
            SSE.into(),
        ]),
    })
    .await;
    let (_, recs) = run(cfg(&url, "framing"), dataset(TWO_TURNS)).await;
    let recs = sorted(recs);
    for r in &recs {
        assert_eq!(status(r), "ok", "{r}");
        assert_eq!(r["done"], true, "{r}");
        assert_eq!(r["finish_reason"], "stop", "{r}");
        assert_eq!(r["rx_clock"], "kernel", "{r}");
        assert!(u(&r["ttft_ns"]) <= u(&r["e2e_ns"]));
    }
    assert_eq!(recs[0]["chunks"].as_array().unwrap().len(), 2);
    assert_eq!(recs[0]["output_tokens"], 2);
    // The chunked response was complete, so turn 2 reused connection 0.
    let conns: Vec<usize> = (0..2).map(|_| heads.try_recv().unwrap().0).collect();
    assert_eq!(conns, [0, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_head_is_exactly_the_specified_headers_with_the_key() {
    let (url, mut heads) = serve(false, "text/event-stream", SSE).await;
    let mut c = cfg(&url, "head");
    c.api_key = Some(tokentap_replay::config::Secret::new("sk-edge-secret"));
    let (out, _) = run(c, dataset(TWO_TURNS)).await;
    let head = heads.recv().await.unwrap();
    let mut lines = head.split("\r\n");
    assert_eq!(lines.next(), Some("POST /v1/chat/completions HTTP/1.1"));
    let mut names: Vec<String> = Vec::new();
    for l in lines {
        let (n, v) = l.split_once(": ").unwrap();
        let n = n.to_ascii_lowercase();
        match n.as_str() {
            "authorization" => assert_eq!(v, "Bearer sk-edge-secret"),
            "x-session-id" => assert_eq!(v, "e"),
            "accept" => assert_eq!(v, "text/event-stream"),
            "content-type" => assert_eq!(v, "application/json"),
            _ => {}
        }
        names.push(n);
    }
    names.sort();
    assert_eq!(
        names,
        [
            "accept",
            "authorization",
            "content-length",
            "content-type",
            "host",
            "x-session-id"
        ]
    );
    let dir = out.out_dir.unwrap();
    for f in ["records.jsonl", "summary.json", "config.json"] {
        assert!(!std::fs::read_to_string(dir.join(f))
            .unwrap()
            .contains("edge-secret"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_json_answer_is_read_for_usage_and_finish_reason() {
    const JSON: &str = "{\"object\":\"chat.completion\",\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"x\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":7}}";
    let (url, _conns) = serve(false, "application/json", JSON).await;
    let (_, recs) = run(cfg(&url, "json"), dataset(TWO_TURNS)).await;
    for r in &recs {
        assert_eq!(status(r), "ok");
        assert_eq!(r["output_tokens"], 7);
        assert_eq!(r["output_tokens_source"], "usage");
        assert_eq!(r["finish_reason"], "length");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_issue_disjoint_parts_of_the_same_fifo() {
    let sim = sim_with(|_| {}).await;
    let mut text = String::new();
    for i in 0..3 {
        text.push_str(&format!(
            "{{\"conversation_id\":\"s{i}\",\"turn\":1,\"role\":\"user\",\"content\":\"q\"}}\n"
        ));
    }
    let mut seen = Vec::new();
    for index in 0..2 {
        let mut c = config(&sim, "shard");
        c.trajectories = Some(7);
        c.shard = tokentap_replay::config::Shard { index, count: 2 };
        c.concurrency = 2;
        let (out, recs) = run(c, dataset(&text)).await;
        assert_eq!(
            out.summary.run.trajectory_budget,
            if index == 0 { 4 } else { 3 }
        );
        for r in recs {
            let k = u(&r["trajectory"]);
            assert_eq!(k % 2, index);
            // Same FIFO numbering as a single process: conversation k mod 3, pass k div 3 + 1.
            let want = if k < 3 {
                format!("s{}", k % 3)
            } else {
                format!("s{}__repeat_{}", k % 3, k / 3 + 1)
            };
            assert_eq!(conv(&r), want);
            seen.push(k);
        }
    }
    seen.sort();
    assert_eq!(seen, (0..7).collect::<Vec<u64>>());
}
