//! Big client files of the whole-document formats, read by `tokentap compare` as they stream:
//! a `vllm bench serve` result and a guidellm `benchmarks.json` of 100 MB each, an SGLang
//! `bench_serving` line of 10 MB — each made from the real tool's output committed under
//! `compare/tests/fixtures/` (its per-request values repeated). Detected by their structure (the
//! keys that tell come after megabytes of arrays), read with `--format` given or not, and held
//! to a peak resident memory under twice the file (the kernel's own figure for the child,
//! `tokentap_testkit::measure`). Before, each was refused: "not a file tokentap compare knows"
//! past a 256 KiB head, and "a file of this kind is a few MB at most" past 64 MiB.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use tokentap_testkit::measure::{self, Measured};

const BIN: &str = env!("CARGO_BIN_EXE_tokentap");

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("compare/tests/fixtures")
        .join(p)
}

fn read(p: &str) -> Value {
    let text = std::fs::read_to_string(fixture(p)).unwrap();
    // SGLang's Python writes a bare Infinity.
    serde_json::from_str(&text.replace("Infinity", "null")).unwrap()
}

/// Writes `v` with each array at a `(pointer, k)` of `repeat` written `k` times over, a copy at a
/// time (the test's own memory stays at the small fixture: a child's peak resident set counts
/// its parent's from before it execs). Returns the bytes written.
fn write_repeated(path: &Path, v: &Value, repeat: &[(&str, usize)]) -> u64 {
    use std::io::Write;
    let mut v = v.clone();
    let mut pieces: Vec<(String, Vec<String>, usize)> = Vec::new();
    for (i, (ptr, k)) in repeat.iter().enumerate() {
        let slot = v.pointer_mut(ptr).unwrap_or_else(|| panic!("{ptr}"));
        let items = slot
            .as_array()
            .unwrap()
            .iter()
            .map(|x| serde_json::to_string(x).unwrap())
            .collect();
        let marker = format!("@@{i}@@");
        *slot = Value::String(marker.clone());
        pieces.push((format!("\"{marker}\""), items, *k));
    }
    let mut text = serde_json::to_string(&v).unwrap();
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    loop {
        let next = pieces
            .iter()
            .filter_map(|(m, items, k)| text.find(m.as_str()).map(|at| (at, m.len(), items, *k)))
            .min_by_key(|x| x.0);
        let Some((at, len, items, k)) = next else {
            break;
        };
        out.write_all(&text.as_bytes()[..at]).unwrap();
        out.write_all(b"[").unwrap();
        for r in 0..k {
            for (j, x) in items.iter().enumerate() {
                if r > 0 || j > 0 {
                    out.write_all(b",").unwrap();
                }
                out.write_all(x.as_bytes()).unwrap();
            }
        }
        out.write_all(b"]").unwrap();
        text = text[at + len..].to_string();
    }
    out.write_all(text.as_bytes()).unwrap();
    out.flush().unwrap();
    drop(out);
    std::fs::metadata(path).unwrap().len()
}

/// The pointers of `v`'s per-request arrays (those of `n` entries at its top level).
fn per_request(v: &Value, n: usize) -> Vec<String> {
    v.as_object()
        .unwrap()
        .iter()
        .filter(|(_, x)| x.as_array().is_some_and(|a| a.len() == n))
        .map(|(k, _)| format!("/{k}"))
        .collect()
}

fn compare(client: &Path, wire: &str, format: Option<&str>) -> Measured {
    let mut cmd = Command::new(BIN);
    cmd.arg("compare")
        .arg("--client")
        .arg(client)
        .arg("--wire")
        .arg(fixture(wire));
    if let Some(f) = format {
        cmd.args(["--format", f]);
    }
    measure::run(&mut cmd)
}

/// Read and judged (0: every claim passed, 2: one failed — the wire holds one copy of the
/// requests), never refused (1); peak resident memory under `bound` MB.
fn judged(m: &Measured, what: &str, format: &str, turns: usize, file_bytes: u64, bound: u64) {
    assert!(
        m.code == Some(0) || m.code == Some(2),
        "{what}: exit {:?}\n{}{}",
        m.code,
        m.stdout,
        m.stderr
    );
    assert!(
        m.stdout.contains(&format!("{format} client vs the wire"))
            && m.stdout.contains(&format!("({turns} turns")),
        "{what}:\n{}",
        m.stdout
    );
    eprintln!(
        "{what}: {} MB file, peak RSS {} MB (bound {bound} MB)",
        file_bytes / 1_000_000,
        m.peak_mb()
    );
    assert!(m.peak_mb() < bound, "{what}: peak RSS {} MB", m.peak_mb());
}

