//! Settings: every option of `tokentap proxy` declared once, as a field of [`Config`] — its flag,
//! its environment variable `TOKENTAP_PROXY_<NAME>` (the sidecar habit), its default, its help
//! and its parser (a header name is checked as the flag is read) — and the one `Config` the
//! proxy's parts are handed. Tests and the demo build one with [`Config::new`]: the flags'
//! defaults, read from their declarations, on loopback port 0 for both listeners.

use http::HeaderName;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The proxy's defaults that code and tests also name (the flags read them from here; the
/// others are in their flag's declaration). Durations are spelled as on the command line.
pub mod defaults {
    /// `--records-max-bytes`.
    pub const RECORDS_MAX_BYTES: u64 = 256 << 20;
    /// `--grace`.
    pub const GRACE: &str = "30s";
    /// `--upstream-timeout`.
    pub const UPSTREAM_TIMEOUT: &str = "1h";
    /// `--upstream-idle-timeout`.
    pub const UPSTREAM_IDLE_TIMEOUT: &str = "5m";
    /// `--header-timeout`.
    pub const HEADER_TIMEOUT: &str = "30s";
    /// `--body-timeout`.
    pub const BODY_TIMEOUT: &str = "60s";
    /// `--max-connections`.
    pub const MAX_CONNECTIONS: usize = 10_000;
    /// `--max-concurrent-streams`.
    pub const MAX_CONCURRENT_STREAMS: u32 = 128;
    /// `--max-upstream-connections`.
    pub const MAX_UPSTREAM_CONNECTIONS: usize = 1024;
    /// `--upstream-queue-timeout`.
    pub const UPSTREAM_QUEUE_TIMEOUT: &str = "30s";
    /// `--connect-timeout`.
    pub const CONNECT_TIMEOUT: &str = "5s";
    /// `--upstream-keepalive`.
    pub const UPSTREAM_KEEPALIVE: &str = "4s";
    /// `--max-header-bytes`.
    pub const MAX_HEADER_BYTES: usize = 64 << 10;
    /// `--max-event-bytes`: the replay's too.
    pub const MAX_EVENT_BYTES: usize = tokentap_core::sse::DEFAULT_MAX_EVENT_BYTES;
    /// `--max-body-bytes`.
    pub const MAX_BODY_BYTES: u64 = 64 << 20;
    /// `--session-ttl`.
    pub const SESSION_TTL: &str = "1h";
    /// `--max-sessions`.
    pub const MAX_SESSIONS: usize = 100_000;
    /// `--max-session-bytes`.
    pub const MAX_SESSION_BYTES: u64 = 64 << 20;
    /// `--max-session-id-bytes`.
    pub const MAX_SESSION_ID_BYTES: usize = 256;
}

