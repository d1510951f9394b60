//! `tokentap sim` as the CLI runs it: options parsed by clap, `run_with` until a shutdown
//! signal, the JSONL chunk log complete when it returns.

use clap::Parser;
use serde_json::json;
use tokentap_sim::{run_with, Opts, RequestLog};
use tokentap_testkit::sim::*;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    opts: Opts,
}

#[tokio::test]
async fn run_serves_until_shutdown_and_writes_the_chunk_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("chunks.jsonl");
    let cli = Cli::parse_from([
        "sim",
        "--listen",
        "127.0.0.1:0",
        "--preset",
        "zero-delay",
        "--tokens-per-chunk",
        "2",
        "--chunk-log",
        log.to_str().unwrap(),
    ]);
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(run_with(
        cli.opts,
        async {
            let _ = stop_rx.await;
        },
        move |addr| {
            let _ = addr_tx.send(addr);
        },
    ));
    let addr = addr_rx.await.unwrap();
    let r = chat(
        addr,
        json!({"messages": [{"role": "user", "content": "hi"}], "stream": true, "max_completion_tokens": 5}),
    )
    .await;
    assert!(r.done());
    let h = send(addr, get("/health")).await;
    assert_eq!(h.status, 200);
    stop_tx.send(()).unwrap();
    server.await.unwrap().unwrap();

    let lines: Vec<RequestLog> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let stream = lines
        .iter()
        .find(|l| l.path == "/v1/chat/completions")
        .unwrap();
    assert_eq!(stream.output_tokens, 5);
    assert_eq!(stream.chunks.len(), r.events.len());
    assert_eq!(
        stream.chunks.iter().map(|c| c.tokens).collect::<Vec<_>>(),
        vec![0, 2, 2, 1, 0]
    );
    // The server is gone: connecting fails.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
