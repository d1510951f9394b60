//! The replay's options in two stages: [`RunOpts`], every option of a run as given (the one
//! declaration of each: flag, environment variable, default, help), and [`RunOpts::resolve`],
//! which turns them into the run's [`RunConfig`] (in `tokentap_run::config`; its serde form is
//! `config.json`) in one step, checked. `tokentap replay` ([`Opts`]) adds its one
//! `--concurrency`; `tokentap sweep` flattens the same [`RunOpts`] with a list.
//!
//! A new option is a field here and one in [`RunConfig`]: [`RunOpts::resolve`] takes the
//! options apart field by field, so one not carried into the configuration does not compile,
//! and `tests/options.rs` proves that every option reaches a resumed sweep's and merge's
//! same-run comparisons.

pub use tokentap_run::config::*;

use crate::error::ReplayError;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

/// The sampling flags as given (resolved: [`Sampling`], the preset's values under them).
#[derive(clap::Args, Clone, Debug, Default, PartialEq)]
#[group(id = "SamplingOpts")]
pub struct SamplingOpts {
    /// Run-level `temperature` sent in every request (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_TEMPERATURE",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub temperature: Option<f64>,
    /// Run-level `max_completion_tokens` (a row's `max_new_tokens` / `max_completion_tokens`
    /// overrides it).
    #[arg(
        long = "max-tokens",
        env = "TOKENTAP_REPLAY_MAX_TOKENS",
        help_heading = "Request body"
    )]
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
    pub seed: Option<i128>,
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
    /// Run-level `repetition_penalty` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_REPETITION_PENALTY",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub repetition_penalty: Option<f64>,
    /// Run-level `presence_penalty` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_PRESENCE_PENALTY",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub presence_penalty: Option<f64>,
    /// Run-level `frequency_penalty` (over the preset's; a row's own wins).
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_FREQUENCY_PENALTY",
        allow_negative_numbers = true,
        help_heading = "Request body"
    )]
    pub frequency_penalty: Option<f64>,
    /// JSON object sent as `chat_template_kwargs`.
    #[arg(long, env = "TOKENTAP_REPLAY_CHAT_TEMPLATE_KWARGS", value_parser = parse_json, help_heading = "Request body")]
    pub chat_template_kwargs: Option<Value>,
}

/// The warmup flags as given ([`Warmup`] in `config.json`).
#[derive(clap::Args, Clone, Debug, Default, PartialEq)]
#[group(id = "WarmupOpts")]
pub struct WarmupOpts {
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

/// Every option of one run as given on the command line (or by the environment): the one
/// declaration of each — flag, environment variable, default and help. `tokentap replay` and
/// `tokentap sweep` flatten it; [`RunOpts::resolve`] turns it into the run's [`RunConfig`].
#[derive(clap::Args, Clone, Debug)]
#[group(id = "RunOpts")]
pub struct RunOpts {
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
    /// Model name sent in every request (a row's own `model` overrides it).
    #[arg(long, env = "TOKENTAP_REPLAY_MODEL", help_heading = "Server")]
    pub model: Option<String>,
    /// Official sampling settings, timeout and validity gates of one model.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_PRESET",
        value_parser = preset_parser(),
        help_heading = "Request body"
    )]
    pub preset: Option<Preset>,
    /// The sampling flags.
    #[command(flatten)]
    pub sampling: SamplingOpts,
    /// Active conversations: the command's own `--concurrency` (a sweep point's).
    #[arg(skip = 1usize)]
    pub concurrency: usize,
    // Not in `config.json`: the dataset's identity there is its hash.
    /// MLPerf agentic dataset (JSONL, one row per message).
    #[arg(
        id = "dataset",
        long = "dataset",
        env = "TOKENTAP_REPLAY_DATASET",
        value_name = "FILE",
        help_heading = "Load"
    )]
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
    pub seed_set_id: Option<String>,
    /// A newer seed-set file (the checker's `seed_sets.yaml` shape) to find `--seed-set` in.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_SEED_SETS",
        value_name = "FILE",
        requires = "seed_set_id",
        help_heading = "Benchmark rules"
    )]
    pub seed_sets: Option<PathBuf>,
    /// Largest SSE event (or line) a response may send, in bytes; a longer one fails the turn
    /// (`event_too_large`) instead of growing the client's buffer without bound.
    #[arg(long, env = "TOKENTAP_REPLAY_MAX_EVENT_BYTES", value_name = "BYTES", default_value_t = DEFAULT_MAX_EVENT_BYTES, help_heading = "Server")]
    pub max_event_bytes: usize,
    /// Keep every turn's output in its record (`content.output`, in the reference's
    /// `sample.complete` shape) so `tokentap report --tokenizer` can count it later. Off: outputs
    /// are never written.
    #[arg(long, env = "TOKENTAP_REPLAY_RECORD_OUTPUTS", help_heading = "Output")]
    pub record_outputs: bool,
    /// The warmup's flags.
    #[command(flatten)]
    pub warmup: WarmupOpts,
    /// No live progress line.
    #[arg(long, env = "TOKENTAP_REPLAY_QUIET", help_heading = "Output")]
    pub quiet: bool,
    /// Exit 0 whenever the run ran and its records are whole, whatever its turns and verdict
    /// (lost records still exit 1, an interrupted run 130).
    #[arg(long, env = "TOKENTAP_REPLAY_EXIT_ZERO", help_heading = "Output")]
    pub exit_zero: bool,
}

