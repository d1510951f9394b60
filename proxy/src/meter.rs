//! Per-request measurement: [`Tap`] (all of one request's state) and [`MeteredBody`] (the
//! response-body wrapper that feeds it).
//!
//! ```text
//!  upstream body ──poll_frame──► MeteredBody ──same Bytes──► hyper ──► client socket
//!                                   │ clock::now(), timeline.on_bytes
//!                                   │ framer.feed → timeline.on_data per event
//!                                   ▼
//!                         Tap (timeline, framer, record fields)
//!                                   │ end of stream / error / Drop (client gone)
//!                                   ▼
//!            record ─► writer channel;  summary ─► sessions;  counters ─► metrics
//! ```
//!
//! The chunk instant is read just before the frame is handed back to hyper, which writes it to
//! the client socket in the same poll of the connection task: "forwarded to the client" within
//! the cost of the framer and the chunk parse (≈1 µs, see `benches/chunk.rs`).
//!
//! Exactly one record per request, whatever happens: [`Tap::finish`] runs once, at the end of
//! the stream, on an error, or from `Drop` — a tap dropped before its end was cut off by the
//! client going away (`cancelled`, source downstream) or by the shutdown deadline (`cancelled`,
//! source internal, kind `shutdown`).
//!
//! Steady path per chunk: no allocation (the framer's buffers and the chunk list are sized
//! once), no lock, no shared map. Measured in `examples/proxy_overhead.rs`.

use crate::inject::Stripper;
use crate::ledger::InFlight;
use crate::metrics::CHUNK_SAMPLE_EVERY;
use crate::route::Route;
use crate::sniff::ReqCell;
use crate::upstream::{Claim, UpstreamBody};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokentap_core::clock::{self, Anchor, MonoNs};
use tokentap_core::events::{Api, Dialect};
use tokentap_core::record::{ErrorKind, ErrorSource, Origin, Status, TurnError, TurnRecord};
use tokentap_core::sse::Framer;
use tokentap_core::timeline::Timeline;

/// How the response body is read.
enum Reader {
    /// `text/event-stream`: framed and measured per event.
    Sse(Framer),
    /// A JSON body (non-streaming completion): clones of its frames, parsed once at the end.
    Json(Vec<Bytes>),
    /// Anything else: bytes and end only.
    Plain,
}

/// All per-request state. Lives in the service future until the response head, then in the
/// response body. Reaches nothing of the server but the [`crate::ledger::Ledger`] (through its
/// in-flight guard) and the replica it claimed.
pub struct Tap {
    ledger: InFlight,
    rec: Box<TurnRecord>,
    route: Route,
    /// Whose events the response speaks.
    dialect: Dialect,
    /// A Responses API request with no session yet: its session is named by its own response
    /// id (the first turn of a `previous_response_id` chain).
    session_from_response: bool,
    /// The replica this request went to: a connection slot and a count of its load, given back
    /// when the response ends.
    claim: Option<Claim>,
    cell: Option<Arc<ReqCell>>,
    timeline: Option<Timeline>,
    reader: Reader,
    /// The response was an event stream.
    sse: bool,
    /// Refcounted clones of the response frames (`--record-content`, `--tokenizer`).
    content: Option<Vec<Bytes>>,
    /// Bytes held in `Reader::Json` and in `content`: each bounded by `--max-event-bytes`.
    held_json: usize,
    held_content: usize,
    /// `--record-content`: the output passed `--max-event-bytes` and was let go.
    content_omitted: bool,
    /// A JSON body or the kept output let go past `--max-event-bytes` (SSE events are counted
    /// by the framer).
    oversized: u32,
    /// `--inject-usage`: events too big to edit, forwarded unedited (the framer dropped the same
    /// events: counted once).
    passed_unedited: u32,
    done: bool,
    /// Frames seen; every [`CHUNK_SAMPLE_EVERY`]-th one is timed for
    /// `tokentap_proxy_chunk_processing_seconds`.
    frames: u32,
}

impl Tap {
    /// A request just arrived (`anchor` read when hyper handed it to the service).
    pub fn new(ledger: InFlight, anchor: Anchor, route: Route) -> Tap {
        let mut rec = Box::new(TurnRecord::new(Origin::Proxy, anchor));
        rec.route = Some(route.label().to_string());
        Tap {
            ledger,
            rec,
            route,
            dialect: route.dialect(false),
            session_from_response: false,
            claim: None,
            cell: None,
            timeline: None,
            reader: Reader::Plain,
            sse: false,
            content: None,
            held_json: 0,
            held_content: 0,
            content_omitted: false,
            oversized: 0,
            passed_unedited: 0,
            done: false,
            frames: 0,
        }
    }

