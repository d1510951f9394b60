//! MLPerf Endpoints `events.jsonl` (docs/benchmark.md#client-formats) and, beside it, what the
//! client published: `performance/result_summary.json` and `scores.json`.
//!
//! Per sample, from the events: TTFT = `sample.recv_first` − `sample.issued`; E2E =
//! `sample.complete` − `sample.issued`; the chunk gap = the mean gap between the sample's
//! receive events (`recv_first`, then one `recv_non_first` per later content or reasoning chunk
//! with `stream_all_chunks`; outputs with tool calls are left out, since the reference emits no
//! event for a tool-call chunk after the first); with `--tokenizer`, the output as the reference accumulated it
//! (`sample.complete` data) is counted the reference's way: OSL (output tokens) and the TPOT
//! denominator, so TPOT = (complete − recv_first) / that count, the reference's own TPOT. An
//! `error.*` event marks a sample failed; a sample issued while performance tracking was on is
//! *tracked* (the population of the published summary).
//!
//! Published claims: `result_summary.json`'s TTFT, TPOT, latency (E2E) and OSL percentiles
//! (numpy `lower`, ns → ms) are the claims, judged against the wire over the tracked turns with
//! the same percentile method. Checks of the published files themselves:
//! - the summary agrees with its own events: every series recomputed from `events.jsonl` with
//!   the reference's arithmetic (count, total, p50/p90/p99) — TPOT and OSL need `--tokenizer`;
//! - no impossible value: a negative TPOT (a completion stamped before its first chunk);
//! - OSL is the reference tokenizer's count of the published outputs;
//! - `scores.json` is the reference scorer's result for these outputs (needs `--dataset`).

use super::json::{document, lines_of, object_line, Source, Text, Uint};
use crate::client::Verdict;
use crate::client::{Check, ClientRun, ClientTurn, Clock, Metric, Published};
use crate::error::CompareError;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokentap_dataset::Dataset;
use tokentap_mlperf::result_summary::{self, Rollup, Series};
use tokentap_mlperf::scorer::{ModelMessage, Scorer, TurnKey};
use tokentap_mlperf::{ModelOutput, RefTokenizer};

/// What the parser can use besides the events.
#[derive(Default)]
pub struct Extras<'a> {
    /// `performance/result_summary.json` (published claims), if found.
    pub result_summary: Option<PathBuf>,
    /// `scores.json`, if found.
    pub scores: Option<PathBuf>,
    /// The reference tokenizer, to count the client's outputs.
    pub tokenizer: Option<&'a RefTokenizer>,
    /// The dataset, to score them.
    pub dataset: Option<&'a Dataset>,
}

impl Extras<'_> {
    /// The reference's files beside `events.jsonl`.
    pub fn beside(events: &Path) -> (Option<PathBuf>, Option<PathBuf>) {
        let dir = events.parent().unwrap_or(Path::new("."));
        let rs = [
            dir.join("performance/result_summary.json"),
            dir.join("result_summary.json"),
        ]
        .into_iter()
        .find(|p| p.is_file());
        let sc = Some(dir.join("scores.json")).filter(|p| p.is_file());
        (rs, sc)
    }
}

#[derive(Default, Clone)]
struct Sample {
    at: usize,
    conversation: Option<String>,
    turn: Option<u32>,
    issued: Option<u64>,
    first: Option<u64>,
    last_recv: Option<u64>,
    recvs: u32,
    complete: Option<u64>,
    tokens: Option<f64>,
    /// What the output the reference accumulated (`sample.complete` data) gives; read when
    /// the event is, and the output itself kept only when the scorer needs it.
    output: Option<Output>,
    finish_reason: Option<String>,
    error: bool,
    tracked: bool,
}

/// The facts of one sample's output.
#[derive(Default, Clone)]
struct Output {
    tool_calls: bool,
    /// OSL and the TPOT denominator, the reference's way (with `--tokenizer`).
    counts: (Option<u64>, Option<u64>),
    /// The output, for the scorer (`scores.json` and `--dataset` given).
    kept: Option<Box<ModelOutput>>,
}

