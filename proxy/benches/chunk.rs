//! criterion benches of the proxy's per-chunk hot path, plus an allocation count.
//!
//! - `framer_timeline`: `sse::Framer::feed` + `Timeline::on_data` for one vLLM-shaped chunk
//!   (the measurement work the proxy adds to each event).
//! - `metered_body`: polling a `MeteredBody` over a pre-built stream of 256 one-event frames,
//!   including the tap's start and its record at the end (amortised over the 256 chunks),
//!   against `passthrough`: the same frames polled without metering.
//! - After the benches, a counting global allocator reports allocations per chunk while
//!   polling the middle of a metered stream (the steady path).
//!
//! Run: `cargo bench -p tokentap-proxy --bench chunk`
//!
//! Results (the runs, their dates and the machine): docs/benchmarks.md, "Proxy, per chunk".

use bytes::Bytes;
use criterion::{criterion_group, Criterion, Throughput};
use http_body::{Body, Frame};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokentap_core::clock::{self, Anchor};
use tokentap_core::sse::Framer;
use tokentap_core::timeline::Timeline;
use tokentap_proxy::meter::{MeteredBody, Tap};
use tokentap_proxy::route::Route;
use tokentap_proxy::Config;

#[global_allocator]
static GLOBAL: tokentap_benchutil::Counting = tokentap_benchutil::Counting;

const CHUNKS: usize = 256;

fn chunk(i: usize) -> Bytes {
    Bytes::from(format!(
        "data: {{\"id\":\"chatcmpl-4f1c2a\",\"object\":\"chat.completion.chunk\",\"created\":1732000000,\"model\":\"Qwen/Qwen3.6-35B-A3B\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" w{i:04}\"}},\"logprobs\":null,\"finish_reason\":null}}]}}\n\n"
    ))
}

fn frames() -> Vec<Bytes> {
    let mut v = vec![Bytes::from_static(
        b"data: {\"id\":\"chatcmpl-4f1c2a\",\"object\":\"chat.completion.chunk\",\"created\":1732000000,\"model\":\"Qwen/Qwen3.6-35B-A3B\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
    )];
    v.extend((0..CHUNKS).map(chunk));
    v.push(Bytes::from_static(b"data: [DONE]\n\n"));
    v
}

/// A body over pre-built frames: no allocation per poll.
struct VecBody<I>(I);

impl<I: Iterator<Item = Bytes> + Unpin> Body for VecBody<I> {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(self.0.next().map(|b| Ok(Frame::data(b))))
    }
}

fn drain<B: Body<Data = Bytes> + Unpin>(mut b: B) -> usize {
    let mut cx = Context::from_waker(Waker::noop());
    let mut n = 0;
    while let Poll::Ready(Some(Ok(f))) = Pin::new(&mut b).poll_frame(&mut cx) {
        n += f.data_ref().map_or(0, |d| d.len());
    }
    n
}

fn metered<'a>(
    shared: &std::sync::Arc<tokentap_proxy::shared::Shared>,
    f: &'a [Bytes],
) -> MeteredBody<VecBody<std::iter::Cloned<std::slice::Iter<'a, Bytes>>>> {
    let mut tap = Tap::new(
        shared.ledger.enter(),
        Anchor::now(),
        Route::Api(tokentap_core::api::Api::Chat),
    );
    tap.on_headers(clock::now(), 200, true, false);
    MeteredBody::new(VecBody(f.iter().cloned()), tap, None)
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let _guard = rt.enter();
    let shared = tokentap_proxy::shared(Config::new(["http://127.0.0.1:9"])).expect("shared");
    let f = frames();

    let mut g = c.benchmark_group("framer_timeline");
    g.throughput(Throughput::Elements(CHUNKS as u64));
    g.bench_function("per_chunk", |b| {
        b.iter(|| {
            let mut framer = Framer::new();
            let mut tl = Timeline::new(0, CHUNKS + 8);
            for x in &f {
                let t = clock::now();
                tl.on_bytes(t);
                framer.feed(x, |ev| {
                    if ev.is_done() {
                        tl.on_done();
                    } else {
                        tl.on_data(t, ev.data);
                    }
                });
            }
            tl.finish(None)
        })
    });
    g.finish();

    let mut g = c.benchmark_group("body");
    g.throughput(Throughput::Elements(CHUNKS as u64));
    g.bench_function("passthrough", |b| {
        b.iter_batched(
            || VecBody(f.iter().cloned()),
            drain,
            criterion::BatchSize::SmallInput,
        )
    });
    g.bench_function("metered", |b| {
        b.iter_batched(
            || metered(&shared, &f),
            drain,
            criterion::BatchSize::SmallInput,
        )
    });
    g.finish();

    // Allocations on the steady path: poll the middle 200 chunks of a metered stream.
    let mut body = metered(&shared, &f);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..20 {
        let _ = Pin::new(&mut body).poll_frame(&mut cx);
    }
    let before = tokentap_benchutil::allocations();
    for _ in 0..200 {
        let _ = Pin::new(&mut body).poll_frame(&mut cx);
    }
    let steady = tokentap_benchutil::allocations() - before;
    let before = tokentap_benchutil::allocations();
    let _ = drain(body);
    let end = tokentap_benchutil::allocations() - before;
    println!("allocations on the steady path: {steady} over 200 chunks ({:.3}/chunk); record at the end of the stream: {end}", steady as f64 / 200.0);
}

criterion_group!(group, benches);

fn main() {
    group();
    Criterion::default().configure_from_args().final_summary();
}