/// `--preset`: one of the presets' names (each with its one-line meaning in `--help`).
fn preset_parser() -> impl clap::builder::TypedValueParser<Value = Preset> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser as _};
    PossibleValuesParser::new(
        Preset::ALL.map(|p| PossibleValue::new(p.as_str()).help(p.meaning().trim_end_matches('.'))),
    )
    // Invariant: the possible values are the presets' names.
    .map(|s| Preset::parse(&s).expect("a possible value is a preset's name"))
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

fn parse_json(s: &str) -> Result<Value, String> {
    serde_json::from_str(s).map_err(|e| format!("expected JSON: {e}"))
}

impl From<SamplingOpts> for Sampling {
    fn from(o: SamplingOpts) -> Sampling {
        let SamplingOpts {
            temperature,
            max_completion_tokens,
            seed,
            top_p,
            top_k,
            repetition_penalty,
            presence_penalty,
            frequency_penalty,
            chat_template_kwargs,
        } = o;
        Sampling {
            temperature,
            max_completion_tokens,
            seed,
            top_p,
            top_k,
            repetition_penalty,
            presence_penalty,
            frequency_penalty,
            chat_template_kwargs,
        }
    }
}

impl From<WarmupOpts> for Warmup {
    fn from(o: WarmupOpts) -> Warmup {
        let WarmupOpts {
            trajectories,
            duration,
            dataset,
            concurrency,
        } = o;
        Warmup {
            trajectories,
            duration,
            dataset,
            concurrency,
        }
    }
}

impl RunOpts {
    /// The options of `tokentap replay --endpoint URL --dataset -`: the flags' own defaults,
    /// read from their declarations (the environment ignored). For tests and embedding.
    pub fn new(endpoint: &str) -> Result<RunOpts, ConfigError> {
        use clap::{Args as _, FromArgMatches as _};
        Endpoint::parse(endpoint)?;
        let clap_error = |e: clap::Error| ConfigError::Invalid(e.to_string());
        let m = RunOpts::augment_args(clap::Command::new("replay"))
            .mut_args(|a| a.env(None::<&str>))
            .try_get_matches_from(["replay", "--endpoint", endpoint, "--dataset", "-"])
            .map_err(clap_error)?;
        RunOpts::from_arg_matches(&m).map_err(clap_error)
    }

    /// These options at `concurrency`, resolved: the configuration of one run (a sweep point's).
    pub fn at(&self, concurrency: usize) -> Result<RunConfig, ConfigError> {
        let mut o = self.clone();
        o.concurrency = concurrency;
        o.resolve()
    }

