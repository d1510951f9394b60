//! The run report: a real replay against the real sim on 127.0.0.1:0 writes
//! `report.html` by itself; `tokentap report --format md|json` reads the same run; headless
//! Chromium (Debian `chromium`, installed by scripts/install-test-deps) loads the page offline
//! and its dumped DOM shows the self-check script ran and every plot has data marks.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use tokentap_dataset::Dataset;
use tokentap_replay::{ProgressMode, RunOpts};
use tokentap_sim::{SimConfig, SimServer};
use tokentap_testkit::data::synth_dataset;
use tokentap_testkit::page::{assert_reads_well, chromium};

const BIN: &str = env!("CARGO_BIN_EXE_tokentap");
const PLOTS: [&str; 7] = [
    "ttft_by_turn",
    "ttft_by_context",
    "itl_cdf",
    "output_tps",
    "cached_share",
    "status_counts",
    "swimlane",
];

/// A small synthesized dataset.
fn small_dataset(coding: usize, workflow: usize) -> Dataset {
    Arc::unwrap_or_clone(synth_dataset(coding, workflow, 0.1))
}

/// A small replay (2 coding + 3 workflow trajectories, delays on, usage on) against the sim;
/// returns the run directory.
async fn small_run(dir: &Path) {
    let ds = small_dataset(2, 3);
    let sim = SimServer::start(SimConfig::zero_delay())
        .await
        .expect("sim starts");
    let mut rc = RunOpts::new(&sim.base_url()).expect("endpoint parses");
    rc.model = Some("tokentap-sim".into());
    rc.concurrency = 2;
    rc.salt = true;
    rc.include_usage = true;
    rc.delays = true;
    rc.delay_scale = 0.002;
    rc.out = Some(dir.to_owned());
    let out = tokentap_replay::run_with(
        rc.resolve().unwrap(),
        Arc::new(ds),
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .expect("the replay runs");
    assert!(out.summary.counts.total > 5);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_writes_a_report_that_loads_in_chromium_with_every_plot() {
    let dir = tempfile::tempdir().expect("temp dir");
    small_run(dir.path()).await;
    let page = dir.path().join("report.html");
    let html = std::fs::read_to_string(&page).expect("the replay wrote report.html");

    // Self-contained: nothing is fetched.
    for needle in ["http://", "https://"] {
        let external = html
            .match_indices(needle)
            .filter(|(i, _)| {
                let before = &html[i.saturating_sub(12)..*i];
                !before.contains("xmlns=\"") && !before.contains("endpoint ")
            })
            .count();
        assert_eq!(external, 0, "the page references {needle} resources");
    }
    assert!(!html.contains("<script src") && !html.contains("<link"));

    // What the browser made of it.
    let dom = chromium(&["--window-size=1280,4000", "--dump-dom"], &page);
    assert!(
        dom.contains("data-report-ready=\"1\""),
        "the page's script did not run to its end (a JS error?)"
    );
    assert!(
        dom.contains("<title>tokentap report: invalid</title>"),
        "title not set by the script"
    );
    assert!(
        dom.contains("data-empty-plots=\"\""),
        "a plot has no data marks"
    );
    assert_reads_well(&dom);
    assert!(dom.contains("data-plots=\"7\""));
    for p in PLOTS {
        let at = dom
            .find(&format!("data-plot=\"{p}\""))
            .unwrap_or_else(|| panic!("plot {p} missing"));
        let tail = &dom[at..];
        let n: usize = tail["data-plot=\"\"".len() + p.len()..]
            .split("data-points=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        assert!(n > 0, "plot {p} drew no points");
    }
    assert!(dom.contains("id=\"verdict\""), "verdict not shown");
    // The benchmark's primary metrics come first, and say where the tokens came from.
    let mlperf = dom
        .find("id=\"mlperf\"")
        .expect("MLPerf primary metrics shown");
    assert!(mlperf < dom.find("id=\"verdict\"").unwrap());
    assert!(dom.contains("data-metric=\"system_tps\""));
    assert!(
        dom.contains("NOT the reference's count (usage"),
        "token source not said"
    );
    assert!(dom.contains(">invalid</div>"));

    // A screenshot for a human to look at (kept when TOKENTAP_REPORT_SHOT is set).
    if let Ok(shot) = std::env::var("TOKENTAP_REPORT_SHOT") {
        chromium(
            &["--window-size=1600,2400", &format!("--screenshot={shot}")],
            &page,
        );
    }

    // Text formats read the same run.
    let md = Command::new(BIN)
        .args(["report", "--format", "md"])
        .arg(dir.path())
        .output()
        .expect("tokentap runs");
    assert!(md.status.success());
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(
        md.contains("**Verdict: invalid**") && md.contains("| ttft |"),
        "{md}"
    );
    let js = Command::new(BIN)
        .args(["report", "--format", "json"])
        .arg(dir.path())
        .output()
        .expect("tokentap runs");
    assert!(js.status.success());
    let v: Value = serde_json::from_slice(&js.stdout).expect("json output");
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("summary.json")).expect("summary.json"),
    )
    .expect("summary parses");
    assert_eq!(v["status_counts"]["ok"], summary["counts"]["turns"]["ok"]);
    assert_eq!(
        v["latency_ms"]["ttft"]["p99"],
        summary["latency_ms"]["ttft"]["p99"]
    );
    assert!(v["ttft_ms_by_turn_index"]
        .as_array()
        .is_some_and(|a| a.len() > 1));
}

/// The compare.json hook: a comparison left in the run directory gets its own section.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_json_in_the_run_dir_is_rendered() {
    let dir = tempfile::tempdir().expect("temp dir");
    small_run(dir.path()).await;
    std::fs::write(
        dir.path().join("compare.json"),
        r#"{"schema":"tokentap-compare/1","format":"aiperf","verdict":"fail","reasons":["ttft p99 beyond tolerance"],
           "metrics":[{"metric":"ttft","unit":"ms","claims":[{"stat":"p99","client":12.5,"wire":10.0,"diff":2.5,"tolerance":1.0,"verdict":"fail"}]}],
           "pairs":[{"client":{"ttft_ms":12.0},"wire":{"ttft_ms":10.0}},{"client":{"ttft_ms":7.0},"wire":{"ttft_ms":6.5}}]}"#,
    )
    .expect("write");
    let out = dir.path().join("r.html");
    let st = Command::new(BIN)
        .args(["report", "--out"])
        .arg(&out)
        .arg(dir.path())
        .status()
        .expect("tokentap runs");
    assert!(st.success());
    let html = std::fs::read_to_string(&out).expect("report written to --out");
    assert!(html.contains("id=\"compare\"") && html.contains("<b>fail</b>"));
    assert!(html.contains("ttft p99 beyond tolerance") && html.contains("id=\"claims\""));
    assert!(html.contains("data-plot=\"compare_ttft\" data-points=\"2\""));
}

