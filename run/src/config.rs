//! The run's configuration (`config.json`): every option declared once ([`RunConfig`], a `clap::Args`
//! that is also `config.json`), resolved in one step ([`RunConfig::resolve`]) and checked by
//! [`RunConfig::check`], which only checks.
//!
//! An option is one field: its flag, environment variable, default and help in the `#[arg]`
//! attribute, its `config.json` key from serde, its bound in `check`. `tokentap replay` (its `Opts`)
//! and `tokentap sweep` flatten the same struct and add their own `--concurrency` (one number for
//! a run, a list for a sweep). Because the whole struct is what `config.json` holds, a new option
//! reaches a resumed sweep's and merge's same-run comparisons without a list to update
//! (`tests/options.rs` proves it for every option). The API key is never part of it: it is a
//! [`Secret`] that is skipped by serde and debug-prints as `"<redacted>"`.
//!
//! Resolution fills what the flags imply in place: the preset's sampling under the explicit
//! flags, the turn timeout, the published seed set and its model seed, and the derived
//! `api_key_set` / `byte_compatible` facts. It is idempotent, so a run resolves again whatever
//! a caller changed after parsing.
//!
//! Decisions:
//! - Presets carry the official sampling settings (docs/benchmark.md#requests) and the official
//!   turn timeouts (docs/benchmark.md#load); an explicit flag always wins over the preset value.
//! - Model name: `--model`, else every client row's own `model`, else the one model every
//!   endpoint lists at `/v1/models` (`crate::models`, before the run); when none of these gives
//!   one, the run fails with a message that says to pass `--model` (there is no silent default
//!   model name, because a wrong name is a 404 on a real server — `tokentap sim` included).
//! - Turn timeout: the preset's official value (Kimi 86,400 s, Qwen 14,400 s), else 86,400 s.
//! - `--routing-header` replaces the default `X-Session-ID` when given; repeat it to send several
//!   (`--routing-header X-Session-ID --routing-header X-SMG-Routing-Key`).
//! - `--endpoint` is a base URL: `/v1/chat/completions` is appended, unless the path already ends
//!   with `/v1` (then `/chat/completions`) or with `/chat/completions` (used as is).

use http::uri::{PathAndQuery, Scheme, Uri};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;
use tokentap_dataset::Dataset;

/// The largest `--delay-scale`: with a row's longest delay (a day) a sleep of under three years,
/// which every timer represents.
pub const MAX_DELAY_SCALE: f64 = 1_000.0;

/// The three official agentic models' settings and gates (docs/rules.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// Kimi K3 (it replaced K2.6 in the reference): temperature 1.0, top_p 1.0, 8192 tokens;
    /// timeout 86,400 s; gates: inline accuracy ≥ 58.32 %, full-run OSL mean 425–520,
    /// SWE-bench ≥ 93.5 %.
    Kimi,
    /// Qwen3.6-35B-A3B: temperature 1.0, top_k 20, top_p 0.95, repetition_penalty 1.0,
    /// presence_penalty 1.5, 8192 tokens, `chat_template_kwargs: {"preserve_thinking": true}`;
    /// timeout 14,400 s; gates: inline accuracy ≥ 55.86 %, full-run OSL mean 344–422,
    /// SWE-bench ≥ 69 %.
    Qwen,
    /// DeepSeek-V4.1-Flash: gates only (inline accuracy ≥ 52.36 %, full-run OSL mean 793–970,
    /// SWE-bench ≥ 96.4 %); its sampling settings and timeout are not published, so the
    /// preset sets none and the sampling rule is not evaluated.
    Deepseek,
}

impl Preset {
    /// The official sampling settings.
    pub fn sampling(self) -> Sampling {
        match self {
            Preset::Kimi => Sampling {
                temperature: Some(1.0),
                top_p: Some(1.0),
                max_completion_tokens: Some(8192),
                ..Sampling::default()
            },
            Preset::Qwen => Sampling {
                temperature: Some(1.0),
                top_k: Some(20),
                top_p: Some(0.95),
                repetition_penalty: Some(1.0),
                presence_penalty: Some(1.5),
                max_completion_tokens: Some(8192),
                chat_template_kwargs: Some(serde_json::json!({"preserve_thinking": true})),
                ..Sampling::default()
            },
            Preset::Deepseek => Sampling::default(),
        }
    }

    /// The official turn timeout, where one is published.
    pub fn turn_timeout(self) -> Option<Duration> {
        self.official().turn_timeout_s.map(Duration::from_secs_f64)
    }

    /// The official settings and gates (the reference README at ea33275).
    pub fn official(self) -> tokentap_mlperf::Official {
        match self {
            Preset::Kimi => tokentap_mlperf::validity::kimi_k3(),
            Preset::Qwen => tokentap_mlperf::validity::qwen36(),
            Preset::Deepseek => tokentap_mlperf::validity::deepseek_v41_flash(),
        }
    }
}

