//! Parser and end-to-end comparison tests on fixtures of the formats no real client in the test
//! suite produces: MLPerf Endpoints `events.jsonl` (the fields docs/benchmark.md#client-formats
//! documents) and inference-perf `per_request_lifecycle_metrics.json` (the shape its report writer
//! dumps: `start_time`, `end_time`, `request`, `response`, `info.response_metrics`, `error`).
//!
//! Each fixture comes with a proxy-records fixture of the same turns as the wire saw them: the
//! proxy started 0.2–0.4 ms after the client's send and saw the first token 0.3–0.4 ms earlier,
//! so every claim is within the default tolerance and the verdict is PASS.

use std::path::{Path, PathBuf};
use tokentap_compare::{
    compare, formats, Clock, Format, JoinMethod, Metric, Opts, PublishedSource, Verdict,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn opts(format: Format, client: &str, wire: &str) -> Opts {
    Opts::new(format, fixture(client), vec![fixture(wire)])
}

#[test]
fn mlperf_events_parse_into_turns() {
    let run = formats::load(
        Format::Mlperf,
        &fixture("mlperf-events.jsonl"),
        None,
        &PublishedSource::Beside,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(run.clock, Clock::Mono);
    assert_eq!(run.turns.len(), 5);
    let first = &run.turns[0];
    assert_eq!(first.session.as_deref(), Some("c1"));
    assert_eq!(first.turn, Some(1));
    assert_eq!(first.start_ns, Some(5_000_000_000_000));
    assert!((first.values.get(Metric::Ttft).unwrap() - 20.4).abs() < 1e-9);
    assert!((first.values.get(Metric::E2e).unwrap() - 120.5).abs() < 1e-9);
    assert_eq!(first.values.get(Metric::OutputTokens), Some(50.0));
    // MLPerf's TPOT: (E2E − TTFT) / (tokens − 1).
    let itl = first.values.get(Metric::Itl).unwrap();
    assert!((itl - (120.5 - 20.4) / 49.0).abs() < 1e-9, "{itl}");
    let failed = run.turns.iter().find(|t| t.turn == Some(5)).unwrap();
    assert!(!failed.ok, "error.generic marks the sample failed");
    assert_eq!(failed.values.get(Metric::Ttft), None);
}

#[test]
fn mlperf_against_the_wire_joins_by_session_and_order_and_passes() {
    let r = compare(&opts(
        Format::Mlperf,
        "mlperf-events.jsonl",
        "mlperf-wire.jsonl",
    ))
    .unwrap();
    assert_eq!(r.counts.joined, 5);
    assert_eq!(r.counts.by_session_order, 5);
    assert_eq!(r.counts.client_only, 0);
    // The "other" session's request was on the wire but not in the client's file.
    assert_eq!(r.counts.wire_only, 1);
    assert_eq!(r.wire_only[0].session.as_deref(), Some("other"));
    assert_eq!(
        r.counts.status_differs, 0,
        "the failed turn failed on both sides"
    );
    assert_eq!(r.counts.compared, 4);
    // Dataset turn numbers 1, 3, 5 were joined to proxy turn indices 0, 1, 2 in order.
    let c2: Vec<_> = r
        .pairs
        .iter()
        .filter(|p| p.session.as_deref() == Some("c2"))
        .map(|p| (p.turn, p.wire_at.clone()))
        .collect();
    assert_eq!(c2.len(), 3);
    let ttft = &r.metrics[Metric::Ttft.idx()];
    let d = ttft.diff.unwrap();
    assert!(d.min > 0.29 && d.max < 0.41, "client − wire TTFT {d:?}");
    for m in &r.metrics[..4] {
        assert_eq!(m.claims.len(), 3, "{:?} claims", m.metric);
    }
    // No tokenizer, no reference TPOT; the fixture has no recv_non_first events.
    assert!(r.metrics[Metric::Tpot.idx()].claims.is_empty());
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render_text());
    assert!(r.pairs.iter().all(|p| p.join == JoinMethod::SessionOrder));
}

#[test]
fn mlperf_join_fails_the_verdict_when_asked_to_require_every_turn() {
    let mut o = opts(Format::Mlperf, "mlperf-events.jsonl", "mlperf-wire.jsonl");
    o.require_all_joined = true;
    let r = compare(&o).unwrap();
    assert_eq!(r.verdict, Verdict::Fail);
    assert!(r.reasons[0].contains("1 wire turns"), "{:?}", r.reasons);
}

#[test]
fn inference_perf_lifecycle_parses_raw_times() {
    let run = formats::load(
        Format::InferencePerf,
        &fixture("inference-perf-lifecycle.json"),
        None,
        &PublishedSource::Beside,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(run.clock, Clock::Mono);
    assert_eq!(run.turns.len(), 3);
    let t = &run.turns[0];
    assert_eq!(t.at, 1);
    assert_eq!(t.session, None);
    // 5000.010 s on perf_counter = 5_000_010_000_000 ns (±1 µs of f64 rounding).
    assert!(t.start_ns.unwrap().abs_diff(5_000_010_000_000) < 1_000);
    assert!((t.values.get(Metric::Ttft).unwrap() - 30.2).abs() < 1e-3);
    assert!((t.values.get(Metric::E2e).unwrap() - 200.5).abs() < 1e-3);
    assert_eq!(t.values.get(Metric::OutputTokens), Some(40.0));
    let itl = t.values.get(Metric::Itl).unwrap();
    assert!((itl - (200.3 - 30.2) / 39.0).abs() < 1e-3, "{itl}");
    assert!(!run.turns[2].ok);
    assert!(run.notes.iter().any(|n| n.contains("start time alone")));
}

#[test]
fn inference_perf_against_the_wire_joins_by_time() {
    let r = compare(&opts(
        Format::InferencePerf,
        "inference-perf-lifecycle.json",
        "inference-perf-wire.jsonl",
    ))
    .unwrap();
    assert_eq!(r.counts.by_time, 3);
    assert_eq!((r.counts.client_only, r.counts.wire_only), (0, 0));
    // Each client turn was joined to the wire turn that started 0.2–0.4 ms after it.
    for p in &r.pairs {
        let off = p.start_offset_ms.unwrap();
        assert!((0.19..0.41).contains(&off), "{off}");
    }
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.render_text());
}

#[test]
fn computed_metrics_variant_and_bad_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("lifecycle.json");
    std::fs::write(
        &p,
        r#"[{"start_time": 1.5, "end_time": 1.7, "session_id": "s1", "error": null,
            "computed_metrics": {"time_to_first_token": 0.05, "inter_token_latencies": [0.01, 0.03], "request_latency": 0.2}}]"#,
    )
    .unwrap();
    let run = formats::load(
        Format::InferencePerf,
        &p,
        None,
        &PublishedSource::Off,
        &Default::default(),
    )
    .unwrap();
    let t = &run.turns[0];
    assert_eq!(t.session.as_deref(), Some("s1"));
    assert_eq!(t.values.get(Metric::Ttft), Some(50.0));
    assert_eq!(t.values.get(Metric::Itl), Some(20.0));
    assert_eq!(t.values.get(Metric::E2e), Some(200.0));

    std::fs::write(&p, r#"[{"end_time": 2.0}]"#).unwrap();
    let e = formats::load(
        Format::InferencePerf,
        &p,
        None,
        &PublishedSource::Off,
        &Default::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("lifecycle.json:1") && e.contains("start_time"),
        "{e}"
    );

    let q = dir.path().join("events.jsonl");
    std::fs::write(
        &q,
        "{\"event_type\":\"sample.issued\",\"sample_uuid\":\"u\"}\n",
    )
    .unwrap();
    let e = formats::load(
        Format::Mlperf,
        &q,
        None,
        &PublishedSource::Off,
        &Default::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("events.jsonl:1") && e.contains("timestamp_ns"),
        "{e}"
    );
}

