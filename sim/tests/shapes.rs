//! Response shapes over real loopback sockets: SSE chunk layout, non-streaming body, usage,
//! continuous usage, modes, k tokens per chunk, max tokens, the completions route, the small
//! routes, h2c and determinism.

use serde_json::{json, Value};
use tokentap_sim::{ChunkKind, ReasoningField, SimConfig, SimServer};
use tokentap_testkit::sim::*;

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

async fn sim(f: impl FnOnce(&mut SimConfig)) -> SimServer {
    let mut c = SimConfig::zero_delay();
    f(&mut c);
    SimServer::start(c).await.unwrap()
}

#[tokio::test]
async fn streaming_chunk_shape_prelude_finish_and_done() {
    let s = sim(|_| {}).await;
    let r = chat(
        s.addr(),
        json!({"model": "m1", "messages": user("hello"), "stream": true, "max_completion_tokens": 5}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "text/event-stream");
    assert!(r.done() && r.error.is_none());
    let chunks = r.chunks();
    // Prelude + 5 one-token content chunks, no usage (not asked for).
    assert_eq!(chunks.len(), 6, "{chunks:?}");
    for c in &chunks {
        assert!(c["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(c["object"], "chat.completion.chunk");
        assert!(c["created"].as_u64().unwrap() > 1_600_000_000);
        assert_eq!(c["model"], "m1");
        assert_eq!(c["choices"][0]["index"], 0);
        assert!(c.get("usage").is_none());
    }
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    for c in &chunks[1..5] {
        assert_eq!(c["choices"][0]["finish_reason"], Value::Null);
        assert_eq!(
            c["choices"][0]["delta"]["content"].as_str().unwrap().len(),
            4
        );
    }
    assert_eq!(chunks[5]["choices"][0]["finish_reason"], "length");
    // Each SSE event was written as exactly one `data: …\n\n`, nothing else in the body.
    let raw = String::from_utf8(r.body.clone()).unwrap();
    assert_eq!(raw.matches("data: ").count(), 7);
    assert!(raw.ends_with("data: [DONE]\n\n"));
    s.wait_finished(1).await;
    let log = s.log();
    assert_eq!(log[0].output_tokens, 5);
    assert!(log[0].finished);
    assert_eq!(log[0].finish_reason.as_deref(), Some("length"));
}

#[tokio::test]
async fn non_streaming_shape() {
    let s = sim(|c| c.model = "served".into()).await;
    let r = chat(
        s.addr(),
        json!({"messages": user("hello"), "max_tokens": 7}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    let b = r.json();
    assert_eq!(b["object"], "chat.completion");
    assert_eq!(b["model"], "served");
    assert_eq!(b["choices"][0]["message"]["role"], "assistant");
    assert_eq!(
        b["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .len(),
        28
    );
    assert_eq!(b["choices"][0]["finish_reason"], "length");
    let u = &b["usage"];
    assert_eq!(u["completion_tokens"], 7);
    let p = u["prompt_tokens"].as_u64().unwrap();
    assert_eq!(u["total_tokens"].as_u64().unwrap(), p + 7);
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 0);
    s.wait_finished(1).await;
    let l = &s.log()[0];
    assert_eq!((l.prompt_tokens, l.output_tokens), (p, 7));
    assert_eq!(l.chunks.len(), 1);
    assert_eq!(l.chunks[0].kind, ChunkKind::Body);
}

#[tokio::test]
async fn usage_chunk_only_when_asked_and_continuous_usage_is_cumulative() {
    let s = sim(|c| c.modes.tokens_per_chunk = 3).await;
    let body = |opts: Value| json!({"messages": user("hi there"), "stream": true, "max_completion_tokens": 8, "stream_options": opts});
    let r = chat(s.addr(), body(json!({}))).await;
    assert!(r.chunks().iter().all(|c| c.get("usage").is_none()));

    let r = chat(s.addr(), body(json!({"include_usage": true}))).await;
    let chunks = r.chunks();
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["completion_tokens"], 8);
    let p = last["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(last["usage"]["total_tokens"].as_u64().unwrap(), p + 8);
    assert!(last["usage"]["prompt_tokens_details"]["cached_tokens"].is_u64());
    assert!(chunks[..chunks.len() - 1]
        .iter()
        .all(|c| c.get("usage").is_none()));

    let r = chat(
        s.addr(),
        body(json!({"include_usage": true, "continuous_usage_stats": true})),
    )
    .await;
    let counts: Vec<u64> = r
        .chunks()
        .iter()
        .map(|c| c["usage"]["completion_tokens"].as_u64().unwrap())
        .collect();
    // prelude 0, then 3, 6, 8 cumulative, then the usage-only chunk 8.
    assert_eq!(counts, vec![0, 3, 6, 8, 8]);
}

#[tokio::test]
async fn k_tokens_per_chunk_matches_text_and_log() {
    let s = sim(|c| c.modes.tokens_per_chunk = 4).await;
    let r = chat(
        s.addr(),
        json!({"messages": user("x"), "stream": true, "max_completion_tokens": 10}),
    )
    .await;
    let sizes: Vec<usize> = r
        .chunks()
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str().map(str::len))
        .filter(|&n| n > 0)
        .collect();
    assert_eq!(sizes, vec![16, 16, 8]);
    s.wait_finished(1).await;
    let toks: Vec<u32> = s.log()[0]
        .chunks
        .iter()
        .filter(|c| c.kind == ChunkKind::Content)
        .map(|c| c.tokens)
        .collect();
    assert_eq!(toks, vec![4, 4, 2]);
}

#[tokio::test]
async fn role_prelude_off() {
    let s = sim(|c| c.modes.role_prelude = false).await;
    let r = chat(
        s.addr(),
        json!({"messages": user("x"), "stream": true, "max_completion_tokens": 2}),
    )
    .await;
    let chunks = r.chunks();
    assert_eq!(chunks.len(), 2);
    assert!(chunks
        .iter()
        .all(|c| c["choices"][0]["delta"].get("role").is_none()));
}

#[tokio::test]
async fn reasoning_first_then_content_both_field_names() {
    for field in [ReasoningField::ReasoningContent, ReasoningField::Reasoning] {
        let s = sim(|c| {
            c.modes.reasoning_fraction = 0.5;
            c.modes.reasoning_field = field;
        })
        .await;
        let r = chat(
            s.addr(),
            json!({"messages": user("x"), "stream": true, "max_completion_tokens": 80}),
        )
        .await;
        let name = field.as_str();
        let kinds: Vec<&str> = r
            .chunks()
            .iter()
            .filter_map(|c| {
                let d = &c["choices"][0]["delta"];
                if d.get(name).is_some() {
                    Some("r")
                } else if d["content"].as_str().is_some_and(|t| !t.is_empty()) {
                    Some("c")
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(kinds.len(), 80);
        let first_c = kinds.iter().position(|k| *k == "c").unwrap();
        assert_eq!(first_c, 40, "half reasoning first");
        assert!(kinds[first_c..].iter().all(|k| *k == "c"));
        let reasoning = r.text_of(name);
        assert!(tokentap_core::text::REASONING_PREAMBLE.starts_with(&reasoning[..100]));
        // Non-streaming carries the same split.
        let b = chat(
            s.addr(),
            json!({"messages": user("x"), "max_completion_tokens": 80}),
        )
        .await
        .json();
        assert_eq!(
            b["choices"][0]["message"][name].as_str().unwrap().len(),
            160
        );
        assert_eq!(
            b["usage"]["completion_tokens_details"]["reasoning_tokens"],
            40
        );
    }
}

#[tokio::test]
async fn tool_call_partials() {
    let s = sim(|c| c.modes.tool_call_rate = 1.0).await;
    let tools = json!([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object",
        "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]);
    // Nothing offered: no call, whatever the rate.
    let r = chat(
        s.addr(),
        json!({"messages": user("run it"), "stream": true, "max_completion_tokens": 40}),
    )
    .await;
    assert!(r
        .chunks()
        .iter()
        .all(|c| c["choices"][0]["delta"].get("tool_calls").is_none()));
    let r = chat(
        s.addr(),
        json!({"messages": user("run it"), "stream": true, "max_completion_tokens": 40,
               "stream_options": {"include_usage": true}, "tools": tools}),
    )
    .await;
    let chunks = r.chunks();
    let calls: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"].get("tool_calls"))
        .collect();
    let first = &calls[0][0];
    assert_eq!(first["index"], 0);
    assert!(first["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(first["type"], "function");
    assert_eq!(first["function"]["name"], "bash");
    assert_eq!(first["function"]["arguments"], "");
    let mut args = String::new();
    for c in &calls[1..] {
        assert_eq!(c[0]["index"], 0);
        assert!(c[0].get("id").is_none());
        args.push_str(c[0]["function"]["arguments"].as_str().unwrap());
    }
    let parsed: Value = serde_json::from_str(&args).unwrap();
    assert!(parsed["command"].as_str().unwrap().contains(' '));
    assert_eq!(calls.len(), 40, "1 header + 39 argument tokens");
    let last_choice = chunks
        .iter()
        .rev()
        .find(|c| c["choices"].as_array().is_some_and(|a| !a.is_empty()))
        .unwrap();
    assert_eq!(last_choice["choices"][0]["finish_reason"], "length");
    assert_eq!(r.usage()["completion_tokens"], 40);

    let r = chat(
        s.addr(),
        json!({"messages": user("run it"), "stream": true, "max_completion_tokens": 500, "tools": tools}),
    )
    .await;
    let reasons: Vec<Value> = r
        .chunks()
        .iter()
        .map(|c| c["choices"][0]["finish_reason"].clone())
        .filter(|f| !f.is_null())
        .collect();
    // Default sigma may or may not reach 500; a call that ends on its own says tool_calls.
    assert!(reasons == vec![json!("tool_calls")] || reasons == vec![json!("length")]);
}

#[tokio::test]
async fn max_tokens_honoured_in_both_spellings() {
    let s = sim(|c| {
        c.output.mean_tokens = 5000.0;
        c.output.sigma = 0.0;
    })
    .await;
    for key in ["max_completion_tokens", "max_tokens"] {
        let mut body = json!({"messages": user("x"), "stream": true,
                              "stream_options": {"include_usage": true}});
        body[key] = json!(17);
        let r = chat(s.addr(), body).await;
        assert_eq!(r.usage()["completion_tokens"], 17);
        assert_eq!(r.text_of("content").len(), 68);
    }
    // Without a request cap the server cap applies; below it the output ends with `stop`.
    let s = sim(|c| {
        c.output.mean_tokens = 30.0;
        c.output.sigma = 0.0;
    })
    .await;
    let r = chat(
        s.addr(),
        json!({"messages": user("x"), "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(r.usage()["completion_tokens"], 30);
    let fin: Vec<Value> = r
        .chunks()
        .iter()
        .map(|c| c["choices"][0]["finish_reason"].clone())
        .filter(|f| !f.is_null())
        .collect();
    assert_eq!(fin, vec![json!("stop")]);
}

#[tokio::test]
async fn completions_route() {
    let s = sim(|_| {}).await;
    let r = send(
        s.addr(),
        post(
            "/v1/completions",
            &json!({"model": "m", "prompt": "once upon a time", "stream": true, "max_tokens": 3,
                    "stream_options": {"include_usage": true}}),
        ),
    )
    .await;
    assert!(r.done());
    let chunks = r.chunks();
    assert_eq!(chunks.len(), 4, "3 text chunks + usage, no prelude");
    for c in &chunks[..3] {
        assert_eq!(c["object"], "text_completion");
        assert!(c["id"].as_str().unwrap().starts_with("cmpl-"));
        assert_eq!(c["choices"][0]["text"].as_str().unwrap().len(), 4);
    }
    assert_eq!(chunks[2]["choices"][0]["finish_reason"], "length");
    assert_eq!(chunks[3]["usage"]["prompt_tokens"], 4); // 16 bytes
    let b = send(
        s.addr(),
        post(
            "/v1/completions",
            &json!({"prompt": ["ab", "cd"], "max_tokens": 2}),
        ),
    )
    .await
    .json();
    assert_eq!(b["object"], "text_completion");
    assert_eq!(b["choices"][0]["text"].as_str().unwrap().len(), 8);
    assert_eq!(b["usage"]["prompt_tokens"], 1);
}

#[tokio::test]
async fn small_routes_and_errors() {
    let s = sim(|c| c.model = "my-model".into()).await;
    let h = send(s.addr(), get("/health")).await;
    assert_eq!(h.status, 200);
    let m = send(s.addr(), get("/v1/models")).await;
    assert_eq!(m.status, 200);
    let m = m.json();
    assert_eq!(m["object"], "list");
    assert_eq!(m["data"][0]["id"], "my-model");
    assert_eq!(m["data"][0]["object"], "model");

    let nf = send(s.addr(), get("/v2/nothing")).await;
    assert_eq!(nf.status, 404);
    assert!(nf.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/v2/nothing"));

    let bad = send(
        s.addr(),
        http::Request::post("/v1/chat/completions")
            .header("host", "sim")
            .body(http_body_util::Full::new(bytes::Bytes::from_static(
                b"{not json",
            )))
            .unwrap(),
    )
    .await;
    assert_eq!(bad.status, 400);
    let e: tokentap_core::wire::ErrorBody = serde_json::from_slice(&bad.body).unwrap();
    assert_eq!(e.error.kind, "invalid_request_error");
    assert_eq!(e.error.code, Some(json!(400)));

    let empty = chat(s.addr(), json!({"messages": []})).await;
    assert_eq!(empty.status, 400);
    let wrong = send(s.addr(), get("/v1/chat/completions")).await;
    assert_eq!(wrong.status, 405);

    s.wait_finished(6).await;
    let statuses: Vec<u16> = s.log().iter().map(|l| l.status).collect();
    assert_eq!(statuses, vec![200, 200, 404, 400, 400, 405]);
}

#[tokio::test]
async fn headers_logged_without_authorization_and_body_captured() {
    let s = sim(|c| c.capture_bodies = true).await;
    let body = json!({"messages": user("secret prompt"), "max_tokens": 1});
    let mut req = chat_request(&body);
    req.headers_mut()
        .insert("authorization", "Bearer sk-123".parse().unwrap());
    req.headers_mut()
        .insert("x-session-id", "conv-7".parse().unwrap());
    let r = send(s.addr(), req).await;
    assert_eq!(r.status, 200);
    s.wait_finished(1).await;
    let l = &s.log()[0];
    assert_eq!(l.session.as_deref(), Some("conv-7"));
    assert!(l
        .headers
        .iter()
        .all(|(n, v)| n != "authorization" && !v.contains("sk-123")));
    assert!(l.headers.iter().any(|(n, _)| n == "x-session-id"));
    assert_eq!(l.body.as_deref(), Some(body.to_string().as_bytes()));
    assert_eq!(
        (l.method.as_str(), l.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    // The JSONL form never carries the body.
    assert!(!serde_json::to_string(l).unwrap().contains("secret prompt"));
}

#[tokio::test]
async fn h2c_streaming() {
    let s = sim(|_| {}).await;
    let stream = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    let (mut tx, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::post(format!("{}/v1/chat/completions", s.base_url()))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            json!({"messages": user("x"), "stream": true, "max_completion_tokens": 6}).to_string(),
        )))
        .unwrap();
    let res = tx.send_request(req).await.unwrap();
    assert_eq!(res.version(), http::Version::HTTP_2);
    let r = read(res, 0).await;
    assert!(r.done());
    assert_eq!(r.text_of("content").len(), 24);
}

#[tokio::test]
async fn same_seed_same_output_different_seed_different() {
    async fn run(seed: u64) -> Vec<(usize, String)> {
        let s = sim(|c| {
            c.seed = seed;
            c.modes.reasoning_fraction = 0.25;
        })
        .await;
        let mut out = Vec::new();
        for i in 0..5 {
            let r = chat(
                s.addr(),
                json!({"messages": user(&format!("q{i}")), "stream": true}),
            )
            .await;
            let text = r.text_of("reasoning_content") + &r.text_of("content");
            out.push((text.len(), text));
        }
        out
    }
    let a = run(11).await;
    assert_eq!(a, run(11).await);
    let b = run(12).await;
    assert_ne!(
        a.iter().map(|x| x.0).collect::<Vec<_>>(),
        b.iter().map(|x| x.0).collect::<Vec<_>>()
    );
    // Lengths vary within a run (lognormal), around the configured mean of 400.
    let lens: Vec<usize> = a.iter().map(|x| x.0 / 4).collect();
    assert!(lens.iter().any(|&l| l != lens[0]), "{lens:?}");
}

#[tokio::test]
async fn keep_alive_serves_sequential_requests_on_one_connection() {
    let s = sim(|_| {}).await;
    let stream = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    let (mut tx, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    for i in 0..3 {
        tx.ready().await.unwrap();
        let res = tx
            .send_request(chat_request(
                &json!({"messages": user(&format!("turn {i}")),
                                               "stream": true, "max_completion_tokens": 4}),
            ))
            .await
            .unwrap();
        assert_eq!(res.headers()["x-sim-seq"], i.to_string().as_str());
        let r = read(res, 0).await;
        assert!(r.done());
    }
    s.wait_finished(3).await;
    assert!(s.log().iter().all(|l| l.finished && l.output_tokens == 4));
}

#[tokio::test]
async fn flush_each_chunk_streams_the_same_events() {
    let body = json!({"model": "m", "messages": user("same"), "stream": true,
        "max_completion_tokens": 40, "stream_options": {"include_usage": true}});
    let deltas = |r: &Resp| -> Vec<Value> {
        r.chunks()
            .iter()
            .map(|c| {
                json!([
                    c["choices"][0]["delta"],
                    c["choices"][0]["finish_reason"],
                    c["usage"]["completion_tokens"]
                ])
            })
            .collect()
    };
    let batched = sim(|_| {}).await;
    let flushed = sim(|c| c.timing.flush_each_chunk = true).await;
    let a = chat(batched.addr(), body.clone()).await;
    let b = chat(flushed.addr(), body).await;
    assert!(a.done() && b.done() && b.error.is_none());
    assert_eq!(deltas(&b).len(), 42, "prelude + 40 tokens + usage");
    assert_eq!(deltas(&a), deltas(&b));
    flushed.wait_finished(1).await;
    assert_eq!(
        flushed.log()[0].chunks.len(),
        43,
        "prelude, 40 tokens, usage, [DONE]"
    );
}
