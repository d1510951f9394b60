//! Reading a JSONL file into a [`Dataset`].
//!
//! Every line is read, every problem collected (not just the first), each naming the file, the
//! line, the conversation, the field and what was expected. A dataset that loads has passed all
//! of SPEC §2.

use crate::error::{DatasetError, DatasetErrors};
use crate::model::{Conversation, Dataset, Role, Row, ToolResult, OVERRIDE_FIELDS};
use crate::validate;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

impl Dataset {
    /// Reads and validates `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Dataset, DatasetErrors> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            DatasetErrors(vec![DatasetError {
                path: path.to_path_buf(),
                line: None,
                conversation: None,
                field: None,
                message: format!("cannot read the file: {e}"),
            }])
        })?;
        Dataset::parse(path, &text)
    }

    /// Parses and validates JSONL `text`; `path` is used in messages.
    pub fn parse(path: impl AsRef<Path>, text: &str) -> Result<Dataset, DatasetErrors> {
        let path = path.as_ref().to_path_buf();
        let mut errors = Vec::new();
        let mut conversations: Vec<Conversation> = Vec::new();
        // conversation id -> (index in `conversations`, first line)
        let mut seen: HashMap<String, (usize, usize)> = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let lineno = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let mut ctx = Ctx { path: &path, line: lineno, conversation: None, errors: &mut errors };
            let Some((id, row)) = parse_row(&mut ctx, line) else {
                continue;
            };
            match seen.get(&id) {
                Some(&(idx, first)) => {
                    if idx + 1 != conversations.len() {
                        ctx.conversation = Some(id.clone());
                        ctx.err(
                            None,
                            format!(
                                "rows of a conversation must be contiguous: this conversation started at line {first} and other conversations came in between"
                            ),
                        );
                        continue;
                    }
                    conversations[idx].rows.push(row);
                }
                None => {
                    seen.insert(id.clone(), (conversations.len(), lineno));
                    conversations.push(Conversation { id, rows: vec![row] });
                }
            }
        }
        if conversations.is_empty() && errors.is_empty() {
            errors.push(DatasetError {
                path: path.clone(),
                line: None,
                conversation: None,
                field: None,
                message: "no conversations: expected at least one JSONL row with conversation_id, turn and role".into(),
            });
        }
        for conv in &mut conversations {
            conv.rows.sort_by_key(|r| r.turn);
            errors.extend(validate::check(&path, conv));
        }
        if errors.is_empty() {
            Ok(Dataset { path, conversations })
        } else {
            errors.sort_by_key(|e| e.line.unwrap_or(0));
            Err(DatasetErrors(errors))
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

/// Parses one line; `None` if it is skipped (metadata) or too broken to place.
fn parse_row(ctx: &mut Ctx<'_>, line: &str) -> Option<(String, Row)> {
    let obj: Map<String, Value> = match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(o)) => o,
        Ok(other) => {
            ctx.err(None, format!("expected a JSON object, found {}", kind(&other)));
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
    let id = match obj.get("conversation_id") {
        Some(Value::String(s)) if !s.is_empty() => {
            if let Some(c) = s.chars().find(|c| !(' '..='~').contains(c)) {
                ctx.err(
                    Some("conversation_id"),
                    format!("expected printable ASCII only (it becomes an HTTP header value), found {c:?}"),
                );
            }
            s.clone()
        }
        Some(Value::String(_)) => {
            ctx.err(Some("conversation_id"), "expected a non-empty string, found \"\"".into());
            return None;
        }
        Some(v) => {
            ctx.err(Some("conversation_id"), format!("expected a non-empty string, found {}", kind(v)));
            return None;
        }
        None => {
            ctx.err(Some("conversation_id"), "missing: every row needs a conversation_id".into());
            return None;
        }
    };
    ctx.conversation = Some(id.clone());
    let turn = match obj.get("turn") {
        Some(v) => match v.as_u64() {
            Some(t) if t >= 1 && t <= u32::MAX as u64 => t as u32,
            _ => {
                ctx.err(Some("turn"), format!("expected an integer ≥ 1, found {v}"));
                return None;
            }
        },
        None => {
            ctx.err(Some("turn"), "missing: every row needs a 1-based turn".into());
            return None;
        }
    };
    let role = match obj.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("tool") => Role::Tool,
        Some(other) => {
            ctx.err(Some("role"), format!("expected \"user\", \"assistant\" or \"tool\", found {other:?}"));
            return None;
        }
        None => {
            let found = obj.get("role").map_or("nothing", kind);
            ctx.err(Some("role"), format!("expected \"user\", \"assistant\" or \"tool\", found {found}"));
            return None;
        }
    };

    let opt_str = |ctx: &mut Ctx<'_>, field: &str| -> Option<String> {
        match obj.get(field) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => {
                ctx.err(Some(field), format!("expected a string, found {}", kind(v)));
                None
            }
        }
    };
    let content = match obj.get("content") {
        None | Some(Value::Null) => None,
        Some(v @ (Value::String(_) | Value::Array(_))) => Some(v.clone()),
        Some(v) => {
            ctx.err(Some("content"), format!("expected a string, found {}", kind(v)));
            None
        }
    };
    let system = opt_str(ctx, "system");
    let reasoning_content = opt_str(ctx, "reasoning_content");
    let name = opt_str(ctx, "name");
    let tools = match obj.get("tools") {
        None | Some(Value::Null) => None,
        Some(v @ Value::Array(_)) => Some(v.clone()),
        Some(v) => {
            ctx.err(Some("tools"), format!("expected an array of tool definitions, found {}", kind(v)));
            None
        }
    };
    let tool_calls = match obj.get("tool_calls") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(a.clone()),
        Some(v) => {
            ctx.err(Some("tool_calls"), format!("expected an array of tool calls, found {}", kind(v)));
            None
        }
    };
    let tool_results = match obj.get("tool_results") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => {
            let mut out = Vec::with_capacity(a.len());
            for (i, r) in a.iter().enumerate() {
                match r {
                    Value::Object(o) => {
                        let tool_call_id = match o.get("tool_call_id") {
                            Some(Value::String(s)) => s.clone(),
                            None | Some(Value::Null) => String::new(),
                            Some(v) => {
                                ctx.err(
                                    Some(&format!("tool_results[{i}].tool_call_id")),
                                    format!("expected a string, found {}", kind(v)),
                                );
                                String::new()
                            }
                        };
                        out.push(ToolResult { tool_call_id, content: o.get("content").cloned() });
                    }
                    v => ctx.err(
                        Some(&format!("tool_results[{i}]")),
                        format!("expected an object {{tool_call_id, content}}, found {}", kind(v)),
                    ),
                }
            }
            Some(out)
        }
        Some(v) => {
            ctx.err(Some("tool_results"), format!("expected an array, found {}", kind(v)));
            None
        }
    };
    let delay_seconds = match obj.get("delay_seconds") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(d) if d.is_finite() && d >= 0.0 => Some(d),
            _ => {
                ctx.err(Some("delay_seconds"), format!("expected a number of seconds ≥ 0, found {v}"));
                None
            }
        },
    };
    let intent_codes = match obj.get("intent_codes") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
            Some(a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        }
        Some(v) => {
            ctx.err(Some("intent_codes"), format!("expected an array of strings like [\"I042\"], found {v}"));
            None
        }
    };
    let mut overrides = Map::new();
    for &f in OVERRIDE_FIELDS {
        if let Some(v) = obj.get(f) {
            if !v.is_null() {
                overrides.insert(f.to_string(), v.clone());
            }
        }
    }
    for f in ["max_new_tokens", "max_completion_tokens", "n", "top_k", "seed"] {
        if let Some(v) = overrides.get(f) {
            if !(v.is_i64() || v.is_u64()) {
                ctx.err(Some(f), format!("expected an integer, found {v}"));
            }
        }
    }
    for f in ["temperature", "top_p", "repetition_penalty", "frequency_penalty", "presence_penalty"] {
        if let Some(v) = overrides.get(f) {
            if !v.is_number() {
                ctx.err(Some(f), format!("expected a number, found {v}"));
            }
        }
    }
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
