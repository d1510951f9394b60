//! Reading the request without holding it back.
//!
//! [`RequestTap`] wraps the client's request body on its way upstream. Each frame is forwarded
//! as soon as the upstream client (ours or hyper's) asks for it; the tap keeps a refcounted
//! clone of the frame (a `Bytes` clone, no copy) and, once the body has ended, parses the few
//! fields measurement needs ([`ReqInfo`]: `model`, `stream`, `stream_options`, message count,
//! max tokens) in one pass that builds no JSON tree. Bodies above the sniff limit are forwarded
//! but not parsed.
//!
//! The tap also enforces `--max-body-bytes` (the body fails, the upstream client aborts the
//! upstream request, the service answers 413) and makes connect-time failover possible: if the
//! client drops the request without ever polling its body (the connection could not be made),
//! the tap hands the untouched client body back through a oneshot, so the service can try the
//! next upstream with it.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tokio::sync::oneshot;

/// What the proxy learnt from a request body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReqInfo {
    /// `model`.
    pub model: Option<String>,
    /// `stream`.
    pub stream: Option<bool>,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// `stream_options.continuous_usage_stats` (vLLM).
    pub continuous_usage: bool,
    /// Entries in `messages` (chat, Messages API) or in `input` (Responses API; a string input
    /// is one) — `None` for `/v1/completions`.
    pub messages: Option<u32>,
    /// `max_completion_tokens`, else `max_tokens`, else `max_output_tokens` (Responses API).
    pub max_tokens: Option<u64>,
    /// Where a request of the Responses or Messages API says which conversation it continues
    /// (docs/usage.md, sessions of agents): `previous_response_id`, `prompt_cache_key`, and
    /// the session in `metadata.user_id`.
    pub previous_response_id: Option<String>,
    /// `prompt_cache_key`.
    pub prompt_cache_key: Option<String>,
    /// The session in `metadata.user_id` (Claude Code's).
    pub user_id_session: Option<String>,
    /// A chat request's message prefixes, hashed (`--session-from-body messages_prefix`):
    /// element i is the hash of messages 0..=i ([`message_prefixes`]); empty unless asked for.
    pub prefixes: Vec<u64>,
    /// Body size in bytes.
    pub bytes: u64,
}

/// The hashes of a chat request's message prefixes: element i covers messages 0..=i, each
/// message by its bytes as sent (a client sends the history it sent before in the same bytes).
/// Empty when the body has no `messages` array.
pub fn message_prefixes(body: &[u8]) -> Vec<u64> {
    #[derive(Deserialize)]
    struct Msgs<'a> {
        #[serde(borrow, default)]
        messages: Option<Vec<&'a serde_json::value::RawValue>>,
    }
    let Ok(Msgs {
        messages: Some(msgs),
    }) = serde_json::from_slice::<Msgs>(body)
    else {
        return Vec::new();
    };
    let mut h = 0u64;
    msgs.iter()
        .map(|m| {
            h = tokentap_core::rng::mix(h ^ tokentap_core::route::hash64(m.get().as_bytes()));
            h
        })
        .collect()
}

