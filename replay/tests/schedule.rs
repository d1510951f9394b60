//! The closed loop of docs/benchmark.md#load against the real sim: concurrency, one turn in flight
//! per conversation, delays, timeouts and failures, the performance window, stopping.

use std::time::Duration;
use tokentap_replay::StopReason;
use tokentap_testkit::replay::*;

fn conversations(n: usize, turns: usize, delay: f64) -> String {
    let mut s = String::new();
    for c in 0..n {
        let id = format!("conv{c:02}");
        let mut t = 1;
        for k in 0..turns {
            let delay = if k == 0 {
                String::new()
            } else {
                format!(",\"delay_seconds\":{delay}")
            };
            s.push_str(&format!(
                "{{\"conversation_id\":\"{id}\",\"turn\":{t},\"role\":\"user\",\"content\":\"q{k}\"{delay}}}\n"
            ));
            t += 1;
            s.push_str(&format!(
                "{{\"conversation_id\":\"{id}\",\"turn\":{t},\"role\":\"assistant\",\"content\":\"a{k}\"}}\n"
            ));
            t += 1;
        }
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_is_bounded_and_a_conversation_never_has_two_turns_in_flight() {
    // 1 ms per token, 6 tokens: requests last long enough to overlap.
    let sim = sim_with(|c| {
        c.timing.decode_ms = 1.0;
        c.output.mean_tokens = 6.0;
    })
    .await;
    let ds = dataset(&conversations(12, 3, 0.0));
    let mut c = config(&sim, "conc");
    c.concurrency = 4;
    let (out, recs) = run(c, ds).await;
    assert_eq!(recs.len(), 36);
    assert!(recs.iter().all(|r| status(r) == "ok"));
    assert_eq!(out.summary.counts.turns["ok"], 36);

    // The server's view: +1 when a request head arrives, −1 when its last chunk is written.
    let log = sim.log();
    assert_eq!(log.len(), 36);
    let mut events: Vec<(u64, i32)> = Vec::new();
    let mut per_session: std::collections::HashMap<String, Vec<(u64, u64)>> = Default::default();
    for r in &log {
        let start = r.received.mono_ns;
        let end = r.chunks.last().unwrap().mono_ns;
        events.push((start, 1));
        events.push((end, -1));
        per_session
            .entry(r.session.clone().unwrap())
            .or_default()
            .push((start, end));
    }
    events.sort();
    let (mut cur, mut max) = (0, 0);
    for (_, d) in events {
        cur += d;
        max = max.max(cur);
    }
    assert_eq!(
        max, 4,
        "active conversations must reach but never exceed the target"
    );
    for (s, mut iv) in per_session {
        assert_eq!(iv.len(), 3, "{s}");
        iv.sort();
        for w in iv.windows(2) {
            assert!(
                w[1].0 > w[0].1,
                "{s}: next turn arrived before the previous one ended"
            );
        }
    }
    // The client's view agrees: a turn starts after the previous one's last byte.
    let recs = sorted(recs);
    for w in recs.windows(2) {
        if w[0]["trajectory"] == w[1]["trajectory"] {
            let end0 = u(&w[0]["start_mono_ns"]) + u(&w[0]["e2e_ns"]);
            assert!(u(&w[1]["start_mono_ns"]) >= end0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_shift_send_times_are_excluded_from_latency_and_never_sent() {
    let sim = sim_with(|_| {}).await;
    // Turn 1 has no delay, turns 2 and 3 have 0.12 s; with scale 0.5 → 60 ms.
    let ds = dataset(&conversations(1, 3, 0.12));
    let mut c = config(&sim, "delays");
    c.delays = true;
    c.delay_scale = 0.5;
    let (_, recs) = run(c, ds).await;
    let recs = sorted(recs);
    assert_eq!(recs.len(), 3);
    for w in recs.windows(2) {
        let prev_end = u(&w[0]["start_mono_ns"]) + u(&w[0]["e2e_ns"]);
        let scheduled = u(&w[1]["scheduled_mono_ns"]);
        let start = u(&w[1]["start_mono_ns"]);
        assert!(scheduled >= prev_end + 60_000_000, "delay not slept");
        assert!(start >= scheduled, "send before the end of the delay");
        // The delay is not part of the turn's latency: TTFT counts from the send.
        assert!(u(&w[1]["ttft_ns"]) < 60_000_000);
    }
    for r in sim.log() {
        let body = String::from_utf8(r.body.unwrap().to_vec()).unwrap();
        assert!(!body.contains("delay"), "{body}");
    }

    // Without --delays the same dataset has no gap of that size.
    sim.clear_log();
    let ds = dataset(&conversations(1, 3, 0.12));
    let (_, recs) = run(config(&sim, "nodelays"), ds).await;
    let recs = sorted(recs);
    let gap = u(&recs[2]["start_mono_ns"]) - u(&recs[0]["start_mono_ns"]);
    assert!(
        gap < 120_000_000,
        "delays must be off by default ({gap} ns)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_timeout_cancels_the_request_and_aborts_the_rest_unsent() {
    // Every stream stalls for 20 s in the middle; the turn timeout is 300 ms.
    let sim = sim_with(|c| {
        c.faults.stall_rate = 1.0;
        c.faults.stall_ms = 20_000;
        c.output.mean_tokens = 10.0;
    })
    .await;
    let ds = dataset(&conversations(2, 3, 0.0));
    let mut c = config(&sim, "timeout");
    c.turn_timeout = Some(Duration::from_millis(300));
    let t0 = tokio::time::Instant::now();
    let (out, recs) = run(c, ds).await;
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the stall was waited out"
    );
    let recs = sorted(recs);
    let st: Vec<&str> = recs.iter().map(status).collect();
    assert_eq!(
        st,
        [
            "timed_out",
            "aborted",
            "aborted",
            "timed_out",
            "aborted",
            "aborted"
        ]
    );
    assert_eq!(recs[0]["error"]["kind"], "turn_timeout");
    assert_eq!(recs[1]["error"]["kind"], "previous_turn_failed");
    // What had arrived before the stall is kept.
    assert!(!recs[0]["chunks"].as_array().unwrap().is_empty());
    assert!(recs[0]["ttft_ns"].is_u64());
    // Only the first turn of each trajectory reached the server, and the server saw the client
    // go away (the request did not finish).
    sim.wait_finished(2).await;
    let log = sim.log();
    assert_eq!(log.len(), 2);
    assert!(log
        .iter()
        .all(|r| !r.finished && r.fault.as_deref() == Some("stall")));
    assert_eq!(out.summary.counts.turns["timed_out"], 2);
    assert_eq!(
        out.summary.validity.verdict,
        tokentap_replay::Verdict::Invalid
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_status_and_broken_stream_fail_the_turn() {
    let sim = sim_with(|c| {
        c.faults.error_rate = 1.0;
        c.faults.error_statuses = vec![503];
    })
    .await;
    let (_, recs) = run(config(&sim, "err"), dataset(&conversations(1, 2, 0.0))).await;
    let recs = sorted(recs);
    assert_eq!(status(&recs[0]), "failed");
    assert_eq!(recs[0]["http_status"], 503);
    assert_eq!(recs[0]["error"]["kind"], "http_status");
    assert_eq!(recs[0]["error"]["source"], "upstream");
    assert_eq!(status(&recs[1]), "aborted");

    let sim = sim_with(|c| {
        c.faults.disconnect_rate = 1.0;
        c.output.mean_tokens = 20.0;
        // With time between chunks the head and some chunks reach the client before the cut.
        c.timing.decode_ms = 1.0;
    })
    .await;
    let (_, recs) = run(config(&sim, "disc"), dataset(&conversations(1, 2, 0.0))).await;
    let recs = sorted(recs);
    assert_eq!(status(&recs[0]), "failed");
    assert_eq!(recs[0]["error"]["kind"], "reset", "{}", recs[0]);
    assert_eq!(recs[0]["http_status"], 200);
    assert!(!recs[0]["chunks"].as_array().unwrap().is_empty());
    assert_eq!(status(&recs[1]), "aborted");
    assert_eq!(sim.log().len(), 1);
}

/// A (1 turn), B (5 turns, 0.1 s before each after the first), C (1 turn); concurrency 2, one
/// pass. A's slot then runs C; when C ends nothing is left to claim: the window closes while B
/// is still sleeping before its second turn.
fn window_dataset() -> String {
    let mut s = String::from(
        "{\"conversation_id\":\"A\",\"turn\":1,\"role\":\"user\",\"content\":\"a\"}\n",
    );
    let mut t = 1;
    for k in 0..5 {
        let delay = if k == 0 { "" } else { ",\"delay_seconds\":0.1" };
        s.push_str(&format!(
            "{{\"conversation_id\":\"B\",\"turn\":{t},\"role\":\"user\",\"content\":\"b{k}\"{delay}}}\n"
        ));
        s.push_str(&format!(
            "{{\"conversation_id\":\"B\",\"turn\":{},\"role\":\"assistant\",\"content\":\"r\"}}\n",
            t + 1
        ));
        t += 2;
    }
    s.push_str("{\"conversation_id\":\"C\",\"turn\":1,\"role\":\"user\",\"content\":\"c\"}\n");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn window_membership_is_decided_at_issue_time() {
    let sim = sim_with(|_| {}).await;
    let mut c = config(&sim, "window");
    c.concurrency = 2;
    c.delays = true;
    let (out, recs) = run(c, dataset(&window_dataset())).await;
    assert_eq!(recs.len(), 7);
    assert!(recs.iter().all(|r| status(r) == "ok"));
    let closed = out.summary.window.closed_mono_ns.expect("window closed");
    for r in &recs {
        let b_later = conv(r) == "B" && u(&r["turn_index"]) > 0;
        assert_eq!(r["in_window"], !b_later, "{r}");
        if b_later {
            assert!(u(&r["start_mono_ns"]) > closed);
        }
    }
    // Finishing all started trajectories is the official behaviour.
    assert_eq!(out.summary.run.stopped_by, None);
    // Window end = last completion of an in-window turn, well before B's late turns.
    let end = out.summary.window.end_mono_ns.unwrap();
    assert!(end <= closed + 50_000_000);
    assert_eq!(out.summary.throughput.turns, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_issuing_on_first_user_complete_aborts_the_rest_and_drains() {
    let sim = sim_with(|_| {}).await;
    let mut c = config(&sim, "stopfirst");
    c.concurrency = 2;
    c.delays = true;
    c.stop_issuing_on_first_user_complete = true;
    let (out, recs) = run(c, dataset(&window_dataset())).await;
    let recs = sorted(recs);
    assert_eq!(
        recs.len(),
        7,
        "one record per client turn of every started trajectory"
    );
    for r in &recs {
        let b_later = conv(r) == "B" && u(&r["turn_index"]) > 0;
        assert_eq!(status(r), if b_later { "aborted" } else { "ok" }, "{r}");
        if b_later {
            assert_eq!(r["error"]["kind"], "stopped");
        }
    }
    assert_eq!(sim.log().len(), 3);
    assert_eq!(
        out.summary.run.stopped_by,
        Some(StopReason::FirstUserComplete)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_duration_stops_issuing() {
    let sim = sim_with(|_| {}).await;
    let mut c = config(&sim, "maxdur");
    c.delays = true;
    c.max_duration = Some(Duration::from_millis(150));
    // Turn 1 at once, then 10 s of delay before turn 2: the stop must cut the delay short.
    let t0 = tokio::time::Instant::now();
    let (out, recs) = run(c, dataset(&conversations(2, 3, 10.0))).await;
    assert!(t0.elapsed() < Duration::from_secs(5));
    let recs = sorted(recs);
    let st: Vec<&str> = recs.iter().map(status).collect();
    assert_eq!(st, ["ok", "aborted", "aborted"]);
    assert_eq!(out.summary.run.stopped_by, Some(StopReason::MaxDuration));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_in_flight_turns_and_writes_everything() {
    // 2 ms per token; conversation 0's first turn is short (5 tokens), conversation 1's long
    // (400 tokens): when the first request finishes, conversation 1's is still streaming.
    let sim = sim_with(|c| {
        c.timing.decode_ms = 2.0;
        c.output.mean_tokens = 50.0;
    })
    .await;
    let mut text = String::new();
    for (id, first) in [("s0", 5), ("s1", 400), ("s2", 5), ("s3", 5)] {
        text.push_str(&format!(
            "{{\"conversation_id\":\"{id}\",\"turn\":1,\"role\":\"user\",\"content\":\"x\",\"max_new_tokens\":{first}}}\n\
             {{\"conversation_id\":\"{id}\",\"turn\":2,\"role\":\"assistant\",\"content\":\"y\"}}\n\
             {{\"conversation_id\":\"{id}\",\"turn\":3,\"role\":\"user\",\"content\":\"z\"}}\n"
        ));
    }
    let mut c = config(&sim, "shutdown");
    c.concurrency = 2;
    let out = tokentap_replay::run_with(
        c.resolve().unwrap(),
        dataset(&text),
        tokentap_replay::ProgressMode::Off,
        sim.wait_finished(1),
    )
    .await
    .unwrap();
    assert!(out.interrupted);
    assert_eq!(out.summary.run.stopped_by, Some(StopReason::Shutdown));
    let recs = sorted(records(&out));
    // Only the two started trajectories have records, one per client turn.
    let ids: Vec<&str> = recs.iter().map(conv).collect();
    assert_eq!(ids, ["s0", "s0", "s1", "s1"]);
    // The sim counts a request finished when its last frame is handed to hyper, which can be
    // just before the client has read it: s0's first turn is ok or cancelled.
    assert!(matches!(status(&recs[0]), "ok" | "cancelled"));
    assert_eq!(status(&recs[2]), "cancelled");
    assert!(
        !recs[2]["chunks"].as_array().unwrap().is_empty(),
        "partial data kept"
    );
    assert_eq!(status(&recs[3]), "aborted");
    assert!(matches!(status(&recs[1]), "cancelled" | "aborted"));
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.out_dir.unwrap().join("summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["run"]["interrupted"], true);
    assert_eq!(summary["counts"]["total"], 4);
}
