//! Every rule of docs/benchmark.md#dataset and every field type check, each with its exact message:
//! the error must name the line, the conversation, the field and what was expected. Plus the things
//! a loader must accept (metadata rows, blank lines, out-of-order turns, BOM, CRLF).

use tokentap_dataset::{Dataset, DatasetError, Role};

const PATH: &str = "t.jsonl";

fn parse(text: &str) -> Result<Dataset, Vec<DatasetError>> {
    Dataset::parse(PATH, text).map_err(|e| e.0)
}

/// The errors of `text` (which must be invalid).
fn errors(text: &str) -> Vec<DatasetError> {
    match parse(text) {
        Ok(_) => panic!("expected errors for:\n{text}"),
        Err(e) => e,
    }
}

/// Asserts `text` has exactly one error, at `line`, in conversation `conv`, on `field`, whose
/// message contains `expect`; and that the printed form carries all of it.
#[track_caller]
fn one(text: &str, line: usize, conv: Option<&str>, field: Option<&str>, expect: &str) {
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "expected exactly one error, got {errs:#?}");
    check(&errs[0], line, conv, field, expect);
}

#[track_caller]
fn check(e: &DatasetError, line: usize, conv: Option<&str>, field: Option<&str>, expect: &str) {
    assert_eq!(e.line, Some(line), "{e}");
    assert_eq!(e.conversation.as_deref(), conv, "{e}");
    assert_eq!(e.field.as_deref(), field, "{e}");
    assert!(
        e.message.contains(expect),
        "message {:?} lacks {expect:?}",
        e.message
    );
    let shown = e.to_string();
    assert!(shown.starts_with(&format!("{PATH}:{line}: ")), "{shown}");
    if let Some(c) = conv {
        assert!(shown.contains(&format!("conversation {c:?}")), "{shown}");
    }
    if let Some(f) = field {
        assert!(shown.contains(&format!("field `{f}`")), "{shown}");
    }
    assert!(shown.contains(expect), "{shown}");
}

/// JSONL from rows written as JSON objects.
fn jsonl(rows: &[&str]) -> String {
    rows.join("\n") + "\n"
}

const U1: &str = r#"{"conversation_id":"c1","turn":1,"role":"user","content":"hi"}"#;
const A2: &str = r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":"hello"}"#;
const A2_CALL: &str = r#"{"conversation_id":"c1","turn":2,"role":"assistant","tool_calls":[{"id":"k1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}"#;
const T3: &str = r#"{"conversation_id":"c1","turn":3,"role":"tool","tool_results":[{"tool_call_id":"k1","content":"a.py"}]}"#;