/// Run-level sampling settings, as flags and as what is sent: `None` fields are omitted from the
/// body. Resolution puts the preset's values under the flags given; a dataset row's own
/// overrides replace these for that row's request.
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[group(id = "SamplingOpts")]
pub struct Sampling {
    /// Run-level `temperature` sent in every request (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_TEMPERATURE",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Run-level `max_completion_tokens` (a row's `max_new_tokens` / `max_completion_tokens`
    /// overrides it).
    #[arg(
        long = "max-tokens",
        env = "TOKENTAP_REPLAY_MAX_TOKENS",
        help_heading = "Request body"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Run-level sampling `seed` sent in every request (none by default, as the reference);
    /// else a seed set's `model_seed` (an unsigned 64-bit value, hence the width).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_SEED",
        allow_negative_numbers = true,
        value_parser = parse_seed,
        help_heading = "Request body"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i128>,
    /// Run-level `top_p` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_TOP_P",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Run-level `top_k` (over the preset's; a row's own wins; -1 = off, as vLLM reads it).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_TOP_K",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i64>,
    /// Run-level `repetition_penalty` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_REPETITION_PENALTY",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repetition_penalty: Option<f64>,
    /// Run-level `presence_penalty` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_PRESENCE_PENALTY",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// Run-level `frequency_penalty` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_FREQUENCY_PENALTY",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// JSON object sent as `chat_template_kwargs`.
    #[arg(long, env = "TOKENTAP_REPLAY_CHAT_TEMPLATE_KWARGS", value_parser = parse_json, help_heading = "Request body")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<Value>,
}

impl Sampling {
    /// `self` over `under`: every field this one leaves unset takes `under`'s.
    fn over(self, under: Sampling) -> Sampling {
        Sampling {
            temperature: self.temperature.or(under.temperature),
            max_completion_tokens: self.max_completion_tokens.or(under.max_completion_tokens),
            seed: self.seed.or(under.seed),
            top_p: self.top_p.or(under.top_p),
            top_k: self.top_k.or(under.top_k),
            repetition_penalty: self.repetition_penalty.or(under.repetition_penalty),
            presence_penalty: self.presence_penalty.or(under.presence_penalty),
            frequency_penalty: self.frequency_penalty.or(under.frequency_penalty),
            chat_template_kwargs: self.chat_template_kwargs.or(under.chat_template_kwargs),
        }
    }
}

/// `--seed`: any integer a request's `seed` can carry (a signed or an unsigned 64-bit value).
fn parse_seed(s: &str) -> Result<i128, String> {
    match s.trim().parse::<i128>() {
        Ok(v) if (i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected an integer from {} to {}, found {s:?}",
            i64::MIN,
            u64::MAX
        )),
    }
}

/// A credential: never printed, never serialized, never recorded.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("<redacted>")
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_string()))
    }
}

/// `--shard I/N`: this process runs the trajectories whose FIFO number k has `k mod N == I`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("expected I/N like 0/4, found {s:?}"))?;
        let index: u64 = i
            .trim()
            .parse()
            .map_err(|_| format!("expected an integer shard index, found {i:?}"))?;
        let count: u64 = n
            .trim()
            .parse()
            .map_err(|_| format!("expected an integer shard count, found {n:?}"))?;
        if count == 0 || index >= count {
            return Err(format!("expected 0 <= I < N, found {index}/{count}"));
        }
        Ok(Shard { index, count })
    }
}

fn parse_json(s: &str) -> Result<Value, String> {
    serde_json::from_str(s).map_err(|e| format!("expected JSON: {e}"))
}

/// `--delay-scale` default: the dataset's delays as recorded.
pub const DEFAULT_DELAY_SCALE: f64 = 1.0;

/// `--routing-header` default (docs/benchmark.md#load).
pub const DEFAULT_ROUTING_HEADER: &str = "X-Session-ID";

/// `--turn-timeout` default without a preset: a day (the reference's Kimi default).
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(86_400);

/// `--max-event-bytes` default: 16 MiB, far above any real chunk (a full 8k-token response in
/// one event is under 100 KB).
pub const DEFAULT_MAX_EVENT_BYTES: usize = tokentap_core::sse::DEFAULT_MAX_EVENT_BYTES;

/// Which HTTP versions a run speaks: `--http1` / `--http2`, one value (`config.json` keeps the
/// two flags as `http1` and `http2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocols {
    /// `--http1`: HTTP/1.1 only, also on https:// (ALPN `http/1.1`), as the MLPerf reference
    /// client.
    Http1,
    /// HTTP/1.1 on http://; on https://, HTTP/2 when the server's ALPN picks `h2`.
    #[default]
    Auto,
    /// `--http2`: HTTP/2 only (prior knowledge on http://, ALPN `h2` alone on https://).
    Http2,
}

