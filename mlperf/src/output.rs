//! One turn's model output, accumulated exactly as the reference client does.
//!
//! The reference's token counts and its inline scorer do not read the raw stream: they read the
//! `TextModelOutput` its `OpenAISSEAccumulator` builds (mlcommons/endpoints `openai/accumulator.py`,
//! `core/types.py`). Its rules decide what is counted, so they are kept here rule for rule:
//!
//! - Only `choices[0]` is read. Per chunk: non-empty `delta.content` is an output piece; else
//!   non-empty `delta.reasoning_content` (else `delta.reasoning`) is a reasoning piece — so a
//!   chunk carrying both keeps only its content; a non-empty `delta.tool_calls` list is kept
//!   whole, one entry per chunk. The last non-empty `finish_reason` wins.
//! - At the end: with reasoning, `reasoning = [first piece, rest joined]` and `output` is all
//!   content joined as one string; without, `output = [first piece, rest joined]` (or `[]`).
//! - Tool-call partials are merged by `index` (`merge_tool_calls`): `id`, `type`, `name` from
//!   the partial that has them, `arguments` concatenated; keys in the order Python inserts them.
//! - "After the first chunk" (the TPOT denominator): the first reasoning piece is dropped when
//!   there is reasoning, else the first output piece; a response of pure tool-call deltas drops
//!   its first tool-call chunk before merging.
//!
//! [`Accumulator::feed`] parses one SSE `data` payload (called after the chunk's arrival was
//! stamped); [`ModelOutput::from_event_data`] reads the `sample.complete` data of a reference
//! `events.jsonl`, so both sides of a comparison are counted from the same structure.

use crate::pyjson;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A text field of the output: one string (non-streamed, or content beside reasoning) or the
/// streamed pieces (`[first, rest]`).
#[derive(Debug, Clone, PartialEq)]
pub enum Pieces {
    /// One text.
    Text(String),
    /// As streamed: the first chunk's text, then the rest.
    Chunks(Vec<String>),
}

impl Pieces {
    /// Python truthiness: a non-empty string or a non-empty tuple.
    pub fn truthy(&self) -> bool {
        match self {
            Pieces::Text(s) => !s.is_empty(),
            Pieces::Chunks(v) => !v.is_empty(),
        }
    }

    /// All text, joined.
    pub fn joined(&self) -> String {
        match self {
            Pieces::Text(s) => s.clone(),
            Pieces::Chunks(v) => v.concat(),
        }
    }
}

/// Tool calls as carried: per-chunk lists of partials (streamed) or already merged calls.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCalls {
    /// Per chunk, the partial calls it carried.
    Chunks(Vec<Vec<Value>>),
    /// Already merged.
    Merged(Vec<Value>),
}

impl ToolCalls {
    fn is_empty(&self) -> bool {
        match self {
            ToolCalls::Chunks(c) => c.is_empty(),
            ToolCalls::Merged(m) => m.is_empty(),
        }
    }
}

/// The reference's `TextModelOutput`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelOutput {
    /// The content.
    pub output: Pieces,
    /// The reasoning, when any.
    pub reasoning: Option<Pieces>,
    /// The tool calls, when any.
    pub tool_calls: Option<ToolCalls>,
}

/// What a turn's output is split into for counting and scoring: `(content, reasoning,
/// merged tool calls)`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MessageParts {
    /// The content.
    pub content: String,
    /// The reasoning.
    pub reasoning: Option<String>,
    /// The merged tool calls.
    pub tool_calls: Option<Vec<Value>>,
}

impl Default for ModelOutput {
    fn default() -> Self {
        ModelOutput {
            output: Pieces::Text(String::new()),
            reasoning: None,
            tool_calls: None,
        }
    }
}

impl ModelOutput {
    fn reasoning_truthy(&self) -> bool {
        self.reasoning.as_ref().is_some_and(Pieces::truthy)
    }

    fn tool_calls_truthy(&self) -> bool {
        self.tool_calls.as_ref().is_some_and(|t| !t.is_empty())
    }

    /// The output has reasoning or tool calls: it is counted through the chat template
    /// (`MessageInput`), else as plain text (`TextInput`).
    pub fn is_structured(&self) -> bool {
        self.reasoning_truthy() || self.tool_calls_truthy()
    }

