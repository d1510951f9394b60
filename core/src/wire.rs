//! OpenAI chat-completions wire types, for the parts tokentap reads or writes as whole values
//! (the simulated server's requests and responses, tests). The measurement hot path does not use
//! these: it reads chunks through [`crate::chunk`] without building values.
//!
//! Unknown request fields are kept in `extra` so nothing a client sends is silently lost.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `POST /v1/chat/completions` request body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `messages`.
    pub messages: Vec<Message>,
    /// `stream`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// `stream_options`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// `max_completion_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Deprecated spelling, still sent by many clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// `seed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Everything else (sampling settings, `chat_template_kwargs`, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatRequest {
    /// `max_completion_tokens`, else `max_tokens`.
    pub fn max_output_tokens(&self) -> Option<u64> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    /// `stream_options.include_usage`.
    pub fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }

    /// `stream_options.continuous_usage_stats` (vLLM).
    pub fn continuous_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.continuous_usage_stats)
            .unwrap_or(false)
    }
}

/// `stream_options`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// `include_usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
    /// vLLM's extension: cumulative usage on every chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuous_usage_stats: Option<bool>,
}

/// One chat message. `content` is a string or an array of content parts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `role`.
    pub role: String,
    /// `content`: a string or content parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    /// `reasoning_content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// `tool_calls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// `tool_call_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    /// The text of `content`: the string, or the `text` parts joined.
    pub fn text(&self) -> String {
        match &self.content {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    }
}

/// One tool call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// `index` (streamed deltas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `type`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `function`.
    pub function: FunctionCall,
}

/// A tool call's function.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `arguments` (a JSON text).
    #[serde(default)]
    pub arguments: String,
}

/// Usage object as servers send it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireUsage {
    /// `prompt_tokens`.
    pub prompt_tokens: u64,
    /// `completion_tokens`.
    pub completion_tokens: u64,
    /// `total_tokens`.
    pub total_tokens: u64,
    /// `prompt_tokens_details`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// `completion_tokens_details`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// `cached_tokens`.
    pub cached_tokens: u64,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    /// `reasoning_tokens`.
    pub reasoning_tokens: u64,
}

/// One streamed `chat.completion.chunk`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatChunk {
    /// `id`.
    pub id: String,
    /// `object`.
    pub object: String,
    /// `created`.
    pub created: u64,
    /// `model`.
    pub model: String,
    /// `choices`.
    pub choices: Vec<ChunkChoice>,
    /// `usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<WireUsage>,
}

/// One choice of a chunk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    /// `index`.
    pub index: u32,
    /// `delta`.
    pub delta: Delta,
    /// Always serialized (`null` until the end), as servers do.
    pub finish_reason: Option<String>,
}

/// What a chunk adds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// `role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// `reasoning_content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// `tool_calls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
}

/// Non-streaming `chat.completion` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// `id`.
    pub id: String,
    /// `object`.
    pub object: String,
    /// `created`.
    pub created: u64,
    /// `model`.
    pub model: String,
    /// `choices`.
    pub choices: Vec<ResponseChoice>,
    /// `usage`.
    pub usage: WireUsage,
}

/// One choice of a response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseChoice {
    /// `index`.
    pub index: u32,
    /// `message`.
    pub message: Message,
    /// `finish_reason`.
    pub finish_reason: Option<String>,
}

/// OpenAI-style error body: `{"error": {"message", "type", "code"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// `error`.
    pub error: ErrorDetail,
}

/// `error`'s fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// `message`.
    pub message: String,
    /// `type`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault (vLLM's `"model"` for an unknown model), when one is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<Value>,
}

impl ErrorBody {
    /// An error of `kind` with `message` (and the status as `code`).
    pub fn new(kind: &str, message: impl Into<String>, code: Option<u16>) -> Self {
        ErrorBody {
            error: ErrorDetail {
                message: message.into(),
                kind: kind.to_string(),
                param: None,
                code: code.map(Value::from),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_keeps_unknown_fields_and_reads_both_max_spellings() {
        let r: ChatRequest = serde_json::from_str(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":7,"top_k":20,"stream":true,"stream_options":{"include_usage":true}}"#,
        )
        .unwrap();
        assert_eq!(r.max_output_tokens(), Some(7));
        assert!(r.include_usage() && !r.continuous_usage());
        assert_eq!(r.extra["top_k"], 20);
        assert_eq!(r.messages[0].text(), "hi");
    }

    #[test]
    fn content_parts() {
        let m: Message = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(m.text(), "ab");
    }
}
