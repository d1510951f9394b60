//! The per-turn record: one JSON object per line in `records.jsonl`, written by the replay
//! client (origin `replay`) and the proxy (origin `proxy`). The schema is documented field by
//! field in `docs/records.md`; this type is its definition.
//!
//! Time fields: `start_mono_ns` is absolute raw `CLOCK_MONOTONIC`; `anchor` holds both clocks
//! read at the same moment as `start_mono_ns`; every other `*_ns` field is an offset in ns from
//! `start_mono_ns`. Prompts, outputs and credentials are never part of a record unless the
//! operator asks for content explicitly (`content`).

use crate::clock::{Anchor, MonoNs};
use crate::timeline::Measured;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The record files of a directory (`tokentap proxy --records DIR`'s `records-*.jsonl`, a run's
/// `records.jsonl`): the `records*.jsonl` files, in name order (the proxy's names sort by time).
pub fn files_in(dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| {
            f.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("records") && n.ends_with(".jsonl"))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Current schema version, written as `v`.
pub const SCHEMA_VERSION: u32 = 1;

/// Who wrote the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `tokentap replay`.
    Replay,
    /// `tokentap proxy`.
    Proxy,
}

crate::vocabulary! {
    /// How the turn ended.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Status {
        /// A complete response arrived.
        Ok = "ok",
        /// An error status, a transport error, or a stream that broke.
        Failed = "failed",
        /// The turn timeout fired; the request was cancelled.
        TimedOut = "timed_out",
        /// Never sent: an earlier turn of the conversation failed, or the run stopped first.
        Aborted = "aborted",
        /// In flight when the client went away or the process stopped.
        Cancelled = "cancelled",
    }
}

crate::vocabulary! {
    /// Whose fault an error was (pingora's habit): a record's `error.source` and the
    /// `source` label of the request counters.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum ErrorSource {
        /// The server: refused, reset, error status, broken stream.
        Upstream = "upstream",
        /// The client side: it went away, sent something invalid.
        Downstream = "downstream",
        /// tokentap itself: a timeout it enforced, a stop, a bug.
        Internal = "internal",
    }
}

/// What went wrong with a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnError {
    /// Whose fault.
    pub source: ErrorSource,
    /// One of [`ErrorKind`] (a string, so records of other versions still read).
    pub kind: String,
    /// Human-readable detail (never contains credentials or prompt text).
    pub message: String,
}

crate::vocabulary! {
    /// Every `error.kind` a record can carry: one closed vocabulary for the replay and the
    /// proxy, so the same event has the same name on both sides (docs/records.md lists them all;
    /// a test checks it does).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum ErrorKind {
        /// no connection to the server (refused, unreachable, DNS; the proxy's TLS to an upstream too)
        Connect = "connect",
        /// the replay's TLS handshake failed (e.g. a certificate it does not trust)
        Tls = "tls",
        /// the server's connection broke or closed after the request was sent: before any response byte, or in the middle of the response
        Reset = "reset",
        /// the response head could not be read as HTTP
        HttpHead = "http_head",
        /// the server answered with an error status
        HttpStatus = "http_status",
        /// error objects inside an SSE stream (the proxy: a Responses or Messages API response with an `error` event, `response.failed` or an error object; the message is the server's), or a second response's events on one Responses or Messages stream
        StreamError = "stream_error",
        /// the stream ended (by its framing or the connection's close) before its end marker: `data: [DONE]` (chat; the replay), `response.completed` / `response.incomplete` / `response.failed` (Responses API; the proxy), `message_stop` (Messages API; the proxy)
        StreamWithoutDone = "stream_without_done",
        /// an event of a Responses or Messages API stream whose data was not JSON
        MalformedEvent = "malformed_event",
        /// the stream ended inside an event
        StreamCutMidEvent = "stream_cut_mid_event",
        /// an SSE event or line past `--max-event-bytes`
        EventTooLarge = "event_too_large",
        /// a JSON (non-streamed) response past 64 MiB
        ResponseTooLarge = "response_too_large",
        /// the replay's turn timeout fired; the request was cancelled
        TurnTimeout = "turn_timeout",
        /// the proxy's upstream sent no response head within `--upstream-timeout`
        Timeout = "timeout",
        /// the proxy's upstream stream was silent longer than `--upstream-idle-timeout`
        IdleTimeout = "idle_timeout",
        /// in flight when the replay was stopped (Ctrl-C, the shutdown future)
        Cancelled = "cancelled",
        /// the proxy's client went away before the response ended
        ClientGone = "client_gone",
        /// cut by the proxy at the end of its shutdown grace period
        Shutdown = "shutdown",
        /// not sent: an earlier turn of the trajectory did not end `ok`
        PreviousTurnFailed = "previous_turn_failed",
        /// not sent: issuing stopped first
        Stopped = "stopped",
        /// the replay could not build the request body
        Build = "build",
        /// the conversation id is not a valid header value
        SessionHeader = "session_header",
        /// request headers past the proxy's `--max-header-bytes`
        HeadersTooLarge = "headers_too_large",
        /// a request body past the proxy's `--max-body-bytes`
        BodyTooLarge = "body_too_large",
        /// the client's request body broke while the proxy read it
        RequestBody = "request_body",
        /// `--inject-usage` could not read the request as JSON (forwarded untouched)
        BadJson = "bad_json",
        /// an HTTP/1.1 request without exactly one `Host`
        BadHost = "bad_host",
        /// `CONNECT`: the proxy does not open tunnels
        MethodNotAllowed = "method_not_allowed",
        /// the client's request body stalled past `--body-timeout`
        RequestBodyTimeout = "request_body_timeout",
        /// every connection of the replica was in use past `--upstream-queue-timeout`
        UpstreamBusy = "upstream_busy",
        /// a bug or an impossible state in tokentap
        Internal = "internal",
    }
}

