//! From a parsed request to everything its response will be: the plan.
//!
//! All per-request decisions are made here, once, before the first byte is written: the prompt
//! rendering and its token count, the cache lookup, when the first token is due, the output
//! length and text, the mode (reasoning, tool call), and the fault. The response body then only
//! walks the plan. Random draws come from one [`Rng`] seeded from (seed, arrival number) — or
//! (seed, prompt hash) with `output.seed_from_prompt` — in a fixed order, so a seed reproduces
//! every response exactly.
//!
//! Output text is exactly 4 bytes per token, so the stand-in tokenizer counts what was emitted:
//! reasoning is [`REASONING_PREAMBLE`] followed by filler words, content is filler words, a tool
//! call is one call to a tool the request offers, with arguments its schema accepts (a shell
//! tool's command `EXE …`; [`crate::tools`]).

use crate::answers::{Answer, Answers};
use crate::cache::BlockChain;
use crate::config::{ms, SimConfig};
use crate::render;
use crate::rng::Rng;
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;
use tokentap_core::text::{filler, REASONING_PREAMBLE};
use tokentap_core::tokenize::{self, BYTES_PER_TOKEN};
use tokentap_core::wire::{ChatRequest, FunctionCall, StreamOptions, ToolCall};

/// Which API a request speaks (the Responses and Messages APIs: served in chat form, the events
/// their own).
pub(crate) use tokentap_core::api::Api;

/// `POST /v1/completions` body: only the fields the sim reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub prompt: Value,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_completion_tokens: Option<u64>,
    /// vLLM's per-request timing, asked for (`--enable-per-request-metrics` servers).
    #[serde(default)]
    pub include_metrics: Option<bool>,
}

/// A request body that parsed.
pub(crate) enum Parsed {
    Chat(Box<ChatRequest>),
    Completion(CompletionRequest),
}

impl Parsed {
    /// The model the request names, if it names one.
    pub(crate) fn model(&self) -> Option<&str> {
        match self {
            Parsed::Chat(r) => r.model.as_deref(),
            Parsed::Completion(r) => r.model.as_deref(),
        }
    }
}

/// A piece of the output, streamed in chunks of at most k tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SegKind {
    Reasoning,
    Content,
    /// The first partial of a tool call (id, type, name); counts as one token, carries no text.
    ToolHeader,
    ToolArgs,
}

/// A tool call of the output: its id and function name (its arguments are a segment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolMeta {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    pub kind: SegKind,
    /// Byte range in [`Output::text`].
    pub start: usize,
    pub end: usize,
    pub tokens: u64,
    /// Index in [`Output::tools`] of a tool segment's call (0 for the others).
    pub tool: usize,
}

/// The generated output.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    /// Reasoning, then content or tool arguments, back to back.
    pub text: String,
    pub segments: Vec<Segment>,
    pub tokens: u64,
    pub reasoning_tokens: u64,
    /// `stop`, `length` or `tool_calls`.
    pub finish: &'static str,
    /// The tool calls, in order (empty: none).
    pub tools: Vec<ToolMeta>,
}

impl Output {
    pub fn segment_text(&self, s: &Segment) -> &str {
        &self.text[s.start..s.end]
    }

    fn of_kind(&self, kind: SegKind) -> &str {
        self.segments
            .iter()
            .find(|s| s.kind == kind)
            .map_or("", |s| self.segment_text(s))
    }

    pub fn reasoning(&self) -> &str {
        self.of_kind(SegKind::Reasoning)
    }

    pub fn content(&self) -> &str {
        self.of_kind(SegKind::Content)
    }

    pub fn tool_calls(&self) -> Option<Vec<ToolCall>> {
        if self.tools.is_empty() {
            return None;
        }
        let calls = self.tools.iter().enumerate().map(|(i, t)| ToolCall {
            index: None,
            id: Some(t.id.clone()),
            kind: Some("function".into()),
            function: FunctionCall {
                name: Some(t.name.clone()),
                arguments: self
                    .segments
                    .iter()
                    .filter(|s| s.kind == SegKind::ToolArgs && s.tool == i)
                    .map(|s| self.segment_text(s))
                    .collect(),
            },
        });
        Some(calls.collect())
    }

