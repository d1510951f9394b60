//! # tokentap-mlperf — the benchmark's own numbers
//!
//! A result that carries an MLPerf name must be computed the way the MLPerf Endpoints reference
//! client computes it (docs/benchmark.md#reference, mlcommons/endpoints pinned at ea33275). This
//! crate holds those definitions, separate from tokentap's own wire-exact measurements, so that
//! every number in a summary says which definition it follows.
//!
//! ## Layout
//! - [`output`]: a turn's output as the reference accumulates it (`TextModelOutput`): which
//!   chunk text is content, reasoning or a tool-call partial, how partials merge, what "after
//!   the first chunk" means.
//! - [`tokenizer`]: the reference tokenizer — HF `tokenizers` plus the model's chat template —
//!   counting OSL, the TPOT denominator and ISL as the reference does, fallbacks included.
//! - `bytelevel`: a byte-level BPE tokenizer's count by its own rules (the tokenizer's fast path).
//! - [`template`]: Hugging Face chat templates rendered with transformers' Jinja settings.
//! - `layout`: whether a chat template renders message by message (then a conversation's next
//!   prompt renders only its new messages).
//! - [`pyjson`]: JSON and float text exactly as Python's `json.dumps` / `repr` and msgspec write it.
//! - [`scorer`]: the inline accuracy scorer and `scores.json`.
//! - [`result_summary`]: `result_summary.json` — series rollups, percentiles (`lower`),
//!   histograms, early-stopping estimates ([`early_stopping`]), `qps`, `tps`.
//! - [`validity`]: the official rules of a measurement point and the model presets' gates.
//! - [`result_summary`] also derives the rules' primary metrics ([`Primary`]: `system_tps`,
//!   `tps_per_user`, …) from the same inputs.
//! - [`pareto`]: the curve — regions from C_min/C_max, a proposed plan, the curve's verdict.
//! - [`seeds`]: the published seed sets a submission binds (the checker's file bundled).
//! - [`window`]: the performance window's samples folded from turn records (replay, report).
//!
//! ## Data flow
//!
//! ```text
//!  SSE data ──► output::Accumulator ──► ModelOutput ─┬─► tokenizer: OSL, TPOT tokens ─┐
//!  request body ──► tokenizer::PromptInput ──────────┼─► tokenizer: ISL ─────────────┤
//!                                                    └─► scorer ──► scores.json      │
//!            per-turn stamps (replay / proxy records, or a reference events.jsonl) ──┴─►
//!                     result_summary::Inputs ──► result_summary.json, result_summary::Primary
//!                                                           └─► validity::evaluate
//! ```
//!
//! Everything here is pure computation over finished turns: nothing runs between a chunk's
//! arrival and its timestamp.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod bytelevel;
pub mod early_stopping;
mod layout;
pub mod output;
pub mod pareto;
pub mod pyjson;
pub mod result_summary;
pub mod scorer;
pub mod seeds;
pub mod steady_state;
pub mod template;
pub mod tokenizer;
pub mod validity;
pub mod window;

pub use output::{Accumulator, MessageParts, ModelOutput};
pub use result_summary::Inputs as ResultInputs;
pub use result_summary::Primary;
pub use scorer::{ScoreSet, Scorer, Scores};
pub use tokenizer::{Count, PromptInput, RefTokenizer, TokenizerError};
pub use validity::{Official, Validity, Verdict};
