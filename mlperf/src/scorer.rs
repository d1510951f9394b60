//! The reference's inline accuracy scorer (`agentic_inference_inline`), rule for rule
//! (docs/benchmark.md#inline-accuracy; mlcommons/endpoints `evaluation/scoring.py`
//! `AgenticInferenceInlineScorer`).
//!
//! - Ground truth: each `user`/`tool` row paired with the `assistant` row directly after it.
//!   Workflow conversations are the ids matching `^sim_\d+$`; every other id is coding. A pair
//!   whose truth has nothing to score (no intent codes; no `bash` action) is *excluded*.
//! - Denominator: every issued scorable turn of every pass (`__repeat_N` stripped into the
//!   `repeat` number), including failed, timed-out and aborted turns, which score 0.
//! - Workflow: the model's intent is the first `intent:\s*(I\d{3})` (case-insensitive) in
//!   `reasoning_content`, then `content`; else the last bare `I\d{3}` word in reasoning, then
//!   content. Matching follows Python's `re` on `str` (Unicode `\d`, `\s`, `\b`).
//! - Coding: the `bash` tool calls' `command` (else `cmd`), quoted strings blanked, split into
//!   stages, wrappers and `NAME=value` dropped, the executable normalised and mapped through the
//!   alias table; multiset IoU against the truth's actions.
//! - Output: `scores.json` with the reference's fields and key order, written the way Python's
//!   `json.dumps(result, indent=2)` writes it.

use crate::pyjson;
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;
use tokentap_dataset::{Dataset, Role};

/// The executable alias table (`_EXECUTABLE_ALIASES`).
pub const ALIASES: &[(&str, &str)] = &[
    ("python", "python"),
    ("python2", "python"),
    ("python3", "python"),
    ("py", "python"),
    ("pip", "pip"),
    ("pip3", "pip"),
    ("pytest", "pytest"),
    ("pylint", "pylint"),
    ("sphinx-build", "sphinx"),
    ("sphinx-quickstart", "sphinx"),
    ("cython", "cython"),
    ("make", "make"),
    ("conda", "conda"),
    ("cat", "cat"),
    ("head", "head"),
    ("tail", "tail"),
    ("less", "cat"),
    ("more", "cat"),
    ("wc", "wc"),
    ("diff", "diff"),
    ("grep", "grep"),
    ("egrep", "grep"),
    ("fgrep", "grep"),
    ("rg", "grep"),
    ("ag", "grep"),
    ("sed", "sed"),
    ("awk", "awk"),
    ("gawk", "awk"),
    ("tr", "tr"),
    ("sort", "sort"),
    ("uniq", "uniq"),
    ("cut", "cut"),
    ("find", "find"),
    ("ls", "ls"),
    ("locate", "find"),
    ("xargs", "xargs"),
    ("cp", "cp"),
    ("mv", "mv"),
    ("rm", "rm"),
    ("mkdir", "mkdir"),
    ("touch", "touch"),
    ("tee", "tee"),
    ("source", "source"),
    (".", "source"),
    ("which", "which"),
    ("alias", "alias"),
    ("unset", "unset"),
    ("export", "export"),
    ("git", "git"),
    ("curl", "curl"),
    ("wget", "curl"),
    ("true", "true"),
    ("false", "false"),
    ("timeout", "timeout"),
    ("date", "date"),
    ("apt-get", "apt"),
    ("apt", "apt"),
    ("yum", "yum"),
];

/// `_SHELL_WRAPPERS`.
pub const WRAPPERS: &[&str] = &["env", "time", "nice", "sudo", "exec", "command"];

tokentap_core::vocabulary! {
    /// Coding or workflow.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Domain {
        /// A coding trajectory (any conversation id but `sim_<digits>`).
        Coding = "coding",
        /// A workflow trajectory (`sim_<digits>`).
        Workflow = "workflow",
    }
}

impl Domain {
    /// `^sim_\d+$` is workflow (Python's `\d` is any Unicode digit; `$` also before a final
    /// `\n`).
    pub fn of(conversation_id: &str) -> Domain {
        let id = conversation_id
            .strip_suffix('\n')
            .unwrap_or(conversation_id);
        match id.strip_prefix("sim_") {
            Some(rest) if !rest.is_empty() && rest.chars().all(is_py_digit) => Domain::Workflow,
            _ => Domain::Coding,
        }
    }
}

