//! Command-line options ([`Opts`]) and the resolved run configuration ([`ReplayConfig`]).
//!
//! `Opts` is what the operator typed; `ReplayConfig` is what the run does, after presets,
//! explicit overrides, the dataset and the endpoint have been combined. The resolved config is
//! written to `config.json` and embedded in `summary.json`, so a result always says exactly how
//! it was produced. The API key is never part of either: it is a [`Secret`] that serializes and
//! debug-prints as `"<redacted>"`.
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

use crate::error::ReplayError;
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

/// Run-level sampling settings; `None` fields are omitted from the body. Per-row overrides of
/// the dataset replace these for that row's request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// `--seed`, else a seed set's `model_seed` (an unsigned 64-bit value, hence the width).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i128>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repetition_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<Value>,
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
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;

fn list(v: &[usize]) -> String {
    v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

/// `tokentap replay` options.
#[derive(clap::Args, Clone, Debug, Serialize)]
pub struct Opts {
    /// Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000 or
    /// https://llm.example.com (requests go to /v1/chat/completions under it). Repeat it for
    /// several endpoints: each conversation stays on one, chosen by its id (rendezvous hashing,
    /// as a session-affine router — and `tokentap proxy` — would).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_ENDPOINT",
        required = true,
        num_args = 1,
        help_heading = "Server"
    )]
    pub endpoint: Vec<String>,
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
    /// HTTP/2 only: prior knowledge on http:// (h2c), ALPN `h2` alone on https://. Without it,
    /// https:// uses HTTP/2 when the server's ALPN picks it, http:// uses HTTP/1.1. One stream
    /// per turn on one connection per conversation slot: the closed loop is unchanged.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_HTTP2",
        conflicts_with = "http1",
        help_heading = "Server"
    )]
    pub http2: bool,
    /// HTTP/1.1 only, also on https:// (ALPN `http/1.1`), as the MLPerf reference client.
    #[arg(long, env = "TOKENTAP_REPLAY_HTTP1", help_heading = "Server")]
    pub http1: bool,
    /// MLPerf agentic dataset (JSONL, one row per message).
    #[arg(long, env = "TOKENTAP_REPLAY_DATASET", help_heading = "Load")]
    pub dataset: PathBuf,
    /// Target concurrency: number of active conversations (closed loop). Default 1.
    /// `tokentap sweep` takes a list (`1,4,16,64`): one measurement point each.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_CONCURRENCY",
        value_delimiter = ',',
        num_args = 1,
        value_name = "N",
        help_heading = "Load"
    )]
    pub concurrency: Vec<usize>,
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
    /// Multiplier applied to `delay_seconds` when --delays is on.
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
    /// Model name sent in every request (a row's own `model` overrides it).
    #[arg(long, env = "TOKENTAP_REPLAY_MODEL", help_heading = "Server")]
    pub model: Option<String>,
    /// Run-level `max_completion_tokens` (a row's `max_new_tokens` / `max_completion_tokens`
    /// overrides it).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_MAX_TOKENS",
        help_heading = "Request body"
    )]
    pub max_tokens: Option<u64>,
    /// Official sampling settings, timeout and validity gates of one model.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_PRESET",
        value_enum,
        help_heading = "Request body"
    )]
    pub preset: Option<Preset>,
    /// Run-level `temperature` sent in every request (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_TEMPERATURE",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub temperature: Option<f64>,
    /// Run-level `top_p` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_TOP_P",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub top_p: Option<f64>,
    /// Run-level `top_k` (over the preset's; a row's own wins; -1 = off, as vLLM reads it).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_TOP_K",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub top_k: Option<i64>,
    /// Run-level `presence_penalty` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_PRESENCE_PENALTY",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub presence_penalty: Option<f64>,
    /// Run-level `repetition_penalty` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_REPETITION_PENALTY",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub repetition_penalty: Option<f64>,
    /// Run-level `frequency_penalty` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_FREQUENCY_PENALTY",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub frequency_penalty: Option<f64>,
    /// Run-level sampling `seed` sent in every request (none by default, as the reference).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_SEED",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub seed: Option<i64>,
    /// JSON object sent as `chat_template_kwargs`.
    #[arg(long, env = "TOKENTAP_REPLAY_CHAT_TEMPLATE_KWARGS", value_parser = parse_json, help_heading = "Request body")]
    pub chat_template_kwargs: Option<Value>,
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
    pub api_key: Option<Secret>,
    /// Per-turn timeout (e.g. 600s, 4h). Default: the preset's official value, else 86400s.
    #[arg(long, env = "TOKENTAP_REPLAY_TURN_TIMEOUT", value_parser = tokentap_core::duration::parse, value_name = "DURATION", help_heading = "Load")]
    #[serde(with = "tokentap_core::duration::opt_secs")]
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
    #[serde(with = "tokentap_core::duration::opt_secs")]
    pub max_duration: Option<Duration>,
    /// Directory for records.jsonl, summary.json and config.json (created if missing).
    #[arg(long, env = "TOKENTAP_REPLAY_OUT", help_heading = "Output")]
    pub out: Option<PathBuf>,
    /// Run only trajectories k with k mod N == I (N machines together issue the single-machine
    /// set).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_SHARD",
        value_name = "I/N",
        help_heading = "Load"
    )]
    pub shard: Option<Shard>,
    /// No live progress line.
    #[arg(long, env = "TOKENTAP_REPLAY_QUIET", help_heading = "Output")]
    pub quiet: bool,
    /// Stamp response arrivals when this process reads them instead of with the kernel's
    /// receive timestamp (the default: arrival at the host, independent of the client's
    /// scheduling; the difference is recorded per turn as `rx_lag_*`).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_USER_RX_TIMESTAMPS",
        help_heading = "Server"
    )]
    pub user_rx_timestamps: bool,
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
    /// Keep every turn's output in its record (`content.output`, in the reference's
    /// `sample.complete` shape) so `tokentap report --tokenizer` can count it later. Off: outputs
    /// are never written.
    #[arg(long, env = "TOKENTAP_REPLAY_RECORD_OUTPUTS", help_heading = "Output")]
    pub record_outputs: bool,
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
        long,
        env = "TOKENTAP_REPLAY_SEED_SET",
        value_name = "ID",
        help_heading = "Benchmark rules"
    )]
    pub seed_set: Option<String>,
    /// A newer seed-set file (the checker's `seed_sets.yaml` shape) to find `--seed-set` in.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_SEED_SETS",
        value_name = "FILE",
        requires = "seed_set",
        help_heading = "Benchmark rules"
    )]
    pub seed_sets: Option<PathBuf>,
    /// Largest SSE event (or line) a response may send, in bytes; a longer one fails the turn
    /// (`event_too_large`) instead of growing the client's buffer without bound.
    #[arg(long, env = "TOKENTAP_REPLAY_MAX_EVENT_BYTES", value_name = "BYTES", default_value_t = DEFAULT_MAX_EVENT_BYTES, help_heading = "Server")]
    pub max_event_bytes: usize,
    /// Exit 0 whenever the run ran and its records are whole, whatever its turns and verdict
    /// (lost records still exit 1, an interrupted run 130).
    #[arg(long, env = "TOKENTAP_REPLAY_EXIT_ZERO", help_heading = "Output")]
    pub exit_zero: bool,
    /// Warmup: issue this many trajectories before performance tracking starts (excluded from
    /// every result, recorded in warmup.jsonl and declared in the summary).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_WARMUP_TRAJECTORIES",
        value_name = "N",
        help_heading = "Warmup"
    )]
    pub warmup_trajectories: Option<u64>,
    /// Warmup: issue for this long (e.g. 5m), then let the started turns finish.
    #[arg(long, env = "TOKENTAP_REPLAY_WARMUP_DURATION", value_parser = tokentap_core::duration::parse, value_name = "DURATION", help_heading = "Warmup")]
    #[serde(with = "tokentap_core::duration::opt_secs")]
    pub warmup_duration: Option<Duration>,
    /// Dataset for the warmup (default: the performance dataset). Warmup requests are always
    /// salted with a tag of their own, so no KV-cache entry carries over into the measurement.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_WARMUP_DATASET",
        value_name = "FILE",
        help_heading = "Warmup"
    )]
    pub warmup_dataset: Option<PathBuf>,
    /// Concurrency of the warmup (default: --concurrency).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_WARMUP_CONCURRENCY",
        value_name = "N",
        help_heading = "Warmup"
    )]
    pub warmup_concurrency: Option<usize>,
    /// Serve the client's live metrics (Prometheus text, `source="client"`) at
    /// `http://ADDR/metrics` during the run. `PORT` alone means 127.0.0.1:PORT.
    #[arg(long, env = "TOKENTAP_REPLAY_METRICS", value_name = "ADDR", value_parser = crate::metrics::parse_addr, help_heading = "Server")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// Parses a subcommand's options (`A`, a `clap::Args`) from an argument list without a program
