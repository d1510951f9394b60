//! `tokentap demo`: the main job on the embedded default, with no arguments.
//!
//! Starts the simulated server on loopback (a timing model scaled so the whole run takes about a
//! minute, with decode slowing as more requests share the "GPU" and two prefill lanes, so the
//! throughput–interactivity trade-off is visible) and the measurement proxy in front of it,
//! synthesizes a small dataset with both trajectory shapes (the sim answers each turn with the
//! dataset's recorded assistant message), and runs a small sweep through the
//! proxy: one replay per concurrency (salting and scaled delays on), with the engine's metrics
//! scraped per point. It ends with the curve in the terminal, the proxy's view (the wire) next
//! to the client's, and the HTML sweep report. Everything goes to `--out` (default
//! `./tokentap-demo`): the dataset, the proxy's records, the sweep (`sweep/`, one `r<C>/` per
//! point).

use anyhow::Context as _;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::stats::Samples;
use tokentap_dataset::synth::{synth, SynthConfig, SynthSummary};
use tokentap_proxy::{Proxy, ShutdownReport};
use tokentap_sim::{SimConfig, SimServer};
use tokentap_sweep::SweepFile;

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// The sweep's points: active conversations (closed-loop slots) per point.
    #[arg(long, value_delimiter = ',', num_args = 1, default_value = "1,2,4,8")]
    pub concurrency: Vec<usize>,
    /// Coding trajectories to synthesize (deep, tool calls, growing context).
    #[arg(long, default_value_t = 4)]
    pub coding: usize,
    /// Workflow trajectories to synthesize (shallow, large shared system prompt).
    #[arg(long, default_value_t = 16)]
    pub workflow: usize,
    /// Size multiplier for the synthetic dataset.
    #[arg(long, default_value_t = 0.3)]
    pub scale: f64,
    /// Multiplier applied to the dataset's inter-turn delays.
    #[arg(long, default_value_t = 0.1)]
    pub delay_scale: f64,
    /// Simulated decode time per output token, one request alone (a duration).
    #[arg(long, value_name = "DURATION", default_value = "2ms",
        value_parser = tokentap_core::duration::parse)]
    pub decode: std::time::Duration,
    /// Where the dataset, records and the sweep go.
    #[arg(long, default_value = "tokentap-demo")]
    pub out: PathBuf,
    /// Seed for the dataset and the simulated server.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The simulated server's settings for the demo: a small, fast "GPU" whose decode slows by
/// 12 % per extra concurrent request and which prefills two requests at a time.
fn sim_config(opts: &Opts) -> SimConfig {
    let mut c = SimConfig::realistic();
    c.seed = opts.seed;
    c.timing.prefill_base_ms = 8.0;
    c.timing.prefill_per_token_ms = 0.004;
    c.timing.prefill_lanes = 2;
    c.timing.decode_ms = opts.decode.as_nanos() as f64 / 1e6;
    c.timing.decode_slowdown = 0.12;
    c.output.mean_tokens = 96.0;
    c.output.max_tokens = 256;
    c
}

pub async fn run(
    opts: Opts,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<i32> {
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    let dataset_path = opts.out.join("dataset.jsonl");
    let made = write_dataset(&opts, &dataset_path)?;
    let (sim, proxy, proxy_dir) = start_servers(&opts, &dataset_path).await?;
    let points: Vec<String> = opts.concurrency.iter().map(usize::to_string).collect();
    print_setup(
        &opts,
        &dataset_path,
        &made,
        &sim,
        &proxy,
        &proxy_dir,
        &points,
    );

    let out_sweep = opts.out.join("sweep");
    // A rerun of the demo is a new sweep, not a resumed one.
    let _ = std::fs::remove_dir_all(&out_sweep);
    let args = sweep_args(&opts, &dataset_path, &sim, &proxy, &points, &out_sweep);
    let sweep_opts = tokentap_sweep::Opts::try_parse_from_args(&args)
        .map_err(|e| anyhow::anyhow!("building the demo's sweep options: {e}"))?;
    let sweep = tokentap_sweep::Sweep::from_opts(&sweep_opts).await?;
    println!("{}", sweep.plan.describe());
    let outcome = tokentap_sweep::run_with(sweep, shutdown).await;
    proxy.flush_records().await;
    let wire = proxy.records();
    let report = proxy.shutdown(Duration::from_secs(5)).await;
    sim.shutdown().await;
    let outcome = outcome?;
    // The proxy's records are complete now: put the wire beside every point.
    let file = match tokentap_sweep::attach_wire(&out_sweep, std::slice::from_ref(&proxy_dir)) {
        Ok(f) => f,
        Err(e) => {
            eprintln!(
                "warning: the wire's view was not attached: {}",
                tokentap_core::error::report(e.as_ref())
            );
            outcome.file.clone()
        }
    };
    println!("\n{}", tokentap_sweep::report::terminal(&file));
    print_last_point(&file, &out_sweep, &wire)?;
    print_proxy_report(&report);
    println!(
        "report: {} (open it in a browser; each point links its own)",
        out_sweep.join("report.html").display()
    );
    println!(
        "\nThe simulated server is not a real model and the demo is a tuning sweep (scaled delays,\n\
         one pass per point), so the verdict above is expected. Point `tokentap sweep --endpoint`\n\
         at a real server next, with --c-min/--c-max and a model preset."
    );
    Ok(if outcome.interrupted { 130 } else { 0 })
}

/// Synthesizes the demo's dataset (both trajectory shapes) into `path`.
fn write_dataset(opts: &Opts, path: &Path) -> anyhow::Result<SynthSummary> {
    let synth_cfg = SynthConfig {
        seed: opts.seed,
        coding: opts.coding,
        workflow: opts.workflow,
        scale: opts.scale,
        ..SynthConfig::default()
    };
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let made = synth(&synth_cfg, &mut w).context("synthesizing the demo dataset")?;
    std::io::Write::flush(&mut w).context("writing the demo dataset")?;
    drop(w);
    Ok(made)
}

/// Starts the simulated server (answering from the dataset) and the proxy in front of it,
/// writing its records to a fresh `proxy/`; returns both and that directory.
async fn start_servers(
    opts: &Opts,
    dataset_path: &Path,
) -> anyhow::Result<(SimServer, Proxy, PathBuf)> {
    // The sim answers every turn with the dataset's recorded assistant message, as a model that
    // agrees with the dataset would: inline accuracy and output lengths are the recording's.
    let mut sim_cfg = sim_config(opts);
    sim_cfg.answer_from = Some(dataset_path.to_path_buf());
    let sim = SimServer::start(sim_cfg)
        .await
        .context("starting the simulated server")?;
    let proxy_dir = opts.out.join("proxy");
    // A rerun starts the wire's view afresh (the proxy appends new files otherwise).
    let _ = std::fs::remove_dir_all(&proxy_dir);
    let mut proxy_cfg = tokentap_proxy::Config::new([sim.base_url()]);
    proxy_cfg.records_dir = Some(proxy_dir.clone());
    proxy_cfg.keep_records = true;
    let proxy = match Proxy::start(proxy_cfg).await {
        Ok(p) => p,
        Err(e) => {
            sim.shutdown().await;
            return Err(e).context("starting the proxy");
        }
    };
    Ok((sim, proxy, proxy_dir))
}

/// Prints what the demo set up: the dataset, the server, the proxy and the sweep's points.
fn print_setup(
    opts: &Opts,
    dataset_path: &Path,
    made: &SynthSummary,
    sim: &SimServer,
    proxy: &Proxy,
    proxy_dir: &Path,
    points: &[String],
) {
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
        "  server    simulated, {} (prefill + decode model, prefix KV cache, vLLM metrics)",
        sim.base_url()
    );
    println!(
        "  proxy     {} (admin {}), records in {}",
        proxy.base_url(),
        proxy.admin_addr(),
        proxy_dir.display()
    );
    println!(
        "  sweep     concurrency {}, one pass of the dataset per point, salting on, delays ×{}\n",
        points.join(", "),
        opts.delay_scale
    );
}

