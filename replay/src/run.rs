//! One run: the dataset loaded and hashed, the configuration bound to it, the declared warmup,
//! the measured phase, and the run directory written (records, `summary.json`, `config.json`,
//! the reference's files, the report); its outcome and exit code.

use crate::config::{Opts, RunConfig};
use crate::error::ReplayError;
use crate::progress::ProgressMode;
use crate::summary::{self, Summary};
use crate::{client, config, metrics, models, phase, rx};
use anyhow::Context as _;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokentap_dataset::Dataset;
use tokentap_mlperf::Verdict;
use tokentap_mlperf::{RefTokenizer, Scorer};
use tokio_util::sync::CancellationToken;

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The run's summary (`summary.json`).
    pub summary: Summary,
    /// Where records.jsonl, summary.json and config.json were written.
    pub out_dir: Option<PathBuf>,
    /// The shutdown future fired before the run ended.
    pub interrupted: bool,
}

/// `tokentap replay` exit codes (errors before or during the run exit 1, from `main`).
pub mod exit {
    /// The run ran, no turn failed or timed out, and the verdict is valid or not evaluated
    /// (`incomplete`, `no_gates`).
    pub const OK: u8 = 0;
    /// The run ran and no turn failed, but the point is invalid.
    pub const INVALID: u8 = 3;
    /// The run ran but turns failed or timed out (takes precedence over [`INVALID`]).
    pub const TURNS_FAILED: u8 = 4;
    /// Stopped by Ctrl-C, SIGTERM or SIGHUP; everything recorded was written.
    pub const INTERRUPTED: u8 = 130;
    /// Records could not be written to `records.jsonl` (`run.records_failed` in
    /// `summary.json`): the run's data is incomplete, whatever else happened. Takes precedence
    /// over every other code, `--exit-zero` included.
    pub const RECORDS_LOST: u8 = 1;
}

impl RunOutcome {
    /// The exit code for this outcome ([`exit`]); `exit_zero` (`--exit-zero`) turns every
    /// outcome of a run that ran, interrupted aside, into 0.
    pub fn exit_code(&self, exit_zero: bool) -> u8 {
        if self.summary.run.records_failed > 0 || self.summary.run.records_error.is_some() {
            return exit::RECORDS_LOST;
        }
        if self.interrupted {
            return exit::INTERRUPTED;
        }
        if exit_zero {
            return exit::OK;
        }
        let bad = |k: &str| self.summary.counts.turns.get(k).copied().unwrap_or(0);
        if bad("failed") + bad("timed_out") > 0 {
            exit::TURNS_FAILED
        } else if self.summary.validity.verdict == Verdict::Invalid {
            exit::INVALID
        } else {
            exit::OK
        }
    }
}

/// Runs a replay until done or until `shutdown` resolves (then: stop issuing, cancel in-flight,
/// write everything recorded). Prints the summary to stdout.
pub async fn run(opts: Opts, shutdown: impl Future<Output = ()>) -> anyhow::Result<RunOutcome> {
    let mut config = opts.resolve()?;
    let (dataset, hash) = load_dataset(&opts.run.dataset_path).await?;
    // The model is discovered and the dataset bound once, by `run_with_hooks`; the hash rides
    // along in the config.
    config.dataset = Some(config::DatasetInfo::of(&dataset, Some(hash)));
    let progress = if opts.run.quiet {
        ProgressMode::Off
    } else {
        ProgressMode::Line
    };
    let outcome = run_with(config, Arc::new(dataset), progress, shutdown).await?;
    print!("{}", outcome.summary.render_text());
    if let Some(d) = &outcome.out_dir {
        println!("records: {}", d.display());
    }
    Ok(outcome)
}

/// Reads and checks a dataset file a line at a time, hashing its bytes as they pass; returns
/// it with its `blake2b-256` hash (recorded in `config.json`).
pub async fn load_dataset(path: &Path) -> anyhow::Result<(Dataset, String)> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let file = std::fs::File::open(&path).map_err(|source| ReplayError::Io {
            what: "cannot read the dataset",
            path: path.clone(),
            source,
        })?;
        let mut hashed = Hashing::new(file);
        let ds = Dataset::from_reader(
            &path,
            std::io::BufReader::with_capacity(256 << 10, &mut hashed),
        )
        .map_err(ReplayError::Dataset)?;
        Ok((ds, hashed.finish()))
    })
    .await
    .context("loading the dataset")?
}

/// A reader that hashes what it reads (BLAKE2b-256).
struct Hashing<R> {
    inner: R,
    hash: blake2::Blake2bVar,
}

