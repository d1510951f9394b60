//! `tokentap sim`: options and the run loop.
//!
//! The configuration is built in three layers: a base (`--preset`, or the `--profile` JSON
//! file), then every flag that was given on top of it. Flags are all optional so that "not
//! given" leaves the profile's value alone.

use crate::config::{EngineFlavor, ReasoningField, SimConfig};
use crate::server::SimServer;
use anyhow::Context as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Base timing when no profile is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// Prefill 20 ms + 0.05 ms/uncached token; decode 8 ms/token, +5 %/extra concurrent decode.
    Realistic,
    /// No prefill or decode time.
    ZeroDelay,
}

/// Options of `tokentap sim`.
#[derive(Debug, Clone, clap::Args)]
pub struct Opts {
    /// Address to listen on (port 0 picks a free port; the bound address is printed first).
    #[arg(long, env = "TOKENTAP_SIM_LISTEN", default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// JSON profile (a SimConfig; any field may be omitted). Flags override it.
    #[arg(long, env = "TOKENTAP_SIM_PROFILE", value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Base settings when no --profile is given.
    #[arg(
        long,
        env = "TOKENTAP_SIM_PRESET",
        value_enum,
        default_value = "realistic"
    )]
    pub preset: Preset,
    /// Append one JSON line per finished request (ground truth chunk stamps) to FILE.
    #[arg(long, env = "TOKENTAP_SIM_CHUNK_LOG", value_name = "FILE")]
    pub chunk_log: Option<PathBuf>,
    /// Seed of all random draws.
    #[arg(long, env = "TOKENTAP_SIM_SEED")]
    pub seed: Option<u64>,
    /// Model name served.
    #[arg(long, env = "TOKENTAP_SIM_MODEL")]
    pub model: Option<String>,
    /// Keep the exact request bodies in the request log.
    #[arg(long, env = "TOKENTAP_SIM_CAPTURE_BODIES")]
    pub capture_bodies: bool,
    /// Engine whose metric names `GET /metrics` serves (`vllm:*` or `sglang:*`).
    #[arg(long, env = "TOKENTAP_SIM_ENGINE_METRICS", value_enum)]
    pub engine_metrics: Option<EngineFlavor>,

    // Timing.
    /// Fixed prefill time, ms.
    #[arg(long, env = "TOKENTAP_SIM_PREFILL_BASE_MS", help_heading = "Timing")]
    pub prefill_base_ms: Option<f64>,
    /// Prefill time per uncached prompt token, ms.
    #[arg(
        long,
        env = "TOKENTAP_SIM_PREFILL_PER_TOKEN_MS",
        help_heading = "Timing"
    )]
    pub prefill_per_token_ms: Option<f64>,
    /// Concurrent prefills (0 = unlimited; otherwise requests queue for a lane).
    #[arg(long, env = "TOKENTAP_SIM_PREFILL_LANES", help_heading = "Timing")]
    pub prefill_lanes: Option<u32>,
    /// Decode time per token with one request decoding, ms.
    #[arg(long, env = "TOKENTAP_SIM_DECODE_MS", help_heading = "Timing")]
    pub decode_ms: Option<f64>,
    /// Decode slowdown per extra concurrent decode (0.05 = +5 %).
    #[arg(long, env = "TOKENTAP_SIM_DECODE_SLOWDOWN", help_heading = "Timing")]
    pub decode_slowdown: Option<f64>,
    /// Write every chunk on its own (zero-delay mode otherwise batches ready chunks per write).
    #[arg(long, env = "TOKENTAP_SIM_FLUSH_EACH_CHUNK", help_heading = "Timing")]
    pub flush_each_chunk: bool,

    // Cache.
    /// Disable the prefix KV cache.
    #[arg(long, env = "TOKENTAP_SIM_NO_CACHE", help_heading = "Prefix cache")]
    pub no_cache: bool,
    /// Tokens per KV block.
    #[arg(
        long,
        env = "TOKENTAP_SIM_CACHE_BLOCK_TOKENS",
        help_heading = "Prefix cache"
    )]
    pub cache_block_tokens: Option<u32>,
    /// Cache capacity in tokens.
    #[arg(
        long,
        env = "TOKENTAP_SIM_CACHE_CAPACITY_TOKENS",
        help_heading = "Prefix cache"
    )]
    pub cache_capacity_tokens: Option<u64>,

    // Output.
    /// Mean output length (lognormal), tokens.
    #[arg(long, env = "TOKENTAP_SIM_OUTPUT_MEAN_TOKENS", help_heading = "Output")]
    pub output_mean_tokens: Option<f64>,
    /// Lognormal sigma of output lengths (0 = fixed length).
    #[arg(long, env = "TOKENTAP_SIM_OUTPUT_SIGMA", help_heading = "Output")]
    pub output_sigma: Option<f64>,
    /// Output cap when a request sets no max tokens.
    #[arg(long, env = "TOKENTAP_SIM_OUTPUT_MAX_TOKENS", help_heading = "Output")]
    pub output_max_tokens: Option<u64>,
    /// Always generate exactly the max tokens.
    #[arg(long, env = "TOKENTAP_SIM_ALWAYS_MAX", help_heading = "Output")]
    pub always_max: bool,
    /// Seed outputs from the prompt instead of the arrival order.
    #[arg(long, env = "TOKENTAP_SIM_SEED_FROM_PROMPT", help_heading = "Output")]
    pub seed_from_prompt: bool,

    // Modes.
    /// Fraction of output streamed as reasoning first (0 = none).
    #[arg(long, env = "TOKENTAP_SIM_REASONING_FRACTION", help_heading = "Modes")]
    pub reasoning_fraction: Option<f64>,
    /// Reasoning delta field name.
    #[arg(
        long,
        env = "TOKENTAP_SIM_REASONING_FIELD",
        value_enum,
        help_heading = "Modes"
    )]
    pub reasoning_field: Option<ReasoningField>,
    /// Share of chat responses that are one `bash` tool call.
    #[arg(long, env = "TOKENTAP_SIM_TOOL_CALL_RATE", help_heading = "Modes")]
    pub tool_call_rate: Option<f64>,
    /// Role-only prelude chunk first (true/false).
    #[arg(long, env = "TOKENTAP_SIM_ROLE_PRELUDE", help_heading = "Modes")]
    pub role_prelude: Option<bool>,
    /// Send the prelude at once instead of with the first token.
    #[arg(long, env = "TOKENTAP_SIM_PRELUDE_EARLY", help_heading = "Modes")]
    pub prelude_early: bool,
    /// Tokens per streamed chunk.
    #[arg(long, env = "TOKENTAP_SIM_TOKENS_PER_CHUNK", help_heading = "Modes")]
    pub tokens_per_chunk: Option<u32>,

    // Faults.
    /// Share of requests answered with an error status.
    #[arg(long, env = "TOKENTAP_SIM_ERROR_RATE", help_heading = "Faults")]
    pub error_rate: Option<f64>,
    /// Error statuses to draw from, comma separated.
    #[arg(
        long,
        env = "TOKENTAP_SIM_ERROR_STATUSES",
        value_delimiter = ',',
        help_heading = "Faults"
    )]
    pub error_statuses: Option<Vec<u16>>,
    /// Share of streams that stall once.
    #[arg(long, env = "TOKENTAP_SIM_STALL_RATE", help_heading = "Faults")]
    pub stall_rate: Option<f64>,
    /// Stall length, ms.
    #[arg(long, env = "TOKENTAP_SIM_STALL_MS", help_heading = "Faults")]
    pub stall_ms: Option<u64>,
    /// Share of streams cut mid-way.
    #[arg(long, env = "TOKENTAP_SIM_DISCONNECT_RATE", help_heading = "Faults")]
    pub disconnect_rate: Option<f64>,
    /// Share of streams with one malformed event.
    #[arg(long, env = "TOKENTAP_SIM_MALFORMED_RATE", help_heading = "Faults")]
    pub malformed_rate: Option<f64>,
}

