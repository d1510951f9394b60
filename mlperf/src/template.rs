//! Hugging Face chat templates, rendered the way transformers renders them.
//!
//! transformers compiles `chat_template` in a Jinja2 `ImmutableSandboxedEnvironment` with
//! `trim_blocks`, `lstrip_blocks` and loop controls, replaces the `tojson` filter with Python's
//! `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`, adds the
//! globals `raise_exception` and `strftime_now` and a `{% generation %}` block tag, and renders
//! with `messages`, `tools`, `documents`, `add_generation_prompt`, the tokenizer's named special
//! tokens (`bos_token`, `eos_token`, … and model-specific `*_token`s) and the request's
//! `chat_template_kwargs` (transformers 5.5, `utils/chat_template_utils.py`).
//!
//! Here the engine is minijinja with the same settings, Python's `str` methods
//! (`minijinja_contrib::pycompat`) and ordered maps, plus Python-exact versions of the filters
//! whose output feeds the token count: `tojson` ([`crate::pyjson`]), `string` and `trim`. The
//! `generation` tag only marks spans for assistant masks and renders its body unchanged; it is
//! rewritten to an always-true `if` block with the same whitespace control before compiling.
//!
//! Coverage is proven by `tests/templates.rs` against renderings made by transformers itself
//! (fixtures from `scripts/reference-fixtures.py`): the Qwen3, Qwen3.5 (and a Qwen3.6-style
//! `preserve_thinking` variant), Qwen3-Coder, Kimi K2, K2-Thinking and K3 templates and the
//! golden tokenizer's own.

use crate::pyjson::{self, Dumps};
use minijinja::value::{Enumerator, Kwargs, Object, ObjectRepr, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior};
use serde_json::Value as Json;

/// One compiled chat template with the tokenizer's special tokens.
pub struct ChatTemplate {
    env: Environment<'static>,
    special_tokens: Vec<(String, String)>,
    /// Whether it renders message by message ([`crate::layout`]).
    message_local: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("special_tokens", &self.special_tokens)
            .finish_non_exhaustive()
    }
}

/// What one rendering receives.
#[derive(Debug, Clone, Default)]
pub struct RenderInput<'a> {
    /// The messages.
    pub messages: &'a [Json],
    /// Passed as `tools` (`None` is passed as Python `None`, as transformers does).
    pub tools: Option<&'a [Json]>,
    /// `add_generation_prompt`.
    pub add_generation_prompt: bool,
    /// The request's `chat_template_kwargs` (and `tool_choice` when the request had one).
    pub kwargs: Option<&'a serde_json::Map<String, Json>>,
    /// The request's `tool_choice`.
    pub tool_choice: Option<&'a Json>,
    /// The messages already in the template's values (then `messages` is not read): a
    /// conversation's unchanged messages are converted once, not at every prompt.
    pub messages_value: Option<Value>,
    /// The tools already in the template's values ([`tools_value`]; then `tools` is not read).
    pub tools_value: Option<Value>,
}

const NAME: &str = "chat_template";

