//! What the sim's tests import (`use tokentap_testkit::sim::*;`): requests by path (the sim is
//! addressed directly, `Host: sim`), one connection per request.

pub use crate::client::{open, read, send_once as send, try_open, Ev, Resp};

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use serde_json::Value;
use std::net::SocketAddr;

/// A chat completions request with `body`.
pub fn chat_request(body: &Value) -> Request<Full<Bytes>> {
    post("/v1/chat/completions", body)
}

/// A `POST path` with a JSON `body`.
pub fn post(path: &str, body: &Value) -> Request<Full<Bytes>> {
    Request::post(path)
        .header("content-type", "application/json")
        .header("host", "sim")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// A `GET path`.
pub fn get(path: &str) -> Request<Full<Bytes>> {
    Request::get(path)
        .header("host", "sim")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// Sends a chat body on a fresh connection and reads the whole response.
pub async fn chat(addr: SocketAddr, body: Value) -> Resp {
    send(addr, chat_request(&body)).await
}

/// A user message of exactly `bytes` bytes of text.
pub fn text(bytes: usize, seed: u64) -> String {
    let mut s = tokentap_core::text::filler(seed, bytes);
    s.truncate(bytes);
    s
}
