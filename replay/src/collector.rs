//! The one consumer of turn records: writes `records.jsonl` and folds every record into the
//! aggregates the summary is computed from.
//!
//! It runs on a blocking thread (file writes never stall the async workers), receives records
//! over an unbounded channel (slots never wait on disk), gathers each as one JSON line in a
//! batch of whole lines, and writes the batch whenever the channel runs empty, at least every
//! [`FLUSH_EVERY_NS`] (100 ms) under a steady stream — so a `kill -9` loses at most the records
//! of the last 100 ms — and when the channel closes, at the end of the run, including after a
//! shutdown, so nothing recorded is lost on a clean stop. The file holds whole lines only
//! (core's `linefile`, as the proxy's records): a failed write is cut back and its records
//! counted in `summary.json` (`run.records_failed`), and the run exits 1. Records are not kept in memory: only
//! the raw samples the published percentiles need (exact: docs/benchmark.md#percentiles).

use crate::progress::Counters;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tokentap_core::clock::MonoNs;
use tokentap_core::linefile::{Batch, LineFile};
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::stats::Samples;
use tokentap_core::timeline::TokenSource;
use tokentap_mlperf::scorer::{ScoreSet, Scorer, TurnKey, TurnScore};
use tokio::sync::mpsc::UnboundedReceiver;

/// One line of `records.jsonl`: a core [`TurnRecord`] plus the turn's accuracy score.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayRecord {
    /// The record of the turn.
    #[serde(flatten)]
    pub record: TurnRecord,
    /// The reference scorer's score of this turn (docs/benchmark.md#inline-accuracy), 0..1,
    /// unrounded; present for every issued scorable turn — failed, timed-out and aborted ones
    /// score 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    /// The turn as the reference sees it (not written: it feeds scores.json and
    /// result_summary.json).
    #[serde(skip)]
    pub reference: Option<RefTurn>,
}

/// A turn's identity and score in the reference's terms.
#[derive(Debug, Clone)]
pub struct RefTurn {
    /// The turn in the reference's terms (conversation, repeat, turn).
    pub key: TurnKey,
    /// Its score, when the turn is scorable.
    pub score: Option<TurnScore>,
}

/// The reference's view of the run: the performance window's samples and the scores.
#[derive(Debug, Default)]
pub(crate) struct Reference {
    pub window: tokentap_mlperf::window::Window,
    pub scores: ScoreSet,
}

pub(crate) enum Msg {
    Record(Box<ReplayRecord>),
}

/// Mean of scores.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Mean {
    pub sum: f64,
    pub n: u64,
}