    /// The record being built (identity fields are filled by the service).
    pub fn record_mut(&mut self) -> &mut TurnRecord {
        &mut self.rec
    }

    /// The request's start, raw monotonic ns.
    pub fn start(&self) -> MonoNs {
        self.rec.start_mono_ns
    }

    /// The response speaks `dialect` (the route's API, with the configured Messages usage).
    pub fn set_dialect(&mut self, dialect: Dialect) {
        self.dialect = dialect;
    }

    /// The request has no session yet: name it by its own response id when one comes.
    pub fn session_from_response(&mut self) {
        self.session_from_response = true;
    }

    /// The request's slot in the in-flight table (its live view).
    pub fn set_cell(&mut self, cell: Arc<ReqCell>) {
        self.cell = Some(cell);
    }

    /// The request goes to the replica of `claim` (`Some`; named in the record), or to none
    /// after all (`None`: the attempt failed before a response head, the claim is given back).
    pub fn claim(&mut self, claim: Option<Claim>) {
        self.rec.upstream = claim.as_ref().map(|c| c.upstream().name.clone());
        self.claim = claim;
    }

    /// The request is being sent upstream now.
    pub fn forwarded(&mut self, t: MonoNs) {
        self.rec.forwarded_ns = Some(t.saturating_sub(self.rec.start_mono_ns));
    }

    /// Response headers arrived from upstream at `t`.
    pub fn on_headers(&mut self, t: MonoNs, status: u16, sse: bool, json: bool) {
        let expected = self
            .cell
            .as_ref()
            .and_then(|c| c.info.get())
            .and_then(|i| i.max_tokens)
            .map_or(256, |m| (m as usize).saturating_add(8));
        let measure = self.route.is_llm();
        let mut tl = Timeline::new(
            self.rec.start_mono_ns,
            if measure && sse { expected } else { 0 },
        )
        .with_api(self.dialect);
        tl.on_headers(t);
        self.timeline = Some(tl);
        self.rec.http_status = Some(status);
        self.sse = sse;
        self.reader = match (measure, sse, json) {
            (true, true, _) => Reader::Sse(Framer::with_limit(self.ledger.max_event_bytes)),
            (true, false, true) => Reader::Json(Vec::new()),
            _ => Reader::Plain,
        };
        if self.ledger.keep_bodies() && measure {
            self.content = Some(Vec::new());
        }
    }

    /// One response body frame, about to be handed to hyper. The hot path.
    #[inline]
    pub fn on_data(&mut self, data: &Bytes) -> MonoNs {
        let t = clock::now();
        let Some(tl) = self.timeline.as_mut() else {
            return t;
        };
        tl.on_bytes(t);
        match &mut self.reader {
            Reader::Sse(framer) => framer.feed(data, |ev| {
                if ev.is_done() {
                    tl.on_done();
                } else {
                    tl.on_data(t, ev.data);
                }
            }),
            Reader::Json(frames) => {
                self.held_json += data.len();
                if self.held_json > self.ledger.max_event_bytes {
                    // Too big to parse: forwarded and stamped, not held.
                    self.reader = Reader::Plain;
                    self.oversized += 1;
                } else {
                    frames.push(data.clone());
                }
            }
            Reader::Plain => {}
        }
        if let Some(c) = self.content.as_mut() {
            self.held_content += data.len();
            if self.held_content > self.ledger.max_event_bytes {
                // The output is let go; the request is still recorded, and says so.
                self.content = None;
                self.content_omitted = true;
                self.oversized += 1;
            } else {
                c.push(data.clone());
            }
        }
        self.frames = self.frames.wrapping_add(1);
        if self.frames % CHUNK_SAMPLE_EVERY == 1 {
            // Sampled: a second clock read and an atomic histogram update, no lock.
            let spent = clock::now().saturating_sub(t);
            self.ledger
                .metrics
                .chunk_processing
                .observe(spent as f64 / 1e9);
        }
        t
    }

    /// The upstream stream ended cleanly.
    pub fn complete(&mut self) {
        let (status, err) = match self.rec.http_status {
            Some(s) if s >= 400 => (
                Status::Failed,
                Some(TurnError::new(
                    ErrorSource::Upstream,
                    ErrorKind::HttpStatus,
                    format!("upstream answered {s}"),
                )),
            ),
            _ => (Status::Ok, None),
        };
        self.finish(status, err, None);
    }