impl Opts {
    /// The configuration these options describe: profile (or preset), then flags.
    pub fn build_config(&self) -> anyhow::Result<SimConfig> {
        let mut c = match &self.profile {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading sim profile {}", path.display()))?;
                SimConfig::from_json(&text)
                    .with_context(|| format!("sim profile {}", path.display()))?
            }
            None => match self.preset {
                Preset::Realistic => SimConfig::realistic(),
                Preset::ZeroDelay => SimConfig::zero_delay(),
            },
        };
        fn set<T: Clone>(dst: &mut T, v: &Option<T>) {
            if let Some(v) = v {
                *dst = v.clone();
            }
        }
        set(&mut c.seed, &self.seed);
        set(&mut c.model, &self.model);
        set(&mut c.engine_metrics, &self.engine_metrics);
        if self.chunk_log.is_some() {
            c.chunk_log = self.chunk_log.clone();
        }
        c.capture_bodies |= self.capture_bodies;
        let t = &mut c.timing;
        set(&mut t.prefill_base_ms, &self.prefill_base_ms);
        set(&mut t.prefill_per_token_ms, &self.prefill_per_token_ms);
        set(&mut t.prefill_lanes, &self.prefill_lanes);
        set(&mut t.decode_ms, &self.decode_ms);
        set(&mut t.decode_slowdown, &self.decode_slowdown);
        t.flush_each_chunk |= self.flush_each_chunk;
        if self.no_cache {
            c.cache.enabled = false;
        }
        set(&mut c.cache.block_tokens, &self.cache_block_tokens);
        set(&mut c.cache.capacity_tokens, &self.cache_capacity_tokens);
        let o = &mut c.output;
        set(&mut o.mean_tokens, &self.output_mean_tokens);
        set(&mut o.sigma, &self.output_sigma);
        set(&mut o.max_tokens, &self.output_max_tokens);
        o.always_max |= self.always_max;
        o.seed_from_prompt |= self.seed_from_prompt;
        let m = &mut c.modes;
        set(&mut m.reasoning_fraction, &self.reasoning_fraction);
        set(&mut m.reasoning_field, &self.reasoning_field);
        set(&mut m.tool_call_rate, &self.tool_call_rate);
        set(&mut m.role_prelude, &self.role_prelude);
        m.prelude_early |= self.prelude_early;
        set(&mut m.tokens_per_chunk, &self.tokens_per_chunk);
        let f = &mut c.faults;
        set(&mut f.error_rate, &self.error_rate);
        set(&mut f.error_statuses, &self.error_statuses);
        set(&mut f.stall_rate, &self.stall_rate);
        set(&mut f.stall_ms, &self.stall_ms);
        set(&mut f.disconnect_rate, &self.disconnect_rate);
        set(&mut f.malformed_rate, &self.malformed_rate);
        c.validate()?;
        Ok(c)
    }
}

