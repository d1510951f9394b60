//! Where a finished request goes: the record writer, the session table, the metrics, the
//! `--tokenizer` stage, and the count of requests whose records are still to come.
//!
//! A [`crate::meter::Tap`] holds an [`InFlight`] guard (an `Arc<Ledger>` that counts the
//! request) and the [`crate::upstream::Claim`] on the one replica it went to — not the whole
//! server: at its end a request can reach these and nothing else (not the config, not the other
//! replicas, not the clients).

use crate::metrics::Metrics;
use crate::records::Writer;
use crate::sessions::Sessions;
use crate::tokens::{Job, Stage};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

/// The sinks of finished requests, shared by every request.
pub struct Ledger {
    /// The records' writer.
    pub writer: Writer,
    /// The session table.
    pub sessions: Sessions,
    /// The metrics.
    pub metrics: Metrics,
    /// `--tokenizer`: counts the reference's tokens before records reach the writer.
    pub tokens: Option<Stage>,
    /// `--record-content`: prompts and outputs go into the records.
    pub record_content: bool,
    /// `--max-event-bytes`: the most of one response held to measure it.
    pub max_event_bytes: usize,
    /// `--max-session-id-bytes`: a session named at the end of its first turn (by a response
    /// id) is cut like one named by a header.
    pub max_session_id_bytes: usize,
    /// Requests whose records are not handed on yet (see [`InFlight`]).
    live: AtomicUsize,
    /// Notified when `live` drops to zero.
    idle: Notify,
    /// The shutdown deadline passed: taps dropped now were cut by us, not by the client.
    cutting: AtomicBool,
}

/// What a ledger is made of besides its settings.
pub struct Parts {
    /// The records' writer.
    pub writer: Writer,
    /// The session table.
    pub sessions: Sessions,
    /// The metrics.
    pub metrics: Metrics,
    /// The tokenizer stage (`--tokenizer`).
    pub tokens: Option<Stage>,
}

impl Ledger {
    /// The ledger of a proxy configured by `cfg`, over its parts.
    pub fn new(cfg: &crate::Config, parts: Parts) -> Ledger {
        let Parts {
            writer,
            sessions,
            metrics,
            tokens,
        } = parts;
        Ledger {
            writer,
            sessions,
            metrics,
            tokens,
            record_content: cfg.record_content,
            max_event_bytes: cfg.max_event_bytes,
            max_session_id_bytes: cfg.max_session_id_bytes,
            live: AtomicUsize::new(0),
            idle: Notify::new(),
            cutting: AtomicBool::new(false),
        }
    }

    /// Request bodies and response frames are kept for the end of the request (content
    /// recording, or the tokenizer's counts).
    pub fn keep_bodies(&self) -> bool {
        self.record_content || self.tokens.is_some()
    }

    /// A request starts: counted until its guard is dropped.
    pub fn enter(self: &Arc<Ledger>) -> InFlight {
        self.live.fetch_add(1, Ordering::AcqRel);
        self.metrics.in_flight.inc();
        InFlight {
            ledger: self.clone(),
            left: false,
        }
    }

    /// Hands a finished record on: to the tokenizer stage for a measured route when
    /// `--tokenizer` is set (it writes the record after counting), else to the writer.
    pub fn submit(&self, job: Job, measured_route: bool) {
        match (&self.tokens, measured_route) {
            (Some(stage), true) => stage.submit(job),
            _ => {
                self.writer.send(job.rec);
            }
        }
    }

    /// The shutdown deadline passed: requests cut from now on are the proxy's doing.
    pub fn start_cutting(&self) {
        self.cutting.store(true, Ordering::Release);
    }

    /// [`Ledger::start_cutting`] was called.
    pub fn cutting(&self) -> bool {
        self.cutting.load(Ordering::Acquire)
    }

    /// Waits until every request that entered has handed its record on.
    pub async fn idle(&self) {
        loop {
            let n = self.idle.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            if self.live.load(Ordering::Acquire) == 0 {
                return;
            }
            n.await;
        }
    }
}

/// One request in flight: counted in the ledger's live count and in
/// `tokentap_proxy_in_flight` until [`InFlight::leave`] (which the tap calls right after handing
/// its record on, so a drained proxy has every record in the writer's hands) or, at the latest,
/// until dropped. Derefs to the ledger, which stays reachable after leaving.
pub struct InFlight {
    ledger: Arc<Ledger>,
    left: bool,
}

impl InFlight {
    /// No longer counted (idempotent).
    pub fn leave(&mut self) {
        if std::mem::replace(&mut self.left, true) {
            return;
        }
        self.ledger.metrics.in_flight.dec();
        if self.ledger.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.ledger.idle.notify_waiters();
        }
    }
}

impl std::ops::Deref for InFlight {
    type Target = Ledger;
    fn deref(&self) -> &Ledger {
        &self.ledger
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.leave();
    }
}