impl Mean {
    pub fn push(&mut self, x: f64) {
        self.sum += x;
        self.n += 1;
    }
    pub fn value(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// Everything the summary needs, folded from the records.
#[derive(Debug, Default)]
pub(crate) struct Aggregate {
    pub records: u64,
    pub by_status: [u64; Status::ALL.len()],
    pub in_window_by_status: [u64; Status::ALL.len()],
    /// In-window ok turns, ns.
    pub ttfb: Samples,
    pub ttft: Samples,
    pub itl: Samples,
    pub inter_chunk: Samples,
    pub tpot: Samples,
    pub e2e: Samples,
    /// In-window ok turns: how long the first token's bytes waited for the client, ns.
    pub rx_lag_ttft: Samples,
    /// In-window ok turns: the largest wait over a turn's reads, ns.
    pub rx_lag_max: Samples,
    /// Turns whose response reads were all kernel-stamped / not.
    pub rx_kernel_turns: u64,
    pub rx_user_turns: u64,
    /// Requests sent again on a fresh connection (all turns).
    pub retries: u64,
    pub window_ok_turns: u64,
    pub window_output_tokens: u64,
    pub window_output_known: u64,
    /// Last end (last byte, or the record's start if nothing arrived) of an in-window turn.
    pub window_last_end: Option<MonoNs>,
    /// All ok turns (the accuracy population).
    pub ok_output_tokens: Mean,
    pub ok_output_sources: [u64; TokenSource::ALL.len()],
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub cache_turns: u64,
    pub first_start: Option<MonoNs>,
    pub last_end: Option<MonoNs>,
    pub request_bytes: Mean,
    /// The first error writing records.jsonl (creating it, or a write cut back out of it).
    pub write_error: Option<String>,
    /// Records lost to a write error (none of their bytes on disk); the rest of `records` is on
    /// disk.
    pub records_failed: u64,
    pub reference: Reference,
    /// Turns not `ok`, by `error.kind`: how many, and the first one's message.
    pub errors: BTreeMap<String, (u64, String)>,
    /// Per endpoint (the record's `upstream`; "" when the run has one endpoint).
    pub by_endpoint: BTreeMap<String, EndpointCounts>,
}

/// One endpoint's share of a run.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct EndpointCounts {
    /// Trajectories whose first turn was sent there.
    pub trajectories: u64,
    /// Turns sent there (every record but the aborted ones), and how they ended.
    pub turns: u64,
    pub ok: u64,
}

impl Aggregate {
    fn fold(&mut self, rr: &ReplayRecord, counters: &Counters, scorer: Option<&Scorer>) {
        let r = &rr.record;
        if let (Some(rt), Some(scorer)) = (&rr.reference, scorer) {
            if tokentap_mlperf::window::issued(r) {
                self.reference
                    .scores
                    .add(scorer, rt.key.clone(), rt.score.clone());
                self.reference.window.fold(r);
            }
        }
        self.fold_turn(r, counters);
    }