    /// Ends the record with an error of the given status.
    pub fn fail(&mut self, status: Status, err: TurnError) {
        self.finish(status, Some(err), None);
    }

    /// The proxy answers the request itself (an error response); the response is produced now.
    pub fn answered(&mut self, status: u16, err: TurnError, record_status: Status) {
        let t = clock::now();
        if self.timeline.is_none() {
            let mut tl = Timeline::new(self.rec.start_mono_ns, 0);
            tl.on_headers(t);
            self.timeline = Some(tl);
        }
        self.rec.http_status = Some(status);
        self.finish(record_status, Some(err), Some(t));
    }

    /// A response of the Responses or Messages API that came back cleanly but is not whole:
    /// an error event, an event that is not JSON, or no end event. (A chat stream keeps its
    /// documented behaviour: `done` and the counts say it, the status stays `ok`.)
    fn stream_failure(
        api: Api,
        sse: bool,
        status: Status,
        m: &tokentap_core::timeline::Measured,
    ) -> Option<TurnError> {
        if status != Status::Ok || !api.has_own_events() {
            return None;
        }
        let (end, name) = match api {
            Api::Responses => ("response.completed", "Responses API"),
            _ => ("message_stop", "Messages API"),
        };
        let e = |kind, msg: String| Some(TurnError::new(ErrorSource::Upstream, kind, msg));
        if let Some(msg) = m.stream_error.as_deref() {
            return e(
                ErrorKind::StreamError,
                format!("the server's error event: {msg}"),
            );
        }
        if let (Some(first), Some(second)) = (&m.response_id, &m.second_response) {
            return e(
                ErrorKind::StreamError,
                format!("two responses on one {name} stream: events of {second:?} after {first:?}'s (the record's counts hold both)"),
            );
        }
        if m.error_events > 0 {
            return e(
                ErrorKind::StreamError,
                "the server answered with an error object".into(),
            );
        }
        if m.malformed_events > 0 {
            return e(
                ErrorKind::MalformedEvent,
                format!(
                    "{} event(s) of the {name} stream were not JSON",
                    m.malformed_events
                ),
            );
        }
        if sse && !m.done {
            return e(
                ErrorKind::StreamWithoutDone,
                format!("the {name} stream ended without its end event ({end})"),
            );
        }
        None
    }