/// One line of `events.jsonl`: just the fields read.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    event_type: Option<Cow<'a, str>>,
    timestamp_ns: Option<Uint>,
    sample_uuid: Option<Text>,
    conversation_id: Option<Text>,
    turn: Option<Uint>,
    finish_reason: Option<Text>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
}

/// `sample.complete` data that is an object: the token count some versions publish.
#[derive(Deserialize)]
struct CountData {
    output_tokens: Option<f64>,
    n_tokens: Option<f64>,
}

/// The samples of an `events.jsonl`, in first-seen order.
struct Events {
    samples: Vec<Sample>,
    /// Completion order: the order the reference records its series in.
    completions: Vec<usize>,
    /// The file marks a performance window.
    saw_tracking: bool,
}

/// Reads MLPerf's `events.jsonl` (and its published files beside it): each issued sample a
/// client turn, in steps — the events, the reference's token counts, the turns, the notes and
/// the published claims.
pub fn parse(path: &Path, text: &str, x: &Extras<'_>) -> Result<ClientRun, CompareError> {
    read(path, Source::Text(text), x)
}

/// Like [`parse`], reading `events.jsonl` at `path` a line at a time.
pub fn load(path: &Path, x: &Extras<'_>) -> Result<ClientRun, CompareError> {
    read(path, Source::File(path), x)
}

fn read(path: &Path, src: Source<'_>, x: &Extras<'_>) -> Result<ClientRun, CompareError> {
    let keep = x.scores.is_some() && x.dataset.is_some();
    let Events {
        samples,
        completions,
        saw_tracking,
    } = read_events(path, src, x.tokenizer, keep)?;
    let mut turns = Vec::with_capacity(samples.len());
    let mut untracked = 0;
    let mut never_issued = 0;
    for s in &samples {
        let Some(issued) = s.issued else {
            never_issued += 1;
            continue;
        };
        if saw_tracking && !s.tracked {
            untracked += 1;
        }
        turns.push(turn_of(s, issued, saw_tracking));
    }

    let mut notes = Vec::new();
    if untracked > 0 {
        notes.push(format!(
            "{untracked} samples were issued outside the performance window; they were sent, so they are compared too (published claims are judged over the window only)"
        ));
    }
    if never_issued > 0 {
        notes.push(format!(
            "{never_issued} sample uuids have events but no sample.issued: ignored"
        ));
    }
    if x.tokenizer.is_none() {
        notes.push(
            "no --tokenizer: output tokens and the reference's TPOT cannot be counted from the events' outputs"
                .into(),
        );
    }

    // The published files.
    let mut checks = Vec::new();
    let mut published = None;
    if let Some(p) = &x.result_summary {
        let rs = read_json(p)?;
        published = Some(published_claims(p, &rs));
        let recomputed = recompute(&samples, &completions);
        checks.extend(summary_checks(&rs, &recomputed, x.tokenizer.is_some()));
    } else {
        notes.push(
            "no performance/result_summary.json beside events.jsonl: claims are recomputed from the events"
                .into(),
        );
    }
    if let Some(p) = &x.scores {
        let sc = read_json(p)?;
        checks.push(scores_check(&sc, &samples, x.dataset));
    }
    Ok(ClientRun {
        clock: Clock::Mono,
        turns,
        published,
        notes,
        checks,
        levels: Vec::new(),
        relative_starts: false,
        totals: Vec::new(),
    })
}

/// Folds the event lines into samples (by `sample_uuid`), with the performance window's marks.
/// Outputs are counted as their `sample.complete` is read and kept only if `keep`.
fn read_events(
    path: &Path,
    src: Source<'_>,
    tokenizer: Option<&RefTokenizer>,
    keep: bool,
) -> Result<Events, CompareError> {
    let mut f = Folding {
        events: Events {
            samples: Vec::new(),
            completions: Vec::new(),
            saw_tracking: false,
        },
        by_uuid: HashMap::new(),
        tracking: false,
    };
    lines_of(path, src, "cannot read the client file", |line, text| {
        let v: Event<'_> = object_line(path, line, text, "an MLPerf events.jsonl line")?;
        f.event(path, line, v, tokenizer, keep)
    })?;
    Ok(f.events)
}

