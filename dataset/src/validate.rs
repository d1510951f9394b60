//! Conversation-level rules of docs/benchmark.md#dataset, checked after the rows of a conversation
//! are collected and sorted by `turn`. Each failure names the row's line, the conversation, the
//! field and the rule.

use crate::error::DatasetError;
use crate::model::{Conversation, Role, Row};
use serde_json::Value;
use std::path::Path;

/// All rule violations of one conversation (rows sorted by turn).
pub fn check(path: &Path, conv: &Conversation) -> Vec<DatasetError> {
    let mut out = Vec::new();
    let mut err = |row: &Row, field: Option<String>, message: String| {
        out.push(DatasetError {
            path: path.to_path_buf(),
            line: Some(row.line),
            conversation: Some(conv.id.clone()),
            field,
            message,
        })
    };

    if !check_turns(conv, &mut err) {
        // Sequence rules are meaningless once numbering is broken.
        return out;
    }
    let mut prev: Option<&Row> = None;
    for row in &conv.rows {
        check_role_sequence(prev, row, &mut err);
        match row.role {
            Role::User => check_user(prev, row, &mut err),
            Role::Assistant => check_assistant(row, &mut err),
            Role::Tool => check_tool(prev, row, &mut err),
        }
        prev = Some(row);
    }
    out
}

/// Turns, sorted, are exactly 1..N: reports the first row that breaks it (and returns false).
fn check_turns(conv: &Conversation, err: &mut impl FnMut(&Row, Option<String>, String)) -> bool {
    for (i, row) in conv.rows.iter().enumerate() {
        let expected = i as u32 + 1;
        if row.turn != expected {
            let why = if i > 0 && conv.rows[i - 1].turn == row.turn {
                format!(
                    "turn {} appears twice (also at line {})",
                    row.turn,
                    conv.rows[i - 1].line
                )
            } else {
                format!(
                    "expected turn {expected} (turns must be exactly 1..{} with no gaps), found {}",
                    conv.rows.len(),
                    row.turn
                )
            };
            err(row, Some("turn".into()), why);
            return false;
        }
    }
    true
}

/// The role sequence: user first, then assistant after user, tool or user after assistant,
/// assistant or user after tool.
fn check_role_sequence(
    prev: Option<&Row>,
    row: &Row,
    err: &mut impl FnMut(&Row, Option<String>, String),
) {
    let allowed = match (prev.map(|p| p.role), row.role) {
        (None, Role::User) => true,
        (None, _) => false,
        (Some(Role::User), Role::Assistant) => true,
        (Some(Role::Assistant), Role::Tool | Role::User) => true,
        (Some(Role::Tool), Role::Assistant | Role::User) => true,
        _ => false,
    };
    if !allowed {
        let expected = match prev.map(|p| p.role) {
            None => "the first row to be \"user\"",
            Some(Role::User) => "\"assistant\" after a \"user\" row",
            Some(Role::Assistant) => "\"tool\" or \"user\" after an \"assistant\" row",
            Some(Role::Tool) => "\"assistant\" or \"user\" after a \"tool\" row",
        };
        err(
            row,
            Some("role".into()),
            format!("expected {expected}, found {:?}", row.role.as_str()),
        );
    }
}

/// A user row has content and does not answer an assistant row's tool calls.
fn check_user(prev: Option<&Row>, row: &Row, err: &mut impl FnMut(&Row, Option<String>, String)) {
    if !non_empty_content(row.content.as_ref()) {
        err(
            row,
            Some("content".into()),
            "a user row needs non-empty content".into(),
        );
    }
    if let Some(p) = prev {
        if p.role == Role::Assistant && p.has_tool_calls() {
            err(
                row,
                Some("role".into()),
                format!(
                    "a user row cannot directly follow an assistant row with tool_calls (line {}): expected a \"tool\" row with their results",
                    p.line
                ),
            );
        }
    }
}

/// An assistant row has content or tool calls, and each call is well formed.
fn check_assistant(row: &Row, err: &mut impl FnMut(&Row, Option<String>, String)) {
    let has_content = non_empty_content(row.content.as_ref());
    if !has_content && !row.has_tool_calls() {
        err(
            row,
            Some("content".into()),
            "an assistant row needs non-empty content or non-empty tool_calls".into(),
        );
    }
    for (i, call) in row.tool_calls.iter().flatten().enumerate() {
        check_call(call, i, &mut |f, m| err(row, Some(f), m));
    }
}

/// A tool row follows an assistant row with tool calls and carries their results, each with a
/// call id and a content.
fn check_tool(prev: Option<&Row>, row: &Row, err: &mut impl FnMut(&Row, Option<String>, String)) {
    // After a user or tool row (or first) the role-sequence rule above already said what was
    // expected; only an assistant row without calls needs this message.
    if let Some(p) = prev.filter(|p| p.role == Role::Assistant && !p.has_tool_calls()) {
        err(
            row,
            Some("role".into()),
            format!(
                "a tool row must follow an assistant row with non-empty tool_calls; the assistant row at line {} has none",
                p.line
            ),
        );
    }
    match &row.tool_results {
        None => err(
            row,
            Some("tool_results".into()),
            "a tool row needs non-empty tool_results".into(),
        ),
        Some(r) if r.is_empty() => err(
            row,
            Some("tool_results".into()),
            "a tool row needs non-empty tool_results, found []".into(),
        ),
        Some(results) => {
            for (i, r) in results.iter().enumerate() {
                if r.tool_call_id.is_empty() {
                    err(
                        row,
                        Some(format!("tool_results[{i}].tool_call_id")),
                        "expected a non-empty string".into(),
                    );
                }
                if r.content.is_none() {
                    err(
                        row,
                        Some(format!("tool_results[{i}].content")),
                        "missing: each tool result needs a content".into(),
                    );
                }
            }
        }
    }
}

fn non_empty_content(v: Option<&Value>) -> bool {
    match v {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        _ => false,
    }
}

fn check_call(call: &Value, i: usize, err: &mut impl FnMut(String, String)) {
    let Some(obj) = call.as_object() else {
        err(
            format!("tool_calls[{i}]"),
            "expected an object {id, type, function}".into(),
        );
        return;
    };
    if obj
        .get("id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        err(
            format!("tool_calls[{i}].id"),
            "expected a non-empty string".into(),
        );
    }
    if obj.get("type").and_then(Value::as_str) != Some("function") {
        let found = obj
            .get("type")
            .map_or("nothing".to_string(), Value::to_string);
        err(
            format!("tool_calls[{i}].type"),
            format!("expected \"function\", found {found}"),
        );
    }
    match obj.get("function").and_then(Value::as_object) {
        None => err(
            format!("tool_calls[{i}].function"),
            "expected an object {name, arguments}".into(),
        ),
        Some(f) => {
            if f.get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                err(
                    format!("tool_calls[{i}].function.name"),
                    "expected a non-empty string".into(),
                );
            }
            if !f.get("arguments").is_some_and(Value::is_string) {
                err(
                    format!("tool_calls[{i}].function.arguments"),
                    "expected a JSON string of arguments".into(),
                );
            }
        }
    }
}
