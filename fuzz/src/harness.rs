//! The properties the fuzz targets check, as plain functions of the input bytes.
//!
//! Why a separate file: the same properties run in two places — under libFuzzer
//! (`fuzz_targets/*.rs`, nightly, `cargo fuzz run …`) and, on stable, in the main workspace's
//! tests (`dataset/tests/fuzz_harness.rs` includes this file and feeds it seeds plus
//! deterministic mutations). It depends only on `tokentap-core` and `tokentap-dataset`.

#![allow(dead_code)] // each includer uses one or both entry points

use tokentap_core::chunk::ChunkInfo;
use tokentap_core::sse::Framer;
use tokentap_dataset::stats::stats;
use tokentap_dataset::{Dataset, Role};

/// Dataset rows: `data` as UTF-8 text (other inputs are skipped) through `Dataset::parse`.
///
/// Properties: never panics; a dataset that loads satisfies docs/benchmark.md#dataset (ids
/// printable ASCII, turns exactly 1..N, role sequence, tool rows after tool calls) and `stats` runs
/// on it; an input that fails has at least one error, errors are in line order and each names a
/// line of the input.
pub fn dataset_rows(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Dataset::parse("fuzz.jsonl", text) {
        Ok(ds) => {
            assert!(!ds.conversations.is_empty());
            for c in &ds.conversations {
                assert!(!c.id.is_empty() && c.id.bytes().all(|b| (0x20..=0x7e).contains(&b)));
                assert_eq!(c.rows[0].role, Role::User);
                for (i, r) in c.rows.iter().enumerate() {
                    assert_eq!(r.turn as usize, i + 1);
                }
                for w in c.rows.windows(2) {
                    let ok = match (w[0].role, w[1].role) {
                        (Role::User, next) => next == Role::Assistant,
                        (Role::Assistant, Role::Tool) => w[0].has_tool_calls(),
                        (Role::Assistant, Role::User) => !w[0].has_tool_calls(),
                        (Role::Tool, next) => next != Role::Tool,
                        (Role::Assistant, Role::Assistant) => false,
                    };
                    assert!(ok, "{}: turn {} after turn {}", c.id, w[1].turn, w[0].turn);
                }
            }
            let s = stats(&ds);
            assert_eq!(s.total.trajectories as usize, ds.conversations.len());
            assert_eq!(s.total.client_turns as usize, ds.client_turns());
            let _ = s.render_text();
        }
        Err(e) => {
            assert!(!e.0.is_empty());
            let lines = text.lines().count();
            for w in e.0.windows(2) {
                assert!(w[0].line.unwrap_or(0) <= w[1].line.unwrap_or(0));
            }
            for err in &e.0 {
                assert!(!err.message.is_empty());
                if let Some(l) = err.line {
                    assert!(l >= 1 && l <= lines, "line {l} of {lines}");
                }
            }
        }
    }
}

/// What a framer produced for a whole stream.
#[derive(Debug, PartialEq, Eq)]
struct Framed {
    /// `(data, event)` of each dispatched event.
    events: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// `finish()` flushed an unterminated final event.
    tail: bool,
    comments: u64,
    unknown_fields: u64,
}

fn frame(pieces: &[&[u8]]) -> Framed {
    let mut f = Framer::new();
    let mut events = Vec::new();
    let mut on_event = |e: tokentap_core::sse::Event<'_>| {
        events.push((e.data.to_vec(), e.event.map(<[u8]>::to_vec)))
    };
    for p in pieces {
        f.feed(p, &mut on_event);
    }
    let tail = f.finish(&mut on_event);
    let stats = f.stats();
    assert_eq!(stats.events as usize, events.len());
    Framed {
        events,
        tail,
        comments: stats.comments,
        unknown_fields: stats.unknown_fields,
    }
}

/// `data[0] % 8` cut points (two bytes each, little-endian, modulo the stream's length, sorted),
/// then the stream; `None` when the input is too short for its cut points.
fn cut_points(data: &[u8]) -> Option<(Vec<usize>, &[u8])> {
    let (&n, rest) = data.split_first()?;
    let n = usize::from(n % 8);
    if rest.len() < 2 * n {
        return None;
    }
    let (cut_bytes, stream) = rest.split_at(2 * n);
    let mut cuts: Vec<usize> = cut_bytes
        .chunks_exact(2)
        .map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (stream.len() + 1))
        .collect();
    cuts.sort_unstable();
    Some((cuts, stream))
}

/// `stream` cut at `cuts` (sorted offsets).
fn cut<'a>(stream: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::with_capacity(cuts.len() + 1);
    let mut prev = 0;
    for &c in cuts {
        pieces.push(&stream[prev..c]);
        prev = c;
    }
    pieces.push(&stream[prev..]);
    pieces
}

