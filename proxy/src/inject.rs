//! `--inject-usage`: ask the server for token usage the client did not ask for, and take it out
//! again on the way back so the client receives the bytes it would have got directly.
//!
//! Request side: the body has to be rewritten, so it is buffered (documented cost: one copy of
//! the request and a re-serialisation, once per request; the streamed response is unaffected in
//! time to first byte but see below). `stream_options.include_usage` is set, and
//! `continuous_usage_stats` too with `--inject-continuous-usage` (vLLM honours it, others ignore
//! it). Nothing is injected into non-streaming requests: their responses always carry usage.
//!
//! Response side ([`Stripper`]): the server's SSE is cut into whole events (an event split across
//! frames waits for its end), and
//! - the usage-only final chunk (`"choices":[]` with `usage`) is dropped when the client did not
//!   ask for `include_usage`;
//! - the top-level `usage` member of chunks with choices is removed when the client did not ask
//!   for it (vLLM adds it only with continuous usage; OpenAI-style servers add `"usage":null`
//!   once `include_usage` is on). The member is cut out of the JSON text, so every other byte
//!   is the server's own.
//!
//! `--inject-metrics` asks for the engine's own per-request timing the same way (vLLM's
//! `include_metrics`, returned as a `metrics` member of the final usage chunk — so usage is asked
//! for too): the member is cut out of whatever chunk carries it when the client did not ask.
//!
//! Measurement always sees the server's original bytes (with usage): that is the point.
//! Limitation: a server that would have sent `"usage":null` to a client that asked for
//! `include_usage` but not continuous usage, when the proxy injects continuous usage, gets the
//! member removed rather than set back to `null`.

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use tokentap_core::chunk::ChunkInfo;

/// What the proxy changed in a request, and so what it must strip from the response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Plan {
    /// Drop the usage-only final chunk.
    pub drop_usage_chunk: bool,
    /// Remove `usage` from chunks that have choices.
    pub strip_chunk_usage: bool,
    /// Remove the engine's `metrics` from any chunk that carries them.
    pub strip_metrics: bool,
}

impl Plan {
    /// Nothing to add or strip.
    pub fn is_noop(&self) -> bool {
        !self.drop_usage_chunk && !self.strip_chunk_usage && !self.strip_metrics
    }
}

/// What the proxy asks the server for on the client's behalf.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ask {
    /// `stream_options.continuous_usage_stats` besides `include_usage`.
    pub continuous: bool,
    /// The engine's per-request timing: `include_metrics`.
    pub metrics: bool,
}

/// Rewrites a request body. Returns the body to send and the plan, or `None` when nothing needs
/// injecting (not JSON, not streaming, or the client already asked for everything).
pub fn rewrite_request(body: &[u8], ask: Ask) -> Option<(Bytes, Plan)> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let obj = v.as_object_mut()?;
    if obj.get("stream").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    let mut plan = Plan::default();
    if ask.metrics && obj.get("include_metrics").and_then(Value::as_bool) != Some(true) {
        obj.insert("include_metrics".into(), Value::Bool(true));
        plan.strip_metrics = true;
    }
    let continuous = ask.continuous;
    let so = obj
        .entry("stream_options")
        .or_insert_with(|| Value::Object(Default::default()));
    if so.is_null() {
        *so = Value::Object(Default::default());
    }
    let so = so.as_object_mut()?;
    let had_usage = so.get("include_usage").and_then(Value::as_bool) == Some(true);
    let had_cont = so.get("continuous_usage_stats").and_then(Value::as_bool) == Some(true);
    if !had_usage {
        so.insert("include_usage".into(), Value::Bool(true));
        plan.drop_usage_chunk = true;
        plan.strip_chunk_usage = true;
    }
    if continuous && !had_cont {
        so.insert("continuous_usage_stats".into(), Value::Bool(true));
        plan.strip_chunk_usage = true;
    }
    if plan.is_noop() {
        return None;
    }
    let out = serde_json::to_vec(&v).ok()?;
    Some((Bytes::from(out), plan))
}

