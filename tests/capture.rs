//! `tokentap dataset capture` end to end, on real sockets: traffic through the proxy with
//! `--record-content` → a dataset → `validate` → replayed through the proxy again, the replayed
//! request bodies compared with the captured ones (docs/usage.md#dataset-capture).

use bytes::Bytes;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokentap_core::events::Api;
use tokentap_dataset::capture::{capture, CaptureError, Options, StandIn, Tokens};
use tokentap_dataset::{Dataset, Role};
use tokentap_replay::ProgressMode;
use tokentap_sim::SimConfig;
use tokentap_testkit::data::{captured_form, synth_dataset, temp_dir};
use tokentap_testkit::proxy::{client, post, send};
use tokentap_testkit::topology::{sim_cfg, Stack};

fn capturing_sim() -> SimConfig {
    let mut c = sim_cfg();
    c.capture_bodies = true;
    c
}

/// A sim with a proxy in front that writes records with content into `dir`.
async fn recording_stack(dir: &Path) -> Stack {
    let dir = dir.to_path_buf();
    Stack::proxied(capturing_sim(), move |c| {
        c.record_content = true;
        c.records_dir = Some(dir);
    })
    .await
}

/// Replays `ds` through a fresh recording stack; the request bodies the sim got, by session
/// and arrival, and the records directory.
async fn replay_through(ds: Arc<Dataset>, name: &str) -> (Vec<(String, Bytes)>, PathBuf) {
    let dir = temp_dir(name);
    let stack = recording_stack(&dir).await;
    let mut rc = stack.replay_config(Some(&dir.join("run")));
    rc.concurrency = 3;
    let out = tokentap_replay::run_with(
        rc.resolve().unwrap(),
        ds,
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap();
    let n = out.summary.counts.total as usize;
    assert_eq!(stack.proxy.wait_records(n).await.len(), n);
    let bodies = stack
        .sim
        .log()
        .into_iter()
        .map(|l| (l.session.unwrap_or_default(), l.body.unwrap()))
        .collect();
    let report = stack.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.seen, report.written);
    (bodies, dir)
}

fn run_capture(opts: &Options, tok: &dyn Tokens, out: &Path) -> tokentap_dataset::capture::Report {
    let mut f = std::fs::File::create(out).unwrap();
    capture(opts, tok, &mut f).unwrap()
}

/// Everything recorded in `dir`, captured with the defaults into `dir/captured.jsonl`.
fn capture_dir(dir: &Path) -> (PathBuf, tokentap_dataset::capture::Report) {
    let file = dir.join("captured.jsonl");
    let opts = Options {
        records: vec![dir.to_path_buf()],
        ..Options::default()
    };
    let report = run_capture(&opts, &StandIn, &file);
    (file, report)
}

fn by_session(mut v: Vec<(String, Bytes)>) -> Vec<(String, Vec<Bytes>)> {
    // Arrival order within a session is its turn order (a closed loop).
    v.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(String, Vec<Bytes>)> = Vec::new();
    for (s, b) in v {
        match out.last_mut() {
            Some((k, list)) if *k == s => list.push(b),
            _ => out.push((s, vec![b])),
        }
    }
    out
}

