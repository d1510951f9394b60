//! Live observability verified on a real Prometheus. sim ← proxy ← replay run
//! in-process on 127.0.0.1; the Prometheus server of the Debian `prometheus` package
//! (scripts/install-test-deps) scrapes the proxy's admin `/metrics` (source="wire") and the
//! replay's `--metrics` (source="client") and the sims' own `/metrics` (job `engine`) every
//! second. The proxy has three upstream sims: one plays vLLM (`vllm:*` series, served on the API
//! port as vLLM does), one SGLang (`engine_metrics: sglang`), one TensorRT-LLM (`trtllm_*`,
//! scraped at `/prometheus/metrics` as `trtllm-serve` serves them); they are our simulated
//! engines, so their engine view is legitimate test data. Then EVERY PromQL expression of EVERY
//! dashboard in `dashboards/grafana/` is evaluated through Prometheus' HTTP API and must return
//! data — engine panels included, no exception.
//! The dashboards' JSON structure and metric names are checked against what the code exports.
//!
//! Waits are on real conditions (a port accepting, a target `up`, a query returning data), each
//! polled under a deadline; nothing sleeps as synchronisation.

use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokentap_core::metrics::{names_in_expr, ALL_NAMES, ENGINE_NAMES};
use tokentap_dataset::synth::{synth, SynthConfig};
use tokentap_dataset::Dataset;
use tokentap_proxy::Proxy;
use tokentap_replay::{ProgressMode, RunOpts};
use tokentap_sim::{EngineFlavor, SimConfig, SimServer};
use tokio::time::Instant;

const RATE: &str = "5s";

fn dashboards() -> Vec<(PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards/grafana");
    let mut v: Vec<(PathBuf, Value)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("readable dashboard");
            let j: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", p.display()));
            (p, j)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(v.len() >= 5, "five dashboards expected, found {}", v.len());
    v
}

/// Every (dashboard, panel title, expr) with template variables substituted.
fn exprs(boards: &[(PathBuf, Value)]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (p, b) in boards {
        for panel in b["panels"].as_array().expect("panels") {
            for t in panel["targets"].as_array().expect("targets") {
                let e = t["expr"].as_str().expect("expr").to_owned();
                let e = e
                    .replace("$__rate_interval", RATE)
                    .replace("$__interval", RATE)
                    .replace("$model", ".*");
                out.push((
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    panel["title"].as_str().unwrap_or("?").to_owned(),
                    e,
                ));
            }
        }
    }
    out
}

/// The committed JSON is what `dashboards/generate.py` writes: a panel added to the JSON by hand
/// would be lost at the next regeneration (it happened once).
#[test]
fn the_committed_dashboards_are_the_generators_output() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("python3")
        .arg(root.join("dashboards/generate.py"))
        .arg(dir.path())
        .status()
        .expect("python3 runs (install it: it writes the dashboards)");
    assert!(status.success());
    let committed = dashboards();
    assert!(!committed.is_empty());
    for (path, board) in committed {
        let name = path.file_name().expect("a file name");
        let text = std::fs::read_to_string(dir.path().join(name))
            .unwrap_or_else(|e| panic!("generate.py wrote no {}: {e}", name.to_string_lossy()));
        let generated: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            generated,
            board,
            "{}: regenerate with python3 dashboards/generate.py",
            path.display()
        );
    }
}

