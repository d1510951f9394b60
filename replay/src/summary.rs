//! The run summary: exactly what goes to `summary.json`, and its terminal rendering.
//!
//! Latency percentiles come from every raw sample of the in-window `ok` turns (SPEC §7), in
//! milliseconds. Throughput is over the performance window (start of the run → last completion
//! of an in-window turn). Accuracy and the mean output tokens used for the validity gates are
//! over all `ok` turns of the run (official runs finish every started trajectory for accuracy);
//! the in-window mean is reported next to it. Every field is described in `docs/records.md`.

use crate::collector::{Aggregate, SOURCES};
use crate::config::{Gates, ReplayConfig};
use crate::driver::StopReason;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use tokentap_core::clock::Anchor;
use tokentap_core::record::Status;
use tokentap_core::stats::{Percentiles, Samples};

/// `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub tokentap_version: &'static str,
    pub validity: Validity,
    pub run: RunInfo,
    pub window: Window,
    pub counts: Counts,
    pub latency_ms: Latency,
    pub throughput: Throughput,
    pub tokens: Tokens,
    pub client: ClientHealth,
    pub accuracy: Accuracy,
    /// The full resolved configuration (the API key is never included).
    pub config: ReplayConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every official gate and rule passed.
    Valid,
    /// At least one reason in `reasons`.
    Invalid,
    /// No preset, so no official gates; no other rule failed. The measured values are listed.
    NoGates,
}

#[derive(Debug, Clone, Serialize)]
pub struct Validity {
    pub verdict: Verdict,
    /// Why the run is not valid (empty when valid).
    pub reasons: Vec<String>,
    /// Observations that do not change the verdict.
    pub notes: Vec<String>,
    /// The gates applied (from `--preset`), if any.
    pub gates: Option<Gates>,
    /// Measured inline accuracy (0..1) over all scored ok turns.
    pub inline_accuracy: Option<f64>,
    /// Measured mean output tokens per ok turn (whole run).
    pub mean_output_tokens_per_turn: Option<f64>,
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
    /// Problem writing records.jsonl, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records_error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// Tracking started (= run start), raw CLOCK_MONOTONIC ns.
    pub start_mono_ns: u64,
    pub start_wall_ns: u64,
    /// Tracking stopped (first user completed / stop), monotonic ns; null if it never did.
    pub closed_mono_ns: Option<u64>,
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

#[derive(Debug, Clone, Serialize)]
pub struct Accuracy {
    /// Mean score over scored ok turns, 0..1.
    pub inline_accuracy: Option<f64>,
    pub scored_turns: u64,
    pub workflow: Option<f64>,
    pub workflow_turns: u64,
    pub coding: Option<f64>,
    pub coding_turns: u64,
}

/// Inputs besides the aggregate.
pub(crate) struct RunFacts {
    pub start: Anchor,
    pub end: Anchor,
    pub interrupted: bool,
    pub stopped_by: Option<StopReason>,
    pub window_closed: Option<u64>,
    pub budget_local: u64,
    pub trajectories_started: u64,
    pub trajectories_finished: u64,
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

impl Summary {
    pub(crate) fn build(mut agg: Aggregate, cfg: ReplayConfig, f: RunFacts) -> Summary {
        let window_end = agg.window_last_end;
        let duration = window_end.map(|e| e.saturating_sub(f.start.mono_ns) as f64 / 1e9);
        let rate = |x: f64| duration.filter(|d| *d > 0.0).map(|d| x / d);
        let tok_s = rate(agg.window_output_tokens as f64);
        let mean_window = (agg.window_output_known > 0)
            .then(|| agg.window_output_tokens as f64 / agg.window_output_known as f64);
        let latency = Latency {
            ttft: ms(&mut agg.ttft),
            ttfb: ms(&mut agg.ttfb),
            itl: ms(&mut agg.itl),
            inter_chunk: ms(&mut agg.inter_chunk),
            tpot: ms(&mut agg.tpot),
            e2e: ms(&mut agg.e2e),
        };
        let tokens = Tokens {
            mean_output_tokens_per_turn: agg.ok_output_tokens.value(),
            mean_output_tokens_per_turn_window: mean_window,
            output_tokens_source: SOURCES
                .iter()
                .zip(agg.ok_output_sources)
                .filter(|(_, n)| *n > 0)
                .map(|(s, n)| (*s, n))
                .collect(),
            cached_token_share: (agg.prompt_tokens > 0)
                .then(|| agg.cached_tokens as f64 / agg.prompt_tokens as f64),
            prompt_tokens: agg.prompt_tokens,
            cached_tokens: agg.cached_tokens,
            turns_with_cache_info: agg.cache_turns,
        };
        let accuracy = Accuracy {
            inline_accuracy: agg.accuracy.value(),
            scored_turns: agg.accuracy.n,
            workflow: agg.accuracy_workflow.value(),
            workflow_turns: agg.accuracy_workflow.n,
            coding: agg.accuracy_coding.value(),
            coding_turns: agg.accuracy_coding.n,
        };
        let client = ClientHealth {
            rx_kernel_turns: agg.rx_kernel_turns,
            rx_user_turns: agg.rx_user_turns,
            read_lag_ttft_ms: ms(&mut agg.rx_lag_ttft),
            read_lag_max_ms: ms(&mut agg.rx_lag_max),
            retries: agg.retries,
        };
        let validity = validity(&cfg, &agg, &f, &accuracy, &tokens);
        Summary {
            tokentap_version: env!("CARGO_PKG_VERSION"),
            validity,
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
            },
            window: Window {
                start_mono_ns: f.start.mono_ns,
                start_wall_ns: f.start.wall_ns,
                closed_mono_ns: f.window_closed,
                end_mono_ns: window_end,
                end_wall_ns: window_end.map(|e| f.start.wall_of(e)),
                duration_s: duration,
            },
            counts: Counts {
                turns: by_status(&agg.by_status),
                in_window: by_status(&agg.in_window_by_status),
                total: agg.records,
            },
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
            config: cfg,
        }
    }

