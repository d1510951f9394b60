//! The Responses and Messages APIs in chat form: their requests as chat `messages` and `tools`,
//! their responses (streamed or whole) as one assistant message. The simulated server serves
//! both APIs through it, and `tokentap dataset capture` turns recorded sessions of any API into
//! the dataset's chat rows with it (docs/benchmark.md#other-apis).
//!
//! What has no chat form is named in [`Converted::dropped`] (one entry per kind, with a count),
//! never silently lost: images and files, server-side tools, encrypted reasoning, and items of
//! kinds this module does not know.

use crate::events::Api;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// A request in chat form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Converted {
    /// Chat messages in order; a system prompt first, as `{"role":"system","content":…}`.
    pub messages: Vec<Value>,
    /// Chat `tools` (`[{"type":"function","function":{name, description, parameters}}]`).
    pub tools: Option<Value>,
    /// What had no chat form: a description of each kind → how many.
    pub dropped: BTreeMap<String, u64>,
    /// The request's parameters a chat request has too, under their chat names and in chat form
    /// ([`CHAT_PARAMS`]): what a replay of the conversation sends back.
    pub params: Map<String, Value>,
}

/// The chat request parameters [`Converted::params`] carries. A chat request's are kept under
/// their own names (`max_tokens` stays `max_tokens`); the Responses API's `max_output_tokens` and
/// the Messages API's `max_tokens` become `max_completion_tokens`, its `stop_sequences` `stop`,
/// and each API's `tool_choice` the chat form (`"auto"`, `"none"`, `"required"`, or
/// `{"type":"function","function":{"name":…}}`). Streaming itself (`stream`) is the replay's.
pub const CHAT_PARAMS: &[&str] = &[
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "stop",
    "n",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "user",
    "stream_options",
    "tool_choice",
];

impl Converted {
    fn drop_one(&mut self, what: impl Into<String>) {
        *self.dropped.entry(what.into()).or_default() += 1;
    }
}

/// A chat, Responses or Messages request body in chat form.
pub fn request(api: Api, body: &Value) -> Converted {
    let mut c = match api {
        Api::Chat | Api::Completions => chat_request(body),
        Api::Responses => responses_request(body),
        Api::Messages => messages_request(body),
    };
    c.params = params(api, body);
    c
}

