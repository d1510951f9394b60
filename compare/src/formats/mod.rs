//! Parsers of third-party client outputs, one module per format, each producing a
//! [`ClientRun`]. The formats and their clocks (docs/benchmark.md#client-formats):
//!
//! | format | file | start instant | join keys |
//! |---|---|---|---|
//! | [`tokentap`] | replay `records.jsonl` | `start_mono_ns` (monotonic) | session + order |
//! | [`mlperf`] | MLPerf Endpoints `events.jsonl` | `sample.issued` `timestamp_ns` (monotonic, main process) | session + order |
//! | [`aiperf`] | AIPerf `profile_export.jsonl` | `request_start_ns` (wall clock) | `X-Request-ID`, else `X-Correlation-ID` + order |
//! | [`inference_perf`] | `per_request_lifecycle_metrics.json` | `start_time` (monotonic seconds, `time.perf_counter`) | `session_id` + order, else time |
//! | [`guidellm`] | `benchmarks.json` | `request_start_time` (wall-clock epoch seconds) | the server's response id, else time |
//! | [`sglang_bench`] | `bench_serving --output-details` JSONL | none | output text (proxy `--record-content`) |
//! | [`vllm_multi_turn`] | multi-turn benchmark `--stats-json-output` | `start_time_ms` (`perf_counter`: monotonic, same host) | `conversation_id` (= `X-Session-ID` with `--send-conversation-id`) + order, else time |
//! | [`vllm_bench`] | `vllm bench serve --save-detailed` JSON | `start_times` (`perf_counter` seconds: monotonic; the Rust client's are relative) | `x-request-id` `bench-<run>-<i>` |
//! | [`agents`] | Claude Code json / stream-json, Codex `exec --json` | none | the message id (stream-json); totals per session |

pub mod agents;
pub mod aiperf;
mod format;
pub mod guidellm;
pub mod inference_perf;
pub mod json;
pub mod mlperf;
pub mod sglang_bench;
pub mod sniff;
pub mod tokentap;
pub mod vllm_bench;
pub mod vllm_multi_turn;

use crate::client::{ClientRun, Clock};
use crate::error::CompareError;
pub use format::Format;
use std::path::Path;

/// The reference tokenizer and dataset, for formats whose claims need them (MLPerf).
#[derive(Default, Clone, Copy)]
pub struct Reference<'a> {
    /// The reference tokenizer, to count the client's outputs.
    pub tokenizer: Option<&'a tokentap_mlperf::RefTokenizer>,
    /// The dataset, to score them.
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

/// The format to read `path` in: `format`, after checking the file is of it (a file of another
/// tool is refused, naming what it is), or with `auto` the one its first records show.
pub fn resolve(format: Format, path: &Path) -> Result<Format, CompareError> {
    if format == Format::Auto {
        sniff::detect(path)
    } else {
        sniff::expect(path, format)?;
        Ok(format)
    }
}

/// Reads a client file in `format` (resolved: see [`resolve`]), a line (or for a JSON array, an
/// element) at a time: memory is the turns, not the file. `clock` overrides the format's clock
/// where the file carries both (tokentap records); other formats ignore it.
pub fn load(
    format: Format,
    path: &Path,
    clock: Option<Clock>,
    published: &PublishedSource,
    reference: &Reference<'_>,
) -> Result<ClientRun, CompareError> {
    let format = resolve(format, path)?;
    match format {
        Format::Auto => Err(CompareError::File {
            path: path.to_path_buf(),
            msg: "its format could not be told: give --format".into(),
        }),
        Format::Tokentap => tokentap::load(path, clock.unwrap_or(Clock::Mono)),
        Format::Mlperf => {
            let (rs, sc) = match published {
                PublishedSource::Off => (None, None),
                PublishedSource::File(p) => (Some(p.clone()), mlperf::Extras::beside(path).1),
                PublishedSource::Beside => mlperf::Extras::beside(path),
            };
            mlperf::load(
                path,
                &mlperf::Extras {
                    result_summary: rs,
                    scores: sc,
                    tokenizer: reference.tokenizer,
                    dataset: reference.dataset,
                },
            )
        }
        Format::Aiperf => {
            let mut run = aiperf::load(path)?;
            let summary = match published {
                PublishedSource::Off => None,
                PublishedSource::File(p) => Some(p.clone()),
                PublishedSource::Beside => {
                    let p = path.with_file_name("profile_export_aiperf.json");
                    p.is_file().then_some(p)
                }
            };
            if let Some(p) = summary {
                run.published = Some(aiperf::load_summary(&p)?);
            }
            Ok(run)
        }
        Format::InferencePerf => inference_perf::load(path),
        Format::ClaudeCode => agents::load_claude_code(path),
        Format::Codex => agents::load_codex(path),
        Format::VllmMultiTurn => vllm_multi_turn::load(path),
        Format::SglangBench => {
            let mut run = sglang_bench::load(path)?;
            if matches!(published, PublishedSource::Off) {
                run.published = None;
                for l in &mut run.levels {
                    l.published = None;
                }
            }
            Ok(run)
        }
        Format::VllmBench => {
            let mut run = vllm_bench::load(path)?;
            if matches!(published, PublishedSource::Off) {
                run.published = None;
            }
            Ok(run)
        }
        Format::Guidellm => {
            let mut run = guidellm::load(path)?;
            if matches!(published, PublishedSource::Off) {
                run.published = None;
                for l in &mut run.levels {
                    l.published = None;
                }
            }
            Ok(run)
        }
    }
}
