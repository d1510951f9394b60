//! Floods a running proxy the way a hostile client would (streams by the thousand, or session ids
//! by the ten thousand), for measuring its RSS and sockets (the proxy is a separate process:
//! `ps`/`/proc` it while this runs):
//!
//! ```text
//! cargo run --release -p tokentap-proxy --example flood -- h2 http://127.0.0.1:8080 2 4096
//!     N h2 connections, each opening S concurrent streaming requests (as many as the proxy
//!     lets one connection have; the rest queue in the client)
//! cargo run --release -p tokentap-proxy --example flood -- sessions http://127.0.0.1:8080 20000 60000
//!     N sequential requests, each with a new session id of B bytes
//! ```
//!
//! Prints when the flood is in full swing (`peak`, 3 s after it started) and when it is done,
//! so the proxy can be measured at both moments.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::time::Duration;

fn chat() -> Bytes {
    Bytes::from(
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":400}"#,
    )
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, base) = (args[0].as_str(), args[1].clone());
    let url = format!("{base}/v1/chat/completions");
    match mode {
        "h2" => {
            let conns: usize = args[2].parse().unwrap();
            let streams: usize = args[3].parse().unwrap();
            let mut all = tokio::task::JoinSet::new();
            for _ in 0..conns {
                // One client per connection: hyper's h2 client multiplexes all its streams.
                let c: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
                    .pool_timer(TokioTimer::new())
                    .http2_only(true)
                    .build(HttpConnector::new());
                for _ in 0..streams {
                    let (c, url) = (c.clone(), url.clone());
                    all.spawn(async move {
                        let req = http::Request::post(url)
                            .header("content-type", "application/json")
                            .body(Full::new(chat()))
                            .unwrap();
                        match c.request(req).await {
                            Ok(r) => {
                                let s = r.status().as_u16();
                                let _ = r.into_body().collect().await;
                                s
                            }
                            Err(_) => 0,
                        }
                    });
                }
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
            println!("peak: {} requests started", conns * streams);
            let mut by_status = std::collections::BTreeMap::new();
            while let Some(s) = all.join_next().await {
                *by_status.entry(s.unwrap_or(0)).or_insert(0u64) += 1;
            }
            println!("done: statuses {by_status:?}");
        }
        "sessions" => {
            let n: usize = args[2].parse().unwrap();
            let bytes: usize = args[3].parse().unwrap();
            let c: Client<_, Full<Bytes>> =
                Client::builder(TokioExecutor::new()).build(HttpConnector::new());
            let pad = "s".repeat(bytes.saturating_sub(12));
            for i in 0..n {
                let req = http::Request::post(url.clone())
                    .header("content-type", "application/json")
                    .header("x-session-id", format!("{i:012}{pad}"))
                    .body(Full::new(Bytes::from(
                        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1}"#,
                    )))
                    .unwrap();
                if let Ok(r) = c.request(req).await {
                    let _ = r.into_body().collect().await;
                }
            }
            println!("done: {n} sessions of {bytes}-byte ids");
        }
        m => panic!("mode {m}: h2 or sessions"),
    }
}