/// A replayed run, captured, replays to the same request bodies byte for byte: the dataset
/// holds exactly what reconstructs every prompt (docs/benchmark.md#requests), and only the
/// delays come from the wire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_run_replays_to_the_same_bodies() {
    let original = synth_dataset(3, 3, 0.1);
    let (first, dir) = replay_through(original.clone(), "capture-run1").await;
    let (file, report) = capture_dir(&dir);
    assert_eq!(report.trajectories, 6, "{}", report.render());
    assert!(
        report.skipped.is_empty() && report.dropped.is_empty(),
        "{}",
        report.render()
    );
    let captured = Arc::new(Dataset::load(&file).expect("the captured dataset validates"));
    // The same conversations, the same rows, every field but the delays and intent codes.
    let mut a = original.conversations.clone();
    let mut b = captured.conversations.clone();
    a.sort_by(|x, y| x.id.cmp(&y.id));
    b.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.id, y.id);
        assert_eq!(x.rows.len(), y.rows.len(), "{}", x.id);
        // The last answer is the one the server gave on the wire (no later request carries
        // the dataset's): it is the only row that may differ.
        let last = y.rows.last().unwrap();
        assert_eq!(last.role, Role::Assistant);
        let n = x.rows.len() - 1;
        for (r, s) in x.rows[..n].iter().zip(&y.rows[..n]) {
            assert_eq!((r.turn, r.role), (s.turn, s.role));
            assert!(
                r.content == s.content,
                "{} turn {}: content differs",
                x.id,
                r.turn
            );
            assert_eq!(r.tool_calls, s.tool_calls);
            assert_eq!(r.tool_results, s.tool_results);
            assert_eq!(r.reasoning_content, s.reasoning_content);
            if r.role == Role::User && r.turn == 1 {
                assert_eq!(r.system, s.system);
                assert_eq!(r.tools, s.tools);
            }
            if r.role.is_client() && r.turn > 1 {
                let d = s.delay_seconds.expect("a delay from the wire");
                assert!((0.0..5.0).contains(&d), "{d}");
            }
        }
    }
    let (second, _) = replay_through(captured, "capture-run2").await;
    let (first, second) = (by_session(first), by_session(second));
    assert_eq!(first.len(), 6);
    assert_eq!(
        first, second,
        "the captured dataset replays to the same request bodies"
    );
}

fn body(v: Value) -> Bytes {
    Bytes::from(serde_json::to_vec(&v).unwrap())
}