/// What a turn is scored against.
#[derive(Debug, Clone, PartialEq)]
pub enum Truth {
    /// Workflow turns: the expected intent codes.
    Intents(BTreeSet<String>),
    /// Coding turns: the expected actions.
    Actions(Vec<String>),
}

#[derive(Debug, Clone)]
struct Expected {
    assistant_turn: u32,
    domain: Domain,
    /// `None`: excluded ("no ground truth").
    truth: Option<Truth>,
}

/// The generated message of a turn, as the scorer reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelMessage {
    /// The content.
    pub content: Option<String>,
    /// The reasoning.
    pub reasoning_content: Option<String>,
    /// Merged tool calls (`function.arguments` as the model streamed them).
    pub tool_calls: Option<Vec<Value>>,
}

/// The ground truth of a dataset, keyed by (conversation id, client row's `turn`).
#[derive(Debug, Clone)]
pub struct Scorer {
    expected: BTreeMap<(String, u32), Expected>,
}

/// One issued turn's identity: source conversation, repeat (pass), client row's `turn`.
pub type TurnKey = (String, u32, u32);

/// The score of one issued scorable turn.
#[derive(Debug, Clone)]
pub struct TurnScore {
    /// The turn.
    pub key: TurnKey,
    /// Its domain.
    pub domain: Domain,
    /// Unrounded.
    pub score: f64,
    /// The model output was there (not failed / aborted / lost).
    pub observed: bool,
    /// The reference's `per_turn` row.
    pub row: Map<String, Value>,
}

impl Scorer {
    /// The ground truth of `ds`.
    pub fn new(ds: &Dataset) -> Scorer {
        let mut expected = BTreeMap::new();
        for conv in &ds.conversations {
            let domain = Domain::of(&conv.id);
            for w in conv.rows.windows(2) {
                let (row, next) = (&w[0], &w[1]);
                if !row.role.is_client() || next.role != Role::Assistant {
                    continue;
                }
                let truth = match domain {
                    Domain::Workflow => {
                        let codes = ground_truth_intents(next.intent_codes.as_deref());
                        (!codes.is_empty()).then_some(Truth::Intents(codes))
                    }
                    Domain::Coding => {
                        let actions = bash_actions(next.tool_calls.as_deref());
                        (!actions.is_empty()).then_some(Truth::Actions(actions))
                    }
                };
                expected.insert(
                    (conv.id.clone(), row.turn),
                    Expected {
                        assistant_turn: next.turn,
                        domain,
                        truth,
                    },
                );
            }
        }
        Scorer { expected }
    }

    /// The turn is followed by an assistant row (counts in `turns.issued`).
    pub fn is_expected(&self, conversation: &str, client_turn: u32) -> bool {
        self.expected
            .contains_key(&(conversation.to_string(), client_turn))
    }

    /// The turn has ground truth to score against.
    pub fn is_scorable(&self, conversation: &str, client_turn: u32) -> bool {
        self.expected
            .get(&(conversation.to_string(), client_turn))
            .is_some_and(|e| e.truth.is_some())
    }

    /// Scores one issued turn; `model` is `None` when no output completed. `None` when the turn
    /// is not scorable.
    pub fn score(&self, key: &TurnKey, model: Option<&ModelMessage>) -> Option<TurnScore> {
        let e = self.expected.get(&(key.0.clone(), key.2))?;
        let truth = e.truth.as_ref()?;
        let mut row = Map::new();
        row.insert("conversation_id".into(), Value::String(key.0.clone()));
        row.insert("repeat".into(), Value::from(key.1));
        row.insert("turn".into(), Value::from(e.assistant_turn));
        row.insert("domain".into(), Value::String(e.domain.as_str().into()));
        let empty = ModelMessage::default();
        let m = match model {
            Some(m) => m,
            None => {
                row.insert("missing".into(), Value::Bool(true));
                &empty
            }
        };
        let score = match truth {
            Truth::Intents(gt) => {
                let intent = model_intent(m);
                row.insert(
                    "gt_intents".into(),
                    Value::Array(gt.iter().cloned().map(Value::String).collect()),
                );
                row.insert(
                    "model_intent".into(),
                    intent.clone().map_or(Value::Null, Value::String),
                );
                if intent.is_some_and(|i| gt.contains(&i)) {
                    1.0
                } else {
                    0.0
                }
            }
            Truth::Actions(gt) => {
                let actions = bash_actions(m.tool_calls.as_deref());
                let s = multiset_iou(gt, &actions);
                row.insert(
                    "gt_actions".into(),
                    Value::Array(gt.iter().cloned().map(Value::String).collect()),
                );
                row.insert(
                    "model_actions".into(),
                    Value::Array(actions.into_iter().map(Value::String).collect()),
                );
                s
            }
        };
        row.insert("score".into(), float(py_round(score, 4)));
        Some(TurnScore {
            key: key.clone(),
            domain: e.domain,
            score,
            observed: model.is_some(),
            row,
        })
    }

