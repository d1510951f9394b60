//! Rows through validate → replay: whatever a dataset holds, if `Dataset::parse` (what
//! `dataset validate` and `replay` both run) accepts it, the replay runs it against the sim
//! without a panic, and every client turn of it has a record (`aborted` with its cause when it
//! could not be sent) — a panic anywhere would surface as a slot's `internal` record or an
//! error, and fails here.
//!
//! Structure-aware: byte mutations almost never give a dataset that still validates, so each
//! case sets one to three fields of a small synthesized dataset (every field the format
//! defines, plus per-row sampling overrides) to values picked for the edges a runtime trips on:
//! the largest and smallest numbers JSON carries, negative zero, 2^53 + 1, u64 and i64 limits,
//! empty and long strings, NUL, non-ASCII, wrong types, or removes the field. Deterministic: the
//! same cases on every run.

use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokentap_core::record::{ErrorKind, TurnRecord};
use tokentap_dataset::Dataset;
use tokentap_testkit::fuzz::Rng;

/// Cases run.
const CASES: usize = 600;

const FIELDS: &[&str] = &[
    "delay_seconds",
    "max_new_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "n",
    "stop",
    "logit_bias",
    "user",
    "model",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "chat_template",
    "content",
    "system",
    "tools",
    "tool_calls",
    "tool_results",
    "reasoning_content",
    "name",
    "intent_codes",
    "turn",
    "role",
];

/// Fields whose values are numbers, and whose are text.
const NUMERIC: &[&str] = &[
    "delay_seconds",
    "max_new_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "n",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "turn",
];
const TEXT: &[&str] = &[
    "content",
    "system",
    "reasoning_content",
    "name",
    "user",
    "model",
    "chat_template",
    "stop",
];

/// The numbers first (`values()[..NUMBERS]`), then the strings (`[NUMBERS..STRINGS]`), then
/// everything else.
const NUMBERS: usize = 12;
const STRINGS: usize = 16;

fn values() -> Vec<Value> {
    vec![
        json!(0),
        json!(-0.0),
        json!(1e-300),
        json!(1.7976931348623157e308),
        json!(-1),
        json!(-1e308),
        json!(0.5),
        json!(86400),
        json!(86400.000001),
        json!(9_007_199_254_740_993u64),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(""),
        json!("x".repeat(20_000)),
        json!("\u{0}"),
        json!("é😀\u{202e}"),
        json!(null),
        json!(true),
        json!([]),
        json!({}),
        json!([1, "a", null]),
        json!({"a": {"b": [1e308]}}),
        json!([{"type": "text", "text": "hi"}]),
        json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{"}}]),
        json!([{"tool_call_id": "c1", "content": 1e308}]),
    ]
}

/// The base dataset's rows as JSON objects.
fn base_rows() -> Vec<Value> {
    let mut buf = Vec::new();
    tokentap_dataset::synth::synth(
        &tokentap_dataset::synth::SynthConfig {
            seed: 7,
            coding: 1,
            workflow: 1,
            scale: 0.05,
            depth_scale: 1.0,
            interleave: true,
        },
        &mut buf,
    )
    .unwrap();
    String::from_utf8(buf)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn mutated(base: &[Value], rng: &mut Rng, vals: &[Value]) -> (String, Vec<String>) {
    let mut rows = base.to_vec();
    let mut what = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let i = rng.below(rows.len());
        let field = FIELDS[rng.below(FIELDS.len())];
        let obj = rows[i].as_object_mut().unwrap();
        if rng.below(8) == 0 {
            obj.remove(field);
            what.push(format!("row {i}: no {field}"));
        } else {
            // Mostly values of the field's own type (they validate more often, so the replay
            // sees them), sometimes anything.
            let pool = match rng.below(4) {
                0 => vals,
                _ if NUMERIC.contains(&field) => &vals[..NUMBERS],
                _ if TEXT.contains(&field) => &vals[NUMBERS..STRINGS],
                _ => vals,
            };
            let v = pool[rng.below(pool.len())].clone();
            let shown: String = v.to_string().chars().take(40).collect();
            obj.insert(field.to_string(), v);
            what.push(format!("row {i}: {field} = {shown}"));
        }
    }
    let text = rows
        .iter()
        .map(|r| r.to_string() + "\n")
        .collect::<String>();
    (text, what)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dataset_that_validates_replays_without_a_panic_and_records_every_turn() {
    let base = base_rows();
    let vals = values();
    let mut rng = Rng::new(0x5eed);
    let sim = tokentap_sim::SimServer::start(tokentap_sim::SimConfig::zero_delay())
        .await
        .expect("sim starts");
    let (mut accepted, mut refused) = (0, 0);
    for case in 0..CASES {
        let (text, what) = mutated(&base, &mut rng, &vals);
        let Ok(ds) = Dataset::parse("fuzz.jsonl", &text) else {
            refused += 1;
            continue;
        };
        accepted += 1;
        let expected = ds.client_turns();
        let dir = tempfile::tempdir().unwrap();
        let mut rc = tokentap_replay::RunOpts::new(&sim.base_url()).unwrap();
        rc.model = Some("tokentap-sim".into());
        rc.concurrency = 2;
        rc.delays = true;
        rc.delay_scale = 1e-6;
        rc.turn_timeout = Some(Duration::from_secs(10));
        rc.out = Some(dir.path().to_path_buf());
        let run = tokentap_replay::run_with(
            rc.resolve().unwrap(),
            Arc::new(ds),
            tokentap_replay::ProgressMode::Off,
            std::future::pending(),
        )
        .await;
        let ctx = format!("case {case} ({})", what.join("; "));
        match run {
            Ok(_) => {
                let records: Vec<TurnRecord> =
                    std::fs::read_to_string(dir.path().join("records.jsonl"))
                        .unwrap()
                        .lines()
                        .map(|l| serde_json::from_str(l).unwrap())
                        .collect();
                assert_eq!(records.len(), expected, "{ctx}: a record per turn");
                for r in &records {
                    let internal = r
                        .error
                        .as_ref()
                        .is_some_and(|e| e.kind == ErrorKind::Internal.as_str());
                    assert!(!internal, "{ctx}: {:?}", r.error);
                }
            }
            // A clear refusal before anything is sent is an outcome; a panic is not.
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(!msg.contains("panic"), "{ctx}: {msg}");
            }
        }
    }
    eprintln!("{accepted} datasets validated and replayed, {refused} refused by validation");
    assert!(
        accepted >= CASES / 4,
        "too few mutations validate to test the replay: {accepted} of {CASES}"
    );
    sim.shutdown().await;
}
