//! The one consumer of turn records: writes `records.jsonl` and folds every record into the
//! aggregates the summary is computed from.
//!
//! It runs on a blocking thread (file writes never stall the async workers), receives records
//! over an unbounded channel (slots never wait on disk), writes each as one JSON line into a
//! 256 KiB buffer, and flushes it whenever the channel runs empty and at least every
//! [`FLUSH_EVERY_NS`] (100 ms) under a steady stream — so a `kill -9` loses at most the records
//! of the last 100 ms — and when the channel closes, at the end of the run, including after a
//! shutdown, so nothing recorded is lost on a clean stop. Records are not kept in memory: only
//! the raw samples the published percentiles need (SPEC §7: exact, from every sample).

use crate::progress::Counters;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use tokentap_core::clock::MonoNs;
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::stats::Samples;
use tokentap_core::timeline::TokenSource;
use tokentap_mlperf::scorer::{ScoreSet, Scorer, TurnKey, TurnScore};
use tokio::sync::mpsc::UnboundedReceiver;

/// One line of `records.jsonl`: a core [`TurnRecord`] plus the turn's accuracy score.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayRecord {
    #[serde(flatten)]
    pub record: TurnRecord,
    /// The reference scorer's score of this turn (SPEC §10.3), 0..1, unrounded; present for
    /// every issued scorable turn — failed, timed-out and aborted ones score 0.
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
    pub key: TurnKey,
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

/// Status → index into the count arrays ([`Status::index`]).
pub(crate) fn status_index(s: Status) -> usize {
    s.index()
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
    pub by_status: [u64; 5],
    pub in_window_by_status: [u64; 5],
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
    pub ok_output_sources: [u64; 5],
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub cache_turns: u64,
    pub first_start: Option<MonoNs>,
    pub last_end: Option<MonoNs>,
    pub request_bytes: Mean,
    pub write_error: Option<String>,
    pub reference: Reference,
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

pub(crate) fn source_index(s: TokenSource) -> usize {
    match s {
        TokenSource::ContinuousUsage => 0,
        TokenSource::Usage => 1,
        TokenSource::SpreadUsage => 2,
        TokenSource::Tokenizer => 3,
        TokenSource::Chunks => 4,
    }
}

pub(crate) const SOURCES: [&str; 5] = [
    "continuous_usage",
    "usage",
    "spread_usage",
    "tokenizer",
    "chunks",
];

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
        let si = status_index(r.status);
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
            return;
        }
        if let Some(o) = m.output_tokens {
            self.ok_output_tokens.push(o as f64);
            self.ok_output_sources[source_index(m.output_tokens_source)] += 1;
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
pub(crate) fn collect(
    mut rx: UnboundedReceiver<Msg>,
    records_path: Option<&Path>,
    counters: Arc<Counters>,
    scorer: Option<Arc<Scorer>>,
) -> Aggregate {
    let mut agg = Aggregate::default();
    let mut out = match records_path.map(File::create) {
        Some(Ok(f)) => Some(BufWriter::with_capacity(256 * 1024, f)),
        Some(Err(e)) => {
            agg.write_error = Some(format!("cannot create records file: {e}"));
            None
        }
        None => None,
    };
    let mut flushed = tokentap_core::clock::now();
    while let Some(msg) = rx.blocking_recv() {
        let Msg::Record(rr) = msg;
        if let Some(w) = &mut out {
            let mut res = serde_json::to_writer(&mut *w, &*rr)
                .map_err(std::io::Error::from)
                .and_then(|()| w.write_all(b"\n"));
            let now = tokentap_core::clock::now();
            if res.is_ok() && (rx.is_empty() || now.saturating_sub(flushed) >= FLUSH_EVERY_NS) {
                res = w.flush();
                flushed = now;
            }
            if let Err(e) = res {
                agg.write_error
                    .get_or_insert(format!("writing records: {e}"));
                out = None;
            }
        }
        agg.fold(&rr, &counters, scorer.as_deref());
    }
    if let Some(mut w) = out {
        if let Err(e) = w.flush() {
            agg.write_error
                .get_or_insert(format!("flushing records: {e}"));
        }
    }
    agg
}