    /// `as_message_parts()`.
    pub fn message_parts(&self) -> MessageParts {
        MessageParts {
            content: self.output.joined(),
            reasoning: self
                .reasoning
                .as_ref()
                .filter(|r| r.truthy())
                .map(Pieces::joined),
            tool_calls: merge_tool_calls(self.tool_calls.as_ref()),
        }
    }

    /// `as_message_parts_after_first_chunk()`.
    pub fn message_parts_after_first_chunk(&self) -> MessageParts {
        let reasoning_after = match &self.reasoning {
            Some(Pieces::Chunks(v)) if v.len() > 1 => Some(v[1..].concat()),
            _ => None,
        };
        let reasoning_is_tuple_truthy =
            matches!(&self.reasoning, Some(Pieces::Chunks(v)) if !v.is_empty());
        let content = if self.output.truthy() {
            match &self.output {
                Pieces::Text(s) => {
                    if reasoning_after.is_some() || reasoning_is_tuple_truthy {
                        s.clone()
                    } else {
                        String::new()
                    }
                }
                Pieces::Chunks(v) => {
                    if reasoning_after.is_some() || self.reasoning_truthy() {
                        v.concat()
                    } else if v.len() > 1 {
                        v[1..].concat()
                    } else {
                        String::new()
                    }
                }
            }
        } else {
            String::new()
        };
        MessageParts {
            content,
            reasoning: reasoning_after,
            tool_calls: merge_tool_calls(self.tool_calls_after_first_chunk().as_ref()),
        }
    }

    fn tool_calls_after_first_chunk(&self) -> Option<ToolCalls> {
        match &self.tool_calls {
            Some(ToolCalls::Chunks(c))
                if !c.is_empty() && !self.output.truthy() && !self.reasoning_truthy() =>
            {
                Some(ToolCalls::Chunks(c[1..].to_vec()))
            }
            other => other.clone(),
        }
    }

    /// `str(TextModelOutput)`: reasoning, output, then the merged tool calls as msgspec JSON.
    pub fn text(&self) -> String {
        let mut s = String::new();
        if let Some(r) = self.reasoning.as_ref().filter(|r| r.truthy()) {
            s.push_str(&r.joined());
        }
        if self.output.truthy() {
            s.push_str(&self.output.joined());
        }
        if let Some(calls) = merge_tool_calls(self.tool_calls.as_ref()) {
            s.push_str(&pyjson::msgspec_encode(&Value::Array(calls)));
        }
        s
    }

    /// `text_after_first_chunk()`.
    pub fn text_after_first_chunk(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.reasoning_truthy() {
            if let Some(Pieces::Chunks(v)) = &self.reasoning {
                if v.len() > 1 {
                    parts.extend(v[1..].iter().cloned());
                }
            }
        }
        if self.output.truthy() {
            match &self.output {
                Pieces::Text(s) => {
                    if !parts.is_empty()
                        || matches!(&self.reasoning, Some(Pieces::Chunks(v)) if !v.is_empty())
                    {
                        parts.push(s.clone());
                    }
                }
                Pieces::Chunks(v) => {
                    if !parts.is_empty() || self.reasoning_truthy() {
                        parts.extend(v.iter().cloned());
                    } else if v.len() > 1 {
                        parts.extend(v[1..].iter().cloned());
                    }
                }
            }
        }
        if let Some(calls) = merge_tool_calls(self.tool_calls_after_first_chunk().as_ref()) {
            parts.push(pyjson::msgspec_encode(&Value::Array(calls)));
        }
        parts.concat()
    }

    /// The `data` of a reference `sample.complete` event for this output (the inverse of
    /// [`ModelOutput::from_event_data`]): `["TextModelOutput", output, reasoning, tool_calls]`,
    /// trailing defaults omitted as msgspec omits them.
    pub fn to_event_data(&self) -> Value {
        let pieces = |p: &Pieces| match p {
            Pieces::Text(s) => Value::String(s.clone()),
            Pieces::Chunks(v) => Value::Array(v.iter().cloned().map(Value::String).collect()),
        };
        let mut a = vec![
            Value::String("TextModelOutput".into()),
            pieces(&self.output),
        ];
        let calls = self.tool_calls.as_ref().map(|t| match t {
            ToolCalls::Chunks(c) => Value::Array(c.iter().cloned().map(Value::Array).collect()),
            ToolCalls::Merged(m) => Value::Array(m.clone()),
        });
        if self.reasoning.is_some() || calls.is_some() {
            a.push(self.reasoning.as_ref().map_or(Value::Null, pieces));
        }
        if let Some(c) = calls {
            a.push(c);
        }
        Value::Array(a)
    }