/// The samples folded so far, with where each uuid's is and whether the window is open.
struct Folding {
    events: Events,
    by_uuid: HashMap<String, usize>,
    /// Inside the performance window.
    tracking: bool,
}

impl Folding {
    /// Folds the event at `line`: a mark of the performance window, or an event (or error) of a
    /// sample.
    fn event(
        &mut self,
        path: &Path,
        line: usize,
        v: Event<'_>,
        tokenizer: Option<&RefTokenizer>,
        keep: bool,
    ) -> Result<(), CompareError> {
        let kind = v.event_type.as_deref().ok_or_else(|| {
            CompareError::parse(
                path,
                line,
                "no `event_type` string: not an MLPerf events.jsonl line",
            )
        })?;
        let ts = v.timestamp_ns.map(|t| t.0);
        match kind {
            "session.start_performance_tracking" => {
                self.tracking = true;
                self.events.saw_tracking = true;
                return Ok(());
            }
            "session.stop_performance_tracking" => {
                self.tracking = false;
                return Ok(());
            }
            _ => {}
        }
        let Some(uuid) = v.sample_uuid.map(|u| u.0).filter(|u| !u.is_empty()) else {
            return Ok(());
        };
        let is_sample = kind.starts_with("sample.");
        let is_error = kind.starts_with("error.");
        if !is_sample && !is_error {
            return Ok(());
        }
        let samples = &mut self.events.samples;
        let idx = *self.by_uuid.entry(uuid).or_insert_with(|| {
            samples.push(Sample {
                at: line,
                ..Sample::default()
            });
            samples.len() - 1
        });
        let s = &mut samples[idx];
        if s.conversation.is_none() {
            s.conversation = v.conversation_id.map(|c| c.0);
        }
        if s.turn.is_none() {
            s.turn = v.turn.map(|t| t.0 as u32);
        }
        let need_ts = |ts: Option<u64>| {
            ts.ok_or_else(|| {
                CompareError::parse(
                    path,
                    line,
                    format!("{kind} without a `timestamp_ns` integer"),
                )
            })
        };
        match kind {
            "sample.issued" => {
                s.issued = Some(need_ts(ts)?);
                s.at = line;
                s.tracked = self.tracking;
            }
            "sample.recv_first" if s.first.is_none() => {
                let t = need_ts(ts)?;
                s.first = Some(t);
                s.last_recv = Some(t);
                s.recvs = 1;
            }
            "sample.recv_non_first" => {
                s.last_recv = Some(need_ts(ts)?);
                s.recvs += 1;
            }
            "sample.complete" => {
                s.complete = Some(need_ts(ts)?);
                s.finish_reason = v.finish_reason.map(|f| f.0);
                complete_data(s, v.data, path, line, tokenizer, keep)?;
                self.events.completions.push(idx);
            }
            _ if is_error => s.error = true,
            _ => {}
        }
        Ok(())
    }
}

/// Reads a `sample.complete`'s data into its sample: the token count some versions publish (an
/// object), or the output the reference accumulated (an array), counted and kept if `keep`.
fn complete_data(
    s: &mut Sample,
    data: Option<&RawValue>,
    path: &Path,
    line: usize,
    tokenizer: Option<&RefTokenizer>,
    keep: bool,
) -> Result<(), CompareError> {
    let data = data.map(RawValue::get).unwrap_or("").trim_start();
    if data.starts_with('{') {
        if let Ok(d) = serde_json::from_str::<CountData>(data) {
            s.tokens = d.output_tokens.or(d.n_tokens).filter(|n| n.is_finite());
        }
    } else if data.starts_with('[') {
        let value: Value = serde_json::from_str(data)
            .map_err(|e| CompareError::parse(path, line, format!("sample.complete data: {e}")))?;
        s.output = ModelOutput::from_event_data(&value).map(|o| Output {
            tool_calls: o.tool_calls.is_some(),
            counts: tokenizer.map_or((None, None), |tok| {
                (
                    tok.osl(&o).map(|c| c.tokens),
                    tok.tpot_tokens(&o).map(|c| c.tokens),
                )
            }),
            kept: keep.then(|| Box::new(o)),
        });
    }
    Ok(())
}