/// Sessions of the Responses and Messages APIs (an agent's own requests, with tool calls)
/// become chat-form trajectories; replayed, each request's messages are the captured request's
/// in chat form (a `previous_response_id` chain with its history put back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_and_messages_sessions_become_chat_trajectories() {
    let dir = temp_dir("capture-apis");
    let stack = recording_stack(&dir).await;
    let c = client();
    let base = stack.endpoint();
    let tools_m = json!([{"name": "bash", "description": "run a command", "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]);
    let m1 = json!({"role": "user", "content": "list the files"});
    let a1 = json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "ls will do", "signature": "s"}, {"type": "text", "text": "Listing."}, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}}]});
    let r1 = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt\nb.txt"}]});
    let a2 = json!({"role": "assistant", "content": [{"type": "text", "text": "Two files."}]});
    let m3 = json!({"role": "user", "content": "show a.txt"});
    // As Claude Code 2.1 sends it: a system message among the messages, after the first user
    // message — text blocks on the first turn, a string after.
    let env_list = json!({"role": "system", "content": [{"type": "text", "text": "cwd: /repo"}]});
    let env_str = json!({"role": "system", "content": "cwd: /repo"});
    let messages_turns = [
        json!([m1, env_list]),
        json!([m1, env_str, a1, r1]),
        json!([m1, env_str, a1, r1, a2, m3]),
    ];
    let mut sent_messages = Vec::new();
    for (i, msgs) in messages_turns.iter().enumerate() {
        let b = json!({"model": "tokentap-sim", "system": "You are a shell agent.", "messages": msgs, "tools": tools_m, "max_tokens": 8, "stream": i != 1});
        sent_messages.push(b.clone());
        let got = send(
            &c,
            post(&format!("{base}/v1/messages"), body(b), Some("claude-1")),
        )
        .await;
        assert_eq!(got.status, 200);
    }
    // Codex-style: the whole input every turn, the session in prompt_cache_key.
    let fc = json!({"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{\"cmd\":\"pwd\"}"});
    let out = json!({"type": "function_call_output", "call_id": "call_1", "output": "/repo"});
    let u1 = json!({"role": "user", "content": [{"type": "input_text", "text": "where am I?"}]});
    // As Codex sends it: two developer messages, then its environment and the prompt as two
    // user messages in a row.
    let d1 = json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "sandbox: none"}]});
    let d2 = json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "skills: "}, {"type": "input_text", "text": "none"}]});
    let u0 = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>cwd /repo</environment_context>"}]});
    let responses_turns = [json!([d1, d2, u0, u1]), json!([d1, d2, u0, u1, fc, out])];
    let mut sent_responses = Vec::new();
    for (i, input) in responses_turns.iter().enumerate() {
        let b = json!({"model": "tokentap-sim", "instructions": "You are Codex.", "input": input, "tools": [{"type": "function", "name": "bash", "parameters": {"type": "object"}}], "prompt_cache_key": "codex-7", "max_output_tokens": 8, "stream": i == 0});
        sent_responses.push(b.clone());
        assert_eq!(
            send(&c, post(&format!("{base}/v1/responses"), body(b), None))
                .await
                .status,
            200
        );
    }
    // A previous_response_id chain, no header: turn 2 carries only its new message.
    let b1 = json!({"model": "tokentap-sim", "instructions": "Be brief.", "input": "hello", "max_output_tokens": 6, "stream": false});
    let got = send(&c, post(&format!("{base}/v1/responses"), body(b1), None)).await;
    let first_id = got.json()["id"].as_str().unwrap().to_string();
    let first_out = got.json()["output"].clone();
    let b2 = json!({"model": "tokentap-sim", "instructions": "Be brief.", "previous_response_id": first_id, "input": [{"role": "user", "content": "and again"}], "max_output_tokens": 6, "stream": true});
    assert_eq!(
        send(&c, post(&format!("{base}/v1/responses"), body(b2), None))
            .await
            .status,
        200
    );
    assert_eq!(stack.proxy.wait_records(7).await.len(), 7);
    stack.shutdown(Duration::from_secs(5)).await;

    let (file, report) = capture_dir(&dir);
    assert_eq!(report.trajectories, 3, "{}", report.render());
    assert!(report.dropped.is_empty(), "{}", report.render());
    let captured = Dataset::load(&file).expect("validates");
    let ids: Vec<&str> = captured
        .conversations
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(ids, ["claude-1", "codex-7", first_id.as_str()]);
    let claude = &captured.conversations[0];
    assert_eq!(
        claude.rows.len(),
        6,
        "user, assistant+tool call, tool, assistant, user, answer"
    );
    assert_eq!(
        claude.rows[1].reasoning_content.as_deref(),
        Some("ls will do")
    );
    assert_eq!(
        claude.rows[1].tool_calls.as_ref().unwrap()[0]["function"]["arguments"],
        "{\"cmd\":\"ls\"}"
    );

    // Replayed (chat completions), each request's messages are the captured request's.
    let stack = Stack::proxied(capturing_sim(), |_| {}).await;
    let mut rc = stack.replay_config(None);
    rc.concurrency = 1;
    tokentap_replay::run_with(
        rc.resolve().unwrap(),
        Arc::new(captured),
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap();
    let replayed = by_session(
        stack
            .sim
            .log()
            .into_iter()
            .map(|l| (l.session.unwrap_or_default(), l.body.unwrap()))
            .collect(),
    );
    let messages_of = |b: &Bytes| serde_json::from_slice::<Value>(b).unwrap()["messages"].clone();
    let want =
        |api: Api, b: &Value| captured_form(tokentap_core::convert::request(api, b).messages);
    let find = |id: &str| &replayed.iter().find(|(s, _)| s == id).unwrap().1;
    let claude_bodies = find("claude-1");
    assert_eq!(claude_bodies.len(), 3);
    for (i, b) in sent_messages.iter().enumerate() {
        let w = want(Api::Messages, b);
        assert_eq!(messages_of(&claude_bodies[i]), w, "Messages turn {i}");
    }
    let codex = find("codex-7");
    for (i, b) in sent_responses.iter().enumerate() {
        assert_eq!(
            messages_of(&codex[i]),
            want(Api::Responses, b),
            "Responses turn {i}"
        );
    }
    // The chain: turn 2's prompt is turn 1's, its answer, and the new message.
    let chain = find(&first_id);
    let m2 = messages_of(&chain[1]);
    let answer = tokentap_core::convert::response(
        Api::Responses,
        &json!({"output": first_out}),
        &mut Default::default(),
    )
    .unwrap();
    assert_eq!(
        m2,
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}, answer, {"role": "user", "content": "and again"}])
    );
    stack.shutdown(Duration::from_secs(5)).await;
}

