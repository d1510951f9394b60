//! Request build time of turn t against the size of the context before it.
//!
//! Each case is a coding-style trajectory of 20 client turns (user, then assistant tool call →
//! tool result pairs) whose tool outputs are sized so that the history before the last turn is
//! 1 KB … 1 MB of JSON; the last turn adds one ~1 KB tool result. Three ways to get the last
//! turn's body:
//! - `incremental`: [`BodyBuilder::body`] with the history already built (what the client does):
//!   serialize the new row, clone ~20 `Bytes` handles.
//! - `incremental+memcpy`: the same, then one copy of the whole body into a single buffer — the
//!   alternative to sending the segments as separate frames.
//! - `reserialize`: a fresh builder renders every row again (what a naive client does per turn).
//!
//! Run: `cargo bench -p tokentap-replay --bench build`
//!
//! Results (the table, the machine, and what it decided: the body is sent as shared segments):
//! docs/benchmarks.md, "Replay request build".

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use std::time::Duration;
use tokentap_dataset::Dataset;
use tokentap_replay::request::{BodyBuilder, RequestSettings};

/// A trajectory of `turns` tool turns whose history before the last one is about `context`
/// bytes (at least ~250 bytes of message JSON per turn).
fn dataset(context: usize, turns: usize) -> Dataset {
    let per_turn = (context / turns).saturating_sub(250).max(8);
    let mut s = String::new();
    let mut t = 1;
    let row = |s: &mut String, t: &mut u32, body: String| {
        s.push_str(&format!(
            "{{\"conversation_id\":\"django__django-16899\",\"turn\":{t},{body}}}\n"
        ));
        *t += 1;
    };
    row(
        &mut s,
        &mut t,
        "\"role\":\"user\",\"content\":\"Fix the failing test\",\"system\":\"You are a coding agent.\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"bash\"}}]".into(),
    );
    for i in 0..turns {
        row(
            &mut s,
            &mut t,
            format!("\"role\":\"assistant\",\"reasoning_content\":\"step {i}\",\"tool_calls\":[{{\"id\":\"c{i}\",\"type\":\"function\",\"function\":{{\"name\":\"bash\",\"arguments\":\"{{\\\"command\\\":\\\"cd /testbed && pytest\\\"}}\"}}}}]"),
        );
        let size = if i + 1 == turns { 1000 } else { per_turn };
        let output = tokentap_core::text::filler(i as u64, size).replace(' ', "\\n");
        row(
            &mut s,
            &mut t,
            format!("\"role\":\"tool\",\"tool_results\":[{{\"tool_call_id\":\"c{i}\",\"content\":\"{output}\"}}]"),
        );
    }
    Dataset::parse("bench.jsonl", &s).expect("bench dataset is valid")
}

fn bench(c: &mut Criterion) {
    let settings = RequestSettings {
        model: Some("m".into()),
        sampling: tokentap_replay::Preset::Kimi.sampling(),
        salt: true,
        ..Default::default()
    };
    let mut g = c.benchmark_group("build_last_turn");
    g.sample_size(30)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for (context, n_turns) in [
        (1_000, 4),
        (10_000, 20),
        (100_000, 20),
        (1_000_000, 20),
        (1_000_000, 200),
        (10_000_000, 20),
    ] {
        let ds = dataset(context, n_turns);
        let conv = &ds.conversations[0];
        let turns: Vec<usize> = conv.client_turns().collect();
        let last = *turns.last().expect("has turns");
        let mut before = BodyBuilder::new(conv, &settings, 1).expect("builder");
        for &t in &turns[..turns.len() - 1] {
            before.body(t).expect("body");
        }
        let size = before.clone().body(last).expect("body").len();
        let label = format!("{}KB_{n_turns}turns", size / 1000);
        eprintln!("{label}: last body {size} bytes");
        g.bench_function(format!("incremental/{label}"), |b| {
            b.iter_batched(
                || before.clone(),
                |mut bb| black_box(bb.body(last).expect("body")),
                BatchSize::SmallInput,
            )
        });
        let mut buf = Vec::with_capacity(size as usize);
        g.bench_function(format!("incremental+memcpy/{label}"), |b| {
            b.iter_batched(
                || before.clone(),
                |mut bb| {
                    let body = bb.body(last).expect("body");
                    body.copy_into(&mut buf);
                    black_box(buf.len())
                },
                BatchSize::SmallInput,
            )
        });
        g.bench_function(format!("reserialize/{label}"), |b| {
            b.iter(|| {
                let mut bb = BodyBuilder::new(conv, &settings, 1).expect("builder");
                black_box(bb.body(last).expect("body"))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
