//! The properties of the other parsers of outside input, as plain functions of the
//! input bytes — run under libFuzzer by `fuzz_targets/{http1,sniff,compare_readers,capture}.rs`
//! and on stable by the root package's `tests/fuzz_outside.rs` (committed corpus + seeds +
//! deterministic mutations).
//!
//! - `http1`: `core::http1`'s response head parser and body decoder (length, chunked, close),
//!   which read every upstream response of the proxy and the replay.
//! - `sniff`: the proxy's request-body sniffer.
//! - `compare_readers`: every reader of a third-party client's files in `compare`.
//! - `capture`: the accuracy capture of streamed chat-completion JSON (`mlperf::output`) and
//!   the scorer's extraction of intents and bash actions from it.

#![allow(dead_code)] // each includer uses some entry points

use std::path::Path;
use tokentap_core::http1::{parse_head, Decoder, Framing};

/// Cut points: `data[0] % 8` positions (u16 LE each) into the rest, sorted.
fn cuts(data: &[u8]) -> Option<(Vec<usize>, &[u8])> {
    let (&n, rest) = data.split_first()?;
    let n = usize::from(n % 8);
    if rest.len() < 2 * n {
        return None;
    }
    let (cut_bytes, stream) = rest.split_at(2 * n);
    let mut c: Vec<usize> = cut_bytes
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (stream.len() + 1))
        .collect();
    c.sort_unstable();
    Some((c, stream))
}

fn pieces<'a>(stream: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut prev = 0;
    for &c in cuts {
        out.push(&stream[prev..c]);
        prev = c;
    }
    out.push(&stream[prev..]);
    out
}

/// What a decoder made of a body fed in `pieces`.
#[derive(Debug, PartialEq, Eq)]
struct Decoded {
    data: Vec<u8>,
    /// Bytes that belonged to the response.
    used: usize,
    done: bool,
    failed: bool,
}

fn decode(framing: Framing, pieces: &[&[u8]]) -> Decoded {
    let mut d = Decoder::new(framing);
    let mut out = Decoded {
        data: Vec::new(),
        used: 0,
        done: false,
        failed: false,
    };
    for p in pieces {
        if d.is_done() {
            break;
        }
        match d.feed(p, |x| out.data.extend_from_slice(x)) {
            Ok(n) => {
                assert!(n <= p.len());
                out.used += n;
                if n < p.len() {
                    assert!(d.is_done(), "stopped early without being done");
                    break;
                }
            }
            Err(_) => {
                // Where a failing piece stopped is not reported: compare what came out.
                out.failed = true;
                out.used = 0;
                break;
            }
        }
    }
    out.done = d.is_done();
    out
}

/// HTTP/1.1 responses: cut points, then a response (head and body).
///
/// Properties: never panics; a head found in a prefix is the head of the whole (more bytes never
/// change a complete head); the body decodes to the same bytes, the same end and the same
/// failure whole, at the cut points and byte by byte; a length-framed body yields at most its
/// length; decoded data never exceeds the input.
pub fn http1(data: &[u8]) {
    let Some((cuts, stream)) = cuts(data) else {
        return;
    };
    let whole = parse_head(stream);
    for &c in &cuts {
        if let Ok(Some(h)) = parse_head(&stream[..c]) {
            assert_eq!(Ok(Some(h)), whole, "a head complete in a prefix changed");
        }
    }
    let Ok(Some((len, head))) = whole else {
        return;
    };
    assert!(len <= stream.len());
    let body = &stream[len..];
    let all = decode(head.framing, &[body]);
    assert!(all.data.len() <= body.len());
    if let Framing::Length(n) = head.framing {
        assert!(all.data.len() as u64 <= n);
    }
    let body_cuts: Vec<usize> = cuts.iter().map(|c| c.saturating_sub(len)).collect();
    assert_eq!(decode(head.framing, &pieces(body, &body_cuts)), all, "cut");
    let bytes: Vec<&[u8]> = body.chunks(1).collect();
    assert_eq!(decode(head.framing, &bytes), all, "byte by byte");
}

/// Request bodies through the proxy's sniffer.
///
/// Properties: never panics; a body that is a JSON object is read, and what the sniffer reports
/// agrees with a full parse of the same bytes. (The sniffer skips what it does not need without
/// validating it — a lone surrogate escape in a skipped string does not stop it — so it may read
/// fields from a body a strict parser refuses; that is not compared.)
pub fn sniff(data: &[u8]) {
    let info = tokentap_proxy::sniff::ReqInfo::parse(data);
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Some(info) = info else {
        // Only a non-object, or an object whose measured fields have other types, is refused.
        return;
    };
    assert!(v.is_object(), "the sniffer accepted a non-object");
    assert_eq!(info.bytes, data.len() as u64);
    if let Some(n) = info.messages {
        assert_eq!(
            Some(n as usize),
            v["messages"].as_array().map(Vec::len),
            "message count"
        );
    }
    if let Some(m) = &info.model {
        assert_eq!(v["model"].as_str(), Some(m.as_str()));
    }
}

/// Third-party client files through every `compare` reader.
///
/// Properties: never panics; an error names the file it read.
pub fn compare_readers(data: &[u8]) {
    use tokentap_compare::client::Clock;
    use tokentap_compare::formats::{aiperf, inference_perf, mlperf, tokentap};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let p = Path::new("fuzz-input.jsonl");
    let named = |e: tokentap_compare::error::CompareError| {
        let m = e.to_string();
        assert!(m.contains("fuzz-input"), "an error that names no file: {m}");
    };
    if let Err(e) = aiperf::parse(p, text) {
        named(e);
    }
    if let Err(e) = aiperf::parse_summary(p, text) {
        named(e);
    }
    if let Err(e) = inference_perf::parse(p, text) {
        named(e);
    }
    if let Err(e) = mlperf::parse(p, text, &mlperf::Extras::default()) {
        named(e);
    }
    for clock in [Clock::Mono, Clock::Wall] {
        if let Err(e) = tokentap::parse(p, text, clock) {
            named(e);
        }
    }
}

/// Streamed chat-completion chunks (one event's data per line) through the accuracy capture,
/// then the scorer's extraction of intents and bash actions.
///
/// Properties: never panics; capturing is deterministic (the same events give the same output);
/// the parts after the first chunk are no longer than the whole parts.
pub fn capture(data: &[u8]) {
    use tokentap_mlperf::scorer::{bash_actions, command_actions, model_intent, ModelMessage};
    let run = || {
        let mut a = tokentap_mlperf::Accumulator::default();
        for line in data.split(|&b| b == b'\n') {
            a.feed(line);
        }
        a.output()
    };
    let out = run();
    assert_eq!(out, run(), "capture is not deterministic");
    let whole = out.message_parts();
    let after = out.message_parts_after_first_chunk();
    assert!(after.content.len() <= whole.content.len());
    assert!(
        after.reasoning.as_ref().map_or(0, String::len)
            <= whole.reasoning.as_ref().map_or(0, String::len)
    );
    let m = ModelMessage {
        content: Some(whole.content.clone()),
        reasoning_content: whole.reasoning.clone(),
        tool_calls: whole.tool_calls.clone(),
    };
    if let Some(i) = model_intent(&m) {
        assert!(i.len() == 4 && i.starts_with('I'), "intent {i:?}");
    }
    let _ = bash_actions(whole.tool_calls.as_deref());
    let _ = command_actions(&whole.content);
}