/// Runs `tokentap sim` until `shutdown` resolves. Prints `listening on http://ADDR` as the first
/// line of stdout once bound.
pub async fn run(
    opts: Opts,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    run_with(opts, shutdown, |addr| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on http://{addr}");
        let _ = out.flush();
    })
    .await
}

/// [`run`] with a callback instead of the stdout line, for embedding and tests.
pub async fn run_with(
    opts: Opts,
    shutdown: impl std::future::Future<Output = ()>,
    on_listening: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let config = opts.build_config()?;
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .with_context(|| format!("binding {}", opts.listen))?;
    // The CLI keeps no in-memory log: nobody reads it, and over a long benchmark it would hold
    // every chunk stamp. The JSONL chunk log is the record.
    let server = SimServer::start_inner(listener, config, false).await?;
    on_listening(server.addr());
    tracing::info!(addr = %server.addr(), "sim: serving");
    shutdown.await;
    tracing::info!("sim: shutting down");
    server.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        opts: Opts,
    }

    #[test]
    fn flags_override_profile() {
        let dir = tempfile::tempdir().unwrap();
        let profile = dir.path().join("p.json");
        std::fs::write(
            &profile,
            r#"{"seed":3,"timing":{"decode_ms":1.5,"prefill_base_ms":2}}"#,
        )
        .unwrap();
        let cli = Cli::parse_from([
            "x",
            "--profile",
            profile.to_str().unwrap(),
            "--decode-ms",
            "4",
            "--role-prelude",
            "false",
            "--error-statuses",
            "502,504",
            "--reasoning-field",
            "reasoning",
            "--engine-metrics",
            "sglang",
        ]);
        let c = cli.opts.build_config().unwrap();
        assert_eq!(c.seed, 3);
        assert_eq!(c.timing.decode_ms, 4.0);
        assert_eq!(c.timing.prefill_base_ms, 2.0);
        assert!(!c.modes.role_prelude);
        assert_eq!(c.faults.error_statuses, vec![502, 504]);
        assert_eq!(c.modes.reasoning_field, ReasoningField::Reasoning);
        assert_eq!(c.engine_metrics, EngineFlavor::Sglang);
        let c = Cli::parse_from(["x", "--preset", "zero-delay"])
            .opts
            .build_config()
            .unwrap();
        assert!(c.timing.is_zero());
        assert!(Cli::parse_from(["x", "--stall-rate", "2"])
            .opts
            .build_config()
            .is_err());
    }
}