impl clap::FromArgMatches for Protocols {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(if m.get_flag("http1") {
            Protocols::Http1
        } else if m.get_flag("http2") {
            Protocols::Http2
        } else {
            Protocols::Auto
        })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for Protocols {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        use clap::{Arg, ArgAction};
        cmd.arg(
            Arg::new("http2")
                .long("http2")
                .env("TOKENTAP_REPLAY_HTTP2")
                .action(ArgAction::SetTrue)
                .conflicts_with("http1")
                .help_heading("Server")
                .help("HTTP/2 only: prior knowledge on http:// (h2c), ALPN `h2` alone on https://. Without it, https:// uses HTTP/2 when the server's ALPN picks it, http:// uses HTTP/1.1. One stream per turn on one connection per conversation slot: the closed loop is unchanged"),
        )
        .arg(
            Arg::new("http1")
                .long("http1")
                .env("TOKENTAP_REPLAY_HTTP1")
                .action(ArgAction::SetTrue)
                .help_heading("Server")
                .help("HTTP/1.1 only, also on https:// (ALPN `http/1.1`), as the MLPerf reference client"),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// `config.json`'s two keys for [`Protocols`].
#[derive(Serialize, Deserialize)]
struct ProtocolKeys {
    #[serde(default)]
    http1: bool,
    #[serde(default)]
    http2: bool,
}

impl Serialize for Protocols {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ProtocolKeys {
            http1: *self == Protocols::Http1,
            http2: *self == Protocols::Http2,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Protocols {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let k = ProtocolKeys::deserialize(d)?;
        Ok(match (k.http1, k.http2) {
            (true, _) => Protocols::Http1,
            (_, true) => Protocols::Http2,
            _ => Protocols::Auto,
        })
    }
}

/// The declared warmup (docs/benchmark.md#validity: declared, excluded from the metrics): on
/// when `--warmup-trajectories` or `--warmup-duration` asks for one.
#[derive(clap::Args, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[group(id = "WarmupOpts")]
pub struct Warmup {
    /// Warmup: issue this many trajectories before performance tracking starts (excluded from
    /// every result, recorded in warmup.jsonl and declared in the summary).
    #[arg(
        id = "warmup_trajectories",
        long = "warmup-trajectories",
        env = "TOKENTAP_REPLAY_WARMUP_TRAJECTORIES",
        value_name = "N",
        help_heading = "Warmup"
    )]
    pub trajectories: Option<u64>,
    /// Warmup: issue for this long (e.g. 5m), then let the started turns finish.
    #[arg(id = "warmup_duration", long = "warmup-duration", env = "TOKENTAP_REPLAY_WARMUP_DURATION", value_parser = tokentap_core::duration::parse, value_name = "DURATION", help_heading = "Warmup")]
    #[serde(
        with = "tokentap_core::duration::opt_secs",
        default,
        rename = "duration_s"
    )]
    pub duration: Option<Duration>,
    /// Dataset for the warmup (default: the performance dataset). Warmup requests are always
    /// salted with a tag of their own, so no KV-cache entry carries over into the measurement.
    #[arg(
        id = "warmup_dataset",
        long = "warmup-dataset",
        env = "TOKENTAP_REPLAY_WARMUP_DATASET",
        value_name = "FILE",
        help_heading = "Warmup"
    )]
    pub dataset: Option<PathBuf>,
    /// Concurrency of the warmup (default: the run's, a sweep point's own).
    #[arg(
        id = "warmup_concurrency",
        long = "warmup-concurrency",
        env = "TOKENTAP_REPLAY_WARMUP_CONCURRENCY",
        value_name = "N",
        help_heading = "Warmup"
    )]
    pub concurrency: Option<usize>,
}

impl Warmup {
    /// A warmup was asked for.
    pub fn enabled(&self) -> bool {
        self.trajectories.is_some() || self.duration.is_some()
    }
}