impl TurnError {
    /// An error of `kind` whose fault was `source`.
    pub fn new(source: ErrorSource, kind: ErrorKind, message: impl Into<String>) -> TurnError {
        TurnError {
            source,
            kind: kind.as_str().to_string(),
            message: message.into(),
        }
    }
}

crate::vocabulary! {
    /// Which clock stamped the response's arrival instants.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum RxClock {
        /// The kernel's software receive timestamp (`SO_TIMESTAMPNS`): when the bytes reached
        /// the host, independent of when the reading thread ran.
        Kernel = "kernel",
        /// The reading thread, right after the read returned.
        User = "user",
    }
}

crate::vocabulary! {
    /// Where a reference token count (OSL, TPOT denominator, ISL) came from
    /// (docs/benchmark.md#reference-tokens).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
    #[serde(rename_all = "snake_case")]
    pub enum CountSource {
        /// The model's tokenizer through its chat template, as the reference counts: the
        /// benchmark's own number.
        Tokenizer = "tokenizer",
        /// The chat template failed; the reference's text fallback was counted (as it would be).
        TokenizerFallback = "tokenizer_fallback",
        /// The server's usage (`completion_tokens`, `prompt_tokens`): not the reference's count.
        Usage = "usage",
        /// One token per text chunk: nothing better was available.
        Chunks = "chunks",
    }
}

impl CountSource {
    /// The reference tokenizer produced it (directly or through its fallback).
    pub fn is_reference(self) -> bool {
        matches!(
            self,
            CountSource::Tokenizer | CountSource::TokenizerFallback
        )
    }
}

