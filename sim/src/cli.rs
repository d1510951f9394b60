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
use std::time::Duration;
use tokentap_core::duration::parse;
use tokentap_core::value::{non_negative, share};

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
    /// Answer each turn of this MLPerf agentic dataset with its recorded assistant message
    /// (reasoning, content, tool calls) instead of filler; other requests get filler.
    #[arg(long, env = "TOKENTAP_SIM_ANSWER_FROM", value_name = "DATASET")]
    pub answer_from: Option<PathBuf>,
    /// Seed of all random draws.
    #[arg(long, env = "TOKENTAP_SIM_SEED")]
    pub seed: Option<u64>,
    /// Model name served (listed at /v1/models); a request for another model gets 404, as from
    /// vLLM, unless --any-model.
    #[arg(long, env = "TOKENTAP_SIM_MODEL")]
    pub model: Option<String>,
    /// Answer requests for any model name, not only --model's.
    #[arg(long, env = "TOKENTAP_SIM_ANY_MODEL")]
    pub any_model: bool,
    /// Keep the exact request bodies in the request log.
    #[arg(long, env = "TOKENTAP_SIM_CAPTURE_BODIES")]
    pub capture_bodies: bool,
    /// Engine whose metric names `GET /metrics` serves (`vllm:*`, `sglang:*`, or `trtllm_*`, then
    /// also at `/prometheus/metrics` as trtllm-serve serves them).
    #[arg(long, env = "TOKENTAP_SIM_ENGINE_METRICS", value_enum)]
    pub engine_metrics: Option<EngineFlavor>,

    // Timing. Durations as on every command: `20ms`, `50us`, `1.5s`; a bare number is seconds.
    /// Fixed prefill time (e.g. 20ms).
    #[arg(long, value_name = "DURATION", env = "TOKENTAP_SIM_PREFILL_BASE", value_parser = parse,
        help_heading = "Timing")]
    pub prefill_base: Option<Duration>,
    /// Prefill time per uncached prompt token (e.g. 50us).
    #[arg(long, value_name = "DURATION", env = "TOKENTAP_SIM_PREFILL_PER_TOKEN",
        value_parser = parse, help_heading = "Timing")]
    pub prefill_per_token: Option<Duration>,
    /// Concurrent prefills (0 = unlimited; otherwise requests queue for a lane).
    #[arg(long, env = "TOKENTAP_SIM_PREFILL_LANES", help_heading = "Timing")]
    pub prefill_lanes: Option<u32>,
    /// Decode time per token with one request decoding (e.g. 8ms).
    #[arg(long, value_name = "DURATION", env = "TOKENTAP_SIM_DECODE", value_parser = parse,
        help_heading = "Timing")]
    pub decode: Option<Duration>,
    /// Decode slowdown per extra concurrent decode (0.05 = +5 %).
    #[arg(long, env = "TOKENTAP_SIM_DECODE_SLOWDOWN", value_parser = non_negative,
        help_heading = "Timing")]
    pub decode_slowdown: Option<f64>,
    /// Write every chunk on its own (zero-delay mode otherwise batches ready chunks per write).
    #[arg(long, env = "TOKENTAP_SIM_FLUSH_EACH_CHUNK", help_heading = "Timing")]
    pub flush_each_chunk: bool,

    // Cache.
    /// Disable the prefix KV cache.
    #[arg(long, env = "TOKENTAP_SIM_NO_CACHE", help_heading = "Prefix cache")]
    pub no_cache: bool,
    /// Tokens per KV block (at least 1).
    #[arg(long, env = "TOKENTAP_SIM_CACHE_BLOCK_TOKENS",
        value_parser = clap::value_parser!(u32).range(1..), help_heading = "Prefix cache")]
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
    #[arg(long, env = "TOKENTAP_SIM_OUTPUT_MEAN_TOKENS", value_parser = non_negative,
        help_heading = "Output")]
    pub output_mean_tokens: Option<f64>,
    /// Lognormal sigma of output lengths (0 = fixed length).
    #[arg(long, env = "TOKENTAP_SIM_OUTPUT_SIGMA", value_parser = non_negative,
        help_heading = "Output")]
    pub output_sigma: Option<f64>,
    /// Output cap when a request sets no max tokens (at least 1).
    #[arg(long, env = "TOKENTAP_SIM_OUTPUT_MAX_TOKENS",
        value_parser = clap::value_parser!(u64).range(1..), help_heading = "Output")]
    pub output_max_tokens: Option<u64>,
    /// Always generate exactly the max tokens.
    #[arg(long, env = "TOKENTAP_SIM_ALWAYS_MAX", help_heading = "Output")]
    pub always_max: bool,
    /// Seed outputs from the prompt instead of the arrival order.
    #[arg(long, env = "TOKENTAP_SIM_SEED_FROM_PROMPT", help_heading = "Output")]
    pub seed_from_prompt: bool,

    // Modes.
    /// Fraction of output streamed as reasoning first (0 = none; up to 1).
    #[arg(long, env = "TOKENTAP_SIM_REASONING_FRACTION", value_parser = share,
        help_heading = "Modes")]
    pub reasoning_fraction: Option<f64>,
    /// Reasoning delta field name.
    #[arg(
        long,
        env = "TOKENTAP_SIM_REASONING_FIELD",
        value_enum,
        help_heading = "Modes"
    )]
    pub reasoning_field: Option<ReasoningField>,
    /// Share of chat responses that are one tool call (0 to 1): to a tool the request offers,
    /// with arguments its schema takes (a shell tool preferred, so an agent runs a command).
    #[arg(long, env = "TOKENTAP_SIM_TOOL_CALL_RATE", value_parser = share, help_heading = "Modes")]
    pub tool_call_rate: Option<f64>,
    /// An agent's loop: a tool call on every new prompt, an answer after its result (instead of
    /// --tool-call-rate). For running real agents against the sim.
    #[arg(
        long,
        env = "TOKENTAP_SIM_TOOL_CALL_PER_PROMPT",
        help_heading = "Modes"
    )]
    pub tool_call_per_prompt: bool,
    /// Role-only prelude chunk first (true/false).
    #[arg(long, env = "TOKENTAP_SIM_ROLE_PRELUDE", help_heading = "Modes")]
    pub role_prelude: Option<bool>,
    /// Send the prelude at once instead of with the first token.
    #[arg(long, env = "TOKENTAP_SIM_PRELUDE_EARLY", help_heading = "Modes")]
    pub prelude_early: bool,
    /// Tokens per streamed chunk (at least 1).
    #[arg(long, env = "TOKENTAP_SIM_TOKENS_PER_CHUNK",
        value_parser = clap::value_parser!(u32).range(1..), help_heading = "Modes")]
    pub tokens_per_chunk: Option<u32>,

    // Faults.
    /// Share of requests answered with an error status (0 to 1).
    #[arg(long, env = "TOKENTAP_SIM_ERROR_RATE", value_parser = share, help_heading = "Faults")]
    pub error_rate: Option<f64>,
    /// Error statuses to draw from (400–599), comma separated.
    #[arg(long, env = "TOKENTAP_SIM_ERROR_STATUSES", value_delimiter = ',',
        value_parser = clap::value_parser!(u16).range(400..=599), help_heading = "Faults")]
    pub error_statuses: Option<Vec<u16>>,
    /// Share of streams that stall once (0 to 1).
    #[arg(long, env = "TOKENTAP_SIM_STALL_RATE", value_parser = share, help_heading = "Faults")]
    pub stall_rate: Option<f64>,
    /// Stall length (e.g. 2s; kept to the millisecond).
    #[arg(long, value_name = "DURATION", env = "TOKENTAP_SIM_STALL", value_parser = parse,
        help_heading = "Faults")]
    pub stall: Option<Duration>,
    /// Share of streams cut mid-way (0 to 1).
    #[arg(long, env = "TOKENTAP_SIM_DISCONNECT_RATE", value_parser = share,
        help_heading = "Faults")]
    pub disconnect_rate: Option<f64>,
    /// Share of streams with one malformed event (0 to 1).
    #[arg(long, env = "TOKENTAP_SIM_MALFORMED_RATE", value_parser = share,
        help_heading = "Faults")]
    pub malformed_rate: Option<f64>,
}

