//! What a benchmark client claims, normalised: one [`ClientTurn`] per request it reports, plus the
//! percentiles it published, if it publishes any ([`Published`]).
//!
//! Every format parser ([`crate::formats`]) produces a [`ClientRun`]. Units are fixed here, so the
//! rest of the crate never converts: times in milliseconds (f64), token counts as f64, start
//! instants in nanoseconds on the clock named by [`ClientRun::clock`].

use serde::Serialize;
use std::fmt;

tokentap_core::vocabulary! {
    /// The metrics `compare` checks.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Metric {
        /// Time to first token, ms: from the turn's start to the first text-carrying chunk.
        Ttft = "ttft",
        /// Inter-token latency of one turn, ms: the mean gap per output token after the first
        /// chunk. Claims are percentiles over turns of this per-turn mean (AIPerf's definition), so
        /// a client that reports per-chunk gaps on multi-token chunks shows up as a difference.
        Itl = "itl",
        /// End to end, ms: from the turn's start to the last byte of the response.
        E2e = "e2e",
        /// Output tokens of the turn: the client's count vs the wire's — the reference tokenizer's
        /// OSL when the proxy ran with `--tokenizer`, else the server's usage.
        OutputTokens = "output_tokens",
        /// The MLPerf reference's TPOT, ms: (last chunk − first chunk) / the tokens after the first
        /// chunk (counted with the reference tokenizer).
        Tpot = "tpot",
        /// Mean gap between received chunks after the first, ms (the MLPerf client's
        /// `sample.recv_non_first` events; the wire's inter-chunk latency).
        ChunkGap = "chunk_gap",
    }
}

impl Metric {
    /// Display name in the terminal table.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Itl => "ITL",
            Metric::E2e => "E2E",
            Metric::OutputTokens => "output tokens",
            Metric::Tpot => "TPOT (MLPerf)",
            Metric::ChunkGap => "chunk gap",
        }
    }

    /// `ms`, or `tokens` for output tokens.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::OutputTokens => "tokens",
            _ => "ms",
        }
    }

    /// Index into per-metric arrays ([`Values`]).
    pub fn idx(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One value per [`Metric`], each optional (`None`: not measured / not claimed).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Values(pub [Option<f64>; 6]);

impl Values {
    /// The value of `m`.
    pub fn get(&self, m: Metric) -> Option<f64> {
        self.0[m.idx()]
    }

    /// Sets `m` (a value that is not finite is none).
    pub fn set(&mut self, m: Metric, v: Option<f64>) {
        self.0[m.idx()] = v.filter(|x| x.is_finite());
    }
}

/// Which shared clock a client's start instants are on (docs/benchmark.md#clocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// Wall clock, ns since the Unix epoch (any host). Joined against `anchor.wall_ns`.
    Wall,
    /// Raw `CLOCK_MONOTONIC` ns (same host only). Joined against `start_mono_ns`.
    Mono,
}

/// One request as the client reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientTurn {
    /// Where it came from in the client's file: the 1-based line (JSONL) or 1-based list
    /// position (JSON array).
    pub at: usize,
    /// The id the client sent in a request-id header (AIPerf `x_request_id` → `X-Request-ID`).
    pub request_id: Option<String>,
    /// The server's response id as the client kept it (guidellm `response_id`, tokentap's
    /// `response_id`): the exact key to the proxy's record of the same response.
    pub response_id: Option<String>,
    /// The text the client received, when its file keeps it (SGLang's `generated_texts`): a join
    /// key against the proxy's `--record-content` output when nothing else is shared.
    pub output_text: Option<String>,
    /// The value of the session header the client sent (tokentap's conversation id, AIPerf's
    /// `x_correlation_id`, MLPerf's logical conversation id).
    pub session: Option<String>,
    /// 0-based order of this turn inside its session, as the client numbers it.
    pub turn: Option<u32>,
    /// The client's start instant (its send), ns on [`ClientRun::clock`].
    pub start_ns: Option<u64>,
    /// The client counted the request as successful.
    pub ok: bool,
    /// Inside the client's performance window (formats without one: always).
    pub tracked: bool,
    /// What the client measured for this turn.
    pub values: Values,
}

impl ClientTurn {
    /// A turn at line (or list position) `at`, nothing measured yet.
    pub fn new(at: usize) -> Self {
        ClientTurn {
            at,
            request_id: None,
            response_id: None,
            output_text: None,
            session: None,
            turn: None,
            start_ns: None,
            ok: true,
            tracked: true,
            values: Values::default(),
        }
    }
}

