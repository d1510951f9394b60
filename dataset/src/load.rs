//! Reading a JSONL file into a [`Dataset`].
//!
//! Every line is read, every problem collected (not just the first), each naming the file, the
//! line, the conversation, the field and what was expected. A dataset that loads has passed all
//! of docs/benchmark.md#dataset.

use crate::error::{DatasetError, DatasetErrors};
use crate::model::{Conversation, Dataset, Role, Row, ToolResult, OVERRIDE_FIELDS};
use crate::validate;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};

impl Dataset {
    /// Reads and validates `path`, a line at a time (memory: the conversations, not the file's
    /// text).
    pub fn load(path: impl AsRef<Path>) -> Result<Dataset, DatasetErrors> {
        let path = path.as_ref();
        let file = std::fs::File::open(path).map_err(|e| file_error(path, e))?;
        Dataset::from_reader(path, std::io::BufReader::with_capacity(256 << 10, file))
    }

    /// Like [`Dataset::load`] over any reader; `path` is used in messages.
    pub fn from_reader(
        path: impl AsRef<Path>,
        reader: impl BufRead,
    ) -> Result<Dataset, DatasetErrors> {
        let mut conversations = Vec::new();
        read(path.as_ref(), reader, |c| conversations.push(c))?;
        Ok(Dataset {
            path: path.as_ref().to_path_buf(),
            conversations,
        })
    }

    /// Like [`Dataset::parse`] over the file's bytes: a byte that is not UTF-8 is an error
    /// naming its line and column (one rule for every command that reads a dataset).
    pub fn parse_bytes(path: impl AsRef<Path>, bytes: Vec<u8>) -> Result<Dataset, DatasetErrors> {
        Dataset::from_reader(path, &bytes[..])
    }

    /// Parses and validates JSONL `text`; `path` is used in messages.
    pub fn parse(path: impl AsRef<Path>, text: &str) -> Result<Dataset, DatasetErrors> {
        Dataset::from_reader(path, text.as_bytes())
    }
}

/// Errors collected before reading stops: a file with more is not a dataset.
pub const MAX_ERRORS: usize = 10_000;

fn file_error(path: &Path, e: std::io::Error) -> DatasetErrors {
    DatasetErrors(vec![DatasetError {
        path: path.to_path_buf(),
        line: None,
        conversation: None,
        field: None,
        message: format!("cannot read the file: {e}"),
    }])
}

/// Reads and validates a dataset a line at a time, handing each conversation to `each` once its
/// last row is read and it has passed every rule (rows of a conversation are contiguous, so a
/// conversation is complete when the next one starts). Memory is one conversation and the ids
/// seen, whatever the file's size; `dataset validate` and `stats` keep nothing more.
///
/// Every problem is collected (up to [`MAX_ERRORS`]), each naming the file, the line, the
/// conversation, the field and what was expected. On any error the result is `Err` with all of
/// them, sorted by line — `each` may have seen conversations by then and its result must be
/// dropped. Returns the number of conversations.
pub fn read(
    path: &Path,
    reader: impl BufRead,
    each: impl FnMut(Conversation),
) -> Result<usize, DatasetErrors> {
    let path = path.to_path_buf();
    let mut r = Reading {
        path: &path,
        errors: Vec::new(),
        current: None,
        damaged: HashSet::new(),
        seen: HashMap::new(),
        count: 0,
        each,
    };
    let mut lines = tokentap_core::jsonl::Lines::new(reader);
    loop {
        if r.errors.len() >= MAX_ERRORS {
            r.errors.push(DatasetError {
                path: path.clone(),
                line: Some(lines.line()),
                conversation: None,
                field: None,
                message: format!("stopped reading after {MAX_ERRORS} errors: is this a dataset?"),
            });
            break;
        }
        let (lineno, line) = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                r.errors.push(DatasetError {
                    path: path.clone(),
                    line: Some(lines.line()),
                    conversation: None,
                    field: None,
                    message: e.to_string(),
                });
                break;
            }
        };
        r.row(lineno, line);
    }
    r.end()
}

/// The state of [`read`]: the conversation being read, what was seen, and the errors so far.
struct Reading<'a, F> {
    path: &'a PathBuf,
    errors: Vec<DatasetError>,
    /// The conversation being read.
    current: Option<Conversation>,
    /// Conversations with a row-level error: not checked as a whole (see `finish`).
    damaged: HashSet<String>,
    /// conversation id -> first line, for every conversation seen.
    seen: HashMap<String, usize>,
    count: usize,
    each: F,
}

