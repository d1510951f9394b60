//! # tokentap-replay — the MLPerf-exact closed-loop replay client
//!
//! Replays MLPerf Agentic Inference trajectories against an OpenAI-compatible endpoint exactly as
//! the benchmark defines them (docs/benchmark.md, the sections #dataset to #gates) and measures
//! every streamed token of every turn. `tokentap replay` is a thin wrapper over [`run`]; tests
//! and the demo call [`run_with`] with a dataset already in memory.
//!
//! ## Layout
//! - [`config`]: options in two stages — [`RunOpts`], every option declared once (flag,
//!   environment variable, default, help) as given, and [`RunOpts::resolve`], which makes the
//!   run's [`RunConfig`] (presets under the flags, seed set, timeout; checked), written to
//!   `config.json` and embedded in `summary.json`; [`Opts`] adds the run's `--concurrency`.
//! - [`request`]: byte-compatible request bodies built incrementally (each history message
//!   serialized once per trajectory; the body is a list of shared segments).
//! - [`salt`]: BLAKE2b-2 salt tags (docs/benchmark.md#salting).
//! - [`merge`]: `tokentap merge` — the shards of one run joined into that run.
//! - [`models`]: without `--model`, the one model the endpoints list at `/v1/models`.
//! - [`client`]: one keep-alive connection per slot (TCP or TLS; HTTP/1.1 read by hand); one
//!   measured exchange per turn.
//! - `http2`: the same exchange as one HTTP/2 stream (ALPN `h2`, `--http2`).
//! - `response`: what a response is read into on either path (SSE framer, JSON body, error
//!   excerpt → the turn's timeline and captured output) and how a response that ended ends the turn.
//! - [`rx`]: the stamping socket — each read's kernel receive timestamp (`SO_TIMESTAMPNS`).
//! - [`driver`]: slots, the trajectory FIFO, delays, timeouts, performance window, stopping.
//! - `post`: after each turn, off the slots' path — the reference tokenizer's OSL, TPOT and
//!   ISL counts and the reference inline scorer (`tokentap-mlperf`).
//! - [`collector`]: the single consumer of records (records.jsonl + aggregates, including the
//!   reference's view: result_summary.json, scores.json).
//! - `phase`: one phase of a run (the declared warmup, then the measured run).
//! - [`summary`]: `summary.json` and the terminal summary, with the validity verdict.
//! - [`progress`]: live counters and the status line.
//! - [`metrics`]: `--metrics`: the client's live Prometheus series (`source="client"`).
//! - [`error`]: [`ReplayError`], what stops a run before or outside its turns; [`exit`]: the
//!   exit codes.
//!
//! ## Data flow
//!
//! ```text
//!  Dataset ──► driver: C slots ──(claim k)──► BodyBuilder ──► client::exchange ──► Timeline
//!                 │                                         (stamp, frame, parse, accumulate)
//!                 └── post::Job (one per client turn) ──► post pool: tokenizer counts, score
//!                                                               │
//!                                          ReplayRecord ──► collector ──► records.jsonl
//!                                                               │
//!         Aggregate ──► Summary ──► summary.json, result_summary.json, scores.json
//! ```
//!
//! ## Clocks
//! Every interval is on raw `CLOCK_MONOTONIC` ([`tokentap_core::clock`]); each record carries a
//! wall-clock anchor of its send instant. Delays and timeouts use tokio's timer; measurement
//! never does.
//!
//! ## Measured costs
//! See `benches/build.rs` (request build time vs context size) and `examples/replay_overhead.rs`
//! (client TTFT − the sim's first-chunk write time, turns/s, peak RSS); the numbers are in
//! docs/benchmarks.md.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod client;
pub mod collector;
pub mod config;
pub mod driver;
pub mod error;
pub mod get;
mod http2;
pub mod merge;
pub mod metrics;
pub mod models;
mod phase;
mod post;
pub mod progress;
pub mod request;
mod response;
pub mod run;
pub mod rx;
pub mod salt;
pub mod summary;

pub use collector::ReplayRecord;
pub use config::{Opts, Preset, RunConfig, RunOpts};
pub use driver::StopReason;
pub use error::ReplayError;
pub use progress::ProgressMode;
pub use summary::Summary;
pub use tokentap_mlperf::Verdict;

pub use run::{exit, load_dataset, run, run_with, run_with_hooks, Hooks, RunOutcome};
