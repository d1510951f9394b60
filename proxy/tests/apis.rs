//! The OpenAI Responses API and the Anthropic Messages API through the proxy, measured like chat
//! completions (docs/benchmark.md#other-apis): TTFT and every chunk against the sim's own log,
//! tokens from the API's usage, the session from the header or from the body, byte-identical
//! bodies both ways, and broken streams of each API recorded as failed with the reason.

use bytes::Bytes;
use serde_json::{json, Value};
use tokentap_core::api::Api;
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::timeline::TokenSource;
use tokentap_sim::{ChunkKind, SimConfig};
use tokentap_testkit::proxy::*;

/// Loopback plus two wake-ups on a loaded 2-core debug build (see `measure.rs`).
const TOL_NS: u64 = 20_000_000;

/// The requests of the two APIs with events of their own, as these tests send them.
trait Sample: Copy {
    fn path(self) -> &'static str;
    fn body(self, stream: bool, max: u64, extra: Value) -> Bytes;
    fn id_prefix(self) -> &'static str;
}

impl Sample for Api {
    fn path(self) -> &'static str {
        self.as_str()
    }

    /// The same conversation as `testkit::requests::chat`: a system prompt and one user message.
    fn body(self, stream: bool, max: u64, extra: Value) -> Bytes {
        let mut v = match self {
            Api::Responses => json!({
                "model": "tokentap-sim",
                "instructions": "You are a test.",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "Say something, please, at length."}]}],
                "max_output_tokens": max,
                "stream": stream,
            }),
            Api::Messages => json!({
                "model": "tokentap-sim",
                "system": "You are a test.",
                "messages": [{"role": "user", "content": "Say something, please, at length."}],
                "max_tokens": max,
                "stream": stream,
            }),
            Api::Chat | Api::Completions => unreachable!("chat-form requests are testkit's"),
        };
        for (k, x) in extra.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        Bytes::from(serde_json::to_vec(&v).unwrap())
    }

    fn id_prefix(self) -> &'static str {
        match self {
            Api::Responses => "resp_sim",
            Api::Messages => "msg_sim",
            Api::Chat | Api::Completions => "chatcmpl-sim",
        }
    }
}

fn paced() -> SimConfig {
    let mut c = sim_cfg();
    c.timing.prefill_base_ms = 15.0;
    c.timing.decode_ms = 10.0;
    c.capture_bodies = true;
    c
}

fn text_kind(k: ChunkKind) -> bool {
    matches!(
        k,
        ChunkKind::Reasoning | ChunkKind::Content | ChunkKind::ToolCall
    )
}