/// A duration as the profile's milliseconds.
fn ms(d: &Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_nanos() as f64 / 1e6)
}

impl Opts {
    /// The configuration these options describe: profile (or preset), then flags. The
    /// defaults live in one place, the presets of [`SimConfig`]; a flag only overrides. Flags
    /// are checked by their value parsers; [`SimConfig::validate`] checks what a profile file
    /// brings (and what only the whole config can say, such as statuses with a zero rate).
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
        c.refuse_other_models = !self.any_model;
        set(&mut c.engine_metrics, &self.engine_metrics);
        if self.chunk_log.is_some() {
            c.chunk_log = self.chunk_log.clone();
        }
        if self.answer_from.is_some() {
            c.answer_from = self.answer_from.clone();
        }
        c.capture_bodies |= self.capture_bodies;
        let t = &mut c.timing;
        set(&mut t.prefill_base_ms, &ms(&self.prefill_base));
        set(&mut t.prefill_per_token_ms, &ms(&self.prefill_per_token));
        set(&mut t.prefill_lanes, &self.prefill_lanes);
        set(&mut t.decode_ms, &ms(&self.decode));
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
        if self.tool_call_per_prompt {
            m.tool_call_per_prompt = true;
        }
        set(&mut m.role_prelude, &self.role_prelude);
        m.prelude_early |= self.prelude_early;
        set(&mut m.tokens_per_chunk, &self.tokens_per_chunk);
        let f = &mut c.faults;
        set(&mut f.error_rate, &self.error_rate);
        set(&mut f.error_statuses, &self.error_statuses);
        set(&mut f.stall_rate, &self.stall_rate);
        set(&mut f.stall_ms, &self.stall.map(|d| d.as_millis() as u64));
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
    let shared = server.shared_state();
    server.shutdown().await;
    // Every request the sim served is in the chunk log, or the run says it is not.
    if let (Some(path), Some(why)) = (&opts.chunk_log, shared.log.failure()) {
        anyhow::bail!("--chunk-log {}: {why}", path.display());
    }
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

