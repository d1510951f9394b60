//! # tokentap-core — the shared vocabulary
//!
//! Everything that the replay client, the measurement proxy, the simulated server and the
//! comparison tools must agree on lives here, so that a number measured by one of them means
//! exactly what the same number means in another.
//!
//! ## Layout
//!
//! - [`clock`]: the two shared clocks of docs/benchmark.md#clocks — raw `CLOCK_MONOTONIC`
//!   nanoseconds for every interval, plus a wall-clock anchor per record so records of different
//!   processes can be joined.
//! - [`duration`]: durations on every command line (humantime, and plain seconds).
//! - [`error`]: an error and its causes printed for a person, each cause once.
//! - [`value`]: the bounded-number value parsers the command lines share.
//! - [`sse`]: an incremental Server-Sent-Events framer over byte chunks (events split across
//!   reads, many per read, `\r\n`, comments). No allocation per event once warm.
//! - [`chunk`]: reads the few fields of a `chat.completion.chunk` that measurement needs
//!   (does it carry text, usage, finish reason) without building the JSON tree.
//! - [`convert`]: the Responses and Messages APIs' requests and responses in chat form (the sim
//!   serves them through it; `dataset capture` writes chat rows with it).
//! - [`events`]: the same for the OpenAI Responses API's and the Anthropic Messages API's events
//!   and bodies ([`events::Api`] says which API a response speaks).
//! - [`timeline`]: the per-turn token timeline of docs/benchmark.md#metrics (TTFB, TTFT, per-chunk
//!   instants and token counts, ITL per token, inter-chunk latency, TPOT, E2E).
//! - [`api`]: which API a request speaks (chat, completions, Responses, Messages), one enum.
//! - [`jsonl`]: JSONL read a line at a time, one line bounded (every file reader uses it).
//! - [`linefile`]: JSONL written in whole lines, a failed write cut back and counted (the
//!   proxy's records, the replay's `records.jsonl`, `merge`'s).
//! - [`record`]: the per-turn record written as JSONL by the replay client and the proxy.
//! - [`rng`]: SplitMix64, the one deterministic random source (sim, synthesizer, filler, hashes).
//! - [`route`]: session affinity (rendezvous hashing) shared by the proxy and the replay.
//! - [`stats`]: exact percentiles from raw samples.
//! - [`metrics`]: Prometheus names, buckets and label rules (docs/benchmark.md#prometheus) for
//!   proxy, replay, dashboards.
//! - [`http1`]: the HTTP/1.1 client pieces the replay client and the proxy's upstream side share:
//!   a request head writer, a response head parser and an incremental body decoder.
//! - [`wire`]: OpenAI chat wire types used by the simulated server and tests.
//! - [`text`]: the reasoning preamble and filler text shared by the sim and the synthesizer.
//! - [`tokenize`]: the deterministic stand-in tokenizer (4 bytes per token).
//! - [`vocabulary`]: `vocabulary!`, closed name lists (error kinds, statuses, token sources)
//!   declared once with their names and meanings.
//! - [`either`]: `Either`, one of two HTTP bodies as one body type (proxy and sim).
//! - [`tls`]: TLS client settings (crypto provider, roots, `--insecure`) for replay and proxy.
//!
//! ## Data flow
//!
//! ```text
//!  bytes from a socket ──► sse::Framer ──► data payload ──► chunk::ChunkInfo::parse
//!                                                               │
//!                     clock::now() at arrival ───────────────► timeline::Timeline
//!                                                               │ finish()
//!                                                               ▼
//!                                    record::TurnRecord ──► records.jsonl ──► stats::Summary
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod api;
pub mod chunk;
pub mod clock;
pub mod convert;
pub mod duration;
pub mod either;
pub mod error;
pub mod events;
pub mod http1;
pub mod jsonl;
mod jsonscan;
pub mod linefile;
pub mod metrics;
pub mod record;
pub mod rng;
pub mod route;
pub mod sse;
pub mod stats;
pub mod text;
pub mod timeline;
pub mod tls;
pub mod tokenize;
pub mod value;
pub mod vocabulary;
pub mod wire;