impl<R> Hashing<R> {
    fn new(inner: R) -> Self {
        use blake2::digest::VariableOutput;
        // Invariant: 32 is a valid BLAKE2b digest size.
        let hash = blake2::Blake2bVar::new(32).expect("32 is a valid BLAKE2b digest size");
        Hashing { inner, hash }
    }

    /// `blake2b-256:<hex>` of every byte read.
    fn finish(self) -> String {
        use blake2::digest::VariableOutput;
        let mut out = [0u8; 32];
        self.hash
            .finalize_variable(&mut out)
            .expect("buffer has the digest size");
        let mut s = String::from("blake2b-256:");
        for b in out {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }
}

impl<R: std::io::Read> std::io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use blake2::digest::Update;
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// Runs a replay of an already-loaded dataset. Checks the config against the dataset first
/// (nothing is sent if that fails), loads the reference tokenizer if one is given, runs the
/// declared warmup if any, writes `config.json` before the first request and `records.jsonl`,
/// `summary.json`, `result_summary.json` and `scores.json` at the end (also after `shutdown`).
pub async fn run_with(
    config: RunConfig,
    dataset: Arc<Dataset>,
    progress: ProgressMode,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<RunOutcome> {
    run_with_hooks(config, dataset, progress, shutdown, Hooks::default()).await
}

/// Moments of a run an embedding program can wait for (the sweep scrapes the engine's metrics
/// over the measured phase only, the warmup excluded).
#[derive(Debug, Default)]
pub struct Hooks {
    /// Sent just before the measured phase's first request (after the warmup, if any).
    pub measured_start: Option<tokio::sync::oneshot::Sender<()>>,
}

/// [`run_with`], telling `hooks` when the measured phase starts.
pub async fn run_with_hooks(
    mut config: RunConfig,
    dataset: Arc<Dataset>,
    progress: ProgressMode,
    shutdown: impl Future<Output = ()>,
    mut hooks: Hooks,
) -> anyhow::Result<RunOutcome> {
    let Prepared {
        warmup_setup,
        tokenizer,
        scorer,
        target,
    } = prepare(&mut config, &dataset).await?;
    let out_dir = config.out.clone();
    if let Some(dir) = &out_dir {
        write_config(dir, &config)?;
    }
    // Kernel receive timestamps on (and kept on) before the first request is sent.
    let _stamps = if config.kernel_rx_timestamps {
        Some(rx::KernelStamps::enable(std::time::Duration::from_secs(1)).await)
    } else {
        None
    };
    tokio::pin!(shutdown);
    let mut shutdown = phase::Shutdown {
        future: shutdown,
        fired: false,
    };

    let warmup = match warmup_setup {
        Some(setup) => {
            let w = Warmup {
                main: &config,
                dataset: &dataset,
                out_dir: out_dir.as_deref(),
                progress,
            };
            Some(w.run(setup, &target, &mut shutdown).await?)
        }
        None => None,
    };

    // `--metrics`: bound before the first measured turn so a scraper sees the whole run;
    // stopped after the summary is written.
    let metrics_stop = CancellationToken::new();
    // Stops the server on every way out of this function, errors included.
    let _metrics_guard = metrics_stop.clone().drop_guard();
    let client_metrics = match config.metrics {
        Some(addr) => Some(bind_client_metrics(addr, config.model.as_deref()).await?),
        None => None,
    };
    if let Some(tx) = hooks.measured_start.take() {
        let _ = tx.send(());
    }
    let mut ran = phase::Phase {
        config: config.clone(),
        dataset: dataset.clone(),
        records: out_dir
            .as_ref()
            .map(|d| d.join(tokentap_run::files::RECORDS)),
        tokenizer: tokenizer.clone(),
        scorer: Some(scorer.clone()),
        pass_tag: None,
        progress,
    }
    .run(&target, &mut shutdown, client_metrics, &metrics_stop)
    .await?;
    let (interrupted, panicked) = (ran.interrupted, ran.panicked.take());
    let built = build_summary(ran, config, &scorer, tokenizer.as_deref(), warmup, &dataset);
    if let Some(dir) = &out_dir {
        write_results(dir, &built)?;
    }
    let summary = built.summary;
    if let Some(p) = panicked {
        return Err(ReplayError::Internal(format!("a replay slot panicked: {p}")).into());
    }
    Ok(RunOutcome {
        summary,
        out_dir,
        interrupted,
    })
}

/// What a run needs before its first request: the warmup's setup, the tokenizer, the scorer and
/// the resolved target.
struct Prepared {
    warmup_setup: Option<(RunConfig, Arc<Dataset>, String)>,
    tokenizer: Option<Arc<RefTokenizer>>,
    scorer: Arc<Scorer>,
    target: client::Target,
}

/// Discovers the model and binds the dataset into `config`, then sets up the warmup, loads the
/// tokenizer, builds the scorer and resolves the endpoints (nothing is sent if any fails).
async fn prepare(config: &mut RunConfig, dataset: &Arc<Dataset>) -> anyhow::Result<Prepared> {
    let hash = config.dataset.as_ref().and_then(|d| d.hash.clone());
    models::discover(config, dataset).await?;
    config.bind_dataset(dataset, hash)?;
    let warmup_setup = if config.warmup.enabled() {
        Some(warmup_config(config, dataset).await?)
    } else {
        None
    };
    let tokenizer = match &config.tokenizer {
        Some(dir) => Some(load_tokenizer(dir.clone()).await?),
        None => None,
    };
    let scorer = Arc::new(Scorer::new(dataset));
    let target = client::Target::resolve(
        &config.endpoints,
        &config.routing_headers,
        config.api_key.as_ref().map(|k| k.expose()),
        &config.trust(),
        config.protocols,
    )
    .await?;
    Ok(Prepared {
        warmup_setup,
        tokenizer,
        scorer,
        target,
    })
}

/// Builds the run's summary (and the files beside it) from the measured phase.
fn build_summary(
    ran: phase::Ran,
    config: RunConfig,
    scorer: &Scorer,
    tokenizer: Option<&RefTokenizer>,
    warmup: Option<summary::WarmupDeclaration>,
    dataset: &Dataset,
) -> summary::Built {
    summary::build(
        ran.agg,
        config,
        summary::RunFacts {
            start: ran.start,
            end: ran.end,
            interrupted: ran.interrupted,
            stopped_by: ran.stopped_by,
            window_closed: ran.window_closed,
            last_claim: ran.last_claim,
            budget_local: ran.budget_local,
            trajectories_started: ran.trajectories_started,
            trajectories_finished: ran.trajectories_finished,
            scores: ran.scores.finish(scorer),
            tokenizer: tokenizer.map(|t| {
                let (n, first) = t.fallbacks();
                (t.dir().display().to_string(), n, first)
            }),
            warmup,
            dataset_size: dataset.conversations.len() as u64,
            row_overrides: row_overrides(dataset),
        },
    )
}

/// Loads `--tokenizer` off the async threads; warns when the chat template cannot render the
/// empty assistant frame (tool-call outputs are then counted with the frame, as the reference
/// does).
async fn load_tokenizer(dir: std::path::PathBuf) -> anyhow::Result<Arc<RefTokenizer>> {
    let tok = tokio::task::spawn_blocking(move || RefTokenizer::load(&dir))
        .await
        .context("loading the tokenizer")?
        .map_err(|e| ReplayError::Config(format!("--tokenizer: {e}")))?;
    if let Some(e) = tok.baseline_error() {
        tracing::warn!("the chat template cannot render the empty assistant frame ({e}); tool-call outputs are counted with the frame, as the reference does");
    }
    Ok(Arc::new(tok))
}

/// `--metrics`: the listener (bound now, served by the measured phase) and the client's
/// series, the model's label preset.
async fn bind_client_metrics(
    addr: std::net::SocketAddr,
    model: Option<&str>,
) -> anyhow::Result<(tokio::net::TcpListener, Arc<metrics::ClientMetrics>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics: cannot listen on {addr}"))?;
    tracing::info!(
        "client metrics on http://{}/metrics",
        listener.local_addr().map_or(addr, |a| a)
    );
    let m = metrics::ClientMetrics::new();
    if let Some(model) = model {
        m.preset_model(model);
    }
    Ok((listener, Arc::new(m)))
}

/// `summary.json`, `result_summary.json`, `scores.json`, then `report.html` — a view of the
/// files just written: a failure to draw it must not fail a run whose records are safe on
/// disk, so it is logged, not returned.
fn write_results(dir: &std::path::Path, built: &summary::Built) -> anyhow::Result<()> {
    write_json(dir, tokentap_run::files::SUMMARY, &built.summary)?;
    write_text(
        dir,
        tokentap_run::files::RESULT_SUMMARY,
        &built.result_summary.to_file_text(),
    )?;
    write_text(
        dir,
        tokentap_run::files::SCORES,
        &built.scores.to_file_text(),
    )?;
    if let Err(e) = tokentap_report::write_html(dir) {
        tracing::warn!("report.html not written: {e}");
    }
    Ok(())
}

/// The warmup phase, run before the measured one and excluded from every result.
struct Warmup<'a> {
    main: &'a RunConfig,
    dataset: &'a Dataset,
    out_dir: Option<&'a std::path::Path>,
    progress: ProgressMode,
}

impl Warmup<'_> {
    /// Runs the warmup (its own records in `warmup.jsonl`, its own pass tag) and declares it.
    async fn run<F: Future<Output = ()>>(
        &self,
        (wcfg, wds, source): (RunConfig, Arc<Dataset>, String),
        target: &client::Target,
        shutdown: &mut phase::Shutdown<'_, F>,
    ) -> anyhow::Result<summary::WarmupDeclaration> {
        if self.progress == ProgressMode::Line {
            eprintln!(
                "warmup: {source}, concurrency {} (excluded from every result)",
                wcfg.concurrency
            );
        }
        // A run extended to its minimum duration may take more passes than its budget.
        let max_pass = self
            .main
            .budget(self.dataset)
            .div_ceil(self.dataset.conversations.len().max(1) as u64)
            + if self.main.min_duration_scale.is_some() {
                64
            } else {
                0
            };
        let concurrency = wcfg.concurrency;
        let records = self
            .out_dir
            .map(|d| d.join(tokentap_run::files::WARMUP_RECORDS));
        let ran = phase::Phase {
            config: wcfg,
            dataset: wds,
            records: records.clone(),
            tokenizer: None,
            scorer: None,
            pass_tag: Some(phase::warmup_tag(max_pass.min(u64::from(u32::MAX)) as u32)),
            progress: self.progress,
        }
        .run(target, shutdown, None, &CancellationToken::new())
        .await?;
        let a = &ran.agg;
        let aborted = a.by_status[tokentap_core::record::Status::Aborted.index()];
        Ok(summary::WarmupDeclaration {
            duration_s: ran.end.mono_ns.saturating_sub(ran.start.mono_ns) as f64 / 1e9,
            requests_issued: a.records - aborted,
            requests_completed: a.by_status[0],
            trajectories: ran.trajectories_started,
            source,
            concurrency,
            records: records.map(|p| p.display().to_string()),
        })
    }
}