    fn finish(&mut self, status: Status, err: Option<TurnError>, end: Option<MonoNs>) {
        let (mut status, mut err) = (status, err);
        if self.done {
            return;
        }
        self.done = true;
        self.claim = None;
        let ledger = &*self.ledger;
        let rec = &mut self.rec;
        if let Some(mut tl) = self.timeline.take() {
            match std::mem::replace(&mut self.reader, Reader::Plain) {
                Reader::Sse(mut framer) => {
                    let t = end.unwrap_or_else(clock::now);
                    framer.finish(|ev| {
                        if ev.is_done() {
                            tl.on_done();
                        } else {
                            tl.on_data(t, ev.data);
                        }
                    });
                    self.oversized += (framer.stats().oversized as u32).max(self.passed_unedited);
                }
                Reader::Json(frames) => {
                    let body = crate::content::concat_frames(&frames);
                    tl.on_json_body(&body);
                }
                Reader::Plain => {}
            }
            rec.measured = tl.finish(end);
            rec.oversized_events = (self.oversized > 0).then_some(self.oversized);
            if let Some(e) = Self::stream_failure(self.dialect.api, self.sse, status, &rec.measured)
            {
                (status, err) = (Status::Failed, Some(e));
            }
            if rec.measured.e2e_ns.is_none() {
                // An empty body: the response ended now.
                rec.measured.e2e_ns = Some(clock::now().saturating_sub(rec.start_mono_ns));
            }
        } else {
            // Nothing came back (cancelled before the response head): the end is now.
            rec.measured.e2e_ns = Some(clock::now().saturating_sub(rec.start_mono_ns));
        }
        rec.status = status;
        rec.error = err;
        if let Some(cell) = self.cell.as_ref() {
            if let Some(info) = cell.info.get() {
                rec.model = info.model.clone();
                rec.stream = info.stream;
                rec.messages = info.messages;
                rec.request_bytes = Some(info.bytes);
            }
        }
        let sse = self.sse;
        let frames = self.content.take();
        let request = self.cell.as_ref().and_then(|c| c.content.get());
        if let Some(frames) = frames.as_ref().filter(|_| ledger.record_content) {
            rec.content = Some(crate::content::build(self.dialect.api, request, frames));
        } else if self.content_omitted && ledger.record_content {
            rec.content = Some(crate::content::omitted(request, ledger.max_event_bytes));
        }
        if self.session_from_response && rec.conversation_id.is_none() {
            if let Some(id) = rec.measured.response_id.clone() {
                let (id, _) = crate::sessions::cap_id(id, ledger.max_session_id_bytes);
                rec.turn_index = ledger.sessions.start_turn(&id);
                rec.conversation_id = Some(id);
            }
        }
        if let Some(id) = rec.conversation_id.as_deref() {
            if self.route.is_llm() {
                ledger.sessions.end_turn(id, rec);
            }
            if let (Route::Api(tokentap_core::api::Api::Responses), Some(resp)) =
                (self.route, rec.measured.response_id.as_deref())
            {
                ledger.sessions.link(resp, id);
            }
        }
        ledger
            .metrics
            .observe_turn(rec, self.route.label(), self.route.is_llm());
        let anchor = rec.anchor;
        // One small allocation per request so the finished record can leave the tap.
        let rec = std::mem::replace(
            &mut self.rec,
            Box::new(TurnRecord::new(Origin::Proxy, anchor)),
        );
        let job = crate::tokens::Job {
            rec,
            request: self.cell.as_ref().and_then(|c| c.content.get().cloned()),
            response: frames.unwrap_or_default(),
            sse,
            chat: self.dialect.api.is_chat_form(),
        };
        ledger.submit(job, self.route.is_llm());
        self.ledger.leave();
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        if !self.done {
            let ended = self.timeline.as_ref().is_some_and(Timeline::done);
            if ended && !self.ledger.cutting() {
                // The response's end event (`[DONE]`, `response.completed`, `message_stop`)
                // went to the client, which left before the server closed the stream (Codex
                // does on `response.completed`): the turn is whole, not cancelled.
                self.complete();
                return;
            }
            let (source, kind, message) = if self.ledger.cutting() {
                (
                    ErrorSource::Internal,
                    ErrorKind::Shutdown,
                    "cut at the end of the shutdown grace period",
                )
            } else {
                (
                    ErrorSource::Downstream,
                    ErrorKind::ClientGone,
                    "the client went away before the response ended",
                )
            };
            self.finish(
                Status::Cancelled,
                Some(TurnError::new(source, kind, message)),
                None,
            );
        }
    }
}

/// Why a metered body ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum BodyError<E: std::error::Error + 'static> {
    /// The upstream stream broke.
    #[error(transparent)]
    Upstream(E),
    /// No body bytes from upstream for `--upstream-idle-timeout`.
    #[error("upstream sent nothing for {0:?}")]
    Idle(Duration),
}

/// `--upstream-idle-timeout` state. The timer is re-armed only when it fires early, so the
/// per-chunk cost is storing one instant (no timer-wheel operation per chunk).
struct Idle {
    limit: Duration,
    last: MonoNs,
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// The waker the sleep last registered: a timer keeps it until it fires, so the sleep is
    /// polled again only when it fired or the task's waker changed (not on every wait for a
    /// chunk: each poll re-registers the waker, two atomics per chunk).
    armed_for: Option<std::task::Waker>,
}

impl Idle {
    /// Called when the body waits for upstream: the limit, when nothing came for that long;
    /// else the timer is (still) armed to wake this task at the limit.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<Duration> {
        let armed = !self.sleep.is_elapsed()
            && self
                .armed_for
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()));
        if armed {
            return None;
        }
        self.armed_for = Some(cx.waker().clone());
        if self.sleep.as_mut().poll(cx).is_pending() {
            return None;
        }
        let quiet = clock::now().saturating_sub(self.last);
        let limit = self.limit.as_nanos() as u64;
        if quiet >= limit {
            return Some(self.limit);
        }
        let left = Duration::from_nanos(limit - quiet);
        self.sleep
            .as_mut()
            .reset(tokio::time::Instant::now() + left);
        let _ = self.sleep.as_mut().poll(cx);
        None
    }
}

/// The upstream response body, measured on its way to the client.
pub struct MeteredBody<B: Body = UpstreamBody> {
    inner: B,
    tap: Tap,
    strip: Option<Stripper>,
    /// Bytes still to hand out after the inner body ended (a stripper's leftover).
    tail: Option<Bytes>,
    ended: bool,
    idle: Option<Idle>,
    /// Data went out since the inner body last returned `Pending`: hyper may hold it unflushed.
    unflushed: bool,
    /// The upstream's error, held back one poll (see `poll_frame`).
    failed: Option<B::Error>,
}

