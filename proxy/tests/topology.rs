//! Topologies: several replicas (session affinity, least-loaded without a session,
//! re-balancing when one is down), the admin endpoints' per-session view, the SIGTERM drain
//! (streams finish within the grace period; past it they are cut and recorded `cancelled`), and
//! records on disk.

use bytes::Bytes;
use clap::Parser;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokentap_core::record::{ErrorSource, Status, TurnRecord};
use tokentap_sim::SimServer;
use tokentap_testkit::proxy::*;

fn url(p: &tokentap_proxy::Proxy) -> String {
    format!("{}/v1/chat/completions", p.base_url())
}

/// Turn `t` of a conversation: the whole history so far, growing every turn.
fn turn_body(t: usize) -> Bytes {
    let mut msgs = vec![json!({"role":"system","content":"You are a careful agent. ".repeat(20)})];
    for k in 0..=t {
        msgs.push(json!({"role":"user","content": format!("step {k}: run the tests and report. ").repeat(10)}));
        if k < t {
            msgs.push(json!({"role":"assistant","content": format!("done step {k}. ").repeat(10)}));
        }
    }
    let v = json!({"model":"m","messages":msgs,"max_completion_tokens":4,"stream":true,
                   "stream_options":{"include_usage":true}});
    Bytes::from(serde_json::to_vec(&v).unwrap())
}

