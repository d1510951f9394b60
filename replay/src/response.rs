//! What a turn's response is read into, whatever carries it (HTTP/1.1 in [`crate::client`],
//! HTTP/2 in `crate::http2`): the sink (SSE framer, JSON body, error excerpt) feeding the
//! turn's [`Timeline`] and the output capture, the per-slot scratch, and how a response that
//! ended ends the turn.

use crate::rx::Read;
use tokentap_core::clock::MonoNs;
use tokentap_core::record::{ErrorKind, ErrorSource, RxClock, TurnError};
use tokentap_core::sse::{Event, Framer};
use tokentap_core::timeline::Timeline;
use tokentap_mlperf::Accumulator;

/// Largest non-streaming JSON response kept for parsing.
const MAX_JSON_BODY: usize = 64 << 20;

/// Which chunks of a turn are read into its output, after their stamps: all of them when a
/// tokenizer counts the output, else only what the scorer will look at (a coding turn's tool
/// calls, a workflow turn's content and reasoning), else none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Capture {
    /// Nothing kept.
    #[default]
    Off,
    /// Every text-carrying chunk and the finish.
    Full,
    /// The tool-call chunks.
    ToolCalls,
    /// Content and reasoning chunks.
    Text,
}

impl Capture {
    #[inline]
    fn wants(self, info: &tokentap_core::chunk::ChunkInfo) -> bool {
        match self {
            Capture::Off => false,
            Capture::Full => info.carries_text() || info.finish_reason.is_some(),
            Capture::ToolCalls => info.tool_call,
            Capture::Text => info.content || info.reasoning,
        }
    }

    /// Anything is kept.
    pub fn is_on(self) -> bool {
        self != Capture::Off
    }
}

/// How the reads of one turn were stamped, and how long they waited for the client.
#[derive(Debug, Default, Clone, Copy)]
pub struct RxReport {
    /// `Kernel` when every read carried the kernel's timestamp.
    pub clock: Option<RxClock>,
    /// Read lag of the read that brought the first token.
    pub ttft_lag_ns: Option<u64>,
    /// Largest read lag of the turn.
    pub max_lag_ns: Option<u64>,
}

impl RxReport {
    pub(crate) fn on_read(&mut self, r: &Read) {
        self.clock = Some(match (self.clock, r.clock) {
            (Some(RxClock::User), _) | (_, RxClock::User) => RxClock::User,
            _ => RxClock::Kernel,
        });
        let lag = r.lag();
        self.max_lag_ns = Some(self.max_lag_ns.map_or(lag, |m| m.max(lag)));
    }
}

/// Per-slot scratch reused across turns.
#[derive(Default)]
pub struct Scratch {
    /// The turn's output as the reference accumulates it (read only when captured).
    pub output: Accumulator,
    /// The last exchange's receive stamps.
    pub rx: RxReport,
    /// Times the last exchange's request was sent again on a fresh connection.
    pub retries: u32,
    /// The last exchange's response status, once its head arrived (kept for a turn that
    /// times out or is cancelled after the head).
    pub http_status: Option<u16>,
    /// The last response's `Date` header, Unix seconds (the server's clock, 1 s resolution).
    pub server_date: Option<u64>,
    /// The last exchange went over HTTP/2.
    pub http2: bool,
}

/// What one exchange is told besides the request.
#[derive(Debug, Clone, Copy)]
pub struct TurnOpts {
    /// Pre-sizes the timeline's chunk list.
    pub expected_chunks: usize,
    /// Which output text to keep (scoring, counting).
    pub capture: Capture,
    /// `--max-event-bytes`: the longest SSE event or line before the turn fails.
    pub max_event: usize,
}

/// How an exchange ended (before timeouts and cancels, which the caller applies).
#[derive(Debug)]
pub enum Exchange {
    /// A complete 2xx response.
    Ok {
        /// The response's status.
        http_status: u16,
    },
    /// Something went wrong; `http_status` when a response head arrived.
    Failed {
        /// The response's status, when its head arrived.
        http_status: Option<u16>,
        /// What went wrong.
        error: TurnError,
    },
}

/// An attempt that broke before any response byte ([`tokentap_core::http1::Broke`], the rule
/// the proxy's direct client shares): on a reused connection, worth one retry.
pub(crate) struct Stale(pub(crate) TurnError);

/// How a response that ended (by its framing, or the connection's close) ends the turn.
pub(crate) fn conclude(
    sink: Sink,
    ctx: &mut Ctx<'_>,
    status: u16,
    cut_mid_event: bool,
    capture: Capture,
) -> Exchange {
    match sink {
        Sink::Error(excerpt) => Exchange::Failed {
            http_status: Some(status),
            error: upstream(
                ErrorKind::HttpStatus,
                format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&excerpt).trim()
                ),
            ),
        },
        Sink::Json(whole) => {
            ctx.tl.on_json_body(&whole);
            if capture.is_on() {
                ctx.output.feed(&whole);
            }
            Exchange::Ok {
                http_status: status,
            }
        }
        // The body ended by its framing, or at the close of a close-delimited body: an event
        // without its closing blank line was cut, and a stream without `[DONE]` did not finish.
        Sink::Sse(_) if cut_mid_event => Exchange::Failed {
            http_status: Some(status),
            error: upstream(
                ErrorKind::StreamCutMidEvent,
                "the stream ended inside an event (its last data line has no blank line after it)"
                    .into(),
            ),
        },
        Sink::Sse(_) if !ctx.tl.done() => Exchange::Failed {
            http_status: Some(status),
            error: upstream(
                ErrorKind::StreamWithoutDone,
                "the stream ended before `data: [DONE]`".into(),
            ),
        },
        Sink::Sse(_) => Exchange::Ok {
            http_status: status,
        },
    }
}

