//! Inline accuracy (SPEC §6): what the model generated for a turn, scored against the recorded
//! assistant row that follows the client turn in the dataset.
//!
//! - Workflow conversations (ids `sim_NNNNNN`): 1 if the intent code found in the generated
//!   content — the first `intent: I123`, else the last bare `I123` (a word `I` + digits) — is in
//!   the recorded row's `intent_codes`, else 0. Turns whose next recorded row has no
//!   `intent_codes` are not scored.
//! - Coding conversations (every other id): multiset IoU of the shell executables of the
//!   generated `bash` tool calls against those of the recorded row's `bash` tool calls. A command
//!   is the `command` field of the call's JSON arguments (the raw argument string when it is not
//!   such an object); it is split on `&&`, `;` and `|` and the first word of each non-empty part
//!   is an executable. Both sides empty scores 1 (the model agreed that no command was due).
//! - A client turn with no following assistant row (a trajectory that ends on a tool row) is not
//!   scored.
//!
//! Capture: [`Generated::feed`] reads `delta.content` and `delta.tool_calls[].function` from a
//! chunk's JSON. The client calls it only after the chunk's arrival has been stamped, and only
//! for chunks the timeline saw carrying content or tool-call text (reasoning is not needed), so
//! scoring never delays a timestamp. Buffers are reused across turns of a slot.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;
use tokentap_dataset::{Conversation, Role};

/// What to capture for a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Domain {
    /// `sim_` ids: content text, intent codes.
    Workflow,
    /// Everything else: tool calls, shell executables.
    Coding,
}

impl Domain {
    pub fn of(conv: &Conversation) -> Domain {
        if conv.is_workflow() {
            Domain::Workflow
        } else {
            Domain::Coding
        }
    }
}

/// Which generated text a turn needs for scoring; the client parses a chunk a second time only
/// for these. Coding turns need tool calls, workflow turns content; a turn with nothing to
/// compare with needs neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capture {
    pub content: bool,
    pub tool_calls: bool,
}

impl Capture {
    /// What scoring the client turn at `conv.rows[row]` will read.
    pub fn for_turn(conv: &Conversation, row: usize) -> Capture {
        let Some(truth) = conv.rows.get(row + 1).filter(|r| r.role == Role::Assistant) else {
            return Capture::default();
        };
        match Domain::of(conv) {
            Domain::Workflow => Capture {
                content: truth.intent_codes.is_some(),
                tool_calls: false,
            },
            Domain::Coding => Capture {
                content: false,
                tool_calls: true,
            },
        }
    }

    /// A chunk with these kinds of text is worth reading.
    #[inline]
    pub fn wants(&self, content: bool, tool_call: bool) -> bool {
        (self.content && content) || (self.tool_calls && tool_call)
    }
}

/// One tool call assembled from streamed partials (merged by `index`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CallText {
    pub name: String,
    pub arguments: String,
}

/// The generated text of one turn. Reused: [`Generated::clear`] keeps the buffers.
#[derive(Debug, Default)]
pub struct Generated {
    pub content: String,
    calls: Vec<CallText>,
    used_calls: usize,
}

impl Generated {
    pub fn clear(&mut self) {
        self.content.clear();
        for c in &mut self.calls[..self.used_calls] {
            c.name.clear();
            c.arguments.clear();
        }
        self.used_calls = 0;
    }

    /// Tool calls seen, by index.
    pub fn calls(&self) -> &[CallText] {
        &self.calls[..self.used_calls]
    }

    /// Appends a chunk's content and tool-call partials. A chunk that does not parse is ignored
    /// (the timeline has already counted it as malformed).
    pub fn feed(&mut self, data: &[u8]) {
        let mut de = serde_json::Deserializer::from_slice(data);
        let _ = ChunkSeed(self).deserialize(&mut de);
    }

    fn call(&mut self, index: usize) -> &mut CallText {
        // Indexes come from the server; cap them so a hostile stream cannot make us allocate.
        let index = index.min(63);
        if self.calls.len() <= index {
            self.calls.resize_with(index + 1, CallText::default);
        }
        self.used_calls = self.used_calls.max(index + 1);
        &mut self.calls[index]
    }
}

/// A string that borrows from the input when it has no escapes.
#[derive(Deserialize)]
struct CowStr<'a>(#[serde(borrow)] Cow<'a, str>);

struct ChunkSeed<'g>(&'g mut Generated);

