//! The reference tokenizer: token counts as the MLPerf Endpoints client computes them
//! (docs/benchmark.md#reference-tokens; mlcommons/endpoints `metrics_aggregator/token_metrics.py`
//! `BatchTokenizer`).
//!
//! Loaded from a local Hugging Face tokenizer folder — `tokenizer.json` (HF's own Rust
//! `tokenizers`, the library behind the Python fast tokenizers) and the chat template
//! (`chat_template.jinja`, else `tokenizer_config.json`'s `chat_template`). Nothing is
//! downloaded.
//!
//! - **Text** ([`RefTokenizer::count_text`]): `encode(text, add_special_tokens=False)`.
//! - **An assistant output with reasoning or tool calls** ([`RefTokenizer::count_message`]):
//!   render `[{"role":"user","content":""}, message]` without a generation prompt, count, and
//!   subtract the `[user ""]` prefix and the empty assistant frame; never below 0. Tool-call
//!   arguments that parse as a JSON object are passed as the object. If the template fails:
//!   the non-empty parts (content, reasoning, the tool calls' msgspec JSON) joined by `\n`,
//!   counted as text, and the count is marked [`Count::fallback`].
//! - **A request** ([`RefTokenizer::count_prompt`], ISL): render messages (historical tool-call
//!   arguments parsed the same way), `tools`, `chat_template_kwargs`, `tool_choice` with the
//!   generation prompt, count; on failure, msgspec JSON of `{"messages", "tools"}` as text.
//! - [`RefTokenizer::osl`] and [`RefTokenizer::tpot_tokens`] pick the input as the reference's
//!   `OslTrigger` / `TpotTrigger` do.
//!
//! ## Cost
//! Prompts are re-sent whole every turn, so counting every ISL from scratch would tokenize the
//! conversation again at every turn. Tokenizers split their input at added (special) tokens
//! first and encode each piece on its own, so a prompt's count is the sum of its pieces' counts
//! plus one per special token; pieces are counted once and remembered by a 128-bit hash. This is
//! exact for every tokenizer whose pieces do not depend on their position — it is switched off
//! (whole-text counting) for added tokens with `lstrip`/`rstrip`/`single_word` and for a
//! Metaspace pre-tokenizer that prepends only at the start of the text.
//!
//! A conversation's next prompt begins with its previous one's text (the agent re-sends the
//! whole history). [`RefTokenizer::count_prompt_after`] keeps, in a [`PromptMemo`], the previous
//! rendered prompt and the token count at the end of each special token in it; the next prompt
//! is counted from the last such end that lies, with the longest special token's length to
//! spare, inside the text the two prompts share — every piece and special-token match before
//! it was decided by those shared bytes — so only the rest is scanned and its pieces looked up.
//! The count is the same as [`RefTokenizer::count_prompt`]'s (a test holds them equal).
//!
//! The text itself need not be rendered whole either: when the chat template renders message by
//! message ([`ChatTemplate::is_message_local`]) and the next prompt keeps the previous one's
//! messages, tools and arguments, only its new messages are rendered, the memo's text is
//! extended in place (the previous prompt without the template's text after the messages, then
//! the new messages' text) and counted on from where the two part. A turn then costs what is
//! new in it, whatever the depth; any other template is rendered whole.

use crate::output::{MessageParts, ModelOutput};
use crate::pyjson;
use crate::template::{ChatTemplate, RenderInput};
use parking_lot::Mutex;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use tokentap_core::record::{CountSource, TurnRecord};

/// Why a tokenizer folder could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A file of the folder is missing or unusable.
    #[error("{path}: {what}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

