//! The client must not be able to tell the proxy is there: byte-identical bodies with and
//! without it (also with `--inject-usage`), hop-by-hop headers handled per RFC 9110, h2 and TLS
//! on both sides.
//!
//! Two sims with the same config and the same request sequence produce the same bytes except
//! `created` (the wall-clock second), which [`mask_created`] blanks on both sides.

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;
use std::path::PathBuf;
use tokentap_core::record::Status;
use tokentap_core::timeline::TokenSource;
use tokentap_proxy::config::UpstreamClient;
use tokentap_sim::SimConfig;
use tokentap_testkit::proxy::*;

fn rich() -> SimConfig {
    let mut c = sim_cfg();
    c.modes.reasoning_fraction = 0.3;
    c.modes.tokens_per_chunk = 2;
    c.capture_bodies = true;
    c
}

fn variants() -> Vec<Bytes> {
    vec![
        chat(true, 9, json!({})),
        chat(true, 9, json!({"stream_options": {"include_usage": true}})),
        chat(
            true,
            9,
            json!({"stream_options": {"include_usage": true, "continuous_usage_stats": true}}),
        ),
        chat(false, 9, json!({})),
    ]
}

/// With either upstream client: the proxy's own HTTP/1.1 client (the default) and hyper-util's.
#[tokio::test]
async fn bodies_are_byte_identical_with_and_without_the_proxy() {
    for up in [UpstreamClient::Direct, UpstreamClient::Hyper] {
        byte_identical(up).await;
    }
}

async fn byte_identical(up: UpstreamClient) {
    let direct = sim(rich()).await;
    let behind = sim(rich()).await;
    let mut cfg = proxy_cfg(&[behind.base_url()]);
    cfg.upstream_client = up;
    let p = proxy(cfg).await;
    let c = client();
    for (i, body) in variants().into_iter().enumerate() {
        let a = send(&c, post_chat(&direct.base_url(), body.clone(), Some("s"))).await;
        let b = send(&c, post_chat(&p.base_url(), body.clone(), Some("s"))).await;
        assert_eq!(a.status, b.status);
        assert!(a.body.len() > 100, "variant {i}");
        assert_eq!(
            mask_created(&a.body),
            mask_created(&b.body),
            "variant {i}, {up:?}"
        );
        assert_eq!(a.headers.get("content-type"), b.headers.get("content-type"));
    }
    // And the request the server got through the proxy is the client's, byte for byte.
    let sent: Vec<_> = behind.log().into_iter().map(|l| l.body.unwrap()).collect();
    assert_eq!(sent, variants());
    assert_eq!(p.wait_records(4).await.len(), 4);
}

#[tokio::test]
async fn inject_usage_measures_tokens_yet_the_client_gets_the_direct_bytes() {
    let direct = sim(rich()).await;
    let behind = sim(rich()).await;
    let mut cfg = proxy_cfg(&[behind.base_url()]);
    cfg.inject_usage = true;
    cfg.inject_continuous_usage = true;
    let p = proxy(cfg).await;
    let c = client();
    for (i, body) in variants().into_iter().enumerate() {
        let a = send(&c, post_chat(&direct.base_url(), body.clone(), None)).await;
        let b = send(&c, post_chat(&p.base_url(), body.clone(), None)).await;
        assert_eq!(mask_created(&a.body), mask_created(&b.body), "variant {i}");
    }
    let recs = p.wait_records(4).await;
    let log = behind.log();
    // Variant 0 asked for nothing: the server was asked for usage and continuous usage...
    let sent0: serde_json::Value = serde_json::from_slice(log[0].body.as_ref().unwrap()).unwrap();
    assert_eq!(sent0["stream_options"]["include_usage"], true);
    assert_eq!(sent0["stream_options"]["continuous_usage_stats"], true);
    // ...so the record has exact server tokens per chunk, and says it injected.
    assert_eq!(recs[0].usage_injected, Some(true));
    assert_eq!(
        recs[0].measured.chunk_tokens_source,
        TokenSource::ContinuousUsage
    );
    assert_eq!(recs[0].measured.prompt_tokens, Some(log[0].prompt_tokens));
    assert_eq!(recs[0].measured.output_tokens, Some(9));
    // Variant 2 already asked for everything: nothing injected, body forwarded as sent.
    assert_eq!(recs[2].usage_injected, Some(false));
    assert_eq!(log[2].body.as_ref().unwrap(), &variants()[2]);
    // Non-streaming: never rewritten.
    assert_eq!(recs[3].usage_injected, Some(false));
    assert!(recs.iter().all(|r| r.status == Status::Ok));
}

