//! After a turn: its reference token counts and its inline score, off the slots' path.
//!
//! A slot hands every finished turn to this stage and goes on with its trajectory at once: the
//! next turn of a closed loop must not wait for a tokenizer. A small pool of threads counts
//! OSL, the TPOT denominator and ISL with the reference tokenizer (`--tokenizer`; each count
//! renders the chat template and encodes, 10 µs to several ms) and scores the turn with the
//! reference's inline scorer, then passes the record on to the collector. Without a tokenizer
//! the counts come from what the server said (usage) or from chunk counts, labelled so.
//!
//! ```text
//!  slot ──Job──► post pool (N threads) ──Msg::Record──► collector ──► records.jsonl, aggregates
//! ```
//!
//! The pool drains completely before the run's files are written: a run stopped with Ctrl-C
//! still has every count and score of the turns it recorded.
//!
//! A trajectory's prompts each begin with the one before: the ISL of its next turn is counted
//! from what its previous prompt left (`PromptMemos`: the rendered prompt and its counts at
//! each special token), so a turn pays for its new text, not for the whole conversation again.

use crate::collector::{Msg, RefTurn, ReplayRecord};
use crate::request::RequestBody;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::mpsc;
use std::sync::Arc;
use tokentap_core::record::{CountSource, Status, TurnRecord};
use tokentap_core::timeline::TokenSource;
use tokentap_mlperf::scorer::{ModelMessage, TurnKey};
use tokentap_mlperf::tokenizer::PromptMemos;
use tokentap_mlperf::{ModelOutput, PromptInput, RefTokenizer, Scorer};
use tokio::sync::mpsc::UnboundedSender;

/// One finished turn.
pub(crate) struct Job {
    pub record: TurnRecord,
    /// The output as the reference accumulated it; `None` when not captured or the turn did not
    /// complete.
    pub output: Option<ModelOutput>,
    /// `output` holds every chunk (else only what the scorer reads).
    pub complete_output: bool,
    /// The request as sent, for the ISL count (only with a tokenizer).
    pub body: Option<RequestBody>,
    pub key: TurnKey,
    /// The trajectory's last turn: its prompt memo is let go once counted.
    pub last: bool,
}

/// What the pool counts and scores with.
pub(crate) struct Ctx {
    pub tokenizer: Option<Arc<RefTokenizer>>,
    /// `None` for the warmup, which is not scored.
    pub scorer: Option<Arc<Scorer>>,
    /// `--record-outputs`.
    pub record_outputs: bool,
    /// Each trajectory's last prompt, for its next ISL count, and the segments it was read
    /// from.
    pub memos: Mutex<PromptMemos<Segments>>,
}

/// The `messages` segments of a trajectory's last body counted, with how many messages each
/// holds. A segment is held (a refcount), so one at the same address is the same one: the
/// next body's segments that are these were read already.
#[derive(Debug, Default)]
pub(crate) struct Segments(Vec<(Bytes, usize)>);

impl Segments {
    /// The prompt of `body` as what is new since the last body read — its messages past the
    /// first `kept`, which are the memo's (it holds `memo_messages`) — or `None` when the body
    /// has no messages or is not JSON (no count, as for any request the reference cannot read).
    fn next(&mut self, body: &RequestBody, memo_messages: usize) -> Option<(PromptInput, usize)> {
        let got = self.read(body, memo_messages);
        if got.is_none() {
            // Nothing counted: the memo was not moved on, so nothing here may be trusted.
            self.0.clear();
        }
        got
    }

    fn read(&mut self, body: &RequestBody, memo_messages: usize) -> Option<(PromptInput, usize)> {
        let (segs, tail) = body.message_parts();
        let same = self
            .0
            .iter()
            .zip(segs)
            .take_while(|((held, _), s)| held.as_ptr() == s.as_ptr() && held.len() == s.len())
            .count();
        let mut kept: usize = self.0[..same].iter().map(|(_, n)| n).sum();
        let mut from = same;
        if kept > memo_messages {
            // The memo was let go (or counted nothing): everything is read again.
            (kept, from) = (0, 0);
        }
        self.0.truncate(from);
        let mut new = Vec::new();
        for s in &segs[from..] {
            let list = s.strip_prefix(b",").unwrap_or(s);
            let mut json = Vec::with_capacity(list.len() + 2);
            json.push(b'[');
            json.extend_from_slice(list);
            json.push(b']');
            let msgs: Vec<serde_json::Value> = serde_json::from_slice(&json).ok()?;
            self.0.push((s.clone(), msgs.len()));
            new.extend(msgs);
        }
        if kept + new.len() == 0 {
            return None;
        }
        let mut settings = Vec::with_capacity(tail.len() + 13);
        settings.extend_from_slice(b"{\"messages\":[");
        settings.extend_from_slice(tail);
        let serde_json::Value::Object(o) = serde_json::from_slice(&settings).ok()? else {
            return None;
        };
        Some((PromptInput::from_object(o, new), kept))
    }
}

