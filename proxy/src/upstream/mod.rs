//! The upstream side, one concept a module:
//!
//! ```text
//!  service::handle ─► Upstreams::ranking (replica.rs: rendezvous hashing, least loaded)
//!                  ─► Claim (replica.rs: a connection slot + the replica's load count)
//!                  ─► Sender::send (here) ─┬─ http:// ─► direct::exchange (direct.rs, pool.rs)
//!                                          └─ https://, h2c:// ─► Clients (hyper_client.rs, tls.rs)
//!                  ◄─ Response<UpstreamBody>: direct::H1Body | hyper's Incoming
//! ```
//!
//! - [`replica`]: the replica set, how a request ranks the replicas, its claim on one.
//! - [`direct`]: the HTTP/1.1 client for `http://` replicas whose response body is read by the
//!   task that writes it to the client; [`pool`]: its idle connections.
//! - [`hyper_client`]: hyper-util's pooled clients (`https://`, `h2c://`, `--upstream-client
//!   hyper`); [`tls`]: their rustls config.
//! - [`body`]: the request body sent upstream, and the response body's error (the response
//!   body itself, [`UpstreamBody`], is defined here: it names the direct client's body);
//!   [`error`]: why the upstream side cannot start.
//! - Here: [`Sender`], one attempt on one replica up to its response head.

pub mod body;
pub mod direct;
pub mod error;
pub mod hyper_client;
pub mod pool;
pub mod replica;
pub mod tls;

pub use body::{UpBody, UpstreamBodyError};
pub use error::UpstreamError;
pub use hyper_client::{ClientConfig, Clients, HttpClient};
pub use replica::{hash64, Claim, Upstream, Upstreams};
pub use tls::{provider, read_certs};

use crate::error::chain;
use http::{HeaderMap, Method, Request, Response, Uri, Version};
use std::time::Duration;
use tokentap_core::either::Either;

/// The upstream response body: from the direct HTTP/1.1 client, or from hyper-util's (the
/// direct client's error type covers both).
pub type UpstreamBody = Either<direct::H1Body, hyper::body::Incoming>;

/// A response head from one replica.
pub struct Answer {
    /// The response head and its body.
    pub response: Response<UpstreamBody>,
    /// The kept-alive connection first tried was closed under the request, which was sent
    /// again on a new one (counted as `stale_connection`).
    pub resent: bool,
}

/// How sending to one replica failed (before a response head).
#[derive(Debug)]
pub enum SendError {
    /// No connection: the next replica may take the request.
    Connect(String),
    /// No response head within `--upstream-timeout`.
    Timeout,
    /// Anything else: the request is answered with an error.
    Failed(String),
}

/// Sends requests to replicas: the clients, and the settings of an attempt.
pub struct Sender {
    /// The clients.
    pub clients: Clients,
    /// Plain `http://` replicas go through [`direct`] (`--upstream-client direct`).
    pub direct: bool,
    /// `--connect-timeout`.
    pub connect_timeout: Duration,
    /// `--upstream-keepalive`: how long an idle direct connection may be reused.
    pub keepalive: Duration,
    /// `--upstream-timeout`: connect + send + response head.
    pub timeout: Duration,
}

impl Sender {
    /// This replica goes through the direct HTTP/1.1 client (else hyper-util's).
    pub fn direct_for(&self, up: &Upstream) -> bool {
        up.plain_h1() && self.direct
    }

    /// Sends the request to one replica and waits for the response head: plain `http://`
    /// through the direct HTTP/1.1 client (unless `--upstream-client hyper`), the rest through
    /// hyper-util's.
    pub async fn send(
        &self,
        up: &Upstream,
        method: &Method,
        uri: Uri,
        headers: &HeaderMap,
        body: UpBody,
    ) -> Result<Answer, SendError> {
        if self.direct_for(up) {
            let out = direct::Outgoing {
                method,
                path: uri.path_and_query().map_or("/", |p| p.as_str()),
                headers,
                body,
                connect_timeout: self.connect_timeout,
                keepalive: self.keepalive,
            };
            let r = match crate::timers::timeout(self.timeout, direct::exchange(up, out)).await {
                Ok(Ok(r)) => r,
                Ok(Err(direct::ExchangeError::Connect(e))) => {
                    return Err(SendError::Connect(e.to_string()))
                }
                Ok(Err(e)) => return Err(SendError::Failed(e.to_string())),
                Err(_elapsed) => return Err(SendError::Timeout),
            };
            let mut response = Response::new(Either::Left(r.body));
            *response.status_mut() = r.status;
            *response.headers_mut() = r.headers;
            return Ok(Answer {
                response,
                resent: r.resent,
            });
        }
        let mut up_req = Request::new(body);
        *up_req.method_mut() = method.clone();
        *up_req.uri_mut() = uri;
        *up_req.version_mut() = Version::HTTP_11;
        *up_req.headers_mut() = headers.clone();
        let client = if up.h2_prior {
            &self.clients.h2
        } else {
            &self.clients.auto
        };
        match crate::timers::timeout(self.timeout, client.request(up_req)).await {
            Ok(Ok(resp)) => Ok(Answer {
                response: resp.map(Either::Right),
                resent: false,
            }),
            Ok(Err(e)) if e.is_connect() => Err(SendError::Connect(chain(&e))),
            Ok(Err(e)) => Err(SendError::Failed(chain(&e))),
            Err(_elapsed) => Err(SendError::Timeout),
        }
    }
}
