//! `summary.json`: the run summary's schema. The replay builds it from its run
//! (`tokentap_replay::summary`) and `tokentap merge` from its shards; the report, the sweep, the
//! submission tree and merge read it back into these types.
//!
//! Two kinds of numbers, labelled as such:
//! - **The benchmark's own** (`mlperf`, `accuracy`, `validity`): computed as the MLPerf
//!   Endpoints reference computes them (docs/benchmark.md#reference) — primary metrics over the
//!   performance window's issued turns, the reference's TPOT, tokens counted with the model's
//!   tokenizer (`--tokenizer`; otherwise `mlperf.osl_source` says what was counted instead), the
//!   reference inline scorer over every issued scorable turn, the official validity rules. The
//!   same numbers are in `result_summary.json` and `scores.json`, in the reference's schema.
//! - **tokentap's own** (`latency_ms`, `throughput`, `tokens`, `client`): wire-exact per-token
//!   ITL (k samples of gap/k for a k-token chunk), inter-chunk latency, TTFT/E2E percentiles of
//!   the in-window `ok` turns (numpy `linear`), throughput over the window — the measurement's
//!   view, not the benchmark's definitions.
//!
//! Every field is described in `docs/records.md`.

use crate::config::RunConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tokentap_core::clock::Anchor;
use tokentap_core::stats::Percentiles;
use tokentap_mlperf::validity::Rule;
use tokentap_mlperf::{Official, Primary, Verdict};

/// `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// The tokentap version that wrote the summary.
    pub tokentap_version: String,
    /// The benchmark's own numbers (MLPerf Endpoints reference definitions).
    pub mlperf: Mlperf,
    /// The verdict under the rules and why.
    pub validity: Validity,
    /// The rules' steady-state window (docs/rules.md) for this agentic point: not official (the
    /// reference's detector does not support agentic runs), the reference's experimental NATL,
    /// and the window detector as tokentap's diagnostic. Always written; `None` only in run
    /// directories written before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<tokentap_mlperf::steady_state::AgenticSteadyState>,
    /// The run as a whole: its span, trajectories, why issuing stopped.
    pub run: RunInfo,
    /// The performance window (docs/records.md).
    pub window: Window,
    /// Turns by status, whole run and in the window.
    pub counts: Counts,
    /// Per endpoint, in `--endpoint` order: where the trajectories went. (Absent in run
    /// directories written before several endpoints.)
    #[serde(default)]
    pub endpoints: Vec<EndpointShare>,
    /// Latency percentiles of the in-window ok turns, ms.
    pub latency_ms: Latency,
    /// Output tokens and turns per second over the window.
    pub throughput: Throughput,
    /// Token counts and their sources.
    pub tokens: Tokens,
    /// How the client itself fared.
    pub client: ClientHealth,
    /// The reference inline scorer's result.
    pub accuracy: Accuracy,
    /// The declared warmup, when there was one (excluded from every number above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupDeclaration>,
    /// `tokentap merge`: the shards this run was joined from, their clocks and the union's
    /// window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeInfo>,
    /// The full resolved configuration (the API key is never included).
    pub config: RunConfig,
}

/// The benchmark's primary metrics of this point and how their tokens were counted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Mlperf {
    /// Whose definitions: the reference client pinned at ea33275
    /// (docs/benchmark.md#primary-metrics).
    pub definitions: String,
    /// The primary metrics (flattened into `mlperf`).
    #[serde(flatten)]
    pub primary: Primary,
    /// Tracked (performance-window) samples in the reference's sense: issued (sent or aborted
    /// after a failure), completed (any outcome), failed.
    pub samples_issued: u64,
    /// Tracked samples completed (any outcome).
    pub samples_completed: u64,
    /// Tracked samples failed.
    pub samples_failed: u64,
    /// Tracked ok turns by the source of their OSL: `tokenizer` (and `tokenizer_fallback`)
    /// is the reference's count; `usage`/`chunks` are not.
    pub osl_source: BTreeMap<String, u64>,
    /// ISL samples by source.
    pub isl_source: BTreeMap<String, u64>,
    /// OSL is the reference's count (every OSL from the tokenizer).
    pub reference_tokens: bool,
    /// The OSL per-turn mean over every completed turn of the run, tracked or not
    /// (`output_sequence_lengths_full_run` in `result_summary.json`): the OSL gate's value.
    pub osl_mean_full_run: Option<f64>,
    /// The tokenizer folder used, if any.
    pub tokenizer: Option<String>,
    /// Counts that used the reference's fallback (the chat template failed), and the first
    /// template error.
    pub template_fallbacks: u64,
    /// The first chat template error, when a count fell back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_error: Option<String>,
    /// The same numbers in the reference's schema.
    pub result_summary: String,
    /// `tokentap report --tokenizer DIR`: the outputs were recounted with this tokenizer folder
    /// (the report's view; never in a replay's own `summary.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recounted_with: Option<String>,
    /// `tokentap report --tokenizer`: why nothing was recounted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_note: Option<String>,
}