/// Everything the proxy runs with: the `tokentap proxy` options, each declared once.
#[derive(Debug, Clone, clap::Args)]
pub struct Config {
    /// Address to serve clients on.
    #[arg(long, env = "TOKENTAP_PROXY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Upstream server URL (http://, https:// or h2c:// for HTTP/2 with prior knowledge), with an
    /// optional path prefix. Repeat (or comma-separate in the env var) for several replicas.
    #[arg(
        long = "upstream",
        env = "TOKENTAP_PROXY_UPSTREAM",
        value_delimiter = ',',
        required = true
    )]
    pub upstreams: Vec<String>,
    /// Admin listener (/health, /metrics, /sessions). Loopback unless you say otherwise.
    #[arg(long, env = "TOKENTAP_PROXY_ADMIN", default_value = "127.0.0.1:9464")]
    pub admin: SocketAddr,
    /// Directory for JSONL records (`records-<start>-<n>.jsonl`). Without it, records are only
    /// counted and summarised in /sessions.
    #[arg(long = "records", env = "TOKENTAP_PROXY_RECORDS", value_name = "DIR")]
    pub records_dir: Option<PathBuf>,
    /// Also keep records in memory for [`crate::Proxy::records`] (tests, the demo).
    #[arg(skip)]
    pub keep_records: bool,
    /// Rotate record files after this many bytes.
    #[arg(long, env = "TOKENTAP_PROXY_RECORDS_MAX_BYTES", default_value_t = defaults::RECORDS_MAX_BYTES)]
    pub records_max_bytes: u64,
    /// Put prompts and outputs into records (off: they are never recorded).
    #[arg(long, env = "TOKENTAP_PROXY_RECORD_CONTENT")]
    pub record_content: bool,
    /// Most bytes of one response the proxy holds to measure it: one SSE event, a non-streaming
    /// JSON body, the output kept for --record-content/--tokenizer. Past it the bytes are still
    /// forwarded and stamped, but not held: the event is not parsed, the record counts it in
    /// `oversized_events`. Bounds the proxy's memory per stream, whatever a server sends.
    #[arg(long, env = "TOKENTAP_PROXY_MAX_EVENT_BYTES", value_name = "BYTES",
        default_value_t = defaults::MAX_EVENT_BYTES,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..))]
    pub max_event_bytes: usize,
    /// Copy this request header into `record.headers` (repeatable). Authorization and cookies
    /// are never copied.
    #[arg(
        long = "record-header",
        env = "TOKENTAP_PROXY_RECORD_HEADER",
        value_delimiter = ',',
        value_name = "NAME",
        value_parser = header_name
    )]
    pub record_headers: Vec<HeaderName>,
    /// Header carrying the session id (repeatable; the first one present wins). The defaults
    /// after tokentap's own are what agents send: Claude Code's session header, Codex's.
    #[arg(
        long = "session-header",
        env = "TOKENTAP_PROXY_SESSION_HEADER",
        value_delimiter = ',',
        value_name = "NAME",
        default_value = DEFAULT_SESSION_HEADERS,
        value_parser = header_name
    )]
    pub session_headers: Vec<HeaderName>,
    /// For a request that no session header names: the body fields that say which conversation
    /// it continues, the first present wins (`previous_response_id`: the session of that
    /// response; `prompt_cache_key`; `metadata.user_id`: the session in Claude Code's user id —
    /// Responses and Messages requests; `messages_prefix`: a chat request continues the session
    /// whose previous request's messages its own begin with; not in the default list: it reads
    /// every chat request without a header whole and gives each a session). The body is then
    /// read whole before it goes upstream, so the session can pick the replica. `none`: no
    /// session from the body.
    #[arg(
        long = "session-from-body",
        env = "TOKENTAP_PROXY_SESSION_FROM_BODY",
        value_delimiter = ',',
        value_name = "FIELD",
        default_value = "previous_response_id,prompt_cache_key,metadata.user_id",
        value_parser = BodySession::parse
    )]
    pub session_from_body: Vec<BodySession>,
    /// What the Messages API's `usage.input_tokens` counts: `anthropic` — the prompt tokens
    /// neither read from nor written to the cache (Anthropic's definition; the prompt is it plus
    /// `cache_read_input_tokens` and `cache_creation_input_tokens`); `total` — the whole prompt
    /// (SGLang, and vLLM's first releases of the API).
    #[arg(
        long,
        env = "TOKENTAP_PROXY_MESSAGES_INPUT_TOKENS",
        value_enum,
        default_value = "anthropic"
    )]
    pub messages_input_tokens: MessagesInput,
    /// The model's Hugging Face tokenizer folder (tokenizer.json + chat template): every LLM
    /// record gets the MLPerf reference's token counts (osl, tpot_tokens, isl), and when the
    /// server sends no usage its output_tokens come from it. Counted after the response, off
    /// the data path. Read locally; nothing is downloaded.
    #[arg(long, env = "TOKENTAP_PROXY_TOKENIZER", value_name = "DIR")]
    pub tokenizer: Option<PathBuf>,
    /// Serve TLS with this certificate chain (PEM); needs --tls-key. ALPN offers h2 and http/1.1.
    #[arg(long, env = "TOKENTAP_PROXY_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) for --tls-cert.
    #[arg(long, env = "TOKENTAP_PROXY_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Extra CA certificate (PEM) trusted for https upstreams, besides the system roots.
    #[arg(long, env = "TOKENTAP_PROXY_UPSTREAM_CA")]
    pub upstream_ca: Option<PathBuf>,
    /// On SIGTERM (or SIGHUP, Ctrl-C), let in-flight streams finish for this long, then cut them.
    #[arg(value_parser = tokentap_core::duration::parse, value_name = "DURATION", long, env = "TOKENTAP_PROXY_GRACE", default_value = defaults::GRACE)]
    pub grace: Duration,
    /// How long to wait for upstream response headers before answering 504.
    #[arg(
        value_parser = tokentap_core::duration::parse, value_name = "DURATION",
        long,
        env = "TOKENTAP_PROXY_UPSTREAM_TIMEOUT",
        default_value = defaults::UPSTREAM_TIMEOUT
    )]
    pub upstream_timeout: Duration,
    /// How long a streaming response may go without a byte from upstream before the proxy cuts
    /// it (recorded `timed_out`, kind `idle_timeout`); 0 disables.
    #[arg(
        value_parser = tokentap_core::duration::parse, value_name = "DURATION",
        long,
        env = "TOKENTAP_PROXY_UPSTREAM_IDLE_TIMEOUT",
        default_value = defaults::UPSTREAM_IDLE_TIMEOUT
    )]
    pub upstream_idle_timeout: Duration,
    /// How long a client connection may take to send a request head: from accept to its first
    /// byte (a connection that never sends one is closed), a TLS handshake, and every later
    /// head on a kept-alive HTTP/1.1 connection (so an idle one is closed too).
    #[arg(value_parser = tokentap_core::duration::parse_positive, value_name = "DURATION", long, env = "TOKENTAP_PROXY_HEADER_TIMEOUT", default_value = defaults::HEADER_TIMEOUT)]
    pub header_timeout: Duration,
    /// How long a request body may stall (no byte from the client while the proxy waits for
    /// one) before the request is answered 408 and recorded.
    #[arg(value_parser = tokentap_core::duration::parse_positive, value_name = "DURATION", long, env = "TOKENTAP_PROXY_BODY_TIMEOUT", default_value = defaults::BODY_TIMEOUT)]
    pub body_timeout: Duration,
    /// Most client connections open at once; one more is closed as soon as it is accepted
    /// (counted), so idle or silent connections cannot take every file descriptor.
    #[arg(long, env = "TOKENTAP_PROXY_MAX_CONNECTIONS", default_value_t = defaults::MAX_CONNECTIONS,
        value_parser = tokentap_core::value::positive::<usize>)]
    pub max_connections: usize,
    /// Serving threads, each one event loop (a single-threaded runtime) that holds its client
    /// connections and their upstream connections; a new connection goes to the thread with the
    /// fewest open. 0: one per core.
    #[arg(
        long,
        env = "TOKENTAP_PROXY_THREADS",
        default_value_t = 0,
        value_name = "N"
    )]
    pub threads: usize,
    /// Most concurrent streams per client HTTP/2 connection (nginx's default: 128).
    #[arg(
        long,
        env = "TOKENTAP_PROXY_MAX_CONCURRENT_STREAMS",
        default_value_t = defaults::MAX_CONCURRENT_STREAMS,
        value_parser = tokentap_core::value::positive::<u32>
    )]
    pub max_concurrent_streams: u32,
    /// Most requests in flight to one replica (an HTTP/1.1 request holds one upstream
    /// connection); more wait in a queue.
    #[arg(
        long,
        env = "TOKENTAP_PROXY_MAX_UPSTREAM_CONNECTIONS",
        default_value_t = defaults::MAX_UPSTREAM_CONNECTIONS,
        value_parser = tokentap_core::value::positive::<usize>
    )]
    pub max_upstream_connections: usize,
    /// How long a request waits for a free upstream connection before it is answered 503
    /// (`upstream_busy`) and recorded.
    #[arg(
        value_parser = tokentap_core::duration::parse, value_name = "DURATION",
        long,
        env = "TOKENTAP_PROXY_UPSTREAM_QUEUE_TIMEOUT",
        default_value = defaults::UPSTREAM_QUEUE_TIMEOUT
    )]
    pub upstream_queue_timeout: Duration,
    /// How long to wait for an upstream TCP connection before trying the next replica.
    #[arg(value_parser = tokentap_core::duration::parse, value_name = "DURATION", long, env = "TOKENTAP_PROXY_CONNECT_TIMEOUT", default_value = defaults::CONNECT_TIMEOUT)]
    pub connect_timeout: Duration,
    /// How long an idle pooled upstream connection is kept. Keep it below the server's own
    /// keep-alive timeout (uvicorn, under vLLM and SGLang: 5 s; llama.cpp's server: 5 s): a
    /// pooled connection is checked before reuse, and a request that still meets a server
    /// closing it is sent again on a new connection (the direct client; hyper's fails it).
    #[arg(value_parser = tokentap_core::duration::parse, value_name = "DURATION", long, env = "TOKENTAP_PROXY_UPSTREAM_KEEPALIVE", default_value = defaults::UPSTREAM_KEEPALIVE)]
    pub upstream_keepalive: Duration,
    /// Client for plain `http://` upstreams. `direct`: the proxy's own HTTP/1.1 exchange, the
    /// task that serves the client reads the upstream socket itself (one wake-up per chunk,
    /// everything already read forwarded in one write). `hyper`: hyper-util's pooled client,
    /// as for `https://` and `h2c://` upstreams.
    #[arg(long, env = "TOKENTAP_PROXY_UPSTREAM_CLIENT", value_enum, default_value_t = UpstreamClient::Direct)]
    pub upstream_client: UpstreamClient,
    /// Largest request head accepted: above it a JSON 431 and a record (any number of header
    /// lines up to 24,576; past that hyper answers its own 431 before the proxy sees the request).
    #[arg(long, env = "TOKENTAP_PROXY_MAX_HEADER_BYTES", default_value_t = defaults::MAX_HEADER_BYTES)]
    pub max_header_bytes: usize,
    /// Largest request body accepted (413 above).
    #[arg(long, env = "TOKENTAP_PROXY_MAX_BODY_BYTES", default_value_t = defaults::MAX_BODY_BYTES)]
    pub max_body_bytes: u64,
    /// Request bodies up to this size are parsed for `model`, `stream`, ... (bigger ones are
    /// forwarded without being read).
    #[arg(skip = 16usize << 20)]
    pub sniff_limit: usize,
    /// Ask the server for usage the client did not ask for, and strip it from the response.
    #[arg(long, env = "TOKENTAP_PROXY_INJECT_USAGE")]
    pub inject_usage: bool,
    /// With --inject-usage, also ask for continuous usage (vLLM): exact tokens per chunk.
    #[arg(long, env = "TOKENTAP_PROXY_INJECT_CONTINUOUS_USAGE")]
    pub inject_continuous_usage: bool,
    /// Ask the engine for its own per-request timing (vLLM `include_metrics`, served with
    /// --enable-per-request-metrics) on streaming requests, keep it in the record (TTFT split
    /// into the engine's queue, its prefill and first token, and the rest outside it) and
    /// strip it from the response. Implies --inject-usage (the metrics ride on the usage chunk).
    #[arg(long, env = "TOKENTAP_PROXY_INJECT_METRICS")]
    pub inject_metrics: bool,
    /// Forward the client's Host header instead of the upstream's authority.
    #[arg(long, env = "TOKENTAP_PROXY_PRESERVE_HOST")]
    pub preserve_host: bool,
    /// Add `Via: 1.1 tokentap` to requests and responses.
    #[arg(long, env = "TOKENTAP_PROXY_VIA")]
    pub via: bool,
    /// Forget a session after it has been idle this long.
    #[arg(value_parser = tokentap_core::duration::parse, value_name = "DURATION", long, env = "TOKENTAP_PROXY_SESSION_TTL", default_value = defaults::SESSION_TTL)]
    pub session_ttl: Duration,
    /// Most sessions kept in the table (the least recently active are evicted).
    #[arg(long, env = "TOKENTAP_PROXY_MAX_SESSIONS", default_value_t = defaults::MAX_SESSIONS)]
    pub max_sessions: usize,
    /// Memory the session table may hold, bytes: sessions, their turn summaries, the Responses
    /// API's response → session links and the chat prefixes, each counted at its measured heap
    /// cost (a session of one turn with a link ~1 KB); the least recently active are evicted
    /// beyond it.
    #[arg(long, env = "TOKENTAP_PROXY_MAX_SESSION_BYTES", default_value_t = defaults::MAX_SESSION_BYTES)]
    pub max_session_bytes: u64,
    /// Longest session id kept as sent, bytes; a longer one is cut and suffixed with a hash of
    /// the whole id (stable, so a session stays one session), and counted.
    #[arg(
        long,
        env = "TOKENTAP_PROXY_MAX_SESSION_ID_BYTES",
        default_value_t = defaults::MAX_SESSION_ID_BYTES,
        value_parser = session_id_bytes
    )]
    pub max_session_id_bytes: usize,
}