    /// The run's configuration: the preset's sampling under the flags given, a seed set's
    /// model seed (`--seed` wins), the turn timeout, `api_key_set` and `byte_compatible`
    /// derived — then checked ([`RunConfig::check`]).
    pub fn resolve(&self) -> Result<RunConfig, ConfigError> {
        let RunOpts {
            endpoints,
            ca,
            insecure,
            http2,
            http1,
            model,
            preset,
            sampling,
            concurrency,
            dataset_path: _,
            trajectories,
            salt,
            delays,
            delay_scale,
            clear_generated,
            include_usage,
            routing_headers,
            api_key,
            turn_timeout,
            stop_issuing_on_first_user_complete,
            max_duration,
            out,
            metrics,
            shard,
            kernel_rx_timestamps,
            tokenizer,
            c_min,
            min_duration_scale,
            seed_set_id,
            seed_sets,
            max_event_bytes,
            record_outputs,
            warmup,
            quiet: _,
            exit_zero: _,
        } = self.clone();
        let mut sampling = Sampling::from(sampling);
        if let Some(p) = preset {
            sampling = sampling.over(p.sampling());
        }
        let seed_set = seed_set_of(seed_set_id.as_deref(), seed_sets.as_deref())?;
        // The reference sends its `model_params.seed` as every request's `seed` (a row's own
        // wins); a published set's `model_seed` is that seed (docs/rules.md). `--seed` wins.
        if let (Some(ss), None) = (&seed_set, sampling.seed) {
            sampling.seed = Some(i128::from(ss.model_seed));
        }
        let turn_timeout = turn_timeout
            .or(preset.and_then(Preset::turn_timeout))
            .unwrap_or(DEFAULT_TURN_TIMEOUT);
        let config = RunConfig {
            endpoints,
            ca,
            insecure,
            protocols: protocols_of(http1, http2),
            model_discovered: false,
            model,
            preset,
            sampling,
            concurrency,
            trajectories,
            salt,
            delays,
            delay_scale,
            byte_compatible: !include_usage && !clear_generated,
            clear_generated,
            include_usage,
            routing_headers,
            api_key_set: api_key.is_some(),
            api_key,
            turn_timeout: Some(turn_timeout),
            stop_issuing_on_first_user_complete,
            max_duration,
            out,
            metrics,
            shard,
            kernel_rx_timestamps,
            dataset: None,
            tokenizer,
            c_min,
            min_duration_scale,
            seed_set_id,
            seed_sets,
            seed_set,
            max_event_bytes,
            record_outputs,
            warmup: warmup.into(),
        };
        config.check()?;
        Ok(config)
    }
}

/// `--seed-set ID` (in `--seed-sets FILE`, else the bundled sets): the published set.
fn seed_set_of(
    id: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<Option<tokentap_mlperf::seeds::SeedSet>, ConfigError> {
    id.map(|id| {
        tokentap_mlperf::seeds::find(id, file)
            .map_err(|e| ConfigError::Invalid(format!("--seed-set: {e}")))
    })
    .transpose()
}

/// `--http1` / `--http2` (the two conflict; `--http1` would win).
fn protocols_of(http1: bool, http2: bool) -> Protocols {
    match (http1, http2) {
        (true, _) => Protocols::Http1,
        (_, true) => Protocols::Http2,
        _ => Protocols::Auto,
    }
}

/// `tokentap replay`: the run's options and its one concurrency.
#[derive(clap::Args, Clone, Debug)]
#[group(id = "ReplayOpts")]
pub struct Opts {
    /// The run's options.
    #[command(flatten)]
    pub run: RunOpts,
    /// Target concurrency: number of active conversations (closed loop).
    /// `tokentap sweep --concurrency` takes a list (`1,4,16,64`): one measurement point each.
    #[arg(
        long,
        env = "TOKENTAP_REPLAY_CONCURRENCY",
        default_value_t = 1,
        value_parser = parse_concurrency,
        value_name = "N",
        help_heading = "Load"
    )]
    pub concurrency: usize,
}