/// `config.json`'s `warmup`: null when no warmup option was given.
mod warmup_or_null {
    use super::Warmup;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(w: &Warmup, s: S) -> Result<S::Ok, S::Error> {
        (*w != Warmup::default()).then_some(w).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Warmup, D::Error> {
        Ok(Option::<Warmup>::deserialize(d)?.unwrap_or_default())
    }
}

/// The run's configuration: every `tokentap replay` option (declared here once, shared by
/// `tokentap sweep`), what resolution derived from them, and what the run learnt before its
/// first request (the dataset's identity, a discovered model). Written to `config.json` and
/// embedded in `summary.json`.
#[derive(clap::Args, Clone, Debug, Serialize, Deserialize)]
#[group(id = "RunConfig")]
#[serde(default)]
pub struct RunConfig {
    /// Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000 or
    /// https://llm.example.com (requests go to /v1/chat/completions under it). Repeat it for
    /// several endpoints: each conversation stays on one, chosen by its id (rendezvous hashing,
    /// as a session-affine router — and `tokentap proxy` — would).
    #[arg(
        long = "endpoint",
        env = "TOKENTAP_REPLAY_ENDPOINT",
        required = true,
        num_args = 1,
        value_name = "URL",
        value_parser = Endpoint::parse_arg,
        help_heading = "Server"
    )]
    #[serde(alias = "endpoint", deserialize_with = "one_or_many")]
    pub endpoints: Vec<Endpoint>,
    /// Trust the CA certificates in this PEM file for https endpoints (besides the system's).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_CA",
        value_name = "FILE",
        help_heading = "Server"
    )]
    pub ca: Option<PathBuf>,
    /// Do not check https endpoints' certificates (test rigs only; the summary says so).
    #[arg(long, env = "TOKENTAP_REPLAY_INSECURE", help_heading = "Server")]
    pub insecure: bool,
    #[command(flatten)]
    #[serde(flatten)]
    pub protocols: Protocols,
    /// The model was not given: it is the one the endpoints list at `/v1/models`.
    #[arg(skip)]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_discovered: bool,
    /// Model name sent in every request (a row's own `model` overrides it).
    #[arg(long, env = "TOKENTAP_REPLAY_MODEL", help_heading = "Server")]
    pub model: Option<String>,
    /// Official sampling settings, timeout and validity gates of one model.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_PRESET",
        value_enum,
        help_heading = "Request body"
    )]
    pub preset: Option<Preset>,
    /// The sampling flags; resolved: what every request sends.
    #[command(flatten)]
    pub sampling: Sampling,
    /// Active conversations: the command's own `--concurrency` (a sweep point's).
    #[arg(skip = 1usize)]
    pub concurrency: usize,
    // Not in `config.json`: `dataset` (its hash) identifies the file there.
    /// MLPerf agentic dataset (JSONL, one row per message).
    #[arg(
        id = "dataset",
        long = "dataset",
        env = "TOKENTAP_REPLAY_DATASET",
        value_name = "FILE",
        help_heading = "Load"
    )]
    #[serde(skip)]
    pub dataset_path: PathBuf,
    /// Trajectories to issue (official: a multiple of the dataset size). Default: one pass.
    #[arg(long, env = "TOKENTAP_REPLAY_TRAJECTORIES", help_heading = "Load")]
    pub trajectories: Option<u64>,
    /// Salt the system prompt per pass and per conversation (docs/benchmark.md#salting; official
    /// runs salt).
    #[arg(long, env = "TOKENTAP_REPLAY_SALT", help_heading = "Load")]
    pub salt: bool,
    /// Sleep each row's `delay_seconds` before issuing it (excluded from latency).
    #[arg(long, env = "TOKENTAP_REPLAY_DELAYS", help_heading = "Load")]
    pub delays: bool,
    /// Multiplier applied to `delay_seconds` when --delays is on (0 to 1000).
    #[arg(long, env = "TOKENTAP_REPLAY_DELAY_SCALE", allow_negative_numbers = true, default_value_t = DEFAULT_DELAY_SCALE, help_heading = "Load")]
    pub delay_scale: f64,
    /// Prefix a space to the first text of every replayed assistant message (generated-token
    /// cache clearing, docs/benchmark.md#cache-clearing). Changes the bodies: off in
    /// byte-compatible mode.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_CLEAR_GENERATED",
        help_heading = "Request body"
    )]
    pub clear_generated: bool,
    /// Ask for a final usage chunk (`stream_options.include_usage`): exact token counts, but the
    /// body is no longer byte-compatible with the MLPerf client.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_INCLUDE_USAGE",
        help_heading = "Request body"
    )]
    pub include_usage: bool,
    /// Resolved: the body is what the MLPerf client would send (no usage request, no cache
    /// clearing).
    #[arg(skip = true)]
    pub byte_compatible: bool,
    /// Header(s) carrying the logical conversation id; repeatable. Giving any replaces the
    /// default X-Session-ID.
    #[arg(long = "routing-header", env = "TOKENTAP_REPLAY_ROUTING_HEADER", value_name = "NAME", default_values_t = [String::from(DEFAULT_ROUTING_HEADER)], help_heading = "Server")]
    pub routing_headers: Vec<String>,
    /// Sent as `Authorization: Bearer KEY`; never logged or recorded.
    #[arg(
        long,
        env = "TOKENTAP_API_KEY",
        hide_env_values = true,
        help_heading = "Server"
    )]
    #[serde(skip)]
    pub api_key: Option<Secret>,
    /// Resolved: an API key was given (the key itself is never recorded).
    #[arg(skip)]
    pub api_key_set: bool,
    // Resolved: the timeout every turn gets (`RunConfig::turn_timeout`).
    /// Per-turn timeout (e.g. 600s, 4h). Default: the preset's official value, else 86400s.
    #[arg(long, env = "TOKENTAP_REPLAY_TURN_TIMEOUT", value_parser = tokentap_core::duration::parse, value_name = "DURATION", help_heading = "Load")]
    #[serde(
        with = "tokentap_core::duration::opt_secs",
        default,
        rename = "turn_timeout_s"
    )]
    pub turn_timeout: Option<Duration>,
    /// Stop issuing when the first slot finds no trajectory left (tuning runs; official: off).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_STOP_ISSUING_ON_FIRST_USER_COMPLETE",
        help_heading = "Load"
    )]
    pub stop_issuing_on_first_user_complete: bool,
    /// Stop issuing after this long, then drain in-flight turns.
    #[arg(long, env = "TOKENTAP_REPLAY_MAX_DURATION", value_parser = tokentap_core::duration::parse, value_name = "DURATION", help_heading = "Load")]
    #[serde(
        with = "tokentap_core::duration::opt_secs",
        default,
        rename = "max_duration_s"
    )]
    pub max_duration: Option<Duration>,
    /// Directory for records.jsonl, summary.json and config.json (created if missing).
    #[arg(long, env = "TOKENTAP_REPLAY_OUT", help_heading = "Output")]
    pub out: Option<PathBuf>,
    /// Serve the client's live metrics (Prometheus text, `source="client"`) at
    /// `http://ADDR/metrics` during the run. `PORT` alone means 127.0.0.1:PORT.
    #[arg(long, env = "TOKENTAP_REPLAY_METRICS", value_name = "ADDR", value_parser = parse_addr, help_heading = "Server")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Run only trajectories k with k mod N == I (N machines together issue the single-machine
    /// set).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_SHARD",
        value_name = "I/N",
        default_value = "0/1",
        hide_default_value = true,
        help_heading = "Load"
    )]
    pub shard: Shard,
    /// Stamp response arrivals when this process reads them instead of with the kernel's
    /// receive timestamp (the default: arrival at the host, independent of the client's
    /// scheduling; the difference is recorded per turn as `rx_lag_*`).
    #[arg(
        id = "kernel_rx_timestamps",
        long = "user-rx-timestamps",
        env = "TOKENTAP_REPLAY_USER_RX_TIMESTAMPS",
        action = clap::ArgAction::SetFalse,
        help_heading = "Server"
    )]
    pub kernel_rx_timestamps: bool,
    /// Set by [`RunConfig::bind_dataset`] / `run`.
    #[arg(skip)]
    pub dataset: Option<DatasetInfo>,
    /// The model's Hugging Face tokenizer folder (tokenizer.json, and the chat template in
    /// chat_template.jinja or tokenizer_config.json): count OSL, the TPOT denominator and ISL
    /// exactly as the MLPerf reference does. Read locally; nothing is downloaded. Without it,
    /// output tokens come from server usage or chunk counts and the OSL gate is not evaluated.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_TOKENIZER",
        value_name = "DIR",
        help_heading = "Benchmark rules"
    )]
    pub tokenizer: Option<PathBuf>,
    /// The curve's C_min (1–32; docs/rules.md): names the point's region in its files. The
    /// minimum duration does not depend on it: 600 s at concurrency ≤ 32, 2,400 s above.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_C_MIN",
        value_name = "N",
        help_heading = "Benchmark rules"
    )]
    pub c_min: Option<u64>,
    /// Run for at least the rules' minimum duration of the point's concurrency (600 s at
    /// concurrency ≤ 32, 2,400 s above) times F: whole passes of the dataset are issued until it
    /// has elapsed. F = 1 is the official length; anything else marks the point not official
    /// (tuning runs). Without it the run is `--trajectories` long and the rule only checked.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_MIN_DURATION_SCALE",
        allow_negative_numbers = true,
        value_name = "F",
        help_heading = "Benchmark rules"
    )]
    pub min_duration_scale: Option<f64>,
    /// Bind the run to a published seed set by its id (docs/rules.md), e.g. `A`: its
    /// `model_seed` is sent as every request's `seed` (as the reference sends its model seed; a
    /// row's own `seed`, or `--seed`, wins), and its three seeds are recorded in the run's files
    /// and a submission's `point.yaml`. The checker's own sets are bundled.
    #[arg(
        id = "seed_set_id",
        long = "seed-set",
        env = "TOKENTAP_REPLAY_SEED_SET",
        value_name = "ID",
        help_heading = "Benchmark rules"
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_set_id: Option<String>,
    /// A newer seed-set file (the checker's `seed_sets.yaml` shape) to find `--seed-set` in.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_SEED_SETS",
        value_name = "FILE",
        requires = "seed_set_id",
        help_heading = "Benchmark rules"
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_sets: Option<PathBuf>,
    /// Resolved: the published seed set `--seed-set` names.
    #[arg(skip)]
    pub seed_set: Option<tokentap_mlperf::seeds::SeedSet>,
    /// Largest SSE event (or line) a response may send, in bytes; a longer one fails the turn
    /// (`event_too_large`) instead of growing the client's buffer without bound.
    #[arg(long, env = "TOKENTAP_REPLAY_MAX_EVENT_BYTES", value_name = "BYTES", default_value_t = DEFAULT_MAX_EVENT_BYTES, help_heading = "Server")]
    pub max_event_bytes: usize,
    /// Keep every turn's output in its record (`content.output`, in the reference's
    /// `sample.complete` shape) so `tokentap report --tokenizer` can count it later. Off: outputs
    /// are never written.
    #[arg(long, env = "TOKENTAP_REPLAY_RECORD_OUTPUTS", help_heading = "Output")]
    pub record_outputs: bool,
    #[command(flatten)]
    #[serde(default, with = "warmup_or_null")]
    pub warmup: Warmup,
    /// No live progress line.
    #[arg(long, env = "TOKENTAP_REPLAY_QUIET", help_heading = "Output")]
    #[serde(skip)]
    pub quiet: bool,
    /// Exit 0 whenever the run ran and its records are whole, whatever its turns and verdict
    /// (lost records still exit 1, an interrupted run 130).
    #[arg(long, env = "TOKENTAP_REPLAY_EXIT_ZERO", help_heading = "Output")]
    #[serde(skip)]
    pub exit_zero: bool,
}

