//! Every upstream and client fault with its record (refused, reset, silent, error status,
//! broken or malformed stream, client gone, oversized request): the proxy answers what it must
//! (502/504/431/413 with a JSON error body, or the upstream's own status), the client sees what
//! it would see without the proxy, and one record per request says whose fault it was.

use bytes::Bytes;
use futures_util::StreamExt;
use http::Request;
use http_body_util::{BodyExt, StreamBody};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;
use std::time::Duration;
use tokentap_core::record::{ErrorSource, Status, TurnRecord};
use tokentap_sim::SimConfig;
use tokentap_testkit::proxy::*;

fn url(p: &tokentap_proxy::Proxy) -> String {
    format!("{}/v1/chat/completions", p.base_url())
}

fn err_of(r: &TurnRecord) -> (ErrorSource, &str) {
    let e = r.error.as_ref().expect("an error");
    (e.source, e.kind.as_str())
}

#[tokio::test]
async fn refused_upstream_is_a_502_with_a_json_error_and_a_record() {
    let p = proxy(proxy_cfg(&[dead_addr().await])).await;
    let got = send(
        &client(),
        post(&url(&p), chat(true, 3, json!({})), Some("s1")),
    )
    .await;
    assert_eq!(got.status, 502);
    let v = got.json();
    assert_eq!(v["error"]["type"], "proxy_error");
    assert_eq!(v["error"]["code"], "connect");
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::Failed);
    assert_eq!(rec.http_status, Some(502));
    assert_eq!(err_of(&rec), (ErrorSource::Upstream, "connect"));
    assert_eq!(rec.conversation_id.as_deref(), Some("s1"));
    assert!(p
        .metrics_text()
        .lines()
        .any(|l| l.starts_with("tokentap_upstream_errors_total{")
            && l.contains("kind=\"connect\"")
            && l.contains("source=\"wire\"")
            // Exported at 0 from the start: the refusal must have counted.
            && !l.ends_with(" 0")));
}

#[tokio::test]
async fn upstream_closing_before_the_head_is_a_502_reset() {
    let p = proxy(proxy_cfg(&[closing_upstream().await])).await;
    let got = send(&client(), post(&url(&p), chat(true, 3, json!({})), None)).await;
    assert_eq!(got.status, 502);
    assert_eq!(got.json()["error"]["code"], "reset");
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(err_of(&rec), (ErrorSource::Upstream, "reset"));
}

#[tokio::test]
async fn silent_upstream_times_out_with_a_504() {
    let mut cfg = proxy_cfg(&[silent_upstream().await]);
    cfg.upstream_timeout = Duration::from_millis(200);
    let p = proxy(cfg).await;
    let got = send(&client(), post(&url(&p), chat(true, 3, json!({})), None)).await;
    assert_eq!(got.status, 504);
    assert_eq!(got.json()["error"]["code"], "timeout");
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::TimedOut);
    assert_eq!(err_of(&rec), (ErrorSource::Upstream, "timeout"));
    assert!(rec.measured.e2e_ns.unwrap() >= 200_000_000);
}

#[tokio::test]
async fn client_gone_mid_stream_cancels_upstream_and_records_what_arrived() {
    let mut cfg = sim_cfg();
    cfg.timing.decode_ms = 10.0;
    let s = sim(cfg).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let c = client();
    let resp = c
        .request(post(&url(&p), chat(true, 200, json!({})), Some("gone")))
        .await
        .unwrap();
    let mut body = resp.into_body();
    // Read until the first token arrived, then walk away.
    let mut seen = 0;
    while seen < 3 {
        let f = body.frame().await.unwrap().unwrap();
        if f.is_data() {
            seen += 1;
        }
    }
    drop(body);
    drop(c);
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::Cancelled);
    assert_eq!(err_of(&rec), (ErrorSource::Downstream, "client_gone"));
    assert!(rec.measured.ttft_ns.is_some(), "what had arrived is kept");
    let n = rec.measured.chunks.len();
    assert!((1..200).contains(&n), "{n} chunks");
    // The upstream request was cancelled: the sim saw its body dropped before the end.
    within(s.wait_finished(1)).await;
    let log = s.log();
    assert!(!log[0].finished);
    assert!(log[0].output_tokens < 200);
}

#[tokio::test]
async fn upstream_error_status_is_forwarded_and_recorded() {
    let mut cfg = sim_cfg();
    cfg.faults.error_rate = 1.0;
    cfg.faults.error_statuses = vec![503];
    let s = sim(cfg).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let got = send(&client(), post(&url(&p), chat(true, 3, json!({})), None)).await;
    assert_eq!(got.status, 503);
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::Failed);
    assert_eq!(rec.http_status, Some(503));
    assert_eq!(err_of(&rec), (ErrorSource::Upstream, "http_status"));
}