/// The warmup phase's config and dataset, and where its requests come from. Warmup requests
/// are always salted, with a tag of their own (checked against the dataset's system prompts
/// here, before anything is sent).
async fn warmup_config(
    config: &RunConfig,
    perf: &Arc<Dataset>,
) -> anyhow::Result<(RunConfig, Arc<Dataset>, String)> {
    let w = &config.warmup;
    let (ds, source) = match &w.dataset {
        Some(path) => {
            let p = path.clone();
            let ds = tokio::task::spawn_blocking(move || -> anyhow::Result<Dataset> {
                Ok(Dataset::load(&p).map_err(ReplayError::Dataset)?)
            })
            .await
            .context("loading the warmup dataset")??;
            (
                Arc::new(ds),
                format!("{} (salted with its own tag)", path.display()),
            )
        }
        None => (
            perf.clone(),
            "the performance dataset (salted with its own tag)".to_string(),
        ),
    };
    let mut c = config.clone();
    c.concurrency = config.warmup_concurrency();
    // A duration alone: as many trajectories as fit.
    c.trajectories = Some(w.trajectories.unwrap_or(u64::MAX / 4));
    c.max_duration = w.duration;
    c.salt = true;
    c.stop_issuing_on_first_user_complete = false;
    c.shard = config::Shard::default();
    c.metrics = None;
    c.out = None;
    c.warmup = config::Warmup::default();
    c.dataset = None;
    c.bind_dataset(&ds, None)
        .map_err(|e| anyhow::anyhow!("warmup: {e}"))?;
    Ok((c, ds, source))
}