/// `tokentap report --tokenizer` recounts recorded outputs (`replay --record-outputs`) the
/// reference's way: on a run that also counted them live, every number comes out the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_recounts_recorded_outputs_with_a_tokenizer() {
    let tokenizer = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/golden/mlperf-ea33275/tokenizer");
    let dir = tempfile::tempdir().expect("temp dir");
    let ds = Arc::unwrap_or_clone(synth_dataset(2, 2, 0.1));
    let mut sc = SimConfig::zero_delay();
    sc.modes.reasoning_fraction = 0.5;
    sc.modes.tool_call_rate = 0.5;
    let sim = SimServer::start(sc).await.expect("sim starts");
    let mut rc = RunOpts::new(&sim.base_url()).expect("endpoint");
    rc.model = Some("tokentap-sim".into());
    rc.concurrency = 2;
    rc.tokenizer = Some(tokenizer.clone());
    rc.record_outputs = true;
    rc.out = Some(dir.path().to_owned());
    let out = tokentap_replay::run_with(
        rc.resolve().unwrap(),
        Arc::new(ds),
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .expect("the replay runs");
    sim.shutdown().await;
    let live = serde_json::to_value(out.summary.mlperf.primary).expect("json");
    let report = |format: &str| {
        Command::new(BIN)
            .args(["report", "--format", format, "--tokenizer"])
            .arg(&tokenizer)
            .arg(dir.path())
            .output()
            .expect("tokentap runs")
    };
    let js = report("json");
    assert!(
        js.status.success(),
        "{}",
        String::from_utf8_lossy(&js.stderr)
    );
    let v: Value = serde_json::from_slice(&js.stdout).expect("json output");
    let m = &v["mlperf"];
    assert_eq!(m["recounted_with"], tokenizer.display().to_string());
    assert_eq!(m["reference_tokens"], true);
    for k in [
        "system_tps",
        "tps_per_user",
        "e2e_interactivity",
        "osl_mean",
        "tpot_p90_ms",
    ] {
        assert_eq!(m[k], live[k], "{k}");
    }
    assert!(String::from_utf8_lossy(&js.stderr).contains("recounted"));
    // Without recorded outputs the report says why it cannot count.
    let records = dir.path().join("records.jsonl");
    let stripped: String = std::fs::read_to_string(&records)
        .expect("records")
        .lines()
        .map(|l| {
            let mut r: Value = serde_json::from_str(l).expect("record");
            r.as_object_mut().expect("object").remove("content");
            r.to_string() + "\n"
        })
        .collect();
    std::fs::write(&records, stripped).expect("write");
    assert!(report("md").status.success());
    let js = report("json");
    let v: Value = serde_json::from_slice(&js.stdout).expect("json output");
    assert!(v["mlperf"]["report_note"]
        .as_str()
        .is_some_and(|n| n.contains("--record-outputs")));
}