/// Cuts the response into whole SSE events and removes what the client did not ask for.
///
/// An event is held until its end, at most `limit` bytes of it (`--max-event-bytes`): one that
/// grows past it is forwarded as it is, unedited, up to its end (its usage, if it had any, then
/// reaches the client — counted in [`Stripper::passed`]). The search for an event's end resumes
/// where the last one stopped, so a long event costs its length once, not once per frame.
#[derive(Debug)]
pub struct Stripper {
    plan: Plan,
    pending: BytesMut,
    out: BytesMut,
    /// Events dropped or edited, for the record's honesty.
    pub edited: u32,
    /// Events too long to hold, forwarded unedited.
    pub passed: u32,
    limit: usize,
    /// `pending[..scanned]` holds no event end (bar its last bytes, rescanned).
    scanned: usize,
    /// Forwarding the rest of an oversized event; `tail` is its last bytes (an end may span
    /// frames).
    passing: bool,
    tail: Vec<u8>,
}

impl Stripper {
    /// A stripper of what `plan` added.
    pub fn new(plan: Plan) -> Self {
        Self::with_limit(plan, usize::MAX)
    }

    /// The same, holding at most `limit` bytes of a partial event.
    pub fn with_limit(plan: Plan, limit: usize) -> Self {
        Stripper {
            plan,
            pending: BytesMut::new(),
            out: BytesMut::new(),
            edited: 0,
            passed: 0,
            limit,
            scanned: 0,
            passing: false,
            tail: Vec::new(),
        }
    }

    /// Feeds one frame; returns the bytes to forward now (possibly empty).
    pub fn push(&mut self, mut data: &[u8]) -> Bytes {
        if self.passing {
            let mut probe = std::mem::take(&mut self.tail);
            let keep = probe.len();
            probe.extend_from_slice(data);
            match event_end(&probe) {
                Some(end) if end > keep => {
                    self.out.extend_from_slice(&data[..end - keep]);
                    data = &data[end - keep..];
                    self.passing = false;
                }
                _ => {
                    self.out.extend_from_slice(data);
                    let from = probe.len().saturating_sub(3);
                    self.tail = probe.split_off(from);
                    return self.out.split().freeze();
                }
            }
        }
        self.pending.extend_from_slice(data);
        loop {
            let from = self.scanned.saturating_sub(3);
            match event_end(&self.pending[from..]) {
                Some(end) => {
                    let ev = self.pending.split_to(from + end);
                    self.scanned = 0;
                    self.event(&ev);
                }
                None => {
                    self.scanned = self.pending.len();
                    break;
                }
            }
        }
        if self.pending.len() > self.limit {
            let held = self.pending.split();
            self.out.extend_from_slice(&held);
            let from = held.len().saturating_sub(3);
            self.tail = held[from..].to_vec();
            self.scanned = 0;
            self.passing = true;
            self.passed += 1;
        }
        self.out.split().freeze()
    }

    /// End of stream: whatever is left (an unterminated event) goes out untouched.
    pub fn finish(&mut self) -> Bytes {
        let rest = self.pending.split();
        self.out.extend_from_slice(&rest);
        self.out.split().freeze()
    }

    fn event(&mut self, ev: &[u8]) {
        // Only the common one-line `data: {...}` event is edited; anything else passes.
        let body_end = ev
            .iter()
            .rposition(|&b| b != b'\n' && b != b'\r')
            .map_or(0, |i| i + 1);
        let (body, term) = ev.split_at(body_end);
        let Some(payload) = body.strip_prefix(b"data:") else {
            self.out.extend_from_slice(ev);
            return;
        };
        if memchr::memchr2(b'\n', b'\r', body).is_some() {
            self.out.extend_from_slice(ev);
            return;
        }
        let json = payload.strip_prefix(b" ").unwrap_or(payload);
        let Ok(info) = ChunkInfo::parse(json) else {
            self.out.extend_from_slice(ev);
            return;
        };
        if info.choices == 0 && info.usage.is_some() && self.plan.drop_usage_chunk {
            self.edited += 1;
            return;
        }
        // The members to cut, one after the other (a chunk that has both loses both).
        let mut keys: [Option<&[u8]>; 2] = [None, None];
        if self.plan.strip_metrics && memchr::memmem::find(json, b"\"metrics\"").is_some() {
            keys[0] = Some(b"metrics");
        }
        if info.choices > 0 && self.plan.strip_chunk_usage {
            keys[1] = Some(b"usage");
        }
        let mut cut: Option<Vec<u8>> = None;
        for key in keys.into_iter().flatten() {
            let cur = cut.as_deref().unwrap_or(json);
            if let Some((a, b)) = member_span(cur, key) {
                cut = Some([&cur[..a], &cur[b..]].concat());
            }
        }
        let Some(cut) = cut else {
            self.out.extend_from_slice(ev);
            return;
        };
        self.edited += 1;
        let start = body.len() - json.len();
        self.out.extend_from_slice(&body[..start]);
        self.out.extend_from_slice(&cut);
        self.out.extend_from_slice(term);
    }
}