/// name, as `tokentap NAME` would: for tests and embedding (the sweep's, the demo's).
pub fn parse_args<A, I, T>(name: &'static str, args: I) -> Result<A, clap::Error>
where
    A: clap::Args + clap::FromArgMatches,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cmd = A::augment_args(clap::Command::new(name));
    let argv =
        std::iter::once(std::ffi::OsString::from(name)).chain(args.into_iter().map(Into::into));
    A::from_arg_matches(&cmd.try_get_matches_from(argv)?)
}

impl Opts {
    /// Parses options from an argument list (without a program name), as `tokentap replay`
    /// would. For tests and embedding.
    pub fn try_parse_from_args<I, T>(args: I) -> Result<Opts, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        parse_args("replay", args)
    }
}

/// Which HTTP versions a run speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocols {
    /// HTTP/1.1 only (ALPN `http/1.1`).
    Http1,
    /// HTTP/1.1 on http://; on https://, HTTP/2 when the server's ALPN picks `h2`.
    Auto,
    /// `--http2`: HTTP/2 only (prior knowledge on http://).
    Http2,
}

/// Where requests go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// As given by the operator.
    pub base: String,
    /// The full request URL.
    pub url: String,
    /// `https://`: TLS (rustls) to the server.
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
    pub fn parse(base: &str) -> Result<Endpoint, ReplayError> {
        let bad = |why: String| ReplayError::Config(format!("--endpoint {base:?}: {why}"));
        let uri: Uri = base
            .parse()
            .map_err(|e| bad(format!("expected a URL like http://127.0.0.1:8000 ({e})")))?;
        let https = match uri.scheme() {
            Some(s) if *s == Scheme::HTTP => false,
            Some(s) if *s == Scheme::HTTPS => true,
            _ => return Err(bad("expected an http:// or https:// URL".into())),
        };
        let authority = uri
            .authority()
            .ok_or_else(|| bad("expected a host".into()))?;
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
        PathAndQuery::from_str(&path).map_err(|e| bad(format!("bad path {path:?}: {e}")))?;
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

/// The warmup phase (docs/benchmark.md#validity: declared, excluded from the metrics).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WarmupConfig {
    /// Trajectories to issue (`None`: as many as `duration` allows).
    pub trajectories: Option<u64>,
    #[serde(
        with = "tokentap_core::duration::opt_secs",
        default,
        rename = "duration_s"
    )]
    pub duration: Option<Duration>,
    /// `None`: the performance dataset.
    pub dataset: Option<PathBuf>,
    pub concurrency: usize,
}

