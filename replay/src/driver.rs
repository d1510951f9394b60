//! The closed loop of docs/benchmark.md#load: slots, the trajectory FIFO, delays, timeouts, the
//! performance window, and stopping.
//!
//! ```text
//!            next: AtomicU64 (FIFO claim counter)
//!                 │ claim k = j·shards + shard
//!   slot 0 ─┐     ▼
//!   slot 1 ─┼─► trajectory k: conversation k mod N, pass k div N + 1
//!   ...     │     for each client turn: [delay] → build body → exchange → record ──► collector
//!   slot C ─┘     (a failed/timed-out turn aborts the rest of the trajectory)
//! ```
//!
//! Each slot is one task with its own connection; it holds at most one request in flight, and
//! takes the next trajectory the moment its current one ends. Claims are a single atomic
//! increment, so the k-th trajectory started is the k-th claim, exactly the FIFO numbering of
//! docs/benchmark.md#load; with `--shard I/N` a process claims only k ≡ I (mod N), so N processes
//! together issue exactly the single-process set.
//!
//! Performance window: open from the run's start. The first time a slot that has just finished a
//! trajectory finds nothing left to claim, the window closes (and, with
//! `--stop-issuing-on-first-user-complete`, issuing stops). A turn is in the window when it is
//! issued while the window is open. `--max-duration` and shutdown also stop issuing.
//!
//! Stopping: "stop issuing" (a token) ends delays early and turns every turn not yet sent into an
//! `aborted` record; "cancel" (shutdown only) also drops the in-flight request, whose record is
//! `cancelled` with whatever had arrived.

use crate::client::{self, Conn, Exchange, Scratch, Target};
use crate::config::RunConfig;
use crate::post::Job;
use crate::progress::Counters;
use crate::request::{BodyBuilder, RequestSettings};
use crate::salt::Tag;
use http::HeaderValue;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokentap_core::clock::{self, Anchor, MonoNs};
use tokentap_core::record::{ErrorKind, ErrorSource, Origin, Status, TurnError, TurnRecord};
use tokentap_core::timeline::Timeline;
use tokentap_dataset::{Conversation, Dataset};
use tokentap_mlperf::Scorer;
use tokio_util::sync::CancellationToken;

pub use tokentap_run::summary::StopReason;

/// State shared by the slots of one run.
pub(crate) struct Run {
    pub cfg: RunConfig,
    pub settings: RequestSettings,
    pub dataset: Arc<Dataset>,
    pub target: Target,
    /// Trajectories this process (shard) issues; grows by whole passes of the dataset while
    /// `extend_until` has not passed.
    budget_local: Arc<AtomicU64>,
    /// `--min-duration-scale`: keep issuing whole passes until this instant.
    extend_until: Option<MonoNs>,
    next: AtomicU64,
    window_open: AtomicBool,
    /// Monotonic ns at which the window closed (0 = still open).
    window_closed: AtomicU64,
    /// Monotonic ns of the newest successful claim: at the end, when the budget was exhausted
    /// (what `tokentap merge` needs to close the union's window by the single-machine rule).
    last_claim: AtomicU64,
    pub stop_issuing: CancellationToken,
    pub cancel: CancellationToken,
    pub stop_reason: OnceLock<StopReason>,
    /// Finished turns go to the post-processing pool (counts, score), then to the collector.
    pub post: std::sync::mpsc::Sender<Job>,
    pub counters: Arc<Counters>,
    /// Capture every turn's output (a tokenizer counts it); else only scorable turns'.
    pub capture_all: bool,
    /// Keep each request body for its ISL count.
    pub keep_bodies: bool,
    pub scorer: Option<Arc<Scorer>>,
    /// The warmup salts every request with this pass tag instead of the pass number's.
    pub pass_tag: Option<Tag>,
    /// `--metrics`: the live client-side registry (observed after each turn's stamps).
    pub metrics: Option<Arc<crate::metrics::ClientMetrics>>,
    expected_chunks: usize,
}

