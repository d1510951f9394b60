//! `GET /metrics`: the sim's vLLM-named engine series, checked against the sim's own
//! ground-truth log (same requests, same chunk stamps) after real streaming requests.

use serde_json::json;
use tokentap_sim::{ChunkKind, EngineFlavor, SimConfig, SimServer};
use tokentap_testkit::sim::*;

/// The value of the sample whose line starts with `series` (name plus label set, or name and
/// a space when there are no labels besides the constant `model_name`).
fn sample(text: &str, series: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(series))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn metrics_match_the_request_log() {
    let mut c = SimConfig::zero_delay();
    c.model = "sim-model".into();
    c.timing.prefill_base_ms = 2.0;
    c.timing.decode_ms = 1.0;
    c.output.sigma = 0.0;
    c.modes.tokens_per_chunk = 3;
    let s = SimServer::start(c).await.unwrap();
    let body = |user: &str| {
        json!({"messages": [{"role": "user", "content": text(800, user.len() as u64)}], "stream": true,
               "max_completion_tokens": 10, "stream_options": {"include_usage": true}})
    };
    // The second request repeats the first's prompt: a prefix-cache hit.
    for u in ["a", "a", "bbb"] {
        let r = chat(s.addr(), body(u)).await;
        assert!(r.done(), "stream ended with [DONE]");
    }
    s.wait_finished(3).await;
    let log = s.log();
    assert_eq!(log.len(), 3);

    let res = send(s.addr(), get("/metrics")).await;
    assert_eq!(res.status, 200);
    assert!(res.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let m = String::from_utf8(res.body).unwrap();
    assert_eq!(s.log().len(), 3, "a scrape is not a logged request");

    let l = "{model_name=\"sim-model\"}";
    let n = |name: &str| sample(&m, &format!("{name}{l}"));
    let count = |name: &str| sample(&m, &format!("{name}_count{l}"));
    let sum = |name: &str| sample(&m, &format!("{name}_sum{l}"));

    // Ground truth from the log: TTFT to the first text chunk, ITL tokens after it.
    let (mut ttft_sum, mut itl_tokens, mut itl_sum) = (0.0, 0u64, 0.0);
    for r in &log {
        let text: Vec<_> = r
            .chunks
            .iter()
            .filter(|c| matches!(c.kind, ChunkKind::Content | ChunkKind::Reasoning))
            .collect();
        ttft_sum += (text[0].mono_ns - r.received.mono_ns) as f64 / 1e9;
        for w in text.windows(2) {
            itl_tokens += w[1].tokens as u64;
            itl_sum += (w[1].mono_ns - w[0].mono_ns) as f64 / 1e9;
        }
    }
    assert!(itl_tokens > 0, "several chunks per request");

    assert_eq!(count("vllm:time_to_first_token_seconds"), 3.0);
    assert_eq!(count("vllm:e2e_request_latency_seconds"), 3.0);
    assert_eq!(
        count("vllm:inter_token_latency_seconds"),
        itl_tokens as f64,
        "one ITL sample per token after the first chunk"
    );
    assert!((sum("vllm:time_to_first_token_seconds") - ttft_sum).abs() < 1e-6);
    assert!((sum("vllm:inter_token_latency_seconds") - itl_sum).abs() < 1e-6);
    // Timers never fire early: prefill ≥ 2 ms. (Per-gap ITL has no such bound: a late chunk
    // shortens the gap after it, the schedule being absolute.)
    assert!(ttft_sum >= 3.0 * 0.002, "{ttft_sum}");
    assert!(itl_sum > 0.0);

    let prompt: u64 = log.iter().map(|r| r.prompt_tokens).sum();
    let cached: u64 = log.iter().map(|r| r.cached_tokens).sum();
    let output: u64 = log.iter().map(|r| r.output_tokens).sum();
    assert!(cached > 0, "the repeated prompt hit the cache");
    assert_eq!(n("vllm:prompt_tokens_total"), prompt as f64);
    assert_eq!(n("vllm:generation_tokens_total"), output as f64);
    assert_eq!(n("vllm:prefix_cache_queries_total"), prompt as f64);
    assert_eq!(n("vllm:prefix_cache_hits_total"), cached as f64);
    assert_eq!(n("vllm:num_requests_running"), 0.0);

    // The buckets of docs/benchmark.md#prometheus (which contain vLLM's): the TTFT list ends at
    // 2560 s.
    assert!(
        m.contains("vllm:time_to_first_token_seconds_bucket{model_name=\"sim-model\",le=\"2560\"}")
    );
    for name in tokentap_core::metrics::ENGINE_NAMES
        .iter()
        .filter(|n| n.starts_with("vllm:"))
    {
        assert!(m.contains(name), "{name} exported");
    }
    for name in tokentap_sim::metrics::VLLM_NAMES {
        assert!(
            tokentap_core::metrics::ENGINE_NAMES.contains(name),
            "{name} listed in core's ENGINE_NAMES"
        );
        assert!(m.contains(&format!("# TYPE {name} ")), "{name} exported");
    }
}

#[tokio::test]
async fn running_gauge_counts_an_open_stream() {
    let mut c = SimConfig::zero_delay();
    c.timing.decode_ms = 1.0;
    let s = SimServer::start(c).await.unwrap();
    let body = json!({"messages": [{"role": "user", "content": "hi"}], "stream": true,
                      "max_completion_tokens": 50});
    // The head is sent when the body is built (admission); the body is not read yet.
    let (res, task, _) = open(s.addr(), chat_request(&body)).await;
    let m = String::from_utf8(send(s.addr(), get("/metrics")).await.body).unwrap();
    assert_eq!(
        sample(&m, "vllm:num_requests_running{model_name=\"tokentap-sim\"}"),
        1.0
    );
    drop(res);
    task.abort();
    s.wait_finished(1).await;
    let m = String::from_utf8(send(s.addr(), get("/metrics")).await.body).unwrap();
    assert_eq!(
        sample(&m, "vllm:num_requests_running{model_name=\"tokentap-sim\"}"),
        0.0
    );
}

/// A sim playing `flavor` (`k` tokens a chunk) after two finished streams of the same prompt.
async fn two_turns_as(flavor: EngineFlavor, k: u32) -> SimServer {
    let mut c = SimConfig::zero_delay();
    c.engine_metrics = flavor;
    c.modes.tokens_per_chunk = k;
    let s = SimServer::start(c).await.unwrap();
    let body = json!({"messages": [{"role": "user", "content": text(400, 1)}], "stream": true,
                      "max_completion_tokens": 8});
    for _ in 0..2 {
        assert!(chat(s.addr(), body.clone()).await.done());
    }
    s.wait_finished(2).await;
    s
}

#[tokio::test]
async fn sglang_flavor_exports_sglang_names() {
    let s = two_turns_as(EngineFlavor::Sglang, 2).await;
    let log = s.log();
    let m = String::from_utf8(send(s.addr(), get("/metrics")).await.body).unwrap();
    let l = "{model_name=\"tokentap-sim\"}";
    assert_eq!(
        sample(&m, &format!("sglang:time_to_first_token_seconds_count{l}")),
        2.0
    );
    assert_eq!(
        sample(&m, &format!("sglang:e2e_request_latency_seconds_count{l}")),
        2.0
    );
    let cached: u64 = log.iter().map(|r| r.cached_tokens).sum();
    assert!(cached > 0);
    assert_eq!(
        sample(&m, &format!("sglang:cached_tokens_total{l}")),
        cached as f64
    );
    for name in tokentap_sim::metrics::SGLANG_NAMES {
        assert!(m.contains(&format!("# TYPE {name} ")), "{name} exported");
    }
    assert!(!m.contains("vllm:"));
}

#[tokio::test]
async fn trtllm_flavor_exports_trtllm_names_at_both_paths() {
    let s = two_turns_as(EngineFlavor::Trtllm, 1).await;
    for path in ["/prometheus/metrics", "/metrics"] {
        let m = String::from_utf8(send(s.addr(), get(path)).await.body).unwrap();
        let l = "{model_name=\"tokentap-sim\"}";
        assert_eq!(
            sample(&m, &format!("trtllm_time_to_first_token_seconds_count{l}")),
            2.0,
            "{path}"
        );
        for name in tokentap_sim::metrics::TRTLLM_NAMES {
            assert!(
                m.contains(&format!("# TYPE {name} ")),
                "{name} exported at {path}"
            );
        }
        assert!(!m.contains("vllm:") && !m.contains("sglang:"));
    }
}
