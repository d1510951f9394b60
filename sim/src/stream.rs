//! The response body: walks a [`Plan`] on an absolute schedule and stamps every frame.
//!
//! [`SimBody`] is its own `http_body::Body`. `poll_frame` returns a chunk only when it is due
//! (a `tokio::time::Sleep` re-armed with `reset`, one allocation per request) and stamps
//! `clock::now()` at the moment it hands the frame to hyper — the ground truth that measurement
//! tests compare with. Each SSE event is exactly one frame.
//!
//! Schedule (tokio `Instant`s, absolute, so lateness never accumulates as drift):
//! - prelude: with the first token (or at once with `prelude_early`);
//! - token chunk 0: `first_token_at` (request start + prefill, after queueing for a lane);
//! - token chunk i > 0: due(i-1) + tokens(i) × decode_ms × (1 + decode_slowdown × others), where
//!   `others` is the number of *other* requests decoding when chunk i is scheduled;
//! - a stall fault adds its pause before one chunk (and so to every later one);
//! - usage chunk and `[DONE]` right after the last token chunk.
//!
//! With zero timing no timer is armed at all and every poll returns a frame.
//!
//! The body finalizes its [`RequestLog`] exactly once: when it returns its last frame, or when
//! hyper drops it (the client went away: `finished: false`), or when it injects a disconnect.
//! Non-streaming responses walk the same schedule silently and emit the whole JSON once, when
//! the last token is due.

use crate::frame::{self, ChunkWriter};
use crate::plan::{Api, FaultKind, Plan, SegKind, Segment};
use crate::shared::Shared;
use crate::{ChunkKind, ChunkLog, RequestLog};
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokentap_core::clock;
use tokentap_core::tokenize::BYTES_PER_TOKEN;
use tokio::time::{Instant, Sleep};

/// The error a body returns to make hyper abort the connection.
#[derive(Debug, thiserror::Error)]
pub enum SimBodyError {
    /// The fault plan cut the stream here (`disconnect_rate`).
    #[error("injected mid-stream disconnect")]
    InjectedDisconnect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Prelude,
    Tokens,
    /// Usage chunk (streaming) or the whole body (non-streaming).
    Tail,
    Done,
    End,
}

#[derive(Debug, Clone, Copy)]
enum Due {
    Now,
    At(Instant),
}

pub(crate) struct SimBody {
    shared: Arc<Shared>,
    plan: Plan,
    writer: ChunkWriter,
    /// `Some` until finalized.
    log: Option<RequestLog>,
    /// Whole non-streaming body.
    full: Option<Bytes>,
    phase: Phase,
    /// Cursor: segment index and byte offset inside it.
    seg: usize,
    off: usize,
    /// Tokens left in the current segment.
    seg_tokens_left: u64,
    /// Token chunks emitted (or passed silently, non-streaming).
    chunk_index: u64,
    tokens_done: u64,
    fault_pending: bool,
    /// Due time of the next token chunk, once computed.
    next_due: Option<Due>,
    /// Due time of the previous token chunk (timed schedule only).
    last_due: Option<Instant>,
    /// When the first token is due; `None` with zero timing.
    first_token_at: Option<Instant>,
    decode: Duration,
    slowdown: f64,
    sleep: Option<Pin<Box<Sleep>>>,
    /// Counted in `Shared::active_decodes`.
    decoding: bool,
    /// An injected disconnect has let hyper flush once.
    yielded_before_cut: bool,
    /// `flush_each_chunk`: return `Pending` once before the next frame so hyper writes this one.
    flush_next: bool,
    /// The last `Pending` let hyper write the previous chunk: stamp its `flushed_mono_ns`.
    flushed_pending: bool,
    /// `include_metrics`: when the request left the queue, and its first and last token chunks.
    scheduled_at: Instant,
    first_token: Option<Instant>,
    last_token: Option<Instant>,
}