/// Each API, streaming and not, against the sim's truth; and its prompt counted as the chat
/// request with the same messages is.
#[tokio::test]
async fn each_api_is_measured_like_chat_completions() {
    let s = sim(paced()).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let c = client();
    let chat_got = send(
        &c,
        post_chat(
            &p.base_url(),
            chat(true, 12, json!({"stream_options": {"include_usage": true}})),
            Some("chat"),
        ),
    )
    .await;
    assert_eq!(chat_got.status, 200);
    let chat_rec = p.wait_records(1).await.remove(0);
    let mut n = 1;
    for api in [Api::Responses, Api::Messages] {
        for stream in [true, false] {
            s.clear_log();
            let session = format!("{api:?}-{stream}");
            let url = format!("{}{}", p.base_url(), api.path());
            let got = send(
                &c,
                post(&url, api.body(stream, 12, json!({})), Some(&session)),
            )
            .await;
            assert_eq!(got.status, 200, "{api:?} {stream}: {}", got.text());
            n += 1;
            let rec: TurnRecord = p.wait_records(n).await.pop().unwrap();
            s.wait_finished(1).await;
            let truth = s.log().remove(0);
            let what = format!("{api:?} stream={stream}");
            assert_eq!(rec.status, Status::Ok, "{what}: {rec:?}");
            assert_eq!(rec.route.as_deref(), Some(api.path()), "{what}");
            assert_eq!(rec.conversation_id.as_deref(), Some(session.as_str()));
            assert_eq!(rec.stream, Some(stream));
            assert_eq!(rec.model.as_deref(), Some("tokentap-sim"));
            let m = &rec.measured;
            assert!(
                m.response_id
                    .as_deref()
                    .unwrap()
                    .starts_with(api.id_prefix()),
                "{what}"
            );
            assert_eq!(m.output_tokens, Some(truth.output_tokens), "{what}");
            assert_eq!(m.output_tokens_source, TokenSource::Usage, "{what}");
            assert_eq!(m.prompt_tokens, Some(truth.prompt_tokens), "{what}");
            assert_eq!(m.cached_tokens, Some(truth.cached_tokens), "{what}");
            // The same system prompt and user message, in chat form, is the same prompt.
            assert_eq!(m.prompt_tokens, chat_rec.measured.prompt_tokens, "{what}");
            assert!(m.finish_reason.is_some(), "{what}");
            if !stream {
                assert!(m.ttft_ns.is_none());
                assert!(m.e2e_ns.is_some());
                continue;
            }
            assert!(m.done, "{what}: the end event was seen");
            let start = rec.start_mono_ns;
            let sim_text: Vec<_> = truth.chunks.iter().filter(|c| text_kind(c.kind)).collect();
            let px_text: Vec<_> = m.chunks.iter().filter(|c| c.text).collect();
            assert_eq!(
                px_text.len(),
                sim_text.len(),
                "{what}: one record chunk per token event"
            );
            assert!(px_text.len() >= 2, "{what}");
            for (i, (x, t)) in px_text.iter().zip(&sim_text).enumerate() {
                let at = start + x.at_ns;
                assert!(
                    at >= t.mono_ns && at - t.mono_ns <= TOL_NS,
                    "{what}: chunk {i}"
                );
            }
            let ttft = start + m.ttft_ns.unwrap();
            assert!(ttft >= sim_text[0].mono_ns && ttft - sim_text[0].mono_ns <= TOL_NS);
            // The opening event (response.created, message_start) is not a token.
            assert_eq!(truth.chunks[0].kind, ChunkKind::Prelude);
            assert!(m.ttfb_ns.unwrap() <= m.ttft_ns.unwrap());
            let tokens: u64 = m.chunks.iter().map(|c| c.tokens as u64).sum();
            assert_eq!(
                tokens, truth.output_tokens,
                "{what}: usage spread over the chunks"
            );
        }
    }
    // The sessions view shows them like any other turn.
    let (status, body) = admin_get(&p, "/sessions/Messages-true").await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["turns"].as_array().unwrap().len(), 1, "{body}");
    // The route label is bounded and names the API.
    let (_, metrics) = admin_get(&p, "/metrics").await;
    assert!(metrics.contains("route=\"/v1/responses\""), "{metrics}");
    assert!(metrics.contains("route=\"/v1/messages\""));
}

/// The client cannot tell the proxy is there: the same bytes as straight from a second sim,
/// both ways, for both APIs streaming and not.
#[tokio::test]
async fn bodies_are_byte_identical() {
    let mut cfg = sim_cfg();
    cfg.capture_bodies = true;
    let direct = sim(cfg.clone()).await;
    let behind = sim(cfg).await;
    let p = proxy(proxy_cfg(&[behind.base_url()])).await;
    let c = client();
    let mut sent = Vec::new();
    for api in [Api::Responses, Api::Messages] {
        for stream in [true, false] {
            let body = api.body(stream, 10, json!({}));
            let a = send(
                &c,
                post(
                    &format!("{}{}", direct.base_url(), api.path()),
                    body.clone(),
                    Some("s"),
                ),
            )
            .await;
            let b = send(
                &c,
                post(
                    &format!("{}{}", p.base_url(), api.path()),
                    body.clone(),
                    Some("s"),
                ),
            )
            .await;
            assert_eq!(a.status, 200);
            assert!(a.body.len() > 200);
            assert_eq!(
                mask_created(&a.body),
                mask_created(&b.body),
                "{api:?} {stream}"
            );
            assert_eq!(a.headers.get("content-type"), b.headers.get("content-type"));
            sent.push(body);
        }
    }
    let got: Vec<_> = behind.log().into_iter().map(|l| l.body.unwrap()).collect();
    assert_eq!(got, sent, "the server got the client's request bytes");
    assert_eq!(p.wait_records(4).await.len(), 4);
}

