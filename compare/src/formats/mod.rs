//! Parsers of third-party client outputs, one module per format, each producing a
//! [`ClientRun`]. The formats and their clocks (SPEC §9):
//!
//! | format | file | start instant | join keys |
//! |---|---|---|---|
//! | [`tokentap`] | replay `records.jsonl` | `start_mono_ns` (monotonic) | session + order |
//! | [`mlperf`] | MLPerf Endpoints `events.jsonl` | `sample.issued` `timestamp_ns` (monotonic, main process) | session + order |
//! | [`aiperf`] | AIPerf `profile_export.jsonl` | `request_start_ns` (wall clock) | `X-Request-ID`, else `X-Correlation-ID` + order |
//! | [`inference_perf`] | `per_request_lifecycle_metrics.json` | `start_time` (monotonic seconds, `time.perf_counter`) | `session_id` + order, else time |

pub mod aiperf;
pub mod inference_perf;
pub mod mlperf;
pub mod tokentap;

use crate::client::{ClientRun, Clock};
use crate::error::CompareError;
use serde_json::Value;
use std::path::Path;

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// tokentap replay `records.jsonl` (TurnRecord, origin replay).
    Tokentap,
    /// MLPerf Endpoints `events.jsonl`.
    Mlperf,
    /// NVIDIA AIPerf `profile_export.jsonl` (published percentiles from `profile_export_aiperf.json`
    /// beside it, when present).
    Aiperf,
    /// kubernetes-sigs inference-perf `per_request_lifecycle_metrics.json`.
    InferencePerf,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Tokentap => "tokentap",
            Format::Mlperf => "mlperf",
            Format::Aiperf => "aiperf",
            Format::InferencePerf => "inference-perf",
        }
    }

    /// The clock the format's start instants are on.
    pub fn clock(self) -> Clock {
        match self {
            Format::Aiperf => Clock::Wall,
            _ => Clock::Mono,
        }
    }
}

/// The reference tokenizer and dataset, for formats whose claims need them (MLPerf).
#[derive(Default, Clone, Copy)]
pub struct Reference<'a> {
    pub tokenizer: Option<&'a tokentap_mlperf::RefTokenizer>,
    pub dataset: Option<&'a tokentap_dataset::Dataset>,
}

/// How to find the percentiles a client published.
#[derive(Debug, Clone, Default)]
pub enum PublishedSource {
    /// The format's usual summary file beside the client file, if it exists.
    #[default]
    Beside,
    /// This file.
    File(std::path::PathBuf),
    /// Do not read published percentiles; claims are recomputed from the per-turn values.
    Off,
}

/// Reads a client file in `format`. `clock` overrides the format's clock where the file carries
/// both (tokentap records); other formats ignore it.
pub fn load(
    format: Format,
    path: &Path,
    clock: Option<Clock>,
    published: &PublishedSource,
    reference: &Reference<'_>,
) -> Result<ClientRun, CompareError> {
    let text = std::fs::read_to_string(path).map_err(|source| CompareError::Io {
        what: "cannot read the client file",
        path: path.to_path_buf(),
        source,
    })?;
    match format {
        Format::Tokentap => tokentap::parse(path, &text, clock.unwrap_or(Clock::Mono)),
        Format::Mlperf => {
            let (rs, sc) = match published {
                PublishedSource::Off => (None, None),
                PublishedSource::File(p) => (Some(p.clone()), mlperf::Extras::beside(path).1),
                PublishedSource::Beside => mlperf::Extras::beside(path),
            };
            mlperf::parse(
                path,
                &text,
                &mlperf::Extras {
                    result_summary: rs,
                    scores: sc,
                    tokenizer: reference.tokenizer,
                    dataset: reference.dataset,
                },
            )
        }
        Format::Aiperf => {
            let mut run = aiperf::parse(path, &text)?;
            let summary = match published {
                PublishedSource::Off => None,
                PublishedSource::File(p) => Some(p.clone()),
                PublishedSource::Beside => {
                    let p = path.with_file_name("profile_export_aiperf.json");
                    p.is_file().then_some(p)
                }
            };
            if let Some(p) = summary {
                let text = std::fs::read_to_string(&p).map_err(|source| CompareError::Io {
                    what: "cannot read the AIPerf summary",
                    path: p.clone(),
                    source,
                })?;
                run.published = Some(aiperf::parse_summary(&p, &text)?);
            }
            Ok(run)
        }
        Format::InferencePerf => inference_perf::parse(path, &text),
    }
}

/// Iterates over the non-empty lines of a JSONL text as parsed values, with 1-based line numbers.
pub(crate) fn jsonl<'a>(
    path: &'a Path,
    text: &'a str,
) -> impl Iterator<Item = Result<(usize, Value), CompareError>> + 'a {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(move |(i, l)| {
            serde_json::from_str(l)
                .map(|v| (i + 1, v))
                .map_err(|e| CompareError::parse(path, i + 1, format!("not JSON: {e}")))
        })
}

/// A number at `v[key]`, accepting integers and floats.
pub(crate) fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// An unsigned integer at `v[key]` (ns timestamps: f64 would lose precision above 2^53).
pub(crate) fn uint(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(|x| {
        x.as_u64()
            .or_else(|| x.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
    })
}

/// A string at `v[key]` (numbers are accepted and printed).
pub(crate) fn string(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Milliseconds from a value in `unit` (`ns`, `us`, `ms`, `s`/`sec`); `None` for other units.
pub(crate) fn to_ms(value: f64, unit: &str) -> Option<f64> {
    let f = match unit {
        "ns" => 1e-6,
        "us" | "µs" => 1e-3,
        "ms" => 1.0,
        "s" | "sec" | "seconds" => 1e3,
        _ => return None,
    };
    Some(value * f)
}