fn file_err(path: &Path, what: impl Into<String>) -> TokenizerError {
    TokenizerError::File {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

/// A token count and whether the reference's fallback path produced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    /// Tokens.
    pub tokens: u64,
    /// The chat template failed and the text fallback was counted (the reference logs this).
    pub fallback: bool,
}

impl Count {
    fn source(fallback: bool) -> CountSource {
        if fallback {
            CountSource::TokenizerFallback
        } else {
            CountSource::Tokenizer
        }
    }
}

/// The inputs of an ISL count: the request as sent.
#[derive(Debug, Clone, Default)]
pub struct PromptInput {
    /// `messages`.
    pub messages: Vec<Value>,
    /// `tools`.
    pub tools: Option<Vec<Value>>,
    /// `chat_template_kwargs`.
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// `chat_template`.
    pub chat_template: Option<String>,
    /// `tool_choice`.
    pub tool_choice: Option<Value>,
}

impl PromptInput {
    /// From a chat completions request body, as the reference's `PromptData` takes them from
    /// the sample: `messages`, `tools` (a list), `chat_template_kwargs` (an object),
    /// `chat_template` (a string), `tool_choice` (a string or object).
    pub fn from_body(body: &[u8]) -> Option<PromptInput> {
        let mut o = match serde_json::from_slice(body).ok()? {
            Value::Object(o) => o,
            _ => return None,
        };
        let messages = match o.remove("messages") {
            Some(Value::Array(m)) if !m.is_empty() => m,
            _ => return None,
        };
        Some(PromptInput::from_object(o, messages))
    }

    /// From a request's other fields (`messages` taken apart, e.g. only the new ones).
    pub fn from_object(mut o: Map<String, Value>, messages: Vec<Value>) -> PromptInput {
        PromptInput {
            messages,
            tools: match o.remove("tools") {
                Some(Value::Array(t)) => Some(t),
                _ => None,
            },
            chat_template_kwargs: match o.remove("chat_template_kwargs") {
                Some(Value::Object(k)) => Some(k),
                _ => None,
            },
            chat_template: match o.remove("chat_template") {
                Some(Value::String(s)) => Some(s),
                _ => None,
            },
            tool_choice: o
                .remove("tool_choice")
                .filter(|t| t.is_string() || t.is_object()),
        }
    }
}

/// The chat templates of a tokenizer folder: one, or several by name.
enum Templates {
    None(String),
    One(ChatTemplate),
    Named(HashMap<String, ChatTemplate>),
}

/// A loaded reference tokenizer. Shared across threads (`Arc`); counting takes `&self`.
pub struct RefTokenizer {
    dir: PathBuf,
    tok: tokenizers::Tokenizer,
    templates: Templates,
    special_tokens: Vec<(String, String)>,
    /// Tokens of `[user ""]` and of the empty assistant frame.
    prefix_len: u64,
    baseline: u64,
    /// Set when the baseline could not be rendered (the reference logs it and uses 0).
    baseline_error: Option<String>,
    /// Added tokens to split prompts at for piecewise counting; `None`: count whole texts.
    splitter: Option<Splitter>,
    /// The count of a byte-level BPE tokenizer without the tokenizers crate's bookkeeping;
    /// `None`: not of that shape.
    byte_level: Option<crate::bytelevel::ByteLevelCount>,
    pieces: Mutex<HashMap<(u64, u64), u32>>,
    fallbacks: AtomicU64,
    first_fallback: Mutex<Option<String>>,
}

impl std::fmt::Debug for RefTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefTokenizer")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Leftmost-longest matcher of the added tokens' texts.
struct Splitter {
    ac: aho_corasick::AhoCorasick,
    /// The longest added token, bytes: a match ending this far before a change in the text was
    /// decided without the changed bytes.
    max_len: usize,
}

/// What one prompt of a conversation leaves for the next one's count
/// ([`RefTokenizer::count_prompt_after`]): its rendered text and, at the end of each special
/// token in it, the tokens up to there. Empty: nothing to reuse.
#[derive(Debug, Clone, Default)]
pub struct PromptMemo {
    text: String,
    marks: Vec<(usize, u64)>,
    /// Each message as given, and as the template's value (normalized, converted once).
    messages: Vec<(Value, minijinja::Value)>,
    /// The last prompt's tools as given, as the template's value (converted once), and their
    /// JSON text's length.
    tools: Option<(Vec<Value>, minijinja::Value, usize)>,
    /// How `text` splits around its messages, when the template renders message by message.
    frame: Option<Frame>,
}

/// A message-local template's prompt ([`ChatTemplate::is_message_local`]) split around its
/// messages: the next prompt of the conversation, with the same template, tools and arguments
/// and the same first `rendered` messages, is `text` without its last `after` bytes, then the
/// new messages rendered alone without their first `before` bytes.
#[derive(Debug, Clone)]
struct Frame {
    /// The template (its address: the tokenizer's templates live as long as it).
    template: usize,
    has_tools: bool,
    kwargs: Option<Map<String, Value>>,
    tool_choice: Option<Value>,
    before: usize,
    after: usize,
    rendered: usize,
}

/// A prompt rendered ([`RefTokenizer::render_prompt`]).
enum Rendered {
    /// The whole conversation.
    Whole(String),
    /// Into the memo's text, in place: its first `shared` bytes are the last prompt's.
    Extended { shared: usize },
}

/// Which messages a prompt count is given.
#[derive(Clone, Copy)]
enum Messages {
    /// All of them.
    All,
    /// Those after the first `n` the memo holds.
    After(usize),
}

/// Conversations' last prompts ([`PromptMemo`]) by conversation, the least recently used let go
/// past a size ([`PromptMemos::MAX_BYTES`] unless [`PromptMemos::with_max_bytes`]). A memo in
/// use is taken out of the table: a second request of the same conversation counted at the same
/// time starts from nothing — the same count, paid in full.
///
/// `X`: what the caller keeps beside each memo (the replay: the body segments the prompt was
/// read from), let go with it.
#[derive(Debug)]
pub struct PromptMemos<X = ()> {
    map: HashMap<String, (PromptMemo, X, u64)>,
    bytes: usize,
    max_bytes: usize,
    tick: u64,
}

impl<X> Default for PromptMemos<X> {
    fn default() -> Self {
        PromptMemos {
            map: HashMap::new(),
            bytes: 0,
            max_bytes: Self::MAX_BYTES,
            tick: 0,
        }
    }
}

impl<X> PromptMemos<X> {
    /// The most a table holds by default ([`PromptMemo::bytes`]).
    pub const MAX_BYTES: usize = 256 << 20;

    /// A table that holds up to `max_bytes` ([`PromptMemo::bytes`]): a memo let go is a
    /// conversation whose next prompt is counted from nothing, so a caller whose active
    /// conversations are known (the replay: one per slot) sizes it to hold them all.
    pub fn with_max_bytes(max_bytes: usize) -> Self {
        PromptMemos {
            max_bytes,
            ..Self::default()
        }
    }
}

impl<X: Default> PromptMemos<X> {
    /// `conversation`'s memo and what was kept beside it, taken out of the table (empty when it
    /// has none).
    pub fn take(&mut self, conversation: &str) -> (PromptMemo, X) {
        match self.map.remove(conversation) {
            Some((m, x, _)) => {
                self.bytes -= m.bytes();
                (m, x)
            }
            None => (PromptMemo::default(), X::default()),
        }
    }

    /// Puts `memo` (and `extra`) back as `conversation`'s, letting the least recently used go
    /// past the bound.
    pub fn put(&mut self, conversation: String, memo: PromptMemo, extra: X) {
        self.tick += 1;
        self.bytes += memo.bytes();
        if let Some((old, _, _)) = self.map.insert(conversation, (memo, extra, self.tick)) {
            self.bytes -= old.bytes();
        }
        while self.bytes > self.max_bytes && self.map.len() > 1 {
            let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, (_, _, t))| *t)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((m, _, _)) = self.map.remove(&oldest) {
                self.bytes -= m.bytes();
            }
        }
    }
}