/// A `previous_response_id` chain of 20,000 turns, as an agent on the Responses API sends it
/// (each request only its new input, naming the previous response), through the proxy to the
/// sim: one trajectory of 20,000 client rows. Capture knows each turn's history without
/// rebuilding or comparing it, so a turn costs the same at the chain's end as at its start
/// (docs/usage.md#dataset-capture; the time is measured in docs/benchmarks.md, not here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20000_turn_response_chain_is_one_trajectory() {
    const TURNS: usize = 20_000;
    let dir = temp_dir("capture-chain");
    let stack = recording_stack(&dir).await;
    let c = client();
    let url = format!("{}/v1/responses", stack.endpoint());
    let mut previous: Option<String> = None;
    for i in 0..TURNS {
        let mut b = json!({"model": "tokentap-sim", "instructions": "Be brief.", "input": [{"role": "user", "content": format!("step {i}")}], "max_output_tokens": 2, "stream": false});
        if let Some(p) = &previous {
            b["previous_response_id"] = p.as_str().into();
        }
        let got = send(&c, post(&url, body(b), None)).await;
        assert_eq!(got.status, 200, "turn {i}");
        previous = Some(got.json()["id"].as_str().unwrap().to_string());
    }
    assert_eq!(stack.proxy.wait_records(TURNS).await.len(), TURNS);
    stack.shutdown(Duration::from_secs(5)).await;

    let (file, report) = capture_dir(&dir);
    assert_eq!(
        (report.sessions, report.trajectories, report.client_rows),
        (1, 1, TURNS as u64),
        "{}",
        report.render()
    );
    assert!(report.notes.is_empty(), "{}", report.render());
    let captured = Dataset::load(&file).expect("validates");
    let chain = &captured.conversations[0];
    assert_eq!(chain.client_turns().count(), TURNS);
    // Each turn's new message, each answer between: the whole history, in order.
    assert_eq!(chain.rows.len(), 2 * TURNS);
    assert_eq!(chain.rows[0].system.as_deref(), Some("Be brief."));
    for i in [1, TURNS / 2, TURNS - 1] {
        let r = &chain.rows[2 * i];
        assert_eq!(
            (r.role, r.content_str()),
            (Role::User, Some(&*format!("step {i}")))
        );
        assert_eq!(chain.rows[2 * i - 1].role, Role::Assistant);
    }
}

