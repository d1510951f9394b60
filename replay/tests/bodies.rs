//! Request bodies and headers as the server received them (captured by the real sim), compared
//! byte for byte with bodies written out by hand from docs/benchmark.md#requests
//! and docs/benchmark.md#salting.

use std::collections::BTreeMap;
use tokentap_replay::{Preset, RunOpts};
use tokentap_testkit::replay::*;

/// Parallel tool results, reasoning, non-ASCII text, a named assistant, per-row overrides, a
/// conversation that ends on a tool row; a workflow conversation; two one-turn conversations
/// whose ids are salt vectors of docs/benchmark.md#salting.
const DATASET: &str = r#"{"_type":"dataset_metadata","source":"handcrafted"}
{"conversation_id":"c1","turn":1,"role":"user","content":"Fix the bug ünïcode","system":"You are an agent.","tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]}
{"conversation_id":"c1","turn":2,"role":"assistant","reasoning_content":"Let me look.","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},{"id":"b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"cat f\"}"}}]}
{"conversation_id":"c1","turn":3,"role":"tool","tool_results":[{"tool_call_id":"a","content":"file1\nfile2"},{"tool_call_id":"b","content":"contents \"quoted\""}],"delay_seconds":0.01}
{"conversation_id":"c1","turn":4,"role":"assistant","content":"Done.","name":"agent"}
{"conversation_id":"c1","turn":5,"role":"user","content":"Thanks, one more","name":"bob","temperature":0.2,"max_new_tokens":64,"max_completion_tokens":99,"model":"other-model","top_k":5}
{"conversation_id":"c1","turn":6,"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"bash","arguments":"{\"command\":\"pytest\"}"}}]}
{"conversation_id":"c1","turn":7,"role":"tool","tool_results":[{"tool_call_id":"c","content":"1 passed"}]}
{"conversation_id":"sim_000001","turn":1,"role":"user","content":"Where is my order?","system":"Support rules."}
{"conversation_id":"sim_000001","turn":2,"role":"assistant","content":"intent: I042","intent_codes":["I042"]}
{"conversation_id":"sim_000001","turn":3,"role":"user","content":"Thanks"}
{"conversation_id":"sim_000001","turn":4,"role":"assistant","content":"Bye"}
{"conversation_id":"django__django-16899","turn":1,"role":"user","content":"q","system":"S"}
{"conversation_id":"conv1","turn":1,"role":"user","content":"q","system":"S"}
"#;

const TOOLS: &str = r#"[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]"#;

/// Bodies by session, in arrival order.
fn bodies_by_session(sim: &tokentap_sim::SimServer) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut log = sim.log();
    log.sort_by_key(|r| r.seq);
    for r in log {
        let body = String::from_utf8(r.body.expect("bodies captured").to_vec()).unwrap();
        out.entry(r.session.unwrap()).or_default().push(body);
    }
    out
}