/// The session headers by default: tokentap's own, Claude Code's (since 2.1.86), Codex's (older
/// and newer spelling).
pub const DEFAULT_SESSION_HEADERS: &str =
    "X-Session-ID,X-Claude-Code-Session-Id,session_id,session-id";

/// A request body field that names a session (`--session-from-body`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodySession {
    /// The Responses API's `previous_response_id`: the session that response belongs to.
    PreviousResponseId,
    /// The Responses API's `prompt_cache_key` (Codex sends its conversation id there).
    PromptCacheKey,
    /// The Messages API's `metadata.user_id`, when it carries Claude Code's session.
    MetadataUserId,
    /// A chat request that nothing else names: the session whose previous request's messages
    /// this one's begin with (an agent sends its whole history, grown by the answer and what is
    /// new), else a new session (`chat-` and 16 hex digits).
    MessagesPrefix,
    /// `none`: read no session from bodies.
    None,
}

impl BodySession {
    fn parse(s: &str) -> Result<BodySession, String> {
        Ok(match s.trim() {
            "previous_response_id" => BodySession::PreviousResponseId,
            "prompt_cache_key" => BodySession::PromptCacheKey,
            "metadata.user_id" => BodySession::MetadataUserId,
            "messages_prefix" => BodySession::MessagesPrefix,
            "none" => BodySession::None,
            other => {
                return Err(format!(
                    "expected previous_response_id, prompt_cache_key, metadata.user_id, messages_prefix or none, found {other:?}"
                ))
            }
        })
    }

