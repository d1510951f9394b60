//! The proxy's timeline against the truth: the sim logs the exact `CLOCK_MONOTONIC` instant at
//! which it handed each chunk to hyper; the proxy's record must place every chunk, the TTFT and
//! the end after that instant (causality) and within [`TOL_NS`] of it.
//!
//! Why 20 ms: on an idle machine the gap is loopback transit plus two task wake-ups, tens of
//! µs (see `examples/proxy_overhead.rs`); the tests run as a debug build on 2 cores shared with
//! parallel compilation, where a wake-up can wait several ms. The sim paces chunks 10 ms apart, so
//! a proxy that stamped at the wrong event (response head, end of stream, a batch of frames) is
//! off by tens to hundreds of ms on most chunks and fails, while scheduling noise does not.
//! The client's own arrival stamps must come after the proxy's (the proxy stamps before hyper
//! writes to the client socket).

use serde_json::json;
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::timeline::TokenSource;
use tokentap_sim::{ChunkKind, RequestLog, SimConfig};
use tokentap_testkit::proxy::*;

const TOL_NS: u64 = 20_000_000;

fn paced() -> SimConfig {
    let mut c = sim_cfg();
    c.timing.prefill_base_ms = 15.0;
    c.timing.decode_ms = 10.0;
    c
}

fn text_kind(k: ChunkKind) -> bool {
    matches!(
        k,
        ChunkKind::Reasoning | ChunkKind::Content | ChunkKind::ToolCall
    )
}

/// The checks common to every mode.
fn check_against_truth(rec: &TurnRecord, truth: &RequestLog, client_frames: &[(u64, usize)]) {
    assert_eq!(rec.status, Status::Ok, "{rec:?}");
    assert!(rec.measured.done);
    let start = rec.start_mono_ns;
    assert!(
        start <= truth.received.mono_ns,
        "the proxy starts before the sim receives"
    );
    let sim_text: Vec<_> = truth.chunks.iter().filter(|c| text_kind(c.kind)).collect();
    let px_text: Vec<_> = rec.measured.chunks.iter().filter(|c| c.text).collect();
    assert_eq!(
        px_text.len(),
        sim_text.len(),
        "one proxy chunk per text chunk"
    );
    for (i, (p, s)) in px_text.iter().zip(&sim_text).enumerate() {
        let at = start + p.at_ns;
        assert!(at >= s.mono_ns, "chunk {i} stamped before the sim wrote it");
        assert!(
            at - s.mono_ns <= TOL_NS,
            "chunk {i}: proxy {} ns after the sim",
            at - s.mono_ns
        );
    }
    // ITL: gaps between successive text chunks agree.
    for w in 1..px_text.len() {
        let pg = px_text[w].at_ns as i64 - px_text[w - 1].at_ns as i64;
        let sg = sim_text[w].mono_ns as i64 - sim_text[w - 1].mono_ns as i64;
        assert!(
            (pg - sg).unsigned_abs() <= TOL_NS,
            "gap {w}: proxy {pg} sim {sg}"
        );
    }
    let ttft = start + rec.measured.ttft_ns.expect("ttft");
    let first = sim_text[0].mono_ns;
    assert!(ttft >= first && ttft - first <= TOL_NS, "ttft");
    let last = truth.chunks.last().expect("chunks").mono_ns;
    let e2e = start + rec.measured.e2e_ns.expect("e2e");
    assert!(e2e >= last && e2e - last <= TOL_NS, "e2e");
    // The client sees each byte after the proxy stamped it.
    let first_client = client_frames.first().expect("client frames").0;
    assert!(first_client >= start + rec.measured.ttfb_ns.expect("ttfb"));
    assert!(client_frames.last().unwrap().0 >= e2e);
}

async fn one(cfg: SimConfig, extra: serde_json::Value, max: u64) -> (TurnRecord, RequestLog) {
    let s = sim(cfg).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let c = client();
    let got = send(
        &c,
        post_chat(&p.base_url(), chat(true, max, extra), Some("conv-1")),
    )
    .await;
    assert_eq!(got.status, 200);
    assert!(got.error.is_none());
    let recs = p.wait_records(1).await;
    s.wait_finished(1).await;
    let truth = s.log().remove(0);
    check_against_truth(&recs[0], &truth, &got.frames);
    (recs[0].clone(), truth)
}

#[tokio::test]
async fn role_prelude_is_not_the_first_token() {
    let (rec, truth) = one(
        paced(),
        json!({"stream_options": {"include_usage": true}}),
        8,
    )
    .await;
    assert_eq!(truth.chunks[0].kind, ChunkKind::Prelude);
    // The prelude was forwarded (TTFB) well before the first token (TTFT = prefill later).
    assert!(rec.measured.ttfb_ns.unwrap() <= rec.measured.ttft_ns.unwrap());
    assert_eq!(rec.measured.output_tokens, Some(8));
    assert_eq!(rec.measured.output_tokens_source, TokenSource::Usage);
    assert_eq!(rec.measured.prompt_tokens, Some(truth.prompt_tokens));
    assert_eq!(rec.conversation_id.as_deref(), Some("conv-1"));
    assert_eq!(rec.model.as_deref(), Some("tokentap-sim"));
    assert_eq!(rec.messages, Some(2));
    assert_eq!(rec.stream, Some(true));
}