/// The `id` of a Responses API response as the client saw it (streamed or whole).
fn response_id(got: &Got) -> String {
    let text = got.text();
    let first = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .map_or_else(|| got.json(), |d| serde_json::from_str(d).unwrap());
    first["response"]["id"]
        .as_str()
        .or(first["id"].as_str())
        .unwrap()
        .to_string()
}

/// Without a session header: a Responses conversation chained by `previous_response_id` is one
/// session named by its first response; Claude Code's `metadata.user_id` and Codex's
/// `prompt_cache_key` name theirs; `--session-from-body none` reads nothing.
#[tokio::test]
async fn sessions_from_the_body() {
    let s = sim(sim_cfg()).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let c = client();
    let url = format!("{}/v1/responses", p.base_url());
    let mut prev: Option<String> = None;
    let mut ids = Vec::new();
    for (i, stream) in [true, false, true].into_iter().enumerate() {
        let extra = match &prev {
            Some(id) => {
                json!({"previous_response_id": id, "input": [{"role": "user", "content": format!("turn {i}")}]})
            }
            None => json!({}),
        };
        let got = send(&c, post(&url, Api::Responses.body(stream, 6, extra), None)).await;
        assert_eq!(got.status, 200);
        let id = response_id(&got);
        ids.push(id.clone());
        prev = Some(id);
    }
    let recs = p.wait_records(3).await;
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(
            r.conversation_id.as_deref(),
            Some(ids[0].as_str()),
            "turn {i}"
        );
        assert_eq!(r.turn_index, i as u32);
        assert_eq!(r.measured.response_id.as_deref(), Some(ids[i].as_str()));
    }
    let (status, body) = admin_get(&p, &format!("/sessions/{}", ids[0])).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["turns"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Claude Code: the session in metadata.user_id, both spellings; Codex: prompt_cache_key.
    let msgs = format!("{}/v1/messages", p.base_url());
    for user_id in [
        "user_3f2a_account_9b1c_session_6c1d2e3f-0000-4000-8000-000000000001",
        r#"{"device_id":"d1","account_uuid":"","session_id":"6c1d2e3f-0000-4000-8000-000000000001"}"#,
    ] {
        let body = Api::Messages.body(true, 4, json!({"metadata": {"user_id": user_id}}));
        assert_eq!(send(&c, post(&msgs, body, None)).await.status, 200);
    }
    let body = Api::Responses.body(true, 4, json!({"prompt_cache_key": "codex-conv-1"}));
    assert_eq!(send(&c, post(&url, body, None)).await.status, 200);
    let recs = p.wait_records(6).await;
    assert_eq!(
        recs[3].conversation_id.as_deref(),
        Some("6c1d2e3f-0000-4000-8000-000000000001")
    );
    assert_eq!((recs[3].turn_index, recs[4].turn_index), (0, 1));
    assert_eq!(recs[4].conversation_id, recs[3].conversation_id);
    assert_eq!(recs[5].conversation_id.as_deref(), Some("codex-conv-1"));

    // A header wins over the body; `none` reads no session from the body.
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.session_from_body = vec![];
    let q = proxy(cfg).await;
    let body = Api::Messages.body(
        false,
        4,
        json!({"metadata": {"user_id": "user_x_account__session_abc"}}),
    );
    assert_eq!(
        send(
            &c,
            post(&format!("{}/v1/messages", q.base_url()), body.clone(), None)
        )
        .await
        .status,
        200
    );
    assert_eq!(
        send(
            &c,
            post(&format!("{}/v1/messages", q.base_url()), body, Some("hdr"))
        )
        .await
        .status,
        200
    );
    let recs = q.wait_records(2).await;
    assert_eq!(recs[0].conversation_id, None);
    assert_eq!(recs[1].conversation_id.as_deref(), Some("hdr"));
}