impl PromptMemo {
    /// Bytes held, estimated: the text (its allocation: a text extended in place has room to
    /// grow), its marks, the messages at about the text's size twice (as given and as values),
    /// and the tools four times their JSON (as given, as values, their `tojson` text).
    pub fn bytes(&self) -> usize {
        self.text.capacity()
            + 2 * self.text.len()
            + self.marks.capacity() * std::mem::size_of::<(usize, u64)>()
            + self.tools.as_ref().map_or(0, |t| 4 * t.2)
    }

    /// The prompt this memo holds, rendered (empty: none).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the next prompt of the conversation, if it keeps this one's messages, template,
    /// tools and arguments, renders only its new messages (the template is message-local:
    /// [`ChatTemplate::is_message_local`]).
    pub fn renders_new_only(&self) -> bool {
        self.frame.is_some()
    }

    /// Messages of the prompt this memo holds.
    pub fn messages(&self) -> usize {
        self.messages.len()
    }

    /// Holds `messages`: those this memo holds already (the same, at the same place) kept, the
    /// rest normalized and converted to the template's values. The first `known` are the memo's
    /// own (not compared). Returns how many of the messages held were kept.
    fn keep_messages(&mut self, known: usize, messages: &[Value]) -> usize {
        let known = known.min(self.messages.len());
        let same = known
            + self.messages[known..]
                .iter()
                .zip(&messages[known.min(messages.len())..])
                .take_while(|((held, _), m)| held == *m)
                .count();
        self.messages.truncate(same);
        for m in &messages[same..] {
            let v = crate::template::message_value(normalize_prompt_message(m).as_ref());
            self.messages.push((m.clone(), v));
        }
        same
    }

    /// `tools` as the template's value: the one held when they are the last prompt's.
    fn tools_value(&mut self, tools: &[Value]) -> minijinja::Value {
        match &self.tools {
            Some((held, v, _)) if held.as_slice() == tools => v.clone(),
            _ => {
                let v = crate::template::tools_value(tools);
                let len = tools.iter().map(|t| t.to_string().len()).sum();
                self.tools = Some((tools.to_vec(), v.clone(), len));
                v
            }
        }
    }

    /// The messages held from the `from`th on, as the template's value.
    fn value(&self, from: usize) -> minijinja::Value {
        minijinja::Value::from(
            self.messages[from..]
                .iter()
                .map(|(_, v)| v.clone())
                .collect::<Vec<_>>(),
        )
    }

    /// Keeps the first `kept` messages held and adds `new` after them.
    fn continue_with(&mut self, kept: usize, new: &[Value]) {
        self.messages.truncate(kept);
        for m in new {
            let v = crate::template::message_value(normalize_prompt_message(m).as_ref());
            self.messages.push((m.clone(), v));
        }
    }
}

const PIECE_CACHE_MAX: usize = 2_000_000;
/// Texts shorter than this are encoded whole (splitting costs more than it saves).
const PIECEWISE_MIN: usize = 2048;

impl RefTokenizer {
    /// Loads `dir/tokenizer.json` and the chat template (`dir/chat_template.jinja`, else
    /// `chat_template` of `dir/tokenizer_config.json`).
    pub fn load(dir: &Path) -> Result<RefTokenizer, TokenizerError> {
        let tj = dir.join("tokenizer.json");
        if !tj.is_file() {
            return Err(file_err(
                &tj,
                "not found: --tokenizer needs a Hugging Face tokenizer folder with tokenizer.json \
                 (a fast tokenizer; models that ship only tiktoken or sentencepiece files need it \
                 converted first, e.g. with transformers' save_pretrained)",
            ));
        }
        let mut tok = tokenizers::Tokenizer::from_file(&tj)
            .map_err(|e| file_err(&tj, format!("not a tokenizer this version can load: {e}")))?;
        // transformers calls the tokenizer with truncation and padding off.
        tok.with_truncation(None)
            .map_err(|e| file_err(&tj, format!("cannot disable truncation: {e}")))?;
        tok.with_padding(None);

        let cfg_path = dir.join("tokenizer_config.json");
        let cfg: Map<String, Value> = if cfg_path.is_file() {
            let text = std::fs::read_to_string(&cfg_path)
                .map_err(|e| file_err(&cfg_path, format!("cannot read: {e}")))?;
            match serde_json::from_str(&text) {
                Ok(Value::Object(o)) => o,
                Ok(_) => return Err(file_err(&cfg_path, "expected a JSON object")),
                Err(e) => {
                    return Err(file_err(
                        &cfg_path,
                        format!("line {}, column {}: {e}", e.line(), e.column()),
                    ))
                }
            }
        } else {
            Map::new()
        };
        let special_tokens = special_tokens(&cfg, dir);
        let sources = template_sources(dir, &cfg)?;
        let templates = match sources {
            TemplateSources::None => Templates::None(format!(
                "no chat template in {} (no chat_template.jinja, no chat_template in tokenizer_config.json)",
                dir.display()
            )),
            TemplateSources::One(path, src) => Templates::One(
                ChatTemplate::new(&src, special_tokens.clone())
                    .map_err(|e| file_err(&path, format!("the chat template does not compile: {e:#}")))?,
            ),
            TemplateSources::Named(path, list) => {
                let mut m = HashMap::new();
                for (name, src) in list {
                    let t = ChatTemplate::new(&src, special_tokens.clone()).map_err(|e| {
                        file_err(&path, format!("chat template {name:?} does not compile: {e:#}"))
                    })?;
                    m.insert(name, t);
                }
                Templates::Named(m)
            }
        };
        let splitter = Splitter::for_tokenizer(&tok, &tj);
        let byte_level = crate::bytelevel::ByteLevelCount::for_tokenizer(&tok);
        let mut t = RefTokenizer {
            dir: dir.to_path_buf(),
            tok,
            templates,
            special_tokens,
            prefix_len: 0,
            baseline: 0,
            baseline_error: None,
            splitter,
            byte_level,
            pieces: Mutex::new(HashMap::new()),
            fallbacks: AtomicU64::new(0),
            first_fallback: Mutex::new(None),
        };
        t.compute_baseline();
        Ok(t)
    }

