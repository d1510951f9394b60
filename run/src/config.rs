//! The run's configuration, resolved: [`RunConfig`], whose serde form is `config.json`.
//!
//! Options reach a run in two stages. The flags as given are the replay's `RunOpts` (the one
//! declaration of each option: flag, environment variable, default, help — `tokentap replay`
//! and `tokentap sweep` flatten it); `RunOpts::resolve` turns them into a [`RunConfig`] in one
//! step — the preset's sampling under the explicit flags, the turn timeout, the published seed
//! set and its model seed, the derived `api_key_set` / `byte_compatible` facts — and
//! [`RunConfig::check`] holds it to every bound. What the run then learns before its first
//! request (the dataset's identity, a model read from `/v1/models`) is added once by
//! [`RunConfig::bind_dataset`] and the model discovery; nothing changes it after that.
//!
//! This crate has no command-line parser: the report, the submission tree and merge read
//! `config.json` into the same type the replay wrote. An option absent from an earlier
//! layout's `config.json` takes its flag's default ([`RunConfig::default`], which the replay's
//! tests hold equal to the flags' own defaults). The API key is never part of the file: it is a
//! [`Secret`] that is skipped by serde and debug-prints as `"<redacted>"`.
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

// Each preset's doc is one line: it is the preset's whole `--help` text (`meaning`).
tokentap_core::vocabulary! {
    /// The three official agentic models' settings and gates (docs/rules.md).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Preset {
        /// Kimi K3 (it replaced K2.6 in the reference): temperature 1.0, top_p 1.0, 8192 tokens; timeout 86,400 s; gates: inline accuracy ≥ 58.32 %, full-run OSL mean 425–520, SWE-bench ≥ 93.5 %.
        Kimi = "kimi",
        /// Qwen3.6-35B-A3B: temperature 1.0, top_k 20, top_p 0.95, repetition_penalty 1.0, presence_penalty 1.5, 8192 tokens, `chat_template_kwargs: {"preserve_thinking": true}`; timeout 14,400 s; gates: inline accuracy ≥ 55.86 %, full-run OSL mean 344–422, SWE-bench ≥ 69 %.
        Qwen = "qwen",
        /// DeepSeek-V4.1-Flash: gates only (inline accuracy ≥ 52.36 %, full-run OSL mean 793–970, SWE-bench ≥ 96.4 %); its sampling settings and timeout are not published, so the preset sets none and the sampling rule is not evaluated.
        Deepseek = "deepseek",
    }
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

/// Run-level sampling settings, as sent: `None` fields are omitted from the body. Resolution
/// puts the preset's values under the flags given; a dataset row's own overrides replace these
/// for that row's request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// Run-level `temperature` sent in every request (over the preset's; a row's own wins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Run-level `max_completion_tokens` (a row's `max_new_tokens` / `max_completion_tokens`
    /// overrides it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Run-level sampling `seed` sent in every request (none by default, as the reference);
    /// else a seed set's `model_seed` (an unsigned 64-bit value, hence the width).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i128>,
    /// Run-level `top_p` (over the preset's; a row's own wins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Run-level `top_k` (over the preset's; a row's own wins; -1 = off, as vLLM reads it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<i64>,
    /// Run-level `repetition_penalty` (over the preset's; a row's own wins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repetition_penalty: Option<f64>,
    /// Run-level `presence_penalty` (over the preset's; a row's own wins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f64>,
    /// Run-level `frequency_penalty` (over the preset's; a row's own wins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f64>,
    /// JSON object sent as `chat_template_kwargs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<Value>,
}