impl<'de> DeserializeSeed<'de> for ChunkSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ChunkSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a chunk object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(k) = map.next_key::<CowStr<'de>>()? {
            if k.0 == "choices" {
                map.next_value_seed(ChoicesSeed(&mut *self.0))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

struct ChoicesSeed<'g>(&'g mut Generated);

impl<'de> DeserializeSeed<'de> for ChoicesSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ChoicesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of choices")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        // Only choice 0 is scored (n = 1 in every official setting); later ones are skipped.
        let mut first = true;
        while let Some(()) = seq.next_element_seed(ChoiceSeed(&mut *self.0, first))? {
            first = false;
        }
        Ok(())
    }
}

struct ChoiceSeed<'g>(&'g mut Generated, bool);

impl<'de> DeserializeSeed<'de> for ChoiceSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ChoiceSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a choice object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(k) = map.next_key::<CowStr<'de>>()? {
            if self.1 && (k.0 == "delta" || k.0 == "message") {
                let d: Option<DeltaText<'de>> = map.next_value()?;
                if let Some(d) = d {
                    if let Some(c) = d.content {
                        self.0.content.push_str(&c.0);
                    }
                    for (i, tc) in d.tool_calls.into_iter().flatten().enumerate() {
                        let call = self.0.call(tc.index.unwrap_or(i));
                        if let Some(f) = tc.function {
                            if let Some(n) = f.name {
                                call.name.push_str(&n.0);
                            }
                            if let Some(a) = f.arguments {
                                call.arguments.push_str(&a.0);
                            }
                        }
                    }
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct DeltaText<'a> {
    #[serde(default, borrow)]
    content: Option<CowStr<'a>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallText<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallText<'a> {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default, borrow)]
    function: Option<FunctionText<'a>>,
}

#[derive(Deserialize)]
struct FunctionText<'a> {
    #[serde(default, borrow)]
    name: Option<CowStr<'a>>,
    #[serde(default, borrow)]
    arguments: Option<CowStr<'a>>,
}

/// Scores a turn. `row` is the index of the client row in `conv.rows`; `None` when there is no
/// ground truth to compare with.
pub fn score(conv: &Conversation, row: usize, generated: &Generated) -> Option<f64> {
    let truth = conv
        .rows
        .get(row + 1)
        .filter(|r| r.role == Role::Assistant)?;
    match Domain::of(conv) {
        Domain::Workflow => {
            let codes = truth.intent_codes.as_ref()?;
            let found = intent_code(&generated.content);
            Some(found.is_some_and(|c| codes.iter().any(|t| t == c)) as u8 as f64)
        }
        Domain::Coding => {
            let recorded: Vec<&str> = truth
                .tool_calls
                .iter()
                .flatten()
                .filter_map(|c| {
                    let f = c.get("function")?;
                    (f.get("name")?.as_str()? == "bash")
                        .then(|| f.get("arguments").and_then(Value::as_str))
                        .flatten()
                })
                .collect();
            let generated: Vec<&str> = generated
                .calls()
                .iter()
                .filter(|c| c.name == "bash")
                .map(|c| c.arguments.as_str())
                .collect();
            Some(multiset_iou(
                &executables_of(&recorded),
                &executables_of(&generated),
            ))
        }
    }
}

/// The intent code of a text: the first `intent: I123`, else the last bare `I123`.
pub fn intent_code(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let code_at = |i: usize| -> Option<&str> {
        // `I` followed by at least one digit, not inside a longer word.
        if b.get(i) != Some(&b'I') {
            return None;
        }
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        let end = i + 1 + digits;
        let word = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
        if b.get(end).is_some_and(word) || (i > 0 && word(&b[i - 1])) {
            return None;
        }
        Some(&text[i..end])
    };
    let mut from = 0;
    while let Some(p) = memchr::memmem::find(&b[from..], b"intent:") {
        let mut i = from + p + "intent:".len();
        while b.get(i).is_some_and(|c| *c == b' ' || *c == b'\t') {
            i += 1;
        }
        if let Some(c) = code_at(i) {
            return Some(c);
        }
        from = from + p + 1;
    }
    memchr::memrchr_iter(b'I', b).find_map(code_at)
}

