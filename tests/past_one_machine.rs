//! Past one machine and over TLS: the replay over https (the proxy's own TLS listener in front
//! of the sim), a bad certificate, several endpoints with conversation affinity. Real sockets,
//! real servers.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use tokentap_dataset::Dataset;
use tokentap_proxy::Proxy;
use tokentap_replay::{ProgressMode, RunOpts, RunOutcome};
use tokentap_sim::{SimConfig, SimServer};
use tokentap_testkit::data::synth_dataset;
use tokentap_testkit::replay::{records, sim_with};

fn certs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("proxy/tests/certs")
}

fn dataset(coding: usize, workflow: usize) -> Arc<Dataset> {
    synth_dataset(coding, workflow, 0.05)
}

/// A zero-delay sim that keeps request bodies, 8-token outputs.
async fn sim() -> SimServer {
    sim_with(|_| {}).await
}

/// A proxy serving TLS (the test CA's `localhost` certificate) in front of `sim`.
async fn tls_proxy(sim: &SimServer) -> Proxy {
    let mut pc = tokentap_proxy::Config::new([sim.base_url()]);
    pc.tls_cert = Some(certs().join("server.pem"));
    pc.tls_key = Some(certs().join("server.key"));
    Proxy::start(pc).await.unwrap()
}

fn config(endpoint: &str, out: &tempfile::TempDir) -> RunOpts {
    let mut c = RunOpts::new(endpoint).unwrap();
    c.model = Some("m".into());
    c.salt = true;
    c.out = Some(out.path().to_path_buf());
    c
}