impl SimBody {
    /// `first_token_at` is `None` when the timing model is all zero.
    pub fn new(
        shared: Arc<Shared>,
        plan: Plan,
        log: RequestLog,
        first_token_at: Option<Instant>,
    ) -> Self {
        let field = shared.config.modes.reasoning_field.as_str();
        let writer = ChunkWriter::new(&plan, field);
        let full = (!plan.stream).then(|| {
            let body = frame::full_body(&plan, field);
            match plan.fault.map(|f| f.kind) {
                Some(FaultKind::Malformed) => body.slice(..body.len() / 2),
                _ => body,
            }
        });
        let timing = &shared.config.timing;
        let decode = crate::config::ms(timing.decode_ms);
        let slowdown = timing.decode_slowdown;
        let seg_tokens_left = plan.output.segments.first().map_or(0, |s| s.tokens);
        shared.metrics.running.inc();
        SimBody {
            writer,
            full,
            phase: Phase::Prelude,
            seg: 0,
            off: 0,
            seg_tokens_left,
            chunk_index: 0,
            tokens_done: 0,
            fault_pending: plan.fault.is_some(),
            next_due: None,
            last_due: None,
            first_token_at,
            decode,
            slowdown,
            sleep: None,
            decoding: false,
            yielded_before_cut: false,
            flush_next: false,
            flushed_pending: false,
            scheduled_at: first_token_at
                .map(|f| f - plan.prefill)
                .unwrap_or_else(Instant::now),
            first_token: None,
            last_token: None,
            log: Some(log),
            plan,
            shared,
        }
    }

    /// The engine's timing of this request, as vLLM's `metrics` member: queue, scheduling to
    /// first token, first to last token, mean ITL, tokens per second over scheduling → last.
    fn engine_metrics(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let num = |v: Option<f64>| v.map_or("null".to_string(), |x| format!("{x:.3}"));
        let (first, last) = (self.first_token, self.last_token);
        let ttft = first.map(|f| ms(f - self.scheduled_at));
        let gen = first.zip(last).map(|(f, l)| ms(l - f));
        let itl = gen
            .filter(|_| self.tokens_done > 1)
            .map(|g| g / (self.tokens_done - 1) as f64);
        let tps = last
            .map(|l| (l - self.scheduled_at).as_secs_f64())
            .filter(|s| *s > 0.0)
            .map(|s| self.tokens_done as f64 / s);
        format!(
            "{{\"time_to_first_token_ms\":{},\"generation_time_ms\":{},\"queue_time_ms\":{},\"mean_itl_ms\":{},\"tokens_per_second\":{}}}",
            num(ttft),
            num(gen),
            num(Some(ms(self.plan.queue))),
            num(itl),
            num(tps)
        )
    }