#[tokio::test]
async fn mid_stream_disconnect_breaks_the_client_stream_and_is_recorded() {
    let mut cfg = sim_cfg();
    cfg.faults.disconnect_rate = 1.0;
    let s = sim(cfg).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let got = send(&client(), post(&url(&p), chat(true, 50, json!({})), None)).await;
    assert_eq!(got.status, 200);
    assert!(
        got.error.is_some(),
        "the client sees a broken stream, not a clean end"
    );
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::Failed);
    assert_eq!(err_of(&rec), (ErrorSource::Upstream, "reset"));
    assert!(!rec.measured.done);
}

#[tokio::test]
async fn malformed_sse_passes_byte_for_byte_and_is_counted() {
    let mut cfg = sim_cfg();
    cfg.faults.malformed_rate = 1.0;
    let direct = sim(cfg.clone()).await;
    let behind = sim(cfg).await;
    let p = proxy(proxy_cfg(&[behind.base_url()])).await;
    let body = chat(true, 6, json!({}));
    let a = send(&client(), post_chat(&direct.base_url(), body.clone(), None)).await;
    let b = send(&client(), post(&url(&p), body, None)).await;
    assert_eq!(mask_created(&a.body), mask_created(&b.body));
    assert!(b.text().contains("data: {\"choices\":[{\"delta\":\n"));
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.measured.malformed_events, 1);
    assert!(p
        .metrics_text()
        .contains("tokentap_proxy_malformed_events_total{source=\"wire\"} 1"));
}

