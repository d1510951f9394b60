//! The clients serving engineers run, read from the files they really wrote: guidellm 0.8.1,
//! `vllm bench serve` 0.34.0 (its Python and its Rust client) and SGLang 0.5.23's
//! `bench_serving`, each run through `tokentap proxy` in front of the sim and committed with the
//! proxy's records (`tests/fixtures/*/README.md` says how each was made). Each format is joined
//! to its records with no mispair against the truth the records give (the server's response id,
//! the client's own request-id header), and judged.

use std::path::{Path, PathBuf};
use tokentap_compare::{compare, formats, Format, JoinMethod, Opts, Verdict};

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
}

/// Chat records of a proxy records file, with their response ids.
fn wire_ids(p: &Path) -> Vec<Option<String>> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["route"] == "/v1/chat/completions")
        .map(|v| v["response_id"].as_str().map(str::to_string))
        .collect()
}

/// `tokentap compare` on `client` against `wire`, the format told from the file. A debug build
/// on a shared 2-core box made these files: the pipeline is what is tested, with 20 ms of
/// tolerance.
fn opts(client: PathBuf, wire: PathBuf) -> Opts {
    let mut o = Opts::new(Format::Auto, client, vec![wire]);
    o.time_tolerance = std::time::Duration::from_millis(20);
    o
}

fn guidellm_opts(run: &str) -> Opts {
    opts(
        fixture(&format!("guidellm/{run}.json")),
        fixture(&format!("guidellm/{run}-wire.jsonl")),
    )
}

/// Every guidellm run joins exactly by the server's response id: every request that has one
/// pairs with the record of the same id, and nothing else does.
#[test]
fn guidellm_joins_by_response_id_with_no_mispair() {
    for run in [
        "c148",
        "multiturn-c4",
        "constant-r10",
        "faults-r10",
        "c148-torch",
    ] {
        let r = compare(&guidellm_opts(run)).unwrap_or_else(|e| panic!("{run}: {e}"));
        assert_eq!(r.format, Format::Guidellm, "{run}: auto picks guidellm");
        let client = formats::load(
            Format::Guidellm,
            &fixture(&format!("guidellm/{run}.json")),
            None,
            &formats::PublishedSource::Off,
            &Default::default(),
        )
        .unwrap();
        let with_id = client
            .turns
            .iter()
            .filter(|t| t.response_id.is_some())
            .count();
        assert!(with_id > 0, "{run}");
        for p in &r.pairs {
            if p.join == JoinMethod::ResponseId {
                assert!(p.response_id.is_some(), "{run}: {p:?}");
            }
        }
        assert_eq!(r.counts.by_response_id, with_id, "{run}: {:?}", r.counts);
        let chat = wire_ids(&fixture(&format!("guidellm/{run}-wire.jsonl")));
        assert_eq!(r.counts.wire_turns, chat.len(), "{run}: chat records only");
        match run {
            // Everything guidellm reports is on the wire and joined by id.
            "c148" | "c148-torch" | "multiturn-c4" => {
                assert_eq!(
                    (r.counts.joined, r.counts.client_only, r.counts.wire_only),
                    (chat.len(), 0, 0),
                    "{run}"
                );
                assert_eq!(r.counts.by_response_id, chat.len(), "{run}");
            }
            // guidellm closed the benchmark with its 40th request still running: on the wire
            // only.
            "constant-r10" => {
                assert_eq!((r.counts.joined, r.counts.wire_only), (39, 1), "{run}");
            }
            // 32 successful and 2 incomplete (cut by the benchmark's end: the wire's cancelled)
            // pair by id; the 7 guidellm keeps without one (errored, and a 429 after the end)
            // by time, each with a failed record.
            "faults-r10" => {
                assert_eq!(r.counts.client_turns, 41, "{run}");
                assert_eq!(
                    (r.counts.by_response_id, r.counts.by_time),
                    (34, 7),
                    "{run}: {:?}",
                    r.counts
                );
                assert!(
                    r.pairs.iter().all(|p| p.client.ok == p.wire.ok),
                    "{run}: a request that did not succeed pairs with a record that did not"
                );
            }
            _ => unreachable!(),
        }
    }
}