/// The request's [`CHAT_PARAMS`], in chat form; nulls left out.
fn params(api: Api, body: &Value) -> Map<String, Value> {
    // (the API's name, the chat name) of each parameter the API shares with a chat request.
    const RESPONSES: &[(&str, &str)] = &[
        ("max_output_tokens", "max_completion_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("user", "user"),
        ("tool_choice", "tool_choice"),
    ];
    const MESSAGES: &[(&str, &str)] = &[
        ("max_tokens", "max_completion_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("top_k", "top_k"),
        ("stop_sequences", "stop"),
        ("tool_choice", "tool_choice"),
    ];
    let mut out = Map::new();
    let Some(obj) = body.as_object() else {
        return out;
    };
    let mut put = |from: &str, to: &str| {
        let Some(v) = obj.get(from).filter(|v| !v.is_null()) else {
            return;
        };
        let v = match to {
            "tool_choice" => chat_tool_choice(api, v),
            _ => Some(v.clone()),
        };
        if let Some(v) = v {
            out.insert(to.to_string(), v);
        }
    };
    match api {
        Api::Chat | Api::Completions => CHAT_PARAMS.iter().for_each(|k| put(k, k)),
        Api::Responses => RESPONSES.iter().for_each(|(f, t)| put(f, t)),
        Api::Messages => MESSAGES.iter().for_each(|(f, t)| put(f, t)),
    }
    out
}

/// A `tool_choice` in chat form: the Messages API's `{"type": "auto" | "any" | "tool" | "none"}`,
/// the Responses API's `{"type":"function","name":…}`; `None` for a form none of them has.
fn chat_tool_choice(api: Api, v: &Value) -> Option<Value> {
    let named = |name: Option<&Value>| json!({"type": "function", "function": {"name": name.cloned().unwrap_or(Value::Null)}});
    match (api, v) {
        (_, Value::String(s)) if matches!(s.as_str(), "auto" | "none" | "required") => {
            Some(v.clone())
        }
        (Api::Chat, Value::Object(_)) => Some(v.clone()),
        (Api::Messages, Value::Object(o)) => match o.get("type").and_then(Value::as_str) {
            Some("auto") => Some("auto".into()),
            Some("any") => Some("required".into()),
            Some("none") => Some("none".into()),
            Some("tool") => Some(named(o.get("name"))),
            _ => None,
        },
        (Api::Responses, Value::Object(o)) => match o.get("type").and_then(Value::as_str) {
            Some("function") => Some(named(o.get("name"))),
            _ => None,
        },
        _ => None,
    }
}

fn chat_request(body: &Value) -> Converted {
    Converted {
        messages: body
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        tools: body.get("tools").filter(|t| !t.is_null()).cloned(),
        ..Converted::default()
    }
}

/// Text parts of a content array (`text`, `input_text`, `output_text`) joined; other parts
/// dropped and counted. A string is itself.
fn text_of(content: &Value, out: &mut Converted, api: &str) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut t = String::new();
            for p in parts {
                match (
                    p.get("type").and_then(Value::as_str),
                    p.get("text").and_then(Value::as_str),
                ) {
                    (Some("text" | "input_text" | "output_text"), Some(x)) => t.push_str(x),
                    (kind, _) => out.drop_one(format!(
                        "{api} content part {}",
                        kind.unwrap_or("without a type")
                    )),
                }
            }
            t
        }
        Value::Null => String::new(),
        _ => {
            out.drop_one(format!("{api} content that is neither text nor parts"));
            String::new()
        }
    }
}

fn function_tool(name: &Value, description: Option<&Value>, parameters: Option<&Value>) -> Value {
    let mut f = Map::new();
    f.insert("name".into(), name.clone());
    if let Some(d) = description.filter(|d| !d.is_null()) {
        f.insert("description".into(), d.clone());
    }
    if let Some(p) = parameters.filter(|p| !p.is_null()) {
        f.insert("parameters".into(), p.clone());
    }
    json!({"type": "function", "function": Value::Object(f)})
}

fn tool_call(id: &Value, name: &Value, arguments: String) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// Appends tool calls to the last message when it is an assistant message, else opens one.
fn push_calls(messages: &mut Vec<Value>, calls: Vec<Value>, reasoning: &mut Option<String>) {
    if let Some(last) = messages.last_mut().filter(|m| m["role"] == "assistant") {
        let list = last
            .as_object_mut()
            .map(|o| o.entry("tool_calls").or_insert_with(|| json!([])));
        if let Some(Value::Array(a)) = list {
            a.extend(calls);
            return;
        }
    }
    let mut m = Map::new();
    m.insert("role".into(), "assistant".into());
    m.insert("tool_calls".into(), Value::Array(calls));
    if let Some(r) = reasoning.take() {
        m.insert("reasoning_content".into(), r.into());
    }
    messages.push(Value::Object(m));
}

fn responses_request(body: &Value) -> Converted {
    let mut out = Converted::default();
    if let Some(i) = body
        .get("instructions")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        out.messages.push(json!({"role": "system", "content": i}));
    }
    let mut reasoning: Option<String> = None;
    match body.get("input") {
        Some(Value::String(s)) => out.messages.push(json!({"role": "user", "content": s})),
        Some(Value::Array(items)) => {
            for item in items {
                responses_item(item, &mut out, &mut reasoning);
            }
        }
        _ => {}
    }
    if reasoning.is_some() {
        out.drop_one("Responses reasoning item not followed by an assistant message");
    }
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        let mut list = Vec::new();
        for t in tools {
            match (t.get("type").and_then(Value::as_str), t.get("name")) {
                (Some("function"), Some(name)) => list.push(function_tool(
                    name,
                    t.get("description"),
                    t.get("parameters"),
                )),
                (kind, _) => out.drop_one(format!(
                    "Responses tool {}",
                    kind.unwrap_or("without a type")
                )),
            }
        }
        if !list.is_empty() {
            out.tools = Some(Value::Array(list));
        }
    }
    if body
        .get("previous_response_id")
        .is_some_and(|p| !p.is_null())
    {
        out.drop_one(
            "Responses previous_response_id (the history it names is the session's earlier turns)",
        );
    }
    out
}