impl Run {
    pub fn new(
        cfg: RunConfig,
        dataset: Arc<Dataset>,
        target: Target,
        post: std::sync::mpsc::Sender<Job>,
        counters: Arc<Counters>,
    ) -> Run {
        let budget = cfg.budget(&dataset);
        let (i, n) = (cfg.shard.index, cfg.shard.count);
        let budget_local = if budget > i {
            (budget - i).div_ceil(n)
        } else {
            0
        };
        let extend_until = cfg
            .min_duration()
            .map(|d| clock::now().saturating_add(d.as_nanos().min(u128::from(u64::MAX)) as u64));
        Run {
            settings: RequestSettings::from(&cfg),
            expected_chunks: cfg.max_tokens_hint(),
            cfg,
            dataset,
            target,
            budget_local: Arc::new(AtomicU64::new(budget_local)),
            extend_until,
            next: AtomicU64::new(0),
            window_open: AtomicBool::new(true),
            window_closed: AtomicU64::new(0),
            last_claim: AtomicU64::new(0),
            stop_issuing: CancellationToken::new(),
            cancel: CancellationToken::new(),
            stop_reason: OnceLock::new(),
            post,
            counters,
            metrics: None,
            capture_all: false,
            keep_bodies: false,
            scorer: None,
            pass_tag: None,
        }
    }

    /// Stops issuing (the first reason given is kept) and closes the window.
    pub fn stop(&self, why: StopReason) {
        let _ = self.stop_reason.set(why);
        self.close_window();
        self.stop_issuing.cancel();
    }

    fn close_window(&self) {
        if self.window_open.swap(false, Relaxed) {
            self.window_closed.store(clock::now(), Relaxed);
            if let Some(m) = &self.metrics {
                m.window_closed();
            }
        }
    }

    /// When the window closed, if it did.
    pub fn window_closed_at(&self) -> Option<MonoNs> {
        match self.window_closed.load(Relaxed) {
            0 => None,
            t => Some(t),
        }
    }

    /// When the last trajectory was claimed (the budget exhausted, once issuing has ended).
    pub fn last_claim_at(&self) -> Option<MonoNs> {
        match self.last_claim.load(Relaxed) {
            0 => None,
            t => Some(t),
        }
    }

    /// Trajectories this process issues (so far: it grows while the minimum duration runs).
    pub fn budget_local(&self) -> u64 {
        self.budget_local.load(Relaxed)
    }

    /// The live budget, for the progress line.
    pub fn budget_handle(&self) -> Arc<AtomicU64> {
        self.budget_local.clone()
    }

    /// Local claim → global FIFO number. Past the budget, before `extend_until`, the budget
    /// grows by one whole pass of the dataset (so the total stays a multiple of it).
    fn claim(&self) -> Option<u64> {
        let j = self.next.fetch_add(1, Relaxed);
        loop {
            let b = self.budget_local.load(Relaxed);
            if j < b {
                self.last_claim.fetch_max(clock::now(), Relaxed);
                return Some(j * self.cfg.shard.count + self.cfg.shard.index);
            }
            match self.extend_until {
                Some(t) if clock::now() < t => {
                    let pass = self.dataset.conversations.len() as u64;
                    // Concurrent claims past the end extend once: the loser re-reads.
                    let _ =
                        self.budget_local
                            .compare_exchange(b, b + pass.max(1), Relaxed, Relaxed);
                }
                _ => return None,
            }
        }
    }
}

/// One slot: takes trajectories from the FIFO until none is left or issuing stops.
pub(crate) async fn slot(run: Arc<Run>, slot: u32) {
    let mut conn = Conn::new(run.cfg.kernel_rx_timestamps);
    let mut scratch = Scratch::default();
    let mut finished_one = false;
    loop {
        if run.stop_issuing.is_cancelled() {
            break;
        }
        let Some(k) = run.claim() else {
            if finished_one {
                // "The first user has completed its last trajectory" (docs/benchmark.md#window).
                run.close_window();
                if run.cfg.stop_issuing_on_first_user_complete {
                    run.stop(StopReason::FirstUserComplete);
                }
            }
            break;
        };
        if run.stop_issuing.is_cancelled() {
            break;
        }
        trajectory(&run, slot, k, &mut conn, &mut scratch).await;
        finished_one = true;
    }
}

