//! `tokentap demo`: the main job on the embedded default, with no arguments.
//!
//! Starts the simulated server on loopback (a timing model scaled so the whole run takes about a
//! minute), synthesizes a small dataset with both trajectory shapes, and replays it with salting
//! and (scaled) delays on, showing live progress and the summary. Everything it writes goes to
//! `--out` (default `./tokentap-demo`): the dataset, the replay's records and summary.

use anyhow::Context as _;
use std::future::Future;
use std::path::PathBuf;
use tokentap_dataset::synth::{synth, SynthConfig};
use tokentap_sim::{SimConfig, SimServer};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Active conversations (closed-loop slots).
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Coding trajectories to synthesize (deep, tool calls, growing context).
    #[arg(long, default_value_t = 6)]
    pub coding: usize,
    /// Workflow trajectories to synthesize (shallow, large shared system prompt).
    #[arg(long, default_value_t = 26)]
    pub workflow: usize,
    /// Size multiplier for the synthetic dataset.
    #[arg(long, default_value_t = 0.3)]
    pub scale: f64,
    /// Multiplier applied to the dataset's inter-turn delays.
    #[arg(long, default_value_t = 0.05)]
    pub delay_scale: f64,
    /// Simulated decode time per output token, ms.
    #[arg(long, default_value_t = 2.0)]
    pub decode_ms: f64,
    /// Where the dataset, records and summary go.
    #[arg(long, default_value = "tokentap-demo")]
    pub out: PathBuf,
    /// Seed for the dataset and the simulated server.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The simulated server's settings for the demo: a small, fast "GPU".
fn sim_config(opts: &Opts) -> SimConfig {
    let mut c = SimConfig::realistic();
    c.seed = opts.seed;
    c.timing.prefill_base_ms = 8.0;
    c.timing.prefill_per_token_ms = 0.004;
    c.timing.decode_ms = opts.decode_ms;
    c.output.mean_tokens = 96.0;
    c.output.max_tokens = 256;
    c
}

pub async fn run(opts: Opts, shutdown: impl Future<Output = ()>) -> anyhow::Result<i32> {
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let dataset_path = opts.out.join("dataset.jsonl");
    let synth_cfg = SynthConfig {
        seed: opts.seed,
        coding: opts.coding,
        workflow: opts.workflow,
        scale: opts.scale,
        ..SynthConfig::default()
    };
    let file = std::fs::File::create(&dataset_path)
        .with_context(|| format!("creating {}", dataset_path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let made = synth(&synth_cfg, &mut w).context("synthesizing the demo dataset")?;
    std::io::Write::flush(&mut w).context("writing the demo dataset")?;
    drop(w);

    let sim = SimServer::start(sim_config(&opts)).await.context("starting the simulated server")?;
    println!("tokentap demo");
    println!(
        "  dataset   {} ({} trajectories: {} coding, {} workflow; {} client turns)",
        dataset_path.display(),
        made.trajectories,
        made.coding,
        made.workflow,
        made.client_turns
    );
    println!("  server    simulated, {} (prefill + decode model, prefix KV cache)", sim.base_url());
    println!(
        "  replay    closed loop, {} conversations, salting on, delays ×{}\n",
        opts.concurrency, opts.delay_scale
    );

    let out_run = opts.out.join("run");
    let args: Vec<String> = vec![
        "--endpoint".into(),
        sim.base_url(),
        "--dataset".into(),
        dataset_path.display().to_string(),
        "--concurrency".into(),
        opts.concurrency.to_string(),
        "--salt".into(),
        "--delays".into(),
        "--delay-scale".into(),
        opts.delay_scale.to_string(),
        "--include-usage".into(),
        "--model".into(),
        "tokentap-sim".into(),
        "--out".into(),
        out_run.display().to_string(),
    ];
    let replay_opts = tokentap_replay::Opts::try_parse_from_args(&args)
        .map_err(|e| anyhow::anyhow!("building the demo's replay options: {e}"))?;
    let outcome = tokentap_replay::run(replay_opts, shutdown).await;
    sim.shutdown().await;
    let outcome = outcome?;
    println!(
        "\nThe simulated server is not a real model, so the accuracy gates cannot pass: the\n\
         verdict above is expected. Point `tokentap replay --endpoint` at a real server next."
    );
    Ok(if outcome.interrupted { 130 } else { 0 })
}
