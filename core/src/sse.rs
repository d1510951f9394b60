//! Incremental Server-Sent-Events framer (WHATWG "event stream interpretation").
//!
//! Bytes arrive in whatever pieces the network delivers: an event may be split across reads and
//! one read may hold many events. [`Framer::feed`] takes each piece as it comes and calls back
//! once per complete event. "Need more bytes" is a state (a partial line kept in a reused
//! buffer), never an error.
//!
//! Cost: lines are found with `memchr`; a line wholly inside one piece is read in place, only a
//! line cut by a read boundary is copied. The `data` of an event is copied into one reused buffer
//! (one `memcpy` of a few hundred bytes), so once the buffers have grown to the largest event seen
//! there is no allocation per event. Measured in `benches/sse.rs`.
//!
//! Handled: `\n`, `\r\n` and lone `\r` line ends (also a `\r\n` cut between two reads), comment
//! lines (`: keep-alive`), multi-line `data`, the `event` field, a leading byte-order mark (also
//! one cut between reads), field values with or without the single space after the colon.

use memchr::memchr2;

/// The largest SSE event (or line) a response may send by default, bytes — the replay's and the
/// proxy's `--max-event-bytes`: 16 MiB, far above any real chunk (a full 8k-token response in one
/// event is under 100 KB).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;

/// UTF-8 byte-order mark, stripped at the start of a stream.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// One dispatched event. Borrowed from the framer until the callback returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    /// The `data` field; several `data` lines are joined with `\n`.
    pub data: &'a [u8],
    /// The `event` field, if the event had one.
    pub event: Option<&'a [u8]>,
}

impl Event<'_> {
    /// `data: [DONE]`, the OpenAI end-of-stream sentinel.
    pub fn is_done(&self) -> bool {
        self.data.trim_ascii() == b"[DONE]"
    }
}

/// Counters about what the framer saw; useful to count malformed or keep-alive traffic.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FramerStats {
    /// Events dispatched.
    pub events: u64,
    /// Comment lines (`:` first), typically keep-alives.
    pub comments: u64,
    /// Lines with a field name other than `data`, `event`, `id`, `retry`.
    pub unknown_fields: u64,
    /// Bytes fed.
    pub bytes: u64,
    /// Events dropped unparsed because they grew past the framer's limit
    /// ([`Framer::with_limit`]): their bytes were seen, not held.
    pub oversized: u64,
}

/// The incremental framer. Create one per response stream and reuse it for the whole stream.
#[derive(Debug, Default)]
pub struct Framer {
    /// A line cut by a read boundary.
    partial: Vec<u8>,
    /// `data` of the event being assembled, each line followed by `\n`.
    data: Vec<u8>,
    /// `event` field of the event being assembled.
    event: Vec<u8>,
    has_data: bool,
    has_event: bool,
    /// The previous piece ended in `\r`: a `\n` at the start of the next one belongs to it.
    pending_cr: bool,
    /// Still at the very start of the stream (a BOM may follow).
    at_start: bool,
    /// Bytes of a byte-order mark matched so far at the start (a BOM may be cut between reads).
    bom: u8,
    stats: FramerStats,
    /// Most bytes held for one line and event (0: no limit).
    limit: usize,
    /// Dropping the rest of an oversized event: lines are consumed, not kept, until its end.
    skipping: bool,
    /// While skipping: the current line has bytes (so its end is not the event's end).
    skip_line_bytes: bool,
}

impl Framer {
    /// A framer with the default bound.
    pub fn new() -> Self {
        Framer {
            at_start: true,
            ..Default::default()
        }
    }

    /// A framer that holds at most `limit` bytes of one event: an event that grows past it is
    /// dropped unparsed (counted in [`FramerStats::oversized`]) and the stream goes on at the
    /// next event. Memory per stream is then bounded by `limit` and a read, whatever a server
    /// sends.
    pub fn with_limit(limit: usize) -> Self {
        Framer {
            limit,
            ..Framer::new()
        }
    }

    /// What was seen so far.
    pub fn stats(&self) -> FramerStats {
        self.stats
    }

    /// Bytes held for the line and the event being assembled: what a stream that never ends
    /// its line or event makes the framer keep (a caller bounds it).
    pub fn buffered(&self) -> usize {
        self.partial.len() + self.data.len() + self.event.len()
    }