/// The demo's sweep command line: through the proxy, salting and scaled delays on, one pass per
/// point, the sim's metrics scraped.
fn sweep_args(
    opts: &Opts,
    dataset_path: &Path,
    sim: &SimServer,
    proxy: &Proxy,
    points: &[String],
    out_sweep: &Path,
) -> Vec<String> {
    vec![
        "--endpoint".into(),
        proxy.base_url(),
        "--dataset".into(),
        dataset_path.display().to_string(),
        "--concurrency".into(),
        points.join(","),
        "--salt".into(),
        "--delays".into(),
        "--delay-scale".into(),
        opts.delay_scale.to_string(),
        "--include-usage".into(),
        "--model".into(),
        "tokentap-sim".into(),
        // A tuning sweep: one pass per point, not the rules' 10–20 minutes.
        "--min-duration-scale".into(),
        "0".into(),
        "--engine-metrics".into(),
        format!("{}/metrics", sim.base_url()),
        "--engine-interval".into(),
        "2s".into(),
        "--out".into(),
        out_sweep.display().to_string(),
    ]
}

/// Prints the client's and the wire's view of the last finished point, if there is one.
fn print_last_point(file: &SweepFile, out_sweep: &Path, wire: &[TurnRecord]) -> anyhow::Result<()> {
    if let Some(last) = file.points.iter().rev().find(|p| p.done()) {
        let client = read_records(&out_sweep.join(&last.dir).join(tokentap_run::files::RECORDS))?;
        let wire = tokentap_sweep::wire::in_span(
            wire,
            last.started_wall_ns.unwrap_or(0),
            last.ended_wall_ns.unwrap_or(u64::MAX),
        );
        println!(
            "at concurrency {}: {}",
            last.concurrency,
            client_vs_wire(&client, &wire)
        );
    }
    Ok(())
}

/// Prints what the proxy saw and wrote, and what it lost, if anything.
fn print_proxy_report(report: &ShutdownReport) {
    println!(
        "proxy: {} requests seen, {} records written{}",
        report.seen,
        report.written,
        if report.lost() > 0 {
            format!(
                ", {} LOST ({} dropped, {} not written: {})",
                report.lost(),
                report.dropped,
                report.failed,
                report.last_error.as_deref().unwrap_or("-")
            )
        } else {
            String::new()
        }
    );
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

/// The client's and the wire's view of the same turns (the wire's completed turns of the point,
/// keyed by session id and turn index within it). The difference is what the client adds on top
/// of what crossed the wire: its own send and receive path plus one loopback hop each way.
fn client_vs_wire(client: &[TurnRecord], wire: &HashMap<(&str, u32), &TurnRecord>) -> String {
    let (mut ttft_c, mut ttft_w, mut ttft_d) = (Samples::new(), Samples::new(), Samples::new());
    let (mut e2e_c, mut e2e_w, mut e2e_d) = (Samples::new(), Samples::new(), Samples::new());
    let mut joined = 0;
    for c in client.iter().filter(|r| r.status == Status::Ok) {
        let Some(w) = c
            .conversation_id
            .as_deref()
            .and_then(|id| wire.get(&(id, c.turn_index)))
        else {
            continue;
        };
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