/// Starts `threads` workers; returns the job sender. The workers stop when every sender is
/// dropped and the queue is empty, dropping their collector senders.
pub(crate) fn start(
    ctx: Arc<Ctx>,
    collector: UnboundedSender<Msg>,
    threads: usize,
) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    for i in 0..threads.max(1) {
        let (rx, ctx, out) = (rx.clone(), ctx.clone(), collector.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("tokentap-post-{i}"))
            .spawn(move || loop {
                let job = rx.lock().recv();
                let Ok(job) = job else { return };
                // The collector outlives the pool; a failed send means it crashed, which the run
                // reports on its own.
                let _ = out.send(Msg::Record(Box::new(process(&ctx, job))));
            });
        if let Err(e) = spawned {
            tracing::error!("cannot start a post-processing thread: {e}");
        }
    }
    tx
}

/// Threads for the pool: with a tokenizer, up to half the cores (the slots need the rest), at
/// least 1.
pub(crate) fn threads(tokenizer: bool) -> usize {
    if !tokenizer {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).clamp(1, 8)
}

fn usage_source(s: TokenSource) -> CountSource {
    match s {
        TokenSource::Chunks => CountSource::Chunks,
        _ => CountSource::Usage,
    }
}

/// Counts and scores one turn.
pub(crate) fn process(ctx: &Ctx, job: Job) -> ReplayRecord {
    let Job {
        mut record,
        output,
        complete_output,
        body,
        key,
        last,
    } = job;
    let ok = record.status == Status::Ok;
    if let (true, true, Some(out)) = (ctx.record_outputs, complete_output, &output) {
        record.content = Some(serde_json::json!({ "output": out.to_event_data() }));
    }
    if ok {
        match (&ctx.tokenizer, &output) {
            (Some(tok), Some(out)) => tok.record_output(out, &mut record),
            _ => {
                // Not the reference's count: the server's usage, else chunks. An output the
                // reference would find empty has no OSL sample, as there.
                let empty = complete_output && output.as_ref().is_some_and(|o| o.text().is_empty());
                let m = &record.measured;
                if let (Some(n), false) = (m.output_tokens, empty) {
                    let first = m
                        .chunks
                        .iter()
                        .find(|c| c.text)
                        .map_or(0, |c| u64::from(c.tokens));
                    record.osl = Some(n);
                    record.tpot_tokens = Some(n.saturating_sub(first));
                    record.osl_source = Some(usage_source(m.output_tokens_source));
                }
            }
        }
    }
    if record.status != Status::Aborted {
        match (&ctx.tokenizer, &body) {
            (Some(tok), Some(b)) => {
                let trajectory = record.conversation_id.clone().unwrap_or_default();
                let (mut memo, mut read) = ctx.memos.lock().take(&trajectory);
                if let Some((p, kept)) = read.next(b, memo.messages()) {
                    tok.record_prompt_continued(&p, kept, &mut memo, &mut record);
                }
                if !last {
                    ctx.memos.lock().put(trajectory, memo, read);
                }
            }
            _ => {
                if let Some(p) = record.measured.prompt_tokens {
                    record.isl = Some(p);
                    record.isl_source = Some(CountSource::Usage);
                }
            }
        }
    }
    let score = match &ctx.scorer {
        // Issued in the reference's sense (sent, or aborted after a failure): scored.
        Some(scorer) if tokentap_mlperf::window::issued(&record) => {
            let model = if ok {
                output.as_ref().map(|o| {
                    let p = o.message_parts();
                    ModelMessage {
                        content: Some(p.content),
                        reasoning_content: p.reasoning,
                        tool_calls: p.tool_calls,
                    }
                })
            } else {
                None
            };
            scorer.score(&key, model.as_ref())
        }
        _ => None,
    };
    ReplayRecord {
        accuracy: score.as_ref().map(|s| s.score),
        record,
        reference: Some(RefTurn { key, score }),
    }
}
