//! Data-driven tests over the golden files of the pinned reference (testdata/golden, a copy of
//! ../shared/golden; see its README): the reference client's own event log, scores, token
//! counts and summary of one run. Everything the reference computed from that run is computed
//! again here from the same inputs and must come out identical — the scores file byte for byte,
//! every per-turn token count, and every series of `result_summary.json` but the inputs (ISL,
//! which needs the prompts: replay/tests/golden.rs).

use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use tokentap_dataset::Dataset;
use tokentap_mlperf::output::ModelOutput;
use tokentap_mlperf::result_summary::{self, Inputs, Series};
use tokentap_mlperf::scorer::{ModelMessage, Scorer, TurnKey};
use tokentap_mlperf::RefTokenizer;

fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/golden/mlperf-ea33275")
}

/// One sample of the reference's event log.
#[derive(Debug, Default, Clone)]
struct Sample {
    conversation: String,
    turn: u32,
    issued: i64,
    first: Option<i64>,
    complete: Option<i64>,
    data: Option<Value>,
    finish_reason: Option<String>,
    error: bool,
    tracked: bool,
}

struct Log {
    /// In order of `sample.issued`.
    samples: Vec<(String, Sample)>,
    /// uuid → index.
    by_uuid: HashMap<String, usize>,
    /// Recording order of completions (the reference's series order).
    completions: Vec<usize>,
    tracking_start: i64,
}

fn read_log() -> Log {
    let text = std::fs::read_to_string(golden().join("events.jsonl")).unwrap();
    let mut log = Log {
        samples: Vec::new(),
        by_uuid: HashMap::new(),
        completions: Vec::new(),
        tracking_start: 0,
    };
    let mut tracking = false;
    for line in text.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        let kind = e["event_type"].as_str().unwrap();
        let ts = e["timestamp_ns"].as_i64().unwrap();
        match kind {
            "session.start_performance_tracking" => {
                tracking = true;
                log.tracking_start = ts;
                continue;
            }
            "session.stop_performance_tracking" => {
                tracking = false;
                continue;
            }
            _ => {}
        }
        let uuid = e["sample_uuid"].as_str().unwrap_or_default().to_string();
        if uuid.is_empty() {
            continue;
        }
        if kind == "sample.issued" {
            log.by_uuid.insert(uuid.clone(), log.samples.len());
            log.samples.push((
                uuid,
                Sample {
                    conversation: e["conversation_id"].as_str().unwrap().to_string(),
                    turn: e["turn"].as_u64().unwrap() as u32,
                    issued: ts,
                    tracked: tracking,
                    ..Sample::default()
                },
            ));
            continue;
        }
        let i = log.by_uuid[&uuid];
        let s = &mut log.samples[i].1;
        match kind {
            "sample.recv_first" => s.first = Some(ts),
            "sample.complete" => {
                s.complete = Some(ts);
                s.data = Some(e["data"].clone());
                s.finish_reason = e
                    .get("finish_reason")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                log.completions.push(i);
            }
            k if k.starts_with("error.") => s.error = true,
            _ => {}
        }
    }
    log
}

fn key_of(s: &Sample) -> TurnKey {
    match s.conversation.rsplit_once("__repeat_") {
        Some((c, r)) if r.chars().all(|c| c.is_ascii_digit()) => {
            (c.to_string(), r.parse().unwrap(), s.turn)
        }
        _ => (s.conversation.clone(), 1, s.turn),
    }
}

fn model_message(o: &ModelOutput) -> ModelMessage {
    let p = o.message_parts();
    ModelMessage {
        content: Some(p.content),
        reasoning_content: p.reasoning,
        tool_calls: p.tool_calls,
    }
}

