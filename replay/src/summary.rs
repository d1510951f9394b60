//! The run summary: exactly what goes to `summary.json`, and its terminal rendering.
//!
//! Two kinds of numbers, labelled as such:
//! - **The benchmark's own** (`mlperf`, `accuracy`, `validity`): computed as the MLPerf
//!   Endpoints reference computes them (docs/benchmark.md#reference) — primary metrics over the
//!   performance window's issued turns, the reference's TPOT, tokens counted with the model's
//!   tokenizer (`--tokenizer`; otherwise `mlperf.osl_source` says what was counted instead), the
//!   reference inline scorer over every issued scorable turn, the official validity rules. The
//!   same numbers are in `result_summary.json` and `scores.json`, in the reference's schema.
//! - **tokentap's own** (`latency_ms`, `throughput`, `tokens`, `client`): wire-exact per-token
//!   ITL (k samples of gap/k for a k-token chunk), inter-chunk latency, TTFT/E2E percentiles of
//!   the in-window `ok` turns (numpy `linear`), throughput over the window — the measurement's
//!   view, not the benchmark's definitions.
//!
//! Every field is described in `docs/records.md`.

use crate::collector::Aggregate;
use crate::config::ReplayConfig;
use crate::driver::StopReason;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use tokentap_core::clock::Anchor;
use tokentap_core::record::{CountSource, Status};
use tokentap_core::stats::{Percentiles, Samples};
use tokentap_mlperf::validity::{self, Rule};
use tokentap_mlperf::{result_summary, Official, Primary, Scores, Verdict};

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub tokentap_version: &'static str,
    /// The benchmark's own numbers (MLPerf Endpoints reference definitions).
    pub mlperf: Mlperf,
    pub validity: Validity,
    /// The rules' steady-state window (§4.4) for this agentic point: not official (the
    /// reference's detector does not support agentic runs), the reference's experimental NATL,
    /// and the window detector as tokentap's diagnostic.
    pub steady_state: tokentap_mlperf::steady_state::AgenticSteadyState,
    pub run: RunInfo,
    pub window: Window,
    pub counts: Counts,
    /// Per endpoint, in `--endpoint` order: where the trajectories went.
    pub endpoints: Vec<EndpointShare>,
    pub latency_ms: Latency,
    pub throughput: Throughput,
    pub tokens: Tokens,
    pub client: ClientHealth,
    pub accuracy: Accuracy,
    /// The declared warmup, when there was one (excluded from every number above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupDeclaration>,
    /// `tokentap merge`: the shards this run was joined from, their clocks and the union's
    /// window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeInfo>,
    /// The full resolved configuration (the API key is never included).
    pub config: ReplayConfig,
}

/// The benchmark's primary metrics of this point and how their tokens were counted.
#[derive(Debug, Clone, Serialize)]
pub struct Mlperf {
    /// Whose definitions: the reference client pinned at ea33275
    /// (docs/benchmark.md#primary-metrics).
    pub definitions: &'static str,
    #[serde(flatten)]
    pub primary: Primary,
    /// Tracked (performance-window) samples in the reference's sense: issued (sent or aborted
    /// after a failure), completed (any outcome), failed.
    pub samples_issued: u64,
    pub samples_completed: u64,
    pub samples_failed: u64,
    /// Tracked ok turns by the source of their OSL: `tokenizer` (and `tokenizer_fallback`)
    /// is the reference's count; `usage`/`chunks` are not.
    pub osl_source: BTreeMap<&'static str, u64>,
    /// ISL samples by source.
    pub isl_source: BTreeMap<&'static str, u64>,
    /// OSL is the reference's count (every OSL from the tokenizer).
    pub reference_tokens: bool,
    /// The OSL per-turn mean over every completed turn of the run, tracked or not
    /// (`output_sequence_lengths_full_run` in `result_summary.json`): the OSL gate's value.
    pub osl_mean_full_run: Option<f64>,
    /// The tokenizer folder used, if any.
    pub tokenizer: Option<String>,
    /// Counts that used the reference's fallback (the chat template failed), and the first
    /// template error.
    pub template_fallbacks: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_error: Option<String>,
    /// The same numbers in the reference's schema.
    pub result_summary: &'static str,
}