/// Identity of one trajectory, copied into each of its records.
struct Traj<'a> {
    conv: &'a Conversation,
    k: u64,
    pass: u32,
    slot: u32,
    logical: String,
    /// The dataset rows the client sends, in order.
    turns: Vec<usize>,
}

impl<'a> Traj<'a> {
    /// Trajectory `k` of the run: conversation `k mod n`, pass `k div n + 1` (a repeat gets
    /// the logical id `ID__repeat_P`).
    fn new(run: &'a Run, k: u64, slot: u32) -> Traj<'a> {
        let ds = &run.dataset;
        let n = ds.conversations.len() as u64;
        let conv = &ds.conversations[(k % n) as usize];
        let pass = (k / n + 1) as u32;
        Traj {
            conv,
            k,
            pass,
            slot,
            logical: if pass == 1 {
                conv.id.clone()
            } else {
                format!("{}__repeat_{pass}", conv.id)
            },
            turns: conv.client_turns().collect(),
        }
    }

    /// The turn's key in the reference's scores: source id, repeat (pass), client row's turn.
    fn key(&self, row: usize) -> tokentap_mlperf::scorer::TurnKey {
        (self.conv.id.clone(), self.pass, self.conv.rows[row].turn)
    }

    fn record(&self, ti: usize, row: usize, anchor: Anchor) -> TurnRecord {
        let mut r = TurnRecord::new(Origin::Replay, anchor);
        r.conversation_id = Some(self.logical.clone());
        r.source_conversation_id = Some(self.conv.id.clone());
        r.pass = Some(self.pass);
        r.turn_index = ti as u32;
        r.dataset_turn = Some(self.conv.rows[row].turn);
        r.trajectory = Some(self.k);
        r.slot = Some(self.slot);
        r.stream = Some(true);
        r
    }

    /// Records every turn from `from` on as aborted with `error` (nothing of them is sent).
    fn abort_from(&self, run: &Run, from: usize, error: TurnError) {
        for (ti, &row) in self.turns.iter().enumerate().skip(from) {
            let mut r = self.record(ti, row, Anchor::now());
            r.status = Status::Aborted;
            r.error = Some(error.clone());
            r.in_window = Some(run.window_open.load(Relaxed));
            r.end_ns = Some(0);
            send(
                run,
                Job {
                    record: r,
                    output: None,
                    complete_output: false,
                    body: None,
                    key: self.key(row),
                    last: ti + 1 == self.turns.len(),
                },
            );
        }
    }
}

/// What every turn of a trajectory shares: its session header, its endpoint, its body builder.
struct Setup<'a> {
    session: HeaderValue,
    /// The conversation's endpoint (rendezvous over `--endpoint`s), for all its turns.
    endpoint: usize,
    builder: BodyBuilder<'a>,
}

impl<'a> Setup<'a> {
    fn new(run: &'a Run, t: &Traj<'a>) -> Result<Setup<'a>, TurnError> {
        // Conversation ids are printable ASCII (checked when the dataset loads), so this cannot
        // fail for a loaded dataset; a failure is still recorded rather than trusted away.
        let session = HeaderValue::from_str(&t.logical)
            .map_err(|e| crate::response::internal(ErrorKind::SessionHeader, format!("{e}")))?;
        let built = match run.pass_tag {
            Some(tag) => BodyBuilder::with_pass_tag(t.conv, &run.settings, tag),
            None => BodyBuilder::new(t.conv, &run.settings, t.pass),
        };
        let builder =
            built.map_err(|e| crate::response::internal(ErrorKind::Build, e.to_string()))?;
        Ok(Setup {
            session,
            endpoint: run.target.pick(&t.logical),
            builder,
        })
    }
}

