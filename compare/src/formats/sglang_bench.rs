//! SGLang's `python -m sglang.bench_serving --output-file F --output-details`: one JSON line
//! appended per run (checked against SGLang 0.5.23's real output, its Python and its Rust client,
//! `compare/tests/fixtures/sglang-bench/`).
//!
//! A line is not strict JSON: the Python client writes `"request_rate": Infinity`. Per request
//! `i`, in dataset order, the warm-up request excluded: `ttfts[i]` (seconds), `itls[i]` (seconds,
//! per chunk), `output_lens[i]` (the server's usage — which SGLang does not ask for, so the
//! requested length), `generated_texts[i]`, `errors[i]` (`""` when it succeeded). No start
//! times, no request or response ids, no per-request latency. Published (ms): `median_`,
//! `p90_`, `p99_` of `ttft`, `tpot` and `e2e_latency`.
//!
//! Decisions:
//! - Joined by the output text: the only key the file shares with the wire. Run the proxy with
//!   `--record-content`; a text that is not unique on either side is not used. Without content
//!   there is no join, and compare says so.
//! - ITL per request = the mean of its `itls` (per chunk: per token when a chunk carries one);
//!   the published ITL claims are SGLang's `tpot` ones, a per-request mean, as here (its `itl`
//!   percentiles pool every chunk gap).
//! - Several runs in one file (one line each) are levels, judged one by one, named by their
//!   `max_concurrency` and `request_rate`.

use super::json::{lines_of, read_map, Source};
use crate::client::{ClientRun, ClientTurn, Clock, Level, Metric, Published};
use crate::error::CompareError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// What is read of a run's line: the per-request arrays and its top-level numbers (settings,
/// published percentiles); the rest skipped unbuilt.
#[derive(Default)]
struct Run {
    ttfts: Vec<f64>,
    itls: Vec<Vec<f64>>,
    output_lens: Vec<f64>,
    generated_texts: Vec<String>,
    errors: Vec<String>,
    numbers: BTreeMap<String, f64>,
}

impl<'de> Deserialize<'de> for Run {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Run;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an SGLang bench_serving run object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Run, A::Error> {
                let mut r = Run::default();
                r.numbers = read_map(map, |k, m| {
                    match k {
                        "ttfts" => r.ttfts = m.next_value()?,
                        "itls" => r.itls = m.next_value()?,
                        "output_lens" => r.output_lens = m.next_value()?,
                        "generated_texts" => r.generated_texts = m.next_value()?,
                        "errors" => r.errors = m.next_value()?,
                        _ => return Ok(false),
                    }
                    Ok(true)
                })?;
                Ok(r)
            }
        }
        d.deserialize_map(V)
    }
}

/// Reads an SGLang `bench_serving` output file a line (a run) at a time: a line past the JSONL
/// line bound (64 MiB) is refused by number.
pub fn load(path: &Path) -> Result<ClientRun, CompareError> {
    read(path, Source::File(path))
}

/// Parses the text of an SGLang `bench_serving` output file.
pub fn parse(path: &Path, text: &str) -> Result<ClientRun, CompareError> {
    read(path, Source::Text(text))
}

fn read(path: &Path, src: Source<'_>) -> Result<ClientRun, CompareError> {
    let mut turns = Vec::new();
    let mut levels = Vec::new();
    lines_of(path, src, "cannot read the client file", |n, line| {
        let run: Run = serde_json::from_str(&strict(line)).map_err(|e| {
            CompareError::parse(path, n, format!("not an SGLang bench_serving line: {e}"))
        })?;
        add_run(path, n, run, &mut turns, &mut levels)
    })?;
    let (published, levels) = if levels.len() == 1 {
        (levels.pop().and_then(|l| l.published), Vec::new())
    } else {
        (None, levels)
    };
    Ok(ClientRun {
        clock: Clock::Mono,
        turns,
        published,
        notes: vec![
            "SGLang's bench_serving keeps no start times and no request ids: joined by output text (proxy --record-content)".into(),
        ],
        checks: Vec::new(),
        levels,
        relative_starts: false,
        totals: Vec::new(),
    })
}

/// One run (line `n`): its requests as turns, and a level.
fn add_run(
    path: &Path,
    n: usize,
    run: Run,
    turns: &mut Vec<ClientTurn>,
    levels: &mut Vec<Level>,
) -> Result<(), CompareError> {
    if run.ttfts.is_empty() {
        return Err(CompareError::parse(
            path,
            n,
            "no per-request `ttfts`: run bench_serving with --output-details",
        ));
    }
    let first = turns.len();
    for i in 0..run.ttfts.len() {
        let mut t = ClientTurn::new(turns.len() + 1);
        t.ok = run.errors.get(i).is_none_or(|e| e.is_empty());
        t.output_text = run
            .generated_texts
            .get(i)
            .cloned()
            .filter(|s| !s.is_empty());
        if t.ok {
            t.values.set(Metric::Ttft, Some(run.ttfts[i] * 1e3));
            let gaps = run.itls.get(i).map(Vec::as_slice).unwrap_or(&[]);
            if !gaps.is_empty() {
                let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
                t.values.set(Metric::Itl, Some(mean * 1e3));
            }
            t.values
                .set(Metric::OutputTokens, run.output_lens.get(i).copied());
        }
        turns.push(t);
    }
    let v = &run.numbers;
    levels.push(Level {
        name: format!(
            "concurrency {} rate {}",
            v.get("max_concurrency")
                .map_or("-".to_string(), |c| c.to_string()),
            v.get("request_rate")
                .map_or("inf".to_string(), |r| r.to_string())
        ),
        turns: first..turns.len(),
        published: Some(published(path, n, v)).filter(|p| p.stats.iter().any(Option::is_some)),
    });
    Ok(())
}

/// The line as strict JSON: Python's bare `Infinity`, `-Infinity` and `NaN` become `null`.
fn strict(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_str = false;
    let mut escaped = false;
    let mut rest = line;
    while let Some(c) = rest.chars().next() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if c == '"' {
            in_str = true;
        }
        let word = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|w| rest.starts_with(w));
        match word {
            Some(w) => {
                out.push_str("null");
                rest = &rest[w.len()..];
            }
            None => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// A run's published p50 (`median_`), p90 and p99 of TTFT, TPOT (as ITL) and E2E.
fn published(path: &Path, line: usize, v: &BTreeMap<String, f64>) -> Published {
    let mut p = Published {
        source: format!("{}:{line}", path.display()),
        ..Published::default()
    };
    for (key, metric) in [
        ("ttft", Metric::Ttft),
        ("tpot", Metric::Itl),
        ("e2e_latency", Metric::E2e),
    ] {
        let get = |k: String| v.get(&k).copied();
        let row = [
            get(format!("median_{key}_ms")),
            get(format!("p90_{key}_ms")),
            get(format!("p99_{key}_ms")),
        ];
        if row.iter().any(Option::is_some) {
            p.stats[metric.idx()] = Some(row);
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::strict;

    #[test]
    fn python_non_finite_numbers_become_null_outside_strings() {
        assert_eq!(
            strict(r#"{"r": Infinity, "s": "Infinity NaN", "n": -Infinity, "m": NaN}"#),
            r#"{"r": null, "s": "Infinity NaN", "n": null, "m": null}"#
        );
        assert_eq!(strict(r#"{"e": "a\"Infinity"}"#), r#"{"e": "a\"Infinity"}"#);
    }
}