/// Percentiles a client published in its own summary (p50/p90/p99 per metric).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Published {
    /// Where they were read from.
    pub source: String,
    /// `[p50, p90, p99]` per metric, in the metric's unit.
    pub stats: [Option<[Option<f64>; 3]>; 6],
    /// The client's percentile method is numpy `lower` (the MLPerf reference), not `linear`:
    /// the wire's side of a published claim is then computed the same way.
    pub lower: bool,
    /// The client's percentile method is nearest rank (numpy `inverted_cdf`: guidellm).
    pub nearest_rank: bool,
    /// Only the client's performance-window turns are in the published numbers.
    pub tracked_only: bool,
}

impl Published {
    /// The published p50, p90 and p99 of `m`, if published.
    pub fn get(&self, m: Metric) -> Option<[Option<f64>; 3]> {
        self.stats[m.idx()]
    }
}

/// A judgement: of a claim against the wire, or of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Within the tolerance.
    Pass,
    /// Beyond it.
    Fail,
    /// Nothing to judge (the client does not claim the metric, or no turn was compared).
    NoData,
}

impl Verdict {
    /// As the table prints it: `PASS`, `FAIL` or `n/a`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::NoData => "n/a",
        }
    }
}

/// A check of what the client published that needs no wire: its summary against its own
/// events, impossible values, token counts and scores recomputed the reference's way.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// Its outcome.
    pub verdict: Verdict,
    /// What was found.
    pub detail: String,
}

/// What of the wire a [`TotalClaim`] is held against: a sum over the claim's session's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WireTotal {
    /// Prompt tokens, the cached part included (the records' `prompt_tokens`).
    PromptTokens,
    /// Cached prompt tokens (the records' `cached_tokens`).
    CachedTokens,
    /// Output tokens (the records' `output_tokens`).
    OutputTokens,
    /// Time with at least one of the session's requests in flight on the wire, ms: the union of
    /// their spans (start to last byte).
    ModelTimeMs,
}

impl WireTotal {
    /// `ms` or `tokens`.
    pub fn unit(self) -> &'static str {
        match self {
            WireTotal::ModelTimeMs => "ms",
            _ => "tokens",
        }
    }
}

/// A total a client claims over a whole session rather than per request (an agent's own usage
/// and time in its result), judged against the same total of the wire's records of the session.
/// Tokens must be equal; a time passes within the time tolerance.
#[derive(Debug, Clone, PartialEq)]
pub struct TotalClaim {
    /// The client's field(s), as its file names them.
    pub name: String,
    /// The session the total is over (the wire's `conversation_id`); `None`: every record.
    pub session: Option<String>,
    /// What of the wire it is held against.
    pub of: WireTotal,
    /// The client's value.
    pub client: f64,
}

/// Everything read from one client output file.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// The clock its start instants are on.
    pub clock: Clock,
    /// Its turns, in file order.
    pub turns: Vec<ClientTurn>,
    /// The percentiles it published, if any.
    pub published: Option<Published>,
    /// The file's benchmark levels (guidellm: one benchmark per concurrency or rate), each judged
    /// on its own; empty for a file of one level.
    pub levels: Vec<Level>,
    /// The start instants count from the client's own zero (vLLM's Rust client), not a clock the
    /// proxy shares: aligned to the wire from the pairs before the time-based joins, or dropped.
    pub relative_starts: bool,
    /// Facts worth telling the reader (skipped lines, unsupported fields...).
    pub notes: Vec<String>,
    /// Checks of what it published that need no wire.
    pub checks: Vec<Check>,
    /// Totals over a session the client claims (agents); empty for the benchmark clients.
    pub totals: Vec<TotalClaim>,
}

/// One benchmark level of a client file that holds several (guidellm's `benchmarks[]`): its
/// turns (indices into [`ClientRun::turns`]) and what it published.
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    /// As the client names it, e.g. `concurrent@4`, `constant@10`.
    pub name: String,
    /// Its turns: indices into [`ClientRun::turns`].
    pub turns: std::ops::Range<usize>,
    /// What it published.
    pub published: Option<Published>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A metric's name in compare.json is its vocabulary name.
    #[test]
    fn metric_serde_names_are_the_vocabularys() {
        for m in Metric::ALL {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
    }
}