    /// The output of a recorded answer: reasoning, content, then each tool call (a header token,
    /// then its arguments), with stand-in token counts (4 bytes a token). Recorded answers are
    /// sent whole: the request's max tokens does not cut them.
    pub(crate) fn recorded(a: &Answer, reasoning_ok: bool) -> Output {
        let mut o = Output {
            text: String::with_capacity(
                a.reasoning.len()
                    + a.content.len()
                    + a.tool_calls.iter().map(|t| t.2.len()).sum::<usize>(),
            ),
            segments: Vec::with_capacity(2 + 2 * a.tool_calls.len()),
            tokens: 0,
            reasoning_tokens: 0,
            finish: if a.tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            },
            tools: Vec::with_capacity(a.tool_calls.len()),
        };
        let push = |o: &mut Output, kind, body: &str, tokens: u64, tool: usize| {
            let start = o.text.len();
            o.text.push_str(body);
            o.segments.push(Segment {
                kind,
                start,
                end: o.text.len(),
                tokens,
                tool,
            });
            o.tokens += tokens;
        };
        if reasoning_ok && !a.reasoning.is_empty() {
            push(
                &mut o,
                SegKind::Reasoning,
                &a.reasoning,
                tokenize::count(&a.reasoning),
                0,
            );
            o.reasoning_tokens = o.tokens;
        }
        if !a.content.is_empty() {
            push(
                &mut o,
                SegKind::Content,
                &a.content,
                tokenize::count(&a.content),
                0,
            );
        }
        for (i, (id, name, args)) in a.tool_calls.iter().enumerate() {
            o.tools.push(ToolMeta {
                id: id.clone(),
                name: name.clone(),
            });
            push(&mut o, SegKind::ToolHeader, "", 1, i);
            if !args.is_empty() {
                push(&mut o, SegKind::ToolArgs, args, tokenize::count(args), i);
            }
        }
        if o.segments.is_empty() {
            // An empty recorded message still streams one (empty) token, as a model's lone stop.
            push(&mut o, SegKind::Content, "", 1, 0);
        }
        o
    }

    /// Number of token-carrying chunks with `k` tokens per chunk.
    pub fn token_chunks(&self, k: u32) -> u64 {
        self.segments
            .iter()
            .map(|s| s.tokens.div_ceil(k.max(1) as u64))
            .sum()
    }
}

/// An injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    ErrorStatus(u16),
    Stall(Duration),
    Disconnect,
    Malformed,
}

impl FaultKind {
    /// The fault's name in the request log (`fault`): what the sim did, not what a client saw.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::ErrorStatus(_) => "error_status",
            FaultKind::Stall(_) => "stall",
            FaultKind::Disconnect => "disconnect",
            FaultKind::Malformed => "malformed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fault {
    pub kind: FaultKind,
    /// Applied just before the token chunk with this index (0-based), always an existing one.
    pub at_chunk: u64,
}

/// Everything about one response.
pub(crate) struct Plan {
    pub api: Api,
    pub stream: bool,
    pub id: String,
    /// Seconds since the epoch, as in the `created` field.
    pub created: u64,
    pub model: String,
    pub include_usage: bool,
    pub continuous_usage: bool,
    /// `include_metrics`: the engine's per-request timing in the usage chunk (or the body), as
    /// vLLM returns it.
    pub include_metrics: bool,
    /// Waiting for a prefill lane (set at admission): the `queue_time_ms` of the metrics.
    pub queue: Duration,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub output: Output,
    pub fault: Option<Fault>,
    pub role_prelude: bool,
    pub prelude_early: bool,
    pub tokens_per_chunk: u32,
    /// The prompt's block chain, for the cache lookup.
    pub prompt_chain: BlockChain,
    /// Keys of the blocks of prompt + rendered output beyond the prompt's full blocks; cached
    /// when the response finishes.
    pub output_keys: Vec<u64>,
    /// Prefill duration for the uncached tokens (timing applied by the server).
    pub prefill: Duration,
    /// The Messages API's `thinking.display: "omitted"`: thinking takes its time and tokens, and
    /// its blocks carry only their signature.
    pub hide_reasoning: bool,
}

/// The key of the chat-form request (the sim's own conversion of a Messages request) that says
/// the thinking is not to be shown.
pub(crate) const HIDE_THINKING: &str = "__tokentap_hide_thinking";

