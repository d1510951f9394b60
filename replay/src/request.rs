//! Request bodies, byte-compatible with the MLPerf client (docs/benchmark.md#requests), built
//! incrementally.
//!
//! The request for client turn t is `[system] + every row before t + row t`. Consecutive turns of
//! one trajectory share everything up to the previous turn's last message, so each history
//! message is serialized exactly once per trajectory: [`BodyBuilder`] keeps the JSON of the
//! `messages` array rendered so far as a list of immutable `Bytes` segments (one per turn: the
//! messages that turn added) and a turn's body is
//!
//! ```text
//!   head                       segments (shared, refcounted)             tail
//!  {"model":"M","messages":[  {system},{user},{assistant},...,{row t}  ],"temperature":..,"tools":[..]}
//! ```
//!
//! sent as a [`RequestBody`] whose segments are those pieces, with an exact `Content-Length`; the
//! client writes them with vectored writes, so the history is never copied either. Building turn t costs
//! the serialization of the rows added since turn t−1 plus one refcount increment per earlier turn
//! — it does not grow with the context size in bytes (measured in `benches/build.rs`).
//!
//! Byte rules (docs/benchmark.md#requests, from the reference client): compact JSON, raw UTF-8,
//! floats in shortest round-trip form (`1.0` stays `1.0`), dataset values forwarded with their key
//! order. Body fields in the order `model, messages, temperature, max_completion_tokens, stream,
//! [stream_options], seed, top_p, top_k, repetition_penalty, n, stop, presence_penalty,
//! frequency_penalty, logit_bias, user, chat_template, chat_template_kwargs, tools, tool_choice`,
//! absent values omitted. Message keys in the reference client's struct order `role, content,
//! name, tool_calls, tool_call_id, reasoning_content`, absent values omitted. `tool_choice`,
//! `stream_options` and `max_tokens` (in `max_completion_tokens`' place) are sent only from a row
//! that carries them (a captured agent's requests); no option sets `tool_choice`.

use crate::config::{RunConfig, Sampling};
use crate::salt::{Salted, Tag};
use bytes::{BufMut, Bytes, BytesMut};
use serde::{Serialize, Serializer};
use serde_json::Value;
use tokentap_dataset::{Conversation, Role, Row};

/// The parts of the run configuration a body depends on.
#[derive(Debug, Clone, Default)]
pub struct RequestSettings {
    /// Run-level model name; a row's own `model` overrides it.
    pub model: Option<String>,
    /// The run-level sampling settings.
    pub sampling: Sampling,
    /// Insert `"stream_options":{"include_usage":true}` after `stream`.
    pub include_usage: bool,
    /// One leading space on the first text of every replayed assistant message
    /// (docs/benchmark.md#cache-clearing).
    pub clear_generated: bool,
    /// Salt the system prompt (docs/benchmark.md#salting).
    pub salt: bool,
}

impl From<&RunConfig> for RequestSettings {
    fn from(c: &RunConfig) -> Self {
        RequestSettings {
            model: c.model.clone(),
            sampling: c.sampling.clone(),
            include_usage: c.include_usage,
            clear_generated: c.clear_generated,
            salt: c.salt,
        }
    }
}

/// A body cannot be built for this conversation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error(
        "conversation {conversation:?} (line {line}) has no system prompt, and salting needs one"
    )]
    /// Salting needs a system prompt and the conversation has none.
    NoSystemPrompt {
        /// The conversation's id.
        conversation: String,
        /// Its first row's line.
        line: usize,
    },
    #[error("conversation {conversation:?} line {line}: no model name (pass --model or give the row a \"model\")")]
    /// No `--model` and the row names no model.
    NoModel {
        /// The conversation's id.
        conversation: String,
        /// The row's line.
        line: usize,
    },
    #[error("row index {row} is not a client turn after the last one built")]
    /// The row asked for is not the next client turn.
    BadRow {
        /// The row's index in its conversation.
        row: usize,
    },
}

/// Builds the bodies of one trajectory's client turns, in order.
#[derive(Debug, Clone)]
pub struct BodyBuilder<'a> {
    conv: &'a Conversation,
    settings: &'a RequestSettings,
    /// `{"model":<run model>,"messages":[`, when the run has a model.
    head: Option<Bytes>,
    /// The tail of rows without overrides and without their own `tools`; built on first use.
    default_tail: Option<Bytes>,
    /// The `messages` array so far, one segment per turn.
    segments: Vec<Bytes>,
    scratch: BytesMut,
    /// Rows `..next_row` are in `segments`.
    next_row: usize,
    messages: u32,
}