/// One issued sample as a client turn: its times from the issue instant, and the values the
/// reference's own counts give (`counts`: OSL, TPOT denominator).
fn turn_of(s: &Sample, issued: u64, saw_tracking: bool) -> ClientTurn {
    let mut t = ClientTurn::new(s.at);
    t.session = s.conversation.clone();
    t.turn = s.turn;
    t.start_ns = Some(issued);
    t.ok = !s.error && s.complete.is_some();
    t.tracked = !saw_tracking || s.tracked;
    let ms = |end: Option<u64>| end.map(|e| (e as f64 - issued as f64) / 1e6);
    let ttft = ms(s.first);
    let e2e = ms(s.complete);
    t.values.set(Metric::Ttft, ttft);
    t.values.set(Metric::E2e, e2e);
    // The reference emits no receive event for a tool-call chunk after the first, so its
    // gaps are only comparable with the wire's for outputs without tool calls.
    let tool_calls = s.output.as_ref().is_none_or(|o| o.tool_calls);
    if let (Some(f), Some(l), false) = (s.first, s.last_recv, tool_calls) {
        if s.recvs > 1 {
            t.values.set(
                Metric::ChunkGap,
                Some((l as f64 - f as f64) / f64::from(s.recvs - 1) / 1e6),
            );
        }
    }
    let (osl, tpot_tokens) = s.output.as_ref().map_or((None, None), |o| o.counts);
    t.values
        .set(Metric::OutputTokens, osl.map(|n| n as f64).or(s.tokens));
    if let (Some(f), Some(c), Some(n)) = (s.first, s.complete, tpot_tokens) {
        if n > 0 {
            t.values
                .set(Metric::Tpot, Some((c as f64 - f as f64) / n as f64 / 1e6));
        }
    }
    if let (Some(a), Some(b), Some(n)) = (ttft, e2e, s.tokens) {
        if n > 1.0 {
            t.values.set(Metric::Itl, Some((b - a) / (n - 1.0)));
        }
    }
    t
}

fn read_json(p: &Path) -> Result<Value, CompareError> {
    let bytes = document(p, "cannot read")?;
    serde_json::from_slice(&bytes).map_err(|e| CompareError::File {
        path: p.to_path_buf(),
        msg: format!("line {}, column {}: not JSON: {e}", e.line(), e.column()),
    })
}

/// The series a `result_summary.json` publishes, as [`Metric`]s (ns → ms for times).
const PUBLISHED: [(&str, Metric, f64); 4] = [
    ("ttft", Metric::Ttft, 1e-6),
    ("tpot", Metric::Tpot, 1e-6),
    ("latency", Metric::E2e, 1e-6),
    ("output_sequence_lengths", Metric::OutputTokens, 1.0),
];

fn published_claims(path: &Path, rs: &Value) -> Published {
    let mut p = Published {
        source: path.display().to_string(),
        lower: true,
        tracked_only: true,
        ..Published::default()
    };
    for (field, metric, scale) in PUBLISHED {
        let pct = &rs[field]["percentiles"];
        if !pct.is_object() {
            continue;
        }
        let get = |k: &str| pct.get(k).and_then(Value::as_f64).map(|v| v * scale);
        p.stats[metric.idx()] = Some([get("50.0"), get("90.0"), get("99.0")]);
    }
    p
}

/// The tracked series recomputed from the events, in the reference's recording order.
struct Recomputed {
    ttft: Vec<i64>,
    latency: Vec<i64>,
    tpot: Vec<f64>,
    osl: Vec<i64>,
    negative_tpot: usize,
}