    /// The folder it was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `(prefix, baseline)`: tokens of `[user ""]` and of the empty assistant frame.
    pub fn frame(&self) -> (u64, u64) {
        (self.prefix_len, self.baseline)
    }

    /// Why the empty-frame baseline could not be rendered, if it could not (counts of tool-call
    /// outputs then include the frame, as in the reference).
    pub fn baseline_error(&self) -> Option<&str> {
        self.baseline_error.as_deref()
    }

    /// Counts produced by the fallback path so far, and the first template error.
    pub fn fallbacks(&self) -> (u64, Option<String>) {
        let first = self.first_fallback.lock().clone();
        (self.fallbacks.load(Relaxed), first)
    }

    fn compute_baseline(&mut self) {
        let user = json!({"role": "user", "content": ""});
        let r = (|| -> Result<(u64, u64), String> {
            let t = self.template_for(None, false)?;
            let prefix =
                self.render_count(t, std::slice::from_ref(&user), None, false, None, None)?;
            let with = self.render_count(
                t,
                &[user.clone(), json!({"role": "assistant", "content": ""})],
                None,
                false,
                None,
                None,
            )?;
            Ok((prefix, with.saturating_sub(prefix)))
        })();
        match r {
            Ok((p, b)) => {
                self.prefix_len = p;
                self.baseline = b;
            }
            Err(e) => self.baseline_error = Some(e),
        }
    }

    /// `get_chat_template(chat_template, tools)`.
    fn template_for(
        &self,
        requested: Option<&str>,
        with_tools: bool,
    ) -> Result<&ChatTemplate, String> {
        match &self.templates {
            Templates::None(why) => Err(why.clone()),
            Templates::One(t) => match requested {
                None => Ok(t),
                Some(_) => Err("a request-level chat_template is not supported".into()),
            },
            Templates::Named(m) => {
                let name = match requested {
                    Some(n) if m.contains_key(n) => n,
                    Some(_) => return Err("a request-level chat_template is not supported".into()),
                    None if with_tools && m.contains_key("tool_use") => "tool_use",
                    None if m.contains_key("default") => "default",
                    None => {
                        let mut names: Vec<&String> = m.keys().collect();
                        names.sort();
                        return Err(format!("several chat templates and no default: {names:?}"));
                    }
                };
                Ok(&m[name])
            }
        }
    }

    fn render_count(
        &self,
        t: &ChatTemplate,
        messages: &[Value],
        tools: Option<&[Value]>,
        add_generation_prompt: bool,
        kwargs: Option<&Map<String, Value>>,
        tool_choice: Option<&Value>,
    ) -> Result<u64, String> {
        let text = t
            .render(&RenderInput {
                messages,
                tools,
                add_generation_prompt,
                kwargs,
                tool_choice,
                messages_value: None,
                tools_value: None,
            })
            .map_err(|e| format!("{e:#}"))?;
        Ok(self.count_long_after(text, &mut PromptMemo::default()))
    }