/// The declared warmup (docs/benchmark.md#validity).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct WarmupDeclaration {
    pub duration_s: f64,
    pub requests_issued: u64,
    pub requests_completed: u64,
    pub trajectories: u64,
    /// `performance dataset (salted with its own tag)` or the warmup file.
    pub source: String,
    pub concurrency: usize,
    /// The records of the warmup (never part of a result).
    pub records: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Validity {
    /// `valid`, `invalid`, `incomplete` (a deciding gate not evaluated: OSL without
    /// `--tokenizer`), `no_gates` (no `--preset`).
    pub verdict: Verdict,
    /// The failed rules, each naming the rule and the measured value.
    pub reasons: Vec<String>,
    /// The rules the official checker reports as warnings (a point shorter than its minimum
    /// duration): they do not change the verdict.
    pub warnings: Vec<String>,
    /// Observations that do not change the verdict.
    pub notes: Vec<String>,
    /// Every rule: `pass`, `fail`, `warn` or `not_evaluated`, with its message; ids are the
    /// official checker's where it has the rule (docs/rules.md).
    pub rules: Vec<Rule>,
    /// The official settings and gates applied (from `--preset`), if any.
    pub gates: Option<Official>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    /// Run start (before the first issue), both clocks.
    pub start: Anchor,
    /// Run end (after the last record), both clocks.
    pub end: Anchor,
    pub duration_s: f64,
    /// The shutdown future fired (Ctrl-C).
    pub interrupted: bool,
    /// Why issuing stopped early, if it did.
    pub stopped_by: Option<StopReason>,
    /// Trajectories this process was to issue (after sharding).
    pub trajectory_budget: u64,
    pub trajectories_started: u64,
    pub trajectories_finished: u64,
    /// Mean request body size, bytes.
    pub mean_request_bytes: Option<f64>,
    /// The first problem writing records.jsonl, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records_error: Option<String>,
    /// Records not written to records.jsonl (a write error; none of their bytes are in the
    /// file). Non-zero makes the run exit 1.
    #[serde(skip_serializing_if = "is_zero")]
    pub records_failed: u64,
    /// Sampling fields that dataset rows override (other than `model`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub row_overrides: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// Tracking started (= run start), raw CLOCK_MONOTONIC ns.
    pub start_mono_ns: u64,
    pub start_wall_ns: u64,
    /// Tracking stopped (first user completed / stop), monotonic ns; null if it never did.
    pub closed_mono_ns: Option<u64>,
    /// When this process claimed its last trajectory (its budget was exhausted from then on),
    /// monotonic ns; null if it claimed none.
    pub last_claim_mono_ns: Option<u64>,
    /// Last completion of an in-window turn, monotonic ns.
    pub end_mono_ns: Option<u64>,
    pub end_wall_ns: Option<u64>,
    /// end − start, seconds.
    pub duration_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    /// Every record, by status.
    pub turns: BTreeMap<&'static str, u64>,
    /// Records of turns issued inside the window, by status.
    pub in_window: BTreeMap<&'static str, u64>,
    pub total: u64,
    /// The turns that did not end `ok`, by `error.kind`: how many, and the first one's message
    /// (most turns first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ErrorCount>,
}

/// The turns that ended with one `error.kind`.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorCount {
    pub kind: String,
    pub turns: u64,
    pub first_message: String,
}

impl Counts {
    fn errors(agg: &Aggregate) -> Vec<ErrorCount> {
        let mut v: Vec<ErrorCount> = agg
            .errors
            .iter()
            .map(|(k, (n, m))| ErrorCount {
                kind: k.clone(),
                turns: *n,
                first_message: m.clone(),
            })
            .collect();
        v.sort_by(|a, b| b.turns.cmp(&a.turns).then_with(|| a.kind.cmp(&b.kind)));
        v
    }
}

/// One endpoint's share of the run (turns that were sent: aborted ones are not).
#[derive(Debug, Clone, Serialize)]
pub struct EndpointShare {
    pub url: String,
    pub trajectories: u64,
    pub turns: u64,
    pub ok: u64,
    /// Failed, timed out or cancelled.
    pub not_ok: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub ttft: Option<Percentiles>,
    pub ttfb: Option<Percentiles>,
    /// Per token (SGLang's method: a k-token chunk gives k samples of gap/k).
    pub itl: Option<Percentiles>,
    /// One sample per chunk.
    pub inter_chunk: Option<Percentiles>,
    pub tpot: Option<Percentiles>,
    pub e2e: Option<Percentiles>,
}

