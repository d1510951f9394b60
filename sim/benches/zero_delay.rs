//! How many chunks per second the zero-delay sim serves to one client over loopback.
//!
//! The sim runs on its own current-thread runtime (one core); the client is a raw HTTP/1.1
//! keep-alive connection on another thread that only reads bytes and looks for the end of the
//! chunked body, so the number is the sim's cost (hyper + formatting + stamping + logging), not
//! a client's parsing. Each iteration streams one response of `TOKENS` one-token chunks (plus
//! prelude and `[DONE]`).
//!
//! Run: `cargo bench -p tokentap-sim --bench zero_delay`
//!
//! After the benches, a counting global allocator reports allocations per chunk over one
//! 20k-chunk stream, whole process (sim + this client; the client allocates only per request).
//!
//! Results (the runs, the date and the machine): docs/benchmarks.md, "Simulated server
//! throughput".

use criterion::{criterion_group, Criterion, Throughput};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use tokentap_sim::{SimConfig, SimServer};
use tokio::time::Instant;

#[global_allocator]
static GLOBAL: tokentap_benchutil::Counting = tokentap_benchutil::Counting;

const TOKENS: u64 = 20_000;

/// Starts a zero-delay sim on a dedicated single-threaded runtime; returns its address.
fn start_sim(k: u32) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let mut c = SimConfig::zero_delay();
            c.modes.tokens_per_chunk = k;
            c.output.always_max = true;
            let sim = SimServer::start(c).await.expect("sim");
            tx.send(sim.addr()).expect("send addr");
            // Keep the log from growing without bound over many iterations.
            loop {
                sim.wait_finished(50).await;
                sim.clear_log();
            }
        });
    });
    rx.recv().expect("sim address")
}

/// One streamed response on a keep-alive connection; returns the body bytes read.
fn stream_once(conn: &mut TcpStream, buf: &mut [u8], max_tokens: u64) -> usize {
    let body = format!(
        r#"{{"messages":[{{"role":"user","content":"bench"}}],"stream":true,"max_completion_tokens":{max_tokens}}}"#
    );
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(req.as_bytes()).expect("write");
    let mut total = 0;
    let mut tail = Vec::with_capacity(64);
    loop {
        let n = conn.read(buf).expect("read");
        assert!(n > 0, "connection closed mid-response");
        total += n;
        tail.extend_from_slice(&buf[n.saturating_sub(32)..n]);
        if tail.len() > 32 {
            tail.drain(..tail.len() - 32);
        }
        // End of the chunked body, right after the `[DONE]` event.
        if tail.ends_with(b"data: [DONE]\n\n\r\n0\r\n\r\n") {
            return total;
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("zero_delay_sim");
    g.measurement_time(Duration::from_secs(8)).sample_size(30);
    for k in [1u32, 4] {
        let addr = start_sim(k);
        let mut conn = TcpStream::connect(addr).expect("connect");
        conn.set_nodelay(true).expect("nodelay");
        let mut buf = vec![0u8; 256 * 1024];
        let chunks = TOKENS.div_ceil(k as u64) + 2;
        g.throughput(Throughput::Elements(chunks));
        let name = if k == 1 {
            "stream_20k_chunks".to_string()
        } else {
            format!("stream_20k_tokens_k{k}")
        };
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    stream_once(&mut conn, &mut buf, TOKENS);
                }
                start.elapsed()
            })
        });
    }
    g.finish();
}

/// Allocations per chunk over one long stream (after a warm-up stream on the same connection).
fn alloc_report() {
    let addr = start_sim(1);
    let mut conn = TcpStream::connect(addr).expect("connect");
    conn.set_nodelay(true).expect("nodelay");
    let mut buf = vec![0u8; 256 * 1024];
    stream_once(&mut conn, &mut buf, 1_000);
    let before = tokentap_benchutil::allocations();
    stream_once(&mut conn, &mut buf, TOKENS);
    let n = tokentap_benchutil::allocations() - before;
    println!(
        "allocations over one {TOKENS}-chunk stream: {n} ({:.4}/chunk)",
        n as f64 / TOKENS as f64
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    alloc_report();
}