    /// The session this field names in `info`, if it names one.
    pub fn session(
        self,
        info: &crate::sniff::ReqInfo,
        sessions: &crate::sessions::Sessions,
    ) -> Option<String> {
        match self {
            BodySession::PreviousResponseId => info
                .previous_response_id
                .as_deref()
                .map(|p| sessions.chained(p)),
            BodySession::PromptCacheKey => info.prompt_cache_key.clone(),
            BodySession::MetadataUserId => info.user_id_session.clone(),
            BodySession::MessagesPrefix => sessions.by_prefix(&info.prefixes),
            BodySession::None => None,
        }
    }
}

impl Config {
    /// A chat request without a session header is read whole and grouped by its messages.
    pub fn groups_chat_by_prefix(&self) -> bool {
        self.session_from_body
            .contains(&BodySession::MessagesPrefix)
    }

    /// Some body field may name a session (`--session-from-body` is not `none`).
    pub fn reads_session_from_body(&self) -> bool {
        self.session_from_body
            .iter()
            .any(|b| *b != BodySession::None)
    }

    /// `--messages-input-tokens total`.
    pub fn messages_input_total(&self) -> bool {
        self.messages_input_tokens == MessagesInput::Total
    }

    /// Usage is asked of the server: `--inject-usage`, or `--inject-metrics` (the metrics ride
    /// on the usage chunk).
    pub fn injects_usage(&self) -> bool {
        self.inject_usage || self.inject_metrics
    }