impl ReqInfo {
    /// Parses a whole request body; `None` if it is not a JSON object.
    pub fn parse(body: &[u8]) -> Option<ReqInfo> {
        // serde reads a struct from a JSON array too (fields by position): `["m", true]` would
        // have been a request for model "m". Found by the `sniff` fuzz target (input `[]`).
        if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return None;
        }
        let raw: RawReq = match serde_json::from_slice(body) {
            Ok(raw) => raw,
            // A key given twice (`{"prompt_cache_key":"a","prompt_cache_key":"b"}`): which one
            // the server takes is not ours to guess, so that field is taken as absent — the
            // next session field then names the session — and the rest is read as usual.
            Err(e) if e.to_string().starts_with("duplicate field") => {
                let msg = e.to_string();
                let field = msg.split('`').nth(1).unwrap_or("");
                let mut v: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_slice(body).ok()?;
                v.remove(field);
                serde_json::from_value(serde_json::Value::Object(v)).ok()?
            }
            Err(_) => return None,
        };
        let so = raw.stream_options.unwrap_or_default();
        Some(ReqInfo {
            model: raw.model,
            stream: raw.stream,
            include_usage: so.include_usage.unwrap_or(false),
            continuous_usage: so.continuous_usage_stats.unwrap_or(false),
            messages: raw.messages.or(raw.input).map(|c| c.0),
            max_tokens: raw
                .max_completion_tokens
                .or(raw.max_tokens)
                .or(raw.max_output_tokens),
            previous_response_id: raw.previous_response_id.filter(|s| !s.is_empty()),
            prompt_cache_key: raw.prompt_cache_key.filter(|s| !s.is_empty()),
            user_id_session: raw
                .metadata
                .and_then(|m| m.user_id)
                .and_then(|u| claude_code_session(&u)),
            prefixes: Vec::new(),
            bytes: body.len() as u64,
        })
    }
}

/// The session in a Messages request's `metadata.user_id` as Claude Code writes it:
/// `user_<hash>_account_<uuid>_session_<uuid>` (before 2.1.78), or a JSON object in the string
/// with a `session_id` (since). Any other user id names a user, not a session: none.
pub fn claude_code_session(user_id: &str) -> Option<String> {
    let t = user_id.trim();
    if t.starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(t).ok()?;
        return v
            .get("session_id")
            .and_then(|s| s.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string);
    }
    let (_, s) = t.rsplit_once("_session_")?;
    (!s.is_empty()).then(|| s.to_string())
}

#[derive(Deserialize)]
struct RawReq {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<RawStreamOptions>,
    #[serde(default)]
    messages: Option<Count>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_output_tokens: Option<u64>,
    /// Responses API: a string (one message) or an array of items.
    #[serde(default)]
    input: Option<Count>,
    /// The session fields: a value that is not a string names no session (the next field
    /// may), and does not spoil the rest of the request.
    #[serde(default, deserialize_with = "lenient")]
    previous_response_id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    prompt_cache_key: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    metadata: Option<RawMetadata>,
}

#[derive(Deserialize, Default)]
struct RawMetadata {
    #[serde(default, deserialize_with = "lenient")]
    user_id: Option<String>,
}

/// A `T`, or `None` for a JSON value of another shape (which does not spoil the rest).
fn lenient<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either<T> {
        Is(T),
        Other(IgnoredAny),
    }
    Ok(match Either::<T>::deserialize(d)? {
        Either::Is(t) => Some(t),
        Either::Other(_) => None,
    })
}

#[derive(Deserialize, Default)]
struct RawStreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
    #[serde(default)]
    continuous_usage_stats: Option<bool>,
}

/// Counts the elements of a JSON array without keeping them.
struct Count(u32);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array or a string")
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<Count, E> {
                Ok(Count(1))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0u32;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
        }
        d.deserialize_any(V)
    }
}

/// Shared between the tap (in the upstream client's task) and the request's measurement state.
#[derive(Debug, Default)]
pub struct ReqCell {
    /// Set once, when the body ended (or the tap was dropped).
    pub info: OnceLock<ReqInfo>,
    /// The body went over `--max-body-bytes`.
    pub too_large: AtomicBool,
    /// The client's body failed while being read.
    pub client_error: AtomicBool,
    /// The client's body stalled past `--body-timeout`.
    pub stalled: AtomicBool,
    /// The body content, kept for `--record-content` and `--tokenizer` only.
    pub content: OnceLock<Bytes>,
}

/// Error a [`RequestTap`] fails with.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    /// Past `--max-body-bytes`.
    #[error("request body exceeds {0} bytes")]
    TooLarge(u64),
    /// The client's body broke.
    #[error("client request body failed: {0}")]
    Client(#[from] hyper::Error),
    /// The client's body stalled past `--body-timeout`.
    #[error("client request body stalled for {0:?}")]
    Stalled(std::time::Duration),
}