    /// The terminal summary.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        let f2 = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2} %", v * 100.0));
        let _ = writeln!(s, "tokentap replay — {}", self.config.endpoint.url);
        let v = &self.validity;
        let verdict = match v.verdict {
            Verdict::Valid => "VALID".to_string(),
            Verdict::Invalid => "INVALID".to_string(),
            Verdict::NoGates => "no official gates for this model".to_string(),
        };
        let _ = writeln!(s, "verdict: {verdict}");
        for r in &v.reasons {
            let _ = writeln!(s, "  - {r}");
        }
        for n in &v.notes {
            let _ = writeln!(s, "  note: {n}");
        }
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
            "accuracy: inline {} over {} turns (workflow {} / {}, coding {} / {})",
            pct(a.inline_accuracy),
            a.scored_turns,
            pct(a.workflow),
            a.workflow_turns,
            pct(a.coding),
            a.coding_turns
        );
        s
    }
}

fn validity(
    cfg: &ReplayConfig,
    agg: &Aggregate,
    f: &RunFacts,
    acc: &Accuracy,
    tok: &Tokens,
) -> Validity {
    let mut reasons = Vec::new();
    let mut notes = Vec::new();
    let n = |s: Status| agg.by_status[crate::collector::status_index(s)];
    if f.interrupted {
        reasons.push("the run was interrupted".to_string());
    }
    if let Some(r) = f.stopped_by {
        if r != StopReason::Shutdown {
            reasons.push(format!(
                "issuing stopped early ({}): not every started trajectory finished",
                match r {
                    StopReason::FirstUserComplete =>
                        "--stop-issuing-on-first-user-complete, a tuning mode",
                    StopReason::MaxDuration => "--max-duration",
                    StopReason::Shutdown => "shutdown",
                }
            ));
        }
    }
    let failed = n(Status::Failed) + n(Status::TimedOut);
    if failed > 0 {
        reasons.push(format!(
            "{failed} turn(s) failed or timed out ({} failed, {} timed out)",
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
        reasons.push("no turn completed".to_string());
    }
    if !cfg.byte_compatible {
        notes.push(format!(
            "request bodies differ from the MLPerf client ({})",
            [
                cfg.include_usage.then_some("--include-usage"),
                cfg.clear_generated.then_some("--clear-generated"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(", ")
        ));
    }
    if tok.output_tokens_source.keys().any(|s| *s == "chunks") {
        notes.push("some output token counts are chunk counts (no usage from the server): they undercount when a chunk carries several tokens; --include-usage gives exact counts".into());
    }
    if cfg.shard.count > 1 {
        notes.push(format!(
            "shard {}/{}: gates apply to the union of all shards' records",
            cfg.shard.index, cfg.shard.count
        ));
    }
    let gates = cfg.preset.map(|p| p.gates());
    if let Some(g) = gates {
        if !cfg.salt {
            reasons.push("salting is off (official runs salt: --salt)".into());
        }
        match acc.inline_accuracy {
            Some(a) if a >= g.min_accuracy => {}
            Some(a) => reasons.push(format!(
                "inline accuracy {:.2} % is below the {} gate of {:.2} %",
                a * 100.0,
                g.model,
                g.min_accuracy * 100.0
            )),
            None => reasons.push("no turn could be scored for accuracy".into()),
        }
        match tok.mean_output_tokens_per_turn {
            Some(m) if m >= g.output_tokens_min && m <= g.output_tokens_max => {}
            Some(m) => reasons.push(format!(
                "mean output tokens per turn {m:.1} is outside the {} range {}–{}",
                g.model, g.output_tokens_min, g.output_tokens_max
            )),
            None => reasons.push("no output token counts".into()),
        }
    } else {
        notes.push(format!(
            "no official gates for this model (no --preset); measured: inline accuracy {}, mean output tokens per turn {}",
            acc.inline_accuracy.map_or("-".into(), |a| format!("{:.2} %", a * 100.0)),
            tok.mean_output_tokens_per_turn.map_or("-".into(), |m| format!("{m:.1}"))
        ));
    }
    let verdict = if !reasons.is_empty() {
        Verdict::Invalid
    } else if gates.is_none() {
        Verdict::NoGates
    } else {
        Verdict::Valid
    };
    Validity {
        verdict,
        reasons,
        notes,
        gates,
        inline_accuracy: acc.inline_accuracy,
        mean_output_tokens_per_turn: tok.mean_output_tokens_per_turn,
    }
}