/// How the client itself fared: whether its arrival instants are the kernel's, and how long
/// response bytes waited in the socket for it (a client that falls behind shows here, not in
/// the latencies, which are stamped by the kernel).
#[derive(Debug, Clone, Serialize)]
pub struct ClientHealth {
    /// In-window ok turns whose reads all carried the kernel's receive timestamp.
    pub rx_kernel_turns: u64,
    /// In-window ok turns stamped (at least partly) in user space.
    pub rx_user_turns: u64,
    /// User-space read instant − kernel receive instant of the first token, ms.
    pub read_lag_ttft_ms: Option<Percentiles>,
    /// Per turn, the largest such wait over its reads, ms.
    pub read_lag_max_ms: Option<Percentiles>,
    /// Requests sent again on a fresh connection because a kept-alive one closed before any
    /// response byte.
    pub retries: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// Output tokens of in-window ok turns.
    pub output_tokens: u64,
    pub output_tokens_per_s: Option<f64>,
    /// output_tokens_per_s ÷ concurrency.
    pub output_tokens_per_s_per_user: Option<f64>,
    pub turns: u64,
    pub turns_per_s: Option<f64>,
    pub concurrency: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Tokens {
    /// Mean output tokens per ok turn, whole run (the gate's value).
    pub mean_output_tokens_per_turn: Option<f64>,
    /// Same, in-window ok turns only.
    pub mean_output_tokens_per_turn_window: Option<f64>,
    /// Ok turns by the source of their output token count.
    pub output_tokens_source: BTreeMap<&'static str, u64>,
    /// Σ cached / Σ prompt over ok turns where the server reported both; null if none did.
    pub cached_token_share: Option<f64>,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// Ok turns that reported both prompt and cached tokens.
    pub turns_with_cache_info: u64,
}

/// The reference inline scorer's result (also in `scores.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Accuracy {
    /// Mean score over every issued scorable turn (failed and aborted ones score 0), rounded to
    /// 4 decimals as the reference rounds it.
    pub inline_accuracy: Option<f64>,
    pub issued: u64,
    pub expected: u64,
    pub observed: u64,
    pub missing: u64,
    pub scored_turns: u64,
    pub workflow: Option<f64>,
    pub workflow_turns: u64,
    pub coding: Option<f64>,
    pub coding_turns: u64,
    /// Turns with no ground truth (listed in scores.json).
    pub excluded_turns: u64,
}

/// Inputs besides the aggregate.
pub(crate) struct RunFacts {
    pub start: Anchor,
    pub end: Anchor,
    pub interrupted: bool,
    pub stopped_by: Option<StopReason>,
    pub window_closed: Option<u64>,
    pub last_claim: Option<u64>,
    pub budget_local: u64,
    pub trajectories_started: u64,
    pub trajectories_finished: u64,
    pub scores: Scores,
    /// The reference tokenizer's folder and its fallback count / first template error.
    pub tokenizer: Option<(String, u64, Option<String>)>,
    pub warmup: Option<WarmupDeclaration>,
    pub dataset_size: u64,
    /// Per-row sampling overrides (other than `model`) in the dataset's client rows.
    pub row_overrides: Vec<String>,
}

/// The sampling settings the rules judge: what was sent, but a seed set's `model_seed` (the
/// seed the rules require, not a sampling setting of the model's) left out.
fn official_sampling(cfg: &ReplayConfig) -> serde_json::Value {
    let mut v = serde_json::to_value(&cfg.sampling).unwrap_or_default();
    if let (Some(ss), Some(o)) = (&cfg.seed_set, v.as_object_mut()) {
        if cfg.sampling.seed == Some(i128::from(ss.model_seed)) {
            o.remove("seed");
        }
    }
    v
}

fn ms(s: &mut Samples) -> Option<Percentiles> {
    s.percentiles().map(|p| Percentiles {
        count: p.count,
        min: p.min / 1e6,
        max: p.max / 1e6,
        mean: p.mean / 1e6,
        p50: p.p50 / 1e6,
        p90: p.p90 / 1e6,
        p95: p.p95 / 1e6,
        p99: p.p99 / 1e6,
        p999: p.p999 / 1e6,
    })
}

fn by_status(a: &[u64; 5]) -> BTreeMap<&'static str, u64> {
    Status::ALL
        .iter()
        .zip(a)
        .map(|(s, n)| (s.as_str(), *n))
        .collect()
}

impl Tokens {
    fn of(agg: &Aggregate) -> Tokens {
        let mean_window = (agg.window_output_known > 0)
            .then(|| agg.window_output_tokens as f64 / agg.window_output_known as f64);
        Tokens {
            mean_output_tokens_per_turn: agg.ok_output_tokens.value(),
            mean_output_tokens_per_turn_window: mean_window,
            output_tokens_source: tokentap_core::timeline::TokenSource::ALL
                .iter()
                .zip(agg.ok_output_sources)
                .filter(|(_, n)| *n > 0)
                .map(|(s, n)| (s.as_str(), n))
                .collect(),
            cached_token_share: (agg.prompt_tokens > 0)
                .then(|| agg.cached_tokens as f64 / agg.prompt_tokens as f64),
            prompt_tokens: agg.prompt_tokens,
            cached_tokens: agg.cached_tokens,
            turns_with_cache_info: agg.cache_turns,
        }
    }
}