/// The client's request body on its way upstream.
pub struct RequestTap {
    inner: Option<Incoming>,
    giveback: Option<oneshot::Sender<Incoming>>,
    polled: bool,
    frames: Vec<Bytes>,
    total: u64,
    sniff_limit: usize,
    max_body: u64,
    keep_content: bool,
    cell: Arc<ReqCell>,
    parsed: bool,
    /// `--body-timeout`, and the stall timer, armed while waiting for the client's next frame
    /// (only then: an upstream slow to take the body is not the client's stall).
    stall_after: std::time::Duration,
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl RequestTap {
    /// Wraps `inner`. If the tap is dropped before its first poll, `inner` is sent on `giveback`.
    pub fn new(
        inner: Incoming,
        giveback: oneshot::Sender<Incoming>,
        cell: Arc<ReqCell>,
        sniff_limit: usize,
        max_body: u64,
        keep_content: bool,
        stall_after: std::time::Duration,
    ) -> Self {
        RequestTap {
            inner: Some(inner),
            giveback: Some(giveback),
            polled: false,
            frames: Vec::new(),
            total: 0,
            sniff_limit,
            max_body,
            keep_content,
            cell,
            parsed: false,
            stall_after,
            stall: None,
        }
    }

    fn finish_parse(&mut self) {
        if self.parsed {
            return;
        }
        self.parsed = true;
        let frames = std::mem::take(&mut self.frames);
        let whole = match frames.len() {
            0 => Bytes::new(),
            1 => frames.into_iter().next().unwrap_or_default(),
            _ => {
                let mut v = Vec::with_capacity(self.total as usize);
                for f in &frames {
                    v.extend_from_slice(f);
                }
                Bytes::from(v)
            }
        };
        let sniffed = self.total as usize <= self.sniff_limit;
        let mut info = if sniffed {
            ReqInfo::parse(&whole).unwrap_or_default()
        } else {
            ReqInfo::default()
        };
        info.bytes = self.total;
        let _ = self.cell.info.set(info);
        if self.keep_content && sniffed {
            let _ = self.cell.content.set(whole);
        }
    }
}

impl Body for RequestTap {
    type Data = Bytes;
    type Error = TapError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, TapError>>> {
        let this = &mut *self;
        this.polled = true;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(inner).poll_frame(cx);
        let Poll::Ready(polled) = polled else {
            let stall_after = this.stall_after;
            let timer = this
                .stall
                .get_or_insert_with(|| Box::pin(crate::timers::sleep(stall_after)));
            if timer.as_mut().poll(cx).is_ready() {
                this.stall = None;
                this.cell.stalled.store(true, Ordering::Relaxed);
                return Poll::Ready(Some(Err(TapError::Stalled(stall_after))));
            }
            return Poll::Pending;
        };
        this.stall = None;
        match polled {
            Some(Ok(frame)) => {
                if let Some(d) = frame.data_ref() {
                    this.total += d.len() as u64;
                    if this.total > this.max_body {
                        this.cell.too_large.store(true, Ordering::Relaxed);
                        return Poll::Ready(Some(Err(TapError::TooLarge(this.max_body))));
                    }
                    if this.total as usize <= this.sniff_limit {
                        this.frames.push(d.clone());
                    } else {
                        this.frames.clear();
                    }
                }
                if this.inner.as_ref().is_some_and(|b| b.is_end_stream()) {
                    this.finish_parse();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(e)) => {
                this.cell.client_error.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(TapError::Client(e))))
            }
            None => {
                this.finish_parse();
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), |b| b.size_hint())
    }
}

