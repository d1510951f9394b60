//! `tokentap dataset capture`: a team's own agent sessions, as the proxy recorded them with
//! `--record-content`, written as an MLPerf agentic dataset (docs/usage.md#dataset-capture).
//!
//! ```text
//!  records-*.jsonl ──► one record a line (origin proxy, status ok, a measured route, content)
//!        │                 request in chat form (tokentap_core::convert: chat, Responses, Messages)
//!        ▼
//!  per session, in order: the new messages since the last turn ──► rows
//!        user messages → user rows; a run of tool messages → one tool row; the agent's copy of
//!        the previous answer → the assistant row (else the recorded output); delay_seconds =
//!        the wire's gap from the previous response's end to this request
//!        │ the history rewritten (compaction, a branch): a new trajectory `<session>.2`, …
//!        ▼
//!  each trajectory ends with its last recorded output; checked by the dataset's own rules
//!  (validate::check) ──► JSONL, first turn's start order
//! ```
//!
//! Memory is the open sessions' state, not the records: a trajectory keeps a hash of each message
//! its rows stand for (a request continues it when its messages begin with those); its rows, and
//! the answer that waits for the next turn, wait in an anonymous spill file ([`rows`]) until the
//! end, when the rows are copied out in first-turn order. A `previous_response_id` request's
//! history is known without rebuilding it (the trajectory's messages so far, then the previous
//! output), so a chain costs the same per turn at its 20,000th turn as at its second
//! (docs/benchmarks.md#dataset-capture-scriptscapture-speed).
//!
//! Nothing is guessed silently: what has no place in the dataset is named and counted in the
//! [`Report`] (records skipped and why, parts of requests with no chat form, requests whose new
//! messages make several client rows).

mod rows;

use crate::model::Conversation;
use crate::Dataset;
use rows::{Rows, Spill, Stored};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use tokentap_core::convert;
use tokentap_core::events::Api;
use tokentap_core::record::{Origin, Status, TurnRecord};

/// Counts tokens of a text: the model's tokenizer (`--tokenizer`) or the stand-in.
pub trait Tokens {
    /// The tokens of `text`.
    fn count(&self, text: &str) -> u64;
    /// What counted, for the report.
    fn describe(&self) -> String;
}

/// The stand-in tokenizer (4 bytes a token), when no `--tokenizer` is given.
pub struct StandIn;

impl Tokens for StandIn {
    fn count(&self, text: &str) -> u64 {
        tokentap_core::tokenize::count(text)
    }
    fn describe(&self) -> String {
        "the stand-in tokenizer (4 bytes a token; give --tokenizer for the model's)".into()
    }
}

/// What to capture.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Record files or directories (their `records*.jsonl`, in name order).
    pub records: Vec<PathBuf>,
    /// Only these sessions (empty: all).
    pub sessions: Vec<String>,
    /// Only sessions whose first turn started at or after this wall time (ns).
    pub since_ns: Option<u64>,
    /// Only sessions whose first turn started before this wall time (ns).
    pub until_ns: Option<u64>,
    /// Trajectories with fewer client turns are left out.
    pub min_turns: usize,
    /// Replace every text with filler of the same token count.
    pub anonymize: bool,
    /// Where the rows wait until the end (an anonymous file, gone when capture ends): the
    /// output's directory, say; `None`, the system's temporary directory.
    pub spill_dir: Option<PathBuf>,
}

/// What capture did, for the person who ran it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Report {
    /// Record files read.
    pub files: usize,
    /// Records read.
    pub records: u64,
    /// Records used as turns.
    pub turns: u64,
    /// Sessions seen.
    pub sessions: u64,
    /// Trajectories written.
    pub trajectories: u64,
    /// Their client rows.
    pub client_rows: u64,
    /// Rows written (every role).
    pub rows: u64,
    /// Records not used, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Parts of requests and outputs with no chat form, by kind.
    pub dropped: BTreeMap<String, u64>,
    /// Other things a replay of the dataset will do differently, by kind.
    pub notes: BTreeMap<String, u64>,
    /// Trajectories left out, by reason.
    pub left_out: BTreeMap<String, u64>,
    /// Per session (in first-turn order): what was kept and what could not be.
    pub per_session: Vec<SessionReport>,
}

/// One session's part of the [`Report`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SessionReport {
    /// The session's id (the proxy's `conversation_id`).
    pub session: String,
    /// Its records used as turns.
    pub turns: u64,
    /// Trajectories written, and their client rows.
    pub trajectories: u64,
    /// Their client rows.
    pub client_rows: u64,
    /// Trajectories the dataset's rules refused.
    pub left_out: u64,
    /// Parts of its requests and outputs with no chat form, by kind.
    pub dropped: BTreeMap<String, u64>,
}

impl Report {
    fn skip(&mut self, why: &str) {
        *self.skipped.entry(why.into()).or_default() += 1;
    }
    fn note(&mut self, what: &str) {
        *self.notes.entry(what.into()).or_default() += 1;
    }