#[tokio::test]
async fn oversized_headers_and_bodies_get_431_and_413_with_records() {
    let s = sim(sim_cfg()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.max_header_bytes = 2048;
    cfg.max_body_bytes = 4096;
    let p = proxy(cfg).await;
    let c = client();
    let mut big = post(&url(&p), chat(true, 3, json!({})), None);
    big.headers_mut()
        .insert("x-big", "a".repeat(3000).parse().unwrap());
    let g = send(&c, big).await;
    assert_eq!(g.status, 431);
    assert_eq!(g.json()["error"]["code"], "headers_too_large");
    let huge = chat(true, 3, json!({"pad": "x".repeat(5000)}));
    let g = send(&c, post(&url(&p), huge, None)).await;
    assert_eq!(g.status, 413);
    // Without a Content-Length (chunked upload) the limit is enforced while streaming.
    let chunks: Vec<Result<http_body::Frame<Bytes>, std::io::Error>> = (0..10)
        .map(|_| Ok(http_body::Frame::data(Bytes::from(vec![b' '; 1000]))))
        .collect();
    let streamed = StreamBody::new(futures_util::stream::iter(chunks).boxed());
    let sc: Client<_, _> = Client::builder(TokioExecutor::new()).build_http();
    let req = Request::post(url(&p))
        .header("content-type", "application/json")
        .body(streamed)
        .unwrap();
    let resp = sc.request(req).await.unwrap();
    assert_eq!(resp.status(), 413);
    let recs = within(p.wait_records(3)).await;
    let kinds: Vec<_> = recs.iter().map(|r| err_of(r).1.to_string()).collect();
    assert_eq!(
        kinds,
        ["headers_too_large", "body_too_large", "body_too_large"]
    );
    assert!(recs
        .iter()
        .all(|r| r.error.as_ref().unwrap().source == ErrorSource::Downstream));
    // Declared sizes are refused before contacting the server; a chunked upload streams (the
    // proxy never holds a body back), so the server sees that one request's body break.
    let log = s.log();
    assert!(log.len() <= 1, "{log:?}");
    assert!(log.iter().all(|l| l.status != 200));
}

/// Any number of headers within `--max-header-bytes` is forwarded and recorded (hyper alone
/// would stop at 100 with an empty 431 and no record); past the byte limit, a JSON 431 and a
/// record. Past what hyper can index (24,576 header lines, or twice the byte limit) hyper
/// answers its own empty 431 before the proxy sees the request — and the proxy still records it.
#[tokio::test]
async fn many_headers_are_forwarded_and_recorded_up_to_the_byte_limit() {
    let s = sim(sim_cfg()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.max_header_bytes = 256 << 10;
    let p = proxy(cfg).await;
    let c = client();
    for n in [101usize, 10_000] {
        let mut req = post(&url(&p), chat(true, 3, json!({})), None);
        for i in 0..n {
            req.headers_mut().append(
                http::HeaderName::from_bytes(format!("x-{}", i % 50).as_bytes()).unwrap(),
                "1".parse().unwrap(),
            );
        }
        let g = send(&c, req).await;
        assert_eq!(g.status, 200, "{n} headers: {}", g.text());
    }
    // Past --max-header-bytes (256 KiB here): the proxy's own JSON 431, recorded.
    let mut req = post(&url(&p), chat(true, 3, json!({})), None);
    for i in 0..20_000 {
        req.headers_mut().append(
            format!("x-{}", i % 50).parse::<http::HeaderName>().unwrap(),
            "1234567890".parse().unwrap(),
        );
    }
    let g = send(&c, req).await;
    assert_eq!(g.status, 431);
    assert_eq!(g.json()["error"]["code"], "headers_too_large");
    let recs = within(p.wait_records(3)).await;
    assert_eq!(recs.len(), 3);
    assert_eq!(err_of(&recs[2]).1, "headers_too_large");
    // 30,000 header lines (within the bytes, past what hyper indexes): hyper's own 431, which
    // the client may not even read (the connection closes while it still writes) — recorded.
    let mut head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\n",
        p.addr()
    );
    for i in 0..30_000 {
        head.push_str(&format!("x-{}: 1\r\n", i % 50));
    }
    head.push_str("content-length: 2\r\n\r\n{}");
    let mut sock = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    let (mut rd, mut wr) = sock.split();
    let (_, got) = tokio::join!(
        async {
            let _ = tokio::io::AsyncWriteExt::write_all(&mut wr, head.as_bytes()).await;
        },
        async {
            let mut got = Vec::new();
            let _ = tokio::io::AsyncReadExt::read_to_end(&mut rd, &mut got).await;
            got
        }
    );
    let got = String::from_utf8_lossy(&got);
    assert!(got.is_empty() || got.starts_with("HTTP/1.1 431"), "{got}");
    let recs = within(p.wait_records(4)).await;
    assert_eq!(recs.len(), 4);
    assert_eq!(err_of(&recs[3]).1, "headers_too_large");
    let msg = &recs[3].error.as_ref().unwrap().message;
    assert!(msg.contains("refused unread by the HTTP layer"), "{msg}");
    assert_eq!(recs[3].http_status, Some(431));
    let m = p.metrics_text();
    assert!(
        m.lines()
            .any(|l| l.starts_with("tokentap_proxy_requests_seen_total") && l.ends_with(" 4")),
        "{m}"
    );
}

/// Under load with every fault injected at once, and clients walking away, the proxy writes
/// exactly one record per request it saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_with_faults_records_equal_requests() {
    let mut cfg = SimConfig::zero_delay();
    cfg.timing.decode_ms = 0.2;
    cfg.faults.error_rate = 0.1;
    cfg.faults.disconnect_rate = 0.1;
    cfg.faults.malformed_rate = 0.1;
    cfg.faults.stall_rate = 0.05;
    cfg.faults.stall_ms = 50;
    let s = sim(cfg).await;
    let p = proxy(proxy_cfg(&[s.base_url(), dead_addr().await])).await;
    const N: usize = 240;
    let c = client();
    let u = url(&p);
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let c = c.clone();
            let u = u.clone();
            tokio::spawn(async move {
                let sess = format!("load-{}", i % 40);
                let req = post(&u, chat(true, 20, json!({})), Some(&sess));
                let Ok(resp) = c.request(req).await else {
                    return;
                };
                let mut body = resp.into_body();
                // Every 7th client walks away after its first frame.
                let quit = i % 7 == 0;
                while let Some(f) = body.frame().await {
                    if f.is_err() || quit {
                        break;
                    }
                }
            })
        })
        .collect();
    // Bounded concurrency comes from the pool; all requests are issued at once.
    for t in tasks {
        t.await.unwrap();
    }
    let report = within(p.shutdown(Duration::from_secs(5))).await;
    assert_eq!(report.seen, N as u64);
    assert_eq!(report.written, N as u64, "{report:?}");
    assert_eq!(report.dropped, 0);
}