/// `--concurrency` of one run: a whole number ≥ 1 (a list is a sweep's).
fn parse_concurrency(s: &str) -> Result<usize, String> {
    if s.contains(',') {
        return Err(format!(
            "a list of concurrencies is a sweep (`tokentap sweep --concurrency {s}`)"
        ));
    }
    tokentap_core::value::positive(s)
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

impl Opts {
    /// The run's configuration: the options at their concurrency, resolved.
    pub fn resolve(&self) -> Result<RunConfig, ReplayError> {
        Ok(self.run.at(self.concurrency)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn opts(args: &[&str]) -> Opts {
        let mut v = vec!["--endpoint", "http://127.0.0.1:9", "--dataset", "x.jsonl"];
        v.extend_from_slice(args);
        Opts::try_parse_from_args(v).unwrap()
    }

    #[test]
    fn qwen_preset_with_override() {
        let c = opts(&["--preset", "qwen", "--top-k", "40"])
            .resolve()
            .unwrap();
        assert_eq!(c.sampling.top_k, Some(40));
        assert_eq!(c.sampling.top_p, Some(0.95));
        assert_eq!(c.sampling.presence_penalty, Some(1.5));
        assert_eq!(c.sampling.max_completion_tokens, Some(8192));
        assert_eq!(
            c.sampling.chat_template_kwargs,
            Some(serde_json::json!({"preserve_thinking": true}))
        );
        assert_eq!(c.turn_timeout(), Duration::from_secs(14_400));
    }

    #[test]
    fn no_preset_sends_only_what_is_given() {
        let c = opts(&["--max-tokens", "7"]).resolve().unwrap();
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
        assert_eq!(o.run.routing_headers, ["X-Session-ID", "X-SMG-Routing-Key"]);
    }

    #[test]
    fn api_key_is_never_serialized() {
        let o = opts(&["--api-key", "sk-supersecret"]);
        let c = o.resolve().unwrap();
        let b = serde_json::to_string(&c).unwrap();
        let d = format!("{o:?}{c:?}");
        for s in [b, d] {
            assert!(!s.contains("supersecret"), "{s}");
        }
        assert!(c.api_key_set);
    }

    /// `new` takes every default from the flags' declarations, and resolves as the CLI does.
    #[test]
    fn new_is_the_command_line_without_flags() {
        let a = RunOpts::new("http://127.0.0.1:9")
            .unwrap()
            .resolve()
            .unwrap();
        let b = opts(&[]).resolve().unwrap();
        let (a, b) = (
            serde_json::to_value(&a).unwrap(),
            serde_json::to_value(&b).unwrap(),
        );
        assert_eq!(a, b);
        assert_eq!(a["delay_scale"], DEFAULT_DELAY_SCALE);
        assert_eq!(a["max_event_bytes"], DEFAULT_MAX_EVENT_BYTES);
        assert_eq!(a["turn_timeout_s"], 86_400.0);
        assert_eq!(a["kernel_rx_timestamps"], true);
        assert_eq!(a["byte_compatible"], true);
        assert_eq!(a["shard"], serde_json::json!({"index": 0, "count": 1}));
        assert_eq!(a["concurrency"], 1);
    }

    /// What an option absent from an earlier `config.json` reads as ([`RunConfig::default`]) is
    /// the flag's own default: the defaults resolved, but for what resolution derives (the turn
    /// timeout) and the endpoint every command line has.
    #[test]
    fn the_configs_default_is_the_flags_defaults() {
        let mut resolved = RunOpts::new("http://127.0.0.1:9")
            .unwrap()
            .resolve()
            .unwrap();
        resolved.endpoints.clear();
        resolved.turn_timeout = None;
        assert_eq!(
            serde_json::to_value(&resolved).unwrap(),
            serde_json::to_value(RunConfig::default()).unwrap()
        );
    }

    /// `config.json` reads back into the same configuration, the HTTP version's two keys and
    /// the warmup included.
    #[test]
    fn config_json_round_trips() {
        let c = opts(&[
            "--http2",
            "--preset",
            "qwen",
            "--temperature",
            "0.5",
            "--warmup-trajectories",
            "3",
            "--seed-set",
            "A",
        ])
        .resolve()
        .unwrap();
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            (v["http1"].clone(), v["http2"].clone()),
            (false.into(), true.into())
        );
        assert_eq!(v["warmup"]["trajectories"], 3);
        assert_eq!(v["sampling"]["temperature"], 0.5);
        assert_eq!(v["sampling"]["top_k"], 20);
        assert_eq!(v["seed_set"]["id"], "A");
        let back: RunConfig = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back.protocols, Protocols::Http2);
        assert_eq!(serde_json::to_value(&back).unwrap(), v);
    }

    #[test]
    fn one_concurrency_per_run() {
        let e = Opts::try_parse_from_args([
            "--endpoint",
            "http://h",
            "--dataset",
            "x",
            "--concurrency",
            "1,4",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("tokentap sweep --concurrency 1,4"), "{e}");
        let e = Opts::try_parse_from_args([
            "--endpoint",
            "http://h",
            "--dataset",
            "x",
            "--concurrency",
            "0",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains(">= 1"), "{e}");
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