/// Executables of shell commands given as tool-call argument strings.
pub fn executables_of(arguments: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for a in arguments {
        let parsed: Option<Value> = serde_json::from_str(a).ok();
        let command = parsed
            .as_ref()
            .and_then(|v| v.get("command"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| (*a).to_string());
        out.extend(executables(&command).map(str::to_string));
    }
    out
}

/// First word of each part of `command` split on `&&`, `;` and `|`.
pub fn executables(command: &str) -> impl Iterator<Item = &str> {
    command
        .split("&&")
        .flat_map(|p| p.split([';', '|']))
        .filter_map(|p| p.split_whitespace().next())
}

/// |A ∩ B| / |A ∪ B| over multisets; 1 when both are empty.
pub fn multiset_iou(a: &[String], b: &[String]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let mut count: std::collections::HashMap<&str, (u32, u32)> = Default::default();
    for x in a {
        count.entry(x).or_default().0 += 1;
    }
    for x in b {
        count.entry(x).or_default().1 += 1;
    }
    let (inter, union) = count
        .values()
        .fold((0u32, 0u32), |(i, u), &(x, y)| (i + x.min(y), u + x.max(y)));
    inter as f64 / union as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokentap_dataset::Dataset;

    #[test]
    fn intent_codes() {
        assert_eq!(intent_code("intent: I042 then I7"), Some("I042"));
        assert_eq!(intent_code("see I1 and I23."), Some("I23"));
        assert_eq!(intent_code("intent:I5"), Some("I5"));
        assert_eq!(intent_code("XI12 I3x"), None);
        assert_eq!(intent_code("intent: none, I9"), Some("I9"));
        assert_eq!(intent_code(""), None);
    }

    #[test]
    fn executables_and_iou() {
        let e: Vec<_> = executables("cd /testbed && python -m pytest | tail -5; ls").collect();
        assert_eq!(e, ["cd", "python", "tail", "ls"]);
        let a = executables_of(&[r#"{"command":"ls && ls"}"#]);
        let b = executables_of(&[r#"{"command":"ls; cat x"}"#]);
        // A = {ls, ls}, B = {ls, cat}: ∩ = {ls}, ∪ = {ls, ls, cat}
        assert!((multiset_iou(&a, &b) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(multiset_iou(&[], &[]), 1.0);
        assert_eq!(executables_of(&["grep -rn x ."]), ["grep"]);
    }

    #[test]
    fn feed_merges_partials() {
        let mut g = Generated::default();
        g.feed(br#"{"choices":[{"index":0,"delta":{"content":"intent: \"I04"}}]}"#);
        g.feed(br#"{"choices":[{"index":0,"delta":{"content":"2"}}]}"#);
        g.feed(br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","type":"function","function":{"name":"bash","arguments":""}}]}}]}"#);
        g.feed(br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":"}}]}}]}"#);
        g.feed(br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]}}]}"#);
        g.feed(b"{not json");
        assert_eq!(g.content, "intent: \"I042");
        assert_eq!(
            g.calls(),
            [CallText {
                name: "bash".into(),
                arguments: r#"{"command":"ls"}"#.into()
            }]
        );
        g.clear();
        assert!(g.content.is_empty() && g.calls().is_empty());
    }

    #[test]
    fn scoring_against_the_next_recorded_row() {
        let d = Dataset::parse(
            "t",
            r#"{"conversation_id":"sim_000001","turn":1,"role":"user","content":"hi"}
{"conversation_id":"sim_000001","turn":2,"role":"assistant","content":"intent: I042","intent_codes":["I042"]}
{"conversation_id":"c","turn":1,"role":"user","content":"fix"}
{"conversation_id":"c","turn":2,"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls && cat f\"}"}}]}
{"conversation_id":"c","turn":3,"role":"tool","tool_results":[{"tool_call_id":"1","content":"ok"}]}
"#,
        )
        .unwrap();
        let mut g = Generated::default();
        g.content.push_str("the intent: I042");
        assert_eq!(score(&d.conversations[0], 0, &g), Some(1.0));
        g.clear();
        g.content.push_str("I041");
        assert_eq!(score(&d.conversations[0], 0, &g), Some(0.0));
        g.clear();
        g.feed(br#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}}]}"#);
        assert_eq!(score(&d.conversations[1], 0, &g), Some(0.5));
        // Ends on a tool row: nothing to compare with.
        assert_eq!(score(&d.conversations[1], 2, &g), None);
        // Only what scoring reads is captured.
        let cap = |c: usize, r: usize| Capture::for_turn(&d.conversations[c], r);
        assert_eq!(
            cap(0, 0),
            Capture {
                content: true,
                tool_calls: false
            }
        );
        assert_eq!(
            cap(1, 0),
            Capture {
                content: false,
                tool_calls: true
            }
        );
        assert_eq!(cap(1, 2), Capture::default());
    }
}
