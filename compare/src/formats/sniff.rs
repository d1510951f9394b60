//! What a client file is, from its first bytes: every reader checks that its file is of its own
//! format before reading it, and `--format auto` picks the reader. A file of another tool is
//! refused with what it looks like ("this is a guidellm benchmarks.json: use --format guidellm"),
//! never read as something it is not.
//!
//! The head of the file is read ([`HEAD_BYTES`]). JSONL formats are told apart by the keys of
//! their first record; JSON documents by their top-level shape and the keys near its start, and
//! when the head does not tell, by the keys of the whole first object ([`top_level_keys`]).
//! `--format` given: a file the sniffing cannot place is read in that format, never vetoed; only a
//! file it knows to be another format is refused.

use super::format::Format;
use crate::error::CompareError;
use serde_json::{Map, Value};
use std::io::Read;
use std::path::Path;

/// How much of a file identifying it reads.
pub const HEAD_BYTES: usize = 256 << 10;

/// What a file looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A format `tokentap compare` reads.
    Client(Format),
    /// A tokentap proxy's records: the wire side, not a client's.
    ProxyRecords,
    /// Another tool's file `compare` does not read, as a person would name it.
    Other(&'static str),
    /// Nothing recognisable (with what was seen): not JSON, or JSON of no record's shape.
    Unknown(String),
    /// JSON objects whose keys the detection cannot place (with what was seen): refused by
    /// `--format auto`, read when `--format` names the format.
    Unplaced(String),
    /// No record at all.
    Empty,
}

impl Kind {
    /// The file as a person would name it.
    pub fn describe(&self) -> String {
        match self {
            Kind::Client(f) => f.file_name().to_string(),
            Kind::ProxyRecords => "tokentap proxy records (origin proxy)".into(),
            Kind::Other(what) => (*what).to_string(),
            Kind::Unknown(why) | Kind::Unplaced(why) => {
                format!("not a file tokentap compare knows ({why})")
            }
            Kind::Empty => "empty".into(),
        }
    }
}

/// Identifies the file at `path` from its head; a document whose head does not tell (its first
/// object longer than the head: a result file whose telling keys come after megabytes of
/// arrays) by the keys of its first top-level object, read through to its end.
pub fn sniff(path: &Path) -> Result<Kind, CompareError> {
    let io = |source| CompareError::Io {
        what: "cannot read the client file",
        path: path.to_path_buf(),
        source,
    };
    let mut head = Vec::with_capacity(64 << 10);
    std::fs::File::open(path)
        .and_then(|f| f.take(HEAD_BYTES as u64).read_to_end(&mut head))
        .map_err(io)?;
    let kind = sniff_bytes(&head);
    if matches!(kind, Kind::Unplaced(_)) && head.len() == HEAD_BYTES {
        let f = std::fs::File::open(path).map_err(io)?;
        let keys = top_level_keys(std::io::BufReader::with_capacity(256 << 10, f)).map_err(io)?;
        return Ok(by_keys(&keys).unwrap_or(kind));
    }
    Ok(kind)
}

/// A document's format by the keys of its first top-level object.
fn by_keys(keys: &[String]) -> Option<Kind> {
    let has = |k: &str| keys.iter().any(|x| x == k);
    if has("ttfts") && has("itls") {
        return Some(Kind::Client(if has("model_id") {
            Format::VllmBench
        } else {
            Format::SglangBench
        }));
    }
    if has("per_turn_metrics") && has("model_id") {
        return Some(Kind::Client(Format::VllmBench));
    }
    if has("benchmarks") {
        return Some(Kind::Client(Format::Guidellm));
    }
    None
}

/// The keys of the first top-level JSON object of `r`, read byte by byte to its closing brace
/// (values are skipped by their brackets and strings, not parsed, so Python's bare `Infinity`
/// and any size pass): memory is the keys. At most 4096 keys are kept.
pub fn top_level_keys(r: impl std::io::BufRead) -> std::io::Result<Vec<String>> {
    let mut keys = Vec::new();
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    // At depth 1, the next string is a key (after `{` or `,`).
    let mut want_key = false;
    let mut key: Option<Vec<u8>> = None;
    for b in r.bytes() {
        let b = b?;
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
                if let Some(k) = key.take() {
                    if keys.len() < 4096 {
                        keys.push(String::from_utf8_lossy(&k).into_owned());
                    }
                    want_key = false;
                }
                continue;
            }
            if let Some(k) = key.as_mut() {
                k.push(b);
            }
            continue;
        }
        match b {
            b'"' => {
                in_str = true;
                if depth == 1 && want_key {
                    key = Some(Vec::new());
                }
            }
            b'{' | b'[' => {
                depth += 1;
                want_key = depth == 1 && b == b'{';
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            b',' if depth == 1 => want_key = true,
            _ => {}
        }
    }
    Ok(keys)
}