impl<'a> BodyBuilder<'a> {
    /// Starts a trajectory of `conv` on pass `pass` (1-based). Renders the system message.
    pub fn new(
        conv: &'a Conversation,
        settings: &'a RequestSettings,
        pass: u32,
    ) -> Result<BodyBuilder<'a>, BuildError> {
        Self::with_pass_tag(conv, settings, Tag::of_pass(pass))
    }

    /// Like [`BodyBuilder::new`] with the salt's pass tag given (the warmup salts with a tag of
    /// its own).
    pub fn with_pass_tag(
        conv: &'a Conversation,
        settings: &'a RequestSettings,
        pass_tag: Tag,
    ) -> Result<BodyBuilder<'a>, BuildError> {
        let mut b = BodyBuilder {
            conv,
            settings,
            head: None,
            default_tail: None,
            segments: Vec::with_capacity(conv.rows.len() / 2 + 1),
            scratch: BytesMut::with_capacity(4096),
            next_row: 0,
            messages: 0,
        };
        if let Some(model) = &settings.model {
            b.head = Some(head(&Value::String(model.clone())));
        }
        let system = conv.system();
        match (system, settings.salt) {
            (Some(s), true) => {
                let salted = Salted {
                    pass: pass_tag,
                    conversation: Tag::of(&conv.id),
                    system: s,
                };
                b.push_msg(&Msg::new("system", Some(Text::Salted(salted))));
            }
            (Some(s), false) => b.push_msg(&Msg::new("system", Some(Text::Str(s)))),
            (None, true) => {
                return Err(BuildError::NoSystemPrompt {
                    conversation: conv.id.clone(),
                    line: conv.rows.first().map(|r| r.line).unwrap_or(0),
                })
            }
            (None, false) => {}
        }
        Ok(b)
    }

    /// The body for the client turn at `rows[row]`. Turns must be asked for in order.
    pub fn body(&mut self, row: usize) -> Result<RequestBody, BuildError> {
        let r = self.conv.rows.get(row).ok_or(BuildError::BadRow { row })?;
        if row < self.next_row || !r.role.is_client() {
            return Err(BuildError::BadRow { row });
        }
        for i in self.next_row..=row {
            self.render_row(&self.conv.rows[i]);
        }
        self.next_row = row + 1;
        if !self.scratch.is_empty() {
            self.segments.push(self.scratch.split().freeze());
        }
        let head = match (r.overrides.get("model"), &self.head) {
            (Some(m), _) => head(m),
            (None, Some(h)) => h.clone(),
            (None, None) => {
                return Err(BuildError::NoModel {
                    conversation: self.conv.id.clone(),
                    line: r.line,
                })
            }
        };
        let tail = if r.tools.is_none() && r.overrides.keys().all(|k| k == "model") {
            match &self.default_tail {
                Some(t) => t.clone(),
                None => {
                    let t = tail(self.settings, r, self.conv.default_tools());
                    self.default_tail = Some(t.clone());
                    t
                }
            }
        } else {
            tail(
                self.settings,
                r,
                r.tools.as_ref().or(self.conv.default_tools()),
            )
        };
        let mut frames = Vec::with_capacity(self.segments.len() + 2);
        frames.push(head);
        frames.extend(self.segments.iter().cloned());
        frames.push(tail);
        let len = frames.iter().map(|f| f.len() as u64).sum();
        Ok(RequestBody {
            frames,
            len,
            messages: self.messages,
        })
    }

    fn render_row(&mut self, row: &Row) {
        match row.role {
            Role::User => {
                let mut m = Msg::new("user", row.content.as_ref().map(Text::Json));
                m.name = row.name.as_deref();
                self.push_msg(&m);
            }
            Role::Assistant => {
                let mut content = row.content.as_ref().map(Text::Json);
                let mut reasoning = row.reasoning_content.as_deref().map(Text::Str);
                if self.settings.clear_generated {
                    match (&row.reasoning_content, &row.content) {
                        (Some(r), _) if !r.is_empty() => reasoning = Some(Text::Spaced(r)),
                        (_, Some(Value::String(c))) if !c.is_empty() => {
                            content = Some(Text::Spaced(c))
                        }
                        _ => {}
                    }
                }
                let mut m = Msg::new("assistant", content);
                m.name = row.name.as_deref();
                m.tool_calls = row.tool_calls.as_deref();
                m.reasoning_content = reasoning;
                self.push_msg(&m);
            }
            Role::Tool => {
                for r in row.tool_results.iter().flatten() {
                    let mut m = Msg::new("tool", r.content.as_ref().map(Text::Json));
                    m.name = row.name.as_deref();
                    m.tool_call_id = Some(&r.tool_call_id);
                    self.push_msg(&m);
                }
            }
        }
    }

    fn push_msg(&mut self, m: &Msg<'_>) {
        if self.messages > 0 {
            self.scratch.put_u8(b',');
        }
        write_json(&mut self.scratch, m);
        self.messages += 1;
    }
}