#[test]
fn a_100_mb_vllm_bench_result_is_detected_and_read_as_it_streams() {
    let dir = tempfile::tempdir().unwrap();
    let v =
        read("vllm-bench/chat/openai-chat-infqps-concurrency4-tokentap-sim-20261204-055926.json");
    let n = v["ttfts"].as_array().unwrap().len();
    let one = serde_json::to_vec(&v).unwrap().len();
    let k = 100_000_000 / one + 1;
    let ptrs = per_request(&v, n);
    let repeat: Vec<(&str, usize)> = ptrs.iter().map(|p| (p.as_str(), k)).collect();
    let path = dir.path().join("vllm-bench.json");
    let bytes = write_repeated(&path, &v, &repeat);
    let wire = "vllm-bench/chat/proxy-records.jsonl";
    let bound = 2 * bytes / 1_000_000;
    judged(
        &compare(&path, wire, None),
        "vllm-bench auto",
        "vllm-bench",
        n * k,
        bytes,
        bound,
    );
    judged(
        &compare(&path, wire, Some("vllm-bench")),
        "vllm-bench --format",
        "vllm-bench",
        n * k,
        bytes,
        bound,
    );
}

#[test]
fn a_10_mb_sglang_bench_line_is_detected_by_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let v = read("sglang-bench/chat/sglang-oai-chat.jsonl");
    let n = v["ttfts"].as_array().unwrap().len();
    let one = serde_json::to_vec(&v).unwrap().len();
    let k = 10_000_000 / one + 1;
    let ptrs = per_request(&v, n);
    let repeat: Vec<(&str, usize)> = ptrs.iter().map(|p| (p.as_str(), k)).collect();
    let path = dir.path().join("sglang.jsonl");
    let bytes = write_repeated(&path, &v, &repeat);
    let head = std::fs::read(&path).unwrap();
    let at = |k: &str| {
        let needle = format!("\"{k}\"");
        head.windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .unwrap()
    };
    assert!(at("itls") > 256 << 10, "the telling key is past the head");
    let wire = "sglang-bench/chat/proxy-records.jsonl";
    // A line is read whole (the JSONL bound, 64 MiB a line): the line, its strict-JSON copy and
    // the output texts kept as join keys.
    let bound = 6 * bytes / 1_000_000;
    judged(
        &compare(&path, wire, None),
        "sglang-bench auto",
        "sglang-bench",
        n * k,
        bytes,
        bound,
    );
}

#[test]
fn a_100_mb_guidellm_file_is_read_as_it_streams() {
    let dir = tempfile::tempdir().unwrap();
    let v = read("guidellm/c148.json");
    let reqs = &v["benchmarks"][0]["requests"]["successful"];
    let per_copy = serde_json::to_vec(reqs).unwrap().len();
    let k = 100_000_000 / per_copy + 1;
    let turns: usize = v["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            ["successful", "incomplete", "errored"]
                .iter()
                .map(|o| b["requests"][o].as_array().map_or(0, Vec::len))
                .sum::<usize>()
        })
        .sum::<usize>()
        + reqs.as_array().unwrap().len() * (k - 1);
    let path = dir.path().join("benchmarks.json");
    let bytes = write_repeated(&path, &v, &[("/benchmarks/0/requests/successful", k)]);
    assert!(bytes > 64 << 20, "past the old whole-document bound");
    judged(
        &compare(&path, "guidellm/c148-wire.jsonl", None),
        "guidellm",
        "guidellm",
        turns,
        bytes,
        2 * bytes / 1_000_000,
    );
}

/// A value no client writes — a per-request array nested a million deep — is an error naming
/// the file and where, not a crash (in a key compare skips it costs nothing: skipped unbuilt).
#[test]
fn a_pathological_value_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.json");
    let deep = "[".repeat(1_000_000) + &"]".repeat(1_000_000);
    std::fs::write(
        &path,
        format!("{{\"model_id\":\"m\",\"ttfts\":{deep},\"itls\":[[]],\"latencies\":[0.2]}}"),
    )
    .unwrap();
    let m = compare(
        &path,
        "vllm-bench/chat/proxy-records.jsonl",
        Some("vllm-bench"),
    );
    assert_eq!(m.code, Some(1), "{}{}", m.stdout, m.stderr);
    assert!(
        m.stderr.contains("deep.json") && m.stderr.contains("column"),
        "{}",
        m.stderr
    );
}