impl<F: FnMut(Conversation)> Reading<'_, F> {
    /// Takes the row at line `lineno`: adds it to the conversation being read, or finishes that
    /// one and starts the next (a conversation seen before is a contiguity error).
    fn row(&mut self, lineno: usize, line: &str) {
        let before = self.errors.len();
        let mut ctx = Ctx {
            path: self.path,
            line: lineno,
            conversation: None,
            errors: &mut self.errors,
        };
        let parsed = parse_row(&mut ctx, line);
        if ctx.errors.len() > before {
            if let Some(id) = ctx.conversation.take() {
                self.damaged.insert(id);
            }
        }
        let Some((id, row)) = parsed else {
            return;
        };
        if let Some(c) = self.current.as_mut().filter(|c| c.id == id) {
            c.rows.push(row);
            return;
        }
        if let Some(&first) = self.seen.get(&id) {
            ctx.conversation = Some(id);
            ctx.err(
                None,
                format!(
                    "rows of a conversation must be contiguous: this conversation started at line {first} and other conversations came in between"
                ),
            );
            return;
        }
        if let Some(c) = self.current.take() {
            self.finish(c);
        }
        self.seen.insert(id.clone(), lineno);
        self.current = Some(Conversation {
            id,
            rows: vec![row],
        });
    }

    /// Checks a complete conversation as a whole and hands it to `each` while no error was found.
    fn finish(&mut self, mut conv: Conversation) {
        // Conversations with a row-level error (a row dropped, or a field of the wrong type) or
        // a contiguity break are not checked as a whole: the conversation-level rules would
        // mostly repeat the row error (a dropped row is a gap in the turns, a `tool_results` of
        // the wrong type is a missing one). Decision: one precise message per problem, at the
        // cost of a second run to see sequence errors in the same conversation.
        let damaged = self.damaged.contains(&conv.id);
        // Stable: rows with equal turns keep file order, so "appears twice" names both lines.
        conv.rows.sort_by_key(|r| r.turn);
        let before = self.errors.len();
        if !damaged {
            self.errors.extend(validate::check(self.path, &conv));
        }
        self.count += 1;
        if self.errors.len() == before && self.errors.is_empty() {
            (self.each)(conv);
        }
    }

    /// Finishes the last conversation; the count, or every error sorted by line.
    fn end(mut self) -> Result<usize, DatasetErrors> {
        if let Some(c) = self.current.take() {
            self.finish(c);
        }
        if self.count == 0 && self.errors.is_empty() {
            self.errors.push(DatasetError {
                path: self.path.clone(),
                line: None,
                conversation: None,
                field: None,
                message: "no conversations: expected at least one JSONL row with conversation_id, turn and role".into(),
            });
        }
        if self.errors.is_empty() {
            Ok(self.count)
        } else {
            self.errors.sort_by_key(|e| e.line.unwrap_or(0));
            Err(DatasetErrors(self.errors))
        }
    }
}

pub(crate) struct Ctx<'a> {
    pub path: &'a PathBuf,
    pub line: usize,
    pub conversation: Option<String>,
    pub errors: &'a mut Vec<DatasetError>,
}

