//! Typed rows and conversations.
//!
//! Nested JSON the client forwards as-is (`tools`, `tool_calls`, `tool_results` contents, per-row
//! overrides) is kept as [`serde_json::Value`] with its key order preserved (serde_json's
//! `preserve_order`), so a request carries exactly what the file said.

use serde_json::{Map, Value};
use std::path::PathBuf;

tokentap_core::vocabulary! {
    /// Role of a row.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Role {
        /// A user message: becomes a request.
        User = "user",
        /// The model's recorded answer: replayed as history, never sent as a request.
        Assistant = "assistant",
        /// A tool's result: becomes a request.
        Tool = "tool",
    }
}

impl Role {
    /// `user` and `tool` rows become requests.
    pub fn is_client(self) -> bool {
        !matches!(self, Role::Assistant)
    }
}

/// Names of the per-row sampling overrides (docs/benchmark.md#dataset), in the order
/// docs/benchmark.md#requests puts them in a body where they appear there. The last three are
/// tokentap's (what `dataset capture` keeps of an agent's requests); the MLPerf client ignores
/// them.
pub const OVERRIDE_FIELDS: &[&str] = &[
    "model",
    "max_new_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "stop",
    "n",
    "logit_bias",
    "user",
    "chat_template",
    "max_tokens",
    "stream_options",
    "tool_choice",
];

/// One tool result of a `tool` row.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The call it answers.
    pub tool_call_id: String,
    /// Usually a string; kept as JSON so any value is forwarded as it was. `None` when the
    /// file had no `content` key (a validation error).
    pub content: Option<Value>,
}

/// One row (one chat message) of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// 1-based line in the file.
    pub line: usize,
    /// The row's `turn` (1-based index among all rows of its conversation).
    pub turn: u32,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: Role,
    /// `content`: a string for every row docs/benchmark.md#dataset defines; kept as JSON for
    /// content-part arrays.
    pub content: Option<Value>,
    /// `system`: the row's system prompt.
    pub system: Option<String>,
    /// `tools`, as given on this row (inheritance is resolved by the request builder).
    pub tools: Option<Value>,
    /// `tool_calls` of an assistant row (OpenAI format, key order preserved).
    pub tool_calls: Option<Vec<Value>>,
    /// `tool_results` of a tool row.
    pub tool_results: Option<Vec<ToolResult>>,
    /// An assistant row's recorded reasoning.
    pub reasoning_content: Option<String>,
    /// Seconds to wait before issuing the row (with `--delays`).
    pub delay_seconds: Option<f64>,
    /// The row's `name`.
    pub name: Option<String>,
    /// The row's `intent_codes` (workflow conversations; what the scorer checks).
    pub intent_codes: Option<Vec<String>>,
    /// Per-row overrides present on the row (keys from [`OVERRIDE_FIELDS`]).
    pub overrides: Map<String, Value>,
}

impl Row {
    /// `content` as text, if it is a string.
    pub fn content_str(&self) -> Option<&str> {
        self.content.as_ref().and_then(Value::as_str)
    }

    /// Has at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
    }
}

/// One trajectory: its rows in turn order.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// The `conversation_id`.
    pub id: String,
    /// Rows sorted by `turn` (1..N).
    pub rows: Vec<Row>,
}

impl Conversation {
    /// The first non-empty `system` of the conversation: message 0 of every request.
    pub fn system(&self) -> Option<&str> {
        self.rows
            .iter()
            .filter_map(|r| r.system.as_deref())
            .find(|s| !s.is_empty())
    }

    /// The `tools` of the first user row: inherited by client rows that have none.
    pub fn default_tools(&self) -> Option<&Value> {
        self.rows
            .iter()
            .find(|r| r.role == Role::User)
            .and_then(|r| r.tools.as_ref())
    }

    /// Indices (into `rows`) of the client turns, in order.
    pub fn client_turns(&self) -> impl Iterator<Item = usize> + '_ {
        self.rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.role.is_client())
            .map(|(i, _)| i)
    }

    /// Workflow conversations have ids `sim_NNNNNN`, the rest are coding
    /// (docs/benchmark.md#workload).
    pub fn is_workflow(&self) -> bool {
        self.id.starts_with("sim_")
    }
}

/// A loaded, valid dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// The file it was read from.
    pub path: PathBuf,
    /// Conversations in file order (= trajectory order).
    pub conversations: Vec<Conversation>,
}

impl Dataset {
    /// `user` and `tool` rows: the requests one pass sends.
    pub fn client_turns(&self) -> usize {
        self.conversations
            .iter()
            .map(|c| c.client_turns().count())
            .sum()
    }
}