    /// A prompt's text: the messages `memo` holds with `input`'s tools and arguments, of which
    /// the first `kept` (and the tools, when `tools_kept`) are those of the prompt `memo`'s text
    /// was rendered from. A message-local template whose frame `memo` holds for the same
    /// template, tools and arguments renders only the new messages, and `memo`'s text becomes,
    /// in place, itself without its text after the messages, then theirs ([`Frame`]); any other
    /// renders the whole conversation (and notes the frame for the next prompt). The same text
    /// either way.
    fn render_prompt(
        &self,
        t: &ChatTemplate,
        input: RenderInput<'_>,
        kept: usize,
        tools_kept: bool,
        memo: &mut PromptMemo,
    ) -> Result<Rendered, minijinja::Error> {
        let template = t as *const ChatTemplate as usize;
        let same_frame = |f: &Frame| {
            f.template == template
                && f.rendered == kept
                && tools_kept
                && f.has_tools == input.tools.is_some()
                && f.kwargs.as_ref() == input.kwargs
                && f.tool_choice.as_ref() == input.tool_choice
                && memo.text.len() >= f.before + f.after
        };
        if let Some(f) = memo.frame.take().filter(same_frame) {
            let new = t.render(&RenderInput {
                messages_value: Some(memo.value(kept)),
                ..input.clone()
            })?;
            let held = &memo.text;
            // The frame's texts are the held prompt's: a guard, never expected to fail.
            if new.len() >= f.before + f.after
                && new.as_bytes()[..f.before] == held.as_bytes()[..f.before]
                && new.as_bytes()[new.len() - f.after..] == held.as_bytes()[held.len() - f.after..]
            {
                let shared = held.len() - f.after;
                memo.text.truncate(shared);
                memo.text.push_str(&new[f.before..]);
                memo.frame = Some(Frame {
                    rendered: memo.messages.len(),
                    ..f
                });
                return Ok(Rendered::Extended { shared });
            }
        }
        let text = t.render(&RenderInput {
            messages_value: Some(memo.value(0)),
            ..input.clone()
        })?;
        memo.frame = t.frame(&input)?.map(|(before, after)| Frame {
            template,
            has_tools: input.tools.is_some(),
            kwargs: input.kwargs.cloned(),
            tool_choice: input.tool_choice.cloned(),
            before,
            after,
            rendered: memo.messages.len(),
        });
        Ok(Rendered::Whole(text))
    }

    fn note_fallback(&self, why: String) {
        self.fallbacks.fetch_add(1, Relaxed);
        let mut g = self.first_fallback.lock();
        if g.is_none() {
            *g = Some(why);
        }
    }

    /// `encode(text, add_special_tokens=False)` length.
    ///
    /// Counted through the tokenizer's own steps — its added tokens split out, its normalizer,
    /// its pre-tokenizer, its model on each piece — as `encode` runs them, without building the
    /// `Encoding` (offsets, word ids, masks and a `String` per token, which was most of the
    /// cost of a count; `count_is_encode`, in the tests, holds the two equal). A byte-level BPE
    /// tokenizer is counted by its own rules without the tokenizers crate's per-piece
    /// bookkeeping (`bytelevel`, held equal to `encode` by the same tests).
    pub fn count_text(&self, text: &str) -> u64 {
        if let Some(b) = &self.byte_level {
            let slow = |mapped: &str| {
                use tokenizers::Model;
                self.tok
                    .get_model()
                    .tokenize(mapped)
                    .ok()
                    .map(|t| t.len() as u64)
            };
            if let Some(n) = b.count(text, &slow) {
                return n;
            }
        }
        self.count_steps(text)
    }

    /// Whether [`count_text`](Self::count_text) counts by the byte-level BPE rules of its own
    /// (the tokenizer is of that make and shape) rather than through the tokenizers crate's
    /// steps.
    pub fn counts_byte_level(&self) -> bool {
        self.byte_level.is_some()
    }

    /// [`count_text`](Self::count_text) through the tokenizers crate's steps, whatever the
    /// tokenizer's make (the byte-level count's fallback, and its reference in the tests).
    pub fn count_steps(&self, text: &str) -> u64 {
        use tokenizers::{Model, OffsetReferential, OffsetType, PreTokenizer};
        let mut pieces = self
            .tok
            .get_added_vocabulary()
            .extract_and_normalize(self.tok.get_normalizer(), text);
        if let Some(pre) = self.tok.get_pre_tokenizer() {
            if pre.pre_tokenize(&mut pieces).is_err() {
                return self.encode_len(text);
            }
        }
        let model = self.tok.get_model();
        let mut n = 0u64;
        for (piece, _, tokens) in pieces.get_splits(OffsetReferential::Normalized, OffsetType::None)
        {
            n += match tokens {
                Some(t) => t.len() as u64,
                None => match model.tokenize(piece) {
                    Ok(t) => t.len() as u64,
                    Err(_) => return self.encode_len(text),
                },
            };
        }
        n
    }

    /// `encode(text, add_special_tokens=False)` length, by `encode` itself.
    pub fn encode_len(&self, text: &str) -> u64 {
        match self.tok.encode_fast(text, false) {
            Ok(e) => e.len() as u64,
            // Encoding cannot fail for a loaded BPE/WordPiece/Unigram model on valid UTF-8;
            // should a custom component fail, the text counts as nothing rather than a guess.
            Err(_) => 0,
        }
    }

    /// Counts a long text piece by piece (see the module docs), exactly as a whole, reusing the
    /// count of the prefix `text` shares with `memo`'s text up to a special token's end decided
    /// by shared bytes alone (an empty memo: nothing reused); `memo` then holds `text`.
    fn count_long_after(&self, text: String, memo: &mut PromptMemo) -> u64 {
        let Some(sp) = self
            .splitter
            .as_ref()
            .filter(|_| text.len() >= PIECEWISE_MIN)
        else {
            *memo = PromptMemo::default();
            return self.count_text(&text);
        };
        let shared = common_prefix(memo.text.as_bytes(), text.as_bytes());
        memo.text = text;
        self.count_pieces(sp, shared, memo)
    }

    /// The count of the text `memo` holds, whose first `shared` bytes are those of the text its
    /// marks were taken from ([`Self::count_long_after`], the text already in place).
    fn count_held(&self, shared: usize, memo: &mut PromptMemo) -> u64 {
        match self.splitter.as_ref() {
            Some(sp) if memo.text.len() >= PIECEWISE_MIN => self.count_pieces(sp, shared, memo),
            _ => {
                let text = std::mem::take(&mut memo.text);
                self.count_long_after(text, memo)
            }
        }
    }