    /// The report as text, a line per count.
    pub fn render(&self) -> String {
        let mut s = format!(
            "captured {} trajectories ({} rows, {} client turns) from {} sessions: {} of {} records in {} files\n",
            self.trajectories, self.rows, self.client_rows, self.sessions, self.turns, self.records, self.files
        );
        for p in &self.per_session {
            s.push_str(&format!(
                "session {}: {} turns → {} trajectories, {} client rows{}{}\n",
                p.session,
                p.turns,
                p.trajectories,
                p.client_rows,
                if p.left_out > 0 {
                    format!(", {} left out", p.left_out)
                } else {
                    String::new()
                },
                if p.dropped.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; not kept: {}",
                        p.dropped
                            .iter()
                            .map(|(k, v)| format!("{v} × {k}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ));
        }
        for (title, map) in [
            ("records not used", &self.skipped),
            ("trajectories left out", &self.left_out),
            ("with no chat form (dropped)", &self.dropped),
            ("a replay will differ", &self.notes),
        ] {
            if !map.is_empty() {
                s.push_str(&format!("{title}:\n"));
                for (k, v) in map {
                    s.push_str(&format!("  {v:>7}  {k}\n"));
                }
            }
        }
        s
    }
}

/// Why capture could not run.
/// Why a capture could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A record line that is not a proxy record.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The records file.
        path: PathBuf,
        /// The line (1-based).
        line: usize,
        /// What was found and what was expected.
        message: String,
    },
    /// A file that could not be read or written.
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Nothing to capture: no record kept its content.
    #[error("no record has content: capture reads only what `tokentap proxy --record-content` wrote (prompts and outputs are never recorded otherwise); {records} records read from {files} files")]
    NoContent {
        /// Records read.
        records: u64,
        /// Files read.
        files: usize,
    },
}

/// One turn of a session, in chat form.
struct Turn {
    start_ns: u64,
    end_ns: u64,
    system: Option<String>,
    system_hash: u64,
    /// The request's non-system messages (with a `previous_response_id`, the previous output
    /// put back in front).
    messages: Vec<Value>,
    tools: Option<Value>,
    tools_hash: u64,
    /// The request's parameters a dataset row carries (max tokens, sampling, `tool_choice`,
    /// `stream_options`), in chat form: the replay sends them back.
    params: Map<String, Value>,
    /// The recorded output as an assistant message.
    output: Option<Value>,
    /// What of the request and output had no chat form, by kind.
    dropped: BTreeMap<String, u64>,
}

/// A trajectory being built.
struct Traj {
    id: String,
    rows: Rows,
    /// The hash of each message the rows stand for (the agent's history so far, [`hash_of`]).
    sent: Vec<u64>,
    /// The first row's tools and system prompt until that row is made; then only their hashes
    /// are kept, which is all later turns compare.
    tools: Option<Value>,
    system: Option<String>,
    tools_hash: u64,
    system_hash: u64,
    client_rows: usize,
    first_ns: u64,
}

impl Traj {
    /// After each turn: its rows go to the spill, and once the first is made, the tools and
    /// system prompt it carries leave memory.
    fn end_turn(&mut self, spill: &mut Spill) {
        self.rows.end_turn(spill);
        if !self.rows.is_empty() {
            self.tools = None;
            self.system = None;
        }
    }
}

/// A finished trajectory: its rows are lines in the spill.
struct Done {
    extents: Vec<(u64, u64)>,
    client_rows: usize,
    first_ns: u64,
    /// Its session's line in [`Report::per_session`].
    report_at: usize,
}

/// What a `previous_response_id` names: the history of the session's previous turn with its
/// output — by construction the first `len` messages of trajectory `part`, then `output` (in
/// the spill; its hash here).
struct Named {
    part: usize,
    len: usize,
    output: Option<(Stored, u64)>,
}

/// One session's state.
struct Session {
    id: String,
    parts: usize,
    done: Vec<Done>,
    cur: Option<Traj>,
    last_end_ns: u64,
    last_start_ns: u64,
    /// The previous turn's output, not yet in the rows (the next request's history brings the
    /// agent's own copy of it), set aside in the spill.
    pending: Option<Stored>,
    /// The previous turn's history plus output, for a `previous_response_id` to continue
    /// (Responses API sessions only).
    named: Option<Named>,
    keep: bool,
    /// Its line of the report.
    report: SessionReport,
}

/// Reads the records and writes the dataset to `out`.
pub fn capture(
    opts: &Options,
    tok: &dyn Tokens,
    out: &mut dyn Write,
) -> Result<Report, CaptureError> {
    let mut report = Report::default();
    let files = record_files(&opts.records)?;
    report.files = files.len();
    let spill_error = |e| spill_error(opts, e);
    let mut spill = Spill::new(opts.spill_dir.as_deref()).map_err(spill_error)?;
    let mut sessions: HashMap<String, Session> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut with_content = 0u64;
    for f in &files {
        read_records(f, &mut report, |rec, report| {
            if let Some(turn) = turn_of(&rec, report, &mut with_content) {
                on_turn(
                    &rec,
                    turn,
                    opts,
                    &mut sessions,
                    &mut order,
                    report,
                    &mut spill,
                );
            }
            spill.failed().map_or(Ok(()), |e| Err(spill_error(e)))
        })?;
    }
    if with_content == 0 {
        return Err(CaptureError::NoContent {
            records: report.records,
            files: report.files,
        });
    }
    let mut all: Vec<Done> = Vec::new();
    for id in order {
        let Some(mut s) = sessions.remove(&id) else {
            continue;
        };
        if !s.keep {
            continue;
        }
        report.sessions += 1;
        finish_traj(&mut s, &mut report, &mut spill);
        for t in &mut s.done {
            t.report_at = report.per_session.len();
        }
        all.append(&mut s.done);
        report.per_session.push(s.report);
    }
    if let Some(e) = spill.failed() {
        return Err(spill_error(e));
    }
    all.sort_by_key(|t| t.first_ns);
    write_trajectories(all, opts, tok, out, &mut report, &mut spill)?;
    Ok(report)
}

/// The spill file could not be written or read back.
fn spill_error(opts: &Options, e: std::io::Error) -> CaptureError {
    CaptureError::File {
        path: opts.spill_dir.clone().unwrap_or_else(std::env::temp_dir),
        message: format!("the spill file (the rows until the end, in this directory): {e}"),
    }
}

/// Writes each trajectory the filters and the dataset's own rules accept (those left out are
/// counted, with why), its rows read back from the spill.
fn write_trajectories(
    all: Vec<Done>,
    opts: &Options,
    tok: &dyn Tokens,
    out: &mut dyn Write,
    report: &mut Report,
    spill: &mut Spill,
) -> Result<(), CaptureError> {
    let anon = opts.anonymize.then_some(Anonymizer { tok });
    let mut buf = Vec::new();
    for t in all {
        if t.client_rows < opts.min_turns.max(1) {
            *report
                .left_out
                .entry(format!(
                    "fewer client turns than --min-turns {}",
                    opts.min_turns.max(1)
                ))
                .or_default() += 1;
            continue;
        }
        spill
            .read(&t.extents, &mut buf)
            .map_err(|e| spill_error(opts, e))?;
        // Our own lines: UTF-8.
        let mut text = String::from_utf8(std::mem::take(&mut buf)).unwrap_or_default();
        if let Some(a) = &anon {
            text = a.lines(&text);
        }
        // The dataset's own rules decide: a trajectory they refuse is left out, with why.
        match Dataset::parse(Path::new("captured.jsonl"), &text) {
            Ok(ds) => {
                let c: &Conversation = &ds.conversations[0];
                report.trajectories += 1;
                report.rows += c.rows.len() as u64;
                report.client_rows += c.client_turns().count() as u64;
                if let Some(p) = report.per_session.get_mut(t.report_at) {
                    p.trajectories += 1;
                    p.client_rows += c.client_turns().count() as u64;
                }
                out.write_all(text.as_bytes())
                    .map_err(|e| CaptureError::File {
                        path: "the output".into(),
                        message: e.to_string(),
                    })?;
            }
            Err(e) => {
                if let Some(p) = report.per_session.get_mut(t.report_at) {
                    p.left_out += 1;
                }
                let first = e.0.first().map(|e| {
                    format!(
                        "{}{}",
                        e.field
                            .as_deref()
                            .map(|f| format!("field `{f}`: "))
                            .unwrap_or_default(),
                        e.message
                    )
                });
                *report
                    .left_out
                    .entry(format!(
                        "the dataset's rules refuse it: {}",
                        first.unwrap_or_default()
                    ))
                    .or_default() += 1;
            }
        }
    }
    Ok(())
}

/// One usable record: its session (new ones pass the filters or not), then its turn.
fn on_turn(
    rec: &TurnRecord,
    turn: Turn,
    opts: &Options,
    sessions: &mut HashMap<String, Session>,
    order: &mut Vec<String>,
    report: &mut Report,
    spill: &mut Spill,
) {
    let id = rec.conversation_id.clone().unwrap_or_default();
    let s = sessions.entry(id.clone()).or_insert_with(|| {
        order.push(id.clone());
        let keep = (opts.sessions.is_empty() || opts.sessions.contains(&id))
            && opts.since_ns.is_none_or(|t| turn.start_ns >= t)
            && opts.until_ns.is_none_or(|t| turn.start_ns < t);
        Session {
            id: id.clone(),
            parts: 0,
            done: Vec::new(),
            cur: None,
            last_end_ns: 0,
            last_start_ns: 0,
            pending: None,
            named: None,
            keep,
            report: SessionReport {
                session: id.clone(),
                ..SessionReport::default()
            },
        }
    });
    if !s.keep {
        report.skip("a session the filters leave out");
        return;
    }
    if turn.start_ns < s.last_start_ns {
        report.skip("a turn recorded out of order (it started before its session's previous turn)");
        return;
    }
    report.turns += 1;
    s.report.turns += 1;
    for (k, v) in &turn.dropped {
        *report.dropped.entry(k.clone()).or_default() += v;
        *s.report.dropped.entry(k.clone()).or_default() += v;
    }
    let responses = rec.route.as_deref().and_then(Api::parse) == Some(Api::Responses);
    add_turn(s, turn, rec.previous_response(), responses, report, spill);
    if let Some(t) = s.cur.as_mut() {
        t.end_turn(spill);
    }
}

trait PreviousResponse {
    fn previous_response(&self) -> bool;
}

impl PreviousResponse for TurnRecord {
    fn previous_response(&self) -> bool {
        self.content
            .as_ref()
            .and_then(|c| c.get("request"))
            .and_then(|r| r.get("previous_response_id"))
            .is_some_and(|p| p.as_str().is_some_and(|s| !s.is_empty()))
    }
}

/// The files to read: each path a file, or a directory's `records*.jsonl` in name order.
fn record_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CaptureError> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let files = tokentap_core::record::files_in(p).map_err(|e| CaptureError::File {
                path: p.clone(),
                message: format!("cannot read the records directory: {e}"),
            })?;
            if files.is_empty() {
                return Err(CaptureError::File {
                    path: p.clone(),
                    message: "no records*.jsonl here: expected the --records directory of `tokentap proxy`".into(),
                });
            }
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn read_records(
    path: &Path,
    report: &mut Report,
    mut each: impl FnMut(TurnRecord, &mut Report) -> Result<(), CaptureError>,
) -> Result<(), CaptureError> {
    let mut lines = tokentap_core::jsonl::open(path).map_err(|e| CaptureError::File {
        path: path.to_path_buf(),
        message: format!("cannot read: {e}"),
    })?;
    loop {
        let (line, text) = match lines.next_line() {
            Ok(Some(x)) => x,
            Ok(None) => return Ok(()),
            Err(e) => {
                return Err(CaptureError::Line {
                    path: path.to_path_buf(),
                    line: lines.line(),
                    message: e.to_string(),
                })
            }
        };
        let rec: TurnRecord = serde_json::from_str(text).map_err(|e| CaptureError::Line {
            path: path.to_path_buf(),
            line,
            message: format!("expected a tokentap proxy record (`tokentap proxy --records`): {e}"),
        })?;
        if rec.origin != Origin::Proxy {
            return Err(CaptureError::Line {
                path: path.to_path_buf(),
                line,
                message: "field `origin`: expected \"proxy\", found \"replay\": capture reads the proxy's records (the replay's records hold no request content)".into(),
            });
        }
        report.records += 1;
        each(rec, report)?;
    }
}

/// The record as a turn, or why not (counted).
fn turn_of(rec: &TurnRecord, report: &mut Report, with_content: &mut u64) -> Option<Turn> {
    let api = match rec.route.as_deref().and_then(Api::parse) {
        Some(a @ (Api::Chat | Api::Responses | Api::Messages)) => a,
        Some(Api::Completions) => {
            report.skip("a /v1/completions request (a prompt string, no conversation)");
            return None;
        }
        _ => {
            report.skip("not a chat, Responses or Messages request");
            return None;
        }
    };
    let Some(content) = rec.content.as_ref() else {
        report.skip("no content (recorded without --record-content)");
        return None;
    };
    *with_content += 1;
    if rec.status != Status::Ok {
        report.skip("the turn did not end ok");
        return None;
    }
    if rec.conversation_id.is_none() {
        report.skip("no session (no session header, nothing in the body)");
        return None;
    }
    let Some(request) = content.get("request").filter(|r| r.is_object()) else {
        report.skip("the request was not kept (larger than the proxy's sniff limit, or not JSON)");
        return None;
    };
    let conv = convert::request(api, request);
    let mut dropped: BTreeMap<String, u64> = conv
        .dropped
        .iter()
        .filter(|(k, _)| !k.contains("previous_response_id"))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    // Every system and developer message, wherever it stands, is the system prompt: the
    // dataset has one, so several are joined in order (a blank line between), none lost.
    let mut system: Option<String> = None;
    let mut parts = 0;
    let mut messages = Vec::with_capacity(conv.messages.len());
    for m in conv.messages {
        if m["role"] == "system" || m["role"] == "developer" {
            let text = m.get("content").map(text_value).unwrap_or_default();
            if !text.is_empty() {
                parts += 1;
                match system.as_mut() {
                    Some(s) => {
                        s.push_str(SYSTEM_JOIN);
                        s.push_str(&text);
                    }
                    None => system = Some(text),
                }
            }
            continue;
        }
        messages.push(m);
    }
    if parts > 1 {
        report.note("system or developer messages joined into the one system prompt (in order, a blank line between)");
    }
    let output = output_of(api, content, &mut dropped, report);
    let start_ns = rec.anchor.wall_ns;
    Some(Turn {
        start_ns,
        end_ns: start_ns + rec.measured.e2e_ns.unwrap_or(0),
        system_hash: hash_of(&system),
        system,
        messages,
        tools_hash: hash_of(&conv.tools),
        tools: conv.tools,
        params: conv.params,
        output,
        dropped,
    })
}

/// The recorded output as an assistant message.
fn output_of(
    api: Api,
    content: &Value,
    dropped: &mut BTreeMap<String, u64>,
    report: &mut Report,
) -> Option<Value> {
    match content.get("response") {
        // The proxy let an oversized output go (`--max-event-bytes`): the agent's own copy in
        // its next request stands in; the last turn of a session has none.
        _ if content.get("output_omitted").is_some() => {
            report.note("an output larger than the proxy's --max-event-bytes was not recorded (the agent's copy in its next request is used)");
            None
        }
        Some(body) => convert::response(api, body, dropped),
        None => {
            let text = |k: &str| {
                content
                    .get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let calls = content
                .get("tool_calls")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            Some(convert::assistant(text("output"), text("reasoning"), calls))
        }
    }
}

/// Between the system and developer messages of a request joined into its one system prompt.
pub const SYSTEM_JOIN: &str = "\n\n";

/// A message's content as text (a string, or its parts' text joined).
fn text_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn new_traj(s: &mut Session, turn: &Turn) -> Traj {
    s.parts += 1;
    let id = if s.parts == 1 {
        dataset_id(&s.id)
    } else {
        format!("{}.{}", dataset_id(&s.id), s.parts)
    };
    Traj {
        id,
        rows: Rows::new(),
        sent: Vec::new(),
        tools: turn.tools.clone(),
        system: turn.system.clone(),
        tools_hash: turn.tools_hash,
        system_hash: turn.system_hash,
        client_rows: 0,
        first_ns: turn.start_ns,
    }
}

/// A value's hash, for comparing messages (and tools, system prompts) with those of earlier
/// requests without keeping them: equal values (as `serde_json` compares them: objects by
/// their entries, in any key order) hash equal; two different ones are taken for equal with a
/// chance of 2^-64.
fn hash_of(v: &impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// A session id as a dataset `conversation_id`: printable ASCII without outer spaces (other
/// bytes percent-encoded).
fn dataset_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.trim().bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push_str("session");
    }
    out
}

fn add_turn(
    s: &mut Session,
    mut turn: Turn,
    chained: bool,
    responses: bool,
    report: &mut Report,
    spill: &mut Spill,
) {
    let mut hashes: Vec<u64> = turn.messages.iter().map(hash_of).collect();
    // With `previous_response_id` the request carries only what is new: the messages before
    // `turn.messages` are the trajectory's first `base`.
    let base = named_history(s, chained, &mut turn, &mut hashes, spill);
    let delay = (s.last_end_ns > 0).then(|| turn.start_ns.saturating_sub(s.last_end_ns));
    let from = locate(s, &turn, base, &hashes, report, spill);
    let Some(t) = s.cur.as_mut() else { return };
    let mut new: &[Value] = &turn.messages[from..];
    let mut new_hashes = &hashes[from..];
    // The agent's own copy of the previous answer, else the recorded one.
    if let Some(out) = s.pending.take() {
        match new.first() {
            Some(m) if m["role"] == "assistant" => {
                push_assistant(t, m, report);
                t.sent.push(new_hashes[0]);
                new = &new[1..];
                new_hashes = &new_hashes[1..];
            }
            _ => {
                report.note("a request whose history leaves out the previous answer (the recorded answer was put in)");
                push_assistant(t, &spill.get(&out), report);
            }
        }
    }
    if new.last().is_none_or(|m| m["role"] == "assistant") {
        report
            .skip("a request with nothing new, or ending in an assistant message (a continuation)");
        s.last_end_ns = turn.end_ns;
        s.last_start_ns = turn.start_ns;
        return;
    }
    if turn.tools_hash != t.tools_hash && !t.rows.is_empty() {
        report.note("tools changed within a trajectory (kept on the rows that carry them)");
    }
    let client_rows = place(t, new, &turn, delay, report, spill);
    if client_rows > 1 {
        report.note("a request whose new messages make several client rows (the replay sends one request per row)");
    }
    t.sent.extend_from_slice(new_hashes);
    let len = t.sent.len();
    let output = turn.output.as_ref().map(|o| (spill.put(o), hash_of(o)));
    // Kept only where a next request may name this one by `previous_response_id`: its history
    // is now the trajectory's messages so far.
    if responses {
        s.named = Some(Named {
            part: s.parts,
            len,
            output: output.as_ref().map(|(o, h)| (o.clone(), *h)),
        });
    } else {
        s.named = None;
    }
    s.pending = output.map(|(o, _)| o);
    s.last_end_ns = turn.end_ns;
    s.last_start_ns = turn.start_ns;
}

/// For a `previous_response_id` request: the history the session's previous turn left, put in
/// front of the request's messages — its output into `turn.messages` (and its hash into
/// `hashes`), the messages before it as the count of the open trajectory's messages they are
/// (returned; 0 without a history). A history the trajectory no longer continues (a request in
/// between that capture skipped, which rewrote it or answered differently) is not put back: the
/// request then stands on its own, as when no history is known.
fn named_history(
    s: &mut Session,
    chained: bool,
    turn: &mut Turn,
    hashes: &mut Vec<u64>,
    spill: &mut Spill,
) -> usize {
    let Some(named) = chained.then(|| s.named.take()).flatten() else {
        return 0;
    };
    let Some(t) = s.cur.as_ref().filter(|_| named.part == s.parts) else {
        return 0;
    };
    if named.len == 0 && named.output.is_none() || t.sent.len() < named.len {
        return 0;
    }
    let output_hash = named.output.as_ref().map(|o| o.1);
    // What the trajectory holds past the history's start must be what follows it here.
    let past = &t.sent[named.len..];
    let follows = output_hash.iter().chain(hashes.iter());
    if output_hash.is_some() as usize + hashes.len() < past.len()
        || !past.iter().zip(follows).all(|(a, b)| a == b)
    {
        return 0;
    }
    if turn.system.is_none() {
        // Only the hash is left once the first row is made, and only the hash is compared then.
        turn.system = t.system.clone();
        turn.system_hash = t.system_hash;
    }
    if let Some((o, h)) = named.output {
        turn.messages.insert(0, spill.get(&o));
        hashes.insert(0, h);
    }
    named.len
}

/// Where the turn's messages go on from its session's open trajectory: after the rows when they
/// extend them, else at the first user message of a new trajectory (the history was rewritten).
/// The request's history is the trajectory's first `base` messages, then `turn.messages`
/// (`hashes` theirs); returns an index into `turn.messages`.
fn locate(
    s: &mut Session,
    turn: &Turn,
    base: usize,
    hashes: &[u64],
    report: &mut Report,
    spill: &mut Spill,
) -> usize {
    // Where the request's messages go on from the trajectory's rows.
    let mut from = None;
    if let Some(t) = s.cur.as_ref() {
        let past = &t.sent[base.min(t.sent.len())..];
        if hashes.len() >= past.len() && hashes[..past.len()] == *past {
            from = Some(past.len());
        }
        if t.system_hash != turn.system_hash && from.is_some() {
            report.note("the system prompt changed within a trajectory (the first is kept)");
        }
    }
    if from.is_none() {
        if s.cur.is_some() {
            report.note("the history was rewritten (compaction or a branch): a new trajectory `<session>.N`");
            finish_traj(s, report, spill);
        }
        let mut t = new_traj(s, turn);
        // A trajectory starts at a user message.
        let lead = turn
            .messages
            .iter()
            .position(|m| m["role"] == "user")
            .unwrap_or(turn.messages.len());
        if lead > 0 {
            report.note("messages before the first user message of a trajectory (dropped)");
        }
        t.sent.extend_from_slice(&hashes[..lead]);
        s.cur = Some(t);
        s.pending = None;
        from = Some(lead);
    }
    from.unwrap_or(0)
}

/// The new messages of a request as rows: user rows, one tool row per run of tool results, an
/// assistant message the agent put in between; returns the client rows made.
fn place(
    t: &mut Traj,
    new: &[Value],
    turn: &Turn,
    delay: Option<u64>,
    report: &mut Report,
    spill: &mut Spill,
) -> usize {
    let mut client_rows = 0;
    let mut i = 0;
    while i < new.len() {
        let m = &new[i];
        match m["role"].as_str().unwrap_or("") {
            "tool" => {
                let mut results = Vec::new();
                while i < new.len() && new[i]["role"] == "tool" {
                    results.push(json!({
                        "tool_call_id": new[i].get("tool_call_id").cloned().unwrap_or(Value::Null),
                        "content": new[i].get("content").cloned().unwrap_or(Value::Null),
                    }));
                    i += 1;
                }
                let mut r = row(&t.id, t.rows.len() + 1, "tool");
                r.insert("tool_results".into(), Value::Array(results));
                client_row(t, r, turn, delay.filter(|_| client_rows == 0), client_rows);
                client_rows += 1;
                continue;
            }
            "user" if t.rows.last_role() == Some("user") => {
                // The dataset has no two user rows in a row: one row, each message a part.
                if let Some(last) = t.rows.last_mut(spill) {
                    let mut parts = content_parts(last.get("content"));
                    parts.extend(content_parts(m.get("content")));
                    last.insert("content".into(), Value::Array(parts));
                }
                report.note("consecutive user messages made one user row (each message's text a content part, in order)");
            }
            "user" => {
                let mut r = row(&t.id, t.rows.len() + 1, "user");
                r.insert(
                    "content".into(),
                    m.get("content").cloned().unwrap_or(Value::Null),
                );
                if t.rows.is_empty() {
                    if let Some(sys) = t.system.as_ref().filter(|s| !s.is_empty()) {
                        r.insert("system".into(), sys.clone().into());
                    }
                    if let Some(tools) = &t.tools {
                        r.insert("tools".into(), tools.clone());
                    }
                }
                client_row(t, r, turn, delay.filter(|_| client_rows == 0), client_rows);
                client_rows += 1;
            }
            "assistant" => {
                if t.rows.last_role() == Some("assistant") {
                    report.note("two assistant messages in a row (the second dropped)");
                } else {
                    push_assistant(t, m, report);
                }
            }
            other => {
                *report
                    .dropped
                    .entry(format!("a message of role {other:?}"))
                    .or_default() += 1;
            }
        }
        i += 1;
    }
    client_rows
}

/// A message's content as chat content parts: a string is one text part; parts stay as they are.
fn content_parts(v: Option<&Value>) -> Vec<Value> {
    match v {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    }
}

fn client_row(
    t: &mut Traj,
    mut r: Map<String, Value>,
    turn: &Turn,
    delay_ns: Option<u64>,
    nth: usize,
) {
    if !t.rows.is_empty() && turn.tools_hash != t.tools_hash {
        if let Some(tools) = &turn.tools {
            r.insert("tools".into(), tools.clone());
        }
    }
    for (k, v) in &turn.params {
        r.insert(k.clone(), v.clone());
    }
    if !t.rows.is_empty() {
        let secs = if nth == 0 {
            delay_ns.unwrap_or(0) as f64 / 1e9
        } else {
            0.0
        };
        // Microseconds, as the MLPerf set writes them.
        let secs = (secs * 1e6).round() / 1e6;
        r.insert(
            "delay_seconds".into(),
            json!(secs.min(crate::MAX_DELAY_SECONDS)),
        );
    }
    t.rows.push(r);
    t.client_rows += 1;
}

fn row(id: &str, turn: usize, role: &str) -> Map<String, Value> {
    let mut r = Map::new();
    r.insert("conversation_id".into(), id.into());
    r.insert("turn".into(), turn.into());
    r.insert("role".into(), role.into());
    r
}

/// An assistant message as a row: content as the agent sent it (absent when it sent none or
/// null beside tool calls), reasoning, tool calls in the dataset's form.
fn push_assistant(t: &mut Traj, m: &Value, report: &mut Report) {
    let mut r = row(&t.id, t.rows.len() + 1, "assistant");
    let calls: Vec<Value> = m
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(dataset_call).collect())
        .unwrap_or_default();
    match m.get("content") {
        // As the agent sent it: an empty string beside tool calls too (the replay sends it back).
        Some(Value::String(s)) => {
            r.insert("content".into(), s.clone().into());
        }
        Some(v @ Value::Array(_)) => {
            r.insert("content".into(), text_value(v).into());
        }
        None | Some(Value::Null) if calls.is_empty() => {
            r.insert("content".into(), "".into());
        }
        _ => {}
    }
    let reasoning = ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|k| m.get(*k).and_then(Value::as_str).filter(|s| !s.is_empty()));
    if let Some(x) = reasoning {
        r.insert("reasoning_content".into(), x.into());
    }
    if !calls.is_empty() {
        r.insert("tool_calls".into(), Value::Array(calls));
    }
    if r.get("content").is_some_and(|c| c == "") && r.get("tool_calls").is_none() {
        report.note("an empty assistant answer");
    }
    t.rows.push(r);
}