#[test]
fn dashboards_are_well_formed_and_use_only_exported_names() {
    let boards = dashboards();
    let mut uids = BTreeSet::new();
    for (p, b) in &boards {
        let name = p.display();
        let uid = b["uid"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no uid"));
        assert!(uids.insert(uid.to_owned()), "{name}: duplicate uid {uid}");
        assert!(
            b["schemaVersion"].as_u64().unwrap_or(0) >= 39,
            "{name}: schemaVersion"
        );
        let vars = b["templating"]["list"].as_array().expect("templating");
        assert!(
            vars.iter().any(|v| v["name"] == "datasource"
                && v["type"] == "datasource"
                && v["query"] == "prometheus"),
            "{name}: no templated Prometheus datasource"
        );
        let panels = b["panels"].as_array().expect("panels");
        assert!(!panels.is_empty(), "{name}: no panels");
        let mut ids = BTreeSet::new();
        for panel in panels {
            let title = panel["title"].as_str().unwrap_or("?");
            assert!(
                ids.insert(panel["id"].as_u64().expect("panel id")),
                "{name}/{title}: duplicate id"
            );
            assert_eq!(
                panel["datasource"]["uid"], "${datasource}",
                "{name}/{title}"
            );
            assert_eq!(panel["datasource"]["type"], "prometheus", "{name}/{title}");
            let targets = panel["targets"].as_array().expect("targets");
            assert!(!targets.is_empty(), "{name}/{title}: no targets");
            for t in targets {
                assert_eq!(t["datasource"]["uid"], "${datasource}", "{name}/{title}");
                assert!(t["refId"].as_str().is_some(), "{name}/{title}: refId");
                let e = t["expr"].as_str().unwrap_or("");
                assert!(!e.trim().is_empty(), "{name}/{title}: empty expr");
                let used = names_in_expr(e);
                assert!(!used.is_empty(), "{name}/{title}: no metric in {e}");
                for n in used {
                    assert!(
                        ALL_NAMES.contains(&n.as_str())
                            || ENGINE_NAMES.contains(&n.as_str())
                            || proxy_only().contains(&n.as_str()),
                        "{name}/{title}: {n} is not a metric tokentap or an engine exports"
                    );
                    // Engine names must be ones our simulated engines export, so the live test
                    // can feed them.
                    assert!(
                        !n.starts_with("vllm:")
                            || tokentap_sim::metrics::VLLM_NAMES.contains(&n.as_str()),
                        "{name}/{title}: {n} is not exported by the sim as vLLM"
                    );
                    assert!(
                        !n.starts_with("sglang:")
                            || tokentap_sim::metrics::SGLANG_NAMES.contains(&n.as_str()),
                        "{name}/{title}: {n} is not exported by the sim as SGLang"
                    );
                    assert!(
                        !n.starts_with("trtllm_")
                            || tokentap_sim::metrics::TRTLLM_NAMES.contains(&n.as_str()),
                        "{name}/{title}: {n} is not exported by the sim as TensorRT-LLM"
                    );
                }
            }
        }
    }
}

fn proxy_only() -> [&'static str; 8] {
    use tokentap_proxy::metrics as m;
    [
        m::REQUESTS_SEEN_TOTAL,
        m::RECORDS_WRITTEN_TOTAL,
        m::RECORDS_DROPPED_TOTAL,
        m::RECORDS_FAILED_TOTAL,
        m::SESSION_IDS_UNUSUAL_TOTAL,
        m::CONNECTIONS_CLOSED_TOTAL,
        m::MALFORMED_EVENTS_TOTAL,
        m::USAGE_INJECTED_TOTAL,
    ]
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind :0");
    l.local_addr().expect("local addr").port()
}

fn enc(s: &str) -> String {
    let mut o = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

/// A blocking HTTP/1.0 GET; the body.
fn get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_nodelay(true).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    r.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

fn query(prom: SocketAddr, e: &str) -> Value {
    get(prom, &format!("/api/v1/query?query={}", enc(e)))
        .and_then(|b| serde_json::from_str(&b).ok())
        .unwrap_or(Value::Null)
}

/// Polls `f` until it returns `Some` or the deadline passes.
fn until<T>(what: &str, deadline: Instant, mut f: impl FnMut() -> Option<T>) -> T {
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200)); // poll interval, not synchronisation
    }
}