/// Smallest tool call: one header token plus `{"command":"` … `"}` with a short command.
const MIN_TOOL_TOKENS: u64 = 8;
const EXECUTABLES: &[&str] = &[
    "ls", "cat", "grep", "sed", "python", "git", "pytest", "find", "head",
];

/// Builds the plan, except the cache lookup (which needs the engine lock; see the server).
pub(crate) fn build(
    cfg: &SimConfig,
    seq: u64,
    created: u64,
    parsed: &Parsed,
    answers: Option<&Answers>,
) -> Result<Plan, String> {
    let (api, prompt, model, stream, opts, req_max) = match parsed {
        Parsed::Chat(r) => {
            if r.messages.is_empty() {
                return Err("'messages' must contain at least one message".into());
            }
            (
                Api::Chat,
                render::chat_prompt(r),
                r.model.clone(),
                r.stream.unwrap_or(false),
                r.stream_options.clone(),
                r.max_output_tokens(),
            )
        }
        Parsed::Completion(r) => (
            Api::Completions,
            render::completion_prompt(&r.prompt)
                .ok_or("'prompt' must be a string or an array of strings")?,
            r.model.clone(),
            r.stream.unwrap_or(false),
            r.stream_options.clone(),
            r.max_tokens.or(r.max_completion_tokens),
        ),
    };
    let prompt_tokens = tokenize::count(&prompt);
    let key = if cfg.output.seed_from_prompt {
        // The pinned hash (core::route), not std's DefaultHasher, whose output may change
        // between Rust releases: the same prompt draws the same output on every build.
        tokentap_core::route::hash64(prompt.as_bytes())
    } else {
        seq
    };
    let mut rng = Rng::for_request(cfg.seed, key);
    let (reasoning_ok, tool_choice, offered) = modes_of(cfg, parsed);
    let recorded = match (parsed, answers) {
        (Parsed::Chat(r), Some(a)) => a.find(r),
        _ => None,
    };
    let output = match &recorded {
        Some(a) => Output::recorded(a, reasoning_ok),
        None => generate(
            &mut rng,
            cfg,
            req_max,
            reasoning_ok,
            (&tool_choice, &offered),
        ),
    };
    let k = cfg.modes.tokens_per_chunk.max(1);
    let fault = draw_fault(&mut rng, cfg, output.token_chunks(k));

    let prompt_chain = BlockChain::of(cfg.cache.block_tokens, prompt.as_bytes());
    let output_keys = output_keys(cfg, &prompt, &prompt_chain, &output);
    let opts = opts.unwrap_or_default();
    Ok(Plan {
        api,
        stream,
        id: match api {
            Api::Completions => format!("cmpl-sim{seq:08}"),
            _ => format!("chatcmpl-sim{seq:08}"),
        },
        created,
        model: model.unwrap_or_else(|| cfg.model.clone()),
        include_usage: opts.include_usage.unwrap_or(false),
        continuous_usage: opts.continuous_usage_stats.unwrap_or(false),
        include_metrics: asks_metrics(parsed),
        queue: Duration::ZERO,
        prompt_tokens,
        cached_tokens: 0,
        output,
        fault,
        role_prelude: cfg.modes.role_prelude && api == Api::Chat,
        prelude_early: cfg.modes.prelude_early,
        tokens_per_chunk: k,
        prompt_chain,
        output_keys,
        prefill: Duration::ZERO,
        hide_reasoning: match parsed {
            Parsed::Chat(r) => r.extra.get(HIDE_THINKING).and_then(Value::as_bool) == Some(true),
            Parsed::Completion(_) => false,
        },
    })
}

/// What the request allows: reasoning, the tool choice (the agent's loop of
/// `tool_call_per_prompt` decided here), and the tools it offers.
fn modes_of<'a>(
    cfg: &SimConfig,
    parsed: &'a Parsed,
) -> (bool, ToolChoice, Vec<crate::tools::Offered<'a>>) {
    match parsed {
        Parsed::Chat(r) => (
            thinking_enabled(r),
            match tool_choice(r) {
                ToolChoice::Auto if cfg.modes.tool_call_per_prompt => {
                    if answers_a_tool(r) {
                        ToolChoice::Never
                    } else {
                        ToolChoice::Always
                    }
                }
                c => c,
            },
            crate::tools::offered(r.tools.as_deref().unwrap_or_default()),
        ),
        Parsed::Completion(_) => (false, ToolChoice::Never, Vec::new()),
    }
}

