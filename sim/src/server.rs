//! The HTTP side: accept loop, routing, per-request admission, shutdown.
//!
//! hyper 1 + hyper-util's `auto` builder serve HTTP/1.1 (keep-alive) and h2c (prior knowledge)
//! on every connection; `TCP_NODELAY` is set on each accepted socket so a small SSE event is
//! sent the moment hyper writes it. Shutdown: stop accepting, let in-flight responses run for
//! `shutdown_grace_ms`, then abort the remaining connections (their bodies are dropped and
//! logged `finished: false`), then flush the JSONL log.

use crate::answers::Answers;
use crate::config::SimConfig;
use crate::plan::{self, Api, FaultKind, Parsed};
use crate::shared::Shared;
use crate::stream::{SimBody, SimBodyError};
use crate::RequestLog;
use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokentap_core::clock::Anchor;
use tokentap_core::either::Either;
use tokentap_core::wire::ErrorBody;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

/// Largest request body accepted (a 100k-token prompt is ~400 KiB).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// A running simulated server bound to a loopback port.
pub struct SimServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl SimServer {
    /// Binds 127.0.0.1:0 and serves until `shutdown`/drop.
    ///
    /// The in-memory log keeps every request and chunk stamp (~24 bytes per chunk) until
    /// [`SimServer::clear_log`]; long-running benchmarks should use `tokentap sim` (JSONL log
    /// only) or clear the log as they go.
    pub async fn start(config: SimConfig) -> anyhow::Result<SimServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        Self::start_on(listener, config).await
    }

    /// Serves on an already bound listener.
    pub async fn start_on(listener: TcpListener, config: SimConfig) -> anyhow::Result<SimServer> {
        Self::start_inner(listener, config, true).await
    }

    pub(crate) async fn start_inner(
        listener: TcpListener,
        config: SimConfig,
        keep_log: bool,
    ) -> anyhow::Result<SimServer> {
        config.validate()?;
        let addr = listener.local_addr()?;
        let answers = match config.answer_from.clone() {
            Some(path) => Some(
                tokio::task::spawn_blocking(move || Answers::load(&path))
                    .await
                    .map_err(|e| anyhow::anyhow!("loading --answer-from: {e}"))??,
            ),
            None => None,
        };
        let shared = Arc::new(
            Shared::new(config, keep_log, answers)
                .map_err(|e| anyhow::anyhow!("cannot open the sim chunk log: {e}"))?,
        );
        let (stop, stop_rx) = oneshot::channel();
        let task = tokio::spawn(accept_loop(listener, shared.clone(), stop_rx));
        Ok(SimServer {
            addr,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The configuration it serves with.
    pub fn config(&self) -> &SimConfig {
        &self.shared.config
    }

    /// Snapshot of every request seen so far (finished or not), in arrival order.
    pub fn log(&self) -> Vec<RequestLog> {
        self.shared.log.snapshot()
    }

    /// Waits until `n` requests (counted since the last [`SimServer::clear_log`]) have finished:
    /// response fully written or aborted.
    pub async fn wait_finished(&self, n: usize) {
        self.shared.log.wait_finished(n).await
    }

    /// Forgets the log; requests still in flight from before are not counted or recorded.
    pub fn clear_log(&self) {
        self.shared.log.clear()
    }

    /// Prompt tokens looked up and tokens found in the prefix cache since start.
    pub fn cache_counters(&self) -> (u64, u64) {
        self.shared.engine().cache.counters()
    }

    /// Stops accepting, lets in-flight responses finish within `shutdown_grace_ms`, cuts the
    /// rest, flushes the chunk log, and returns.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl SimServer {
    /// The request log, which outlives the server (the CLI asks it after shutdown whether the
    /// JSONL chunk log is complete).
    pub(crate) fn shared_state(&self) -> Arc<Shared> {
        self.shared.clone()
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        // Dropping the sender stops the accept loop, which then shuts down in the background.
        self.stop.take();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // As many headers as a client sends within hyper's head buffer (its default stops at 100).
    builder
        .http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .max_headers(16_384);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => {
                let (stream, _peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors and the like: do not spin on the error.
                        tracing::warn!(error = %e, "sim: accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "sim: TCP_NODELAY");
                }
                let shared = shared.clone();
                let builder = builder.clone();
                let watcher = graceful.watcher();
                conns.spawn(async move {
                    let svc = service_fn(move |req| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(handle(shared, req).await) }
                    });
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    if let Err(e) = watcher.watch(conn).await {
                        tracing::debug!(error = %e, "sim: connection ended with an error");
                    }
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let grace = Duration::from_millis(shared.config.shutdown_grace_ms);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(grace) => {
            tracing::info!(cut = conns.len(), "sim: shutdown grace expired; cutting connections");
        }
    }
    conns.shutdown().await;
    shared.log.close().await;
}

/// Every response body the sim sends: a generated one, or a whole one in memory (errors,
/// `/metrics`).
pub(crate) type ResBody = Either<Box<SimBody>, Full<Bytes>>;

impl From<Infallible> for SimBodyError {
    fn from(never: Infallible) -> SimBodyError {
        match never {}
    }
}

/// Serves one request, in its steps: `/metrics` (outside the log), the log entry, the route,
/// the body, the plan (output, fault, cache), admission, then the generated body.
async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<ResBody> {
    let received = Anchor::now();
    let start = Instant::now();
    if matches!(req.uri().path(), "/metrics" | "/prometheus/metrics") && req.method() == Method::GET
    {
        // Not in the request log: a scrape every second must neither shift `seq` (the join
        // key of `x-sim-seq`) nor fill the ground-truth log.
        return metrics_response(&shared);
    }
    let (parts, body) = req.into_parts();
    let mut entry = begin_log(&shared, &parts, received);
    let api = match route(&parts.method, parts.uri.path()) {
        Route::Api(api) => api,
        Route::Health => return simple(&shared, entry, StatusCode::OK, "", "text/plain"),
        Route::Models => {
            let body = models_body(&shared.config.model);
            return simple(&shared, entry, StatusCode::OK, &body, "application/json");
        }
        Route::Refused(status, why) => return error(&shared, entry, status, &why),
    };
    let parsed = match read_request(&shared, api, body, &mut entry).await {
        Ok(p) => p,
        Err((status, why)) => return error(&shared, entry, status, &why),
    };
    if shared.config.refuse_other_models {
        if let Some(m) = parsed.model().filter(|m| *m != shared.config.model) {
            let why = format!("The model `{m}` does not exist.");
            return not_found_model(&shared, entry, &why);
        }
    }
    let created = received.wall_ns / 1_000_000_000;
    let mut plan = match plan::build(
        &shared.config,
        entry.seq,
        created,
        &parsed,
        shared.answers.as_ref(),
    ) {
        Ok(p) => p,
        Err(msg) => return error(&shared, entry, StatusCode::BAD_REQUEST, &msg),
    };
    plan.serve_as(api, entry.seq);
    plan.id.push('-');
    plan.id.push_str(&shared.instance);
    drop(parsed);
    entry.prompt_tokens = plan.prompt_tokens;
    entry.fault = plan.fault.map(|f| f.kind.name().to_string());
    if let Some(FaultKind::ErrorStatus(s)) = plan.fault.map(|f| f.kind) {
        let status = StatusCode::from_u16(s).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return error(&shared, entry, status, "injected error");
    }
    let first_token_at = shared.admit(&mut plan, start);
    entry.status = 200;
    entry.cached_tokens = plan.cached_tokens;
    entry.finish_reason = Some(plan.output.finish.to_string());
    entry.chunks = Vec::with_capacity(if plan.stream {
        plan.output.token_chunks(plan.tokens_per_chunk) as usize + 4
    } else {
        1
    });
    shared.log.update(&entry);
    let content_type = if plan.stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    let seq = entry.seq;
    let body = SimBody::new(shared.clone(), plan, entry, first_token_at);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache")
        .header("x-sim-seq", seq)
        .body(Either::Left(Box::new(body)))
        .unwrap_or_else(|_| Response::new(Either::Right(Full::default())))
}

/// `GET /metrics`: the engine-style series (`--engine-metrics`).
fn metrics_response(shared: &Shared) -> Response<ResBody> {
    let mut res = Response::new(Either::Right(Full::new(Bytes::from(
        shared.metrics.render(),
    ))));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    res
}

/// The request's entry in the ground-truth log (numbered now): method, path, headers (never
/// `Authorization`), session.
fn begin_log(shared: &Shared, parts: &http::request::Parts, received: Anchor) -> RequestLog {
    shared.log.begin(|seq| RequestLog {
        seq,
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        headers: parts
            .headers
            .iter()
            .filter(|(n, _)| *n != header::AUTHORIZATION && *n != header::PROXY_AUTHORIZATION)
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: None,
        session: parts
            .headers
            .get("x-session-id")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        received,
        status: 0,
        prompt_tokens: 0,
        cached_tokens: 0,
        output_tokens: 0,
        chunks: Vec::new(),
        fault: None,
        finished: false,
        finish_reason: None,
    })
}

/// What a method and path ask for.
enum Route {
    Api(Api),
    Health,
    Models,
    /// 405 on a known path, 404 elsewhere.
    Refused(StatusCode, String),
}

fn route(method: &Method, path: &str) -> Route {
    let not_allowed =
        || Route::Refused(StatusCode::METHOD_NOT_ALLOWED, "method not allowed".into());
    if let Some(api) = Api::parse(path) {
        return if method == Method::POST {
            Route::Api(api)
        } else {
            not_allowed()
        };
    }
    match (method, path) {
        (&Method::GET, "/health") => Route::Health,
        (&Method::GET, "/v1/models") => Route::Models,
        (_, "/health" | "/metrics" | "/v1/models") => not_allowed(),
        _ => Route::Refused(StatusCode::NOT_FOUND, format!("no route for {path}")),
    }
}

/// `GET /v1/models`: the one model served.
fn models_body(model: &str) -> String {
    serde_json::json!({
        "object": "list",
        "data": [{
            "id": model,
            "object": "model",
            "created": 0,
            "owned_by": "tokentap",
            "max_model_len": null,
        }],
    })
    .to_string()
}

/// Reads the body (at most `MAX_BODY`; kept in the log with `capture_bodies`) and parses it as
/// the API's request. `Err`: the status and message to answer with.
async fn read_request(
    shared: &Shared,
    api: Api,
    body: Incoming,
    entry: &mut RequestLog,
) -> Result<Parsed, (StatusCode, String)> {
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            let status = if e.is::<http_body_util::LengthLimitError>() {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            };
            return Err((status, format!("cannot read request body: {e}")));
        }
    };
    if shared.config.capture_bodies {
        entry.body = Some(bytes.clone());
    }
    let parsed = match api {
        Api::Chat => serde_json::from_slice(&bytes).map(|r| Parsed::Chat(Box::new(r))),
        Api::Completions => serde_json::from_slice(&bytes).map(Parsed::Completion),
        Api::Responses | Api::Messages => serde_json::from_slice::<serde_json::Value>(&bytes)
            .and_then(|v| serde_json::from_value(in_chat_form(api, &v)))
            .map(|r| Parsed::Chat(Box::new(r))),
    };
    parsed.map_err(|e| (StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")))
}

/// A Responses or Messages API request as the chat request the sim plans (tokentap_core's
/// conversion): messages, tools, tool choice, stream, max tokens (`max_output_tokens`,
/// `max_tokens`), and thinking as the request asks it (on, off, or not shown).
/// `previous_response_id` is accepted and not looked up: the sim stores no responses, so the
/// prompt is the request's own input.
fn in_chat_form(api: Api, v: &serde_json::Value) -> serde_json::Value {
    let c = tokentap_core::convert::request(api, v);
    let mut r = serde_json::json!({"messages": c.messages});
    for k in ["model", "stream", "include_metrics"] {
        if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
            r[k] = x.clone();
        }
    }
    // Max tokens, sampling and tool_choice in their chat names and forms.
    for (k, x) in c.params {
        r[k.as_str()] = x;
    }
    if let Some(t) = c.tools {
        r["tools"] = t;
    }
    // The Messages API thinks only when asked (`thinking.type` enabled or adaptive), and shows
    // it unless `thinking.display` is `omitted`; the Responses API as a reasoning model does.
    let thinking = v
        .pointer("/thinking/type")
        .and_then(serde_json::Value::as_str);
    let thinks = match api {
        Api::Messages => matches!(thinking, Some("enabled" | "adaptive")),
        _ => thinking != Some("disabled"),
    };
    if !thinks {
        r["chat_template_kwargs"] = serde_json::json!({"enable_thinking": false});
    }
    if v.pointer("/thinking/display")
        .and_then(serde_json::Value::as_str)
        == Some("omitted")
    {
        r[crate::plan::HIDE_THINKING] = true.into();
    }
    r
}

/// A complete small response; the log entry ends here.
fn simple(
    shared: &Shared,
    mut entry: RequestLog,
    status: StatusCode,
    body: &str,
    content_type: &'static str,
) -> Response<ResBody> {
    entry.status = status.as_u16();
    entry.finished = true;
    shared.log.finish(entry);
    let mut res = Response::new(Either::Right(Full::new(Bytes::copy_from_slice(
        body.as_bytes(),
    ))));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    res
}

/// vLLM's answer to a request for a model it does not serve: 404, type `NotFoundError`,
/// `param` "model".
fn not_found_model(shared: &Shared, entry: RequestLog, message: &str) -> Response<ResBody> {
    let mut body = ErrorBody::new("NotFoundError", message, Some(404));
    body.error.param = Some("model".into());
    let text = serde_json::to_string(&body).unwrap_or_default();
    simple(
        shared,
        entry,
        StatusCode::NOT_FOUND,
        &text,
        "application/json",
    )
}

/// An OpenAI-style error response.
fn error(
    shared: &Shared,
    entry: RequestLog,
    status: StatusCode,
    message: &str,
) -> Response<ResBody> {
    let kind = match status.as_u16() {
        400 | 405 | 413 => "invalid_request_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        _ => "server_error",
    };
    let body = ErrorBody::new(kind, message, Some(status.as_u16()));
    let text = serde_json::to_string(&body).unwrap_or_default();
    simple(shared, entry, status, &text, "application/json")
}
