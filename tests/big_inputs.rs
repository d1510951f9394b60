//! Big inputs, bounded memory: `dataset validate` / `stats`, `compare` (every format, and the
//! wire) and `report` read files of 200 MB a line (or an array element) at a time and keep
//! per-turn facts, not text; `dataset capture` keeps its open sessions' state, its rows spilled
//! to disk. Each command runs as the binary and its peak resident memory is the kernel's own
//! figure for the child (`wait4`'s `ru_maxrss`, /proc's `VmHWM` at exit) — a bound, never a
//! timing. A line past 64 MiB is refused by number instead of read.
//!
//! The inputs are what the tools write, repeated to 200 MB with each copy's ids made its own:
//! the replay's and the proxy's records (with and without content) of a real replay through the
//! proxy to the sim, the MLPerf reference's `events.jsonl` (testdata/golden), AIPerf 0.13.0's
//! `profile_export.jsonl` (testdata/aiperf-0.13.0, written against the sim), a dataset from
//! `dataset synth`; only the inference-perf file is built from the hand-written fixture (no real
//! one here).
//!
//! Measured before the readers streamed (release build, same shapes): validate / stats 444 MB
//! on 200 MB; compare: aiperf 279 MB, mlperf 415 MB, inference-perf 1.5 GB, tokentap + wire
//! 452 MB (two 200 MB files), a 200 MB one-line JSON array 2.5 GB; report 401 MB.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tokentap_testkit::measure::{self, Measured};

const BIN: &str = env!("CARGO_BIN_EXE_tokentap");
const BIG: u64 = 200_000_000;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tokentap(args: &[&str]) -> Measured {
    measure::run(Command::new(BIN).args(args))
}

/// How many copies of `src` make at least `min` bytes.
fn copies_for(src: &Path, min: u64) -> usize {
    min.div_ceil(std::fs::metadata(src).unwrap().len().max(1)) as usize
}

/// Writes the non-blank lines of `src` to `dst` `copies` times; `copy(line, k)` makes the k-th
/// copy's line (its ids its own). Returns the lines written.
fn repeat(src: &Path, dst: &Path, copies: usize, copy: impl Fn(&str, usize) -> String) -> usize {
    let lines: Vec<String> = BufReader::new(std::fs::File::open(src).unwrap())
        .lines()
        .map(Result::unwrap)
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert!(!lines.is_empty(), "{} is empty", src.display());
    let mut out = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
    for k in 0..copies {
        for l in &lines {
            out.write_all(copy(l, k).as_bytes()).unwrap();
            out.write_all(b"\n").unwrap();
        }
    }
    out.flush().unwrap();
    lines.len() * copies
}

/// [`repeat`] until `dst` holds at least `min` bytes.
fn grow(src: &Path, dst: &Path, min: u64, copy: impl Fn(&str, usize) -> String) -> usize {
    repeat(src, dst, copies_for(src, min), copy)
}

/// Prefixes every value of the string fields `keys` with `k<k>-`.
fn rename(line: &str, k: usize, keys: &[&str]) -> String {
    let mut l = line.to_string();
    for key in keys {
        for sep in ["\":\"", "\": \""] {
            let pat = format!("\"{key}{sep}");
            l = l.replace(&pat, &format!("{pat}k{k}-"));
        }
    }
    l
}

fn assert_below(m: &Measured, what: &str, bound_mb: u64) {
    eprintln!("{what}: peak RSS {} MB (bound {bound_mb} MB)", m.peak_mb());
    assert!(
        m.peak_mb() < bound_mb,
        "{what}: peak RSS {} MB, bound {bound_mb} MB\nstderr: {}",
        m.peak_mb(),
        m.stderr
    );
}

#[test]
fn dataset_validate_and_stats_hold_one_conversation_not_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("d.jsonl");
    let p = ds.to_str().unwrap();
    let m = tokentap(&[
        "dataset",
        "synth",
        "--coding",
        "64",
        "--workflow",
        "256",
        "--scale",
        "3",
        "-o",
        p,
    ]);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    let size = std::fs::metadata(&ds).unwrap().len();
    assert!(size > BIG - 1_000_000, "{size} bytes");

    let m = tokentap(&["dataset", "validate", p]);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    assert!(m.stdout.starts_with("ok: 320 trajectories"), "{}", m.stdout);
    assert_below(&m, "dataset validate, 200 MB", 100);

    let m = tokentap(&["dataset", "stats", "--json", p]);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    let s: Value = serde_json::from_str(&m.stdout).unwrap();
    assert_eq!(s["total"]["trajectories"], 320);
    assert_below(&m, "dataset stats, 200 MB", 100);

    // A line past the bound is refused by its number, not read.
    let mut first = String::new();
    BufReader::new(std::fs::File::open(&ds).unwrap())
        .read_line(&mut first)
        .unwrap();
    let first = first.trim_end().to_string();
    let mut w = std::io::BufWriter::new(std::fs::File::create(&ds).unwrap());
    writeln!(w, "{first}").unwrap();
    w.write_all(b"{\"conversation_id\":\"").unwrap();
    let block = vec![b'x'; 1 << 20];
    for _ in 0..65 {
        w.write_all(&block).unwrap();
    }
    w.write_all(b"\"}\n").unwrap();
    w.flush().unwrap();
    drop(w);
    let m = tokentap(&["dataset", "validate", p]);
    assert_eq!(m.code, Some(1));
    assert!(
        m.stderr.contains(&format!("{p}:2: longer than 64 MiB")),
        "{}",
        m.stderr
    );
    assert_below(&m, "dataset validate, a 65 MiB line", 200);
}