/// One turn: one request and its response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub v: u32,
    /// Who wrote it.
    pub origin: Origin,
    /// Logical conversation id (`<id>__repeat_<pass>` from pass 2 on); for the proxy, the
    /// session header's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    /// The dataset's conversation id, without any `__repeat_N` suffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_conversation_id: Option<String>,
    /// Pass over the dataset, 1-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass: Option<u32>,
    /// 0-based index of this client turn within its conversation / session.
    pub turn_index: u32,
    /// The dataset row's `turn` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_turn: Option<u32>,
    /// Trajectory sequence number in issue order (replay), 0-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<u64>,
    /// Replay slot (0..concurrency) that ran the trajectory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
    /// The request path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// Where the request went: the proxy's replica, or the replay's endpoint URL when the run
    /// has several endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The request's `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The request's `stream`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Messages in the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<u32>,
    /// Request body size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<u64>,
    /// How the turn ended.
    pub status: Status,
    /// The response's status, when a head arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// What went wrong, when something did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TurnError>,
    /// Issued while the performance window was open (replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_window: Option<bool>,
    /// Both shared clocks, read at `start_mono_ns`.
    pub anchor: Anchor,
    /// When the turn became due: end of its inter-turn delay (replay), absolute monotonic ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_mono_ns: Option<MonoNs>,
    /// The turn's start, absolute monotonic ns: the client's send instant, or the proxy's first
    /// request byte.
    pub start_mono_ns: MonoNs,
    /// Proxy only: request forwarded upstream, ns after start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded_ns: Option<u64>,
    /// Proxy only: pieces of the response too big to hold (`--max-event-bytes`): SSE events
    /// dropped unparsed, a JSON body or kept output let go. Forwarded and stamped all the same;
    /// what they carried (tokens, usage, content) is missing from the record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oversized_events: Option<u32>,
    /// Proxy only: the proxy asked the server for usage the client had not asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_injected: Option<bool>,
    /// Replay only: the clock of the response instants (`kernel` when every read carried the
    /// kernel's receive timestamp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_clock: Option<RxClock>,
    /// Replay only: how long the bytes of the first token waited in the socket for the client
    /// (user-space read instant − kernel receive instant), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_lag_ttft_ns: Option<u64>,
    /// Replay only: the largest such wait over the turn's reads, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_lag_max_ns: Option<u64>,
    /// Replay only: times the request was sent again because a kept-alive connection closed
    /// before any response byte (absent = 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    /// Replay only: the response's `Date` header as Unix seconds — the server's clock, which
    /// bounds this host's clock offset against it (`tokentap merge` reports the skew between
    /// shards' hosts from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_date_s: Option<u64>,
    /// `"2"` when the turn went over HTTP/2 (the client's connection for the replay, the
    /// client's side for the proxy); absent for HTTP/1.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_version: Option<String>,
    /// When the turn ended for its client, ns after start: the last response byte, the error,
    /// the timeout or the cancel (0 for a turn never sent). The reference's "complete".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
    /// Output tokens counted the reference's way (docs/benchmark.md#reference-tokens: through the
    /// chat template when the output has reasoning or tool calls, else its text); absent for an
    /// empty output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub osl: Option<u64>,
    /// The TPOT denominator: tokens that arrived after the first chunk, counted like `osl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_tokens: Option<u64>,
    /// Source of `osl` and `tpot_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub osl_source: Option<CountSource>,
    /// Input tokens of the request, the reference's way (the whole prompt through the chat
    /// template with the generation prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isl: Option<u64>,
    /// Where `isl` came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isl_source: Option<CountSource>,
    /// Request headers the operator chose to record (never `Authorization` or cookies).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// What the wire showed: timings, tokens, chunks (flattened into the record).
    #[serde(flatten)]
    pub measured: Measured,
    /// Prompt and output text, only when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<serde_json::Value>,
}

impl TurnRecord {
    /// A record with its identity and start set and everything else empty.
    pub fn new(origin: Origin, anchor: Anchor) -> Self {
        TurnRecord {
            v: SCHEMA_VERSION,
            origin,
            conversation_id: None,
            source_conversation_id: None,
            pass: None,
            turn_index: 0,
            dataset_turn: None,
            trajectory: None,
            slot: None,
            route: None,
            upstream: None,
            model: None,
            stream: None,
            messages: None,
            request_bytes: None,
            status: Status::Ok,
            http_status: None,
            error: None,
            in_window: None,
            anchor,
            scheduled_mono_ns: None,
            start_mono_ns: anchor.mono_ns,
            forwarded_ns: None,
            oversized_events: None,
            usage_injected: None,
            rx_clock: None,
            rx_lag_ttft_ns: None,
            rx_lag_max_ns: None,
            retries: None,
            server_date_s: None,
            http_version: None,
            end_ns: None,
            osl: None,
            tpot_tokens: None,
            osl_source: None,
            isl: None,
            isl_source: None,
            headers: BTreeMap::new(),
            measured: Measured::default(),
            content: None,
        }
    }

