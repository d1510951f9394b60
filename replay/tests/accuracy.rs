//! Inline accuracy end to end: generated text captured from the real sim's stream (tool-call
//! partials merged across chunks, content concatenated) and scored against the dataset.

use tokentap_testkit::replay::*;

/// The sim's tool call is one call to the offered `bash` tool running one of 9 executables; the recorded call runs
/// all 9, so every coding turn's multiset IoU is exactly 1/9. Workflow turns have intent codes
/// the sim's filler text never contains (score 0); a workflow turn without codes is not scored.
const DATASET: &str = r#"{"conversation_id":"repo__repo-1","turn":1,"role":"user","content":"fix it","tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}]}
{"conversation_id":"repo__repo-1","turn":2,"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls; cat f | grep x && sed -n 1p f; python -V; git status; pytest -q; find .; head f\"}"}}]}
{"conversation_id":"repo__repo-1","turn":3,"role":"tool","tool_results":[{"tool_call_id":"a","content":"ok"}]}
{"conversation_id":"repo__repo-1","turn":4,"role":"assistant","tool_calls":[{"id":"b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls; cat; grep; sed; python; git; pytest; find; head\"}"}}]}
{"conversation_id":"sim_000001","turn":1,"role":"user","content":"refund?"}
{"conversation_id":"sim_000001","turn":2,"role":"assistant","content":"intent: I042","intent_codes":["I042"]}
{"conversation_id":"sim_000001","turn":3,"role":"user","content":"thanks"}
{"conversation_id":"sim_000001","turn":4,"role":"assistant","content":"bye"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_partials_and_content_are_scored() {
    let sim = sim_with(|c| {
        c.modes.tool_call_rate = 1.0;
        // Several argument chunks per call.
        c.output.mean_tokens = 40.0;
    })
    .await;
    let (out, recs) = run(config(&sim, "accuracy"), dataset(DATASET)).await;
    let recs = sorted(recs);
    assert!(recs.iter().all(|r| status(r) == "ok"));
    let coding: Vec<f64> = recs
        .iter()
        .filter(|r| conv(r) == "repo__repo-1")
        .map(|r| r["accuracy"].as_f64().unwrap())
        .collect();
    assert_eq!(coding.len(), 2);
    for a in coding {
        assert!((a - 1.0 / 9.0).abs() < 1e-12, "{a}");
    }
    let wf: Vec<&serde_json::Value> = recs.iter().filter(|r| conv(r) == "sim_000001").collect();
    assert_eq!(wf[0]["accuracy"], 0.0);
    assert!(
        wf[1].get("accuracy").is_none(),
        "no intent codes: not scored"
    );
    let a = &out.summary.accuracy;
    assert_eq!(
        (a.scored_turns, a.coding_turns, a.workflow_turns),
        (3, 2, 1)
    );
    // The reference rounds the published score to 4 decimals: (1/9 + 1/9 + 0) / 3 = 0.0741.
    assert_eq!(a.inline_accuracy, Some(0.0741));
}

/// The sim answering from the recording (`--answer-from`): every turn streams the dataset's own
/// assistant message — several tool calls with their names, non-ASCII content cut into chunks
/// at character boundaries — so every scorable turn scores 1, salted and clear-generated alike,
/// and the output token counts are the recording's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_from_the_recording_score_one() {
    const DATA: &str = r#"{"conversation_id":"repo__repo-1","turn":1,"role":"user","content":"fix it","system":"you are a coder"}
{"conversation_id":"repo__repo-1","turn":2,"role":"assistant","reasoning_content":"lööking — first the tree","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls -la && cat setup.py\"}"}},{"id":"b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"pytest -q tests/test_x.py\"}"}}]}
{"conversation_id":"repo__repo-1","turn":3,"role":"tool","tool_results":[{"tool_call_id":"a","content":"ok"},{"tool_call_id":"b","content":"1 failed"}]}
{"conversation_id":"repo__repo-1","turn":4,"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"bash","arguments":"{\"command\":\"sed -i s/a/b/ x.py; git diff\"}"}}]}
{"conversation_id":"sim_000001","turn":1,"role":"user","content":"refund?","system":"you route tickets"}
{"conversation_id":"sim_000001","turn":2,"role":"assistant","content":"Résumé: the customer wants a refund → intent: I042","intent_codes":["I042"]}
{"conversation_id":"sim_000001","turn":3,"role":"user","content":"thanks"}
{"conversation_id":"sim_000001","turn":4,"role":"assistant","content":"Gern geschehen — I007","intent_codes":["I007"]}
"#;
    let dir = temp_dir("answers");
    let path = dir.join("d.jsonl");
    std::fs::write(&path, DATA).unwrap();
    let sim = sim_with(|c| {
        c.answer_from = Some(path.clone());
        c.modes.tokens_per_chunk = 3;
    })
    .await;
    let mut cfg = config(&sim, "answers");
    cfg.salt = true;
    cfg.clear_generated = true;
    cfg.include_usage = true;
    let (out, recs) = run(cfg, dataset(DATA)).await;
    let recs = sorted(recs);
    assert_eq!(recs.len(), 4);
    for r in &recs {
        assert_eq!(status(r), "ok", "{r}");
        assert_eq!(r["accuracy"], 1.0, "{r}");
    }
    // Stand-in tokens of what was recorded (4 bytes a token per segment, one per tool header):
    // turn 1 = reasoning 31 bytes → 8, call a 36 → 9 + 1, call b 36 → 9 + 1.
    let first = recs.iter().find(|r| conv(r) == "repo__repo-1").unwrap();
    assert_eq!(first["output_tokens"], 28, "{first}");
    let a = &out.summary.accuracy;
    assert_eq!((a.scored_turns, a.inline_accuracy), (4, Some(1.0)));
}