/// The fully resolved run configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReplayConfig {
    /// One or more; a conversation stays on one (`client::Target::pick`).
    pub endpoints: Vec<Endpoint>,
    /// `--ca`: more trusted roots for https endpoints.
    pub ca: Option<PathBuf>,
    /// `--insecure`: https certificates were not checked.
    pub insecure: bool,
    /// `--http2`: HTTP/2 only.
    #[serde(default)]
    pub http2: bool,
    /// `--http1`: HTTP/1.1 only.
    #[serde(default)]
    pub http1: bool,
    /// The model was not given: it is the one the endpoints list at `/v1/models`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_discovered: bool,
    /// Run-level model name; rows may override it.
    pub model: Option<String>,
    pub preset: Option<Preset>,
    pub sampling: Sampling,
    pub concurrency: usize,
    /// Trajectory budget (all shards together); `None` = one pass over the dataset.
    pub trajectories: Option<u64>,
    pub salt: bool,
    pub delays: bool,
    pub delay_scale: f64,
    pub clear_generated: bool,
    pub include_usage: bool,
    pub routing_headers: Vec<String>,
    /// Never serialized: [`Secret`] prints as `<redacted>`.
    #[serde(skip)]
    pub api_key: Option<Secret>,
    /// True when an API key was given (the key itself is never recorded).
    pub api_key_set: bool,
    #[serde(with = "tokentap_core::duration::secs", rename = "turn_timeout_s")]
    pub turn_timeout: Duration,
    pub stop_issuing_on_first_user_complete: bool,
    #[serde(
        with = "tokentap_core::duration::opt_secs",
        default,
        rename = "max_duration_s"
    )]
    pub max_duration: Option<Duration>,
    pub out: Option<PathBuf>,
    /// `--metrics`: where the client's live metrics are served during the run.
    pub metrics: Option<std::net::SocketAddr>,
    pub shard: Shard,
    /// Response arrivals stamped by the kernel (`SO_TIMESTAMPNS`) rather than on read.
    pub kernel_rx_timestamps: bool,
    /// Set by [`ReplayConfig::bind_dataset`] / `run`.
    pub dataset: Option<DatasetInfo>,
    /// The body is what the MLPerf client would send (no usage request, no cache clearing).
    pub byte_compatible: bool,
    /// `--tokenizer`: the reference tokenizer folder.
    pub tokenizer: Option<PathBuf>,
    /// `--c-min`: the submission's C_min, for the point's region.
    pub c_min: Option<u64>,
    /// `--min-duration-scale`: extend the run to the region's minimum duration × this.
    pub min_duration_scale: Option<f64>,
    /// `--seed-set`: the published seed set the run is bound to.
    pub seed_set: Option<tokentap_mlperf::seeds::SeedSet>,
    /// `--max-event-bytes`: an SSE event (or line) longer than this fails the turn.
    pub max_event_bytes: usize,
    /// `--record-outputs`: outputs kept in the records.
    pub record_outputs: bool,
    pub warmup: Option<WarmupConfig>,
}