impl Accuracy {
    fn of(scores: &Scores) -> Accuracy {
        let dom = |d| scores.domain(d);
        let (wf, cd) = (
            dom(tokentap_mlperf::scorer::Domain::Workflow),
            dom(tokentap_mlperf::scorer::Domain::Coding),
        );
        Accuracy {
            inline_accuracy: scores.score,
            issued: scores.issued,
            expected: scores.expected,
            observed: scores.observed,
            missing: scores.missing,
            scored_turns: scores.scored,
            workflow: wf.map(|w| w.0),
            workflow_turns: wf.map_or(0, |w| w.1),
            coding: cd.map(|c| c.0),
            coding_turns: cd.map_or(0, |c| c.1),
            excluded_turns: scores.excluded.len() as u64,
        }
    }
}

impl Mlperf {
    /// The reference's view of the window: its numbers for the summary, and the inputs of its
    /// `result_summary.json`.
    fn of(
        agg: &mut Aggregate,
        cfg: &ReplayConfig,
        f: &RunFacts,
    ) -> (Mlperf, result_summary::Inputs) {
        let mut window = std::mem::take(&mut agg.reference.window);
        window.close(f.start.mono_ns);
        let reference_tokens = window.reference_tokens();
        let primary = window.primary();
        let mut inputs = window.inputs.clone();
        inputs.version = env!("CARGO_PKG_VERSION").into();
        inputs.interrupted = f.interrupted;
        inputs.complete = !f.interrupted && agg.write_error.is_none();
        inputs.run_config = result_summary::run_config(
            cfg.concurrency,
            f.warmup.as_ref().map(|w| (w.requests_issued, true)),
        );
        let (tok_dir, fallbacks, template_error) = match &f.tokenizer {
            Some((d, n, e)) => (Some(d.clone()), *n, e.clone()),
            None => (None, 0, None),
        };
        let mlperf = Mlperf {
            definitions:
                "MLPerf Endpoints reference client (mlcommons/endpoints ea33275), docs/benchmark.md#reference",
            primary,
            samples_issued: inputs.issued,
            samples_completed: inputs.completed,
            samples_failed: inputs.failed,
            osl_source: source_counts(&window.osl_sources),
            isl_source: source_counts(&window.isl_sources),
            reference_tokens,
            osl_mean_full_run: window.full_run_osl_mean(),
            tokenizer: tok_dir,
            template_fallbacks: fallbacks,
            template_error,
            result_summary: "result_summary.json",
        };
        (mlperf, inputs)
    }
}

impl EndpointShare {
    /// Each `--endpoint`'s share of the trajectories and turns.
    fn all(cfg: &ReplayConfig, agg: &Aggregate) -> Vec<EndpointShare> {
        cfg.endpoints
            .iter()
            .map(|e| {
                let key = if cfg.endpoints.len() > 1 {
                    e.url.as_str()
                } else {
                    ""
                };
                let c = agg.by_endpoint.get(key).copied().unwrap_or_default();
                EndpointShare {
                    url: e.url.clone(),
                    trajectories: c.trajectories,
                    turns: c.turns,
                    ok: c.ok,
                    not_ok: c.turns - c.ok,
                }
            })
            .collect()
    }
}

/// What a finished run produced: the summary and the reference's two files.
pub(crate) struct Built {
    pub summary: Summary,
    pub result_summary: result_summary::Inputs,
    pub scores: Scores,
}

fn source_counts(m: &BTreeMap<CountSource, u64>) -> BTreeMap<&'static str, u64> {
    m.iter().map(|(k, v)| (k.as_str(), *v)).collect()
}