/// End (exclusive, including the blank line) of the first complete event in `buf`.
fn event_end(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(p) = memchr::memchr2(b'\n', b'\r', &buf[i..]) {
        let p = i + p;
        // line end at p; length of this line terminator
        let t = if buf[p] == b'\r' {
            if p + 1 >= buf.len() {
                return None; // could be \r\n split: wait for more
            }
            if buf[p + 1] == b'\n' {
                2
            } else {
                1
            }
        } else {
            1
        };
        let next = p + t;
        // a blank line follows?
        match buf.get(next) {
            Some(b'\n') => return Some(next + 1),
            Some(b'\r') => {
                return match buf.get(next + 1) {
                    Some(b'\n') => Some(next + 2),
                    Some(_) => Some(next + 1),
                    None => None,
                };
            }
            Some(_) => i = next,
            None => return None,
        }
    }
    None
}

/// Span `[a, b)` to delete so that the top-level member `key` disappears from the JSON object
/// `json`, comma included. `None` if the object has no such member.
fn member_span(json: &[u8], key: &[u8]) -> Option<(usize, usize)> {
    let (a, b) = member_span_raw(json, key)?;
    // Spans come from a scan of JSON that parsed; clamp anyway so no input can make the
    // caller slice out of bounds.
    (a <= b && b <= json.len()).then_some((a, b))
}

