//! Every knob of the simulated server, as one serde value.
//!
//! A JSON "profile" file is exactly a [`SimConfig`]; every field has a default, so a profile
//! names only what it changes (`{"timing":{"decode_ms":20}}`), and unknown keys are rejected so
//! a typo in a profile is an error rather than a silently ignored setting.
//!
//! Durations are `f64` milliseconds (sub-millisecond prefill costs per token are the common case)
//! and are turned into [`std::time::Duration`] once per request, never per chunk.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// All settings of the simulated server.
///
/// [`Default`] is the *realistic* timing model ([`SimConfig::realistic`]): it is what
/// `tokentap sim` serves when given no flags. Tests that want speed use [`SimConfig::zero_delay`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Model name listed by `/v1/models` and echoed when a request names none.
    pub model: String,
    /// Answer a request that names another model with 404 and an OpenAI error body, as vLLM
    /// does ("The model `x` does not exist."). `tokentap sim` sets it unless `--any-model`; the
    /// library's configurations answer any name.
    pub refuse_other_models: bool,
    /// Seed of every random draw (output lengths, text, modes, faults).
    pub seed: u64,
    /// Prefill and decode timing.
    pub timing: TimingConfig,
    /// The prefix cache.
    pub cache: CacheConfig,
    /// Output lengths.
    pub output: OutputConfig,
    /// Response modes (reasoning, tool calls).
    pub modes: ModesConfig,
    /// Faults to inject.
    pub faults: FaultConfig,
    /// Keep the exact request body bytes in [`crate::RequestLog::body`].
    pub capture_bodies: bool,
    /// Append one JSON line per finished request ([`crate::RequestLog`], body omitted) to this
    /// file, flushed per line.
    pub chunk_log: Option<PathBuf>,
    /// Answer each chat request that replays a turn of this MLPerf agentic dataset with the
    /// turn's recorded assistant message instead of generated filler ([`crate::Answers`]).
    pub answer_from: Option<PathBuf>,
    /// On shutdown, how long in-flight responses may run before their connections are cut.
    pub shutdown_grace_ms: u64,
    /// Which engine's Prometheus names `GET /metrics` uses ([`crate::metrics`]).
    pub engine_metrics: EngineFlavor,
}

/// The engine the sim impersonates on `GET /metrics`: vLLM (`vllm:*`, the default) or SGLang
/// (`sglang:*`). Both label their series `model_name`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum EngineFlavor {
    /// vLLM's `/metrics` (`vllm:*`).
    #[default]
    Vllm,
    /// SGLang's `/metrics` (`sglang:*`).
    Sglang,
    /// TensorRT-LLM's `trtllm-serve` (`trtllm_*`, also at `/prometheus/metrics`).
    Trtllm,
}

/// The timing model. See the crate docs ("Timing model") for the formulas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimingConfig {
    /// Fixed part of prefill (time to first token), ms.
    pub prefill_base_ms: f64,
    /// Prefill cost per *uncached* prompt token, ms.
    pub prefill_per_token_ms: f64,
    /// Number of prefills that may run at once; 0 = unlimited (no queueing). With N lanes a
    /// request's prefill starts when the earliest lane frees, so TTFT includes queueing.
    pub prefill_lanes: u32,
    /// Decode time per output token when this is the only decoding request, ms.
    pub decode_ms: f64,
    /// Relative slowdown of every decode step per *additional* concurrent decode
    /// (0.05 = +5 % per extra request).
    pub decode_slowdown: f64,
    /// Hand every chunk to the socket on its own (one write per chunk, as an engine streaming
    /// token by token does), so a chunk's stamp is its write. Off, a zero-delay body returns
    /// frames back to back and hyper gathers up to ~15 of them into one `writev`: faster, but a
    /// frame's stamp can precede its write by the rest of that batch.
    pub flush_each_chunk: bool,
}

/// The prefix KV cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// Off: every request reports `cached_tokens: 0` and pays full prefill.
    pub enabled: bool,
    /// Tokens per KV block; only full blocks are cached (vLLM's default is 16).
    pub block_tokens: u32,
    /// Capacity in tokens; least recently used blocks are evicted beyond it.
    pub capacity_tokens: u64,
}

/// How long outputs are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutputConfig {
    /// Mean of the lognormal output-length distribution, tokens (the official OSL gates of
    /// Kimi K3 and Qwen3.6 lie between 344 and 520 tokens per turn, docs/benchmark.md#gates).
    pub mean_tokens: f64,
    /// Sigma of the underlying normal (spread); 0 = every output exactly `mean_tokens`.
    pub sigma: f64,
    /// Server-side cap when the request sets no `max_completion_tokens` / `max_tokens`.
    pub max_tokens: u64,
    /// Always produce exactly the cap (the request's max tokens, else `max_tokens`).
    pub always_max: bool,
    /// Seed each request from (seed, hash of its prompt) instead of (seed, arrival number):
    /// outputs then do not depend on the order in which concurrent requests arrive.
    pub seed_from_prompt: bool,
}