fn dataset() -> Dataset {
    let path = golden().join("dataset.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    Dataset::parse(&path, &text).unwrap()
}

fn tokenizer() -> RefTokenizer {
    RefTokenizer::load(&golden().join("tokenizer")).unwrap()
}

#[test]
fn scores_json_is_the_references_byte_for_byte() {
    let log = read_log();
    let scorer = Scorer::new(&dataset());
    let issued: Vec<(TurnKey, Option<ModelMessage>)> = log
        .samples
        .iter()
        .map(|(_, s)| {
            let model = s
                .data
                .as_ref()
                .and_then(ModelOutput::from_event_data)
                .map(|o| model_message(&o));
            (key_of(s), model)
        })
        .collect();
    let scores = scorer.scores(&issued);
    let want = std::fs::read_to_string(golden().join("scores.json")).unwrap();
    let got = scores.to_file_text();
    if got != want {
        let w: Value = serde_json::from_str(&want).unwrap();
        let g: Value = serde_json::from_str(&got).unwrap();
        for (a, b) in w["per_turn"]
            .as_array()
            .unwrap()
            .iter()
            .zip(g["per_turn"].as_array().unwrap())
        {
            assert_eq!(a, b, "first differing per_turn row");
        }
        assert_eq!(w, g);
        assert_eq!(got, want, "same values, different text");
    }
    assert_eq!(scores.score, Some(0.4696));
    assert_eq!(
        (scores.issued, scores.observed, scores.missing),
        (406, 350, 56)
    );
}

#[test]
fn per_turn_osl_and_tpot_tokens_are_the_references() {
    let log = read_log();
    let tok = tokenizer();
    let text = std::fs::read_to_string(golden().join("per_turn_tokens.jsonl")).unwrap();
    let mut n = 0;
    for line in text.lines() {
        let want: Value = serde_json::from_str(line).unwrap();
        let uuid = want["sample_uuid"].as_str().unwrap();
        let s = &log.samples[log.by_uuid[uuid]].1;
        let out = ModelOutput::from_event_data(s.data.as_ref().unwrap()).unwrap();
        let osl = tok.osl(&out).map(|c| c.tokens);
        let tpot = tok.tpot_tokens(&out).map(|c| c.tokens);
        assert_eq!(
            osl,
            want["osl"].as_u64(),
            "osl of {uuid} ({} turn {})",
            s.conversation,
            s.turn
        );
        assert_eq!(
            tpot,
            want["tpot_tokens"].as_u64(),
            "TPOT tokens of {uuid} ({} turn {})",
            s.conversation,
            s.turn
        );
        n += 1;
    }
    assert!(n >= 300, "only {n} turns in per_turn_tokens.jsonl");
    assert_eq!(tok.fallbacks().0, 0, "the golden template never falls back");
}

/// Rebuilds every series but ISL from the event log and compares it with the published file.
#[test]
fn result_summary_series_are_the_references() {
    let log = read_log();
    let tok = tokenizer();
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(golden().join("result_summary.json")).unwrap(),
    )
    .unwrap();
    let mut inputs = Inputs {
        version: "0.1.0".into(),
        run_config: want["run_config"].clone(),
        complete: true,
        ..Inputs::default()
    };
    let mut last_complete = log.tracking_start;
    for (_, s) in log.samples.iter().filter(|(_, s)| s.tracked) {
        inputs.issued += 1;
        if s.error {
            inputs.failed += 1;
        }
        if let Some(f) = s.first {
            inputs.ttft_ns.push(f - s.issued);
        }
    }
    // Completion-ordered series, as the reference records them.
    for &i in &log.completions {
        let s = &log.samples[i].1;
        if !s.tracked {
            continue;
        }
        let c = s.complete.unwrap();
        last_complete = last_complete.max(c);
        inputs.completed += 1;
        inputs.latency_ns.push(c - s.issued);
        if let Some(r) = &s.finish_reason {
            inputs.finish_reasons[result_summary::finish_reason_index(r)] += 1;
        }
        let Some(out) = s.data.as_ref().and_then(ModelOutput::from_event_data) else {
            continue;
        };
        if let Some(osl) = tok.osl(&out) {
            inputs.osl.push(osl.tokens as i64);
        }
        if let (Some(f), Some(t)) = (s.first, tok.tpot_tokens(&out)) {
            if let Some(v) = result_summary::tpot_ns(c - f, t.tokens) {
                inputs.tpot_ns.push(v);
            }
        }
    }
    inputs.duration_ns = Some((last_complete - log.tracking_start) as u64);
    let got = inputs.to_json();
    for field in [
        "n_samples_issued",
        "n_samples_completed",
        "n_samples_failed",
        "duration_ns",
        "state",
        "complete",
        "ttft",
        "tpot",
        "latency",
        "output_sequence_lengths",
        "qps",
        "tps",
        "finish_reason_counts",
        "run_config",
    ] {
        assert_eq!(got[field], want[field], "result_summary.json field {field}");
    }
    // The same numbers, written the same way: with the published ISL block in place, the
    // whole file is the reference's, byte for byte.
    // The v1.0 keys come after the reference's own at ea33275, which stay byte for byte.
    let mut whole = got.clone();
    whole["input_sequence_lengths"] = want["input_sequence_lengths"].clone();
    for k in result_summary::V1_KEYS {
        assert!(
            whole.as_object_mut().unwrap().shift_remove(k).is_some(),
            "{k}"
        );
    }
    let published = std::fs::read_to_string(golden().join("result_summary.json")).unwrap();
    assert!(
        tokentap_mlperf::pyjson::msgspec_pretty(&whole) == published,
        "result_summary.json text differs from the reference's"
    );
    assert_eq!(
        Series::Int(inputs.osl.clone()).rollup().unwrap().total,
        60_134.0
    );
}

#[test]
fn golden_copy_matches_shared_when_present() {
    let shared =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/golden/mlperf-ea33275");
    if !shared.is_dir() {
        eprintln!(
            "note: {} is not on this machine; the in-repo copy is used as is",
            shared.display()
        );
        return;
    }
    for f in [
        "events.jsonl",
        "scores.json",
        "result_summary.json",
        "per_turn_tokens.jsonl",
        "dataset.jsonl",
        "tokenizer/tokenizer.json",
        "tokenizer/tokenizer_config.json",
    ] {
        let a = std::fs::read(golden().join(f)).unwrap();
        let b = std::fs::read(shared.join(f)).unwrap();
        assert!(
            a == b,
            "testdata/golden/mlperf-ea33275/{f} differs from ../shared/golden"
        );
    }
}
