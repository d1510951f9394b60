//! The timing model and the ground-truth log, measured from a real client on the same
//! monotonic clock the sim stamps with. Timers never fire early, so the assertions are
//! orderings and lower bounds, never exact durations.

use http_body_util::BodyExt;
use serde_json::json;
use tokentap_sim::{ChunkKind, SimConfig, SimServer};
use tokentap_testkit::sim::*;

const MS: u64 = 1_000_000;

fn timed(f: impl FnOnce(&mut SimConfig)) -> SimConfig {
    let mut c = SimConfig::zero_delay();
    c.timing.prefill_base_ms = 1.0;
    c.timing.prefill_per_token_ms = 0.0;
    c.timing.decode_ms = 1.0;
    c.timing.decode_slowdown = 0.0;
    c.output.sigma = 0.0;
    f(&mut c);
    c
}

/// A streaming request whose user message is `user_bytes` of filler; the filler depends on the
/// length, so two bodies of different sizes share no cached prefix.
fn stream_body(user_bytes: usize, max: u64) -> serde_json::Value {
    json!({"messages": [{"role": "user", "content": text(user_bytes, user_bytes as u64)}], "stream": true,
           "max_completion_tokens": max, "stream_options": {"include_usage": true}})
}

#[tokio::test]
async fn ttft_grows_with_uncached_tokens_and_drops_when_cached() {
    let s = SimServer::start(timed(|c| c.timing.prefill_per_token_ms = 0.05))
        .await
        .unwrap();
    let small = chat(s.addr(), stream_body(400, 3)).await; // ~100 tokens: ~6 ms
    let big = chat(s.addr(), stream_body(16_000, 3)).await; // ~4000 tokens: ~201 ms
    let again = chat(s.addr(), stream_body(16_000, 3)).await; // cached: ~2 ms
    let (t_small, t_big, t_again) = (small.ttft_ns(), big.ttft_ns(), again.ttft_ns());
    assert!(t_big > t_small, "{t_big} vs {t_small}");
    assert!(
        t_big >= 200 * MS,
        "prefill of 4000 uncached tokens took only {t_big} ns"
    );
    assert!(t_again < t_big, "cached repeat {t_again} vs {t_big}");
    assert!(
        again.usage()["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 3900
    );
}

#[tokio::test]
async fn prefill_lanes_queue_requests() {
    let s = SimServer::start(timed(|c| {
        c.timing.prefill_base_ms = 100.0;
        c.timing.prefill_lanes = 1;
    }))
    .await
    .unwrap();
    let (a, b) = tokio::join!(
        chat(s.addr(), stream_body(40, 2)),
        chat(s.addr(), stream_body(44, 2))
    );
    let (first, second) = (a.ttft_ns().min(b.ttft_ns()), a.ttft_ns().max(b.ttft_ns()));
    assert!(first >= 100 * MS);
    assert!(
        second >= 200 * MS,
        "second prefill waited for the lane: {second}"
    );
}

/// Span between the first and the last token chunk in the sim's own log.
fn decode_span(log: &tokentap_sim::RequestLog) -> u64 {
    let toks: Vec<u64> = log
        .chunks
        .iter()
        .filter(|c| c.tokens > 0)
        .map(|c| c.mono_ns)
        .collect();
    toks[toks.len() - 1] - toks[0]
}

#[tokio::test]
async fn decode_slows_down_with_concurrent_decodes() {
    let cfg = timed(|c| {
        c.timing.prefill_base_ms = 0.0;
        c.timing.decode_ms = 4.0;
        c.timing.decode_slowdown = 1.0; // +100 % per extra decode
    });
    let s = SimServer::start(cfg).await.unwrap();
    chat(s.addr(), stream_body(40, 30)).await;
    s.wait_finished(1).await;
    let alone = decode_span(&s.log()[0]);
    assert!(alone >= 29 * 4 * MS, "{alone}");
    s.clear_log();
    tokio::join!(
        chat(s.addr(), stream_body(40, 30)),
        chat(s.addr(), stream_body(48, 30))
    );
    s.wait_finished(2).await;
    for l in s.log() {
        let span = decode_span(&l);
        // 8 ms per token while both decode (vs 4 ms alone): well above 1.5 × the solo span.
        assert!(span >= 174 * MS, "concurrent span {span} (alone {alone})");
    }
}

#[tokio::test]
async fn log_stamps_are_monotonic_and_match_the_events_received() {
    let s = SimServer::start(timed(|c| c.modes.tokens_per_chunk = 2))
        .await
        .unwrap();
    let r = chat(s.addr(), stream_body(100, 21)).await;
    s.wait_finished(1).await;
    let log = &s.log()[0];
    assert_eq!(log.chunks.len(), r.events.len());
    assert!(log.chunks.windows(2).all(|w| w[0].mono_ns <= w[1].mono_ns));
    let kinds: Vec<ChunkKind> = log.chunks.iter().map(|c| c.kind).collect();
    assert_eq!(kinds[0], ChunkKind::Prelude);
    assert_eq!(
        &kinds[kinds.len() - 2..],
        &[ChunkKind::Usage, ChunkKind::Done]
    );
    assert_eq!(log.chunks.iter().map(|c| c.tokens).sum::<u32>(), 21);
    assert_eq!(log.output_tokens, 21);
    for (server, client) in log.chunks.iter().zip(&r.events) {
        // Same clock on both sides: the client cannot see a chunk before the sim wrote it.
        assert!(client.at >= server.mono_ns);
        assert_eq!(server.wall_ns, log.received.wall_of(server.mono_ns));
    }
    assert!(log.received.mono_ns >= r.sent);
    // Token chunks at least one decode interval (2 tokens × 1 ms) apart.
    // The schedule is absolute from arrival: token chunk i is due at prefill (1 ms) + (tokens
    // after the first chunk) × 1 ms, never earlier. (Gaps between neighbours can be shorter
    // than the interval when the earlier chunk was late: lateness is not carried forward.)
    let toks: Vec<_> = log.chunks.iter().filter(|c| c.tokens > 0).collect();
    assert_eq!(toks.len(), 11);
    let mut after_first = 0;
    for (i, c) in toks.iter().enumerate() {
        if i > 0 {
            after_first += c.tokens as u64;
        }
        let at = c.mono_ns - log.received.mono_ns;
        assert!(
            at >= (1 + after_first) * MS,
            "{at} ns for {after_first} tokens"
        );
    }
}

#[tokio::test]
async fn client_going_away_is_logged_unfinished() {
    let s = SimServer::start(timed(|c| c.timing.decode_ms = 5.0))
        .await
        .unwrap();
    let (res, conn, _) = open(s.addr(), chat_request(&stream_body(40, 1000))).await;
    let mut body = res.into_body();
    let mut seen = 0;
    while seen < 3 {
        let f = body.frame().await.unwrap().unwrap();
        if f.is_data() {
            seen += 1;
        }
    }
    drop(body);
    conn.abort();
    s.wait_finished(1).await;
    let l = &s.log()[0];
    assert!(!l.finished);
    assert!(
        l.output_tokens >= 2 && l.output_tokens < 1000,
        "{}",
        l.output_tokens
    );
    assert!(l.fault.is_none());
}

#[tokio::test]
async fn shutdown_cuts_streams_after_the_grace_period_and_flushes_the_chunk_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chunks.jsonl");
    let s = SimServer::start(timed(|c| {
        c.timing.decode_ms = 5.0;
        c.shutdown_grace_ms = 50;
        c.chunk_log = Some(path.clone());
    }))
    .await
    .unwrap();
    chat(s.addr(), stream_body(40, 3)).await; // one finished request
    let (res, _conn, sent) = open(s.addr(), chat_request(&stream_body(40, 10_000))).await;
    let reader = tokio::spawn(read(res, sent));
    s.wait_finished(1).await;
    s.shutdown().await;
    let r = reader.await.unwrap();
    assert!(
        r.error.is_some() || !r.done(),
        "stream was cut, not completed"
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["finished"], true);
    assert_eq!(lines[1]["finished"], false);
    assert!(lines[1]["chunks"].as_array().unwrap().len() >= 2);
}

#[tokio::test]
async fn many_concurrent_timed_streams_all_complete() {
    let s = SimServer::start(timed(|c| c.timing.decode_slowdown = 0.01))
        .await
        .unwrap();
    let addr = s.addr();
    let tasks: Vec<_> = (0..48)
        .map(|i| tokio::spawn(async move { chat(addr, stream_body(40 + i, 20)).await }))
        .collect();
    for t in tasks {
        let r = t.await.unwrap();
        assert!(r.done());
        assert_eq!(r.usage()["completion_tokens"], 20);
    }
    s.wait_finished(48).await;
    let log = s.log();
    assert_eq!(log.len(), 48);
    assert!(log.iter().all(|l| l.finished && l.output_tokens == 20));
    assert_eq!(
        log.iter().map(|l| l.seq).collect::<Vec<_>>(),
        (0..48).collect::<Vec<u64>>()
    );
}
