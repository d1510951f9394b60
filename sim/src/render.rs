//! The canonical rendering of a request into the text the stand-in tokenizer counts.
//!
//! A real engine applies the model's chat template and tokenizes the result; the prefix KV cache
//! works on those tokens. The sim does the same with a fixed, documented template:
//!
//! ```text
//! <|tools|>\n  TOOLS-JSON  <|end|>\n                      (only when the request has `tools`)
//! for each message:
//!   <|ROLE|>\n
//!   <think>REASONING</think>                             (only when `reasoning_content` is non-empty)
//!   CONTENT-TEXT                                         (string, or the `text` parts joined)
//!   TOOL-CALLS-JSON                                      (only when `tool_calls` is present)
//!   TOOL-CALL-ID                                         (only when `tool_call_id` is present)
//!   <|end|>\n
//! <|assistant|>\n                                        (the generation prompt)
//! ```
//!
//! JSON parts are `serde_json` compact serializations of the request's own values, so the same
//! value always renders to the same bytes. Tools come first, as in Kimi K2's template, so a
//! salted system prompt (docs/benchmark.md#salting) still shares the tool-definition blocks across
//! passes, while everything from the system message on is private to the pass.
//!
//! The rendering is prefix-stable: a request that repeats the previous request's messages and
//! appends more shares the previous rendering up to its final `<|assistant|>\n`, and the
//! assistant message it appends renders as [`assistant_output`] of the same text — which is how
//! a following turn gets cache hits on blocks the sim generated.

use serde_json::Value;
use tokentap_core::wire::{ChatRequest, Message, ToolCall};

/// The prompt text of a chat request.
pub fn chat_prompt(req: &ChatRequest) -> String {
    let mut out = String::with_capacity(estimate(req));
    if let Some(tools) = &req.tools {
        out.push_str("<|tools|>\n");
        push_json(&mut out, tools);
        out.push_str("<|end|>\n");
    }
    for m in &req.messages {
        push_message(&mut out, m);
    }
    out.push_str("<|assistant|>\n");
    out
}

/// The prompt text of a `/v1/completions` request: the prompt itself, untemplated.
pub fn completion_prompt(prompt: &Value) -> Option<String> {
    match prompt {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(|p| p.as_str())
            .collect::<Option<Vec<_>>>()
            .map(|v| v.concat()),
        _ => None,
    }
}

/// What follows a prompt when the generated output is replayed as the next request's assistant
/// message: exactly what [`chat_prompt`] renders for that message after its `<|assistant|>\n`.
pub fn assistant_output(reasoning: &str, content: &str, tool_calls: Option<&[ToolCall]>) -> String {
    let mut out = String::with_capacity(reasoning.len() + content.len() + 64);
    push_body(&mut out, Some(reasoning), content, tool_calls, None);
    out
}

fn push_message(out: &mut String, m: &Message) {
    out.push_str("<|");
    out.push_str(&m.role);
    out.push_str("|>\n");
    let content = match &m.content {
        Some(Value::String(s)) => std::borrow::Cow::Borrowed(s.as_str()),
        _ => std::borrow::Cow::Owned(m.text()),
    };
    push_body(
        out,
        m.reasoning_content.as_deref(),
        &content,
        m.tool_calls.as_deref(),
        m.tool_call_id.as_deref(),
    );
}

fn push_body(
    out: &mut String,
    reasoning: Option<&str>,
    content: &str,
    tool_calls: Option<&[ToolCall]>,
    tool_call_id: Option<&str>,
) {
    if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
        out.push_str("<think>");
        out.push_str(r);
        out.push_str("</think>");
    }
    out.push_str(content);
    if let Some(calls) = tool_calls {
        push_json(out, calls);
    }
    if let Some(id) = tool_call_id {
        out.push_str(id);
    }
    out.push_str("<|end|>\n");
}

fn push_json<T: serde::Serialize + ?Sized>(out: &mut String, v: &T) {
    // Invariant: serializing a serde_json value or a wire type cannot fail (string keys only).
    out.push_str(&serde_json::to_string(v).unwrap_or_default());
}

fn estimate(req: &ChatRequest) -> usize {
    req.messages
        .iter()
        .map(|m| {
            32 + match &m.content {
                Some(Value::String(s)) => s.len(),
                _ => 0,
            } + m.reasoning_content.as_ref().map_or(0, |r| r.len() + 16)
        })
        .sum::<usize>()
        + 64
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokentap_core::wire::FunctionCall;

    fn req(json: &str) -> ChatRequest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn documented_shape() {
        let r = req(
            r#"{"tools":[{"type":"function"}],"messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","reasoning_content":"R","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"out"}]}"#,
        );
        assert_eq!(
            chat_prompt(&r),
            "<|tools|>\n[{\"type\":\"function\"}]<|end|>\n<|system|>\nS<|end|>\n<|user|>\nab<|end|>\n\
             <|assistant|>\n<think>R</think>[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]<|end|>\n\
             <|tool|>\noutc1<|end|>\n<|assistant|>\n"
        );
    }

    #[test]
    fn extension_shares_prefix_with_generated_output() {
        let first = req(r#"{"messages":[{"role":"user","content":"hi"}]}"#);
        let p1 = chat_prompt(&first);
        let calls = [ToolCall {
            index: None,
            id: Some("call_1".into()),
            kind: Some("function".into()),
            function: FunctionCall {
                name: Some("bash".into()),
                arguments: "{\"command\":\"ls\"}".into(),
            },
        }];
        let generated = p1.clone() + &assistant_output("think", "", Some(&calls));
        let second = req(
            r#"{"messages":[{"role":"user","content":"hi"},{"role":"assistant","reasoning_content":"think","tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},{"role":"user","content":"next"}]}"#,
        );
        let p2 = chat_prompt(&second);
        assert!(p2.starts_with(&generated), "{p2}\n{generated}");
    }

    #[test]
    fn completion_prompt_forms() {
        assert_eq!(
            completion_prompt(&serde_json::json!("ab")).as_deref(),
            Some("ab")
        );
        assert_eq!(
            completion_prompt(&serde_json::json!(["a", "b"])).as_deref(),
            Some("ab")
        );
        assert_eq!(completion_prompt(&serde_json::json!([1, 2])), None);
    }
}