impl<B: Body> MeteredBody<B> {
    /// Meters `inner` for `tap`, taking out what `strip` says the proxy added.
    pub fn new(inner: B, tap: Tap, strip: Option<Stripper>) -> Self {
        let mut m = MeteredBody {
            inner,
            tap,
            strip,
            tail: None,
            ended: false,
            idle: None,
            unflushed: false,
            failed: None,
        };
        // No body to come (HEAD, 204, 304, a zero length): the response is complete now. hyper's
        // server does not poll such a body at all; without this the tap would be dropped
        // unpolled and the request recorded as cancelled.
        if m.inner.is_end_stream() {
            m.end();
        }
        m
    }

    /// Ends the stream with an error when upstream sends nothing for `limit` (must be called
    /// inside a tokio runtime).
    pub fn with_idle_timeout(mut self, limit: Duration) -> Self {
        if !limit.is_zero() {
            self.idle = Some(Idle {
                limit,
                last: clock::now(),
                sleep: Box::pin(crate::timers::sleep(limit)),
                armed_for: None,
            });
        }
        self
    }

    fn end(&mut self) {
        self.ended = true;
        if let Some(s) = self.strip.as_mut() {
            let rest = s.finish();
            if !rest.is_empty() {
                self.tail = Some(rest);
            }
            self.tap.passed_unedited = s.passed;
        }
        self.tap.complete();
    }
}

impl<B> Body for MeteredBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + Send + Sync + Unpin + 'static,
{
    type Data = Bytes;
    type Error = BodyError<B::Error>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Some(e) = this.failed.take() {
            return Poll::Ready(Some(Err(BodyError::Upstream(e))));
        }
        loop {
            if this.ended {
                return Poll::Ready(this.tail.take().map(|b| Ok(Frame::data(b))));
            }
            let polled = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(r) => r,
                Poll::Pending => {
                    if let Some(limit) = this.idle.as_mut().and_then(|i| i.expired(cx)) {
                        this.ended = true;
                        let e = BodyError::Idle(limit);
                        this.tap.fail(
                            Status::TimedOut,
                            TurnError::new(
                                ErrorSource::Upstream,
                                ErrorKind::IdleTimeout,
                                e.to_string(),
                            ),
                        );
                        return Poll::Ready(Some(Err(e)));
                    }
                    this.unflushed = false;
                    return Poll::Pending;
                }
            };
            match polled {
                Some(Ok(frame)) => {
                    let frame = match frame.into_data() {
                        Ok(data) => {
                            let t = this.tap.on_data(&data);
                            if let Some(idle) = this.idle.as_mut() {
                                idle.last = t;
                            }
                            let out = match this.strip.as_mut() {
                                Some(s) => s.push(&data),
                                None => data,
                            };
                            if this.inner.is_end_stream() {
                                this.end();
                            }
                            if out.is_empty() {
                                continue;
                            }
                            Frame::data(out)
                        }
                        Err(trailers) => trailers,
                    };
                    this.unflushed = true;
                    return Poll::Ready(Some(Ok(frame)));
                }
                Some(Err(e)) => {
                    this.ended = true;
                    this.tap.fail(
                        Status::Failed,
                        TurnError::new(
                            ErrorSource::Upstream,
                            ErrorKind::Reset,
                            crate::error::chain(&e),
                        ),
                    );
                    // hyper's HTTP/1 server aborts the connection on a body error *without*
                    // flushing what it buffered, and it buffers every frame handed out since
                    // the body was last pending. So when data went out in this round, the error
                    // waits one poll: `Pending` (with a wake-up) lets hyper flush first, and the
                    // last bytes upstream sent before breaking still reach the client.
                    if this.unflushed {
                        this.unflushed = false;
                        this.failed = Some(e);
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    return Poll::Ready(Some(Err(BodyError::Upstream(e))));
                }
                None => {
                    this.end();
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.tail.is_none() && self.failed.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        if self.strip.is_some() {
            SizeHint::default()
        } else {
            self.inner.size_hint()
        }
    }
}

/// What the proxy sends to the client.
// The metered variant is large (the whole per-request state); the body is built once per
// request and polled in place, never moved per chunk, so boxing would only add an allocation.
//
// `Left`: the upstream's response, metered; `Right`: an answer of the proxy's own (an error).
pub type ProxyBody = tokentap_core::either::Either<MeteredBody<UpstreamBody>, Full<Bytes>>;

impl<E: std::error::Error + 'static> From<Infallible> for BodyError<E> {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}