    /// Absolute monotonic instant of the last byte, if the turn got that far.
    pub fn end_mono_ns(&self) -> Option<MonoNs> {
        self.measured.e2e_ns.map(|e| self.start_mono_ns + e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::ChunkStamp;

    #[test]
    fn jsonl_roundtrip_and_flattened_timing() {
        let mut r = TurnRecord::new(
            Origin::Replay,
            Anchor {
                wall_ns: 10,
                mono_ns: 20,
            },
        );
        r.conversation_id = Some("c1".into());
        r.measured.ttft_ns = Some(5);
        r.measured.chunks.push(ChunkStamp {
            at_ns: 5,
            tokens: 1,
            text: true,
        });
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains("\"ttft_ns\":5"), "{line}");
        assert!(line.contains("\"chunks\":[[5,1,1]]"), "{line}");
        assert!(!line.contains('\n'));
        let back: TurnRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back, r);
    }
}

#[cfg(test)]
mod error_kinds_are_documented {
    use super::ErrorKind;

    /// docs/records.md's "Error kinds" table lists exactly the vocabulary, each with its meaning.
    #[test]
    fn the_table_is_the_vocabulary() {
        let doc = include_str!("../../docs/records.md");
        let start = doc.find("### Error kinds").expect("the section");
        let rows: Vec<(&str, &str)> = doc[start..]
            .lines()
            .skip_while(|l| !l.starts_with("|---"))
            .skip(1)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1].trim_matches('`'), cells[3])
            })
            .collect();
        let names: Vec<&str> = rows.iter().map(|r| r.0).collect();
        let want: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names, want,
            "docs/records.md lists the kinds of ErrorKind::ALL, in order"
        );
        for (k, (_, meaning)) in ErrorKind::ALL.iter().zip(&rows) {
            assert_eq!(*meaning, k.meaning(), "the meaning of `{}`", k.as_str());
            assert_eq!(ErrorKind::parse(k.as_str()), Some(*k));
        }
    }
}

#[cfg(test)]
mod fields_are_documented {
    use super::TurnRecord;
    use serde_json::Value;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    /// The records tokentap's replay and proxy wrote that the repository keeps: the earlier
    /// layouts' runs and proxies (testdata/run-layouts) and the real agents' sessions through the
    /// proxy (compare's fixtures).
    fn committed_records() -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).expect("a committed directory") {
                let p = e.expect("an entry").path();
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if p.is_dir() {
                    walk(&p, out);
                } else if name.starts_with("records") && name.ends_with(".jsonl") {
                    out.push(p);
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut out = Vec::new();
        walk(&root.join("testdata/run-layouts"), &mut out);
        walk(&root.join("compare/tests/fixtures/agents"), &mut out);
        out
    }

    fn keys(v: &Value, into: &mut BTreeSet<String>) {
        match v {
            Value::Object(o) => {
                for (k, x) in o {
                    into.insert(k.clone());
                    keys(x, into);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| keys(x, into)),
            _ => {}
        }
    }

    /// Every field of every committed record reads into [`TurnRecord`] and is named in
    /// docs/records.md (in a code span), so a field a writer adds cannot go undocumented once a
    /// record of it is committed.
    #[test]
    fn every_field_written_is_documented() {
        let doc = include_str!("../../docs/records.md");
        let named: BTreeSet<&str> = doc
            .split('`')
            .skip(1)
            .step_by(2)
            .flat_map(|span| span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
            .collect();
        let files = committed_records();
        assert!(files.len() >= 6, "committed records: {files:?}");
        let mut seen = BTreeSet::new();
        for f in &files {
            for (i, line) in std::fs::read_to_string(f).unwrap().lines().enumerate() {
                let v: Value = serde_json::from_str(line).unwrap();
                serde_json::from_value::<TurnRecord>(v.clone())
                    .unwrap_or_else(|e| panic!("{}:{}: {e}", f.display(), i + 1));
                keys(&v, &mut seen);
            }
        }
        let missing: Vec<&String> = seen
            .iter()
            .filter(|k| !named.contains(k.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "fields written but not in docs/records.md: {missing:?}"
        );
    }
}