    /// Builds `scores.json` from the issued turns (every pass, `__repeat_N` stripped) and the
    /// outputs that completed. Duplicate issued keys count once, as in the reference's set.
    pub fn scores(&self, issued: &[(TurnKey, Option<ModelMessage>)]) -> Scores {
        let mut set = ScoreSet::default();
        for (k, m) in issued {
            set.add(self, k.clone(), self.score(k, m.as_ref()));
        }
        set.finish(self)
    }
}

/// The issued turns of a run and their scores, accumulated as turns finish (the scoring itself,
/// [`Scorer::score`], can run elsewhere); [`ScoreSet::finish`] gives `scores.json`.
#[derive(Debug, Clone, Default)]
pub struct ScoreSet {
    /// Issued turns that have a following assistant row (`turns.issued`).
    issued: BTreeSet<TurnKey>,
    scored: BTreeMap<TurnKey, TurnScore>,
}

impl ScoreSet {
    /// One issued turn and its score (`None`: not scorable). A turn seen twice keeps the score
    /// that had an output, as the reference keeps a completed output over a missing one.
    pub fn add(&mut self, scorer: &Scorer, key: TurnKey, score: Option<TurnScore>) {
        if !scorer.is_expected(&key.0, key.2) {
            return;
        }
        self.issued.insert(key.clone());
        if let Some(ts) = score {
            match self.scored.get(&key) {
                Some(old) if old.observed && !ts.observed => {}
                _ => {
                    self.scored.insert(key, ts);
                }
            }
        }
    }

    /// Turns scored so far.
    pub fn len(&self) -> usize {
        self.scored.len()
    }

    /// No turn scored.
    pub fn is_empty(&self) -> bool {
        self.scored.is_empty()
    }

    /// The result, summed in the reference's (sorted key) order.
    pub fn finish(&self, scorer: &Scorer) -> Scores {
        let mut per_turn = Vec::with_capacity(self.scored.len());
        let mut sums = ScoreSums::default();
        let mut observed = 0u64;
        for ts in self.scored.values() {
            sums.add(ts.domain, ts.score);
            if ts.observed {
                observed += 1;
            }
            per_turn.push(ts.clone());
        }
        let excluded = scorer
            .expected
            .iter()
            .filter(|(_, e)| e.truth.is_none())
            .map(|((conv, _), e)| ExcludedTurn {
                conversation_id: conv.clone(),
                turn: e.assistant_turn,
                domain: e.domain,
            })
            .collect();
        sums.into_scores(self.issued.len() as u64, observed, per_turn, excluded)
    }
}

/// The unrounded scores of the scored turns, overall and per domain: the reference's means
/// (rounded to 4 decimals only at the end). [`ScoreSet::finish`] and a merge of shards both
/// build their [`Scores`] with it.
#[derive(Debug, Default, Clone)]
pub struct ScoreSums {
    total: f64,
    n: u64,
    by_domain: BTreeMap<Domain, (f64, u64)>,
}

impl ScoreSums {
    /// Adds a turn's score.
    pub fn add(&mut self, domain: Domain, score: f64) {
        self.total += score;
        self.n += 1;
        let d = self.by_domain.entry(domain).or_insert((0.0, 0));
        d.0 += score;
        d.1 += 1;
    }