    fn count_pieces(&self, sp: &Splitter, shared: usize, memo: &mut PromptMemo) -> u64 {
        let PromptMemo { text, marks, .. } = memo;
        let safe = shared.saturating_sub(sp.max_len);
        let keep = marks.partition_point(|&(end, _)| end <= safe);
        marks.truncate(keep);
        let (mut at, mut total) = marks.last().copied().unwrap_or((0, 0));
        let from = at;
        for m in sp.ac.find_iter(&text[from..]) {
            let (start, end) = (from + m.start(), from + m.end());
            total += self.count_piece(&text[at..start]) + 1;
            at = end;
            marks.push((at, total));
        }
        total + self.count_piece(&text[at..])
    }

    fn count_piece(&self, piece: &str) -> u64 {
        if piece.is_empty() {
            return 0;
        }
        if piece.len() < 4 {
            return self.count_text(piece);
        }
        let key = hash128(piece);
        if let Some(n) = self.pieces.lock().get(&key).copied() {
            return u64::from(n);
        }
        let n = self.count_text(piece);
        {
            let mut m = self.pieces.lock();
            if m.len() >= PIECE_CACHE_MAX {
                m.clear();
            }
            m.insert(key, n.min(u64::from(u32::MAX)) as u32);
        }
        n
    }

    /// `_token_count_message`: one assistant output without the chat frame.
    pub fn count_message(&self, parts: &MessageParts) -> Count {
        let mut msg = Map::new();
        msg.insert("role".into(), Value::String("assistant".into()));
        msg.insert("content".into(), Value::String(parts.content.clone()));
        if let Some(r) = parts.reasoning.as_ref().filter(|r| !r.is_empty()) {
            msg.insert("reasoning_content".into(), Value::String(r.clone()));
        }
        if let Some(calls) = parts.tool_calls.as_ref().filter(|c| !c.is_empty()) {
            msg.insert(
                "tool_calls".into(),
                Value::Array(normalize_tool_calls(calls)),
            );
        }
        let messages = [json!({"role": "user", "content": ""}), Value::Object(msg)];
        let rendered = self
            .template_for(None, false)
            .and_then(|t| self.render_count(t, &messages, None, false, None, None));
        match rendered {
            Ok(n) => Count {
                tokens: n.saturating_sub(self.prefix_len + self.baseline),
                fallback: false,
            },
            Err(why) => {
                self.note_fallback(format!("assistant output: {why}"));
                let calls_json = parts
                    .tool_calls
                    .as_ref()
                    .filter(|c| !c.is_empty())
                    .map(|c| pyjson::msgspec_encode(&Value::Array(c.clone())));
                let text: Vec<&str> = [
                    Some(parts.content.as_str()),
                    parts.reasoning.as_deref(),
                    calls_json.as_deref(),
                ]
                .into_iter()
                .flatten()
                .filter(|p| !p.is_empty())
                .collect();
                Count {
                    tokens: self.count_text(&text.join("\n")),
                    fallback: true,
                }
            }
        }
    }

    /// `_token_count_prompt`: the ISL of one request.
    pub fn count_prompt(&self, p: &PromptInput) -> Count {
        self.count_prompt_after(p, &mut PromptMemo::default())
    }

    /// [`Self::count_prompt`] of the next request of a conversation whose previous request
    /// left `memo` (empty for its first): the same count, paying only for the text past what
    /// the two prompts share. `memo` then holds this prompt.
    pub fn count_prompt_after(&self, p: &PromptInput, memo: &mut PromptMemo) -> Count {
        self.count_prompt_of(p, Messages::All, memo)
    }

    /// [`Self::count_prompt_after`] of a prompt given by what is new: its messages are the
    /// first `kept` of the prompt `memo` holds (`kept` ≤ [`PromptMemo::messages`]), then
    /// `p.messages`. The kept messages are neither given again nor compared (a caller that
    /// knows them unchanged — the replay, which sends a trajectory's earlier messages as the
    /// same bytes — pays nothing for them).
    pub fn count_prompt_continued(
        &self,
        p: &PromptInput,
        kept: usize,
        memo: &mut PromptMemo,
    ) -> Count {
        self.count_prompt_of(p, Messages::After(kept.min(memo.messages())), memo)
    }

    fn count_prompt_of(&self, p: &PromptInput, which: Messages, memo: &mut PromptMemo) -> Count {
        let rendered = self
            .template_for(p.chat_template.as_deref(), p.tools.is_some())
            .and_then(|t| {
                let tools_kept = match (p.tools.as_deref(), &memo.tools) {
                    (Some(t), Some((held, _, _))) => held.as_slice() == t,
                    (Some(_), None) => false,
                    (None, _) => true,
                };
                let kept = match which {
                    Messages::All => memo.keep_messages(0, &p.messages),
                    Messages::After(kept) => {
                        memo.continue_with(kept, &p.messages);
                        kept
                    }
                };
                let input = RenderInput {
                    messages: &[],
                    tools: p.tools.as_deref(),
                    add_generation_prompt: true,
                    kwargs: p.chat_template_kwargs.as_ref(),
                    tool_choice: p.tool_choice.as_ref(),
                    messages_value: None,
                    tools_value: p.tools.as_deref().map(|t| memo.tools_value(t)),
                };
                match self.render_prompt(t, input, kept, tools_kept, memo) {
                    Ok(Rendered::Whole(text)) => Ok(self.count_long_after(text, memo)),
                    Ok(Rendered::Extended { shared }) => Ok(self.count_held(shared, memo)),
                    Err(e) => Err(format!("{e:#}")),
                }
            });
        match rendered {
            Ok(n) => Count {
                tokens: n,
                fallback: false,
            },
            Err(why) => {
                self.note_fallback(format!("prompt: {why}"));
                let all: Vec<Value> = match which {
                    Messages::All => p.messages.clone(),
                    Messages::After(kept) => memo.messages[..kept]
                        .iter()
                        .map(|(m, _)| m.clone())
                        .chain(p.messages.iter().cloned())
                        .collect(),
                };
                let mut o = Map::new();
                o.insert(
                    "messages".into(),
                    Value::Array(normalize_prompt_messages(&all)),
                );
                if let Some(t) = &p.tools {
                    o.insert("tools".into(), Value::Array(t.clone()));
                }
                // The memo is left empty: the next prompt is counted from nothing.
                *memo = PromptMemo::default();
                Count {
                    tokens: self.count_long_after(
                        pyjson::msgspec_encode(&Value::Object(o)),
                        &mut PromptMemo::default(),
                    ),
                    fallback: true,
                }
            }
        }
    }