    /// Waits for `due`; `Ready` at once when it has passed.
    fn wait(&mut self, due: Due, cx: &mut Context<'_>) -> Poll<()> {
        let Due::At(t) = due else {
            return Poll::Ready(());
        };
        if t <= Instant::now() {
            return Poll::Ready(());
        }
        match &mut self.sleep {
            Some(s) => {
                if s.deadline() != t {
                    s.as_mut().reset(t);
                }
            }
            None => self.sleep = Some(Box::pin(tokio::time::sleep_until(t))),
        }
        match &mut self.sleep {
            Some(s) => s.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }

    /// Tokens in the next token chunk.
    fn next_chunk_tokens(&self) -> u64 {
        self.seg_tokens_left.min(self.plan.tokens_per_chunk as u64)
    }

    /// Due time of the next token chunk (computed once, then kept).
    fn token_due(&mut self) -> Due {
        if let Some(d) = self.next_due {
            return d;
        }
        let base = self.first_token_at.map(|first| match self.last_due {
            None => first,
            Some(prev) => {
                let active = self.shared.active_decodes.load(Ordering::Relaxed);
                let others = active.saturating_sub(self.decoding as usize) as f64;
                let per_token = self.decode.mul_f64(1.0 + self.slowdown * others);
                prev + per_token * self.next_chunk_tokens() as u32
            }
        });
        let stall = match self.plan.fault {
            Some(f) if self.fault_pending && f.at_chunk == self.chunk_index => match f.kind {
                FaultKind::Stall(d) => {
                    self.fault_pending = false;
                    Some(d)
                }
                _ => None,
            },
            _ => None,
        };
        let due = match (base, stall) {
            (Some(b), Some(s)) => Due::At(b + s),
            (None, Some(s)) => Due::At(Instant::now() + s),
            (Some(b), None) => Due::At(b),
            (None, None) => Due::Now,
        };
        self.next_due = Some(due);
        due
    }

    fn stamp(&mut self, tokens: u32, kind: ChunkKind) {
        let mono = clock::now();
        if let Some(log) = &mut self.log {
            log.chunks.push(ChunkLog {
                mono_ns: mono,
                wall_ns: log.received.wall_of(mono),
                tokens,
                kind,
                flushed_mono_ns: None,
            });
        }
    }

    fn emit(&mut self, bytes: Bytes, tokens: u32, kind: ChunkKind) -> Poll<Step> {
        self.stamp(tokens, kind);
        self.flush_next = self.shared.config.timing.flush_each_chunk;
        Poll::Ready(Step::Frame(Some(Ok(Frame::data(bytes)))))
    }

    /// Usage for a chunk when continuous usage is on.
    fn running_usage(&self) -> Option<u64> {
        self.plan.continuous_usage.then_some(self.tokens_done)
    }

    /// Ends the log once: records the outcome and hands the entry to the shared log.
    fn finalize(&mut self, finished: bool) {
        let Some(mut log) = self.log.take() else {
            return;
        };
        if self.decoding {
            self.shared.active_decodes.fetch_sub(1, Ordering::Relaxed);
            self.decoding = false;
        }
        log.finished = finished;
        log.output_tokens = self.tokens_done;
        // Once per request, from the stamps this body kept (no per-chunk metric work).
        self.shared.metrics.running.dec();
        self.shared
            .metrics
            .observe(&log, self.shared.config.cache.enabled);
        self.shared.log.finish(log);
    }
}

type PollFrame = Poll<Option<Result<Frame<Bytes>, SimBodyError>>>;

/// What one step of the schedule did: hand hyper a frame (or the end), or move to the next phase.
enum Step {
    Frame(Option<Result<Frame<Bytes>, SimBodyError>>),
    Next,
}

impl SimBody {
    /// Returns `Pending` once so hyper writes the frame it holds (`flush_each_chunk`).
    #[inline]
    fn yield_for_flush(&mut self, cx: &mut Context<'_>) -> PollFrame {
        // hyper writes what it holds when the body is not ready.
        self.flush_next = false;
        self.flushed_pending = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Stamps `flushed_mono_ns` on the previous chunk when the last `Pending` let hyper write it.
    #[inline]
    fn stamp_flushed(&mut self) {
        if std::mem::take(&mut self.flushed_pending) {
            // Polled again: the previous chunk has been written.
            let now = clock::now();
            if let Some(c) = self.log.as_mut().and_then(|l| l.chunks.last_mut()) {
                c.flushed_mono_ns = Some(now);
            }
        }
    }

    /// The role prelude (with the first token, or at once with `prelude_early`), if there is one.
    #[inline]
    fn poll_prelude(&mut self, cx: &mut Context<'_>) -> Poll<Step> {
        if !(self.plan.stream && self.plan.role_prelude) {
            self.phase = Phase::Tokens;
            return Poll::Ready(Step::Next);
        }
        let due = match self.first_token_at {
            Some(t) if !self.plan.prelude_early => Due::At(t),
            _ => Due::Now,
        };
        ready!(self.wait(due, cx));
        self.phase = Phase::Tokens;
        let bytes = self.writer.prelude(self.running_usage());
        self.emit(bytes, 0, ChunkKind::Prelude)
    }

    /// The next token chunk, or an injected fault due at it, or the move to the tail.
    #[inline]
    fn poll_tokens(&mut self, cx: &mut Context<'_>) -> Poll<Step> {
        match self.fault_here() {
            Some(FaultKind::Disconnect) => return self.poll_disconnect(cx),
            Some(FaultKind::Malformed) if self.plan.stream => return self.poll_malformed(cx),
            // Stall: folded into the due time. Malformed non-streaming: the body was cut at
            // construction.
            _ => {}
        }
        let Some(seg) = self.plan.output.segments.get(self.seg).copied() else {
            self.end_tokens();
            return Poll::Ready(Step::Next);
        };
        let due = self.token_due();
        ready!(self.wait(due, cx));
        let tokens = self.next_chunk_tokens();
        let (start, end) = self.advance(seg, tokens, due);
        if !self.plan.stream {
            return Poll::Ready(Step::Next);
        }
        self.emit_piece(seg, start, end, tokens)
    }

    /// The kind of the fault pending at this chunk, if one is.
    #[inline]
    fn fault_here(&self) -> Option<FaultKind> {
        match self.plan.fault {
            Some(f) if self.fault_pending && f.at_chunk == self.chunk_index => Some(f.kind),
            _ => None,
        }
    }

    /// An injected disconnect when its chunk is due: one flush first, then the error that cuts
    /// the connection.
    #[inline]
    fn poll_disconnect(&mut self, cx: &mut Context<'_>) -> Poll<Step> {
        let due = self.token_due();
        ready!(self.wait(due, cx));
        if !self.yielded_before_cut {
            // Return Pending once so hyper flushes the chunks already written: the client must
            // receive them and then see the broken stream (without this, a zero-delay stream is
            // cut before its head is sent).
            self.yielded_before_cut = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.fault_pending = false;
        self.phase = Phase::End;
        self.finalize(false);
        Poll::Ready(Step::Frame(Some(Err(SimBodyError::InjectedDisconnect))))
    }

    /// An injected malformed event when its chunk is due (streaming).
    #[inline]
    fn poll_malformed(&mut self, cx: &mut Context<'_>) -> Poll<Step> {
        let due = self.token_due();
        ready!(self.wait(due, cx));
        self.fault_pending = false;
        self.emit(
            Bytes::from_static(frame::MALFORMED),
            0,
            ChunkKind::Malformed,
        )
    }

    /// After the last token chunk: caches the output blocks and moves to the tail.
    #[inline]
    fn end_tokens(&mut self) {
        // Cache the output blocks before the client can see the end of the response, so its
        // next turn (on any connection) finds them.
        if !self.plan.output_keys.is_empty() {
            self.shared.cache_insert(&self.plan.output_keys);
        }
        self.phase = Phase::Tail;
    }

    /// Moves the cursor past one chunk of `tokens` in `seg` and counts it; returns the chunk's
    /// byte range in the output text.
    #[inline]
    fn advance(&mut self, seg: Segment, tokens: u64, due: Due) -> (usize, usize) {
        let start = seg.start + self.off;
        let end = match seg.kind {
            SegKind::ToolHeader => start,
            // At the segment's token position, moved forward to a character boundary (recorded
            // answers are any UTF-8; generated text is ASCII).
            _ => {
                let done = seg.tokens - self.seg_tokens_left + tokens;
                let text = &self.plan.output.text;
                let mut e = (seg.start + done as usize * BYTES_PER_TOKEN)
                    .min(seg.end)
                    .max(start);
                while !text.is_char_boundary(e) {
                    e += 1;
                }
                e
            }
        };
        self.off = end - seg.start;
        self.seg_tokens_left -= tokens;
        if self.seg_tokens_left == 0 {
            self.seg += 1;
            self.off = 0;
            self.seg_tokens_left = self
                .plan
                .output
                .segments
                .get(self.seg)
                .map_or(0, |s| s.tokens);
        }
        self.chunk_index += 1;
        self.tokens_done += tokens;
        if tokens > 0 {
            let now = Instant::now();
            self.first_token.get_or_insert(now);
            self.last_token = Some(now);
        }
        self.next_due = None;
        if let Due::At(t) = due {
            self.last_due = Some(t);
        }
        if !self.decoding {
            self.decoding = true;
            self.shared.active_decodes.fetch_add(1, Ordering::Relaxed);
        }
        (start, end)
    }

    /// Writes and emits the streaming event of one token chunk (`start..end` of `seg`).
    #[inline]
    fn emit_piece(&mut self, seg: Segment, start: usize, end: usize, tokens: u64) -> Poll<Step> {
        let last = self.seg >= self.plan.output.segments.len();
        let finish = last.then_some(self.plan.output.finish);
        let usage = self.running_usage();
        let o = &self.plan.output;
        let tool = o
            .tools
            .get(seg.tool)
            .map_or((0, "", ""), |t| (seg.tool, t.id.as_str(), t.name.as_str()));
        let bytes = self
            .writer
            .piece(seg.kind, &o.text[start..end], tool, finish, usage);
        let kind = match seg.kind {
            SegKind::Reasoning => ChunkKind::Reasoning,
            SegKind::Content => ChunkKind::Content,
            SegKind::ToolHeader | SegKind::ToolArgs => ChunkKind::ToolCall,
        };
        self.emit(bytes, tokens as u32, kind)
    }

    /// The usage chunk (streaming, when asked for) or the whole non-streaming body.
    #[inline]
    fn poll_tail(&mut self) -> Poll<Step> {
        if self.plan.stream {
            self.phase = Phase::Done;
            if matches!(self.plan.api, Api::Responses | Api::Messages) {
                // Their end events carry the usage; no `[DONE]` follows (as vLLM).
                self.phase = Phase::End;
                let field = self.shared.config.modes.reasoning_field.as_str();
                let bytes = self.writer.api_end(&self.plan, field, self.tokens_done);
                return self.emit(bytes, 0, ChunkKind::Usage);
            }
            if self.plan.include_usage {
                let metrics = self.plan.include_metrics.then(|| self.engine_metrics());
                let bytes = self.writer.usage(self.tokens_done, metrics.as_deref());
                return self.emit(bytes, 0, ChunkKind::Usage);
            }
            return Poll::Ready(Step::Next);
        }
        self.phase = Phase::End;
        let mut body = self.full.take().unwrap_or_default();
        if self.plan.include_metrics && body.last() == Some(&b'}') {
            // The whole body's last member, before its closing brace.
            let m = self.engine_metrics();
            let mut b = Vec::with_capacity(body.len() + m.len() + 12);
            b.extend_from_slice(&body[..body.len() - 1]);
            b.extend_from_slice(b",\"metrics\":");
            b.extend_from_slice(m.as_bytes());
            b.push(b'}');
            body = Bytes::from(b);
        }
        self.emit(body, self.tokens_done as u32, ChunkKind::Body)
    }
}

impl http_body::Body for SimBody {
    type Data = Bytes;
    type Error = SimBodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> PollFrame {
        let this = &mut *self;
        if this.flush_next {
            return this.yield_for_flush(cx);
        }
        this.stamp_flushed();
        loop {
            let step = match this.phase {
                Phase::Prelude => this.poll_prelude(cx),
                Phase::Tokens => this.poll_tokens(cx),
                Phase::Tail => this.poll_tail(),
                Phase::Done => {
                    this.phase = Phase::End;
                    this.emit(Bytes::from_static(frame::DONE), 0, ChunkKind::Done)
                }
                Phase::End => {
                    this.finalize(true);
                    return Poll::Ready(None);
                }
            };
            match ready!(step) {
                Step::Frame(frame) => return Poll::Ready(frame),
                Step::Next => {}
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.phase == Phase::End
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.full, self.plan.fault.map(|f| f.kind)) {
            (Some(b), None | Some(FaultKind::Stall(_) | FaultKind::Malformed)) => {
                SizeHint::with_exact(b.len() as u64)
            }
            _ => SizeHint::default(),
        }
    }
}

impl Drop for SimBody {
    fn drop(&mut self) {
        // Dropped after the last frame: a normal end. Dropped earlier: the client went away.
        let finished = self.phase == Phase::End;
        self.finalize(finished);
    }
}