/// Serializes into a `BytesMut`. Serializing the dataset's own values and strings cannot fail:
/// `serde_json::Value` keys are strings and the writer is infallible.
fn write_json<T: Serialize + ?Sized>(buf: &mut BytesMut, v: &T) {
    // Invariant: the writer (BytesMut) never returns an I/O error and every value here is a
    // `serde_json::Value`, a string or a number, which always serialize.
    serde_json::to_writer(buf.writer(), v).expect("serializing JSON values into memory");
}

fn head(model: &Value) -> Bytes {
    let mut b = BytesMut::with_capacity(64);
    b.put_slice(b"{\"model\":");
    write_json(&mut b, model);
    b.put_slice(b",\"messages\":[");
    b.freeze()
}

/// `],"temperature":...}` for one row.
fn tail(s: &RequestSettings, row: &Row, tools: Option<&Value>) -> Bytes {
    let mut b = BytesMut::with_capacity(256 + tools.map_or(0, |_| 4096));
    b.put_u8(b']');
    let o = &row.overrides;
    let run = &s.sampling;
    let f64v = |v: Option<f64>| v.map(Value::from);
    let i64v = |v: Option<i64>| v.map(Value::from);
    let mut field = |key: &str, v: Option<&Value>| {
        if let Some(v) = v {
            b.put_u8(b',');
            write_json(&mut b, key);
            b.put_u8(b':');
            write_json(&mut b, v);
        }
    };
    let pick = |key: &str, run: Option<Value>| o.get(key).cloned().or(run);
    field(
        "temperature",
        pick("temperature", f64v(run.temperature)).as_ref(),
    );
    let max = o
        .get("max_new_tokens")
        .or(o.get("max_completion_tokens"))
        .cloned();
    match (max, o.get("max_tokens")) {
        // A captured chat request's own name for it.
        (None, Some(m)) => field("max_tokens", Some(m)),
        (max, _) => field(
            "max_completion_tokens",
            max.or(run.max_completion_tokens.map(Value::from)).as_ref(),
        ),
    }
    field("stream", Some(&Value::Bool(true)));
    match o.get("stream_options") {
        Some(v) => field("stream_options", Some(v)),
        None if s.include_usage => field(
            "stream_options",
            Some(&serde_json::json!({"include_usage": true})),
        ),
        None => {}
    }
    let seed = run
        .seed
        .and_then(serde_json::Number::from_i128)
        .map(Value::Number);
    field("seed", pick("seed", seed).as_ref());
    field("top_p", pick("top_p", f64v(run.top_p)).as_ref());
    field("top_k", pick("top_k", i64v(run.top_k)).as_ref());
    field(
        "repetition_penalty",
        pick("repetition_penalty", f64v(run.repetition_penalty)).as_ref(),
    );
    field("n", o.get("n"));
    field("stop", o.get("stop"));
    field(
        "presence_penalty",
        pick("presence_penalty", f64v(run.presence_penalty)).as_ref(),
    );
    field(
        "frequency_penalty",
        pick("frequency_penalty", f64v(run.frequency_penalty)).as_ref(),
    );
    field("logit_bias", o.get("logit_bias"));
    field("user", o.get("user"));
    field("chat_template", o.get("chat_template"));
    field("chat_template_kwargs", run.chat_template_kwargs.as_ref());
    field("tools", tools);
    field("tool_choice", o.get("tool_choice"));
    b.put_u8(b'}');
    b.freeze()
}

/// One message, keys in the reference client's struct order; `None` is omitted.
#[derive(Serialize)]
struct Msg<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<Text<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<&'a [Value]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<Text<'a>>,
}

impl<'a> Msg<'a> {
    fn new(role: &'static str, content: Option<Text<'a>>) -> Self {
        Msg {
            role,
            content,
            name: None,
            tool_calls: None,
            tool_call_id: None,
            reasoning_content: None,
        }
    }
}