    /// Turns scored so far.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// `scores.json`: the means and the counts (`observed` of the scored turns had an output).
    pub fn into_scores(
        self,
        issued: u64,
        observed: u64,
        per_turn: Vec<TurnScore>,
        excluded: Vec<ExcludedTurn>,
    ) -> Scores {
        let n = self.n;
        Scores {
            score: (n > 0).then(|| py_round(self.total / n as f64, 4)),
            issued,
            expected: n,
            observed,
            missing: n.saturating_sub(observed),
            scored: n,
            domains: self
                .by_domain
                .into_iter()
                .map(|(d, (s, c))| (d, (py_round(s / c as f64, 4), c)))
                .collect(),
            per_turn,
            excluded,
        }
    }
}

/// A turn with no ground truth.
#[derive(Debug, Clone, PartialEq)]
pub struct ExcludedTurn {
    /// The conversation.
    pub conversation_id: String,
    /// The assistant row's turn.
    pub turn: u32,
    /// Its domain.
    pub domain: Domain,
}

/// The scorer's result (`scores.json`).
#[derive(Debug, Clone)]
pub struct Scores {
    /// Mean over scored turns, rounded to 4 decimals; `None` when nothing was scorable.
    pub score: Option<f64>,
    /// Scorable turns issued.
    pub issued: u64,
    /// Scorable turns the dataset expects.
    pub expected: u64,
    /// Scorable turns with an output.
    pub observed: u64,
    /// Scorable turns without one (score 0).
    pub missing: u64,
    /// Turns scored.
    pub scored: u64,
    /// Per domain: rounded score and turns scored (coding first).
    pub domains: BTreeMap<Domain, (f64, u64)>,
    /// Every scored turn.
    pub per_turn: Vec<TurnScore>,
    /// Turns with no ground truth.
    pub excluded: Vec<ExcludedTurn>,
}

impl Scores {
    /// The reference's JSON object, key order included.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("score".into(), self.score.map_or(Value::Null, float));
        let mut turns = Map::new();
        for (k, v) in [
            ("issued", self.issued),
            ("expected", self.expected),
            ("observed", self.observed),
            ("missing", self.missing),
            ("scored", self.scored),
        ] {
            turns.insert(k.into(), Value::from(v));
        }
        o.insert("turns".into(), Value::Object(turns));
        let mut domains = Map::new();
        for (d, (s, c)) in &self.domains {
            let mut e = Map::new();
            e.insert("score".into(), float(*s));
            e.insert("scored".into(), Value::from(*c));
            domains.insert(d.as_str().into(), Value::Object(e));
        }
        o.insert("domains".into(), Value::Object(domains));
        o.insert(
            "per_turn".into(),
            Value::Array(
                self.per_turn
                    .iter()
                    .map(|t| Value::Object(t.row.clone()))
                    .collect(),
            ),
        );
        if !self.excluded.is_empty() {
            o.insert(
                "excluded_turns".into(),
                Value::Array(
                    self.excluded
                        .iter()
                        .map(|x| {
                            let mut e = Map::new();
                            e.insert(
                                "conversation_id".into(),
                                Value::String(x.conversation_id.clone()),
                            );
                            e.insert("turn".into(), Value::from(x.turn));
                            e.insert("domain".into(), Value::String(x.domain.as_str().into()));
                            e.insert(
                                "exclude_reason".into(),
                                Value::String("no ground truth".into()),
                            );
                            Value::Object(e)
                        })
                        .collect(),
                ),
            );
        }
        Value::Object(o)
    }

    /// `scores.json` as the reference writes it: `json.dumps(result, indent=2)` (ASCII-only,
    /// no trailing newline).
    pub fn to_file_text(&self) -> String {
        pyjson::dumps(
            &self.to_json(),
            &pyjson::Dumps {
                ensure_ascii: true,
                indent: Some("  ".into()),
                separators: None,
                sort_keys: false,
            },
        )
    }

    /// The score of one domain.
    pub fn domain(&self, d: Domain) -> Option<(f64, u64)> {
        self.domains.get(&d).copied()
    }
}

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// Python's `round(x, ndigits)`: correctly rounded to `ndigits` decimals (half to even on the
/// exact binary value), as Rust's fixed-precision formatting also is.
pub fn py_round(x: f64, ndigits: usize) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.ndigits$}").parse().unwrap_or(x)
}