/// The flags' own defaults, read from their declarations (the environment ignored), and no
/// endpoint: what an option absent from an earlier layout's `config.json` meant (it did not
/// exist, so the run behaved as its default does).
impl Default for RunConfig {
    fn default() -> Self {
        use clap::{Args as _, FromArgMatches as _};
        // Invariant: without `required`, every option has a default or is optional.
        let m = RunConfig::augment_args(clap::Command::new("replay"))
            .mut_args(|a| a.env(None::<&str>).required(false))
            .try_get_matches_from(["replay", "--dataset", "-"])
            .expect("the options parse without arguments");
        RunConfig::from_arg_matches(&m).expect("the options parse without arguments")
    }
}

impl RunConfig {
    /// This configuration at `concurrency`, resolved: the configuration of one run.
    pub fn at(&self, concurrency: usize) -> Result<RunConfig, ConfigError> {
        let mut c = self.clone();
        c.concurrency = concurrency;
        c.resolve()?;
        Ok(c)
    }

    /// How https endpoints are checked.
    pub fn trust(&self) -> tokentap_core::tls::Trust {
        tokentap_core::tls::Trust {
            native_roots: self.endpoints.iter().any(|e| e.https) && !self.insecure,
            extra_ca: self.ca.clone(),
            insecure: self.insecure,
        }
    }

