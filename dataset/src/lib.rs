//! # tokentap-dataset — MLPerf agentic trajectories
//!
//! The dataset format of docs/benchmark.md#dataset: flat JSONL, one row per chat message, rows of a
//! conversation contiguous, conversation order = trajectory order. This crate is the one place that
//! reads, checks, describes and synthesizes it; the replay client, `tokentap dataset` and the
//! compare tools all go through it.
//!
//! ## Layout
//! - [`model`]: the typed rows and conversations ("parse, don't validate": a loaded
//!   [`Dataset`] has passed every rule of docs/benchmark.md#dataset).
//! - [`load`]: reading a file, line by line, into rows; every problem becomes a
//!   [`DatasetError`] naming file, line, conversation, field and what was expected.
//! - [`validate`]: the conversation-level rules (turn numbering, role sequence, tool pairing).
//! - [`stats`]: the numbers `tokentap dataset stats` prints.
//! - [`synth`]: a seeded generator of coding and workflow trajectories.
//! - [`capture`]: a team's own sessions, from the proxy's records with content, as a dataset.
//! - [`cli`]: `tokentap dataset validate | stats | synth | capture` (clap subcommand + `run`).
//!
//! ## Data flow
//!
//! ```text
//!  file ──► load::parse_row (per line: JSON, field types) ──► Conversation rows, sorted by turn
//!                                                              │
//!                          validate::check (per conversation) ◄┘
//!                                   │ every error collected, located
//!                                   ▼
//!                    Dataset ──► replay (requests), stats::stats, compare
//!  synth::synth(SynthConfig) ──► JSONL that Dataset::parse accepts
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The longest inter-turn delay a row may record (one day): beyond it a replay with `--delays`
/// would sleep for ever, and far beyond it no timer can represent the sleep.
pub const MAX_DELAY_SECONDS: f64 = 86_400.0;

pub mod capture;
pub mod cli;
pub mod error;
pub mod load;
pub mod model;
pub mod stats;
pub mod synth;
pub mod validate;

pub use error::{DatasetError, DatasetErrors};
pub use model::{Conversation, Dataset, Role, Row};