/// |A ∩ B| / |A ∪ B| over multisets (`Counter` `&` / `|`).
pub fn multiset_iou(gt: &[String], model: &[String]) -> f64 {
    let mut count: HashMap<&str, (u32, u32)> = HashMap::new();
    for x in gt {
        count.entry(x).or_default().0 += 1;
    }
    for x in model {
        count.entry(x).or_default().1 += 1;
    }
    let (inter, union) = count
        .values()
        .fold((0u32, 0u32), |(i, u), &(a, b)| (i + a.min(b), u + a.max(b)));
    if union == 0 {
        // Unreachable for a scorable turn (its truth has at least one action).
        return 0.0;
    }
    f64::from(inter) / f64::from(union)
}

/// `_ground_truth_intents`: the non-empty string codes, upper-cased.
pub fn ground_truth_intents(codes: Option<&[String]>) -> BTreeSet<String> {
    codes
        .unwrap_or_default()
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| c.to_uppercase())
        .collect()
}

// --- Python `re` character classes (str patterns are Unicode) --------------------------------

fn unicode_class(re: &'static OnceLock<Regex>, pat: &str, c: char) -> bool {
    let r = re.get_or_init(|| Regex::new(pat).expect("static class"));
    let mut buf = [0u8; 4];
    r.is_match(c.encode_utf8(&mut buf))
}

/// `\d`: Unicode decimal digits (category Nd).
fn is_py_digit(c: char) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    c.is_ascii_digit() || (!c.is_ascii() && unicode_class(&RE, r"^\p{Nd}$", c))
}

/// `\w`: `str.isalnum()` (letters L*, numbers N*) or `_`.
fn is_py_word(c: char) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    c.is_ascii_alphanumeric()
        || c == '_'
        || (!c.is_ascii() && unicode_class(&RE, r"^[\p{L}\p{N}]$", c))
}

/// `\s` and `str.split()`: `str.isspace()`.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Under `re.IGNORECASE`, the pattern letter `i` also matches `ı` and `İ` (their simple case
/// mappings meet `i`); `n`, `t`, `e` match only themselves in either case.
fn ci_eq(c: char, p: char) -> bool {
    match p {
        'i' => matches!(c, 'i' | 'I' | 'ı' | 'İ'),
        p => c.to_ascii_lowercase() == p && c.is_ascii(),
    }
}

/// Word boundary before `chars[i]` (Python's `\b`).
fn boundary(chars: &[char], i: usize) -> bool {
    let before = i > 0 && is_py_word(chars[i - 1]);
    let after = i < chars.len() && is_py_word(chars[i]);
    before != after
}

/// `\bintent:\s*(I\d{3})\b` (IGNORECASE): the captured code, upper-cased.
fn explicit_intent(chars: &[char]) -> Option<String> {
    const LIT: [char; 6] = ['i', 'n', 't', 'e', 'n', 't'];
    'start: for p in 0..chars.len() {
        if p + 7 > chars.len() || !boundary(chars, p) {
            continue;
        }
        for (k, l) in LIT.iter().enumerate() {
            if !ci_eq(chars[p + k], *l) {
                continue 'start;
            }
        }
        if chars[p + 6] != ':' {
            continue;
        }
        let mut q = p + 7;
        while q < chars.len() && is_py_space(chars[q]) {
            q += 1;
        }
        if q + 4 > chars.len() || !ci_eq(chars[q], 'i') {
            continue;
        }
        if !chars[q + 1..q + 4].iter().all(|c| is_py_digit(*c)) || !boundary(chars, q + 4) {
            continue;
        }
        let code: String = chars[q..q + 4].iter().collect();
        return Some(code.to_uppercase());
    }
    None
}

/// The last `\bI(\d{3})\b`, as `I` + the digits.
fn last_bare_intent(chars: &[char]) -> Option<String> {
    let mut found = None;
    for p in 0..chars.len() {
        if chars[p] != 'I' || p + 4 > chars.len() || !boundary(chars, p) {
            continue;
        }
        if chars[p + 1..p + 4].iter().all(|c| is_py_digit(*c)) && boundary(chars, p + 4) {
            found = Some(p);
        }
    }
    found.map(|p| {
        let mut s = String::from("I");
        s.extend(&chars[p + 1..p + 4]);
        s
    })
}

