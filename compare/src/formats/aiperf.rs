//! NVIDIA AIPerf `profile_export.jsonl` (checked against aiperf 0.13.0's real output) and its
//! summary `profile_export_aiperf.json`.
//!
//! One line per request: `metadata` (`x_request_id` and `x_correlation_id`, sent as the
//! `X-Request-ID` / `X-Correlation-ID` headers; `conversation_id`, `turn_index`;
//! `request_start_ns`, wall-clock epoch ns; `was_cancelled`) and `metrics`, each a
//! `{value, unit}` pair: `time_to_first_token`, `inter_token_latency` (AIPerf's per-request mean:
//! (request latency − TTFT) / (output tokens − 1)), `request_latency`, `output_sequence_length`
//! (its own tokenizer's count, or the server's with `--use-server-token-count`) and
//! `usage_completion_tokens`. A failed request carries `error` and no timing metrics.
//!
//! Decisions:
//! - Session = `x_correlation_id`: that is the value on the wire (the proxy keys sessions by it
//!   with `--session-header X-Correlation-ID`); AIPerf's `conversation_id` names the dataset
//!   conversation, which several sessions may replay.
//! - Output tokens claimed = `output_sequence_length` (what AIPerf's throughput uses), else
//!   `usage_completion_tokens`.
//! - Published claims come from the summary's `p50`/`p90`/`p99` of `time_to_first_token`,
//!   `inter_token_latency`, `request_latency` and `output_sequence_length`.

use super::json::{document, lines_of, object_line, to_ms, Source, Text, Uint};
use crate::client::{ClientRun, ClientTurn, Clock, Metric, Published};
use crate::error::CompareError;
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::path::Path;