impl Ctx<'_> {
    pub fn err(&mut self, field: Option<&str>, message: String) {
        self.errors.push(DatasetError {
            path: self.path.clone(),
            line: Some(self.line),
            conversation: self.conversation.clone(),
            field: field.map(str::to_string),
            message,
        });
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses one line; `None` if it is skipped (metadata) or too broken to place. Each field is
/// read by a function of its own, in the order its errors are reported.
fn parse_row(ctx: &mut Ctx<'_>, line: &str) -> Option<(String, Row)> {
    // Owned: nested values (tools, tool_calls, contents) are moved into the row, not cloned.
    let mut obj: Map<String, Value> = match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(o)) => o,
        Ok(other) => {
            ctx.err(
                None,
                format!("expected a JSON object, found {}", kind(&other)),
            );
            return None;
        }
        Err(e) => {
            ctx.err(None, format!("expected a JSON object: invalid JSON ({e})"));
            return None;
        }
    };
    if obj.get("_type").and_then(Value::as_str) == Some("dataset_metadata") {
        return None;
    }
    let id = conversation_id(ctx, obj.remove("conversation_id"))?;
    ctx.conversation = Some(id.clone());
    let turn = turn(ctx, obj.get("turn"))?;
    let role = role(ctx, obj.get("role"))?;
    let system = opt_str(ctx, &mut obj, "system");
    let reasoning_content = opt_str(ctx, &mut obj, "reasoning_content");
    let name = opt_str(ctx, &mut obj, "name");
    let content = match obj.remove("content") {
        None | Some(Value::Null) => None,
        Some(v @ (Value::String(_) | Value::Array(_))) => Some(v),
        Some(v) => {
            ctx.err(
                Some("content"),
                format!(
                    "expected a string (or an array of content parts), found {}",
                    kind(&v)
                ),
            );
            None
        }
    };
    let tools = match obj.remove("tools") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Array(_)) => Some(v),
        Some(v) => {
            ctx.err(
                Some("tools"),
                format!("expected an array of tool definitions, found {}", kind(&v)),
            );
            None
        }
    };
    let tool_calls = match obj.remove("tool_calls") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(a),
        Some(v) => {
            ctx.err(
                Some("tool_calls"),
                format!("expected an array of tool calls, found {}", kind(&v)),
            );
            None
        }
    };
    let tool_results = tool_results(ctx, obj.remove("tool_results"));
    let delay_seconds = delay_seconds(ctx, obj.get("delay_seconds"));
    let intent_codes = intent_codes(ctx, obj.remove("intent_codes"));
    let overrides = overrides(ctx, &mut obj);
    Some((
        id,
        Row {
            line: ctx.line,
            turn,
            role,
            content,
            system,
            tools,
            tool_calls,
            tool_results,
            reasoning_content,
            delay_seconds,
            name,
            intent_codes,
            overrides,
        },
    ))
}

/// `conversation_id`: a non-empty string of printable ASCII without outer spaces (it becomes
/// an HTTP header value). A bad but present string is reported and still used, so the rest of
/// its rows are placed.
fn conversation_id(ctx: &mut Ctx<'_>, v: Option<Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => {
            ctx.conversation = Some(s.clone());
            if let Some(c) = s.chars().find(|c| !(' '..='~').contains(c)) {
                ctx.err(
                    Some("conversation_id"),
                    format!("expected printable ASCII only (it becomes an HTTP header value), found {c:?}"),
                );
            } else if s.starts_with(' ') || s.ends_with(' ') {
                // HTTP trims a header value: the session header would no longer match the id.
                ctx.err(
                    Some("conversation_id"),
                    "expected no leading or trailing space (HTTP trims header values)".into(),
                );
            }
            Some(s)
        }
        Some(Value::String(_)) => {
            ctx.err(
                Some("conversation_id"),
                "expected a non-empty string, found \"\"".into(),
            );
            None
        }
        Some(v) => {
            ctx.err(
                Some("conversation_id"),
                format!("expected a non-empty string, found {}", kind(&v)),
            );
            None
        }
        None => {
            ctx.err(
                Some("conversation_id"),
                "missing: every row needs a conversation_id".into(),
            );
            None
        }
    }
}

/// `turn`: an integer from 1.
fn turn(ctx: &mut Ctx<'_>, v: Option<&Value>) -> Option<u32> {
    match v {
        Some(v) => match v.as_u64() {
            Some(t) if t >= 1 && t <= u32::MAX as u64 => Some(t as u32),
            _ => {
                ctx.err(Some("turn"), format!("expected an integer ≥ 1, found {v}"));
                None
            }
        },
        None => {
            ctx.err(
                Some("turn"),
                "missing: every row needs a 1-based turn".into(),
            );
            None
        }
    }
}

/// `role`: user, assistant or tool.
fn role(ctx: &mut Ctx<'_>, v: Option<&Value>) -> Option<Role> {
    match v.and_then(Value::as_str) {
        Some("user") => Some(Role::User),
        Some("assistant") => Some(Role::Assistant),
        Some("tool") => Some(Role::Tool),
        Some(other) => {
            ctx.err(
                Some("role"),
                format!("expected \"user\", \"assistant\" or \"tool\", found {other:?}"),
            );
            None
        }
        None => {
            let found = v.map_or("nothing", kind);
            ctx.err(
                Some("role"),
                format!("expected \"user\", \"assistant\" or \"tool\", found {found}"),
            );
            None
        }
    }
}

/// An optional string field, removed from `obj` (null counts as absent).
fn opt_str(ctx: &mut Ctx<'_>, obj: &mut Map<String, Value>, field: &str) -> Option<String> {
    match obj.remove(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(v) => {
            ctx.err(
                Some(field),
                format!("expected a string, found {}", kind(&v)),
            );
            None
        }
    }
}

