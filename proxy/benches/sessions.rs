//! criterion bench of following chat sessions that carry no id (`--session-from-body
//! messages_prefix`): per request, hashing its message prefixes and finding (or opening) its
//! session, for a conversation's first request and its 40th; then the memory one open
//! conversation holds in the table, from the process's resident size over 100,000 of them.
//!
//! Run: `cargo bench -p tokentap-proxy --bench sessions`
//!
//! Results (the run, its date and the machine): docs/benchmarks.md, "Sessions without ids".

use criterion::{criterion_group, Criterion, Throughput};
use serde_json::json;
use tokentap_proxy::sessions::{Limits, Sessions};
use tokentap_proxy::sniff::message_prefixes;

/// A chat request of an agent at turn `turn`: a 4 KB system prompt, then per turn a 600-byte
/// user (or tool) message and an 800-byte answer.
fn body(turn: usize) -> Vec<u8> {
    let words = |n: usize, seed: usize| -> String {
        (0..n)
            .map(|i| ["the", "file", "grep", "returns", "ok"][(i + seed) % 5])
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut messages = vec![json!({"role": "system", "content": words(800, 0)})];
    for t in 0..turn {
        messages.push(json!({"role": "user", "content": words(120, t)}));
        if t + 1 < turn {
            messages.push(json!({"role": "assistant", "content": words(160, t + 1)}));
        }
    }
    serde_json::to_vec(&json!({"model": "m", "messages": messages, "stream": true})).unwrap()
}

/// Resident bytes of this process (`/proc/self/statm`).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("messages_prefix");
    g.throughput(Throughput::Elements(1));
    for turn in [1, 40] {
        let b = body(turn);
        let t = Sessions::new(Limits {
            ttl_ns: u64::MAX,
            max: 10_000,
            max_bytes: u64::MAX,
        });
        println!("turn {turn}: body {} bytes", b.len());
        g.bench_function(format!("turn_{turn}"), |bench| {
            bench.iter(|| t.by_prefix(&message_prefixes(&b)))
        });
    }
    g.finish();

    let n = 100_000u64;
    let t = Sessions::new(Limits {
        ttl_ns: u64::MAX,
        max: n as usize + 1,
        max_bytes: u64::MAX,
    });
    let before = rss();
    for i in 0..n {
        t.by_prefix(&[i.wrapping_mul(0x9E37_79B9_7F4A_7C15), i]);
    }
    let after = rss();
    println!(
        "memory: {} open conversations, {:.0} bytes each (resident size {} → {} MB)",
        t.prefix_entries(),
        (after - before) as f64 / n as f64,
        before >> 20,
        after >> 20
    );
}

criterion_group!(group, benches);

fn main() {
    group();
    Criterion::default().configure_from_args().final_summary();
}