impl ReplayConfig {
    /// How https endpoints are checked.
    pub fn trust(&self) -> tokentap_core::tls::Trust {
        tokentap_core::tls::Trust {
            native_roots: self.endpoints.iter().any(|e| e.https) && !self.insecure,
            extra_ca: self.ca.clone(),
            insecure: self.insecure,
        }
    }

    /// The HTTP versions `--http1` / `--http2` allow.
    pub fn protocols(&self) -> Protocols {
        match (self.http1, self.http2) {
            (true, _) => Protocols::Http1,
            (_, true) => Protocols::Http2,
            _ => Protocols::Auto,
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

    /// A config with the defaults of `tokentap replay --endpoint URL --dataset -`.
    pub fn new(endpoint: &str) -> Result<ReplayConfig, ReplayError> {
        Ok(ReplayConfig {
            endpoints: vec![Endpoint::parse(endpoint)?],
            ca: None,
            insecure: false,
            http2: false,
            http1: false,
            model_discovered: false,
            model: None,
            preset: None,
            sampling: Sampling::default(),
            concurrency: 1,
            trajectories: None,
            salt: false,
            delays: false,
            delay_scale: DEFAULT_DELAY_SCALE,
            clear_generated: false,
            include_usage: false,
            routing_headers: vec![DEFAULT_ROUTING_HEADER.into()],
            api_key: None,
            api_key_set: false,
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            stop_issuing_on_first_user_complete: false,
            max_duration: None,
            out: None,
            metrics: None,
            shard: Shard::default(),
            kernel_rx_timestamps: true,
            dataset: None,
            byte_compatible: true,
            tokenizer: None,
            c_min: None,
            min_duration_scale: None,
            seed_set: None,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            record_outputs: false,
            warmup: None,
        })
    }

    /// Combines the options: preset first, explicit flags over it.
    pub fn from_opts(opts: &Opts) -> Result<ReplayConfig, ReplayError> {
        let Some(first) = opts.endpoint.first() else {
            return Err(ReplayError::Config("no --endpoint given".into()));
        };
        let mut c = ReplayConfig::new(first)?;
        c.add_endpoints(&opts.endpoint[1..])?;
        c.ca = opts.ca.clone();
        c.insecure = opts.insecure;
        c.http2 = opts.http2;
        c.http1 = opts.http1;
        c.sampling = sampling_of(opts);
        c.model = opts.model.clone();
        c.preset = opts.preset;
        c.concurrency = concurrency_of(opts)?;
        c.trajectories = opts.trajectories;
        c.salt = opts.salt;
        c.delays = opts.delays;
        c.delay_scale = opts.delay_scale;
        c.clear_generated = opts.clear_generated;
        c.include_usage = opts.include_usage;
        c.routing_headers = opts.routing_headers.clone();
        c.api_key = opts.api_key.clone();
        c.turn_timeout = opts
            .turn_timeout
            .or(opts.preset.and_then(Preset::turn_timeout))
            .unwrap_or(DEFAULT_TURN_TIMEOUT);
        c.stop_issuing_on_first_user_complete = opts.stop_issuing_on_first_user_complete;
        c.max_duration = opts.max_duration;
        c.out = opts.out.clone();
        c.metrics = opts.metrics;
        c.shard = opts.shard.unwrap_or_default();
        c.kernel_rx_timestamps = !opts.user_rx_timestamps;
        c.tokenizer = opts.tokenizer.clone();
        c.c_min = opts.c_min;
        c.min_duration_scale = opts.min_duration_scale;
        c.seed_set = seed_set_of(opts)?;
        // The reference sends its `model_params.seed` as every request's `seed` (a row's own
        // wins); a published set's `model_seed` is that seed (docs/rules.md). `--seed` wins.
        if let (Some(ss), None) = (&c.seed_set, c.sampling.seed) {
            c.sampling.seed = Some(i128::from(ss.model_seed));
        }
        c.max_event_bytes = opts.max_event_bytes;
        c.record_outputs = opts.record_outputs;
        c.warmup = warmup_of(opts, c.concurrency)?;
        c.check()?;
        Ok(c)
    }

    /// Adds the `--endpoint`s after the first, refusing one given twice.
    fn add_endpoints(&mut self, rest: &[String]) -> Result<(), ReplayError> {
        for e in rest {
            let ep = Endpoint::parse(e)?;
            if self.endpoints.iter().any(|x| x.url == ep.url) {
                return Err(ReplayError::Config(format!(
                    "--endpoint {e:?} is given twice"
                )));
            }
            self.endpoints.push(ep);
        }
        Ok(())
    }

    /// Checks what does not need the dataset.
    pub fn check(&mut self) -> Result<(), ReplayError> {
        let bad = |m: String| Err(ReplayError::Config(m));
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
        if let Some(w) = &self.warmup {
            if w.trajectories == Some(0) {
                return bad("--warmup-trajectories must be at least 1".into());
            }
            if w.duration.is_some_and(|d| d.is_zero()) {
                return bad("--warmup-duration must be more than 0".into());
            }
            if w.concurrency == 0 {
                return bad("--warmup-concurrency must be at least 1".into());
            }
        }
        if self.http1 && self.http2 {
            return bad("--http1 and --http2 exclude each other".into());
        }
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
        self.api_key_set = self.api_key.is_some();
        self.byte_compatible = !self.include_usage && !self.clear_generated;
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

    /// Checks the config against the dataset (model names, salting needs a system prompt on
    /// every conversation the run will issue) and records the dataset's identity.
    pub fn bind_dataset(&mut self, ds: &Dataset, hash: Option<String>) -> Result<(), ReplayError> {
        self.check()?;
        let n = ds.conversations.len() as u64;
        let budget = self.budget(ds);
        // Conversations reached by the budget: k mod N for k < budget.
        let used = budget.min(n) as usize;
        if let Some((conv, line)) = self.row_without_model(ds) {
            return Err(ReplayError::Config(format!(
                "no model name: pass --model NAME (the name the server serves); {}:{line}: conversation {conv:?} has a client row without its own \"model\"",
                ds.path.display()
            )));
        }
        if self.salt {
            for c in &ds.conversations[..used] {
                if c.system().is_none() {
                    let line = c.rows.first().map(|r| r.line).unwrap_or(0);
                    return Err(ReplayError::NoSystemPrompt {
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
    pub(crate) fn max_tokens_hint(&self) -> usize {
        self.sampling
            .max_completion_tokens
            .map(|m| m.min(1024) as usize)
            .unwrap_or(512)
    }
}

/// The sampling parameters: the preset's, each explicit flag over it.
fn sampling_of(opts: &Opts) -> Sampling {
    let mut s = opts.preset.map(Preset::sampling).unwrap_or_default();
    let set_f = |slot: &mut Option<f64>, v: Option<f64>| {
        if v.is_some() {
            *slot = v;
        }
    };
    set_f(&mut s.temperature, opts.temperature);
    set_f(&mut s.top_p, opts.top_p);
    set_f(&mut s.presence_penalty, opts.presence_penalty);
    set_f(&mut s.repetition_penalty, opts.repetition_penalty);
    set_f(&mut s.frequency_penalty, opts.frequency_penalty);
    if opts.top_k.is_some() {
        s.top_k = opts.top_k;
    }
    if opts.seed.is_some() {
        s.seed = opts.seed.map(i128::from);
    }
    if opts.max_tokens.is_some() {
        s.max_completion_tokens = opts.max_tokens;
    }
    if opts.chat_template_kwargs.is_some() {
        s.chat_template_kwargs = opts.chat_template_kwargs.clone();
    }
    s
}

/// The run's one `--concurrency` (1 when none is given); a list is a sweep's.
fn concurrency_of(opts: &Opts) -> Result<usize, ReplayError> {
    match opts.concurrency[..] {
        [] => Ok(1),
        [c] => Ok(c),
        _ => Err(ReplayError::Config(format!(
            "--concurrency {}: a list of concurrencies is a sweep (`tokentap sweep --concurrency {}`)",
            list(&opts.concurrency),
            list(&opts.concurrency)
        ))),
    }
}

/// The published seed set `--seed-set` names (from `--seed-sets` if given), if one is named.
fn seed_set_of(opts: &Opts) -> Result<Option<tokentap_mlperf::seeds::SeedSet>, ReplayError> {
    match &opts.seed_set {
        Some(id) => Ok(Some(
            tokentap_mlperf::seeds::find(id, opts.seed_sets.as_deref())
                .map_err(|e| ReplayError::Config(format!("--seed-set: {e}")))?,
        )),
        None => Ok(None),
    }
}

/// The declared warmup, when `--warmup-trajectories` or `--warmup-duration` asks for one (at the
/// run's `concurrency` unless `--warmup-concurrency` is given); its other flags alone are an
/// error.
fn warmup_of(opts: &Opts, concurrency: usize) -> Result<Option<WarmupConfig>, ReplayError> {
    if opts.warmup_trajectories.is_some() || opts.warmup_duration.is_some() {
        Ok(Some(WarmupConfig {
            trajectories: opts.warmup_trajectories,
            duration: opts.warmup_duration,
            dataset: opts.warmup_dataset.clone(),
            concurrency: opts.warmup_concurrency.unwrap_or(concurrency),
        }))
    } else if opts.warmup_dataset.is_some() || opts.warmup_concurrency.is_some() {
        Err(ReplayError::Config(
            "--warmup-dataset and --warmup-concurrency need --warmup-trajectories N or --warmup-duration D".into(),
        ))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> Opts {
        let mut v = vec!["--endpoint", "http://127.0.0.1:9", "--dataset", "x.jsonl"];
        v.extend_from_slice(args);
        Opts::try_parse_from_args(v).unwrap()
    }

    #[test]
    fn qwen_preset_with_override() {
        let c = ReplayConfig::from_opts(&opts(&["--preset", "qwen", "--top-k", "40"])).unwrap();
        assert_eq!(c.sampling.top_k, Some(40));
        assert_eq!(c.sampling.top_p, Some(0.95));
        assert_eq!(c.sampling.presence_penalty, Some(1.5));
        assert_eq!(c.sampling.max_completion_tokens, Some(8192));
        assert_eq!(
            c.sampling.chat_template_kwargs,
            Some(serde_json::json!({"preserve_thinking": true}))
        );
        assert_eq!(c.turn_timeout, Duration::from_secs(14_400));
    }

    #[test]
    fn no_preset_sends_only_what_is_given() {
        let c = ReplayConfig::from_opts(&opts(&["--max-tokens", "7"])).unwrap();
        assert_eq!(
            c.sampling,
            Sampling {
                max_completion_tokens: Some(7),
                ..Sampling::default()
            }
        );
        assert_eq!(c.routing_headers, ["X-Session-ID"]);
    }

    #[test]
    fn routing_headers_replace_default() {
        let o = opts(&[
            "--routing-header",
            "X-Session-ID",
            "--routing-header",
            "X-SMG-Routing-Key",
        ]);
        assert_eq!(o.routing_headers, ["X-Session-ID", "X-SMG-Routing-Key"]);
    }

    #[test]
    fn api_key_is_never_serialized() {
        let o = opts(&["--api-key", "sk-supersecret"]);
        let c = ReplayConfig::from_opts(&o).unwrap();
        let a = serde_json::to_string(&o).unwrap();
        let b = serde_json::to_string(&c).unwrap();
        let d = format!("{o:?}{c:?}");
        for s in [a, b, d] {
            assert!(!s.contains("supersecret"), "{s}");
        }
        assert!(c.api_key_set);
    }

    #[test]
    fn endpoint_forms() {
        let e = Endpoint::parse("http://127.0.0.1:8000").unwrap();
        assert_eq!(e.path, "/v1/chat/completions");
        assert_eq!(e.authority, "127.0.0.1:8000");
        assert_eq!(
            Endpoint::parse("http://h/v1/").unwrap().path,
            "/v1/chat/completions"
        );
        assert_eq!(
            Endpoint::parse("http://h:1/x/v1/chat/completions")
                .unwrap()
                .path,
            "/x/v1/chat/completions"
        );
        assert_eq!(Endpoint::parse("http://h").unwrap().port, 80);
        let tls = Endpoint::parse("https://h").unwrap();
        assert!(tls.https);
        assert_eq!(
            (tls.port, tls.url.as_str()),
            (443, "https://h/v1/chat/completions")
        );
        assert!(Endpoint::parse("ftp://h").is_err());
        assert!(Endpoint::parse("h:80").is_err());
    }

    #[test]
    fn durations_and_shards() {
        assert_eq!(
            tokentap_core::duration::parse("250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            tokentap_core::duration::parse("2m").unwrap(),
            Duration::from_secs(120)
        );
        assert_eq!(
            tokentap_core::duration::parse("1.5").unwrap(),
            Duration::from_millis(1500)
        );
        assert!(tokentap_core::duration::parse("-1s").is_err());
        assert_eq!(
            "1/4".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 4 }
        );
        assert!("4/4".parse::<Shard>().is_err());
    }
}