/// The cache keys the output adds: the chain continued from the last full prompt block over
/// the prompt's tail and the output as the next request will render it (none with the cache
/// off).
fn output_keys(
    cfg: &SimConfig,
    prompt: &str,
    prompt_chain: &BlockChain,
    output: &Output,
) -> Vec<u64> {
    if !cfg.cache.enabled {
        return Vec::new();
    }
    let bt = cfg.cache.block_tokens;
    let full = prompt_chain.keys.len() * bt as usize * BYTES_PER_TOKEN;
    let tools = output.tool_calls();
    let rendered = render::assistant_output(output.reasoning(), output.content(), tools.as_deref());
    let mut tail = Vec::with_capacity(prompt.len() - full + rendered.len());
    tail.extend_from_slice(&prompt.as_bytes()[full..]);
    tail.extend_from_slice(rendered.as_bytes());
    let mut chain = prompt_chain.clone();
    chain.extend(bt, &tail);
    chain.keys.split_off(prompt_chain.keys.len())
}

/// The request asks for the engine's per-request timing (`include_metrics: true`).
fn asks_metrics(parsed: &Parsed) -> bool {
    match parsed {
        Parsed::Chat(r) => r.extra.get("include_metrics").and_then(Value::as_bool),
        Parsed::Completion(r) => r.include_metrics,
    }
    .unwrap_or(false)
}

impl Plan {
    /// The plan of a chat-form request is served as the Responses or Messages API: its id,
    /// its opening event (in place of the role prelude), usage always at the end.
    pub fn serve_as(&mut self, api: Api, seq: u64) {
        self.api = api;
        match api {
            Api::Responses => self.id = format!("resp_sim{seq:08}"),
            Api::Messages => self.id = format!("msg_sim{seq:08}"),
            _ => return,
        }
        self.role_prelude = true;
        self.include_usage = true;
        self.continuous_usage = false;
    }

    /// Sets the cache result and the prefill time it implies.
    pub fn set_cached(&mut self, cfg: &SimConfig, cached: u64) {
        self.cached_tokens = cached;
        self.prefill = cfg.timing.prefill(self.prompt_tokens - cached);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ToolChoice {
    Never,
    Auto,
    Always,
    /// This function (`{"type":"function","function":{"name":…}}`, or the Responses API's
    /// `{"type":"function","name":…}`).
    Named(String),
}

fn tool_choice(r: &ChatRequest) -> ToolChoice {
    match r.extra.get("tool_choice") {
        Some(Value::String(s)) if s == "none" => ToolChoice::Never,
        Some(Value::String(s)) if s == "required" => ToolChoice::Always,
        Some(Value::Object(o)) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| o.get("name"))
                .and_then(Value::as_str);
            match name {
                Some(n) => ToolChoice::Named(n.to_string()),
                None => ToolChoice::Always,
            }
        }
        _ => ToolChoice::Auto,
    }
}

/// The request carries a tool result since the last assistant message: the agent ran a call.
fn answers_a_tool(r: &ChatRequest) -> bool {
    r.messages
        .iter()
        .rev()
        .take_while(|m| m.role != "assistant")
        .any(|m| m.role == "tool")
}

/// Qwen's `chat_template_kwargs.enable_thinking: false` (or `thinking: false`) turns reasoning off.
fn thinking_enabled(r: &ChatRequest) -> bool {
    let Some(kw) = r.extra.get("chat_template_kwargs") else {
        return true;
    };
    !["enable_thinking", "thinking"]
        .iter()
        .any(|k| kw.get(k).and_then(Value::as_bool) == Some(false))
}