/// `tokentap report` on a proxy's records directory: where each session's time went. A replay
/// with delays through the proxy: each session's time between turns is at least the delays the
/// replay slept (the wire's gap also holds the client's own turnaround), its time on the model
/// the union of its requests; the page loads in Chromium with its timeline drawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_records_directory_reports_where_each_sessions_time_went() {
    use tokentap_testkit::topology::{sim_cfg, Stack};
    let dir = tempfile::tempdir().expect("temp dir");
    let records = dir.path().join("records");
    let rec = records.clone();
    let stack = Stack::proxied(sim_cfg(), move |c| c.records_dir = Some(rec)).await;
    let ds = Arc::new(small_dataset(2, 2));
    let mut rc = stack.replay_config(None);
    rc.concurrency = 2;
    rc.delays = true;
    rc.delay_scale = 0.01;
    let out = tokentap_replay::run_with(
        rc.resolve().unwrap(),
        ds.clone(),
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .expect("the replay runs");
    let n = out.summary.counts.total as usize;
    assert_eq!(stack.proxy.wait_records(n).await.len(), n);
    stack.shutdown(std::time::Duration::from_secs(5)).await;

    let json = Command::new(BIN)
        .args(["report", "--format", "json"])
        .arg(&records)
        .output()
        .expect("tokentap runs");
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let r: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let sessions = r["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), ds.conversations.len(), "{r}");
    for c in &ds.conversations {
        let s = sessions
            .iter()
            .find(|s| s["session"] == c.id.as_str())
            .unwrap_or_else(|| panic!("no session for {}: {r}", c.id));
        let turns = c.client_turns().count() as u64;
        assert_eq!(s["requests"], turns, "{s}");
        let slept: f64 = c
            .client_turns()
            .filter_map(|i| c.rows[i].delay_seconds)
            .map(|d| d * 0.01)
            .sum();
        let between = s["between_turns_s"].as_f64().unwrap();
        let (model, span) = (
            s["model_s"].as_f64().unwrap(),
            s["span_s"].as_f64().unwrap(),
        );
        assert!(between + 1e-6 >= slept, "{between} < {slept}: {s}");
        assert!((model + between - span).abs() < 1e-6, "{s}");
        assert!(
            model > 0.0 && s["agent_share"].as_f64().unwrap() < 1.0,
            "{s}"
        );
    }

    let html = Command::new(BIN)
        .arg("report")
        .arg(&records)
        .output()
        .expect("tokentap runs");
    assert!(
        html.status.success(),
        "{}",
        String::from_utf8_lossy(&html.stderr)
    );
    let dom = chromium(
        &["--window-size=1280,4000", "--dump-dom"],
        &records.join("sessions.html"),
    );
    assert!(
        dom.contains("data-report-ready=\"1\""),
        "the page's script did not run"
    );
    assert!(
        dom.contains("data-empty-plots=\"\""),
        "a plot has no data marks"
    );
    assert!(dom.contains("data-plot=\"sessions\""));
}