#[tokio::test]
async fn reasoning_first_counts_reasoning_as_tokens() {
    let mut cfg = paced();
    cfg.modes.reasoning_fraction = 0.5;
    let (rec, truth) = one(cfg, json!({}), 10).await;
    let first_text = truth.chunks.iter().find(|c| text_kind(c.kind)).unwrap();
    assert_eq!(first_text.kind, ChunkKind::Reasoning);
    assert!(truth.chunks.iter().any(|c| c.kind == ChunkKind::Content));
    assert_eq!(rec.measured.output_tokens, Some(10));
}

#[tokio::test]
async fn tool_call_partials_are_tokens() {
    let mut cfg = paced();
    cfg.modes.tool_call_rate = 1.0;
    let tools = json!([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object",
        "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]);
    let (rec, truth) = one(
        cfg,
        json!({"stream_options": {"include_usage": true}, "tools": tools}),
        10,
    )
    .await;
    assert!(truth.chunks.iter().any(|c| c.kind == ChunkKind::ToolCall));
    let want = serde_json::to_value(rec.measured.finish_reason).unwrap();
    assert_eq!(want.as_str(), truth.finish_reason.as_deref());
}

#[tokio::test]
async fn multi_token_chunks_with_continuous_usage_give_exact_tokens_per_chunk() {
    let mut cfg = paced();
    cfg.modes.tokens_per_chunk = 3;
    let (rec, truth) = one(
        cfg,
        json!({"stream_options": {"include_usage": true, "continuous_usage_stats": true}}),
        12,
    )
    .await;
    assert_eq!(
        rec.measured.chunk_tokens_source,
        TokenSource::ContinuousUsage
    );
    let sim_tokens: Vec<u32> = truth
        .chunks
        .iter()
        .filter(|c| text_kind(c.kind))
        .map(|c| c.tokens)
        .collect();
    let px_tokens: Vec<u32> = rec
        .measured
        .chunks
        .iter()
        .filter(|c| c.text)
        .map(|c| c.tokens)
        .collect();
    assert_eq!(px_tokens, sim_tokens);
    assert_eq!(rec.measured.output_tokens, Some(12));
    // 3 tokens per chunk: every chunk after the first gives 3 ITL samples of gap/3.
    assert_eq!(rec.measured.itl_samples().count(), 9);
}

#[tokio::test]
async fn usage_missing_falls_back_to_chunks_and_says_so() {
    let (rec, _) = one(paced(), json!({}), 6).await;
    assert_eq!(rec.measured.output_tokens, Some(6));
    assert_eq!(rec.measured.output_tokens_source, TokenSource::Chunks);
    assert_eq!(rec.measured.prompt_tokens, None);
    assert_eq!(rec.measured.cached_tokens, None, "unknown, not zero");
}

#[tokio::test]
async fn events_split_across_frames_are_measured_and_forwarded_intact() {
    let stream: &[&'static [u8]] = &[
        b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        b"data: {\"choices\":[{\"delta\":{\"con",
        b"tent\":\"ab\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"cd\"}}]}\r",
        b"\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"ef\"},\"finish_reason\":\"stop\"}]}\n",
        b"\ndata: [DO",
        b"NE]\n\n",
    ];
    let up = split_upstream(stream.to_vec()).await;
    let p = proxy(proxy_cfg(&[up])).await;
    let got = send(
        &client(),
        post_chat(&p.base_url(), chat(true, 3, json!({})), None),
    )
    .await;
    assert_eq!(got.body, stream.concat(), "bytes pass through untouched");
    let rec = p.wait_records(1).await.remove(0);
    assert_eq!(rec.status, Status::Ok);
    assert!(rec.measured.done);
    assert_eq!(rec.measured.events, 5);
    assert_eq!(rec.measured.output_tokens, Some(3));
    assert_eq!(rec.measured.malformed_events, 0);
    assert_eq!(
        rec.measured.finish_reason,
        Some(tokentap_core::chunk::FinishReason::Stop)
    );
}

#[tokio::test]
async fn non_streaming_response_is_measured_from_its_usage() {
    let s = sim(sim_cfg()).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let got = send(
        &client(),
        post_chat(&p.base_url(), chat(false, 7, json!({})), Some("c")),
    )
    .await;
    assert_eq!(got.status, 200);
    let v = got.json();
    let rec = p.wait_records(1).await.remove(0);
    assert_eq!(rec.status, Status::Ok);
    assert_eq!(rec.stream, Some(false));
    assert_eq!(
        rec.measured.output_tokens,
        v["usage"]["completion_tokens"].as_u64()
    );
    assert_eq!(
        rec.measured.prompt_tokens,
        v["usage"]["prompt_tokens"].as_u64()
    );
    assert_eq!(rec.measured.output_tokens_source, TokenSource::Usage);
}

#[tokio::test]
async fn completions_route_is_measured() {
    let s = sim(paced()).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let body = serde_json::to_vec(
        &json!({"model":"m","prompt":"hello there","max_tokens":5,"stream":true}),
    )
    .unwrap();
    let got = send(
        &client(),
        post(
            &format!("{}/v1/completions", p.base_url()),
            body.into(),
            None,
        ),
    )
    .await;
    assert_eq!(got.status, 200);
    let rec = p.wait_records(1).await.remove(0);
    s.wait_finished(1).await;
    let truth = s.log().remove(0);
    assert_eq!(rec.route.as_deref(), Some("/v1/completions"));
    check_against_truth(&rec, &truth, &got.frames);
    assert_eq!(rec.messages, None);
}
