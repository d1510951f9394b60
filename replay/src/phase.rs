//! One phase of a run: the declared warmup, then the measured run. Each has its own slots,
//! trajectory FIFO, post-processing pool, collector and records file; they share the target,
//! the kernel-stamp setting and the stop signal.

use crate::client::Target;
use crate::collector::{self, Aggregate, Msg};
use crate::config::RunConfig;
use crate::driver::{self, StopReason};
use crate::error::ReplayError;
use crate::metrics::{self, ClientMetrics};
use crate::post;
use crate::progress::{self, Counters, ProgressMode};
use crate::salt::Tag;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokentap_core::clock::{Anchor, MonoNs};
use tokentap_dataset::Dataset;
use tokentap_mlperf::tokenizer::PromptMemos;
use tokentap_mlperf::{RefTokenizer, ScoreSet, Scorer};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What a phase runs.
pub(crate) struct Phase {
    pub config: RunConfig,
    pub dataset: Arc<Dataset>,
    pub records: Option<PathBuf>,
    pub tokenizer: Option<Arc<RefTokenizer>>,
    /// `None`: not scored (the warmup).
    pub scorer: Option<Arc<Scorer>>,
    pub pass_tag: Option<Tag>,
    pub progress: ProgressMode,
}

/// What a phase produced.
pub(crate) struct Ran {
    pub agg: Aggregate,
    pub start: Anchor,
    pub end: Anchor,
    pub interrupted: bool,
    pub stopped_by: Option<StopReason>,
    pub window_closed: Option<MonoNs>,
    /// When the last trajectory was claimed.
    pub last_claim: Option<MonoNs>,
    pub budget_local: u64,
    pub trajectories_started: u64,
    pub trajectories_finished: u64,
    pub scores: ScoreSet,
    pub panicked: Option<String>,
}

/// The shutdown signal, shared by the phases: it can fire only once.
pub(crate) struct Shutdown<'a, F: Future<Output = ()>> {
    pub future: Pin<&'a mut F>,
    pub fired: bool,
}

impl Phase {
    /// Runs to the end of the budget, `max_duration`, or shutdown (then: stop issuing, cancel
    /// in-flight, drain). Everything recorded is in the returned aggregate.
    pub async fn run<F: Future<Output = ()>>(
        self,
        target: &Target,
        shutdown: &mut Shutdown<'_, F>,
        client_metrics: Option<(tokio::net::TcpListener, Arc<ClientMetrics>)>,
        metrics_stop: &CancellationToken,
    ) -> Result<Ran, ReplayError> {
        let counters = Arc::new(Counters::default());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let collector = self.spawn_collector(rx, &counters);
        let post_tx = self.start_post(tx);
        let metrics = serve_metrics(client_metrics, &counters, metrics_stop);
        let start = Anchor::now();
        let print_progress = self.progress == ProgressMode::Line;
        let (concurrency, max_duration) = (self.config.concurrency, self.config.max_duration);
        let run = Arc::new(self.driver_run(target, post_tx, &counters, metrics));
        let printer_done = CancellationToken::new();
        let printer = print_progress.then(|| {
            tokio::spawn(progress::print(
                counters.clone(),
                run.budget_handle(),
                start.mono_ns,
                printer_done.clone(),
            ))
        });
        let (interrupted, panicked) = drive_slots(&run, concurrency, max_duration, shutdown).await;
        let window_closed = run.window_closed_at();
        let last_claim = run.last_claim_at();
        let stopped_by = run.stop_reason.get().copied();
        let budget_local = run.budget_local();
        // Dropping the last `Run` drops the job sender: the pool drains, then the collector.
        drop(run);
        let mut agg = collector
            .await
            .map_err(|e| ReplayError::Internal(format!("collector: {e}")))?;
        printer_done.cancel();
        if let Some(p) = printer {
            let _ = p.await;
        }
        let end = Anchor::now();
        let scores = std::mem::take(&mut agg.reference.scores);
        Ok(Ran {
            agg,
            start,
            end,
            interrupted,
            stopped_by,
            window_closed,
            last_claim,
            budget_local,
            trajectories_started: counters.trajectories_started.load(Relaxed),
            trajectories_finished: counters.trajectories_done.load(Relaxed),
            scores,
            panicked,
        })
    }

    /// Starts the phase's collector on a blocking thread: it writes the records file and keeps
    /// the aggregate until every sender is dropped.
    fn spawn_collector(
        &self,
        rx: UnboundedReceiver<Msg>,
        counters: &Arc<Counters>,
    ) -> JoinHandle<Aggregate> {
        let counters = counters.clone();
        let scorer = self.scorer.clone();
        let path = self.records.clone();
        tokio::task::spawn_blocking(move || {
            collector::collect(rx, path.as_deref(), counters, scorer)
        })
    }