    /// Feeds one piece of the stream; calls `on_event` for each event it completes.
    pub fn feed(&mut self, mut input: &[u8], mut on_event: impl FnMut(Event<'_>)) {
        self.stats.bytes += input.len() as u64;
        if self.at_start {
            // Match the BOM byte by byte, so that one cut between reads is stripped too (found
            // by the `sse` fuzz target: feeding byte by byte used to keep the BOM).
            while let Some((&b, rest)) = input.split_first() {
                if b == BOM[usize::from(self.bom)] {
                    self.bom += 1;
                    input = rest;
                    if usize::from(self.bom) == BOM.len() {
                        self.at_start = false;
                        break;
                    }
                } else {
                    self.leave_start();
                    break;
                }
            }
            if input.is_empty() {
                return;
            }
        }
        if self.pending_cr && !input.is_empty() {
            self.pending_cr = false;
            if input[0] == b'\n' {
                input = &input[1..];
            }
        }
        while !input.is_empty() {
            match memchr2(b'\n', b'\r', input) {
                Some(end) => {
                    let mut next = end + 1;
                    if input[end] == b'\r' {
                        if next < input.len() {
                            if input[next] == b'\n' {
                                next += 1;
                            }
                        } else {
                            self.pending_cr = true;
                        }
                    }
                    if self.skipping {
                        // The dropped event ends at its blank line.
                        if end == 0 && !self.skip_line_bytes {
                            self.skipping = false;
                        }
                        self.skip_line_bytes = false;
                    } else if self.partial.is_empty() {
                        self.line(&input[..end], &mut on_event);
                    } else {
                        let mut line = std::mem::take(&mut self.partial);
                        line.extend_from_slice(&input[..end]);
                        self.line(&line, &mut on_event);
                        line.clear();
                        self.partial = line;
                    }
                    input = &input[next..];
                }
                None => {
                    if self.skipping {
                        self.skip_line_bytes = true;
                    } else {
                        self.partial.extend_from_slice(input);
                    }
                    input = &[];
                }
            }
            if self.limit > 0 && !self.skipping && self.buffered() > self.limit {
                self.drop_event();
            }
        }
    }

    /// The event being assembled grew past the limit: forget it and skip to its end.
    fn drop_event(&mut self) {
        self.stats.oversized += 1;
        self.skipping = true;
        self.skip_line_bytes = !self.partial.is_empty();
        for v in [&mut self.partial, &mut self.data, &mut self.event] {
            v.clear();
            v.shrink_to(4096);
        }
        self.has_data = false;
        self.has_event = false;
    }

    /// End of stream. A final event that lacks its blank line is dispatched anyway (lenient, as
    /// most clients are) and reported by the return value `true`.
    pub fn finish(&mut self, mut on_event: impl FnMut(Event<'_>)) -> bool {
        if self.at_start {
            self.leave_start();
        }
        if self.skipping {
            return false;
        }
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, &mut on_event);
        }
        if self.has_data {
            self.dispatch(&mut on_event);
            true
        } else {
            false
        }
    }

