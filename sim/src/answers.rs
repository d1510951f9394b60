//! Recorded answers (`--answer-from DATASET`): the sim answers a chat request that replays a turn
//! of an MLPerf agentic dataset with that turn's recorded assistant message — its reasoning, its
//! content and its tool calls, streamed like generated text — instead of filler.
//!
//! A run against it then scores like a model that always agrees with the dataset: the inline
//! accuracy gate passes, the output lengths are the dataset's, and a sweep on the sim is a curve
//! the official checker can accept end to end. Timing stays the sim's model.
//!
//! ## Finding the turn
//! A request for client turn t carries `[system] + rows before t + row t` (docs/replay.md). The
//! turn is found by a key of
//! - the system prompt with the replay's salt markers removed (`[salt: R]\n\n` before it and
//!   `\n\n[salt: C]` after it, each tag four hex digits),
//! - the text of the first message after it and of the last message (a `tool` row's results are
//!   one message each, in order), and
//! - the number of assistant messages in the request,
//!
//! so it does not depend on salting, on the replayed assistant text (`clear_generated` changes
//! it), on sampling settings or on the model name. Two turns of a dataset with the same key and
//! different answers (a file that repeats a conversation under another id) keep the first
//! answer; [`Answers::ambiguous`] counts them. A request whose key is not in the dataset is
//! answered with generated filler as without `--answer-from`.

use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use tokentap_core::wire::{ChatRequest, Message};
use tokentap_dataset::{Conversation, Dataset, Role, Row};

/// One recorded assistant message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answer {
    pub reasoning: String,
    pub content: String,
    /// `(id, function name, arguments)` of each tool call, in order.
    pub tool_calls: Vec<(String, String, String)>,
}

/// The recorded answers of a dataset, by turn key.
#[derive(Debug, Default)]
pub struct Answers {
    by_key: HashMap<u64, Arc<Answer>>,
    /// Client turns followed by an assistant row (the answers kept, duplicates included).
    pub turns: usize,
    /// Turns whose key another turn with a different answer already had.
    pub ambiguous: usize,
}

impl Answers {
    /// Loads a dataset (any file `tokentap dataset validate` accepts) and indexes its answers.
    pub fn load(path: &Path) -> anyhow::Result<Answers> {
        let d = Dataset::load(path).map_err(|e| anyhow::anyhow!("--answer-from: {e}"))?;
        Ok(Self::of(&d))
    }

    /// Indexes the answers of a loaded dataset.
    pub fn of(d: &Dataset) -> Answers {
        let mut a = Answers::default();
        for c in &d.conversations {
            a.add_conversation(c);
        }
        a
    }

    fn add_conversation(&mut self, c: &Conversation) {
        let system = c.system().unwrap_or("");
        let Some(first) = c.rows.first() else { return };
        let first = row_texts(first).into_iter().next().unwrap_or_default();
        let mut assistants = 0usize;
        for (i, row) in c.rows.iter().enumerate() {
            if row.role == Role::Assistant {
                assistants += 1;
                continue;
            }
            let Some(next) = c.rows.get(i + 1).filter(|r| r.role == Role::Assistant) else {
                continue;
            };
            let last = row_texts(row).pop().unwrap_or_default();
            let k = key(system, &first, &last, assistants);
            let answer = Arc::new(answer_of(next));
            self.turns += 1;
            match self.by_key.get(&k) {
                Some(prev) if **prev != *answer => self.ambiguous += 1,
                Some(_) => {}
                None => {
                    self.by_key.insert(k, answer);
                }
            }
        }
    }

    /// The recorded answer to this request, if it replays a turn of the dataset.
    pub(crate) fn find(&self, req: &ChatRequest) -> Option<Arc<Answer>> {
        let (system, rest) = match req.messages.split_first() {
            Some((m, rest)) if m.role == "system" => (m.text(), rest),
            _ => (String::new(), &req.messages[..]),
        };
        let first = rest.first().map(Message::text).unwrap_or_default();
        let last = rest.last().map(Message::text).unwrap_or_default();
        let assistants = rest.iter().filter(|m| m.role == "assistant").count();
        self.by_key
            .get(&key(unsalt(&system), &first, &last, assistants))
            .cloned()
    }

    /// Number of distinct turns indexed.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// No answer recorded.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// The texts of the messages a client row becomes (a tool row: one per result).
fn row_texts(r: &Row) -> Vec<String> {
    match r.role {
        Role::Tool => r
            .tool_results
            .iter()
            .flatten()
            .map(|t| text_of(t.content.as_ref()))
            .collect(),
        _ => vec![text_of(r.content.as_ref())],
    }
}

/// A content value's text, as [`Message::text`] reads it.
fn text_of(v: Option<&Value>) -> String {
    Message {
        role: String::new(),
        content: v.cloned(),
        reasoning_content: None,
        tool_calls: None,
        tool_call_id: None,
        name: None,
    }
    .text()
}

fn answer_of(r: &Row) -> Answer {
    let tool_calls = r
        .tool_calls
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let f = c.get("function");
            let name = f
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let args = match f.and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(v) => v.to_string(),
            };
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(|| format!("call_{i}"), str::to_string);
            (id, name, args)
        })
        .collect();
    Answer {
        reasoning: r.reasoning_content.clone().unwrap_or_default(),
        content: text_of(r.content.as_ref()),
        tool_calls,
    }
}