/// The declared warmup (docs/benchmark.md#validity).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WarmupDeclaration {
    /// The warmup's duration, s.
    pub duration_s: f64,
    /// Warmup requests sent.
    pub requests_issued: u64,
    /// Warmup requests completed.
    pub requests_completed: u64,
    /// Warmup trajectories issued.
    pub trajectories: u64,
    /// `performance dataset (salted with its own tag)` or the warmup file.
    pub source: String,
    /// The warmup's concurrency.
    pub concurrency: usize,
    /// The records of the warmup (never part of a result).
    pub records: Option<String>,
}

/// What the rules say of the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Validity {
    /// `valid`, `invalid`, `incomplete` (a deciding gate not evaluated: OSL without
    /// `--tokenizer`), `no_gates` (no `--preset`).
    pub verdict: Verdict,
    /// The failed rules, each naming the rule and the measured value.
    pub reasons: Vec<String>,
    /// The rules the official checker reports as warnings (a point shorter than its minimum
    /// duration): they do not change the verdict. (Absent in run directories written before
    /// v1.0's rules.)
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Observations that do not change the verdict.
    pub notes: Vec<String>,
    /// Every rule: `pass`, `fail`, `warn` or `not_evaluated`, with its message; ids are the
    /// official checker's where it has the rule (docs/rules.md).
    pub rules: Vec<Rule>,
    /// The official settings and gates applied (from `--preset`), if any.
    pub gates: Option<Official>,
}

/// A key that is present (its value possibly null): `Some`; absent keys take the default `None`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The run as a whole.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunInfo {
    /// Run start (before the first issue), both clocks.
    pub start: Anchor,
    /// Run end (after the last record), both clocks.
    pub end: Anchor,
    /// end − start, s.
    pub duration_s: f64,
    /// The shutdown future fired (Ctrl-C).
    pub interrupted: bool,
    /// Why issuing stopped early, if it did.
    pub stopped_by: Option<StopReason>,
    /// Trajectories this process was to issue (after sharding).
    pub trajectory_budget: u64,
    /// Trajectories started.
    pub trajectories_started: u64,
    /// Trajectories whose every turn ended.
    pub trajectories_finished: u64,
    /// Mean request body size, bytes.
    pub mean_request_bytes: Option<f64>,
    /// The first problem writing records.jsonl, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records_error: Option<String>,
    /// Records not written to records.jsonl (a write error; none of their bytes are in the
    /// file). Non-zero makes the run exit 1.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub records_failed: u64,
    /// Sampling fields that dataset rows override (other than `model`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub row_overrides: Vec<String>,
}

/// The performance window: open from the run's start until the first slot finds no trajectory left (or issuing stops).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Window {
    /// Tracking started (= run start), raw CLOCK_MONOTONIC ns.
    pub start_mono_ns: u64,
    /// Tracking started, wall clock ns since the epoch.
    pub start_wall_ns: u64,
    /// Tracking stopped (first user completed / stop), monotonic ns; null if it never did.
    pub closed_mono_ns: Option<u64>,
    /// When this process claimed its last trajectory (its budget was exhausted from then on),
    /// monotonic ns; null if it claimed none. Always written (`Some`); `None` only when read
    /// from a summary written before it was (merge refuses such a shard).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_claim_mono_ns: Option<Option<u64>>,
    /// Last completion of an in-window turn, monotonic ns.
    pub end_mono_ns: Option<u64>,
    /// Last completion of an in-window turn, wall clock ns.
    pub end_wall_ns: Option<u64>,
    /// end − start, seconds.
    pub duration_s: Option<f64>,
}

/// Turns by status.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Counts {
    /// Every record, by status.
    pub turns: BTreeMap<String, u64>,
    /// Records of turns issued inside the window, by status.
    pub in_window: BTreeMap<String, u64>,
    /// Every record.
    pub total: u64,
    /// The turns that did not end `ok`, by `error.kind`: how many, and the first one's message
    /// (most turns first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ErrorCount>,
}

/// The turns that ended with one `error.kind`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorCount {
    /// The error kind (a record's `error.kind`).
    pub kind: String,
    /// Turns that ended with it.
    pub turns: u64,
    /// The first such turn's message.
    pub first_message: String,
}

/// One endpoint's share of the run (turns that were sent: aborted ones are not).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndpointShare {
    /// The endpoint's request URL.
    pub url: String,
    /// Trajectories sent to it.
    pub trajectories: u64,
    /// Turns sent to it.
    pub turns: u64,
    /// Of those, `ok`.
    pub ok: u64,
    /// Failed, timed out or cancelled.
    pub not_ok: u64,
}

/// Latency percentiles of the in-window ok turns, ms (docs/records.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Latency {
    /// Time to first token.
    pub ttft: Option<Percentiles>,
    /// Time to first byte.
    pub ttfb: Option<Percentiles>,
    /// Per token (SGLang's method: a k-token chunk gives k samples of gap/k).
    pub itl: Option<Percentiles>,
    /// One sample per chunk.
    pub inter_chunk: Option<Percentiles>,
    /// Time per output token after the first (tokentap's, per turn).
    pub tpot: Option<Percentiles>,
    /// End to end.
    pub e2e: Option<Percentiles>,
}

