//! Building the summary from the run's aggregate and facts: the reference's view, tokentap's
//! own numbers, the validity verdict.

use super::*;
use crate::collector::Aggregate;
use crate::config::RunConfig;
use std::collections::BTreeMap;
use tokentap_core::record::{CountSource, Status};
use tokentap_core::stats::{Percentiles, Samples};
use tokentap_mlperf::validity;

/// The sampling settings the rules judge: what was sent, but a seed set's `model_seed` (the
/// seed the rules require, not a sampling setting of the model's) left out.
fn official_sampling(cfg: &RunConfig) -> serde_json::Value {
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

fn by_status(a: &[u64; 5]) -> BTreeMap<String, u64> {
    Status::ALL
        .iter()
        .zip(a)
        .map(|(s, n)| (s.as_str().to_string(), *n))
        .collect()
}

fn tokens_of(agg: &Aggregate) -> Tokens {
    let mean_window = (agg.window_output_known > 0)
        .then(|| agg.window_output_tokens as f64 / agg.window_output_known as f64);
    Tokens {
        mean_output_tokens_per_turn: agg.ok_output_tokens.value(),
        mean_output_tokens_per_turn_window: mean_window,
        output_tokens_source: tokentap_core::timeline::TokenSource::ALL
            .iter()
            .zip(agg.ok_output_sources)
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| (s.as_str().to_string(), n))
            .collect(),
        cached_token_share: (agg.prompt_tokens > 0)
            .then(|| agg.cached_tokens as f64 / agg.prompt_tokens as f64),
        prompt_tokens: agg.prompt_tokens,
        cached_tokens: agg.cached_tokens,
        turns_with_cache_info: agg.cache_turns,
    }
}
fn accuracy_of(scores: &Scores) -> Accuracy {
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
/// The reference's view of the window: its numbers for the summary, and the inputs of its
/// `result_summary.json`.
fn mlperf_of(
    agg: &mut Aggregate,
    cfg: &RunConfig,
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
            "MLPerf Endpoints reference client (mlcommons/endpoints ea33275), docs/benchmark.md#reference".into(),
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
        result_summary: tokentap_run::files::RESULT_SUMMARY.into(),
        recounted_with: None,
        report_note: None,
    };
    (mlperf, inputs)
}
/// Each `--endpoint`'s share of the trajectories and turns.
fn endpoint_shares(cfg: &RunConfig, agg: &Aggregate) -> Vec<EndpointShare> {
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
fn source_counts(m: &BTreeMap<CountSource, u64>) -> BTreeMap<String, u64> {
    m.iter()
        .map(|(k, v)| (k.as_str().to_string(), *v))
        .collect()
}

pub(crate) fn build(mut agg: Aggregate, cfg: RunConfig, f: RunFacts) -> Built {
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
    let tokens = tokens_of(&agg);
    let accuracy = accuracy_of(&f.scores);
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
    let (mlperf, inputs) = mlperf_of(&mut agg, &cfg, &f);
    let validity = validity(&cfg, &agg, &f, &accuracy, &mlperf);
    let summary = Summary {
        tokentap_version: env!("CARGO_PKG_VERSION").into(),
        mlperf,
        validity,
        steady_state: Some(steady_state),
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
            last_claim_mono_ns: Some(f.last_claim),
            end_mono_ns: window_end,
            end_wall_ns: window_end.map(|e| f.start.wall_of(e)),
            duration_s: duration,
        },
        counts: Counts {
            turns: by_status(&agg.by_status),
            in_window: by_status(&agg.in_window_by_status),
            total: agg.records,
            errors: error_counts(&agg),
        },
        endpoints: endpoint_shares(&cfg, &agg),
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
fn validity(
    cfg: &RunConfig,
    agg: &Aggregate,
    f: &RunFacts,
    acc: &Accuracy,
    m: &Mlperf,
) -> Validity {
    let official = cfg.preset.map(|p| p.official());
    let facts = validity_facts(cfg, f, acc, m);
    let v = validity::evaluate(official.as_ref(), &facts);
    Validity {
        verdict: v.verdict,
        reasons: v.reasons(),
        warnings: v.warnings(),
        notes: validity_notes(cfg, agg, f, m),
        rules: v.rules,
        gates: official,
    }
}

/// What the validity rules judge the run by: how it was configured, how far it got and what
/// it measured.
fn validity_facts(cfg: &RunConfig, f: &RunFacts, acc: &Accuracy, m: &Mlperf) -> validity::Facts {
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
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(" and ")
        )
    });
    validity::Facts {
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
    }
}

/// The notes of the run's validity: what failed or was cut short (none invalidates the run),
/// sharding, tokenizer fallbacks and a declared warmup.
fn validity_notes(cfg: &RunConfig, agg: &Aggregate, f: &RunFacts, m: &Mlperf) -> Vec<String> {
    let n = |s: Status| agg.by_status[s.index()];
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
    notes
}