pub(crate) fn broke(http_status: Option<u16>, message: String) -> Exchange {
    Exchange::Failed {
        http_status,
        error: upstream(ErrorKind::Reset, message),
    }
}

/// What a turn's response body is fed to.
pub(crate) struct Ctx<'a> {
    pub tl: &'a mut Timeline,
    pub output: &'a mut Accumulator,
    pub rx: &'a mut RxReport,
    pub capture: Capture,
}

pub(crate) enum Sink {
    /// A non-2xx response: a short, bounded excerpt of the body (servers put the reason there).
    Error(Vec<u8>),
    /// A server that ignored `stream: true` and sent one JSON body: no per-chunk timeline, but
    /// usage, finish reason and the text for scoring are read from it.
    Json(Vec<u8>),
    Sse(Framer),
}

impl Sink {
    /// The sink for a response with this status and content type.
    pub fn for_response(status: u16, json: bool) -> Sink {
        if !(200..300).contains(&status) {
            Sink::Error(Vec::new())
        } else if json {
            Sink::Json(Vec::new())
        } else {
            Sink::Sse(Framer::new())
        }
    }

    /// Body bytes that arrived with read `r`.
    #[inline]
    pub fn data(&mut self, ctx: &mut Ctx<'_>, d: &[u8], r: &Read) {
        if d.is_empty() {
            return;
        }
        ctx.tl.on_bytes(r.at);
        match self {
            Sink::Error(excerpt) => {
                let room = 512usize.saturating_sub(excerpt.len());
                excerpt.extend_from_slice(&d[..d.len().min(room)]);
            }
            Sink::Json(whole) => {
                if whole.len() <= MAX_JSON_BODY {
                    whole.extend_from_slice(d);
                }
            }
            Sink::Sse(framer) => {
                let had_ttft = ctx.tl.ttft_ns().is_some();
                let (tl, output, capture) = (&mut *ctx.tl, &mut *ctx.output, ctx.capture);
                framer.feed(d, |ev| on_event(tl, output, capture, r.at, ev));
                if !had_ttft && ctx.tl.ttft_ns().is_some() {
                    ctx.rx.ttft_lag_ns = Some(r.lag());
                }
            }
        }
    }

    /// A body past its bound: a JSON body over [`MAX_JSON_BODY`], or an SSE event (or line)
    /// over `max_event` bytes still without its end — the framer would otherwise hold it all.
    pub fn overflow(&self, max_event: usize) -> Option<TurnError> {
        match self {
            Sink::Json(whole) if whole.len() > MAX_JSON_BODY => Some(upstream(
                ErrorKind::ResponseTooLarge,
                format!("JSON response over {MAX_JSON_BODY} bytes"),
            )),
            Sink::Sse(framer) if framer.buffered() > max_event => Some(upstream(
                ErrorKind::EventTooLarge,
                format!("an SSE event over {max_event} bytes without its end (--max-event-bytes)"),
            )),
            _ => None,
        }
    }

    /// The body ended (or broke) at `end`: a last event without its blank line still counts,
    /// and `true` says there was one (the stream was cut inside it).
    pub fn finish(&mut self, ctx: &mut Ctx<'_>, end: MonoNs) -> bool {
        match self {
            Sink::Sse(framer) => {
                let (tl, output, capture) = (&mut *ctx.tl, &mut *ctx.output, ctx.capture);
                framer.finish(|ev| on_event(tl, output, capture, end, ev))
            }
            _ => false,
        }
    }
}

#[inline]
fn on_event(
    tl: &mut Timeline,
    output: &mut Accumulator,
    capture: Capture,
    t: MonoNs,
    ev: Event<'_>,
) {
    if ev.is_done() {
        tl.on_done();
    } else if let Some(info) = tl.on_data(t, ev.data) {
        // After the stamp and the timeline: reading the text never delays a timestamp.
        if capture.wants(&info) {
            output.feed(ev.data);
        }
    }
}

/// A `Date` header's value as Unix seconds (the server's clock), if it parses.
pub(crate) fn date_secs(value: &[u8]) -> Option<u64> {
    let t = httpdate::parse_http_date(std::str::from_utf8(value).ok()?).ok()?;
    Some(t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs())
}

pub(crate) fn upstream(kind: ErrorKind, message: String) -> TurnError {
    TurnError::new(ErrorSource::Upstream, kind, message)
}

pub(crate) fn internal(kind: ErrorKind, message: String) -> TurnError {
    TurnError::new(ErrorSource::Internal, kind, message)
}