#[tokio::test]
async fn hop_by_hop_headers_are_dropped_and_the_rest_forwarded() {
    let s = sim(rich()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.via = true;
    cfg.record_headers = vec![
        http::HeaderName::from_static("x-keep"),
        http::HeaderName::from_static("authorization"),
    ];
    let p = proxy(cfg).await;
    let req = Request::post(format!("{}/v1/chat/completions", p.base_url()))
        .header("content-type", "application/json")
        .header("connection", "x-drop")
        .header("x-drop", "1")
        .header("keep-alive", "timeout=5")
        .header("proxy-authorization", "Basic abc")
        .header("x-keep", "yes")
        .header("authorization", "Bearer secret-key")
        .header("x-session-id", "sess")
        .body(Full::new(chat(true, 3, json!({}))))
        .unwrap();
    let got = send(&client(), req).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers.get("via").unwrap(), "1.1 tokentap");
    let log = s.log();
    let h = &log[0].headers;
    let get = |n: &str| h.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(get("x-keep"), Some("yes"));
    assert_eq!(get("x-session-id"), Some("sess"));
    assert_eq!(get("x-drop"), None);
    assert_eq!(get("keep-alive"), None);
    assert_eq!(get("proxy-authorization"), None);
    assert_eq!(get("via"), Some("1.1 tokentap"));
    assert_eq!(get("host"), Some(s.addr().to_string().as_str()));
    let rec = p.wait_records(1).await.remove(0);
    assert_eq!(rec.headers.get("x-keep").map(String::as_str), Some("yes"));
    assert!(
        !rec.headers.contains_key("authorization"),
        "authorization is never recorded"
    );
    let line = serde_json::to_string(&rec).unwrap();
    assert!(!line.contains("secret-key"));
}

#[tokio::test]
async fn h2c_on_both_sides() {
    let direct = sim(rich()).await;
    let behind = sim(rich()).await;
    let up = behind.base_url().replace("http://", "h2c://");
    let p = proxy(proxy_cfg(&[up])).await;
    let body = chat(true, 9, json!({"stream_options": {"include_usage": true}}));
    let a = send(&client(), post_chat(&direct.base_url(), body.clone(), None)).await;
    let b = send(&client_h2(), post_chat(&p.base_url(), body, None)).await;
    assert_eq!(b.version, http::Version::HTTP_2);
    assert_eq!(mask_created(&a.body), mask_created(&b.body));
    let rec = p.wait_records(1).await.remove(0);
    assert_eq!(rec.status, Status::Ok);
    assert_eq!(rec.measured.output_tokens, Some(9));
    // h2 on the upstream side too.
    let log = behind.log();
    assert!(log[0].headers.iter().all(|(k, _)| k != "connection"));
}

fn certs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/certs")
}

