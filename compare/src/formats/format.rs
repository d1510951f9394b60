//! `--format`: the client file formats `tokentap compare` reads, their names and clocks.

use crate::client::Clock;

/// Declares the formats once, each with its doc (the `--help` line), its name (`--format`'s
/// value, the JSON's `format`), its file as a person would name it and the clock its start
/// instants are on. Adding a format: a line here, its reader in `formats::read`, its
/// detection in `sniff`.
macro_rules! formats {
    ($(
        $(#[doc = $doc:literal])+
        $variant:ident = $name:literal, $file:literal, $clock:ident;
    )+) => {
        /// `--format`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Format {
            $($(#[doc = $doc])+ $variant,)+
        }

        impl Format {
            /// Every format, `auto` first.
            pub const ALL: [Format; [$(stringify!($variant)),+].len()] = [$(Format::$variant),+];

            /// The name (`--format`'s value, the JSON's `format`).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Format::$variant => $name,)+
                }
            }

            /// The format's file as a person would name it.
            pub fn file_name(self) -> &'static str {
                match self {
                    $(Format::$variant => $file,)+
                }
            }

            /// The clock the format's start instants are on.
            pub fn clock(self) -> Clock {
                match self {
                    $(Format::$variant => Clock::$clock,)+
                }
            }
        }
    };
}

formats! {
    /// Whichever of the formats below the file is, told from its first records.
    Auto = "auto", "a client file", Mono;
    /// tokentap replay `records.jsonl` (TurnRecord, origin replay).
    Tokentap = "tokentap", "a tokentap replay records.jsonl", Mono;
    /// MLPerf Endpoints `events.jsonl`.
    Mlperf = "mlperf", "an MLPerf Endpoints events.jsonl", Mono;
    /// NVIDIA AIPerf `profile_export.jsonl` (published percentiles from `profile_export_aiperf.json`
    /// beside it, when present).
    Aiperf = "aiperf", "an AIPerf profile_export.jsonl", Wall;
    /// kubernetes-sigs inference-perf `per_request_lifecycle_metrics.json`.
    InferencePerf = "inference-perf", "an inference-perf per_request_lifecycle_metrics.json", Mono;
    /// guidellm `benchmarks.json` (`--output kind=json`): one verdict per benchmark level.
    Guidellm = "guidellm", "a guidellm benchmarks.json", Wall;
    /// `vllm bench serve --save-result --save-detailed` result (Python or Rust client).
    VllmBench = "vllm-bench", "a vllm bench serve result", Mono;
    /// SGLang `bench_serving --output-file F --output-details` JSONL (joined by output text).
    SglangBench = "sglang-bench", "an SGLang bench_serving result", Mono;
    /// vLLM's multi-turn benchmark `--stats-json-output` (one object per request).
    VllmMultiTurn = "vllm-multi-turn", "a vLLM multi-turn benchmark --stats-json-output file", Mono;
    /// Claude Code's `-p --output-format json` result or `stream-json` events: its usage and
    /// API time, per session.
    ClaudeCode = "claude-code", "Claude Code's --output-format json or stream-json output", Wall;
    /// The Codex CLI's `exec --json` events: its usage, per session.
    Codex = "codex", "the Codex CLI's exec --json events", Wall;
}

impl Format {
    /// The formats a file can be read in (all but `auto`).
    pub fn read() -> impl Iterator<Item = Format> {
        Format::ALL.into_iter().filter(|f| *f != Format::Auto)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// `--format`'s spelling of each format is its name.
    #[test]
    fn the_flag_value_is_the_name() {
        for f in Format::ALL {
            let v = f.to_possible_value().unwrap();
            assert_eq!(v.get_name(), f.as_str());
            assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
        }
    }
}