impl Summary {
    pub(crate) fn build(mut agg: Aggregate, cfg: ReplayConfig, f: RunFacts) -> Built {
        let window_end = agg.window_last_end;
        let duration = window_end.map(|e| e.saturating_sub(f.start.mono_ns) as f64 / 1e9);
        let rate = |x: f64| duration.filter(|d| *d > 0.0).map(|d| x / d);
        let tok_s = rate(agg.window_output_tokens as f64);
        let latency = Latency {
            ttft: ms(&mut agg.ttft),
            ttfb: ms(&mut agg.ttfb),
            itl: ms(&mut agg.itl),
            inter_chunk: ms(&mut agg.inter_chunk),
            tpot: ms(&mut agg.tpot),
            e2e: ms(&mut agg.e2e),
        };
        let tokens = Tokens::of(&agg);
        let accuracy = Accuracy::of(&f.scores);
        let client = ClientHealth {
            rx_kernel_turns: agg.rx_kernel_turns,
            rx_user_turns: agg.rx_user_turns,
            read_lag_ttft_ms: ms(&mut agg.rx_lag_ttft),
            read_lag_max_ms: ms(&mut agg.rx_lag_max),
            retries: agg.retries,
        };

        let steady_state = agg
            .reference
            .window
            .steady_state(cfg.point_concurrency(), f.dataset_size);
        let (mlperf, inputs) = Mlperf::of(&mut agg, &cfg, &f);
        let validity = validity(&cfg, &agg, &f, &accuracy, &mlperf);
        let summary = Summary {
            tokentap_version: env!("CARGO_PKG_VERSION"),
            mlperf,
            validity,
            steady_state,
            run: RunInfo {
                start: f.start,
                end: f.end,
                duration_s: f.end.mono_ns.saturating_sub(f.start.mono_ns) as f64 / 1e9,
                interrupted: f.interrupted,
                stopped_by: f.stopped_by,
                trajectory_budget: f.budget_local,
                trajectories_started: f.trajectories_started,
                trajectories_finished: f.trajectories_finished,
                mean_request_bytes: agg.request_bytes.value(),
                records_error: agg.write_error.clone(),
                records_failed: agg.records_failed,
                row_overrides: f.row_overrides.clone(),
            },
            window: Window {
                start_mono_ns: f.start.mono_ns,
                start_wall_ns: f.start.wall_ns,
                closed_mono_ns: f.window_closed,
                last_claim_mono_ns: f.last_claim,
                end_mono_ns: window_end,
                end_wall_ns: window_end.map(|e| f.start.wall_of(e)),
                duration_s: duration,
            },
            counts: Counts {
                turns: by_status(&agg.by_status),
                in_window: by_status(&agg.in_window_by_status),
                total: agg.records,
                errors: Counts::errors(&agg),
            },
            endpoints: EndpointShare::all(&cfg, &agg),
            latency_ms: latency,
            throughput: Throughput {
                output_tokens: agg.window_output_tokens,
                output_tokens_per_s: tok_s,
                output_tokens_per_s_per_user: tok_s.map(|t| t / cfg.concurrency as f64),
                turns: agg.window_ok_turns,
                turns_per_s: rate(agg.window_ok_turns as f64),
                concurrency: cfg.concurrency,
            },
            tokens,
            client,
            accuracy,
            warmup: f.warmup.clone(),
            merge: None,
            config: cfg,
        };
        Built {
            summary,
            result_summary: inputs,
            scores: f.scores,
        }
    }

