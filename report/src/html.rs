//! The self-contained HTML report: inline CSS, inline SVG (see [`crate::svg`]) and a few lines of
//! inline JavaScript that only checks the page (every plot has data marks) and then sets
//! `document.title` and `<body data-report-ready="1">` — a marker a headless browser's dumped DOM
//! shows only when the script ran without an exception. Nothing is fetched from the network.

use crate::load::Run;
use crate::svg::{esc, num, Bars, Lines, Scatter, Span, Swimlane};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use tokentap_core::record::Status;
use tokentap_run::compare::CompareFile;

/// The page style, shared with the sweep report.
pub const CSS: &str = r#"
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1560px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.grid2{display:grid;grid-template-columns:1fr;gap:12px}
svg.plot{background:#fff;border:1px solid #e3e3e3;border-radius:4px;width:100%;max-width:1200px;height:auto;display:block}
svg text{font-size:11px;fill:#444}svg .ttl{font-size:13px;font-weight:600;fill:#222}
svg .grid{stroke:#eee}svg circle.pt{fill-opacity:.75}svg circle.pt:not([fill]){fill:#1f77b4}
table{border-collapse:collapse;margin:6px 0;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
td{white-space:nowrap}td:last-child{white-space:normal}
th{background:#f5f5f5}td:first-child,th:first-child{text-align:left}
.verdict{display:inline-block;padding:6px 14px;border-radius:4px;font-weight:700;font-size:16px;color:#fff}
.valid{background:#2e7d32}.invalid{background:#c62828}.incomplete{background:#b26a00}.no_gates,.unknown{background:#6d6d6d}
.muted{color:#666}pre{background:#f7f7f7;padding:8px;overflow:auto;max-height:420px}
"#;

/// The self-check, shared with the sweep report.
pub const SCRIPT: &str = r#"
(function(){
  var plots=document.querySelectorAll('svg.plot');
  var empty=[];
  for(var i=0;i<plots.length;i++){
    var n=plots[i].querySelectorAll('.pt').length;
    if(n===0){empty.push(plots[i].getAttribute('data-plot'));}
  }
  document.body.setAttribute('data-plots',String(plots.length));
  document.body.setAttribute('data-empty-plots',empty.join(','));
  // Reads well at a glance: no horizontal scroll at the window's width, no label cut at its
  // plot's edge (names of the plots with one).
  var root=document.documentElement;
  document.body.setAttribute('data-hscroll',String(Math.max(0,root.scrollWidth-root.clientWidth)));
  var clipped=[];
  var texts=document.querySelectorAll('svg.plot text');
  for(var j=0;j<texts.length;j++){
    var t=texts[j],sr=t.ownerSVGElement.getBoundingClientRect(),r=t.getBoundingClientRect();
    if(r.width>0&&(r.left<sr.left-1||r.top<sr.top-1||r.right>sr.right+1||r.bottom>sr.bottom+1)){
      clipped.push(t.ownerSVGElement.getAttribute('data-plot')+': '+t.textContent);
    }
  }
  document.body.setAttribute('data-clipped-labels',clipped.join(' | '));
  document.body.setAttribute('data-report-ready','1');
  document.title='tokentap report: '+document.body.getAttribute('data-verdict');
})();
"#;

fn status_color(s: Status) -> &'static str {
    match s {
        Status::Ok => "#1f77b4",
        Status::Failed => "#d62728",
        Status::TimedOut => "#ff7f0e",
        Status::Aborted => "#9e9e9e",
        Status::Cancelled => "#9467bd",
    }
}

const DELAY_COLOR: &str = "#d9d9d9";

/// Renders the whole page.
pub fn render(run: &Run) -> String {
    let mut o = String::with_capacity(256 * 1024);
    let verdict = run.verdict();
    let _ = write!(
        o,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>tokentap report (script did not run)</title><style>{CSS}</style></head><body data-verdict="{}">"#,
        esc(verdict)
    );
    let model = run.config.model.as_deref().unwrap_or("?");
    let endpoint = run.config.endpoint_urls();
    let _ = write!(
        o,
        r#"<h1>tokentap run report</h1><div class="muted">{} · model <b>{}</b> · endpoint {} · concurrency {} · {} records · tokentap {}</div>"#,
        esc(&run.dir.display().to_string()),
        esc(model),
        esc(&endpoint),
        run.config.concurrency,
        run.records.len(),
        esc(&run.summary.tokentap_version)
    );
    mlperf_section(&mut o, run);
    verdict_section(&mut o, run);
    steady_state_section(&mut o, run);
    summary_section(&mut o, run);
    plots_section(&mut o, run);
    compare_section(&mut o, run);
    let _ = write!(o, "<script>{SCRIPT}</script></body></html>");
    o
}

/// The benchmark's primary metrics, first (docs/benchmark.md#primary-metrics): the reference's
/// definitions, and where the tokens came from.
fn mlperf_section(o: &mut String, run: &Run) {
    let m = &run.summary.mlperf;
    o.push_str(r#"<h2>MLPerf primary metrics</h2><table id="mlperf"><tr>"#);
    let labels = [
        "system_tps (tok/s)",
        "tps_per_user (tok/s)",
        "e2e_interactivity (tok/s)",
        "ttft_p90 (ms)",
        "qps",
        "tpot_p90 (ms)",
        "OSL mean (tokens)",
        "tracked (s)",
    ];
    for label in labels {
        let _ = write!(o, "<th>{}</th>", esc(label));
    }
    o.push_str("</tr><tr>");
    for (k, v) in crate::text::primary_metrics(&m.primary) {
        let _ = write!(o, r#"<td data-metric="{k}">{}</td>"#, f(v));
    }
    o.push_str("</tr></table>");
    let sources: Vec<String> = m
        .osl_source
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let reference = m.reference_tokens;
    let _ = write!(
        o,
        r#"<p class="muted" id="token-source">The MLPerf Endpoints reference's definitions (result_summary.json). {} issued, {} completed, {} failed samples in the performance window. Output tokens: {}.</p>"#,
        m.samples_issued,
        m.samples_completed,
        m.samples_failed,
        if reference {
            "counted with the model's tokenizer, as the reference counts them".to_string()
        } else {
            esc(&format!(
                "NOT the reference's count ({}) — rerun with --tokenizer DIR",
                if sources.is_empty() {
                    "none".to_string()
                } else {
                    sources.join(", ")
                }
            ))
        }
    );
    if let Some(w) = &m.recounted_with {
        let _ = write!(
            o,
            r#"<p id="recounted">Recounted by <code>tokentap report --tokenizer {}</code> from the recorded outputs.</p>"#,
            esc(w)
        );
    }
    if let Some(n) = &m.report_note {
        let _ = write!(o, r#"<p class="muted" id="report-note">{}</p>"#, esc(n));
    }
    let a = &run.summary.accuracy;
    let _ = write!(
        o,
        r#"<p id="inline-accuracy">Inline accuracy (reference scorer, scores.json): <b>{}</b> over {} issued scorable turns ({} missing output) · coding {} · workflow {}</p>"#,
        f(a.inline_accuracy),
        a.scored_turns,
        a.missing,
        f(a.coding),
        f(a.workflow)
    );
}

fn verdict_section(o: &mut String, run: &Run) {
    let v = run.verdict();
    let _ = write!(
        o,
        r#"<h2>Validity</h2><div id="verdict" class="verdict {}">{}</div>"#,
        esc(v),
        esc(v)
    );
    let reasons = &run.summary.validity.reasons;
    if !reasons.is_empty() {
        o.push_str("<p><b>Why not valid:</b></p><ul>");
        for r in reasons {
            let _ = write!(o, "<li>{}</li>", esc(r));
        }
        o.push_str("</ul>");
    }
    let notes = &run.summary.validity.notes;
    if !notes.is_empty() {
        o.push_str(r#"<ul class="muted">"#);
        for r in notes {
            let _ = write!(o, "<li>{}</li>", esc(r));
        }
        o.push_str("</ul>");
    }
}

fn f(v: Option<f64>) -> String {
    v.map(num).unwrap_or_else(|| "–".into())
}

/// The steady-state window on the time plots, when tokentap's diagnostic found one: its issue
/// span, in seconds since the run's start.
fn steady_band(run: &Run) -> Vec<(f64, f64, String)> {
    let Some(ss) = &run.summary.steady_state else {
        return Vec::new();
    };
    let w = &ss.window;
    let t0 = run.t0() as f64;
    match &w.window {
        Some(sw) if w.found => vec![(
            (sw.start_ns as f64 - t0) / 1e9,
            (sw.end_ns as f64 - t0) / 1e9,
            "steady window (diagnostic)".into(),
        )],
        _ => Vec::new(),
    }
}

/// The steady-state basis (rules §4.4): whole run for an agentic point, with the reference's
/// experimental NATL and tokentap's window diagnostic.
fn steady_state_section(o: &mut String, run: &Run) {
    let Some(ss) = &run.summary.steady_state else {
        return;
    };
    let _ = write!(
        o,
        r#"<h2>Steady state</h2><p id="steady-state">Official basis: <b>{}</b>. <span class="muted">{}</span></p>"#,
        esc(&ss.basis),
        esc(&ss.note)
    );
    let n = &ss.natl;
    let _ = write!(
        o,
        r#"<table id="natl"><tr><th>NATL (experimental), tok/s per trajectory</th><th>trajectories</th><th>p10</th><th>p50</th><th>p90</th><th>super-passes of {}</th><th>across CoV</th><th>steady</th></tr><tr><td></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>"#,
        f(Some(n.superpass_trajectories as f64)),
        f(Some(n.n_trajectories as f64)),
        f(Some(n.p10)),
        f(Some(n.p50)),
        f(Some(n.p90)),
        f(Some(n.n_super_passes as f64)),
        f(Some(n.across_cov)),
        if n.found { "yes" } else { "no" }
    );
    let w = &ss.window;
    let text = match &w.window {
        Some(sw) if w.found => format!(
            "super-passes {}–{} after a warmup of {}, {} samples; system {} tok/s, per user {} tok/s",
            f(Some(sw.sp_lo as f64)),
            sw.sp_hi.saturating_sub(1),
            f(Some(w.warmup as f64)),
            f(Some(sw.n_samples as f64)),
            f(w.tps_system.map(|t| t.0)),
            f(w.tps_per_user.map(|t| t.0))
        ),
        _ => format!("not found: {}", w.reason.as_deref().unwrap_or("-")),
    };
    let _ = write!(
        o,
        r#"<p id="steady-window">Window (tokentap's diagnostic, the reference's detector over the agentic turns): {}</p>"#,
        esc(&text)
    );
}

fn summary_section(o: &mut String, run: &Run) {
    let s = &run.summary;
    let labels = [
        "TTFT",
        "TTFB",
        "ITL (per token)",
        "inter-chunk",
        "TPOT",
        "E2E",
    ];
    o.push_str(r#"<h2>Summary</h2><table id="summary"><tr><th>latency (ms), in-window ok turns</th><th>count</th><th>mean</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>min</th><th>max</th></tr>"#);
    for (label, (_, p)) in labels.iter().zip(crate::text::latencies(&s.latency_ms)) {
        let q = |g: fn(&tokentap_core::stats::Percentiles) -> f64| f(p.map(g));
        let _ = write!(
            o,
            "<tr><td>{label}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            p.map_or(0, |p| p.count),
            q(|p| p.mean),
            q(|p| p.p50),
            q(|p| p.p90),
            q(|p| p.p95),
            q(|p| p.p99),
            q(|p| p.p999),
            q(|p| p.min),
            q(|p| p.max)
        );
    }
    o.push_str("</table><table><tr><th>throughput and tokens</th><th>value</th></tr>");
    let rows: [(&str, String); 9] = [
        ("window duration (s)", f(s.window.duration_s)),
        ("output tokens/s", f(s.throughput.output_tokens_per_s)),
        (
            "output tokens/s per user",
            f(s.throughput.output_tokens_per_s_per_user),
        ),
        ("turns/s", f(s.throughput.turns_per_s)),
        ("in-window ok turns", s.throughput.turns.to_string()),
        (
            "mean output tokens per turn",
            f(s.tokens.mean_output_tokens_per_turn),
        ),
        ("cached-token share", f(s.tokens.cached_token_share)),
        ("inline accuracy", f(s.accuracy.inline_accuracy)),
        ("run duration (s)", f(Some(s.run.duration_s))),
    ];
    for (k, shown) in rows {
        let _ = write!(o, "<tr><td>{k}</td><td>{shown}</td></tr>");
    }
    o.push_str("</table>");
}

fn plots_section(o: &mut String, run: &Run) {
    o.push_str(r#"<h2>Plots</h2><div class="grid2">"#);
    o.push_str(
        &Scatter {
            name: "ttft_by_turn",
            title: "TTFT against turn index (in-window ok turns)",
            x_label: "client turn index in the trajectory",
            y_label: "TTFT (ms)",
            log_y: false,
            points: run.ttft_by_turn(),
        }
        .render(),
    );
    let (ctx, ctx_label) = run.ttft_by_context();
    o.push_str(
        &Scatter {
            name: "ttft_by_context",
            title: "TTFT against context size",
            x_label: ctx_label,
            y_label: "TTFT (ms)",
            log_y: false,
            points: ctx,
        }
        .render(),
    );
    o.push_str(
        &Lines {
            bands: Vec::new(),
            name: "itl_cdf",
            title: "ITL distribution (CDF, one sample per token)",
            x_label: "ITL (ms, log)",
            y_label: "fraction of tokens ≤ x",
            log_x: true,
            series: vec![("ITL".into(), run.itl_cdf(400))],
        }
        .render(),
    );
    let (tps, share) = run.over_time();
    o.push_str(
        &Lines {
            bands: steady_band(run),
            name: "output_tps",
            title: "Output tokens/s over time (by completion)",
            x_label: "seconds since run start",
            y_label: "output tokens/s",
            log_x: false,
            series: vec![("tokens/s".into(), tps)],
        }
        .render(),
    );
    o.push_str(
        &Lines {
            bands: steady_band(run),
            name: "cached_share",
            title: "Cached-token share over time (needs usage)",
            x_label: "seconds since run start",
            y_label: "cached / prompt tokens",
            log_x: false,
            series: vec![("cached share".into(), share)],
        }
        .render(),
    );
    o.push_str(
        &Bars {
            name: "status_counts",
            title: "Turns by status",
            bars: run
                .status_counts()
                .into_iter()
                .map(|(s, n)| (s.as_str().to_owned(), n as f64, status_color(s)))
                .collect(),
        }
        .render(),
    );
    o.push_str("</div>");
    o.push_str(&swimlane(run));
}

fn swimlane(run: &Run) -> String {
    let t0 = run.t0();
    let sec = |ns: u64| ns.saturating_sub(t0) as f64 / 1e9;
    let mut by_slot: BTreeMap<u32, Vec<&tokentap_core::record::TurnRecord>> = BTreeMap::new();
    for r in &run.records {
        if r.status == Status::Aborted {
            continue; // never sent: nothing to draw
        }
        by_slot.entry(r.slot.unwrap_or(0)).or_default().push(r);
    }
    let lanes = by_slot.keys().max().map(|m| m + 1).unwrap_or(1);
    let mut spans = Vec::new();
    for (slot, mut rs) in by_slot {
        rs.sort_by_key(|r| r.start_mono_ns);
        let mut prev_end = t0;
        for r in rs {
            if let Some(due) = r.scheduled_mono_ns {
                // The inter-turn delay ran from the previous end in this slot to `due`.
                if due > prev_end + 1_000_000 {
                    spans.push(Span {
                        lane: slot,
                        t0: sec(prev_end),
                        t1: sec(due),
                        color: DELAY_COLOR,
                        tip: format!("delay {:.3} s", (due - prev_end) as f64 / 1e9),
                    });
                }
            }
            let end = r.end_mono_ns().unwrap_or(r.start_mono_ns);
            spans.push(Span {
                lane: slot,
                t0: sec(r.start_mono_ns),
                t1: sec(end),
                color: status_color(r.status),
                tip: format!(
                    "{} turn {} ({}): {:.1} ms",
                    r.conversation_id.as_deref().unwrap_or("?"),
                    r.turn_index,
                    r.status.as_str(),
                    end.saturating_sub(r.start_mono_ns) as f64 / 1e6
                ),
            });
            prev_end = prev_end.max(end);
        }
    }
    Swimlane {
        name: "swimlane",
        title: "Trajectories per slot (grey: inter-turn delay)",
        lanes,
        spans,
        legend: &[
            ("ok", "#1f77b4"),
            ("failed", "#d62728"),
            ("timed out", "#ff7f0e"),
            ("cancelled", "#9467bd"),
            ("delay", DELAY_COLOR),
        ],
    }
    .render()
}

/// The client-vs-wire section: when `tokentap compare --json RUN_DIR/compare.json` (schema
/// `tokentap-compare/1`, docs/compare.md) left its comparison in the run directory, show its
/// verdict and reasons, the claims table (`metrics[].claims[]`) and the client-vs-wire TTFT
/// scatter (`pairs[].client.ttft_ms` against `pairs[].wire.ttft_ms`).
fn compare_section(o: &mut String, run: &Run) {
    let Some(c) = run.compare.as_ref().map(|c| &c.file) else {
        return;
    };
    o.push_str(r#"<h2 id="compare">Client vs wire (compare.json)</h2>"#);
    // The one-line verdict (`headline`: failed checks and claims), else the bare verdict.
    let verdict = c
        .headline
        .as_deref()
        .or(c.verdict.as_deref())
        .unwrap_or("–");
    let _ = write!(
        o,
        "<p>verdict: <b>{}</b> · format {} · schema {}</p>",
        esc(verdict),
        esc(c.format.as_deref().unwrap_or("–")),
        esc(&c.schema)
    );
    if !c.reasons.is_empty() {
        o.push_str("<ul>");
        for r in &c.reasons {
            let _ = write!(o, "<li>{}</li>", esc(r));
        }
        o.push_str("</ul>");
    }
    // Several proxies (one beside each replica) are one wire view: what each saw.
    if c.wire_sources.len() > 1 {
        o.push_str("<table id=\"wire-sources\"><tr><th>proxy records</th><th>turns</th><th>joined</th><th>replicas (turns)</th></tr>");
        for s in &c.wire_sources {
            let replicas: Vec<String> = s
                .replicas
                .iter()
                .map(|(r, n)| format!("{r} ({n})"))
                .collect();
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&s.path),
                num(s.turns as f64),
                num(s.joined as f64),
                esc(&replicas.join(", "))
            );
        }
        o.push_str("</table>");
    }
    if !c.metrics.is_empty() {
        o.push_str("<table id=\"claims\"><tr><th>metric</th><th>stat</th><th>client</th><th>wire</th><th>client − wire</th><th>tolerance</th><th>verdict</th></tr>");
        for m in &c.metrics {
            for cl in &m.claims {
                let _ = write!(
                    o,
                    "<tr><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(&m.metric),
                    esc(&m.unit),
                    esc(&cl.stat),
                    f(cl.client),
                    f(cl.wire),
                    f(cl.diff),
                    f(cl.tolerance),
                    esc(&cl.verdict)
                );
            }
        }
        o.push_str("</table>");
    }
    let points: Vec<(f64, f64)> = c
        .pairs
        .iter()
        .filter_map(|p| Some((p.wire.ttft_ms?, p.client.ttft_ms?)))
        .collect();
    if !points.is_empty() {
        o.push_str(
            &Scatter {
                name: "compare_ttft",
                title: "Client TTFT against wire TTFT, per joined turn",
                x_label: "wire TTFT (ms)",
                y_label: "client TTFT (ms)",
                log_y: false,
                points,
            }
            .render(),
        );
    }
    ttft_split_section(o, c);
}

/// Where TTFT went, when the proxy recorded the engine's own timing (`--inject-metrics`):
/// the distribution of queue, engine and outside-the-engine time (`ttft_split`), and per turn
/// the time outside the engine against the engine's own part.
fn ttft_split_section(o: &mut String, c: &CompareFile) {
    let Some(sp) = &c.ttft_split else {
        return;
    };
    let _ = write!(
        o,
        "<h3 id=\"ttft-split\">TTFT split by the engine's own timing ({} turns)</h3>",
        num(sp.turns as f64)
    );
    o.push_str("<table id=\"ttft-split-table\"><tr><th>part</th><th>p50 (ms)</th><th>p90 (ms)</th><th>p99 (ms)</th></tr>");
    for (label, d) in [
        ("engine queue", &sp.queue_ms),
        ("engine: scheduled → first token", &sp.engine_ms),
        ("outside the engine, at the wire", &sp.wire_outside_ms),
        ("outside the engine, at the client", &sp.client_outside_ms),
    ] {
        if let Some(d) = d {
            let _ = write!(
                o,
                "<tr><td>{label}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                num(d.p50),
                num(d.p90),
                num(d.p99)
            );
        }
    }
    o.push_str("</table>");
    let points: Vec<(f64, f64)> = c
        .pairs
        .iter()
        .filter_map(|p| p.ttft_split.as_ref())
        .map(|s| (s.queue_ms + s.engine_ms, s.outside_ms))
        .collect();
    if !points.is_empty() {
        o.push_str(
            &Scatter {
                name: "ttft_split",
                title: "Per turn: time outside the engine against the engine's queue + first token",
                x_label: "engine queue + first token (ms)",
                y_label: "outside the engine, at the wire (ms)",
                log_y: false,
                points,
            }
            .render(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A run of a summary tokentap wrote (an earlier layout's, with its steady state).
    fn run() -> Run {
        let summary: tokentap_run::summary::Summary = serde_json::from_str(include_str!(
            "../../testdata/run-layouts/tokentap-1d85c3a7/sweep/r1/summary.json"
        ))
        .unwrap();
        Run {
            dir: std::path::PathBuf::from("."),
            records: Vec::new(),
            config: summary.config.clone(),
            summary,
            compare: None,
        }
    }

    #[test]
    fn the_steady_window_is_a_band_in_run_seconds_and_a_line_of_its_own() {
        let mut r = run();
        r.summary.run.start.mono_ns = 1_000_000_000;
        let ss = r.summary.steady_state.as_mut().unwrap();
        ss.basis = "whole_run".into();
        ss.note = "agentic: <not official>".into();
        ss.natl.n_trajectories = 3;
        ss.natl.superpass_trajectories = 32;
        ss.natl.found = false;
        let w = &mut ss.window;
        w.found = true;
        w.warmup = 1;
        w.window = Some(tokentap_mlperf::steady_state::SteadyWindow {
            sp_lo: 0,
            sp_hi: 5,
            n_samples: 40,
            start_ns: 11_000_000_000,
            end_ns: 71_000_000_000,
            plateau_index: 0,
            n_plateaus: 1,
            skipped_short: 0,
        });
        w.tps_system = Some((975.9, [968.0, 983.0]));
        w.tps_per_user = Some((130.1, [129.0, 131.0]));
        assert_eq!(
            steady_band(&r),
            vec![(10.0, 70.0, "steady window (diagnostic)".to_string())]
        );
        let mut o = String::new();
        steady_state_section(&mut o, &r);
        assert!(o.contains("Official basis: <b>whole_run</b>"), "{o}");
        assert!(o.contains("&lt;not official&gt;"), "escaped: {o}");
        assert!(
            o.contains("super-passes 0–4") && o.contains("system 976 tok/s"),
            "{o}"
        );
        let w = &mut r.summary.steady_state.as_mut().unwrap().window;
        w.found = false;
        w.reason = Some("too short".into());
        assert!(steady_band(&r).is_empty());
        let mut o = String::new();
        steady_state_section(&mut o, &r);
        assert!(o.contains("not found: too short"), "{o}");
    }

    /// The comparison's one-line verdict and, with the engine's own timing on the wire, the TTFT
    /// split's distribution and its per-turn scatter.
    #[test]
    fn the_compare_section_shows_the_headline_and_the_ttft_split() {
        let d = |a: f64| json!({"min": a, "p50": a, "p90": a + 1.0, "p99": a + 2.0, "max": a + 2.0, "mean": a});
        let mut r = run();
        let json = json!({
            "schema": "tokentap-compare/1", "format": "tokentap", "verdict": "FAIL",
            "headline": "FAIL: 1 check failed, 12 of 12 claims within tolerance",
            "reasons": ["ttft never shorter than the wire's: 1 turn"],
            "ttft_split": {"turns": 2, "queue_ms": d(3.0), "engine_ms": d(40.0),
                           "wire_outside_ms": d(0.4), "client_outside_ms": d(0.9)},
            "pairs": [
                {"client": {"ttft_ms": 44.0}, "wire": {"ttft_ms": 43.5},
                 "ttft_split": {"queue_ms": 3.0, "engine_ms": 40.0, "outside_ms": 0.5}},
                {"client": {"ttft_ms": 45.0}, "wire": {"ttft_ms": 44.4},
                 "ttft_split": {"queue_ms": 4.0, "engine_ms": 40.0, "outside_ms": 0.4}}
            ]
        });
        r.compare = Some(crate::load::Compared {
            file: serde_json::from_value(json.clone()).unwrap(),
            json,
        });
        let mut o = String::new();
        compare_section(&mut o, &r);
        assert!(
            o.contains("verdict: <b>FAIL: 1 check failed, 12 of 12 claims within tolerance</b>"),
            "{o}"
        );
        assert!(
            o.contains("TTFT split by the engine's own timing (2 turns)"),
            "{o}"
        );
        assert!(
            o.contains("<td>outside the engine, at the client</td><td>0.9"),
            "{o}"
        );
        assert!(o.contains("ttft_split"), "the per-turn scatter: {o}");
    }
}
