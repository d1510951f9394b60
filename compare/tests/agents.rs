//! The coding agents' own accounts of a session against the wire, on files the agents wrote:
//! Claude Code 2.1.332 (`-p --output-format json`, and `stream-json`) and Codex CLI 0.169.1
//! (`exec --json`), each run through `tokentap proxy` to the sim on a small task (list the files,
//! say what it found: two requests, one tool run), with the proxy's records of the same run
//! (`fixtures/agents/*/records.jsonl`, their recorded content left out).

use std::path::{Path, PathBuf};
use tokentap_compare::client::WireTotal;
use tokentap_compare::{compare, formats, Format, JoinMethod, Opts, Verdict};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(name)
}

fn judged(dir: &str, client: &str) -> tokentap_compare::Report {
    compare(&Opts::new(
        Format::Auto,
        fixture(&format!("{dir}/{client}")),
        vec![fixture(&format!("{dir}/records.jsonl"))],
    ))
    .expect("compared")
}

fn verdict_of(r: &tokentap_compare::Report, of: WireTotal) -> (Verdict, f64, Option<f64>) {
    let t = r
        .totals
        .iter()
        .find(|t| t.of == of)
        .unwrap_or_else(|| panic!("{of:?} judged: {:?}", r.totals));
    (t.verdict, t.client, t.wire)
}

/// Claude Code's tokens are the wire's to the token; its `duration_api_ms` holds its own
/// client's time besides the model's, and is judged against the wire's model time.
#[test]
fn claude_codes_usage_equals_the_wire_and_its_api_time_is_judged() {
    for (dir, file, joined) in [
        ("claude-json", "claude.json", 0),
        ("claude-stream", "claude.jsonl", 2),
    ] {
        let r = judged(dir, file);
        assert_eq!(r.format, Format::ClaudeCode, "{dir}");
        for of in [
            WireTotal::PromptTokens,
            WireTotal::CachedTokens,
            WireTotal::OutputTokens,
        ] {
            let (v, client, wire) = verdict_of(&r, of);
            assert_eq!(v, Verdict::Pass, "{dir} {of:?}: {client} vs {wire:?}");
        }
        let (v, client, wire) = verdict_of(&r, WireTotal::ModelTimeMs);
        let wire = wire.expect("the wire's model time");
        assert!(wire > 0.0 && client > wire, "{client} vs {wire}");
        assert_eq!(
            v,
            Verdict::Fail,
            "{client} ms claimed, {wire} ms on the wire"
        );
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(
            r.reasons.iter().any(|x| x.contains("duration_api_ms")),
            "{:?}",
            r.reasons
        );
        assert!(
            r.totals.iter().all(|t| t.wire_requests == 2),
            "{:?}",
            r.totals
        );
        // stream-json: every API call the agent reports is the wire's, by its message id.
        assert_eq!(r.counts.joined, joined, "{dir}");
        assert_eq!(r.counts.by_response_id, joined);
        if joined > 0 {
            assert!(r.pairs.iter().all(|p| p.join == JoinMethod::ResponseId));
            assert_eq!(r.counts.wire_only, 0);
        }
        let text = r.render_text();
        assert!(
            text.contains("the client's totals") && text.contains("duration_api_ms"),
            "{text}"
        );
    }
}

/// Codex's usage totals are the wire's; it claims no time.
#[test]
fn codexs_usage_equals_the_wire() {
    let r = judged("codex", "codex.jsonl");
    assert_eq!(r.format, Format::Codex);
    assert_eq!(r.totals.len(), 3);
    assert!(
        r.totals.iter().all(|t| t.verdict == Verdict::Pass),
        "{:?}",
        r.totals
    );
    assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.reasons);
}

/// A file of another agent, or another session's records, is not judged as this one.
#[test]
fn the_wrong_file_or_session_is_refused_or_not_judged() {
    let err = formats::resolve(Format::Codex, &fixture("claude-json/claude.json"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("use --format claude-code"), "{err}");
    // Claude Code's totals against Codex's records: no record of its session.
    let r = compare(&Opts::new(
        Format::ClaudeCode,
        fixture("claude-json/claude.json"),
        vec![fixture("codex/records.jsonl")],
    ))
    .unwrap();
    assert!(r
        .totals
        .iter()
        .all(|t| t.verdict == Verdict::NoData && t.wire.is_none()));
    assert_ne!(r.verdict, Verdict::Pass);
}
