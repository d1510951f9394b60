//! The replay against the golden run of the pinned reference client (testdata/golden): the same
//! dataset, replayed with the same settings against the same oracle server
//! (`oracle_server.py`, a real OpenAI-compatible server that answers every turn with the
//! recorded assistant turn, altered deterministically per conversation and turn, some turns
//! failing with HTTP 500), must score exactly as the reference scored, count every turn's
//! output tokens exactly as the reference counted them, and count the prompts of the
//! reference's performance window to the reference's ISL total.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use tokentap_dataset::Dataset;
use tokentap_testkit::replay::*;

fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/golden/mlperf-ea33275")
}

/// `oracle_server.py` on a free loopback port; killed on drop.
struct Oracle {
    child: Child,
    port: u16,
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_oracle() -> Oracle {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .arg(golden().join("oracle_server.py"))
        .args([
            "--port",
            &port.to_string(),
            "--seed",
            "golden",
            "--piece",
            "17",
        ])
        .arg("--dataset")
        .arg(golden().join("dataset.jsonl"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}): the golden oracle server needs CPython 3 on PATH")
        });
    let mut o = Oracle { child, port };
    // Ready when it accepts a connection (it binds before serving); give up after 20 s.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return o;
        }
        if let Ok(Some(st)) = o.child.try_wait() {
            panic!("oracle_server.py exited: {st}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "oracle_server.py did not listen on port {port} within 20 s"
        );
        std::thread::yield_now();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_outputs_same_scores_and_token_counts_as_the_reference() {
    let oracle = start_oracle();
    let path = golden().join("dataset.jsonl");
    let ds = Dataset::parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap();
    let n = ds.conversations.len() as u64;
    // The golden run's settings (testdata/golden/README.md).
    let mut c =
        tokentap_replay::RunOpts::new(&format!("http://127.0.0.1:{}", oracle.port)).unwrap();
    c.model = Some("tokenizer/".into());
    c.trajectories = Some(2 * n);
    c.concurrency = 2;
    c.salt = true;
    c.sampling.temperature = Some(0.0);
    c.sampling.max_completion_tokens = Some(64);
    c.tokenizer = Some(golden().join("tokenizer"));
    c.out = Some(temp_dir("golden"));
    let (out, recs) = run(c, Arc::new(ds)).await;
    let dir = out.out_dir.clone().unwrap();

    // 1. The reference scorer's file, byte for byte.
    let scores = std::fs::read_to_string(dir.join("scores.json")).unwrap();
    let want = std::fs::read_to_string(golden().join("scores.json")).unwrap();
    if scores != want {
        let (a, b): (Value, Value) = (
            serde_json::from_str(&scores).unwrap(),
            serde_json::from_str(&want).unwrap(),
        );
        assert_eq!(a["turns"], b["turns"]);
        for (x, y) in a["per_turn"]
            .as_array()
            .unwrap()
            .iter()
            .zip(b["per_turn"].as_array().unwrap())
        {
            assert_eq!(x, y);
        }
        panic!("scores.json differs from the reference's");
    }
    assert_eq!(out.summary.accuracy.inline_accuracy, Some(0.4696));

    // 2. Every completed turn's OSL and TPOT denominator, as the reference counted them.
    let by_turn: HashMap<(String, u64), &Value> = recs
        .iter()
        .map(|r| ((conv(r).to_string(), u(&r["dataset_turn"])), r))
        .collect();
    let text = std::fs::read_to_string(golden().join("per_turn_tokens.jsonl")).unwrap();
    let mut checked = 0;
    for line in text.lines() {
        let t: Value = serde_json::from_str(line).unwrap();
        let key = (
            t["conversation_id"].as_str().unwrap().to_string(),
            u(&t["turn"]),
        );
        let r = by_turn[&key];
        assert_eq!(status(r), "ok", "{key:?}");
        assert_eq!(r["osl"], t["osl"], "OSL of {key:?}");
        assert_eq!(r["tpot_tokens"], t["tpot_tokens"], "TPOT tokens of {key:?}");
        assert_eq!(r["osl_source"], "tokenizer");
        checked += 1;
    }
    assert!(checked >= 300);

    // 3. The reference's ISL total over its own performance window, from our per-turn ISL.
    let events = std::fs::read_to_string(golden().join("events.jsonl")).unwrap();
    let mut tracking = false;
    let mut sent: BTreeMap<String, (String, u64, bool)> = BTreeMap::new();
    for line in events.lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        match e["event_type"].as_str().unwrap() {
            "session.start_performance_tracking" => tracking = true,
            "session.stop_performance_tracking" => tracking = false,
            "sample.issued" if tracking => {
                sent.insert(
                    e["sample_uuid"].as_str().unwrap().into(),
                    (
                        e["conversation_id"].as_str().unwrap().into(),
                        u(&e["turn"]),
                        true,
                    ),
                );
            }
            "error.generic" if e["data"][1] == "TurnAbortedByPriorFailure" => {
                if let Some(s) = sent.get_mut(e["sample_uuid"].as_str().unwrap()) {
                    s.2 = false;
                }
            }
            _ => {}
        }
    }
    let isl: u64 = sent
        .values()
        .filter(|s| s.2)
        .map(|(c, t, _)| {
            let r = by_turn[&(c.clone(), *t)];
            assert_eq!(r["isl_source"], "tokenizer");
            u(&r["isl"])
        })
        .sum();
    assert_eq!(isl, 5_739_072, "ISL total over the reference's window");

    // 4. The run's own reference files exist and agree with the summary.
    let rs: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result_summary.json")).unwrap())
            .unwrap();
    assert_eq!(rs["n_samples_issued"], out.summary.mlperf.samples_issued);
    assert!(out.summary.mlperf.reference_tokens);
    assert_eq!(out.summary.mlperf.template_fallbacks, 0);
    drop(oracle);
}