/// Identifies a file from its first bytes (`head`, possibly cut anywhere).
pub fn sniff_bytes(head: &[u8]) -> Kind {
    let text = String::from_utf8_lossy(head);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    match t.as_bytes().first() {
        None => Kind::Empty,
        Some(b'[') => array(t),
        Some(b'{') => object(t),
        Some(_) => Kind::Unknown("it is not JSON: it does not start with { or [".into()),
    }
}

/// A file starting with `{`: JSONL whose first line is a whole object, or one JSON document.
fn object(t: &str) -> Kind {
    let first = t.lines().next().unwrap_or("");
    if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(first) {
        if let Some(k) = record(&o) {
            return k;
        }
    }
    // One document (pretty-printed, or a single line): its keys near the start.
    let has = |k: &str| t.contains(&format!("\"{k}\""));
    if has("benchmarks") && (has("requests") || has("metrics") || has("args")) {
        return Kind::Client(Format::Guidellm);
    }
    if has("ttfts") && has("itls") && has("model_id") {
        return Kind::Client(Format::VllmBench);
    }
    if has("ttfts") && has("itls") {
        return Kind::Client(Format::SglangBench);
    }
    if has("per_turn_metrics") && has("model_id") {
        return Kind::Client(Format::VllmBench);
    }
    if has("records") && has("input_config") {
        return Kind::Other("an AIPerf profile_export_aiperf.json (the summary: give the per-request profile_export.jsonl beside it)");
    }
    if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(t) {
        if let Some(k) = record(&o) {
            return k;
        }
        let keys: Vec<&str> = o.keys().map(String::as_str).take(6).collect();
        return Kind::Unplaced(format!("a JSON object with keys {}", keys.join(", ")));
    }
    Kind::Unplaced("a JSON object whose first line is not a record of a known format".into())
}

/// One JSONL record (or a whole one-object document) by its keys.
fn record(o: &Map<String, Value>) -> Option<Kind> {
    if o.contains_key("origin") && (o.contains_key("v") || o.contains_key("turn_index")) {
        return Some(match o["origin"].as_str() {
            Some("proxy") => Kind::ProxyRecords,
            _ => Kind::Client(Format::Tokentap),
        });
    }
    // The agents: Claude Code's result (json) or its stream-json's first event; Codex's first
    // `exec --json` event.
    let kind = o.get("type").and_then(Value::as_str);
    if o.contains_key("session_id")
        && (kind == Some("result") && o.contains_key("num_turns")
            || kind == Some("system") && o.get("subtype").and_then(Value::as_str) == Some("init"))
    {
        return Some(Kind::Client(Format::ClaudeCode));
    }
    if kind == Some("thread.started") && o.contains_key("thread_id") {
        return Some(Kind::Client(Format::Codex));
    }
    if o.get("event_type").is_some_and(Value::is_string) {
        return Some(Kind::Client(Format::Mlperf));
    }
    if o.contains_key("benchmarks") {
        return Some(Kind::Client(Format::Guidellm));
    }
    if o.contains_key("ttfts") && o.contains_key("itls") {
        return Some(if o.contains_key("model_id") {
            Kind::Client(Format::VllmBench)
        } else {
            Kind::Client(Format::SglangBench)
        });
    }
    if o.contains_key("metadata") && o.contains_key("metrics") {
        return Some(Kind::Client(Format::Aiperf));
    }
    if o.contains_key("start_time") && o.contains_key("end_time") && o.contains_key("request") {
        return Some(Kind::Other(
            "one inference-perf request (its per_request_lifecycle_metrics.json is a list of them)",
        ));
    }
    None
}

