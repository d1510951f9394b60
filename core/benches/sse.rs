//! Framer and chunk-parser cost per event; one chunk read by the scan and by serde_json.
//!
//! Run: `cargo bench -p tokentap-core --bench sse` (results, when recorded: docs/benchmarks.md).
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tokentap_core::chunk::ChunkInfo;
use tokentap_core::sse::Framer;
use tokentap_core::timeline::Timeline;

fn stream(n: usize) -> Vec<u8> {
    let mut s = Vec::new();
    for i in 0..n {
        s.extend_from_slice(format!("data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \\n\"}},\"finish_reason\":null}}]}}\n\n").as_bytes());
    }
    s.extend_from_slice(b"data: [DONE]\n\n");
    s
}

fn bench(c: &mut Criterion) {
    let s = stream(1000);
    let mut g = c.benchmark_group("sse");
    g.throughput(Throughput::Elements(1001));
    g.bench_function("framer_1000_events_in_reads_of_97_bytes", |b| {
        b.iter(|| {
            let mut f = Framer::new();
            let mut n = 0usize;
            for piece in s.chunks(97) {
                f.feed(piece, |e| n += e.data.len());
            }
            n
        })
    });
    g.bench_function("framer_plus_timeline_1000_events", |b| {
        b.iter(|| {
            let mut f = Framer::new();
            let mut t = Timeline::new(0, 1024);
            for (i, piece) in s.chunks(97).enumerate() {
                let now = i as u64 * 1000;
                t.on_bytes(now);
                f.feed(piece, |e| {
                    if e.is_done() {
                        t.on_done();
                    } else {
                        t.on_data(now, e.data);
                    }
                });
            }
            t.finish(None).events
        })
    });
    g.finish();

    // One chunk read, the proxy's way (the scan) against serde_json alone: a vLLM-shaped content
    // chunk of 218 bytes, and the usage chunk that ends a stream.
    let content = br#"{"id":"chatcmpl-4f1c2a","object":"chat.completion.chunk","created":1732000000,"model":"Qwen/Qwen3.6-35B-A3B","choices":[{"index":0,"delta":{"content":" w0042"},"logprobs":null,"finish_reason":null}]}"#;
    let usage = br#"{"id":"chatcmpl-4f1c2a","object":"chat.completion.chunk","created":1732000000,"model":"Qwen/Qwen3.6-35B-A3B","choices":[],"usage":{"prompt_tokens":1200,"total_tokens":1264,"completion_tokens":64,"prompt_tokens_details":{"cached_tokens":1024}}}"#;
    let mut g = c.benchmark_group("chunk");
    for (name, chunk) in [("content", &content[..]), ("usage", &usage[..])] {
        assert!(ChunkInfo::scan_with_id(chunk).is_some());
        g.bench_function(format!("{name}/scan"), |b| {
            b.iter(|| ChunkInfo::parse_with_id(std::hint::black_box(chunk)).is_ok())
        });
        g.bench_function(format!("{name}/serde_json"), |b| {
            b.iter(|| ChunkInfo::deserialize_with_id(std::hint::black_box(chunk)).is_ok())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