/// A text value written without building an intermediate `String`.
enum Text<'a> {
    /// A dataset value as it was (a string or content parts).
    Json(&'a Value),
    Str(&'a str),
    /// `" " + text` (generated-token cache clearing).
    Spaced(&'a str),
    Salted(Salted<'a>),
}

impl Serialize for Text<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Text::Json(v) => v.serialize(s),
            Text::Str(t) => s.serialize_str(t),
            Text::Spaced(t) => s.collect_str(&format_args!(" {t}")),
            Text::Salted(x) => s.collect_str(x),
        }
    }
}

/// A request body made of shared segments, with an exact length. Cloning shares the segments.
#[derive(Debug, Clone)]
pub struct RequestBody {
    frames: Vec<Bytes>,
    len: u64,
    messages: u32,
}

impl RequestBody {
    /// Total body size in bytes (the `Content-Length`).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// No bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of messages in the request.
    pub fn messages(&self) -> u32 {
        self.messages
    }

    /// The segments, in order (the client hands them to `writev` after the request head).
    pub fn segments(&self) -> &[Bytes] {
        &self.frames
    }

    /// The `messages` array's segments (one per turn, shared with the trajectory's earlier
    /// bodies; every one after the first begins with a comma) and the tail after the array
    /// (`],"temperature":…}`).
    pub fn message_parts(&self) -> (&[Bytes], &Bytes) {
        let n = self.frames.len();
        (&self.frames[1..n - 1], &self.frames[n - 1])
    }

