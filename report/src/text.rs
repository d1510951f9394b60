//! `--format md` and `--format json`: the summary table, verdict, status counts and the
//! per-turn-index TTFT series, for terminals, PR comments and scripts.

use crate::load::Run;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use tokentap_core::stats::Percentiles;
use tokentap_mlperf::Primary;
use tokentap_run::summary::Latency;

/// The benchmark's primary metrics by their names in `summary.json`, in the report's order.
pub fn primary_metrics(p: &Primary) -> [(&'static str, Option<f64>); 8] {
    [
        ("system_tps", p.system_tps),
        ("tps_per_user", p.tps_per_user),
        ("e2e_interactivity", p.e2e_interactivity),
        ("ttft_p90_ms", p.ttft_p90_ms),
        ("qps", p.qps),
        ("tpot_p90_ms", p.tpot_p90_ms),
        ("osl_mean", p.osl_mean),
        ("tracked_duration_s", p.tracked_duration_s),
    ]
}

/// tokentap's latencies by their names in `summary.json` (`latency_ms`), in the report's order.
pub fn latencies(l: &Latency) -> [(&'static str, Option<&Percentiles>); 6] {
    [
        ("ttft", l.ttft.as_ref()),
        ("ttfb", l.ttfb.as_ref()),
        ("itl", l.itl.as_ref()),
        ("inter_chunk", l.inter_chunk.as_ref()),
        ("tpot", l.tpot.as_ref()),
        ("e2e", l.e2e.as_ref()),
    ]
}

/// Mean TTFT (ms) by turn index: `(turn index, turns, mean ms)`.
fn ttft_by_turn_index(run: &Run) -> Vec<(u32, u64, f64)> {
    let mut m: BTreeMap<u32, (u64, f64)> = BTreeMap::new();
    for (t, ms) in run.ttft_by_turn() {
        let e = m.entry(t as u32).or_default();
        e.0 += 1;
        e.1 += ms;
    }
    m.into_iter()
        .map(|(t, (n, s))| (t, n, s / n as f64))
        .collect()
}

/// The JSON form.
pub fn json(run: &Run) -> Value {
    let s = &run.summary;
    json!({
        "run_dir": run.dir.display().to_string(),
        "mlperf": s.mlperf,
        "verdict": run.verdict(),
        "reasons": s.validity.reasons,
        "notes": s.validity.notes,
        "status_counts": run.status_counts().into_iter()
            .map(|(k, v)| (k.as_str().to_owned(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "latency_ms": s.latency_ms,
        "throughput": s.throughput,
        "tokens": s.tokens,
        "accuracy": s.accuracy,
        "ttft_ms_by_turn_index": ttft_by_turn_index(run).into_iter()
            .map(|(t, n, m)| json!({"turn_index": t, "turns": n, "mean_ms": m})).collect::<Vec<_>>(),
        "compare": run.compare.as_ref().map(|c| &c.json),
    })
}

fn cell(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into())
}

/// The Markdown form.
pub fn markdown(run: &Run) -> String {
    let s = &run.summary;
    let mut o = String::new();
    let _ = writeln!(o, "# tokentap run report\n\n`{}`\n", run.dir.display());
    let m = &s.mlperf;
    let _ = writeln!(
        o,
        "| MLPerf primary metric (reference definitions) | value |\n|---|---:|"
    );
    for (k, v) in primary_metrics(&m.primary) {
        let _ = writeln!(o, "| {k} | {} |", cell(v));
    }
    let _ = writeln!(
        o,
        "\nOutput tokens: {}.\n",
        if let Some(w) = &m.recounted_with {
            format!("recounted from the recorded outputs with {w} (tokentap report --tokenizer)")
        } else if m.reference_tokens {
            "the reference tokenizer's count".to_string()
        } else {
            format!(
                "NOT the reference's count ({}) — rerun with --tokenizer DIR",
                json!(m.osl_source)
            )
        }
    );
    let _ = writeln!(o, "**Verdict: {}**\n", run.verdict());
    for r in &s.validity.reasons {
        let _ = writeln!(o, "- reason: {r}");
    }
    for r in &s.validity.notes {
        let _ = writeln!(o, "- note: {r}");
    }
    o.push_str("\n| latency (ms) | count | mean | p50 | p90 | p95 | p99 | p99.9 | max |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (k, p) in latencies(&s.latency_ms) {
        let q = |f: fn(&Percentiles) -> f64| cell(p.map(f));
        let _ = writeln!(
            o,
            "| {k} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.map_or(0, |p| p.count),
            q(|p| p.mean),
            q(|p| p.p50),
            q(|p| p.p90),
            q(|p| p.p95),
            q(|p| p.p99),
            q(|p| p.p999),
            q(|p| p.max)
        );
    }
    let _ = writeln!(
        o,
        "\n| throughput | value |\n|---|---:|\n| output tokens/s | {} |\n| output tokens/s per user | {} |\n| turns/s | {} |\n| cached-token share | {} |\n| inline accuracy | {} |\n| window (s) | {} |",
        cell(s.throughput.output_tokens_per_s),
        cell(s.throughput.output_tokens_per_s_per_user),
        cell(s.throughput.turns_per_s),
        cell(s.tokens.cached_token_share),
        cell(s.accuracy.inline_accuracy),
        cell(s.window.duration_s),
    );
    o.push_str("\n| status | turns |\n|---|---:|\n");
    for (st, n) in run.status_counts() {
        let _ = writeln!(o, "| {} | {n} |", st.as_str());
    }
    o.push_str("\n| turn index | turns | mean TTFT (ms) |\n|---:|---:|---:|\n");
    for (t, n, m) in ttft_by_turn_index(run) {
        let _ = writeln!(o, "| {t} | {n} | {m:.3} |");
    }
    o
}
