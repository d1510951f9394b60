//! The state every request of the proxy shares: the config, the replicas and their clients, the
//! record writer, the metrics, the session table, and the drain bookkeeping. Nothing in it is
//! touched per chunk.

use crate::config::Config;
use crate::metrics::Metrics;
use crate::records::Writer;
use crate::sessions::Sessions;
use crate::upstream::{Clients, Upstreams};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use tokio::sync::Notify;

/// State shared by every request. Nothing in it is touched per chunk.
pub struct Shared {
    pub cfg: Config,
    pub upstreams: Upstreams,
    pub clients: Clients,
    pub writer: Writer,
    pub metrics: Metrics,
    pub sessions: Sessions,
    /// Requests handed to the service.
    pub seen: AtomicU64,
    /// Taps not yet finished (records not yet handed to the writer).
    pub live: AtomicUsize,
    /// Notified when `live` drops to zero.
    pub idle: Notify,
    /// The shutdown deadline passed: taps dropped now were cut by us, not by the client.
    pub cutting: AtomicBool,
    /// `--tokenizer`: counts the reference's tokens before records reach the writer.
    pub tokens: Option<crate::tokens::Stage>,
}

impl Shared {
    /// Request bodies and response frames are kept for the end of the request (content
    /// recording, or the tokenizer's counts).
    pub fn keep_bodies(&self) -> bool {
        self.cfg.record_content || self.tokens.is_some()
    }
}