/// The system prompt without the replay's salt markers.
fn unsalt(s: &str) -> &str {
    fn tag(t: &str) -> bool {
        t.len() == 4 && t.bytes().all(|b| b.is_ascii_hexdigit())
    }
    let s = match s.strip_prefix("[salt: ") {
        Some(r) if r.get(4..7) == Some("]\n\n") && r.get(..4).is_some_and(tag) => &r[7..],
        _ => s,
    };
    match s
        .len()
        .checked_sub(14)
        .and_then(|i| Some((s.get(..i)?, s.get(i..)?)))
    {
        Some((body, t)) if t.starts_with("\n\n[salt: ") && t.ends_with(']') && tag(&t[9..13]) => {
            body
        }
        _ => s,
    }
}

fn key(system: &str, first: &str, last: &str, assistants: usize) -> u64 {
    let mut b = Vec::with_capacity(system.len() + first.len() + last.len() + 40);
    for part in [system, first, last] {
        b.extend_from_slice(&(part.len() as u64).to_le_bytes());
        b.extend_from_slice(part.as_bytes());
    }
    b.extend_from_slice(&(assistants as u64).to_le_bytes());
    tokentap_core::route::hash64(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATA: &str = r#"{"conversation_id":"c1","turn":1,"role":"user","content":"fix the bug","system":"sys"}
{"conversation_id":"c1","turn":2,"role":"assistant","reasoning_content":"think","tool_calls":[{"id":"a","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},{"id":"b","type":"function","function":{"name":"bash","arguments":"{\"command\":\"cat x\"}"}}]}
{"conversation_id":"c1","turn":3,"role":"tool","tool_results":[{"tool_call_id":"a","content":"x"},{"tool_call_id":"b","content":"y"}]}
{"conversation_id":"c1","turn":4,"role":"assistant","content":"done: intent I012"}
{"conversation_id":"c2","turn":1,"role":"user","content":"fix the bug","system":"other"}
{"conversation_id":"c2","turn":2,"role":"assistant","content":"c2 answer"}
"#;

    fn req(json: &str) -> ChatRequest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn finds_each_turn_salted_or_not() {
        let d = Dataset::parse("d.jsonl", DATA).unwrap();
        let a = Answers::of(&d);
        assert_eq!((a.turns, a.len(), a.ambiguous), (3, 3, 0));
        let t1 = a
            .find(&req(r#"{"messages":[{"role":"system","content":"[salt: ba75]\n\nsys\n\n[salt: 6d82]"},{"role":"user","content":"fix the bug"}]}"#))
            .unwrap();
        assert_eq!(t1.reasoning, "think");
        assert_eq!(t1.content, "");
        assert_eq!(t1.tool_calls.len(), 2);
        assert_eq!(
            t1.tool_calls[1],
            ("b".into(), "bash".into(), r#"{"command":"cat x"}"#.into())
        );
        // Turn 2: the history's assistant text may differ (a leading space), the key does not.
        let t2 = a
            .find(&req(r#"{"messages":[{"role":"system","content":"sys"},{"role":"user","content":"fix the bug"},{"role":"assistant","content":" ","tool_calls":[]},{"role":"tool","tool_call_id":"a","content":"x"},{"role":"tool","tool_call_id":"b","content":"y"}]}"#))
            .unwrap();
        assert_eq!(t2.content, "done: intent I012");
        // Same first user text, other system prompt: the other conversation.
        let c2 = a
            .find(&req(r#"{"messages":[{"role":"system","content":"other"},{"role":"user","content":"fix the bug"}]}"#))
            .unwrap();
        assert_eq!(c2.content, "c2 answer");
        assert!(a
            .find(&req(
                r#"{"messages":[{"role":"user","content":"fix the bug"}]}"#
            ))
            .is_none());
    }

    #[test]
    fn unsalt_only_strips_real_markers() {
        assert_eq!(unsalt("[salt: ba75]\n\nsys\n\n[salt: 6d82]"), "sys");
        assert_eq!(unsalt("[salt: zzzz]\n\nsys"), "[salt: zzzz]\n\nsys");
        assert_eq!(unsalt("sys"), "sys");
        assert_eq!(unsalt("é\n\n[salt: 6d82]"), "é");
    }
}
