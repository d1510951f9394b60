//! The terminal rendering of the summary: what a person reads when the run ends.

use super::*;
use std::fmt::Write as _;
use tokentap_core::stats::Percentiles;
use tokentap_mlperf::validity;

impl Summary {
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
        let Some(ss) = &self.steady_state else {
            return;
        };
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