impl Sampling {
    /// `self` over `under`: every field this one leaves unset takes `under`'s.
    pub fn over(self, under: Sampling) -> Sampling {
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

/// A credential: never printed, never serialized, never recorded.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A credential of this text.
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
    /// This process's shard, `I` (0-based).
    pub index: u64,
    /// Shards in all, `N`.
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
/// two flags as `http1` and `http2`, as given).
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Warmup {
    /// Warmup: issue this many trajectories before performance tracking starts (excluded from
    /// every result, recorded in warmup.jsonl and declared in the summary).
    pub trajectories: Option<u64>,
    /// Warmup: issue for this long (e.g. 5m), then let the started turns finish.
    #[serde(
        with = "tokentap_core::duration::opt_secs",
        default,
        rename = "duration_s"
    )]
    pub duration: Option<Duration>,
    /// Dataset for the warmup (default: the performance dataset). Warmup requests are always
    /// salted with a tag of their own, so no KV-cache entry carries over into the measurement.
    pub dataset: Option<PathBuf>,
    /// Concurrency of the warmup (default: the run's, a sweep point's own).
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

/// The run's configuration, resolved: every `tokentap replay` option's value (the flags are
/// declared once, in the replay's `RunOpts`), what resolution derived from them, and what the
/// run learnt before its first request (the dataset's identity, a discovered model). Written to
/// `config.json` and embedded in `summary.json`; each field's doc is its key's meaning.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default)]
pub struct RunConfig {
    /// Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000 or
    /// https://llm.example.com (requests go to /v1/chat/completions under it). Repeat it for
    /// several endpoints: each conversation stays on one, chosen by its id (rendezvous hashing,
    /// as a session-affine router — and `tokentap proxy` — would).
    #[serde(alias = "endpoint", deserialize_with = "one_or_many")]
    pub endpoints: Vec<Endpoint>,
    /// Trust the CA certificates in this PEM file for https endpoints (besides the system's).
    pub ca: Option<PathBuf>,
    /// Do not check https endpoints' certificates (test rigs only; the summary says so).
    pub insecure: bool,
    /// `--http1` / `--http2` (`config.json`: the keys `http1` and `http2`).
    #[serde(flatten)]
    pub protocols: Protocols,
    /// The model was not given: it is the one the endpoints list at `/v1/models`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_discovered: bool,
    /// Model name sent in every request (a row's own `model` overrides it).
    pub model: Option<String>,
    /// Official sampling settings, timeout and validity gates of one model.
    pub preset: Option<Preset>,
    /// The sampling flags; resolved: what every request sends.
    pub sampling: Sampling,
    /// Active conversations: the command's own `--concurrency` (a sweep point's).
    pub concurrency: usize,
    /// Trajectories to issue (official: a multiple of the dataset size). Default: one pass.
    pub trajectories: Option<u64>,
    /// Salt the system prompt per pass and per conversation (docs/benchmark.md#salting; official
    /// runs salt).
    pub salt: bool,
    /// Sleep each row's `delay_seconds` before issuing it (excluded from latency).
    pub delays: bool,
    /// Multiplier applied to `delay_seconds` when --delays is on (0 to 1000).
    pub delay_scale: f64,
    /// Prefix a space to the first text of every replayed assistant message (generated-token
    /// cache clearing, docs/benchmark.md#cache-clearing). Changes the bodies: off in
    /// byte-compatible mode.
    pub clear_generated: bool,
    /// Ask for a final usage chunk (`stream_options.include_usage`): exact token counts, but the
    /// body is no longer byte-compatible with the MLPerf client.
    pub include_usage: bool,
    /// Resolved: the body is what the MLPerf client would send (no usage request, no cache
    /// clearing).
    pub byte_compatible: bool,
    /// Header(s) carrying the logical conversation id; repeatable. Giving any replaces the
    /// default X-Session-ID.
    pub routing_headers: Vec<String>,
    /// Sent as `Authorization: Bearer KEY`; never logged or recorded.
    #[serde(skip)]
    pub api_key: Option<Secret>,
    /// Resolved: an API key was given (the key itself is never recorded).
    pub api_key_set: bool,
    // Resolved: the timeout every turn gets (`RunConfig::turn_timeout`).
    /// Per-turn timeout (e.g. 600s, 4h). Default: the preset's official value, else 86400s.
    #[serde(
        with = "tokentap_core::duration::opt_secs",
        default,
        rename = "turn_timeout_s"
    )]
    pub turn_timeout: Option<Duration>,
    /// Stop issuing when the first slot finds no trajectory left (tuning runs; official: off).
    pub stop_issuing_on_first_user_complete: bool,
    /// Stop issuing after this long, then drain in-flight turns.
    #[serde(
        with = "tokentap_core::duration::opt_secs",
        default,
        rename = "max_duration_s"
    )]
    pub max_duration: Option<Duration>,
    /// Directory for records.jsonl, summary.json and config.json (created if missing).
    pub out: Option<PathBuf>,
    /// Serve the client's live metrics (Prometheus text, `source="client"`) at
    /// `http://ADDR/metrics` during the run. `PORT` alone means 127.0.0.1:PORT.
    pub metrics: Option<std::net::SocketAddr>,
    /// Run only trajectories k with k mod N == I (N machines together issue the single-machine
    /// set).
    pub shard: Shard,
    /// Stamp response arrivals when this process reads them instead of with the kernel's
    /// receive timestamp (the default: arrival at the host, independent of the client's
    /// scheduling; the difference is recorded per turn as `rx_lag_*`).
    pub kernel_rx_timestamps: bool,
    /// The dataset's identity, set by [`RunConfig::bind_dataset`].
    pub dataset: Option<DatasetInfo>,
    /// The model's Hugging Face tokenizer folder (tokenizer.json, and the chat template in
    /// chat_template.jinja or tokenizer_config.json): count OSL, the TPOT denominator and ISL
    /// exactly as the MLPerf reference does. Read locally; nothing is downloaded. Without it,
    /// output tokens come from server usage or chunk counts and the OSL gate is not evaluated.
    pub tokenizer: Option<PathBuf>,
    /// The curve's C_min (1–32; docs/rules.md): names the point's region in its files. The
    /// minimum duration does not depend on it: 600 s at concurrency ≤ 32, 2,400 s above.
    pub c_min: Option<u64>,
    /// Run for at least the rules' minimum duration of the point's concurrency (600 s at
    /// concurrency ≤ 32, 2,400 s above) times F: whole passes of the dataset are issued until it
    /// has elapsed. F = 1 is the official length; anything else marks the point not official
    /// (tuning runs). Without it the run is `--trajectories` long and the rule only checked.
    pub min_duration_scale: Option<f64>,
    /// Bind the run to a published seed set by its id (docs/rules.md), e.g. `A`: its
    /// `model_seed` is sent as every request's `seed` (as the reference sends its model seed; a
    /// row's own `seed`, or `--seed`, wins), and its three seeds are recorded in the run's files
    /// and a submission's `point.yaml`. The checker's own sets are bundled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_set_id: Option<String>,
    /// A newer seed-set file (the checker's `seed_sets.yaml` shape) to find `--seed-set` in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_sets: Option<PathBuf>,
    /// Resolved: the published seed set `--seed-set` names.
    pub seed_set: Option<tokentap_mlperf::seeds::SeedSet>,
    /// Largest SSE event (or line) a response may send, in bytes; a longer one fails the turn
    /// (`event_too_large`) instead of growing the client's buffer without bound.
    pub max_event_bytes: usize,
    /// Keep every turn's output in its record (`content.output`, in the reference's
    /// `sample.complete` shape) so `tokentap report --tokenizer` can count it later. Off: outputs
    /// are never written.
    pub record_outputs: bool,
    /// The declared warmup (`config.json`: `null` without one).
    #[serde(default, with = "warmup_or_null")]
    pub warmup: Warmup,
}