/// `_model_intent`.
pub fn model_intent(m: &ModelMessage) -> Option<String> {
    let fields = [m.reasoning_content.as_deref(), m.content.as_deref()];
    let texts: Vec<Vec<char>> = fields
        .iter()
        .map(|f| f.unwrap_or_default().chars().collect())
        .collect();
    texts
        .iter()
        .find_map(|t| explicit_intent(t))
        .or_else(|| texts.iter().find_map(|t| last_bare_intent(t)))
}

fn quoted_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r#"'[^']*'|"(?:[^"\\]|\\.)*"|`[^`]*`"#).expect("static regex"))
}

fn separator_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\|\||\||&&|;|\n").expect("static regex"))
}

/// `^[A-Za-z_][A-Za-z0-9_]*=`.
fn is_env_assignment(t: &str) -> bool {
    let b = t.as_bytes();
    if b.is_empty() || !(b[0].is_ascii_alphabetic() || b[0] == b'_') {
        return false;
    }
    for &c in &b[1..] {
        if c == b'=' {
            return true;
        }
        if !(c.is_ascii_alphanumeric() || c == b'_') {
            return false;
        }
    }
    false
}

/// `re.sub(r"\.\d+(\.\d+)?$", "", s)`.
fn strip_version(s: &str) -> &str {
    let digits = |t: &str| !t.is_empty() && t.chars().all(is_py_digit);
    for (p, _) in s.match_indices('.') {
        let rest = &s[p + 1..];
        let ok = match rest.split_once('.') {
            None => digits(rest),
            Some((a, b)) => digits(a) && digits(b),
        };
        if ok {
            return &s[..p];
        }
    }
    s
}

/// Normalised executables of one shell command.
pub fn command_actions(command: &str) -> Vec<String> {
    let blanked = quoted_re().replace_all(command, " ");
    let mut out = Vec::new();
    for stage in separator_re().split(&blanked) {
        let mut tokens = stage
            .split(is_py_space)
            .filter(|t| !t.is_empty())
            .peekable();
        while tokens
            .peek()
            .is_some_and(|t| is_env_assignment(t) || WRAPPERS.contains(t))
        {
            tokens.next();
        }
        let Some(first) = tokens.next() else {
            continue;
        };
        let last = first.rsplit('/').next().unwrap_or(first).to_lowercase();
        let exe = strip_version(&last);
        if let Some((_, action)) = ALIASES.iter().find(|(k, _)| *k == exe) {
            out.push((*action).to_string());
        }
    }
    out
}