    /// The endpoints' URLs, comma-separated (for headlines).
    pub fn endpoint_urls(&self) -> String {
        self.endpoints
            .iter()
            .map(|e| e.url.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A resolved config with the defaults of `tokentap replay --endpoint URL --dataset -`: the
    /// flags' own defaults, read from their declarations (the environment ignored).
    pub fn new(endpoint: &str) -> Result<RunConfig, ConfigError> {
        use clap::{Args as _, FromArgMatches as _};
        Endpoint::parse(endpoint)?;
        let clap_error = |e: clap::Error| ConfigError::Invalid(e.to_string());
        let m = RunConfig::augment_args(clap::Command::new("replay"))
            .mut_args(|a| a.env(None::<&str>))
            .try_get_matches_from(["replay", "--endpoint", endpoint, "--dataset", "-"])
            .map_err(clap_error)?;
        let mut c = RunConfig::from_arg_matches(&m).map_err(clap_error)?;
        c.resolve()?;
        Ok(c)
    }

    /// Fills in what the options imply — the preset's sampling under the flags, a seed set's
    /// model seed, the turn timeout, `api_key_set`, `byte_compatible` — then checks. Idempotent.
    pub fn resolve(&mut self) -> Result<(), ConfigError> {
        if let Some(p) = self.preset {
            self.sampling = std::mem::take(&mut self.sampling).over(p.sampling());
        }
        self.turn_timeout = Some(self.turn_timeout());
        self.seed_set = match &self.seed_set_id {
            Some(id) => Some(
                tokentap_mlperf::seeds::find(id, self.seed_sets.as_deref())
                    .map_err(|e| ConfigError::Invalid(format!("--seed-set: {e}")))?,
            ),
            None => None,
        };
        // The reference sends its `model_params.seed` as every request's `seed` (a row's own
        // wins); a published set's `model_seed` is that seed (docs/rules.md). `--seed` wins.
        if let (Some(ss), None) = (&self.seed_set, self.sampling.seed) {
            self.sampling.seed = Some(i128::from(ss.model_seed));
        }
        self.api_key_set = self.api_key.is_some();
        self.byte_compatible = !self.include_usage && !self.clear_generated;
        self.check()
    }

    /// Every turn's timeout: `--turn-timeout`, else the preset's official value, else a day.
    pub fn turn_timeout(&self) -> Duration {
        self.turn_timeout
            .or(self.preset.and_then(Preset::turn_timeout))
            .unwrap_or(DEFAULT_TURN_TIMEOUT)
    }

    /// The warmup's concurrency: `--warmup-concurrency`, else the run's.
    pub fn warmup_concurrency(&self) -> usize {
        self.warmup.concurrency.unwrap_or(self.concurrency)
    }

    /// Checks what does not need the dataset; changes nothing.
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.endpoints.is_empty() {
            return bad("no --endpoint given".into());
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            if self.endpoints[..i].iter().any(|x| x.url == e.url) {
                return bad(format!("--endpoint {:?} is given twice", e.base));
            }
        }
        if self.concurrency == 0 {
            return bad("--concurrency must be at least 1".into());
        }
        if !(self.delay_scale.is_finite() && (0.0..=MAX_DELAY_SCALE).contains(&self.delay_scale)) {
            return bad(format!(
                "--delay-scale must be a number from 0 to {MAX_DELAY_SCALE}, found {}",
                self.delay_scale
            ));
        }
        if self.routing_headers.is_empty() {
            return bad("at least one --routing-header is needed".into());
        }
        for h in &self.routing_headers {
            if http::header::HeaderName::from_bytes(h.as_bytes()).is_err() {
                return bad(format!("--routing-header {h:?} is not a valid header name"));
            }
        }
        if let Some(k) = &self.api_key {
            if http::HeaderValue::from_str(&format!("Bearer {}", k.expose())).is_err() {
                return bad("--api-key contains characters not allowed in a header".into());
            }
        }
        if let Some(m) = &self.model {
            if m.is_empty() {
                return bad("--model must not be empty".into());
            }
        }
        if let Some(kw) = &self.sampling.chat_template_kwargs {
            if !kw.is_object() {
                return bad(format!(
                    "--chat-template-kwargs must be a JSON object, found {kw}"
                ));
            }
        }
        if self.shard.count == 0 || self.shard.index >= self.shard.count {
            return bad(format!(
                "--shard must be I/N with 0 <= I < N, found {}/{}",
                self.shard.index, self.shard.count
            ));
        }
        if self.trajectories == Some(0) {
            return bad("--trajectories must be at least 1".into());
        }
        if self.c_min == Some(0) {
            return bad("--c-min must be at least 1".into());
        }
        if self.max_event_bytes < 1024 {
            return bad(format!(
                "--max-event-bytes must be at least 1024, found {}",
                self.max_event_bytes
            ));
        }
        if let Some(f) = self.min_duration_scale {
            if !(f.is_finite() && f >= 0.0) {
                return bad(format!(
                    "--min-duration-scale must be a number ≥ 0, found {f}"
                ));
            }
            if self.shard.count > 1 {
                return bad("--min-duration-scale with --shard: each shard would extend on its own clock and the union need not be a multiple of the dataset; give --trajectories".into());
            }
        }
        self.check_warmup()?;
        if let Some(ca) = &self.ca {
            if let Err(why) = tokentap_core::tls::read_certs(ca) {
                return bad(format!(
                    "--ca {}: {why} (expected a PEM file of CA certificates)",
                    ca.display()
                ));
            }
        }
        if let Some(dir) = &self.tokenizer {
            if !dir.is_dir() {
                return bad(format!(
                    "--tokenizer {}: not a directory (expected a Hugging Face tokenizer folder with tokenizer.json)",
                    dir.display()
                ));
            }
        }
        Ok(())
    }

    /// The warmup's flags: each bound, and its dataset and concurrency only with a warmup.
    fn check_warmup(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.into()));
        let w = &self.warmup;
        if !w.enabled() && (w.dataset.is_some() || w.concurrency.is_some()) {
            return bad("--warmup-dataset and --warmup-concurrency need --warmup-trajectories N or --warmup-duration D");
        }
        if w.trajectories == Some(0) {
            return bad("--warmup-trajectories must be at least 1");
        }
        if w.duration.is_some_and(|d| d.is_zero()) {
            return bad("--warmup-duration must be more than 0");
        }
        if w.concurrency == Some(0) {
            return bad("--warmup-concurrency must be at least 1");
        }
        Ok(())
    }

    /// Without `--model`: the first client row the run would send that names no model
    /// (conversation id, line), if any.
    pub fn row_without_model(&self, ds: &Dataset) -> Option<(String, usize)> {
        if self.model.is_some() {
            return None;
        }
        let used = self.budget(ds).min(ds.conversations.len() as u64) as usize;
        ds.conversations[..used].iter().find_map(|c| {
            c.rows
                .iter()
                .find(|r| r.role.is_client() && !r.overrides.contains_key("model"))
                .map(|r| (c.id.clone(), r.line))
        })
    }

    /// Resolves the config again (a caller may have changed it), checks it against the dataset
    /// (model names, salting needs a system prompt on every conversation the run will issue)
    /// and records the dataset's identity.
    pub fn bind_dataset(&mut self, ds: &Dataset, hash: Option<String>) -> Result<(), ConfigError> {
        self.resolve()?;
        let n = ds.conversations.len() as u64;
        let budget = self.budget(ds);
        // Conversations reached by the budget: k mod N for k < budget.
        let used = budget.min(n) as usize;
        if let Some((conv, line)) = self.row_without_model(ds) {
            return Err(ConfigError::Invalid(format!(
                "no model name: pass --model NAME (the name the server serves); {}:{line}: conversation {conv:?} has a client row without its own \"model\"",
                ds.path.display()
            )));
        }
        if self.salt {
            for c in &ds.conversations[..used] {
                if c.system().is_none() {
                    let line = c.rows.first().map(|r| r.line).unwrap_or(0);
                    return Err(ConfigError::NoSystemPrompt {
                        path: ds.path.clone(),
                        line,
                        conversation: c.id.clone(),
                    });
                }
            }
        }
        self.dataset = Some(DatasetInfo::of(ds, hash));
        Ok(())
    }

    /// Trajectories the whole run issues (all shards): `--trajectories`, else one pass.
    pub fn budget(&self, ds: &Dataset) -> u64 {
        self.trajectories.unwrap_or(ds.conversations.len() as u64)
    }

    /// The point's concurrency: all shards' slots together.
    pub fn point_concurrency(&self) -> u64 {
        self.concurrency as u64 * self.shard.count.max(1)
    }

    /// `--min-duration-scale`: how long the run keeps issuing whole passes — the rules' minimum
    /// duration of the point's concurrency times the scale.
    pub fn min_duration(&self) -> Option<Duration> {
        self.min_duration_scale.map(|s| {
            let need = tokentap_mlperf::validity::min_duration_s(self.point_concurrency());
            Duration::from_secs_f64(need * s)
        })
    }

    /// Rows with a role that become requests; used for sizing.
    pub fn max_tokens_hint(&self) -> usize {
        self.sampling
            .max_completion_tokens
            .map(|m| m.min(1024) as usize)
            .unwrap_or(512)
    }
}

