//! `compare --format mlperf` on the golden run of the pinned reference client (testdata/golden):
//! its published `performance/result_summary.json` and `scores.json` are checked against its
//! own `events.jsonl` with the reference tokenizer and the reference scorer — and the impossible
//! negative TPOT that the reference published for that run is caught.

use serde_json::Value;
use std::path::{Path, PathBuf};
use tokentap_compare::{compare, Format, Opts, Verdict};

fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/golden/mlperf-ea33275")
}

/// The reference's report directory layout: events.jsonl, scores.json,
/// performance/result_summary.json.
fn report_dir(tamper: impl FnOnce(&Path)) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("performance")).unwrap();
    std::fs::copy(golden().join("events.jsonl"), d.path().join("events.jsonl")).unwrap();
    std::fs::copy(golden().join("scores.json"), d.path().join("scores.json")).unwrap();
    std::fs::copy(
        golden().join("result_summary.json"),
        d.path().join("performance/result_summary.json"),
    )
    .unwrap();
    tamper(d.path());
    d
}

fn opts(dir: &Path) -> Opts {
    let mut o = Opts::new(
        Format::Mlperf,
        dir.join("events.jsonl"),
        vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mlperf-wire.jsonl")],
    );
    o.tokenizer = Some(golden().join("tokenizer"));
    o.dataset = Some(golden().join("dataset.jsonl"));
    o
}

fn verdicts(r: &tokentap_compare::Report) -> Vec<(String, Verdict)> {
    r.checks
        .iter()
        .map(|c| (c.name.clone(), c.verdict))
        .collect()
}

#[test]
fn the_published_summary_and_scores_are_checked_against_the_events() {
    let dir = report_dir(|_| {});
    let r = compare(&opts(dir.path())).unwrap();
    let v = verdicts(&r);
    for name in [
        "ttft matches events",
        "latency matches events",
        "tpot matches events",
        "output_sequence_lengths matches events",
        "osl is the reference tokenizer's count",
        "scores.json is the reference scorer's",
    ] {
        assert!(
            v.contains(&(name.to_string(), Verdict::Pass)),
            "{name}: {:#?}",
            r.checks
        );
    }
    // The reference published a negative TPOT for this run (its completion event was stamped
    // before the first-chunk event of some samples): impossible, and the verdict says so.
    let neg = r
        .checks
        .iter()
        .find(|c| c.name == "tpot is never negative")
        .unwrap();
    assert_eq!(neg.verdict, Verdict::Fail);
    assert!(neg.detail.contains("-74099"), "{}", neg.detail);
    assert_eq!(r.verdict, Verdict::Fail);
    assert!(r
        .reasons
        .iter()
        .any(|x| x.contains("impossible: published TPOT min -74099")));
    // The claims the client published, labelled as such.
    for m in &r.metrics[..1] {
        assert_eq!(m.claims_source, "published");
    }
    let text = r.render_text();
    assert!(text.contains("tpot is never negative"), "{text}");
}

#[test]
fn a_summary_that_is_not_its_events_and_a_wrong_score_fail() {
    let dir = report_dir(|d| {
        let p = d.join("performance/result_summary.json");
        let mut rs: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        rs["ttft"]["percentiles"]["90.0"] = Value::from(1_000_000.0);
        rs["output_sequence_lengths"]["total"] = Value::from(50_000);
        std::fs::write(&p, rs.to_string()).unwrap();
        let s = d.join("scores.json");
        let mut sc: Value = serde_json::from_str(&std::fs::read_to_string(&s).unwrap()).unwrap();
        sc["score"] = Value::from(0.6);
        std::fs::write(&s, sc.to_string()).unwrap();
    });
    let r = compare(&opts(dir.path())).unwrap();
    let detail = |name: &str| {
        let c = r.checks.iter().find(|c| c.name == name).unwrap();
        assert_eq!(c.verdict, Verdict::Fail, "{name}");
        c.detail.clone()
    };
    assert!(detail("ttft matches events").contains("p90: published 1000000, events 9892680"));
    assert!(detail("osl is the reference tokenizer's count").contains("published OSL total 50000"));
    assert!(detail("scores.json is the reference scorer's")
        .contains("score: published 0.6, recomputed 0.4696"));
}

#[test]
fn without_a_tokenizer_the_token_checks_say_what_they_need() {
    let dir = report_dir(|_| {});
    let mut o = opts(dir.path());
    o.tokenizer = None;
    o.dataset = None;
    let r = compare(&o).unwrap();
    let c = r
        .checks
        .iter()
        .find(|c| c.name == "tpot matches events")
        .unwrap();
    assert_eq!(c.verdict, Verdict::NoData);
    assert!(c.detail.contains("--tokenizer"));
    let s = r
        .checks
        .iter()
        .find(|c| c.name.starts_with("scores.json"))
        .unwrap();
    assert_eq!(s.verdict, Verdict::NoData);
    assert!(s.detail.contains("--dataset"));
}