    /// `--threads`, 0 resolved: one per core.
    pub fn serving_threads(&self) -> usize {
        match self.threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }

    /// `--tls-cert` and `--tls-key`, given together.
    pub fn tls(&self) -> Option<(PathBuf, PathBuf)> {
        self.tls_cert.clone().zip(self.tls_key.clone())
    }
}

/// `--record-header`, `--session-header`: a header name (any case; kept lowercase).
fn header_name(s: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(s.trim().as_bytes())
        .map_err(|_| format!("{s:?} is not a valid header name"))
}

/// `--messages-input-tokens` (its help says what each value means; a doc comment on a value
/// would be clap's help of that value and turn the whole `--help` into its long layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[allow(missing_docs)]
pub enum MessagesInput {
    Anthropic,
    Total,
}

/// Which client talks to plain `http://` upstreams (`--upstream-client`, whose help says what
/// each value means, as for [`MessagesInput`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[allow(missing_docs)]
pub enum UpstreamClient {
    Direct,
    Hyper,
}

/// `--max-session-id-bytes`: at least [`crate::sessions::MIN_ID_BYTES`] (room for the hash
/// suffix a cut id gets).
fn session_id_bytes(s: &str) -> Result<usize, String> {
    let min = crate::sessions::MIN_ID_BYTES;
    match s.trim().parse::<usize>() {
        Ok(v) if v >= min => Ok(v),
        _ => Err(format!("expected a whole number >= {min}, found {s:?}")),
    }
}