/// A chat tool call in the dataset's form: `{id, type: "function", function: {name, arguments}}`
/// with `arguments` a string.
fn dataset_call(c: &Value) -> Value {
    let f = c.get("function").unwrap_or(&Value::Null);
    let args = match f.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => "{}".into(),
    };
    json!({
        "id": c.get("id").cloned().unwrap_or(Value::Null),
        "type": "function",
        "function": {"name": f.get("name").cloned().unwrap_or(Value::Null), "arguments": args},
    })
}

/// Ends the session's open trajectory with its last recorded answer, its rows in the spill.
fn finish_traj(s: &mut Session, report: &mut Report, spill: &mut Spill) {
    let Some(mut t) = s.cur.take() else { return };
    if let Some(out) = s.pending.take() {
        push_assistant(&mut t, &spill.get(&out), report);
    }
    if t.client_rows > 0 {
        s.done.push(Done {
            extents: t.rows.finish(spill),
            client_rows: t.client_rows,
            first_ns: t.first_ns,
            report_at: 0,
        });
    }
}

/// `--anonymize`: every text replaced by filler of the same token count, the same text by the
/// same filler (so what several requests share stays shared, and what differs stays apart).
struct Anonymizer<'a> {
    tok: &'a dyn Tokens,
}

/// Words that are one token each in the usual BPE vocabularies (with their leading space).
const FILL: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "it", "on", "at", "as", "be", "by", "we", "or", "an",
    "if",
];