#[tokio::test]
async fn tls_with_alpn_h2_downstream_and_an_https_upstream() {
    let direct = sim(rich()).await;
    let behind = sim(rich()).await;
    // Inner proxy serves TLS in front of the sim...
    let mut inner_cfg = proxy_cfg(&[behind.base_url()]);
    inner_cfg.tls_cert = Some(certs().join("server.pem"));
    inner_cfg.tls_key = Some(certs().join("server.key"));
    let inner = proxy(inner_cfg).await;
    // ...and the outer proxy reaches it over https, trusting the test CA.
    let mut outer_cfg = proxy_cfg(&[format!("https://localhost:{}", inner.addr().port())]);
    outer_cfg.upstream_ca = Some(certs().join("ca.pem"));
    let outer = proxy(outer_cfg).await;
    let body = chat(true, 9, json!({}));
    let a = send(&client(), post_chat(&direct.base_url(), body.clone(), None)).await;
    // A TLS client straight to the inner proxy negotiates h2.
    let mut roots = rustls::RootCertStore::empty();
    for c in tokentap_proxy::upstream::read_certs(&certs().join("ca.pem")).unwrap() {
        roots.add(c).unwrap();
    }
    let tls = rustls::ClientConfig::builder_with_provider(tokentap_proxy::upstream::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_all_versions()
        .build();
    let tls_client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(https);
    let b = send(
        &tls_client,
        post(
            &format!(
                "https://localhost:{}/v1/chat/completions",
                inner.addr().port()
            ),
            body.clone(),
            None,
        ),
    )
    .await;
    assert_eq!(b.version, http::Version::HTTP_2, "ALPN picked h2");
    assert_eq!(mask_created(&a.body), mask_created(&b.body));
    // Through both proxies: plain → https upstream (ALPN) → sim.
    let a2 = send(&client(), post_chat(&direct.base_url(), body.clone(), None)).await;
    let c = send(&client(), post_chat(&outer.base_url(), body, None)).await;
    assert_eq!(c.status, 200);
    assert_eq!(mask_created(&a2.body), mask_created(&c.body));
    let rec = outer.wait_records(1).await.remove(0);
    assert_eq!(rec.status, Status::Ok);
    assert!(rec.upstream.as_deref().unwrap().starts_with("https://"));
    // No usage asked for and 2 tokens per chunk: 5 chunks, counted as chunks, and labelled so.
    assert_eq!(rec.measured.output_tokens, Some(5));
    assert_eq!(rec.measured.output_tokens_source, TokenSource::Chunks);
}

#[tokio::test]
async fn content_is_recorded_only_when_asked() {
    let s = sim(rich()).await;
    let plain = proxy(proxy_cfg(&[s.base_url()])).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.record_content = true;
    let with = proxy(cfg).await;
    let body = chat(true, 9, json!({}));
    let _ = send(&client(), post_chat(&plain.base_url(), body.clone(), None)).await;
    let got = send(&client(), post_chat(&with.base_url(), body, None)).await;
    assert!(plain.wait_records(1).await[0].content.is_none());
    let rec = with.wait_records(1).await.remove(0);
    let content = rec.content.expect("content recorded");
    assert_eq!(content["request"]["messages"][1]["role"], "user");
    // The recorded output is exactly the text the client received in `delta.content`.
    let mut text = String::new();
    for line in got.text().lines() {
        if let Some(j) = line.strip_prefix("data: ") {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(j) {
                if let Some(t) = v["choices"][0]["delta"]["content"].as_str() {
                    text.push_str(t);
                }
            }
        }
    }
    assert!(!text.is_empty());
    assert_eq!(content["output"], text);
    assert!(!content["reasoning"].as_str().unwrap().is_empty());
}

#[tokio::test]
async fn other_routes_pass_through_and_get_a_status_only_record() {
    let s = sim(rich()).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let c = client();
    for path in ["/v1/models", "/health", "/nope"] {
        let get = |base: String| {
            Request::get(format!("{base}{path}"))
                .body(Full::new(Bytes::new()))
                .unwrap()
        };
        let a = send(&c, get(s.base_url())).await;
        let b = send(&c, get(p.base_url())).await;
        assert_eq!(a.status, b.status, "{path}");
        assert_eq!(a.body, b.body, "{path}");
    }
    let recs = p.wait_records(3).await;
    let routes: Vec<_> = recs.iter().map(|r| r.route.clone().unwrap()).collect();
    assert_eq!(routes, ["/v1/models", "/health", "/nope"]);
    assert_eq!(recs[2].status, Status::Failed);
    assert_eq!(recs[2].http_status, Some(404));
    assert!(recs
        .iter()
        .all(|r| r.measured.e2e_ns.is_some() && r.measured.chunks.is_empty()));
}

#[tokio::test]
async fn preserve_host_forwards_the_clients_host() {
    let s = sim(rich()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.preserve_host = true;
    let p = proxy(cfg).await;
    let mut req = post_chat(&p.base_url(), chat(true, 2, json!({})), None);
    req.headers_mut()
        .insert("host", "models.example.test".parse().unwrap());
    assert_eq!(send(&client(), req).await.status, 200);
    let log = s.log();
    let host = log[0].headers.iter().find(|(k, _)| k == "host").unwrap();
    assert_eq!(host.1, "models.example.test");
}

#[tokio::test]
async fn the_session_table_is_bounded_and_counts_evictions() {
    let s = sim(rich()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.max_sessions = 2;
    let p = proxy(cfg).await;
    let c = client();
    for i in 0..6 {
        let g = send(
            &c,
            post_chat(
                &p.base_url(),
                chat(true, 2, json!({})),
                Some(&format!("bounded-{i}")),
            ),
        )
        .await;
        assert_eq!(g.status, 200);
    }
    p.wait_records(6).await;
    let (_, list) = admin_get(&p, "/sessions").await;
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert!(list.as_array().unwrap().len() <= 2);
    let (_, m) = admin_get(&p, "/metrics").await;
    let ev: f64 = m
        .lines()
        .find(|l| l.starts_with("tokentap_session_evictions_total"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(ev >= 4.0, "{ev}");
}

/// `--inject-metrics`: the server is asked for the engine's own timing (`include_metrics`, and
/// usage, which carries it); the client gets the bytes it would have got directly; the record
/// keeps the metrics and splits TTFT into the engine's queue, its first-token time and the rest.
/// One prefill lane and 40 ms of prefill make the second of two concurrent requests queue.
#[tokio::test]
async fn inject_metrics_splits_ttft_yet_the_client_gets_the_direct_bytes() {
    let timed = || {
        let mut c = rich();
        c.timing.prefill_base_ms = 40.0;
        c.timing.prefill_lanes = 1;
        c.timing.decode_ms = 2.0;
        c
    };
    let direct = sim(timed()).await;
    let behind = sim(timed()).await;
    let mut cfg = proxy_cfg(&[behind.base_url()]);
    cfg.inject_usage = true;
    cfg.inject_metrics = true;
    let p = proxy(cfg).await;
    let c = client();
    let plain = chat(true, 9, json!({}));
    let usage = chat(true, 9, json!({"stream_options": {"include_usage": true}}));
    for (i, body) in [&plain, &usage].into_iter().enumerate() {
        let a = send(&c, post_chat(&direct.base_url(), body.clone(), None)).await;
        let b = send(&c, post_chat(&p.base_url(), body.clone(), None)).await;
        assert_eq!(mask_created(&a.body), mask_created(&b.body), "variant {i}");
        assert!(
            !b.text().contains("\"metrics\""),
            "variant {i}: {}",
            b.text()
        );
    }
    // Two at once: the second waits for the one prefill lane.
    let (x, y) = tokio::join!(
        send(&c, post_chat(&p.base_url(), plain.clone(), None)),
        send(&c, post_chat(&p.base_url(), plain.clone(), None))
    );
    assert!(!x.text().contains("metrics") && !y.text().contains("metrics"));
    // A client that asks for the metrics itself gets them, its request forwarded as sent.
    let own = chat(
        true,
        9,
        json!({"include_metrics": true, "stream_options": {"include_usage": true}}),
    );
    let z = send(&c, post_chat(&p.base_url(), own.clone(), None)).await;
    assert!(
        z.text().contains("\"metrics\":{\"time_to_first_token_ms\""),
        "{}",
        z.text()
    );

    let recs = p.wait_records(5).await;
    let log = behind.log();
    let sent0: serde_json::Value = serde_json::from_slice(log[0].body.as_ref().unwrap()).unwrap();
    assert_eq!(sent0["include_metrics"], true);
    assert_eq!(sent0["stream_options"]["include_usage"], true);
    assert_eq!(log[4].body.as_ref().unwrap(), &own);
    for r in &recs {
        let e = r.measured.engine_metrics.expect("engine metrics recorded");
        let sp = r.measured.ttft_split.expect("TTFT split");
        let ttft = r.measured.ttft_ns.unwrap() as f64 / 1e6;
        assert!(
            (sp.queue_ms + sp.engine_ms + sp.outside_ms - ttft).abs() < 1e-6,
            "{sp:?} {ttft}"
        );
        // The sim's engine: 40 ms of prefill before the first token; the rest is small.
        assert!(sp.engine_ms >= 39.0, "{sp:?}");
        assert!(sp.outside_ms > -1.0 && sp.outside_ms < 30.0, "{sp:?}");
        assert!(e.generation_time_ms.unwrap() > 0.0 && e.tokens_per_second.unwrap() > 0.0);
    }
    // Of the two concurrent requests, one queued behind the other's prefill.
    let queued = recs[2]
        .measured
        .ttft_split
        .unwrap()
        .queue_ms
        .max(recs[3].measured.ttft_split.unwrap().queue_ms);
    assert!(queued >= 30.0, "{:?}", &recs[2..4]);
    assert!(recs[..2]
        .iter()
        .all(|r| r.measured.ttft_split.unwrap().queue_ms < 5.0));
}

/// `--inject-metrics` against a server whose `metrics` are not what vLLM documents (a string, an
/// array, a nested object, a non-number) or impossible for the turn (negative; more engine time
/// than the turn's TTFT): the usage is kept, the injected usage chunk never reaches a client that
/// did not ask for usage, and the record says why the metrics were not taken — no TTFT split.
#[tokio::test]
async fn inject_metrics_refuses_what_vllm_does_not_document() {
    let cases: [(&'static [u8], &str); 6] = [
        (b"\"abc\"", "not an object"),
        (b"[1,2,3]", "not an object"),
        (
            b"{\"queue_time_ms\":{\"x\":1},\"time_to_first_token_ms\":1}",
            "not a finite number",
        ),
        (
            b"{\"queue_time_ms\":\"3\",\"time_to_first_token_ms\":1}",
            "not a finite number",
        ),
        (
            b"{\"queue_time_ms\":-5,\"time_to_first_token_ms\":1}",
            "negative",
        ),
        (
            b"{\"queue_time_ms\":1e15,\"time_to_first_token_ms\":1}",
            "beyond the turn's own TTFT",
        ),
    ];
    let c = client();
    for (metrics, why) in cases {
        let last: &'static [u8] = Box::leak(
            [
                &b"data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"total_tokens\":9},\"metrics\":"[..],
                metrics,
                b"}\n\n",
            ]
            .concat()
            .into_boxed_slice(),
        );
        let up = split_upstream(vec![
            b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n",
            b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\n",
            last,
            b"data: [DONE]\n\n",
        ])
        .await;
        let mut cfg = proxy_cfg(&[up]);
        cfg.inject_usage = true;
        cfg.inject_metrics = true;
        let p = proxy(cfg).await;
        let got = send(&c, post_chat(&p.base_url(), chat(true, 9, json!({})), None)).await;
        assert_eq!(got.status, 200);
        let text = got.text();
        assert!(
            !text.contains("\"choices\":[]"),
            "{why}: the client did not ask for usage:\n{text}"
        );
        assert!(!text.contains("metrics"), "{why}:\n{text}");
        let r = p.wait_records(1).await.remove(0);
        assert_eq!(r.status, Status::Ok, "{why}");
        assert_eq!(r.measured.prompt_tokens, Some(7), "{why}: usage kept");
        assert_eq!(r.measured.output_tokens, Some(2), "{why}");
        let refused = r
            .measured
            .engine_metrics_refused
            .clone()
            .unwrap_or_default();
        assert!(refused.contains(why), "{why}: {refused:?}");
        assert!(r.measured.ttft_split.is_none(), "{why}");
    }
}
