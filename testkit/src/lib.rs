//! # tokentap-testkit — what the end-to-end tests of every crate share
//!
//! A dev-dependency only (never shipped). Everything here talks to real servers over real
//! sockets on `127.0.0.1:0`; nothing is mocked.
//!
//! - [`client`]: one stamping client — every response frame is stamped with
//!   [`tokentap_core::clock::now`] as it arrives, over hyper-util's pooled client ([`client::send`])
//!   or one hyper connection per request ([`client::open`], [`client::send_once`]).
//! - [`requests`]: the chat request bodies and request builders.
//! - [`topology`]: the sim ← proxy ← replay topology builder ([`topology::Stack`]) and its parts.
//! - [`upstreams`]: raw-TCP upstreams for faults the sim cannot produce (refuse, close before the
//!   head, never answer, split events).
//! - [`data`]: dataset synthesis and parsing, temp dirs (`tempfile`).
//! - [`measure`]: a command run to its end with its peak resident memory (`wait4`).
//! - [`page`]: a report page in headless Chromium, and the check that it reads well.
//!
//! Each crate's tests import one view: [`proxy`], [`sim`] or [`replay`] (`use
//! tokentap_testkit::proxy::*;`), the names those tests have always used.

#![warn(missing_docs)]

pub mod client;
pub mod data;
pub mod fuzz;
pub mod measure;
pub mod page;
pub mod requests;
pub mod spawn;
pub mod topology;
pub mod upstreams;

pub mod proxy;
pub mod replay;
pub mod sim;

use std::time::Duration;

/// Fails the test instead of hanging when an awaited event never comes.
pub async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the awaited event never happened")
}