/// `tool_results`: an array of `{tool_call_id, content}` objects.
fn tool_results(ctx: &mut Ctx<'_>, v: Option<Value>) -> Option<Vec<ToolResult>> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => {
            let mut out = Vec::with_capacity(a.len());
            for (i, r) in a.into_iter().enumerate() {
                match r {
                    Value::Object(mut o) => {
                        let tool_call_id = match o.remove("tool_call_id") {
                            Some(Value::String(s)) => s,
                            None | Some(Value::Null) => String::new(),
                            Some(v) => {
                                ctx.err(
                                    Some(&format!("tool_results[{i}].tool_call_id")),
                                    format!("expected a string, found {}", kind(&v)),
                                );
                                String::new()
                            }
                        };
                        // `"content": null` would be sent as a null tool message content, which
                        // servers reject: treated like a missing content (a validation error).
                        let content = o.remove("content").filter(|c| !c.is_null());
                        out.push(ToolResult {
                            tool_call_id,
                            content,
                        });
                    }
                    v => ctx.err(
                        Some(&format!("tool_results[{i}]")),
                        format!(
                            "expected an object {{tool_call_id, content}}, found {}",
                            kind(&v)
                        ),
                    ),
                }
            }
            Some(out)
        }
        Some(v) => {
            ctx.err(
                Some("tool_results"),
                format!("expected an array, found {}", kind(&v)),
            );
            None
        }
    }
}

/// `delay_seconds`: a number of seconds from 0 to [`crate::MAX_DELAY_SECONDS`] (one rule for
/// `dataset validate` and every command that loads a dataset).
fn delay_seconds(ctx: &mut Ctx<'_>, v: Option<&Value>) -> Option<f64> {
    match v {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(d) if d.is_finite() && (0.0..=crate::MAX_DELAY_SECONDS).contains(&d) => Some(d),
            _ => {
                ctx.err(
                    Some("delay_seconds"),
                    format!(
                        "expected a number of seconds from 0 to {} (one day), found {v}",
                        crate::MAX_DELAY_SECONDS
                    ),
                );
                None
            }
        },
    }
}

/// `intent_codes`: an array of strings.
fn intent_codes(ctx: &mut Ctx<'_>, v: Option<Value>) -> Option<Vec<String>> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => Some(
            a.into_iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s),
                    _ => None,
                })
                .collect(),
        ),
        Some(v) => {
            ctx.err(
                Some("intent_codes"),
                format!("expected an array of strings like [\"I042\"], found {v}"),
            );
            None
        }
    }
}

/// The per-row sampling overrides present (and not null), each type-checked.
fn overrides(ctx: &mut Ctx<'_>, obj: &mut Map<String, Value>) -> Map<String, Value> {
    let mut overrides = Map::new();
    for &f in OVERRIDE_FIELDS {
        if let Some(v) = obj.remove(f) {
            if !v.is_null() {
                check_override(ctx, f, &v);
                overrides.insert(f.to_string(), v);
            }
        }
    }
    overrides
}

/// Type rules for the per-row sampling overrides: each is forwarded into the request body, so a
/// wrong type would become a request the server rejects mid-run instead of an error at load.
fn check_override(ctx: &mut Ctx<'_>, field: &str, v: &Value) {
    let expected = match field {
        // `top_k: -1` means "disabled" on vLLM and SGLang, and seeds may be negative.
        "top_k" | "seed" if !(v.is_i64() || v.is_u64()) => "an integer",
        "max_new_tokens" | "max_completion_tokens" | "max_tokens" | "n"
            if v.as_u64().is_none_or(|n| n < 1) =>
        {
            "an integer ≥ 1"
        }
        "temperature" | "top_p" | "repetition_penalty" | "frequency_penalty"
        | "presence_penalty"
            if !v.is_number() =>
        {
            "a number"
        }
        "model" | "user" | "chat_template" if !v.is_string() => "a string",
        "stop"
            if !(v.is_string() || v.as_array().is_some_and(|a| a.iter().all(Value::is_string))) =>
        {
            "a string or an array of strings"
        }
        "logit_bias" if !v.is_object() => "an object of token id → bias",
        "stream_options" if !v.is_object() => "an object like {\"include_usage\": true}",
        "tool_choice"
            if !(v.is_object()
                || v.as_str().is_some_and(|s| matches!(s, "auto" | "none" | "required"))) =>
        {
            "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}"
        }
        _ => return,
    };
    ctx.err(Some(field), format!("expected {expected}, found {v}"));
}