impl ChatTemplate {
    /// Compiles `source`. `special_tokens`: `(name, text)` pairs passed to every rendering.
    pub fn new(source: &str, special_tokens: Vec<(String, String)>) -> Result<ChatTemplate, Error> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_undefined_behavior(UndefinedBehavior::Lenient);
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_filter("string", py_string);
        env.add_filter("trim", py_trim);
        env.add_test("iterable", py_iterable);
        env.add_test("sequence", py_sequence);
        env.add_test("number", py_number);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        let source = without_generation_tags(source);
        let message_local = crate::layout::message_local(&source);
        env.add_template_owned(NAME.to_string(), source)?;
        Ok(ChatTemplate {
            env,
            special_tokens,
            message_local,
        })
    }

    /// Whether the template renders a conversation message by message: its output is a text
    /// before the messages, one text per message that depends on that message alone, and a
    /// text after them (decided from the template's syntax, conservatively: the crate's
    /// `layout` module says how).
    /// Then a conversation extended by new messages renders as its last rendering without the
    /// text after, followed by the rendering of the new messages alone without the text before
    /// ([`ChatTemplate::frame`] gives both lengths).
    pub fn is_message_local(&self) -> bool {
        self.message_local
    }

    /// For a message-local template, the lengths of the text before the messages and of the
    /// text after them for `input`'s tools and arguments (its messages are not read): read from
    /// one rendering without messages, at the moment the template first reaches for them.
    /// `None` for a template that is not message-local.
    pub fn frame(&self, input: &RenderInput<'_>) -> Result<Option<(usize, usize)>, Error> {
        if !self.message_local {
            return Ok(None);
        }
        let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let messages = Value::from_object(Marker {
            written: written.clone(),
            at: std::sync::OnceLock::new(),
        });
        let input = RenderInput {
            messages_value: Some(messages.clone()),
            ..input.clone()
        };
        let tmpl = self.env.get_template(NAME)?;
        tmpl.render_captured_to(self.context(&input), Counting(written.clone()))?;
        let total = written.load(std::sync::atomic::Ordering::Relaxed);
        let at = messages
            .downcast_object_ref::<Marker>()
            .and_then(|m| m.at.get().copied());
        Ok(at.map(|before| (before, total - before)))
    }

    /// Renders one conversation.
    pub fn render(&self, input: &RenderInput<'_>) -> Result<String, Error> {
        self.env.get_template(NAME)?.render(self.context(input))
    }

    /// The values one rendering receives.
    fn context(&self, input: &RenderInput<'_>) -> Value {
        let mut ctx: Vec<(String, Value)> = Vec::with_capacity(8 + self.special_tokens.len());
        for (k, v) in &self.special_tokens {
            ctx.push((k.clone(), Value::from(v.as_str())));
        }
        if let Some(kw) = input.kwargs {
            for (k, v) in kw {
                ctx.retain(|(name, _)| name != k);
                ctx.push((k.clone(), Value::from_serialize(v)));
            }
        }
        if let Some(tc) = input.tool_choice {
            ctx.retain(|(name, _)| name != "tool_choice");
            ctx.push(("tool_choice".into(), Value::from_serialize(tc)));
        }
        ctx.push((
            "messages".into(),
            match &input.messages_value {
                Some(v) => v.clone(),
                None => Value::from_serialize(input.messages),
            },
        ));
        ctx.push((
            "tools".into(),
            match (&input.tools_value, input.tools) {
                (Some(v), _) => v.clone(),
                (None, Some(t)) => Value::from_serialize(t),
                (None, None) => Value::from(()),
            },
        ));
        ctx.push(("documents".into(), Value::from(())));
        ctx.push((
            "add_generation_prompt".into(),
            Value::from(input.add_generation_prompt),
        ));
        Value::from_iter(ctx)
    }
}

/// The messages of [`ChatTemplate::frame`]'s rendering: none, and the output's length when the
/// template first reaches for them.
#[derive(Debug)]
struct Marker {
    written: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    at: std::sync::OnceLock<usize>,
}

impl Marker {
    fn mark(&self) {
        self.at
            .get_or_init(|| self.written.load(std::sync::atomic::Ordering::Relaxed));
    }
}

impl Object for Marker {
    fn repr(self: &std::sync::Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &std::sync::Arc<Self>, _key: &Value) -> Option<Value> {
        self.mark();
        None
    }

    fn enumerate(self: &std::sync::Arc<Self>) -> Enumerator {
        self.mark();
        Enumerator::Seq(0)
    }
}

/// A writer that keeps only the count of what it was given.
struct Counting(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .fetch_add(buf.len(), std::sync::atomic::Ordering::Relaxed);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `{% generation %}…{% endgeneration %}` → `{% if true %}…{% endif %}`, keeping `-` markers.
fn without_generation_tags(source: &str) -> String {
    let re = regex::Regex::new(r"\{%(-?)\s*(end)?generation\s*(-?)%\}").expect("static regex");
    re.replace_all(source, |c: &regex::Captures<'_>| {
        let (l, r) = (&c[1], &c[3]);
        if c.get(2).is_some() {
            format!("{{%{l} endif {r}%}}")
        } else {
            format!("{{%{l} if true {r}%}}")
        }
    })
    .into_owned()
}

fn to_json(v: &Value) -> Result<Json, Error> {
    if v.is_undefined() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "Object of type Undefined is not JSON serializable",
        ));
    }
    serde_json::to_value(v).map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))
}