/// Every reader checks its file is of its format: each file given as every other format is
/// refused with what it is and the flag that reads it, and `--format auto` picks its reader.
/// The files: a real AIPerf 0.13.0 export, the fixtures above, a tokentap replay record, a
/// tokentap proxy's records (never a client file) and AIPerf's summary (not the per-request file).
#[test]
fn every_file_of_another_format_is_refused_naming_it() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let files = [
        (
            repo.join("fuzz/seeds/compare_readers/tokentap-records.jsonl"),
            Format::Tokentap,
        ),
        (fixture("mlperf-events.jsonl"), Format::Mlperf),
        (
            repo.join("testdata/aiperf-0.13.0/profile_export.jsonl"),
            Format::Aiperf,
        ),
        (
            fixture("inference-perf-lifecycle.json"),
            Format::InferencePerf,
        ),
        (fixture("guidellm/c148.json"), Format::Guidellm),
        (
            fixture(
                "vllm-bench/chat/openai-chat-infqps-concurrency4-tokentap-sim-20261204-055926.json",
            ),
            Format::VllmBench,
        ),
        (
            fixture("sglang-bench/chat/sglang-oai-chat.jsonl"),
            Format::SglangBench,
        ),
    ];
    for (file, actual) in &files {
        assert_eq!(formats::resolve(Format::Auto, file).unwrap(), *actual);
        for given in Format::read().filter(|f| f != actual) {
            let e = formats::load(
                given,
                file,
                None,
                &PublishedSource::Off,
                &Default::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains(&format!(
                    "not {} (this is {}: use --format {})",
                    given.file_name(),
                    actual.file_name(),
                    actual.as_str()
                )),
                "{} as {}: {e}",
                file.display(),
                given.as_str()
            );
        }
    }
    // Not a client file at all: the proxy's records, AIPerf's summary.
    let wire = fixture("mlperf-wire.jsonl");
    for given in Format::read().chain([Format::Auto]) {
        let e = formats::resolve(given, &wire).unwrap_err().to_string();
        assert!(e.contains("give them as --wire"), "{e}");
    }
    let summary = repo.join("testdata/aiperf-0.13.0/profile_export_aiperf.json");
    let e = formats::resolve(Format::Aiperf, &summary)
        .unwrap_err()
        .to_string();
    assert!(e.contains("profile_export_aiperf.json (the summary"), "{e}");
}