    /// Reads the `data` of a reference `sample.complete` event: `["TextModelOutput", output,
    /// reasoning, tool_calls]` (msgspec's tagged array form; trailing defaults may be omitted).
    /// `None` for anything else (`null` for failed samples).
    pub fn from_event_data(data: &Value) -> Option<ModelOutput> {
        let a = data.as_array()?;
        if a.first()?.as_str()? != "TextModelOutput" {
            return None;
        }
        let pieces = |v: &Value| -> Option<Pieces> {
            match v {
                Value::String(s) => Some(Pieces::Text(s.clone())),
                Value::Array(items) => Some(Pieces::Chunks(
                    items
                        .iter()
                        .map(|x| x.as_str().unwrap_or_default().to_string())
                        .collect(),
                )),
                _ => None,
            }
        };
        let output = a
            .get(1)
            .and_then(pieces)
            .unwrap_or(Pieces::Text(String::new()));
        let reasoning = a.get(2).filter(|v| !v.is_null()).and_then(pieces);
        let tool_calls = match a.get(3) {
            Some(Value::Array(items)) if !items.is_empty() => {
                if items[0].is_array() {
                    Some(ToolCalls::Chunks(
                        items
                            .iter()
                            .map(|c| c.as_array().cloned().unwrap_or_default())
                            .collect(),
                    ))
                } else {
                    Some(ToolCalls::Merged(items.clone()))
                }
            }
            Some(Value::Array(_)) => Some(ToolCalls::Chunks(Vec::new())),
            _ => None,
        };
        Some(ModelOutput {
            output,
            reasoning,
            tool_calls,
        })
    }
}