/// One guidellm file holds one benchmark per level: each level is judged over its own turns and
/// its own published percentiles (nearest rank), the file over all of them.
#[test]
fn guidellm_levels_are_judged_one_by_one() {
    let r = compare(&guidellm_opts("c148")).unwrap();
    let names: Vec<&str> = r.levels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["concurrent@1", "concurrent@4", "concurrent@8"]);
    for l in &r.levels {
        assert_eq!(l.counts.joined, 24, "{}", l.name);
        let ttft = &l.metrics[0];
        assert_eq!(ttft.claims_source, "published", "{}", l.name);
        assert_eq!(ttft.claims.len(), 3, "{}", l.name);
        assert_ne!(l.verdict, Verdict::NoData, "{}", l.name);
    }
    // The file's own claims are recomputed over every level's turns, never the levels' mixed.
    assert_eq!(r.metrics[0].claims_source, "recomputed");
    let text = r.render_text();
    assert!(text.contains("per benchmark level"), "{text}");
    assert!(text.contains("concurrent@8"), "{text}");
    // A single-level file is its own level: its published claims are the file's.
    let one = compare(&guidellm_opts("multiturn-c4")).unwrap();
    assert!(one.levels.is_empty());
    assert_eq!(one.metrics[0].claims_source, "published");
}