/// Generates an output of a drawn length: reasoning (when on), then content, or a call to one of
/// the `offered` tools when `choice` and the draw ask for one ([`crate::tools`]).
fn generate(
    rng: &mut Rng,
    cfg: &SimConfig,
    req_max: Option<u64>,
    reasoning_ok: bool,
    (choice, offered): (&ToolChoice, &[crate::tools::Offered<'_>]),
) -> Output {
    let cap = req_max.unwrap_or(cfg.output.max_tokens).max(1);
    // Always drawn, so the draws after it do not depend on `always_max`.
    let drawn = rng
        .lognormal_mean(cfg.output.mean_tokens, cfg.output.sigma)
        .round()
        .max(1.0);
    let tool_draw = rng.unit();
    let n = if cfg.output.always_max {
        cap
    } else {
        (drawn as u64).min(cap)
    };
    // A call the request requires gets the room a call needs, where the cap allows it.
    let required = matches!(choice, ToolChoice::Always | ToolChoice::Named(_));
    let n = if required && !offered.is_empty() {
        n.max(MIN_TOOL_TOKENS.min(cap))
    } else {
        n
    };
    let hit_cap = cfg.output.always_max || drawn >= cap as f64;

    let mut reasoning = if reasoning_ok {
        (n as f64 * cfg.modes.reasoning_fraction).floor() as u64
    } else {
        0
    };
    let pick = pick_tool(rng, cfg, (choice, offered), n, tool_draw);
    let tool = pick.is_some();
    if tool {
        reasoning = reasoning.min(n - MIN_TOOL_TOKENS);
    }
    let rest = n - reasoning;
    // Tokens beyond the drawn length when a tool's shortest arguments need more.
    let mut extra = 0;

    let mut text = String::with_capacity(n as usize * BYTES_PER_TOKEN);
    let mut segments = Vec::with_capacity(3);
    let mut push = |text: &mut String, kind, body: &str, tokens: u64| {
        let start = text.len();
        text.push_str(body);
        segments.push(Segment {
            kind,
            start,
            end: text.len(),
            tokens,
            tool: 0,
        });
    };
    if reasoning > 0 {
        let len = reasoning as usize * BYTES_PER_TOKEN;
        let mut r = String::with_capacity(len + REASONING_PREAMBLE.len() + 16);
        r.push_str(REASONING_PREAMBLE);
        r.push(' ');
        r.push_str(&filler(rng.next_u64(), len.saturating_sub(r.len())));
        // Invariant: preamble and filler are ASCII, so any byte index is a char boundary.
        r.truncate(len);
        push(&mut text, SegKind::Reasoning, &r, reasoning);
    }
    let mut tools = Vec::new();
    if let Some(t) = pick {
        let (args, args_tokens, meta) = tool_call(rng, t, rest - 1);
        extra = args_tokens - (rest - 1);
        push(&mut text, SegKind::ToolHeader, "", 1);
        push(&mut text, SegKind::ToolArgs, &args, args_tokens);
        tools.push(meta);
    } else if rest > 0 {
        let len = rest as usize * BYTES_PER_TOKEN;
        let mut c = filler(rng.next_u64(), len);
        c.truncate(len); // ASCII (invariant above)
        push(&mut text, SegKind::Content, &c, rest);
    }
    Output {
        text,
        segments,
        tokens: n + extra,
        reasoning_tokens: reasoning,
        finish: if hit_cap {
            "length"
        } else if tool {
            "tool_calls"
        } else {
            "stop"
        },
        tools,
    }
}

/// The offered tool an output of `n` tokens calls, if it calls one: as `choice` says (`Auto`:
/// when `draw` falls under the tool-call rate), only a tool the request offers (the named one,
/// if it names one), and only with room for a call.
fn pick_tool<'a>(
    rng: &mut Rng,
    cfg: &SimConfig,
    (choice, offered): (&ToolChoice, &[crate::tools::Offered<'a>]),
    n: u64,
    draw: f64,
) -> Option<crate::tools::Offered<'a>> {
    let want = match choice {
        ToolChoice::Never => false,
        ToolChoice::Always | ToolChoice::Named(_) => true,
        ToolChoice::Auto => draw < cfg.modes.tool_call_rate,
    };
    let named = match choice {
        ToolChoice::Named(n) => Some(n.as_str()),
        _ => None,
    };
    if want && n >= MIN_TOOL_TOKENS && !offered.is_empty() {
        crate::tools::choose(offered, named, rng.unit())
    } else {
        None
    }
}

/// A call to `tool` with arguments of about `tokens` tokens (more when its schema's shortest
/// arguments need more): the arguments, their tokens, the call's id and name.
fn tool_call(
    rng: &mut Rng,
    tool: crate::tools::Offered<'_>,
    tokens: u64,
) -> (String, u64, ToolMeta) {
    let len = tokens as usize * BYTES_PER_TOKEN;
    let exe = EXECUTABLES[rng.below(EXECUTABLES.len() as u64) as usize];
    let seed = rng.next_u64();
    let args = crate::tools::arguments(tool, exe, len, &mut |n| filler(seed, n));
    let args_tokens = (args.len().div_ceil(BYTES_PER_TOKEN) as u64).max(tokens);
    let meta = ToolMeta {
        id: format!("call_{:016x}", rng.next_u64()),
        name: tool.name.to_string(),
    };
    (args, args_tokens, meta)
}

fn draw_fault(rng: &mut Rng, cfg: &SimConfig, token_chunks: u64) -> Option<Fault> {
    let f = &cfg.faults;
    let u = rng.unit();
    // Mid-stream faults land after at least one token chunk when there are two or more, and
    // always before the last one (so a stall or a malformed event is followed by a token).
    let at_chunk = if token_chunks >= 2 {
        1 + rng.below(token_chunks - 1)
    } else {
        0
    };
    let status = f.error_statuses[..]
        .get(rng.below(f.error_statuses.len() as u64) as usize)
        .copied()
        .unwrap_or(500);
    let bands = [
        (f.error_rate, FaultKind::ErrorStatus(status)),
        (f.stall_rate, FaultKind::Stall(ms(f.stall_ms as f64))),
        (f.disconnect_rate, FaultKind::Disconnect),
        (f.malformed_rate, FaultKind::Malformed),
    ];
    let mut edge = 0.0;
    for (rate, kind) in bands {
        edge += rate;
        if u < edge {
            return Some(Fault { kind, at_chunk });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(json: &str) -> Parsed {
        Parsed::Chat(Box::new(serde_json::from_str(json).unwrap()))
    }

    #[test]
    fn text_is_four_bytes_per_token_in_every_mode() {
        let mut cfg = SimConfig::zero_delay();
        cfg.modes.reasoning_fraction = 0.3;
        for (rate, seq) in [(0.0, 1), (1.0, 2)] {
            cfg.modes.tool_call_rate = rate;
            let p = build(
                &cfg,
                seq,
                0,
                &chat(
                    r#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"Bash","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}}]}"#,
                ),
                None,
            )
            .unwrap();
            let o = &p.output;
            let mut total = 0;
            for s in &o.segments {
                let t = o.segment_text(s);
                if s.kind == SegKind::ToolHeader {
                    assert_eq!((t.len(), s.tokens), (0, 1));
                } else {
                    assert_eq!(t.len() as u64, s.tokens * 4, "{s:?}");
                }
                total += s.tokens;
            }
            assert_eq!(total, o.tokens);
            assert!(o
                .reasoning()
                .starts_with(&REASONING_PREAMBLE[..o.reasoning().len().min(40)]));
            if rate == 1.0 {
                let calls = o.tool_calls().unwrap();
                let args: Value = serde_json::from_str(&calls[0].function.arguments).unwrap();
                assert!(args["command"].is_string());
                assert_eq!(o.finish, "tool_calls");
            }
        }
    }

    #[test]
    fn seeding_from_the_prompt_ignores_arrival_order_and_is_pinned() {
        let mut cfg = SimConfig::zero_delay();
        cfg.output.seed_from_prompt = true;
        cfg.output.sigma = 0.5;
        let req = chat(r#"{"messages":[{"role":"user","content":"the same prompt"}]}"#);
        let a = build(&cfg, 1, 0, &req, None).unwrap();
        let b = build(&cfg, 7, 0, &req, None).unwrap();
        assert_eq!(a.output.tokens, b.output.tokens);
        assert_eq!(a.output.text, b.output.text);
        // The key is the pinned FNV-1a + splitmix64 hash of the rendered prompt (core::route),
        // so the draw does not depend on std's DefaultHasher.
        let other = chat(r#"{"messages":[{"role":"user","content":"another prompt"}]}"#);
        let c = build(&cfg, 1, 0, &other, None).unwrap();
        assert_ne!(a.output.text, c.output.text);
    }

    #[test]
    fn max_tokens_caps_and_reports_length() {
        let cfg = SimConfig::zero_delay();
        let p = build(
            &cfg,
            0,
            0,
            &chat(r#"{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":3}"#),
            None,
        )
        .unwrap();
        assert_eq!((p.output.tokens, p.output.finish), (3, "length"));
        let mut cfg = SimConfig::zero_delay();
        cfg.output.always_max = true;
        let p = build(
            &cfg,
            0,
            0,
            &chat(r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":700}"#),
            None,
        )
        .unwrap();
        assert_eq!((p.output.tokens, p.output.finish), (700, "length"));
    }

    #[test]
    fn faults_follow_rates() {
        let mut cfg = SimConfig::zero_delay();
        cfg.faults.disconnect_rate = 0.5;
        let req = chat(r#"{"messages":[{"role":"user","content":"x"}]}"#);
        let n = (0..400)
            .filter(|&s| build(&cfg, s, 0, &req, None).unwrap().fault.is_some())
            .count();
        assert!((150..250).contains(&n), "{n}");
        for s in 0..50 {
            let p = build(&cfg, s, 0, &req, None).unwrap();
            if let Some(f) = p.fault {
                assert!(f.at_chunk >= 1 && f.at_chunk < p.output.token_chunks(1));
            }
        }
    }

    #[test]
    fn thinking_off_and_tool_choice_none() {
        let mut cfg = SimConfig::zero_delay();
        cfg.modes.reasoning_fraction = 0.5;
        cfg.modes.tool_call_rate = 1.0;
        let p = build(
            &cfg,
            0,
            0,
            &chat(
                r#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"Bash"}}],"tool_choice":"none","chat_template_kwargs":{"enable_thinking":false}}"#,
            ),
            None,
        )
        .unwrap();
        assert_eq!(p.output.reasoning_tokens, 0);
        assert!(p.output.tools.is_empty());
        assert_eq!(p.output.content().len() as u64, p.output.tokens * 4);
    }

    /// The tool a call goes to, for a request: (name, arguments) or None.
    fn call_of(cfg: &SimConfig, req: &str) -> Option<(String, Value)> {
        let p = build(cfg, 3, 0, &chat(req), None).unwrap();
        let calls = p.output.tool_calls()?;
        let c = &calls[0];
        Some((
            c.function.name.clone().unwrap(),
            serde_json::from_str(&c.function.arguments).unwrap(),
        ))
    }

    #[test]
    fn calls_go_only_to_offered_tools() {
        let mut cfg = SimConfig::zero_delay();
        cfg.modes.tool_call_rate = 1.0;
        // No tools offered: never a call, whatever the rate.
        assert_eq!(
            call_of(&cfg, r#"{"messages":[{"role":"user","content":"x"}]}"#),
            None
        );
        let tools = r#""tools":[{"type":"function","function":{"name":"Read","parameters":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}},{"type":"function","function":{"name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"},"login":{"type":"boolean"}},"required":["cmd"]}}}]"#;
        // The shell tool, its command in `cmd`.
        let (name, args) = call_of(
            &cfg,
            &format!(r#"{{"messages":[{{"role":"user","content":"x"}}],{tools}}}"#),
        )
        .unwrap();
        assert_eq!(name, "exec_command");
        assert!(
            args["cmd"].is_string() && args.get("login").is_none(),
            "{args}"
        );
        // The named one, with its required property.
        let (name, args) = call_of(
            &cfg,
            &format!(r#"{{"messages":[{{"role":"user","content":"x"}}],{tools},"tool_choice":{{"type":"function","function":{{"name":"Read"}}}}}}"#),
        )
        .unwrap();
        assert_eq!(name, "Read");
        assert!(args["file_path"].is_string(), "{args}");
        // An agent's loop: a call on a new prompt, an answer after the tool's result.
        cfg.modes.tool_call_rate = 0.0;
        cfg.modes.tool_call_per_prompt = true;
        let prompt = format!(r#"{{"messages":[{{"role":"user","content":"x"}}],{tools}}}"#);
        assert!(call_of(&cfg, &prompt).is_some());
        let answered = format!(
            r#"{{"messages":[{{"role":"user","content":"x"}},{{"role":"assistant","tool_calls":[{{"id":"c","type":"function","function":{{"name":"exec_command","arguments":"{{}}"}}}}]}},{{"role":"tool","tool_call_id":"c","content":"ok"}},{{"role":"user","content":"reminder"}}],{tools}}}"#
        );
        assert_eq!(call_of(&cfg, &answered), None);
    }
}
