//! Fault injection: each kind is visible to a real client and recorded in the log.

use serde_json::json;
use tokentap_core::chunk::ChunkInfo;
use tokentap_sim::{ChunkKind, SimConfig, SimServer};
use tokentap_testkit::sim::*;

async fn sim(f: impl FnOnce(&mut SimConfig)) -> SimServer {
    let mut c = SimConfig::zero_delay();
    f(&mut c);
    SimServer::start(c).await.unwrap()
}

fn body(stream: bool) -> serde_json::Value {
    json!({"messages": [{"role": "user", "content": "go"}], "stream": stream,
           "max_completion_tokens": 12, "stream_options": {"include_usage": true}})
}

#[tokio::test]
async fn error_status_before_streaming() {
    let s = sim(|c| {
        c.faults.error_rate = 1.0;
        c.faults.error_statuses = vec![503];
    })
    .await;
    let r = chat(s.addr(), body(true)).await;
    assert_eq!(r.status, 503);
    assert!(r.events.is_empty());
    let e: tokentap_core::wire::ErrorBody = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(e.error.code, Some(json!(503)));
    assert!(ChunkInfo::parse(&r.body).unwrap().error);
    s.wait_finished(1).await;
    let l = &s.log()[0];
    assert_eq!((l.status, l.fault.as_deref()), (503, Some("error_status")));
    assert!(l.chunks.is_empty());
}

#[tokio::test]
async fn stall_pauses_mid_stream() {
    let s = sim(|c| {
        c.faults.stall_rate = 1.0;
        c.faults.stall_ms = 150;
    })
    .await;
    let r = chat(s.addr(), body(true)).await;
    assert!(r.done());
    let max_gap = r
        .events
        .windows(2)
        .map(|w| w[1].at - w[0].at)
        .max()
        .unwrap();
    // The client may read the chunk before the pause late by its own scheduling delay (a loaded
    // machine): its gap is the pause less that; the sim's own stamps below hold the full pause.
    assert!(
        max_gap >= 100_000_000,
        "largest client-side gap {max_gap} ns"
    );
    // The pause comes after at least one token, not before the first.
    let first_text = r
        .events
        .iter()
        .position(|e| ChunkInfo::parse(e.data.as_bytes()).is_ok_and(|c| c.carries_text()))
        .unwrap();
    assert!(r.events[first_text].at - r.sent < 150_000_000);
    s.wait_finished(1).await;
    let l = &s.log()[0];
    assert_eq!(l.fault.as_deref(), Some("stall"));
    assert!(l.finished);
    let server_gap = l
        .chunks
        .windows(2)
        .map(|w| w[1].mono_ns - w[0].mono_ns)
        .max()
        .unwrap();
    assert!(server_gap >= 150_000_000);
}

#[tokio::test]
async fn disconnect_breaks_the_stream() {
    let s = sim(|c| c.faults.disconnect_rate = 1.0).await;
    let r = chat(s.addr(), body(true)).await;
    assert!(
        r.error.is_some(),
        "client must see a broken stream, not a clean end"
    );
    assert!(!r.done());
    assert!(
        r.events.len() >= 2,
        "prelude and at least one token before the cut"
    );
    s.wait_finished(1).await;
    let l = &s.log()[0];
    assert_eq!(l.fault.as_deref(), Some("disconnect"));
    assert!(!l.finished);
    assert!(l.output_tokens >= 1 && l.output_tokens < 12);
    assert_eq!(l.chunks.len(), r.events.len());

    // Non-streaming: the response never completes either (hyper may not even have flushed
    // the head when the body fails).
    match try_open(s.addr(), chat_request(&body(false))).await {
        Ok((res, _conn, sent)) => assert!(read(res, sent).await.error.is_some()),
        Err(e) => assert!(e.is_incomplete_message(), "{e}"),
    }
}

#[tokio::test]
async fn malformed_event_mid_stream() {
    let s = sim(|c| c.faults.malformed_rate = 1.0).await;
    let r = chat(s.addr(), body(true)).await;
    assert!(r.done() && r.error.is_none());
    let bad: Vec<usize> = r
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.data != "[DONE]" && ChunkInfo::parse(e.data.as_bytes()).is_err())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(bad.len(), 1);
    assert!(bad[0] >= 2, "after the prelude and a token");
    // Every token still arrives.
    assert_eq!(r.usage()["completion_tokens"], 12);
    assert_eq!(r.text_of("content").len(), 48);
    s.wait_finished(1).await;
    let l = &s.log()[0];
    assert_eq!(l.fault.as_deref(), Some("malformed"));
    assert_eq!(l.chunks[bad[0]].kind, ChunkKind::Malformed);
    assert_eq!(l.chunks.len(), r.events.len());

    let r = chat(s.addr(), body(false)).await;
    assert_eq!(r.status, 200);
    assert!(serde_json::from_slice::<serde_json::Value>(&r.body).is_err());
}

#[tokio::test]
async fn rates_are_seeded_and_mixed() {
    async fn statuses(seed: u64) -> Vec<u16> {
        let s = sim(|c| {
            c.seed = seed;
            c.faults.error_rate = 0.5;
        })
        .await;
        let mut out = Vec::new();
        for _ in 0..30 {
            out.push(chat(s.addr(), body(false)).await.status);
        }
        out
    }
    let a = statuses(1).await;
    let errors = a.iter().filter(|&&s| s != 200).count();
    assert!((5..=25).contains(&errors), "{a:?}");
    assert!(a.iter().all(|s| [200, 500, 503, 429].contains(s)));
    assert_eq!(a, statuses(1).await, "same seed, same faults");
}
