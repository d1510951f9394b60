//! The benchmark's own numbers end to end against the real sim: warmup excluded from every
//! result and cache-isolated by its own salt, result_summary.json agreeing with the records,
//! the validity verdict's rules with and without a tokenizer.

use serde_json::Value;
use std::path::PathBuf;
use tokentap_replay::config::WarmupOpts;
use tokentap_replay::{Preset, Verdict};
use tokentap_testkit::replay::*;

const DATASET: &str = r#"{"conversation_id":"c1","turn":1,"role":"user","content":"Fix the bug in io.py please, the tests fail.","system":"You are a careful coding agent. Read the code before changing it and run the tests after every change you make."}
{"conversation_id":"c1","turn":2,"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}
{"conversation_id":"c1","turn":3,"role":"tool","tool_results":[{"tool_call_id":"a","content":"io.py tests"}]}
{"conversation_id":"c1","turn":4,"role":"assistant","content":"done"}
{"conversation_id":"sim_000001","turn":1,"role":"user","content":"Where is my order 12?","system":"You are a support agent for an online shop. Follow the refund and shipping policy exactly as written."}
{"conversation_id":"sim_000001","turn":2,"role":"assistant","content":"intent: I042","intent_codes":["I042"]}
"#;

fn golden_tokenizer() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/golden/mlperf-ea33275/tokenizer")
}