/// Records the trajectory's unrecorded turns as aborted if the task unwinds from a panic (a
/// bug, never an outcome): whatever went wrong, every turn of a started trajectory has a record.
struct PanicGuard<'a, 'b> {
    run: &'a Run,
    t: &'a Traj<'b>,
    /// Turns `next..` have no record yet.
    next: usize,
}

impl Drop for PanicGuard<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.t.abort_from(
                self.run,
                self.next,
                crate::response::internal(
                    ErrorKind::Internal,
                    "tokentap panicked during this trajectory (a bug: please report it); the rest is not sent".into(),
                ),
            );
            self.run.counters.trajectory_done();
        }
    }
}

/// One trajectory, turn after turn: each waits for the one before (and its recorded delay,
/// with `--delays`); the first turn that does not end `ok` aborts the rest.
async fn trajectory(run: &Run, slot: u32, k: u64, conn: &mut Conn, scratch: &mut Scratch) {
    let t = Traj::new(run, k, slot);
    run.counters.trajectory_started();
    let mut guard = PanicGuard {
        run,
        t: &t,
        next: 0,
    };
    let mut setup = match Setup::new(run, &t) {
        Ok(s) => s,
        Err(e) => {
            t.abort_from(run, 0, e);
            guard.next = t.turns.len();
            run.counters.trajectory_done();
            return;
        }
    };
    for (ti, &row) in t.turns.iter().enumerate() {
        guard.next = ti;
        delay_before(run, &t.conv.rows[row]).await;
        if run.stop_issuing.is_cancelled() {
            t.abort_from(run, ti, stopped(run));
            guard.next = t.turns.len();
            break;
        }
        let status = match turn(run, &t, &mut setup, ti, row, conn, scratch).await {
            Ok(status) => status,
            Err(e) => {
                t.abort_from(run, ti, e);
                guard.next = t.turns.len();
                break;
            }
        };
        guard.next = ti + 1;
        if status != Status::Ok {
            let e = TurnError::new(
                ErrorSource::Internal,
                ErrorKind::PreviousTurnFailed,
                format!(
                    "turn {ti} of this trajectory ended {}; the rest is not sent",
                    status.as_str()
                ),
            );
            t.abort_from(run, ti + 1, e);
            guard.next = t.turns.len();
            break;
        }
    }
    guard.next = t.turns.len();
    run.counters.trajectory_done();
}

/// The row's recorded delay before it is sent (`--delays`, scaled), cut short when issuing
/// stops.
async fn delay_before(run: &Run, r: &tokentap_dataset::Row) {
    if !run.cfg.delays {
        return;
    }
    let d = r.delay_seconds.unwrap_or(0.0) * run.cfg.delay_scale;
    if d <= 0.0 {
        return;
    }
    if let Some(m) = &run.metrics {
        m.delay(true);
    }
    tokio::select! {
        _ = tokio::time::sleep(Duration::try_from_secs_f64(d).unwrap_or(Duration::MAX)) => {}
        _ = run.stop_issuing.cancelled() => {}
    }
    if let Some(m) = &run.metrics {
        m.delay(false);
    }
}

/// What of the response is kept: everything (`--keep-outputs` and accuracy runs), the tool
/// calls or the text of a turn the scorer scores, or nothing.
fn capture_for(run: &Run, conv: &Conversation, turn: u32) -> client::Capture {
    use tokentap_mlperf::scorer::Domain;
    if run.capture_all {
        client::Capture::Full
    } else if run
        .scorer
        .as_ref()
        .is_some_and(|s| s.is_scorable(&conv.id, turn))
    {
        match Domain::of(&conv.id) {
            Domain::Coding => client::Capture::ToolCalls,
            Domain::Workflow => client::Capture::Text,
        }
    } else {
        client::Capture::Off
    }
}