fn member_span_raw(json: &[u8], key: &[u8]) -> Option<(usize, usize)> {
    let mut depth = 0i32;
    let mut i = 0;
    // (start of member incl. preceding comma, whether it was the first member)
    let mut prev_comma: Option<usize> = None;
    let mut member_start: Option<usize> = None;
    while i < json.len() {
        match json[i] {
            b'"' => {
                let s = i;
                i += 1;
                while i < json.len() && json[i] != b'"' {
                    if json[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if depth == 1 && member_start.is_some() && &json[s + 1..i.min(json.len())] == key {
                    // is it a key? next non-space must be ':'
                    let mut j = i + 1;
                    while j < json.len() && json[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if json.get(j) == Some(&b':') {
                        let vstart = j + 1;
                        let vend = value_end(json, vstart)?;
                        let ms = member_start?;
                        return Some(match prev_comma {
                            Some(c) => (c, vend),
                            None => {
                                // first member: delete through the following comma
                                let mut k = vend;
                                while k < json.len() && json[k].is_ascii_whitespace() {
                                    k += 1;
                                }
                                if json.get(k) == Some(&b',') {
                                    (ms, k + 1)
                                } else {
                                    (ms, vend)
                                }
                            }
                        });
                    }
                }
                member_start = None;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth == 1 {
                    member_start = Some(i + 1);
                    prev_comma = None;
                }
            }
            b'}' | b']' => depth -= 1,
            b',' if depth == 1 => {
                prev_comma = Some(i);
                member_start = Some(i + 1);
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// End (exclusive) of the JSON value starting at or after `i`, trailing spaces excluded.
fn value_end(json: &[u8], mut i: usize) -> Option<usize> {
    while i < json.len() && json[i].is_ascii_whitespace() {
        i += 1;
    }
    let mut depth = 0i32;
    while i < json.len() {
        match json[i] {
            b'"' => {
                i += 1;
                while i < json.len() && json[i] != b'"' {
                    if json[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if depth == 0 {
                    return Some((i + 1).min(json.len()));
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                if depth == 0 {
                    return Some(i);
                }
                depth -= 1;
                if depth == 0 {
                    return Some((i + 1).min(json.len()));
                }
            }
            b',' if depth == 0 => return Some(i),
            c if depth == 0 && c.is_ascii_whitespace() => return Some(i),
            _ => {}
        }
        i += 1;
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_gets_usage_and_plan_says_strip() {
        let ask = |continuous| Ask {
            continuous,
            metrics: false,
        };
        let (b, plan) = rewrite_request(br#"{"model":"m","stream":true}"#, ask(false)).unwrap();
        assert_eq!(
            &b[..],
            br#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#
        );
        assert!(plan.drop_usage_chunk && plan.strip_chunk_usage);
        let (b, plan) = rewrite_request(
            br#"{"stream":true,"stream_options":{"include_usage":true}}"#,
            ask(true),
        )
        .unwrap();
        assert!(!plan.drop_usage_chunk && plan.strip_chunk_usage);
        assert!(std::str::from_utf8(&b)
            .unwrap()
            .contains("continuous_usage_stats"));
        assert!(rewrite_request(br#"{"stream":false}"#, ask(true)).is_none());
        assert!(rewrite_request(
            br#"{"stream":true,"stream_options":{"include_usage":true}}"#,
            ask(false)
        )
        .is_none());
        assert!(rewrite_request(b"nope", ask(true)).is_none());
    }

    /// `--inject-metrics`: `include_metrics` and usage asked for; the usage chunk dropped when the
    /// client asked for no usage, its `metrics` cut when it did; a client that asked for both
    /// gets everything untouched.
    #[test]
    fn metrics_are_asked_for_and_cut_back_out() {
        let ask = Ask {
            continuous: false,
            metrics: true,
        };
        let (b, plan) = rewrite_request(br#"{"stream":true}"#, ask).unwrap();
        assert_eq!(
            &b[..],
            br#"{"stream":true,"include_metrics":true,"stream_options":{"include_usage":true}}"#
        );
        assert!(plan.drop_usage_chunk && plan.strip_metrics);
        let (_, plan) = rewrite_request(
            br#"{"stream":true,"stream_options":{"include_usage":true}}"#,
            ask,
        )
        .unwrap();
        assert!(!plan.drop_usage_chunk && plan.strip_metrics);
        let mut s = Stripper::new(plan);
        let usage = b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3},\"metrics\":{\"queue_time_ms\":1.5}}\n\n";
        assert_eq!(
            &s.push(usage)[..],
            &b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n"[..]
        );
        // Both members of one chunk, next to each other and apart.
        let mut s = Stripper::new(Plan {
            strip_chunk_usage: true,
            strip_metrics: true,
            ..Plan::default()
        });
        for (i, o) in [
            (
                &b"data: {\"choices\":[{\"text\":\"a\"}],\"usage\":{\"x\":1},\"metrics\":{}}\n\n"[..],
                &b"data: {\"choices\":[{\"text\":\"a\"}]}\n\n"[..],
            ),
            (
                b"data: {\"metrics\":{},\"choices\":[{\"text\":\"a\"}],\"usage\":null}\n\n",
                b"data: {\"choices\":[{\"text\":\"a\"}]}\n\n",
            ),
            (
                b"data: {\"usage\":null,\"metrics\":{},\"choices\":[{\"text\":\"a\"}]}\n\n",
                b"data: {\"choices\":[{\"text\":\"a\"}]}\n\n",
            ),
        ] {
            assert_eq!(&s.push(i)[..], o, "{}", String::from_utf8_lossy(i));
        }
        assert!(rewrite_request(
            br#"{"stream":true,"include_metrics":true,"stream_options":{"include_usage":true}}"#,
            ask
        )
        .is_none());
    }

    #[test]
    fn member_removal_keeps_every_other_byte() {
        let cases: [(&[u8], &[u8]); 4] = [
            (br#"{"a":1,"usage":{"x":[1,2]}}"#, br#"{"a":1}"#),
            (br#"{"usage":null,"a":"u,}"}"#, br#"{"a":"u,}"}"#),
            (
                br#"{"a":{"usage":1},"usage":2,"b":3}"#,
                br#"{"a":{"usage":1},"b":3}"#,
            ),
            (br#"{"a":"\"usage\":1"}"#, br#"{"a":"\"usage\":1"}"#),
        ];
        for (i, o) in cases {
            let got = match member_span(i, b"usage") {
                Some((a, b)) => [&i[..a], &i[b..]].concat(),
                None => i.to_vec(),
            };
            assert_eq!(got, o, "{}", String::from_utf8_lossy(i));
        }
    }

    /// Fuzz-style: mutated chunks and random bytes never panic the scanner or the stripper, and
    /// the stripper never invents bytes (its output is a subsequence of its input).
    #[test]
    fn arbitrary_input_never_panics() {
        let seeds: [&[u8]; 3] = [
            br#"{"id":"x","choices":[{"delta":{"content":"a\"b"}}],"usage":{"completion_tokens":3}}"#,
            br#"{"usage":null,"choices":[{"text":"q"}]}"#,
            br#"{"choices":[],"usage":{"prompt_tokens":1}}"#,
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let plan = Plan {
            drop_usage_chunk: true,
            strip_chunk_usage: true,
            strip_metrics: true,
        };
        for round in 0..3000 {
            let mut v = seeds[round % 3].to_vec();
            for _ in 0..(next() % 6) {
                let pos = (next() as usize) % (v.len() + 1);
                match next() % 3 {
                    0 if pos < v.len() => {
                        v.remove(pos);
                    }
                    1 => v.insert(pos, b"\"{}[],:\\ u"[(next() % 10) as usize]),
                    _ => v.truncate(pos),
                }
            }
            let _ = member_span(&v, b"usage");
            let mut ev = b"data: ".to_vec();
            ev.extend_from_slice(&v);
            ev.extend_from_slice(b"\n\n");
            let mut s = Stripper::new(plan);
            let cut = (next() as usize) % (ev.len() + 1);
            let mut out = s.push(&ev[..cut]).to_vec();
            out.extend_from_slice(&s.push(&ev[cut..]));
            out.extend_from_slice(&s.finish());
            let mut it = ev.iter();
            assert!(
                out.iter().all(|b| it.any(|c| c == b)),
                "output not a subsequence"
            );
        }
    }

    #[test]
    fn an_event_past_the_limit_is_forwarded_unedited_and_the_next_is_edited() {
        let plan = Plan {
            drop_usage_chunk: true,
            strip_chunk_usage: true,
            strip_metrics: true,
        };
        let big = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{}\"}}}}],\"usage\":{{\"completion_tokens\":9}}}}\n\n",
            "x".repeat(5000)
        );
        let served = format!(
            "{big}data: {{\"choices\":[{{\"delta\":{{\"content\":\"hi\"}}}}],\"usage\":{{\"completion_tokens\":1}}}}\n\ndata: [DONE]\n\n"
        );
        let want = format!(
            "{big}data: {{\"choices\":[{{\"delta\":{{\"content\":\"hi\"}}}}]}}\n\ndata: [DONE]\n\n"
        );
        let b = served.as_bytes();
        for step in [1, 7, 100, 999, 4096] {
            let mut s = Stripper::with_limit(plan, 1024);
            let mut out = Vec::new();
            for piece in b.chunks(step) {
                out.extend_from_slice(&s.push(piece));
                assert!(s.pending.len() <= 1024 + step, "held {}", s.pending.len());
            }
            out.extend_from_slice(&s.finish());
            assert_eq!(String::from_utf8(out).unwrap(), want, "step {step}");
            assert_eq!((s.passed, s.edited), (1, 1), "step {step}");
        }
    }

    #[test]
    fn stripper_restores_the_direct_stream_across_any_split() {
        let served = concat!(
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":{\"completion_tokens\":0}}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":{\"completion_tokens\":1}}\r\n\r\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n",
            "data: [DONE]\n\n"
        );
        let direct = concat!(
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\r\n\r\n",
            "data: [DONE]\n\n"
        );
        let plan = Plan {
            drop_usage_chunk: true,
            strip_chunk_usage: true,
            strip_metrics: true,
        };
        let b = served.as_bytes();
        for i in 0..=b.len() {
            for j in i..=b.len() {
                let mut s = Stripper::new(plan);
                let mut out = Vec::new();
                for piece in [&b[..i], &b[i..j], &b[j..]] {
                    out.extend_from_slice(&s.push(piece));
                }
                out.extend_from_slice(&s.finish());
                assert_eq!(String::from_utf8(out).unwrap(), direct, "split {i},{j}");
            }
        }
    }
}