fn json(path: PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warmup_is_declared_excluded_and_cache_isolated() {
    let sim = sim_with(|_| {}).await;
    let mut c = config(&sim, "warmup");
    c.salt = true;
    c.include_usage = true;
    c.tokenizer = Some(golden_tokenizer());
    c.warmup = WarmupOpts {
        trajectories: Some(4),
        duration: None,
        dataset: None,
        concurrency: Some(2),
    };
    let (out, recs) = run(c, dataset(DATASET)).await;
    let dir = out.out_dir.clone().unwrap();

    // The measured run's records are its own 3 turns; the warmup's 6 are elsewhere.
    assert_eq!(recs.len(), 3, "{recs:?}");
    let warm: Vec<Value> = std::fs::read_to_string(dir.join("warmup.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(warm.len(), 6);
    let w = out.summary.warmup.as_ref().expect("warmup declared");
    assert_eq!(
        (w.requests_issued, w.requests_completed, w.trajectories),
        (6, 6, 4)
    );
    assert_eq!(w.concurrency, 2);

    // Own salt tag: no measured request shares a prefix cache block with the warmup's, so the
    // measured first turns find nothing cached although the warmup sent the same
    // conversations just before.
    let mut log = sim.log();
    log.sort_by_key(|r| r.seq);
    let bodies: Vec<String> = log
        .iter()
        .map(|r| String::from_utf8(r.body.clone().unwrap().to_vec()).unwrap())
        .collect();
    let tag = |b: &str| b.split("[salt: ").nth(1).unwrap()[..4].to_string();
    let warm_tags: std::collections::BTreeSet<String> =
        bodies[..6].iter().map(|b| tag(b)).collect();
    let perf_tags: std::collections::BTreeSet<String> =
        bodies[6..].iter().map(|b| tag(b)).collect();
    assert_eq!(perf_tags.len(), 1);
    assert!(
        warm_tags.is_disjoint(&perf_tags),
        "{warm_tags:?} {perf_tags:?}"
    );
    for r in recs.iter().filter(|r| r["turn_index"] == 0) {
        assert_eq!(
            r["cached_tokens"], 0,
            "first measured turn hit the warmup's cache: {r}"
        );
    }

    // Not one warmup turn in any number: the reference's series are exactly the records'.
    let rs = json(dir.join("result_summary.json"));
    assert_eq!(rs["n_samples_issued"], 3);
    let sum = |f: &str| recs.iter().filter_map(|r| r[f].as_u64()).sum::<u64>();
    assert_eq!(rs["ttft"]["total"].as_u64().unwrap(), sum("ttft_ns"));
    assert_eq!(
        rs["output_sequence_lengths"]["total"].as_u64().unwrap(),
        sum("osl")
    );
    assert_eq!(
        rs["input_sequence_lengths"]["total"].as_u64().unwrap(),
        sum("isl")
    );
    assert_eq!(rs["run_config"]["warmup"]["enabled"], true);
    // The v1.0 fields: the full-run OSL block (no warmup turn in it either), and the primary
    // metrics with the sums the checker derives e2e_avg_interactivity from.
    let full = &rs["output_sequence_lengths_full_run"]["output_sequence_lengths"];
    assert_eq!(full["total"].as_u64().unwrap(), sum("osl"));
    assert_eq!(
        full["avg"].as_f64(),
        out.summary.mlperf.osl_mean_full_run,
        "{full}"
    );
    assert_eq!(rs["system_tps"], rs["tps"]);
    assert_eq!(
        rs["output_tokens_per_turn_total"].as_u64().unwrap(),
        sum("osl")
    );
    let secs = sum("end_ns") as f64 / 1e9;
    assert!((rs["e2e_turn_time_seconds_total"].as_f64().unwrap() - secs).abs() < 1e-9);
    assert!(
        (rs["e2e_avg_interactivity"].as_f64().unwrap() - sum("osl") as f64 / secs).abs() < 1e-9
    );
    assert_eq!(out.summary.mlperf.samples_issued, 3);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_rules_each_named_with_the_measured_value() {
    let sim = sim_with(|_| {}).await;
    let mut c = config(&sim, "rules");
    c.preset = Some(Preset::Qwen);
    c.salt = true;
    c.delays = true;
    c.tokenizer = Some(golden_tokenizer());
    let (out, recs) = run(c, dataset(DATASET)).await;
    assert!(recs.iter().all(|r| status(r) == "ok"));
    let v = &out.summary.validity;
    assert_eq!(v.verdict, Verdict::Invalid);
    let status_of = |id: &str| {
        let r = v.rules.iter().find(|r| r.rule == id).unwrap();
        (serde_json::to_value(r.status).unwrap(), r.message.clone())
    };
    for id in [
        "salting",
        "delays",
        "trajectories",
        "stop_issuing",
        "sampling",
        "request_body",
    ] {
        assert_eq!(status_of(id).0, "pass", "{id}: {}", status_of(id).1);
    }
    // The sim's outputs are short and its intents are filler: the gates fail and say by how
    // much; a few seconds are not a steady state — a warning, as the official checker has it.
    let (st, msg) = status_of("agentic-osl-range");
    assert_eq!(st, "fail");
    assert!(
        msg.contains("reference tokenizer") && msg.contains("344–422"),
        "{msg}"
    );
    assert_eq!(status_of("agentic-accuracy-inline").0, "fail");
    assert_eq!(status_of("point-duration").0, "warn");
    // The minimum is keyed to the concurrency: 600 s up to 32.
    assert!(status_of("point-duration")
        .1
        .contains("minimum 600 s at concurrency 1 ≤ 32"));
    assert_eq!(status_of("agentic-accuracy-swebench").0, "not_evaluated");
    assert!(v
        .reasons
        .iter()
        .any(|r| r.starts_with("agentic-osl-range: full-run OSL per-turn mean")));
    // The OSL gate uses the reference tokenizer's counts over every completed turn: the mean
    // is the records' mean (all of this run's turns are tracked, so the window's mean too).
    let osl: Vec<u64> = recs.iter().filter_map(|r| r["osl"].as_u64()).collect();
    let mean = osl.iter().sum::<u64>() as f64 / osl.len() as f64;
    assert_eq!(out.summary.mlperf.osl_mean_full_run, Some(mean));
    assert_eq!(out.summary.mlperf.primary.osl_mean, Some(mean));
    assert!(out.summary.mlperf.reference_tokens);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_tokenizer_the_osl_gate_is_not_evaluated_and_the_source_is_said() {
    let sim = sim_with(|_| {}).await;
    let mut c = config(&sim, "no-tokenizer");
    c.preset = Some(Preset::Kimi);
    c.include_usage = true;
    let (out, _) = run(c, dataset(DATASET)).await;
    let v = &out.summary.validity;
    let osl = v
        .rules
        .iter()
        .find(|r| r.rule == "agentic-osl-range")
        .unwrap();
    assert_eq!(serde_json::to_value(osl.status).unwrap(), "not_evaluated");
    assert!(
        osl.message.contains("--tokenizer") && osl.message.contains("usage"),
        "{}",
        osl.message
    );
    assert!(!out.summary.mlperf.reference_tokens);
    assert_eq!(out.summary.mlperf.osl_source.get("usage"), Some(&3));
    let text = out.summary.render_text();
    assert!(
        text.contains("NOT the reference's count: usage 3"),
        "{text}"
    );
    // The body changed (--include-usage): named as the reason it is not an official point.
    assert!(v.reasons.iter().any(|r| r.contains("--include-usage")));
    sim.shutdown().await;
}