fn responses_item(item: &Value, out: &mut Converted, reasoning: &mut Option<String>) {
    let kind = item.get("type").and_then(Value::as_str);
    match kind {
        None | Some("message") => {
            let role = item.get("role").and_then(Value::as_str).unwrap_or("user");
            let text = text_of(
                item.get("content").unwrap_or(&Value::Null),
                out,
                "Responses",
            );
            match role {
                "system" | "developer" => out
                    .messages
                    .push(json!({"role": "system", "content": text})),
                "assistant" => {
                    let mut m = Map::new();
                    m.insert("role".into(), "assistant".into());
                    m.insert("content".into(), text.into());
                    if let Some(r) = reasoning.take() {
                        m.insert("reasoning_content".into(), r.into());
                    }
                    out.messages.push(Value::Object(m));
                }
                _ => out.messages.push(json!({"role": "user", "content": text})),
            }
        }
        Some("function_call") => {
            let id = item
                .get("call_id")
                .or_else(|| item.get("id"))
                .cloned()
                .unwrap_or(Value::Null);
            let name = item.get("name").cloned().unwrap_or(Value::Null);
            let args = item
                .get("arguments")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            push_calls(
                &mut out.messages,
                vec![tool_call(&id, &name, args)],
                reasoning,
            );
        }
        Some("function_call_output") => {
            let content = match item.get("output") {
                Some(Value::String(s)) => s.clone(),
                Some(v) => text_of(v, out, "Responses"),
                None => String::new(),
            };
            out.messages.push(json!({
                "role": "tool",
                "tool_call_id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "content": content,
            }));
        }
        Some("reasoning") => {
            let mut t = String::new();
            for key in ["content", "summary"] {
                if let Some(parts) = item.get(key).and_then(Value::as_array) {
                    for p in parts {
                        if let Some(x) = p.get("text").and_then(Value::as_str) {
                            t.push_str(x);
                        }
                    }
                }
                if !t.is_empty() {
                    break;
                }
            }
            if t.is_empty() && item.get("encrypted_content").is_some() {
                out.drop_one("Responses encrypted reasoning");
            }
            if !t.is_empty() {
                reasoning.get_or_insert_with(String::new).push_str(&t);
            }
        }
        Some(other) => out.drop_one(format!("Responses input item {other}")),
    }
}