/// Sends one turn and records it. `Err`: its body could not be built (nothing was sent).
async fn turn(
    run: &Run,
    t: &Traj<'_>,
    setup: &mut Setup<'_>,
    ti: usize,
    row: usize,
    conn: &mut Conn,
    scratch: &mut Scratch,
) -> Result<Status, TurnError> {
    let r = &t.conv.rows[row];
    let scheduled = clock::now();
    let body = setup
        .builder
        .body(row)
        .map_err(|e| crate::response::internal(ErrorKind::Build, e.to_string()))?;
    let (request_bytes, messages) = (body.len(), body.messages());
    let model = turn_model(run, r);
    let isl_body = run.keep_bodies.then(|| body.clone());
    let req = run.target.request(setup.endpoint, &setup.session, body);
    let capture = capture_for(run, t.conv, r.turn);
    scratch.output.clear();
    let in_window = run.window_open.load(Relaxed);
    if let Some(m) = &run.metrics {
        m.issued();
    }
    let mut tl = None;
    let deadline = tokio::time::Instant::now() + run.cfg.turn_timeout();
    let ended = {
        let fut = client::exchange(
            conn,
            &run.target,
            setup.endpoint,
            req,
            &mut tl,
            scratch,
            client::TurnOpts {
                expected_chunks: run.expected_chunks,
                capture,
                max_event: run.cfg.max_event_bytes,
            },
        );
        tokio::select! {
            biased;
            _ = run.cancel.cancelled() => Ended::Cancelled,
            r = tokio::time::timeout_at(deadline, fut) => match r {
                Ok(x) => Ended::Done(x),
                Err(_) => Ended::TimedOut,
            },
        }
    };
    // The turn ended for the client here (error, timeout, cancel); a complete response
    // ended at its last byte, set below.
    let ended_at = clock::now();
    let facts = TurnFacts {
        scheduled,
        model,
        messages,
        request_bytes,
        in_window,
        timeline: tl,
        ended_at,
    };
    let mut rec = turn_record(run, t, setup.endpoint, ti, row, facts, scratch);
    conclude(run, &mut rec, ended, conn, scratch);
    let ok = rec.status == Status::Ok;
    if ok {
        rec.end_ns = rec.measured.e2e_ns.or(rec.end_ns);
    }
    let status = rec.status;
    send(
        run,
        Job {
            output: (ok && capture.is_on()).then(|| scratch.output.output()),
            complete_output: capture == client::Capture::Full,
            body: isl_body,
            key: t.key(row),
            last: ti + 1 == t.turns.len(),
            record: rec,
        },
    );
    Ok(status)
}

/// The model a turn asks for: its row's override, else the run's.
#[inline]
fn turn_model(run: &Run, r: &tokentap_dataset::Row) -> Option<String> {
    r.overrides
        .get("model")
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .or_else(|| run.settings.model.clone())
}

/// What a turn's record is built from: its request, and what the exchange measured.
struct TurnFacts {
    /// When the turn was due to be sent (before its body was built).
    scheduled: MonoNs,
    model: Option<String>,
    messages: u32,
    request_bytes: u64,
    /// The measured window was open when it was issued.
    in_window: bool,
    /// The exchange's timeline; `None` when the turn never reached the wire.
    timeline: Option<Timeline>,
    /// When the turn ended for the client (error, timeout, cancel, or the end of the response).
    ended_at: MonoNs,
}