async fn run(config: RunOpts, ds: Arc<Dataset>) -> RunOutcome {
    tokentap_replay::run_with(
        config.resolve().unwrap(),
        ds,
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap()
}

/// Request bodies by session, in arrival order, as the sim received them.
fn bodies(sim: &SimServer) -> BTreeMap<String, Vec<Vec<u8>>> {
    let mut log = sim.log();
    log.sort_by_key(|r| r.seq);
    let mut out: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    for r in log {
        out.entry(r.session.unwrap())
            .or_default()
            .push(r.body.unwrap().to_vec());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_and_h2_replays_send_the_bytes_of_the_http_path_and_stamp_with_the_kernel() {
    let ds = dataset(3, 2);
    // http/1.1 straight to a sim: the reference bodies.
    let plain_sim = sim().await;
    let d1 = tempfile::tempdir().unwrap();
    let plain = run(config(&plain_sim.base_url(), &d1), ds.clone()).await;
    let want = bodies(&plain_sim);
    assert_eq!(want.len(), 5);

    // (label, TLS, --http1, --http2, expect HTTP/2)
    for (label, tls, http1, http2, h2) in [
        ("https, ALPN picks h2", true, false, false, true),
        ("https, --http1", true, true, false, false),
        ("https, --http2", true, false, true, true),
        (
            "http, --http2 (h2c prior knowledge)",
            false,
            false,
            true,
            true,
        ),
    ] {
        let s = sim().await;
        let mut pc = tokentap_proxy::Config::new([s.base_url()]);
        if tls {
            pc.tls_cert = Some(certs().join("server.pem"));
            pc.tls_key = Some(certs().join("server.key"));
        }
        pc.keep_records = true;
        let proxy = Proxy::start(pc).await.unwrap();
        let url = if tls {
            format!("https://localhost:{}", proxy.addr().port())
        } else {
            proxy.base_url()
        };
        let d = tempfile::tempdir().unwrap();
        let mut c = config(&url, &d);
        c.ca = Some(certs().join("ca.pem"));
        (c.http1, c.http2) = (http1, http2);
        let out = run(c, ds.clone()).await;
        assert_eq!(
            plain.summary.counts.total, out.summary.counts.total,
            "{label}"
        );
        assert_eq!(
            out.summary.counts.turns["ok"],
            out.summary.counts.total,
            "{label}: {}",
            records(&out)[0]
        );
        assert_eq!(
            want,
            bodies(&s),
            "{label}: request bodies are byte-identical to the http/1.1 path"
        );
        let recs = records(&out);
        for r in &recs {
            // Still stamped by the kernel (the TCP segment's arrival), under TLS and h2 too.
            assert_eq!(r["rx_clock"], "kernel", "{label}: {r}");
            assert_eq!(r["http_version"] == "2", h2, "{label}: {r}");
        }
        // The proxy saw the same protocol on its client side.
        let wire = proxy.wait_records(recs.len()).await;
        assert!(
            wire.iter()
                .all(|w| (w.http_version.as_deref() == Some("2")) == h2),
            "{label}"
        );
        let config: Value =
            serde_json::from_slice(&std::fs::read(d.path().join("config.json")).unwrap()).unwrap();
        assert_eq!(config["endpoints"][0]["https"], tls, "{label}");
        assert_eq!(config["insecure"], false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_the_client_does_not_trust_is_refused_with_a_clear_error() {
    let ds = dataset(1, 0);
    let s = sim().await;
    let proxy = tls_proxy(&s).await;
    let url = format!("https://localhost:{}", proxy.addr().port());
    // No --ca: the test CA is not among the system's roots.
    let d = tempfile::tempdir().unwrap();
    let out = run(config(&url, &d), ds.clone()).await;
    let recs = records(&out);
    assert!(!recs.is_empty());
    assert_eq!(out.summary.counts.turns["ok"], 0);
    assert!(s.log().is_empty(), "nothing reached the server");
    let e = &recs[0]["error"];
    assert_eq!(e["kind"], "tls", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("TLS handshake with https://localhost:")
            && msg.contains("certificate")
            && msg.contains("--ca FILE"),
        "{msg}"
    );

    // --insecure: accepted, and said so in the config and the terminal summary.
    let d = tempfile::tempdir().unwrap();
    let mut c = config(&url, &d);
    c.insecure = true;
    let out = run(c, ds.clone()).await;
    assert_eq!(out.summary.counts.turns["ok"], out.summary.counts.total);
    let written: Value =
        serde_json::from_slice(&std::fs::read(d.path().join("config.json")).unwrap()).unwrap();
    assert_eq!(written["insecure"], true);
    assert!(out
        .summary
        .render_text()
        .contains("NOT checked (--insecure)"));

    // A --ca that is not a PEM file is a configuration error naming the file.
    let bad = d.path().join("not-a-ca.pem");
    std::fs::write(&bad, "hello").unwrap();
    let mut c = config(&url, &d);
    c.ca = Some(bad.clone());
    let err = c.resolve().unwrap_err().to_string();
    assert!(
        err.contains("--ca") && err.contains("not-a-ca.pem"),
        "{err}"
    );
}

/// A server certificate made by `openssl req -x509` with its defaults is a CA certificate
/// (basicConstraints CA:TRUE); rustls refuses it as a server's own even when it is the very
/// file given as `--ca`. The error says that, and what to do, instead of "pass --ca FILE".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_certificate_as_the_servers_own_is_explained() {
    let ds = dataset(1, 0);
    let s = sim().await;
    let mut pc = tokentap_proxy::Config::new([s.base_url()]);
    pc.tls_cert = Some(certs().join("selfsigned-ca.pem"));
    pc.tls_key = Some(certs().join("selfsigned-ca.key"));
    let proxy = Proxy::start(pc).await.unwrap();
    let url = format!("https://localhost:{}", proxy.addr().port());
    let d = tempfile::tempdir().unwrap();
    let mut c = config(&url, &d);
    c.ca = Some(certs().join("selfsigned-ca.pem"));
    let out = run(c, ds).await;
    assert_eq!(out.summary.counts.turns["ok"], 0);
    let recs = records(&out);
    let msg = recs[0]["error"]["message"].as_str().unwrap().to_string();
    assert_eq!(recs[0]["error"]["kind"], "tls", "{msg}");
    assert!(msg.contains("CaUsedAsEndEntity"), "{msg}");
    assert!(
        msg.contains("presents a CA certificate")
            && msg.contains("basicConstraints=critical,CA:FALSE"),
        "{msg}"
    );
    assert!(!msg.contains("pass --ca FILE"), "{msg}");
    // The terminal says it first, once per kind.
    let text = out.summary.render_text();
    assert!(text.contains("NO TURN COMPLETED"), "{text}");
    assert!(
        text.contains("× tls: TLS handshake with https://localhost:"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_endpoints_keep_each_conversation_on_one() {
    let ds = dataset(8, 8);
    let sims = [sim().await, sim().await, sim().await];
    let d = tempfile::tempdir().unwrap();
    let mut c = config(&sims[0].base_url(), &d);
    for s in &sims[1..] {
        c.endpoints
            .push(tokentap_replay::config::Endpoint::parse(&s.base_url()).unwrap());
    }
    c.concurrency = 4;
    c.trajectories = Some(32); // two passes: the second pass's conversations too
    let out = run(c, ds.clone()).await;
    assert_eq!(out.summary.counts.turns["ok"], out.summary.counts.total);
    // Affinity: every session is seen by exactly one sim, with all of its turns.
    let mut owner: BTreeMap<String, usize> = BTreeMap::new();
    for (i, s) in sims.iter().enumerate() {
        for r in s.log() {
            let session = r.session.unwrap();
            if let Some(prev) = owner.insert(session.clone(), i) {
                assert_eq!(
                    prev, i,
                    "session {session} moved from endpoint {prev} to {i}"
                );
            }
        }
    }
    assert_eq!(owner.len(), 32);
    let used: BTreeSet<usize> = owner.values().copied().collect();
    assert_eq!(used.len(), 3, "trajectories spread over every endpoint");
    // The records say where each turn went, and the summary counts per endpoint.
    let recs = records(&out);
    for r in &recs {
        let session = r["conversation_id"].as_str().unwrap();
        let i = owner[session];
        assert!(
            r["upstream"]
                .as_str()
                .unwrap()
                .starts_with(&sims[i].base_url()),
            "{r}"
        );
    }
    let summary: Value =
        serde_json::from_slice(&std::fs::read(d.path().join("summary.json")).unwrap()).unwrap();
    let per = summary["endpoints"]
        .as_array()
        .expect("per-endpoint counts");
    assert_eq!(per.len(), 3);
    for (i, s) in sims.iter().enumerate() {
        let e = &per[i];
        let turns = s.log().len() as u64;
        assert_eq!(e["turns"], turns, "{e}");
        assert_eq!(e["ok"], turns, "{e}");
        let conversations = owner.values().filter(|&&o| o == i).count() as u64;
        assert_eq!(e["trajectories"], conversations, "{e}");
    }
    // The same ranking as the proxy's replicas: the replay and a proxy in front of the same
    // URLs agree on every conversation.
    let urls: Vec<String> = sims.iter().map(|s| s.base_url()).collect();
    let seeds: Vec<u64> = urls.iter().map(|u| tokentap_core::route::seed(u)).collect();
    for (session, &i) in &owner {
        assert_eq!(
            tokentap_core::route::ranking(session.as_bytes(), &seeds)[0],
            i
        );
    }
}

/// A dataset whose rows name no model (as the official one).
fn no_model_dataset() -> Arc<Dataset> {
    dataset(1, 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_model_the_one_the_endpoints_serve_is_used() {
    let ds = no_model_dataset();
    let serving = |name: &str| {
        let name = name.to_string();
        async move {
            let mut c = SimConfig::zero_delay();
            c.model = name;
            SimServer::start(c).await.unwrap()
        }
    };
    let (a, b) = (serving("qwen-test").await, serving("qwen-test").await);
    let d = tempfile::tempdir().unwrap();
    let mut c = RunOpts::new(&a.base_url()).unwrap();
    c.endpoints
        .push(tokentap_replay::config::Endpoint::parse(&b.base_url()).unwrap());
    c.out = Some(d.path().to_path_buf());
    let out = run(c, ds.clone()).await;
    assert_eq!(out.summary.counts.turns["ok"], out.summary.counts.total);
    assert_eq!(out.summary.config.model.as_deref(), Some("qwen-test"));
    assert!(out.summary.config.model_discovered);
    // The bodies name it, as if --model had been given.
    let mut log = a.log();
    log.extend(b.log());
    assert!(!log.is_empty());
    for r in records(&out) {
        assert_eq!(r["model"], "qwen-test");
    }

    // Endpoints that disagree: an error naming both models, before anything is sent.
    let other = serving("llama-test").await;
    let mut c = RunOpts::new(&a.base_url()).unwrap();
    c.endpoints
        .push(tokentap_replay::config::Endpoint::parse(&other.base_url()).unwrap());
    let err = tokentap_replay::run_with(
        c.resolve().unwrap(),
        ds.clone(),
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("pass --model")
            && err.contains("disagree")
            && err.contains("\"qwen-test\"")
            && err.contains("\"llama-test\""),
        "{err}"
    );
    assert!(other.log().iter().all(|r| r.path == "/v1/models"));

    // A dead endpoint: the error says which URL was asked and why.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let c = RunOpts::new(&format!("http://{dead}")).unwrap();
    let err = tokentap_replay::run_with(
        c.resolve().unwrap(),
        ds,
        ProgressMode::Off,
        std::future::pending(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&format!("http://{dead}/v1/models")) && err.contains("connect"),
        "{err}"
    );
}

/// Runs `ds` as `n` shards (side by side, as `n` machines would) and as one process.
async fn shards_and_one(
    sim: &SimServer,
    ds: &Arc<Dataset>,
    n: u64,
    per_shard_concurrency: usize,
) -> (Vec<tempfile::TempDir>, tempfile::TempDir) {
    let dirs: Vec<tempfile::TempDir> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut runs = tokio::task::JoinSet::new();
    for (i, d) in dirs.iter().enumerate() {
        let mut c = config(&sim.base_url(), d);
        c.concurrency = per_shard_concurrency;
        c.shard = tokentap_replay::config::Shard {
            index: i as u64,
            count: n,
        };
        let ds = ds.clone();
        runs.spawn(async move { run(c, ds).await });
    }
    while let Some(r) = runs.join_next().await {
        r.unwrap();
    }
    let one = tempfile::tempdir().unwrap();
    let mut c = config(&sim.base_url(), &one);
    c.concurrency = per_shard_concurrency * n as usize;
    run(c, ds.clone()).await;
    (dirs, one)
}

fn read_json(p: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn read_records(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("records.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn merge(
    dirs: &[&std::path::Path],
    out: &std::path::Path,
    partial: bool,
) -> Result<RunOutcome, String> {
    tokentap_replay::merge::merge(&tokentap_replay::merge::MergeOpts {
        dirs: dirs.iter().map(|d| d.to_path_buf()).collect(),
        out: out.to_path_buf(),
        partial,
    })
    .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_merged_are_the_run_of_one_process() {
    let ds = dataset(10, 11);
    let s = sim().await;
    let (dirs, one) = shards_and_one(&s, &ds, 3, 2).await;
    let out = tempfile::tempdir().unwrap();
    let paths: Vec<&std::path::Path> = dirs.iter().map(|d| d.path()).collect();
    let merged = merge(&paths, out.path(), false).unwrap();
    let m = read_json(&out.path().join("summary.json"));
    let o = read_json(&one.path().join("summary.json"));

    // The same trajectories and turns as one process.
    let key = |r: &Value| {
        (
            r["conversation_id"].as_str().unwrap().to_string(),
            r["turn_index"].as_u64().unwrap(),
            r["trajectory"].as_u64().unwrap(),
        )
    };
    let mut a: Vec<_> = read_records(out.path()).iter().map(key).collect();
    let mut b: Vec<_> = read_records(one.path()).iter().map(key).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "the union of the shards is the single-machine set");
    // Counts and token totals.
    assert_eq!(m["counts"]["turns"], o["counts"]["turns"]);
    assert_eq!(m["counts"]["total"], o["counts"]["total"]);
    assert_eq!(m["tokens"]["prompt_tokens"], o["tokens"]["prompt_tokens"]);
    let out_tokens = |recs: &[Value]| -> u64 {
        recs.iter()
            .filter_map(|r| r["output_tokens"].as_u64())
            .sum()
    };
    assert_eq!(
        out_tokens(&read_records(out.path())),
        out_tokens(&read_records(one.path()))
    );
    assert_eq!(m["run"]["trajectories_finished"], 21);
    assert_eq!(m["throughput"]["concurrency"], 6);
    assert_eq!(m["config"]["shard"]["count"], 1);
    // Accuracy over the same issued turns.
    assert_eq!(
        read_json(&out.path().join("scores.json"))["turns"],
        read_json(&one.path().join("scores.json"))["turns"]
    );
    // Percentiles recomputed exactly from the union of the raw samples (not from the shards'
    // percentiles): the merged records' in-window ok TTFTs give the merged summary's numbers.
    let mut ttft = tokentap_core::stats::Samples::default();
    let recs = read_records(out.path());
    for r in &recs {
        if r["status"] == "ok" && r["in_window"] == true {
            if let Some(t) = r["ttft_ns"].as_u64() {
                ttft.push(t as f64);
            }
        }
    }
    let p = ttft.percentiles().unwrap();
    let lat = &m["latency_ms"]["ttft"];
    assert_eq!(lat["count"].as_u64().unwrap(), p.count);
    for (k, v) in [
        ("p50", p.p50),
        ("p90", p.p90),
        ("p99", p.p99),
        ("max", p.max),
    ] {
        assert!((lat[k].as_f64().unwrap() - v / 1e6).abs() < 1e-9, "{k}");
    }
    // The union's window: it closes at a completion after the last shard's last claim.
    let info = &m["merge"];
    assert_eq!(info["shards"], 3);
    let exhausted = info["budget_exhausted_wall_ns"].as_u64().unwrap();
    let closed = info["window_closed_wall_ns"].as_u64().unwrap();
    assert!(closed >= exhausted);
    // Every in-window record was issued before the close, every other one after.
    for r in &recs {
        let start = r["start_mono_ns"].as_u64().unwrap();
        if r["in_window"] == false {
            assert!(start >= closed || r["status"] == "aborted", "{r}");
        }
    }
    // The sim sends Date: every shard's clock is bounded, and the hosts (one host here) agree.
    assert!(info["skew_bound_ms"].as_f64().unwrap() <= 2000.0);
    for c in info["clocks"].as_array().unwrap() {
        let (lo, hi) = (
            c["offset_lo_ms"].as_f64().unwrap(),
            c["offset_hi_ms"].as_f64().unwrap(),
        );
        assert!(
            lo <= 0.0 && 0.0 <= hi + 1.0,
            "one host: offset 0 within [{lo}, {hi}]"
        );
    }
    assert!(out.path().join("report.html").is_file());
    assert!(out.path().join("result_summary.json").is_file());
    assert_eq!(
        merged.summary.counts.total,
        o["counts"]["total"].as_u64().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_merged_alone_is_itself() {
    let ds = dataset(4, 5);
    let s = sim().await;
    let d = tempfile::tempdir().unwrap();
    let mut c = config(&s.base_url(), &d);
    c.concurrency = 3;
    run(c, ds).await;
    let out = tempfile::tempdir().unwrap();
    merge(&[d.path()], out.path(), false).unwrap();
    let (a, b) = (
        read_json(&d.path().join("summary.json")),
        read_json(&out.path().join("summary.json")),
    );
    for k in [
        "mlperf",
        "counts",
        "latency_ms",
        "throughput",
        "tokens",
        "accuracy",
        "validity",
    ] {
        assert_eq!(a[k], b[k], "{k}");
    }
    assert_eq!(a["window"]["duration_s"], b["window"]["duration_s"]);
    assert_eq!(
        std::fs::read_to_string(d.path().join("result_summary.json")).unwrap(),
        std::fs::read_to_string(out.path().join("result_summary.json")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("scores.json")).unwrap(),
        std::fs::read_to_string(out.path().join("scores.json")).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_refuses_shards_of_different_runs_and_names_missing_ones() {
    let ds = dataset(3, 3);
    let s = sim().await;
    let (dirs, _one) = shards_and_one(&s, &ds, 3, 1).await;
    let p: Vec<&std::path::Path> = dirs.iter().map(|d| d.path()).collect();
    let out = tempfile::tempdir().unwrap();

    // A missing shard is named; --partial joins the rest and the result is never valid.
    let e = merge(&[p[0], p[2]], out.path(), false).unwrap_err();
    assert!(e.contains("missing shard(s): 1/3"), "{e}");
    let partial = merge(&[p[0], p[2]], out.path(), true).unwrap();
    assert_eq!(
        partial.summary.validity.verdict,
        tokentap_mlperf::Verdict::Invalid
    );
    assert!(partial.summary.validity.reasons[0].contains("partial merge: shard(s) 1 of 3 missing"));
    // The same shard twice.
    let e = merge(&[p[0], p[1], p[1]], out.path(), false).unwrap_err();
    assert!(e.contains("given twice"), "{e}");

    // A shard of a run with other settings: the differing key is named.
    let other = tempfile::tempdir().unwrap();
    let mut c = config(&s.base_url(), &other);
    c.shard = tokentap_replay::config::Shard { index: 1, count: 3 };
    c.delay_scale = 0.5;
    run(c, ds.clone()).await;
    let e = merge(&[p[0], other.path(), p[2]], out.path(), false).unwrap_err();
    assert!(
        e.contains("configs differ in: delay_scale (1.0 vs 0.5)"),
        "{e}"
    );

    // Another shard count.
    let four = tempfile::tempdir().unwrap();
    let mut c = config(&s.base_url(), &four);
    c.shard = tokentap_replay::config::Shard { index: 1, count: 4 };
    run(c, ds.clone()).await;
    let e = merge(&[p[0], four.path(), p[2]], out.path(), false).unwrap_err();
    assert!(
        e.contains("shard 1/4") && e.contains("different runs"),
        "{e}"
    );

    // Another dataset (same shape, other bytes).
    let ds2 = dataset(3, 3);
    let mut ds2_owned = (*ds2).clone();
    ds2_owned.conversations.truncate(5);
    let ds2 = Arc::new(ds2_owned);
    let d2 = tempfile::tempdir().unwrap();
    let mut c = config(&s.base_url(), &d2);
    c.shard = tokentap_replay::config::Shard { index: 1, count: 3 };
    let mut c = c.resolve().unwrap();
    c.dataset = Some(tokentap_replay::config::DatasetInfo {
        path: "other.jsonl".into(),
        hash: Some("blake2b-256:00".into()),
        conversations: 5,
        client_turns: 0,
    });
    tokentap_replay::run_with(c, ds2, ProgressMode::Off, std::future::pending())
        .await
        .unwrap();
    let e = merge(&[p[0], d2.path(), p[2]], out.path(), false).unwrap_err();
    assert!(e.contains("another dataset"), "{e}");

    // A shard whose records.jsonl is another run's — the same shard run again, so the same
    // number of records: refused, naming the lines that are not of this shard's run.
    let again = tempfile::tempdir().unwrap();
    let mut c = config(&s.base_url(), &again);
    c.shard = tokentap_replay::config::Shard { index: 1, count: 3 };
    run(c, ds.clone()).await;
    let swapped = tempfile::tempdir().unwrap();
    for f in ["config.json", "summary.json", "scores.json"] {
        std::fs::copy(p[1].join(f), swapped.path().join(f)).unwrap();
    }
    std::fs::copy(
        again.path().join("records.jsonl"),
        swapped.path().join("records.jsonl"),
    )
    .unwrap();
    assert_eq!(
        read_records(swapped.path()).len(),
        read_records(p[1]).len(),
        "the count matches"
    );
    let e = merge(&[p[0], swapped.path(), p[2]], out.path(), false).unwrap_err();
    assert!(
        e.contains("are not of this shard's run")
            && e.contains("line 1 (it starts")
            && e.contains("after the run's end"),
        "{e}"
    );

    // Not a run directory at all.
    let empty = tempfile::tempdir().unwrap();
    let e = merge(&[empty.path()], out.path(), false).unwrap_err();
    assert!(e.contains("config.json"), "{e}");
}

/// A proxy beside a sim, writing its records to `dir`.
async fn sidecar(sim: &SimServer, dir: &std::path::Path) -> Proxy {
    let mut pc = tokentap_proxy::Config::new([sim.base_url()]);
    pc.records_dir = Some(dir.to_path_buf());
    Proxy::start(pc).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_report_treat_several_proxies_as_one_wire() {
    let ds = dataset(6, 6);
    let (sa, sb) = (sim().await, sim().await);
    let (wa, wb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (sidecar(&sa, wa.path()).await, sidecar(&sb, wb.path()).await);
    // The replay spreads the conversations over the two proxies (each stays on one).
    let run_dir = tempfile::tempdir().unwrap();
    let mut c = config(&pa.base_url(), &run_dir);
    c.endpoints
        .push(tokentap_replay::config::Endpoint::parse(&pb.base_url()).unwrap());
    c.concurrency = 3;
    // Short inter-turn delays: a session's turns far enough apart that the join by session and
    // time order is unambiguous on a loaded machine (back-to-back turns of a zero-delay sim are
    // closer together than the client–proxy lag can be).
    c.delays = true;
    c.delay_scale = 0.1;
    let out = run(c, ds).await;
    let total = out.summary.counts.total as usize;
    // Stopped: every record is on disk.
    for p in [pa, pb] {
        let rep = p.shutdown(std::time::Duration::from_secs(5)).await;
        assert_eq!(rep.seen, rep.written);
    }

    let client = run_dir.path().join("records.jsonl");
    let both = vec![wa.path().to_path_buf(), wb.path().to_path_buf()];
    let mut opts = tokentap_compare::Opts::new(
        tokentap_compare::Format::Tokentap,
        client.clone(),
        both.clone(),
    );
    opts.clock = Some(tokentap_compare::client::Clock::Wall);
    let r = tokentap_compare::compare(&opts).unwrap();
    assert_eq!(
        r.counts.joined, total,
        "every client turn found on one of the proxies"
    );
    // The server's response id, recorded by the replay and by each proxy, joins every pair.
    assert_eq!(r.counts.by_response_id, total, "{:?}", r.counts);
    assert_eq!((r.counts.client_only, r.counts.wire_only), (0, 0));
    assert_eq!(r.wire_sources.len(), 2);
    for (src, s) in r.wire_sources.iter().zip([&sa, &sb]) {
        assert!(src.turns > 0);
        assert_eq!(src.joined, src.turns);
        // The replica each record came from: the sim behind that proxy.
        let replicas: Vec<&String> = src.replicas.keys().collect();
        assert_eq!(replicas.len(), 1);
        assert!(replicas[0].starts_with(&s.base_url()), "{replicas:?}");
    }
    assert!(r.pairs.iter().all(|p| p.replica.is_some()));

    // A session whose turns were seen by two proxies (a router that moved it): the records of
    // one proxy split by turn into two directories join exactly as the whole — by session and
    // order, their response ids taken out, the same pairs the response ids gave.
    let (h1, h2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut halves = [String::new(), String::new()];
    for dir in &both {
        for f in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            for line in text.lines() {
                let mut v: Value = serde_json::from_str(line).unwrap();
                assert!(v["response_id"].is_string(), "{line}");
                v.as_object_mut().unwrap().remove("response_id");
                let i = (v["turn_index"].as_u64().unwrap() % 2) as usize;
                halves[i] += &v.to_string();
                halves[i].push('\n');
            }
        }
    }
    // The odd turns first on disk: loading order is not time order.
    std::fs::write(h1.path().join("records-odd.jsonl"), &halves[1]).unwrap();
    std::fs::write(h2.path().join("records-even.jsonl"), &halves[0]).unwrap();
    let mut split = tokentap_compare::Opts::new(
        tokentap_compare::Format::Tokentap,
        client.clone(),
        vec![h1.path().to_path_buf(), h2.path().to_path_buf()],
    );
    split.clock = Some(tokentap_compare::client::Clock::Wall);
    let s = tokentap_compare::compare(&split).unwrap();
    assert_eq!(s.counts.joined, total);
    assert_eq!(s.counts.by_session_order, total, "{:?}", s.counts);
    let key = |p: &tokentap_compare::report::PairOut| {
        (
            p.session.clone(),
            p.turn,
            p.wire.ttft_ms.map(|t| (t * 1e6) as u64),
        )
    };
    let mut a: Vec<_> = r.pairs.iter().map(key).collect();
    let mut b: Vec<_> = s.pairs.iter().map(key).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "the same turns are paired");

    // `tokentap report RUN --wire A --wire B`: the comparison is in the run's report.
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_tokentap"))
        .arg("report")
        .arg(run_dir.path())
        .arg("--wire")
        .arg(wa.path())
        .arg("--wire")
        .arg(wb.path())
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let cmp = read_json(&run_dir.path().join("compare.json"));
    assert_eq!(cmp["counts"]["joined"].as_u64().unwrap() as usize, total);
    let html = std::fs::read_to_string(run_dir.path().join("report.html")).unwrap();
    assert!(html.contains("id=\"wire-sources\""));
    assert!(html.contains(&sa.base_url()) && html.contains(&sb.base_url()));
}
