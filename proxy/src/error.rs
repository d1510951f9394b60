//! Every way a proxied request can fail, with whose fault it was (pingora's habit) and a
//! bounded `kind` that becomes a record field and a metric label.
//!
//! A failure before the response head is answered by the proxy itself with an OpenAI-style JSON
//! body, `{"error":{"message","type":"proxy_error","code"}}`, so clients that parse OpenAI
//! errors show something sensible. A failure after the head has gone out cannot change the status
//! any more: the stream is cut (the client sees a broken stream, as it would without the proxy)
//! and the record says what happened.

use bytes::Bytes;
use http::StatusCode;
use tokentap_core::record::{ErrorKind, ErrorSource, Status, TurnError};

/// A failure the proxy answers itself.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// Every candidate upstream refused the connection (or failed TLS / DNS).
    #[error("no upstream accepted the connection: {0}")]
    Connect(String),
    /// The upstream did not send response headers within `--upstream-timeout`.
    #[error("upstream sent no response headers within {0} ms")]
    Timeout(u64),
    /// The upstream connection broke before response headers arrived.
    #[error("upstream connection failed before the response: {0}")]
    Reset(String),
    /// Request headers larger than `--max-header-bytes`.
    #[error("request headers are {got} bytes, the limit is {limit} bytes")]
    HeadersTooLarge {
        /// The headers' size.
        got: usize,
        /// `--max-header-bytes`.
        limit: usize,
    },
    /// A head past the HTTP layer's own bound (twice `--max-header-bytes`, or more header lines
    /// than it can index): refused by hyper before the proxy could read it.
    #[error("request head over {cap} bytes or {lines} header lines, refused unread by the HTTP layer (the limit is {limit} bytes)")]
    HeadUnread {
        /// The HTTP layer's bound on the head, bytes.
        cap: usize,
        /// Its bound on header lines.
        lines: usize,
        /// `--max-header-bytes`.
        limit: usize,
    },
    /// Request body larger than `--max-body-bytes`.
    #[error("request body exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// `--max-body-bytes`.
        limit: u64,
    },
    /// The client's request body broke (it went away while uploading).
    #[error("request body could not be read: {0}")]
    RequestBody(String),
    /// `--inject-usage` could not read the request body as JSON; it is forwarded untouched instead
    /// (never answered with this error), kept here so the kind is bounded and documented.
    #[error("request is not valid JSON: {0}")]
    BadJson(String),
    /// An HTTP/1.1 request without a `Host` header, or with several (RFC 9112 §3.2: 400).
    #[error("{0}")]
    BadHost(String),
    /// A method the proxy does not forward (`CONNECT`: it is not a tunnel).
    #[error("{0} is not forwarded: this proxy measures HTTP requests, it does not open tunnels")]
    MethodNotAllowed(String),
    /// Every upstream connection of the replica was in use for `--upstream-queue-timeout` (503).
    #[error("upstream {upstream} is at its limit of {limit} requests in flight; waited {waited_ms} ms for a free one")]
    UpstreamBusy {
        /// The replica.
        upstream: String,
        /// `--max-upstream-connections`.
        limit: usize,
        /// How long the request waited, ms.
        waited_ms: u64,
    },
    /// The client's request body stalled longer than `--body-timeout` (408).
    #[error("the request body stalled: no byte from the client for {0} ms")]
    BodyTimeout(u64),
    /// A bug or an impossible state.
    #[error("internal proxy error: {0}")]
    Internal(String),
}

impl ProxyError {
    /// Whose fault it was.
    pub fn source(&self) -> ErrorSource {
        match self {
            ProxyError::Connect(_)
            | ProxyError::Timeout(_)
            | ProxyError::Reset(_)
            | ProxyError::UpstreamBusy { .. } => ErrorSource::Upstream,
            ProxyError::HeadersTooLarge { .. }
            | ProxyError::HeadUnread { .. }
            | ProxyError::BodyTooLarge { .. }
            | ProxyError::RequestBody(_)
            | ProxyError::BadJson(_)
            | ProxyError::BadHost(_)
            | ProxyError::MethodNotAllowed(_)
            | ProxyError::BodyTimeout(_) => ErrorSource::Downstream,
            ProxyError::Internal(_) => ErrorSource::Internal,
        }
    }

    /// The bounded identifier used in records and metric labels.
    pub fn kind(&self) -> &'static str {
        self.error_kind().as_str()
    }

    /// Its name in the shared vocabulary.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            ProxyError::Connect(_) => ErrorKind::Connect,
            ProxyError::Timeout(_) => ErrorKind::Timeout,
            ProxyError::Reset(_) => ErrorKind::Reset,
            ProxyError::HeadersTooLarge { .. } | ProxyError::HeadUnread { .. } => {
                ErrorKind::HeadersTooLarge
            }
            ProxyError::BodyTooLarge { .. } => ErrorKind::BodyTooLarge,
            ProxyError::RequestBody(_) => ErrorKind::RequestBody,
            ProxyError::BadJson(_) => ErrorKind::BadJson,
            ProxyError::BadHost(_) => ErrorKind::BadHost,
            ProxyError::MethodNotAllowed(_) => ErrorKind::MethodNotAllowed,
            ProxyError::BodyTimeout(_) => ErrorKind::RequestBodyTimeout,
            ProxyError::UpstreamBusy { .. } => ErrorKind::UpstreamBusy,
            ProxyError::Internal(_) => ErrorKind::Internal,
        }
    }

    /// The status the proxy answers with.
    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::Connect(_) | ProxyError::Reset(_) => StatusCode::BAD_GATEWAY,
            ProxyError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ProxyError::HeadersTooLarge { .. } | ProxyError::HeadUnread { .. } => {
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
            }
            ProxyError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ProxyError::RequestBody(_) | ProxyError::BadJson(_) | ProxyError::BadHost(_) => {
                StatusCode::BAD_REQUEST
            }
            ProxyError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ProxyError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ProxyError::UpstreamBusy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ProxyError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// How the turn is recorded.
    pub fn record_status(&self) -> Status {
        match self {
            ProxyError::Timeout(_) => Status::TimedOut,
            _ => Status::Failed,
        }
    }

    /// The record's error field.
    pub fn turn_error(&self) -> TurnError {
        TurnError::new(self.source(), self.error_kind(), self.to_string())
    }

    /// `{"error":{"message","type":"proxy_error","code"}}`.
    pub fn json_body(&self) -> Bytes {
        let v = serde_json::json!({
            "error": {
                "message": self.to_string(),
                "type": "proxy_error",
                "code": self.kind(),
            }
        });
        Bytes::from(v.to_string())
    }
}

/// Renders an error and its whole `source()` chain on one line (hyper's errors put the useful part
/// — "connection refused" — several levels down).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_body_is_openai_shaped() {
        let e = ProxyError::Timeout(5);
        let v: serde_json::Value = serde_json::from_slice(&e.json_body()).unwrap();
        assert_eq!(v["error"]["type"], "proxy_error");
        assert_eq!(v["error"]["code"], "timeout");
        assert_eq!(e.status(), StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(e.source(), ErrorSource::Upstream);
        assert_eq!(
            ProxyError::BodyTooLarge { limit: 1 }.status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
    }
}