#[tokio::test]
async fn a_stream_that_goes_silent_is_cut_after_the_idle_timeout() {
    let mut cfg = sim_cfg();
    cfg.faults.stall_rate = 1.0;
    cfg.faults.stall_ms = 5_000;
    let s = sim(cfg).await;
    let mut pc = proxy_cfg(&[s.base_url()]);
    pc.upstream_idle_timeout = Duration::from_millis(300);
    let p = proxy(pc).await;
    let t0 = tokio::time::Instant::now();
    let got = send(&client(), post(&url(&p), chat(true, 40, json!({})), None)).await;
    assert!(got.error.is_some(), "the client sees the stream cut");
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "the 5 s stall was not waited out"
    );
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::TimedOut);
    assert_eq!(err_of(&rec), (ErrorSource::Upstream, "idle_timeout"));
    assert!(
        rec.measured.ttfb_ns.is_some(),
        "what came before the stall is kept"
    );
    // The upstream request was cancelled.
    within(s.wait_finished(1)).await;
    assert!(!s.log()[0].finished);
}

/// The idle limit is between two chunks, not the stream's length: a stream three times as long
/// as the limit, a chunk every fifth of it, is forwarded whole (the timer is armed again after
/// it fires while chunks still come).
#[tokio::test]
async fn a_slow_stream_that_keeps_sending_is_not_cut() {
    let mut cfg = sim_cfg();
    cfg.timing.decode_ms = 60.0;
    cfg.output.always_max = true;
    let s = sim(cfg).await;
    let mut pc = proxy_cfg(&[s.base_url()]);
    pc.upstream_idle_timeout = Duration::from_millis(300);
    let p = proxy(pc).await;
    let got = send(&client(), post(&url(&p), chat(true, 15, json!({})), None)).await;
    assert!(got.error.is_none(), "{:?}", got.error);
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::Ok, "{:?}", rec.error);
    assert!(
        rec.measured.e2e_ns.unwrap_or(0) > 600_000_000,
        "the stream outlasted the limit twice: {:?}",
        rec.measured.e2e_ns
    );
}

/// A client that leaves once the response's end event reached it, before the server closed the
/// stream (Codex does on `response.completed`): the turn is whole, `ok` — not cancelled.
#[tokio::test]
async fn a_client_leaving_after_the_end_event_has_a_whole_turn() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut got = Vec::new();
                // The request: head and its declared body.
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if got.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let events = concat!(
                    "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
                    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"hi\"}\n\n",
                    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":1,\"total_tokens\":6}}}\n\n",
                );
                let _ = s
                    .write_all(format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n", events.len()).as_bytes())
                    .await;
                let _ = s.flush().await;
                // The stream stays open: the server has not closed it yet.
                std::future::pending::<()>().await;
            });
        }
    });
    let p = proxy(proxy_cfg(&[format!("http://{a}")])).await;
    let c = client();
    let body = Bytes::from(json!({"model": "m", "input": "hi", "stream": true}).to_string());
    let resp = c
        .request(post(
            &format!("{}/v1/responses", p.base_url()),
            body,
            Some("codex"),
        ))
        .await
        .unwrap();
    let mut body = resp.into_body();
    let mut seen = String::new();
    while !seen.contains("response.completed") {
        let f = body.frame().await.unwrap().unwrap();
        if let Some(d) = f.data_ref() {
            seen.push_str(&String::from_utf8_lossy(d));
        }
    }
    drop(body);
    drop(c);
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::Ok, "{:?}", rec.error);
    assert!(rec.error.is_none());
    assert_eq!(rec.measured.output_tokens, Some(1));
}

/// `--record-content` with an output past `--max-event-bytes`: the output is let go, the
/// request is still recorded and the record says why the output is missing.
#[tokio::test]
async fn an_oversized_output_keeps_its_request_in_the_content() {
    let mut cfg = sim_cfg();
    cfg.output.mean_tokens = 600.0;
    cfg.output.sigma = 0.0;
    let s = sim(cfg).await;
    let mut pc = proxy_cfg(&[s.base_url()]);
    pc.record_content = true;
    pc.max_event_bytes = 1024;
    let p = proxy(pc).await;
    let got = send(
        &client(),
        post(&url(&p), chat(true, 600, json!({})), Some("big")),
    )
    .await;
    assert_eq!(got.status, 200);
    let rec = within(p.wait_records(1)).await.remove(0);
    assert_eq!(rec.status, Status::Ok);
    let content = rec.content.expect("content");
    assert!(content["request"]["messages"].is_array(), "{content}");
    assert!(
        content["output_omitted"]
            .as_str()
            .is_some_and(|w| w.contains("--max-event-bytes (1024 bytes)")),
        "{content}"
    );
    assert!(content.get("output").is_none());
    assert!(rec.oversized_events.is_some());
}