/// transformers' `tojson`: `json.dumps(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`.
fn tojson(v: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let mut opts = Dumps::default();
    if let Some(a) = kwargs.get::<Option<bool>>("ensure_ascii")? {
        opts.ensure_ascii = a;
    }
    if let Some(i) = kwargs.get::<Option<Value>>("indent")? {
        opts.indent = if let Some(n) = i.as_i64() {
            Some(" ".repeat(n.max(0) as usize))
        } else if i.is_none() {
            None
        } else {
            Some(i.to_string())
        };
    }
    if let Some(s) = kwargs.get::<Option<Vec<String>>>("separators")? {
        if s.len() == 2 {
            opts.separators = Some((s[0].clone(), s[1].clone()));
        }
    }
    if let Some(s) = kwargs.get::<Option<bool>>("sort_keys")? {
        opts.sort_keys = s;
    }
    kwargs.assert_all_used()?;
    if let Some(d) = v.downcast_object_ref::<Dumped>() {
        if opts == Dumps::default() {
            return Ok(Value::from_safe_string(d.json.clone()));
        }
    }
    let json = to_json(&v)?;
    Ok(Value::from_safe_string(pyjson::dumps(&json, &opts)))
}

/// A map given to the template with its `tojson` text (transformers' default options) made
/// when it was converted: a conversation's tools and tool-call arguments are converted once and
/// dumped once, not at every turn's rendering. Everything else sees the map itself: indexing,
/// iteration, length, truth and rendering are the map's.
#[derive(Debug)]
struct Dumped {
    map: Value,
    json: String,
}

impl Object for Dumped {
    fn repr(self: &std::sync::Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &std::sync::Arc<Self>, key: &Value) -> Option<Value> {
        self.map.as_object()?.get_value(key)
    }

    fn enumerate(self: &std::sync::Arc<Self>) -> Enumerator {
        self.map
            .as_object()
            .map_or(Enumerator::Empty, |o| o.enumerate())
    }

    fn enumerator_len(self: &std::sync::Arc<Self>) -> Option<usize> {
        self.map.as_object()?.enumerator_len()
    }
}

/// `json` as the template's value, with its default `tojson` text made now when it is an
/// object (see [`Dumped`]).
fn dumped(json: &Json) -> Value {
    let map = Value::from_serialize(json);
    match (json, to_json(&map)) {
        (Json::Object(_), Ok(j)) => Value::from_object(Dumped {
            json: pyjson::dumps(&j, &Dumps::default()),
            map,
        }),
        _ => map,
    }
}

/// A request's tools as the template's value, each with its `tojson` text made once.
pub fn tools_value(tools: &[Json]) -> Value {
    Value::from(tools.iter().map(dumped).collect::<Vec<_>>())
}

/// A message, tool call or function as the template's value: its fields in order, looked up by
/// a scan of their names (a message has a handful; the map `Value::from_serialize` makes hashes
/// every lookup). Everything else — iteration, length, truth, rendering, `tojson` — is the map's.
#[derive(Debug)]
struct Fields(Vec<(Value, Value)>);

impl Object for Fields {
    fn repr(self: &std::sync::Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &std::sync::Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        self.0
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v.clone())
    }

    fn enumerate(self: &std::sync::Arc<Self>) -> Enumerator {
        Enumerator::Values(self.0.iter().map(|(k, _)| k.clone()).collect())
    }

    fn enumerator_len(self: &std::sync::Arc<Self>) -> Option<usize> {
        Some(self.0.len())
    }
}

/// `o` as [`Fields`], each field's value made by `value(name, json)`.
fn fields(o: &serde_json::Map<String, Json>, value: impl Fn(&str, &Json) -> Value) -> Value {
    Value::from_object(Fields(
        o.iter()
            .map(|(k, v)| (Value::from(k.as_str()), value(k, v)))
            .collect(),
    ))
}

