//! The state every request of the proxy shares: the config, the replicas and how to send to
//! them, the ledger where finished requests go, and the count of requests seen. Nothing in it
//! is touched per chunk; a request's [`crate::meter::Tap`] holds only the ledger and its claim
//! on one replica.

use crate::config::Config;
use crate::ledger::Ledger;
use crate::upstream::{Sender, Upstreams};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// State shared by every request. Nothing in it is touched per chunk.
pub struct Shared {
    /// The proxy's options.
    pub cfg: Config,
    /// The replicas.
    pub upstreams: Upstreams,
    /// How requests reach them.
    pub sender: Sender,
    /// Records, sessions, metrics, the in-flight count: what a finished request touches.
    pub ledger: Arc<Ledger>,
    /// Requests handed to the service.
    pub seen: AtomicU64,
}
