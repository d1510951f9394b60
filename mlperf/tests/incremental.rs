//! A conversation's ISL counted turn after turn from the previous prompt's memo
//! (`RefTokenizer::count_prompt_after`) is the count of the prompt on its own
//! (`count_prompt`), token for token: as the conversation grows, when an earlier message
//! changes (the template drops old reasoning, a salt changes, a message is edited in the
//! middle), when the prompt shrinks, when it is short, and from a memo of another conversation.

use serde_json::{json, Value};
use std::path::PathBuf;
use tokentap_mlperf::tokenizer::{PromptInput, PromptMemo};
use tokentap_mlperf::RefTokenizer;

fn tokenizer() -> RefTokenizer {
    RefTokenizer::load(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../testdata/golden/mlperf-ea33275/tokenizer"),
    )
    .expect("the golden tokenizer")
}

fn words(n: usize, seed: usize) -> String {
    const W: [&str; 10] = [
        "the",
        "cache",
        "fails",
        "config.py",
        "<tool>",
        "é",
        "returns",
        "None",
        "😀",
        "so",
    ];
    (0..n)
        .map(|i| W[(i * 7 + seed * 3) % W.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn prompt(messages: Vec<Value>) -> PromptInput {
    PromptInput {
        messages,
        tools: Some(vec![
            json!({"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}),
        ]),
        chat_template_kwargs: None,
        chat_template: None,
        tool_choice: None,
    }
}

/// An agent's conversation: a system prompt, then `turns` rounds of reasoning + tool call and
/// tool result, each round's output `len` words.
fn conversation(system: &str, turns: usize, len: usize) -> Vec<Value> {
    let mut m = vec![
        json!({"role": "system", "content": system}),
        json!({"role": "user", "content": words(40, 1)}),
    ];
    for t in 0..turns {
        m.push(json!({"role": "assistant", "reasoning_content": words(len, t), "content": "",
            "tool_calls": [{"id": format!("c{t}"), "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]}));
        m.push(json!({"role": "tool", "tool_call_id": format!("c{t}"), "content": words(len * 3, t + 1)}));
    }
    m
}

/// Counts `prompts` in order through one memo and each on its own; they must agree, and so
/// must the prompts' texts (the memo's rendered by the new messages alone where it could be,
/// the other whole). Returns how many were rendered by their new messages alone.
fn agree(tok: &RefTokenizer, prompts: &[PromptInput], memo: &mut PromptMemo) -> usize {
    let mut new_only = 0;
    for (i, p) in prompts.iter().enumerate() {
        new_only += usize::from(memo.renders_new_only());
        let after = tok.count_prompt_after(p, memo);
        let mut alone = PromptMemo::default();
        let whole = tokenizer().count_prompt_after(p, &mut alone);
        assert_eq!(after.tokens, whole.tokens, "prompt {i}");
        assert_eq!(after.fallback, whole.fallback, "prompt {i}");
        assert!(memo.text() == alone.text(), "prompt {i}: the texts differ");
    }
    new_only
}

#[test]
fn a_growing_conversation_counts_as_each_prompt_alone() {
    let tok = tokenizer();
    let system = format!("[salt: 4461]\n\n{}", words(300, 5));
    let prompts: Vec<PromptInput> = (0..12)
        .map(|t| prompt(conversation(&system, t, 30)))
        .collect();
    // The golden template renders message by message: every prompt after the first renders
    // only its new messages.
    assert_eq!(agree(&tok, &prompts, &mut PromptMemo::default()), 11);
}

#[test]
fn a_change_anywhere_before_the_end_is_counted_again() {
    let tok = tokenizer();
    let system = words(300, 5);
    let base = conversation(&system, 8, 30);
    let mut prompts = vec![prompt(base.clone())];
    // Another salt: the very first bytes differ.
    let mut salted = base.clone();
    salted[0]["content"] = json!(format!("[salt: 9]\n\n{system}"));
    prompts.push(prompt(salted));
    // A message in the middle edited, by one character and by a special token's text.
    for edit in ["x", "<|im_end|>", "<|im_start|>user\n"] {
        let mut m = base.clone();
        let c = m[7]["content"].as_str().unwrap().to_string();
        m[7]["content"] = json!(format!("{}{edit}{}", &c[..c.len() / 2], &c[c.len() / 2..]));
        prompts.push(prompt(m));
    }
    // Shorter than before, then the whole again, then a prompt too short to count in pieces.
    prompts.push(prompt(base[..5].to_vec()));
    prompts.push(prompt(base.clone()));
    prompts.push(prompt(vec![json!({"role": "user", "content": "hi"})]));
    prompts.push(prompt(base));
    agree(&tok, &prompts, &mut PromptMemo::default());
}

#[test]
fn a_memo_of_another_conversation_changes_nothing() {
    let tok = tokenizer();
    let mut memo = PromptMemo::default();
    let a = prompt(conversation(&words(300, 5), 6, 30));
    let b = prompt(conversation(&words(300, 6), 6, 30));
    agree(&tok, &[a, b.clone(), b], &mut memo);
}

/// Given only what is new (`count_prompt_continued`: the first `kept` messages are the memo's),
/// each prompt of a growing conversation counts as on its own — including when the template
/// renders an earlier message differently once later ones exist (this template drops the
/// reasoning of turns before the last user message), and after a count that kept nothing.
#[test]
fn given_only_the_new_messages_each_prompt_counts_as_alone() {
    let tok = tokenizer();
    let system = format!("[salt: 4461]\n\n{}", words(300, 5));
    let mut all = conversation(&system, 10, 30);
    // A second user message late in the conversation: earlier reasoning is dropped from then on.
    all.insert(15, json!({"role": "user", "content": words(20, 3)}));
    let mut memo = PromptMemo::default();
    let mut kept = 0;
    for end in (2..=all.len()).step_by(2) {
        let whole = tokenizer().count_prompt(&prompt(all[..end].to_vec()));
        let new = prompt(all[kept..end].to_vec());
        let new_only = memo.renders_new_only();
        let got = tok.count_prompt_continued(&new, kept, &mut memo);
        assert_eq!(got, whole, "prompt of {end} messages, {kept} kept");
        assert_eq!(new_only, kept > 0, "prompt of {end} messages");
        let mut alone = PromptMemo::default();
        tok.count_prompt_after(&prompt(all[..end].to_vec()), &mut alone);
        assert!(memo.text() == alone.text(), "prompt of {end} messages");
        assert_eq!(memo.messages(), end);
        kept = end;
    }
    // Counted from nothing again (kept 0) with the whole prompt: the same.
    let whole = tokenizer().count_prompt(&prompt(all.clone()));
    assert_eq!(
        tok.count_prompt_continued(&prompt(all), 0, &mut memo),
        whole
    );
}
