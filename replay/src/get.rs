//! One small `GET` — an endpoint's `/v1/models`, an engine's `/metrics` — through hyper-util's
//! pooled client (rustls for https, with the run's trust), bounded in size and in time. The
//! measured requests never go through here: they have the replay's own stamping client.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;
use tokentap_core::tls::Trust;

/// A client for small documents. Cheap to clone; keeps its connections alive between calls.
#[derive(Clone)]
pub struct Getter {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

/// What one `GET` answered.
#[derive(Debug)]
pub struct Answer {
    /// The response's status.
    pub status: http::StatusCode,
    /// The response's body.
    pub body: Bytes,
}

impl Getter {
    /// A client that checks https servers as `trust` says (plain http needs none).
    pub fn new(trust: &Trust) -> Result<Getter, String> {
        let tls = tokentap_core::tls::client_config(trust, &[]).map_err(|e| e.to_string())?;
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Getter {
            client: Client::builder(TokioExecutor::new()).build(https),
        })
    }

    /// `GET url` with `headers`; the body up to `max` bytes, the whole exchange within
    /// `timeout`. Errors say what failed (connect, TLS, the status line, the size, the time).
    pub async fn get(
        &self,
        url: &http::Uri,
        headers: &[(http::HeaderName, http::HeaderValue)],
        max: usize,
        timeout: Duration,
    ) -> Result<Answer, String> {
        let fut = async {
            let mut req = http::Request::get(url.clone());
            for (k, v) in headers {
                req = req.header(k, v);
            }
            let req = req.body(Empty::new()).map_err(|e| e.to_string())?;
            let res = self.client.request(req).await.map_err(|e| {
                // hyper-util's error says "client error (Connect)": the cause says what.
                let cause = std::error::Error::source(&e).map(|c| c.to_string());
                cause.map_or_else(|| e.to_string(), |c| format!("{e}: {c}"))
            })?;
            let status = res.status();
            let body = Limited::new(res.into_body(), max)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        format!("the answer is over {max} bytes")
                    } else {
                        format!("reading the answer: {e}")
                    }
                })?
                .to_bytes();
            Ok(Answer { status, body })
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| format!("no answer within {timeout:?}"))?
    }
}