fn messages_request(body: &Value) -> Converted {
    let mut out = Converted::default();
    match body.get("system") {
        Some(Value::String(s)) if !s.is_empty() => {
            out.messages.push(json!({"role": "system", "content": s}))
        }
        Some(v @ Value::Array(_)) => {
            let t = text_of(v, &mut out, "Messages");
            if !t.is_empty() {
                out.messages.push(json!({"role": "system", "content": t}));
            }
        }
        _ => {}
    }
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        match m.get("content") {
            // A system message among the messages (Claude Code sends one): a string or text
            // blocks, a system message of the chat form either way.
            Some(c) if role == "system" || role == "developer" => {
                let text = text_of(c, &mut out, "Messages");
                out.messages
                    .push(json!({"role": "system", "content": text}));
            }
            Some(Value::String(s)) => out.messages.push(json!({"role": role, "content": s})),
            Some(Value::Array(blocks)) if role == "assistant" => {
                let msg = assistant_blocks(blocks, &mut out);
                out.messages.push(msg);
            }
            Some(Value::Array(blocks)) => {
                // A user turn: tool results become tool messages (first, as the chat API wants
                // them right after the calls), the rest one user message.
                let mut text = String::new();
                for b in blocks {
                    match b.get("type").and_then(Value::as_str) {
                        Some("tool_result") => {
                            let content = text_of(
                                b.get("content").unwrap_or(&Value::Null),
                                &mut out,
                                "Messages",
                            );
                            out.messages.push(json!({
                                "role": "tool",
                                "tool_call_id": b.get("tool_use_id").cloned().unwrap_or(Value::Null),
                                "content": content,
                            }));
                        }
                        Some("text") => {
                            text.push_str(b.get("text").and_then(Value::as_str).unwrap_or(""))
                        }
                        kind => out.drop_one(format!(
                            "Messages content block {}",
                            kind.unwrap_or("without a type")
                        )),
                    }
                }
                if !text.is_empty() {
                    out.messages.push(json!({"role": "user", "content": text}));
                }
            }
            _ => out.drop_one("Messages message without content"),
        }
    }
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        let mut list = Vec::new();
        for t in tools {
            let custom = t.get("type").is_none_or(|k| k == "custom");
            match (custom, t.get("name")) {
                (true, Some(name)) => list.push(function_tool(
                    name,
                    t.get("description"),
                    t.get("input_schema"),
                )),
                _ => out.drop_one(format!(
                    "Messages server tool {}",
                    t.get("type").and_then(Value::as_str).unwrap_or("?")
                )),
            }
        }
        if !list.is_empty() {
            out.tools = Some(Value::Array(list));
        }
    }
    out
}

fn assistant_blocks(blocks: &[Value], out: &mut Converted) -> Value {
    let mut content = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => content.push_str(b.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("thinking") => {
                reasoning.push_str(b.get("thinking").and_then(Value::as_str).unwrap_or(""))
            }
            Some("tool_use") => {
                let args = b
                    .get("input")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".into());
                calls.push(tool_call(
                    b.get("id").unwrap_or(&Value::Null),
                    b.get("name").unwrap_or(&Value::Null),
                    args,
                ));
            }
            Some("redacted_thinking") => out.drop_one("Messages redacted thinking"),
            kind => out.drop_one(format!(
                "Messages content block {}",
                kind.unwrap_or("without a type")
            )),
        }
    }
    assistant(content, reasoning, calls)
}

/// An assistant message in the dataset's key order: role, content (absent when there are tool
/// calls and no text), tool_calls, reasoning_content.
pub fn assistant(content: String, reasoning: String, calls: Vec<Value>) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), "assistant".into());
    if !content.is_empty() || calls.is_empty() {
        m.insert("content".into(), content.into());
    }
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    if !reasoning.is_empty() {
        m.insert("reasoning_content".into(), reasoning.into());
    }
    Value::Object(m)
}

/// A whole (non-streaming) response body as one assistant message; `None` when it is not a
/// response of `api`.
pub fn response(api: Api, body: &Value, dropped: &mut BTreeMap<String, u64>) -> Option<Value> {
    let mut out = Converted::default();
    let msg = match api {
        Api::Chat | Api::Completions => {
            let m = body.get("choices")?.get(0)?.get("message")?;
            let mut content = String::new();
            if let Some(c) = m.get("content").filter(|c| !c.is_null()) {
                content = text_of(c, &mut out, "chat");
            }
            let reasoning = ["reasoning_content", "reasoning"]
                .iter()
                .find_map(|k| m.get(*k).and_then(Value::as_str))
                .unwrap_or("")
                .to_string();
            let calls = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            assistant(content, reasoning, calls)
        }
        Api::Responses => {
            let items = body.get("output")?.as_array()?;
            let mut conv = Converted::default();
            let mut reasoning = None;
            for item in items {
                responses_item(item, &mut conv, &mut reasoning);
            }
            out.dropped.append(&mut conv.dropped);
            merge_assistants(conv.messages, reasoning)
        }
        Api::Messages => assistant_blocks(body.get("content")?.as_array()?, &mut out),
    };
    for (k, v) in out.dropped {
        *dropped.entry(k).or_default() += v;
    }
    Some(msg)
}