    /// Starts the phase's post-processing pool in front of the collector; returns its job sender.
    fn start_post(&self, tx: UnboundedSender<Msg>) -> std::sync::mpsc::Sender<post::Job> {
        post::start(
            Arc::new(post::Ctx {
                tokenizer: self.tokenizer.clone(),
                scorer: self.scorer.clone(),
                record_outputs: self.config.record_outputs && self.scorer.is_some(),
                // Every slot's trajectory keeps its memo: 16 MiB each holds a prompt of about
                // 4 MB of text (a million-token context) with its messages.
                memos: parking_lot::Mutex::new(PromptMemos::with_max_bytes(
                    PromptMemos::<post::Segments>::MAX_BYTES
                        .max(self.config.concurrency.saturating_mul(16 << 20)),
                )),
            }),
            tx,
            post::threads(self.tokenizer.is_some()),
        )
    }

    /// The driver's run of this phase: what it captures and keeps, how it scores and salts.
    fn driver_run(
        self,
        target: &Target,
        post_tx: std::sync::mpsc::Sender<post::Job>,
        counters: &Arc<Counters>,
        metrics: Option<Arc<ClientMetrics>>,
    ) -> driver::Run {
        let capture_all = self.tokenizer.is_some() || self.config.record_outputs;
        let mut driver_run = driver::Run::new(
            self.config,
            self.dataset,
            target.clone(),
            post_tx,
            counters.clone(),
        );
        driver_run.metrics = metrics;
        driver_run.capture_all = capture_all;
        driver_run.keep_bodies = self.tokenizer.is_some();
        driver_run.scorer = self.scorer;
        driver_run.pass_tag = self.pass_tag;
        driver_run
    }
}

/// Serves the client's metrics on their listener, when asked for, until `metrics_stop`.
fn serve_metrics(
    client_metrics: Option<(tokio::net::TcpListener, Arc<ClientMetrics>)>,
    counters: &Arc<Counters>,
    metrics_stop: &CancellationToken,
) -> Option<Arc<ClientMetrics>> {
    client_metrics.map(|(listener, m)| {
        tokio::spawn(metrics::serve(
            listener,
            m.clone(),
            counters.clone(),
            metrics_stop.clone(),
        ));
        m
    })
}

/// Runs `concurrency` slots to their end, stopping them at shutdown (which also cancels what is
/// in flight) or at `max_duration`; returns whether shutdown interrupted the phase and the first
/// slot's panic.
async fn drive_slots<F: Future<Output = ()>>(
    run: &Arc<driver::Run>,
    concurrency: usize,
    max_duration: Option<Duration>,
    shutdown: &mut Shutdown<'_, F>,
) -> (bool, Option<String>) {
    let mut interrupted = shutdown.fired;
    if interrupted {
        run.stop(StopReason::Shutdown);
        run.cancel.cancel();
    }
    let mut slots = tokio::task::JoinSet::new();
    for i in 0..concurrency {
        slots.spawn(driver::slot(run.clone(), i as u32));
    }
    let mut panicked = None;
    let max_sleep = async move {
        match max_duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(max_sleep);
    let mut max_fired = false;
    loop {
        tokio::select! {
            joined = slots.join_next() => match joined {
                None => break,
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    panicked.get_or_insert(e.to_string());
                    run.stop(StopReason::Shutdown);
                }
            },
            _ = &mut shutdown.future, if !shutdown.fired => {
                shutdown.fired = true;
                interrupted = true;
                run.stop(StopReason::Shutdown);
                run.cancel.cancel();
            }
            _ = &mut max_sleep, if !max_fired => {
                max_fired = true;
                run.stop(StopReason::MaxDuration);
            }
        }
    }
    (interrupted, panicked)
}

/// The warmup's salt tag: `warmup` hashed, or `warmup-N` for the first N whose tag differs from
/// every pass tag the measured run can use (a shared tag would let cache entries carry over).
pub(crate) fn warmup_tag(max_pass: u32) -> Tag {
    let passes: Vec<Tag> = (1..=max_pass.max(1)).map(Tag::of_pass).collect();
    let mut name = "warmup".to_string();
    let mut i = 0;
    loop {
        let t = Tag::of(&name);
        if !passes.contains(&t) {
            return t;
        }
        i += 1;
        name = format!("warmup-{i}");
    }
}
