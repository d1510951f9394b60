//! Real Hugging Face chat templates rendered by tokentap against renderings made by
//! transformers 5.5.0 itself (fixtures written by scripts/reference-fixtures.py with the
//! pinned reference's Python environment).
//!
//! Covered templates (mlperf/tests/fixtures/templates, copied from llama.cpp's collection of
//! the models' own `chat_template`s): Qwen3-0.6B, QwQ-32B, Qwen3.5-4B, Qwen3-Coder, a
//! Qwen3.6-style variant of Qwen3.5 that honours `preserve_thinking` (Qwen3.6's own file could
//! not be had here; the official Qwen preset sends `preserve_thinking: true`), Kimi-K2
//! (two revisions), Kimi-K2-Thinking, Kimi-K3, and the golden tokenizer's Qwen3-style template.
//! Cases: the reference's counting frame (`[user ""]`, `[user "", assistant ""]`), structured
//! assistant outputs (reasoning, content, tool calls with object and raw-string arguments) and
//! full agentic prompts (salted system prompt, tools with floats, booleans, nested objects and
//! non-ASCII, history with reasoning and tool calls, `preserve_thinking`). Where transformers
//! raises (Kimi K2's `list.append` in the sandbox, Qwen3's `message.content` on a tool-call
//! message), tokentap must fail too: the reference then counts its fallback text.
//!
//! The token counts come from the reference's own `BatchTokenizer` on the golden tokenizer with
//! each template: frame sizes, an output with reasoning and tool calls, one with raw arguments
//! (the fallback path where a template rejects them), and a full prompt.

use serde_json::Value;
use std::path::{Path, PathBuf};
use tokentap_mlperf::template::{ChatTemplate, RenderInput};
use tokentap_mlperf::tokenizer::PromptInput;
use tokentap_mlperf::{MessageParts, RefTokenizer};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn cases() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("template_cases.json")).unwrap())
        .unwrap()
}