    /// Everything but the scores (which need the reference's view of the turn): the counts,
    /// the samples, the per-endpoint shares.
    pub(crate) fn fold_turn(&mut self, r: &TurnRecord, counters: &Counters) {
        let m = &r.measured;
        self.records += 1;
        self.retries += u64::from(r.retries.unwrap_or(0));
        if r.status != Status::Aborted {
            let key = r.upstream.as_deref().unwrap_or("");
            let e = match self.by_endpoint.get_mut(key) {
                Some(e) => e,
                None => self.by_endpoint.entry(key.to_string()).or_default(),
            };
            e.turns += 1;
            e.ok += u64::from(r.status == Status::Ok);
            e.trajectories += u64::from(r.turn_index == 0);
        }
        let si = r.status.index();
        self.by_status[si] += 1;
        if r.status != Status::Aborted {
            self.first_start = Some(
                self.first_start
                    .map_or(r.start_mono_ns, |s| s.min(r.start_mono_ns)),
            );
            let end = r.end_mono_ns().unwrap_or(r.start_mono_ns);
            self.last_end = Some(self.last_end.map_or(end, |e| e.max(end)));
            if r.in_window == Some(true) {
                self.window_last_end = Some(self.window_last_end.map_or(end, |e| e.max(end)));
            }
        }
        if let Some(b) = r.request_bytes {
            self.request_bytes.push(b as f64);
        }
        if r.in_window == Some(true) {
            self.in_window_by_status[si] += 1;
        }
        if r.status != Status::Ok {
            if let Some(e) = &r.error {
                match self.errors.get_mut(&e.kind) {
                    Some(t) => t.0 += 1,
                    None => {
                        self.errors.insert(e.kind.clone(), (1, e.message.clone()));
                    }
                }
            }
            return;
        }
        if let Some(o) = m.output_tokens {
            self.ok_output_tokens.push(o as f64);
            self.ok_output_sources[m.output_tokens_source.index()] += 1;
        }
        if let (Some(p), Some(c)) = (m.prompt_tokens, m.cached_tokens) {
            self.prompt_tokens += p;
            self.cached_tokens += c;
            self.cache_turns += 1;
        }
        if r.in_window != Some(true) {
            return;
        }
        self.window_ok_turns += 1;
        match r.rx_clock {
            Some(tokentap_core::record::RxClock::Kernel) => self.rx_kernel_turns += 1,
            Some(tokentap_core::record::RxClock::User) => self.rx_user_turns += 1,
            None => {}
        }
        if let Some(v) = r.rx_lag_ttft_ns {
            self.rx_lag_ttft.push(v as f64);
        }
        if let Some(v) = r.rx_lag_max_ns {
            self.rx_lag_max.push(v as f64);
        }
        if let Some(o) = m.output_tokens {
            self.window_output_tokens += o;
            self.window_output_known += 1;
        }
        let before = self.itl.len();
        for (s, v) in [
            (&mut self.ttfb, m.ttfb_ns),
            (&mut self.ttft, m.ttft_ns),
            (&mut self.tpot, m.tpot_ns),
            (&mut self.e2e, m.e2e_ns),
        ] {
            if let Some(v) = v {
                s.push(v as f64);
            }
        }
        self.itl.extend(m.itl_samples());
        self.inter_chunk.extend(m.inter_chunk_samples());
        let itl_sum: f64 = m.itl_samples().sum();
        counters.live(m.ttft_ns, itl_sum as u64, (self.itl.len() - before) as u64);
    }
}

/// The longest a written record waits in the buffer before it reaches the file.
pub const FLUSH_EVERY_NS: u64 = 100_000_000;

/// Runs the collector until every sender is dropped. Blocking: call from `spawn_blocking`.
/// `scorer`: the measured run's scorer (`None` for the warmup, which is not scored).
///
/// Records reach `records_path` through core's [`LineFile`]: whole lines only. A write that
/// fails (a full disk, an I/O error) is cut back out of the file, its records counted in
/// [`Aggregate::records_failed`] and the error kept; the next batch tries again, so a disk that
/// has room again takes records again.
pub(crate) fn collect(
    mut rx: UnboundedReceiver<Msg>,
    records_path: Option<&Path>,
    counters: Arc<Counters>,
    scorer: Option<Arc<Scorer>>,
) -> Aggregate {
    let mut agg = Aggregate::default();
    let mut out = match records_path.map(LineFile::create) {
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => {
            let path = records_path
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            agg.write_error = Some(format!("cannot create {path}: {e}"));
            None
        }
        None => None,
    };
    let mut batch = Batch::with_capacity(BATCH_BYTES);
    let mut flushed = tokentap_core::clock::now();
    while let Some(msg) = rx.blocking_recv() {
        let Msg::Record(rr) = msg;
        match &mut out {
            Some(f) => {
                if batch.push(&*rr).is_err() {
                    // Every field is string-keyed: this cannot happen, and is still counted.
                    agg.records_failed += 1;
                    agg.write_error
                        .get_or_insert_with(|| "a record could not be serialised".into());
                }
                let now = tokentap_core::clock::now();
                if rx.is_empty()
                    || now.saturating_sub(flushed) >= FLUSH_EVERY_NS
                    || batch.bytes() >= BATCH_BYTES
                {
                    agg.write(f, &mut batch);
                    flushed = now;
                }
            }
            // No file (none asked for, or it could not be created): a record is lost only when
            // one was asked for.
            None if records_path.is_some() => agg.records_failed += 1,
            None => {}
        }
        agg.fold(&rr, &counters, scorer.as_deref());
    }
    if let Some(f) = &mut out {
        agg.write(f, &mut batch);
    }
    agg
}

/// Bytes of whole lines gathered before a write (a batch is written sooner when the channel
/// runs empty or [`FLUSH_EVERY_NS`] has passed).
const BATCH_BYTES: usize = 256 * 1024;

impl Aggregate {
    /// Writes `batch`: its records become written or failed, never both, never neither.
    fn write(&mut self, f: &mut LineFile, batch: &mut Batch) {
        if batch.is_empty() {
            return;
        }
        match f.write_batch(batch) {
            Ok(_) => {}
            Err((n, e)) => {
                self.records_failed += n;
                let msg = format!("{}: {e}", f.path().display());
                if self.write_error.is_none() {
                    tracing::error!("records NOT written: {msg} (counted; the run will exit 1)");
                }
                self.write_error.get_or_insert(msg);
            }
        }
    }
}