    /// A chunk log that cannot be written (`/dev/full`: every write fails) ends the run with an
    /// error naming the file and the lines lost, instead of a log silently cut.
    #[tokio::test]
    async fn a_chunk_log_that_fails_is_an_error_at_the_end() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let cli = Cli::parse_from([
            "x",
            "--listen",
            "127.0.0.1:0",
            "--chunk-log",
            "/dev/full",
            "--decode",
            "0",
            "--prefill-base",
            "0",
            "--prefill-per-token",
            "0",
            "--output-mean-tokens",
            "4",
        ]);
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(run_with(
            cli.opts,
            async {
                let _ = stop_rx.await;
            },
            move |a| {
                let _ = addr_tx.send(a);
            },
        ));
        let addr = addr_rx.await.unwrap();
        for _ in 0..2 {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            let body = r#"{"model":"tokentap-sim","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
            let req = format!(
                "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            c.write_all(req.as_bytes()).await.unwrap();
            let mut out = Vec::new();
            c.read_to_end(&mut out).await.unwrap();
            assert!(
                out.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&out)
            );
        }
        stop_tx.send(()).unwrap();
        let err = run.await.unwrap().unwrap_err().to_string();
        assert!(
            err.contains("--chunk-log /dev/full") && err.contains("2 request lines not written"),
            "{err}"
        );
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
            "--decode",
            "4ms",
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
        // Refused by the flag's value parser now, before the config is built.
        assert!(Cli::try_parse_from(["x", "--stall-rate", "2"]).is_err());
    }

    #[test]
    fn durations_take_units_and_bare_seconds() {
        let c = Cli::parse_from(["x", "--decode", "8ms", "--prefill-per-token", "50us"]);
        let b = c.opts.build_config().unwrap();
        assert_eq!(b.timing.decode_ms, 8.0);
        assert_eq!(b.timing.prefill_per_token_ms, 0.05);
        // A bare number is seconds, as on every other command.
        let c = Cli::parse_from(["x", "--decode", "0.0015", "--stall", "2"]);
        let b = c.opts.build_config().unwrap();
        assert!((b.timing.decode_ms - 1.5).abs() < 1e-9);
        assert_eq!(b.faults.stall_ms, 2000);
        // The old `-ms` names are gone.
        assert!(Cli::try_parse_from(["x", "--decode-ms", "1"]).is_err());
        assert!(Cli::try_parse_from(["x", "--stall-ms", "1"]).is_err());
        for bad in [
            &["x", "--stall-rate", "2"][..],
            &["x", "--decode=-1"],
            &["x", "--tokens-per-chunk", "0"],
            &["x", "--error-statuses", "200"],
        ] {
            let e = Cli::try_parse_from(bad.iter())
                .err()
                .expect("refused by the value parser");
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{bad:?}");
        }
    }
}