/// Without the response id (a client that keeps none), a time join at concurrency 8 pairs only
/// what it can tell apart: every pair it makes is the true one, the look-alikes stay unpaired.
#[test]
fn a_time_only_join_never_mispairs() {
    let src = std::fs::read_to_string(fixture("guidellm/c148.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&src).unwrap();
    let mut truth = Vec::new();
    for b in v["benchmarks"].as_array_mut().unwrap() {
        for r in b["requests"]["successful"].as_array_mut().unwrap() {
            truth.push(r["response_id"].as_str().unwrap().to_string());
            r["response_id"] = serde_json::Value::Null;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let client = dir.path().join("c148-no-ids.json");
    std::fs::write(&client, v.to_string()).unwrap();
    let mut o = guidellm_opts("c148");
    o.client = client;
    let r = compare(&o).unwrap();
    assert_eq!(r.counts.by_response_id, 0);
    assert!(r.counts.by_time > 0, "{:?}", r.counts);
    for p in &r.pairs {
        assert_eq!(
            p.response_id.as_deref(),
            Some(truth[p.client_at - 1].as_str()),
            "mispaired: client {} joined to {}",
            p.client_at,
            p.wire_at
        );
    }
    // What could not be told apart is said, not guessed.
    said_unpaired(&r);
}

/// A guidellm file given as any other format is refused, naming what it is.
#[test]
fn a_guidellm_file_is_never_read_as_another_format() {
    let f = fixture("guidellm/c148.json");
    for given in Format::read().filter(|f| *f != Format::Guidellm) {
        let e = formats::resolve(given, &f).unwrap_err().to_string();
        assert!(
            e.contains("this is a guidellm benchmarks.json: use --format guidellm"),
            "{}: {e}",
            given.as_str()
        );
    }
}

fn only_json(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap_or_else(|| panic!("no result file in {}", dir.display()))
}

/// `vllm bench serve`, Python and Rust clients: every request joins by the `x-request-id` its
/// client sent (`bench-<run>-<i>`, the run's prefix found among the proxy's recorded headers),
/// failed requests with failed records, and the Python client's `perf_counter` start times are
/// on the proxy's monotonic clock.
#[test]
fn vllm_bench_joins_by_its_request_ids() {
    for (case, failed) in [
        ("chat", 0),
        ("errors", 7),
        ("completions", 0),
        ("rust-chat", 0),
        ("rust-errors", 7),
    ] {
        let dir = fixture(&format!("vllm-bench/{case}"));
        let o = opts(only_json(&dir), dir.join("proxy-records.jsonl"));
        let r = compare(&o).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(r.format, Format::VllmBench, "{case}");
        assert_eq!(r.counts.client_turns, 40, "{case}");
        assert_eq!(
            (
                r.counts.joined,
                r.counts.by_request_id,
                r.counts.client_only
            ),
            (40, 40, 0),
            "{case}: {:?}",
            r.counts
        );
        for p in &r.pairs {
            let i = p.client_at - 1;
            assert!(
                p.request_id
                    .as_deref()
                    .is_some_and(|id| id.ends_with(&format!("-{i}"))),
                "{case}: {p:?}"
            );
            assert_eq!(p.client.ok, p.wire.ok, "{case}: {p:?}");
        }
        assert_eq!(
            r.pairs.iter().filter(|p| !p.client.ok).count(),
            failed,
            "{case}"
        );
        let ttft = &r.metrics[0];
        assert_eq!(ttft.claims_source, "published", "{case}");
        if case.starts_with("rust") {
            // Relative start times, aligned from the pairs: the quickest request's offset is 0,
            // every other one small and positive.
            let offs: Vec<f64> = r.pairs.iter().filter_map(|p| p.start_offset_ms).collect();
            assert_eq!(offs.len(), 40, "{case}");
            assert!(offs.iter().any(|d| d.abs() < 1e-6), "{case}: {offs:?}");
            assert!(
                offs.iter().all(|d| (0.0..1000.0).contains(d)),
                "{case}: {offs:?}"
            );
            assert!(r
                .notes
                .iter()
                .any(|n| n.contains("aligned to the proxy's clock")));
        } else {
            // perf_counter is CLOCK_MONOTONIC: the client sent each request before the proxy
            // saw it, by well under a second.
            assert!(
                r.pairs
                    .iter()
                    .all(|p| p.start_offset_ms.is_some_and(|d| d > 0.0 && d < 1000.0)),
                "{case}"
            );
        }
    }
    // vllm-rs --multi-turn keeps no per-request values: refused, saying so.
    let dir = fixture("vllm-bench/rust-multi-turn");
    let e = compare(&Opts::new(
        Format::Auto,
        only_json(&dir),
        vec![dir.join("proxy-records.jsonl")],
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("multi-turn summary"), "{e}");
}

/// SGLang's `bench_serving`: no ids and no start times in its file; every request joins by its
/// output text, which the proxy recorded (`--record-content`); the warm-up request, which the
/// client leaves out of its file, is the one record only the wire has.
#[test]
fn sglang_bench_joins_by_output_text() {
    for (case, file, failed) in [
        ("chat", "sglang-oai-chat.jsonl", 0),
        ("errors", "sglang-oai-chat.jsonl", 8),
        ("completions", "sglang-oai.jsonl", 0),
        ("rust-chat", "sglang-oai-chat.jsonl", 0),
    ] {
        let dir = fixture(&format!("sglang-bench/{case}"));
        let o = opts(dir.join(file), dir.join("proxy-records.jsonl"));
        let r = compare(&o).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(r.format, Format::SglangBench, "{case}");
        let ok = 40 - failed;
        assert_eq!(r.counts.client_turns, 40, "{case}");
        assert_eq!(r.counts.by_output_text, ok, "{case}: {:?}", r.counts);
        assert!(r.pairs.iter().all(|p| p.client.ok && p.wire.ok), "{case}");
        assert!(
            r.counts.wire_only >= 1,
            "{case}: the warm-up is on the wire only"
        );
        assert_eq!(r.metrics[0].claims_source, "published", "{case}");
    }
}

/// vLLM's multi-turn benchmark (`--stats-json-output`): with `--send-conversation-id` it sends
/// `X-Session-ID`, so every request joins by session and turn; without it, by time on the shared
/// monotonic clock — and every pair the time join makes is the one the session run's truth gives
/// (each conversation's prompt names its number, so the records' conversation and turn are known
/// from the session run: here checked as conversation + message count of the wire record).
#[test]
fn vllm_multi_turn_joins_by_session_or_by_time_with_no_mispair() {
    let dir = fixture("vllm-multi-turn/with-session-id");
    let o = opts(dir.join("stats.json"), dir.join("proxy-records.jsonl"));
    let r = compare(&o).unwrap();
    assert_eq!(r.format, Format::VllmMultiTurn);
    assert_eq!(
        (
            r.counts.joined,
            r.counts.by_session_order,
            r.counts.client_only,
            r.counts.wire_only
        ),
        (22, 22, 0, 0),
        "{:?}",
        r.counts
    );
    // Without the session header: time only.
    let dir = fixture("vllm-multi-turn");
    let o = opts(dir.join("stats.json"), dir.join("proxy-records.jsonl"));
    let r = compare(&o).unwrap();
    assert_eq!(r.counts.by_session_order, 0);
    // Its two clients send their turns within a millisecond of each other, with outputs of one
    // length: what time cannot tell apart is left unpaired and said, never guessed.
    assert_eq!(
        r.counts.by_time + r.counts.client_only,
        22,
        "{:?}",
        r.counts
    );
    said_unpaired(&r);
    // Truth: the client row's conversation number is in its prompt, which the proxy recorded
    // (`--record-content`), and its turn is the record's message count.
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    let records: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("proxy-records.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for p in &r.pairs {
        let row = &rows[p.client_at - 1];
        let line: usize = p.wire_at.rsplit(':').next().unwrap().parse().unwrap();
        let rec = &records[line - 1];
        let n: String = row["conversation_id"]
            .as_str()
            .unwrap()
            .trim_start_matches("CONV_ID_")
            .into();
        let prompt = rec["content"]["request"]["messages"][0]["content"]
            .as_str()
            .unwrap_or_default();
        assert!(
            prompt.starts_with(&format!("{n} is a nice number")),
            "mispaired: {} with {}",
            row["conversation_id"],
            p.wire_at
        );
        assert_eq!(rec["messages"], row["input_num_turns"], "mispaired turn");
    }
}

/// Turns the time join could not tell apart are said to be left unpaired, never guessed.
fn said_unpaired(r: &tokentap_compare::report::Report) {
    if r.counts.client_only > 0 {
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("left unpaired by the time join")),
            "{:?}",
            r.notes
        );
    }
}
