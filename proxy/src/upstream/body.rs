//! The bodies of the upstream side: what goes to a replica, and what comes back.

use crate::sniff::{RequestTap, TapError};
use bytes::Bytes;
use http_body_util::Full;
use std::convert::Infallible;
use tokentap_core::either::Either;

/// The body sent upstream: the client's, tapped as it streams through, or a buffered one
/// (rewritten by `--inject-usage`, and re-sendable to the next replica).
pub type UpBody = Either<RequestTap, Full<Bytes>>;

impl From<Infallible> for TapError {
    fn from(never: Infallible) -> TapError {
        match never {}
    }
}

/// Why an upstream response body failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamBodyError {
    /// From hyper's client.
    #[error(transparent)]
    Hyper(#[from] hyper::Error),
    /// From the direct client's socket.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