    /// OSL of a completed output (`OslTrigger`): through the template when it has reasoning or
    /// tool calls, else its text; `None` for an empty text output (the reference records no
    /// sample for it).
    pub fn osl(&self, out: &ModelOutput) -> Option<Count> {
        if out.is_structured() {
            return Some(self.count_message(&out.message_parts()));
        }
        let text = out.text();
        (!text.is_empty()).then(|| Count {
            tokens: self.count_text(&text),
            fallback: false,
        })
    }

    /// The TPOT denominator (`TpotTrigger`): what arrived after the first chunk.
    pub fn tpot_tokens(&self, out: &ModelOutput) -> Option<Count> {
        if out.is_structured() {
            return Some(self.count_message(&out.message_parts_after_first_chunk()));
        }
        let text = out.text_after_first_chunk();
        (!text.is_empty()).then(|| Count {
            tokens: self.count_text(&text),
            fallback: false,
        })
    }

    /// The named special tokens passed to every template rendering.
    pub fn special_tokens(&self) -> &[(String, String)] {
        &self.special_tokens
    }

    /// Counts a completed output into a record: `osl`, `tpot_tokens` and `osl_source`
    /// (`tokenizer_fallback` when either count took the reference's fallback path).
    pub fn record_output(&self, out: &ModelOutput, rec: &mut TurnRecord) {
        let osl = self.osl(out);
        let tpot = self.tpot_tokens(out);
        rec.osl = osl.map(|c| c.tokens);
        rec.tpot_tokens = tpot.map(|c| c.tokens);
        let fallback = osl.is_some_and(|c| c.fallback) || tpot.is_some_and(|c| c.fallback);
        rec.osl_source = Some(Count::source(fallback));
    }

    /// Counts the request as sent into a record: `isl` and `isl_source`.
    pub fn record_prompt(&self, p: &PromptInput, rec: &mut TurnRecord) {
        self.record_prompt_after(p, &mut PromptMemo::default(), rec);
    }

    /// [`Self::record_prompt`] of a prompt given by what is new ([`Self::count_prompt_continued`]).
    pub fn record_prompt_continued(
        &self,
        p: &PromptInput,
        kept: usize,
        memo: &mut PromptMemo,
        rec: &mut TurnRecord,
    ) {
        let c = self.count_prompt_continued(p, kept, memo);
        rec.isl = Some(c.tokens);
        rec.isl_source = Some(Count::source(c.fallback));
    }

    /// [`Self::record_prompt`] of a conversation's next request ([`Self::count_prompt_after`]).
    pub fn record_prompt_after(
        &self,
        p: &PromptInput,
        memo: &mut PromptMemo,
        rec: &mut TurnRecord,
    ) {
        let c = self.count_prompt_after(p, memo);
        rec.isl = Some(c.tokens);
        rec.isl_source = Some(Count::source(c.fallback));
    }
}

/// Bytes `a` and `b` share from their start.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 64;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

fn hash128(s: &str) -> (u64, u64) {
    let mut a = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut a);
    let mut b = std::collections::hash_map::DefaultHasher::new();
    0x9E37_79B9_7F4A_7C15u64.hash(&mut b);
    s.hash(&mut b);
    (a.finish(), b.finish())
}

impl Splitter {
    /// `None` when piecewise counting would not be exact for this tokenizer.
    fn for_tokenizer(tok: &tokenizers::Tokenizer, path: &Path) -> Option<Splitter> {
        let decoder = tok.get_added_tokens_decoder();
        let mut texts = Vec::new();
        for t in decoder.values() {
            if t.lstrip || t.rstrip || t.single_word {
                return None;
            }
            if !t.normalized && !t.content.is_empty() {
                texts.push(t.content.clone());
            }
        }
        // A Metaspace pre-tokenizer with `prepend_scheme: first` treats the start of the text
        // specially; such tokenizers are counted whole.
        let raw = std::fs::read_to_string(path).ok()?;
        if raw.contains("\"Metaspace\"") && raw.contains("\"first\"") {
            return None;
        }
        if texts.is_empty() {
            return None;
        }
        let ac = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(&texts)
            .ok()?;
        let max_len = texts.iter().map(String::len).max().unwrap_or(0);
        Some(Splitter { ac, max_len })
    }
}