    /// The terminal summary.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        self.text_headline(&mut s);
        let ok = self.counts.turns.get("ok").copied().unwrap_or(0);
        if ok == 0 && self.counts.total > 0 {
            // Nothing to measure: say so first, with the cause, and print no empty tables.
            let _ = writeln!(
                s,
                "NO TURN COMPLETED: {} turns recorded, none ok",
                self.counts.total
            );
            self.text_errors(&mut s);
            self.text_counts(&mut s);
            return s;
        }
        self.text_mlperf(&mut s);
        self.text_verdict(&mut s);
        self.text_own(&mut s);
        self.text_rates(&mut s);
        s
    }

    /// Where the run went: endpoints, TLS trust, the merge, the model.
    fn text_headline(&self, s: &mut String) {
        let _ = writeln!(s, "tokentap replay — {}", self.config.endpoint_urls());
        if let Some(e) = &self.run.records_error {
            let _ = writeln!(
                s,
                "  RECORDS LOST: {} records NOT written to records.jsonl ({e}); the file holds whole lines only",
                self.run.records_failed
            );
        }
        if self.config.insecure {
            let _ = writeln!(
                s,
                "  TLS certificates NOT checked (--insecure): the endpoint's identity is unverified"
            );
        }
        if let Some(m) = &self.merge {
            let _ = writeln!(
                s,
                "  merged from {} of {} shards; hosts' clocks within {} of each other (servers' Date headers); window closed by {}",
                m.shards,
                m.of,
                m.skew_bound_ms
                    .map_or("an unknown bound (no Date headers)".to_string(), |b| format!("{b:.1} ms")),
                m.window_closed_by.as_deref().unwrap_or("nothing (it never closed)")
            );
        }
        if self.config.model_discovered {
            let _ = writeln!(
                s,
                "  model {} (the one the endpoints list at /v1/models; --model was not given)",
                self.config.model.as_deref().unwrap_or("?")
            );
        }
        if self.endpoints.len() > 1 {
            for e in &self.endpoints {
                let _ = writeln!(
                    s,
                    "  {}: {} trajectories, {} turns ({} ok)",
                    e.url, e.trajectories, e.turns, e.ok
                );
            }
        }
    }

    /// The benchmark's primary metrics and how its tokens were counted.
    fn text_mlperf(&self, s: &mut String) {
        let m = &self.mlperf;
        let p = &m.primary;
        let _ = writeln!(
            s,
            "MLPerf primary metrics (the reference's definitions; result_summary.json):"
        );
        let _ = writeln!(
            s,
            "  system_tps {}  tps_per_user {}  e2e_interactivity {}  ttft_p90_ms {}  qps {}",
            f1(p.system_tps),
            f1(p.tps_per_user),
            f1(p.e2e_interactivity),
            f3(p.ttft_p90_ms),
            f3(p.qps)
        );
        let sources: Vec<String> = m
            .osl_source
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(
            s,
            "  tracked {} s, {} samples issued / {} completed / {} failed; OSL mean {} ({}){}",
            f2(p.tracked_duration_s),
            m.samples_issued,
            m.samples_completed,
            m.samples_failed,
            f1(p.osl_mean),
            if m.reference_tokens {
                "reference tokenizer".to_string()
            } else if sources.is_empty() {
                "no output counted".to_string()
            } else {
                format!(
                    "NOT the reference's count: {} — pass --tokenizer DIR",
                    sources.join(", ")
                )
            },
            if m.template_fallbacks > 0 {
                format!(
                    "; {} count(s) used the template fallback",
                    m.template_fallbacks
                )
            } else {
                String::new()
            }
        );
    }

    /// The verdict, every failed rule, what was not evaluated, the notes.
    fn text_verdict(&self, s: &mut String) {
        let v = &self.validity;
        let verdict = match v.verdict {
            Verdict::Valid => {
                "VALID (SWE-bench accuracy is a separate phase, not evaluated here)".to_string()
            }
            Verdict::Invalid => "INVALID".to_string(),
            Verdict::Incomplete => "INCOMPLETE: a deciding gate was not evaluated".to_string(),
            Verdict::NoGates => "no official gates (no --preset)".to_string(),
        };
        let _ = writeln!(s, "verdict: {verdict}");
        for r in &v.reasons {
            let _ = writeln!(s, "  - {r}");
        }
        for r in &v.warnings {
            let _ = writeln!(s, "  ! {r}");
        }
        for r in v
            .rules
            .iter()
            .filter(|r| r.status == validity::Status::NotEvaluated)
        {
            let _ = writeln!(s, "  ? {}: {}", r.rule, r.message);
        }
        for n in &v.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        self.text_steady_state(s);
    }

    /// The steady-state lines: why the official basis is the whole run, NATL, the window.
    fn text_steady_state(&self, s: &mut String) {
        let ss = &self.steady_state;
        let _ = writeln!(
            s,
            "steady state (rules §4.4): not detected for agentic runs by the reference; the numbers above are the whole run's"
        );
        let n = &ss.natl;
        let _ = writeln!(
            s,
            "  NATL (the reference's experimental per-trajectory tok/s, not for submissions): p50 {:.1} p90 {:.1} over {} trajectories; across {} super-passes of {} CoV {:.3}: {}",
            n.p50,
            n.p90,
            n.n_trajectories,
            n.n_super_passes,
            n.superpass_trajectories,
            n.across_cov,
            if n.found { "steady" } else { "not steady" }
        );
        let w = &ss.window;
        match (&w.window, w.found) {
            (Some(win), true) => {
                let _ = writeln!(
                    s,
                    "  window (tokentap's diagnostic, the reference's detector on agentic turns): super-passes {}..{} after {} warmup, {} samples; system {:.1} tok/s, per user {:.1} tok/s",
                    win.sp_lo,
                    win.sp_hi - 1,
                    w.warmup,
                    win.n_samples,
                    w.tps_system.map_or(0.0, |t| t.0),
                    w.tps_per_user.map_or(0.0, |t| t.0)
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "  window (tokentap's diagnostic): not found over {} super-passes of {} samples: {}",
                    w.n_super_passes,
                    w.superpass_size,
                    w.reason.as_deref().unwrap_or("-")
                );
            }
        }
        if w.anomaly.detected {
            let _ = writeln!(
                s,
                "  anomaly: TPOT level shift of {:+.1} % at super-pass {}",
                w.anomaly.delta_pct,
                w.anomaly.change_point_sp.unwrap_or(0)
            );
        }
        if !w.drifting_up.is_empty() {
            let _ = writeln!(
                s,
                "  drifting up after the window: {}",
                w.drifting_up.join(", ")
            );
        }
    }

    /// Why turns did not end `ok`: each error kind, its count and its first message.
    fn text_errors(&self, s: &mut String) {
        if self.counts.errors.is_empty() {
            return;
        }
        let _ = writeln!(s, "turns not ok, by error (the first message of each):");
        for e in &self.counts.errors {
            let _ = writeln!(s, "  {} × {}: {}", e.turns, e.kind, e.first_message);
        }
    }

    /// tokentap's own numbers: counts, window, latency table.
    fn text_own(&self, s: &mut String) {
        let _ = writeln!(s, "tokentap's own measurements (wire-exact):");
        self.text_counts(s);
        self.text_errors(s);
        self.text_latency(s);
    }

    /// The run line: duration, trajectories, turns by status.
    fn text_counts(&self, s: &mut String) {
        let c = &self.counts.turns;
        let _ = writeln!(
            s,
            "run: {:.2} s{}{} | trajectories {}/{} finished | turns ok {} failed {} timed_out {} aborted {} cancelled {}",
            self.run.duration_s,
            if self.run.interrupted { " (interrupted)" } else { "" },
            self.run
                .stopped_by
                .map_or(String::new(), |r| format!(" (stopped: {})", serde_json::to_value(r).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default())),
            self.run.trajectories_finished,
            self.run.trajectory_budget,
            c["ok"],
            c["failed"],
            c["timed_out"],
            c["aborted"],
            c["cancelled"],
        );
    }

    /// The window and the latency table.
    fn text_latency(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "window: {} s, {} ok turns in window",
            f2(self.window.duration_s),
            self.throughput.turns
        );
        let _ = writeln!(
            s,
            "latency (ms)      p50       p90       p99     p99.9      mean     count"
        );
        let l = &self.latency_ms;
        for (name, p) in [
            ("TTFT", &l.ttft),
            ("ITL", &l.itl),
            ("inter-chunk", &l.inter_chunk),
            ("TPOT", &l.tpot),
            ("E2E", &l.e2e),
        ] {
            match p {
                Some(p) => {
                    let _ = writeln!(
                        s,
                        "  {name:<12}{:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9}",
                        p.p50, p.p90, p.p99, p.p999, p.mean, p.count
                    );
                }
                None => {
                    let _ = writeln!(s, "  {name:<12}        -");
                }
            }
        }
    }

    /// Throughput, tokens, the client's own health, accuracy, the warmup.
    fn text_rates(&self, s: &mut String) {
        let t = &self.throughput;
        let _ = writeln!(
            s,
            "throughput: {} output tok/s, {} tok/s per user (concurrency {}), {} turns/s",
            f2(t.output_tokens_per_s),
            f2(t.output_tokens_per_s_per_user),
            t.concurrency,
            f2(t.turns_per_s)
        );
        let k = &self.tokens;
        let sources: Vec<String> = k
            .output_tokens_source
            .iter()
            .map(|(s, n)| format!("{s}: {n}"))
            .collect();
        let _ = writeln!(
            s,
            "tokens: mean output/turn {} (window {}), source [{}], cached share {}",
            f2(k.mean_output_tokens_per_turn),
            f2(k.mean_output_tokens_per_turn_window),
            sources.join(", "),
            pct(k.cached_token_share)
        );
        let c = &self.client;
        let lag = |p: &Option<Percentiles>| {
            p.as_ref().map_or("-".to_string(), |p| {
                format!("p50 {:.3} / p99 {:.3} ms", p.p50, p.p99)
            })
        };
        let _ = writeln!(
            s,
            "client: arrivals stamped by the {} ({} of {} turns); read lag at first token {}, worst per turn {}{}",
            if c.rx_user_turns == 0 { "kernel" } else { "client thread" },
            if c.rx_user_turns == 0 { c.rx_kernel_turns } else { c.rx_user_turns },
            c.rx_kernel_turns + c.rx_user_turns,
            lag(&c.read_lag_ttft_ms),
            lag(&c.read_lag_max_ms),
            if c.retries > 0 {
                format!("; {} request(s) re-sent after a kept-alive connection closed", c.retries)
            } else {
                String::new()
            }
        );
        let a = &self.accuracy;
        let _ = writeln!(
            s,
            "accuracy (reference scorer): inline {} over {} issued scorable turns, {} missing output (workflow {} / {}, coding {} / {})",
            pct(a.inline_accuracy),
            a.scored_turns,
            a.missing,
            pct(a.workflow),
            a.workflow_turns,
            pct(a.coding),
            a.coding_turns
        );
        if let Some(w) = &self.warmup {
            let _ = writeln!(
                s,
                "warmup (excluded): {:.2} s, {} requests issued, {} completed, {} trajectories at concurrency {}, from {}",
                w.duration_s, w.requests_issued, w.requests_completed, w.trajectories, w.concurrency, w.source
            );
        }
    }
}