fn recompute(samples: &[Sample], completions: &[usize]) -> Recomputed {
    let mut r = Recomputed {
        ttft: Vec::new(),
        latency: Vec::new(),
        tpot: Vec::new(),
        osl: Vec::new(),
        negative_tpot: 0,
    };
    // TTFT is recorded at the first chunk, in event order; approximated by issue order, which
    // does not change a percentile or a total.
    for s in samples.iter().filter(|s| s.tracked) {
        if let (Some(i), Some(f)) = (s.issued, s.first) {
            r.ttft.push(f as i64 - i as i64);
        }
    }
    for &i in completions {
        let s = &samples[i];
        if !s.tracked {
            continue;
        }
        let (Some(iss), Some(c)) = (s.issued, s.complete) else {
            continue;
        };
        r.latency.push(c as i64 - iss as i64);
        let (osl, tpot) = s.output.as_ref().map_or((None, None), |o| o.counts);
        if let Some(n) = osl {
            r.osl.push(n as i64);
        }
        if let (Some(f), Some(n)) = (s.first, tpot) {
            if let Some(v) = result_summary::tpot_ns(c as i64 - f as i64, n) {
                if v < 0.0 {
                    r.negative_tpot += 1;
                }
                r.tpot.push(v);
            }
        }
    }
    r
}

fn check(name: &str, verdict: Verdict, detail: String) -> Check {
    Check {
        name: name.into(),
        verdict,
        detail,
    }
}

fn summary_checks(rs: &Value, r: &Recomputed, tokenizer: bool) -> Vec<Check> {
    let series: [(&str, Option<Series>); 4] = [
        ("ttft", Some(Series::Int(r.ttft.clone()))),
        ("latency", Some(Series::Int(r.latency.clone()))),
        ("tpot", tokenizer.then(|| Series::Float(r.tpot.clone()))),
        (
            "output_sequence_lengths",
            tokenizer.then(|| Series::Int(r.osl.clone())),
        ),
    ];
    let mut out: Vec<Check> = series
        .into_iter()
        .map(|(field, s)| series_check(field, s, &rs[field]))
        .collect();
    // Impossible values.
    out.push(negative_tpot_check(rs, r));
    if tokenizer {
        out.push(osl_check(rs, r));
    }
    out
}

/// Whether the summary's `field` (`p`) is what the events give (`s`; `None` without the
/// tokenizer it needs): count, total, min, max and p50/p90/p99 equal.
fn series_check(field: &str, s: Option<Series>, p: &Value) -> Check {
    let name = format!("{field} matches events");
    let Some(s) = s else {
        return check(
            &name,
            Verdict::NoData,
            "needs --tokenizer (the reference counts these tokens itself)".into(),
        );
    };
    let Some(roll) = s.rollup() else {
        return check(&name, Verdict::NoData, "no sample in the events".into());
    };
    let diffs = rollup_diffs(p, &roll);
    if diffs.is_empty() {
        check(
            &name,
            Verdict::Pass,
            format!(
                "{} samples: count, total, min, max, p50/p90/p99 equal",
                roll.count
            ),
        )
    } else {
        check(&name, Verdict::Fail, diffs.join("; "))
    }
}

/// Where a published rollup `p` differs from the events' `roll`, each difference in words.
fn rollup_diffs(p: &Value, roll: &Rollup) -> Vec<String> {
    let mut diffs = Vec::new();
    if !p["percentiles"].is_object() {
        diffs.push("the summary has no percentiles".to_string());
    }
    let cmp =
        |what: &str, published: Option<f64>, ours: f64, diffs: &mut Vec<String>| match published {
            Some(v) if v == ours => {}
            Some(v) => diffs.push(format!("{what}: published {v}, events {ours}")),
            None => diffs.push(format!("{what}: not published")),
        };
    cmp("total", p["total"].as_f64(), roll.total, &mut diffs);
    cmp("min", p["min"].as_f64(), roll.min, &mut diffs);
    cmp("max", p["max"].as_f64(), roll.max, &mut diffs);
    for (q, k) in [(50.0, "50.0"), (90.0, "90.0"), (99.0, "99.0")] {
        cmp(
            &format!("p{}", k.trim_end_matches(".0")),
            p["percentiles"][k].as_f64(),
            roll.percentile(q).unwrap_or(f64::NAN),
            &mut diffs,
        );
    }
    diffs
}

