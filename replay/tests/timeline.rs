//! The client's per-turn timeline against the sim's own record of when it wrote each chunk
//! (both on CLOCK_MONOTONIC): every chunk is seen, never before it was written, with the right
//! token counts, and TTFT lands on the first chunk that carries text — not the role prelude —
//! whether the text is reasoning, content or a tool call.

use serde_json::Value;
use tokentap_sim::{ChunkKind, RequestLog, SimConfig};
use tokentap_testkit::replay::*;

/// Each conversation offers a shell tool (the sim calls only offered tools).
const DATASET: &str = r#"{"conversation_id":"t1","turn":1,"role":"user","content":"hello there","tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}]}
{"conversation_id":"t1","turn":2,"role":"assistant","content":"hi"}
{"conversation_id":"t1","turn":3,"role":"user","content":"and again"}
{"conversation_id":"t2","turn":1,"role":"user","content":"second","tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}]}
"#;

fn text_kind(k: ChunkKind) -> bool {
    matches!(
        k,
        ChunkKind::Reasoning | ChunkKind::Content | ChunkKind::ToolCall
    )
}

/// Runs the dataset once (concurrency 1) and pairs each record with the sim's log entry.
async fn pairs(
    name: &str,
    sim_cfg: impl FnOnce(&mut SimConfig),
    include_usage: bool,
) -> Vec<(Value, RequestLog)> {
    let sim = sim_with(sim_cfg).await;
    let mut c = config(&sim, name);
    c.include_usage = include_usage;
    let (out, recs) = run(c, dataset(DATASET)).await;
    // The summary's client section folds the records' receive stamps.
    let client = &out.summary.client;
    let in_window: Vec<&Value> = recs
        .iter()
        .filter(|r| status(r) == "ok" && r["in_window"] == true)
        .collect();
    assert_eq!(client.rx_kernel_turns, in_window.len() as u64);
    assert_eq!(client.rx_user_turns, 0);
    assert_eq!(client.retries, 0);
    let lag = client.read_lag_ttft_ms.as_ref().expect("read lag");
    assert_eq!(lag.count, in_window.len() as u64);
    let max_ns = in_window
        .iter()
        .map(|r| u(&r["rx_lag_ttft_ns"]))
        .max()
        .unwrap();
    assert!((lag.max - max_ns as f64 / 1e6).abs() < 1e-9);
    let mut log = sim.log();
    log.sort_by_key(|r| r.seq);
    let recs = sorted(recs);
    assert_eq!(recs.len(), log.len());
    // Join rule (docs/benchmark.md#client-formats): session header + order inside the session.
    let mut out = Vec::new();
    for rec in recs {
        let nth = out
            .iter()
            .filter(|(r, _): &&(Value, RequestLog)| r["conversation_id"] == rec["conversation_id"])
            .count();
        let entry = log
            .iter()
            .filter(|l| l.session.as_deref() == rec["conversation_id"].as_str())
            .nth(nth)
            .unwrap()
            .clone();
        out.push((rec, entry));
    }
    out
}

/// Checks shared by every mode; returns the sim's first text chunk kind.
fn check(rec: &Value, log: &RequestLog) -> ChunkKind {
    assert_eq!(status(rec), "ok", "{rec}");
    let start = u(&rec["start_mono_ns"]);
    assert!(
        start <= log.received.mono_ns,
        "sent after the server received it"
    );
    let sim_text: Vec<_> = log.chunks.iter().filter(|c| text_kind(c.kind)).collect();
    let chunks = rec["chunks"].as_array().unwrap();
    let text: Vec<&Value> = chunks.iter().filter(|c| c[2] == 1).collect();
    assert_eq!(
        text.len(),
        sim_text.len(),
        "every text chunk seen exactly once"
    );
    for (c, s) in text.iter().zip(&sim_text) {
        let at = start + u(&c[0]);
        assert!(
            at >= s.mono_ns,
            "chunk seen {} ns before the sim wrote it",
            s.mono_ns - at
        );
    }
    // TTFT is the first text chunk, and it is the first chunk in the list.
    let ttft = u(&rec["ttft_ns"]);
    assert_eq!(ttft, u(&text[0][0]));
    assert!(start + ttft >= sim_text[0].mono_ns);
    // E2E reaches the last byte: after the sim wrote [DONE].
    let done = log
        .chunks
        .iter()
        .find(|c| c.kind == ChunkKind::Done)
        .unwrap();
    assert!(start + u(&rec["e2e_ns"]) >= done.mono_ns);
    assert_eq!(rec["done"], true);
    // Arrivals are the kernel's receive stamps; the client's own read lag is kept beside them.
    assert_eq!(rec["rx_clock"], "kernel", "{rec}");
    assert!(
        rec["rx_lag_ttft_ns"].is_u64() && rec["rx_lag_max_ns"].is_u64(),
        "{rec}"
    );
    assert!(u(&rec["rx_lag_ttft_ns"]) <= u(&rec["rx_lag_max_ns"]));
    sim_text[0].kind
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_prelude_is_not_ttft_and_usage_absent_counts_chunks() {
    // The prelude goes out at once, the first token after a 30 ms prefill.
    let ps = pairs(
        "prelude",
        |c| {
            c.modes.prelude_early = true;
            c.timing.prefill_base_ms = 30.0;
        },
        false,
    )
    .await;
    for (rec, log) in &ps {
        assert_eq!(check(rec, log), ChunkKind::Content);
        let start = u(&rec["start_mono_ns"]);
        let prelude = log
            .chunks
            .iter()
            .find(|c| c.kind == ChunkKind::Prelude)
            .unwrap();
        let first_text = log.chunks.iter().find(|c| text_kind(c.kind)).unwrap();
        let ttfb = start + u(&rec["ttfb_ns"]);
        assert!(
            ttfb >= prelude.mono_ns && ttfb < first_text.mono_ns,
            "TTFB is the prelude"
        );
        assert!(
            u(&rec["ttft_ns"]) >= 30_000_000,
            "TTFT includes the prefill, not the prelude"
        );
        // No usage asked for: tokens are text chunks, and the record says so.
        assert_eq!(rec["output_tokens_source"], "chunks");
        assert_eq!(u(&rec["output_tokens"]), log.output_tokens);
        assert!(rec.get("prompt_tokens").is_none());
        assert!(rec.get("cached_tokens").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_present_gives_server_counts_and_cache() {
    let ps = pairs("usage", |_| {}, true).await;
    for (rec, log) in &ps {
        check(rec, log);
        assert_eq!(rec["output_tokens_source"], "usage");
        assert_eq!(u(&rec["output_tokens"]), log.output_tokens);
        assert_eq!(u(&rec["prompt_tokens"]), log.prompt_tokens);
        assert_eq!(u(&rec["cached_tokens"]), log.cached_tokens);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_token_chunks_spread_the_usage_total() {
    let ps = pairs(
        "multitoken",
        |c| {
            c.modes.tokens_per_chunk = 4;
            c.output.mean_tokens = 18.0;
        },
        true,
    )
    .await;
    for (rec, log) in &ps {
        check(rec, log);
        let chunks = rec["chunks"].as_array().unwrap();
        let sim_tokens: Vec<u64> = log
            .chunks
            .iter()
            .filter(|c| text_kind(c.kind))
            .map(|c| c.tokens as u64)
            .collect();
        assert!(
            sim_tokens.iter().any(|t| *t > 1),
            "the sim sent multi-token chunks"
        );
        let ours: Vec<u64> = chunks.iter().map(|c| u(&c[1])).collect();
        assert_eq!(ours.iter().sum::<u64>(), sim_tokens.iter().sum::<u64>());
        assert_eq!(u(&rec["output_tokens"]), log.output_tokens);
        assert_eq!(rec["chunk_tokens_source"], "spread_usage");
        // Spread evenly: each chunk's count is within 1 of the server's.
        for (a, b) in ours.iter().zip(&sim_tokens) {
            assert!(a.abs_diff(*b) <= 1, "{ours:?} vs {sim_tokens:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_first_sets_ttft_at_the_first_reasoning_chunk() {
    let ps = pairs(
        "reasoning",
        |c| {
            c.modes.reasoning_fraction = 0.5;
            c.output.mean_tokens = 12.0;
        },
        false,
    )
    .await;
    for (rec, log) in &ps {
        assert_eq!(check(rec, log), ChunkKind::Reasoning);
        assert!(log.chunks.iter().any(|c| c.kind == ChunkKind::Content));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_are_text_and_end_with_tool_calls() {
    let ps = pairs(
        "tools",
        |c| {
            c.modes.tool_call_rate = 1.0;
        },
        false,
    )
    .await;
    for (rec, log) in &ps {
        assert_eq!(check(rec, log), ChunkKind::ToolCall);
        assert_eq!(rec["finish_reason"], "tool_calls");
    }
}