    /// Number of segments.
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// The whole body in one buffer (tests, debugging; the client never does this).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len as usize);
        self.copy_into(&mut v);
        v
    }

    /// Replaces `buf`'s contents with the whole body: the one-memcpy alternative to sending the
    /// segments as frames, kept for `benches/build.rs`.
    pub fn copy_into(&self, buf: &mut Vec<u8>) {
        buf.clear();
        for f in &self.frames {
            buf.extend_from_slice(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokentap_dataset::Dataset;

    fn ds(text: &str) -> Dataset {
        Dataset::parse("t.jsonl", text).unwrap()
    }

    fn settings() -> RequestSettings {
        RequestSettings {
            model: Some("m".into()),
            ..Default::default()
        }
    }

    fn bodies(conv: &Conversation, s: &RequestSettings, pass: u32) -> Vec<String> {
        let mut b = BodyBuilder::new(conv, s, pass).unwrap();
        conv.client_turns()
            .map(|i| String::from_utf8(b.body(i).unwrap().to_vec()).unwrap())
            .collect()
    }

    const CONV: &str = r#"{"conversation_id":"c1","turn":1,"role":"user","content":"héllo","system":"sys","tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]}
{"conversation_id":"c1","turn":2,"role":"assistant","reasoning_content":"think","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},{"id":"b","type":"function","function":{"name":"bash","arguments":"{}"}}]}
{"conversation_id":"c1","turn":3,"role":"tool","tool_results":[{"tool_call_id":"a","content":"x"},{"tool_call_id":"b","content":"y"}],"delay_seconds":0.5}
{"conversation_id":"c1","turn":4,"role":"assistant","content":"done"}
{"conversation_id":"c1","turn":5,"role":"user","content":"more","temperature":0.7,"max_new_tokens":5,"max_completion_tokens":9,"model":"other","stop":["x"]}
"#;

    #[test]
    fn exact_bytes_turn_by_turn() {
        let d = ds(CONV);
        let mut s = settings();
        s.sampling.temperature = Some(1.0);
        s.sampling.max_completion_tokens = Some(8192);
        let got = bodies(&d.conversations[0], &s, 1);
        let tools =
            r#"[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]"#;
        let sys = r#"{"role":"system","content":"sys"}"#;
        let u1 = r#"{"role":"user","content":"héllo"}"#;
        let a2 = r#"{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},{"id":"b","type":"function","function":{"name":"bash","arguments":"{}"}}],"reasoning_content":"think"}"#;
        let t3 = r#"{"role":"tool","content":"x","tool_call_id":"a"},{"role":"tool","content":"y","tool_call_id":"b"}"#;
        let a4 = r#"{"role":"assistant","content":"done"}"#;
        let u5 = r#"{"role":"user","content":"more"}"#;
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0],
            format!(
                r#"{{"model":"m","messages":[{sys},{u1}],"temperature":1.0,"max_completion_tokens":8192,"stream":true,"tools":{tools}}}"#
            )
        );
        assert_eq!(
            got[1],
            format!(
                r#"{{"model":"m","messages":[{sys},{u1},{a2},{t3}],"temperature":1.0,"max_completion_tokens":8192,"stream":true,"tools":{tools}}}"#
            )
        );
        // Row overrides: model, temperature, max_new_tokens wins over max_completion_tokens, stop.
        assert_eq!(
            got[2],
            format!(
                r#"{{"model":"other","messages":[{sys},{u1},{a2},{t3},{a4},{u5}],"temperature":0.7,"max_completion_tokens":5,"stream":true,"stop":["x"],"tools":{tools}}}"#
            )
        );
        for b in &got {
            assert!(!b.contains("delay"), "{b}");
            serde_json::from_str::<Value>(b).unwrap();
        }
    }

    /// A captured chat agent's own parameters go back as it sent them: `max_tokens` under its
    /// name, its `stream_options` instead of the run's, `tool_choice` after `tools`.
    #[test]
    fn a_captured_agents_parameters_are_sent_back() {
        let d = ds(
            r#"{"conversation_id":"c","turn":1,"role":"user","content":"hi","tools":[{"type":"function","function":{"name":"f"}}],"max_tokens":64,"stream_options":{"include_usage":true},"tool_choice":{"type":"function","function":{"name":"f"}}}
"#,
        );
        let mut s = settings();
        s.sampling.max_completion_tokens = Some(8192);
        s.include_usage = true;
        let got = bodies(&d.conversations[0], &s, 1);
        assert_eq!(
            got[0],
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":64,"stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}"#
        );
        let bad = Dataset::parse(
            std::path::Path::new("d.jsonl"),
            r#"{"conversation_id":"c","turn":1,"role":"user","content":"hi","tool_choice":"sometimes"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            bad.contains("tool_choice") && bad.contains("\"required\""),
            "{bad}"
        );
    }

    #[test]
    fn salt_and_clear_generated_and_usage() {
        let d = ds(CONV);
        let mut s = settings();
        s.salt = true;
        s.clear_generated = true;
        s.include_usage = true;
        let got = bodies(&d.conversations[0], &s, 2);
        assert!(got[0].starts_with(
            r#"{"model":"m","messages":[{"role":"system","content":"[salt: ba75]\n\nsys\n\n[salt: 6d82]"},"#
        ));
        assert!(
            got[1].contains(r#""reasoning_content":" think"}"#),
            "{}",
            got[1]
        );
        assert!(got[2].contains(r#"{"role":"assistant","content":" done"}"#));
        assert!(got[0].contains(r#""stream":true,"stream_options":{"include_usage":true},"tools""#));
    }

    #[test]
    fn qwen_field_order() {
        let d = ds(
            r#"{"conversation_id":"q","turn":1,"role":"user","content":"a","name":"bob","seed":3,"n":1,"user":"u","logit_bias":{"5":1},"chat_template":"t","frequency_penalty":0.5}"#,
        );
        let s = RequestSettings {
            model: Some("qwen".into()),
            sampling: crate::config::Preset::Qwen.sampling(),
            ..Default::default()
        };
        let got = bodies(&d.conversations[0], &s, 1);
        assert_eq!(
            got[0],
            r#"{"model":"qwen","messages":[{"role":"user","content":"a","name":"bob"}],"temperature":1.0,"max_completion_tokens":8192,"stream":true,"seed":3,"top_p":0.95,"top_k":20,"repetition_penalty":1.0,"n":1,"presence_penalty":1.5,"frequency_penalty":0.5,"logit_bias":{"5":1},"user":"u","chat_template":"t","chat_template_kwargs":{"preserve_thinking":true}}"#
        );
    }

    #[test]
    fn errors() {
        let d = ds(r#"{"conversation_id":"n","turn":1,"role":"user","content":"a"}"#);
        let s = RequestSettings {
            salt: true,
            ..settings()
        };
        assert!(matches!(
            BodyBuilder::new(&d.conversations[0], &s, 1),
            Err(BuildError::NoSystemPrompt { .. })
        ));
        let s = RequestSettings::default();
        let mut b = BodyBuilder::new(&d.conversations[0], &s, 1).unwrap();
        assert!(matches!(b.body(0), Err(BuildError::NoModel { .. })));
    }

    #[test]
    fn frames_share_history() {
        let d = ds(CONV);
        let s = settings();
        let mut b = BodyBuilder::new(&d.conversations[0], &s, 1).unwrap();
        let first = b.body(0).unwrap();
        let second = b.body(2).unwrap();
        // head + one segment per turn so far + tail
        assert_eq!(first.frame_count(), 3);
        assert_eq!(second.frame_count(), 4);
        assert_eq!(second.len() as usize, second.to_vec().len());
        assert!(matches!(b.body(2), Err(BuildError::BadRow { .. })));
    }
}