/// Response shapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModesConfig {
    /// Fraction of the output streamed as reasoning before the content (0 = no reasoning).
    /// A request with `chat_template_kwargs.enable_thinking: false` gets none.
    pub reasoning_fraction: f64,
    /// Name of the reasoning delta field.
    pub reasoning_field: ReasoningField,
    /// Share of chat requests answered with one tool call instead of content: a call to a tool
    /// the request offers (none without `tools`), with arguments its schema takes.
    /// `tool_choice: "none"` forces none; `"required"` (or a named function) forces one.
    pub tool_call_rate: f64,
    /// An agent's loop instead of a rate: a tool call on every new prompt (no tool result since
    /// the last assistant message), an answer after a tool result. `tool_choice` still rules.
    pub tool_call_per_prompt: bool,
    /// Send the role-only prelude chunk `{"role":"assistant","content":""}` first.
    pub role_prelude: bool,
    /// Send the prelude as soon as the response starts instead of together with the first
    /// token (vLLM and SGLang send it with the first token, so TTFB ≈ TTFT there).
    pub prelude_early: bool,
    /// Tokens per chunk (speculative decoding / stream interval), at least 1.
    pub tokens_per_chunk: u32,
}

tokentap_core::vocabulary! {
    /// Where the reasoning text streams.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
    #[serde(rename_all = "snake_case")]
    pub enum ReasoningField {
        /// `delta.reasoning_content` (SGLang, older vLLM).
        ReasoningContent = "reasoning_content",
        /// `delta.reasoning` (newer vLLM).
        Reasoning = "reasoning",
    }
}

/// Fault injection, each kind by rate (seeded per request). At most one fault per request; the
/// rates are stacked in the order error, stall, disconnect, malformed (their sum should be ≤ 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultConfig {
    /// Share of requests answered with an error status before any streaming.
    pub error_rate: f64,
    /// Statuses drawn from (uniformly) for error faults.
    pub error_statuses: Vec<u16>,
    /// Share of streams that pause `stall_ms` before one chunk in the middle.
    pub stall_rate: f64,
    /// The pause, ms.
    pub stall_ms: u64,
    /// Share of streams whose connection is aborted after some chunks.
    pub disconnect_rate: f64,
    /// Share of streams that get one invalid-JSON event in the middle.
    pub malformed_rate: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            model: "tokentap-sim".to_string(),
            refuse_other_models: false,
            seed: 0,
            timing: TimingConfig::default(),
            cache: CacheConfig::default(),
            output: OutputConfig::default(),
            modes: ModesConfig::default(),
            faults: FaultConfig::default(),
            capture_bodies: false,
            chunk_log: None,
            answer_from: None,
            shutdown_grace_ms: 2_000,
            engine_metrics: EngineFlavor::Vllm,
        }
    }
}

impl Default for TimingConfig {
    fn default() -> Self {
        TimingConfig {
            prefill_base_ms: 20.0,
            prefill_per_token_ms: 0.05,
            prefill_lanes: 0,
            decode_ms: 8.0,
            decode_slowdown: 0.05,
            flush_each_chunk: false,
        }
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            enabled: true,
            block_tokens: 16,
            capacity_tokens: 2_000_000,
        }
    }
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            mean_tokens: 400.0,
            sigma: 0.7,
            max_tokens: 8192,
            always_max: false,
            seed_from_prompt: false,
        }
    }
}

impl Default for ModesConfig {
    fn default() -> Self {
        ModesConfig {
            reasoning_fraction: 0.0,
            reasoning_field: ReasoningField::ReasoningContent,
            tool_call_rate: 0.0,
            tool_call_per_prompt: false,
            role_prelude: true,
            prelude_early: false,
            tokens_per_chunk: 1,
        }
    }
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            error_rate: 0.0,
            error_statuses: vec![500, 503, 429],
            stall_rate: 0.0,
            stall_ms: 2_000,
            disconnect_rate: 0.0,
            malformed_rate: 0.0,
        }
    }
}

impl SimConfig {
    /// No prefill or decode time at all; everything else default. Chunks are produced as fast
    /// as hyper takes them (see the crate docs for the measured rate).
    pub fn zero_delay() -> Self {
        SimConfig {
            timing: TimingConfig::zero(),
            ..SimConfig::default()
        }
    }