/// Privacy: capture reads only what `--record-content` wrote, and credentials reach neither a
/// record nor the dataset even when the operator asks to record those headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_content_no_capture_and_no_credentials_anywhere() {
    // Without --record-content: refused, saying why.
    let dir = temp_dir("capture-nocontent");
    let d2 = dir.clone();
    let stack = Stack::proxied(capturing_sim(), move |c| c.records_dir = Some(d2)).await;
    let c = client();
    let b = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 4});
    assert_eq!(
        send(
            &c,
            post(
                &format!("{}/v1/chat/completions", stack.endpoint()),
                body(b.clone()),
                Some("s")
            )
        )
        .await
        .status,
        200
    );
    stack.proxy.wait_records(1).await;
    stack.shutdown(Duration::from_secs(5)).await;
    let err = capture(
        &Options {
            records: vec![dir],
            ..Options::default()
        },
        &StandIn,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(
        matches!(err, CaptureError::NoContent { records: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("--record-content"), "{err}");

    // With content, and the credential headers asked for: none of them is written.
    let dir = temp_dir("capture-secrets");
    let d2 = dir.clone();
    let stack = Stack::proxied(capturing_sim(), move |c| {
        c.record_content = true;
        c.records_dir = Some(d2);
        c.record_headers = ["authorization", "x-api-key", "cookie", "x-team"]
            .iter()
            .map(|h| http::HeaderName::from_static(h))
            .collect();
    })
    .await;
    for (path, api_body) in [
        ("/v1/chat/completions", b.clone()),
        (
            "/v1/messages",
            json!({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "/v1/responses",
            json!({"model": "m", "input": "hi", "max_output_tokens": 4}),
        ),
    ] {
        let mut req = post(
            &format!("{}{path}", stack.endpoint()),
            body(api_body),
            Some("sess-secret"),
        );
        let h = req.headers_mut();
        h.insert("authorization", "Bearer sk-SECRET-bearer".parse().unwrap());
        h.insert("x-api-key", "sk-ant-SECRET-key".parse().unwrap());
        h.insert("cookie", "session=SECRET-cookie".parse().unwrap());
        h.insert("x-team", "platform".parse().unwrap());
        assert_eq!(send(&c, req).await.status, 200);
    }
    let recs = stack.proxy.wait_records(3).await;
    assert!(recs
        .iter()
        .all(|r| r.headers.get("x-team").map(String::as_str) == Some("platform")));
    stack.shutdown(Duration::from_secs(5)).await;
    let (_, report) = capture_dir(&dir);
    assert_eq!(report.trajectories, 1, "{}", report.render());
    for f in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        assert!(!text.contains("SECRET"), "a credential was written");
    }
}

/// `--anonymize` keeps every text's token count with the model's tokenizer (the golden one),
/// changes every text, and keeps what was shared shared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymize_keeps_token_counts_with_the_golden_tokenizer() {
    let tok_dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/golden/mlperf-ea33275/tokenizer");
    let tok =
        tokentap_mlperf::tokenizer::RefTokenizer::load(&tok_dir).expect("the golden tokenizer");
    struct Model(tokentap_mlperf::tokenizer::RefTokenizer);
    impl Tokens for Model {
        fn count(&self, t: &str) -> u64 {
            self.0.count_text(t)
        }
        fn describe(&self) -> String {
            "golden".into()
        }
    }
    let model = Model(tok);
    let (_, dir) = replay_through(synth_dataset(2, 2, 0.1), "capture-anon").await;
    let plain = dir.join("plain.jsonl");
    let anon = dir.join("anon.jsonl");
    let opts = Options {
        records: vec![dir.clone()],
        ..Options::default()
    };
    run_capture(&opts, &model, &plain);
    run_capture(
        &Options {
            anonymize: true,
            ..opts
        },
        &model,
        &anon,
    );
    let a = Dataset::load(&plain).unwrap();
    let b = Dataset::load(&anon).expect("an anonymized dataset validates");
    let mut texts = 0;
    let mut systems = std::collections::HashMap::new();
    for (x, y) in a.conversations.iter().zip(&b.conversations) {
        for (r, s) in x.rows.iter().zip(&y.rows) {
            let pairs = [
                (r.content_str(), s.content_str()),
                (
                    r.reasoning_content.as_deref(),
                    s.reasoning_content.as_deref(),
                ),
                (r.system.as_deref(), s.system.as_deref()),
            ];
            for (p, q) in pairs {
                if let (Some(p), Some(q)) = (p, q) {
                    assert_eq!(model.count(p), model.count(q), "{p:?} → {q:?}");
                    if !p.is_empty() {
                        assert_ne!(p, q);
                        texts += 1;
                    }
                }
            }
            if let (Some(p), Some(q)) = (&r.system, &s.system) {
                // The same prompt, the same filler.
                assert_eq!(systems.entry(p.clone()).or_insert_with(|| q.clone()), q);
            }
            for (t, u) in r
                .tool_results
                .iter()
                .flatten()
                .zip(s.tool_results.iter().flatten())
            {
                let (t, u) = (t.content.as_ref().unwrap(), u.content.as_ref().unwrap());
                assert_eq!(
                    model.count(t.as_str().unwrap()),
                    model.count(u.as_str().unwrap())
                );
                texts += 1;
            }
        }
    }
    assert!(texts > 20, "{texts}");
}

fn tokentap(args: &[&str]) -> (i32, String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tokentap"))
        .args(args)
        .output()
        .expect("tokentap runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The commands as a person runs them: capture, validate, stats against the MLPerf set (table
/// and plots); and files of another kind refused with the file, the line and what was expected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_capture_validate_compare_and_refuse() {
    let (_, dir) = replay_through(synth_dataset(2, 2, 0.1), "capture-cli").await;
    let out = dir.join("ours.jsonl");
    let (code, _, err) = tokentap(&[
        "dataset",
        "capture",
        "--records",
        dir.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--min-turns",
        "2",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("captured 4 trajectories"), "{err}");
    assert!(
        err.lines().filter(|l| l.starts_with("session ")).count() >= 4,
        "a line per session: {err}"
    );
    let (code, stdout, _) = tokentap(&["dataset", "validate", out.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("ok: 4 trajectories"), "{stdout}");
    // Nothing kept (every trajectory shorter than --min-turns): exit 1, an `error:` line, no
    // file — not even an empty one.
    let none = dir.join("none.jsonl");
    let (code, _, err) = tokentap(&[
        "dataset",
        "capture",
        "--records",
        dir.to_str().unwrap(),
        "-o",
        none.to_str().unwrap(),
        "--min-turns",
        "999",
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("error: no trajectory captured")),
        "{err}"
    );
    assert!(!err.contains("wrote "), "{err}");
    assert!(!none.exists());
    let mlperf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/golden/mlperf-ea33275/dataset.jsonl");
    let page = dir.join("compare.html");
    let (code, table, err) = tokentap(&[
        "dataset",
        "stats",
        out.to_str().unwrap(),
        "--against",
        mlperf.to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    for row in [
        "client turns / trajectory",
        "final context (tokens)",
        "growth / client turn (tokens)",
        "output / assistant turn (tokens)",
        "delay (s)",
    ] {
        assert!(table.contains(row), "{row} missing:\n{table}");
    }
    assert!(
        table.contains("13"),
        "the MLPerf set's 13 trajectories:\n{table}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<svg class=\"plot\"").count(), 4, "four plots");
    assert!(html.contains("Datasets side by side"));

    // The replay's records: refused, naming the file and line.
    let replay_records = dir.join("run/records.jsonl");
    let (code, _, err) = tokentap(&[
        "dataset",
        "capture",
        "--records",
        replay_records.to_str().unwrap(),
        "-o",
        dir.join("x.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("records.jsonl:1: field `origin`: expected \"proxy\""),
        "{err}"
    );
    assert!(
        !dir.join("x.jsonl").exists() && !dir.join("x.jsonl.partial").exists(),
        "no half file"
    );
    // A dataset given as records: refused, naming what was expected.
    let (code, _, err) = tokentap(&[
        "dataset",
        "capture",
        "--records",
        mlperf.to_str().unwrap(),
        "-o",
        dir.join("y.jsonl").to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("dataset.jsonl:1: expected a tokentap proxy record"),
        "{err}"
    );
}

/// Outputs the proxy let go (`--max-event-bytes`) under `--record-content`: the requests are
/// still recorded, capture uses the agent's own copy of each answer from its next request and
/// says so — the records are not taken for records without content.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_past_the_event_limit_are_taken_from_the_next_request() {
    let dir = temp_dir("capture-omitted");
    let d = dir.clone();
    let stack = Stack::proxied(capturing_sim(), move |c| {
        c.record_content = true;
        c.records_dir = Some(d);
        c.max_event_bytes = 256;
    })
    .await;
    let mut rc = stack.replay_config(Some(&dir.join("run")));
    rc.concurrency = 1;
    let out = tokentap_replay::run_with(
        rc.resolve().unwrap(),
        synth_dataset(1, 0, 0.05),
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap();
    let n = out.summary.counts.total as usize;
    assert!(n >= 2, "{n}");
    stack.proxy.wait_records(n).await;
    stack.shutdown(Duration::from_secs(5)).await;
    let (file, report) = capture_dir(&dir);
    let text = report.render();
    assert_eq!(report.trajectories, 1, "{text}");
    assert!(
        text.contains("--max-event-bytes was not recorded"),
        "{text}"
    );
    assert!(
        !text.contains("recorded without --record-content"),
        "{text}"
    );
    let captured = Dataset::load(&file).expect("validates");
    assert_eq!(captured.conversations[0].client_turns().count(), n);
}