fn validity(
    cfg: &ReplayConfig,
    agg: &Aggregate,
    f: &RunFacts,
    acc: &Accuracy,
    m: &Mlperf,
) -> Validity {
    let official = cfg.preset.map(|p| p.official());
    let n = |s: Status| agg.by_status[s.index()];
    let stopped_early = match (f.interrupted, f.stopped_by) {
        (true, _) => Some("interrupted".to_string()),
        (false, Some(StopReason::MaxDuration)) => Some("--max-duration".to_string()),
        (false, Some(StopReason::Shutdown)) => Some("shutdown".to_string()),
        _ => None,
    };
    let osl_without_tokenizer = (!m.reference_tokens && !m.osl_source.is_empty()).then(|| {
        format!(
            "OSL was counted from {} instead",
            m.osl_source
                .keys()
                .copied()
                .collect::<Vec<_>>()
                .join(" and ")
        )
    });
    let facts = validity::Facts {
        salt: cfg.salt,
        delays: cfg.delays,
        delay_scale: cfg.delay_scale,
        dataset_size: f.dataset_size,
        // Unsharded, the run's own final budget (it grows with --min-duration-scale).
        budget: if cfg.shard.count > 1 {
            cfg.trajectories.unwrap_or(f.dataset_size)
        } else {
            f.budget_local
        },
        trajectories_started: f.trajectories_started,
        trajectories_finished: f.trajectories_finished,
        shards: cfg.shard.count,
        stop_issuing_on_first_user_complete: cfg.stop_issuing_on_first_user_complete,
        stopped_early,
        sampling: official_sampling(cfg),
        row_overrides: f.row_overrides.clone(),
        body_changes: [
            cfg.include_usage.then_some("--include-usage".to_string()),
            cfg.clear_generated
                .then_some("--clear-generated".to_string()),
        ]
        .into_iter()
        .flatten()
        .collect(),
        inline_accuracy: acc.inline_accuracy,
        osl_mean_full_run: m.reference_tokens.then_some(m.osl_mean_full_run).flatten(),
        osl_without_tokenizer,
        duration_s: m.primary.tracked_duration_s,
        duration_basis: "tracked",
        concurrency: cfg.point_concurrency(),
        min_duration_scale: cfg.min_duration_scale.unwrap_or(1.0),
    };
    let v = validity::evaluate(official.as_ref(), &facts);
    let mut notes = Vec::new();
    let failed = n(Status::Failed) + n(Status::TimedOut);
    if failed > 0 {
        notes.push(format!(
            "{failed} turn(s) failed or timed out ({} failed, {} timed out) and score 0; a failed turn does not invalidate a run",
            n(Status::Failed),
            n(Status::TimedOut)
        ));
    }
    if n(Status::Aborted) + n(Status::Cancelled) > 0 {
        notes.push(format!(
            "{} turn(s) aborted and {} cancelled",
            n(Status::Aborted),
            n(Status::Cancelled)
        ));
    }
    if agg.by_status[0] == 0 {
        notes.push("no turn completed".to_string());
    }
    if cfg.shard.count > 1 {
        notes.push(format!(
            "shard {}/{}: the trajectory rule and the gates apply to the union of all shards",
            cfg.shard.index, cfg.shard.count
        ));
    }
    if m.template_fallbacks > 0 {
        notes.push(format!(
            "{} token count(s) used the reference's text fallback because the chat template failed ({}): the reference does the same",
            m.template_fallbacks,
            m.template_error.as_deref().unwrap_or("?")
        ));
    }
    if f.warmup.is_some() {
        notes.push(
            "a warmup was run before tracking and is declared (excluded from every result)".into(),
        );
    }
    Validity {
        verdict: v.verdict,
        reasons: v.reasons(),
        warnings: v.warnings(),
        notes,
        rules: v.rules,
        gates: official,
    }
}