/// One line of `profile_export.jsonl`: just the fields read (the rest is skipped unbuilt).
#[derive(Deserialize)]
struct Line {
    metadata: Option<Meta>,
    #[serde(default)]
    metrics: Option<Metrics>,
    /// Present and not null: the request failed.
    #[serde(default)]
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Meta {
    x_request_id: Option<Text>,
    x_correlation_id: Option<Text>,
    conversation_id: Option<Text>,
    turn_index: Option<Uint>,
    request_start_ns: Option<Uint>,
    was_cancelled: Option<bool>,
}

#[derive(Deserialize, Default)]
struct Metrics {
    time_to_first_token: Option<Measure>,
    inter_token_latency: Option<Measure>,
    request_latency: Option<Measure>,
    output_sequence_length: Option<Measure>,
    usage_completion_tokens: Option<Measure>,
}

#[derive(Deserialize)]
struct Measure {
    value: Option<f64>,
    unit: Option<String>,
}

const KIND: &str = "an AIPerf profile_export.jsonl record";

/// Reads `profile_export.jsonl` a line at a time.
pub fn load(path: &Path) -> Result<ClientRun, CompareError> {
    read(path, Source::File(path))
}

/// Parses a whole `profile_export.jsonl` text (tests, the fuzzer).
pub fn parse(path: &Path, text: &str) -> Result<ClientRun, CompareError> {
    read(path, Source::Text(text))
}

fn read(path: &Path, src: Source<'_>) -> Result<ClientRun, CompareError> {
    let mut turns = Vec::new();
    lines_of(path, src, "cannot read the client file", |line, text| {
        turns.push(turn(path, line, text)?);
        Ok(())
    })?;
    Ok(run(turns))
}

fn run(turns: Vec<ClientTurn>) -> ClientRun {
    ClientRun {
        clock: Clock::Wall,
        turns,
        published: None,
        notes: Vec::new(),
        checks: Vec::new(),
        levels: Vec::new(),
        relative_starts: false,
        totals: Vec::new(),
    }
}

fn turn(path: &Path, line: usize, text: &str) -> Result<ClientTurn, CompareError> {
    let l: Line = object_line(path, line, text, KIND)?;
    let meta = l.metadata.ok_or_else(|| {
        CompareError::parse(
            path,
            line,
            "no `metadata` object: not an AIPerf profile_export.jsonl record",
        )
    })?;
    let metrics = l.metrics.unwrap_or_default();
    let mut t = ClientTurn::new(line);
    t.request_id = meta.x_request_id.map(|x| x.0);
    t.session = meta.x_correlation_id.or(meta.conversation_id).map(|x| x.0);
    t.turn = meta.turn_index.map(|x| x.0 as u32);
    t.start_ns = meta.request_start_ns.map(|x| x.0);
    t.ok = meta.was_cancelled != Some(true) && l.error.is_none();
    let ms = |key: &str, m: &Option<Measure>| metric_ms(path, line, key, m.as_ref());
    t.values.set(
        Metric::Ttft,
        ms("time_to_first_token", &metrics.time_to_first_token)?,
    );
    t.values.set(
        Metric::Itl,
        ms("inter_token_latency", &metrics.inter_token_latency)?,
    );
    t.values.set(
        Metric::E2e,
        ms("request_latency", &metrics.request_latency)?,
    );
    let raw = |m: &Option<Measure>| m.as_ref().and_then(|m| m.value);
    t.values.set(
        Metric::OutputTokens,
        raw(&metrics.output_sequence_length).or_else(|| raw(&metrics.usage_completion_tokens)),
    );
    Ok(t)
}

/// `metrics[key].value` converted to ms from `metrics[key].unit`.
fn metric_ms(
    path: &Path,
    line: usize,
    key: &str,
    m: Option<&Measure>,
) -> Result<Option<f64>, CompareError> {
    let Some(value) = m.and_then(|m| m.value).filter(|v| v.is_finite()) else {
        return Ok(None);
    };
    let unit = m.and_then(|m| m.unit.as_deref()).unwrap_or("ms");
    to_ms(value, unit).map(Some).ok_or_else(|| {
        CompareError::parse(
            path,
            line,
            format!("metrics.{key}.unit is {unit:?}: expected ns, us, ms or s"),
        )
    })
}

/// The summary's statistics of one metric.
#[derive(Deserialize)]
struct Stats {
    unit: Option<String>,
    p50: Option<f64>,
    p90: Option<f64>,
    p99: Option<f64>,
}

#[derive(Deserialize)]
struct Summary {
    time_to_first_token: Option<Stats>,
    inter_token_latency: Option<Stats>,
    request_latency: Option<Stats>,
    output_sequence_length: Option<Stats>,
}

/// Reads the published p50/p90/p99 from `profile_export_aiperf.json` (refused past 64 MiB).
pub fn load_summary(path: &Path) -> Result<Published, CompareError> {
    let bytes = document(path, "cannot read the AIPerf summary")?;
    let text = std::str::from_utf8(&bytes).map_err(|e| CompareError::File {
        path: path.to_path_buf(),
        msg: format!("not UTF-8: {e}"),
    })?;
    parse_summary(path, text)
}

/// Reads the published p50/p90/p99 from the text of `profile_export_aiperf.json`.
pub fn parse_summary(path: &Path, text: &str) -> Result<Published, CompareError> {
    let v: Summary = serde_json::from_str(text).map_err(|e| CompareError::File {
        path: path.to_path_buf(),
        msg: format!("not an AIPerf profile_export_aiperf.json: {e}"),
    })?;
    let mut p = Published {
        source: path.display().to_string(),
        ..Published::default()
    };
    for (m, stats) in [
        (Metric::Ttft, v.time_to_first_token),
        (Metric::Itl, v.inter_token_latency),
        (Metric::E2e, v.request_latency),
        (Metric::OutputTokens, v.output_sequence_length),
    ] {
        let Some(stats) = stats else { continue };
        let unit = stats.unit.as_deref().unwrap_or("ms");
        let conv = |x: f64| match m {
            Metric::OutputTokens => Some(x),
            _ => to_ms(x, unit),
        };
        let q = |x: Option<f64>| x.filter(|x| x.is_finite()).and_then(conv);
        let row = [q(stats.p50), q(stats.p90), q(stats.p99)];
        if row.iter().any(Option::is_some) {
            p.stats[m.idx()] = Some(row);
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"metadata":{"session_num":0,"x_request_id":"r1","x_correlation_id":"c1","conversation_id":"session_000000","turn_index":1,"request_start_ns":1795954478047383011,"was_cancelled":false},"metrics":{"time_to_first_token":{"value":78.2,"unit":"ms"},"request_latency":{"value":0.234,"unit":"s"},"inter_token_latency":{"value":7.4,"unit":"ms"},"output_sequence_length":{"value":22,"unit":"tokens"},"usage_completion_tokens":{"value":20,"unit":"tokens"}}}"#;

    #[test]
    fn reads_ids_clock_and_units() {
        let text = format!("{LINE}\n\n{{\"metadata\":{{\"x_request_id\":\"r2\",\"request_start_ns\":5}},\"metrics\":{{}},\"error\":{{\"code\":500}}}}\n");
        let run = parse(Path::new("p.jsonl"), &text).unwrap();
        assert_eq!(run.clock, Clock::Wall);
        let t = &run.turns[0];
        assert_eq!(t.request_id.as_deref(), Some("r1"));
        assert_eq!(t.session.as_deref(), Some("c1"));
        assert_eq!(t.turn, Some(1));
        assert_eq!(
            t.start_ns,
            Some(1_795_954_478_047_383_011),
            "ns must not go through f64"
        );
        assert_eq!(t.values.get(Metric::Ttft), Some(78.2));
        assert_eq!(t.values.get(Metric::E2e), Some(234.0));
        assert_eq!(t.values.get(Metric::OutputTokens), Some(22.0));
        assert!(t.ok);
        let failed = &run.turns[1];
        assert_eq!(failed.at, 3);
        assert!(!failed.ok);
        assert_eq!(failed.values.get(Metric::Ttft), None);
    }

    #[test]
    fn bad_unit_and_missing_metadata_name_the_line() {
        let bad = LINE.replace(
            r#""value":78.2,"unit":"ms""#,
            r#""value":78.2,"unit":"hours""#,
        );
        let e = parse(Path::new("p.jsonl"), &bad).unwrap_err().to_string();
        assert!(
            e.contains("p.jsonl:1") && e.contains("time_to_first_token.unit"),
            "{e}"
        );
        let e = parse(Path::new("p.jsonl"), "{}\n").unwrap_err().to_string();
        assert!(e.contains("p.jsonl:1") && e.contains("metadata"), "{e}");
    }

    #[test]
    fn summary_percentiles() {
        let p = parse_summary(
            Path::new("s.json"),
            r#"{"time_to_first_token":{"unit":"ms","p50":42.5,"p90":68.2,"p99":77.1},"request_latency":{"unit":"s","p50":0.2,"p90":0.3,"p99":0.4},"output_sequence_length":{"unit":"tokens","p50":20,"p90":21,"p99":22}}"#,
        )
        .unwrap();
        assert_eq!(
            p.get(Metric::Ttft),
            Some([Some(42.5), Some(68.2), Some(77.1)])
        );
        assert_eq!(
            p.get(Metric::E2e),
            Some([Some(200.0), Some(300.0), Some(400.0)])
        );
        assert_eq!(
            p.get(Metric::OutputTokens),
            Some([Some(20.0), Some(21.0), Some(22.0)])
        );
        assert_eq!(p.get(Metric::Itl), None);
    }
}
