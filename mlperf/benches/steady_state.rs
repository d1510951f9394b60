//! Cost of the steady-state view of one point ([`tokentap_mlperf::steady_state`]): bucketing the
//! tracked turns into super-passes, the window detector (plateau segmentation with the
//! Hamed–Rao trend gate at every candidate window) and NATL, over a 30,000-turn run at
//! concurrency 64 (a steady decode with jitter, a ramp of two super-passes).
//!
//! Run: `cargo bench -p tokentap-mlperf --bench steady_state`
//!
//! Results (the timings, the date and the machine, and the memory a run of this size takes):
//! docs/benchmarks.md, "Steady-state view".

use criterion::{criterion_group, criterion_main, Criterion};
use tokentap_mlperf::steady_state::{AgenticSteadyState, Sample};

fn samples(n: usize) -> Vec<Sample> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 1000) as f64 / 1000.0
    };
    (0..n)
        .map(|i| {
            let ramp = if i < 2_000 { 2.0 } else { 1.0 };
            let tpot = 12e6 * ramp * (0.9 + 0.2 * next());
            let tokens = 100 + (next() * 800.0) as u64;
            let ttft = 80e6 * (0.5 + next());
            Sample {
                issue_ns: i as u64 * 40_000_000,
                ttft_ns: Some(ttft),
                latency_ns: Some(ttft + tpot * tokens as f64),
                tpot: Some((tpot * tokens as f64, tokens)),
                trajectory: format!("c{:05}#1", i / 24),
                output_tokens: Some(tokens + 1),
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let s = samples(30_000);
    let mut g = c.benchmark_group("steady_state");
    g.sample_size(10);
    // The official dataset (613 trajectories): a super-pass is a pass, ~2 here.
    g.bench_function("30k_turns_c64_d613", |b| {
        b.iter(|| AgenticSteadyState::of(std::hint::black_box(&s), 64, 613))
    });
    // A small dataset (32 trajectories): super-passes of 64 trajectories, ~20 here — the
    // plateau search's worst case grows with their square.
    g.bench_function("30k_turns_c64_d32", |b| {
        b.iter(|| AgenticSteadyState::of(std::hint::black_box(&s), 64, 32))
    });
    g.finish();
    for d in [613, 32] {
        let r = AgenticSteadyState::of(&s, 64, d);
        eprintln!(
            "D {d}: window found {} ({} super-passes of {} samples, warmup {}; {}), NATL trajectories {}",
            r.window.found,
            r.window.n_super_passes,
            r.window.superpass_size,
            r.window.warmup,
            r.window.reason.as_deref().unwrap_or("-"),
            r.natl.n_trajectories
        );
    }
    eprintln!(
        "samples: {} bytes each + the trajectory id's heap",
        std::mem::size_of::<Sample>()
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