    /// The data of every event of a whole stream but `[DONE]`, in order (a final event without
    /// its blank line included).
    pub fn each_data(body: &[u8], mut on_data: impl FnMut(&[u8])) {
        let mut framer = Framer::new();
        let mut take = |ev: Event<'_>| {
            if !ev.is_done() {
                on_data(ev.data)
            }
        };
        framer.feed(body, &mut take);
        framer.finish(take);
    }

    /// The stream did not start with a whole BOM: the bytes of it matched so far are ordinary
    /// bytes of the first line.
    fn leave_start(&mut self) {
        self.at_start = false;
        self.partial
            .extend_from_slice(&BOM[..usize::from(self.bom)]);
        self.bom = 0;
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(Event<'_>)) {
        if line.is_empty() {
            if self.has_data {
                self.dispatch(on_event);
            } else {
                self.event.clear();
                self.has_event = false;
            }
            return;
        }
        if line[0] == b':' {
            self.stats.comments += 1;
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
                self.has_event = true;
            }
            b"id" | b"retry" => {}
            _ => self.stats.unknown_fields += 1,
        }
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(Event<'_>)) {
        self.stats.events += 1;
        let len = self.data.len().saturating_sub(1); // drop the last '\n'
        on_event(Event {
            data: &self.data[..len],
            event: self.has_event.then_some(&self.event[..]),
        });
        self.data.clear();
        self.event.clear();
        self.has_data = false;
        self.has_event = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_past_the_limit_is_dropped_and_the_stream_goes_on() {
        let mut f = Framer::with_limit(64);
        let mut got = Vec::new();
        let big = format!("data: {}\n\n", "x".repeat(1000));
        // Fed in pieces, as reads cut it: the framer never holds more than a piece past 64.
        for piece in [
            b"data: a\n\n".as_slice(),
            &big.as_bytes()[..300],
            &big.as_bytes()[300..],
        ] {
            f.feed(piece, |e| {
                got.push(String::from_utf8(e.data.to_vec()).unwrap())
            });
            assert!(f.buffered() <= 64 + 300, "{}", f.buffered());
        }
        f.feed(b"data: b\n\ndata: [DONE]\n\n", |e| {
            got.push(String::from_utf8(e.data.to_vec()).unwrap())
        });
        assert!(!f.finish(|_| {}));
        assert_eq!(got, ["a", "b", "[DONE]"]);
        assert_eq!(f.stats().oversized, 1);
        // Two data lines that together pass the limit, and a final unterminated one.
        let mut f = Framer::with_limit(16);
        let mut n = 0;
        f.feed(
            b"data: 0123456789\ndata: 0123456789\n\ndata: ok\n\ndata: 0123456789abcdefgh",
            |_| n += 1,
        );
        assert!(!f.finish(|_| n += 1));
        assert_eq!((n, f.stats().oversized), (1, 2));
    }

    fn collect(pieces: &[&[u8]]) -> (Vec<(String, Option<String>)>, bool) {
        let mut f = Framer::new();
        let mut out = Vec::new();
        let mut push = |e: Event<'_>| {
            out.push((
                String::from_utf8(e.data.to_vec()).unwrap(),
                e.event.map(|v| String::from_utf8(v.to_vec()).unwrap()),
            ))
        };
        for p in pieces {
            f.feed(p, &mut push);
        }
        let tail = f.finish(&mut push);
        (out, tail)
    }

    fn data(events: &[(String, Option<String>)]) -> Vec<&str> {
        events.iter().map(|(d, _)| d.as_str()).collect()
    }

    #[test]
    fn many_events_in_one_read() {
        let (ev, tail) = collect(&[b"data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n"]);
        assert_eq!(data(&ev), ["{\"a\":1}", "{\"a\":2}", "[DONE]"]);
        assert!(!tail);
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let stream: &[u8] =
            b": ping\r\n\r\ndata: {\"x\":\"a\"}\r\n\r\nevent: e\ndata: l1\ndata: l2\n\ndata:nospace\r\rdata: [DONE]\n\n";
        let whole = collect(&[stream]).0;
        assert_eq!(
            data(&whole),
            ["{\"x\":\"a\"}", "l1\nl2", "nospace", "[DONE]"]
        );
        assert_eq!(whole[1].1.as_deref(), Some("e"));
        for i in 0..=stream.len() {
            for j in i..=stream.len() {
                let got = collect(&[&stream[..i], &stream[i..j], &stream[j..]]).0;
                assert_eq!(got, whole, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn byte_by_byte() {
        let stream: &[u8] = b"data: {\"k\":1}\r\n\r\ndata: [DONE]\r\n\r\n";
        let pieces: Vec<&[u8]> = stream.chunks(1).collect();
        let (ev, _) = collect(&pieces);
        assert_eq!(data(&ev), ["{\"k\":1}", "[DONE]"]);
    }

    #[test]
    fn comments_and_empty_events_are_not_dispatched() {
        let mut f = Framer::new();
        let mut n = 0;
        f.feed(b": keep-alive\n\n\n\nevent: x\n\n", |_| n += 1);
        assert_eq!(n, 0);
        assert_eq!(f.stats().comments, 1);
    }

    #[test]
    fn unterminated_final_event_is_flushed_and_reported() {
        let (ev, tail) = collect(&[b"data: {\"a\":1}\n\ndata: [DONE]"]);
        assert_eq!(data(&ev), ["{\"a\":1}", "[DONE]"]);
        assert!(tail);
    }

    #[test]
    fn bom_is_stripped() {
        let (ev, _) = collect(&[b"\xEF\xBB\xBFdata: x\n\n"]);
        assert_eq!(data(&ev), ["x"]);
        // Cut inside the BOM, and byte by byte.
        let (ev, _) = collect(&[b"\xEF", b"\xBB", b"", b"\xBFdata: x\n\n"]);
        assert_eq!(data(&ev), ["x"]);
        // A partial BOM is data of the first line, however it is cut.
        let whole = collect(&[b"\xEF\xBBdata: x\n\ndata: y\n\n"]).0;
        assert_eq!(data(&whole), ["y"]);
        assert_eq!(collect(&[b"\xEF", b"\xBBdata: x\n\ndata: y\n\n"]).0, whole);
        // A BOM only at the start.
        let (ev, _) = collect(&[b"data: a\n\n", b"\xEF\xBB\xBFdata: b\n\n"]);
        assert_eq!(data(&ev), ["a"]);
    }

    #[test]
    fn done_detection() {
        let e = Event {
            data: b"[DONE]",
            event: None,
        };
        assert!(e.is_done());
        let e = Event {
            data: b"{}",
            event: None,
        };
        assert!(!e.is_done());
    }
}
