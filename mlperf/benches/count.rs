//! Cost of the reference tokenizer's counts, per turn: OSL + the TPOT denominator of one output
//! (what the replay's post-processing pool and the proxy's counting stage do after every turn),
//! against output length, and the ISL of a growing agentic prompt.
//!
//! Tokenizer: the golden folder's (testdata/golden: byte-level BPE, 2,460 tokens, a Qwen3-style
//! chat template). A production vocabulary (~150 k tokens) has more merges per word and costs
//! more per byte; the shape (linear in the output, prompts paid for new text only) holds.
//!
//! Measured (release bench profile, 2-core VM, quiet, 2026-12-01):
//!
//! ```text
//!  output (reasoning + 1 bash call)  ~tokens    OSL + TPOT tokens
//!  64 words                            ~170        43 µs
//!  512 words                          ~1300       247 µs
//!  4096 words                        ~10400      1.95 ms
//!  text only, 512 words               ~1300       110 µs
//!  ISL, 60-message prompt (~27 k tok): whole, cold   3.6 ms;  next turn (pieces cached)  0.98 ms
//! ```
//!
//! (Filled in from `cargo bench -p tokentap-mlperf --bench count`; see the crate docs.)

use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::{json, Value};
use std::path::PathBuf;
use tokentap_mlperf::output::{ModelOutput, Pieces, ToolCalls};
use tokentap_mlperf::{PromptInput, RefTokenizer};

fn tokenizer() -> RefTokenizer {
    RefTokenizer::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../testdata/golden/mlperf-ea33275/tokenizer"),
    )
    .expect("golden tokenizer")
}

fn words(n: usize, seed: usize) -> String {
    const W: [&str; 12] = [
        "the",
        "test",
        "fails",
        "because",
        "config.py",
        "returns",
        "None",
        "when",
        "cache",
        "is",
        "warm,",
        "so",
    ];
    (0..n)
        .map(|i| W[(i * 7 + seed) % W.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn structured(n: usize) -> ModelOutput {
    let r = words(n, 1);
    let (a, b) = r.split_at(r.len() / 20);
    ModelOutput {
        output: Pieces::Text(String::new()),
        reasoning: Some(Pieces::Chunks(vec![a.to_string(), b.to_string()])),
        tool_calls: Some(ToolCalls::Chunks(vec![
            vec![
                json!({"index": 0, "id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"cd /testbed && python -m"}}),
            ],
            vec![
                json!({"index": 0, "function": {"arguments": " pytest -x tests/test_io.py | tail -20\"}"}}),
            ],
        ])),
    }
}

fn text_only(n: usize) -> ModelOutput {
    let t = words(n, 3);
    let (a, b) = t.split_at(20);
    ModelOutput {
        output: Pieces::Chunks(vec![a.to_string(), b.to_string()]),
        reasoning: None,
        tool_calls: None,
    }
}

fn prompt(turns: usize) -> PromptInput {
    let mut messages = vec![
        json!({"role": "system", "content": format!("[salt: 4461]\n\n{}\n\n[salt: e643]", words(800, 5))}),
        json!({"role": "user", "content": words(60, 2)}),
    ];
    for t in 0..turns {
        messages.push(json!({"role": "assistant", "reasoning_content": words(40, t),
            "tool_calls": [{"id": format!("c{t}"), "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"grep -rn cache src\"}"}}]}));
        messages.push(
            json!({"role": "tool", "tool_call_id": format!("c{t}"), "content": words(300, t + 1)}),
        );
    }
    let tools: Vec<Value> = vec![
        json!({"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}),
    ];
    PromptInput {
        messages,
        tools: Some(tools),
        chat_template_kwargs: Some(
            json!({"preserve_thinking": true})
                .as_object()
                .unwrap()
                .clone(),
        ),
        chat_template: None,
        tool_choice: None,
    }
}

fn bench(c: &mut Criterion) {
    let tok = tokenizer();
    for n in [64, 512, 4096] {
        let out = structured(n);
        c.bench_function(&format!("osl_tpot_structured_{n}_words"), |b| {
            b.iter(|| (tok.osl(&out), tok.tpot_tokens(&out)))
        });
    }
    let out = text_only(512);
    c.bench_function("osl_tpot_text_512_words", |b| {
        b.iter(|| (tok.osl(&out), tok.tpot_tokens(&out)))
    });
    let p = prompt(29);
    println!("prompt tokens: {}", tok.count_prompt(&p).tokens);
    c.bench_function("isl_60_messages_whole", |b| {
        b.iter(|| {
            // A fresh tokenizer has no remembered pieces: the cost of the first sight.
            let t = tokenizer();
            t.count_prompt(&p)
        })
    });
    c.bench_function("tokenizer_load", |b| b.iter(tokenizer));
    let _ = tok.count_prompt(&prompt(28));
    c.bench_function("isl_60_messages_next_turn", |b| {
        b.iter(|| tok.count_prompt(&p))
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