impl Config {
    /// The flags' own defaults, read from their declarations (the environment ignored), in
    /// front of `upstreams`, with both listeners on loopback port 0.
    pub fn new<S: Into<String>>(upstreams: impl IntoIterator<Item = S>) -> Config {
        use clap::{Args as _, FromArgMatches as _};
        // Invariant: with one upstream given, every option has a default or is optional.
        let m = Config::augment_args(clap::Command::new("proxy"))
            .mut_args(|a| a.env(None::<&str>))
            .try_get_matches_from(["proxy", "--upstream", "http://127.0.0.1:1"])
            .expect("the options parse with an upstream");
        let mut c = Config::from_arg_matches(&m).expect("the options parse with an upstream");
        c.upstreams = upstreams.into_iter().map(Into::into).collect();
        c.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        c.admin = SocketAddr::from(([127, 0, 0, 1], 0));
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        o: Config,
    }

    #[test]
    fn a_bad_header_name_names_its_flag() {
        for flag in ["--record-header", "--session-header"] {
            let e = Cli::try_parse_from(["x", "--upstream", "http://a:1", flag, "bad header"])
                .err()
                .unwrap()
                .to_string();
            assert!(
                e.contains(flag) && e.contains("\"bad header\" is not a valid header name"),
                "{e}"
            );
        }
    }

    #[test]
    fn durations_take_units_and_plain_seconds() {
        let cli = Cli::try_parse_from([
            "x",
            "--upstream",
            "http://a:1",
            "--header-timeout",
            "1m",
            "--upstream-keepalive",
            "1500ms",
            "--session-ttl",
            "2h",
            "--grace",
            "7",
        ])
        .unwrap();
        let c = cli.o;
        assert_eq!(c.header_timeout, Duration::from_secs(60));
        assert_eq!(c.upstream_keepalive, Duration::from_millis(1500));
        assert_eq!(c.session_ttl, Duration::from_secs(7200));
        assert_eq!(c.grace, Duration::from_secs(7));
        // The defaults still parse as seconds.
        let d = Cli::try_parse_from(["x", "--upstream", "http://a:1"])
            .unwrap()
            .o;
        assert_eq!(d.header_timeout, Duration::from_secs(30));
        assert!(Cli::try_parse_from(["x", "--upstream", "http://a:1", "--grace", "soon"]).is_err());
        // Every default of `defaults` is what the command line gives with no flag.
        let n = Config::new(["http://a:1"]);
        assert_eq!(
            (
                n.grace,
                n.upstream_timeout,
                n.upstream_idle_timeout,
                n.session_ttl
            ),
            (
                d.grace,
                d.upstream_timeout,
                d.upstream_idle_timeout,
                d.session_ttl
            )
        );
        assert_eq!(
            (n.header_timeout, n.body_timeout, n.upstream_queue_timeout),
            (d.header_timeout, d.body_timeout, d.upstream_queue_timeout)
        );
        assert_eq!(
            (n.connect_timeout, n.upstream_keepalive),
            (d.connect_timeout, d.upstream_keepalive)
        );
        assert_eq!(n.upstream_timeout, Duration::from_secs(3600));
    }

    #[test]
    fn zero_where_it_cannot_work_is_refused_naming_the_flag() {
        for (flag, v) in [
            ("--header-timeout", "0"),
            ("--body-timeout", "0s"),
            ("--max-connections", "0"),
            ("--max-concurrent-streams", "0"),
            ("--max-upstream-connections", "0"),
            ("--max-session-id-bytes", "31"),
        ] {
            let e = Cli::try_parse_from(["x", "--upstream", "http://a:1", flag, v])
                .err()
                .unwrap_or_else(|| panic!("{flag} {v} accepted"))
                .to_string();
            assert!(e.contains(flag), "{e}");
        }
    }

    #[test]
    fn flags_and_repeatable_lists() {
        let cli = Cli::try_parse_from([
            "x",
            "--upstream",
            "http://a:1",
            "--upstream",
            "http://b:2",
            "--session-header",
            "X-Session-ID,X-SMG-Routing-Key",
            "--grace",
            "2.5",
        ])
        .unwrap();
        let c = cli.o;
        assert_eq!(c.upstreams, ["http://a:1", "http://b:2"]);
        assert_eq!(c.session_headers.len(), 2);
        assert_eq!(c.grace, Duration::from_millis(2500));
        assert!(
            Cli::try_parse_from(["x"]).is_err(),
            "an upstream is required"
        );
    }
}