fn special(c: &Value) -> Vec<(String, String)> {
    c["special_tokens"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn renderings_match_transformers() {
    let c = cases();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, t) in c["templates"].as_object().unwrap() {
        let src = std::fs::read_to_string(fixtures().join("templates").join(name)).unwrap();
        let tmpl = ChatTemplate::new(&src, special(&c)).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        for case in c["cases"].as_array().unwrap() {
            let cname = case["name"].as_str().unwrap();
            let messages = case["messages"].as_array().unwrap().clone();
            let tools = case.get("tools").and_then(Value::as_array).cloned();
            let kwargs = case.get("kwargs").and_then(Value::as_object).cloned();
            let input = RenderInput {
                messages: &messages,
                tools: tools.as_deref(),
                add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
                kwargs: kwargs.as_ref(),
                tool_choice: None,
                messages_value: None,
                tools_value: None,
            };
            let got = tmpl.render(&input);
            // The messages given as values converted one by one (a conversation's memo), and
            // the tools and tool-call arguments with their `tojson` text made once, render the
            // same.
            let one_by_one = minijinja::Value::from(
                messages
                    .iter()
                    .map(tokentap_mlperf::template::message_value)
                    .collect::<Vec<_>>(),
            );
            let again = tmpl.render(&RenderInput {
                messages_value: Some(one_by_one),
                tools_value: tools.as_deref().map(tokentap_mlperf::template::tools_value),
                ..input.clone()
            });
            assert_eq!(
                got.as_ref().ok(),
                again.as_ref().ok(),
                "{name} / {cname}: messages converted one by one render otherwise"
            );
            let want = &t["renderings"][cname];
            match (got, want.get("rendered").and_then(Value::as_str)) {
                (Ok(g), Some(w)) if g == w => {}
                (Err(_), None) => {}
                (Ok(g), Some(w)) => {
                    let at = g.chars().zip(w.chars()).take_while(|(a, b)| a == b).count();
                    let ctx = |s: &str| {
                        s.chars()
                            .skip(at.saturating_sub(40))
                            .take(90)
                            .collect::<String>()
                    };
                    failures.push(format!(
                        "{name} / {cname}: differs at char {at}\n  tokentap:     {:?}\n  transformers: {:?}",
                        ctx(&g),
                        ctx(w)
                    ));
                }
                (Ok(_), None) => failures.push(format!(
                    "{name} / {cname}: transformers fails ({}), tokentap renders",
                    want["error"]
                )),
                (Err(e), Some(_)) => failures.push(format!(
                    "{name} / {cname}: tokentap fails ({e:#}), transformers renders"
                )),
            }
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 80, "{checked}");
}

/// The golden tokenizer with `template` as its chat template, in a temporary folder.
fn tokenizer_with(template: &str, dir: &Path) -> RefTokenizer {
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/golden/mlperf-ea33275/tokenizer");
    for f in ["tokenizer.json", "special_tokens_map.json"] {
        std::fs::copy(golden.join(f), dir.join(f)).unwrap();
    }
    let mut cfg: Value = serde_json::from_str(
        &std::fs::read_to_string(golden.join("tokenizer_config.json")).unwrap(),
    )
    .unwrap();
    cfg["chat_template"] = Value::String(template.to_string());
    std::fs::write(dir.join("tokenizer_config.json"), cfg.to_string()).unwrap();
    RefTokenizer::load(dir).unwrap()
}

fn parts(v: &Value) -> MessageParts {
    MessageParts {
        content: v["content"].as_str().unwrap().to_string(),
        reasoning: v["reasoning"].as_str().map(str::to_string),
        tool_calls: v["tool_calls"].as_array().cloned(),
    }
}

#[test]
fn token_counts_match_the_reference_batch_tokenizer() {
    let c = cases();
    let inputs = &c["count_inputs"];
    let prompt = PromptInput {
        messages: inputs["prompt"]["messages"].as_array().unwrap().clone(),
        tools: inputs["prompt"]["tools"].as_array().cloned(),
        chat_template_kwargs: inputs["prompt"]["chat_template_kwargs"]
            .as_object()
            .cloned(),
        chat_template: None,
        tool_choice: None,
    };
    let mut failures = Vec::new();
    for (name, t) in c["templates"].as_object().unwrap() {
        let src = std::fs::read_to_string(fixtures().join("templates").join(name)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let tok = tokenizer_with(&src, dir.path());
        let want = &t["counts"];
        let got = [
            ("prefix", tok.frame().0),
            ("baseline", tok.frame().1),
            (
                "message",
                tok.count_message(&parts(&inputs["message"])).tokens,
            ),
            (
                "message_raw_arguments",
                tok.count_message(&parts(&inputs["message_raw_arguments"]))
                    .tokens,
            ),
            ("prompt", tok.count_prompt(&prompt).tokens),
        ];
        for (k, v) in got {
            if want[k].as_u64() != Some(v) {
                failures.push(format!("{name} {k}: tokentap {v}, reference {}", want[k]));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_failing_template_falls_back_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let tok = tokenizer_with("{{ raise_exception('no chat here') }}", dir.path());
    assert_eq!(tok.frame(), (0, 0));
    assert!(tok.baseline_error().unwrap().contains("no chat here"));
    let p = MessageParts {
        content: "a".into(),
        reasoning: Some("b".into()),
        tool_calls: None,
    };
    let n = tok.count_message(&p);
    assert!(n.fallback);
    assert_eq!(n.tokens, tok.count_text("a\nb"));
    let (count, first) = tok.fallbacks();
    assert_eq!(count, 1);
    assert!(first.unwrap().contains("no chat here"));
}

/// A template found message-local renders every conversation of the cases as the rendering of
/// its first messages without the text after them, then the rest's rendering alone without
/// the text before them ([`ChatTemplate::frame`]) — at every split, so a replay that renders
/// only a turn's new messages prompts the same text. The templates that walk the messages to
/// find the last user query, or look at `messages[0]` or `loop.last`, are not message-local.
#[test]
fn message_local_templates_render_message_by_message() {
    let c = cases();
    let mut local = Vec::new();
    let mut splits = 0;
    for name in c["templates"].as_object().unwrap().keys() {
        let src = std::fs::read_to_string(fixtures().join("templates").join(name)).unwrap();
        let tmpl = ChatTemplate::new(&src, special(&c)).unwrap();
        if !tmpl.is_message_local() {
            continue;
        }
        local.push(name.as_str());
        for case in c["cases"].as_array().unwrap() {
            let cname = case["name"].as_str().unwrap();
            let messages = case["messages"].as_array().unwrap().clone();
            let tools = case.get("tools").and_then(Value::as_array).cloned();
            let kwargs = case.get("kwargs").and_then(Value::as_object).cloned();
            let with = |m: &[Value]| {
                tmpl.render(&RenderInput {
                    messages: m,
                    tools: tools.as_deref(),
                    add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
                    kwargs: kwargs.as_ref(),
                    ..Default::default()
                })
            };
            let Ok(whole) = with(&messages) else {
                continue;
            };
            let (before, after) = tmpl
                .frame(&RenderInput {
                    tools: tools.as_deref(),
                    add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
                    kwargs: kwargs.as_ref(),
                    ..Default::default()
                })
                .unwrap()
                .expect("a message-local template has a frame");
            for k in 0..=messages.len() {
                let head = with(&messages[..k]).unwrap();
                let tail = with(&messages[k..]).unwrap();
                let joined = format!("{}{}", &head[..head.len() - after], &tail[before..]);
                assert_eq!(joined, whole, "{name} / {cname}: split after {k} messages");
                splits += 1;
            }
        }
    }
    assert_eq!(local, ["golden-qwen3-style.jinja"]);
    assert!(splits >= 20, "{splits}");
}