/// The assistant messages one response's items made, as one message.
fn merge_assistants(messages: Vec<Value>, reasoning: Option<String>) -> Value {
    let mut content = String::new();
    let mut r = String::new();
    let mut calls = Vec::new();
    for m in messages {
        if let Some(c) = m.get("content").and_then(Value::as_str) {
            content.push_str(c);
        }
        if let Some(c) = m.get("reasoning_content").and_then(Value::as_str) {
            r.push_str(c);
        }
        if let Some(a) = m.get("tool_calls").and_then(Value::as_array) {
            calls.extend(a.iter().cloned());
        }
    }
    if let Some(x) = reasoning {
        r.push_str(&x);
    }
    assistant(content, r, calls)
}

/// A string member's text ("" when absent or not a string).
fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// A streamed response put back together from its events' data, in chat form.
#[derive(Debug, Default)]
pub struct Assembled {
    /// The answer's text.
    pub content: String,
    /// Its reasoning.
    pub reasoning: String,
    /// Tool calls by their index in the output: id, name, arguments.
    calls: BTreeMap<u64, (Value, Value, String)>,
    /// Events read.
    pub events: u64,
}

impl Assembled {
    /// One event's data (`[DONE]` and what is not JSON are skipped).
    pub fn take(&mut self, api: Api, data: &[u8]) {
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        self.events += 1;
        match api {
            Api::Chat | Api::Completions => self.take_chat(&v),
            Api::Responses => self.take_responses(&v),
            Api::Messages => self.take_messages(&v),
        }
    }

    fn call(&mut self, i: u64) -> &mut (Value, Value, String) {
        self.calls
            .entry(i)
            .or_insert((Value::Null, Value::Null, String::new()))
    }

