//! Inline accuracy end to end: generated text captured from the real sim's stream (tool-call
//! partials merged across chunks, content concatenated) and scored against the dataset.

use tokentap_testkit::replay::*;

/// The sim's tool call is one `bash` call running one of 9 executables; the recorded call runs
/// all 9, so every coding turn's multiset IoU is exactly 1/9. Workflow turns have intent codes
/// the sim's filler text never contains (score 0); a workflow turn without codes is not scored.
const DATASET: &str = r#"{"conversation_id":"repo__repo-1","turn":1,"role":"user","content":"fix it"}
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