/// SSE: `data[0] % 8` cut points (two bytes each, little-endian, modulo the stream length), then
/// the stream.
///
/// Properties: never panics; feeding the stream whole, cut at the given points, and one byte at
/// a time gives the same events, the same comment count and the same end-of-stream flag; every
/// event's data goes through `ChunkInfo::parse` without panicking.
pub fn sse(data: &[u8]) {
    let Some((cuts, stream)) = cut_points(data) else {
        return;
    };

    let whole = frame(&[stream]);
    let pieces = cut(stream, &cuts);
    assert_eq!(frame(&pieces), whole, "cut at {pieces:?}");
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(frame(&bytes), whole, "byte by byte");

    for (data, _) in &whole.events {
        if let Ok(info) = ChunkInfo::parse(data) {
            // A chunk without choices carries no text.
            if info.choices == 0 {
                assert!(!info.carries_text() && info.finish_reason.is_none());
            }
        }
    }
}

/// A chat chunk (one SSE `data` payload, or a whole response body) read both ways: by the
/// proxy's scan (`ChunkInfo::scan_with_id`) and by serde_json (`ChunkInfo::deserialize_with_id`).
///
/// Properties: never panics; where the scan reads a chunk, serde_json reads it too, to the same
/// `ChunkInfo` and response id (the scan never accepts what serde_json refuses, never reads a
/// field differently); `ChunkInfo::parse_with_id` gives serde_json's answer, value or error.
pub fn chat_chunk(data: &[u8]) {
    let by_serde = ChunkInfo::deserialize_with_id(data);
    if let Some(scanned) = ChunkInfo::scan_with_id(data) {
        match &by_serde {
            Ok(read) => assert_eq!(&scanned, read, "{:?}", String::from_utf8_lossy(data)),
            Err(e) => panic!(
                "the scan read what serde_json refuses ({e}): {:?}",
                String::from_utf8_lossy(data)
            ),
        }
    }
    match (ChunkInfo::parse_with_id(data), by_serde) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "parse_with_id {a:?} against serde_json {b:?}: {:?}",
            String::from_utf8_lossy(data)
        ),
    }
}

/// The Responses API's (`responses_events`) or the Messages API's (`messages_events`) events:
/// `data[0] % 8` cut points as for [`sse`], then a byte stream, framed and read as `api`.
///
/// Properties: never panics; a [`tokentap_core::timeline::Timeline`] fed the stream whole, cut at
/// the given points and byte by byte measures the same (events, text chunks, tokens, end,
/// errors, response id, usage); the stream's end is seen exactly when some event was the API's
/// end event; a text chunk is recorded for each token-carrying event and no other; the whole input read as one non-streaming
/// body, and the stream put back together in chat form, do not panic either.
pub fn api_events(api: tokentap_core::events::Api, data: &[u8]) {
    use tokentap_core::timeline::Timeline;
    let Some((cuts, stream)) = cut_points(data) else {
        return;
    };
    let measure = |pieces: &[&[u8]]| {
        let mut tl = Timeline::new(0, 8).with_api(api);
        let mut f = Framer::new();
        let mut t = 0u64;
        let mut ends = 0u32;
        let mut texts = 0usize;
        let mut on = |tl: &mut Timeline, e: tokentap_core::sse::Event<'_>, t: u64| {
            if e.is_done() {
                tl.on_done();
            } else if let Some(info) = tl.on_data(t, e.data) {
                ends += u32::from(info.end);
                texts += usize::from(info.carries_text());
            }
        };
        for p in pieces.iter().filter(|p| !p.is_empty()) {
            t += 1;
            tl.on_bytes(t);
            f.feed(p, |e| on(&mut tl, e, t));
        }
        f.finish(|e| on(&mut tl, e, t));
        let m = tl.finish(Some(t));
        // One text chunk per token-carrying event, and only those.
        assert_eq!(m.chunks.iter().filter(|c| c.text).count(), texts);
        (
            m.events,
            m.chunks.iter().filter(|c| c.text).count(),
            m.output_tokens,
            m.done,
            m.error_events,
            m.malformed_events,
            m.response_id,
            m.prompt_tokens,
            ends,
        )
    };
    let whole = measure(&[stream]);
    let pieces = cut(stream, &cuts);
    let measured_cut = measure(&pieces);
    // Times differ with the cuts; what was measured does not.
    assert_eq!(measured_cut, whole, "cut at {pieces:?}");
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(measure(&bytes), whole, "byte by byte");
    // `done` without a `[DONE]` event comes only from an end event.
    let framed = frame(&[stream]);
    let dones = framed
        .events
        .iter()
        .filter(|(d, _)| d.as_slice() == b"[DONE]")
        .count();
    if dones == 0 {
        assert_eq!(
            whole.3,
            whole.8 > 0,
            "the end is seen exactly when an end event came"
        );
    }
    let mut body = Timeline::new(0, 0).with_api(api);
    body.on_bytes(1);
    body.on_json_body(stream);
    let _ = body.finish(None);
    let mut asm = tokentap_core::convert::Assembled::default();
    for (d, _) in &framed.events {
        asm.take(api, d);
    }
    let _ = asm.message();
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(stream) {
        let _ = tokentap_core::convert::request(api, &v);
        let _ = tokentap_core::convert::response(api, &v, &mut Default::default());
    }
}