/// A user row of `c1` at turn 1 with extra fields `extra` (`"k":v,...`).
fn u1_with(extra: &str) -> String {
    jsonl(&[
        &format!(r#"{{"conversation_id":"c1","turn":1,"role":"user","content":"hi",{extra}}}"#),
        A2,
    ])
}

/// An assistant row of `c1` at turn 2 with `tool_calls` = `calls`.
fn a2_calls(calls: &str) -> String {
    jsonl(&[
        U1,
        &format!(r#"{{"conversation_id":"c1","turn":2,"role":"assistant","tool_calls":{calls}}}"#),
    ])
}

/// A tool row of `c1` at turn 3 after a tool-calling assistant, with `tool_results` = `results`.
fn t3_results(results: &str) -> String {
    jsonl(&[
        U1,
        A2_CALL,
        &format!(r#"{{"conversation_id":"c1","turn":3,"role":"tool","tool_results":{results}}}"#),
    ])
}

// ---------------------------------------------------------------------------------------------
// Valid input

#[test]
fn valid_dataset_loads_with_all_fields() {
    let text = jsonl(&[
        r#"{"_type":"dataset_metadata","source":"unit test","license":"none"}"#,
        r#"{"conversation_id":"c1","turn":1,"role":"user","content":"fix it","system":"You are an agent.","tools":[{"type":"function","function":{"name":"bash"}}],"delay_seconds":0.5,"name":"dev","max_new_tokens":128,"temperature":0.7,"stop":["\n"],"logit_bias":{"1":-100},"top_k":-1}"#,
        A2_CALL,
        T3,
        r#"{"conversation_id":"c1","turn":4,"role":"assistant","content":"done","reasoning_content":"thinking"}"#,
        r#"{"conversation_id":"sim_000001","turn":1,"role":"user","content":"hello"}"#,
        r#"{"conversation_id":"sim_000001","turn":2,"role":"assistant","content":"intent: I042","intent_codes":["I042"]}"#,
    ]);
    let ds = parse(&text).expect("valid");
    assert_eq!(ds.conversations.len(), 2);
    assert_eq!(ds.client_turns(), 3);
    let c1 = &ds.conversations[0];
    assert_eq!(c1.system(), Some("You are an agent."));
    assert_eq!(c1.rows[0].line, 2, "line numbers count the metadata row");
    assert_eq!(c1.rows[0].delay_seconds, Some(0.5));
    assert_eq!(c1.rows[0].overrides.len(), 5);
    assert_eq!(
        c1.rows[2].tool_results.as_ref().unwrap()[0].tool_call_id,
        "k1"
    );
    assert!(ds.conversations[1].is_workflow() && !c1.is_workflow());
    assert_eq!(
        ds.conversations[1].rows[1].intent_codes.as_deref(),
        Some(&["I042".to_string()][..])
    );
}

#[test]
fn metadata_rows_are_skipped() {
    let text = jsonl(&[
        r#"{"_type":"dataset_metadata","source":"x"}"#,
        U1,
        A2,
        r#"{"_type":"dataset_metadata"}"#,
    ]);
    let ds = parse(&text).unwrap();
    assert_eq!(ds.conversations.len(), 1);
    assert_eq!(ds.conversations[0].rows.len(), 2);
}

#[test]
fn blank_lines_are_skipped_and_counted() {
    let text = format!("\n{U1}\n   \n\n{A2}\n\n");
    let ds = parse(&text).unwrap();
    assert_eq!(ds.conversations[0].rows[0].line, 2);
    assert_eq!(ds.conversations[0].rows[1].line, 5);
    // And an error after blank lines still names the right line.
    let bad = format!(
        "\n\n{U1}\n\n{}\n",
        r#"{"conversation_id":"c1","turn":2,"role":"bot"}"#
    );
    one(
        &bad,
        5,
        Some("c1"),
        Some("role"),
        "expected \"user\", \"assistant\" or \"tool\", found \"bot\"",
    );
}

#[test]
fn crlf_line_ends_and_bom_are_accepted() {
    let text = format!("\u{feff}{U1}\r\n{A2}\r\n");
    let ds = parse(&text).unwrap();
    assert_eq!(ds.conversations[0].rows.len(), 2);
    assert_eq!(ds.conversations[0].rows[1].content_str(), Some("hello"));
}

#[test]
fn out_of_order_turns_in_file_are_sorted() {
    let text = jsonl(&[
        A2_CALL,
        T3,
        U1,
        r#"{"conversation_id":"c1","turn":4,"role":"assistant","content":"done"}"#,
    ]);
    let ds = parse(&text).unwrap();
    let rows = &ds.conversations[0].rows;
    assert_eq!(
        rows.iter().map(|r| r.turn).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(
        rows.iter().map(|r| r.role).collect::<Vec<_>>(),
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(
        rows.iter().map(|r| r.line).collect::<Vec<_>>(),
        [3, 1, 2, 4],
        "rows keep their file lines"
    );
}

#[test]
fn printable_ascii_ids_including_punctuation_and_space_are_accepted() {
    let id = "django__django-16899 ~!@#$%^&*()_+{}|:<>?";
    let text = jsonl(&[&format!(
        r#"{{"conversation_id":{},"turn":1,"role":"user","content":"x"}}"#,
        serde_json::json!(id)
    )]);
    assert_eq!(parse(&text).unwrap().conversations[0].id, id);
}

#[test]
fn conversation_order_in_file_is_trajectory_order() {
    let text = jsonl(&[
        r#"{"conversation_id":"b","turn":1,"role":"user","content":"x"}"#,
        r#"{"conversation_id":"a","turn":1,"role":"user","content":"x"}"#,
        r#"{"conversation_id":"c","turn":1,"role":"user","content":"x"}"#,
    ]);
    let ids: Vec<_> = parse(&text)
        .unwrap()
        .conversations
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["b", "a", "c"]);
}

#[test]
fn a_conversation_may_end_on_a_client_turn_or_on_a_tool_call() {
    parse(&jsonl(&[U1])).unwrap();
    parse(&jsonl(&[U1, A2_CALL])).unwrap();
    parse(&jsonl(&[U1, A2_CALL, T3])).unwrap();
}

#[test]
fn assistant_may_have_both_content_and_tool_calls_and_content_parts() {
    let a = r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":"intent: I001","tool_calls":[{"id":"k1","type":"function","function":{"name":"f","arguments":"{}"}}]}"#;
    parse(&jsonl(&[U1, a, T3])).unwrap();
    let parts = r#"{"conversation_id":"c1","turn":1,"role":"user","content":[{"type":"text","text":"hi"}]}"#;
    parse(&jsonl(&[parts])).unwrap();
}

#[test]
fn load_reads_a_file_and_reports_a_missing_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("ok.jsonl");
    std::fs::write(&file, jsonl(&[U1, A2])).unwrap();
    let ds = Dataset::load(&file).unwrap();
    assert_eq!(ds.path, file);
    let missing = dir.join("missing.jsonl");
    let e = Dataset::load(&missing).unwrap_err();
    assert_eq!(e.0.len(), 1);
    assert!(
        e.to_string()
            .contains("missing.jsonl: cannot read the file"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// File-level and JSON errors

#[test]
fn empty_file_is_an_error() {
    let e = errors("\n\n");
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].line, None);
    assert!(
        e[0].to_string()
            .contains("no conversations: expected at least one JSONL row"),
        "{}",
        e[0]
    );
    // Only metadata: still no conversations.
    assert!(errors(r#"{"_type":"dataset_metadata"}"#)[0]
        .message
        .contains("no conversations"));
}

#[test]
fn invalid_json_line() {
    one(
        &jsonl(&[U1, "{\"conversation_id\": \"c1\", \"turn\": 2,"]),
        2,
        None,
        None,
        "expected a JSON object: invalid JSON",
    );
}

#[test]
fn non_object_line() {
    one(
        &jsonl(&[U1, "[1,2]"]),
        2,
        None,
        None,
        "expected a JSON object, found an array",
    );
    one(
        &jsonl(&[U1, "\"text\""]),
        2,
        None,
        None,
        "expected a JSON object, found a string",
    );
}

// ---------------------------------------------------------------------------------------------
// Required fields and their types

#[test]
fn conversation_id_missing() {
    one(
        &jsonl(&[U1, r#"{"turn":2,"role":"assistant","content":"x"}"#]),
        2,
        None,
        Some("conversation_id"),
        "missing: every row needs a conversation_id",
    );
}

#[test]
fn conversation_id_wrong_type() {
    one(
        &jsonl(&[r#"{"conversation_id":7,"turn":1,"role":"user","content":"x"}"#]),
        1,
        None,
        Some("conversation_id"),
        "expected a non-empty string, found a number",
    );
}

#[test]
fn conversation_id_empty() {
    one(
        &jsonl(&[r#"{"conversation_id":"","turn":1,"role":"user","content":"x"}"#]),
        1,
        None,
        Some("conversation_id"),
        "expected a non-empty string, found \"\"",
    );
}

#[test]
fn conversation_id_not_printable_ascii() {
    one(
        &jsonl(&[r#"{"conversation_id":"caf\u00e9","turn":1,"role":"user","content":"x"}"#]),
        1,
        Some("café"),
        Some("conversation_id"),
        "expected printable ASCII only (it becomes an HTTP header value), found 'é'",
    );
    one(
        &jsonl(&[r#"{"conversation_id":"a\tb","turn":1,"role":"user","content":"x"}"#]),
        1,
        Some("a\tb"),
        Some("conversation_id"),
        "found '\\t'",
    );
}

#[test]
fn conversation_id_with_leading_or_trailing_space() {
    for id in [" c1", "c1 "] {
        let text = jsonl(&[&format!(
            r#"{{"conversation_id":"{id}","turn":1,"role":"user","content":"x"}}"#
        )]);
        one(
            &text,
            1,
            Some(id),
            Some("conversation_id"),
            "expected no leading or trailing space (HTTP trims header values)",
        );
    }
}

#[test]
fn turn_missing() {
    one(
        &jsonl(&[
            U1,
            r#"{"conversation_id":"c1","role":"assistant","content":"x"}"#,
        ]),
        2,
        Some("c1"),
        Some("turn"),
        "missing: every row needs a 1-based turn",
    );
}

#[test]
fn turn_wrong_type_or_range() {
    for (turn, shown) in [
        ("0", "0"),
        ("-1", "-1"),
        ("1.5", "1.5"),
        ("\"1\"", "\"1\""),
        ("null", "null"),
        ("2.0", "2.0"),
    ] {
        let text = jsonl(&[&format!(
            r#"{{"conversation_id":"c1","turn":{turn},"role":"user","content":"x"}}"#
        )]);
        one(
            &text,
            1,
            Some("c1"),
            Some("turn"),
            &format!("expected an integer ≥ 1, found {shown}"),
        );
    }
}

#[test]
fn role_missing_or_unknown() {
    one(
        &jsonl(&[r#"{"conversation_id":"c1","turn":1,"content":"x"}"#]),
        1,
        Some("c1"),
        Some("role"),
        "expected \"user\", \"assistant\" or \"tool\", found nothing",
    );
    one(
        &jsonl(&[r#"{"conversation_id":"c1","turn":1,"role":"system","content":"x"}"#]),
        1,
        Some("c1"),
        Some("role"),
        "expected \"user\", \"assistant\" or \"tool\", found \"system\"",
    );
    one(
        &jsonl(&[r#"{"conversation_id":"c1","turn":1,"role":3,"content":"x"}"#]),
        1,
        Some("c1"),
        Some("role"),
        "found a number",
    );
}

#[test]
fn a_dropped_row_does_not_cascade_into_turn_errors() {
    // Row 2 is unreadable (bad role): its conversation now has a gap at turn 2, but only the
    // real problem is reported.
    let text = jsonl(&[
        U1,
        r#"{"conversation_id":"c1","turn":2,"role":"bot","content":"x"}"#,
        r#"{"conversation_id":"c1","turn":3,"role":"user","content":"x"}"#,
    ]);
    one(&text, 2, Some("c1"), Some("role"), "found \"bot\"");
}

// ---------------------------------------------------------------------------------------------
// Optional field types

#[test]
fn content_wrong_type() {
    let text = jsonl(&[r#"{"conversation_id":"c1","turn":1,"role":"user","content":42}"#]);
    one(
        &text,
        1,
        Some("c1"),
        Some("content"),
        "expected a string (or an array of content parts), found a number",
    );
}

#[test]
fn string_fields_wrong_type() {
    for (field, value, found) in [
        ("system", "1", "a number"),
        ("reasoning_content", "[]", "an array"),
        ("name", "{}", "an object"),
    ] {
        one(
            &u1_with(&format!(r#""{field}":{value}"#)),
            1,
            Some("c1"),
            Some(field),
            &format!("expected a string, found {found}"),
        );
    }
}

#[test]
fn tools_wrong_type() {
    one(
        &u1_with(r#""tools":{"type":"function"}"#),
        1,
        Some("c1"),
        Some("tools"),
        "expected an array of tool definitions, found an object",
    );
}

#[test]
fn tool_calls_wrong_type() {
    let text = jsonl(&[
        U1,
        r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":"x","tool_calls":"ls"}"#,
    ]);
    one(
        &text,
        2,
        Some("c1"),
        Some("tool_calls"),
        "expected an array of tool calls, found a string",
    );
}

#[test]
fn tool_results_wrong_types() {
    one(
        &t3_results(r#"{"tool_call_id":"k1"}"#),
        3,
        Some("c1"),
        Some("tool_results"),
        "expected an array, found an object",
    );
    one(
        &t3_results(r#"["a.py"]"#),
        3,
        Some("c1"),
        Some("tool_results[0]"),
        "expected an object {tool_call_id, content}, found a string",
    );
    one(
        &t3_results(r#"[{"tool_call_id":5,"content":"x"}]"#),
        3,
        Some("c1"),
        Some("tool_results[0].tool_call_id"),
        "expected a string, found a number",
    );
}

#[test]
fn delay_seconds_wrong_type_or_negative() {
    one(
        &u1_with(r#""delay_seconds":-1"#),
        1,
        Some("c1"),
        Some("delay_seconds"),
        "expected a number of seconds from 0 to 86400 (one day), found -1",
    );
    one(
        &u1_with(r#""delay_seconds":"2s""#),
        1,
        Some("c1"),
        Some("delay_seconds"),
        "expected a number of seconds from 0 to 86400 (one day), found \"2s\"",
    );
    // Past a day: no replay could sleep it (and 1e308 seconds no timer can represent).
    one(
        &u1_with(r#""delay_seconds":86400.5"#),
        1,
        Some("c1"),
        Some("delay_seconds"),
        "expected a number of seconds from 0 to 86400 (one day), found 86400.5",
    );
}

#[test]
fn intent_codes_wrong_type() {
    let text = jsonl(&[
        U1,
        r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":"x","intent_codes":"I042"}"#,
    ]);
    one(
        &text,
        2,
        Some("c1"),
        Some("intent_codes"),
        "expected an array of strings like [\"I042\"], found \"I042\"",
    );
    let text = jsonl(&[
        U1,
        r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":"x","intent_codes":[42]}"#,
    ]);
    one(
        &text,
        2,
        Some("c1"),
        Some("intent_codes"),
        "expected an array of strings",
    );
}

#[test]
fn override_types() {
    let cases = [
        (
            r#""max_new_tokens":"8""#,
            "max_new_tokens",
            "expected an integer ≥ 1, found \"8\"",
        ),
        (
            r#""max_new_tokens":0"#,
            "max_new_tokens",
            "expected an integer ≥ 1, found 0",
        ),
        (
            r#""max_completion_tokens":1.5"#,
            "max_completion_tokens",
            "expected an integer ≥ 1, found 1.5",
        ),
        (r#""n":-2"#, "n", "expected an integer ≥ 1, found -2"),
        (r#""top_k":0.5"#, "top_k", "expected an integer, found 0.5"),
        (r#""seed":"x""#, "seed", "expected an integer, found \"x\""),
        (
            r#""temperature":"hot""#,
            "temperature",
            "expected a number, found \"hot\"",
        ),
        (r#""top_p":true"#, "top_p", "expected a number, found true"),
        (
            r#""repetition_penalty":[]"#,
            "repetition_penalty",
            "expected a number, found []",
        ),
        (
            r#""frequency_penalty":"0""#,
            "frequency_penalty",
            "expected a number",
        ),
        (
            r#""presence_penalty":{}"#,
            "presence_penalty",
            "expected a number",
        ),
        (r#""model":5"#, "model", "expected a string, found 5"),
        (r#""user":false"#, "user", "expected a string, found false"),
        (
            r#""chat_template":[]"#,
            "chat_template",
            "expected a string",
        ),
        (
            r#""stop":5"#,
            "stop",
            "expected a string or an array of strings, found 5",
        ),
        (
            r#""stop":["a",1]"#,
            "stop",
            "expected a string or an array of strings",
        ),
        (
            r#""logit_bias":[1]"#,
            "logit_bias",
            "expected an object of token id → bias, found [1]",
        ),
    ];
    for (extra, field, expect) in cases {
        one(&u1_with(extra), 1, Some("c1"), Some(field), expect);
    }
    // Accepted spellings.
    for extra in [
        r#""stop":"\n""#,
        r#""top_k":-1"#,
        r#""seed":-5"#,
        r#""temperature":1"#,
        r#""model":null"#,
    ] {
        parse(&u1_with(extra)).unwrap_or_else(|e| panic!("{extra}: {e:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// Rule: rows of one conversation are contiguous

#[test]
fn non_contiguous_conversation() {
    let text = jsonl(&[
        U1,
        r#"{"conversation_id":"c2","turn":1,"role":"user","content":"x"}"#,
        A2,
    ]);
    one(
        &text,
        3,
        Some("c1"),
        None,
        "rows of a conversation must be contiguous: this conversation started at line 1",
    );
}

// ---------------------------------------------------------------------------------------------
// Rule: turns, sorted, are exactly 1..N

#[test]
fn duplicate_turn() {
    let text = jsonl(&[
        U1,
        A2,
        r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":"again"}"#,
    ]);
    one(
        &text,
        3,
        Some("c1"),
        Some("turn"),
        "turn 2 appears twice (also at line 2)",
    );
}

#[test]
fn gap_in_turns() {
    let text = jsonl(&[
        U1,
        A2,
        r#"{"conversation_id":"c1","turn":4,"role":"user","content":"x"}"#,
    ]);
    one(
        &text,
        3,
        Some("c1"),
        Some("turn"),
        "expected turn 3 (turns must be exactly 1..3 with no gaps), found 4",
    );
}

#[test]
fn turns_not_starting_at_one() {
    let text = jsonl(&[r#"{"conversation_id":"c1","turn":2,"role":"user","content":"x"}"#]);
    one(
        &text,
        1,
        Some("c1"),
        Some("turn"),
        "expected turn 1 (turns must be exactly 1..1 with no gaps), found 2",
    );
}

// ---------------------------------------------------------------------------------------------
// Rule: role sequence start→user; user→assistant; assistant→tool|user; tool→assistant|user

#[test]
fn first_row_must_be_user() {
    let text = jsonl(&[r#"{"conversation_id":"c1","turn":1,"role":"assistant","content":"x"}"#]);
    one(
        &text,
        1,
        Some("c1"),
        Some("role"),
        "expected the first row to be \"user\", found \"assistant\"",
    );
}

#[test]
fn tool_row_first() {
    let text = jsonl(&[
        r#"{"conversation_id":"c1","turn":1,"role":"tool","tool_results":[{"tool_call_id":"k","content":"x"}]}"#,
    ]);
    one(
        &text,
        1,
        Some("c1"),
        Some("role"),
        "expected the first row to be \"user\", found \"tool\"",
    );
}

#[test]
fn user_after_user() {
    let text = jsonl(&[
        U1,
        r#"{"conversation_id":"c1","turn":2,"role":"user","content":"again"}"#,
    ]);
    one(
        &text,
        2,
        Some("c1"),
        Some("role"),
        "expected \"assistant\" after a \"user\" row, found \"user\"",
    );
}

#[test]
fn assistant_after_assistant() {
    let text = jsonl(&[
        U1,
        A2,
        r#"{"conversation_id":"c1","turn":3,"role":"assistant","content":"more"}"#,
    ]);
    one(
        &text,
        3,
        Some("c1"),
        Some("role"),
        "expected \"tool\" or \"user\" after an \"assistant\" row, found \"assistant\"",
    );
}

#[test]
fn tool_after_user() {
    let text = jsonl(&[
        U1,
        r#"{"conversation_id":"c1","turn":2,"role":"tool","tool_results":[{"tool_call_id":"k","content":"x"}]}"#,
    ]);
    one(
        &text,
        2,
        Some("c1"),
        Some("role"),
        "expected \"assistant\" after a \"user\" row, found \"tool\"",
    );
}

#[test]
fn tool_after_tool() {
    let t4 = r#"{"conversation_id":"c1","turn":4,"role":"tool","tool_results":[{"tool_call_id":"k1","content":"x"}]}"#;
    one(
        &jsonl(&[U1, A2_CALL, T3, t4]),
        4,
        Some("c1"),
        Some("role"),
        "expected \"assistant\" or \"user\" after a \"tool\" row, found \"tool\"",
    );
}

// ---------------------------------------------------------------------------------------------
// Rule: a tool row follows an assistant row with non-empty tool_calls, and has non-empty
// tool_results whose entries have a non-empty tool_call_id and a content

#[test]
fn tool_after_assistant_without_tool_calls() {
    let text = jsonl(&[U1, A2, T3]);
    one(&text, 3, Some("c1"), Some("role"), "a tool row must follow an assistant row with non-empty tool_calls; the assistant row at line 2 has none");
    let empty_calls =
        r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":"x","tool_calls":[]}"#;
    one(
        &jsonl(&[U1, empty_calls, T3]),
        3,
        Some("c1"),
        Some("role"),
        "at line 2 has none",
    );
}

#[test]
fn tool_row_without_tool_results() {
    let text = jsonl(&[
        U1,
        A2_CALL,
        r#"{"conversation_id":"c1","turn":3,"role":"tool","content":"a.py"}"#,
    ]);
    one(
        &text,
        3,
        Some("c1"),
        Some("tool_results"),
        "a tool row needs non-empty tool_results",
    );
}

#[test]
fn tool_row_with_empty_tool_results() {
    one(
        &t3_results("[]"),
        3,
        Some("c1"),
        Some("tool_results"),
        "a tool row needs non-empty tool_results, found []",
    );
}

#[test]
fn tool_result_without_tool_call_id() {
    one(
        &t3_results(r#"[{"content":"x"}]"#),
        3,
        Some("c1"),
        Some("tool_results[0].tool_call_id"),
        "expected a non-empty string",
    );
    one(
        &t3_results(r#"[{"tool_call_id":"k1","content":"x"},{"tool_call_id":"","content":"y"}]"#),
        3,
        Some("c1"),
        Some("tool_results[1].tool_call_id"),
        "expected a non-empty string",
    );
}

#[test]
fn tool_result_without_content() {
    one(
        &t3_results(r#"[{"tool_call_id":"k1"}]"#),
        3,
        Some("c1"),
        Some("tool_results[0].content"),
        "missing: each tool result needs a content",
    );
    one(
        &t3_results(r#"[{"tool_call_id":"k1","content":null}]"#),
        3,
        Some("c1"),
        Some("tool_results[0].content"),
        "missing: each tool result needs a content",
    );
    // An empty string is a content (a command with no output).
    parse(&t3_results(r#"[{"tool_call_id":"k1","content":""}]"#)).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Rule: an assistant row has non-empty content or non-empty tool_calls; each call has a
// non-empty id, type "function", a non-empty function.name and arguments

#[test]
fn assistant_without_content_or_tool_calls() {
    let msg = "an assistant row needs non-empty content or non-empty tool_calls";
    one(
        &jsonl(&[
            U1,
            r#"{"conversation_id":"c1","turn":2,"role":"assistant"}"#,
        ]),
        2,
        Some("c1"),
        Some("content"),
        msg,
    );
    one(
        &jsonl(&[
            U1,
            r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":""}"#,
        ]),
        2,
        Some("c1"),
        Some("content"),
        msg,
    );
    one(
        &jsonl(&[
            U1,
            r#"{"conversation_id":"c1","turn":2,"role":"assistant","content":"","tool_calls":[],"reasoning_content":"r"}"#,
        ]),
        2,
        Some("c1"),
        Some("content"),
        msg,
    );
}

#[test]
fn tool_call_not_an_object() {
    one(
        &a2_calls(r#"["bash"]"#),
        2,
        Some("c1"),
        Some("tool_calls[0]"),
        "expected an object {id, type, function}",
    );
}

#[test]
fn tool_call_id_missing_or_empty() {
    one(
        &a2_calls(r#"[{"type":"function","function":{"name":"f","arguments":"{}"}}]"#),
        2,
        Some("c1"),
        Some("tool_calls[0].id"),
        "expected a non-empty string",
    );
    one(
        &a2_calls(r#"[{"id":"","type":"function","function":{"name":"f","arguments":"{}"}}]"#),
        2,
        Some("c1"),
        Some("tool_calls[0].id"),
        "expected a non-empty string",
    );
}

#[test]
fn tool_call_type_not_function() {
    one(
        &a2_calls(r#"[{"id":"k","type":"tool","function":{"name":"f","arguments":"{}"}}]"#),
        2,
        Some("c1"),
        Some("tool_calls[0].type"),
        "expected \"function\", found \"tool\"",
    );
    one(
        &a2_calls(r#"[{"id":"k","function":{"name":"f","arguments":"{}"}}]"#),
        2,
        Some("c1"),
        Some("tool_calls[0].type"),
        "expected \"function\", found nothing",
    );
}

#[test]
fn tool_call_function_missing() {
    one(
        &a2_calls(r#"[{"id":"k","type":"function"}]"#),
        2,
        Some("c1"),
        Some("tool_calls[0].function"),
        "expected an object {name, arguments}",
    );
}

#[test]
fn tool_call_function_name_missing_or_empty() {
    one(
        &a2_calls(r#"[{"id":"k","type":"function","function":{"arguments":"{}"}}]"#),
        2,
        Some("c1"),
        Some("tool_calls[0].function.name"),
        "expected a non-empty string",
    );
    one(
        &a2_calls(r#"[{"id":"k","type":"function","function":{"name":"","arguments":"{}"}}]"#),
        2,
        Some("c1"),
        Some("tool_calls[0].function.name"),
        "expected a non-empty string",
    );
}

#[test]
fn tool_call_arguments_missing_or_not_a_string() {
    let expect = "expected a JSON string of arguments";
    one(
        &a2_calls(r#"[{"id":"k","type":"function","function":{"name":"f"}}]"#),
        2,
        Some("c1"),
        Some("tool_calls[0].function.arguments"),
        expect,
    );
    one(
        &a2_calls(
            r#"[{"id":"k","type":"function","function":{"name":"f","arguments":{"command":"ls"}}}]"#,
        ),
        2,
        Some("c1"),
        Some("tool_calls[0].function.arguments"),
        expect,
    );
}

#[test]
fn second_tool_call_is_named_by_index() {
    let calls = r#"[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"","arguments":"{}"}}]"#;
    one(
        &a2_calls(calls),
        2,
        Some("c1"),
        Some("tool_calls[1].function.name"),
        "expected a non-empty string",
    );
}

// ---------------------------------------------------------------------------------------------
// Rule: a user row has non-empty content and does not directly follow an assistant row that has
// tool_calls

#[test]
fn user_without_content() {
    let msg = "a user row needs non-empty content";
    one(
        &jsonl(&[r#"{"conversation_id":"c1","turn":1,"role":"user","system":"s"}"#]),
        1,
        Some("c1"),
        Some("content"),
        msg,
    );
    one(
        &jsonl(&[r#"{"conversation_id":"c1","turn":1,"role":"user","content":""}"#]),
        1,
        Some("c1"),
        Some("content"),
        msg,
    );
    one(
        &jsonl(&[r#"{"conversation_id":"c1","turn":1,"role":"user","content":[]}"#]),
        1,
        Some("c1"),
        Some("content"),
        msg,
    );
}

#[test]
fn user_directly_after_tool_calls() {
    let text = jsonl(&[
        U1,
        A2_CALL,
        r#"{"conversation_id":"c1","turn":3,"role":"user","content":"next"}"#,
    ]);
    one(&text, 3, Some("c1"), Some("role"), "a user row cannot directly follow an assistant row with tool_calls (line 2): expected a \"tool\" row with their results");
}

// ---------------------------------------------------------------------------------------------
// Reporting

#[test]
fn every_error_is_reported_in_line_order() {
    let text = jsonl(&[
        r#"{"conversation_id":"c1","turn":1,"role":"assistant","content":"x"}"#,
        "not json",
        r#"{"conversation_id":"c2","turn":1,"role":"user","content":"x","delay_seconds":-3}"#,
        r#"{"conversation_id":"c3","turn":1,"role":"user","content":"x"}"#,
        r#"{"conversation_id":"c3","turn":2,"role":"assistant","tool_calls":[{"id":"k","type":"function","function":{"name":"f","arguments":"{}"}}]}"#,
        r#"{"conversation_id":"c3","turn":3,"role":"user","content":"y"}"#,
    ]);
    let e = errors(&text);
    assert_eq!(
        e.iter().map(|e| e.line.unwrap()).collect::<Vec<_>>(),
        [1, 2, 3, 6],
        "{e:#?}"
    );
    check(
        &e[0],
        1,
        Some("c1"),
        Some("role"),
        "expected the first row to be \"user\"",
    );
    check(&e[1], 2, None, None, "invalid JSON");
    check(
        &e[2],
        3,
        Some("c2"),
        Some("delay_seconds"),
        "from 0 to 86400",
    );
    check(
        &e[3],
        6,
        Some("c3"),
        Some("role"),
        "cannot directly follow an assistant row with tool_calls",
    );
}

#[test]
fn a_field_type_error_does_not_cascade_into_rule_errors() {
    // `content: 42` is reported once, not also as "a user row needs non-empty content".
    let text = jsonl(&[r#"{"conversation_id":"c1","turn":1,"role":"user","content":42}"#]);
    one(&text, 1, Some("c1"), Some("content"), "found a number");
}

#[test]
fn display_summarises_beyond_fifty_errors() {
    let rows: Vec<String> = (0..60)
        .map(|i| {
            format!(r#"{{"conversation_id":"c{i}","turn":1,"role":"assistant","content":"x"}}"#)
        })
        .collect();
    let text = rows.join("\n");
    let e = Dataset::parse(PATH, &text).unwrap_err();
    assert_eq!(e.0.len(), 60);
    let shown = e.to_string();
    assert_eq!(shown.lines().count(), 51);
    assert!(shown.ends_with("... and 10 more errors"), "{shown}");
}