    fn take_chat(&mut self, v: &Value) {
        for c in v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let d = c.get("delta").unwrap_or(&Value::Null);
            self.content.push_str(str_of(d, "content"));
            self.content.push_str(str_of(c, "text"));
            for k in ["reasoning_content", "reasoning"] {
                self.reasoning.push_str(str_of(d, k));
            }
            for tc in d
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let e = self.call(tc.get("index").and_then(Value::as_u64).unwrap_or(0));
                if let Some(id) = tc.get("id").filter(|x| !x.is_null()) {
                    e.0 = id.clone();
                }
                let f = tc.get("function").unwrap_or(&Value::Null);
                if let Some(n) = f.get("name").filter(|x| !x.is_null()) {
                    e.1 = n.clone();
                }
                e.2.push_str(str_of(f, "arguments"));
            }
        }
    }

    fn take_responses(&mut self, v: &Value) {
        let index = v.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        match str_of(v, "type") {
            "response.output_text.delta" => self.content.push_str(str_of(v, "delta")),
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                self.reasoning.push_str(str_of(v, "delta"))
            }
            "response.output_item.added" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                if str_of(item, "type") == "function_call" {
                    let id = item.get("call_id").or_else(|| item.get("id"));
                    let id = id.cloned().unwrap_or(Value::Null);
                    let name = item.get("name").cloned().unwrap_or(Value::Null);
                    self.calls.insert(index, (id, name, String::new()));
                }
            }
            "response.function_call_arguments.delta" => {
                let d = str_of(v, "delta").to_string();
                self.call(index).2.push_str(&d);
            }
            _ => {}
        }
    }

    fn take_messages(&mut self, v: &Value) {
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match str_of(v, "type") {
            "content_block_start" => {
                let b = v.get("content_block").unwrap_or(&Value::Null);
                match str_of(b, "type") {
                    "tool_use" => {
                        let id = b.get("id").cloned().unwrap_or(Value::Null);
                        let name = b.get("name").cloned().unwrap_or(Value::Null);
                        self.calls.insert(index, (id, name, String::new()));
                    }
                    "text" => self.content.push_str(str_of(b, "text")),
                    "thinking" => self.reasoning.push_str(str_of(b, "thinking")),
                    _ => {}
                }
            }
            "content_block_delta" => {
                let d = v.get("delta").unwrap_or(&Value::Null);
                match str_of(d, "type") {
                    "text_delta" => self.content.push_str(str_of(d, "text")),
                    "thinking_delta" => self.reasoning.push_str(str_of(d, "thinking")),
                    "input_json_delta" => {
                        if let Some(e) = self.calls.get_mut(&index) {
                            e.2.push_str(str_of(d, "partial_json"));
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// The tool calls in chat form (`arguments` as the server streamed them; a Messages tool
    /// call with no input is `{}`).
    pub fn tool_calls(&self) -> Vec<Value> {
        self.calls
            .values()
            .map(|(id, name, args)| {
                let args = if args.is_empty() {
                    "{}".to_string()
                } else {
                    args.clone()
                };
                tool_call(id, name, args)
            })
            .collect()
    }

    /// The whole output as one assistant message.
    pub fn message(&self) -> Value {
        assistant(
            self.content.clone(),
            self.reasoning.clone(),
            self.tool_calls(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_request_in_chat_form() {
        let body = json!({
            "model": "m", "instructions": "be brief",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "list files"}]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "use ls"}]},
                {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{\"cmd\":\"ls\"}"},
                {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
                {"role": "user", "content": [{"type": "input_image", "image_url": "x"}]},
                {"type": "web_search_call"}
            ],
            "tools": [{"type": "function", "name": "bash", "parameters": {"type": "object"}}, {"type": "web_search"}]
        });
        let c = request(Api::Responses, &body);
        assert_eq!(
            c.messages[0],
            json!({"role": "system", "content": "be brief"})
        );
        assert_eq!(
            c.messages[1],
            json!({"role": "user", "content": "list files"})
        );
        assert_eq!(c.messages[2]["tool_calls"][0]["function"]["name"], "bash");
        assert_eq!(c.messages[2]["reasoning_content"], "use ls");
        assert_eq!(
            c.messages[3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"})
        );
        assert_eq!(
            c.tools.unwrap()[0]["function"]["parameters"],
            json!({"type": "object"})
        );
        assert_eq!(c.dropped["Responses content part input_image"], 1);
        assert_eq!(c.dropped["Responses input item web_search_call"], 1);
        assert_eq!(c.dropped["Responses tool web_search"], 1);
    }

    #[test]
    fn messages_request_in_chat_form() {
        let body = json!({
            "model": "m", "max_tokens": 9,
            "system": [{"type": "text", "text": "sys"}],
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "running"},
                    {"type": "tool_use", "id": "t1", "name": "bash", "input": {"c": "ls"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "a.txt"}]}]}
            ],
            "tools": [{"name": "bash", "input_schema": {"type": "object"}}]
        });
        let c = request(Api::Messages, &body);
        assert_eq!(c.messages[0], json!({"role": "system", "content": "sys"}));
        assert_eq!(
            c.messages[2],
            json!({"role": "assistant", "content": "running", "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "bash", "arguments": "{\"c\":\"ls\"}"}}], "reasoning_content": "hm"})
        );
        assert_eq!(
            c.messages[3],
            json!({"role": "tool", "tool_call_id": "t1", "content": "a.txt"})
        );
        assert!(c.dropped.is_empty());
    }

    #[test]
    fn streams_reassembled() {
        let mut a = Assembled::default();
        let api = Api::Messages;
        for e in [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"bash","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"c\":"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}"#,
        ] {
            a.take(api, e.as_bytes());
        }
        assert_eq!(
            a.message(),
            json!({"role": "assistant", "tool_calls": [{"id": "t", "type": "function", "function": {"name": "bash", "arguments": "{\"c\":1}"}}], "reasoning_content": "hm"})
        );
        let mut r = Assembled::default();
        for e in [
            r#"{"type":"response.output_text.delta","delta":"he"}"#,
            r#"{"type":"response.output_text.delta","delta":"llo"}"#,
        ] {
            r.take(Api::Responses, e.as_bytes());
        }
        assert_eq!(
            r.message(),
            json!({"role": "assistant", "content": "hello"})
        );
    }
}