/// `_normalize_tool_calls_for_template`: `function.arguments` that parse as a JSON object are
/// replaced by the object.
pub fn normalize_tool_calls(calls: &[Value]) -> Vec<Value> {
    calls
        .iter()
        .map(|tc| {
            let Some(f) = tc.get("function").and_then(Value::as_object) else {
                return tc.clone();
            };
            let Some(Value::String(args)) = f.get("arguments") else {
                return tc.clone();
            };
            match serde_json::from_str::<Value>(args) {
                Ok(parsed @ Value::Object(_)) => {
                    let mut tc2 = tc.as_object().cloned().unwrap_or_default();
                    let mut f2 = f.clone();
                    f2.insert("arguments".into(), parsed);
                    tc2.insert("function".into(), Value::Object(f2));
                    Value::Object(tc2)
                }
                _ => tc.clone(),
            }
        })
        .collect()
}

/// `_normalize_prompt_messages_for_template`.
pub fn normalize_prompt_messages(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| normalize_prompt_message(m).into_owned())
        .collect()
}

/// One message of [`normalize_prompt_messages`] (borrowed when it has no tool call).
fn normalize_prompt_message(m: &Value) -> std::borrow::Cow<'_, Value> {
    match m.get("tool_calls") {
        Some(Value::Array(calls)) if !calls.is_empty() => {
            let mut m2 = m.as_object().cloned().unwrap_or_default();
            m2.insert(
                "tool_calls".into(),
                Value::Array(normalize_tool_calls(calls)),
            );
            std::borrow::Cow::Owned(Value::Object(m2))
        }
        _ => std::borrow::Cow::Borrowed(m),
    }
}

/// transformers' `special_tokens_map`: the named special tokens (and model-specific `*_token`
/// keys) of `tokenizer_config.json`, else of `special_tokens_map.json`, as text.
fn special_tokens(cfg: &Map<String, Value>, dir: &Path) -> Vec<(String, String)> {
    const NAMED: [&str; 7] = [
        "bos_token",
        "eos_token",
        "unk_token",
        "sep_token",
        "pad_token",
        "cls_token",
        "mask_token",
    ];
    let text_of = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
            _ => None,
        }
    };
    let mut from_map = Map::new();
    if let Ok(text) = std::fs::read_to_string(dir.join("special_tokens_map.json")) {
        if let Ok(Value::Object(o)) = serde_json::from_str(&text) {
            from_map = o;
        }
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for name in NAMED {
        let v = cfg
            .get(name)
            .filter(|v| !v.is_null())
            .or_else(|| from_map.get(name).filter(|v| !v.is_null()));
        if let Some(t) = v.and_then(text_of) {
            out.push((name.to_string(), t));
        }
    }
    for (k, v) in cfg {
        if k.ends_with("_token") && !NAMED.contains(&k.as_str()) {
            if let Some(t) = text_of(v) {
                out.push((k.clone(), t));
            }
        }
    }
    if let Some(Value::Object(extra)) = cfg.get("extra_special_tokens") {
        for (k, v) in extra {
            if let Some(t) = text_of(v) {
                out.retain(|(n, _)| n != k);
                out.push((k.clone(), t));
            }
        }
    }
    out
}

enum TemplateSources {
    None,
    One(PathBuf, String),
    Named(PathBuf, Vec<(String, String)>),
}

/// transformers 5: `chat_template.jinja` (and `additional_chat_templates/*.jinja`) take
/// priority over the entries of `tokenizer_config.json`.
fn template_sources(
    dir: &Path,
    cfg: &Map<String, Value>,
) -> Result<TemplateSources, TokenizerError> {
    let read = |p: &Path| -> Result<String, TokenizerError> {
        std::fs::read_to_string(p).map_err(|e| file_err(p, format!("cannot read: {e}")))
    };
    let jinja = dir.join("chat_template.jinja");
    let extra_dir = dir.join("additional_chat_templates");
    let mut named: Vec<(String, String)> = Vec::new();
    if jinja.is_file() {
        named.push(("default".into(), read(&jinja)?));
    }
    if let Ok(rd) = std::fs::read_dir(&extra_dir) {
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jinja"))
            .collect();
        files.sort();
        for f in files {
            let name = f
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            named.push((name, read(&f)?));
        }
    }
    if named.len() == 1 && named[0].0 == "default" {
        let (_, src) = named.remove(0);
        return Ok(TemplateSources::One(jinja, src));
    }
    if !named.is_empty() {
        return Ok(TemplateSources::Named(dir.to_path_buf(), named));
    }
    let cfg_path = dir.join("tokenizer_config.json");
    match cfg.get("chat_template") {
        Some(Value::String(s)) => Ok(TemplateSources::One(cfg_path, s.clone())),
        Some(Value::Array(list)) => {
            let mut out = Vec::new();
            for (i, item) in list.iter().enumerate() {
                let name = item.get("name").and_then(Value::as_str);
                let tmpl = item.get("template").and_then(Value::as_str);
                match (name, tmpl) {
                    (Some(n), Some(t)) => out.push((n.to_string(), t.to_string())),
                    _ => {
                        return Err(file_err(
                            &cfg_path,
                            format!("field chat_template[{i}]: expected an object with string \"name\" and \"template\""),
                        ))
                    }
                }
            }
            Ok(TemplateSources::Named(cfg_path, out))
        }
        Some(Value::Null) | None => Ok(TemplateSources::None),
        Some(_) => Err(file_err(
            &cfg_path,
            "field chat_template: expected a string or a list of {name, template}",
        )),
    }
}