/// Where requests go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// As given by the operator.
    pub base: String,
    /// The full request URL.
    pub url: String,
    /// `https://`: TLS (rustls) to the server.
    /// (Absent, i.e. http, in run directories written before https endpoints.)
    #[serde(default)]
    pub https: bool,
    /// `host[:port]`, sent as `Host`.
    pub authority: String,
    pub host: String,
    pub port: u16,
    /// Origin-form request target, e.g. `/v1/chat/completions`.
    pub path: String,
}

impl Endpoint {
    /// Resolves a base URL (`http://` or `https://`).
    pub fn parse(base: &str) -> Result<Endpoint, ConfigError> {
        Endpoint::parse_arg(base)
            .map_err(|why| ConfigError::Invalid(format!("--endpoint {base:?}: {why}")))
    }

    /// [`Endpoint::parse`] as `--endpoint`'s value parser: the reason alone (clap names the
    /// flag and the value).
    pub fn parse_arg(base: &str) -> Result<Endpoint, String> {
        let uri: Uri = base
            .parse()
            .map_err(|e| format!("expected a URL like http://127.0.0.1:8000 ({e})"))?;
        let https = match uri.scheme() {
            Some(s) if *s == Scheme::HTTP => false,
            Some(s) if *s == Scheme::HTTPS => true,
            _ => return Err("expected an http:// or https:// URL".into()),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| "expected a host".to_string())?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let base_path = uri.path().trim_end_matches('/');
        let path = if base_path.ends_with("/chat/completions") {
            base_path.to_string()
        } else if base_path.ends_with("/v1") {
            format!("{base_path}/chat/completions")
        } else {
            format!("{base_path}/v1/chat/completions")
        };
        PathAndQuery::from_str(&path).map_err(|e| format!("bad path {path:?}: {e}"))?;
        Ok(Endpoint {
            base: base.to_string(),
            url: format!(
                "{}://{authority}{path}",
                if https { "https" } else { "http" }
            ),
            https,
            authority: authority.as_str().to_string(),
            host: host.to_string(),
            port,
            path,
        })
    }
}

