//! `--tokenizer`: the reference tokenizer's counts in the proxy's records, off the data path.
//!
//! With a tokenizer folder, the proxy keeps refcounted clones of each LLM request's body and
//! response frames (as `--record-content` does: no copy on the data path) and, when the response
//! has ended, hands the record to this stage instead of straight to the writer. A small thread
//! pool accumulates the output exactly as the MLPerf reference does (`tokentap_mlperf::output`),
//! counts OSL, the TPOT denominator and ISL with the reference tokenizer, and — when the server
//! sent no usage — makes the tokenizer's OSL the record's `output_tokens` (source `tokenizer`,
//! spread over the text chunks), then passes the record on to the writer.
//!
//! A session's next request re-sends its history: its ISL is counted from the session's
//! previous prompt (`PromptMemos`), paying only for the new text; a request without a session
//! is counted on its own. The counts are the same either way.
//!
//! The stage never loses a record: when its queue is full the record goes to the writer without
//! counts (`tokentap_tokenizer_skipped_total`), and at shutdown the stage drains before the
//! writer flushes.

use crate::records::Writer;
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use tokentap_core::record::{Status, TurnRecord};
use tokentap_core::sse::Framer;
use tokentap_core::timeline::TokenSource;
use tokentap_mlperf::tokenizer::PromptMemos;
use tokentap_mlperf::{Accumulator, PromptInput, RefTokenizer};
use tokio::sync::Notify;

/// Records waiting for their counts, at most.
pub const QUEUE: usize = 4096;

/// One finished request.
pub struct Job {
    /// Its record.
    pub rec: Box<TurnRecord>,
    /// The request body, when it was kept.
    pub request: Option<Bytes>,
    /// The response body's frames.
    pub response: Vec<Bytes>,
    /// The response was an event stream (else one JSON body).
    pub sse: bool,
    /// Chat completions are counted; the Responses and Messages APIs are not (their requests
    /// and outputs are not the chat messages the reference's template counts): their records
    /// carry the server's usage, which those APIs always send.
    pub chat: bool,
}

struct Pending {
    n: AtomicU64,
    idle: Notify,
}

/// The counting stage.
pub struct Stage {
    tx: SyncSender<Job>,
    pending: Arc<Pending>,
    writer: Writer,
    /// Records passed on without counts because the queue was full.
    pub skipped: Arc<AtomicU64>,
}

impl Stage {
    /// Starts the stage's threads, handing counted records to `writer`.
    pub fn start(
        tokenizer: Arc<RefTokenizer>,
        writer: Writer,
        threads: usize,
    ) -> std::io::Result<Stage> {
        let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let pending = Arc::new(Pending {
            n: AtomicU64::new(0),
            idle: Notify::new(),
        });
        let memos = Arc::new(Mutex::new(PromptMemos::default()));
        for i in 0..threads.max(1) {
            let (rx, tok, w, p, memos) = (
                rx.clone(),
                tokenizer.clone(),
                writer.clone(),
                pending.clone(),
                memos.clone(),
            );
            std::thread::Builder::new()
                .name(format!("tokentap-tokens-{i}"))
                .spawn(move || loop {
                    let job = rx.lock().recv();
                    let Ok(job) = job else { return };
                    w.send(count_after(&tok, &memos, job));
                    if p.n.fetch_sub(1, Ordering::AcqRel) == 1 {
                        p.idle.notify_waiters();
                    }
                })?;
        }
        Ok(Stage {
            tx,
            pending,
            writer,
            skipped: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Hands a finished request over without waiting.
    pub fn submit(&self, job: Job) {
        self.pending.n.fetch_add(1, Ordering::AcqRel);
        match self.tx.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(job)) | Err(TrySendError::Disconnected(job)) => {
                self.pending.n.fetch_sub(1, Ordering::AcqRel);
                self.skipped.fetch_add(1, Ordering::Relaxed);
                self.writer.send(job.rec);
            }
        }
    }

    /// Waits until every submitted record has been passed to the writer.
    pub async fn drain(&self) {
        loop {
            let n = self.pending.idle.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.pending.n.load(Ordering::Acquire) == 0 {
                return;
            }
            n.await;
        }
    }
}

/// Counts one record's tokens.
pub fn count(tok: &RefTokenizer, job: Job) -> Box<TurnRecord> {
    count_after(tok, &Mutex::new(PromptMemos::default()), job)
}

/// [`count`], the ISL counted from the session's previous prompt in `memos`.
pub fn count_after(tok: &RefTokenizer, memos: &Mutex<PromptMemos>, job: Job) -> Box<TurnRecord> {
    let Job {
        mut rec,
        request,
        response,
        sse,
        chat,
    } = job;
    if !chat {
        return rec;
    }
    if let Some(p) = request.as_deref().and_then(PromptInput::from_body) {
        match rec.conversation_id.clone() {
            Some(session) => {
                let (mut memo, ()) = memos.lock().take(&session);
                tok.record_prompt_after(&p, &mut memo, &mut rec);
                memos.lock().put(session, memo, ());
            }
            None => tok.record_prompt(&p, &mut rec),
        }
    }
    if rec.status != Status::Ok || response.is_empty() {
        return rec;
    }
    let mut acc = Accumulator::default();
    let body = crate::content::concat_frames(&response);
    if sse {
        Framer::each_data(&body, |data| acc.feed(data));
    } else {
        acc.feed(&body);
    }
    tok.record_output(&acc.output(), &mut rec);
    if let Some(n) = rec.osl {
        rec.measured.set_output_tokens(n, TokenSource::Tokenizer);
    }
    rec
}
