//! Hostile requests, each answered as a front-end server would and recorded: an
//! HTTP/1.1 request without a Host or with two (400, RFC 9112 §3.2), `CONNECT` (405, no tunnel),
//! session ids that are not ASCII (byte-exact) or not UTF-8 (percent-encoded), or 60 KB long
//! (cut, stable, counted), and a session table bounded in bytes that `/sessions` pages through.

use serde_json::Value;
use tokentap_core::record::{ErrorSource, Status};
use tokentap_testkit::proxy::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends raw bytes on a fresh connection; returns the whole response (the proxy closes after
/// `Connection: close`, or after an error answer).
async fn raw(p: &tokentap_proxy::Proxy, bytes: &[u8]) -> String {
    let mut s = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = within(s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn chat_request(session: &[u8]) -> Vec<u8> {
    let body = chat(false, 2, serde_json::json!({}));
    let mut r = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\nX-Session-ID: ",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(session);
    r.extend_from_slice(b"\r\n\r\n");
    r.extend_from_slice(&body);
    r
}

#[tokio::test]
async fn host_rules_and_connect_are_answered_and_recorded() {
    let s = sim(sim_cfg()).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    // Every counter a dashboard queries is there from the start, at 0.
    let (_, m) = admin_get(&p, "/metrics").await;
    for n in [
        format!(
            "tokentap_upstream_errors_total{{kind=\"busy\",upstream=\"{}\",source=\"wire\"}} 0",
            s.base_url()
        ),
        format!(
            "tokentap_upstream_requests_total{{upstream=\"{}\",source=\"wire\"}} 0",
            s.base_url()
        ),
        "tokentap_proxy_records_failed_total{source=\"wire\"} 0".to_string(),
        "tokentap_proxy_connections_closed_total{reason=\"header_timeout\",source=\"wire\"} 0"
            .to_string(),
    ] {
        assert!(m.contains(&n), "{n} missing:\n{m}");
    }
    let none = raw(&p, b"GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n").await;
    assert!(none.starts_with("HTTP/1.1 400"), "{none}");
    assert!(none.contains("bad_host"), "{none}");
    let two = raw(
        &p,
        b"GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(two.starts_with("HTTP/1.1 400"), "{two}");
    assert!(two.contains("2 Host headers"), "{two}");
    let connect = raw(
        &p,
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    )
    .await;
    assert!(connect.starts_with("HTTP/1.1 405"), "{connect}");
    assert!(
        connect.to_ascii_lowercase().contains("allow: get"),
        "{connect}"
    );
    // HTTP/1.0 may omit Host.
    let old = raw(&p, b"GET /v1/models HTTP/1.0\r\n\r\n").await;
    assert!(
        old.starts_with("HTTP/1.0 200") || old.starts_with("HTTP/1.1 200"),
        "{old}"
    );

    let recs = within(p.wait_records(4)).await;
    let kinds: Vec<Option<&str>> = recs
        .iter()
        .map(|r| r.error.as_ref().map(|e| e.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            Some("bad_host"),
            Some("bad_host"),
            Some("method_not_allowed"),
            None
        ]
    );
    for r in &recs[..3] {
        assert_eq!(r.status, Status::Failed);
        assert_eq!(r.error.as_ref().unwrap().source, ErrorSource::Downstream);
    }
    assert_eq!(recs[2].http_status, Some(405));
    // None of the refused requests reached the server: it saw the HTTP/1.0 one only.
    assert_eq!(s.log().len(), 1, "{:?}", s.log());
}

#[tokio::test]
async fn unusual_session_ids_are_kept_exactly_or_encoded_and_counted() {
    let s = sim(sim_cfg()).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let (_, m) = admin_get(&p, "/metrics").await;
    for k in ["non_ascii", "non_utf8", "too_long"] {
        assert!(
            m.contains(&format!(
                "tokentap_proxy_session_ids_unusual_total{{kind=\"{k}\",source=\"wire\"}} 0"
            )),
            "{k} not exported from the start:\n{m}"
        );
    }
    for id in [&b"caf\xc3\xa9-1"[..], b"bad\xff\xfe-2", &[b'L'; 60_000][..]] {
        let r = raw(&p, &chat_request(id)).await;
        assert!(r.starts_with("HTTP/1.1 200"), "{}", &r[..r.len().min(200)]);
    }
    let recs = within(p.wait_records(3)).await;
    let ids: Vec<&str> = recs
        .iter()
        .map(|r| r.conversation_id.as_deref().unwrap())
        .collect();
    assert_eq!(ids[0], "café-1", "non-ASCII UTF-8 kept byte-exact");
    assert_eq!(ids[1], "bad%FF%FE-2", "invalid bytes percent-encoded");
    assert!(ids[2].len() <= 256 && ids[2].starts_with("LLLL") && ids[2].contains('~'));
    let (_, m) = admin_get(&p, "/metrics").await;
    for k in ["non_ascii", "non_utf8", "too_long"] {
        assert!(
            m.contains(&format!(
                "tokentap_proxy_session_ids_unusual_total{{kind=\"{k}\",source=\"wire\"}} 1"
            )),
            "{k}:\n{m}"
        );
    }
    // The session table holds the short id, and pages.
    let (_, page) = admin_get(&p, "/sessions?limit=2").await;
    let page: Value = serde_json::from_str(&page).unwrap();
    assert_eq!(page.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn the_session_table_is_bounded_in_bytes_under_a_flood_of_long_ids() {
    let s = sim(sim_cfg()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.max_session_bytes = 256 << 10;
    cfg.max_session_id_bytes = 4096;
    let p = proxy(cfg).await;
    for i in 0..300 {
        let id = format!("{i:04}{}", "z".repeat(8_000));
        let r = raw(&p, &chat_request(id.as_bytes())).await;
        assert!(r.starts_with("HTTP/1.1 200"));
    }
    within(p.wait_records(300)).await;
    // 300 sessions of ~4 KB ids against a 256 KiB table: about 60 kept, the rest evicted.
    let mut n = 0;
    let mut after = String::new();
    loop {
        let (_, body) = admin_get(&p, &format!("/sessions?limit=16&after={after}")).await;
        let page: Value = serde_json::from_str(&body).unwrap();
        let page = page.as_array().unwrap();
        n += page.len();
        if page.len() < 16 {
            break;
        }
        after = page.last().unwrap()["id"].as_str().unwrap().to_string();
    }
    assert!(n < 80 && n > 20, "{n} sessions kept in a 256 KiB table");
    let (_, m) = admin_get(&p, "/metrics").await;
    assert!(m.contains(
        "tokentap_proxy_session_ids_unusual_total{kind=\"too_long\",source=\"wire\"} 300"
    ));
}

#[tokio::test]
async fn silent_and_idle_connections_are_closed_at_the_header_timeout() {
    let s = sim(sim_cfg()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.header_timeout = std::time::Duration::from_millis(300);
    let p = proxy(cfg).await;
    // Never a byte: closed (EOF), counted, no record.
    let mut silent = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    let mut buf = [0u8; 16];
    let n = within(silent.read(&mut buf)).await.unwrap_or(0);
    assert_eq!(n, 0, "the proxy must close a silent connection");
    let (_, m) = admin_get(&p, "/metrics").await;
    assert!(
        m.contains(
            "tokentap_proxy_connections_closed_total{reason=\"header_timeout\",source=\"wire\"} 1"
        ),
        "{m}"
    );
    // One request on a kept-alive connection, then idle: closed too.
    let mut kept = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    kept.write_all(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        let n = within(kept.read(&mut b)).await.unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&b[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert_eq!(within(p.wait_records(1)).await.len(), 1);
}

/// Streamed (a chat request) or read whole before it goes upstream (a Messages request without a
/// session header, whose body may name one; `--inject-usage`): a body that stalls is answered 408
/// and recorded either way.
#[tokio::test]
async fn a_stalled_request_body_is_answered_408_and_recorded() {
    let s = sim(sim_cfg()).await;
    for (path, session, inject) in [
        ("/v1/chat/completions", "X-Session-ID: slow\r\n", false),
        ("/v1/messages", "", false),
        ("/v1/chat/completions", "X-Session-ID: slow\r\n", true),
    ] {
        let mut cfg = proxy_cfg(&[s.base_url()]);
        cfg.body_timeout = std::time::Duration::from_millis(300);
        cfg.inject_usage = inject;
        let p = proxy(cfg).await;
        let mut c = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
        // 1,000 bytes announced, 10 sent, then nothing (the connection stays open).
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n{session}\r\n{{\"model\":"
        );
        c.write_all(head.as_bytes()).await.unwrap();
        let mut b = vec![0u8; 4096];
        let n = within(c.read(&mut b)).await.unwrap();
        let text = String::from_utf8_lossy(&b[..n]);
        assert!(text.starts_with("HTTP/1.1 408"), "{path} {inject}: {text}");
        assert!(text.contains("request_body_timeout"), "{text}");
        let recs = within(p.wait_records(1)).await;
        let e = recs[0].error.as_ref().unwrap();
        assert_eq!(
            (e.source, e.kind.as_str()),
            (ErrorSource::Downstream, "request_body_timeout")
        );
        assert_eq!(recs[0].http_status, Some(408));
        if !session.is_empty() {
            assert_eq!(recs[0].conversation_id.as_deref(), Some("slow"));
        }
    }
}

/// Most requests the sim was serving at once.
fn peak_concurrency(log: &[tokentap_sim::RequestLog]) -> usize {
    let mut ev: Vec<(u64, i32)> = Vec::new();
    for l in log {
        let end = l.chunks.last().map_or(l.received.mono_ns, |c| c.mono_ns);
        ev.push((l.received.mono_ns, 1));
        ev.push((end, -1));
    }
    ev.sort();
    let (mut cur, mut peak) = (0i32, 0i32);
    for (_, d) in ev {
        cur += d;
        peak = peak.max(cur);
    }
    peak as usize
}

fn slow_sim() -> tokentap_sim::SimConfig {
    let mut c = sim_cfg();
    c.timing.decode_ms = 20.0;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_h2_connection_gets_at_most_its_stream_limit_upstream() {
    let s = sim(slow_sim()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.max_concurrent_streams = 16;
    let p = proxy(cfg).await;
    let c = client_h2();
    let url = format!("{}/v1/chat/completions", p.base_url());
    // One request first, so the client has the proxy's SETTINGS (the stream
    // limit) before it opens the rest: streams opened before that are refused
    // (REFUSED_STREAM, the h2 way of saying "retry"), which hyper's client
    // surfaces as an error instead of retrying.
    let first = send(
        &c,
        post(&url, chat(true, 1, serde_json::json!({})), Some("h2-first")),
    )
    .await;
    assert_eq!(first.status, 200);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..64 {
        let (c, url) = (c.clone(), url.clone());
        tasks.spawn(async move {
            send(
                &c,
                post(
                    &url,
                    chat(true, 8, serde_json::json!({})),
                    Some(&format!("h2-{i}")),
                ),
            )
            .await
        });
    }
    while let Some(g) = tasks.join_next().await {
        let g = g.unwrap();
        assert_eq!(g.status, 200);
        assert_eq!(g.version, http::Version::HTTP_2);
    }
    let peak = peak_concurrency(&s.log());
    assert!(
        peak <= 16,
        "one h2 connection drove {peak} concurrent upstream requests"
    );
    assert_eq!(within(p.wait_records(65)).await.len(), 65);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_connections_are_capped_with_a_queue_then_503() {
    // A queue long enough: everything is served, never more than 4 at once.
    let s = sim(slow_sim()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.max_upstream_connections = 4;
    let p = proxy(cfg).await;
    let c = client();
    let url = format!("{}/v1/chat/completions", p.base_url());
    let run = |n: usize| {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..n {
            let (c, url) = (c.clone(), url.clone());
            tasks.spawn(async move {
                send(
                    &c,
                    post(
                        &url,
                        chat(true, 10, serde_json::json!({})),
                        Some(&format!("q-{i}")),
                    ),
                )
                .await
            });
        }
        tasks
    };
    let mut t = run(12);
    while let Some(g) = t.join_next().await {
        assert_eq!(g.unwrap().status, 200);
    }
    let peak = peak_concurrency(&s.log());
    assert!(
        peak <= 4,
        "{peak} upstream requests at once with a cap of 4"
    );
    within(p.wait_records(12)).await;

    // A short queue: what waits longer than it is answered 503 and recorded.
    let s = sim(slow_sim()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.max_upstream_connections = 4;
    cfg.upstream_queue_timeout = std::time::Duration::from_millis(50);
    let p = proxy(cfg).await;
    let url = format!("{}/v1/chat/completions", p.base_url());
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12 {
        let (c, url) = (c.clone(), url.clone());
        tasks.spawn(async move {
            send(
                &c,
                post(
                    &url,
                    chat(true, 10, serde_json::json!({})),
                    Some(&format!("b-{i}")),
                ),
            )
            .await
        });
    }
    let (mut ok, mut busy) = (0, 0);
    while let Some(g) = tasks.join_next().await {
        let g = g.unwrap();
        match g.status.as_u16() {
            200 => ok += 1,
            503 => {
                assert_eq!(g.json()["error"]["code"], "upstream_busy");
                busy += 1;
            }
            other => panic!("status {other}"),
        }
    }
    assert!(ok >= 4 && busy >= 1, "{ok} ok, {busy} busy");
    assert!(peak_concurrency(&s.log()) <= 4);
    let recs = within(p.wait_records(12)).await;
    let busy_recs = recs
        .iter()
        .filter(|r| r.error.as_ref().is_some_and(|e| e.kind == "upstream_busy"))
        .count();
    assert_eq!(busy_recs, busy);
}

#[tokio::test]
async fn connections_over_the_limit_are_closed_and_counted() {
    let s = sim(sim_cfg()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.max_connections = 2;
    let p = proxy(cfg).await;
    // Two silent connections hold both slots (until the header timeout).
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(tokio::net::TcpStream::connect(p.addr()).await.unwrap());
    }
    // A third one is closed at once: EOF, counted.
    let mut third = tokio::net::TcpStream::connect(p.addr()).await.unwrap();
    let mut b = [0u8; 8];
    assert_eq!(within(third.read(&mut b)).await.unwrap_or(0), 0);
    let (_, m) = admin_get(&p, "/metrics").await;
    assert!(
        m.contains(
            "tokentap_proxy_connections_closed_total{reason=\"over_limit\",source=\"wire\"} 1"
        ),
        "{m}"
    );
    // Once they go, a real client gets in.
    drop(held);
    // (The proxy sees them close when their peek returns; until then a try may be closed too.)
    let g = within(async {
        loop {
            let r = raw(
                &p,
                b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .await;
            if !r.is_empty() {
                break r;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(g.starts_with("HTTP/1.1 200"), "{g}");
}