/// Chat agents that send no session id: three conversations sharing a system prompt, their
/// turns interleaved and concurrent, each request the whole history grown by the answer (as the
/// agent's own copy) and a new message — each conversation one session, its turns numbered in
/// order (`--session-from-body …,messages_prefix`); the default list leaves them unsessioned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_sessions_without_ids_are_followed_by_their_prefix() {
    let s = sim(sim_cfg()).await;
    let mut cfg = proxy_cfg(&[s.base_url()]);
    cfg.session_from_body
        .push(tokentap_proxy::config::BodySession::MessagesPrefix);
    let p = proxy(cfg).await;
    let c = client();
    let base = p.base_url();
    let system = json!({"role": "system", "content": "You are an agent. Be brief."});
    let mut histories: Vec<Vec<Value>> = (0..3)
        .map(|k| {
            vec![
                system.clone(),
                json!({"role": "user", "content": format!("task {k}")}),
            ]
        })
        .collect();
    let turns = 3;
    for turn in 0..turns {
        // All three conversations' turn `turn` at once.
        let sends = histories.iter().map(|h| {
            let body = json!({"model": "tokentap-sim", "messages": h, "stream": true, "max_completion_tokens": 4});
            send(&c, post_chat(&base, Bytes::from(body.to_string()), None))
        });
        let got = futures_util::future::join_all(sends).await;
        for (k, g) in got.iter().enumerate() {
            assert_eq!(g.status, 200);
            let text: String = g
                .text()
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter_map(|d| serde_json::from_str::<Value>(d).ok())
                .filter_map(|e| {
                    e["choices"][0]["delta"]["content"]
                        .as_str()
                        .map(String::from)
                })
                .collect();
            histories[k].push(json!({"role": "assistant", "content": text}));
            histories[k]
                .push(json!({"role": "user", "content": format!("task {k}, step {}", turn + 1)}));
        }
    }
    let recs = p.wait_records(3 * turns).await;
    let mut by_session: std::collections::BTreeMap<String, Vec<&TurnRecord>> = Default::default();
    for r in &recs {
        let id = r.conversation_id.clone().expect("a session");
        assert!(id.starts_with("chat-"), "{id}");
        by_session.entry(id).or_default().push(r);
    }
    assert_eq!(by_session.len(), 3, "{:?}", by_session.keys());
    for (id, rs) in &by_session {
        let mut idx: Vec<u32> = rs.iter().map(|r| r.turn_index).collect();
        idx.sort();
        assert_eq!(idx, [0, 1, 2], "{id}");
        // Each session's requests grow: 2, 4, 6 messages.
        let mut msgs: Vec<u32> = rs.iter().map(|r| r.messages.unwrap_or(0)).collect();
        msgs.sort();
        assert_eq!(msgs, [2, 4, 6], "{id}");
    }
    let (status, body) = admin_get(&p, "/sessions").await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        3,
        "{body}"
    );

    // By default: no session from a chat body.
    let q = proxy(proxy_cfg(&[s.base_url()])).await;
    let body = json!({"model": "tokentap-sim", "messages": histories[0], "stream": true, "max_completion_tokens": 4});
    assert_eq!(
        send(
            &c,
            post_chat(&q.base_url(), Bytes::from(body.to_string()), None)
        )
        .await
        .status,
        200
    );
    assert_eq!(q.wait_records(1).await[0].conversation_id, None);
}

