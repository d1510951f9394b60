//! The prefix KV cache as a client sees it through `usage.prompt_tokens_details.cached_tokens`:
//! repeats, growing conversations, salting (docs/benchmark.md#salting), and the reuse of generated
//! tokens that generated-token cache clearing removes.

use serde_json::{json, Value};
use tokentap_core::tokenize;
use tokentap_core::wire::ChatRequest;
use tokentap_sim::{render, SimConfig, SimServer};
use tokentap_testkit::sim::*;

const BLOCK: u64 = 16;

async fn sim(f: impl FnOnce(&mut SimConfig)) -> SimServer {
    let mut c = SimConfig::zero_delay();
    c.output.sigma = 0.0;
    c.output.mean_tokens = 20.0;
    f(&mut c);
    SimServer::start(c).await.unwrap()
}

/// Sends a streaming request with usage; returns (prompt_tokens, cached_tokens, response).
async fn turn(s: &SimServer, body: Value) -> (u64, u64, Resp) {
    let mut body = body;
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let r = chat(s.addr(), body).await;
    assert!(r.done(), "{:?}", r.error);
    let u = r.usage();
    let p = u["prompt_tokens"].as_u64().unwrap();
    let c = u["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    (p, c, r)
}

/// Bytes of the sim's rendering of a request body.
fn rendered(body: &Value) -> usize {
    let req: ChatRequest = serde_json::from_value(body.clone()).unwrap();
    render::chat_prompt(&req).len()
}

fn full_blocks(bytes: usize) -> u64 {
    bytes as u64 / (BLOCK * 4) * BLOCK
}

fn salted(pass: u32, conv: &str, system: &str) -> String {
    // Not the real BLAKE2b salt: any pass-specific prefix has the same effect on the cache.
    format!("[salt: p{pass:03}]\n\n{system}\n\n[salt: {conv}]")
}

fn conversation(system: &str, turns: usize) -> Vec<Value> {
    let mut msgs = vec![json!({"role": "system", "content": system})];
    for t in 0..turns {
        if t > 0 {
            // Starts with a capital: never what the sim generated (lower-case filler words).
            let recorded = format!("Done. {}", text(300, 100 + t as u64));
            msgs.push(json!({"role": "assistant", "content": recorded}));
        }
        msgs.push(json!({"role": "user", "content": text(500, t as u64)}));
    }
    msgs
}

#[tokio::test]
async fn repeat_hits_the_whole_prompt_block_rounded() {
    let s = sim(|_| {}).await;
    let body = json!({"messages": conversation(&text(2000, 9), 1)});
    let (p, c1, _) = turn(&s, body.clone()).await;
    assert_eq!(p, tokenize::count(&"x".repeat(rendered(&body))));
    assert_eq!(c1, 0);
    let (_, c2, _) = turn(&s, body).await;
    assert_eq!(c2, (p - 1) / BLOCK * BLOCK);
    assert!(c2 > p - BLOCK - 1);
    s.wait_finished(2).await;
    assert_eq!(s.log()[1].cached_tokens, c2);
    let (queries, hits) = s.cache_counters();
    assert_eq!((queries, hits), (2 * p, c2));
}

#[tokio::test]
async fn growing_conversation_reuses_its_history() {
    let s = sim(|_| {}).await;
    let system = text(1500, 1);
    let mut last_cached = 0;
    let mut last_prompt_bytes = 0;
    for t in 1..=4 {
        let body = json!({"messages": conversation(&system, t)});
        let (p, c, _) = turn(&s, body.clone()).await;
        if t == 1 {
            assert_eq!(c, 0);
        } else {
            // Everything up to the previous prompt's last full block is reused, nothing more
            // (the recorded assistant text differs from what the sim generated).
            assert_eq!(c, full_blocks(last_prompt_bytes), "turn {t}");
            assert!(c > last_cached, "cached grows: {c} after {last_cached}");
            assert!(c < p);
        }
        last_cached = c;
        last_prompt_bytes = rendered(&body);
    }
}

#[tokio::test]
async fn salting_gives_no_reuse_across_passes_and_full_reuse_within() {
    let s = sim(|_| {}).await;
    let system = text(3000, 5);
    for pass in 1..=2 {
        let sys = salted(pass, "c1", &system);
        let mut prev_bytes = None;
        for t in 1..=3 {
            let body = json!({"messages": conversation(&sys, t)});
            let (_, c, _) = turn(&s, body.clone()).await;
            match prev_bytes {
                // First turn of a pass: the salt sits in front of everything, so the previous
                // pass's blocks (same system prompt, same user turns) give nothing.
                None => assert_eq!(c, 0, "pass {pass} turn 1"),
                Some(b) => assert_eq!(c, full_blocks(b), "pass {pass} turn {t}"),
            }
            prev_bytes = Some(rendered(&body));
        }
    }
    // Unsalted, the second pass would have reused the first pass's whole prompt.
    let unsalted = sim(|_| {}).await;
    let body = json!({"messages": conversation(&system, 2)});
    turn(&unsalted, body.clone()).await;
    let (p, c, _) = turn(&unsalted, body).await;
    assert_eq!(c, (p - 1) / BLOCK * BLOCK);
}

#[tokio::test]
async fn tools_render_first_so_salted_passes_share_only_tool_blocks() {
    let s = sim(|_| {}).await;
    let tools = json!([{"type": "function", "function": {"name": "lookup", "description": text(700, 3),
                        "parameters": {"type": "object"}}}]);
    let tools_bytes = "<|tools|>\n".len() + tools.to_string().len() + "<|end|>\n".len();
    // The two renderings agree up to the pass digit of the salt.
    let shared = tools_bytes + "<|system|>\n[salt: p00".len();
    let system = text(1000, 4);
    let body =
        |pass| json!({"messages": conversation(&salted(pass, "c", &system), 1), "tools": tools});
    let (_, c1, _) = turn(&s, body(1)).await;
    let (_, c2, _) = turn(&s, body(2)).await;
    assert_eq!(c1, 0);
    assert_eq!(c2, full_blocks(shared));
    assert!(c2 >= full_blocks(tools_bytes) && c2 > 0);
}

#[tokio::test]
async fn generated_tokens_hit_unless_cleared_with_a_leading_space() {
    // The next turn replays the recorded assistant message. When it starts with exactly what
    // the sim generated (here: it *is* what the sim generated), the blocks of the generated
    // output hit; with clearing (docs/benchmark.md#cache-clearing: one leading space) they do not.
    for clear in [false, true] {
        let s = sim(|c| {
            c.modes.reasoning_fraction = 0.5;
            c.output.mean_tokens = 200.0;
        })
        .await;
        let first = json!({"messages": conversation(&text(1200, 8), 1)});
        let (_, _, r1) = turn(&s, first.clone()).await;
        let reasoning = r1.text_of("reasoning_content");
        let content = r1.text_of("content");
        assert!(reasoning.starts_with("Okay, let me start"));
        assert_eq!(reasoning.len() + content.len(), 800);
        let recorded_reasoning = if clear {
            format!(" {reasoning}")
        } else {
            reasoning.clone()
        };
        let mut msgs = first["messages"].as_array().unwrap().clone();
        msgs.push(json!({"role": "assistant", "reasoning_content": recorded_reasoning, "content": content}));
        msgs.push(json!({"role": "user", "content": "next"}));
        let (_, c2, _) = turn(&s, json!({"messages": msgs})).await;
        let p1 = rendered(&first);
        let generated = render::assistant_output(&reasoning, &content, None).len();
        if clear {
            // Only blocks that end before the first differing byte (right after `<think>`).
            assert_eq!(c2, full_blocks(p1 + "<think>".len()));
        } else {
            assert_eq!(c2, full_blocks(p1 + generated));
            assert!(c2 >= full_blocks(p1) + 190, "{c2}");
        }
    }
}

#[tokio::test]
async fn disabled_cache_reports_zero() {
    let s = sim(|c| c.cache.enabled = false).await;
    let body = json!({"messages": conversation(&text(2000, 2), 1)});
    turn(&s, body.clone()).await;
    let (_, c, _) = turn(&s, body).await;
    assert_eq!(c, 0);
}