/// The record of turn `ti` (row `row`) from its facts and the exchange's receive-path notes in
/// `scratch`; its status and error are `conclude`'s.
#[inline]
fn turn_record(
    run: &Run,
    t: &Traj<'_>,
    endpoint: usize,
    ti: usize,
    row: usize,
    facts: TurnFacts,
    scratch: &Scratch,
) -> TurnRecord {
    let tl = facts.timeline;
    let start = tl.as_ref().map(|t| t.start());
    let measured = tl.map(|t| t.finish(None)).unwrap_or_default();
    let now = Anchor::now();
    let anchor = match start {
        Some(s) => Anchor {
            mono_ns: s,
            wall_ns: now.wall_of(s),
        },
        None => now,
    };
    let mut rec = t.record(ti, row, anchor);
    rec.scheduled_mono_ns = Some(facts.scheduled);
    rec.route = Some(run.target.endpoints[endpoint].path.path().to_string());
    if run.target.endpoints.len() > 1 {
        rec.upstream = Some(run.target.endpoints[endpoint].url.clone());
    }
    rec.model = facts.model;
    rec.messages = Some(facts.messages);
    rec.request_bytes = Some(facts.request_bytes);
    rec.in_window = Some(facts.in_window);
    rec.measured = measured;
    // A turn that never reached the wire (connect failed) ended where it started.
    rec.end_ns = Some(start.map_or(0, |s| facts.ended_at.saturating_sub(s)));
    if start.is_some() {
        rec.rx_clock = scratch.rx.clock;
        rec.rx_lag_ttft_ns = scratch.rx.ttft_lag_ns;
        rec.rx_lag_max_ns = scratch.rx.max_lag_ns;
        rec.retries = (scratch.retries > 0).then_some(scratch.retries);
        rec.server_date_s = scratch.server_date;
        rec.http_version = scratch.http2.then(|| "2".to_string());
    }
    rec
}

/// The record's status, HTTP status and error from how the turn ended. A timed-out or
/// cancelled turn leaves its connection unusable (reset).
fn conclude(run: &Run, rec: &mut TurnRecord, ended: Ended, conn: &mut Conn, scratch: &Scratch) {
    match ended {
        Ended::Done(Exchange::Ok { http_status }) => {
            rec.http_status = Some(http_status);
            if rec.measured.error_events > 0 {
                rec.status = Status::Failed;
                rec.error = Some(crate::response::upstream(
                    ErrorKind::StreamError,
                    format!(
                        "{} error object(s) inside the stream",
                        rec.measured.error_events
                    ),
                ));
            }
        }
        Ended::Done(Exchange::Failed { http_status, error }) => {
            rec.http_status = http_status;
            rec.status = Status::Failed;
            rec.error = Some(error);
        }
        Ended::TimedOut => {
            conn.reset();
            rec.http_status = scratch.http_status;
            rec.status = Status::TimedOut;
            rec.error = Some(TurnError::new(
                ErrorSource::Internal,
                ErrorKind::TurnTimeout,
                format!(
                    "turn timeout of {:?} elapsed; request cancelled",
                    run.cfg.turn_timeout()
                ),
            ));
        }
        Ended::Cancelled => {
            conn.reset();
            rec.http_status = scratch.http_status;
            rec.status = Status::Cancelled;
            rec.error = Some(TurnError::new(
                ErrorSource::Internal,
                ErrorKind::Cancelled,
                "the run was stopped while the turn was in flight",
            ));
        }
    }
}

enum Ended {
    Done(Exchange),
    TimedOut,
    Cancelled,
}

fn stopped(run: &Run) -> TurnError {
    let why = match run.stop_reason.get() {
        Some(StopReason::FirstUserComplete) => "stop_issuing_on_first_user_complete",
        Some(StopReason::MaxDuration) => "max_duration",
        Some(StopReason::Shutdown) | None => "shutdown",
    };
    TurnError::new(
        ErrorSource::Internal,
        ErrorKind::Stopped,
        format!("issuing stopped ({why}) before this turn was sent"),
    )
}

fn send(run: &Run, job: Job) {
    run.counters.turn_recorded(job.record.status);
    if let Some(m) = &run.metrics {
        m.turn_recorded(&job.record);
    }
    // The pool outlives every slot (the run waits for the slots before closing it), so a send
    // can only fail after every worker died, which the run reports on its own.
    let _ = run.post.send(job);
}
