//! `tokentap demo`: the main job on the embedded default, with no arguments.
//!
//! Starts the simulated server on loopback (a timing model scaled so the whole run takes about a
//! minute) and the measurement proxy in front of it, synthesizes a small dataset with both
//! trajectory shapes, and replays it through the proxy with salting and (scaled) delays on,
//! showing live progress and the summary. Then it puts the proxy's view (the wire) next to the
//! client's, turn by turn. Everything it writes goes to `--out` (default `./tokentap-demo`): the
//! dataset, the replay's records and summary, the proxy's records.

use anyhow::Context as _;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::stats::Samples;
use tokentap_dataset::synth::{synth, SynthConfig};
use tokentap_proxy::Proxy;
use tokentap_sim::{SimConfig, SimServer};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// Active conversations (closed-loop slots).
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Coding trajectories to synthesize (deep, tool calls, growing context).
    #[arg(long, default_value_t = 8)]
    pub coding: usize,
    /// Workflow trajectories to synthesize (shallow, large shared system prompt).
    #[arg(long, default_value_t = 48)]
    pub workflow: usize,
    /// Size multiplier for the synthetic dataset.
    #[arg(long, default_value_t = 0.3)]
    pub scale: f64,
    /// Multiplier applied to the dataset's inter-turn delays.
    #[arg(long, default_value_t = 0.1)]
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

    let sim = SimServer::start(sim_config(&opts))
        .await
        .context("starting the simulated server")?;
    let mut proxy_cfg = tokentap_proxy::Config::new([sim.base_url()]);
    proxy_cfg.records_dir = Some(opts.out.join("proxy"));
    proxy_cfg.keep_records = true;
    let proxy = match Proxy::start(proxy_cfg).await {
        Ok(p) => p,
        Err(e) => {
            sim.shutdown().await;
            return Err(e).context("starting the proxy");
        }
    };
    println!("tokentap demo");
    println!(
        "  dataset   {} ({} trajectories: {} coding, {} workflow; {} client turns)",
        dataset_path.display(),
        made.trajectories,
        made.coding,
        made.workflow,
        made.client_turns
    );
    println!(
        "  server    simulated, {} (prefill + decode model, prefix KV cache)",
        sim.base_url()
    );
    println!(
        "  proxy     {} (admin {}), records in {}",
        proxy.base_url(),
        proxy.admin_addr(),
        opts.out.join("proxy").display()
    );
    println!(
        "  replay    closed loop, {} conversations, salting on, delays ×{}\n",
        opts.concurrency, opts.delay_scale
    );

    let out_run = opts.out.join("run");
    let args: Vec<String> = vec![
        "--endpoint".into(),
        proxy.base_url(),
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
    let wire = proxy.records();
    let report = proxy.shutdown(Duration::from_secs(5)).await;
    sim.shutdown().await;
    let outcome = outcome?;
    if let Some(dir) = &outcome.out_dir {
        let client = read_records(&dir.join("records.jsonl"))?;
        println!("\n{}", client_vs_wire(&client, &wire));
    }
    println!(
        "proxy: {} requests seen, {} records written{}",
        report.seen,
        report.written,
        if report.dropped > 0 {
            format!(", {} DROPPED", report.dropped)
        } else {
            String::new()
        }
    );
    if let Some(dir) = &outcome.out_dir {
        println!(
            "report: {} (open it in a browser)",
            dir.join("report.html").display()
        );
    }
    println!(
        "\nThe simulated server is not a real model, so the accuracy gates cannot pass: the\n\
         verdict above is expected. Point `tokentap replay --endpoint` at a real server next."
    );
    Ok(if outcome.interrupted { 130 } else { 0 })
}

fn read_records(path: &Path) -> anyhow::Result<Vec<TurnRecord>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: not a turn record", path.display(), i + 1))
        })
        .collect()
}

/// The client's and the wire's view of the same turns, joined by session id and turn index.
/// The difference is what the client adds on top of what crossed the wire: its own send and
/// receive path plus one loopback hop each way.
fn client_vs_wire(client: &[TurnRecord], wire: &[TurnRecord]) -> String {
    let key = |r: &TurnRecord| (r.conversation_id.clone(), r.turn_index);
    let wire: HashMap<_, _> = wire
        .iter()
        .filter(|r| r.status == Status::Ok)
        .map(|r| (key(r), r))
        .collect();
    let (mut ttft_c, mut ttft_w, mut ttft_d) = (Samples::new(), Samples::new(), Samples::new());
    let (mut e2e_c, mut e2e_w, mut e2e_d) = (Samples::new(), Samples::new(), Samples::new());
    let mut joined = 0;
    for c in client.iter().filter(|r| r.status == Status::Ok) {
        let Some(w) = wire.get(&key(c)) else { continue };
        joined += 1;
        let ms = |ns: u64| ns as f64 / 1e6;
        if let (Some(a), Some(b)) = (c.measured.ttft_ns, w.measured.ttft_ns) {
            ttft_c.push(ms(a));
            ttft_w.push(ms(b));
            ttft_d.push(ms(a) - ms(b));
        }
        if let (Some(a), Some(b)) = (c.measured.e2e_ns, w.measured.e2e_ns) {
            e2e_c.push(ms(a));
            e2e_w.push(ms(b));
            e2e_d.push(ms(a) - ms(b));
        }
    }
    let mut out = format!(
        "client vs wire ({joined} of {} client turns joined to a proxy record)\n{:<8}{:>12}{:>12}{:>18}{:>18}\n",
        client.len(),
        "(ms)",
        "client p50",
        "wire p50",
        "client−wire p50",
        "client−wire p99"
    );
    for (name, c, w, d) in [
        ("TTFT", &mut ttft_c, &mut ttft_w, &mut ttft_d),
        ("E2E", &mut e2e_c, &mut e2e_w, &mut e2e_d),
    ] {
        let q =
            |s: &mut Samples, p: f64| s.quantile(p).map_or("-".to_string(), |v| format!("{v:.3}"));
        out += &format!(
            "{:<8}{:>12}{:>12}{:>18}{:>18}\n",
            name,
            q(c, 0.5),
            q(w, 0.5),
            q(d, 0.5),
            q(d, 0.99)
        );
    }
    out
}