fn kimi(sim: &tokentap_sim::SimServer, name: &str) -> RunOpts {
    let mut c = config(sim, name);
    c.preset = Some(Preset::Kimi);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_exact_bodies_compatible_mode() {
    let sim = sim_with(|_| {}).await;
    let ds = dataset(DATASET);
    let (out, recs) = run(kimi(&sim, "bodies"), ds).await;
    assert_eq!(recs.len(), 4 + 2 + 1 + 1);
    assert!(recs.iter().all(|r| status(r) == "ok"), "{recs:?}");
    let got = bodies_by_session(&sim);

    let sys = r#"{"role":"system","content":"You are an agent."}"#;
    let u1 = r#"{"role":"user","content":"Fix the bug ünïcode"}"#;
    let a2 = r#"{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},{"id":"b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"cat f\"}"}}],"reasoning_content":"Let me look."}"#;
    let t3 = r#"{"role":"tool","content":"file1\nfile2","tool_call_id":"a"},{"role":"tool","content":"contents \"quoted\"","tool_call_id":"b"}"#;
    let a4 = r#"{"role":"assistant","content":"Done.","name":"agent"}"#;
    let u5 = r#"{"role":"user","content":"Thanks, one more","name":"bob"}"#;
    let a6 = r#"{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"bash","arguments":"{\"command\":\"pytest\"}"}}]}"#;
    let t7 = r#"{"role":"tool","content":"1 passed","tool_call_id":"c"}"#;
    let kimi_tail = format!(
        r#""temperature":1.0,"max_completion_tokens":8192,"stream":true,"top_p":1.0,"tools":{TOOLS}}}"#
    );
    let want_c1 = vec![
        format!(r#"{{"model":"m","messages":[{sys},{u1}],{kimi_tail}"#),
        format!(r#"{{"model":"m","messages":[{sys},{u1},{a2},{t3}],{kimi_tail}"#),
        // Row overrides: model, temperature, max_new_tokens (over max_completion_tokens), top_k.
        format!(
            r#"{{"model":"other-model","messages":[{sys},{u1},{a2},{t3},{a4},{u5}],"temperature":0.2,"max_completion_tokens":64,"stream":true,"top_p":1.0,"top_k":5,"tools":{TOOLS}}}"#
        ),
        // The trajectory ends on a tool row: that row is the last request.
        format!(
            r#"{{"model":"m","messages":[{sys},{u1},{a2},{t3},{a4},{u5},{a6},{t7}],{kimi_tail}"#
        ),
    ];
    assert_eq!(got["c1"], want_c1);

    let nt = r#""temperature":1.0,"max_completion_tokens":8192,"stream":true,"top_p":1.0}"#;
    let ws = r#"{"role":"system","content":"Support rules."}"#;
    let wu1 = r#"{"role":"user","content":"Where is my order?"}"#;
    let wa2 = r#"{"role":"assistant","content":"intent: I042"}"#;
    let wu3 = r#"{"role":"user","content":"Thanks"}"#;
    assert_eq!(
        got["sim_000001"],
        vec![
            format!(r#"{{"model":"m","messages":[{ws},{wu1}],{nt}"#),
            format!(r#"{{"model":"m","messages":[{ws},{wu1},{wa2},{wu3}],{nt}"#),
        ]
    );
    assert_eq!(
        got["conv1"],
        vec![format!(
            r#"{{"model":"m","messages":[{{"role":"system","content":"S"}},{{"role":"user","content":"q"}}],{nt}"#
        )]
    );
    // Record identity and sizes agree with what was sent.
    let c1: Vec<_> = recs.iter().filter(|r| conv(r) == "c1").collect();
    for (r, body) in c1.iter().zip(&want_c1) {
        assert_eq!(u(&r["request_bytes"]) as usize, body.len());
    }
    assert_eq!(
        c1.iter().map(|r| u(&r["dataset_turn"])).collect::<Vec<_>>(),
        [1, 3, 5, 7]
    );
    assert_eq!(c1[2]["model"], "other-model");
    assert_eq!(c1[1]["messages"], 5);
    assert!(out.summary.config.byte_compatible);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salt_vectors_and_second_pass() {
    let sim = sim_with(|_| {}).await;
    let ds = dataset(DATASET);
    let mut c = kimi(&sim, "salt");
    c.salt = true;
    c.trajectories = Some(8); // two passes over 4 conversations
    let (_, recs) = run(c, ds).await;
    assert!(recs.iter().all(|r| status(r) == "ok"));
    let got = bodies_by_session(&sim);
    // Salt vectors (docs/benchmark.md#salting): pass "1" → 4461, "2" → ba75; ids c1 → 6d82,
    // sim_000001 → 1bd4, django__django-16899 → edc0, conv1 → e643. The id hashed is the source id,
    // without `__repeat_2`.
    for (id, tag, sys) in [
        ("c1", "6d82", "You are an agent."),
        ("sim_000001", "1bd4", "Support rules."),
        ("django__django-16899", "edc0", "S"),
        ("conv1", "e643", "S"),
    ] {
        for (session, pass_tag) in [
            (id.to_string(), "4461"),
            (format!("{id}__repeat_2"), "ba75"),
        ] {
            let bodies = &got[&session];
            assert!(!bodies.is_empty(), "{session}");
            let want = format!(
                r#","messages":[{{"role":"system","content":"[salt: {pass_tag}]\n\n{sys}\n\n[salt: {tag}]"}},"#
            );
            for b in bodies {
                assert!(b.contains(&want), "{session}: {b}");
            }
        }
    }
    // FIFO: trajectory k is conversation k mod 4, pass k div 4 + 1.
    let ids: Vec<(u64, String, u64)> = sorted(recs)
        .iter()
        .filter(|r| r["turn_index"] == 0)
        .map(|r| (u(&r["trajectory"]), conv(r).to_string(), u(&r["pass"])))
        .collect();
    assert_eq!(
        ids,
        [
            (0, "c1".into(), 1),
            (1, "sim_000001".into(), 1),
            (2, "django__django-16899".into(), 1),
            (3, "conv1".into(), 1),
            (4, "c1__repeat_2".into(), 2),
            (5, "sim_000001__repeat_2".into(), 2),
            (6, "django__django-16899__repeat_2".into(), 2),
            (7, "conv1__repeat_2".into(), 2),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_generated_and_include_usage_change_only_what_they_should() {
    let sim = sim_with(|_| {}).await;
    let ds = dataset(DATASET);
    let mut c = kimi(&sim, "clear");
    c.clear_generated = true;
    c.include_usage = true;
    let (out, recs) = run(c, ds).await;
    assert!(!out.summary.config.byte_compatible);
    let got = bodies_by_session(&sim);
    let last = got["c1"].last().unwrap();
    // Reasoning first, else content, gets one space; tool-call-only messages are unchanged.
    assert!(
        last.contains(r#""reasoning_content":" Let me look."}"#),
        "{last}"
    );
    assert!(last.contains(r#"{"role":"assistant","content":" Done.","name":"agent"}"#));
    assert!(last.contains(r#"{"role":"assistant","tool_calls":[{"id":"c""#));
    assert!(last.contains(r#""stream":true,"stream_options":{"include_usage":true},"top_p":1.0"#));
    // With usage, token counts come from the server.
    assert!(recs
        .iter()
        .all(|r| r["output_tokens_source"] == "usage" && r["prompt_tokens"].is_u64()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_are_exactly_the_specified_set_and_the_key_is_never_written() {
    let sim = sim_with(|_| {}).await;
    let ds = dataset(DATASET);
    let mut c = kimi(&sim, "headers");
    c.routing_headers = vec!["X-Session-ID".into(), "X-SMG-Routing-Key".into()];
    c.api_key = Some(tokentap_replay::config::Secret::new("sk-test-very-secret"));
    let (out, _) = run(c, ds).await;
    for r in sim.log() {
        let mut names: Vec<&str> = r.headers.iter().map(|(n, _)| n.as_str()).collect();
        names.sort();
        // `authorization` is sent but the sim never keeps it.
        assert_eq!(
            names,
            [
                "accept",
                "content-length",
                "content-type",
                "host",
                "x-session-id",
                "x-smg-routing-key"
            ]
        );
        let h = |n: &str| r.headers.iter().find(|(k, _)| k == n).unwrap().1.clone();
        assert_eq!(h("content-type"), "application/json");
        assert_eq!(h("accept"), "text/event-stream");
        assert_eq!(h("x-smg-routing-key"), r.session.clone().unwrap());
        assert_eq!(
            h("content-length"),
            r.body.as_ref().unwrap().len().to_string()
        );
    }
    let dir = out.out_dir.unwrap();
    for f in ["records.jsonl", "summary.json", "config.json"] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(!text.contains("very-secret"), "{f} leaks the key");
    }
    assert!(std::fs::read_to_string(dir.join("config.json"))
        .unwrap()
        .contains("\"api_key_set\": true"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salting_without_a_system_prompt_fails_before_sending() {
    let sim = sim_with(|_| {}).await;
    let ds = dataset(
        r#"{"conversation_id":"ok","turn":1,"role":"user","content":"q","system":"S"}
{"conversation_id":"nosys","turn":1,"role":"user","content":"q"}
"#,
    );
    let mut c = config(&sim, "nosys");
    c.salt = true;
    let err = tokentap_replay::run_with(
        c.resolve().unwrap(),
        ds,
        tokentap_replay::ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("nosys") && err.contains(":2"), "{err}");
    assert!(sim.log().is_empty(), "nothing may be sent");
}
