//! `tokentap` — one binary. `main` parses options, builds the runtime, calls the subcommand's
//! library `run(opts, shutdown)` and maps the outcome to an exit code; `demo` is the demo and
//! `shutdown` the Ctrl-C / SIGTERM future every long-running command gets.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod demo;
mod shutdown;

/// Measure multi-turn agentic LLM inference from the wire.
///
/// tokentap replays MLPerf Agentic Inference trajectories exactly as the benchmark defines them
/// (closed loop, salting, delays, performance window), runs a simulated OpenAI-compatible server
/// so everything works without a GPU, and measures every streamed token: TTFT, ITL, TPOT, E2E and
/// KV-cache reuse, turn by turn.
#[derive(Parser, Debug)]
#[command(
    name = "tokentap",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info` or `tokentap_replay=debug`.
    #[arg(long, global = true, env = "TOKENTAP_LOG", default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the demo: replay of a small synthetic dataset through the proxy to the simulated
    /// server, with live progress, the summary, client vs wire, and an HTML report. No arguments
    /// needed; takes under a minute.
    Demo(demo::Opts),
    /// Replay agentic trajectories against an OpenAI-compatible endpoint (MLPerf closed loop).
    /// Exit 0 ran cleanly (valid or not evaluated), 3 invalid point, 4 turns failed, 130
    /// interrupted, 1 error; --exit-zero for 0 whenever it ran.
    Replay(Box<tokentap_replay::Opts>),
    /// Run the benchmark as a curve: one replay per concurrency, placed in the MLPerf regions
    /// (C_min/C_max), judged as a Pareto curve, plotted. Exit 0 valid, 3 not valid, 130 Ctrl-C.
    Sweep(Box<tokentap_sweep::Opts>),
    /// Join the run directories of the shards of one run (`replay --shard I/N` on N machines)
    /// into that run: one window, exact percentiles from the union, accuracy, validity, report.
    /// Exit codes as `replay`'s. Sweep directories (`sweep --shard I/N --barrier DIR`) are
    /// joined point by point into one curve (exit codes as `sweep`'s).
    Merge(Box<tokentap_replay::merge::MergeOpts>),
    /// Run the measurement proxy in front of one or more OpenAI-compatible servers.
    Proxy(Box<tokentap_proxy::Config>),
    /// Run the simulated OpenAI-compatible server (prefill, decode, prefix KV cache, faults).
    Sim(Box<tokentap_sim::Opts>),
    /// Validate, describe or synthesize MLPerf agentic datasets (JSONL).
    #[command(subcommand)]
    Dataset(tokentap_dataset::cli::DatasetCommand),
    /// Check a benchmark client's timing claims against what the proxy saw on the wire.
    Compare(Box<tokentap_compare::Opts>),
    /// The submission tree the official MLPerf checker reads: a submitter file's template, or
    /// the tree of a finished sweep (`tokentap sweep --submission DIR` writes it as it goes).
    #[command(subcommand)]
    Submission(tokentap_submission::cli::Command),
    /// Render a replay run directory or a sweep directory as one self-contained HTML report (or
    /// --format md|json).
    Report(Box<tokentap_report::Opts>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();

    exit(run(cli.command))
}

/// `tokentap submission`; `write` also judges the curve again from the sweep's files (the points
/// it wrote), so a tree and its verdict never disagree.
fn submission(cmd: tokentap_submission::cli::Command) -> anyhow::Result<i32> {
    let tokentap_submission::cli::Command::Write(o) = &cmd else {
        return tokentap_submission::cli::run(cmd);
    };
    let sweep_dir = o.sweep.clone();
    let code = tokentap_submission::cli::run(cmd)?;
    let mut f = tokentap_sweep::SweepFile::load(&sweep_dir)?;
    f.judge();
    print!("{}", tokentap_sweep::report::verdict_text(&f));
    Ok(if f.verdict.verdict.as_str() == "invalid" {
        code.max(tokentap_submission::cli::EXIT_MISSING)
    } else {
        code
    })
}

/// Every subcommand the same way: its exit code, or an error (exit 1). The ones that read files
/// run without a runtime; the long-running ones get one and the shutdown signal.
fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Dataset(cmd) => {
            let hooks = tokentap_dataset::cli::Hooks {
                tokenizer: &|dir| {
                    let t = tokentap_mlperf::tokenizer::RefTokenizer::load(dir)?;
                    Ok(Box::new(ModelTokens(t)) as Box<dyn tokentap_dataset::capture::Tokens>)
                },
                html: &|a, b| tokentap_report::dataset::comparison_html(a, b),
            };
            tokentap_dataset::cli::run(cmd, &hooks)
        }
        Command::Submission(cmd) => submission(cmd),
        Command::Compare(opts) => tokentap_compare::run(*opts),
        Command::Merge(opts) => merge(&opts),
        Command::Report(opts) => report(*opts),
        Command::Demo(opts) => block_on(|| demo::run(opts, shutdown::signal())),
        Command::Replay(opts) => block_on(|| async move {
            let exit_zero = opts.run.exit_zero;
            let outcome = tokentap_replay::run(*opts, shutdown::signal()).await?;
            Ok(i32::from(outcome.exit_code(exit_zero)))
        }),
        Command::Sweep(opts) => block_on(|| tokentap_sweep::run(*opts, shutdown::signal())),
        Command::Proxy(opts) => block_on(|| async move {
            tokentap_proxy::run(*opts, shutdown::signal()).await?;
            Ok(0)
        }),
        Command::Sim(opts) => block_on(|| async move {
            tokentap_sim::run(*opts, shutdown::signal()).await?;
            Ok(0)
        }),
    }
}

/// Runs `f`'s future on a multi-thread runtime built for it (the signal handlers of
/// [`shutdown::signal`] are registered inside it, before the command starts).
fn block_on<F, Fut>(f: F) -> anyhow::Result<i32>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<i32>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async move { f().await })
}

/// `tokentap merge`: the run directories of a run's shards, or a sharded sweep's directories.
fn merge(opts: &tokentap_replay::merge::MergeOpts) -> anyhow::Result<i32> {
    if opts.dirs.iter().any(|d| tokentap_sweep::merge::is_sweep(d)) {
        return tokentap_sweep::merge::run(opts);
    }
    let outcome = tokentap_replay::merge::merge(opts)?;
    print!("{}", outcome.summary.render_text());
    Ok(i32::from(outcome.exit_code(false)))
}

/// `tokentap report`: a sweep directory, or a run (with `--wire`, compared with the wire first).
fn report(opts: tokentap_report::Opts) -> anyhow::Result<i32> {
    if tokentap_sweep::report::is_sweep(&opts.run_dir) {
        return tokentap_sweep::report::run(&opts);
    }
    if !opts.wire.is_empty() {
        compare_run(&opts)?;
    }
    tokentap_report::run(opts)
}

fn exit(result: anyhow::Result<i32>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("error: {}", chain(&e));
            ExitCode::from(1)
        }
    }
}

/// An error and its causes, each said once.
fn chain(e: &anyhow::Error) -> String {
    tokentap_core::error::report(e.as_ref())
}

/// `tokentap report RUN_DIR --wire DIR…`: the run's records against the proxies' (one wire view),
/// left in `RUN_DIR/compare.json` for the report's client-vs-wire section.
fn compare_run(opts: &tokentap_report::Opts) -> anyhow::Result<()> {
    use tokentap_compare::{client::Clock, Format};
    let mut c = tokentap_compare::Opts::new(
        Format::Tokentap,
        opts.run_dir.join(tokentap_run::files::RECORDS),
        opts.wire.clone(),
    );
    // Several proxies are several hosts: only the wall clock compares across them.
    if opts.wire.len() > 1 {
        c.clock = Some(Clock::Wall);
    }
    let report = tokentap_compare::compare(&c)?;
    let path = opts.run_dir.join(tokentap_run::files::COMPARE);
    let mut text = serde_json::to_string_pretty(&report)?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    eprintln!(
        "client vs wire: {} ({} of {} turns joined) → {}",
        report.verdict.as_str(),
        report.counts.joined,
        report.counts.client_turns,
        path.display()
    );
    Ok(())
}

/// The model's tokenizer counting plain text, for `dataset capture --anonymize`.
struct ModelTokens(tokentap_mlperf::tokenizer::RefTokenizer);

impl tokentap_dataset::capture::Tokens for ModelTokens {
    fn count(&self, text: &str) -> u64 {
        self.0.count_text(text)
    }
    fn describe(&self) -> String {
        format!("the tokenizer in {}", self.0.dir().display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::time::Duration;

    /// What each command needs before any other option parses.
    fn required(command: &str) -> Vec<&'static str> {
        match command {
            "replay" => vec!["--endpoint", "http://a:1", "--dataset", "d.jsonl"],
            "sweep" => vec![
                "--endpoint",
                "http://a:1",
                "--dataset",
                "d.jsonl",
                "--out",
                "o",
            ],
            "proxy" => vec!["--upstream", "http://a:1"],
            "compare" => vec!["--wire", "w", "--client", "c", "--format", "tokentap"],
            "merge" => vec!["a", "--out", "o"],
            "report" => vec!["run"],
            _ => vec![],
        }
    }

    /// The duration `command --flag value` parses to, if `flag` is a duration option there.
    fn duration(command: &str, flag: &str, id: &str, value: &str) -> Option<Duration> {
        let mut argv = vec!["tokentap", command];
        argv.extend(required(command));
        argv.extend([flag, value]);
        let m = Cli::command().try_get_matches_from(argv).ok()?;
        let (_, sub) = m.subcommand()?;
        sub.try_get_one::<Duration>(id).ok().flatten().copied()
    }

    /// Every duration option of every command reads its value the same way — humantime or a
    /// number with a unit, and a bare number as seconds — and says `DURATION` in its help.
    #[test]
    fn durations_parse_the_same_on_every_command() {
        let mut seen = Vec::new();
        for sub in Cli::command().get_subcommands() {
            let name = sub.get_name();
            for arg in sub.get_arguments() {
                let Some(long) = arg.get_long() else {
                    continue;
                };
                let flag = format!("--{long}");
                let id = arg.get_id().as_str();
                let Some(bare) = duration(name, &flag, id, "1.5") else {
                    continue;
                };
                assert_eq!(bare, Duration::from_millis(1500), "{name} {flag} 1.5");
                for same in ["1500ms", "1.5s", "1500000us"] {
                    assert_eq!(
                        duration(name, &flag, id, same),
                        Some(bare),
                        "{name} {flag} {same}"
                    );
                }
                assert_eq!(
                    duration(name, &flag, id, "1m30s"),
                    Some(Duration::from_secs(90)),
                    "{name} {flag} 1m30s"
                );
                let names: Vec<_> = arg.get_value_names().unwrap_or_default().to_vec();
                assert_eq!(names, ["DURATION"], "{name} {flag}: its value name");
                seen.push(format!("{name} {flag}"));
            }
        }
        // 3 replay, 4 sweep, 9 proxy, 4 sim, 3 compare, 1 demo.
        assert_eq!(seen.len(), 24, "{seen:?}");
        // Every command that takes a duration is covered.
        for want in [
            "replay --turn-timeout",
            "sweep --engine-interval",
            "proxy --grace",
            "sim --decode",
            "compare --join-window",
            "demo --decode",
        ] {
            assert!(seen.iter().any(|s| s == want), "{want} not seen: {seen:?}");
        }
    }
}