/// A real run: the replay (outputs recorded) through the proxy to the sim, the proxy recording
/// the requests' and responses' content when `content` (`--record-content`). Returns the run
/// directory and the proxy's records directory.
fn real_run(dir: &Path, content: bool) -> (PathBuf, PathBuf) {
    let (run, wire) = (dir.join("run"), dir.join("wire"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let stack = tokentap_testkit::topology::Stack::proxied(
            tokentap_sim::SimConfig::zero_delay(),
            |c| {
                c.records_dir = Some(wire.clone());
                c.record_content = content;
            },
        )
        .await;
        let mut rc = stack.replay_config(Some(&run));
        rc.concurrency = 4;
        rc.include_usage = true;
        rc.record_outputs = true;
        let ds = tokentap_testkit::data::synth_dataset(2, 6, 0.2);
        let out = tokentap_replay::run_with(
            rc.resolve().unwrap(),
            Arc::clone(&ds),
            tokentap_replay::ProgressMode::Off,
            std::future::pending(),
        )
        .await
        .expect("the replay runs");
        assert!(out.summary.counts.total > 20);
        stack.shutdown(Duration::from_secs(5)).await;
    });
    (run, wire)
}

fn only_file(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
}

#[test]
fn compare_reads_200_mb_of_every_format_keeping_turns_not_text() {
    let dir = tempfile::tempdir().unwrap();
    let (run, wire) = real_run(dir.path(), false);
    // Our own replay's records against the wire, each 200 MB or more, copy for copy.
    let ids = ["conversation_id"];
    let (client, big_wire) = (
        dir.path().join("client.jsonl"),
        dir.path().join("wire.jsonl"),
    );
    let (client_src, wire_src) = (run.join("records.jsonl"), only_file(&wire));
    let copies = copies_for(&client_src, BIG).max(copies_for(&wire_src, BIG));
    let n = repeat(&client_src, &client, copies, |l, k| rename(l, k, &ids));
    repeat(&wire_src, &big_wire, copies, |l, k| rename(l, k, &ids));
    let (c, w) = (client.to_str().unwrap(), big_wire.to_str().unwrap());
    let m = tokentap(&[
        "compare", "--format", "tokentap", "--client", c, "--wire", w,
    ]);
    // Read whole: every turn of both files counted (how well they join is compare's own
    // tests' business).
    assert!(matches!(m.code, Some(0 | 2)), "{}\n{}", m.stdout, m.stderr);
    assert!(
        m.stdout.contains(&format!("({n} turns"))
            && m.stdout.contains(&format!("({n} completion records)")),
        "{}",
        m.stdout
    );
    assert_below(&m, "compare tokentap + wire, 2 × 200 MB", 400);
    std::fs::remove_file(&client).unwrap();

    let formats: [(&str, PathBuf, &[&str]); 2] = [
        (
            "aiperf",
            repo().join("testdata/aiperf-0.13.0/profile_export.jsonl"),
            &["x_request_id", "x_correlation_id", "conversation_id"],
        ),
        (
            "mlperf",
            repo().join("testdata/golden/mlperf-ea33275/events.jsonl"),
            &["sample_uuid", "conversation_id"],
        ),
    ];
    for (format, src, keys) in formats {
        let client = dir.path().join(format!("{format}.jsonl"));
        grow(&src, &client, BIG, |l, k| rename(l, k, keys));
        let c = client.to_str().unwrap();
        let m = tokentap(&["compare", "--format", format, "--client", c, "--wire", w]);
        assert!(matches!(m.code, Some(0 | 2)), "{format}: {}", m.stderr);
        assert!(m.stdout.contains("turns, clock"), "{}", m.stdout);
        assert_below(&m, &format!("compare {format}, 200 MB"), 200);
        std::fs::remove_file(&client).unwrap();
    }

    // inference-perf: one JSON array, read an element at a time.
    let fixture: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(
            repo().join("compare/tests/fixtures/inference-perf-lifecycle.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let client = dir.path().join("lifecycle.json");
    let elements: Vec<String> = fixture
        .iter()
        .map(|r| serde_json::to_string_pretty(r).unwrap())
        .collect();
    let mut out = std::io::BufWriter::new(std::fs::File::create(&client).unwrap());
    out.write_all(b"[").unwrap();
    let (mut bytes, mut k) = (0u64, 0);
    while bytes < BIG {
        for e in &elements {
            if bytes > 0 {
                out.write_all(b",\n").unwrap();
            }
            out.write_all(e.as_bytes()).unwrap();
            bytes += e.len() as u64 + 2;
        }
        k += 1;
    }
    out.write_all(b"]\n").unwrap();
    out.flush().unwrap();
    drop(out);
    let c = client.to_str().unwrap();
    let m = tokentap(&[
        "compare",
        "--format",
        "inference-perf",
        "--client",
        c,
        "--wire",
        w,
    ]);
    assert!(matches!(m.code, Some(0 | 2)), "{}", m.stderr);
    assert!(
        m.stdout.contains(&format!("({} turns", k * fixture.len())),
        "{}",
        m.stdout
    );
    assert_below(&m, "compare inference-perf, 200 MB", 200);
    std::fs::remove_file(&client).unwrap();

    // A file of another kind on one line (a 79 MB JSON array) is refused from its first bytes,
    // unread.
    let mut f = std::io::BufWriter::new(std::fs::File::create(&client).unwrap());
    f.write_all(b"[").unwrap();
    for i in 0..10_000_000 {
        write!(f, "{}{i}", if i > 0 { "," } else { "" }).unwrap();
    }
    f.write_all(b"]\n").unwrap();
    f.flush().unwrap();
    drop(f);
    let m = tokentap(&["compare", "--format", "aiperf", "--client", c, "--wire", w]);
    assert_eq!(m.code, Some(1));
    assert!(
        m.stderr
            .contains("not an AIPerf profile_export.jsonl: it is a JSON array of non-objects"),
        "{}",
        m.stderr
    );
    assert_below(&m, "compare, a 79 MB one-line array", 200);
}

#[test]
fn report_reads_200_mb_of_records_keeping_no_content() {
    let dir = tempfile::tempdir().unwrap();
    let (run, _wire) = real_run(dir.path(), false);
    let records = run.join("records.jsonl");
    let small = dir.path().join("small.jsonl");
    std::fs::rename(&records, &small).unwrap();
    let n = grow(&small, &records, BIG, |l, k| {
        rename(l, k, &["conversation_id"])
    });
    // The summary of the grown run counts its records.
    let sp = run.join("summary.json");
    let mut s: Value = serde_json::from_str(&std::fs::read_to_string(&sp).unwrap()).unwrap();
    s["counts"]["total"] = n.into();
    std::fs::write(&sp, serde_json::to_string(&s).unwrap()).unwrap();
    let m = tokentap(&["report", run.to_str().unwrap(), "--format", "json"]);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    let r: Value = serde_json::from_str(&m.stdout).unwrap();
    assert!(r.is_object());
    assert_below(&m, "report, 200 MB of records", 400);
}

/// `dataset capture` holds its open sessions' state, not the records: the proxy's records with
/// content of a real run (`--record-content`), each copy its own sessions, at 200 MB and at
/// 400 MB under the same bound, the larger at most a few MB above the smaller — what grows is the
/// count of open sessions (a few KB each here: ids, message hashes, offsets into the spill), not
/// the bytes read (docs/usage.md#dataset-capture). 1 GB takes this debug build about two
/// minutes, so it is measured by hand: 62 MB. Before the rows were spilled (debug build):
/// 200 MB → 743 MB, 1 GB → 3.6 GB.
#[test]
fn capture_holds_the_open_sessions_not_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let (_, wire) = real_run(dir.path(), true);
    let src = only_file(&wire);
    let out = dir.path().join("captured.jsonl");
    let o = out.to_str().unwrap();
    // One copy: what each copy comes to.
    let m = tokentap(&[
        "dataset",
        "capture",
        "--records",
        src.to_str().unwrap(),
        "-o",
        o,
    ]);
    assert_eq!(m.code, Some(0), "{}", m.stderr);
    let one = trajectories_captured(&m.stderr);
    assert!(one >= 8, "{}", m.stderr);
    let records = dir.path().join("records");
    std::fs::create_dir(&records).unwrap();
    let mut peaks = Vec::new();
    for (size, what) in [(BIG, "200 MB"), (2 * BIG, "400 MB")] {
        let copies = copies_for(&src, size);
        let n = repeat(&src, &records.join("records-big.jsonl"), copies, |l, k| {
            rename(l, k, &["conversation_id"])
        });
        let m = tokentap(&[
            "dataset",
            "capture",
            "--records",
            records.to_str().unwrap(),
            "-o",
            o,
        ]);
        assert_eq!(m.code, Some(0), "{}", m.stderr);
        assert!(
            m.stderr
                .contains(&format!(": {n} of {n} records in 1 files")),
            "{}",
            m.stderr
        );
        assert_eq!(
            trajectories_captured(&m.stderr),
            one * copies,
            "{}",
            m.stderr
        );
        assert_below(&m, &format!("dataset capture, {what} of records"), 100);
        peaks.push(m.peak_mb());
    }
    assert!(
        peaks[1] < peaks[0] + 20,
        "twice the records, {} MB → {} MB: the memory grows with the input",
        peaks[0],
        peaks[1]
    );
}

/// The trajectories a capture's report says it wrote.
fn trajectories_captured(report: &str) -> usize {
    report
        .strip_prefix("captured ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
