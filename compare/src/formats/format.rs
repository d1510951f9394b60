//! `--format`: the client file formats `tokentap compare` reads, their names and clocks.

use crate::client::Clock;

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Whichever of the formats below the file is, told from its first records.
    Auto,
    /// tokentap replay `records.jsonl` (TurnRecord, origin replay).
    Tokentap,
    /// MLPerf Endpoints `events.jsonl`.
    Mlperf,
    /// NVIDIA AIPerf `profile_export.jsonl` (published percentiles from `profile_export_aiperf.json`
    /// beside it, when present).
    Aiperf,
    /// kubernetes-sigs inference-perf `per_request_lifecycle_metrics.json`.
    InferencePerf,
    /// guidellm `benchmarks.json` (`--output kind=json`): one verdict per benchmark level.
    Guidellm,
    /// `vllm bench serve --save-result --save-detailed` result (Python or Rust client).
    VllmBench,
    /// SGLang `bench_serving --output-file F --output-details` JSONL (joined by output text).
    SglangBench,
    /// vLLM's multi-turn benchmark `--stats-json-output` (one object per request).
    VllmMultiTurn,
    /// Claude Code's `-p --output-format json` result or `stream-json` events: its usage and
    /// API time, per session.
    ClaudeCode,
    /// The Codex CLI's `exec --json` events: its usage, per session.
    Codex,
}

impl Format {
    /// The formats a file can be read in (all but `auto`).
    pub const READ: [Format; 10] = [
        Format::Tokentap,
        Format::Mlperf,
        Format::Aiperf,
        Format::InferencePerf,
        Format::Guidellm,
        Format::VllmBench,
        Format::SglangBench,
        Format::VllmMultiTurn,
        Format::ClaudeCode,
        Format::Codex,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Auto => "auto",
            Format::Tokentap => "tokentap",
            Format::Mlperf => "mlperf",
            Format::Aiperf => "aiperf",
            Format::InferencePerf => "inference-perf",
            Format::Guidellm => "guidellm",
            Format::VllmBench => "vllm-bench",
            Format::SglangBench => "sglang-bench",
            Format::VllmMultiTurn => "vllm-multi-turn",
            Format::ClaudeCode => "claude-code",
            Format::Codex => "codex",
        }
    }

    /// The format's file as a person would name it.
    pub fn file_name(self) -> &'static str {
        match self {
            Format::Auto => "a client file",
            Format::Tokentap => "a tokentap replay records.jsonl",
            Format::Mlperf => "an MLPerf Endpoints events.jsonl",
            Format::Aiperf => "an AIPerf profile_export.jsonl",
            Format::InferencePerf => "an inference-perf per_request_lifecycle_metrics.json",
            Format::Guidellm => "a guidellm benchmarks.json",
            Format::VllmBench => "a vllm bench serve result",
            Format::SglangBench => "an SGLang bench_serving result",
            Format::VllmMultiTurn => "a vLLM multi-turn benchmark --stats-json-output file",
            Format::ClaudeCode => "Claude Code's --output-format json or stream-json output",
            Format::Codex => "the Codex CLI's exec --json events",
        }
    }

    /// The clock the format's start instants are on.
    pub fn clock(self) -> Clock {
        match self {
            Format::Aiperf | Format::Guidellm | Format::ClaudeCode | Format::Codex => Clock::Wall,
            _ => Clock::Mono,
        }
    }
}