/// What identifies the dataset a run used.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DatasetInfo {
    pub path: PathBuf,
    /// `blake2b-256:<hex>` of the file bytes, when the file was read by the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    pub conversations: usize,
    pub client_turns: usize,
}

impl DatasetInfo {
    /// What identifies `ds` (`hash`: of the file's bytes, when the run read them).
    pub fn of(ds: &Dataset, hash: Option<String>) -> DatasetInfo {
        DatasetInfo {
            path: ds.path.clone(),
            hash,
            conversations: ds.conversations.len(),
            client_turns: ds.client_turns(),
        }
    }
}

/// A configuration that cannot run: options that cannot work together, a bad value, or a
/// dataset the options cannot be used with.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Options that cannot work together, or a bad value.
    #[error("{0}")]
    Invalid(String),
    /// docs/benchmark.md#salting: with salting on, a conversation without a system prompt is a
    /// hard error.
    #[error("{}:{line}: conversation {conversation:?} has no system prompt, and --salt needs one (the salt is written around the system prompt: docs/benchmark.md#salting)", path.display())]
    NoSystemPrompt {
        path: PathBuf,
        line: usize,
        conversation: String,
    },
}

/// `--metrics ADDR`: `HOST:PORT`, or `PORT` alone for 127.0.0.1:PORT (loopback unless told
/// otherwise).
pub fn parse_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse()
        .map_err(|e| format!("--metrics {s:?}: expected HOST:PORT or PORT ({e})"))
}

/// One value or a list of them (a key that was one value in earlier layouts: `endpoint`).
fn one_or_many<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany<T> {
        Many(Vec<T>),
        One(T),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::Many(v) => v,
        OneOrMany::One(x) => vec![x],
    })
}