/// The flags' defaults (the replay's tests hold them equal to the flags' own), no endpoint and
/// nothing resolved: what an option absent from an earlier layout's `config.json` meant (it did
/// not exist, so the run behaved as its default does).
impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            endpoints: Vec::new(),
            ca: None,
            insecure: false,
            protocols: Protocols::default(),
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
            byte_compatible: true,
            routing_headers: vec![DEFAULT_ROUTING_HEADER.to_string()],
            api_key: None,
            api_key_set: false,
            turn_timeout: None,
            stop_issuing_on_first_user_complete: false,
            max_duration: None,
            out: None,
            metrics: None,
            shard: Shard::default(),
            kernel_rx_timestamps: true,
            dataset: None,
            tokenizer: None,
            c_min: None,
            min_duration_scale: None,
            seed_set_id: None,
            seed_sets: None,
            seed_set: None,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            record_outputs: false,
            warmup: Warmup::default(),
        }
    }
}

impl RunConfig {
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

    /// Checks the config, then against the dataset (model names, salting needs a system prompt
    /// on every conversation the run will issue), and records the dataset's identity.
    pub fn bind_dataset(&mut self, ds: &Dataset, hash: Option<String>) -> Result<(), ConfigError> {
        self.check()?;
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
    /// The host, without brackets (an IPv6 address bare).
    pub host: String,
    /// The port (80 or 443 when the URL names none).
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
    /// The dataset file as given.
    pub path: PathBuf,
    /// `blake2b-256:<hex>` of the file bytes, when the file was read by the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// Its conversations.
    pub conversations: usize,
    /// Its client turns (`user` and `tool` rows).
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
        /// The dataset file.
        path: PathBuf,
        /// The conversation's first row.
        line: usize,
        /// The conversation's id.
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