/// Sampling fields that dataset client rows override (other than `model`).
fn row_overrides(ds: &Dataset) -> Vec<String> {
    let mut keys = std::collections::BTreeSet::new();
    for c in &ds.conversations {
        for r in c.rows.iter().filter(|r| r.role.is_client()) {
            for k in r.overrides.keys().filter(|k| k.as_str() != "model") {
                keys.insert(k.clone());
            }
        }
    }
    keys.into_iter().collect()
}

pub(crate) fn write_text(dir: &Path, name: &str, text: &str) -> Result<(), ReplayError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|source| ReplayError::Io {
        what: "cannot write",
        path,
        source,
    })
}

fn write_config(dir: &Path, config: &RunConfig) -> Result<(), ReplayError> {
    std::fs::create_dir_all(dir).map_err(|source| ReplayError::Io {
        what: "cannot create the output directory",
        path: dir.to_path_buf(),
        source,
    })?;
    write_json(dir, tokentap_run::files::CONFIG, config)
}

pub(crate) fn write_json(
    dir: &Path,
    name: &str,
    v: &impl serde::Serialize,
) -> Result<(), ReplayError> {
    let mut text = serde_json::to_string_pretty(v)
        .map_err(|e| ReplayError::Internal(format!("serializing {name}: {e}")))?;
    text.push('\n');
    write_text(dir, name, &text)
}