impl Drop for RequestTap {
    fn drop(&mut self) {
        if !self.polled {
            if let (Some(b), Some(tx)) = (self.inner.take(), self.giveback.take()) {
                // Never polled: the connection was never made, give the body back for the next
                // upstream. If nobody takes it, the request simply had an empty body.
                match tx.send(b) {
                    Ok(()) => return,
                    Err(b) => self.inner = Some(b),
                }
            }
        }
        if self.inner.as_ref().is_some_and(|b| b.is_end_stream()) || self.polled {
            self.finish_parse();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_object_is_a_request() {
        assert_eq!(ReqInfo::parse(b"[]"), None);
        assert_eq!(ReqInfo::parse(br#"["m", true]"#), None);
        assert_eq!(ReqInfo::parse(b"  {}").map(|i| i.bytes), Some(4));
    }

    #[test]
    fn parses_measurement_fields_without_a_tree() {
        let i = ReqInfo::parse(
            br#"{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]}],"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":12,"tools":[{"a":1}]}"#,
        )
        .unwrap();
        assert_eq!(i.model.as_deref(), Some("m"));
        assert_eq!(i.stream, Some(true));
        assert!(i.include_usage && !i.continuous_usage);
        assert_eq!(i.messages, Some(2));
        assert_eq!(i.max_tokens, Some(12));
    }

    #[test]
    fn responses_and_messages_requests() {
        let i = ReqInfo::parse(
            br#"{"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call_output","call_id":"c","output":"x"}],"previous_response_id":"resp_1","prompt_cache_key":"conv-9","max_output_tokens":64,"stream":true}"#,
        )
        .unwrap();
        assert_eq!(i.messages, Some(2));
        assert_eq!(i.max_tokens, Some(64));
        assert_eq!(i.previous_response_id.as_deref(), Some("resp_1"));
        assert_eq!(i.prompt_cache_key.as_deref(), Some("conv-9"));
        let i = ReqInfo::parse(br#"{"model":"m","input":"hi"}"#).unwrap();
        assert_eq!(i.messages, Some(1));
        let i = ReqInfo::parse(
            br#"{"model":"m","max_tokens":32,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"user_ab12_account_7c1e_session_5f0c-11"}}"#,
        )
        .unwrap();
        assert_eq!(i.user_id_session.as_deref(), Some("5f0c-11"));
        assert_eq!(
            claude_code_session(r#"{"device_id":"d","account_uuid":"","session_id":"s-1"}"#)
                .as_deref(),
            Some("s-1")
        );
        assert_eq!(claude_code_session("alice@example.com"), None);
    }

    /// A session field that is not a string, or given twice, names no session; the next field
    /// does, and the rest of the request is read.
    #[test]
    fn odd_session_fields_give_way_to_the_next() {
        let i = ReqInfo::parse(
            br#"{"model":"m","input":"hi","previous_response_id":42,"prompt_cache_key":"conv-9"}"#,
        )
        .unwrap();
        assert_eq!(i.previous_response_id, None);
        assert_eq!(i.prompt_cache_key.as_deref(), Some("conv-9"));
        assert_eq!(i.model.as_deref(), Some("m"));
        let i = ReqInfo::parse(
            br#"{"model":"m","input":"hi","prompt_cache_key":"a","prompt_cache_key":"b","metadata":{"user_id":"user_x_account_y_session_s-2"}}"#,
        )
        .unwrap();
        assert_eq!(i.prompt_cache_key, None);
        assert_eq!(i.user_id_session.as_deref(), Some("s-2"));
        assert_eq!((i.model.as_deref(), i.messages), (Some("m"), Some(1)));
        let i = ReqInfo::parse(br#"{"model":"m","metadata":"x","max_tokens":3}"#).unwrap();
        assert_eq!((i.user_id_session, i.max_tokens), (None, Some(3)));
    }

    #[test]
    fn completions_and_garbage() {
        let i = ReqInfo::parse(br#"{"prompt":"hi","max_tokens":3}"#).unwrap();
        assert_eq!(i.messages, None);
        assert_eq!(i.max_tokens, Some(3));
        assert!(ReqInfo::parse(b"not json").is_none());
    }
}