/// `_bash_actions`: the actions of a message's `bash` tool calls.
pub fn bash_actions(tool_calls: Option<&[Value]>) -> Vec<String> {
    let mut out = Vec::new();
    for tc in tool_calls.unwrap_or_default() {
        let Some(tc) = tc.as_object() else { continue };
        let Some(Value::Object(f)) = tc.get("function") else {
            continue;
        };
        if f.get("name").and_then(Value::as_str) != Some("bash") {
            continue;
        }
        let args: Value = match f.get("arguments") {
            Some(Value::String(s)) => match serde_json::from_str(s) {
                Ok(v) => v,
                Err(_) => continue,
            },
            Some(v) => v.clone(),
            None => continue,
        };
        let Some(args) = args.as_object() else {
            continue;
        };
        let command = match args.get("command") {
            Some(c) if crate::output::truthy(c) => Some(c),
            _ => args.get("cmd"),
        };
        let Some(Value::String(command)) = command else {
            continue;
        };
        out.extend(command_actions(command));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(content: &str, reasoning: Option<&str>) -> ModelMessage {
        ModelMessage {
            content: Some(content.into()),
            reasoning_content: reasoning.map(str::to_string),
            tool_calls: None,
        }
    }

    fn bash(args: Value) -> Vec<String> {
        bash_actions(Some(&[
            json!({"type": "function", "function": {"name": "bash", "arguments": args}}),
        ]))
    }

    #[test]
    fn intents_follow_python_re() {
        // Each expectation was printed by CPython 3.11's `re` on the same input.
        let cases: &[(&str, Option<&str>)] = &[
            ("ıntent: I001", Some("I001")),
            ("İntent: I001", Some("I001")),
            ("INTENT: i001", Some("I001")),
            ("intent:\u{1c}I001", Some("I001")),
            ("intent: I٠٠١", Some("I٠٠١")),
            ("xintent: I001", None),
            ("intent: I0011", None),
            ("intent: I001x", None),
            ("é intent: I001é", None),
            ("intent: ı001", Some("I001")),
            ("intent: İ001", Some("İ001")),
            ("_intent: I001", None),
            ("intent:\u{a0}I001", Some("I001")),
            ("intent: I00\u{301}", None),
        ];
        for (text, want) in cases {
            let got = explicit_intent(&text.chars().collect::<Vec<_>>());
            assert_eq!(got.as_deref(), *want, "{text:?}");
        }
        let bare: &[(&str, Option<&str>)] = &[
            ("I001 I002", Some("I002")),
            ("aI001", None),
            ("I0012", None),
            ("I001_", None),
            ("I00١", Some("I00١")),
            ("ÀI001", None),
            ("I001\u{301}", Some("I001")),
        ];
        for (text, want) in bare {
            let got = last_bare_intent(&text.chars().collect::<Vec<_>>());
            assert_eq!(got.as_deref(), *want, "{text:?}");
        }
    }

    #[test]
    fn reasoning_is_searched_before_content_and_explicit_before_bare() {
        assert_eq!(
            model_intent(&msg("intent: I002", Some("intent: I001"))).as_deref(),
            Some("I001")
        );
        assert_eq!(
            model_intent(&msg("intent: I002", Some("maybe I001"))).as_deref(),
            Some("I002")
        );
        assert_eq!(
            model_intent(&msg("I003 then I004", Some("I001 or I002"))).as_deref(),
            Some("I002")
        );
        assert_eq!(model_intent(&msg("I0042", None)), None);
    }

    #[test]
    fn actions_like_the_reference() {
        assert_eq!(
            bash(json!(
                "{\"cmd\": \"CUDA_VISIBLE_DEVICES=0 /usr/bin/python3 -m pytest\"}"
            )),
            ["python"]
        );
        assert_eq!(
            bash(json!(
                "{\"command\": \"cd /testbed && sudo env A=1 python3.11 x.py | grep 'a|b' ; ls\"}"
            )),
            ["python", "grep", "ls"]
        );
        assert_eq!(
            bash(json!("{\"command\": \"echo \\\"a && rg\\\" || egrep x\"}")),
            ["grep"]
        );
        assert_eq!(
            bash(json!("{\"command\": \". venv/bin/activate\\nvim x\"}")),
            ["source"]
        );
        assert_eq!(
            bash(json!("{\"command\": \"\", \"cmd\": \"wget u\"}")),
            ["curl"]
        );
        assert_eq!(
            bash(json!("{\"command\": [\"ls\"], \"cmd\": \"ls\"}")),
            Vec::<String>::new()
        );
        assert_eq!(bash(json!("not json")), Vec::<String>::new());
        assert_eq!(bash(json!({"command": "ls"})), ["ls"]);
        assert_eq!(strip_version("python3.11"), "python3");
        assert_eq!(strip_version("a.1.2.3"), "a.1");
        assert_eq!(strip_version("pip.x"), "pip.x");
        let other_tool = bash_actions(Some(&[
            json!({"function": {"name": "python", "arguments": "{\"command\": \"ls\"}"}}),
        ]));
        assert!(other_tool.is_empty());
    }

    #[test]
    fn iou_and_rounding() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            multiset_iou(&s(&["ls", "ls"]), &s(&["ls", "cat"])),
            1.0 / 3.0
        );
        assert_eq!(py_round(1.0 / 3.0, 4), 0.3333);
        assert_eq!(py_round(0.125, 2), 0.12);
        assert_eq!(py_round(0.12345, 4), 0.1235);
    }

    #[test]
    fn domains() {
        assert_eq!(Domain::of("sim_000001"), Domain::Workflow);
        assert_eq!(Domain::of("sim_"), Domain::Coding);
        assert_eq!(Domain::of("sim_12a"), Domain::Coding);
        assert_eq!(Domain::of("django__django-1"), Domain::Coding);
    }
}
