//! # tokentap-proxy — the measurement proxy
//!
//! A transparent reverse proxy that sits between any OpenAI-compatible client and server and
//! timestamps every streamed chunk on its own side of each socket, per session. Clients trust
//! their own numbers and engines theirs; neither can be checked. The wire can: the proxy sees
//! what the client gets, and when. That only holds if the proxy is transparent (bytes through
//! untouched, hop-by-hop headers handled as RFC 9110 says) and costs far less than it measures
//! (decode intervals on an H200 are a few ms; the proxy adds microseconds — see the README).
//!
//! ## Design overview
//!
//! ```text
//!   client ──► server::accept_loop ──► service::handle ──► upstream::Sender ──► server(s)
//!                 (TLS, h1/h2, drain)      │  Tap (per-request state)   direct (http://: own
//!                                          │  RequestTap (sniff body)    HTTP/1.1, pooled)
//!                                          │                          hyper_client
//!                                          │                           (https://, h2c://)
//!   client ◄──────────── hyper ◄──── meter::MeteredBody ◄──── direct::H1Body | hyper Incoming
//!                                          │ finish / drop: exactly one record per request
//!                                          ▼
//!        ledger::Ledger: records::Writer (JSONL thread), sessions::Sessions, metrics::Metrics
//!                                                          ▲                  ▲
//!                                                admin listener: /sessions, /metrics, /health
//! ```
//!
//! ## Layout
//! - [`config`]: `Config`, every option declared once (clap, env `TOKENTAP_PROXY_*`), checked.
//! - [`running`]: `Proxy` (start, shutdown and what became of every request) and `run`.
//! - [`server`]: listeners, TLS, graceful drain with a deadline.
//! - [`service`]: the request path, one function a step — identify, limits, headers, body,
//!   failover over the replicas, the proxy's own error answers.
//! - [`shared`]: the state every request shares; [`route`]: the measured routes.
//! - [`ledger`]: where a finished request goes (writer, sessions, metrics, tokenizer stage) and
//!   the in-flight count; with a replica's `Claim`, all a `Tap` holds of the server.
//! - [`meter`]: `Tap` and `MeteredBody`, the per-chunk hot path and the record at the end.
//! - [`sniff`]: reads `model`/`stream`/`stream_options`/messages without holding the body back.
//! - [`inject`]: `--inject-usage` request rewrite and response stripping.
//! - [`upstream`]: the upstream side by concept — `replica` (replica set, rendezvous hashing, a
//!   request's claim), `direct` (the HTTP/1.1 client for `http://` upstreams whose response body
//!   is read by the task that writes it to the client: one wake-up per chunk, reads coalesced
//!   into one write) and its `pool`, `hyper_client` (hyper-util's pooled clients for `https://`
//!   and `h2c://`), `tls`; `Sender` picks the client for one attempt.
//! - [`tokens`]: `--tokenizer`: the reference's counts of each finished request, off the hot
//!   path, before its record reaches the writer.
//! - [`records`], [`sessions`], [`metrics`], [`admin`], [`error`], [`headers`], [`content`].
//!
//! ## Measured cost
//! Per chunk in-process: ≈1.6 µs for the metered body (framer + timeline + chunk parse), zero
//! allocations on the steady path (`benches/chunk.rs`). End to end on a 2-vCPU VM, side by side
//! with nginx: about nginx's CPU per chunk (5–11 µs under load) and chunk rate, ≈47 KiB per
//! in-flight stream (`examples/proxy_overhead.rs`; the tables: docs/benchmarks.md).
//!
//! ## Clocks
//! Every instant is raw `CLOCK_MONOTONIC` ns ([`tokentap_core::clock::now`]); a record's
//! `start_mono_ns` is when hyper handed the request head to the service, its `anchor` reads the
//! wall clock at the same moment, and every other `*_ns` field is an offset from the start:
//! `forwarded_ns` (request sent upstream), `headers_ns` (response head back from upstream),
//! `ttfb_ns`/`ttft_ns`/chunk offsets (frame handed to hyper for the client), `e2e_ns` (last byte).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod admin;
pub mod config;
pub mod content;
pub mod error;
pub mod headers;
pub mod inject;
pub mod ledger;
pub mod meter;
pub mod metrics;
pub mod records;
pub mod route;
pub mod running;
pub mod server;
pub mod service;
pub mod sessions;
pub mod shared;
pub mod sniff;
pub mod timers;
pub mod tokens;
pub mod upstream;
pub mod workers;

pub use config::Config;
pub use running::{run, shared, Proxy, ShutdownReport, StartError};
