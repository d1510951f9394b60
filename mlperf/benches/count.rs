//! Cost of the reference tokenizer's counts, per turn: OSL + the TPOT denominator of one output
//! (what the replay's post-processing pool and the proxy's counting stage do after every turn),
//! against output length, and the ISL of a growing agentic prompt.
//!
//! Tokenizer: the golden folder's (testdata/golden: byte-level BPE, 2,460 tokens, a Qwen3-style
//! chat template).
//!
//! Run: `cargo bench -p tokentap-mlperf --bench count`
//!
//! Results (the table, the date and the machine, and where the time goes):
//! docs/benchmarks.md, "Reference token counts".

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

/// A structured output of `n` words; `id` makes its text unique (no remembered pieces).
fn structured(n: usize, id: u64) -> ModelOutput {
    let r = format!("run {id}: {}", words(n, 1));
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

fn text_only(n: usize, id: u64) -> ModelOutput {
    let t = format!("run {id}: {}", words(n, 3));
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
    use criterion::BatchSize;
    use std::sync::atomic::{AtomicU64, Ordering};
    let tok = tokenizer();
    let id = AtomicU64::new(0);
    let next = || id.fetch_add(1, Ordering::Relaxed);
    // Every iteration counts an output never seen before, as in a run.
    for n in [64, 512, 4096] {
        c.bench_function(&format!("osl_tpot_structured_{n}_words"), |b| {
            b.iter_batched(
                || structured(n, next()),
                |out| (tok.osl(&out), tok.tpot_tokens(&out)),
                BatchSize::SmallInput,
            )
        });
    }
    c.bench_function("osl_tpot_text_512_words", |b| {
        b.iter_batched(
            || text_only(512, next()),
            |out| (tok.osl(&out), tok.tpot_tokens(&out)),
            BatchSize::SmallInput,
        )
    });
    let p = prompt(29);
    println!(
        "prompt tokens: {}; OSL of the structured outputs of 64 / 512 / 4096 words: {:?} / {:?} / {:?}; text 512: {:?}",
        tok.count_prompt(&p).tokens,
        tok.osl(&structured(64, 0)).map(|c| c.tokens),
        tok.osl(&structured(512, 0)).map(|c| c.tokens),
        tok.osl(&structured(4096, 0)).map(|c| c.tokens),
        tok.osl(&text_only(512, 0)).map(|c| c.tokens),
    );
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
    // The replay's ISL cost per turn against the trajectory's depth: the request body read back
    // (as the replay's post-processing does) and its prompt counted, with every piece of the
    // turns before remembered. Flat in depth is the goal; growing is the whole conversation
    // parsed, rendered and hashed again each turn.
    for turns in [10, 50, 100] {
        let p = prompt(turns);
        let body = serde_json::to_vec(&json!({
            "model": "m",
            "messages": p.messages,
            "tools": p.tools,
            "chat_template_kwargs": p.chat_template_kwargs,
            "stream": true,
        }))
        .expect("a body");
        let _ = tok.count_prompt(&p);
        c.bench_function(&format!("isl_body_next_turn_depth_{turns}"), |b| {
            b.iter(|| {
                let p = PromptInput::from_body(&body).expect("a chat body");
                tok.count_prompt(&p)
            })
        });
        // The same from the previous turn's memo, as the replay counts it.
        let mut before = tokentap_mlperf::tokenizer::PromptMemo::default();
        let _ = tok.count_prompt_after(&prompt(turns - 1), &mut before);
        c.bench_function(&format!("isl_body_next_turn_after_depth_{turns}"), |b| {
            b.iter_batched(
                || before.clone(),
                |mut memo| {
                    let p = PromptInput::from_body(&body).expect("a chat body");
                    tok.count_prompt_after(&p, &mut memo)
                },
                BatchSize::LargeInput,
            )
        });
        // As the replay counts it now: only the new messages read (the trajectory's earlier
        // ones are the same segments of the body, known unchanged), counted on from the memo.
        let kept = prompt(turns - 1).messages.len();
        assert_eq!(
            prompt(turns - 1).messages[..],
            p.messages[..kept],
            "prompts grow"
        );
        let new_segment = serde_json::to_vec(&p.messages[kept..]).expect("messages");
        let whole = tok.count_prompt(&p).tokens;
        let mut check = before.clone();
        let q = PromptInput {
            messages: p.messages[kept..].to_vec(),
            ..p.clone()
        };
        assert_eq!(
            tok.count_prompt_continued(&q, kept, &mut check).tokens,
            whole
        );
        c.bench_function(&format!("isl_continued_depth_{turns}"), |b| {
            b.iter_batched(
                || before.clone(),
                |mut memo| {
                    let q = PromptInput {
                        messages: serde_json::from_slice(&new_segment).expect("messages"),
                        tools: p.tools.clone(),
                        chat_template_kwargs: p.chat_template_kwargs.clone(),
                        ..PromptInput::default()
                    };
                    tok.count_prompt_continued(&q, kept, &mut memo)
                },
                BatchSize::LargeInput,
            )
        });
        // Its two parts: the body read back, and the count of the prompt read.
        if turns == 100 {
            c.bench_function("isl_depth_100_body_only", |b| {
                b.iter(|| PromptInput::from_body(&body).expect("a chat body"))
            });
            c.bench_function("isl_depth_100_count_only", |b| {
                b.iter(|| tok.count_prompt(&p))
            });
        }
    }
    // A whole trajectory's prompts, turn 0 to `turns`, counted as the replay counts them: one
    // memo, each turn given its new messages. The time per turn is the bench's ÷ (turns + 1):
    // flat in the depth when a turn pays only for what is new.
    for turns in [10, 50, 100] {
        let full = prompt(turns);
        let segments: Vec<(usize, Vec<Value>)> = (0..=turns)
            .map(|k| {
                let end = 2 + 2 * k;
                let kept = if k == 0 { 0 } else { end - 2 };
                (kept, full.messages[kept..end].to_vec())
            })
            .collect();
        let trajectory = || {
            let mut memo = tokentap_mlperf::tokenizer::PromptMemo::default();
            let mut last = 0;
            for (kept, new) in &segments {
                let q = PromptInput {
                    messages: new.clone(),
                    tools: full.tools.clone(),
                    chat_template_kwargs: full.chat_template_kwargs.clone(),
                    ..PromptInput::default()
                };
                last = tok.count_prompt_continued(&q, *kept, &mut memo).tokens;
            }
            last
        };
        assert_eq!(trajectory(), tok.count_prompt(&full).tokens);
        c.bench_function(&format!("isl_trajectory_{turns}_turns"), |b| {
            b.iter(trajectory)
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
