//! Raw-TCP upstreams for faults the sim cannot produce.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// An address nothing listens on (bound, then closed): connections are refused.
pub async fn dead_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    format!("http://{a}")
}

/// Accepts, reads the request head, then closes without answering (the connection breaks
/// before a response head).
pub async fn closing_upstream() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                drop(s);
            });
        }
    });
    format!("http://{a}")
}

/// Accepts and never answers.
pub async fn silent_upstream() -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    format!("http://{a}")
}

/// Answers every request with `pieces` written one by one (each flushed, TCP_NODELAY, a short
/// pause between them so they travel as separate segments) as a chunked SSE body.
pub async fn split_upstream(pieces: Vec<&'static [u8]>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let pieces = pieces.clone();
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                if !read_request(&mut s).await {
                    return;
                }
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await;
                for p in pieces {
                    let _ = s.write_all(format!("{:x}\r\n", p.len()).as_bytes()).await;
                    let _ = s.write_all(p).await;
                    let _ = s.write_all(b"\r\n").await;
                    let _ = s.flush().await;
                    // Pacing, not synchronisation: the test passes whether or not the pieces
                    // coalesce; the pause only makes the split case the likely one.
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
                let _ = s.write_all(b"0\r\n\r\n").await;
                let _ = s.flush().await;
            });
        }
    });
    format!("http://{a}")
}

/// Reads a request head and its `Content-Length` body; false when the connection ended first.
async fn read_request(s: &mut tokio::net::TcpStream) -> bool {
    let mut buf = vec![0u8; 65536];
    let mut got = Vec::new();
    loop {
        let n = s.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            return false;
        }
        got.extend_from_slice(&buf[..n]);
        if let Some(p) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..p]).to_ascii_lowercase();
            let cl = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if got.len() >= p + 4 + cl {
                return true;
            }
        }
    }
}