/// A stream of each API that breaks: an event that is not JSON, a clean end without the end
/// event, the server's error event, two responses on one stream — each recorded `failed` with
/// the reason.
#[tokio::test]
async fn broken_streams_are_failed_with_the_reason() {
    // Malformed, from the sim's fault injection.
    let mut cfg = sim_cfg();
    cfg.faults.malformed_rate = 1.0;
    let s = sim(cfg).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let c = client();
    for api in [Api::Responses, Api::Messages] {
        let _ = send(
            &c,
            post(
                &format!("{}{}", p.base_url(), api.path()),
                api.body(true, 8, json!({})),
                Some("m"),
            ),
        )
        .await;
    }
    let recs = p.wait_records(2).await;
    for r in &recs {
        assert_eq!(r.status, Status::Failed, "{r:?}");
        let e = r.error.as_ref().unwrap();
        assert_eq!(e.kind, "malformed_event", "{e:?}");
        assert!(e.message.contains("not JSON"), "{e:?}");
    }

    type Case = (Api, Vec<&'static [u8]>, &'static str, &'static str);
    let cases: Vec<Case> = vec![
        (
            Api::Responses,
            vec![
                b"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_t\",\"status\":\"in_progress\"}}\n\n",
                b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"Hel\"}\n\n",
            ],
            "stream_without_done",
            "response.completed",
        ),
        (
            Api::Messages,
            vec![
                b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_t\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
                b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n",
                b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n",
            ],
            "stream_without_done",
            "message_stop",
        ),
        (
            Api::Messages,
            vec![
                b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_e\",\"usage\":{\"input_tokens\":3}}}\n\n",
                b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            ],
            "stream_error",
            "Overloaded",
        ),
        (
            Api::Responses,
            vec![
                b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_e\"}}\n\n",
                b"data: {\"error\":{\"message\":\"engine died\",\"type\":\"InternalServerError\",\"code\":500}}\n\n",
            ],
            "stream_error",
            "engine died",
        ),
        // Two responses interleaved on one stream: not one response's numbers.
        (
            Api::Responses,
            vec![
                b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_a\"}}\n\n",
                b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"one\"}\n\n",
                b"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_b\"}}\n\n",
                b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"two\"}\n\n",
                b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_a\",\"status\":\"completed\",\"usage\":{\"input_tokens\":3,\"output_tokens\":2}}}\n\n",
            ],
            "stream_error",
            "two responses on one Responses API stream: events of \"resp_b\" after \"resp_a\"'s",
        ),
        (
            Api::Messages,
            vec![
                b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_a\",\"usage\":{\"input_tokens\":3}}}\n\n",
                b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"one\"}}\n\n",
                b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_b\",\"usage\":{\"input_tokens\":3}}}\n\n",
                b"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
                b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            ],
            "stream_error",
            "events of \"msg_b\" after \"msg_a\"'s",
        ),
    ];
    for (api, pieces, kind, says) in cases {
        let up = split_upstream(pieces).await;
        let p = proxy(proxy_cfg(&[up])).await;
        let got = send(
            &c,
            post(
                &format!("{}{}", p.base_url(), api.path()),
                api.body(true, 8, json!({})),
                Some("t"),
            ),
        )
        .await;
        assert_eq!(got.status, 200);
        let r = p.wait_records(1).await.remove(0);
        assert_eq!(r.status, Status::Failed, "{api:?} {kind}: {r:?}");
        let e = r.error.clone().unwrap();
        assert_eq!(e.kind, kind, "{e:?}");
        assert!(e.message.contains(says), "{e:?}");
        assert!(r.measured.response_id.is_some());
        if api == Api::Messages && kind == "stream_without_done" {
            // Cut before `message_delta`: `message_start`'s output count (a placeholder) is not
            // taken; the two text chunks that arrived are counted.
            assert_eq!(r.measured.output_tokens, Some(2), "{r:?}");
            assert_eq!(r.measured.prompt_tokens, Some(3));
        }
    }
}

/// Both APIs always report usage: `--inject-usage` leaves their requests as the client sent
/// them (the server gets the same bytes) and says nothing was injected; their tokens still come
/// from the usage.
#[tokio::test]
async fn inject_usage_leaves_these_apis_alone() {
    let mut cfg = sim_cfg();
    cfg.capture_bodies = true;
    let s = sim(cfg).await;
    let mut pc = proxy_cfg(&[s.base_url()]);
    pc.inject_usage = true;
    pc.inject_continuous_usage = true;
    let p = proxy(pc).await;
    let c = client();
    let mut sent = Vec::new();
    for api in [Api::Responses, Api::Messages] {
        let body = api.body(true, 6, json!({}));
        let got = send(
            &c,
            post(
                &format!("{}{}", p.base_url(), api.path()),
                body.clone(),
                Some("i"),
            ),
        )
        .await;
        assert_eq!(got.status, 200);
        sent.push(body);
    }
    let got: Vec<_> = s.log().into_iter().map(|l| l.body.unwrap()).collect();
    assert_eq!(got, sent);
    for r in p.wait_records(2).await {
        assert_eq!(r.usage_injected, None);
        assert_eq!(r.measured.output_tokens, Some(6));
        assert_eq!(r.measured.output_tokens_source, TokenSource::Usage);
    }
}