/// One message as the template's value (as `Value::from_serialize` converts it, its fields
/// looked up without hashing), each tool call's arguments given as an object with their `tojson`
/// text made once.
pub fn message_value(m: &Json) -> Value {
    let Json::Object(o) = m else {
        return Value::from_serialize(m);
    };
    let function = |k: &str, v: &Json| match v {
        Json::Object(f) if k == "function" => fields(f, |k, v| {
            if k == "arguments" {
                dumped(v)
            } else {
                Value::from_serialize(v)
            }
        }),
        _ => Value::from_serialize(v),
    };
    fields(o, |k, v| match v {
        Json::Array(calls) if k == "tool_calls" => Value::from(
            calls
                .iter()
                .map(|c| match c {
                    Json::Object(c) => fields(c, function),
                    _ => Value::from_serialize(c),
                })
                .collect::<Vec<_>>(),
        ),
        _ => Value::from_serialize(v),
    })
}

/// Jinja2's `string` filter: Python's `str()`.
fn py_string(v: Value) -> Result<Value, Error> {
    if let Some(s) = v.as_str() {
        return Ok(Value::from(s));
    }
    if v.is_undefined() {
        return Ok(Value::from(""));
    }
    Ok(Value::from(pyjson::py_str(&to_json(&v)?)))
}

/// Python's `str.isspace` set (Rust's `char::is_whitespace` lacks U+001C..U+001F).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Jinja2's `trim(value, chars=None)`: `str(value).strip(chars)`.
fn py_trim(v: Value, chars: Option<String>) -> Result<Value, Error> {
    let s = match v.as_str() {
        Some(s) => s.to_string(),
        None => py_string(v)?.as_str().unwrap_or_default().to_string(),
    };
    let out = match chars {
        Some(cs) => s.trim_matches(|c| cs.contains(c)).to_string(),
        None => s.trim_matches(py_space).to_string(),
    };
    Ok(Value::from(out))
}

/// Jinja2's `iterable` test: `iter(value)` works — not for `None`, numbers or booleans; for
/// undefined, yes (it iterates as empty).
fn py_iterable(v: Value) -> bool {
    match v.kind() {
        ValueKind::Undefined => true,
        ValueKind::None | ValueKind::Bool | ValueKind::Number => false,
        _ => v.try_iter().is_ok(),
    }
}

/// Jinja2's `sequence` test: has a length and items — strings, lists and dicts.
fn py_sequence(v: Value) -> bool {
    matches!(
        v.kind(),
        ValueKind::String | ValueKind::Seq | ValueKind::Map | ValueKind::Undefined
    )
}

/// Jinja2's `number` test: `isinstance(value, numbers.Number)`, booleans included.
fn py_number(v: Value) -> bool {
    matches!(v.kind(), ValueKind::Number | ValueKind::Bool)
}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

/// `datetime.now().strftime(format)` for the codes chat templates use (`%d %b %Y`, `%Y-%m-%d`,
/// `%B`, `%A`, `%H:%M:%S`), in UTC.
fn strftime_now(format: String) -> Result<Value, Error> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Ok(Value::from(strftime(&format, secs)))
}