/// How the client itself fared: whether its arrival instants are the kernel's, and how long
/// response bytes waited in the socket for it (a client that falls behind shows here, not in
/// the latencies, which are stamped by the kernel).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientHealth {
    /// In-window ok turns whose reads all carried the kernel's receive timestamp.
    pub rx_kernel_turns: u64,
    /// In-window ok turns stamped (at least partly) in user space.
    pub rx_user_turns: u64,
    /// User-space read instant − kernel receive instant of the first token, ms.
    pub read_lag_ttft_ms: Option<Percentiles>,
    /// Per turn, the largest such wait over its reads, ms.
    pub read_lag_max_ms: Option<Percentiles>,
    /// Requests sent again on a fresh connection because a kept-alive one closed before any
    /// response byte.
    pub retries: u64,
}

/// Output tokens and turns over the performance window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Throughput {
    /// Output tokens of in-window ok turns.
    pub output_tokens: u64,
    /// Output tokens per second of window.
    pub output_tokens_per_s: Option<f64>,
    /// output_tokens_per_s ÷ concurrency.
    pub output_tokens_per_s_per_user: Option<f64>,
    /// In-window ok turns.
    pub turns: u64,
    /// In-window ok turns per second of window.
    pub turns_per_s: Option<f64>,
    /// The run's concurrency.
    pub concurrency: usize,
}

/// Token counts over the run and their sources.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tokens {
    /// Mean output tokens per ok turn, whole run (the gate's value).
    pub mean_output_tokens_per_turn: Option<f64>,
    /// Same, in-window ok turns only.
    pub mean_output_tokens_per_turn_window: Option<f64>,
    /// Ok turns by the source of their output token count.
    pub output_tokens_source: BTreeMap<String, u64>,
    /// Σ cached / Σ prompt over ok turns where the server reported both; null if none did.
    pub cached_token_share: Option<f64>,
    /// Σ prompt tokens the server reported, ok turns.
    pub prompt_tokens: u64,
    /// Σ cached prompt tokens the server reported, ok turns.
    pub cached_tokens: u64,
    /// Ok turns that reported both prompt and cached tokens.
    pub turns_with_cache_info: u64,
}

/// The reference inline scorer's result (also in `scores.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Accuracy {
    /// Mean score over every issued scorable turn (failed and aborted ones score 0), rounded to
    /// 4 decimals as the reference rounds it.
    pub inline_accuracy: Option<f64>,
    /// Scorable turns issued.
    pub issued: u64,
    /// Scorable turns the dataset expects.
    pub expected: u64,
    /// Scorable turns with an output.
    pub observed: u64,
    /// Scorable turns without one (score 0).
    pub missing: u64,
    /// Turns scored.
    pub scored_turns: u64,
    /// Mean score of the workflow turns.
    pub workflow: Option<f64>,
    /// Workflow turns scored.
    pub workflow_turns: u64,
    /// Mean score of the coding turns.
    pub coding: Option<f64>,
    /// Coding turns scored.
    pub coding_turns: u64,
    /// Turns with no ground truth (listed in scores.json).
    pub excluded_turns: u64,
}

/// What `summary.json` says about the merge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeInfo {
    /// Shards joined, of how many.
    pub shards: u64,
    /// Shards the run had.
    pub of: u64,
    /// Shard indices not given (only with `--partial`).
    pub missing: Vec<u64>,
    /// The shards' run directories, as given.
    pub dirs: Vec<String>,
    /// `blake2b-256` of the shared configuration (what every shard had to agree on).
    pub config_hash: String,
    /// Per shard: its host's clock against the servers' `Date` headers.
    pub clocks: Vec<ShardClock>,
    /// Bound on the wall-clock difference between any two shards' hosts, ms (`None`: a shard
    /// saw no `Date` header, the skew is not bounded).
    pub skew_bound_ms: Option<f64>,
    /// The union's window on the aligned timeline (wall-clock ns).
    pub window_start_wall_ns: u64,
    /// When the union's last trajectory was claimed, wall-clock ns.
    pub budget_exhausted_wall_ns: Option<u64>,
    /// When the union's window closed, wall-clock ns.
    pub window_closed_wall_ns: Option<u64>,
    /// Which shard's trajectory completion stopped tracking.
    pub window_closed_by: Option<String>,
}

/// One shard's clock.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardClock {
    /// The shard's index.
    pub shard: u64,
    /// Offset of this host's wall clock from the servers' (local − server), bounded: it lies in
    /// `[lo, hi]` ms. `None` without any `Date` header.
    pub offset_lo_ms: Option<f64>,
    /// The bound's upper end, ms.
    pub offset_hi_ms: Option<f64>,
    /// Responses that carried a `Date` header.
    pub responses: u64,
}

/// Why issuing stopped before the budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// `--stop-issuing-on-first-user-complete` fired.
    FirstUserComplete,
    /// `--max-duration` elapsed.
    MaxDuration,
    /// The shutdown future resolved (Ctrl-C).
    Shutdown,
}

mod text;