fn owner(sims: &[SimServer], session: &str) -> BTreeSet<usize> {
    sims.iter()
        .enumerate()
        .filter(|(_, s)| {
            s.log()
                .iter()
                .any(|l| l.session.as_deref() == Some(session))
        })
        .map(|(i, _)| i)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_stick_to_one_of_three_replicas_and_move_only_when_it_is_down() {
    let mut sims = Vec::new();
    for _ in 0..3 {
        sims.push(sim(sim_cfg()).await);
    }
    let urls: Vec<String> = sims.iter().map(|s| s.base_url()).collect();
    let p = proxy(proxy_cfg(&urls)).await;
    let c = client();
    const SESSIONS: usize = 30;
    let ids: Vec<String> = (0..SESSIONS).map(|i| format!("traj-{i}")).collect();
    // Three turns per session, sessions concurrently, turns of a session in order.
    let mut tasks = Vec::new();
    for id in ids.clone() {
        let (c, u) = (c.clone(), url(&p));
        tasks.push(tokio::spawn(async move {
            for t in 0..3 {
                let g = send(&c, post(&u, turn_body(t), Some(&id))).await;
                assert_eq!(g.status, 200);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut placed = BTreeMap::new();
    for id in &ids {
        let o = owner(&sims, id);
        assert_eq!(o.len(), 1, "{id} was served by {o:?}");
        placed.insert(id.clone(), *o.iter().next().unwrap());
    }
    let used: BTreeSet<usize> = placed.values().copied().collect();
    assert_eq!(used.len(), 3, "sessions spread over all replicas");

    // Per-session view: three turns, context growing, cache reused turn over turn.
    let (st, text) = admin_get(&p, "/sessions/traj-0").await;
    assert_eq!(st, 200);
    let d: Value = serde_json::from_str(&text).unwrap();
    let turns = d["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    let prompt: Vec<u64> = turns
        .iter()
        .map(|t| t["prompt_tokens"].as_u64().unwrap())
        .collect();
    assert!(prompt[0] < prompt[1] && prompt[1] < prompt[2], "{prompt:?}");
    assert!(turns[2]["cached_tokens"].as_u64().unwrap() > 0);
    assert!(turns
        .iter()
        .all(|t| t["ttft_ns"].as_u64().is_some() && t["e2e_ns"].as_u64().is_some()));
    let (_, list) = admin_get(&p, "/sessions").await;
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list.as_array().unwrap().len(), SESSIONS);
    assert!(list.as_array().unwrap().iter().all(|s| s["turns"] == 3));
    let (_, metrics) = admin_get(&p, "/metrics").await;
    assert!(!metrics.contains("traj-"), "no session id as a label");
    assert!(metrics.contains("tokentap_requests_total{"));
    assert_eq!(admin_get(&p, "/health").await.0, 200);
    assert_eq!(admin_get(&p, "/sessions/nope").await.0, 404);

    // Replica 1 goes away: its sessions move, the others stay where they were.
    let down = 1;
    let dead = sims.remove(down);
    dead.shutdown().await;
    let alive = |i: usize| if i < down { i } else { i - 1 };
    // Every record of the first three turns is in before the next turns go out (records reach
    // the writer within a tick, not at once).
    let before = within(p.wait_records(SESSIONS * 3)).await.len();
    assert_eq!(before, SESSIONS * 3);
    for id in &ids {
        let g = send(&c, post(&url(&p), turn_body(3), Some(id))).await;
        assert_eq!(g.status, 200, "{id}");
    }
    let recs = within(p.wait_records(before as usize + SESSIONS)).await;
    let mut moved = 0;
    for id in &ids {
        let last: &TurnRecord = recs
            .iter()
            .rev()
            .find(|r| r.conversation_id.as_deref() == Some(id))
            .unwrap();
        assert_eq!(last.turn_index, 3);
        assert_eq!(last.status, Status::Ok);
        if placed[id] == down {
            moved += 1;
            assert_ne!(last.upstream.as_deref(), Some(urls[down].as_str()));
        } else {
            let now = sims
                .iter()
                .position(|s| {
                    s.log()
                        .iter()
                        .filter(|l| l.session.as_deref() == Some(id))
                        .count()
                        == 4
                })
                .expect("still on its replica");
            assert_eq!(now, alive(placed[id]), "{id} must not move");
        }
    }
    assert!(moved > 0);
    let m = p.metrics_text();
    let line = m
        .lines()
        .find(|l| {
            l.starts_with("tokentap_upstream_errors_total")
                && l.contains("kind=\"connect\"")
                && l.contains(&urls[down])
        })
        .expect("refusals counted");
    let n: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(n >= moved as f64, "{line}");
}

#[tokio::test]
async fn requests_without_a_session_go_to_the_least_loaded_replica() {
    let mut cfg = sim_cfg();
    cfg.timing.decode_ms = 20.0;
    let mut sims = Vec::new();
    for _ in 0..3 {
        sims.push(sim(cfg.clone()).await);
    }
    let urls: Vec<String> = sims.iter().map(|s| s.base_url()).collect();
    let p = proxy(proxy_cfg(&urls)).await;
    let c = client();
    let mut bodies = Vec::new();
    for _ in 0..3 {
        // Each response head arrives while the earlier streams are still in flight.
        let resp = c
            .request(post(&url(&p), chat(true, 20, json!({})), None))
            .await
            .unwrap();
        bodies.push(resp.into_body());
    }
    for s in &sims {
        assert_eq!(s.log().len(), 1, "one stream per replica");
    }
    for mut b in bodies {
        while let Some(Ok(_)) = b.frame().await {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drain_lets_streams_in_flight_finish() {
    let mut cfg = sim_cfg();
    cfg.timing.decode_ms = 5.0;
    let s = sim(cfg).await;
    let p = proxy(proxy_cfg(&[s.base_url()])).await;
    let c = client();
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (c, u, tx) = (c.clone(), url(&p), tx.clone());
        tasks.push(tokio::spawn(async move {
            let resp = c
                .request(post(&u, chat(true, 40, json!({})), Some(&format!("d{i}"))))
                .await
                .unwrap();
            let mut body = resp.into_body();
            let mut text = Vec::new();
            let mut first = true;
            while let Some(f) = body.frame().await {
                let f = f.expect("no stream is cut while draining");
                if let Ok(d) = f.into_data() {
                    text.extend_from_slice(&d);
                }
                if first {
                    first = false;
                    tx.send(()).await.unwrap();
                }
            }
            String::from_utf8(text).unwrap()
        }));
    }
    for _ in 0..6 {
        rx.recv().await.unwrap();
    }
    // Every stream is in flight: stop now.
    let report = within(p.shutdown(Duration::from_secs(20))).await;
    for t in tasks {
        assert!(t.await.unwrap().ends_with("data: [DONE]\n\n"));
    }
    assert!(report.drained);
    assert_eq!((report.seen, report.written), (6, 6));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_grace_period_streams_are_cut_and_recorded_cancelled() {
    cut_after_grace(client()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_grace_period_h2_streams_are_cut_too() {
    // h2 streams run in tasks of their own; the cut must reach them as well.
    cut_after_grace(client_h2()).await;
}

async fn cut_after_grace(c: TestClient) {
    let mut cfg = sim_cfg();
    cfg.timing.decode_ms = 50.0;
    let s = sim(cfg).await;
    let mut pc = proxy_cfg(&[s.base_url()]);
    let dir = tempfile::tempdir().unwrap();
    pc.records_dir = Some(dir.path().to_path_buf());
    let p = proxy(pc).await;
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (c, u, tx) = (c.clone(), url(&p), tx.clone());
        tasks.push(tokio::spawn(async move {
            let resp = c
                .request(post(
                    &u,
                    chat(true, 200, json!({})),
                    Some(&format!("cut{i}")),
                ))
                .await
                .unwrap();
            let mut body = resp.into_body();
            let mut first = true;
            loop {
                match body.frame().await {
                    Some(Ok(_)) => {
                        if first {
                            first = false;
                            tx.send(()).await.unwrap();
                        }
                    }
                    Some(Err(_)) => return true,
                    None => return false,
                }
            }
        }));
    }
    for _ in 0..4 {
        rx.recv().await.unwrap();
    }
    let t0 = tokio::time::Instant::now();
    let report = within(p.shutdown(Duration::from_millis(100))).await;
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "200 tokens × 50 ms were not awaited"
    );
    assert!(!report.drained);
    assert_eq!((report.seen, report.written), (4, 4));
    for t in tasks {
        assert!(t.await.unwrap(), "the client sees its stream cut");
    }
    // Records are on disk, flushed, one per request, all cancelled by the shutdown.
    let mut lines = Vec::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        lines.extend(text.lines().map(str::to_string));
    }
    assert_eq!(lines.len(), 4);
    for l in &lines {
        assert!(!l.contains("secret-key"));
        let r: TurnRecord = serde_json::from_str(l).unwrap();
        assert_eq!(r.status, Status::Cancelled);
        let e = r.error.unwrap();
        assert_eq!(
            (e.source, e.kind.as_str()),
            (ErrorSource::Internal, "shutdown")
        );
        assert!(r.measured.ttft_ns.is_some());
    }
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    o: tokentap_proxy::Config,
}

#[tokio::test]
async fn run_starts_serves_and_stops_on_its_shutdown_future() {
    let s = sim(sim_cfg()).await;
    let dir = tempfile::tempdir().unwrap();
    let cli = Cli::try_parse_from([
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
        "--upstream",
        &s.base_url(),
        "--records",
        dir.path().to_str().unwrap(),
    ])
    .unwrap();
    within(tokentap_proxy::run(cli.o, async {})).await.unwrap();
}