fn strftime(format: &str, secs: i64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let mut out = String::new();
    let mut it = format.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('b') => out.push_str(&MONTHS[(m - 1) as usize][..3]),
            Some('B') => out.push_str(MONTHS[(m - 1) as usize]),
            Some('a') => out.push_str(&DAYS[weekday][..3]),
            Some('A') => out.push_str(DAYS[weekday]),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(src: &str, messages: Json) -> String {
        let t = ChatTemplate::new(src, vec![("eos_token".into(), "</s>".into())]).unwrap();
        let m = messages.as_array().unwrap().clone();
        t.render(&RenderInput {
            messages: &m,
            ..RenderInput::default()
        })
        .unwrap()
    }

    /// Messages as fields, and tools and tool-call arguments converted once with their `tojson`
    /// text, render as the plain maps do, through every way a template reads a map.
    #[test]
    fn maps_dumped_once_render_as_the_maps() {
        let src = "{% for t in tools %}{{ t | tojson }}|{{ t | tojson(indent=2) }}|{{ t }}|\
            {{ t.function.name }}|{{ t['type'] }}|{{ t | length }}|{{ t is mapping }}|\
            {% for k in t %}{{ k }},{% endfor %}|{% for k, v in t.items() %}{{ k }}={{ v }};{% endfor %}|\
            {{ t.keys() | list }}|{{ t.get('nope', 'd') }}|{{ 'type' in t }}|{{ t | dictsort }}|\
            {{ [t] | tojson }}{% if t %}!{% endif %}\n{% endfor %}\
            {% for m in messages %}{{ m.role }}|{{ m['content'] }}|{{ m.get('x', 'd') }}|{{ m | length }}|\
            {{ 'role' in m }}|{{ m | dictsort }}|{% for k, v in m.items() %}{{ k }};{% endfor %}|{{ m }}|\
            {{ m.keys() | list }}|{{ m is mapping }}|{% if m.tool_calls %}{{ m.tool_calls | length }}{% endif %}\n\
            {% for c in m.tool_calls %}{{ c.id }}|{{ c | tojson }}|{{ c.function | tojson }}\n{% endfor %}\
            {% for c in m.tool_calls %}{% set a = c.function.arguments %}\
            {{ a | tojson }}|{{ a }}|{{ a.command }}|{{ a | length }}|{{ a is mapping }}|\
            {{ a | tojson(ensure_ascii=true) }}|{{ m | tojson }}{% if not a %}empty{% endif %}\n{% endfor %}{% endfor %}";
        let t = ChatTemplate::new(src, vec![]).unwrap();
        let tools = vec![
            json!({"type": "function", "function": {"name": "bash", "parameters": {"type": "object",
                "properties": {"command": {"type": "string", "description": "é \"q\""}}}}}),
        ];
        let messages = vec![
            json!({"role": "user", "content": "hi ✓"}),
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash",
                    "arguments": {"command": "ls ✓", "n": 1.0, "z": null}}},
                {"id": "c2", "type": "function", "function": {"name": "noop", "arguments": {}}},
                {"id": "c3", "type": "function", "function": {"name": "s", "arguments": "{\"a\": 1}"}}
            ]}),
        ];
        let plain = t
            .render(&RenderInput {
                messages: &messages,
                tools: Some(&tools),
                ..RenderInput::default()
            })
            .unwrap();
        let converted = Value::from(messages.iter().map(message_value).collect::<Vec<_>>());
        let once = t
            .render(&RenderInput {
                messages_value: Some(converted),
                tools_value: Some(tools_value(&tools)),
                ..RenderInput::default()
            })
            .unwrap();
        assert!(plain.contains("\"ls ✓\""), "{plain}");
        assert_eq!(once, plain);
        let args = message_value(&messages[1])
            .get_attr("tool_calls")
            .and_then(|c| c.get_item(&Value::from(0)))
            .and_then(|c| c.get_attr("function"))
            .and_then(|f| f.get_attr("arguments"))
            .unwrap();
        assert!(args.downcast_object_ref::<Dumped>().is_some());
    }

    #[test]
    fn python_flavoured_filters() {
        let out = render(
            "{{ messages[0].args | tojson }}|{{ messages[0].flag | string }}|{{ messages[0].n }}|{{ eos_token }}|{{ '  x \x1c' | trim }}",
            json!([{"args": {"b": 1.0, "a": "é<"}, "flag": true, "n": 2.5}]),
        );
        assert_eq!(out, "{\"b\": 1.0, \"a\": \"é<\"}|True|2.5|</s>|x");
    }

    #[test]
    fn trim_and_lstrip_blocks_and_generation_tag() {
        let out = render(
            "{% for m in messages %}\n  {%- generation -%}\n<{{ m.role }}>\n{%- endgeneration %}\n{% endfor %}",
            json!([{"role": "user"}, {"role": "assistant"}]),
        );
        assert_eq!(out, "<user><assistant>");
    }

    #[test]
    fn python_methods() {
        let out = render(
            "{% set c = messages[0].content %}{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.startswith('<think>') }}|{{ messages[0].get('x', 'd') }}",
            json!([{"content": "<think>r</think>\n\nanswer"}]),
        );
        assert_eq!(out, "answer|True|d");
    }

    #[test]
    fn raise_exception_is_an_error() {
        let t = ChatTemplate::new("{{ raise_exception('no') }}", vec![]).unwrap();
        assert!(t.render(&RenderInput::default()).is_err());
    }

    #[test]
    fn strftime_codes() {
        // 2026-12-01 21:28:13 UTC, a Tuesday.
        assert_eq!(
            strftime("%d %b %Y %A %H:%M:%S %%", 1_796_160_493),
            "01 Dec 2026 Tuesday 21:28:13 %"
        );
    }
}
