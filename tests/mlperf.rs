//! The reference tokenizer on both sides of the wire: replay (`--tokenizer`) → proxy
//! (`--tokenizer`) → sim, all real sockets. The replay counts from the stream it parsed itself,
//! the proxy from the frames it forwarded; both must give every turn the same OSL, TPOT
//! denominator and ISL — and the proxy, whose server sent no usage, must use the tokenizer's
//! OSL as its output token count.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;
use tokentap_core::record::{CountSource, Status};
use tokentap_core::timeline::TokenSource;
use tokentap_proxy::Proxy;
use tokentap_replay::{ProgressMode, RunOpts};
use tokentap_sim::{SimConfig, SimServer};
use tokentap_testkit::data::synth_dataset;

fn tokenizer() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/golden/mlperf-ea33275/tokenizer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_and_proxy_count_the_same_reference_tokens() {
    let ds = synth_dataset(3, 3, 0.1);
    let mut sc = SimConfig::zero_delay();
    // Reasoning, tool calls and several tokens per chunk: every counting path.
    sc.modes.reasoning_fraction = 0.5;
    sc.modes.tool_call_rate = 0.5;
    let sim = SimServer::start(sc).await.unwrap();
    let mut pc = tokentap_proxy::Config::new([sim.base_url()]);
    pc.keep_records = true;
    pc.tokenizer = Some(tokenizer());
    let proxy = Proxy::start(pc).await.unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let mut rc = RunOpts::new(&proxy.base_url()).unwrap();
    rc.model = Some("m".into());
    rc.concurrency = 3;
    rc.salt = true;
    rc.tokenizer = Some(tokenizer());
    rc.out = Some(out_dir.path().to_path_buf());
    let out = tokentap_replay::run_with(
        rc.resolve().unwrap(),
        ds,
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap();
    let n = out.summary.counts.total as usize;
    let wire = proxy.wait_records(n).await;
    let report = proxy.shutdown(Duration::from_secs(5)).await;
    sim.shutdown().await;
    assert_eq!(report.seen, report.written);

    let client: Vec<serde_json::Value> =
        std::fs::read_to_string(out_dir.path().join("records.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let by_turn: HashMap<(String, u64), &serde_json::Value> = client
        .iter()
        .map(|r| {
            (
                (
                    r["conversation_id"].as_str().unwrap().to_string(),
                    r["turn_index"].as_u64().unwrap(),
                ),
                r,
            )
        })
        .collect();
    let mut structured = 0;
    for w in &wire {
        assert_eq!(w.status, Status::Ok);
        let c = by_turn[&(w.conversation_id.clone().unwrap(), u64::from(w.turn_index))];
        assert_eq!(w.osl_source, Some(CountSource::Tokenizer));
        assert_eq!(w.isl_source, Some(CountSource::Tokenizer));
        assert_eq!(
            serde_json::json!(w.osl),
            c["osl"],
            "OSL of {:?}",
            w.conversation_id
        );
        assert_eq!(serde_json::json!(w.tpot_tokens), c["tpot_tokens"]);
        assert_eq!(serde_json::json!(w.isl), c["isl"]);
        // No usage from the server: the proxy's own output count is the tokenizer's.
        assert_eq!(w.measured.output_tokens, w.osl);
        assert_eq!(w.measured.output_tokens_source, TokenSource::Tokenizer);
        let spread: u64 = w.measured.chunks.iter().map(|c| u64::from(c.tokens)).sum();
        assert_eq!(
            Some(spread),
            w.osl,
            "the count is spread over the text chunks"
        );
        if w.osl.unwrap_or(0) > 0 && w.measured.chunks.len() > 2 {
            structured += 1;
        }
    }
    assert!(structured >= 5, "only {structured} turns with output");
    assert!(out.summary.mlperf.reference_tokens);
}