/// What `summary.json` says about the merge.
#[derive(Debug, Clone, Serialize)]
pub struct MergeInfo {
    /// Shards joined, of how many.
    pub shards: u64,
    pub of: u64,
    /// Shard indices not given (only with `--partial`).
    pub missing: Vec<u64>,
    pub dirs: Vec<String>,
    /// `blake2b-256` of the shared configuration (what every shard had to agree on).
    pub config_hash: String,
    /// Per shard: its host's clock against the servers' `Date` headers.
    pub clocks: Vec<ShardClock>,
    /// Bound on the wall-clock difference between any two shards' hosts, ms (`None`: a shard
    /// saw no `Date` header, the skew is not bounded).
    pub skew_bound_ms: Option<f64>,
    /// The union's window on the aligned timeline (wall-clock ns).
    pub window_start_wall_ns: u64,
    pub budget_exhausted_wall_ns: Option<u64>,
    pub window_closed_wall_ns: Option<u64>,
    /// Which shard's trajectory completion stopped tracking.
    pub window_closed_by: Option<String>,
}

/// One shard's clock.
#[derive(Debug, Clone, Serialize)]
pub struct ShardClock {
    pub shard: u64,
    /// Offset of this host's wall clock from the servers' (local − server), bounded: it lies in
    /// `[lo, hi]` ms. `None` without any `Date` header.
    pub offset_lo_ms: Option<f64>,
    pub offset_hi_ms: Option<f64>,
    /// Responses that carried a `Date` header.
    pub responses: u64,
}

/// `-` or the value with 1, 2 or 3 decimals; `pct`: a fraction as a percentage.
fn f1(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn f2(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

fn f3(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.2} %", v * 100.0))
}