/// `merge_tool_calls`: streamed partials merged by `index`, ordered by index. `None` when there
/// are none.
pub fn merge_tool_calls(calls: Option<&ToolCalls>) -> Option<Vec<Value>> {
    let chunks = match calls? {
        ToolCalls::Merged(m) => return (!m.is_empty()).then(|| m.clone()),
        ToolCalls::Chunks(c) if c.is_empty() => return None,
        ToolCalls::Chunks(c) => c,
    };
    let mut merged: Vec<(i64, Map<String, Value>)> = Vec::new();
    for chunk in chunks {
        for partial in chunk {
            let Some(p) = partial.as_object() else {
                continue;
            };
            // Python keys the dict by the value itself; servers send integers. A missing or
            // non-integer index is 0, which is where Python's `get("index", 0)` puts a missing one.
            let idx = p.get("index").and_then(Value::as_i64).unwrap_or(0);
            let pos = match merged.iter().position(|(i, _)| *i == idx) {
                Some(pos) => pos,
                None => {
                    let mut call = Map::new();
                    call.insert("type".into(), Value::String("function".into()));
                    let mut f = Map::new();
                    f.insert("arguments".into(), Value::String(String::new()));
                    call.insert("function".into(), Value::Object(f));
                    merged.push((idx, call));
                    merged.len() - 1
                }
            };
            let call = &mut merged[pos].1;
            if let Some(id) = p.get("id").filter(|v| truthy(v)) {
                call.insert("id".into(), id.clone());
            }
            if let Some(t) = p.get("type").filter(|v| truthy(v)) {
                call.insert("type".into(), t.clone());
            }
            let Some(f) = p.get("function").and_then(Value::as_object) else {
                continue;
            };
            let Some(Value::Object(target)) = call.get_mut("function") else {
                continue;
            };
            if let Some(name) = f.get("name").filter(|v| truthy(v)) {
                target.insert("name".into(), name.clone());
            }
            if let Some(args) = f.get("arguments").filter(|v| truthy(v)) {
                // Python concatenates strings; a server that sent a non-string (not OpenAI's
                // wire format) would crash the reference: its JSON text is appended instead.
                let piece = match args {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                if let Some(Value::String(acc)) = target.get_mut("arguments") {
                    acc.push_str(&piece);
                }
            }
        }
    }
    merged.sort_by_key(|(i, _)| *i);
    Some(merged.into_iter().map(|(_, c)| Value::Object(c)).collect())
}

/// Python truthiness of a JSON value.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The reference's `OpenAISSEAccumulator` for one turn. Reused across turns: [`clear`] keeps
/// the buffers.
///
/// [`clear`]: Accumulator::clear
#[derive(Debug, Default, Clone)]
pub struct Accumulator {
    first_output: Option<String>,
    rest_output: String,
    first_reasoning: Option<String>,
    rest_reasoning: String,
    tool_call_chunks: Vec<Vec<Value>>,
    finish_reason: Option<String>,
    /// Chunks that produced a stream event (the reference's RECV_FIRST / RECV_NON_FIRST).
    events: u32,
}

impl Accumulator {
    /// Forgets everything accumulated.
    pub fn clear(&mut self) {
        self.first_output = None;
        self.rest_output.clear();
        self.first_reasoning = None;
        self.rest_reasoning.clear();
        self.tool_call_chunks.clear();
        self.finish_reason = None;
        self.events = 0;
    }

    /// Feeds one SSE `data` payload (or a whole non-streamed response: its `message` is read
    /// like a delta). A payload that does not parse is ignored, as a chunk the reference could
    /// not decode produces nothing.
    pub fn feed(&mut self, data: &[u8]) {
        let Ok(chunk) = serde_json::from_slice::<Chunk<'_>>(data) else {
            return;
        };
        let Some(choice) = chunk.choices.into_iter().next() else {
            return;
        };
        if let Some(f) = choice.finish_reason.filter(|f| !f.is_empty()) {
            self.finish_reason = Some(f);
        }
        let Some(delta) = choice.delta.or(choice.message) else {
            return;
        };
        let tool_calls = delta.tool_calls.filter(|t| !t.is_empty());
        let had_tool_calls = tool_calls.is_some();
        if let Some(t) = tool_calls {
            self.tool_call_chunks.push(t);
        }
        if let Some(c) = delta.content.filter(|c| !c.0.is_empty()) {
            push_piece(&mut self.first_output, &mut self.rest_output, &c.0);
            self.events += 1;
        } else if let Some(r) = delta
            .reasoning_content
            .filter(|r| !r.0.is_empty())
            .or(delta.reasoning.filter(|r| !r.0.is_empty()))
        {
            push_piece(&mut self.first_reasoning, &mut self.rest_reasoning, &r.0);
            self.events += 1;
        } else if had_tool_calls && self.events == 0 {
            // The zero-length first-chunk sentinel of a pure tool-call response.
            self.events += 1;
        }
    }

    /// The server's last non-empty `finish_reason`.
    pub fn finish_reason(&self) -> Option<&str> {
        self.finish_reason.as_deref()
    }

    /// Nothing was received that the reference would keep.
    pub fn is_empty(&self) -> bool {
        self.first_output.is_none()
            && self.first_reasoning.is_none()
            && self.tool_call_chunks.is_empty()
    }

    /// `get_final_output()`.
    pub fn output(&self) -> ModelOutput {
        let tool_calls = (!self.tool_call_chunks.is_empty())
            .then(|| ToolCalls::Chunks(self.tool_call_chunks.clone()));
        let two = |first: &Option<String>, rest: &str| -> Vec<String> {
            let mut v: Vec<String> = first.iter().cloned().collect();
            if !rest.is_empty() {
                v.push(rest.to_string());
            }
            v
        };
        if self.first_reasoning.is_some() {
            let mut output = self.first_output.clone().unwrap_or_default();
            output.push_str(&self.rest_output);
            ModelOutput {
                output: Pieces::Text(output),
                reasoning: Some(Pieces::Chunks(two(
                    &self.first_reasoning,
                    &self.rest_reasoning,
                ))),
                tool_calls,
            }
        } else {
            ModelOutput {
                output: Pieces::Chunks(two(&self.first_output, &self.rest_output)),
                reasoning: None,
                tool_calls,
            }
        }
    }
}

fn push_piece(first: &mut Option<String>, rest: &mut String, piece: &str) {
    match first {
        None => *first = Some(piece.to_string()),
        Some(_) => rest.push_str(piece),
    }
}

/// A string borrowed from the chunk when it has no escapes (no allocation per chunk).
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow, deserialize_with = "null_default")]
    choices: Vec<Choice<'a>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    message: Option<Delta<'a>>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning: Option<Text<'a>>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
}

fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feed(acc: &mut Accumulator, v: Value) {
        acc.feed(serde_json::to_string(&v).unwrap().as_bytes());
    }

    fn delta(d: Value) -> Value {
        json!({"choices": [{"index": 0, "delta": d}]})
    }

    #[test]
    fn reasoning_then_content_then_tool_calls() {
        let mut a = Accumulator::default();
        feed(&mut a, delta(json!({"role": "assistant", "content": ""})));
        feed(&mut a, delta(json!({"reasoning_content": "Let me "})));
        feed(&mut a, delta(json!({"reasoning_content": "think."})));
        feed(
            &mut a,
            delta(json!({"content": "ok", "reasoning_content": "dropped"})),
        );
        feed(
            &mut a,
            delta(
                json!({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": "}}]}),
            ),
        );
        feed(
            &mut a,
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"ls\"}"}}]})),
        );
        feed(
            &mut a,
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        );
        let o = a.output();
        assert_eq!(o.output, Pieces::Text("ok".into()));
        assert_eq!(
            o.reasoning,
            Some(Pieces::Chunks(vec!["Let me ".into(), "think.".into()]))
        );
        assert_eq!(a.finish_reason(), Some("tool_calls"));
        let p = o.message_parts();
        assert_eq!(p.content, "ok");
        assert_eq!(p.reasoning.as_deref(), Some("Let me think."));
        let calls = p.tool_calls.unwrap();
        // Key order as Python inserts them: type, function {arguments, name}, id.
        assert_eq!(
            serde_json::to_string(&calls).unwrap(),
            r#"[{"type":"function","function":{"arguments":"{\"command\": \"ls\"}","name":"bash"},"id":"c1"}]"#
        );
        let after = o.message_parts_after_first_chunk();
        assert_eq!(after.reasoning.as_deref(), Some("think."));
        assert_eq!(after.content, "ok");
        assert!(
            after.tool_calls.is_some(),
            "tool calls are kept when text came first"
        );
    }

    #[test]
    fn pure_tool_call_response_drops_its_first_chunk_for_tpot() {
        let mut a = Accumulator::default();
        feed(
            &mut a,
            delta(
                json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "bash", "arguments": "{\"a\""}}]}),
            ),
        );
        feed(
            &mut a,
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]})),
        );
        let o = a.output();
        assert_eq!(o.output, Pieces::Chunks(vec![]));
        let after = o.message_parts_after_first_chunk();
        let calls = after.tool_calls.unwrap();
        assert_eq!(calls[0]["function"]["arguments"], ": 1}");
        assert!(calls[0].get("id").is_none());
        assert_eq!(
            o.text_after_first_chunk(),
            r#"[{"type":"function","function":{"arguments":": 1}"}}]"#
        );
    }

    #[test]
    fn content_only() {
        let mut a = Accumulator::default();
        for piece in ["Hel", "lo", " world"] {
            feed(&mut a, delta(json!({ "content": piece })));
        }
        let o = a.output();
        assert_eq!(
            o.output,
            Pieces::Chunks(vec!["Hel".into(), "lo world".into()])
        );
        assert!(!o.is_structured());
        assert_eq!(o.text(), "Hello world");
        assert_eq!(o.text_after_first_chunk(), "lo world");
        a.clear();
        feed(&mut a, delta(json!({ "content": "x" })));
        assert_eq!(a.output().text_after_first_chunk(), "");
    }

    #[test]
    fn event_data_roundtrip() {
        let d = json!(["TextModelOutput", "", ["Let me analyze th", "is."], [[{"index":0,"id":"functions.bash:0","type":"function","function":{"name":"bash","arguments":"{\"command\": \"find"}}],[{"index":0,"function":{"arguments":" .\"}"}}]]]);
        let o = ModelOutput::from_event_data(&d).unwrap();
        let p = o.message_parts();
        assert_eq!(p.reasoning.as_deref(), Some("Let me analyze this."));
        assert_eq!(
            p.tool_calls.unwrap()[0]["function"]["arguments"],
            "{\"command\": \"find .\"}"
        );
        assert!(ModelOutput::from_event_data(&Value::Null).is_none());
        assert_eq!(ModelOutput::from_event_data(&o.to_event_data()), Some(o));
    }
}