impl Anonymizer<'_> {
    /// Rows as JSON lines, each anonymized.
    fn lines(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for l in text.lines() {
            // Our own lines: each parses back to the row it was.
            let mut r: Map<String, Value> = serde_json::from_str(l).unwrap_or_default();
            self.row(&mut r);
            out.push_str(&serde_json::to_string(&r).unwrap_or_default());
            out.push('\n');
        }
        out
    }

    fn row(&self, r: &mut Map<String, Value>) {
        for key in ["content", "system", "reasoning_content", "user"] {
            if let Some(v) = r.get_mut(key) {
                self.value(v);
            }
        }
        if let Some(Value::Array(results)) = r.get_mut("tool_results") {
            for x in results {
                if let Some(c) = x.get_mut("content") {
                    self.value(c);
                }
            }
        }
        if let Some(Value::Array(calls)) = r.get_mut("tool_calls") {
            for c in calls {
                if let Some(Value::String(args)) = c.pointer_mut("/function/arguments") {
                    *args = match serde_json::from_str::<Value>(args) {
                        Ok(mut v) => {
                            self.strings(&mut v);
                            v.to_string()
                        }
                        Err(_) => self.text(args),
                    };
                }
            }
        }
        if let Some(Value::Array(tools)) = r.get_mut("tools") {
            for t in tools {
                if let Some(f) = t.get_mut("function") {
                    if let Some(d) = f.get_mut("description") {
                        self.value(d);
                    }
                    if let Some(p) = f.get_mut("parameters") {
                        self.descriptions(p);
                    }
                }
            }
        }
    }

    /// A content value: a string, or the text of its parts.
    fn value(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.text(s),
            Value::Array(parts) => {
                for p in parts {
                    if let Some(Value::String(s)) = p.get_mut("text") {
                        *s = self.text(s);
                    }
                }
            }
            _ => {}
        }
    }

    /// Every string value of a JSON value (tool-call arguments), keys kept.
    fn strings(&self, v: &mut Value) {
        match v {
            Value::String(s) => *s = self.text(s),
            Value::Array(a) => a.iter_mut().for_each(|x| self.strings(x)),
            Value::Object(o) => o.values_mut().for_each(|x| self.strings(x)),
            _ => {}
        }
    }

    /// Every `description` in a JSON schema.
    fn descriptions(&self, v: &mut Value) {
        match v {
            Value::Object(o) => {
                for (k, x) in o.iter_mut() {
                    if k == "description" {
                        self.value(x);
                    } else {
                        self.descriptions(x);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.descriptions(x)),
            _ => {}
        }
    }

    /// Filler with exactly as many tokens as `s`.
    fn text(&self, s: &str) -> String {
        let n = self.tok.count(s);
        if n == 0 {
            return String::new();
        }
        let mut rng =
            tokentap_core::rng::SplitMix64::new(tokentap_core::route::hash64(s.as_bytes()));
        let words: Vec<&str> = (0..n as usize + 8)
            .map(|_| FILL[(rng.next_u64() % FILL.len() as u64) as usize])
            .collect();
        let make = |k: usize| words[..k].join(" ");
        // The fewest words that reach n tokens (counts grow with words).
        let (mut lo, mut hi) = (1usize, words.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.tok.count(&make(mid)) >= n {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let mut t = make(lo);
        // Short by a fraction of a token (the stand-in's 4 bytes): pad with dots, one at a time.
        for _ in 0..8 {
            match self.tok.count(&t).cmp(&n) {
                std::cmp::Ordering::Equal => break,
                std::cmp::Ordering::Less => t.push('.'),
                std::cmp::Ordering::Greater => {
                    t.pop();
                }
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_content_beside_tool_calls_is_kept_as_sent() {
        let mut t = Traj {
            id: "c".into(),
            rows: Rows::new(),
            sent: Vec::new(),
            tools: None,
            system: None,
            tools_hash: 0,
            system_hash: 0,
            client_rows: 0,
            first_ns: 0,
        };
        let call =
            json!([{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]);
        let mut report = Report::default();
        push_assistant(
            &mut t,
            &json!({"role": "assistant", "content": "", "tool_calls": call}),
            &mut report,
        );
        push_assistant(
            &mut t,
            &json!({"role": "assistant", "content": null, "tool_calls": call}),
            &mut report,
        );
        push_assistant(
            &mut t,
            &json!({"role": "assistant", "tool_calls": call}),
            &mut report,
        );
        // The rows as written: through the spill.
        let mut spill = Spill::new(None).unwrap();
        let extents = t.rows.finish(&mut spill);
        let mut text = Vec::new();
        spill.read(&extents, &mut text).unwrap();
        let rows: Vec<Value> = serde_json::Deserializer::from_slice(&text)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0]["content"], "");
        assert!(rows[1].get("content").is_none());
        assert!(rows[2].get("content").is_none());
    }

    #[test]
    fn ids_become_dataset_ids() {
        assert_eq!(dataset_id("conv-1"), "conv-1");
        assert_eq!(dataset_id(" é%\u{1} "), "%C3%A9%25%01");
        assert_eq!(dataset_id(""), "session");
    }

    #[test]
    fn filler_keeps_the_stand_in_count() {
        let a = Anonymizer { tok: &StandIn };
        for s in [
            "x",
            "hello world",
            "a much longer text of many words, with punctuation!",
        ] {
            let f = a.text(s);
            assert_eq!(StandIn.count(&f), StandIn.count(s), "{s:?} → {f:?}");
            assert_ne!(f, s);
        }
        assert_eq!(a.text("same"), a.text("same"));
        assert_ne!(a.text("some text one"), a.text("some text two"));
    }
}