    /// Prefill 20 ms + 0.05 ms per uncached token; decode 8 ms per token, +5 % per extra
    /// concurrent decode. Same as [`Default`].
    pub fn realistic() -> Self {
        SimConfig::default()
    }

    /// Reads a JSON profile.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Checks values that would make the model meaningless. Called by `start`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let t = &self.timing;
        for (name, v) in [
            ("timing.prefill_base_ms", t.prefill_base_ms),
            ("timing.prefill_per_token_ms", t.prefill_per_token_ms),
            ("timing.decode_ms", t.decode_ms),
            ("timing.decode_slowdown", t.decode_slowdown),
            ("output.mean_tokens", self.output.mean_tokens),
            ("output.sigma", self.output.sigma),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(ConfigError(format!(
                    "{name} must be a finite number ≥ 0, got {v}"
                )));
            }
        }
        for (name, v) in [
            ("modes.reasoning_fraction", self.modes.reasoning_fraction),
            ("modes.tool_call_rate", self.modes.tool_call_rate),
            ("faults.error_rate", self.faults.error_rate),
            ("faults.stall_rate", self.faults.stall_rate),
            ("faults.disconnect_rate", self.faults.disconnect_rate),
            ("faults.malformed_rate", self.faults.malformed_rate),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(ConfigError(format!("{name} must be in [0, 1], got {v}")));
            }
        }
        if self.cache.block_tokens == 0 {
            return Err(ConfigError("cache.block_tokens must be ≥ 1".into()));
        }
        if self.modes.tokens_per_chunk == 0 {
            return Err(ConfigError("modes.tokens_per_chunk must be ≥ 1".into()));
        }
        if self.output.max_tokens == 0 {
            return Err(ConfigError("output.max_tokens must be ≥ 1".into()));
        }
        if self.faults.error_rate > 0.0 && self.faults.error_statuses.is_empty() {
            return Err(ConfigError(
                "faults.error_statuses is empty but error_rate > 0".into(),
            ));
        }
        if let Some(s) = self
            .faults
            .error_statuses
            .iter()
            .find(|s| !(400..=599).contains(*s))
        {
            return Err(ConfigError(format!(
                "faults.error_statuses: {s} is not an HTTP error status (400–599)"
            )));
        }
        Ok(())
    }
}

impl TimingConfig {
    /// All costs zero.
    pub fn zero() -> Self {
        TimingConfig {
            prefill_base_ms: 0.0,
            prefill_per_token_ms: 0.0,
            prefill_lanes: 0,
            decode_ms: 0.0,
            decode_slowdown: 0.0,
            flush_each_chunk: false,
        }
    }

    /// No prefill and no decode time: the body never arms a timer (except for a stall fault).
    pub fn is_zero(&self) -> bool {
        self.prefill_base_ms == 0.0 && self.prefill_per_token_ms == 0.0 && self.decode_ms == 0.0
    }

    /// Prefill time for `uncached` tokens.
    pub fn prefill(&self, uncached: u64) -> Duration {
        ms(self.prefill_base_ms + self.prefill_per_token_ms * uncached as f64)
    }
}

/// Milliseconds (f64) to a `Duration`, saturating at zero.
pub(crate) fn ms(v: f64) -> Duration {
    Duration::from_secs_f64((v / 1e3).max(0.0))
}

/// An invalid setting, named by its path in the profile.
#[derive(Debug, thiserror::Error)]
#[error("invalid sim config: {0}")]
pub struct ConfigError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_profile_keeps_defaults_and_rejects_typos() {
        let c = SimConfig::from_json(r#"{"timing":{"decode_ms":20},"seed":7}"#).unwrap();
        assert_eq!(c.timing.decode_ms, 20.0);
        assert_eq!(c.timing.prefill_base_ms, 20.0);
        assert_eq!(c.seed, 7);
        assert_eq!(c.cache, CacheConfig::default());
        assert!(SimConfig::from_json(r#"{"timing":{"decod_ms":20}}"#).is_err());
    }

    #[test]
    fn round_trips_and_validates() {
        let c = SimConfig::zero_delay();
        let back = SimConfig::from_json(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(c.timing.is_zero() && !SimConfig::realistic().timing.is_zero());
        c.validate().unwrap();
        let mut bad = SimConfig::default();
        bad.faults.stall_rate = 1.5;
        assert!(bad.validate().unwrap_err().0.contains("faults.stall_rate"));
        bad = SimConfig::default();
        bad.faults.error_statuses = vec![200];
        assert!(bad.validate().is_err());
    }

    #[test]
    fn prefill_formula() {
        let t = TimingConfig::default();
        assert_eq!(t.prefill(1000), Duration::from_millis(70));
    }
}
