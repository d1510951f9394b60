//! HTTP/2 for a slot: chosen by ALPN on an https endpoint that offers `h2`, or with `--http2`
//! (prior knowledge on `http://`). One connection per slot as for HTTP/1.1 and one stream per
//! turn: the closed loop is unchanged (a slot never has two streams open).
//!
//! The connection is driven by a task of its own (the `h2` crate's `Connection`); the slot sends
//! the request (honouring the server's flow-control window) and reads the response stream.
//! Stamps: the connection task reads the socket through the stamping [`RxStream`], which
//! publishes each read's stamps to a [`StampCell`]; the slot stamps the response head and each
//! DATA frame with the newest read at the moment it receives it — the arrival of that frame's
//! last TCP segment, or later when the connection task had already read the frames after it
//! (never earlier than the truth; frames that arrive together are stamped together).

use crate::response::{
    broke, conclude, date_secs, upstream, Capture, Ctx, Exchange, Scratch, Sink, Stale, TurnOpts,
};
use crate::rx::StampCell;
use bytes::Bytes;
use http::Request;
use std::sync::Arc;
use tokentap_core::clock;
use tokentap_core::record::ErrorKind;
use tokentap_core::timeline::Timeline;

/// The flow-control windows the client advertises: large enough that a streamed response
/// never waits for a WINDOW_UPDATE (8 MiB per stream, 16 MiB per connection).
const STREAM_WINDOW: u32 = 8 << 20;
const CONN_WINDOW: u32 = 16 << 20;

/// A slot's HTTP/2 connection.
pub(crate) struct H2Conn {
    send: h2::client::SendRequest<Bytes>,
    stamps: Arc<StampCell>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl H2Conn {
    /// The HTTP/2 handshake over `io` (whose reads publish to `stamps`).
    pub async fn handshake<T>(io: T, stamps: Arc<StampCell>) -> Result<H2Conn, h2::Error>
    where
        T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (send, conn) = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONN_WINDOW)
            .handshake::<_, Bytes>(io)
            .await?;
        let task = tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "HTTP/2 connection ended");
            }
        });
        Ok(H2Conn { send, stamps, task })
    }

    /// The connection task still runs (the server has not closed it).
    pub fn alive(&self) -> bool {
        !self.task.is_finished()
    }
}

/// One turn on the slot's HTTP/2 connection: the request's head (`:authority` from its URI, no
/// `Host`) and body, then the response stream into the turn's timeline.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn attempt(
    h2c: &mut H2Conn,
    uri: &http::Uri,
    head: &Request<()>,
    segments: &[Bytes],
    tl_slot: &mut Option<Timeline>,
    scratch: &mut Scratch,
    opts: TurnOpts,
) -> Result<Exchange, Stale> {
    let stale =
        |what: &str, e: h2::Error| Stale(upstream(ErrorKind::Reset, format!("{what}: {e}")));
    let mut send = h2c
        .send
        .clone()
        .ready()
        .await
        .map_err(|e| stale("HTTP/2 connection not ready", e))?;
    let mut req = head.clone();
    *req.version_mut() = http::Version::HTTP_2;
    *req.uri_mut() = uri.clone();
    req.headers_mut().remove(http::header::HOST);
    let body_len: usize = segments.iter().map(Bytes::len).sum();
    // The send instant: every offset of the turn counts from here.
    let tl = tl_slot.insert(Timeline::new(clock::now(), opts.expected_chunks));
    let (response, mut stream) = send
        .send_request(req, body_len == 0)
        .map_err(|e| stale("HTTP/2 request refused", e))?;
    if body_len > 0 {
        if let Err(e) = send_body(&mut stream, segments).await {
            return Err(stale("HTTP/2 request body", e));
        }
    }
    let response = match response.await {
        Ok(r) => r,
        // Refused before any response: the server did not take the request (a retry is safe).
        Err(e) if e.reason() == Some(h2::Reason::REFUSED_STREAM) || e.is_go_away() || e.is_io() => {
            return Err(stale("HTTP/2 stream refused before any response", e))
        }
        Err(e) => return Ok(broke(None, format!("HTTP/2 response head: {e}"))),
    };
    let first = h2c.stamps.read(0);
    scratch.rx.on_read(&first);
    tl.on_headers(first.at);
    let status = response.status().as_u16();
    scratch.http_status = Some(status);
    scratch.server_date = response
        .headers()
        .get(http::header::DATE)
        .and_then(|v| date_secs(v.as_bytes()));
    let json = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    let mut body = response.into_body();
    let mut sink = Sink::for_response(status, json);
    let capture: Capture = opts.capture;
    let mut ctx = Ctx {
        tl,
        output: &mut scratch.output,
        rx: &mut scratch.rx,
        capture,
    };
    let mut last = first;
    loop {
        match body.data().await {
            None => break,
            Some(Ok(chunk)) => {
                let r = h2c.stamps.read(chunk.len());
                ctx.rx.on_read(&r);
                let _ = body.flow_control().release_capacity(chunk.len());
                sink.data(&mut ctx, &chunk, &r);
                last = r;
                if let Some(err) = sink.overflow(opts.max_event) {
                    return Ok(Exchange::Failed {
                        http_status: Some(status),
                        error: err,
                    });
                }
            }
            Some(Err(e)) => {
                sink.finish(&mut ctx, last.at);
                return Ok(broke(Some(status), format!("response stream broke: {e}")));
            }
        }
    }
    let cut_mid_event = sink.finish(&mut ctx, last.at);
    Ok(conclude(sink, &mut ctx, status, cut_mid_event, capture))
}

/// Sends the body segments as the server's window allows, the last with END_STREAM.
async fn send_body(
    stream: &mut h2::SendStream<Bytes>,
    segments: &[Bytes],
) -> Result<(), h2::Error> {
    let parts: Vec<&Bytes> = segments.iter().filter(|s| !s.is_empty()).collect();
    for (i, seg) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut rest: Bytes = (*seg).clone();
        while !rest.is_empty() {
            stream.reserve_capacity(rest.len());
            let n = match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
                Some(n) => n?,
                None => return Err(h2::Error::from(h2::Reason::CANCEL)),
            };
            if n == 0 {
                continue;
            }
            let piece = rest.split_to(n.min(rest.len()));
            stream.send_data(piece, last && rest.is_empty())?;
        }
    }
    Ok(())
}