/// TPOT is never negative, neither the published minimum nor any tracked sample's in the events.
fn negative_tpot_check(rs: &Value, r: &Recomputed) -> Check {
    let min_tpot = rs["tpot"]["min"].as_f64();
    let negative = min_tpot.is_some_and(|m| m < 0.0) || r.negative_tpot > 0;
    check(
        "tpot is never negative",
        if negative {
            Verdict::Fail
        } else {
            Verdict::Pass
        },
        if negative {
            format!(
                "impossible: published TPOT min {} ns{}: a completion stamped before its first chunk",
                min_tpot.map_or("?".to_string(), |m| m.to_string()),
                if r.negative_tpot > 0 {
                    format!(", {} tracked samples with complete < recv_first in the events", r.negative_tpot)
                } else {
                    String::new()
                }
            )
        } else {
            "every TPOT ≥ 0".into()
        },
    )
}

/// The published OSL total is the reference tokenizer's count of the published outputs.
fn osl_check(rs: &Value, r: &Recomputed) -> Check {
    let total = rs["output_sequence_lengths"]["total"].as_f64();
    let ours: i64 = r.osl.iter().sum();
    check(
        "osl is the reference tokenizer's count",
        if total == Some(ours as f64) {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        format!(
            "published OSL total {}, counted with the tokenizer from the published outputs {ours}",
            total.map_or("-".into(), |t| t.to_string())
        ),
    )
}

fn scores_check(sc: &Value, samples: &[Sample], dataset: Option<&Dataset>) -> Check {
    let name = "scores.json is the reference scorer's";
    let Some(ds) = dataset else {
        return check(
            name,
            Verdict::NoData,
            format!(
                "published inline accuracy {}; pass --dataset FILE to score the events' outputs again",
                sc["score"]
            ),
        );
    };
    let scorer = Scorer::new(ds);
    let issued: Vec<(TurnKey, Option<ModelMessage>)> = samples
        .iter()
        .filter(|s| s.issued.is_some())
        .filter_map(|s| {
            let o = s.output.as_ref().and_then(|o| o.kept.as_deref());
            let conv = s.conversation.as_deref()?;
            let turn = s.turn?;
            let (id, rep) = match conv.rsplit_once("__repeat_") {
                Some((c, r)) if !r.is_empty() && r.chars().all(|c| c.is_ascii_digit()) => {
                    (c.to_string(), r.parse().ok()?)
                }
                _ => (conv.to_string(), 1),
            };
            let model = o.map(|o| {
                let p = o.message_parts();
                ModelMessage {
                    content: Some(p.content),
                    reasoning_content: p.reasoning,
                    tool_calls: p.tool_calls,
                }
            });
            Some(((id, rep, turn), model))
        })
        .collect();
    let ours = scorer.scores(&issued).to_json();
    let mut diffs = Vec::new();
    if ours["score"] != sc["score"] {
        diffs.push(format!(
            "score: published {}, recomputed {}",
            sc["score"], ours["score"]
        ));
    }
    for k in ["issued", "expected", "observed", "missing", "scored"] {
        if ours["turns"][k] != sc["turns"][k] {
            diffs.push(format!(
                "turns.{k}: published {}, recomputed {}",
                sc["turns"][k], ours["turns"][k]
            ));
        }
    }
    if ours["per_turn"] != sc["per_turn"] {
        diffs.push("per_turn rows differ".into());
    }
    if diffs.is_empty() {
        check(
            name,
            Verdict::Pass,
            format!(
                "inline accuracy {} over {} turns, every per-turn score equal",
                sc["score"], sc["turns"]["scored"]
            ),
        )
    } else {
        check(name, Verdict::Fail, diffs.join("; "))
    }
}