struct Prom(Child);
impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn every_dashboard_query_returns_data_from_a_real_prometheus() {
    let deadline = Instant::now() + Duration::from_secs(75);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let replay_port = free_port();
    let replay_addr: SocketAddr = ([127, 0, 0, 1], replay_port).into();
    let (proxy_admin, sim_addr, sglang_addr, trtllm_addr, run) = rt.block_on(async {
        let sim = SimServer::start(SimConfig::zero_delay())
            .await
            .expect("sim starts");
        let mut sg = SimConfig::zero_delay();
        sg.engine_metrics = EngineFlavor::Sglang;
        let sglang = SimServer::start(sg).await.expect("sglang sim starts");
        let mut tr = SimConfig::zero_delay();
        tr.engine_metrics = EngineFlavor::Trtllm;
        let trtllm = SimServer::start(tr).await.expect("trtllm sim starts");
        let (sim_addr, sglang_addr, trtllm_addr) = (sim.addr(), sglang.addr(), trtllm.addr());
        // Sessions are spread over the upstreams, so every engine sees traffic.
        let proxy = Proxy::start(tokentap_proxy::Config::new([
            sim.base_url(),
            sglang.base_url(),
            trtllm.base_url(),
        ]))
        .await
        .expect("proxy starts");
        let mut buf = Vec::new();
        synth(
            &SynthConfig {
                coding: 3,
                workflow: 6,
                scale: 0.1,
                ..SynthConfig::default()
            },
            &mut buf,
        )
        .expect("synth");
        let ds = Dataset::parse("synth.jsonl", std::str::from_utf8(&buf).expect("utf-8"))
            .expect("valid dataset");
        let mut rc = RunOpts::new(&proxy.base_url()).expect("endpoint");
        rc.model = Some("tokentap-sim".into());
        rc.concurrency = 3;
        rc.include_usage = true;
        rc.salt = true;
        rc.delays = true;
        rc.delay_scale = 0.02;
        rc.trajectories = Some(100_000); // runs until the test stops it
        rc.metrics = Some(replay_addr);
        let admin = proxy.admin_addr();
        // An agent of each other API beside the replay: the Responses and Messages APIs'
        // turns show on the dashboards like any other (the by-API panel is checked below).
        let base = proxy.base_url();
        let agent = tokio::spawn(async move {
            let c = tokentap_testkit::proxy::client();
            for i in 0u64.. {
                for (path, body) in [
                    ("/v1/responses", serde_json::json!({"model": "tokentap-sim", "input": "hi", "max_output_tokens": 8, "stream": true})),
                    ("/v1/messages", serde_json::json!({"model": "tokentap-sim", "max_tokens": 8, "stream": i % 2 == 0, "messages": [{"role": "user", "content": "hi"}]})),
                ] {
                    let req = tokentap_testkit::proxy::post(
                        &format!("{base}{path}"),
                        bytes::Bytes::from(body.to_string()),
                        Some(&format!("agent-{}", i % 4)),
                    );
                    let _ = tokentap_testkit::proxy::send(&c, req).await;
                }
                // Pacing, not synchronisation: a few agent turns per scrape.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let run = tokio::spawn(async move {
            let out = tokentap_replay::run_with(
rc.resolve().unwrap(), Arc::new(ds), ProgressMode::Off, async {
                let _ = stop_rx.await;
            })
            .await;
            agent.abort();
            drop(proxy);
            sim.shutdown().await;
            sglang.shutdown().await;
            trtllm.shutdown().await;
            out
        });
        (admin, sim_addr, sglang_addr, trtllm_addr, run)
    });
    until("the replay's --metrics listener", deadline, || {
        get(replay_addr, "/metrics").filter(|b| b.contains("tokentap_in_window"))
    });

    let prom_bin = which("prometheus").unwrap_or_else(|| {
        panic!("the `prometheus` binary is missing: run scripts/install-test-deps")
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: wire\n    static_configs:\n      - targets: ['{proxy_admin}']\n  - job_name: client\n    static_configs:\n      - targets: ['{replay_addr}']\n  - job_name: engine\n    static_configs:\n      - targets: ['{sim_addr}', '{sglang_addr}']\n  - job_name: engine_trtllm\n    metrics_path: /prometheus/metrics\n    static_configs:\n      - targets: ['{trtllm_addr}']\n"
        ),
    )
    .expect("write config");
    let prom_addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let _prom = Prom(
        Command::new(prom_bin)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus starts"),
    );
    until("all five targets up", deadline, || {
        let t: Value = serde_json::from_str(&get(prom_addr, "/api/v1/targets")?).ok()?;
        let active = t["data"]["activeTargets"].as_array()?;
        (active.len() == 5 && active.iter().all(|a| a["health"] == "up")).then_some(())
    });

    let boards = dashboards();
    let all = exprs(&boards);
    let mut pending: Vec<&(String, String, String)> = all.iter().collect();
    // Data-bearing queries: retried until every one returns a non-empty result (rates need two
    // scrapes with traffic in between).
    loop {
        pending.retain(|(board, title, e)| {
            let r = query(prom_addr, e);
            assert_ne!(
                r["status"], "error",
                "{board} / {title}: Prometheus rejected {e}: {r}"
            );
            let has = r["data"]["result"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
            !has
        });
        if pending.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "queries without data: {:#?}",
            pending
        );
        std::thread::sleep(Duration::from_millis(500)); // poll interval
    }
    // The by-API panel has a series for each API the traffic used.
    let by_api = all
        .iter()
        .find(|(_, t, _)| t == "Turns/s by API (wire)")
        .expect("the by-API panel");
    let routes: Vec<String> = query(prom_addr, &by_api.2)["data"]["result"]
        .as_array()
        .expect("a result")
        .iter()
        .filter_map(|r| r["metric"]["route"].as_str().map(str::to_string))
        .collect();
    for r in ["/v1/chat/completions", "/v1/responses", "/v1/messages"] {
        assert!(routes.iter().any(|x| x == r), "{r} missing from {routes:?}");
    }
    let engine_with_data = |p: &str| all.iter().filter(|(_, _, e)| e.contains(p)).count();
    assert!(
        engine_with_data("vllm:") >= 3
            && engine_with_data("sglang:") >= 2
            && engine_with_data("trtllm_") >= 3,
        "engine panels were checked with data"
    );

    // Every tokentap name a dashboard uses is really exported by a running process.
    let wire = get(proxy_admin, "/metrics").expect("proxy /metrics");
    let client = get(replay_addr, "/metrics").expect("replay /metrics");
    let engine = get(sim_addr, "/metrics").expect("sim /metrics");
    let sglang = get(sglang_addr, "/metrics").expect("sglang sim /metrics");
    let trtllm = get(trtllm_addr, "/prometheus/metrics").expect("trtllm sim /prometheus/metrics");
    for (_, _, e) in &all {
        for n in names_in_expr(e) {
            // Every one, label vectors included: upstream errors are exported per upstream and
            // kind from the start, streams without usage from a model's first turn on.
            if n.starts_with("tokentap_") {
                assert!(
                    wire.contains(&format!("{n}{{"))
                        || wire.contains(&format!("{n} "))
                        || client.contains(&n),
                    "{n} is used by a dashboard but exported by neither side"
                );
            }
            if n.starts_with("vllm:") {
                assert!(
                    tokentap_sim::metrics::VLLM_NAMES.contains(&n.as_str())
                        && engine.contains(&format!("# TYPE {n} ")),
                    "{n} is used by a dashboard but the sim (our vLLM) does not export it"
                );
            }
            if n.starts_with("sglang:") {
                assert!(
                    tokentap_sim::metrics::SGLANG_NAMES.contains(&n.as_str())
                        && sglang.contains(&format!("# TYPE {n} ")),
                    "{n} is used by a dashboard but the sim (our SGLang) does not export it"
                );
            }
            if n.starts_with("trtllm_") {
                assert!(
                    tokentap_sim::metrics::TRTLLM_NAMES.contains(&n.as_str())
                        && trtllm.contains(&format!("# TYPE {n} ")),
                    "{n} is used by a dashboard but the sim (our TensorRT-LLM) does not export it"
                );
            }
        }
    }
    assert!(client.contains("source=\"client\"") && wire.contains("source=\"wire\""));
    // The engine panels filter on vLLM's label name.
    assert!(engine.contains("model_name=\"tokentap-sim\""));
    assert!(!wire.contains("sim_0000"), "no session id as a label");

    let _ = stop_tx.send(());
    let out = rt.block_on(run).expect("replay task").expect("replay ran");
    assert!(out.interrupted);
}

fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(bin))
            .find(|c| c.is_file())
    })
}

#[test]
fn replay_metrics_flag_takes_a_port_or_an_address() {
    let cfg = |m: &str| {
        let o = tokentap_replay::Opts::try_parse_from_args([
            "--endpoint",
            "http://127.0.0.1:1",
            "--dataset",
            "d.jsonl",
            "--metrics",
            m,
        ])
        .expect("options parse");
        o.resolve().expect("config").metrics
    };
    assert_eq!(cfg("9465"), Some(([127, 0, 0, 1], 9465).into()));
    assert_eq!(cfg("0.0.0.0:9"), Some(([0, 0, 0, 0], 9).into()));
}