/// A file starting with `[`: a JSON array, told by its first element.
fn array(t: &str) -> Kind {
    let rest = t[1..].trim_start();
    if rest.starts_with(']') {
        return Kind::Empty;
    }
    // The first element: read with a streaming deserializer, which stops after it.
    let mut de = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    match de.next() {
        Some(Ok(Value::Object(o)))
            if o.contains_key("ttft_ms") && o.contains_key("start_time_ms") =>
        {
            Kind::Client(Format::VllmMultiTurn)
        }
        // Either instant names the format; a record missing the other is the reader's to name.
        Some(Ok(Value::Object(o)))
            if o.contains_key("start_time") || o.contains_key("end_time") =>
        {
            Kind::Client(Format::InferencePerf)
        }
        Some(Ok(Value::Object(o))) => match record(&o) {
            Some(k) => Kind::Unknown(format!(
                "a JSON array of records; each looks like {}",
                k.describe()
            )),
            None => Kind::Unplaced(format!(
                "a JSON array of objects with keys {}",
                o.keys()
                    .map(String::as_str)
                    .take(6)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        },
        Some(Ok(_)) => Kind::Unknown("a JSON array of non-objects".into()),
        // Cut by the head: an element longer than the head; say what starts it.
        Some(Err(_)) | None => {
            if rest.contains("\"ttft_ms\"") && rest.contains("\"start_time_ms\"") {
                Kind::Client(Format::VllmMultiTurn)
            } else if rest.contains("\"start_time\"") || rest.contains("\"end_time\"") {
                Kind::Client(Format::InferencePerf)
            } else {
                Kind::Unplaced("a JSON array whose first element is not a known record".into())
            }
        }
    }
}

/// Checks that `path` is a file of `format`: anything else is refused, naming what it is.
pub fn expect(path: &Path, format: Format) -> Result<(), CompareError> {
    let kind = sniff(path)?;
    match kind {
        Kind::Client(f) if f == format => Ok(()),
        // An empty file reads as no turns in every format.
        Kind::Empty => Ok(()),
        Kind::Client(f) => Err(refuse(
            path,
            format,
            &format!("this is {}: use --format {}", f.file_name(), f.as_str()),
        )),
        Kind::ProxyRecords => Err(refuse(
            path,
            format,
            "these are a tokentap proxy's records (origin proxy): give them as --wire; the client file is what the client wrote",
        )),
        // Given a format, JSON objects the detection cannot place are read in it: its reader's
        // errors name what is wrong.
        Kind::Unplaced(_) => Ok(()),
        Kind::Unknown(what) => Err(CompareError::File {
            path: path.to_path_buf(),
            msg: format!(
                "not {}: it is {what}, not a file tokentap compare knows",
                format.file_name()
            ),
        }),
        Kind::Other(what) => Err(refuse(path, format, &format!("this is {what}"))),
    }
}

/// The format of the file at `path` (`--format auto`).
pub fn detect(path: &Path) -> Result<Format, CompareError> {
    match sniff(path)? {
        Kind::Client(f) => Ok(f),
        Kind::ProxyRecords => Err(CompareError::File {
            path: path.to_path_buf(),
            msg: "these are a tokentap proxy's records (origin proxy): give them as --wire; --client is the file the client wrote".into(),
        }),
        Kind::Empty => Err(CompareError::File {
            path: path.to_path_buf(),
            msg: "empty: --format auto cannot tell its format; give --format".into(),
        }),
        other => Err(CompareError::File {
            path: path.to_path_buf(),
            msg: format!(
                "{}; tokentap compare reads {}",
                other.describe(),
                Format::read()
                    .map(|f| format!("{} (--format {})", f.file_name(), f.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

fn refuse(path: &Path, format: Format, why: &str) -> CompareError {
    CompareError::File {
        path: path.to_path_buf(),
        msg: format!("not {} ({why})", format.file_name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Kind {
        sniff_bytes(s.as_bytes())
    }

    #[test]
    fn each_format_by_its_first_record() {
        assert_eq!(
            k("{\"v\":1,\"origin\":\"replay\",\"turn_index\":0}\n{\"v\":1}"),
            Kind::Client(Format::Tokentap)
        );
        assert_eq!(k("{\"v\":1,\"origin\":\"proxy\"}\n"), Kind::ProxyRecords);
        assert_eq!(
            k("{\"event_type\": \"session.started\", \"timestamp_ns\": 1}\n"),
            Kind::Client(Format::Mlperf)
        );
        assert_eq!(
            k("{\"metadata\":{\"x_request_id\":\"r\"},\"metrics\":{}}\n"),
            Kind::Client(Format::Aiperf)
        );
        assert_eq!(
            k("[\n {\n  \"start_time\": 1.0,\n  \"end_time\": 2.0,\n  \"request\": \"{}\"\n }\n]"),
            Kind::Client(Format::InferencePerf)
        );
        assert_eq!(k("  \n"), Kind::Empty);
        assert_eq!(k("[]"), Kind::Empty);
    }

    #[test]
    fn top_level_keys_skip_values_of_any_size_and_python_numbers() {
        let doc = r#"{"a": [1, {"x": "}"}, [2]], "b\"c": "s,\"t", "r": Infinity, "n": {"deep": {"k": 1}}, "z": []}
{"next": 1}"#;
        let keys = top_level_keys(doc.as_bytes()).unwrap();
        assert_eq!(keys, ["a", "b\\\"c", "r", "n", "z"]);
    }

    #[test]
    fn other_tools_are_named() {
        let g = "{\n  \"metadata\": {\"version\": 1},\n  \"args\": {},\n  \"benchmarks\": [{\"requests\": {\"successful\": []}}]\n}";
        assert_eq!(k(g), Kind::Client(Format::Guidellm));
        let v = "{\"date\": \"20261204\", \"backend\": \"openai-chat\", \"model_id\": \"m\", \"ttfts\": [0.1], \"itls\": [[]]}";
        assert_eq!(k(v), Kind::Client(Format::VllmBench));
        let s = "{\"backend\": \"sglang-oai-chat\", \"request_rate\": Infinity, \"ttfts\": [0.1], \"itls\": [[]]}";
        assert_eq!(k(s), Kind::Client(Format::SglangBench));
        assert!(matches!(k("a,b\n1,2\n"), Kind::Unknown(_)));
    }

    #[test]
    fn a_cut_head_still_tells_an_array() {
        let long = format!(
            "[{{\"start_time\": 1.0, \"end_time\": 2.0, \"request\": \"{}",
            "x".repeat(1000)
        );
        assert_eq!(k(&long), Kind::Client(Format::InferencePerf));
    }
}
